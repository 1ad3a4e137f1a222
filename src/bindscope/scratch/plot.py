"""The coverage figure of a scratch sweep: accuracy of controlled models against coverage."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bindscope.core.figures import pyplot, save_figure

#: The variant of a sweep's rows holding what an ideal bag of concepts scores on each run's held-out scenes.
BAG_OF_CONCEPTS = "bag of concepts"
SPLIT_LABELS = (("test", "held-out objects"), ("validation", "validation objects"), ("train", "training objects"))
PANEL_TITLES = {
    "object_acc": "object accuracy (set separation)",
    "concept_acc": "concept accuracy (set separation)",
    "swap_attribute": "attribute swap (image prefers its caption)",
    "concept_at_1": "concept@1 (image -> caption)",
}


def coverage_plot(
    table: pd.DataFrame,
    path: str | Path,
    title: str = "",
    *,
    splits: tuple[tuple[str, str], ...] = SPLIT_LABELS,
    panels: tuple[str, str] = ("object_acc", "concept_acc"),
    headline: tuple[str, str] = ("test", "object_acc"),
) -> Path:
    """Left and right: the two ``panels`` metrics (object and concept accuracy), against the fraction trained on.

    A line per evaluation split (``group``: held-out, validation and training objects, or held-out and
    trained-on scenes) with a min-max band over seeds, and on the ``headline`` metric chance and what an
    ideal bag of concepts scores on the held-out scenes (a model that does not bind gets at most that).
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    models = table[table.variant == "model"]
    group, headline_metric = headline
    for ax, metric in zip(axes, panels):
        for split, label in splits:
            sel = models[(models.group == split) & (models.metric == metric)].groupby("fraction")["value"]
            if not len(sel):
                continue
            x = sel.mean().index.to_numpy(dtype=float)
            (line,) = ax.plot(x, sel.mean().to_numpy(), marker="o", ms=3, label=label)
            ax.fill_between(x, sel.min().to_numpy(), sel.max().to_numpy(), color=line.get_color(), alpha=0.2)
        if metric == headline_metric:
            held_out = (table.group == group) & (table.metric == metric)
            chance_rows = table[(table.variant == "chance") & held_out]
            chance = chance_rows.groupby("fraction")["value"].mean()
            ax.plot(chance.index.to_numpy(dtype=float), chance.to_numpy(), "k:", lw=1, label="chance")
            bag_rows = table[(table.variant == BAG_OF_CONCEPTS) & held_out]
            bag = bag_rows.groupby("fraction")["value"].mean()
            if len(bag):
                ax.plot(
                    bag.index.to_numpy(dtype=float), bag.to_numpy(), "k--", lw=1, label="bag of concepts (held out)"
                )
        ax.set_title(PANEL_TITLES.get(metric, metric), fontsize=10)
        ax.set_xlabel("fraction trained on (coverage)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy at the selected step (band: min-max over seeds)")
    axes[0].legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)
