"""Exact block fits of the table families (docs/method.md §6): alternating least squares.

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
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.complexity.approxfit import CONVERGED_BELOW, SceneIndex, StackFit, require_scenes
from bindscope.analyses.complexity.approximators import Family, Layout, Params, init_params
from bindscope.analyses.probes import threads_for
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_STEPS

DTYPE = torch.float64
#: The projected R² gain below which a fit stops before its budget (it converges below
#: :data:`~bindscope.analyses.complexity.approxfit.CONVERGED_BELOW`).
STOP_BELOW = 0.001
#: Sweeps over which the training loss's recent fall is measured.
WINDOW = 10
#: The projection's horizon, as a share of the sweep budget.
HORIZON = 0.5
#: Every other start draws its tables as ``1 + NEAR_ONE * N(0, 1)`` instead of ``N(0, 1)``.
NEAR_ONE = 0.1


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


# -- linear algebra -------------------------------------------------------------------------------------
def _ridge(gram: torch.Tensor, ridge: float) -> torch.Tensor:
    """``gram + ridge * mean(diag) * I`` in place (batched over leading axes)."""
    diagonal = torch.diagonal(gram, dim1=-2, dim2=-1)
    diagonal.add_(ridge * diagonal.mean(-1, keepdim=True).clamp_min(1e-30))
    return gram


def _solve_sym(gram: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Solve symmetric positive definite systems; least squares where Cholesky fails."""
    chol, info = torch.linalg.cholesky_ex(gram)
    if not bool((info != 0).any()):
        return torch.cholesky_solve(rhs, chol)
    return torch.linalg.lstsq(gram, rhs).solution


