"""Rates with their counts: a share of n cases, its 95% Wilson score interval, and how a report writes it.

A rate measured on few cases says little on its own (14 edits all right read "100%", yet the Wilson interval
runs from 78% to 100%), so every rate a report shows comes with its n and this interval. A mean over seeds is
read as one seed's rate: the mean with the cases of one seed (the seeds re-draw the same number of cases), so
the interval is that of a single seed at the mean rate, not narrowed by pooling the seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

#: The confidence level of every interval a report shows.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Rate:
    """A share of ``n`` cases and its Wilson score interval at :data:`CONFIDENCE`.

    Attributes
    ----------
    value
        The share in [0, 1] (a mean over seeds where there are several).
    n
        The cases it is a share of (per seed).
    low, high
        The interval's bounds, in [0, 1].
    """

    value: float
    n: int
    low: float
    high: float


def successes(value: float, n: int) -> int:
    """The whole number of successes nearest ``value * n``, within [0, n]."""
    return min(max(round(value * n), 0), n)


def wilson_interval(value: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a share ``value`` of ``n`` cases (``value * n`` rounded to whole successes).

    Parameters
    ----------
    value
        The observed share in [0, 1].
    n
        The number of cases, at least 1.
    confidence
        The confidence level (default 0.95).

    Returns
    -------
    tuple of float
        The lower and upper bound.
    """
    k = successes(value, n)
    low, high = wilson_bounds(np.array([k / n]), np.array([n]), confidence)
    return float(low[0]), float(high[0])


def wilson_bounds(values: np.ndarray, n: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of many shares at once (vectorised :func:`wilson_interval`, the same closed form);
    NaN where a share is missing or outside [0, 1], or its n is missing or below 1."""
    p = np.asarray(values, dtype=float)
    n = np.asarray(n, dtype=float)
    ok = np.isfinite(p) & np.isfinite(n) & (n >= 1) & (p >= 0) & (p <= 1)
    safe_n = np.where(ok, n, 1.0)
    k = np.clip(np.round(np.where(ok, p, 0.0) * safe_n), 0, safe_n)
    phat, z = k / safe_n, NormalDist().inv_cdf(0.5 + confidence / 2)  # the standard library's: scipy.stats is ~45 MB
    denom = 1 + z**2 / safe_n
    centre = (phat + z**2 / (2 * safe_n)) / denom
    half = z * np.sqrt(phat * (1 - phat) / safe_n + z**2 / (4 * safe_n**2)) / denom
    low, high = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    return np.where(ok, low, np.nan), np.where(ok, high, np.nan)


def with_intervals(table: pd.DataFrame) -> pd.DataFrame:
    """A results table with ``ci_low`` and ``ci_high`` beside its ``n_cases`` column (the 95% Wilson interval of
    each rate row; NaN on rows that are not rates); a table without ``n_cases`` is returned as it is."""
    if "n_cases" not in table.columns:
        return table
    n = pd.to_numeric(table["n_cases"], errors="coerce").to_numpy(dtype=float)
    low, high = wilson_bounds(pd.to_numeric(table["value"], errors="coerce").to_numpy(dtype=float), n)
    out = table.drop(columns=[c for c in ("ci_low", "ci_high") if c in table.columns])
    at = list(out.columns).index("n_cases") + 1
    out.insert(at, "ci_low", low)
    out.insert(at + 1, "ci_high", high)
    return out


def rate(value: float | None, n: int | None) -> Rate | None:
    """A :class:`Rate` of ``value`` over ``n`` cases; None where either is missing, ``value`` is NaN or n < 1."""
    if value is None or n is None or n < 1 or math.isnan(value):
        return None
    low, high = wilson_interval(value, n)
    return Rate(float(value), int(n), low, high)


def share_text(value: float) -> str:
    """A share in percent with one decimal, ``87.5%``."""
    return f"{100 * value:.1f}%"


def bounds_text(r: Rate) -> str:
    """The interval of a rate: ``95% CI 80.1–92.3%``."""
    return f"{CONFIDENCE:.0%} CI {100 * r.low:.1f}–{100 * r.high:.1f}%"


def interval_text(r: Rate) -> str:
    """The interval and count of a rate: ``95% CI 80.1–92.3%, n = 106``."""
    return f"{bounds_text(r)}, n = {r.n:,}"


def rate_text(r: Rate | None) -> str:
    """A rate for a sentence: ``87.5% (95% CI 80.1–92.3%, n = 106)``; ``-`` where missing."""
    return "-" if r is None else f"{share_text(r.value)} ({interval_text(r)})"
