"""The variants every edit plan is scored under (docs/method/05-interventions.md): the unedited scene, one edit per
object-vector bank (``obj-avg``, ``pos-avg``, ``single``), and the bag-of-concepts edit (value means of the edited
concept). A relation edit takes two differences of each table, one per object: ``e(A, p) - e(A, r')`` at the
subject's position and ``e(B, conv p) - e(B, conv r')`` at the object's."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.intervene.edits import BOTH, EditPlan
from bindscope.analyses.intervene.score import Job
from bindscope.core.errors import BindscopeError
from bindscope.estimators.object_banks import Bank, obj_avg_bank, pos_avg_bank, single_bank
from bindscope.space.concepts import SceneSet

UNEDITED = "unedited"
BAG = "bag-of-concepts"


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
    """The variants of one plan (unedited, each bank, the bag of concepts) and their tables; a relation edit's
    (side ``both``) second pair of rows edits the object at the second position."""
    jobs = [Job(plan, UNEDITED, None)]
    first = np.where(plan.side == BOTH, 0, plan.side)
    second = plan.second
    for name, bank in banks.items():
        rows = [bank.rows(first, plan.source_object), bank.rows(first, plan.target_object)]
        if second is not None:
            at = np.ones(len(plan), dtype=np.int64)
            rows += [bank.rows(at, second[0]), bank.rows(at, second[1])]
        jobs.append(Job(plan, name, name, *rows))
    table = f"{BAG}:{plan.concept}"

    def values(v: np.ndarray) -> np.ndarray:
        return np.where(bag_present[v], v, -1)

    rows = [values(plan.source_value), values(plan.target_value)]
    if second is not None:
        rows += [values(second[2]), values(second[3])]
    jobs.append(Job(plan, BAG, table, *rows))
    return jobs, {table: bag}
