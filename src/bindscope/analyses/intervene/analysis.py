"""The registered ``intervene`` analysis (docs/method.md §5): can one object inside a scene be edited?

Edits ``x' = x - k (e(a, o, pos) - e(t, o, pos))`` of every 2-object scene, with object vectors from
the ``obj-avg``, ``pos-avg`` and ``single`` banks, scored by top-1 cosine retrieval of the edited
scene among all scenes and by frozen concept probes, split into scenes whose two objects share the
edited value and those that do not; alongside, the same metrics for the unedited scene and for a
bag-of-concepts edit (value means of the edited concept: no object, no position).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import field_validator

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.intervene.edits import SIDES, EditPlan, check_two_object_scenes, plan_edits
from bindscope.analyses.intervene.plot import k_curve_plot
from bindscope.analyses.intervene.score import Job, Scores, job_ks, score_jobs
from bindscope.analyses.results import ResultFiles
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import NO_CONTROL, spread, tidy
from bindscope.core.validation import MAX_ITEMS, Device, Seed, Seeds, Settings
from bindscope.estimators.metrics import format_spread
from bindscope.estimators.object_banks import (
    BANKS,
    Bank,
    BankName,
    concept_value_means,
    obj_avg_bank,
    pos_avg_bank,
    single_bank,
)
from bindscope.estimators.probe_runs import ProbeSettings, approximate_warnings, fit_probe_set, save_fitted_probes
from bindscope.estimators.probes import ProbeSet, set_separation_correct
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import SceneSet

UNEDITED = "unedited"
BAG = "bag-of-concepts"
GROUPS = ("shared", "different")
ALL = "all"
NO_VECTOR = "no bank vector"
METRICS = ("retrieval", "probe")
EXTRA_COLUMNS = ("edit", "k", "cases")
#: The strength the paper's table and the terminal report.
TABLE_K = 1.0


class InterveneSettings(Settings):
    """What to edit, with which banks, at which strengths and target seeds.

    ``attribute`` / ``noun``: the concepts edited and kept (default: the dataset's noun, and the other
    concept of a 2-concept space). ``k``: edit strengths (the paper: 1). ``seeds``: seeds of the target
    draw (the paper: 42). ``probe_seed``: the split seed of probes fitted here when none are given.
    """

    edit: Literal["attribute", "noun", "both"] = "attribute"
    banks: tuple[BankName, ...] = BANKS
    k: tuple[float, ...] = (TABLE_K,)
    seeds: Seeds = (42,)
    attribute: str | None = None
    noun: str | None = None
    probe_seed: Seed = 0
    cases: bool = True
    device: Device = "cpu"

    @field_validator("k")
    @classmethod
    def _k(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v:
            raise ValueError("give at least one edit strength k")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} edit strengths k, got {len(v)}")
        if not all(math.isfinite(k) for k in v):
            raise ValueError(f"edit strengths must be finite numbers, got {list(v)}")
        if len(set(v)) != len(v):
            raise ValueError(f"edit strengths repeat: {list(v)}")
        return tuple(sorted(float(k) for k in v))

    @field_validator("banks")
    @classmethod
    def _banks(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError(f"give at least one bank of {', '.join(BANKS)}")
        if len(set(v)) != len(v):
            raise ValueError(f"banks repeat: {list(v)}")
        return v

    def edits(self) -> tuple[str, ...]:
        return ("attribute", "noun") if self.edit == "both" else (self.edit,)


def build_banks(
    y: np.ndarray, scenes: SceneSet, wanted: tuple[str, ...], singles: np.ndarray | None
) -> tuple[dict[str, Bank], dict[str, str]]:
    """The banks asked for, and why any is absent."""
    ids = scenes.object_ids()
    u = scenes.space.num_objects
    banks: dict[str, Bank] = {}
    absent: dict[str, str] = {}
    for name in wanted:
        if name == "obj-avg":
            banks[name] = obj_avg_bank(ids, y, u)
        elif name == "pos-avg":
            banks[name] = pos_avg_bank(ids, y, u)
        elif singles is None:
            absent[name] = "no single-object embeddings given (embed the dataset with --single-objects)"
        else:
            if np.shape(singles)[1] != y.shape[1]:
                raise BindscopeError(
                    f"the single-object embeddings have width {np.shape(singles)[1]}, the scenes {y.shape[1]}; "
                    "embed both with the same model"
                )
            banks[name] = single_bank(singles, u, scenes.max_objects)
    return banks, absent


def make_jobs(
    plan: EditPlan, banks: dict[str, Bank], bag: np.ndarray, bag_present: np.ndarray
) -> tuple[list[Job], dict[str, np.ndarray]]:
    """The variants of one plan (unedited, each bank, the bag of concepts) and their tables."""
    jobs = [Job(plan, UNEDITED, None)]
    for name, bank in banks.items():
        jobs.append(
            Job(plan, name, name, bank.rows(plan.side, plan.source_object), bank.rows(plan.side, plan.target_object))
        )
    table = f"{BAG}:{plan.concept}"
    src = np.where(bag_present[plan.source_value], plan.source_value, -1)
    tgt = np.where(bag_present[plan.target_value], plan.target_value, -1)
    jobs.append(Job(plan, BAG, table, src, tgt))
    return jobs, {table: bag}


def probe_hits_for(
    probes: ProbeSet, scenes: SceneSet, concepts: dict[str, str], dim: int
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``hits(x_edited, expected_rows)``: do the attribute and noun probes set-separate the expected
    scene's values, jointly?"""
    names = list(concepts.values())
    missing = [n for n in names if n not in probes.coef_]
    if missing:
        raise BindscopeError(
            f"the probes have no probe for {', '.join(missing)} (they have {', '.join(probes.coef_)}); "
            "give probes fitted on this dataset"
        )
    space = scenes.space
    for name in names:
        labels, width = np.shape(probes.coef_[name])
        size = space.sizes[space.concept_index(name)]
        if labels != size or width != dim:
            raise BindscopeError(
                f"the {name} probe is [{labels}, {width}] but this dataset's {name} has {size} values and the "
                f"embeddings width {dim}; give probes fitted on these embeddings"
            )

    def hits(x: np.ndarray, expected: np.ndarray) -> np.ndarray:
        logits = probes.decision_function(x, names)
        counts = scenes.subset(expected).value_counts()  # per concept: the expected scene's values
        ok = np.ones(len(x), dtype=bool)
        for name in names:
            ok &= set_separation_correct(logits[name], counts[space.concept_index(name)])
        return ok

    return hits


