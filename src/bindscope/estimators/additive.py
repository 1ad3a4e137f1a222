"""Additive decomposition (docs/method/04-decomposition.md): is a scene embedding a sum of its parts?

Four linear models on one-hot designs, each with an intercept ``mu``:

``object_additive``   ``mu + sum_s T_s[object in slot s]``          (a table per slot)
``concept_additive``  ``mu + sum_s sum_c E_{c,s}[v_{s,c}]``          (a table per slot and concept)
``object_bag``        ``mu + sum_s T[object in slot s]``            (one table shared by the slots)
``concept_bag``       ``mu + sum_s sum_c E_c[v_{s,c}]``              (shared by the slots)

Each is an exact least-squares problem. The design has a few ones per row, so its Gram matrix
comes from integer counts and ``A^T Y`` from scatter-adds; the minimum-norm solution is read
off an eigendecomposition of the (small) Gram matrix. Fitted values are unique even where the
design is rank-deficient (the intercept and a slot's one-hots are collinear).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import PAD, SceneSet

MODELS = ("object_additive", "concept_additive", "object_bag", "concept_bag")


def design_columns(
    scenes: SceneSet, model: str, *, permutation: list[np.ndarray] | None = None
) -> tuple[np.ndarray, int]:
    """Column indices of the ones in each design row, and the number of columns.

    Parameters
    ----------
    scenes
        The scenes (labels of the rows).
    model
        One of :data:`MODELS`.
    permutation
        Optional relabelling applied before lookup: one array for the objects (object models)
        or one per concept (concept models). Used by the permuted-id subtraction control.

    Returns
    -------
    columns
        int64 ``[N, m]``; -1 marks an absent entry (a padded slot). Column 0 is the intercept.
    num_columns
        Width of the design including the intercept.
    """
    if model not in MODELS:
        raise BindscopeError(f"unknown decomposition model {model!r}; choose one of {', '.join(MODELS)}")
    k = scenes.max_objects
    space = scenes.space
    n = len(scenes)
    parts = [np.zeros((n, 1), dtype=np.int64)]  # the intercept
    if model.startswith("object"):
        ids = scenes.object_ids().astype(np.int64)
        if permutation is not None:
            ids = np.where(ids == PAD, PAD, np.asarray(permutation[0])[np.maximum(ids, 0)])
        u = space.num_objects
        per_slot = model == "object_additive"
        for s in range(k):
            offset = 1 + (s * u if per_slot else 0)
            parts.append(np.where(ids[:, s] == PAD, PAD, ids[:, s] + offset)[:, None])
        return np.concatenate(parts, axis=1), 1 + (k * u if per_slot else u)
    values = scenes.scenes.astype(np.int64)
    if permutation is not None:
        values = values.copy()
        for c, perm in enumerate(permutation):
            v = values[..., c]
            values[..., c] = np.where(v == PAD, PAD, np.asarray(perm)[np.maximum(v, 0)])
    offsets = np.cumsum([0, *space.sizes[:-1]])
    width = int(sum(space.sizes))
    per_slot = model == "concept_additive"
    for s in range(k):
        for c in range(space.num_concepts):
            v = values[:, s, c]
            offset = 1 + int(offsets[c]) + (s * width if per_slot else 0)
            parts.append(np.where(v == PAD, PAD, v + offset)[:, None])
    return np.concatenate(parts, axis=1), 1 + (k * width if per_slot else width)


@dataclass(frozen=True)
class AdditiveFit:
    """Fitted table of an additive model: ``coef[column]`` summed over a row's columns."""

    model: str
    coef: np.ndarray  # [num_columns, D], row 0 = intercept

    def predict(self, columns: np.ndarray) -> np.ndarray:
        """Reconstruction ``[N, D]`` of rows given by their design columns."""
        return _gather_sum(self.coef, columns)


