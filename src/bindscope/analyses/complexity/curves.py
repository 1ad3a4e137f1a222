"""Reading a sweep's table as curves over the fractions of objects seen: the area under accuracy, f* (the
first fraction whose accuracy reaches the in-distribution line, on enough evidence), which families fit the
scenes they were fitted on, value coverage, the fractions where the evidence is decisive, code lengths and the
fits that did not converge."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bindscope.core.tidy import spread

GENERALISES_AT = 0.9  # f*: the first fraction reaching this share of in-distribution accuracy
COVERED_AT = 0.9  # a fraction is decisive when this share of its test scenes hold fitted values only
POWER_Z = 1.645  # ... and enough of them for a true-embedding-accurate predictor to pass at 95%
#: A family fits its training scenes when its predictions of them reach this share of the probes' accuracy on
#: their true embeddings: the bar f* sets for unseen objects (:data:`GENERALISES_AT`), on the scenes it fitted.
FITS_AT = GENERALISES_AT


def curve(table: pd.DataFrame, approximator: str, group: str, metric: str, checkpoint: str) -> pd.DataFrame:
    """``[seed x fraction]`` values of one metric."""
    sel = table[
        (table.variant == approximator)
        & (table.group == group)
        & (table.metric == metric)
        & (table.checkpoint == checkpoint)
    ]
    return sel.pivot_table(index="seed", columns="fraction", values="value", aggfunc="mean")


def fits_training(table: pd.DataFrame, approximator: str) -> pd.DataFrame:
    """``[seed x fraction]``: 1 where the approximator's predictions of the scenes it was fitted on (train_only)
    reach :data:`FITS_AT` of the frozen probes' object accuracy on the true embeddings of the same scenes."""
    acc = curve(table, approximator, "train_only", "object_acc", "selected")
    line = curve(table, "embeddings", "train_only", "object_acc", "").reindex_like(acc)
    return (acc >= FITS_AT * line).astype(float).where(acc.notna() & line.notna())


def fitting(table: pd.DataFrame, approximators: list[str], fraction: float) -> list[str]:
    """The approximators that fit their training scenes at ``fraction``: their mean over seeds of train_only object
    accuracy reaches :data:`FITS_AT` of the mean in-distribution line on the same scenes (none where not scored)."""
    line = curve(table, "embeddings", "train_only", "object_acc", "")
    if fraction not in line.columns:
        return []
    bar = FITS_AT * float(line[fraction].mean())
    out = []
    for label in approximators:
        acc = curve(table, label, "train_only", "object_acc", "selected")
        if fraction in acc.columns and float(acc[fraction].mean()) >= bar:
            out.append(label)
    return out


def area(acc: pd.DataFrame) -> np.ndarray:
    """Per seed: the normalised area under accuracy (a ``[seed x fraction]`` curve) over fractions (a mean
    accuracy)."""
    f = acc.columns.to_numpy(dtype=float)
    values = acc.to_numpy(dtype=float)
    if len(f) == 1:
        return values[:, 0]
    return np.trapezoid(values, f, axis=1) / (f[-1] - f[0])


def f_star(
    mean_acc: pd.Series,
    in_distribution: pd.Series,
    share: float = GENERALISES_AT,
    scenes: pd.Series | None = None,
) -> float | None:
    """The smallest fraction whose accuracy reaches ``share`` of the in-distribution accuracy.

    With ``scenes`` (covered scored test scenes per fraction, summed over seeds), a fraction counts
    only where the evidence from it upwards is enough: the scene-weighted accuracy of it and every
    larger fraction reaches ``share`` of the scene-weighted line, on at least :func:`scenes_needed`
    scenes. A crossing on a handful of scenes, or one the larger fractions contradict, is no f*.
    """
    line = in_distribution.reindex(mean_acc.index).to_numpy(dtype=float)
    acc = mean_acc.to_numpy(dtype=float)
    ok = acc >= share * line
    if scenes is not None:
        n = scenes.reindex(mean_acc.index).fillna(0.0).to_numpy(dtype=float)
        for i in np.flatnonzero(ok):
            total = n[i:].sum()
            if total <= 0:
                ok[i] = False
                continue
            pooled_line = float((n[i:] * line[i:]).sum() / total)
            pooled_acc = float((n[i:] * acc[i:]).sum() / total)
            ok[i] = pooled_acc >= share * pooled_line and total >= scenes_needed(pooled_line, share)
    return float(mean_acc.index[int(np.argmax(ok))]) if ok.any() else None


def covered_scenes(table: pd.DataFrame, cover: pd.DataFrame) -> pd.Series | None:
    """Per fraction, the scored test_only scenes whose every value was fitted, summed over seeds,
    from the ``[seed x fraction]`` ``covered_share`` curve; None when the table has no coverage rows."""
    if cover.empty:
        return None
    scored = curve(table, "scenes", "test_only", "scored_scenes", "").reindex_like(cover)
    return (cover * scored).sum(axis=0)


def by_fraction(values: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """``{fraction: {mean, std, n}}`` over the seeds (rows) of a ``[seed x fraction]`` curve."""
    return {f"{f:g}": spread(values[f].dropna().to_numpy()) for f in values.columns}


def code_length(table: pd.DataFrame, approximator: str) -> float | None:
    """Mean over seeds of the prequential code length (bits) of every block after the first."""
    sel = table[(table.variant == approximator) & (table.group == "next_block") & (table.metric == "code_bits")]
    return float(sel.groupby("seed")["value"].sum().mean()) if len(sel) else None


def unconverged_fits(table: pd.DataFrame) -> dict[str, list[float]]:
    """Per approximator, the fractions at which a fit (any seed) did not converge."""
    sel = table[(table.group == "train_only") & (table.metric == "converged") & (table.value < 0.5)]
    return {str(k): sorted({float(f) for f in g.fraction}) for k, g in sel.groupby("variant")}


def scenes_needed(ceiling: float, share: float = GENERALISES_AT, z: float = POWER_Z) -> float:
    """Test scenes needed before a failure to reach ``share`` of the ``ceiling`` means something.

    A predictor as accurate as the true embeddings scores each scene right with probability
    ``ceiling``; it reaches ``share * ceiling`` with one-sided confidence ``z`` (1.645: 95%) once
    ``n >= (z sqrt(p (1 - p)) / ((1 - share) p))^2`` (binomial, normal approximation).
    """
    if not ceiling > 0:
        return math.inf
    return (z * math.sqrt(ceiling * (1 - ceiling)) / ((1 - share) * ceiling)) ** 2


def decisive_fractions(cover: pd.DataFrame, covered: pd.Series | None, ceiling: pd.Series) -> list[float] | None:
    """Fractions at which no family generalising is evidence of high complexity.

    There, at least :data:`COVERED_AT` of the scored test_only scenes (``cover``, the
    ``[seed x fraction]`` ``covered_share`` curve) hold only concept values that were fitted (else
    no table family could predict them), and those scenes, summed over seeds (``covered``, see
    :func:`covered_scenes`), number at least :func:`scenes_needed` for that fraction's
    in-distribution accuracy. None when the table has no coverage rows.
    """
    if covered is None:
        return None
    return [
        float(f)
        for f in cover.columns
        if cover[f].mean() >= COVERED_AT and covered[f] >= scenes_needed(float(ceiling.get(f, 0.0)))
    ]
