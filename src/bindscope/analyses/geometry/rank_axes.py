"""Rank axes (docs/method/08-geometry.md): does an ordinal concept (size, age) lie along one direction?

An axis is found from labelled objects, either from the two extreme values (mean of the objects
with the highest value minus the mean of those with the lowest) or by least squares of the value's
rank on the object vectors (ridge, in the dual form: there are often fewer labelled objects than dimensions).
Rankability is scored on held-out objects: the Spearman correlation between their projection on
the axis and their rank, and how often a pair of objects of different ranks is put in order.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr


def extremes_axis(vectors: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Mean of the objects of the highest rank minus the mean of those of the lowest."""
    x = np.asarray(vectors, dtype=np.float64)
    return x[ranks == ranks.max()].mean(axis=0) - x[ranks == ranks.min()].mean(axis=0)


def least_squares_axis(vectors: np.ndarray, ranks: np.ndarray, ridge: float = 0.1) -> np.ndarray:
    """The ridge least-squares ``w`` of ``rank ≈ (x - mean) w``, in its dual form (few labelled objects,
    many dimensions); the ridge is relative to the mean squared norm of the centred vectors, which keeps
    ``n ≈ D`` from interpolating the noise."""
    x = np.asarray(vectors, dtype=np.float64)
    xc = x - x.mean(axis=0)
    r = np.asarray(ranks, dtype=np.float64)
    gram = xc @ xc.T
    lam = ridge * max(float(np.trace(gram)) / len(x), 1e-12)
    return xc.T @ np.linalg.solve(gram + lam * np.eye(len(x)), r - r.mean())


def pairwise_order_accuracy(projection: np.ndarray, ranks: np.ndarray) -> float:
    """Share of pairs of different ranks whose projections are in the same order (ties half)."""
    dp = np.sign(projection[:, None] - projection[None, :])
    dr = np.sign(ranks[:, None] - ranks[None, :])
    pairs = dr > 0
    if not pairs.any():
        return float("nan")
    return float(np.mean(np.where(dp[pairs] == 0, 0.5, dp[pairs] > 0)))


def rankability(axis: np.ndarray, vectors: np.ndarray, ranks: np.ndarray) -> dict[str, float]:
    """Spearman correlation and pairwise order accuracy of held-out objects projected on ``axis``, and the
    Spearman ceiling: that of a projection in perfect order. Ranks repeat (many objects per value), and
    against tied ranks even a perfect order scores below 1 (three equal groups: about 0.94)."""
    projection = np.asarray(vectors, dtype=np.float64) @ axis
    ordered = len(set(ranks.tolist())) > 1
    rho = spearmanr(projection, ranks).statistic if ordered else float("nan")
    ceiling = spearmanr(np.arange(len(ranks)), np.sort(ranks)).statistic if ordered else float("nan")
    return {
        "spearman": float(rho),
        "spearman_ceiling": float(ceiling),
        "pairwise": pairwise_order_accuracy(projection, np.asarray(ranks)),
    }


def labelled_sample(ranks: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` labelled objects drawn with a seed, at least one of the lowest and one of the highest rank
    when ``count >= 2`` (so that either axis can be formed)."""
    rng = np.random.default_rng(seed)
    n = len(ranks)
    if count >= n:
        return np.arange(n)
    low = rng.choice(np.flatnonzero(ranks == ranks.min()))
    high = rng.choice(np.flatnonzero(ranks == ranks.max()))
    rest = np.setdiff1d(np.arange(n), [low, high])
    extra = rng.choice(rest, max(count - 2, 0), replace=False)
    return np.sort(np.concatenate([[low, high], extra]).astype(np.int64))
