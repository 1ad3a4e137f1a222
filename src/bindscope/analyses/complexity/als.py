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

A stack's models are fitted together, and their starts: every tensor has a leading model axis,
each model's scenes are padded to the stack's largest set with weight 0, and every block solve is
one system per model (per model and value for a slot's rows) with that model's own ridge, so a
model's fit does not depend on the stack it is in. Models that stop leave the batch.
"""

from __future__ import annotations

import copy
import functools
import math
import operator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from bindscope.analyses.complexity.approxfit import CONVERGED_BELOW, SceneIndex, StackFit, require_scenes
from bindscope.analyses.complexity.approximators import Family, Layout, Params, gather_rows, init_params
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_STEPS
from bindscope.estimators.probes import threads_for

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


# -- linear algebra -------------------------------------------------------------------------------------
def _ridge(gram: torch.Tensor, ridge: float, keep: torch.Tensor | None = None) -> torch.Tensor:
    """``gram + ridge * mean(diag) * I`` in place (batched over leading axes). With ``keep [..., p]``
    the mean runs over the kept columns, and the others (zero rows and columns) become identity
    columns, which solve to 0."""
    diagonal = torch.diagonal(gram, dim1=-2, dim2=-1)
    if keep is None:
        mean = diagonal.mean(-1, keepdim=True)
    else:  # the other columns' diagonal is zero
        mean = diagonal.sum(-1, keepdim=True) / keep.sum(-1, keepdim=True)
    diagonal.add_(ridge * mean.clamp_min(1e-30))
    if keep is not None:
        diagonal.masked_fill_(~keep, 1.0)
    return gram


def _solve_sym(gram: torch.Tensor, rhs: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Solve symmetric positive definite systems ``[..., p, p]``; least squares for each one where
    Cholesky fails (with ``keep [M, p]``, on its kept columns alone, the others 0)."""
    chol, info = torch.linalg.cholesky_ex(gram)
    solution = torch.cholesky_solve(rhs, chol)
    failed = info != 0
    if keep is None:
        if bool(failed.any()):
            solution[failed] = torch.linalg.lstsq(gram[failed], rhs[failed]).solution
        return solution
    for i in failed.nonzero()[:, 0].tolist():
        k = keep[i]
        solution[i] = 0.0
        solution[i, k] = torch.linalg.lstsq(gram[i][k][:, k], rhs[i, k]).solution
    return solution


def factor(folded: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``folded [M, R, D] ~= table [M, R, width] @ w^T`` with ``w [M, D, width]``, per model: exact when
    ``width`` reaches the rank, else the best rank-``width`` approximation (truncated SVD)."""
    u, s, vh = torch.linalg.svd(folded, full_matrices=False)
    k = min(width, s.shape[-1])
    m, rows, dim = folded.shape
    table, w = folded.new_zeros(m, rows, width), folded.new_zeros(m, dim, width)
    table[..., :k] = u[..., :k] * s[:, None, :k]
    w[..., :k] = vh[:, :k].transpose(1, 2)
    return table, w


def one_hot_rows(rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Scenes x table rows, the count of each row among a scene's slots (float64): ``[..., S]`` -> ``[..., R]``."""
    out = torch.zeros(*rows.shape[:-1], num_rows, dtype=DTYPE, device=rows.device)
    return out.scatter_add_(-1, rows, torch.ones_like(rows, dtype=DTYPE))


def _slot_rows(layout: Layout) -> list[tuple[int, int]]:
    """The table rows ``first, end`` of every slot, in slot order."""
    bounds = np.cumsum([0, *(list(layout.sizes) * layout.num_slots)]).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


# -- the scenes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenes:
    """The scenes of M models, padded to the largest set: slot rows ``[M, n, S]`` (padding: row 0),
    targets ``[M, n, D]`` (float64, padding 0) and weights ``[M, n]`` (1 a scene, 0 padding)."""

    rows: torch.Tensor
    y: torch.Tensor
    weight: torch.Tensor

    @classmethod
    def pad(cls, parts: list[tuple[torch.Tensor, torch.Tensor]]) -> Scenes:
        """Each model's ``(slot rows [n_i, S], targets [n_i, D])``, stacked."""
        (rows0, y0), n = parts[0], max(len(r) for r, _ in parts)
        rows = rows0.new_zeros(len(parts), n, rows0.shape[1])
        y = torch.zeros(len(parts), n, y0.shape[1], dtype=DTYPE, device=y0.device)
        weight = torch.zeros(len(parts), n, dtype=DTYPE, device=y0.device)
        for i, (r, t) in enumerate(parts):
            rows[i, : len(r)], y[i, : len(r)], weight[i, : len(r)] = r, t, 1.0
        return cls(rows, y, weight)

    def take(self, index: torch.Tensor) -> Scenes:
        """Models ``index`` (copies)."""
        return Scenes(self.rows[index], self.y[index], self.weight[index])

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """Each model's mean of ``x [M, n, k]`` over its scenes: ``[M, k]``."""
        return (self.weight[:, None] @ x)[:, 0] / self.weight.sum(1, keepdim=True)


@dataclass(frozen=True)
class RowCounts:
    """The folded additive tables' design columns: each scene's count of every table row, centred per
    model (padding 0), with the rows each model sees and the output solve's fixed blocks."""

    seen: torch.Tensor  # [M, R]
    mean: torch.Tensor  # [M, R]
    centred: torch.Tensor  # [M, n, R]
    gram: torch.Tensor  # [M, R, R]
    rhs: torch.Tensor  # [M, R, D], against the centred targets

    @classmethod
    def of(cls, scenes: Scenes, num_rows: int, y_centred: torch.Tensor) -> RowCounts:
        counts = one_hot_rows(scenes.rows, num_rows) * scenes.weight[..., None]
        mean = scenes.mean(counts)
        centred = (counts - mean[:, None]) * scenes.weight[..., None]
        across = centred.transpose(1, 2)
        return cls(counts.sum(1) > 0, mean, centred, across @ centred, across @ y_centred)

    def take(self, index: torch.Tensor) -> RowCounts:
        """Models ``index`` (copies)."""
        return RowCounts(self.seen[index], self.mean[index], self.centred[index], self.gram[index], self.rhs[index])


class ByValue(NamedTuple):
    """Per model, the scenes by their value in one slot: each scene's value ``value [M, n]`` (padding
    ``V``), each value's scenes ``members [M, V, m]`` (padded with scene ``n``) and whether a value is
    held at all ``seen [M, V]`` (a value is a row of the slot's table)."""

    value: torch.Tensor
    members: torch.Tensor
    seen: torch.Tensor

    @classmethod
    def of(cls, scenes: Scenes, slot: int, first: int, end: int) -> ByValue:
        """Slot ``slot``, whose rows are ``first .. end - 1``."""
        size, n = end - first, scenes.rows.shape[1]
        value = torch.where(scenes.weight > 0, scenes.rows[:, :, slot] - first, size)
        order = torch.argsort(value, dim=1, stable=True)
        counts = torch.zeros(len(value), size + 1, dtype=value.dtype, device=value.device)
        counts = counts.scatter_add_(1, value, torch.ones_like(value))[:, :size]
        offset = torch.arange(int(counts.max()), device=value.device)
        at = (counts.cumsum(1) - counts)[..., None] + offset  # each row's scenes, in scene order
        real = offset < counts[..., None]
        members = torch.where(real, order.gather(1, at.clamp_max(n - 1).flatten(1)).view(at.shape), n)
        return cls(value, members, counts > 0)

    def take(self, index: torch.Tensor) -> ByValue:
        """Models ``index`` (copies)."""
        return ByValue(self.value[index], self.members[index], self.seen[index])


@dataclass(frozen=True)
class Design:
    """What the block solves need of M models' training scenes, fixed while the parameters move."""

    scenes: Scenes
    y_mean: torch.Tensor  # [M, D]
    y_centred: torch.Tensor  # [M, n, D], padding 0
    counts: RowCounts | None  # families with folded additive tables
    by_value: list[ByValue]  # per slot, product families

    @classmethod
    def of(cls, scenes: Scenes, family: Family, layout: Layout) -> Design:
        y_mean = scenes.mean(scenes.y)
        y_centred = (scenes.y - y_mean[:, None]) * scenes.weight[..., None]
        folded = family.name in ("additive", "sum_mult")
        counts = RowCounts.of(scenes, layout.num_rows, y_centred) if folded else None
        slots = _slot_rows(layout) if family.name != "additive" else []
        by_value = [ByValue.of(scenes, s, first, end) for s, (first, end) in enumerate(slots)]
        return cls(scenes, y_mean, y_centred, counts, by_value)

    def take(self, index: torch.Tensor) -> Design:
        """Models ``index`` (copies)."""
        counts = None if self.counts is None else self.counts.take(index)
        by_value = [v.take(index) for v in self.by_value]
        return Design(self.scenes.take(index), self.y_mean[index], self.y_centred[index], counts, by_value)


def _product(e: list[torch.Tensor], slots: list[int] | range) -> torch.Tensor:
    """The elementwise product ``[M, n, d]`` of the slots' table rows ``e[s] [M, n, d]`` (ones if none)."""
    factors = [e[s] for s in slots]
    return functools.reduce(operator.mul, factors) if factors else torch.ones_like(e[0])


# -- the models ---------------------------------------------------------------------------------------
class TableModels:
    """M table-family models of one family (a leading model axis), in float64, with their block solves."""

    def __init__(self, family: Family, layout: Layout, params: Params, width: int) -> None:
        if family.name == "mlp":
            raise BindscopeError("the exact protocol fits the table families; the MLP is fitted by Adam")
        self.family, self.width = family, width
        w = params["w"].to(DTYPE)
        self.table = params["table"].to(DTYPE, copy=True)
        self.w = w[..., :width].clone()
        self.b = params["b"].to(DTYPE, copy=True)
        self.folded_add: torch.Tensor | None = None  # additive tables folded with their W: [M, R, D]
        if family.name == "additive":
            self.folded_add = self.table @ self.w.transpose(1, 2)
            self.table, self.w = self.table[..., :0], self.w[..., :0]
        elif family.name == "sum_mult":
            self.folded_add = params["table_add"].to(DTYPE) @ w[..., width:].transpose(1, 2)
        self.products = family.name != "additive"
        self.solved = False  # whether W, b (and the folded tables) are solved for the current product tables
        self.slot_rows = _slot_rows(layout)
        slots = len(self.slot_rows)
        size = layout.num_concepts if family.name == "mult_within_object" else slots
        self.groups = [range(k, k + size) for k in range(0, slots, size)]  # each product's slots
        sizes = torch.tensor([end - first for first, end in self.slot_rows], device=self.b.device)
        self.row_slot = torch.repeat_interleave(torch.arange(slots, device=self.b.device), sizes)  # [R]

    def take(self, index: torch.Tensor) -> TableModels:
        """Models ``index`` (copies)."""
        out = copy.copy(self)
        out.table, out.w, out.b = self.table[index], self.w[index], self.b[index]
        out.folded_add = None if self.folded_add is None else self.folded_add[index]
        return out

    def put(self, at: torch.Tensor, source: TableModels, which: torch.Tensor) -> None:
        """Set models ``at`` to ``source``'s models ``which``."""
        self.table[at], self.w[at], self.b[at] = source.table[which], source.w[which], source.b[which]
        if self.folded_add is not None:
            assert source.folded_add is not None  # the same family
            self.folded_add[at] = source.folded_add[which]

    # the function
    def embed(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """Per slot, the table rows ``[M, n, d]`` of scenes with slot rows ``rows [M, n, S]`` (a tensor per
        slot: large tensors cost page faults on every allocation)."""
        return [gather_rows(self.table, rows[:, :, s]) for s in range(rows.shape[2])]

    def _features(self, e: list[torch.Tensor]) -> torch.Tensor:
        """The sum of the products ``[M, n, d]`` of the scenes' table rows ``e``."""
        return functools.reduce(operator.add, [_product(e, group) for group in self.groups])

    def _additive(self, rows: torch.Tensor) -> torch.Tensor | float:
        if self.folded_add is None:
            return 0.0
        return functools.reduce(
            operator.add, [gather_rows(self.folded_add, rows[:, :, s]) for s in range(rows.shape[2])]
        )

    def predict(self, rows: torch.Tensor) -> torch.Tensor:
        """Predicted embeddings ``[M, n, D]`` of scenes with slot rows ``rows [M, n, S]``."""
        return self._features(self.embed(rows)) @ self.w.transpose(1, 2) + self.b[:, None] + self._additive(rows)

    def mse(self, scenes: Scenes) -> torch.Tensor:
        """Each model's mean squared error over its scenes and the embedding dimensions, ``[M]``."""
        err = (self.predict(scenes.rows) - scenes.y) ** 2
        return (err * scenes.weight[..., None]).sum((1, 2)) / (scenes.weight.sum(1) * err.shape[2])

    # the blocks
    def solve_output(self, design: Design, ridge: float) -> torch.Tensor:
        """``W``, ``b`` (and the folded additive tables) given the product tables; each model's training MSE."""
        scenes, counts = design.scenes, design.counts
        z = self._features(self.embed(scenes.rows))
        mean = scenes.mean(z)
        x = z.sub_(mean[:, None]).mul_(scenes.weight[..., None])  # centred (in place: z is new), padding 0
        gram, rhs, keep = x.transpose(1, 2) @ x, x.transpose(1, 2) @ design.y_centred, None
        if counts is not None:  # rows never seen keep their initial function
            cross = x.transpose(1, 2) @ counts.centred
            gram = torch.cat([torch.cat([gram, cross], 2), torch.cat([cross.transpose(1, 2), counts.gram], 2)], 1)
            rhs, mean = torch.cat([rhs, counts.rhs], 1), torch.cat([mean, counts.mean], 1)
            keep = torch.cat([counts.seen.new_ones(len(z), z.shape[2]), counts.seen], 1)
        coef = _solve_sym(_ridge(gram, ridge, keep), rhs, keep)
        d = z.shape[2]
        self.w = coef[:, :d].transpose(1, 2).contiguous()
        self.b = design.y_mean - (mean[:, None] @ coef)[:, 0]
        err = torch.baddbmm(design.y_centred, x, coef[:, :d], beta=-1)  # the fit, centred like the targets
        if counts is not None:
            assert self.folded_add is not None  # a family with row counts folds its additive tables
            self.folded_add = torch.where(counts.seen[..., None], coef[:, d:], self.folded_add)
            err.baddbmm_(counts.centred, coef[:, d:])
        self.solved = True
        return err.square_().sum((1, 2)) / (scenes.weight.sum(1) * err.shape[2])

    def _residual(self, design: Design) -> torch.Tensor:
        """``(y - b - additive tables) @ W`` of the training scenes, ``[M, n, d]`` (padding arbitrary)."""
        offset, out = design.y_mean - self.b, design.y_centred @ self.w
        if self.folded_add is not None:
            assert design.counts is not None  # a family that folds its additive tables has row counts
            offset = offset - (design.counts.mean[:, None] @ self.folded_add)[:, 0]
            out.baddbmm_(design.counts.centred, self.folded_add @ self.w, alpha=-1)
        return out.add_(offset[:, None] @ self.w)

    def solve_tables(self, design: Design, ridge: float) -> None:
        """Every slot's table in turn given everything else (the other products held in the residual)."""
        e = self.embed(design.scenes.rows)
        wtw = self.w.transpose(1, 2) @ self.w
        resid = self._residual(design)
        for g, group in enumerate(self.groups):
            others = [_product(e, other) for k, other in enumerate(self.groups) if k != g]
            rest = torch.baddbmm(resid, functools.reduce(operator.add, others), wtw, alpha=-1) if others else resid
            for slot in group:
                self.solve_slot(slot, e, rest, wtw, design, ridge)
        self.solved = False

    def solve_slot(
        self, slot: int, e: list[torch.Tensor], resid: torch.Tensor, wtw: torch.Tensor, design: Design, ridge: float
    ) -> None:
        """Slot ``slot``'s table rows: one ``d x d`` solve per model and row, the normal matrices built in
        one batched product. ``e``, the scenes' table rows per slot, follows the table; ``resid [M, n, d]``
        is ``(y - b - additive tables - other products' W z) @ W``; ``wtw`` is ``W^T W``."""
        m, _, d = e[slot].shape
        p = _product(e, [k for k in next(g for g in self.groups if slot in g) if k != slot])  # [M, n, d]
        by = design.by_value[slot]
        held = gather_rows(torch.cat([p, p.new_zeros(m, 1, d)], 1), by.members)  # [M, V, m, d]: scene n is zeros
        grams = (held.transpose(2, 3) @ held) * wtw[:, None]
        values = by.seen.shape[1]
        at = (by.value + torch.arange(m, device=p.device)[:, None] * (values + 1)).flatten()
        rhs = p.new_zeros(m * (values + 1), d).index_add_(0, at, (p * resid).flatten(0, 1))
        grams = torch.where(by.seen[..., None, None], grams, torch.eye(d, dtype=DTYPE, device=p.device))
        solution = _solve_sym(_ridge(grams, ridge), rhs.view(m, values + 1, d, 1)[:, :values])[..., 0]
        first, end = self.slot_rows[slot]
        self.table[:, first:end] = torch.where(by.seen[..., None], solution, self.table[:, first:end])
        e[slot] = gather_rows(self.table, design.scenes.rows[:, :, slot])

    def sweep(self, design: Design, ridge: float) -> torch.Tensor:
        """One ALS sweep: every slot's table in turn, rebalance, the output layer (solved first as well
        when the tables are new); each model's training MSE after it."""
        if self.products:
            if not self.solved:
                self.solve_output(design, ridge)
            self.solve_tables(design, ridge)
            self.rebalance()
        return self.solve_output(design, ridge)

    def rebalance(self) -> None:
        """Unit-norm columns of ``W``, equal column norms across each product's factors (the function kept)."""
        if not self.products:
            return
        scale = self.w.norm(dim=1).clamp_min(1e-150)  # [M, d]
        self.w /= scale[:, None]
        m, _, d = self.table.shape
        squares = self.table.new_zeros(m, len(self.slot_rows), d).index_add_(1, self.row_slot, self.table**2)
        norms = squares.sqrt().clamp_min(1e-150)  # [M, S, d]
        size = len(self.groups[0])
        target = ((norms.log().view(m, -1, size, d).sum(2) + scale.log()[:, None]) / size).exp()
        self.table *= (target.repeat_interleave(size, 1) / norms)[:, self.row_slot]
        self.solved = False

    def params(self) -> Params:
        """Parameters in the family's own layout (float32, leading model axis)."""
        b = self.b.float()
        if self.family.name == "additive":
            assert self.folded_add is not None  # the additive family is its folded table
            table, w = factor(self.folded_add, self.width)
            return {"table": table.float(), "w": w.float(), "b": b}
        out = {"table": self.table.float(), "b": b}
        if self.folded_add is not None:  # sum_mult
            table_add, w_add = factor(self.folded_add, self.width)
            out["table_add"], out["w"] = table_add.float(), torch.cat([self.w, w_add], 2).float()
        else:
            out["w"] = self.w.float()
        return out


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
    ``validation[i]``; the result is stacked like :func:`~bindscope.analyses.complexity.approxfit.fit_stack`'s
    (epochs read as sweeps)."""
    require_scenes(train, validation)

    def scenes(parts: list[np.ndarray]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(data.rows[i], data.y[i]) for i in map(torch.as_tensor, parts)]

    return _fit(family, layout, scenes(train), scenes(validation), seeds, solver, width)
