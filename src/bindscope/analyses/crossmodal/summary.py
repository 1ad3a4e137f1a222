"""The numbers of ``crossmodal``'s ``summary.json``: a typed model, and how it is read off a result."""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from bindscope.analyses.crossmodal.compute import CrossmodalResult
from bindscope.analyses.crossmodal.halftruth import HALF_VARIANTS
from bindscope.analyses.crossmodal.scoring import ALL, TEST_ONLY
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.analyses.results import Summary
from bindscope.core.tidy import spread
from bindscope.core.validation import Schema
from bindscope.estimators.metrics import Spread, nested

#: Rates closer than this read as equal: the same mean summed in another order.
SAME_RATE = 1e-12


#: Per metric, its spread over seeds.
Metrics = dict[str, Spread]


@with_config(ConfigDict(extra="allow"))
class ProbeAccuracy(TypedDict, total=False):
    """A modality's uni-modal probe result (``bindscope probe``): test object and concept accuracy, object chance."""

    object_acc: Spread | None
    concept_acc: Spread | None
    chance: float | None


class Roles(Schema):
    """The concepts that play attribute and noun."""

    attribute: str
    noun: str


class Widths(Schema):
    """The widths of the image and the text embeddings."""

    image: int
    text: int


class BridgeNumbers(Schema):
    """The bridge's kind and, per object fraction it saw, each variant's (raw, bridged) metrics on test_only."""

    kind: Literal["ridge", "contrastive", "none"]
    fractions: dict[str, dict[str, Metrics]]


class CrossmodalSummary(Summary):
    """The main numbers of ``bindscope crossmodal``.

    ``raw``: the captions as they are on every scene; ``references``: per reference (chance,
    bag_of_concepts), its value of each metric; ``headline_fraction``: the bridge fraction the terminal
    shows; half-truth rates pooled over pairs and per scene (None when absent, and why), the kinds
    whose two rates differ; ``skipped``: per swap, why scenes had no caption to compare. ``raw_cases`` and
    ``half_truths_cases`` / ``half_truths_per_scene_cases``: per metric, the cases its rate is a share of
    (image-caption pairs, queries, images), for its 95% interval.
    """

    concepts: Roles
    scenes: int
    subsampled: bool
    widths: Widths
    raw: Metrics
    references: dict[str, dict[str, float]]
    bridge: BridgeNumbers
    headline_fraction: float | None
    half_truths: Metrics | None
    half_truths_per_scene: Metrics | None = None
    half_truths_differ: list[str] = Field(default_factory=list)
    half_truths_absent: str | None = None
    unimodal: dict[str, ProbeAccuracy] | None
    skipped: dict[str, dict[str, int]]
    raw_cases: dict[str, int] = Field(default_factory=dict)
    half_truths_cases: dict[str, int] | None = None
    half_truths_per_scene_cases: dict[str, int] | None = None


def crossmodal_summary(result: CrossmodalResult, settings: CrossmodalSettings) -> CrossmodalSummary:
    """The summary of one ``crossmodal`` result."""
    t = result.table
    raw = t[(t.variant == "raw") & (t.group == ALL)]
    tested = t[t.group == TEST_ONLY]
    bridge = {f"{f:g}": nested(rows, ["variant", "metric"]) for f, rows in tested.groupby("fraction", sort=True)}
    half = {way: t[t.variant == variant] for way, variant in HALF_VARIANTS.items()}
    return CrossmodalSummary(
        concepts=Roles(**result.roles),
        scenes=result.scenes,
        subsampled=result.subsampled,
        widths=Widths(**result.widths),
        raw=nested(raw, ["metric"]),
        raw_cases=case_counts(raw),
        references=references(t),
        bridge=BridgeNumbers(kind=settings.bridge, fractions=bridge),
        headline_fraction=headline_fraction([float(f) for f in bridge]),
        half_truths=half_rates(half["pooled"]),
        half_truths_per_scene=half_rates(half["per_scene"]),
        half_truths_differ=differing(half["pooled"], half["per_scene"]),
        half_truths_absent=result.half_truths_absent,
        half_truths_cases=case_counts(half["pooled"]) or None,
        half_truths_per_scene_cases=case_counts(half["per_scene"]) or None,
        unimodal=result.unimodal,
        skipped=result.skipped,
    )


def case_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Per metric, the cases per seed its rate is a share of (the mean over seeds; metrics without cases left out)."""
    if "n_cases" not in rows:
        return {}
    n = pd.to_numeric(rows["n_cases"], errors="coerce")
    means = n.groupby(rows["metric"], sort=False).mean().dropna()
    return {str(m): int(round(float(v))) for m, v in means.items()}


def references(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per reference (chance, the bag of concepts), its value of each metric."""
    refs = table[table.variant.isin(["chance", "bag_of_concepts"])]
    return {str(v): dict(zip(r.metric, r.value)) for v, r in refs.groupby("variant", sort=False)}


def headline_fraction(fractions: list[float]) -> float | None:
    """The fraction the terminal shows the bridge at: the one nearest 0.5."""
    return min(fractions, key=lambda f: (abs(f - 0.5), f)) if fractions else None


def half_rates(rows: pd.DataFrame) -> dict[str, dict[str, Any]] | None:
    """``{kind: spread}`` of one way of averaging the half-truth rates; None without any."""
    return {m: spread([v]) for m, v in zip(rows.metric, rows.value)} if len(rows) else None


def differing(pooled: pd.DataFrame, per_scene: pd.DataFrame) -> list[str]:
    """The half-truth kinds whose pooled and per-scene rates differ."""
    a, b = pooled.set_index("metric").value, per_scene.set_index("metric").value
    return [m for m in a.index if m in b.index and abs(float(a[m]) - float(b[m])) > SAME_RATE]