def centred_solve(x: torch.Tensor, y: torch.Tensor, ridge: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Least squares ``y ~ x @ coef + intercept`` (ridge on ``coef`` only): ``coef [p, D]``, ``intercept [D]``."""
    mx, my = x.mean(0), y.mean(0)
    xc = x - mx
    coef = _solve_sym(_ridge(xc.T @ xc, ridge), xc.T @ (y - my))
    return coef, my - mx @ coef


def factor(folded: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``folded [R, D] ~= table [R, width] @ w^T`` with ``w [D, width]``: exact when ``width`` reaches
    the rank, else the best rank-``width`` approximation (truncated SVD)."""
    u, s, vh = torch.linalg.svd(folded, full_matrices=False)
    k = min(width, len(s))
    table = folded.new_zeros(folded.shape[0], width)
    w = folded.new_zeros(folded.shape[1], width)
    table[:, :k] = u[:, :k] * s[:k]
    w[:, :k] = vh[:k].T
    return table, w


def one_hot_rows(rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Scenes x table rows, the count of each row among a scene's slots (float64)."""
    out = torch.zeros(len(rows), num_rows, dtype=DTYPE, device=rows.device)
    return out.scatter_add_(1, rows, torch.ones_like(rows, dtype=DTYPE))


# -- the model ----------------------------------------------------------------------------------------
class TableModel:
    """One table-family model, in float64, with its block solves."""

    def __init__(self, family: Family, layout: Layout, params: Params, width: int) -> None:
        if family.name == "mlp":
            raise BindscopeError("the exact protocol fits the table families; the MLP is fitted by Adam")
        self.family, self.layout, self.width = family, layout, width
        self.table = params["table"].to(DTYPE).clone()
        self.w = params["w"].to(DTYPE)[:, :width].clone()
        self.b = params["b"].to(DTYPE).clone()
        self.folded_add: torch.Tensor | None = None  # additive tables folded with their W: [R, D]
        if family.name == "additive":
            self.folded_add, self.w = self.table @ self.w.T, self.w[:, :0]
            self.table = self.table[:, :0]
        elif family.name == "sum_mult":
            self.folded_add = params["table_add"].to(DTYPE) @ params["w"].to(DTYPE)[:, width:].T
        c = layout.num_concepts
        sizes = list(layout.sizes) * layout.num_slots
        starts = np.cumsum([0, *sizes])
        self.slot_rows = [torch.arange(int(a), int(b), device=self.b.device) for a, b in zip(starts[:-1], starts[1:])]
        self._values: tuple[torch.Tensor, list[ByValue]] | None = None  # scenes by slot value, for the last rows
        if family.name == "mult_within_object":
            self.groups = [list(range(k * c, (k + 1) * c)) for k in range(layout.num_slots)]
        elif family.name == "additive":
            self.groups = []
        else:
            self.groups = [list(range(len(sizes)))]

    # the function
    def _products(self, rows: torch.Tensor) -> list[torch.Tensor]:
        return [functools.reduce(operator.mul, [self.table[rows[:, s]] for s in g]) for g in self.groups]

    def _features(self, rows: torch.Tensor) -> torch.Tensor:
        products = self._products(rows)
        if not products:
            return torch.zeros(len(rows), 0, dtype=DTYPE, device=rows.device)
        return functools.reduce(operator.add, products)

    def _additive(self, rows: torch.Tensor) -> torch.Tensor | float:
        return 0.0 if self.folded_add is None else self.folded_add[rows].sum(1)

    def predict(self, rows: torch.Tensor) -> torch.Tensor:
        """Predicted embeddings ``[n, D]`` of scenes with slot rows ``rows [n, S]``."""
        return self._features(rows) @ self.w.T + self.b + self._additive(rows)

    def mse(self, rows: torch.Tensor, y: torch.Tensor) -> float:
        """Mean squared error over the scenes and embedding dimensions."""
        return float(((self.predict(rows) - y) ** 2).mean())

    # the blocks
    def solve_output(self, rows: torch.Tensor, y: torch.Tensor, ridge: float) -> None:
        """``W``, ``b`` (and the folded additive tables) given the product tables."""
        z = self._features(rows)
        if self.folded_add is None:
            coef, self.b = centred_solve(z, y, ridge)
            self.w = coef.T.contiguous()
            return
        onehot = one_hot_rows(rows, self.folded_add.shape[0])
        seen = onehot.sum(0) > 0  # rows never seen keep their initial function
        coef, self.b = centred_solve(torch.cat([z, onehot[:, seen]], 1), y, ridge)
        self.w = coef[: z.shape[1]].T.contiguous()
        self.folded_add[seen] = coef[z.shape[1] :]

    def solve_slot(self, slot: int, rows: torch.Tensor, y: torch.Tensor, by_value: ByValue, ridge: float) -> None:
        """Slot ``slot``'s table rows given everything else: one ``d x d`` solve per value it takes, all
        values' normal matrices built in one batched product."""
        g = next(i for i, grp in enumerate(self.groups) if slot in grp)
        others = [self.table[rows[:, s]] for s in self.groups[g] if s != slot]
        p = functools.reduce(operator.mul, others) if others else torch.ones_like(self.table[rows[:, slot]])
        rest = [z for i, z in enumerate(self._products(rows)) if i != g]
        resid = y - self.b - self._additive(rows)
        if rest:
            resid = resid - functools.reduce(operator.add, rest) @ self.w.T
        rhs_all = p * (resid @ self.w)  # [n, d]
        values, index, mask = by_value
        held = p[index] * mask[..., None]  # [V, m, d]: each value's scenes, zero-padded
        grams = torch.bmm(held.transpose(1, 2), held)
        grams.mul_(self.w.T @ self.w)
        rhs = (rhs_all[index] * mask[..., None]).sum(1)
        solution = _solve_sym(_ridge(grams, ridge), rhs[..., None])[..., 0]
        self.table[values] = solution

    def sweep(self, rows: torch.Tensor, y: torch.Tensor, ridge: float) -> None:
        """One ALS sweep: the output layer, every slot's table in turn, rebalance, the output layer."""
        self.solve_output(rows, y, ridge)
        if not self.groups:
            return
        if self._values is None or self._values[0] is not rows:
            self._values = (rows, [_by_value(rows, s) for grp in self.groups for s in grp])
        slots = [s for grp in self.groups for s in grp]
        for s, values in zip(slots, self._values[1]):
            self.solve_slot(s, rows, y, values, ridge)
        self.rebalance()
        self.solve_output(rows, y, ridge)

    def rebalance(self) -> None:
        """Unit-norm columns of ``W``, equal column norms across each product's factors (the function kept)."""
        if not self.groups:
            return
        scale = self.w.norm(dim=0).clamp_min(1e-150)  # [d]
        self.w /= scale
        for grp in self.groups:
            norms = torch.stack([self.table[self.slot_rows[s]].norm(dim=0) for s in grp]).clamp_min(1e-150)
            target = ((norms.log().sum(0) + scale.log()) / len(grp)).exp()
            for s, n in zip(grp, norms):
                self.table[self.slot_rows[s]] *= target / n

    def params(self) -> Params:
        """Parameters in the family's own layout (float32, no model axis)."""
        name = self.family.name
        if name == "additive":
            assert self.folded_add is not None  # the additive family is its folded table
            table, w = factor(self.folded_add, self.width)
            return {"table": table.float(), "w": w.float(), "b": self.b.float().clone()}
        out = {"table": self.table.float().clone(), "b": self.b.float().clone()}
        if self.folded_add is not None:  # sum_mult
            table_add, w_add = factor(self.folded_add, self.width)
            out["table_add"], out["w"] = table_add.float(), torch.cat([self.w, w_add], 1).float()
        else:
            out["w"] = self.w.float().clone()
        return out


def _start(
    family: Family, layout: Layout, y: torch.Tensor, seed: int, width: int, near_one: float | None = None
) -> TableModel:
    """A model initialised from ``seed``: N(0, 1) tables, or ``1 + near_one * N(0, 1)`` (a product
    near its first-order, additive expansion)."""
    init = {k: v[0] for k, v in init_params(family, layout, width, y.shape[1], [seed], str(y.device)).items()}
    if near_one is not None:
        init["table"] = 1.0 + near_one * init["table"]
    return TableModel(family, layout, init, width)


def start_seed(seed: int, start: int) -> int:
    """The initialisation seed of a model's ``start``-th start (its own seed first)."""
    return seed if start == 0 else int(np.random.default_rng([seed, start]).integers(2**31))


def _best_start(
    family: Family,
    layout: Layout,
    train: tuple[torch.Tensor, torch.Tensor],
    validation: tuple[torch.Tensor, torch.Tensor],
    seed: int,
    solver: Solver,
    width: int,
) -> TableModel:
    """The start with the lowest validation MSE after ``solver.start_sweeps`` sweeps (product families).

    Starts alternate between N(0, 1) tables (the family's initialisation; the model's own seed
    first) and tables near one, whose product starts near its additive expansion: zero-mean
    products and mean-one products sit in different basins, and ALS from one rarely reaches the
    other. Validation scenes come from the training objects, never from the test ones.
    """
    rows, y = train
    if family.name == "additive":
        return _start(family, layout, y, seed, width)
    best, best_mse = None, np.inf
    for k in range(solver.starts):
        model = _start(family, layout, y, start_seed(seed, k), width, near_one=NEAR_ONE if k % 2 else None)
        for _ in range(solver.start_sweeps):
            model.sweep(rows, y, solver.ridge)
        mse = model.mse(*validation)
        if mse < best_mse:
            best, best_mse = model, mse
    assert best is not None
    return best


#: The rows one slot takes ``[V]``, and the scenes holding each ``[V, m]`` (zero-padded) with a mask.
ByValue = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _by_value(rows: torch.Tensor, slot: int) -> ByValue:
    """Every row slot ``slot`` takes, the scenes holding it (padded to the most frequent row's count)
    and a mask of the real ones."""
    col = rows[:, slot]
    order = torch.argsort(col, stable=True)
    values, counts = torch.unique_consecutive(col[order], return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    width = int(counts.max())
    offset = torch.arange(width, device=rows.device)
    mask = offset[None, :] < counts[:, None]
    index = order[torch.where(mask, starts[:, None] + offset[None, :], 0)]
    return values, index, mask.to(DTYPE)


def unfinished_r2(train_mse: list[float], budget: int, variance: float) -> float:
    """R² the training loss would still gain at its recent rate of fall (over the last
    :data:`WINDOW` sweeps) during another :data:`HORIZON` of the ``budget`` of sweeps."""
    if len(train_mse) < 2 or variance <= 0:
        return 0.0
    window = min(WINDOW, len(train_mse) - 1)
    rate = (train_mse[-1 - window] - train_mse[-1]) / window
    return max(rate * HORIZON * budget / variance, 0.0)


def fit_one(
    family: Family,
    layout: Layout,
    train: tuple[torch.Tensor, torch.Tensor],
    validation: tuple[torch.Tensor, torch.Tensor],
    seed: int,
    solver: Solver,
    width: int,
) -> OneFit:
    """Fit one table-family model on ``train = (slot rows, targets)``, selected on ``validation``."""
    rows, y = train[0], train[1].to(DTYPE)
    val_rows, val_y = validation[0], validation[1].to(DTYPE)
    model = _best_start(family, layout, (rows, y), (val_rows, val_y), seed, solver, width)
    variance = float(y.var(0, unbiased=False).mean())
    history: list[tuple[int, float, float]] = []
    best, best_sweep, since = np.inf, 0, 0
    selected = model.params()
    budget = 1 if family.name == "additive" else solver.sweeps  # one exact solve
    gain, stopped = 0.0, False
    for sweep in range(1, budget + 1):
        model.sweep(rows, y, solver.ridge)
        train_mse, val_mse = model.mse(rows, y), model.mse(val_rows, val_y)
        history.append((sweep, train_mse, val_mse))
        if val_mse < best * (1 - solver.min_delta):
            best, best_sweep, since, selected = val_mse, sweep, 0, model.params()
        else:
            since += 1
        gain = unfinished_r2([h[1] for h in history], solver.sweeps, variance)
        plateau = solver.patience is not None and since >= solver.patience
        if sweep < budget and (plateau or (sweep > WINDOW and gain < STOP_BELOW)):
            stopped = True
            break
    measured = len(history) >= 2  # a rate of fall needs two sweeps
    converged = stopped or family.name == "additive" or (measured and gain < CONVERGED_BELOW)
    return OneFit(selected, model.params(), best_sweep, sweep, best, converged, gain, stopped, history)


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
    ``validation[i]``; the result is stacked like :func:`~bindscope.analyses.complexity.approxfit.fit_stack`'s
    (epochs read as sweeps)."""
    require_scenes(train, validation)
    fits = []
    n = max((len(t) for t in train), default=0)
    with threads_for(n * width * width):
        for part, held, seed in zip(train, validation, seeds):
            fit_idx, val_idx = torch.as_tensor(part), torch.as_tensor(held)
            fits.append(
                fit_one(
                    family,
                    layout,
                    (data.rows[fit_idx], data.y[fit_idx]),
                    (data.rows[val_idx], data.y[val_idx]),
                    seed,
                    solver,
                    width,
                )
            )
    device = data.y.device

    def stacked(which: str) -> Params:
        return {k: torch.stack([getattr(f, which)[k] for f in fits]).to(device) for k in fits[0].selected}

    return StackFit(
        stacked("selected"),
        stacked("final"),
        np.array([f.best_sweep for f in fits]),
        np.array([f.sweeps_run for f in fits]),
        np.array([f.best_val_mse for f in fits]),
        [(g, sweep, t, v) for g, f in enumerate(fits) for sweep, t, v in f.history],
        np.array([f.converged for f in fits]),
        np.array([f.unfinished_r2 for f in fits]),
        np.array([f.stopped_early for f in fits]),
    )
