"""The k-sweep figure of ``bindscope intervene``: accuracy of the edits against their strength."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bindscope.core.figures import pyplot, save_figure

#: What each figure shows, by file stem (the report's captions; a test checks every figure has one).
CAPTIONS = {
    "k_curve": "Editing one object of a scene embedding by vector arithmetic, against the edit's strength k: how "
    "often the edited embedding retrieves the expected scene (left) and how often the probes read the edited "
    "object (right), per variant, for scenes whose two objects share the edited value (solid), differ in it "
    "(dashed) or both (dotted); mean and standard deviation over seeds, in percent.",
}

STYLES = {"shared": "-", "different": "--", "all": ":"}


def k_curve_plot(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Retrieval and probe accuracy against k, one line per variant and group, mean ± std over seeds.

    The unedited scene does not depend on k: it is drawn as a flat line at its value.
    """
    plt = pyplot()
    edits = list(dict.fromkeys(table["edit"]))
    fig, axes = plt.subplots(len(edits), 2, figsize=(11, 4 * len(edits)), squeeze=False)
    ks = sorted(table["k"].unique())
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    variants = list(dict.fromkeys(table["variant"]))
    for row, edit in enumerate(edits):
        for col, metric in enumerate(("retrieval", "probe")):
            ax = axes[row][col]
            part = table[(table.edit == edit) & (table.metric == metric)]
            for v, variant in enumerate(variants):
                for group, rows in part[part.variant == variant].groupby("group", sort=False):
                    stats = rows.groupby("k")["value"].agg(["mean", "std"]).fillna(0.0)
                    if len(stats) == 1 and len(ks) > 1:  # k-independent (the unedited scene)
                        stats = pd.DataFrame({"mean": stats["mean"].iloc[0], "std": stats["std"].iloc[0]}, index=ks)
                    ax.errorbar(
                        stats.index,
                        100 * stats["mean"],
                        yerr=100 * stats["std"],
                        color=colors[v % len(colors)],
                        linestyle=STYLES.get(str(group), "-"),
                        marker="o",
                        ms=3,
                        capsize=2,
                        label=f"{variant} ({group})",
                    )
            ax.set_xlabel("edit strength k")
            ax.set_ylabel(f"{metric} accuracy %")
            ax.set_ylim(-2, 102)
            ax.set_title(f"{edit} edits: {metric}")
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
