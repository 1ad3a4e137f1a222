"""``probe`` on the report card: its column and how each seed's number is read from the tidy table.

The column is the object probe's set-separation accuracy on each seed's test scenes. Its floors: chance, the
``+rand`` control's probes, and the ideal bag of concepts (the registry runs the same probes on the bag; the
bag's analytic accuracy, the share of test scenes that need no binding, bounds it from below). Readings under
the regularisation strengths the training data cannot tell apart (the solver's one-standard-error band) are
alternatives: where one of them gives another answer, the verdict is ``undetermined``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.probe.compute import BAG_FLOOR
from bindscope.core.tidy import NO_CONTROL
from bindscope.estimators.probe_runs import band_variant
from bindscope.estimators.verdicts import Measured

OBJECTS = "objects recoverable"
COLUMNS = (CardColumn(OBJECTS, "object probe, %", "rate", "objects recoverable beyond a bag of concepts"),)
#: Tidy-table variants holding the test accuracies at the ends of the regularisation band, by setting name.
BAND_VARIANTS = {
    band_variant("base", "low"): "the lowest reading within the regularisation band",
    band_variant("base", "high"): "the highest reading within the regularisation band",
}


def per_seed(table: pd.DataFrame, variant: str, control: str = NO_CONTROL, metric: str = "object_acc") -> pd.Series:
    """One metric's test values per seed of one variant and control (indexed by seed)."""
    rows = table[
        (table["variant"] == variant)
        & (table["control"] == control)
        & (table["group"] == "test")
        & (table["metric"] == metric)
    ]
    return rows.set_index("seed")["value"].sort_index()


def test_cases(per_scene: pd.DataFrame | None) -> int | None:
    """The test scenes per seed of the object probe (None where the per-scene table is missing)."""
    if per_scene is None or not len(per_scene):
        return None
    rows = per_scene[(per_scene["group"] == "test") & (per_scene["probe"] == "object")]
    counts = rows.groupby("seed").size()
    return int(round(float(counts.mean()))) if len(counts) else None


def measure_objects(table: pd.DataFrame, per_scene: pd.DataFrame | None) -> dict[str, Measured]:
    """The object probe's test accuracy per seed, with chance, ``+rand``, the bag's analytic bound and the
    readings at the ends of the regularisation band."""
    acc = per_seed(table, "base")
    rand = per_seed(table, "base", "rand")
    chance = per_seed(table, "chance")
    analytic = per_seed(table, BAG_FLOOR)
    alternatives = {name: per_seed(table, v).tolist() for v, name in BAND_VARIANTS.items() if len(per_seed(table, v))}
    measured = Measured(
        values=acc.tolist(),
        n_cases=test_cases(per_scene),
        chance=float(chance.mean()) if len(chance) else None,
        rand=rand.tolist() if len(rand) else None,
        alternatives=alternatives,
        bag_bound=float(np.mean(analytic)) if len(analytic) else None,
    )
    return {OBJECTS: measured}
