"""Floors: an ideal bag of concepts scored by the evaluator equals its analytic floor; the binding verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bindscope.estimators.floors import (
    BAG_LEVEL,
    BINDS,
    MARGIN,
    NOT_SHOWN,
    bag_of_concepts_accuracy,
    bag_scores,
    binding_verdict,
    clearance_text,
    object_floors,
)
from bindscope.estimators.probes import OBJECT, set_separation_correct, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet


def space(v_a: int, v_n: int) -> ConceptSpace:
    return ConceptSpace.from_dict({"color": [f"c{i}" for i in range(v_a)], "shape": [f"s{i}" for i in range(v_n)]})


def distinct_pairs(sp: ConceptSpace) -> SceneSet:
    return SceneSet.enumerate(sp, 2, allow_identical=False)


@pytest.mark.parametrize("v_a, v_n", [(4, 4), (3, 5), (10, 10)])
def test_the_bag_scored_by_the_evaluator_equals_its_analytic_floor(v_a: int, v_n: int) -> None:
    scenes = distinct_pairs(space(v_a, v_n))
    u = v_a * v_n
    # two distinct objects need binding exactly when they differ in both concepts
    analytic = 1 - u * (v_a - 1) * (v_n - 1) / (u * (u - 1))
    scored = set_separation_correct(bag_scores(scenes), soft_targets(scenes)[OBJECT]).mean()
    assert scored == pytest.approx(analytic)
    assert bag_of_concepts_accuracy(scenes) == pytest.approx(analytic)


def test_floors_per_metric_on_known_scenes() -> None:
    scenes = distinct_pairs(space(4, 4))
    floors = object_floors(scenes)
    assert floors["object_acc"]["bag"] == pytest.approx(6 / 15)
    assert floors["object_acc"]["chance"] == pytest.approx(1 / math.comb(16, 2))
    assert floors["binding_object_acc"] == {"bag": 0.0, "chance": pytest.approx(1 / math.comb(16, 2))}
    # a scene with one shared value has one concept of 1 of 4 values, the other of 2 of 4
    shared = 6 / 15
    expected = shared * (1 / 4 + 1 / math.comb(4, 2)) / 2 + (1 - shared) * 1 / math.comb(4, 2)
    assert floors["concept_acc"] == {"bag": 1.0, "chance": pytest.approx(expected)}


def test_scenes_that_need_no_binding_have_no_needing_binding_floor() -> None:
    sp = space(1, 4)  # one colour: every scene is decided by its shapes
    floors = object_floors(distinct_pairs(sp))
    assert floors["object_acc"]["bag"] == 1.0
    assert "binding_object_acc" not in floors


def test_bag_scores_count_the_values_a_scene_holds() -> None:
    sp = space(2, 2)
    scenes = SceneSet(sp, np.array([[[0, 0], [1, 1]]]))
    # objects in id order (mixed radix, the first concept fastest): (0,0) (1,0) (0,1) (1,1); swaps tie
    assert bag_scores(scenes).tolist() == [[2, 2, 2, 2]]
    single = SceneSet(sp, np.array([[[0, 1], [-1, -1]]]))
    assert bag_scores(single).tolist() == [[1, 0, 2, 1]]


@pytest.mark.parametrize(
    "accs, floors, reading",
    [
        ([0.9, 0.8, 0.85], [0.3, 0.3, 0.3], BINDS),
        ([0.9, 0.32, 0.9], [0.3, 0.3, 0.3], NOT_SHOWN),
        ([0.31, 0.32, 0.33], [0.3, 0.3, 0.3], BAG_LEVEL),
        ([0.1], [0.3], BAG_LEVEL),
    ],
)
def test_binds_only_when_every_seed_clears_the_floor_by_the_margin(accs, floors, reading) -> None:
    verdict = binding_verdict(accs, floors)
    assert verdict["reading"] == reading
    assert verdict["margin"] == MARGIN
    assert verdict["clearance_min"] == pytest.approx(min(a - f for a, f in zip(accs, floors)))


def test_a_missing_accuracy_is_undetermined() -> None:
    assert binding_verdict([0.9, float("nan")], [0.3, 0.3])["reading"] == "undetermined"
    assert binding_verdict([], [])["reading"] == "undetermined"


def test_the_clearance_in_words_names_the_smallest_the_mean_and_the_margin() -> None:
    three = binding_verdict([0.9, 0.5, 0.7], [0.3, 0.3, 0.3])
    assert clearance_text(three) == "+20.0 points above the bag at least, +40.0 on average over 3 seeds (margin 5)"
    one = binding_verdict([0.62], [0.3])
    assert clearance_text(one) == "+32.0 points above the bag, one seed, no spread (margin 5)"
