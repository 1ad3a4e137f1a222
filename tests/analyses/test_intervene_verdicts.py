"""The card's intervention columns (docs/method/05-interventions.md, "The card"): an ideal bag of concepts never
reads ``binds`` and scores 0 on the edits that need binding, planted binding reads ``binds``, ties rank 1, and the
numbers the card reads (cases, chance, the subset scored) come with every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import AnalysisInputs, InterveneSettings, get_analysis, run_analysis
from bindscope.analyses.card import bag_counts, bag_inputs
from bindscope.analyses.intervene import intervene_analysis
from bindscope.analyses.intervene.card import DIFFERENT, PROBE, SHARED
from bindscope.analyses.intervene.edits import bag_classes, needs_binding, plan_edits, reversed_rows
from bindscope.analyses.intervene.score import count_over
from bindscope.estimators.floors import bag_embeddings
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

COLUMNS = (SHARED, DIFFERENT, PROBE)
BOUND = ("retrieval_binding", "probe_binding")


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(4)], "shape": [f"s{i}" for i in range(4)]})
    return SceneSet.enumerate(space, 2)


def embeddings(scenes: SceneSet, family: str) -> np.ndarray:
    if family == "counts":
        return bag_counts(scenes)
    if family == "multi-hot":
        return bag_embeddings(scenes)
    return planted_embeddings(scenes, family, dim=32, seed=0)


def verdicts(scenes: SceneSet, family: str, tmp_path, **settings) -> dict:
    inputs = AnalysisInputs(embeddings(scenes, family), scenes, noun="shape")
    result = run_analysis("intervene", inputs, tmp_path / family, InterveneSettings(**settings))
    return result.summary["verdicts"]


def values(table: pd.DataFrame, metric: str, variant: str = "obj-avg", k: float = 1.0) -> pd.Series:
    rows = table[(table.metric == metric) & (table.variant == variant) & (table.k == k)]
    assert len(rows), (metric, variant)
    return rows.set_index("group")["value"]


# -- the reading matrix ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["counts", "multi-hot"])
def test_a_bag_never_reads_binds_and_scores_zero_where_binding_is_needed(scenes, family, tmp_path) -> None:
    found = verdicts(scenes, family, tmp_path)
    assert set(found) == set(COLUMNS)
    for column, verdict in found.items():
        assert verdict["answer"] in ("no_binding", "undetermined"), (column, verdict)
        assert verdict["value"] == 0.0 and verdict["n_cases"] > 0, (column, verdict)
        assert verdict["floor"]["name"] in ("bag of concepts", "chance")
    assert found[SHARED]["scored_on"].startswith("shared-value attribute edits needing binding, obj-avg bank")


@pytest.mark.parametrize("family", ["counts", "multi-hot"])
def test_a_bag_scores_its_paper_numbers_but_zero_bound_ones(scenes, family) -> None:
    """The paper's retrieval gives a bag a share (its edit ties with the binding swap and the arg-max takes the
    lowest row) and its probe 100%; the bound forms give it 0 on every bank and group."""
    y = embeddings(scenes, family)
    result = intervene_analysis(AnalysisInputs(y, scenes, noun="shape"), InterveneSettings())
    table = result.table
    assert values(table, "probe").min() == 1.0
    if family == "counts":
        assert values(table, "retrieval")["shared"] == 0.25
    for variant in ("obj-avg", "pos-avg", "bag-of-concepts"):
        for metric in BOUND:
            assert values(table, metric, variant).max() == 0.0, (variant, metric)


@pytest.mark.parametrize("family", ["object_additive", "mult_within_object"])
def test_planted_binding_reads_binds(scenes, family, tmp_path) -> None:
    found = verdicts(scenes, family, tmp_path)
    for column, verdict in found.items():
        assert verdict["answer"] == "binds", (column, verdict)
        bag = next(f["value"] for f in verdict["floors"] if f["name"] == "bag of concepts")
        assert verdict["value"] > 0.4 and bag == 0.0, (column, verdict)


def test_random_embeddings_do_not_bind(scenes, tmp_path) -> None:
    found = verdicts(scenes, "random", tmp_path)
    assert {v["answer"] for v in found.values()} == {"no_binding"}


def test_the_rand_control_is_a_floor(scenes, tmp_path) -> None:
    """Given the +rand control, the same edits of it are its rows (``control = rand``) and each column's +rand
    floor: a model no better than its control does not read ``binds``."""
    y = planted_embeddings(scenes, "object_additive", dim=32, seed=0)
    for control, answer in ((planted_embeddings(scenes, "random", dim=32, seed=1), "binds"), (y, "no_binding")):
        inputs = AnalysisInputs(y, scenes, control=control, noun="shape")
        result = run_analysis("intervene", inputs, tmp_path / answer, InterveneSettings())
        assert set(result.table.control) == {"none", "rand"}
        for column, verdict in result.summary["verdicts"].items():
            rand = next(f["value"] for f in verdict["floors"] if f["name"] == "+rand")
            assert verdict["answer"] == answer and rand == (0.0 if answer == "binds" else verdict["value"]), column
        shared = result.typed.results["attribute"]["obj-avg"]["shared"]["1"]
        assert shared.retrieval.n_seeds == 1  # the summary holds the embeddings' own numbers only


def test_bag_inputs_with_a_single_bank_and_seeds(scenes) -> None:
    """On the bag's inputs (no probes given: fitted here; the single bank as multi-hots) every bank edits, and
    every bound number is 0 on every seed."""
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    singles = np.zeros((scenes.space.num_objects * 2, 16), np.float32)
    bag = bag_inputs(AnalysisInputs(y, scenes, singles=singles, noun="shape"))
    result = intervene_analysis(bag, InterveneSettings(seeds=(42, 7)))
    assert result.absent == {} and result.fitted is not None
    bound = result.table[result.table.metric.isin(BOUND)]
    assert set(bound.variant) >= {"obj-avg", "pos-avg", "single"} and set(bound.seed) == {42, 7}
    assert (bound.value == 0.0).all()
    measured = get_analysis("intervene").measure(result, InterveneSettings(seeds=(42, 7)))
    assert [len(measured[c].values) for c in COLUMNS] == [2, 2, 2]
    assert measured[SHARED].chance == pytest.approx(2 / len(scenes)) and measured[SHARED].bag_bound == 0.0


# -- ties and the rank ----------------------------------------------------------------------------------------
def test_ties_rank_one_and_the_paper_hit_keeps_the_lowest_row(scenes) -> None:
    """A bag's pos-avg edit ties with the expected scene's reversed order and its binding swaps (cosine 1): each
    ranks 1 (no scene scores strictly higher), the bound hit is a miss, and the paper's hit is the arg-max's
    lowest row, so exactly the expected scenes that come first among their ties are hits."""
    y = bag_counts(scenes)
    result = intervene_analysis(AnalysisInputs(y, scenes, noun="shape"), InterveneSettings(banks=("pos-avg",)))
    cases = result.tables["cases"]
    edits = cases[cases.variant == "pos-avg"]
    assert (edits["rank"] == 1).all() and not edits.bound_hit.any() and edits.binding.all()
    classes = bag_classes(scenes)
    lowest = np.array([np.flatnonzero(classes == classes[e]).min() for e in edits.expected])
    assert (edits.hit.to_numpy() == (edits.expected.to_numpy() == lowest)).all()
    assert (edits.retrieved.to_numpy() == lowest).all()


def test_count_over_is_strict_or_not_and_leaves_out_own_scenes() -> None:
    scores = np.array([[1.0, 1.0, 0.5, 1.0], [0.2, 0.3, 0.1, 0.0]], np.float32)
    rowmax = scores.max(axis=1)
    threshold = np.array([1.0, 0.25], np.float32)
    rows, counts = count_over(scores, rowmax, threshold, True, [])
    assert rows.tolist() == [1] and counts.tolist() == [1]
    own = np.array([1, -1])  # per row the column never counted (-1: none in this block)
    rows, counts = count_over(scores, rowmax, threshold, False, [own])
    assert rows.tolist() == [0, 1] and counts.tolist() == [2, 1]
    rows, counts = count_over(scores, rowmax, threshold, False, [own, np.array([3, 4])])  # 4: outside the block
    assert rows.tolist() == [0, 1] and counts.tolist() == [1, 1]


# -- which edits need binding ---------------------------------------------------------------------------------
def test_an_edit_needs_binding_where_a_scene_binds_its_values_otherwise() -> None:
    space = ConceptSpace.from_dict({"color": ["r", "g"], "shape": ["s", "t"]})
    rs_gt, gt_rs, gs_rt = [[0, 0], [1, 1]], [[1, 1], [0, 0]], [[1, 0], [0, 1]]
    for rows, expected in (([rs_gt, gt_rs, gs_rt], True), ([rs_gt, gt_rs], False), ([rs_gt, gs_rt], True)):
        scenes = SceneSet(space, np.array(rows))
        rev = reversed_rows(scenes, np.array([0]))
        assert rev.tolist() == ([1] if gt_rs in rows else [-1])
        assert needs_binding(bag_classes(scenes), np.array([0]), rev).tolist() == [expected], rows


def test_the_plan_marks_the_edits_whose_swap_is_among_the_scenes() -> None:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(4)], "shape": [f"s{i}" for i in range(4)]})
    scenes = SceneSet.sample(space, 2, 120, seed=0)
    plan = plan_edits(scenes, "color", "shape", 42, "attribute")
    held = {tuple(map(tuple, s)) for s in scenes.scenes.tolist()}
    swap = []
    for (a1, o1), (a2, o2) in scenes.scenes[plan.expected].tolist():
        swap.append(((a2, o1), (a1, o2)) in held or ((a1, o2), (a2, o1)) in held)
    assert plan.binding.tolist() == swap and 0 < np.mean(swap) < 1


def test_without_an_object_probe_the_bound_probe_is_absent(scenes) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    targets = soft_targets(scenes)
    probes = ProbeSet("lbfgs").fit(y, {c: targets[c] for c in ("color", "shape")})
    result = intervene_analysis(AnalysisInputs(y, scenes, probes=probes, noun="shape"), InterveneSettings())
    assert "probe_binding" not in set(result.table.metric) and "retrieval_binding" in set(result.table.metric)
    assert result.tables["cases"]["bound_probe_hit"].isna().all()
    measured = get_analysis("intervene").measure(result, InterveneSettings())
    assert measured[PROBE].values == [] and len(measured[SHARED].values) == 1


def test_without_a_split_the_shared_column_is_not_measured() -> None:
    space = ConceptSpace.from_dict({"animal": ["a", "b", "c", "d"], "texture": ["r", "g", "b", "y"]})
    scenes = SceneSet.enumerate(space, 2, distinct_values=True)
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    settings = InterveneSettings(noun="animal")
    result = intervene_analysis(AnalysisInputs(y, scenes, noun="animal"), settings)
    measured = get_analysis("intervene").measure(result, settings)
    assert measured[SHARED].values == [] and len(measured[DIFFERENT].values) == 1
    assert measured[DIFFERENT].scored_on.startswith("different-value")


# -- the tidy table and the headline --------------------------------------------------------------------------
def test_every_row_has_its_cases_and_chance_and_the_headline_labels_its_sd(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    inputs = AnalysisInputs(y, scenes, noun="shape")
    loaded = run_analysis("intervene", inputs, tmp_path / "r", InterveneSettings(seeds=(42, 7)))
    table = loaded.table
    assert (table.n_cases > 0).all() and table.chance.between(0, 1).all()
    paper = table[(table.metric == "retrieval") & (table.group == "all") & (table.variant == "obj-avg")]
    assert (paper.n_cases == 384).all() and (paper.chance == 1 / len(scenes)).all()
    rows = get_analysis("intervene").headline(loaded.view)
    assert "shared retrieval (binding) % ± sd over 2 seeds" in rows[0]
    assert rows[0][-2:] == ("cases", "binding cases")
    assert loaded.typed.results["attribute"]["obj-avg"]["shared"]["1"].binding_cases == 2 * 96
