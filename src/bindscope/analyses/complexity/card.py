"""``complexity`` on the report card: does a family fitted on scenes of seen objects generalise *binding* to scenes
of unseen objects, beyond what a bag of concepts does? (docs/method/06-complexity.md, *On the card*)

The column's number, per seed: the share of the scored test_only scenes that need binding, paired with their
binding swaps of unseen objects only (:func:`~bindscope.analyses.complexity.swaps.unseen_pairs`), whose predicted
embeddings the frozen object probe tells apart from their swaps'
(:func:`~bindscope.analyses.complexity.swaps.told_apart`), for the family of the highest mean share, at the
column's fraction (:func:`column_fraction`: the largest with enough such scenes on every seed). Its
floors: chance, the larger of random probe scores' share and the family's share with each scene's and its swap's
predictions exchanged (what predictions that do not say which scene is which score), and the same analysis run
on the ideal bag of concepts (the registry runs it; the bag's probes are fitted on the bag), whose analytic score
is 0: a bag embeds a scene and its swap alike, and a tie is wrong. Where no family fits even the scenes it was
fitted on at that fraction
(:func:`~bindscope.analyses.complexity.curves.fitting`), the verdict is ``undetermined`` (``no_fit``): the budget,
not the binding function, is what failed.
"""

from __future__ import annotations

import math

import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.complexity.curves import COVERED_AT, curve, fitting
from bindscope.analyses.complexity.score import EXCHANGED, SWAP, SWAP_SCENES, UNSEEN
from bindscope.analyses.complexity.settings import ComplexitySettings
from bindscope.analyses.complexity.summary import Generalisation
from bindscope.estimators.verdicts import Measured

GENERALISES = "generalises to unseen objects"
COLUMNS = (
    CardColumn(
        GENERALISES,
        "binding on unseen objects, %",
        "rate",
        "binding generalises to scenes of unseen objects beyond a bag of concepts",
    ),
)
#: The column reads the largest fraction at which every seed scores at least this many scenes needing binding
#: (and :data:`~bindscope.analyses.complexity.curves.COVERED_AT` of the test_only scenes hold fitted values only);
#: where none does, it is not measured (a rate of a handful of scenes would read "no binding" on no evidence).
MIN_CASES = 10
SCORED_ON = "scenes of unseen objects that need binding, against their binding swaps"


def labels_by_simplicity(settings: ComplexitySettings) -> list[str]:
    """The settings' families, simplest first (the order ties between them are broken in)."""
    return [f.label for f in sorted(settings.families(), key=lambda f: f.simplicity)]


def column_fraction(table: pd.DataFrame) -> float | None:
    """The fraction the column reads: the largest at which every seed scores at least :data:`MIN_CASES` test_only
    scenes needing binding and :data:`COVERED_AT` of its test_only scenes hold fitted values only (else a family
    could fail for want of a trained table row); None where no fraction does (the column is not measured).

    It depends on the scenes, the splits and the settings only, never on the embeddings: the model and its bag of
    concepts are read at the same fraction. The largest qualifying fraction gives every family the most seen
    objects to generalise from, with enough cases for an interval.
    """
    scenes = curve(table, "scenes", UNSEEN, SWAP_SCENES, "")
    if scenes.empty:
        return None
    cover = curve(table, "scenes", "test_only", "covered_share", "").reindex_like(scenes)
    enough = (scenes.min(axis=0) >= MIN_CASES) & (cover.mean(axis=0) >= COVERED_AT)
    qualified = [float(f) for f, ok in zip(scenes.columns, enough.to_numpy()) if ok]
    return max(qualified) if qualified else None


def best_family(table: pd.DataFrame, fraction: float, labels: list[str]) -> str | None:
    """The family (of ``labels``, simplest first) whose mean share told apart at ``fraction`` is highest (the
    simplest on a tie); None where none was scored there."""
    best, top = None, -math.inf
    for label in labels:
        told = curve(table, label, UNSEEN, SWAP, "selected")
        if fraction in told.columns and told[fraction].notna().any() and float(told[fraction].mean()) > top:
            best, top = label, float(told[fraction].mean())
    return best


def generalisation(table: pd.DataFrame, labels: list[str]) -> Generalisation:
    """What the column reads: its fraction, family, scenes per seed and the families fitting there."""
    fraction = column_fraction(table)
    per_fraction = curve(table, "scenes", UNSEEN, SWAP_SCENES, "").mean(axis=0)  # scenes per seed
    if fraction is None:
        most = float(per_fraction.max()) if len(per_fraction) else None
        return Generalisation(fraction=None, family=None, scenes=most, fitting=[])
    return Generalisation(
        fraction=fraction,
        family=best_family(table, fraction, labels),
        scenes=float(per_fraction[fraction]),
        fitting=fitting(table, labels, fraction),
    )


def measure_generalisation(table: pd.DataFrame, labels: list[str]) -> dict[str, Measured]:
    """The column per seed with its cases, chance (the larger of random scores' and the exchanged predictions'
    share) and the bag's analytic score (0), blocked (``no_fit``) where no family fits its training scenes at the
    column's fraction."""
    read = generalisation(table, labels)
    if read.fraction is None or read.family is None:
        return {GENERALISES: Measured(values=[], scored_on=SCORED_ON, bag_bound=0.0)}
    told = curve(table, read.family, UNSEEN, SWAP, "selected")[read.fraction]
    nulls = [
        float(c[read.fraction].mean())
        for c in (
            curve(table, "chance", UNSEEN, SWAP, ""),
            curve(table, read.family, UNSEEN, EXCHANGED, "selected"),
        )
        if read.fraction in c.columns and c[read.fraction].notna().any()
    ]
    measured = Measured(
        values=told.tolist(),
        n_cases=None if read.scenes is None else int(round(read.scenes)),
        chance=max(nulls) if nulls else None,
        scored_on=f"{SCORED_ON} ({read.family} at f = {read.fraction:g})",
        bag_bound=0.0,
        blocked=None if read.fitting else "no_fit",
    )
    return {GENERALISES: measured}
