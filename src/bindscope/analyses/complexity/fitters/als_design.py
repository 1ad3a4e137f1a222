"""What the exact protocol's block solves read of M models' training scenes, fixed while the parameters move:
the scenes padded to one set (:class:`Scenes`), the folded additive tables' row counts (:class:`RowCounts`) and
each slot's scenes by value (:class:`ByValue`), together a :class:`Design`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family, Layout

DTYPE = torch.float64


def one_hot_rows(rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Scenes x table rows, the count of each row among a scene's slots (float64): ``[..., S]`` -> ``[..., R]``."""
    out = torch.zeros(*rows.shape[:-1], num_rows, dtype=DTYPE, device=rows.device)
    return out.scatter_add_(-1, rows, torch.ones_like(rows, dtype=DTYPE))


def slot_rows(layout: Layout) -> list[tuple[int, int]]:
    """The table rows ``first, end`` of every slot, in slot order."""
    bounds = np.cumsum([0, *(list(layout.sizes) * layout.num_slots)]).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


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
        slots = slot_rows(layout) if family.name != "additive" else []
        by_value = [ByValue.of(scenes, s, first, end) for s, (first, end) in enumerate(slots)]
        return cls(scenes, y_mean, y_centred, counts, by_value)

    def take(self, index: torch.Tensor) -> Design:
        """Models ``index`` (copies)."""
        counts = None if self.counts is None else self.counts.take(index)
        by_value = [v.take(index) for v in self.by_value]
        return Design(self.scenes.take(index), self.y_mean[index], self.y_centred[index], counts, by_value)
