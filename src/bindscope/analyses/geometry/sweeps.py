"""Held-out scores over object-level splits (docs/method/08-geometry.md): factorization R², linear heads, rank axes.

Objects are split at each fraction and seed (covering order, §2: every value is seen from the
lowest fractions on); the factorization and the heads are fitted on the seen objects and scored on
the unseen ones, raw and, for the factorization, after whitening with the seen objects' covariance (one Cholesky
factor per split, :mod:`.whiten`: the whitened fit is the raw fit whitened, so it is not fitted again). An
unseen object with a value no seen object holds is not determined by the factorization: it is left out
of the held-out R² and counted (metric ``undetermined``), so the R² never moves with the origin.
Rank axes are found from a few labelled objects of one half of the objects and scored on the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bindscope.analyses.geometry.factorization import object_scenes, split_scores
from bindscope.analyses.geometry.heads import head_accuracy
from bindscope.analyses.geometry.rank_axes import extremes_axis, labelled_sample, least_squares_axis, rankability
from bindscope.core.errors import BindscopeError
from bindscope.core.threads import shared_pool
from bindscope.core.tidy import result_row
from bindscope.space.concepts import ConceptSpace
from bindscope.space.splits import fraction_count, object_splits

AXIS_METHODS = ("extremes", "least_squares")


def usable_fractions(fractions: tuple[float, ...], objects: int) -> tuple[tuple[float, ...], list[str]]:
    """The fractions that leave objects on both sides, and a warning for each that does not."""
    keep = tuple(f for f in fractions if 0 < fraction_count(f, objects) < objects)
    dropped = [f for f in fractions if f not in keep]
    warnings = (
        [f"fractions {', '.join(f'{f:g}' for f in dropped)} leave no seen or no unseen objects of {objects}; skipped"]
        if dropped
        else []
    )
    if not keep:
        raise BindscopeError(
            f"no fraction of {', '.join(f'{f:g}' for f in fractions)} splits {objects} objects into seen and unseen "
            f"ones; choose fractions in [{1 / objects:.3g}, {(objects - 1) / objects:.3g}]"
        )
    return keep, warnings


def held_out_rows(
    vectors: np.ndarray,
    space: ConceptSpace,
    present: np.ndarray,
    fractions: tuple[float, ...],
    seeds: tuple[int, ...],
    *,
    ridge: float = 0.1,
    c: float = 10.0,
    device: str = "cpu",
) -> list[dict[str, Any]]:
    """Per seed and fraction: factorization R² (variants ``raw`` / ``whitened``, metrics ``r2_train`` /
    ``r2_test``) and head accuracy on the unseen objects (variant ``heads``, group = concept or ``object``;
    ``n_cases``: the unseen objects). Only ``present`` objects (ids) take part. The factorization's products
    run on ``device``; the heads (scikit-learn, on the CPU) on the shared thread pool meanwhile."""
    scenes = object_scenes(space)
    y = torch.as_tensor(np.asarray(vectors, dtype=np.float64), device=device)
    cases = []
    for seed in seeds:
        for split in object_splits(scenes, list(fractions), seed, order="covering"):
            train = np.intersect1d(split.train_only, present)
            test = np.intersect1d(split.test_only, present)
            if len(train) >= 2 and len(test):
                cases.append((seed, split.fraction, train, test))
    # the heads (scikit-learn, most of the time) on the shared pool, beside the factorization here
    heads = [shared_pool().submit(head_accuracy, vectors, space, train, test, c) for _, _, train, test in cases]
    out: list[dict[str, Any]] = []
    for (seed, fraction, train, test), head in zip(cases, heads):
        extra = {"fraction": fraction, "objects": len(test)}
        scores, determined = split_scores(y, space, train, test, ridge)
        scored = {**extra, "objects": determined}
        for variant in ("raw", "whitened"):
            for metric, value in scores[variant].items():
                if metric == "r2_train" or determined:  # no number where no unseen object is determined
                    out.append(result_row("geometry", variant, "all", metric, seed, value, **scored))
            if variant == "raw":
                undetermined = float(len(test) - determined)
                out.append(result_row("geometry", variant, "all", "undetermined", seed, undetermined, **extra))
        for group, value in head.result().items():
            out.append(result_row("geometry", "heads", group, "accuracy", seed, value, **extra, n_cases=len(test)))
    return out


def ordered_pairs(ranks: np.ndarray) -> int:
    """How many pairs of objects differ in rank: the cases of the pairwise order accuracy."""
    counts = np.unique(ranks, return_counts=True)[1]
    n = int(counts.sum())
    return (n * (n - 1) - int((counts * (counts - 1)).sum())) // 2


def rank_axis_rows(
    vectors: np.ndarray,
    space: ConceptSpace,
    present: np.ndarray,
    concept: str,
    counts: tuple[int, ...],
    seeds: tuple[int, ...],
) -> list[dict[str, Any]]:
    """Per seed: half the present objects (seeded) are held out; from the others, ``counts`` labelled objects
    (and all of them) give an axis by each method, scored on the held-out half (Spearman, pairwise order; the
    pairwise rows' ``n_cases``: the held-out pairs of different rank)."""
    ranks_all = space.all_objects()[:, space.concept_index(concept)]
    out: list[dict[str, Any]] = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        order = rng.permutation(present)
        held, pool = np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2 :])
        pool_ranks = ranks_all[pool]
        if pool_ranks.min() == pool_ranks.max() or len(set(ranks_all[held].tolist())) < 2:
            continue
        for n in sorted({min(k, len(pool)) for k in counts} | {len(pool)}):
            labelled = pool[labelled_sample(pool_ranks, n, seed)]
            r = ranks_all[labelled]
            axes = {
                "extremes": extremes_axis(vectors[labelled], r),
                "least_squares": least_squares_axis(vectors[labelled], r),
            }
            extra = {"labelled": n, "objects": len(held)}
            pairs = {"pairwise": ordered_pairs(ranks_all[held])}  # the one rate among the scores
            for method, axis in axes.items():
                variant, scores = f"rank_axis:{method}", rankability(axis, vectors[held], ranks_all[held])
                out += [
                    result_row("geometry", variant, concept, m, seed, v, **extra, n_cases=pairs.get(m, np.nan))
                    for m, v in scores.items()
                ]
    return out
