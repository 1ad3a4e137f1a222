"""The linear bridge (docs/method/07-crossmodal.md, LABCLIP-style): a linear map from text to image embeddings.

Fitted on the scenes of seen objects (``train_only`` of an object-level split) by closed-form ridge
regression, the regularisation chosen on a validation part, or (an option) trained contrastively from
there; scored on scenes of unseen objects. If the
bridged captions recover binding there, the information was present in the text embeddings and lost
in the cross-modal alignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bindscope.space.concepts import SceneSet
from bindscope.space.splits import ObjectSplit, object_splits

#: Ridge strengths tried, relative to the mean squared singular value of the centred inputs.
ALPHAS = tuple(float(a) for a in np.logspace(-6, 2, 17))


@dataclass(frozen=True)
class Bridge:
    """``image ≈ text @ weight + bias``: how it was fitted, the ridge strength chosen and its validation loss
    (MSE for ridge, the symmetric InfoNCE loss for the contrastive map)."""

    weight: np.ndarray
    bias: np.ndarray
    alpha: float
    validation_loss: float
    kind: str = "ridge"

    def apply(self, text: np.ndarray) -> np.ndarray:
        """The mapped captions, float32 (the embeddings' precision)."""
        w, b = self.weight.astype(np.float32), self.bias.astype(np.float32)
        return np.asarray(text, dtype=np.float32) @ w + b

    def record(self, seed: int, fraction: float, train: int, test: int) -> dict[str, Any]:
        """The bridge table's row of this fit on the split of ``seed`` and ``fraction``."""
        return {
            "seed": seed,
            "fraction": fraction,
            "fitted": True,
            "kind": self.kind,
            "alpha": self.alpha,
            "validation_loss": self.validation_loss,
            "train_only": train,
            "test_only": test,
        }


def bridge_splits(
    scenes: SceneSet, fractions: tuple[float, ...], seeds: tuple[int, ...], validation_fraction: float
) -> list[tuple[int, ObjectSplit]]:
    """(seed, object-level split with its validation part) per seed and fraction (covering order)."""
    return [
        (seed, s.with_validation(scenes, validation_fraction))
        for seed in seeds
        for s in object_splits(scenes, list(fractions), seed, order="covering")
    ]


def fit_bridge(
    text: np.ndarray, image: np.ndarray, fit_rows: np.ndarray, val_rows: np.ndarray, alphas: tuple[float, ...] = ALPHAS
) -> Bridge:
    """Ridge regression text -> image on ``fit_rows``, the strength of least MSE on ``val_rows``.

    One eigendecomposition ``X^T X = V diag(l) V^T`` of the centred training texts gives every
    strength's solution ``W(a) = V diag(1 / (l + a)) V^T X^T Y`` (``a`` scaled by the mean eigenvalue,
    the mean squared singular value of ``X``); the validation predictions come from the same basis.
    """
    x = np.asarray(text[fit_rows], dtype=np.float64)
    y = np.asarray(image[fit_rows], dtype=np.float64)
    mx, my = x.mean(axis=0), y.mean(axis=0)
    xc = x - mx
    eig, v = np.linalg.eigh(xc.T @ xc)
    eig = np.maximum(eig, 0.0)
    vty = v.T @ (xc.T @ (y - my))  # [d_text, d_image]
    scale = float(eig.sum() / max(min(x.shape), 1)) or 1.0
    xv = (np.asarray(text[val_rows], dtype=np.float64) - mx) @ v
    yv = np.asarray(image[val_rows], dtype=np.float64) - my
    best: Bridge | None = None
    for a in alphas:
        coef = vty / (eig + a * scale)[:, None]
        mse = float(np.mean((xv @ coef - yv) ** 2)) if len(val_rows) else float("nan")
        if best is None or mse < best.validation_loss:
            w = v @ coef
            best = Bridge(w, my - mx @ w, a, mse)
    assert best is not None
    return best


def info_nce(mapped: torch.Tensor, image: torch.Tensor, temperature: float) -> torch.Tensor:
    """The symmetric InfoNCE loss of paired rows (CLIP's): each mapped caption against every image."""
    logits = torch.nn.functional.normalize(mapped, dim=1) @ torch.nn.functional.normalize(image, dim=1).T
    logits = logits / temperature
    target = torch.arange(len(mapped), device=mapped.device)
    return 0.5 * (
        torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)
    )


def fit_contrastive_bridge(
    text: np.ndarray,
    image: np.ndarray,
    fit_rows: np.ndarray,
    val_rows: np.ndarray,
    *,
    steps: int = 300,
    batch: int = 1024,
    lr: float = 1e-3,
    temperature: float = 0.05,
    seed: int = 0,
    every: int = 25,
    device: str = "cpu",
) -> Bridge:
    """A linear map trained with the symmetric InfoNCE loss (Adam, batches of ``batch`` pairs), started
    from the ridge map; the weights of least validation loss (checked every ``every`` steps) are kept."""
    start = fit_bridge(text, image, fit_rows, val_rows)
    gen = torch.Generator().manual_seed(seed)
    dev = torch.device(device)
    x = torch.from_numpy(np.asarray(text[fit_rows], dtype=np.float32)).to(dev)
    y = torch.from_numpy(np.asarray(image[fit_rows], dtype=np.float32)).to(dev)
    val = np.random.default_rng(seed).permutation(np.asarray(val_rows))[: 2 * batch]  # a bounded logit matrix
    xv = torch.from_numpy(np.asarray(text[val], dtype=np.float32)).to(dev)
    yv = torch.from_numpy(np.asarray(image[val], dtype=np.float32)).to(dev)
    w = torch.tensor(start.weight, dtype=torch.float32, device=dev, requires_grad=True)
    b = torch.tensor(start.bias, dtype=torch.float32, device=dev, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=lr)

    def validation() -> float:
        with torch.no_grad():
            return float(info_nce(xv @ w + b, yv, temperature)) if len(xv) > 1 else float("nan")

    best = (validation(), w.detach().clone(), b.detach().clone())
    for step in range(1, steps + 1):
        idx = torch.randperm(len(x), generator=gen)[:batch].to(dev)
        opt.zero_grad()
        info_nce(x[idx] @ w + b, y[idx], temperature).backward()
        opt.step()
        if step % every == 0 or step == steps:
            loss = validation()
            if loss < best[0]:
                best = (loss, w.detach().clone(), b.detach().clone())
    weight, bias = (t.cpu().numpy().astype(np.float64) for t in best[1:])
    return Bridge(weight, bias, start.alpha, best[0], "contrastive")


def fit_bridge_kind(
    kind: str,
    text: np.ndarray,
    image: np.ndarray,
    fit_rows: np.ndarray,
    val_rows: np.ndarray,
    *,
    steps: int,
    seed: int,
    device: str = "cpu",
) -> Bridge:
    """The bridge of ``kind``: ``contrastive`` (:func:`fit_contrastive_bridge`), else ridge (:func:`fit_bridge`)."""
    if kind == "contrastive":
        return fit_contrastive_bridge(text, image, fit_rows, val_rows, steps=steps, seed=seed, device=device)
    return fit_bridge(text, image, fit_rows, val_rows)
