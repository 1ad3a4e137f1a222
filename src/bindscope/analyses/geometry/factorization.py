"""Linear factorization of object vectors (docs/method/08-geometry.md): ``x[o] ≈ mu + sum_c u_c[v_c(o)]``.

Exact least squares on the one-hot concept design (the decomposition analysis's solver), with each
concept's components centred over its values (the intercept absorbs their means), so that the
components are identifiable and comparable across concepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bindscope.estimators.additive import design_columns, fit_additive, r2_score
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
    design = np.concatenate([np.ones((space.num_objects, 1)), one_hot(space)], axis=1)
    seen = design[np.asarray(train)]
    rows = design[np.asarray(test)]
    projected = rows @ (np.linalg.pinv(seen) @ seen)
    return np.linalg.norm(rows - projected, axis=1) < 1e-8 * np.sqrt(design.shape[1])


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
    y = np.asarray(vectors, dtype=np.float64)
    objects = space.all_objects()
    fit = factorize(y, space, train)
    centre = y[train].mean(axis=0)
    scored = np.asarray(test)[determined(space, train, test)]
    return {
        "r2_train": r2_score(y[train], fit.predict(objects[train])),
        "r2_test": r2_score(y[scored], fit.predict(objects[scored]), centre) if len(scored) else float("nan"),
        "determined": float(len(scored)),
        "undetermined": float(len(test) - len(scored)),
    }


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
