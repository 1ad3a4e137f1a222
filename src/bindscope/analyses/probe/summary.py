"""The main numbers of ``probe`` (its part of ``summary.json``): :class:`ProbeSummary` and how the tidy
table gives them.

Results written before the bag-of-concepts control lack ``floors``, ``binding`` and ``controls.bag``: they
load with those parts None (and are written back without them).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pydantic import Field

from bindscope.analyses.probe.compute import BAG, BAG_FLOOR, FLOOR_METRICS
from bindscope.analyses.results import Summary
from bindscope.core.tidy import NO_CONTROL
from bindscope.core.validation import Schema
from bindscope.estimators.floors import binding_verdict
from bindscope.estimators.metrics import Splits, Spread, is_absent, nested
from bindscope.estimators.probe_runs import accuracy_summary, chance_summary


class ProbeControls(Schema):
    """The probes' accuracies under each control (``rand``: None where no ``+rand`` embeddings were given)."""

    permuted_labels: Splits
    rand: Splits | None
    bag: Splits | None = Field(None, exclude_if=is_absent)


class Floors(Schema):
    """One accuracy's floors on the test scenes, means over seeds (None where not run): chance, the ``+rand``
    control, the ideal bag's analytic accuracy and the probes fitted on the ideal bag."""

    chance: float | None
    rand: float | None
    bag: float | None
    bag_fitted: float | None


class Binding(Schema):
    """Does the object probe bind beyond a bag of concepts (:func:`~bindscope.estimators.floors.binding_verdict`
    per seed against the larger bag floor; ``floor_mean``: that floor's mean over seeds)."""

    metric: str
    reading: str
    margin: float
    clearance_mean: float | None
    clearance_min: float | None
    seeds: int
    floor_mean: float | None


class ProbeSummary(Summary):
    """The numbers of ``bindscope probe``: accuracies per group and metric, chance, the controls, the floors,
    the binding verdict, and the solver of each seed's probes."""

    train: dict[str, Spread]
    test: dict[str, Spread]
    chance: dict[str, float]
    controls: ProbeControls
    floors: dict[str, Floors] | None = Field(None, exclude_if=is_absent)
    binding: Binding | None = Field(None, exclude_if=is_absent)
    solver: dict[str, dict[str, str]]
    #: The scenes one seed's probes were fitted on (``train``) and read on (``test``); None in older results.
    scenes: dict[str, int] | None = Field(None, exclude_if=is_absent)


def seed_values(table: pd.DataFrame, variant: str, control: str, metric: str) -> pd.Series:
    """One metric's test values per seed (indexed by seed) of one variant and control."""
    sel = table[(table.variant == variant) & (table.control == control) & (table.group == "test")]
    return sel[sel.metric == metric].set_index("seed")["value"]


def floor_summary(table: pd.DataFrame) -> dict[str, Floors]:
    """Each accuracy's floors (:class:`Floors`) on the test scenes, for object_acc and concept_acc."""
    sources = {"chance": ("chance", NO_CONTROL), "rand": ("base", "rand"), "bag": (BAG_FLOOR, NO_CONTROL)}
    sources["bag_fitted"] = ("base", BAG)
    out = {}
    for metric in FLOOR_METRICS:
        values = {k: seed_values(table, v, c, metric) for k, (v, c) in sources.items()}
        out[metric] = Floors(**{k: float(v.mean()) if len(v) else None for k, v in values.items()})
    return out


def binding_summary(table: pd.DataFrame) -> Binding:
    """The test object accuracy per seed against that seed's bag floor: the larger of the ideal bag's analytic
    accuracy and the fitted bag's."""
    acc = seed_values(table, "base", NO_CONTROL, "object_acc")
    ideal = seed_values(table, BAG_FLOOR, NO_CONTROL, "object_acc").reindex(acc.index)
    fitted = seed_values(table, "base", BAG, "object_acc").reindex(acc.index)
    floor = np.maximum(ideal.to_numpy(), fitted.to_numpy())
    verdict = binding_verdict(acc.tolist(), floor.tolist())
    floor_mean = None if verdict["seeds"] == 0 else float(floor.mean())
    return Binding(metric="object_acc", **verdict, floor_mean=floor_mean)


def probe_summary(table: pd.DataFrame, solver: Mapping[int, Mapping[str, str]] | None = None) -> ProbeSummary:
    """The main numbers of ``bindscope probe`` from its tidy table and the base probes' solver per seed."""
    base = nested(table[(table.variant == "base") & (table.control == NO_CONTROL)], ["group", "metric"])
    controls = ProbeControls(
        permuted_labels=accuracy_summary(table, "base", "permuted_labels") or Splits(),
        rand=accuracy_summary(table, "base", "rand"),
        bag=accuracy_summary(table, "base", BAG),
    )
    return ProbeSummary(
        train=base.get("train", {}),
        test=base.get("test", {}),
        chance=chance_summary(table),
        controls=controls,
        floors=floor_summary(table),
        binding=binding_summary(table),
        solver={str(s): dict(e) for s, e in (solver or {}).items()},
        scenes=scene_counts(table),
    )


def scene_counts(table: pd.DataFrame) -> dict[str, int] | None:
    """The base probes' train and test scenes per seed (their rows' ``n_cases``); None where not recorded."""
    if "n_cases" not in table.columns:
        return None
    rows = table[(table.variant == "base") & (table.control == NO_CONTROL)]
    counts = {g: pd.to_numeric(rows[rows.group == g]["n_cases"], errors="coerce").mean() for g in ("train", "test")}
    return {g: int(round(float(n))) for g, n in counts.items() if pd.notna(n)} or None
