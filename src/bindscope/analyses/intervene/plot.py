"""The k-sweep figure of ``bindscope intervene``: accuracy of the edits against their strength."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bindscope.core.figures import pyplot, save_figure
from bindscope.core.tidy import NO_CONTROL

#: What each figure shows, by file stem (the report's captions; a test checks every figure has one).
CAPTIONS = {
    "k_curve": "Editing one object of a scene embedding by vector arithmetic, against the edit's strength k, per "
    "variant: how often the edited embedding retrieves the expected scene (the research code's hit; then on the "
    "edits that need binding, with ties counted wrong, where a bag of concepts scores 0) and how often the probes "
    "read it (the concept probes, the research code's hit; then the object probe on the edits that need binding), "
    "for scenes whose two objects share the edited value (solid), differ in it (dashed) or both (dotted); mean "
    "and standard deviation (sd) over the target seeds, in percent.",
}

STYLES = {"shared": "-", "different": "--", "all": ":"}
#: The panels of one edit, left to right: each metric and its title.
PANELS = {
    "retrieval": "retrieval (paper)",
    "retrieval_binding": "retrieval, binding edits",
    "probe": "probe (paper)",
    "probe_binding": "object probe, binding edits",
}


def k_curve_plot(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Each metric (:data:`PANELS`) against k, one line per variant and group, mean ± sd over seeds.

    The unedited scene does not depend on k: it is drawn as a flat line at its value.
    """
    plt = pyplot()
    table = table[table["control"] == NO_CONTROL]  # the embeddings' own edits, not their +rand control's
    edits = list(dict.fromkeys(table["edit"]))
    fig, axes = plt.subplots(len(edits), len(PANELS), figsize=(5.5 * len(PANELS), 4 * len(edits)), squeeze=False)
    ks = sorted(table["k"].unique())
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    variants = list(dict.fromkeys(table["variant"]))
    for row, edit in enumerate(edits):
        for col, (metric, name) in enumerate(PANELS.items()):
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
            ax.set_ylabel("accuracy %")
            ax.set_ylim(-2, 102)
            ax.set_title(f"{edit} edits: {name}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
