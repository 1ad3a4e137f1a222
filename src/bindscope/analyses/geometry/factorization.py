"""Linear factorization of object vectors (docs/method/08-geometry.md): ``x[o] ≈ mu + sum_c u_c[v_c(o)]``.

Exact least squares on the one-hot concept design (the decomposition analysis's solver), with each
concept's components centred over its values (the intercept absorbs their means), so that the
components are identifiable and comparable across concepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.geometry.whiten import r2_of, squared_sums, whitened_sums
from bindscope.core.threads import threads_for
from bindscope.estimators.additive import design_columns, fit_additive
from bindscope.space.concepts import ConceptSpace, SceneSet


@dataclass(frozen=True)
class Factorization:
    """``mu`` ``[D]`` and per concept its components ``[V_c, D]`` (centred over the values)."""

    mu: np.ndarray
    components: list[np.ndarray]

    def predict(self, objects: np.ndarray) -> np.ndarray:
        """Reconstruction ``[n, D]`` of objects given by their values ``[n, C]``."""
        out = np.repeat(self.mu[None, :], len(objects), axis=0)
        for c, table in enumerate(self.components):
            out += table[objects[:, c]]
        return out


def object_scenes(space: ConceptSpace) -> SceneSet:
    """Every object of the space alone, row = object id."""
    return SceneSet.enumerate(space, 1)


def factorize(vectors: np.ndarray, space: ConceptSpace, rows: np.ndarray | None = None) -> Factorization:
    """The least-squares factorization of the object vectors ``[U, D]`` (row = object id) on ``rows``."""
    scenes = object_scenes(space)
    rows = np.arange(space.num_objects) if rows is None else np.asarray(rows)
    columns, width = design_columns(scenes.subset(rows), "concept_additive")
    coef = fit_additive(columns, width, np.asarray(vectors, dtype=np.float64)[rows]).coef
    mu = coef[0].copy()
    components, start = [], 1
    for size in space.sizes:
        table = coef[start : start + size]
        mean = table.mean(axis=0)
        components.append(table - mean)
        mu += mean
        start += size
    return Factorization(mu, components)


def determined(space: ConceptSpace, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Which ``test`` objects (a mask) a factorization fitted on ``train`` predicts: those whose design row
    (intercept and one-hot values) lies in the row space of the training design, i.e. whose prediction is
    the same for every least-squares solution. Others use a value no training object holds, or combine
    values the training objects never link (cube only with red, ball only with blue: red-ball is then not
    determined); their prediction would move with the embeddings' origin."""
    design = design_matrix(space)
    seen = design[np.asarray(train)]
    rows = design[np.asarray(test)]
    projected = rows @ (np.linalg.pinv(seen) @ seen)
    return np.linalg.norm(rows - projected, axis=1) < 1e-8 * np.sqrt(design.shape[1])


def design_matrix(space: ConceptSpace) -> np.ndarray:
    """Every object's design row ``[U, 1 + sum of sizes]``: the intercept, then its values one-hot (the columns
    of the ``concept_additive`` design, in its order)."""
    return np.concatenate([np.ones((space.num_objects, 1)), one_hot(space)], axis=1)


def solution_operator(space: ConceptSpace, rows: np.ndarray) -> np.ndarray:
    """``H`` ``[1 + sum of sizes, n]``: the factorization's coefficients on the objects ``rows`` are ``H @ y[rows]``
    for any vectors ``y`` (the minimum-norm least-squares solution of :func:`factorize`, solved for the identity)."""
    columns, width = design_columns(object_scenes(space).subset(np.asarray(rows)), "concept_additive")
    return fit_additive(columns, width, np.eye(len(rows))).coef


def one_hot(space: ConceptSpace) -> np.ndarray:
    """Every object's values as concatenated one-hot blocks ``[U, sum of sizes]``."""
    objects = space.all_objects()
    return np.concatenate([np.eye(size)[objects[:, c]] for c, size in enumerate(space.sizes)], axis=1)


def factorization_scores(
    vectors: np.ndarray, space: ConceptSpace, train: np.ndarray, test: np.ndarray
) -> dict[str, float]:
    """R² of the factorization fitted on ``train`` objects: on them, and on the ``test`` objects it
    determines (:func:`determined`; SST around the training mean, so a constant predictor scores about 0);
    NaN where it determines none. Both are unchanged by a shift or a rotation of the embeddings.
    ``determined`` counts the test objects scored, ``undetermined`` those left out."""
    y = torch.as_tensor(np.asarray(vectors, dtype=np.float64))
    scores, scored = split_scores(y, space, np.asarray(train), np.asarray(test), None)
    return {**scores["raw"], "determined": float(scored), "undetermined": float(len(test) - scored)}


