"""Uni-modal probes (docs/method.md §3): is object information recoverable from the embeddings?

Pure functions over arrays (embeddings ``[N, D]`` and the :class:`SceneSet` that labels them)
return tidy rows; :class:`ProbeAnalysis` is the registered analysis ``probe``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.tidy import NO_CONTROL, result_row, tidy
from bindscope.estimators.floors import bag_embeddings, binding_verdict, clearance_text, object_floors
from bindscope.estimators.probe_runs import (
    ProbeRun,
    ProbeSettings,
    accuracy_summary,
    approximate_warnings,
    chance_summary,
    pct,
    percent,
    permuted_labels,
    probe_variant,
    save_fitted_probes,
    seed_splits,
    select_scenes,
    spread_mean,
)
from bindscope.space.concepts import SceneSet

PERMUTATION_SEED = 12345
BAG = "bag"  # the control: the same probes fitted on the ideal bag of concepts of the same scenes
BAG_FLOOR = "bag_floor"  # the variant: the ideal bag's analytic accuracy on each seed's test scenes
FLOOR_METRICS = ("object_acc", "concept_acc")


def bag_settings(settings: ProbeSettings) -> ProbeSettings:
    """The bag control's fit: the model's, with ``fast`` as ``lbfgs``.

    A bag's concept probes always separate their training scenes (it holds every value), so ``fast``
    would follow the reference Adam schedule for them on every run (on clevr 17 s against 3 s), for
    the same object accuracies there: its object probe does not separate its training scenes, which
    hold both bindings of tied pairs. ``reference`` stays ``reference``.
    """
    return settings.model_copy(update={"optimizer": "lbfgs"}) if settings.optimizer == "fast" else settings


def bag_control(scenes: SceneSet, settings: ProbeSettings) -> list[dict]:
    """The bag-of-concepts floors on each seed's split: rows of the probes fitted on the ideal bag's
    embeddings (control ``bag``) and of the ideal bag's analytic accuracy on the test scenes
    (variant ``bag_floor``, see :func:`bindscope.estimators.floors.object_floors`)."""
    rows = probe_variant(bag_embeddings(scenes), scenes, bag_settings(settings), control=BAG).rows
    for seed, split in seed_splits(len(scenes), settings).items():
        floors = object_floors(scenes.subset(split.test))
        rows += [result_row("probe", BAG_FLOOR, "test", m, seed, floors[m]["bag"]) for m in FLOOR_METRICS]
    return rows


def probe_analysis(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    control: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, ProbeRun, pd.DataFrame]:
    """Base probes, chance, the permuted-label control, the bag-of-concepts floors and (if given) the
    ``+rand`` control.

    Returns the tidy results, the base run (its probes are what later analyses reuse) and the
    base run's per-scene correctness.
    """
    used, y, scenes, control = select_scenes(y, scenes, settings.scenes, control)
    total = 4 if control is not None else 3
    tick = progress or (lambda done, total: None)
    tick(0, total)
    base = probe_variant(y, scenes, settings, chance=True, per_scene=True)
    tick(1, total)
    rows = list(base.rows)
    rows += probe_variant(y, permuted_labels(scenes), settings, control="permuted_labels").rows
    tick(2, total)
    rows += bag_control(scenes, settings)
    tick(3, total)
    if control is not None:
        rows += probe_variant(control, scenes, settings, control="rand").rows
        tick(4, total)
    per_scene = pd.concat(base.per_scene, ignore_index=True)
    per_scene["scene"] = used[per_scene["scene"].to_numpy()]  # rows of the dataset
    return tidy(rows), base, per_scene


# -- summaries ------------------------------------------------------------------------------------
def seed_values(table: pd.DataFrame, variant: str, control: str, metric: str) -> pd.Series:
    """One metric's test values per seed (indexed by seed) of one variant and control."""
    sel = table[(table.variant == variant) & (table.control == control) & (table.group == "test")]
    return sel[sel.metric == metric].set_index("seed")["value"]


