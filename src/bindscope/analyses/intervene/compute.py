"""Every edit of an intervention run (docs/method/05-interventions.md), scored: pure over arrays.

Edits ``x' = x - k (e(a, o, pos) - e(t, o, pos))`` of every 2-object scene, with object vectors from
the ``obj-avg``, ``pos-avg`` and ``single`` banks, scored by top-1 cosine retrieval of the edited
scene among all scenes and by frozen concept probes, split into scenes whose two objects share the
edited value and those that do not; alongside, the same metrics for the unedited scene and for a
bag-of-concepts edit (value means of the edited concept: no object, no position).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bindscope.analyses.base import Progress, Result
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.intervene.edits import (
    FAMILY_EDITS,
    EditPlan,
    check_two_object_scenes,
    plan_edits,
    plan_relation_edits,
    sample_plan,
)
from bindscope.analyses.intervene.outcomes import ALL, EXTRA_COLUMNS, case_table, metric_rows, skipped_cases
from bindscope.analyses.intervene.probing import fit_probes, probe_hits_for
from bindscope.analyses.intervene.score import Job, job_ks, score_jobs
from bindscope.analyses.intervene.settings import InterveneSettings
from bindscope.analyses.intervene.variants import build_banks, make_jobs
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import tidy
from bindscope.estimators.object_banks import concept_value_means
from bindscope.estimators.probe_runs import ProbeRun, ProbeSettings, approximate_warnings
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of

Skipped = dict[str, dict[str, dict[str, int]]]  # edit -> variant -> reason -> cases over all seeds
Sampled = dict[str, tuple[int, int]]  # edit -> (cases scored, cases planned), over all seeds
#: The ``control`` of the ``+rand`` control's rows in the tidy table.
RAND = "rand"


@dataclass
class InterveneResult(Result):
    """What ``intervene`` computes: the tidy table, the per-case table (``tables``), the concepts edited and kept,
    why any bank asked for is absent, the cases skipped, whether the shared/different split exists, the probes
    fitted here (None when frozen probes were given) with their settings and scenes, the edit kinds made, and per
    edit kind sampled (``--sample-cases``) the cases scored and planned over all seeds."""

    concepts: dict[str, str] = field(kw_only=True)
    absent: dict[str, str] = field(kw_only=True)
    skipped: Skipped = field(kw_only=True)
    split: bool = field(kw_only=True)
    scenes: SceneSet = field(kw_only=True)
    fitted: ProbeRun | None = field(kw_only=True, default=None)
    probe_settings: ProbeSettings | None = field(kw_only=True, default=None)
    edits: tuple[str, ...] = field(kw_only=True, default=("attribute",))
    sampled: Sampled = field(kw_only=True, default_factory=dict)


def full_rows(scenes: SceneSet) -> np.ndarray:
    """The rows an intervention run uses: the scenes holding both objects."""
    return scenes.full() if scenes.max_objects == 2 else np.arange(len(scenes))


def probed_concepts(scenes: SceneSet, concepts: dict[str, str]) -> tuple[str, ...]:
    """The concepts whose probes the paper's probe hit reads: the attribute and the noun, and on a relation or count
    space the place or count too (the expected scene's places and counts are part of what an edit must give)."""
    family = tuple(c for c in scenes.space.concepts if c in FAMILY_EDITS.values())
    return (concepts["attribute"], concepts["noun"], *family)


def edit_plan(scenes: SceneSet, edit: str, concepts: dict[str, str], seed: int) -> EditPlan:
    """The cases of one edit kind and target seed: an attribute, noun or count edit of one object, or a relation
    edit of both."""
    probed = probed_concepts(scenes, concepts)
    if edit == "relation":
        return plan_relation_edits(scenes, seed, probed)
    if edit == "count":
        return plan_edits(scenes, FAMILY_EDITS["count"], None, seed, edit, probed)
    first, second = concepts["attribute"], concepts["noun"]
    edited, kept = (first, second) if edit == "attribute" else (second, first)
    return plan_edits(scenes, edited, kept, seed, edit, probed)


def plan_jobs(
    scenes: SceneSet, y: np.ndarray, concepts: dict[str, str], banks: dict, settings: InterveneSettings
) -> tuple[list[Job], dict[str, np.ndarray]]:
    """The jobs of every plan (edit kind x seed; a seeded sample of its cases with ``sample_cases``) and the
    direction tables they index (the banks' tables are added by the caller)."""
    jobs: list[Job] = []
    tables: dict[str, np.ndarray] = {}
    for edit in settings.edits(family_of(scenes.space)):
        edited = FAMILY_EDITS.get(edit) or concepts[edit]
        c = scenes.space.concept_index(edited)
        bag, bag_present = concept_value_means(scenes.scenes[:, :, c], y, scenes.space.sizes[c])
        for seed in settings.seeds:
            plan = edit_plan(scenes, edit, concepts, seed)
            if not len(plan):
                raise BindscopeError(f"no {edit} edit can be made on these scenes: {plan.skipped or 'no scenes'}")
            plan = sample_plan(plan, settings.sample_cases)
            more_jobs, more_tables = make_jobs(plan, banks, bag, bag_present)
            jobs += more_jobs
            tables.update(more_tables)
    return jobs, tables


def intervene_analysis(
    inputs: AnalysisInputs, settings: InterveneSettings, progress: Progress | None = None
) -> InterveneResult:
    """Every edit of every plan (edit kind x seed) under every variant and k; where the ``+rand`` control is
    given, the same edits of its embeddings too (its rows marked ``control = rand``: probes fitted on the control,
    no single bank, no cases)."""
    result = edit_scenes(inputs, settings, progress)
    if inputs.control is None:
        return result
    control = replace(inputs, embeddings=inputs.control, control=None, probes=None, singles=None)
    rand = edit_scenes(control, settings.model_copy(update={"cases": False}), None)
    result.table = pd.concat([result.table, rand.table.assign(control=RAND)], ignore_index=True)
    return result


def edit_scenes(
    inputs: AnalysisInputs, settings: InterveneSettings, progress: Progress | None = None
) -> InterveneResult:
    """Every edit of every plan (edit kind x seed) under every variant and k, of ``inputs.embeddings``."""
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
    hits = probe_hits_for(probes, scenes, probed_concepts(scenes, concepts), y)
    jobs, plan_tables = plan_jobs(scenes, y, concepts, banks, settings)
    tables = {**{name: bank.table for name, bank in banks.items()}, **plan_tables}
    scored = score_jobs(y, jobs, tables, settings.k, hits, device=settings.device, progress=progress)
    split = True
    metric: list[dict] = []
    cases: list[pd.DataFrame] = []
    skipped: Skipped = {}
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
    return InterveneResult(
        table,
        {"cases": pd.concat(cases, ignore_index=True)} if cases else {},
        warnings,
        concepts=concepts,
        absent=absent,
        skipped=skipped,
        split=split,
        scenes=scenes,
        fitted=fitted,
        probe_settings=probe_settings,
        edits=settings.edits(family_of(scenes.space)),
        sampled=sampled_cases(jobs),
    )


def sampled_cases(jobs: list[Job]) -> Sampled:
    """Per edit kind of which some plan is a sample: the cases scored and planned, over all its plans (seeds)."""
    plans = list({id(job.plan): job.plan for job in jobs}.values())
    edits = dict.fromkeys(p.edit for p in plans if p.population is not None)
    return {
        edit: (
            sum(len(p) for p in plans if p.edit == edit),
            sum(len(p) if p.population is None else p.population for p in plans if p.edit == edit),
        )
        for edit in edits
    }
