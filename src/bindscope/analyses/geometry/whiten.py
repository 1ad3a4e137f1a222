"""Whitened squared norms without whitened vectors (docs/method/08-geometry.md).

Every whitened measure (R², concept shares) is a ratio of squared norms of vectors mapped by the whitening
``W = (Σ + λ I)^(-1/2)``. Least squares commute with a linear map, so the fit on whitened vectors is the raw fit
mapped by ``W``, and a squared norm after whitening is ``|x W|² = x (Σ + λ I)^(-1) xᵀ``. One Cholesky factor of
``Σ + λ I`` gives them all: no eigendecomposition, no whitened copy of the vectors, no second fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from bindscope.core.threads import threads_for


def whitened_sums(seen: torch.Tensor, blocks: Sequence[torch.Tensor], ridge: float) -> list[float]:
    """Per block ``[n_i, D]``, the sum of its rows' squared norms after whitening with the covariance of ``seen``.

    Parameters
    ----------
    seen
        ``[n, D]`` (n >= 2): the vectors whose covariance ``Σ`` (``ddof`` 1) is whitened.
    blocks
        Row blocks on the device of ``seen``.
    ridge
        ``λ`` = ``ridge`` times the mean eigenvalue of ``Σ``. Where ``Σ + λ I`` is singular (``ridge`` 0 and fewer
        vectors than dimensions) every sum is NaN, as the whitening map has no finite value.
    """
    centred = seen - seen.mean(dim=0)
    dim = seen.shape[1]
    rows = sum(len(b) for b in blocks)
    with threads_for(dim**3 // 3 + (rows + len(seen)) * dim**2):
        cov = centred.T @ centred / (len(seen) - 1)
        lam = ridge * max(float(torch.diagonal(cov).mean()), 1e-12)
        factor, info = torch.linalg.cholesky_ex(cov + lam * torch.eye(dim, dtype=cov.dtype, device=cov.device))
        if int(info):
            return [math.nan] * len(blocks)
        z = torch.linalg.solve_triangular(factor, torch.cat(list(blocks)).T, upper=False)
        per_row = (z**2).sum(dim=0)
    return [float(part.sum()) for part in torch.split(per_row, [len(b) for b in blocks])]


def squared_sums(blocks: Sequence[torch.Tensor]) -> list[float]:
    """Per block, the sum of its rows' squared norms (no whitening)."""
    return [float((b**2).sum()) for b in blocks]


def r2_of(sse: float, sst: float) -> float:
    """``1 - SSE / SST``, NaN where ``SST`` is not positive (as :func:`bindscope.estimators.additive.r2_score`)."""
    return 1.0 - sse / sst if sst > 0 else math.nan
