"""Rank axes and linear heads on planted object vectors (known answers)."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.geometry.heads import chance, head_accuracy
from bindscope.analyses.geometry.rank_axes import (
    extremes_axis,
    labelled_sample,
    least_squares_axis,
    pairwise_order_accuracy,
    rankability,
)
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.splits import object_splits

DIM = 32


def ordinal_objects(ranks: np.ndarray, noise: float, seed: int = 0) -> np.ndarray:
    """Value x direction + noise."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=DIM)
    return ranks[:, None] * direction / np.linalg.norm(direction) + noise * rng.normal(size=(len(ranks), DIM))


def test_an_ordinal_concept_is_ranked_from_its_extremes() -> None:
    ranks = np.repeat(np.arange(5), 20)
    x = ordinal_objects(ranks, noise=0.1)
    labelled = labelled_sample(ranks, 2, seed=0)
    held = np.setdiff1d(np.arange(len(ranks)), labelled)
    axis = extremes_axis(x[labelled], ranks[labelled])
    score = rankability(axis, x[held], ranks[held])
    assert score["spearman"] > 0.95 and score["pairwise"] > 0.95
    assert score["spearman"] <= score["spearman_ceiling"] < 1  # ties: 5 ranks over 98 objects
    labelled = labelled_sample(ranks, 32, seed=0)
    held = np.setdiff1d(np.arange(len(ranks)), labelled)
    assert rankability(least_squares_axis(x[labelled], ranks[labelled]), x[held], ranks[held])["spearman"] > 0.9


def test_shuffled_values_are_not_rankable() -> None:
    ranks = np.repeat(np.arange(5), 40)
    x = ordinal_objects(np.random.default_rng(3).permutation(ranks), noise=0.1)
    labelled = labelled_sample(ranks, 32, seed=0)
    held = np.setdiff1d(np.arange(len(ranks)), labelled)
    axis = least_squares_axis(x[labelled], ranks[labelled])
    assert abs(rankability(axis, x[held], ranks[held])["spearman"]) < 0.25


def test_labelled_sample_holds_both_extremes_and_pairwise_counts_ties_half() -> None:
    ranks = np.repeat(np.arange(4), 5)
    picked = labelled_sample(ranks, 2, seed=1)
    assert sorted(ranks[picked].tolist()) == [0, 3]
    assert len(labelled_sample(ranks, 8, seed=1)) == 8 and len(labelled_sample(ranks, 99, seed=1)) == 20
    assert pairwise_order_accuracy(np.array([0.0, 0.0, 1.0]), np.array([0, 1, 2])) == (0.5 + 1 + 1) / 3


def test_factorised_objects_generalise_to_unseen_combinations() -> None:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(8)], "shape": [f"s{i}" for i in range(8)]})
    rng = np.random.default_rng(0)
    tables = [rng.normal(size=(size, DIM)) for size in space.sizes]
    objects = space.all_objects()
    factorised = sum(t[objects[:, c]] for c, t in enumerate(tables)) + 0.1 * rng.normal(size=(64, DIM))
    random = rng.normal(size=(64, DIM))
    split = object_splits(SceneSet.enumerate(space, 1), [0.3], 0, order="covering")[0]
    train, test = split.train_only, split.test_only
    good = head_accuracy(factorised, space, train, test)
    bad = head_accuracy(random, space, train, test)
    assert good["object"] > 0.95 and good["color"] > 0.95
    assert bad["color"] < 0.4 and bad["object"] < 0.2
    assert chance(space) == {"color": 1 / 8, "shape": 1 / 8, "object": 1 / 64}


def test_rank_axis_rows_planted_and_shuffled() -> None:
    from bindscope.analyses.geometry.sweeps import rank_axis_rows

    space = ConceptSpace.from_dict({"size": ["s", "m", "l", "xl"], "color": [f"c{i}" for i in range(12)]})
    ranks = space.all_objects()[:, 0]
    every = np.arange(space.num_objects)
    rows = rank_axis_rows(ordinal_objects(ranks, noise=0.1), space, every, "size", (2, 8), (0, 1))
    spearman = {(r["variant"], r["labelled"], r["seed"]): r["value"] for r in rows if r["metric"] == "spearman"}
    assert {n for _, n, _ in spearman} == {2, 8, 24}  # 2, 8 and all 24 labelled candidates
    assert min(v for (m, n, _), v in spearman.items() if m == "rank_axis:extremes" and n == 2) > 0.95
    assert all(r["group"] == "size" and r["objects"] == 24 for r in rows)
    shuffled = ordinal_objects(np.random.default_rng(5).permutation(ranks), noise=0.1)
    bad = rank_axis_rows(shuffled, space, every, "size", (2, 8), (0, 1, 2))
    far = [r["value"] for r in bad if r["metric"] == "spearman" and r["labelled"] == 24]
    assert np.mean(np.abs(far)) < 0.3
