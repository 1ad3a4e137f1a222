"""Typed verdicts: does a number show binding beyond what a model that binds nothing scores? (docs/method/verdicts.md)

Every question an analysis answers on the report card is judged here, the same way:

- the number is measured per seed (:class:`Measured`), on the cases it names (``scored_on``), with the cases per
  seed it is a share of (``n_cases``) where it is a rate;
- its **floors** are chance, the ``+rand`` control and the **ideal bag of concepts** (the same analysis run on
  the counts of each scene's concept values: a model that binds nothing by construction), each under the same
  metric and the same cases;
- the verdict is ``binds`` only when the number clears the largest floor by :data:`MARGIN` on every seed and,
  for a rate, its 95% interval lies above that floor; ``no_binding`` when no seed clears it; ``undetermined``
  otherwise (:data:`REASONS` says why), and whenever a setting that should not matter (a solver's strength the
  training data cannot choose between, a seed) gives another answer, or the bag itself reaches the metric's
  ceiling (the number cannot separate binding from a bag).

A :class:`Verdict` stores the answer, a reason code, the number, every floor, the margin and the interval;
words are rendered from it (``bindscope.analyses.card``), never stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field

from bindscope.core.validation import Schema
from bindscope.estimators.metrics import is_absent

Answer = Literal["binds", "no_binding", "undetermined"]
Reason = Literal[
    "clears_floor",
    "within_floor",
    "seeds_disagree",
    "settings_disagree",
    "floor_at_ceiling",
    "too_few_cases",
    "not_measured",
    "no_fit",
    "skipped",
]
ANSWERS: tuple[Answer, ...] = ("binds", "no_binding", "undetermined")

#: How far above its largest floor a number must be, on every seed, to read ``binds`` (in the number's unit).
MARGIN = 0.05
#: The floors' names as the card shows them.
BAG, RAND, CHANCE = "bag of concepts", "+rand", "chance"

#: Why a verdict is what it is: the reason codes and what each means (the card renders its words from these).
REASONS: dict[str, str] = {
    "clears_floor": "clears every floor by the margin on every seed, its interval above the largest",
    "within_floor": "does not clear the largest floor by the margin on any seed",
    "seeds_disagree": "clears the largest floor by the margin on some seeds only",
    "settings_disagree": "another setting that should not matter gives another answer",
    "floor_at_ceiling": "an ideal bag of concepts reaches the metric's ceiling: it cannot show binding",
    "too_few_cases": "clears the floor by the margin, but its 95% interval reaches below the floor",
    "not_measured": "no number, or no bag-of-concepts floor, to judge",
    "no_fit": "no family fits even its own training scenes: raise the budget",
    "skipped": "the analysis did not run on these embeddings",
}


class Floor(Schema):
    """One floor of a number: its name (:data:`BAG`, :data:`RAND`, :data:`CHANCE`) and value (mean over seeds)."""

    name: str
    value: float


class Alternative(Schema):
    """The same number under another setting that should not matter, and the answer it gives."""

    setting: str
    value: float | None
    answer: Answer


class Verdict(Schema):
    """One card column's answer with everything it was judged on.

    ``value`` is the mean over ``seeds`` (``sd`` their standard deviation, None for one seed); ``n_cases`` the
    cases per seed a rate is a share of, ``ci_low``/``ci_high`` its 95% Wilson interval (None for a number
    that is not a rate); ``floor`` the largest floor (judged against), ``floors`` every floor shown beside it;
    ``margin`` = value - floor (mean over seeds), ``required`` the margin a ``binds`` needs; ``scored_on`` the
    subset of cases scored (e.g. ``binding scenes``); ``alternatives`` the readings under other settings.
    """

    answer: Answer
    reason: Reason
    value: float | None
    sd: float | None = None
    seeds: int = 0
    n_cases: int | None = Field(None, exclude_if=is_absent)
    ci_low: float | None = Field(None, exclude_if=is_absent)
    ci_high: float | None = Field(None, exclude_if=is_absent)
    floor: Floor | None = None
    floors: list[Floor] = Field(default_factory=list)
    margin: float | None = None
    required: float = MARGIN
    scored_on: str | None = Field(None, exclude_if=is_absent)
    alternatives: list[Alternative] = Field(default_factory=list, exclude_if=is_absent)

    def floor_value(self, name: str) -> float | None:
        """The value of the floor called ``name`` (None where it was not measured)."""
        return next((f.value for f in self.floors if f.name == name), None)


@dataclass(frozen=True)
class Measured:
    """A card column's number as an analysis measured it: per seed, with what it needs to be judged.

    Attributes
    ----------
    values
        The number per seed (NaN: not measured on that seed).
    n_cases
        The cases per seed it is a share of (a rate), None for a number that is not a rate (R², a fraction).
    chance, rand
        Chance under the same metric and cases; the ``+rand`` control's number per seed (None: not given).
    scored_on
        The subset of cases scored, where it is not all of them (e.g. ``binding scenes``).
    alternatives
        The number per seed under other settings that should not matter (``{setting: values}``).
    ceiling
        The best value the metric can take (1 for a rate or R²).
    bag_bound
        What an ideal bag of concepts scores on these cases analytically, where known: the bag floor is the larger
        of it and the same analysis run on the bag (a fit on the bag can fall short of the ideal).
    blocked
        A reason code (:data:`REASONS`) that makes the verdict ``undetermined`` whatever the numbers, e.g. ``no_fit``.
    higher
        Whether larger numbers mean more binding (True for every column today).
    """

    values: Sequence[float]
    n_cases: int | None = None
    chance: float | None = None
    rand: Sequence[float] | None = None
    scored_on: str | None = None
    alternatives: Mapping[str, Sequence[float]] = field(default_factory=dict)
    ceiling: float = 1.0
    bag_bound: float | None = None
    blocked: Reason | None = None
    higher: bool = True


def _finite(values: Sequence[float] | None) -> np.ndarray:
    arr = np.asarray([] if values is None else list(values), dtype=float)
    return arr[np.isfinite(arr)]


def _mean(values: Sequence[float] | None) -> float | None:
    arr = _finite(values)
    return float(arr.mean()) if len(arr) else None


def _answer(values: np.ndarray, floor: float, required: float, higher: bool) -> tuple[Answer, Reason]:
    clearance = (values - floor) if higher else (floor - values)
    if clearance.min() >= required:
        return "binds", "clears_floor"
    if clearance.max() < required:
        return "no_binding", "within_floor"
    return "undetermined", "seeds_disagree"


def interval(value: float | None, n_cases: int | None) -> tuple[float | None, float | None]:
    """The 95% Wilson interval of a share of ``n_cases`` (None, None where either is missing)."""
    from bindscope.estimators.intervals import rate

    r = rate(value, n_cases)
    return (None, None) if r is None else (r.low, r.high)


def judge(measured: Measured, bag: Measured | None, *, required: float = MARGIN) -> Verdict:
    """The verdict of one card column: ``measured`` against chance, ``+rand`` and the bag (``bag``: the same
    column measured on the ideal bag of concepts of the same data, split and settings).

    Parameters
    ----------
    measured
        The model's number per seed and what it needs (:class:`Measured`).
    bag
        The same column of the same analysis run on the ideal bag of concepts; None where it was not run (the
        verdict is then ``undetermined``: a number without its bag floor cannot be read as binding).
    required
        The margin a ``binds`` needs (in the number's unit).
    """
    values = _finite(measured.values)
    value = float(values.mean()) if len(values) else None
    sd = float(values.std(ddof=1)) if len(values) > 1 else None
    low, high = interval(value, measured.n_cases)
    floors = [
        Floor(name=name, value=v)
        for name, v in ((BAG, bag_floor(measured, bag)), (RAND, _mean(measured.rand)), (CHANCE, measured.chance))
        if v is not None and math.isfinite(v)
    ]
    base: dict[str, Any] = {
        "value": value,
        "sd": sd,
        "seeds": int(len(values)),
        "n_cases": measured.n_cases,
        "ci_low": low,
        "ci_high": high,
        "floors": floors,
        "required": required,
        "scored_on": measured.scored_on,
    }
    bag_value = next((f.value for f in floors if f.name == BAG), None)
    if value is None or bag_value is None:
        return Verdict(answer="undetermined", reason="not_measured", **base)
    judged = max(floors, key=lambda f: f.value) if measured.higher else min(floors, key=lambda f: f.value)
    margin = value - judged.value if measured.higher else judged.value - value
    base |= {"floor": judged, "margin": margin}
    if measured.blocked is not None:
        return Verdict(answer="undetermined", reason=measured.blocked, **base)
    at_ceiling = (
        bag_value >= measured.ceiling - required if measured.higher else bag_value <= measured.ceiling + required
    )
    if at_ceiling:
        return Verdict(answer="undetermined", reason="floor_at_ceiling", **base)
    answer, reason = _answer(values, judged.value, required, measured.higher)
    if answer == "binds" and low is not None and low <= judged.value:
        answer, reason = "undetermined", "too_few_cases"
    alternatives = [
        _alternative(s, v, judged.value, required, measured.higher) for s, v in measured.alternatives.items()
    ]
    if answer != "undetermined" and any(a.answer != answer for a in alternatives):
        answer, reason = "undetermined", "settings_disagree"
    return Verdict(answer=answer, reason=reason, alternatives=alternatives, **base)


def bag_floor(measured: Measured, bag: Measured | None) -> float | None:
    """The bag-of-concepts floor: the mean of the bag run's number, or the analytic bound where that is larger
    (None where neither was measured)."""
    known = [v for v in (_mean(bag.values) if bag else None, measured.bag_bound) if v is not None]
    return max(known) if measured.higher and known else (min(known) if known else None)


def _alternative(setting: str, values: Sequence[float], floor: float, required: float, higher: bool) -> Alternative:
    arr = _finite(values)
    if not len(arr):
        return Alternative(setting=setting, value=None, answer="undetermined")
    answer, _ = _answer(arr, floor, required, higher)
    return Alternative(setting=setting, value=float(arr.mean()), answer=answer)


def skipped_verdict() -> Verdict:
    """The verdict of a column whose analysis did not run: ``undetermined``, reason ``skipped``."""
    return Verdict(answer="undetermined", reason="skipped", value=None)