def floor_summary(table: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """Each accuracy's floors on the test scenes, means over seeds (None where not run).

    ``{metric: {"chance", "rand", "bag", "bag_fitted"}}`` for object_acc and concept_acc: chance, the
    ``+rand`` control, the ideal bag's analytic accuracy and the probes fitted on the ideal bag.
    """
    sources = {"chance": ("chance", NO_CONTROL), "rand": ("base", "rand"), "bag": (BAG_FLOOR, NO_CONTROL)}
    sources["bag_fitted"] = ("base", BAG)
    out: dict[str, dict[str, float | None]] = {}
    for metric in FLOOR_METRICS:
        values = {k: seed_values(table, v, c, metric) for k, (v, c) in sources.items()}
        out[metric] = {k: float(v.mean()) if len(v) else None for k, v in values.items()}
    return out


def binding_summary(table: pd.DataFrame) -> dict[str, Any]:
    """Does the object probe bind beyond a bag of concepts? :func:`~bindscope.estimators.floors.binding_verdict`
    of the test object accuracy per seed against that seed's bag floor: the larger of the ideal bag's
    analytic accuracy and the fitted bag's (``floor_mean``: its mean over seeds)."""
    acc = seed_values(table, "base", NO_CONTROL, "object_acc")
    ideal = seed_values(table, BAG_FLOOR, NO_CONTROL, "object_acc").reindex(acc.index)
    fitted = seed_values(table, "base", BAG, "object_acc").reindex(acc.index)
    floor = np.maximum(ideal.to_numpy(), fitted.to_numpy())
    verdict = binding_verdict(acc.tolist(), floor.tolist())
    return {"metric": "object_acc", **verdict, "floor_mean": None if verdict["seeds"] == 0 else float(floor.mean())}


def probe_summary(table: pd.DataFrame) -> dict[str, Any]:
    """The main numbers of ``bindscope probe``."""
    base = accuracy_summary(table, "base")
    rand = accuracy_summary(table, "base", "rand")
    return {
        "train": base.get("train", {}),
        "test": base.get("test", {}),
        "chance": chance_summary(table),
        "controls": {
            "permuted_labels": accuracy_summary(table, "base", "permuted_labels"),
            "rand": rand or None,
            BAG: accuracy_summary(table, "base", BAG) or None,
        },
        "floors": floor_summary(table),
        "binding": binding_summary(table),
    }


def object_numbers(summary: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
    """A probe summary's test object accuracy, its ``+rand`` control's and chance (None where missing)."""
    rand = ((summary.get("controls") or {}).get("rand") or {}).get("test", {})
    acc = spread_mean(summary["test"].get("object_acc"))
    return acc, spread_mean(rand.get("object_acc")), (summary.get("chance") or {}).get("object_acc")


#: How far above random weights and chance the object probe must be to read "objects recoverable".
RECOVERABLE_MARGIN = 0.1


def recoverable_reading(summary: Mapping[str, Any]) -> str:
    """``objects recoverable: yes|no``: the test object accuracy against ``+rand`` and chance."""
    acc, rand, chance = object_numbers(summary)
    floor = max(v for v in (rand, chance, 0.0) if v is not None)
    verdict = "yes" if acc is not None and acc > floor + RECOVERABLE_MARGIN else "no"
    return (
        f"objects recoverable: {verdict}, {percent(acc)} vs {percent(rand)} for random weights "
        f"(chance {percent(chance)})"
    )


def floor_reading(summary: Mapping[str, Any], metric: str) -> str:
    """One test accuracy with its floors beside it: chance, ``+rand`` and the bag (ideal, fitted)."""
    f = (summary.get("floors") or {}).get(metric) or {}
    rand = "not given" if f.get("rand") is None else percent(f["rand"])
    return (
        f"{metric} {percent(spread_mean(summary['test'].get(metric)))}: chance {percent(f.get('chance'))}, "
        f"+rand {rand}, bag of concepts {percent(f.get('bag'))} ideal / {percent(f.get('bag_fitted'))} fitted"
    )


def binding_reading(summary: Mapping[str, Any]) -> str:
    """The binding verdict in words: "binds beyond a bag of concepts" only when every seed clears it."""
    b = summary.get("binding")
    if not b:
        return "beyond a bag of concepts: not measured (these probe results predate the bag control; run probe again)"
    if b["reading"] == "undetermined":
        return "beyond a bag of concepts: undetermined (no seed has both an object accuracy and a bag floor)"
    acc = spread_mean(summary["test"].get(b["metric"]))
    return (
        f"{b['reading']}; object probe {percent(acc)} vs {percent(b['floor_mean'])} for a bag of concepts, "
        f"{clearance_text(b)}"
    )


class ProbeAnalysis(Analysis):
    """``probe``: concept and object probes over seeds, with chance and the controls."""

    name = "probe"
    title = "Is object information recoverable? Concept and object probes with chance and controls."
    Settings = ProbeSettings
    uses = frozenset({"control"})

    def compute(self, inputs: AnalysisInputs, settings: ProbeSettings, progress: Progress | None = None) -> Result:
        y = np.asarray(inputs.embeddings)
        ctrl = np.asarray(inputs.control) if inputs.control is not None else None
        table, base, per_scene = probe_analysis(y, inputs.scenes, settings, control=ctrl, progress=progress)
        return Result(
            table,
            {"per_scene": per_scene},
            approximate_warnings({"base": base.solver}),
            {"run": base, "scenes": inputs.scenes},
        )

    def summarize(self, result: Result, settings: ProbeSettings) -> dict[str, Any]:
        summary = probe_summary(result.table)
        summary["solver"] = {str(s): e for s, e in result.parts["run"].solver.items()}
        return summary

    def headline(self, summary: dict[str, Any]) -> Rows:
        rows: Rows = [("variant", "object_acc test %", "concept_acc test %", "object_acc train %")]
        labels = {BAG: "bag (fitted)"}
        parts = {"base": summary, **{k: v for k, v in summary["controls"].items() if v}}
        for label, part in parts.items():
            test, train = part.get("test"), part.get("train")
            rows.append(
                (labels.get(label, label), pct(test, "object_acc"), pct(test, "concept_acc"), pct(train, "object_acc"))
            )
        ideal = {m: (summary.get("floors") or {}).get(m, {}).get("bag") for m in FLOOR_METRICS}
        if ideal["object_acc"] is not None:
            rows.append(("bag (ideal)", *(f"{100 * v:.1f}" if v is not None else "-" for v in ideal.values()), ""))
        chance = summary["chance"]
        concept = chance.get("concept_acc")
        rows.append(
            ("chance", f"{100 * chance['object_acc']:.2f}", "-" if concept is None else f"{100 * concept:.1f}", "")
        )
        return rows

    def notes(self, summary: dict[str, Any]) -> list[str]:
        """The readings: objects recoverable (against +rand and chance), each accuracy beside its floors,
        and whether the object probe binds beyond a bag of concepts."""
        floors = [floor_reading(summary, m) for m in FLOOR_METRICS if m in summary["test"]]
        return [recoverable_reading(summary), *floors, binding_reading(summary)]

    def files(self, result: Result, settings: ProbeSettings, context: RunContext) -> ResultFiles:
        run, scenes = result.parts["run"], result.parts["scenes"]
        return ResultFiles(
            result.table,
            dict(result.tables),
            lambda stage: save_fitted_probes(stage, run, scenes, settings, **context.probe_source()),
            parquet_only=frozenset({"per_scene"}),
        )
