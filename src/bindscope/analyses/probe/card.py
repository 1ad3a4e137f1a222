"""``probe`` on the report card: its column and how each seed's number is read from the tidy table.

The column is the object probe's set-separation accuracy on each seed's test scenes. Its floors: chance, the
``+rand`` control's probes, and the ideal bag of concepts (the registry runs the same probes on the bag; the
bag's analytic accuracy, the share of test scenes that need no binding, bounds it from below). Readings under
the regularisation strengths the training data cannot tell apart (the solver's one-standard-error band) are
alternatives: where one of them gives another answer, the verdict is ``undetermined``. On a relation or count
space the bag's bound is that of the bag of roles (:func:`measure_objects`).
"""

from __future__ import annotations

import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.probe.compute import BAG, BAG_FLOOR
from bindscope.analyses.probe.summary import scene_counts, seed_values
from bindscope.core.tidy import NO_CONTROL
from bindscope.estimators.probe_runs import band_variant
from bindscope.estimators.verdicts import Measured

OBJECTS = "objects recoverable"
OBJECT_ACC = "object_acc"
COLUMNS = (CardColumn(OBJECTS, "object probe, %", "rate", "objects recoverable beyond a bag of concepts"),)
#: Tidy-table variants holding the test accuracies at the ends of the regularisation band, by setting name.
BAND_VARIANTS = {
    band_variant("base", "low"): "the lowest reading within the regularisation band",
    band_variant("base", "high"): "the highest reading within the regularisation band",
}


def measure_objects(table: pd.DataFrame, roles: bool = False) -> dict[str, Measured]:
    """The object probe's test accuracy per seed, with its test scenes per seed, chance, ``+rand``, the bag's
    analytic bound and the readings at the ends of the regularisation band.

    ``roles`` (a relation or count space): the bound is the bag of roles' (it knows each object with its
    attributes bound and the places or counts, not which object holds which;
    :func:`~bindscope.estimators.floors.role_view`), per seed the larger of its analytic accuracy and the probes
    fitted on it, so that a model binding attributes but not places (counts) reads at its floor."""
    acc = seed_values(table, "base", NO_CONTROL, OBJECT_ACC)
    rand = seed_values(table, "base", "rand", OBJECT_ACC)
    chance = seed_values(table, "chance", NO_CONTROL, OBJECT_ACC)
    analytic = seed_values(table, BAG_FLOOR, NO_CONTROL, OBJECT_ACC)
    if roles:
        fitted = seed_values(table, "base", BAG, OBJECT_ACC).reindex(analytic.index)
        analytic = analytic.where(analytic >= fitted.fillna(analytic), fitted)
    band = {name: seed_values(table, v, NO_CONTROL, OBJECT_ACC) for v, name in BAND_VARIANTS.items()}
    measured = Measured(
        values=acc.sort_index().tolist(),
        n_cases=(scene_counts(table) or {}).get("test"),
        chance=float(chance.mean()) if len(chance) else None,
        rand=rand.sort_index().tolist() if len(rand) else None,
        alternatives={name: v.sort_index().tolist() for name, v in band.items() if len(v)},
        bag_bound=float(analytic.mean()) if len(analytic) else None,
    )
    return {OBJECTS: measured}
