"""Cross-modal family swaps (docs/method/07-crossmodal.md): on a relation space an image's caption against the one
with subject and object exchanged (the relation kept), on a count space against the one with the counts exchanged.

Known answers on planted towers: where each object's vector depends on its place (count), ``object x role``
(a Kronecker product), the family swap reads ``binds``; where the scene is a bag of its objects plus a bag of its
places (counts), the swapped caption is the same vector, every pair ties and the swap reads ``no_binding`` at
exactly 50%, chance and the bag of concepts alike."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest

from bindscope.analyses import AnalysisInputs, get_analysis, run_analysis
from bindscope.analyses.crossmodal.card import (
    BRIDGED,
    COUNT,
    COUNT_BRIDGED,
    RELATION,
    RELATION_BRIDGED,
    RETRIEVAL,
    SWAP,
)
from bindscope.analyses.crossmodal.present import headline_metrics
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.analyses.crossmodal.swaps import NO_NEGATIVE, NOT_IN_DATASET, swap_accuracy, swap_cases, swap_scores
from bindscope.estimators.scene_index import concept_roles
from bindscope.estimators.verdicts import BAG, CHANCE
from bindscope.pipeline.card import card_html, report_card
from bindscope.pipeline.steps import Skip
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.families import COUNT as COUNT_CONCEPT
from bindscope.space.families import PLACE, relation_scenes, with_families

FAST = CrossmodalSettings(fractions=(0.5,), seeds=(0, 1))
BASE = ConceptSpace.from_dict({"color": ["red", "green", "blue", "yellow"], "shape": ["cube", "ball", "cone"]})
#: 12 objects: every ordered pair of different ones under left of and above (264 scenes), or with 1 or 2 copies
#: each (24 objects, 552 ordered pairs of different ones).
RELATIONS = ["left of", "above"]
SCENES = {
    "relation": lambda: relation_scenes(with_families(BASE, RELATIONS, None), RELATIONS, allow_identical=False),
    "count": lambda: SceneSet.enumerate(with_families(BASE, None, [1, 2]), 2, allow_identical=False),
}
COLUMNS = {"relation": (RELATION, RELATION_BRIDGED), "count": (COUNT, COUNT_BRIDGED)}
#: The pairs each family swap scores: every relation scene (two different objects); a count scene of two different
#: objects with different counts (12 x 11 ordered pairs x 2 orders of the counts).
PAIRS = {"relation": 264, "count": 264}


@pytest.fixture(scope="module", params=list(SCENES))
def family(request: pytest.FixtureRequest) -> tuple[str, SceneSet]:
    return request.param, SCENES[request.param]()


def roles(scenes: SceneSet) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per scene and slot: the object without its place (count), and its place (count); their numbers."""
    space = scenes.space
    f = space.concept_index(PLACE if PLACE in space.concepts else COUNT_CONCEPT)
    rest = [c for c in range(space.num_concepts) if c != f]
    sizes = np.array([space.sizes[c] for c in rest])
    strides = np.concatenate([np.cumprod(sizes[::-1])[::-1][1:], [1]])
    return (scenes.scenes[..., rest] * strides).sum(-1), scenes.scenes[..., f], int(sizes.prod()), space.sizes[f]


def role_bound(scenes: SceneSet, seed: int = 0) -> np.ndarray:
    """Each object's vector is ``identity (x) place`` (a Kronecker product of random vectors), summed."""
    identity, role, n_identities, n_roles = roles(scenes)
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(n_identities, 16)), rng.normal(size=(n_roles, 4))
    return np.einsum("nsi,nsj->nij", a[identity], b[role]).reshape(len(scenes), -1).astype(np.float32)


def role_bag(scenes: SceneSet, seed: int = 0) -> np.ndarray:
    """A vector per object without its place (count), plus a vector per place (count) present: not bound."""
    identity, role, n_identities, n_roles = roles(scenes)
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(n_identities, 64)), rng.normal(size=(n_roles, 64))
    return (a[identity].sum(1) + b[role].sum(1)).astype(np.float32)


