"""The linear bridge (docs/method.md §7, LABCLIP-style): a linear map from text to image embeddings.

Fitted on the scenes of seen objects (``train_only`` of an object-level split) by closed-form ridge
regression, the regularisation chosen on a validation part; scored on scenes of unseen objects. If the
bridged captions recover binding there, the information was present in the text embeddings and lost
in the cross-modal alignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Ridge strengths tried, relative to the mean squared singular value of the centred inputs.
ALPHAS = tuple(float(a) for a in np.logspace(-6, 2, 17))


@dataclass(frozen=True)
class Bridge:
    """``image ≈ text @ weight + bias``, with the ridge strength chosen and its validation MSE."""

    weight: np.ndarray
    bias: np.ndarray
    alpha: float
    validation_mse: float

    def apply(self, text: np.ndarray) -> np.ndarray:
        return (np.asarray(text, dtype=np.float64) @ self.weight + self.bias).astype(np.float32)


def fit_bridge(
    text: np.ndarray, image: np.ndarray, fit_rows: np.ndarray, val_rows: np.ndarray, alphas: tuple[float, ...] = ALPHAS
) -> Bridge:
    """Ridge regression text -> image on ``fit_rows``, the strength of least MSE on ``val_rows``.

    One SVD of the centred training texts gives every strength's solution
    ``W(a) = V diag(s / (s^2 + a)) U^T Y`` (``a`` scaled by the mean squared singular value).
    """
    x = np.asarray(text[fit_rows], dtype=np.float64)
    y = np.asarray(image[fit_rows], dtype=np.float64)
    mx, my = x.mean(axis=0), y.mean(axis=0)
    u, s, vt = np.linalg.svd(x - mx, full_matrices=False)
    uty = u.T @ (y - my)
    scale = float(np.mean(s**2)) if len(s) else 1.0
    xv = np.asarray(text[val_rows], dtype=np.float64) - mx
    yv = np.asarray(image[val_rows], dtype=np.float64)
    best: Bridge | None = None
    for a in alphas:
        w = vt.T @ ((s / (s**2 + a * scale))[:, None] * uty)
        mse = float(np.mean((xv @ w + my - yv) ** 2)) if len(val_rows) else float("nan")
        if best is None or mse < best.validation_mse:
            best = Bridge(w, my - mx @ w, a, mse)
    assert best is not None
    return best
