"""The embeddings' leading principal subspace, where a capped budget fits its models (:class:`TargetBasis`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.decomposition import PCA


def principal_axes(y: np.ndarray) -> PCA | None:
    """The principal axes of embeddings ``y [N, D]`` (float64), None where ``y`` is constant."""
    from sklearn.decomposition import PCA

    y = np.asarray(y, dtype=np.float64)
    return PCA(svd_solver="full").fit(y) if y.var(axis=0).sum() > 0 else None


@dataclass(frozen=True)
class TargetBasis:
    """The embeddings' leading principal subspace, where a capped budget fits its models.

    ``project`` maps embeddings ``[N, D]`` to coordinates ``[N, k]`` scaled by ``sqrt(k / D)``, so that
    a mean squared error over the ``k`` coordinates equals the full-space mean squared error (over
    ``D``) of the same error's part inside the subspace; ``restore`` maps predictions back.
    """

    mean: np.ndarray  # [D]
    components: np.ndarray  # [k, D], orthonormal rows
    variance_kept: float  # share of the embeddings' variance inside the subspace

    @classmethod
    def of(cls, y: np.ndarray, variance: float, max_dims: int, min_dims: int = 1) -> TargetBasis | None:
        """The fewest leading components holding ``variance`` of the variance, at most ``max_dims`` and
        at least ``min_dims``; None where that is every dimension (nothing to gain) or ``y`` is constant."""
        pca = principal_axes(y)
        return None if pca is None else cls.leading(pca, variance, max_dims, min_dims)

    @classmethod
    def leading(cls, pca: PCA, variance: float, max_dims: int, min_dims: int = 1) -> TargetBasis | None:
        """As :meth:`of`, from the embeddings' fitted principal axes (:func:`principal_axes`)."""
        shares = np.cumsum(pca.explained_variance_ratio_)
        k = max(min(int(np.searchsorted(shares, variance * shares[-1])) + 1, max_dims), min_dims)
        if k >= min(pca.n_features_in_, len(shares)):
            return None
        return cls(pca.mean_, pca.components_[:k], float(shares[k - 1] / shares[-1]))

    @property
    def dims(self) -> int:
        return int(self.components.shape[0])

    @property
    def embedding_dim(self) -> int:
        return int(self.components.shape[1])

    @property
    def scale(self) -> float:
        return math.sqrt(self.dims / self.embedding_dim)

    def project(self, y: np.ndarray) -> np.ndarray:
        """Scaled coordinates ``[N, k]`` of embeddings ``[N, D]`` (float32)."""
        return (((np.asarray(y, np.float64) - self.mean) @ self.components.T) * self.scale).astype(np.float32)

    def restore(self, coords: np.ndarray) -> np.ndarray:
        """Embeddings ``[N, D]`` (float32) of scaled coordinates ``[N, k]``."""
        return ((np.asarray(coords, np.float64) / self.scale) @ self.components + self.mean).astype(np.float32)

    def describe(self) -> dict[str, float | int]:
        """What a result records of the reduction."""
        return {"dims": self.dims, "of": self.embedding_dim, "variance_kept": self.variance_kept}

    def within(self, y: np.ndarray) -> np.ndarray:
        """``y``'s part inside the subspace, as embeddings (``restore(project(y))``)."""
        return self.restore(self.project(y))
