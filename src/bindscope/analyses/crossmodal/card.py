"""``crossmodal`` on the report card: its columns and how each number is read from the tidy table
(docs/method/07-crossmodal.md, "On the report card").

- ``attribute swap``: how often an image's cosine with its own caption beats that with the attribute-swapped
  caption (a1 o2 / a2 o1 for a1 o1 / a2 o2), on every scored scene with two distinct objects (``n_cases``: the
  image-caption pairs scored). A tie counts half, as a tie broken at random: chance is 0.5, and an ideal bag of
  concepts, whose two captions hold the same concept values and tie on every pair, scores exactly 0.5. The floor
  is the larger of chance, the bag's analytic 0.5 and the same test run on the bag.
- ``strict retrieval``: image -> text top-1, a hit only for a caption naming the scene's own objects (``n_cases``:
  the queries). A bag ranks every caption of the same concept values equal; its analytic score is the share of
  those that name the scene's objects, its floor here.
- ``attribute swap, bridged``: the attribute swap on scenes of objects the linear bridge never saw, through
  the bridge, per seed at the headline fraction (``n_cases``: pairs per seed). Only where a bridge was fitted.
- ``relation swap`` / ``count swap`` (and their ``, bridged`` forms): the same test against a relation space's
  relation swap (subject and object exchanged, the relation kept: "a blue sphere to the left of a red cube" for "a
  red cube to the left of a blue sphere") or a count space's count swap ("one red cube and two blue spheres" for
  "two red cubes and one blue sphere"). A swap keeps the bag (the same objects, places and counts, differently
  bound), so the bag ties again: 0.5. Only for a dataset of that family; elsewhere the column is absent.

The raw tests score every scene once: one value (no seeds); the bridge's are per seed.
"""

from __future__ import annotations

import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.crossmodal.scoring import ALL, TEST_ONLY
from bindscope.analyses.crossmodal.summary import headline_fraction
from bindscope.estimators.verdicts import Measured

SWAP = "attribute swap"
RELATION = "relation swap"
COUNT = "count swap"
RETRIEVAL = "strict retrieval"
BRIDGED = "attribute swap, bridged"
RELATION_BRIDGED = "relation swap, bridged"
COUNT_BRIDGED = "count swap, bridged"
COLUMNS = (
    CardColumn(SWAP, "attribute swap, %", "rate", "an image prefers its caption to the attribute-swapped one"),
    CardColumn(
        RELATION,
        "relation swap, %",
        "rate",
        "an image prefers its caption to the one with subject and object swapped",
        "relation",
    ),
    CardColumn(
        COUNT, "count swap, %", "rate", "an image prefers its caption to the one with the counts swapped", "count"
    ),
    CardColumn(RETRIEVAL, "image → text top-1, strict, %", "rate", "an image retrieves the caption naming its objects"),
    CardColumn(
        BRIDGED,
        "attribute swap through the bridge, unseen objects, %",
        "rate",
        "a linear bridge recovers the binding on objects it never saw",
    ),
    CardColumn(
        RELATION_BRIDGED,
        "relation swap through the bridge, unseen objects, %",
        "rate",
        "a linear bridge recovers the relation on objects it never saw",
        "relation",
    ),
    CardColumn(
        COUNT_BRIDGED,
        "count swap through the bridge, unseen objects, %",
        "rate",
        "a linear bridge recovers the counts on objects it never saw",
        "count",
    ),
)
#: The tidy table's metric of each column.
METRICS = {
    SWAP: "swap_attribute",
    RELATION: "swap_relation",
    COUNT: "swap_count",
    RETRIEVAL: "image_to_text_strict@1",
    BRIDGED: "swap_attribute",
    RELATION_BRIDGED: "swap_relation",
    COUNT_BRIDGED: "swap_count",
}
#: The columns read on every scored scene, and those read through the bridge on unseen objects.
RAW_COLUMNS = (SWAP, RELATION, COUNT, RETRIEVAL)
BRIDGED_COLUMNS = (BRIDGED, RELATION_BRIDGED, COUNT_BRIDGED)


def rows_of(table: pd.DataFrame, variant: str, metric: str, group: str = ALL) -> pd.DataFrame:
    """The rows of one (variant, metric, group), by seed."""
    part = table[(table["variant"] == variant) & (table["metric"] == metric) & (table["group"] == group)]
    return part.sort_values("seed")


def reference(table: pd.DataFrame, variant: str, metric: str) -> float | None:
    """A reference's value (``chance`` or ``bag_of_concepts``), None where absent."""
    rows = rows_of(table, variant, metric)
    return float(rows["value"].iloc[0]) if len(rows) else None


def cases(rows: pd.DataFrame) -> int | None:
    """The cases per seed of rate rows (their mean ``n_cases``), None where unknown."""
    n = pd.to_numeric(rows["n_cases"], errors="coerce").dropna()
    return int(round(float(n.mean()))) if len(n) else None


#: The cases each column scores, where they are not every scene.
SCORED_ON = {
    SWAP: "scenes of two objects that differ in both concepts",
    RELATION: "scenes of two different objects",
    COUNT: "scenes of two different objects with different counts",
    BRIDGED: "scenes of objects the bridge never saw",
    RELATION_BRIDGED: "scenes of objects the bridge never saw",
    COUNT_BRIDGED: "scenes of objects the bridge never saw",
}


def measured_rate(rows: pd.DataFrame, chance: float | None, bag: float | None, key: str) -> Measured:
    """A rate's values per seed with its cases, chance, the bag's analytic score and the cases it scores."""
    return Measured(
        values=rows["value"].tolist(), n_cases=cases(rows), chance=chance, bag_bound=bag, scored_on=SCORED_ON.get(key)
    )


def measure_crossmodal(table: pd.DataFrame) -> dict[str, Measured]:
    """Every column that was scored: the raw attribute swap (a family's swap, where it has one) and strict
    retrieval on every scene, and the bridged swaps per seed at the headline fraction."""
    out: dict[str, Measured] = {}
    for key in RAW_COLUMNS:
        rows = rows_of(table, "raw", METRICS[key])
        if len(rows):
            out[key] = measured_column(table, rows, key)
    tested = table[table["group"] == TEST_ONLY]
    fraction = headline_fraction(sorted({float(f) for f in tested["fraction"].dropna()}))
    if fraction is not None:
        at = tested[tested["fraction"].astype(float) == fraction]
        for key in BRIDGED_COLUMNS:
            rows = rows_of(at, "bridged", METRICS[key], TEST_ONLY)
            if len(rows):
                out[key] = measured_column(table, rows, key)
    return out


def measured_column(table: pd.DataFrame, rows: pd.DataFrame, key: str) -> Measured:
    """A column's rows beside its metric's chance and bag of concepts."""
    metric = METRICS[key]
    return measured_rate(rows, reference(table, "chance", metric), reference(table, "bag_of_concepts", metric), key)
