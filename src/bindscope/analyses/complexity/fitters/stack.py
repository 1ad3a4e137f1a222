"""A stack of G models fitted together: the scenes they read (:class:`SceneIndex`), what a fit returns
(:class:`StackFit`) and their predictions; shared by the Adam trainer and the exact ALS."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family, Layout, Params, predict, prepare, scene_objects, scene_rows
from bindscope.analyses.complexity.fitters.basis import TargetBasis
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import SceneSet

#: A fit counts as converged when finishing its training loss's fall would gain less than this
#: much R² (:func:`~bindscope.analyses.complexity.fitters.adam.unfinished_gain`,
#: :func:`~bindscope.analyses.complexity.fitters.als.unfinished_r2`), or when it stopped on a validation plateau; a fit
#: checked fewer than twice has no measured fall and counts as not converged.
CONVERGED_BELOW = 0.01


@dataclass
class StackFit:
    """The outcome of fitting a stack of G models."""

    selected: Params  # parameters at the best validation MSE
    final: Params  # parameters when training ended (stopped early or at the last epoch)
    best_epoch: np.ndarray  # [G] epochs run before the selected checkpoint
    epochs_run: np.ndarray  # [G]
    best_val_mse: np.ndarray  # [G] the selection criterion at the selected checkpoint (validation MSE by default)
    history: list[tuple[int, int, float, float]] = field(default_factory=list)  # (model, epoch, train_mse, val_mse)
    converged: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [G]
    unfinished_r2: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [G] R² still to gain
    stopped_early: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [G] on a validation plateau


def pick_fits(first: StackFit, second: StackFit, take_second: np.ndarray) -> StackFit:
    """Per model, ``second``'s fit where ``take_second`` holds, else ``first``'s (same stack)."""
    take = np.asarray(take_second, dtype=bool)

    def params(a: Params, b: Params) -> Params:
        mask = torch.as_tensor(take, device=next(iter(a.values())).device)
        return {k: torch.where(mask.view(-1, *([1] * (v.dim() - 1))), b[k], v) for k, v in a.items()}

    def arrays(name: str) -> np.ndarray:
        return np.where(take, getattr(second, name), getattr(first, name))

    return StackFit(
        params(first.selected, second.selected),
        params(first.final, second.final),
        arrays("best_epoch"),
        arrays("epochs_run"),
        arrays("best_val_mse"),
        [h for h in first.history if not take[h[0]]] + [h for h in second.history if take[h[0]]],
        arrays("converged"),
        arrays("unfinished_r2"),
        arrays("stopped_early"),
    )


@dataclass(frozen=True)
class SceneIndex:
    """Per-scene inputs of the approximators, as tensors on one device; with a ``basis`` the targets
    are the embeddings' coordinates in it and predictions are restored to embeddings."""

    rows: torch.Tensor  # [N, S] slot rows
    objects: torch.Tensor  # [N, K] object-slot rows
    y: torch.Tensor  # [N, D] targets ([N, k] with a basis)
    basis: TargetBasis | None = None

    @classmethod
    def of(cls, scenes: SceneSet, y: np.ndarray, device: str = "cpu", basis: TargetBasis | None = None) -> SceneIndex:
        targets = np.asarray(y, dtype=np.float32) if basis is None else basis.project(y)
        return cls(
            torch.as_tensor(scene_rows(scenes), device=device),
            torch.as_tensor(scene_objects(scenes), device=device),
            torch.as_tensor(targets, device=device),
            basis,
        )


def require_scenes(*parts: list[np.ndarray]) -> None:
    """Every model needs at least one scene in each of its index lists (to fit, to validate)."""
    if any(len(p) == 0 for group in parts for p in group):
        raise BindscopeError("every model needs at least one scene to fit and one to validate on")


def predict_stack(
    family: Family, params: Params, layout: Layout, data: SceneIndex, idx: list[np.ndarray], chunk: int = 8192
) -> list[np.ndarray]:
    """Predicted embeddings of scenes ``idx[i]`` under model i, float32 ``[n_i, D]`` each."""
    out: list[list[np.ndarray]] = [[] for _ in idx]
    n_max = max((len(i) for i in idx), default=0)
    device = data.y.device
    with torch.no_grad():
        prep = prepare(family, params, layout, max(n_max, 1))
        for start in range(0, n_max, chunk):
            parts = [i[start : start + chunk] for i in idx]
            width = max(len(p) for p in parts)
            padded = torch.as_tensor(np.stack([np.pad(p, (0, width - len(p))) for p in parts]), device=device)
            pred = predict(family, params, prep, data.rows[padded], data.objects[padded], layout).cpu().numpy()
            for i, p in enumerate(parts):
                out[i].append(pred[i, : len(p)] if data.basis is None else data.basis.restore(pred[i, : len(p)]))
    dim = data.y.shape[1] if data.basis is None else data.basis.embedding_dim
    return [np.concatenate(o) if o else np.empty((0, dim), np.float32) for o in out]
