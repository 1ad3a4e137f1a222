"""Rates with their counts: a share of n cases, its 95% Wilson score interval, and how a report writes it.

A rate measured on few cases says little on its own (14 edits all right read "100%", yet the Wilson interval
runs from 78% to 100%), so every rate a report shows comes with its n and this interval. A mean over seeds is
read as one seed's rate: the mean with the cases of one seed (the seeds re-draw the same number of cases), so
the interval is that of a single seed at the mean rate, not narrowed by pooling the seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    from scipy.stats import binomtest  # slow to import: only when a report is written

    ci = binomtest(successes(value, n), n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


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
