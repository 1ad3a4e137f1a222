"""``geometry`` on the report card: its columns and how each seed's number is read from the tidy table
(docs/method/08-geometry.md, "On the report card").

Geometry describes the shape of object vectors: how well they split into per-concept parts (factorization R²,
on all objects and on unseen ones), whether linear heads read each concept of objects never seen, and whether
the concepts' parts are orthogonal. An ideal bag of concepts is the perfect case of every one of these: its
object vectors are exactly the sums of one-hot concept parts in disjoint coordinates (R² 1, held out too; heads
100%; cross-concept |cos| 0). No model can beat it on them, so every column reads ``undetermined`` with reason
``floor_at_ceiling`` (the verdict contract's rule when the bag reaches the metric's best value) for every model:
the columns describe compositional structure, not binding. They stay on the card so that this is said, not
left out.

Each number is the mean over the slot positions' object vectors; the held-out ones are per seed at the
headline fraction (the one nearest 0.5).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.geometry.summary import headline_fraction
from bindscope.estimators.verdicts import Measured

FACTORIZATION = "factorization"
HELD_OUT = "held-out factorization"
HEADS = "unseen-object heads"
ACROSS = "cross-concept cosine"
COLUMNS = (
    CardColumn(FACTORIZATION, "factorization R², all objects", "r2", "object vectors are sums of concept parts"),
    CardColumn(HELD_OUT, "factorization R², unseen objects", "r2", "the concept parts predict unseen objects"),
    CardColumn(HEADS, "linear heads on unseen objects, %", "rate", "linear heads read every concept of unseen objects"),
    CardColumn(ACROSS, "mean |cos| across concepts", "number", "concepts take orthogonal directions"),
)
#: The objects the held-out columns score.
UNSEEN = "objects unseen by the fit"
#: |cos| this small is 0 up to rounding (a bag's concept parts lie in disjoint coordinates: 1e-16).
ROUNDING = 12


def rows_of(table: pd.DataFrame, variant: str, group: str, metric: str) -> pd.DataFrame:
    """The slot positions' rows of one (variant, group, metric)."""
    return table[
        (table["variant"] == variant)
        & (table["group"] == group)
        & (table["metric"] == metric)
        & (table["position"] >= 0)
    ]


def per_seed(rows: pd.DataFrame, column: str = "value") -> pd.Series:
    """``column``'s mean over slot positions per seed (NaN values left out; indexed by seed)."""
    return rows.groupby("seed")[column].mean().sort_index()


def at_fraction(table: pd.DataFrame, fraction: float) -> pd.DataFrame:
    """The rows of the held-out sweep at ``fraction``."""
    return table[np.isclose(table["fraction"].astype(float), fraction)]


def measure_geometry(
    table: pd.DataFrame, fractions: tuple[float, ...], space_objects: int, relation: bool = False
) -> dict[str, Measured]:
    """Every column: factorization R² on all objects (no seed: one value), held-out R² and the heads' object
    accuracy on unseen objects per seed at the headline fraction (the heads with their cases, the unseen
    objects of every slot, and chance ``1 / U``), and the mean cross-concept |cos| (lower is better, best 0).

    ``relation`` (a relation space): every column's bag bound is its best value. A slot's object vectors there tell
    an object's place from its converse by the relation the scene names ("A to the left of B" against "A to the
    right of B"), which a bag of concepts, holding both places of every scene, cannot, but a bag that knows the
    relation and not which object is its subject (a bag of words) does: its object vectors are exactly sums of
    concept parts in disjoint coordinates, at the ceiling of every column, as a bag of concepts is elsewhere."""
    out: dict[str, Measured] = {}
    whole = rows_of(table, "factorization", "all", "r2")
    if len(whole):
        out[FACTORIZATION] = Measured(values=[float(whole["value"].mean())])
    held = at_fraction(table, headline_fraction(fractions)) if fractions else table.iloc[:0]
    r2 = per_seed(rows_of(held, "raw", "all", "r2_test"))
    if len(r2):
        out[HELD_OUT] = Measured(values=r2.tolist(), scored_on=UNSEEN)
    heads = rows_of(held, "heads", "object", "accuracy")
    if len(heads):
        cases = heads.groupby("seed")["n_cases"].sum().astype(float)
        out[HEADS] = Measured(
            values=per_seed(heads).tolist(),
            n_cases=int(round(float(cases.mean()))) if len(cases) else None,
            chance=1.0 / space_objects,
            scored_on=UNSEEN,
        )
    across = rows_of(table, "orthogonality", "across", "mean_abs_cos")
    if len(across):
        value = round(float(across["value"].mean()), ROUNDING)
        out[ACROSS] = Measured(values=[value], higher=False, ceiling=0.0)
    if relation:
        out = {key: replace(m, bag_bound=m.ceiling) for key, m in out.items()}
    return out
