"""Fit stacks of approximators at once: full-batch Adam, cosine decay, validation selection and
early stopping (docs/method/06-complexity.md); the paper's protocol for every family, and the MLP's under
the exact protocol.

Each model in a stack has its own training and validation scenes (padded index matrices with
masks), its own seed and its own loss; summing the losses keeps the gradients independent, and
Adam is elementwise, so a stack of G models follows exactly the G trajectories one-at-a-time
fits would. Models that stop early leave the stack, so the rest run on smaller matmuls.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family, Layout, Params, init_params, predict, prepare
from bindscope.analyses.complexity.fitters.stack import CONVERGED_BELOW, SceneIndex, StackFit, require_scenes
from bindscope.core.errors import BindscopeError
from bindscope.core.threads import threads_for
from bindscope.core.validation import MAX_STEPS

#: How the learning rate moves over the epochs (see :class:`Schedule`).
DECAYS = ("cosine", "constant")
BETAS = (0.9, 0.999)
EPS = 1e-8


@dataclass(frozen=True)
class Schedule:
    """How long and how a stack is trained.

    Parameters
    ----------
    epochs
        Full-batch Adam steps at most (the paper: 4,000).
    lr
        Peak learning rate, decayed to 0 on a cosine over ``epochs`` (the paper: 1e-2).
    eval_every
        Epochs between validation checks (selection and early stopping).
    patience
        Stop a model after this many checks without a validation improvement; None trains
        every model for all ``epochs`` (the paper).
    min_delta
        Relative validation-MSE decrease that counts as an improvement.
    standardize
        Fit each model to its training targets centred on their mean and divided by their
        standard deviation (one scalar), then fold both back into the output layer: the same
        function family, fitted in units where Adam's step size means the same for every
        embedding scale. False fits the raw targets (the paper).
    decay
        ``cosine``: the rate falls from ``lr`` to 0 over ``epochs``; ``constant``: it stays at
        ``lr`` (the research code, which builds a cosine scheduler but never steps it).
    """

    epochs: int = 4000
    lr: float = 1e-2
    eval_every: int = 50
    patience: int | None = None
    min_delta: float = 1e-4
    standardize: bool = False
    decay: str = "cosine"

    def __post_init__(self) -> None:
        if self.decay not in DECAYS:
            raise BindscopeError(f"unknown learning-rate decay {self.decay!r}; choose {' or '.join(DECAYS)}")
        if self.epochs < 1 or self.eval_every < 1:
            raise BindscopeError(f"epochs and eval_every must be at least 1, got {self.epochs} and {self.eval_every}")
        if not self.lr > 0:
            raise BindscopeError(f"the learning rate must be positive, got {self.lr}")
        if self.patience is not None and self.patience < 1:
            raise BindscopeError(f"patience must be at least 1 check (or None), got {self.patience}")
        for name in ("epochs", "eval_every", "patience"):
            value = getattr(self, name)
            if value is not None and value > MAX_STEPS:
                raise BindscopeError(f"{name} must be at most {MAX_STEPS}, got {value}")

    def lr_at(self, step: int) -> float:
        """``CosineAnnealingLR(T_max=epochs, eta_min=0)`` at ``step``, or ``lr`` when constant."""
        if self.decay == "constant":
            return self.lr
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * step / self.epochs))


def pad_indices(parts: list[np.ndarray], device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Index lists of different lengths as ``[G, n_max]`` indices and a float mask."""
    require_scenes(parts)
    n = max(len(p) for p in parts)
    idx = np.zeros((len(parts), n), dtype=np.int64)
    mask = np.zeros((len(parts), n), dtype=np.float32)
    for i, p in enumerate(parts):
        idx[i, : len(p)] = p
        mask[i, : len(p)] = 1.0
    return torch.as_tensor(idx, device=device), torch.as_tensor(mask, device=device)


@dataclass(frozen=True)
class TargetScale:
    """Per model, the targets' centre ``[G, D]`` and scale ``[G]``: the model fits ``(y - centre) / scale``."""

    centre: torch.Tensor
    scale: torch.Tensor

    @classmethod
    def of(cls, y: torch.Tensor, parts: list[np.ndarray]) -> TargetScale:
        """Each model's training targets: their mean, and the root of their variance averaged over dimensions."""
        centres, scales = [], []
        for part in parts:
            block = y[torch.as_tensor(part, device=y.device)].double()
            centres.append(block.mean(0))
            scales.append(block.var(0, unbiased=False).mean().sqrt().clamp_min(1e-12))
        return cls(torch.stack(centres).float(), torch.stack(scales).float())

    def keep(self, mask: torch.Tensor) -> TargetScale:
        return TargetScale(self.centre[mask], self.scale[mask])

    def unfold(self, params: Params) -> Params:
        """Parameters predicting raw targets: the output layer ``w, b`` absorbs the scale and centre."""
        s = self.scale.to(params["w"].dtype)
        out = dict(params)
        out["w"] = params["w"] * s[:, None, None]
        out["b"] = params["b"] * s[:, None] + self.centre.to(params["b"].dtype)
        return out


