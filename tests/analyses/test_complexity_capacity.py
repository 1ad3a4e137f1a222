"""What a complexity verdict can and cannot say: value coverage and families that can memorise."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.complexity.approximators import Family, Layout
from bindscope.analyses.complexity.sweep import (
    ComplexitySettings,
    complexity_summary,
    complexity_sweep,
    covered_share,
    memorising_families,
    scenes_needed,
    undetermined_families,
    verdict,
)
from bindscope.analyses.probes import ProbeSet, soft_targets
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAMILIES = [Family("additive"), Family("mult"), Family("mult_within_object"), Family("sum_mult"), Family("mlp", 8)]


def clevr_size() -> SceneSet:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(8)], "shape": ["a", "b", "c"]})
    every = SceneSet.enumerate(space, 2)
    return every.subset(np.flatnonzero(every.num_objects() == 2))


def test_covered_share_counts_scenes_whose_every_slot_value_was_fitted() -> None:
    # [scene, slot, concept]: values fitted at slot 0 are {0, 1} x {0}, at slot 1 {2} x {1}
    values = np.array(
        [
            [[0, 0], [2, 1]],
            [[1, 0], [2, 1]],
            [[1, 0], [2, 1]],  # covered
            [[2, 0], [2, 1]],  # value 2 of concept 0 never fitted at slot 0
            [[0, 0], [0, 1]],  # value 0 fitted at slot 0 but not at slot 1
            [[0, 0], [PAD, PAD]],  # an empty slot reads no row
        ]
    )
    assert covered_share(values, np.array([0, 1]), np.array([2, 3, 4, 5])) == pytest.approx(0.5)
    assert covered_share(values, np.array([0, 1]), np.array([2])) == 1.0
    assert np.isnan(covered_share(values, np.array([0, 1]), np.array([], dtype=np.int64)))


def test_families_that_can_memorise_are_named_by_width() -> None:
    layout = Layout.of(clevr_size())  # 24 objects, 576 scenes
    wide = memorising_families(FAMILIES, layout, 24, 576)
    assert list(wide) == ["mult_within_object"] and "24 objects" in wide["mult_within_object"]
    assert memorising_families(FAMILIES, layout, 23, 576) == {}
    assert list(memorising_families(FAMILIES, layout, 576, 576)) == ["mult", "mult_within_object", "sum_mult"]


def test_the_reading_says_when_the_named_or_a_failing_family_can_memorise() -> None:
    settings = ComplexitySettings(approximators=("additive", "mult_within_object"), fractions=(0.2, 0.6))
    wide = {"mult_within_object": "its table width 32 >= 24 objects: it can give every object any vector"}
    named = verdict({"additive": {"f_star": None}, "mult_within_object": {"f_star": 0.6}}, settings, {}, wide)
    assert named["simplest_generalising"] == "mult_within_object"
    assert "reflects the optimiser, not the family's form" in named["reading"]
    none = verdict({"additive": {"f_star": None}, "mult_within_object": {"f_star": None}}, settings, {}, wide)
    assert "a high-complexity binding function" not in none["reading"]
    assert "but not for mult_within_object" in none["reading"] and "24 objects" in none["reading"]
    plain = verdict({"additive": {"f_star": None}, "mult_within_object": {"f_star": None}}, settings, {}, {})
    assert plain["reading"].endswith("a high-complexity binding function")


@pytest.mark.parametrize("dim, wide", [(32, True), (16, False)])
def test_a_clevr_size_sweep_reports_coverage_and_capacity(dim: int, wide: bool) -> None:
    scenes = clevr_size()
    y = planted_embeddings(scenes, "mult_within_object", dim=dim, noise=0.02, seed=0)
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    settings = ComplexitySettings(
        approximators=("additive", "mult_within_object"), fractions=(0.2, 0.9), seeds=(0,), description_length=False
    )
    summary = complexity_summary(complexity_sweep(y, scenes, probes, settings), settings)
    assert ("mult_within_object" in summary["capacity"]) is wide
    # seed 0 at 0.2: 4 training objects cannot hold all 8 colours; at 0.9 every test value was fitted
    assert summary["coverage"]["0.2"]["mean"] < 0.5 and summary["coverage"]["0.9"]["mean"] == 1.0
    if wide:
        assert "a high-complexity binding function" not in summary["verdict"]["reading"]


def test_scenes_needed_grows_as_the_in_distribution_line_falls() -> None:
    assert scenes_needed(1.0) == 0.0  # a perfect ceiling: any test scene tells
    # p = 0.8: (1.645 * 0.4 / 0.08)^2 = 67.7 scenes
    assert scenes_needed(0.8) == pytest.approx((1.645 * 0.4 / 0.08) ** 2)
    assert scenes_needed(0.5) > scenes_needed(0.8) and scenes_needed(0.0) == float("inf")


def test_too_few_covered_test_scenes_give_no_high_complexity_verdict() -> None:
    # additive concept vectors at clevr size: probes read 81% of the true embeddings; the values are
    # all fitted only at 0.9 (seed 0), where 9 test scenes cannot tell a failure from chance
    scenes = clevr_size()
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=32, noise=0.02, seed=0)
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    settings = ComplexitySettings(
        approximators=("additive",), fractions=(0.5, 0.9), seeds=(0,), description_length=False
    )
    summary = complexity_summary(complexity_sweep(y, scenes, probes, settings), settings)
    v = summary["verdict"]
    assert v["decisive_fractions"] == [] and v["reading"].startswith("cannot tell")
    assert "high-complexity" not in v["reading"]


def _entry(f_star: float | None, gaps: dict[str, float], train_r2: float = 0.99) -> dict:
    return {
        "f_star": f_star,
        "second_fit_disagreement": {f: {"mean": g} for f, g in gaps.items()},
        "train_r2_both_fits": {f: train_r2 for f in gaps},
    }


def test_a_family_whose_two_fits_disagree_where_it_matters_is_undetermined() -> None:
    approximators = {
        "mult": _entry(None, {"0.5": 0.02, "0.9": 3.1}),  # fails; at the decisive 0.9 its fits disagree
        "sum_mult": _entry(None, {"0.5": 2.0, "0.9": 0.01}),  # fails; determined at 0.9
        "mult_within_object": _entry(0.5, {"0.5": 0.5, "0.9": 0.0}),  # generalises; undetermined at f*
        "additive": {"f_star": None},
    }
    out = undetermined_families(approximators, {}, [0.9])
    assert sorted(out) == ["mult", "mult_within_object"]
    assert "3.10 of the test variance at f = 0.9" in out["mult"]
    assert sorted(undetermined_families(approximators, {}, None)) == ["mult_within_object"]  # mult: 0.5 agrees
    # fits that cannot match the seen scenes rule the form out, however much they disagree
    assert undetermined_families({"mult": _entry(None, {"0.9": 3.0}, train_r2=0.4)}, {}, [0.9]) == {}
    wide = {"additive": "table width ..."}
    assert undetermined_families(approximators, wide, [0.9])["additive"] == "its table width ..."


def test_two_fits_of_a_product_over_every_slot_disagree_at_clevr_size() -> None:
    # 21 training objects leave a width-32 product over 4 slots free on the 3 unseen ones
    scenes = clevr_size()
    y = planted_embeddings(scenes, "mult_all_slots", dim=32, noise=0.02, seed=0)
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    settings = ComplexitySettings(approximators=("mult",), fractions=(0.9,), seeds=(0,), description_length=False)
    summary = complexity_summary(complexity_sweep(y, scenes, probes, settings), settings)
    assert summary["approximators"]["mult"]["second_fit_disagreement"]["0.9"]["mean"] > 1.0
    v = summary["verdict"]
    if v["simplest_generalising"] is None:
        assert "but not for mult" in v["reading"] and "high-complexity binding function" not in v["reading"]
    else:
        assert "reflects the optimiser" in v["reading"]
    off = complexity_sweep(y, scenes, probes, settings.replace(second_fit=False)).table
    assert "second_fit_disagreement" not in set(off.metric)
