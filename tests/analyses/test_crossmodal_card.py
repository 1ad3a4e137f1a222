"""``crossmodal`` on the report card (docs/method/07-crossmodal.md, "On the report card"): the attribute swap, strict
retrieval and the bridged swap, each with its cases and interval, judged against the same tests run on the ideal
bag of concepts (which ties every swap: a tie counts half, so it scores chance, 0.5)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import AnalysisInputs, get_analysis, run_analysis
from bindscope.analyses.card import bag_counts, single_object_bag
from bindscope.analyses.crossmodal import plot
from bindscope.analyses.crossmodal.card import BRIDGED, RETRIEVAL, SWAP
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.estimators.floors import bag_embeddings
from bindscope.estimators.verdicts import BAG, CHANCE
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAST = CrossmodalSettings(fractions=(0.5,), seeds=(0, 1))
COLUMNS = {SWAP, RETRIEVAL, BRIDGED}
#: Scenes of two objects differing in both concepts (their attribute swap names other objects): 16 x 9.
SWAP_PAIRS = 144


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b", "y"], "shape": ["cube", "ball", "cone", "star"]})
    return SceneSet.enumerate(space, 2)


def singles_of(scenes: SceneSet, kind: str) -> np.ndarray:
    """The single-object caption bank of the same family (one row per object)."""
    if kind == "bag":
        return single_object_bag(scenes, scenes.space.num_objects)
    return planted_embeddings(SceneSet.singles(scenes.space, 2), kind, dim=32, seed=1)[: scenes.space.num_objects]


@pytest.mark.parametrize("bag", [bag_counts, bag_embeddings], ids=["counts", "multi-hot"])
def test_a_bag_of_concepts_never_reads_binds(bag: Callable[[SceneSet], np.ndarray], scenes, tmp_path) -> None:
    y = bag(scenes)
    inputs = AnalysisInputs(y, scenes, other=y.copy(), singles=singles_of(scenes, "bag"))
    got = run_analysis("crossmodal", inputs, tmp_path / "bag", FAST).typed.verdicts
    assert set(got) == COLUMNS
    assert all(v.answer in ("no_binding", "undetermined") for v in got.values())
    swap = got[SWAP]
    assert swap.value == 0.5 and swap.n_cases == SWAP_PAIRS  # every pair ties: half each
    assert swap.floor_value(BAG) == 0.5 and swap.floor_value(CHANCE) == 0.5
    assert got[RETRIEVAL].value == pytest.approx(got[RETRIEVAL].floor_value(BAG))


def test_two_towers_that_agree_bind(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=32, noise=0.05, seed=1)
    got = run_analysis("crossmodal", AnalysisInputs(y, scenes, other=y), tmp_path / "oa", FAST).typed.verdicts
    assert {c: v.answer for c, v in got.items()} == dict.fromkeys(COLUMNS, "binds")
    assert got[SWAP].n_cases == SWAP_PAIRS and got[SWAP].ci_low > 0.5
    assert got[BRIDGED].seeds == 2 and got[BRIDGED].n_cases is not None


def test_without_a_bridge_there_is_no_bridged_column(scenes, tmp_path) -> None:
    y = bag_counts(scenes)
    settings = CrossmodalSettings(bridge="none")
    got = run_analysis("crossmodal", AnalysisInputs(y, scenes, other=y), tmp_path / "n", settings).typed.verdicts
    assert set(got) == {SWAP, RETRIEVAL} and all(v.answer != "binds" for v in got.values())


def test_rates_carry_their_cases_and_the_headline_its_intervals(scenes, tmp_path) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=32, seed=1)
    inputs = AnalysisInputs(y, scenes, other=y, singles=singles_of(scenes, "object_additive"))
    done = run_analysis("crossmodal", inputs, tmp_path / "h", FAST)
    table = done.table
    measured = table[~table.variant.isin(["chance", "bag_of_concepts"])]
    assert measured["n_cases"].notna().all()
    assert table[table.variant.isin(["chance", "bag_of_concepts"])]["n_cases"].isna().all()  # expectations
    swap = table[(table.variant == "raw") & (table.metric == "swap_attribute") & (table.group == "all")]
    assert swap["n_cases"].tolist() == [SWAP_PAIRS]
    rows = get_analysis("crossmodal").headline(done.view)
    assert rows[0][:4] == ("test", "raw %", "n", "95% CI") and "± sd over 2 seeds" in rows[0][4]
    assert len({len(r) for r in rows}) == 1
    swap_row = next(r for r in rows if r[0] == "swap_attribute")
    assert swap_row[2] == f"{SWAP_PAIRS}" and "–" in swap_row[3]
    half = [r for r in rows if r[0].startswith("half-truth")]
    assert half and all(r[2] != "-" and "–" in r[3] for r in half)


def test_the_half_truth_figure_shows_n(tmp_path) -> None:
    table = pd.DataFrame(
        {
            "variant": ["half_truth"] * 2,
            "metric": ["wrong_attribute", "full_beats_short"],
            "group": ["all"] * 2,
            "value": [0.25, 0.9],
            "n_cases": pd.array([40, 10], dtype="Int64"),
        }
    )
    bars = plot.interval_bars(table["value"].to_numpy(), table["n_cases"].to_numpy())
    assert (bars > 0).all() and bars[1, 1] < bars[0, 1]  # the interval of 9 of 10 reaches further down
    assert plot.half_truth_plot(table, tmp_path / "h.png").is_file()
    assert "n)" in plot.CAPTIONS["half_truths"] and get_analysis("crossmodal").captions == plot.CAPTIONS


def test_a_rate_of_none_or_all_gets_bars_that_are_never_negative() -> None:
    """A rate of 0 or 1 meets its Wilson bound only up to rounding (40 queries: 7e-18): no negative bar, which
    matplotlib refuses."""
    bars = plot.interval_bars(np.array([0.0, 1.0, 0.5]), np.array([40, 40, 40]))
    assert (bars >= 0).all() and bars[1, 0] > 0 and bars[0, 1] > 0
