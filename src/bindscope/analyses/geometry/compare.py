"""Geometry across models or layers (docs/method/08-geometry.md): does factorization quality track generalisation?

Given several ``geometry`` results, each folder's held-out factorization R² and its linear heads'
accuracy on unseen objects (means over seeds and slot positions) are set side by side per fraction,
and correlated across folders (Pearson and Spearman), per fraction and pooled over fractions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr

from bindscope.analyses.results import LoadedResult
from bindscope.core.figures import pyplot, save_figure

#: The factorization measures correlated with the heads' object accuracy.
MEASURES = ("r2_raw", "r2_whitened", "r2_all")


def comparison_table(results: dict[str, LoadedResult]) -> pd.DataFrame:
    """One row per (folder, fraction): held-out R² raw / whitened, the all-object R², head accuracy."""
    rows = []
    for label, result in results.items():
        t = result.table
        slots = t[t.position >= 0]
        r2_all = float(slots[(slots.variant == "factorization") & (slots.metric == "r2")]["value"].mean())
        for fraction, part in slots[slots.fraction.notna()].groupby("fraction", sort=True):
            heads = part[part.variant == "heads"]
            rows.append(
                {
                    "label": label,
                    "path": str(result.path),
                    "fraction": float(str(fraction)),
                    "r2_raw": float(part[(part.variant == "raw") & (part.metric == "r2_test")]["value"].mean()),
                    "r2_whitened": float(
                        part[(part.variant == "whitened") & (part.metric == "r2_test")]["value"].mean()
                    ),
                    "r2_all": r2_all,
                    "head_object": float(heads[heads.group == "object"]["value"].mean()),
                    "head_concepts": float(heads[heads.group != "object"]["value"].mean()),
                }
            )
    return pd.DataFrame(rows)


def correlation(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Pearson and Spearman of two columns over the points where both are determined, or why not (fewer
    than 3 such points, or a constant column); ``left_out`` counts the points dropped as undetermined."""
    keep = ~(np.isnan(x) | np.isnan(y))
    left_out = {"left_out": int((~keep).sum())} if not keep.all() else {}
    x, y = x[keep], y[keep]
    n = int(len(x))
    if n < 3:
        why = f"{n} determined points; a correlation needs at least 3"
        return {"pearson": None, "spearman": None, "n": n, "why": why, **left_out}
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"pearson": None, "spearman": None, "n": n, "why": "one of the two is constant", **left_out}
    pearson, spearman = float(pearsonr(x, y).statistic), float(spearmanr(x, y).statistic)
    return {"pearson": pearson, "spearman": spearman, "n": n, **left_out}


def correlations(table: pd.DataFrame) -> dict[str, Any]:
    """Per measure: its correlation with the heads' object accuracy at each fraction (across folders) and
    pooled over every (folder, fraction)."""
    out: dict[str, Any] = {}
    for measure in MEASURES:
        node: dict[str, Any] = {
            "pooled": correlation(table[measure].to_numpy(), table["head_object"].to_numpy()),
            "fractions": {
                f"{f:g}": correlation(part[measure].to_numpy(), part["head_object"].to_numpy())
                for f, part in table.groupby("fraction", sort=True)
            },
        }
        out[measure] = node
    return out


def correlation_plot(table: pd.DataFrame, path: Path, *, title: str = "") -> Path:
    """Head accuracy on unseen objects against held-out factorization R², a point per folder and fraction."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for label, part in table.groupby("label", sort=False):
        points = ax.scatter(part["r2_raw"], part["head_object"], s=18 + 60 * part["fraction"], label=str(label))
        ax.plot(part["r2_raw"], part["head_object"], "-", lw=0.8, color=points.get_facecolor()[0])
    ax.set_xlabel("held-out factorization R² (raw)")
    ax.set_ylabel("linear-head object accuracy on unseen objects")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="marker size = fraction seen", title_fontsize=7)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return save_figure(fig, path)
