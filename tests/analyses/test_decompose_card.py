"""``decompose`` on the report card (docs/method/04-decomposition.md, "On the report card"): the R² gap
object-additive minus concept-additive and the object probe after the concept-additive part is removed, each
judged against the same analysis run on the ideal bag of concepts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import AnalysisInputs, get_analysis, run_analysis
from bindscope.analyses.card import bag_counts
from bindscope.analyses.decompose import DecomposeSettings, decompose_analysis
from bindscope.analyses.decompose.card import AFTER, BEYOND, measure_decompose
from bindscope.analyses.decompose.r2 import GAP
from bindscope.estimators.floors import bag_embeddings
from bindscope.estimators.probe_runs import seed_splits
from bindscope.estimators.verdicts import BAG, CHANCE, RAND
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAST = DecomposeSettings(seeds=(0, 1, 2), optimizer="lbfgs", max_iter=50)
COLUMNS = {BEYOND, AFTER}


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b", "y"], "shape": ["cube", "ball", "cone", "star"]})
    return SceneSet.enumerate(space, 2)


def verdicts(y: np.ndarray, scenes: SceneSet, folder: Path, control: np.ndarray | None = None) -> dict:
    done = run_analysis("decompose", AnalysisInputs(y, scenes, control=control), folder, FAST)
    return done.typed.verdicts


@pytest.mark.parametrize("bag", [bag_counts, bag_embeddings], ids=["counts", "multi-hot"])
def test_a_bag_of_concepts_never_reads_binds(bag: Callable[[SceneSet], np.ndarray], scenes, tmp_path) -> None:
    got = verdicts(bag(scenes), scenes, tmp_path / "bag")
    assert set(got) == COLUMNS
    assert all(v.answer in ("no_binding", "undetermined") for v in got.values())
    assert got[BEYOND].floor_value(BAG) == pytest.approx(0.0, abs=1e-9)  # a bag is exactly concept-additive
    assert got[AFTER].floor_value(CHANCE) is not None and got[AFTER].value < 0.05  # nothing left after concepts


def test_object_vectors_that_are_not_sums_of_concepts_bind(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=32, noise=0.05, seed=1)
    control = planted_embeddings(scenes, "random", dim=32, seed=2)
    got = verdicts(y, scenes, tmp_path / "oa", control)
    assert {c: v.answer for c, v in got.items()} == {BEYOND: "binds", AFTER: "binds"}
    assert got[BEYOND].value > 0.5 and got[BEYOND].seeds == 3 and got[BEYOND].floor_value(RAND) < 0.1
    assert got[AFTER].n_cases == len(seed_splits(len(scenes), FAST)[0].test)
    assert got[AFTER].floor_value(RAND) is not None  # the concepts run repeated on the +rand control
    assert got[AFTER].ci_low > got[AFTER].floor.value


def test_objects_that_are_sums_of_concepts_read_no_binding(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "concept_additive", dim=32, noise=0.05, seed=1)
    got = verdicts(y, scenes, tmp_path / "ca")
    assert {c: v.answer for c, v in got.items()} == {BEYOND: "no_binding", AFTER: "no_binding"}


def test_the_table_holds_the_bag_the_gap_and_the_cases(scenes) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    table, _ = decompose_analysis(y, scenes, FAST.model_copy(update={"seeds": (0, 1)}))
    additive = table[table.part == "additive"]
    bag = additive[(additive.control == "bag") & (additive.metric == "r2")]
    assert np.allclose(bag.value, 1.0)  # every additive model fits the counts exactly
    test = additive[(additive.control == "none") & (additive.group == "test")].pivot(
        index="seed", columns="variant", values="value"
    )
    assert np.allclose(test[GAP], test["object_additive"] - test["concept_additive"])
    assert additive["n_cases"].isna().all()  # R² is no share of cases
    probes = table[(table.part == "subtraction") & (table.variant != "chance")]
    splits = seed_splits(len(scenes), FAST.model_copy(update={"seeds": (0, 1)}))
    expected = [len(getattr(splits[s], g)) for s, g in zip(probes.seed, probes.group)]
    assert probes["n_cases"].tolist() == expected
    assert table[table.variant == "chance"]["n_cases"].isna().all()


def test_measure_reads_each_seed(scenes) -> None:
    rows = [
        {"part": "additive", "variant": GAP, "control": c, "group": "test", "metric": "r2_gap", "seed": s, "value": v}
        for c, vals in (("none", (0.3, 0.4)), ("rand", (0.0, 0.1)))
        for s, v in zip((0, 1), vals)
    ]
    rows += [
        {"part": "subtraction", "variant": v, "control": "none", "group": "test", "metric": "object_acc", "seed": s}
        | {"value": x, "n_cases": n}
        for v, x, n in (("concepts", 0.8, 50), ("chance", 0.1, None))
        for s in (0, 1)
    ]
    measured = measure_decompose(pd.DataFrame(rows))
    assert list(measured[BEYOND].values) == [0.3, 0.4] and list(measured[BEYOND].rand or []) == [0.0, 0.1]
    assert measured[AFTER].n_cases == 50 and measured[AFTER].chance == pytest.approx(0.1)
    assert measure_decompose(pd.DataFrame(rows[:4])).keys() == {BEYOND}


def test_the_headline_shows_the_bag_and_labels_its_spread(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    done = run_analysis("decompose", AnalysisInputs(y, scenes), tmp_path / "h", FAST)
    rows = get_analysis("decompose").headline(done.view)
    assert rows[0][1] == "R2 train (± sd over 3 seeds)" and rows[0][-1] == "R2 test (bag of concepts)"
    gap = next(r for r in rows if r[0].startswith("object − concept"))
    assert gap[-1].startswith("0.000")  # the bag's gap
    assert any("n = " in cell for cell in next(r for r in rows if r[0] == "probes after subtracting"))
