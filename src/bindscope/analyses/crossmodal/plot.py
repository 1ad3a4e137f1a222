"""The figures of ``bindscope crossmodal``: swap tests against chance and the bag of concepts, the bridge
before and after on unseen objects, and the half-truth rates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bindscope.core.figures import pyplot, save_figure
from bindscope.estimators.intervals import rate

#: What each figure shows, by file stem (the report's captions; a test checks every figure has one).
CAPTIONS = {
    "swaps": "How often image-text similarity prefers an image's own caption over one with two attributes "
    "swapped, two nouns swapped, the objects in the other order or, on a relation (count) space, subject and object "
    "(the counts) swapped (left; a tie counts half), and top-1 retrieval "
    "in both directions (right), in percent with the 95% Wilson interval over the pairs or queries scored; "
    "chance (dotted) and what an ideal bag of concepts scores (dashed) on each bar.",
    "bridge": "The same tests on scenes of objects the linear bridge between the two towers never saw, against "
    "the fraction of objects it saw: before the bridge (dashed) and through it (solid), mean and standard "
    "deviation over seeds; on the swaps, 50% is both chance and a bag of concepts.",
    "half_truths": "Half-truths: how often a longer caption that is wrong about one object beats a shorter true "
    "one (red), and how often the full correct caption beats the short one (green), in percent of pairs, with "
    "the pairs scored (n) and the 95% Wilson interval of each rate.",
}

SWAPS = ("swap_attribute", "swap_noun", "order_sensitivity")
#: A relation or count space's family swap, drawn beside the others where it was scored.
FAMILY_SWAPS = ("swap_relation", "swap_count")
RETRIEVAL = ("image_to_text_strict@1", "image_to_text_concept@1", "text_to_image_strict@1", "text_to_image_concept@1")
BRIDGE_METRICS = ("swap_attribute", "swap_noun", "image_to_text_strict@1", "text_to_image_strict@1")


def value_of(table: pd.DataFrame, variant: str, metric: str, group: str = "all") -> float:
    rows = table[(table.variant == variant) & (table.metric == metric) & (table.group == group)]
    return float(rows["value"].mean()) if len(rows) else float("nan")


def interval_bars(values: np.ndarray, cases: np.ndarray) -> np.ndarray:
    """Error bars ``[2, k]`` (below, above) in percent of the 95% Wilson interval of each rate of ``cases``
    (0 where the cases are unknown; never below 0: a rate of 0 or 1 meets its bound up to rounding)."""
    out = np.zeros((2, len(values)))
    for i, (v, n) in enumerate(zip(values, cases)):
        r = rate(float(v), None if pd.isna(n) else int(n))
        if r is not None:
            out[:, i] = 100 * (r.value - r.low), 100 * (r.high - r.value)
    return np.maximum(out, 0.0)


def cases_of(table: pd.DataFrame, variant: str, metric: str, group: str = "all") -> float:
    """The cases per seed of one rate (NaN where unknown)."""
    rows = table[(table.variant == variant) & (table.metric == metric) & (table.group == group)]
    n = pd.to_numeric(rows["n_cases"], errors="coerce") if "n_cases" in rows else pd.Series(dtype=float)
    return float(n.mean()) if n.notna().any() else float("nan")


def swap_plot(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Bars of the raw swap and retrieval accuracies, with chance and the bag-of-concepts score marked."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 4]})
    family = tuple(m for m in FAMILY_SWAPS if ((table.variant == "raw") & (table.metric == m)).any())
    for ax, metrics in zip(axes, (SWAPS + family, RETRIEVAL)):
        x = np.arange(len(metrics))
        values = np.array([value_of(table, "raw", m) for m in metrics])
        bars = interval_bars(values, np.array([cases_of(table, "raw", m) for m in metrics]))
        ax.bar(x, 100 * values, yerr=bars, capsize=3, color="#4c72b0", label="this model (95% CI)")
        for variant, style, label in (("chance", "k:", "chance"), ("bag_of_concepts", "r--", "bag of concepts")):
            refs = [100 * value_of(table, variant, m) for m in metrics]
            for i, ref in enumerate(refs):
                if np.isfinite(ref):
                    ax.plot([i - 0.4, i + 0.4], [ref, ref], style, lw=1.5, label=label if i == 0 else None)
        ax.set_xticks(x, [m.replace("_", " ") for m in metrics], rotation=15, fontsize=8)
        ax.set_ylim(0, 102)
        ax.set_ylabel("accuracy %")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_title("swap tests (ties count half)")
    axes[1].set_title("retrieval top-1")
    handles, labels = axes[0].get_legend_handles_labels()
    more = [(h, lab) for h, lab in zip(*axes[1].get_legend_handles_labels()) if lab not in labels]
    axes[1].legend(handles + [h for h, _ in more], labels + [lab for _, lab in more], fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def bridge_plot(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Per metric: test_only accuracy against the object fraction seen by the bridge, before and after it
    (mean ± std over seeds)."""
    plt = pyplot()
    part = table[table.group == "test_only"]
    metrics = (*BRIDGE_METRICS[:2], *(m for m in FAMILY_SWAPS if (part.metric == m).any()), *BRIDGE_METRICS[2:])
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for variant, style in (("raw", "o--"), ("bridged", "o-")):
            rows = part[(part.variant == variant) & (part.metric == metric)]
            if not len(rows):
                continue
            stats = rows.groupby("fraction")["value"].agg(["mean", "std"]).fillna(0.0)
            ax.errorbar(stats.index, 100 * stats["mean"], yerr=100 * stats["std"], fmt=style, capsize=2, label=variant)
        if metric.startswith("swap"):
            ax.axhline(50, color="k", ls=":", lw=1, label="chance = bag of concepts")
        ax.set_title(metric.replace("_", " "), fontsize=9)
        ax.set_xlabel("object fraction seen by the bridge")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test_only accuracy %")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def half_truth_plot(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Bars of the half-truth rates per kind (how often the longer, wrong caption wins) and of how often
    the full correct caption beats the short one; 50% marked."""
    plt = pyplot()
    rows = table[table.variant == "half_truth"]
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    values = rows["value"].to_numpy()
    cases = (
        pd.to_numeric(rows["n_cases"], errors="coerce").to_numpy() if "n_cases" in rows else np.full(len(rows), np.nan)
    )
    colors = ["#c44e52"] * (len(rows) - 1) + ["#55a868"]
    ax.bar(x, 100 * values, yerr=interval_bars(values, cases), capsize=3, color=colors, label="rate (95% CI)")
    ax.axhline(50, color="k", ls=":", lw=1, label="50%")
    labels = [m.replace("_", " ") + ("" if pd.isna(n) else f"\nn = {int(n):,}") for m, n in zip(rows["metric"], cases)]
    ax.set_xticks(x, labels, rotation=10, fontsize=8)
    ax.set_ylim(0, 102)
    ax.set_ylabel("% of pairs")
    ax.set_title("half-truths: the longer wrong caption wins (red); the full caption wins (green)", fontsize=9)
    ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
