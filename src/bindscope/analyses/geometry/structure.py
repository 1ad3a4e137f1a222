"""Orthogonality and rank of concept components (docs/method/08-geometry.md).

A linear factorization generalises to unseen combinations when the concepts' components are
near-orthogonal across concepts and each concept spans few dimensions: at most ``V_c - 1`` (the
components are centred), and all of them together at most the width ``D``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import subspace_angles

#: Singular values below this share of the largest count as zero for the numerical rank.
RANK_TOLERANCE = 1e-6


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def component_cosine_values(components: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every |cos| between two components of the same concept (distinct values, each pair once) and
    between components of different concepts."""
    units = [unit(np.asarray(c, dtype=np.float64)) for c in components]
    within, across = [np.zeros(0)], [np.zeros(0)]
    for i, a in enumerate(units):
        within.append(np.abs(a @ a.T)[np.triu_indices(len(a), 1)])
        for b in units[i + 1 :]:
            across.append(np.abs(a @ b.T).ravel())
    return {"within": np.concatenate(within), "across": np.concatenate(across)}


def mean_cosines(values: dict[str, np.ndarray]) -> dict[str, float]:
    """The mean of each kind of :func:`component_cosine_values` (NaN for a kind without pairs)."""
    return {k: float(v.mean()) if len(v) else float("nan") for k, v in values.items()}


def component_cosines(components: list[np.ndarray]) -> dict[str, float]:
    """Mean |cos| between two components of the same concept (distinct values) and of different concepts."""
    return mean_cosines(component_cosine_values(components))


def principal_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Principal angles (degrees, ascending) between the spans of two concepts' components."""
    return np.sort(np.degrees(subspace_angles(np.asarray(a, float).T, np.asarray(b, float).T)))


def singular_values(components: np.ndarray) -> np.ndarray:
    return np.linalg.svd(np.asarray(components, dtype=np.float64), compute_uv=False)


def numerical_rank(components: np.ndarray, tolerance: float = RANK_TOLERANCE) -> int:
    """How many singular values exceed ``tolerance`` times the largest."""
    s = singular_values(components)
    return int((s > tolerance * s.max()).sum()) if len(s) and s.max() > 0 else 0


def effective_rank(components: np.ndarray) -> float:
    """``exp`` of the entropy of the normalised singular values (Roy and Vetterli)."""
    s = singular_values(components)
    if not len(s) or s.sum() <= 0:
        return 0.0
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))
