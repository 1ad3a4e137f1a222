"""Figures of analysis results (matplotlib, written as PNG; no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from bindscope.core.io import atomic_file

PANELS = (
    ("test_only", "scenes of unseen objects (test_only)"),
    ("mixed", "scenes mixing seen and unseen objects (mixed)"),
)


def _band(table: pd.DataFrame, approximator: str, group: str, checkpoint: str) -> pd.DataFrame:
    """Mean and spread (sd over seeds) of object_acc per fraction."""
    sel = table[
        (table.approximator == approximator)
        & (table.group == group)
        & (table.metric == "object_acc")
        & (table.checkpoint == checkpoint)
    ]
    per_fraction = sel.groupby("fraction")["value"]
    return pd.DataFrame({"mean": per_fraction.mean(), "sd": per_fraction.std(ddof=1).fillna(0.0)})


def complexity_plot(table: pd.DataFrame, approximators: list[str], path: str | Path, title: str = "") -> Path:
    """Object accuracy of predicted embeddings against the fraction of objects seen.

    One panel per scene group (test_only, mixed): a line per approximator with a band of one
    standard deviation over seeds, the in-distribution line (the frozen probes on the true
    embeddings of the same scenes) and chance.
    """
    fig, axes = plt.subplots(1, len(PANELS), figsize=(6.0 * len(PANELS), 4.4), sharey=True)
    for ax, (group, label) in zip(axes, PANELS):
        for name in approximators:
            band = _band(table, name, group, "selected")
            if band.empty:
                continue
            x = band.index.to_numpy(dtype=float)
            (line,) = ax.plot(x, band["mean"], marker="o", ms=3, label=name)
            ax.fill_between(x, band["mean"] - band["sd"], band["mean"] + band["sd"], color=line.get_color(), alpha=0.2)
        for ref, style, text in (
            ("embeddings", "k--", "in-distribution (probes on true embeddings)"),
            ("chance", "k:", "chance"),
        ):
            band = _band(table, ref, group, "")
            if not band.empty:
                ax.plot(band.index.to_numpy(dtype=float), band["mean"], style, lw=1, label=text)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("fraction of objects seen in training")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("object accuracy of predicted embeddings")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08 + 0.035 * ((len(labels) - 1) // 4), 1, 1))  # room for the legend below
    return save_figure(fig, path)


def coverage_plot(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Accuracy of controlled models against the fraction of objects trained on, with seed bands.

    Left: object accuracy, right: concept accuracy; a line per evaluation split (held-out,
    validation and training objects) with a min-max band over seeds, and chance.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    for ax, metric in zip(axes, ("object_acc", "concept_acc")):
        for split, label in (
            ("test", "held-out objects"),
            ("validation", "validation objects"),
            ("train", "training objects"),
        ):
            sel = table[(table.split == split) & (table.metric == metric)].groupby("fraction")["value"]
            if not len(sel):
                continue
            x = sel.mean().index.to_numpy(dtype=float)
            (line,) = ax.plot(x, sel.mean().to_numpy(), marker="o", ms=3, label=label)
            ax.fill_between(x, sel.min().to_numpy(), sel.max().to_numpy(), color=line.get_color(), alpha=0.2)
        if metric == "object_acc":
            chance = table[table.metric == "chance_object_acc"].groupby("fraction")["value"].mean()
            ax.plot(chance.index.to_numpy(dtype=float), chance.to_numpy(), "k:", lw=1, label="chance")
        ax.set_title(metric.replace("_acc", " accuracy (set separation)"), fontsize=10)
        ax.set_xlabel("fraction of objects in training (coverage)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy at the selected step (band: min-max over seeds)")
    axes[0].legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Write a figure as PNG atomically and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)
    return path
