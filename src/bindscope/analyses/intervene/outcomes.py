"""What one scored job gives (docs/method/05-interventions.md): tidy rows of retrieval and probe accuracy per group
(scenes whose two objects share the edited value, those that do not, all), the per-case table, and the skip counts."""

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
METRICS = ("retrieval", "probe")
EXTRA_COLUMNS = ("edit", "k", "cases")


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
            value = values[mask].mean()
            out.append(
                result_row(
                    "intervene", job.variant, group, metric, plan.seed, value, edit=plan.edit, k=float(k), cases=n
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