def towers(scenes: SceneSet, code: Callable[[SceneSet, int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(image, text): the text tower ``code``, the image tower the same plus a little noise (two towers that agree)."""
    text = code(scenes, 0)
    noise = np.random.default_rng(9).normal(size=text.shape) * 0.05 * float(text.std())
    return (text + noise).astype(np.float32), text


# -- the swaps ------------------------------------------------------------------------------------------------
def test_the_family_swap_names_the_swapped_scene(family) -> None:
    name, scenes = family
    cases = swap_cases(scenes, "shape")
    negative = cases.negative[name]
    have = negative >= 0
    assert int(have.sum()) == PAIRS[name]
    s, swapped = scenes.scenes[cases.scene[have]], scenes.scenes[negative[have]]
    f = scenes.space.num_concepts - 1  # the place (count) concept is last
    if name == "relation":  # subject and object exchanged, the relation (each slot's place) kept
        assert (swapped[:, 0, :f] == s[:, 1, :f]).all() and (swapped[:, 1, :f] == s[:, 0, :f]).all()
        assert (swapped[:, :, f] == s[:, :, f]).all()
        assert cases.skipped[name] == {}
    else:  # the counts exchanged, each object kept in its slot
        assert (swapped[:, :, :f] == s[:, :, :f]).all() and (swapped[:, ::-1, f] == s[:, :, f]).all()
        same = (s[:, 0, f] == s[:, 1, f]) | (s[:, 0, :f] == s[:, 1, :f]).all(1)
        assert not same.any()
        assert cases.skipped[name] == {NO_NEGATIVE: len(scenes) - PAIRS[name]}  # equal counts, or the same object
    attribute = cases.negative["attribute"]  # an attribute swap exchanges colours only: places and counts kept
    ok = attribute >= 0
    a, s = scenes.scenes[attribute[ok]], scenes.scenes[cases.scene[ok]]
    assert (a[:, :, 1:] == s[:, :, 1:]).all() and (a[:, ::-1, 0] == s[:, :, 0]).all()


def test_a_swap_outside_the_dataset_is_skipped_and_counted(family) -> None:
    name, scenes = family
    kept = scenes.subset(np.sort(np.random.default_rng(0).choice(len(scenes), len(scenes) // 2, replace=False)))
    cases = swap_cases(kept, "shape")
    absent = cases.skipped[name].get(NOT_IN_DATASET, 0)
    assert absent > 0 and int((cases.negative[name] >= 0).sum()) + sum(cases.skipped[name].values()) == len(kept)
    assert (cases.negative[name][cases.negative[name] >= 0] < len(kept)).all()  # a negative is a scene present


def test_towers_without_the_role_tie_every_family_swap(family) -> None:
    name, scenes = family
    image, text = towers(scenes, role_bag)
    scores = swap_scores(image, text, swap_cases(scenes, "shape"))
    ok = ~np.isnan(scores[name])
    assert np.allclose(scores["correct"][ok], scores[name][ok], atol=1e-6)  # the swap is the same vector
    assert swap_accuracy(scores)[name] == 0.5


def test_default_roles_leave_the_place_and_the_count_out(family) -> None:
    _, scenes = family
    assert concept_roles(scenes, None, None) == {"attribute": "color", "noun": "shape"}
    assert concept_roles(scenes, None, "shape") == {"attribute": "color", "noun": "shape"}


# -- known answers on the card --------------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "answer"), [(role_bound, "binds"), (role_bag, "no_binding")], ids=["bound", "bag"])
def test_known_answers(family, code, answer: str, tmp_path) -> None:
    name, scenes = family
    image, text = towers(scenes, code)
    done = run_analysis("crossmodal", AnalysisInputs(image, scenes, other=text), tmp_path / "r", FAST)
    got = done.typed.verdicts
    other = "count" if name == "relation" else "relation"
    assert set(got) == {SWAP, RETRIEVAL, BRIDGED, *COLUMNS[name]}  # the other family's columns are absent
    assert not set(COLUMNS[other]) & set(got)
    raw, bridged = (got[c] for c in COLUMNS[name])
    assert raw.answer == answer and bridged.answer == answer
    assert raw.n_cases == PAIRS[name] and bridged.seeds == 2
    assert raw.floor_value(BAG) == 0.5 and raw.floor_value(CHANCE) == 0.5  # the bag ties every swap, as run
    if answer == "binds":
        assert raw.value == 1.0 and raw.ci_low > 0.5 and bridged.value >= 0.9
    else:
        assert raw.value == 0.5 and bridged.value == 0.5 and not bridged.sd  # a tie on every pair of every seed
    summary = done.typed
    metric = f"swap_{name}"
    assert summary.raw[metric].mean == raw.value and summary.raw_cases[metric] == PAIRS[name]
    assert summary.references["chance"][metric] == 0.5 and summary.references["bag_of_concepts"][metric] == 0.5
    rows = {r[0]: r for r in get_analysis("crossmodal").headline(done.view)}
    assert rows[metric][1] == f"{100 * raw.value:.1f}" and rows[metric][2] == str(PAIRS[name])
    assert f"swap_{other}" not in rows
    notes = get_analysis("crossmodal").notes(done.view)
    assert any(line.startswith(f"{name} swap: ") for line in notes)


def test_an_attribution_space_has_no_family_swap(tmp_path) -> None:
    scenes = SceneSet.enumerate(BASE, 2)
    y = np.random.default_rng(0).normal(size=(len(scenes), 16)).astype(np.float32)
    settings = CrossmodalSettings(bridge="none")
    done = run_analysis("crossmodal", AnalysisInputs(y, scenes, other=y), tmp_path / "a", settings)
    assert set(done.typed.verdicts) == {SWAP, RETRIEVAL}
    assert not {"swap_relation", "swap_count"} & {*done.typed.raw, *done.typed.references["chance"]}
    assert "swap_relation" not in headline_metrics(done.typed)


def test_a_skipped_analysis_shows_only_its_datasets_family_columns(tmp_path) -> None:
    """A text model skips ``crossmodal``: its card row says so in the columns its dataset has, and in no other
    family's (no relation swap on an attribution dataset, no count swap on a relation one)."""
    specs = {"clevr": {}, "rel": {"relations": RELATIONS}, "cnt": {"counts": [1, 2]}}
    for name, spec in specs.items():
        (tmp_path / "datasets" / name).mkdir(parents=True)
        (tmp_path / "datasets" / name / "manifest.json").write_text(json.dumps({"spec": spec}))
    skips = {(d, "minilm"): {"crossmodal": Skip("crossmodal", d, "minilm", "a text model", "")} for d in specs}
    rows = {r.dataset: r for r in report_card(tmp_path, {}, skips)}
    assert set(rows["clevr"].cells) == {SWAP, RETRIEVAL, BRIDGED}
    assert set(rows["rel"].cells) == {SWAP, RETRIEVAL, BRIDGED, RELATION, RELATION_BRIDGED}
    assert set(rows["cnt"].cells) == {SWAP, RETRIEVAL, BRIDGED, COUNT, COUNT_BRIDGED}
    assert all(c.skip is not None for r in rows.values() for c in r.cells.values())
    assert "relation swap" not in card_html([rows["clevr"]]) and "relation swap, %" in card_html(list(rows.values()))