def fit_probes(y: np.ndarray, scenes: SceneSet, settings: InterveneSettings) -> tuple[ProbeSet, Any, ProbeSettings]:
    """Probes fitted here with the full probe settings (scene split 0.4, ``probe_seed``)."""
    probe_settings = ProbeSettings(seeds=(settings.probe_seed,), device=settings.device, scenes="full")
    probes, run = fit_probe_set(y, scenes, probe_settings)
    return probes, run, probe_settings


def case_table(job: Job, k: float, scores: Scores, rows: np.ndarray, scenes: SceneSet) -> pd.DataFrame:
    """Per case of one job at one k: the edit, what was expected and what came back."""
    plan, valid = job.plan, scores.valid
    space = scenes.space
    values = np.asarray(space.values[space.concept_index(plan.concept)], dtype=object)
    return pd.DataFrame(
        {
            "seed": np.int32(plan.seed),
            "edit": plan.edit,
            "variant": job.variant,
            "k": np.float32(k),
            "scene": rows[plan.scene[valid]].astype(np.int64),
            "side": np.asarray(SIDES, dtype=object)[plan.side[valid]],
            "shared": plan.shared[valid],
            "source": values[plan.source_value[valid]],
            "target": values[plan.target_value[valid]],
            "expected": rows[plan.expected[valid]].astype(np.int64),
            "retrieved": rows[scores.retrieved[valid]].astype(np.int64),
            "rank": scores.rank[valid].astype(np.int64),
            "cos_expected": scores.cos_expected[valid],
            "cos_retrieved": scores.cos_retrieved[valid],
            "hit": scores.hit[valid],
            "probe_hit": scores.probe_hit[valid],
        }
    )


def metric_rows(job: Job, k: float, scores: Scores) -> list[dict[str, Any]]:
    """Tidy rows: retrieval and probe accuracy per group (shared, different, all; empty groups left out)."""
    plan, valid = job.plan, scores.valid
    groups = {ALL: valid, "shared": valid & plan.shared, "different": valid & ~plan.shared}
    out = []
    for group, mask in groups.items():
        n = int(mask.sum())
        if not n:
            continue
        for metric, values in (("retrieval", scores.hit), ("probe", scores.probe_hit)):
            out.append(
                {
                    "analysis": "intervene",
                    "variant": job.variant,
                    "control": NO_CONTROL,
                    "group": group,
                    "metric": metric,
                    "seed": plan.seed,
                    "value": float(values[mask].mean()),
                    "edit": plan.edit,
                    "k": float(k),
                    "cases": n,
                }
            )
    return out


