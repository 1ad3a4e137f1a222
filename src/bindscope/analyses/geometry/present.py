"""The words of ``geometry``: the terminal's table (measures down, slot positions across) and the readings."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.base import Rows
from bindscope.analyses.geometry.summary import GeometrySummary, HeldOut, PositionNumbers
from bindscope.estimators.metrics import format_spread

SOURCES = {
    "single": "the single-object bank (each object alone)",
    "pos-avg": "position-averaged 2-object scenes (pos-avg)",
}
AXIS_METHODS = ("extremes", "least_squares")


def number(v: float | None, digits: int = 3) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def held_r2(node: HeldOut | None, r2: str) -> str:
    """A held-out R² cell (``r2``: ``r2_raw`` or ``r2_whitened``): "undetermined" where the seen objects
    determine no unseen one."""
    value = getattr(node, r2) if node is not None else None
    if value is None and node is not None and node.undetermined:
        return "undetermined"
    return format_spread(value)


def headline_rows(summary: GeometrySummary) -> Rows:
    """Measures down, slot positions across, a reference last."""
    positions = summary.positions
    names = ["objects"] if len(positions) == 1 else [f"slot {p + 1}" for p in range(len(positions))]
    f = summary.headline_fraction
    held = [p.held_out.get(f"{f:g}") for p in positions]
    rows: Rows = [(f"measure{sd_label(held)}", *names, "reference")]

    def add(label: str, cells: list[str], ref: str) -> None:
        rows.append((label, *cells, ref))

    add("factorization R² (all objects)", [number(p.r2) for p in positions], "1 = exactly additive")
    add("  whitened", [number(p.r2_whitened) for p in positions], "")
    add(f"held-out R² (f={f:g})", [held_r2(h, "r2_raw") for h in held], "<= 0: no better than the mean")
    add("  whitened", [held_r2(h, "r2_whitened") for h in held], "")
    chances = sorted(summary.chance.items(), key=lambda kv: kv[0] != "object")  # the object first
    unseen = next((h.objects for h in held if h is not None), None)
    for group, ref in chances:
        label = f"linear head {group} acc (f={f:g})" if group == "object" else f"  {group} acc"
        cases = f"; n = {unseen} unseen objects per slot and seed" if group == "object" and unseen else ""
        add(label, [format_spread(h.heads.get(group) if h else None, 3) for h in held], f"chance {ref:.3f}{cases}")
    add("|cos| within concepts", [number(p.orthogonality.within) for p in positions], "")
    add("|cos| across concepts", [number(p.orthogonality.across) for p in positions], "0 = orthogonal")
    for c, info in summary.concepts.items():
        cells = [f"{number(p.concepts[c].numerical, 0)} / {number(p.concepts[c].effective, 1)}" for p in positions]
        add(f"rank {c} (numerical / effective)", cells, f"max {info.values - 1}")
    add("sum of concept ranks", [number(p.rank_sum, 0) for p in positions], f"width D = {summary.dim}")
    for c in [c for c, info in summary.concepts.items() if info.ordinal]:
        for method in AXIS_METHODS:
            cells, perfect = rank_axis_cells(positions, c, method)
            add(f"rank axis {c} Spearman, {method.replace('_', ' ')}", cells, perfect)
    if summary.mds is not None:
        add(
            "MDS normalised stress",
            [number(summary.mds.normalized_stress, 4)] + [""] * (len(positions) - 1),
            "0 = exact",
        )
    return rows


def sd_label(held: list[HeldOut | None]) -> str:
    """What a ``±`` in the table means: `` (± sd over 3 seeds)``; nothing for one seed (no ± is shown)."""
    seeds = max((s.n_seeds for h in held if h is not None for s in [*h.heads.values(), h.r2_raw] if s), default=0)
    return f" (± sd over {seeds} seeds)" if seeds > 1 else ""


def rank_axis_cells(positions: list[PositionNumbers], concept: str, method: str) -> tuple[list[str], str]:
    """Per slot, the held-out Spearman of a rank axis (from the fewest labelled objects; least squares: the
    most), and the perfect order's Spearman as the reference."""
    cells, ceiling = [], None
    for p in positions:
        per_n = p.rank_axes.get(concept, {}).get(method, {})
        n = max(per_n, key=int) if method == "least_squares" and per_n else min(per_n, key=int, default=None)
        cells.append(format_spread(per_n[n]["spearman"]) + f" (n={n})" if n else "-")
        ceiling = ceiling or (per_n[n]["spearman_ceiling"].mean if n else None)
    return cells, f"perfect order: {ceiling:.3f}" if ceiling is not None else ""


def notes_lines(summary: GeometrySummary) -> list[str]:
    """The readings: where the object vectors come from, and what is absent (rank axes, the MDS picture)."""
    lines = [f"object vectors: {SOURCES[summary.source]}; {summary.objects:,} objects, width {summary.dim}"]
    if not any(info.ordinal for info in summary.concepts.values()):
        lines.append("rank axes: absent, no ordinal concept (mark one in the space, or pass --ordinal CONCEPT)")
    m = summary.mds
    if m is None:
        lines.append(f"MDS picture: absent, {summary.mds_absent}")
    else:
        lines.append(
            f"MDS picture of ({', '.join(m.quad)}): {m.points} points, {m.composites} composites"
            + ("" if m.composites else " (no 2-object scene embeddings given)")
        )
    return lines