def stack_mse(
    family: Family,
    params: Params,
    layout: Layout,
    data: SceneIndex,
    idx: torch.Tensor,
    mask: torch.Tensor,
    scale: TargetScale | None = None,
) -> torch.Tensor:
    """Per-model MSE ``[G]`` (mean over its scenes and the embedding dimensions), in the models'
    target units (``scale``: standardised targets; None: raw)."""
    prep = prepare(family, params, layout, idx.shape[1])
    pred = predict(family, params, prep, data.rows[idx], data.objects[idx], layout)
    target = data.y[idx]
    if scale is not None:
        target = (target - scale.centre[:, None, :]) / scale.scale[:, None, None]
    err = ((pred - target) ** 2).sum(-1) * mask
    return err.sum(1) / (mask.sum(1) * data.y.shape[1])


class StackAdam:
    """``torch.optim.Adam`` (fused where the build has it) over stacked parameters, with models
    that can leave the stack: :meth:`keep` slices the parameters and the Adam state alike."""

    def __init__(self, params: Params, lr: float) -> None:
        self.params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        self.opt = self._adam(list(self.params.values()), lr)

    @staticmethod
    def _adam(tensors: list[torch.Tensor], lr: float) -> torch.optim.Adam:
        try:
            return torch.optim.Adam(tensors, lr=lr, betas=BETAS, eps=EPS, fused=True)
        except RuntimeError:  # a build or device without the fused kernel
            return torch.optim.Adam(tensors, lr=lr, betas=BETAS, eps=EPS)

    def step(self, loss: torch.Tensor, lr: float) -> None:
        """One update of every model from the summed loss (the models' gradients stay separate)."""
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.opt.step()

    def keep(self, mask: torch.Tensor) -> None:
        """Keep the models where ``mask`` is true (parameters and Adam state)."""
        old = self.params
        self.params = {k: v.detach()[mask].clone().requires_grad_(True) for k, v in old.items()}
        opt = self._adam(list(self.params.values()), self.opt.param_groups[0]["lr"])
        for k, v in self.params.items():
            state = self.opt.state.get(old[k])
            if state:
                opt.state[v] = {n: (t.clone() if n == "step" else t[mask].clone()) for n, t in state.items()}
        self.opt = opt


#: A selection criterion: (parameters of the models still training, their indices) -> loss per model.
Selector = Callable[[Params, np.ndarray], np.ndarray]


def fit_stack(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    train: list[np.ndarray],
    validation: list[np.ndarray],
    seeds: list[int],
    schedule: Schedule,
    *,
    width: int,
    select: Selector | None = None,
) -> StackFit:
    """Fit ``len(seeds)`` models, model i on scenes ``train[i]``, selected on ``validation[i]``.

    ``select(params, models)``, if given, replaces the validation MSE as the selection
    criterion: it gets the raw-unit parameters of the models still training and their indices,
    and returns a non-negative loss per model (lower is better; e.g. 1 - an accuracy).
    """
    n = max(len(t) for t in train) if train else 0
    with threads_for(len(seeds) * n * max(width, family.hidden or 0) * data.y.shape[1]):
        return _fit_stack(family, layout, data, train, validation, seeds, schedule, width, select)


