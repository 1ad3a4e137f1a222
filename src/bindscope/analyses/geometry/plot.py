"""The figures of ``bindscope geometry``: factorization per concept, |cos| histogram, spectra, the
generalisation curve, rank axes, and the MDS picture (PNG, and interactive HTML with plotly)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.geometry.compute import GeometryResult
from bindscope.analyses.geometry.labels import label_points_3d
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file

#: What each figure shows, by file stem (the report's captions; a test checks every figure has one).
CAPTIONS = {
    "factorization": "How much of the object vectors' variance each concept's part explains, raw and whitened, "
    "per slot; the legend gives the factorization R² of a sum of per-concept parts.",
    "cosines": "|cos| between the components of one concept (within) and of two different concepts (across): "
    "mass near 0 across concepts means the concepts take orthogonal directions.",
    "spectra": "Each concept's singular values over its largest, on a log scale (first slot): how many "
    "directions a concept takes.",
    "generalization": "Left: accuracy of linear heads, fitted on the objects seen, on objects never seen, against "
    "the fraction of objects seen (mean and standard deviation over seeds; dotted: object chance). Right: R² of "
    "the factorization on the unseen objects, raw and whitened.",
    "rank_axes": "For each ordinal concept, the Spearman correlation on held-out objects of an axis fitted from "
    "a few labelled objects, against how many were labelled.",
    "mds": "Metric MDS in three dimensions of one quadruple of values: the attribute and noun means (B, C, R, S), "
    "the four objects they make, mean scene vectors of two objects and synthetic sums, from 1 - cos distances. "
    "Objects that bind sit apart from the sums of their parts.",
}

CATEGORY_STYLE = {
    "mean": ("#d62728", "s"),
    "simple": ("#1f77b4", "o"),
    "composite": ("#2ca02c", "^"),
    "synthetic": ("#9467bd", "x"),
}


def geometry_plots(result: GeometryResult, folder: Path, title: str) -> None:
    """Every figure of one geometry result into ``folder``."""
    table = result.table
    factorization_plot(table, folder / "factorization.png", title=title)
    cosine_plot(result.tables["cosines"], folder / "cosines.png", title=title)
    spectra_plot(result.tables["spectra"], folder / "spectra.png", title=title)
    generalization_plot(table, folder / "generalization.png", title=title)
    if table.variant.str.startswith("rank_axis:").any():
        rank_axis_plot(table, folder / "rank_axes.png", title=title)
    if result.mds is not None:
        label = ", ".join(f"{letter} = {name}" for letter, name in zip("BCRS", result.mds.quad))
        mds_plot(result.tables["mds_points"], folder / "mds.png", title=f"{title}: MDS of {label}")
        mds_html(result.tables["mds_points"], folder / "mds.html", title=f"{title}: MDS of {label}")


def factorization_plot(table: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Per slot, each concept's share of the object vectors' variance, raw and whitened; R² in the legend."""
    plt = pyplot()
    positions = sorted(p for p in table.position.unique() if p >= 0)
    fig, axes = plt.subplots(1, len(positions), figsize=(5 * len(positions), 3.8), squeeze=False)
    for ax, p in zip(axes[0], positions):
        part = table[(table.position == p) & (table.metric == "share")]
        concepts = list(dict.fromkeys(part.group))
        x = np.arange(len(concepts))
        for shift, variant, color in ((-0.2, "factorization", "#4c72b0"), (0.2, "factorization_whitened", "#dd8452")):
            rows = part[part.variant == variant].set_index("group")["value"]
            r2 = table[(table.position == p) & (table.variant == variant) & (table.metric == "r2")]["value"]
            label = f"{'raw' if variant == 'factorization' else 'whitened'} (R² {float(r2.iloc[0]):.3f})"
            ax.bar(x + shift, [rows.get(c, np.nan) for c in concepts], 0.4, color=color, label=label)
        ax.set_xticks(x, concepts)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("share of variance")
        ax.set_title("objects" if len(positions) == 1 else f"slot {p + 1}")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    return finish(fig, title, path)