def split_scores(
    y: torch.Tensor, space: ConceptSpace, train: np.ndarray, test: np.ndarray, ridge: float | None
) -> tuple[dict[str, dict[str, float]], int]:
    """:func:`factorization_scores` of one split, raw and (with a ``ridge``) whitened with the ``train`` objects'
    covariance (:func:`bindscope.analyses.geometry.whiten.whitened_sums`: the fit on whitened vectors is the raw fit
    whitened), and how many ``test`` objects are scored. ``y``: the object vectors ``[U, D]`` (float64) on the
    device every product runs on."""
    scored = test[determined(space, train, test)]
    design = torch.as_tensor(design_matrix(space), dtype=y.dtype, device=y.device)
    operator = torch.as_tensor(solution_operator(space, train), dtype=y.dtype, device=y.device)
    fit_rows, held_rows = (torch.as_tensor(r, device=y.device) for r in (train, scored))
    with threads_for(2 * len(y) * design.shape[1] * y.shape[1]):
        seen, held = y[fit_rows], y[held_rows]
        coef = operator @ seen
        centre = seen.mean(dim=0)
        blocks = [seen - design[fit_rows] @ coef, seen - centre, held - design[held_rows] @ coef, held - centre]
        sums = {"raw": squared_sums(blocks)}
    if ridge is not None:
        sums["whitened"] = whitened_sums(seen, blocks, ridge)
    out = {
        variant: {"r2_train": r2_of(s[0], s[1]), "r2_test": r2_of(s[2], s[3]) if len(scored) else float("nan")}
        for variant, s in sums.items()
    }
    return out, len(scored)


def concept_shares(
    vectors: np.ndarray, fit: Factorization, space: ConceptSpace, rows: np.ndarray | None = None
) -> dict[str, float]:
    """Per concept, the share of the object vectors' variance its components carry:
    ``sum_o |u_c[v_c(o)]|² / sum_o |x_o - mean|²`` over the objects ``rows`` (default all; on a complete
    design the shares add up to R²)."""
    rows = np.arange(space.num_objects) if rows is None else np.asarray(rows)
    y = np.asarray(vectors, dtype=np.float64)[rows]
    sst = float(((y - y.mean(axis=0)) ** 2).sum())
    objects = space.all_objects()[rows]
    return {
        name: float((table[objects[:, c]] ** 2).sum()) / sst if sst > 0 else float("nan")
        for c, (name, table) in enumerate(zip(space.concepts, fit.components))
    }


def whitened_fit_scores(
    vectors: np.ndarray, fit: Factorization, space: ConceptSpace, rows: np.ndarray, ridge: float, device: str = "cpu"
) -> tuple[float, dict[str, float]]:
    """R² and :func:`concept_shares` of ``fit`` (the factorization of ``vectors`` on the objects ``rows``) after
    whitening with those objects' covariance: the fit of the whitened vectors is ``fit`` whitened, so only squared
    norms are whitened (:func:`bindscope.analyses.geometry.whiten.whitened_sums`, on ``device``)."""
    y = np.asarray(vectors, dtype=np.float64)[rows]
    objects = space.all_objects()[rows]
    parts = [y - fit.predict(objects), y - y.mean(axis=0)]
    parts += [table[objects[:, c]] for c, table in enumerate(fit.components)]
    seen = torch.as_tensor(y, device=device)
    sums = whitened_sums(seen, [torch.as_tensor(p, device=device) for p in parts], ridge)
    shares = {name: sums[2 + c] / sums[1] if sums[1] > 0 else float("nan") for c, name in enumerate(space.concepts)}
    return r2_of(sums[0], sums[1]), shares


def residual_norms(
    vectors: np.ndarray, fit: Factorization, space: ConceptSpace, rows: np.ndarray | None = None
) -> np.ndarray:
    """Per object of ``rows`` (default all), ``|x - x_hat| / |x - mu|``: how much of it the factorization
    leaves out."""
    rows = np.arange(space.num_objects) if rows is None else np.asarray(rows)
    y = np.asarray(vectors, dtype=np.float64)[rows]
    residual = np.linalg.norm(y - fit.predict(space.all_objects()[rows]), axis=1)
    return residual / np.maximum(np.linalg.norm(y - fit.mu, axis=1), 1e-12)


def whitening(vectors: np.ndarray, ridge: float = 0.1) -> np.ndarray:
    """A whitening map ``W`` ``[D, D]`` (apply as ``x @ W``): the inverse square root of the object vectors'
    covariance, regularised by ``ridge`` times its mean eigenvalue (few objects in many dimensions leave
    most eigenvalues near zero: without the ridge their noise would be blown up to unit variance)."""
    y = np.asarray(vectors, dtype=np.float64)
    cov = np.cov(y, rowvar=False)
    evals, evecs = np.linalg.eigh(cov)
    evals = np.maximum(evals, 0.0) + ridge * max(float(evals.mean()), 1e-12)
    return (evecs / np.sqrt(evals)) @ evecs.T