def skipped_cases(job: Job) -> dict[str, int]:
    """Why cases were left out: the plan's reasons, and a missing bank vector."""
    out = dict(job.plan.skipped)
    missing = int((~job.valid).sum())
    if missing:
        out[NO_VECTOR] = missing
    return out


def intervene_analysis(inputs: AnalysisInputs, settings: InterveneSettings, progress: Progress | None = None) -> Result:
    """Every edit of every plan (edit kind x seed) under every variant and k."""
    rows = full_rows(inputs.scenes)
    scenes = inputs.scenes.subset(rows)
    check_two_object_scenes(scenes)
    y = np.asarray(inputs.embeddings, dtype=np.float32)[rows]
    concepts = concept_roles(scenes, settings.attribute, settings.noun or inputs.noun)
    banks, absent = build_banks(y, scenes, settings.banks, inputs.singles)
    warnings: list[str] = []
    probes, fitted, probe_settings = inputs.probes, None, None
    if probes is None:
        probes, fitted, probe_settings = fit_probes(y, scenes, settings)
        warnings += approximate_warnings({"probes": fitted.solver})
    hits = probe_hits_for(probes, scenes, concepts, y.shape[1])
    split = True
    jobs: list[Job] = []
    tables: dict[str, np.ndarray] = {name: bank.table for name, bank in banks.items()}
    for edit in settings.edits():
        edited, kept = (
            (concepts["attribute"], concepts["noun"])
            if edit == "attribute"
            else (concepts["noun"], concepts["attribute"])
        )
        c = scenes.space.concept_index(edited)
        bag, bag_present = concept_value_means(scenes.scenes[:, :, c], y, scenes.space.sizes[c])
        for seed in settings.seeds:
            plan = plan_edits(scenes, edited, kept, seed, edit)
            if not len(plan):
                raise BindscopeError(f"no {edit} edit can be made on these scenes: {plan.skipped or 'no scenes'}")
            plan_jobs, plan_tables = make_jobs(plan, banks, bag, bag_present)
            jobs += plan_jobs
            tables.update(plan_tables)
    scored = score_jobs(y, jobs, tables, settings.k, hits, device=settings.device, progress=progress)
    metric: list[dict[str, Any]] = []
    cases: list[pd.DataFrame] = []
    skipped: dict[str, dict[str, dict[str, int]]] = {}
    for (j, k), scores in scored.items():
        job = jobs[j]
        split = split and bool(job.plan.shared.any()) and bool((~job.plan.shared).any())
        metric += metric_rows(job, k, scores)
        if settings.cases:
            cases.append(case_table(job, k, scores, rows, scenes))
        per = skipped.setdefault(job.plan.edit, {}).setdefault(job.variant, {})
        if k == job_ks(job, settings.k)[0]:  # skips are counted once per job
            for reason, n in skipped_cases(job).items():
                per[reason] = per.get(reason, 0) + n
    table = tidy(metric, EXTRA_COLUMNS)
    if not split:
        table = table[table.group == ALL].reset_index(drop=True)
    tables_out = {"cases": pd.concat(cases, ignore_index=True)} if cases else {}
    parts = {
        "concepts": concepts,
        "banks": {
            name: ({"available": True} if name in banks else {"available": False, "why": absent[name]})
            for name in settings.banks
        },
        "skipped": skipped,
        "split": split,
        "probes": fitted,
        "probe_settings": probe_settings,
    }
    return Result(table, tables_out, warnings, parts)


def table_k(ks: tuple[float, ...] | list[float]) -> float:
    """The k the table and terminal report: 1 when swept, else the one nearest to it."""
    return min(ks, key=lambda k: (abs(k - TABLE_K), k))


def intervene_summary(result: Result, settings: InterveneSettings) -> dict[str, Any]:
    """The main numbers of ``bindscope intervene``."""
    table, parts = result.table, result.parts
    results: dict[str, Any] = {}
    for (edit, variant, group, k), rows in table.groupby(["edit", "variant", "group", "k"], sort=False):
        node = results.setdefault(str(edit), {}).setdefault(str(variant), {}).setdefault(str(group), {})
        node[f"{k:g}"] = {m: spread(rows[rows.metric == m]["value"]) for m in METRICS}
        node[f"{k:g}"]["cases"] = int(rows[rows.metric == "retrieval"]["cases"].sum())
    fitted = parts["probes"] is not None
    return {
        "concepts": parts["concepts"],
        "edits": list(settings.edits()),
        "k": list(settings.k),
        "table_k": table_k(settings.k),
        "groups": [*GROUPS, ALL] if parts["split"] else [ALL],
        "banks": parts["banks"],
        "results": results,
        "skipped": parts["skipped"],
        "probes": {"fitted_here": fitted, "folder": f"probes/seed{settings.probe_seed}" if fitted else None},
    }