def cosine_plot(cosines: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Histograms of |cos| between components of one concept and of different concepts."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    bins = np.linspace(0, 1, 41)
    for kind, color in (("within", "#4c72b0"), ("across", "#dd8452")):
        v = cosines[cosines.kind == kind]["abs_cos"]
        if len(v):
            ax.hist(v, bins=bins, alpha=0.6, density=True, color=color, label=f"{kind} concepts (mean {v.mean():.3f})")
    ax.set_xlabel("|cos| between concept components")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    return finish(fig, title, path)


def spectra_plot(spectra: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Each concept's singular values over the largest, log scale (slot 1)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    part = spectra[spectra.position == spectra.position.min()]
    for concept, rows in part.groupby("concept", sort=False):
        s = rows["singular_value"].to_numpy()
        ax.semilogy(np.arange(1, len(s) + 1), s / max(s.max(), 1e-30), "o-", ms=3, label=str(concept))
    ax.set_xlabel("index")
    ax.set_ylabel("singular value / largest")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return finish(fig, title, path)


def curve(ax: Any, part: pd.DataFrame, label: str, style: str) -> None:
    stats = part.groupby("fraction")["value"].agg(["mean", "std"]).reset_index()
    ax.errorbar(stats["fraction"], stats["mean"], yerr=stats["std"].fillna(0), fmt=style, capsize=3, label=label)


def generalization_plot(table: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Linear-head accuracy on unseen objects and held-out factorization R² against the fraction seen (slot 1)."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    part = table[table.position == 0]
    heads = part[part.variant == "heads"]
    for group in dict.fromkeys(heads.group):
        curve(left, heads[heads.group == group], str(group), "o-" if group == "object" else "o--")
    chance = table[(table.variant == "chance") & (table.group == "object")]["value"]
    if len(chance):
        left.axhline(float(chance.iloc[0]), color="k", ls=":", lw=1, label="object chance")
    left.set_ylim(-0.02, 1.02)
    left.set_xlabel("fraction of objects seen")
    left.set_ylabel("accuracy on unseen objects")
    left.set_title("linear heads")
    left.legend(fontsize=8)
    for variant, style in (("raw", "o-"), ("whitened", "s--")):
        curve(right, part[(part.variant == variant) & (part.metric == "r2_test")], variant, style)
    right.axhline(0, color="k", ls=":", lw=1)
    right.set_xlabel("fraction of objects seen")
    right.set_ylabel("held-out R²")
    right.set_title("factorization on unseen objects")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    return finish(fig, title, path)


def rank_axis_plot(table: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Held-out Spearman of each ordinal concept's axis against the number of labelled objects (slot 1)."""
    plt = pyplot()
    part = table[(table.position == 0) & table.variant.str.startswith("rank_axis:") & (table.metric == "spearman")]
    concepts = list(dict.fromkeys(part.group))
    fig, axes = plt.subplots(1, len(concepts), figsize=(5 * len(concepts), 3.8), squeeze=False)
    for ax, concept in zip(axes[0], concepts):
        for variant, style in (("rank_axis:extremes", "o-"), ("rank_axis:least_squares", "s--")):
            rows = part[(part.group == concept) & (part.variant == variant)]
            stats = rows.groupby("labelled")["value"].agg(["mean", "std"]).reset_index()
            ax.errorbar(
                stats["labelled"],
                stats["mean"],
                yerr=stats["std"].fillna(0),
                fmt=style,
                capsize=3,
                label=variant.split(":")[1].replace("_", " "),
            )
        ax.set_xscale("log", base=2)
        ax.set_ylim(-1.02, 1.02)
        ax.axhline(0, color="k", ls=":", lw=1)
        ax.set_xlabel("labelled objects")
        ax.set_ylabel("Spearman on held-out objects")
        ax.set_title(str(concept))
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return finish(fig, title, path)


def mds_plot(points: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """The 3-D MDS picture, points styled by category and labelled so that no two labels overlap
    (:func:`~bindscope.analyses.geometry.labels.label_points_3d`)."""
    plt = pyplot()
    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    for category, (color, marker) in CATEGORY_STYLE.items():
        rows = points[points.category == category]
        if len(rows):
            ax.scatter(rows.x, rows.y, rows.z, c=color, marker=marker, s=40, label=category)
    ax.legend(fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    colors = [CATEGORY_STYLE.get(str(c), ("#444444", "o"))[0] for c in points.category]
    label_points_3d(fig, ax, points, colors)
    return save_figure(fig, path)


def mds_html(points: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """The MDS picture as a self-contained interactive plotly page (works offline)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for category, (color, marker) in CATEGORY_STYLE.items():
        rows = points[points.category == category]
        if len(rows):
            symbol = {"s": "square", "o": "circle", "^": "diamond", "x": "x"}[marker]
            fig.add_trace(
                go.Scatter3d(
                    x=rows.x,
                    y=rows.y,
                    z=rows.z,
                    mode="markers+text",
                    name=category,
                    text=list(rows.label),
                    marker={"color": color, "symbol": symbol, "size": 5},
                    textposition="top center",
                )
            )
    fig.update_layout(title=title, scene={"aspectmode": "data"}, margin={"l": 0, "r": 0, "b": 0, "t": 40})
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "w") as fh:
        fh.write(fig.to_html(include_plotlyjs=True, full_html=True, div_id="mds"))
    return path


def finish(fig: Any, title: str, path: Path) -> Path:
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
