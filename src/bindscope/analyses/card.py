"""The report card's contract: the columns an analysis declares, the bag-of-concepts inputs its floors are
measured on, and the words every verdict is rendered in (docs/method/verdicts.md).

An analysis declares its card columns (:class:`CardColumn`) in its own package and measures each one per seed
(``Analysis.measure``); the registry runs the same analysis on the ideal bag of concepts of the same data
(:func:`bag_inputs`) and judges every column (:func:`judge_columns`). The terminal, the report and ``compare``
render the stored :class:`~bindscope.estimators.verdicts.Verdict` with :func:`verdict_words` and
:func:`value_text`; nothing here is stored as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from bindscope.analyses.inputs import AnalysisInputs
from bindscope.estimators.floors import bag_query_embeddings
from bindscope.estimators.intervals import Rate, interval_text
from bindscope.estimators.metrics import percent
from bindscope.estimators.verdicts import BAG, CHANCE, RAND, REASONS, Measured, Verdict, judge
from bindscope.space.concepts import SceneSet

Unit = Literal["rate", "r2", "share", "number"]

#: How a verdict reads in a card cell and a sentence.
ANSWER_WORDS = {"binds": "binds", "no_binding": "no binding", "undetermined": "undetermined"}


@dataclass(frozen=True)
class CardColumn:
    """One question an analysis answers on the card.

    Attributes
    ----------
    key
        The column's name in summaries, tables and ``card.csv`` (e.g. ``objects recoverable``).
    header
        Its header on the card, with its unit (e.g. ``object probe, %``).
    unit
        ``rate`` (a share of counted cases: percent with n and 95% interval), ``share`` (a share without cases,
        e.g. a fraction of objects seen), ``r2``, or ``number`` (any other number, e.g. a mean cosine).
    question
        The question in words, for a reading (e.g. ``objects recoverable beyond a bag of concepts``).
    family
        The composition family (``relation``, ``count``) whose datasets alone have this column (e.g. the
        relation swap); None: every dataset's.
    """

    key: str
    header: str
    unit: Unit
    question: str
    family: str | None = None


def bag_counts(scenes: SceneSet) -> np.ndarray:
    """The ideal bag of concepts: each scene as the counts of its concept values, ``[N, sum V_c]`` float32."""
    return np.concatenate(scenes.value_counts(), axis=1).astype(np.float32)


def single_object_bag(scenes: SceneSet, rows: int) -> np.ndarray:
    """The bag of a single-object bank (rows object-major, ``o * S + s``): each object's multi-hot, S times."""
    objects = scenes.space.all_objects()
    return np.repeat(bag_query_embeddings(scenes.space, objects), rows // len(objects), axis=0)


def bag_inputs(inputs: AnalysisInputs) -> AnalysisInputs:
    """The same inputs with every embedding array replaced by the ideal bag of concepts of its scenes (both
    modalities alike, the single-object bank as multi-hots); no control, no frozen probes, no uni-modal results:
    the analysis fits what it needs on the bag itself."""
    counts = bag_counts(inputs.scenes)
    singles = None if inputs.singles is None else single_object_bag(inputs.scenes, len(inputs.singles))
    other = None if inputs.other is None else counts.copy()
    return replace(inputs, embeddings=counts, control=None, probes=None, singles=singles, other=other, unimodal=None)


def judge_columns(
    columns: tuple[CardColumn, ...], measured: Mapping[str, Measured], bag: Mapping[str, Measured] | None
) -> dict[str, Verdict]:
    """Every declared column measured on the model, judged against the same column measured on the bag."""
    return {c.key: judge(measured[c.key], (bag or {}).get(c.key)) for c in columns if c.key in measured}


def value_text(verdict: Verdict, unit: Unit, *, interval: bool = True) -> str:
    """A verdict's number in its unit: ``87.5% (95% CI 80.1–92.3%, n = 106)``, ``R² 0.912 (sd 0.004 over 3
    seeds)``; ``-`` where not measured."""
    v = verdict.value
    if v is None:
        return "-"
    shown = number_text(v, unit)
    shown_rate = verdict_rate(verdict)
    if interval and shown_rate is not None:
        shown += f" ({interval_text(shown_rate)})"
    elif interval and verdict.sd is not None:
        shown += f" (sd {sd_text(verdict.sd, unit)} over {verdict.seeds} seeds)"
    return shown


def verdict_rate(verdict: Verdict) -> Rate | None:
    """A verdict's number as a :class:`~bindscope.estimators.intervals.Rate` (None where it is not a rate with its
    n and interval)."""
    v, n, low, high = verdict.value, verdict.n_cases, verdict.ci_low, verdict.ci_high
    return None if v is None or n is None or low is None or high is None else Rate(v, n, low, high)


def number_text(value: float, unit: Unit) -> str:
    """A number in its unit: ``R² 0.912``, ``0.022``, ``87.5%``."""
    if unit == "r2":
        return f"R² {value:.3f}"
    return f"{value:.3f}" if unit == "number" else percent(value)


def plain(unit: Unit) -> bool:
    """Whether a unit is shown as a plain number (R², a cosine), not in percent."""
    return unit in ("r2", "number")


def sd_text(sd: float, unit: Unit) -> str:
    """A standard deviation over seeds in the number's unit (points for a share)."""
    return f"{sd:.3f}" if plain(unit) else f"{100 * sd:.1f} points"


def floor_text(verdict: Verdict, unit: Unit) -> str:
    """The floors beside a number: ``bag of concepts 25.0%, +rand 23.6%, chance 0.4%``."""
    parts = []
    for name in (BAG, RAND, CHANCE):
        value = verdict.floor_value(name)
        if value is not None:
            parts.append(f"{name} {f'{value:.3f}' if plain(unit) else percent(value)}")
    return ", ".join(parts) or "no floor measured"


def verdict_words(column: CardColumn, verdict: Verdict) -> str:
    """One reading: the question, the answer, the number beside its floors, why, and what was scored."""
    head = f"{column.question}: {ANSWER_WORDS[verdict.answer]}"
    body = f"{value_text(verdict, column.unit)} vs {floor_text(verdict, column.unit)}"
    why = REASONS[verdict.reason]
    if verdict.margin is not None and verdict.floor is not None:
        if plain(column.unit):
            why += f" (margin {verdict.margin:+.3f} over {verdict.floor.name}, needs {verdict.required:g})"
        else:
            margin, needs = 100 * verdict.margin, 100 * verdict.required
            why += f" (margin {margin:+.1f} points over {verdict.floor.name}, needs {needs:g})"
    scored = f"; scored on {verdict.scored_on}" if verdict.scored_on else ""
    others = "".join(
        f"; under {a.setting}: {ANSWER_WORDS[a.answer]}"
        + (f" ({number_text(a.value, column.unit)})" if a.value is not None else "")
        for a in verdict.alternatives
    )
    return f"{head}, {body}; {why}{scored}{others}"


def verdict_lines(columns: tuple[CardColumn, ...], verdicts: Mapping[str, Verdict]) -> list[str]:
    """Each declared column's verdict in words, in the declared order (columns without a verdict left out)."""
    return [verdict_words(c, verdicts[c.key]) for c in columns if c.key in verdicts]