def _fit_stack(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    train: list[np.ndarray],
    validation: list[np.ndarray],
    seeds: list[int],
    schedule: Schedule,
    width: int,
    select: Selector | None = None,
) -> StackFit:
    """:func:`fit_stack`'s loop: an Adam step of every active model per epoch, a check every ``eval_every``."""
    device = data.y.device
    g_all = len(seeds)
    adam = StackAdam(init_params(family, layout, width, data.y.shape[1], seeds, str(device)), schedule.lr)
    selected = {k: v.detach().clone() for k, v in adam.params.items()}
    final = {k: v.detach().clone() for k, v in adam.params.items()}
    t_idx, t_mask = pad_indices(train, str(device))
    v_idx, v_mask = pad_indices(validation, str(device))
    every = TargetScale.of(data.y, train) if schedule.standardize else None
    scale = every  # the active models' part of it
    units = every.scale.double().cpu().numpy() ** 2 if every is not None else np.ones(g_all)  # MSE in raw units
    active = np.arange(g_all)
    best = np.full(g_all, np.inf)
    best_epoch = np.zeros(g_all, dtype=np.int64)
    epochs_run = np.full(g_all, schedule.epochs, dtype=np.int64)
    since = np.zeros(g_all, dtype=np.int64)
    history: list[tuple[int, int, float, float]] = []
    for step in range(1, schedule.epochs + 1):
        loss = stack_mse(family, adam.params, layout, data, t_idx, t_mask, scale)
        adam.step(loss, schedule.lr_at(step - 1))
        if step % schedule.eval_every and step != schedule.epochs:
            continue
        with torch.no_grad():
            params = {k: v.detach() for k, v in adam.params.items()}
            val = stack_mse(family, params, layout, data, v_idx, v_mask, scale).cpu().numpy().astype(np.float64)
            val = val * units[active]
        train_mse = loss.detach().cpu().numpy() * units[active]
        history += [(int(a), step, float(t), float(e)) for a, t, e in zip(active, train_mse, val)]
        crit = val if select is None else select(scale.unfold(params) if scale is not None else params, active)
        improved = crit < best[active] * (1 - schedule.min_delta)
        for k in params:
            selected[k][active[improved]] = params[k][torch.as_tensor(improved, device=device)]
        best[active[improved]] = crit[improved]
        best_epoch[active[improved]] = step
        since[active] = np.where(improved, 0, since[active] + 1)
        stop = since[active] >= schedule.patience if schedule.patience else np.zeros(len(active), bool)
        if step == schedule.epochs:
            stop[:] = True
        if stop.any():
            keep = torch.as_tensor(~stop, device=device)
            for k in params:
                final[k][active[stop]] = params[k][~keep]
            epochs_run[active[stop]] = step
            active = active[~stop]
            if not len(active):
                break
            adam.keep(keep)
            t_idx, t_mask, v_idx, v_mask = t_idx[keep], t_mask[keep], v_idx[keep], v_mask[keep]
            scale = scale.keep(keep) if scale is not None else None
    if every is not None:
        selected, final = every.unfold(selected), every.unfold(final)
    stopped = epochs_run < schedule.epochs
    gains, measured = _unfinished(history, train, data, schedule)
    converged = stopped | (measured & (gains < CONVERGED_BELOW))
    return StackFit(selected, final, best_epoch, epochs_run, best, history, converged, gains, stopped)


def _unfinished(
    history: list[tuple[int, int, float, float]], train: list[np.ndarray], data: SceneIndex, schedule: Schedule
) -> tuple[np.ndarray, np.ndarray]:
    """Per model, the R² its training loss's final fall would still gain (:func:`unfinished_gain`), and
    whether that fall was measured at all (a rate of fall needs two checks)."""
    steps = np.asarray(history, dtype=np.float64).reshape(-1, 4)
    gains = np.zeros(len(train))
    measured = np.zeros(len(train), bool)
    for g, part in enumerate(train):
        mine = steps[steps[:, 0] == g]
        variance = float(data.y[torch.as_tensor(part, device=data.y.device)].double().var(0, unbiased=False).mean())
        gains[g] = unfinished_gain(mine[:, 1], mine[:, 2], schedule, variance)
        measured[g] = len(mine) >= 2
    return gains, measured


#: The share of the epoch budget over which the final fall of the training loss is measured,
#: and the extra share of epochs (at the peak learning rate) it is projected over.
TAIL = 0.2
EXTRA = 0.1


def unfinished_gain(epochs: np.ndarray, train_mse: np.ndarray, schedule: Schedule, variance: float) -> float:
    """The R² a fit would still gain: its training loss's final fall, projected forward.

    Over the last :data:`TAIL` of the epochs run, the training MSE fell by ``delta`` while the
    learning rates summed to ``L``; at that rate per unit of learning rate, another
    :data:`EXTRA` of the epoch budget at the peak learning rate would lower the MSE by
    ``delta / L * lr * EXTRA * epochs``. Divided by the training targets' variance (mean over
    dimensions), that is an R² gain. The cosine schedule's vanishing rate at the end does not
    hide an unfinished fit: the fall is measured per unit of learning rate.

    Parameters
    ----------
    epochs, train_mse
        The checks of one model: the epoch and the training MSE at each, in order.
    schedule
        The schedule it was trained with.
    variance
        The variance of its training targets, averaged over the embedding dimensions.
    """
    if len(epochs) < 2 or variance <= 0:
        return 0.0
    end = int(epochs[-1])
    start_at = end - max(TAIL * end, 1)
    first = int(np.searchsorted(epochs, start_at))
    first = min(first, len(epochs) - 2)
    start = int(epochs[first])
    delta = float(train_mse[first] - train_mse[-1])
    lr_sum = sum(schedule.lr_at(step) for step in range(start, end))
    if lr_sum <= 0:
        return 0.0
    return max(delta / lr_sum * schedule.lr * EXTRA * schedule.epochs / variance, 0.0)
