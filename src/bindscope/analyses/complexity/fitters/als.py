"""Exact block fits of the table families (docs/method/06-complexity.md): alternating least squares.

Every family but the MLP is linear in ``(W, b)`` once the tables are fixed, and linear in any one
slot's table once ``W``, ``b`` and the other tables are fixed. So each block has a closed-form
least-squares solve, and alternating them (ALS, as for CP tensor decompositions) lowers the
training loss at every step:

``additive``             linear in the folded table ``E W^T``: one solve (truncated to the table
                         width when that is below the embedding width).
``mult``                 output solve on ``z = prod_s e_s``; slot s's row for value v solves
                         ``min sum_i ||r_i - W (p_i * e)||^2`` over the scenes with that value,
                         ``p_i`` the product of the scene's other slots: normal matrix
                         ``(W^T W) * sum_i p_i p_i^T`` (elementwise), one ``d x d`` solve per row.
``mult_within_object``   the same per object, the other objects' terms moved to the residual.
``sum_mult``             the output solve takes ``W_prod``, the folded additive tables and ``b``
                         jointly; the product's slots as for ``mult``.

Rows a model never sees keep their initial values (as under gradient descent). After every
sweep the scale symmetries are fixed (unit-norm columns of ``W``, equal column norms across a
product's factors: the function is unchanged), and every solve carries a small ridge relative
to its normal matrix's mean diagonal, which keeps the factors from drifting into the degenerate,
cancelling directions where ALS stalls. The validation MSE selects the sweep to keep.

A fit stops when the validation MSE has not improved for ``patience`` sweeps, or when the
training loss's recent fall, projected over another half budget of sweeps, would gain less than
:data:`STOP_BELOW` of R²; it has converged if it stopped either way or if, at the end of the
budget, that projection is below :data:`CONVERGED_BELOW`.

A stack's models are fitted together, and their starts: every tensor has a leading model axis,
each model's scenes are padded to the stack's largest set with weight 0, and every block solve is
one system per model (per model and value for a slot's rows) with that model's own ridge, so a
model's fit does not depend on the stack it is in. Models that stop leave the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family, Layout, Params, init_params
from bindscope.analyses.complexity.fitters.als_design import DTYPE, Design, Scenes
from bindscope.analyses.complexity.fitters.als_tables import TableModels
from bindscope.analyses.complexity.fitters.stack import CONVERGED_BELOW, SceneIndex, StackFit, require_scenes
from bindscope.core.errors import BindscopeError
from bindscope.core.threads import threads_for
from bindscope.core.validation import MAX_STEPS

#: The projected R² gain below which a fit stops before its budget (it converges below
#: :data:`~bindscope.analyses.complexity.fitters.stack.CONVERGED_BELOW`).
STOP_BELOW = 0.001
#: Sweeps over which the training loss's recent fall is measured.
WINDOW = 10
#: The projection's horizon, as a share of the sweep budget.
HORIZON = 0.5
#: Every other start draws its tables as ``1 + NEAR_ONE * N(0, 1)`` instead of ``N(0, 1)``.
NEAR_ONE = 0.1
#: A stack's starts run together while models x starts x scenes x width (or embedding width) stays within
#: this, else in groups (at least one at a time): float64 tensors of 32 MB, which the allocator recycles.
START_ELEMENTS = 2**22


@dataclass(frozen=True)
class Solver:
    """How the exact protocol fits one model.

    Parameters
    ----------
    sweeps
        ALS sweeps at most (a sweep solves the output layer, then every slot's table once).
    patience
        Sweeps without a validation improvement (by ``min_delta``) before the fit stops; None
        never stops on validation.
    min_delta
        Relative validation-MSE decrease that counts as an improvement.
    ridge
        Relative ridge of every block solve (times the mean diagonal of its normal matrix).
    starts, start_sweeps
        Products of tables have poor local minima: a product family runs ``starts`` random
        initialisations (the model's seed first; every other one near one) for ``start_sweeps``
        sweeps each and continues the one with the lowest validation MSE.
    """

    sweeps: int = 800
    patience: int | None = 20
    min_delta: float = 1e-4
    ridge: float = 1e-3
    starts: int = 8
    start_sweeps: int = 10

    def __post_init__(self) -> None:
        if self.sweeps < 1:
            raise BindscopeError(f"sweeps must be at least 1, got {self.sweeps}")
        if not self.ridge >= 0:
            raise BindscopeError(f"the ridge must be non-negative, got {self.ridge}")
        if self.patience is not None and self.patience < 1:
            raise BindscopeError(f"patience must be at least 1 sweep (or None), got {self.patience}")
        if self.starts < 1 or self.start_sweeps < 1:
            raise BindscopeError(f"starts and start_sweeps must be >= 1, got {self.starts}, {self.start_sweeps}")
        for name in ("sweeps", "patience", "starts", "start_sweeps"):
            value = getattr(self, name)
            if value is not None and value > MAX_STEPS:
                raise BindscopeError(f"{name} must be at most {MAX_STEPS}, got {value}")


@dataclass
class OneFit:
    """One model's exact fit (parameters without the model axis)."""

    selected: Params  # at the best validation MSE
    final: Params  # when the fit stopped
    best_sweep: int
    sweeps_run: int
    best_val_mse: float
    converged: bool
    unfinished_r2: float  # R² the recent fall of the training loss would still gain (see unfinished_r2)
    stopped_early: bool
    history: list[tuple[int, float, float]]  # (sweep, train_mse, val_mse)


# -- the starts ---------------------------------------------------------------------------------------
def start_seed(seed: int, start: int) -> int:
    """The initialisation seed of a model's ``start``-th start (its own seed first)."""
    return seed if start == 0 else int(np.random.default_rng([seed, start]).integers(2**31))


def _starts(
    family: Family, layout: Layout, dim: int, seeds: list[int], starts: range, width: int, device: str
) -> TableModels:
    """Starts ``starts`` of every model, model by model: N(0, 1) tables (seeded by :func:`start_seed`),
    on odd starts ``1 + NEAR_ONE * N(0, 1)`` (a product near its first-order, additive expansion)."""
    init = init_params(family, layout, width, dim, [start_seed(s, k) for s in seeds for k in starts], device)
    odd = torch.tensor([k % 2 == 1 for _ in seeds for k in starts], device=init["table"].device)
    init["table"] = torch.where(odd[:, None, None], 1.0 + NEAR_ONE * init["table"], init["table"])
    return TableModels(family, layout, init, width)


def _best_starts(
    family: Family,
    layout: Layout,
    design: Design,
    validation: Scenes,
    seeds: list[int],
    solver: Solver,
    width: int,
) -> TableModels:
    """Each model's start with the lowest validation MSE after ``solver.start_sweeps`` sweeps (product
    families; the first of equals), all models' starts fitted together (in groups within
    :data:`START_ELEMENTS`).

    Starts alternate between N(0, 1) tables (the family's initialisation; the model's own seed
    first) and tables near one, whose product starts near its additive expansion: zero-mean
    products and mean-one products sit in different basins, and ALS from one rarely reaches the
    other. Validation scenes come from the training objects, never from the test ones.
    """
    m, n, _ = design.scenes.rows.shape
    dim, device = design.scenes.y.shape[2], str(design.scenes.y.device)
    if family.name == "additive":
        return _starts(family, layout, dim, seeds, range(1), width, device)
    together = max(1, min(solver.starts, START_ELEMENTS // (m * n * max(width, dim))))
    best: TableModels | None = None
    best_mse = torch.full((m,), math.inf, dtype=DTYPE, device=device)
    for first in range(0, solver.starts, together):
        starts = range(first, min(first + together, solver.starts))
        model = _starts(family, layout, dim, seeds, starts, width, device)
        each = torch.arange(m, device=device).repeat_interleave(len(starts))
        fit, held = (design, validation) if len(starts) == 1 else (design.take(each), validation.take(each))
        for _ in range(solver.start_sweeps):
            model.sweep(fit, solver.ridge)
        mse = model.mse(held).view(m, len(starts))
        mse = torch.where(mse.isnan(), math.inf, mse)
        k = mse.argmin(1)  # the first of the lowest
        low, pick = mse.gather(1, k[:, None])[:, 0], model.take(torch.arange(m, device=device) * len(starts) + k)
        if best is None:
            best, best_mse = pick, low
            continue
        better = low < best_mse
        best.put(better, pick, better)
        best_mse = torch.where(better, low, best_mse)
    assert best is not None  # at least one start
    return best


# -- the fit ------------------------------------------------------------------------------------------
def unfinished_r2(train_mse: list[float], budget: int, variance: float) -> float:
    """R² the training loss would still gain at its recent rate of fall (over the last
    :data:`WINDOW` sweeps) during another :data:`HORIZON` of the ``budget`` of sweeps."""
    if len(train_mse) < 2 or variance <= 0:
        return 0.0
    window = min(WINDOW, len(train_mse) - 1)
    rate = (train_mse[-1 - window] - train_mse[-1]) / window
    return max(rate * HORIZON * budget / variance, 0.0)


@dataclass
class _Track:
    """One model's course: its history, the best validation MSE so far and whether it has stopped."""

    variance: float  # of its training targets
    history: list[tuple[int, float, float]] = field(default_factory=list)  # (sweep, train_mse, val_mse)
    best: float = math.inf
    best_sweep: int = 0
    since: int = 0  # sweeps since the best
    gain: float = 0.0  # unfinished_r2
    stopped: bool = False

    def observe(self, sweep: int, train_mse: float, val_mse: float, solver: Solver, budget: int) -> bool:
        """Record a sweep (and whether the model stops after it); whether it improved the validation MSE."""
        self.history.append((sweep, train_mse, val_mse))
        improved = val_mse < self.best * (1 - solver.min_delta)
        if improved:
            self.best, self.best_sweep, self.since = val_mse, sweep, 0
        else:
            self.since += 1
        self.gain = unfinished_r2([h[1] for h in self.history[-WINDOW - 1 :]], solver.sweeps, self.variance)
        plateau = solver.patience is not None and self.since >= solver.patience
        self.stopped = sweep < budget and (plateau or (sweep > WINDOW and self.gain < STOP_BELOW))
        return improved


def _fit(
    family: Family,
    layout: Layout,
    train: list[tuple[torch.Tensor, torch.Tensor]],
    validation: list[tuple[torch.Tensor, torch.Tensor]],
    seeds: list[int],
    solver: Solver,
    width: int,
) -> StackFit:
    """Fit model i on ``train[i] = (slot rows, targets)``, selected on ``validation[i]``, all at once."""
    tracks = [_Track(float(y.to(DTYPE).var(0, unbiased=False).mean())) for _, y in train]
    design, held = Design.of(Scenes.pad(train), family, layout), Scenes.pad(validation)
    ids = torch.arange(len(train), device=held.y.device)
    m, n, slots = design.scenes.rows.shape
    with threads_for(slots * m * n * width * width):  # the slot solves' normal matrices, all models at once
        model = _best_starts(family, layout, design, held, seeds, solver, width)
        selected, final = model.take(ids), model.take(ids)
        active = ids  # the models still in the batch
        budget = 1 if family.name == "additive" else solver.sweeps  # one exact solve
        for sweep in range(1, budget + 1):
            mse = zip(active.tolist(), model.sweep(design, solver.ridge).tolist(), model.mse(held).tolist())
            improved = [tracks[g].observe(sweep, t, v, solver, budget) for g, t, v in mse]
            if any(improved):
                better = torch.tensor(improved, device=ids.device)
                selected.put(active[better], model, better)
            stopped = torch.tensor([tracks[g].stopped for g in active.tolist()], device=ids.device)
            if bool(stopped.any()):  # frozen: out of the batch
                final.put(active[stopped], model, stopped)
                live = ~stopped
                model, design, held, active = model.take(live), design.take(live), held.take(live), active[live]
            if not len(active):
                break
        final.put(active, model, torch.arange(len(active)))
    additive = family.name == "additive"
    return StackFit(
        selected.params(),
        final.params(),
        np.array([t.best_sweep for t in tracks]),
        np.array([len(t.history) for t in tracks]),
        np.array([t.best for t in tracks]),
        [(g, sweep, t, v) for g, track in enumerate(tracks) for sweep, t, v in track.history],
        np.array([t.stopped or additive or (len(t.history) >= 2 and t.gain < CONVERGED_BELOW) for t in tracks]),
        np.array([t.gain for t in tracks]),
        np.array([t.stopped for t in tracks]),
    )


def fit_one(
    family: Family,
    layout: Layout,
    train: tuple[torch.Tensor, torch.Tensor],
    validation: tuple[torch.Tensor, torch.Tensor],
    seed: int,
    solver: Solver,
    width: int,
) -> OneFit:
    """Fit one table-family model on ``train = (slot rows, targets)``, selected on ``validation`` (a stack of one)."""
    fit = _fit(family, layout, [train], [validation], [seed], solver, width)
    return OneFit(
        {k: v[0] for k, v in fit.selected.items()},
        {k: v[0] for k, v in fit.final.items()},
        int(fit.best_epoch[0]),
        int(fit.epochs_run[0]),
        float(fit.best_val_mse[0]),
        bool(fit.converged[0]),
        float(fit.unfinished_r2[0]),
        bool(fit.stopped_early[0]),
        [(sweep, t, v) for _, sweep, t, v in fit.history],
    )


def fit_stack_exact(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    train: list[np.ndarray],
    validation: list[np.ndarray],
    seeds: list[int],
    solver: Solver,
    *,
    width: int,
) -> StackFit:
    """Fit ``len(seeds)`` table-family models exactly, model i on ``train[i]``, selected on
    ``validation[i]``; the result is stacked like :func:`~bindscope.analyses.complexity.fitters.adam.fit_stack`'s
    (epochs read as sweeps)."""
    require_scenes(train, validation)

    def scenes(parts: list[np.ndarray]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(data.rows[i], data.y[i]) for i in map(torch.as_tensor, parts)]

    return _fit(family, layout, scenes(train), scenes(validation), seeds, solver, width)
