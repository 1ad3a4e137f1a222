"""The complexity figure: object accuracy of predicted embeddings against the fraction of objects seen, on scenes
of unseen objects beside the scenes each family was fitted on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bindscope.core.figures import pyplot, save_figure

#: What each figure shows, by file stem (the report's captions; a test checks every figure has one).
CAPTIONS = {
    "complexity": "How well each approximator family, fitted on the objects seen, predicts embeddings of scenes "
    "built from unseen objects (left, solid) and of scenes mixing seen and unseen objects (right): object accuracy "
    "of the frozen probes on the predicted embeddings against the fraction of objects seen in training, a band of "
    "one standard deviation over seeds, with the probes on the true embeddings (black dash-dot) and chance "
    "(dotted). Dashed, in each family's colour: its accuracy on the scenes it was fitted on (left): a family "
    "below 90% of the in-distribution line there does not fit even its training scenes, and its failure on "
    "unseen objects says nothing about the binding function. The simplest family that reaches 90% of the "
    "in-distribution line on unseen objects, and from what fraction (f*), is the descriptive verdict.",
}

PANELS = (
    ("test_only", "scenes of unseen objects (test_only); dashed: training scenes"),
    ("mixed", "scenes mixing seen and unseen objects (mixed)"),
)
#: The panel whose families also show their accuracy on their own training scenes (dashed).
TRAIN_BESIDE = "test_only"


def _band(table: pd.DataFrame, approximator: str, group: str, checkpoint: str) -> pd.DataFrame:
    """Mean and spread (std over seeds) of object_acc per fraction."""
    sel = table[
        (table.variant == approximator)
        & (table.group == group)
        & (table.metric == "object_acc")
        & (table.checkpoint == checkpoint)
    ]
    per_fraction = sel.groupby("fraction")["value"]
    return pd.DataFrame({"mean": per_fraction.mean(), "std": per_fraction.std(ddof=1).fillna(0.0)})


def _train_line(ax: Any, table: pd.DataFrame, approximator: str, color: str) -> None:
    """An approximator's mean object accuracy on the scenes it was fitted on, dashed in its colour."""
    band = _band(table, approximator, "train_only", "selected")
    if not band.empty:
        ax.plot(band.index.to_numpy(dtype=float), band["mean"], color=color, ls="--", lw=1, marker="x", ms=4)


def complexity_plot(table: pd.DataFrame, approximators: list[str], path: str | Path, title: str = "") -> Path:
    """One panel per scene group (test_only, mixed).

    A line per approximator with a band of one standard deviation over seeds, the
    in-distribution line (the frozen probes on the true embeddings of the same scenes) and chance.
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PANELS), figsize=(6.0 * len(PANELS), 4.4), sharey=True)
    for ax, (group, label) in zip(axes, PANELS):
        for name in approximators:
            band = _band(table, name, group, "selected")
            if band.empty:
                continue
            x = band.index.to_numpy(dtype=float)
            (line,) = ax.plot(x, band["mean"], marker="o", ms=3, label=name)
            lo, hi = band["mean"] - band["std"], band["mean"] + band["std"]
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
            if group == TRAIN_BESIDE:
                _train_line(ax, table, name, line.get_color())
        references = (
            ("embeddings", "k-.", "in-distribution (probes on true embeddings)"),
            ("chance", "k:", "chance"),
        )
        for ref, style, text in references:
            band = _band(table, ref, group, "")
            if not band.empty:
                ax.plot(band.index.to_numpy(dtype=float), band["mean"], style, lw=1, marker="_", ms=8, label=text)
        if group == TRAIN_BESIDE:
            ax.plot([], [], color="grey", ls="--", lw=1, marker="x", ms=4, label="dashed: on its own training scenes")
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
