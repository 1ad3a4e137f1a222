"""What one scored job gives (docs/method/05-interventions.md): tidy rows of retrieval and probe accuracy per group
(scenes whose two objects share the edited value, those that do not, all), the per-case table, and the skip counts.

Four metrics: the paper's ``retrieval`` and ``probe`` (the research code's, on every edit) and their bound forms
``retrieval_binding`` and ``probe_binding``, scored on the edits that need binding only (whose expected scene has
a binding swap among the scenes) with ties counted wrong: an ideal bag of concepts scores 0 on them by
construction. Every row carries the cases it is a share of (``n_cases``) and its chance (:mod:`.chance`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.intervene.edits import SIDES
from bindscope.analyses.intervene.score import Job, Scores
from bindscope.core.tidy import result_row
from bindscope.space.concepts import SceneSet

GROUPS = ("shared", "different")
ALL = "all"
NO_VECTOR = "no bank vector"
#: The paper's metrics (the research code's hits, on every edit).
METRICS = ("retrieval", "probe")
#: Their bound forms: on the edits that need binding, ties counted wrong.
BOUND = {"retrieval": "retrieval_binding", "probe": "probe_binding"}
EXTRA_COLUMNS = ("edit", "k", "n_cases", "chance")


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
            "binding": plan.binding[valid],
            "bound_hit": scores.bound_hit[valid],
            "bound_probe_hit": _or_missing(scores.bound_probe_hit, valid),
        }
    )


def _or_missing(values: np.ndarray | None, valid: np.ndarray) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """A boolean per-case column, missing (``pd.NA``) throughout where it was not measured."""
    if values is None:
        return pd.array([pd.NA] * int(valid.sum()), dtype="boolean")
    return values[valid]


def metric_rows(job: Job, k: float, scores: Scores) -> list[dict[str, Any]]:
    """Tidy rows per group (shared, different, all; empty groups left out): the paper's retrieval and probe
    accuracy on every valid edit, their bound forms on the valid edits that need binding, each with its cases
    (``n_cases``) and chance."""
    plan, valid = job.plan, scores.valid
    groups = {ALL: valid, "shared": valid & plan.shared, "different": valid & ~plan.shared}
    hits = {
        "retrieval": scores.hit,
        "probe": scores.probe_hit,
        "retrieval_binding": scores.bound_hit,
        "probe_binding": scores.bound_probe_hit,
    }
    out = []
    for group, in_group in groups.items():
        for metric, values in hits.items():
            mask = in_group & plan.binding if metric in BOUND.values() else in_group
            n = int(mask.sum())
            if not n or values is None:
                continue
            out.append(
                result_row(
                    "intervene",
                    job.variant,
                    group,
                    metric,
                    plan.seed,
                    values[mask].mean(),
                    edit=plan.edit,
                    k=float(k),
                    n_cases=n,
                    chance=float(plan.chance[metric][mask].mean()),
                )
            )
    return out


def skipped_cases(job: Job) -> dict[str, int]:
    """Why cases were left out: the plan's reasons, and a missing bank vector."""
    out = dict(job.plan.skipped)
    missing = int((~job.valid).sum())
    if missing:
        out[NO_VECTOR] = missing
    return out
