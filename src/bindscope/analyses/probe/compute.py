"""Probes over seeds with chance and their controls (docs/method/03-probes.md): pure functions over arrays.

The base probes (with chance), the permuted-label control, the bag-of-concepts floors (the same probes fitted
on the ideal bag of the same scenes, and the ideal bag's analytic accuracy) and, when given, the ``+rand``
control: embeddings of the same model with random weights.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bindscope.analyses.base import Progress
from bindscope.core.tidy import result_row, tidy
from bindscope.estimators.floors import bag_embeddings, object_floors, role_view
from bindscope.estimators.probe_runs import (
    ProbeRun,
    ProbeSettings,
    permuted_labels,
    probe_variant,
    seed_splits,
    select_scenes,
    with_scene_cases,
)
from bindscope.space.concepts import SceneSet

BAG = "bag"  # the control: the same probes fitted on the ideal bag of concepts of the same scenes
BAG_FLOOR = "bag_floor"  # the variant: the ideal bag's analytic accuracy on each seed's test scenes
FLOOR_METRICS = ("object_acc", "concept_acc")


def bag_settings(settings: ProbeSettings) -> ProbeSettings:
    """The bag control's fit: the model's (``regularised`` and ``reference`` stay), with ``fast`` as ``lbfgs``.

    A bag's concept probes always separate their training scenes (it holds every value), so ``fast``
    would follow the reference Adam schedule for them on every run (on clevr 17 s against 3 s), for
    the same object accuracies there: its object probe does not separate its training scenes, which
    hold both bindings of tied pairs. ``reference`` stays ``reference``.
    """
    return settings.model_copy(update={"optimizer": "lbfgs"}) if settings.optimizer == "fast" else settings


def bag_control(scenes: SceneSet, settings: ProbeSettings) -> list[dict]:
    """The bag-of-concepts floors on each seed's split: rows of the probes fitted on the ideal bag's
    embeddings (control ``bag``) and of the ideal bag's analytic accuracy on the test scenes
    (variant ``bag_floor``, see :func:`bindscope.estimators.floors.object_floors`). On a relation or count space
    the bag is one of roles (:func:`~bindscope.estimators.floors.role_view`): it ties a scene with its relation
    (count) swap only."""
    roles = role_view(scenes)
    rows = probe_variant(bag_embeddings(roles), scenes, bag_settings(settings), control=BAG).rows
    for seed, split in seed_splits(len(scenes), settings).items():
        floors = object_floors(roles.subset(split.test))
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
    table = tidy(rows)
    counted = ~table["variant"].isin(["chance", BAG_FLOOR])  # BAG_FLOOR: the ideal bag's analytic share
    return with_scene_cases(table, len(scenes), settings, counted), base, per_scene
