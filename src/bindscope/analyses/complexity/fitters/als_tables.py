"""The exact protocol's table-family models (:class:`TableModels`): M models of one family in float64, with
their closed-form block solves (the output layer, each slot's table) and the scale rebalancing between sweeps."""

from __future__ import annotations

import copy
import functools
import operator

import torch

from bindscope.analyses.complexity.families import Family, Layout, Params, gather_rows
from bindscope.analyses.complexity.fitters.als_design import DTYPE, Design, Scenes, slot_rows
from bindscope.core.errors import BindscopeError


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
        self.slot_rows = slot_rows(layout)
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