def at_k(summary: dict[str, Any], edit: str, variant: str, group: str, k: float) -> dict[str, Any] | None:
    """A variant's numbers at one k (the unedited scene's at k = 0, where they are recorded)."""
    per_k = summary["results"].get(edit, {}).get(variant, {}).get(group)
    if not per_k:
        return None
    return per_k.get(f"{k:g}") or (per_k.get("0") if variant == UNEDITED else None)


class InterveneAnalysis(Analysis):
    """``intervene``: edit one object inside a scene embedding and see whether it becomes the edited scene."""

    name = "intervene"
    title = "Can one object in a scene embedding be edited? Vector-arithmetic edits, scored by retrieval and probes."
    Settings = InterveneSettings
    uses = frozenset({"probes", "singles"})
    extra_columns = EXTRA_COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: InterveneSettings, progress: Progress | None = None) -> Result:
        return intervene_analysis(inputs, settings, progress)

    def summarize(self, result: Result, settings: InterveneSettings) -> dict[str, Any]:
        return intervene_summary(result, settings)

    def headline(self, summary: dict[str, Any]) -> Rows:
        k = summary["table_k"]
        groups = [g for g in summary["groups"] if g != ALL] or [ALL]
        rows: Rows = [("edit", "variant", *(f"{g} {m} % (k={k:g})" for g in groups for m in METRICS), "cases")]
        for edit in summary["edits"]:
            variants = [UNEDITED, *(b for b, v in summary["banks"].items() if v["available"]), BAG]
            for variant in variants:
                cells, cases = [], 0
                for g in groups:
                    part = at_k(summary, edit, variant, g, k)
                    cases += part["cases"] if part else 0
                    cells += [format_spread(part.get(m) if part else None, 1, 100) for m in METRICS]
                rows.append((edit, variant, *cells, f"{cases:,}"))
        return rows

    def notes(self, summary: dict[str, Any]) -> list[str]:
        c = summary["concepts"]
        lines = [
            f"edited: {', '.join(summary['edits'])} (attribute = {c['attribute']}, noun = {c['noun']}); k = "
            + ", ".join(f"{k:g}" for k in summary["k"])
        ]
        for name, bank in summary["banks"].items():
            if not bank["available"]:
                lines.append(f"bank {name}: absent, {bank['why']}")
        singles = (summary.get("inputs") or {}).get("singles")
        if singles:
            lines.append(
                f"single bank: {singles.get('positions', 1)} position(s) per object, "
                f"captions {singles.get('captions') or '-'}"
            )
        for edit, per in summary["skipped"].items():
            reasons = per.get(UNEDITED, {})
            if reasons:
                lines.append(f"{edit} cases skipped: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items()))
            for variant, why in per.items():
                if why.get(NO_VECTOR):
                    lines.append(f"{edit} cases skipped by {variant}: {NO_VECTOR} {why[NO_VECTOR]:,}")
        if ALL in summary["groups"] and len(summary["groups"]) == 1:
            lines.append(
                "no shared/different split: every scene's two objects differ in the edited concept (overall only)"
            )
        return lines

    def seeds(self, settings: InterveneSettings) -> list[int]:
        return list(settings.seeds)

    def files(self, result: Result, settings: InterveneSettings, context: RunContext) -> ResultFiles:
        fitted = result.parts["probes"]
        probe_settings = result.parts["probe_settings"]

        def extra(stage: Path) -> None:
            if len(settings.k) > 1:
                k_curve_plot(
                    result.table, stage / "plots" / "k_curve.png", title=f"{context.title}: edits by strength k"
                )
            if fitted is not None:
                save_fitted_probes(
                    stage,
                    fitted,
                    context.arrays.scenes.subset(full_rows(context.arrays.scenes)),
                    probe_settings,
                    **context.probe_source(),
                )

        return ResultFiles(result.table, dict(result.tables), extra, parquet_only=frozenset({"cases"}))


def full_rows(scenes: SceneSet) -> np.ndarray:
    """The rows an intervention run uses: the scenes holding both objects."""
    return scenes.full() if scenes.max_objects == 2 else np.arange(len(scenes))
