"""``geometry`` on the report card (docs/method/08-geometry.md, "On the report card"): an ideal bag of concepts
reaches the best value of every geometry column, so every model reads ``undetermined`` (``floor_at_ceiling``);
cross-concept |cos| is judged lower-is-better."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import AnalysisInputs, get_analysis, run_analysis
from bindscope.analyses.card import bag_counts, single_object_bag
from bindscope.analyses.geometry import GeometrySettings
from bindscope.analyses.geometry.card import ACROSS, FACTORIZATION, HEADS, HELD_OUT
from bindscope.analyses.geometry.sweeps import ordered_pairs
from bindscope.estimators.floors import bag_embeddings
from bindscope.estimators.verdicts import Measured, judge
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAST = GeometrySettings(fractions=(0.5,), seeds=(0, 1), mds=False)
COLUMNS = {FACTORIZATION, HELD_OUT, HEADS, ACROSS}


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b", "y"], "shape": ["cube", "ball", "cone", "star"]})
    return SceneSet.enumerate(space, 2)


def run(inputs: AnalysisInputs, folder: Path, settings: GeometrySettings = FAST):
    return run_analysis("geometry", inputs, folder, settings)


@pytest.mark.parametrize("bag", [bag_counts, bag_embeddings], ids=["counts", "multi-hot"])
def test_a_bag_of_concepts_reaches_every_ceiling(bag: Callable[[SceneSet], np.ndarray], scenes, tmp_path) -> None:
    done = run(AnalysisInputs(bag(scenes), scenes), tmp_path / "bag")
    got = done.typed.verdicts
    assert set(got) == COLUMNS
    assert {(v.answer, v.reason) for v in got.values()} == {("undetermined", "floor_at_ceiling")}
    assert got[FACTORIZATION].value == pytest.approx(1.0) and got[HELD_OUT].value == pytest.approx(1.0)
    assert got[HEADS].value == 1.0 and got[ACROSS].value == 0.0  # |cos| of 1e-16 is 0 up to rounding


def test_a_bag_from_the_single_object_bank_too(scenes, tmp_path) -> None:
    singles = single_object_bag(scenes, scenes.space.num_objects * 2)
    got = run(AnalysisInputs(bag_counts(scenes), scenes, singles=singles), tmp_path / "s").typed.verdicts
    assert {(v.answer, v.reason) for v in got.values()} == {("undetermined", "floor_at_ceiling")}


@pytest.mark.parametrize("kind", ["object_additive", "concept_additive"])
def test_no_model_reads_binds(kind: str, scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, kind, dim=32, noise=0.05, seed=1)
    got = run(AnalysisInputs(y, scenes), tmp_path / kind).typed.verdicts
    assert {(v.answer, v.reason) for v in got.values()} == {("undetermined", "floor_at_ceiling")}
    heads = got[HEADS]
    assert heads.n_cases == 2 * 8 and heads.floor_value("chance") == pytest.approx(1 / 16)  # 8 unseen per slot


def test_heads_and_rank_axes_count_their_cases(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "concept_additive", dim=16, seed=0)
    settings = GeometrySettings(fractions=(0.5,), seeds=(0,), mds=False, ordinal=("color",), labelled=(2,))
    table = get_analysis("geometry").compute(AnalysisInputs(y, scenes), settings).table
    heads = table[table.variant == "heads"]
    assert (heads["n_cases"] == heads["objects"]).all()
    pairwise = table[table.variant.str.startswith("rank_axis:") & (table.metric == "pairwise")]
    held = np.random.default_rng(0).permutation(np.arange(16))[:8]  # the held-out half of seed 0 (rank_axis_rows)
    pairs = ordered_pairs(scenes.space.all_objects()[held, 0])
    assert len(pairwise) and (pairwise["n_cases"] == pairs).all()
    others = table[~table.variant.isin(["heads"]) & (table.metric != "pairwise")]
    assert others["n_cases"].isna().all()


def test_ordered_pairs() -> None:
    assert ordered_pairs(np.array([0, 0, 1, 2])) == 5  # 6 pairs, one tied
    assert ordered_pairs(np.array([3, 3, 3])) == 0


def test_lower_is_better_is_judged_against_the_smallest_floor() -> None:
    bag_at_zero = judge(Measured([0.1], higher=False, ceiling=0.0), Measured([0.0], higher=False, ceiling=0.0))
    assert (bag_at_zero.answer, bag_at_zero.reason) == ("undetermined", "floor_at_ceiling")
    above = judge(Measured([0.1], higher=False, ceiling=0.0), Measured([0.3], higher=False, ceiling=0.0))
    assert above.answer == "binds" and above.margin == pytest.approx(0.2)
    level = judge(Measured([0.28], higher=False, ceiling=0.0), Measured([0.3], higher=False, ceiling=0.0))
    assert level.answer == "no_binding"


def test_the_headline_labels_its_spread(scenes, tmp_path) -> None:
    done = run(AnalysisInputs(bag_counts(scenes), scenes), tmp_path / "h")
    rows = get_analysis("geometry").headline(done.view)
    assert rows[0][0] == "measure (± sd over 2 seeds)"
    assert any("n = 8 unseen objects" in r[-1] for r in rows)