def fit_additive(columns: np.ndarray, num_columns: int, y: np.ndarray, model: str = "") -> AdditiveFit:
    """Minimum-norm least squares of ``y`` ``[N, D]`` on the one-hot design given by ``columns``."""
    if len(columns) != len(y):
        raise BindscopeError(f"design has {len(columns)} rows but the embeddings {len(y)}")
    gram = _gram(columns, num_columns)
    aty = _scatter_sum(columns, num_columns, y)
    evals, evecs = np.linalg.eigh(gram)
    keep = evals > max(evals.max(), 1.0) * 1e-9
    inv = (evecs[:, keep] / evals[keep]) @ evecs[:, keep].T
    return AdditiveFit(model, (inv @ aty).astype(np.float64))


def r2_score(y: np.ndarray, y_hat: np.ndarray, centre: np.ndarray | None = None) -> float:
    """``1 - SSE / SST`` pooled over dimensions; SST around ``centre`` ``[D]``, by default the
    evaluated rows' own mean."""
    y = np.asarray(y, dtype=np.float64)
    sse = float(((y - y_hat) ** 2).sum())
    sst = float(((y - (y.mean(axis=0) if centre is None else centre)) ** 2).sum())
    return 1.0 - sse / sst if sst > 0 else float("nan")


def _gram(columns: np.ndarray, num_columns: int) -> np.ndarray:
    """``A^T A`` of the 0/1 design from co-occurrence counts of column pairs."""
    gram = np.zeros(num_columns * num_columns, dtype=np.float64)
    m = columns.shape[1]
    for a in range(m):
        for b in range(m):
            ok = (columns[:, a] != PAD) & (columns[:, b] != PAD)
            flat = columns[ok, a] * num_columns + columns[ok, b]
            gram += np.bincount(flat, minlength=num_columns * num_columns)
    return gram.reshape(num_columns, num_columns)


def _scatter_sum(columns: np.ndarray, num_columns: int, y: np.ndarray) -> np.ndarray:
    """``A^T y``: per column, the sum of the rows that have a one there (one sparse product over every column)."""
    yt = torch.as_tensor(np.asarray(y, dtype=np.float64))
    ok = columns != PAD
    rows = np.nonzero(ok)[0]
    index = torch.from_numpy(np.stack([columns[ok], rows]))
    design_t = torch.sparse_coo_tensor(
        index, torch.ones(len(rows), dtype=torch.float64), (num_columns, len(yt)), check_invariants=False
    )
    return torch.sparse.mm(design_t, yt).numpy()


def _gather_sum(coef: np.ndarray, columns: np.ndarray) -> np.ndarray:
    out = np.zeros((len(columns), coef.shape[1]), dtype=np.float64)
    for a in range(columns.shape[1]):
        ok = columns[:, a] != PAD
        out[ok] += coef[columns[ok, a]]
    return out


def permutations_for(scenes: SceneSet, model: str, seed: int) -> list[np.ndarray]:
    """A fixed random relabelling for the permuted-id control: of object ids, or of each concept's values."""
    rng = np.random.default_rng(seed)
    if model.startswith("object"):
        return [_derangement(rng, scenes.space.num_objects)]
    return [_derangement(rng, size) for size in scenes.space.sizes]


def _derangement(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random permutation that moves every element when n > 1 (so no label keeps its vector)."""
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    while True:
        perm = rng.permutation(n)
        if not (perm == np.arange(n)).any():
            return perm


def subtract(
    scenes: SceneSet,
    y: np.ndarray,
    model: str,
    *,
    permuted: bool = False,
    seed: int = 0,
    keep_mean: bool = False,
) -> np.ndarray:
    """Residual ``y - reconstruction`` for the subtraction variants (docs/method/04-decomposition.md).

    The model is fitted on all scenes with their true labels. With ``permuted``, the fitted
    tables are looked up with a fixed random relabelling of the ids instead, which removes a
    component of the same kind and size that does not belong to the scene: the control.
    With ``keep_mean`` the reconstruction is that of the centred embeddings (the fit minus the
    mean embedding ȳ), so the residual keeps ȳ, as in the research code.
    """
    y64 = np.asarray(y, dtype=np.float64)
    columns, width = design_columns(scenes, model)
    fit = fit_additive(columns, width, y64, model)
    if permuted:
        columns, _ = design_columns(scenes, model, permutation=permutations_for(scenes, model, seed))
    residual = y64 - fit.predict(columns)
    if keep_mean:
        residual += y64.mean(axis=0)
    return residual.astype(np.float32)
