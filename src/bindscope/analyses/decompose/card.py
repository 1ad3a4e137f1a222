"""``decompose`` on the report card: its columns and how each seed's number is read from the tidy table
(docs/method/04-decomposition.md, "On the report card").

An ideal bag of concepts is exactly concept-additive, so every additive model fits it (R² 1 on held-out scenes):
R² alone cannot tell binding from a bag. What a bag cannot have is a scene that sums per-object vectors which are
*not* sums of concept vectors. Two columns measure that:

- ``objects beyond concepts``: held-out R² of the object-additive model minus that of the concept-additive
  model, per seed (the same split for both). A bag scores 0 (both fit exactly); its floor is the same gap on the
  bag of concepts of the same scenes and split, and on ``+rand``.
- ``objects after concepts``: the object probe's test accuracy after the concept-additive reconstruction is
  subtracted from the embeddings. For a bag nothing is left, so it falls to chance; its floors are the same
  probes on the bag's residual, on the ``+rand`` control's residual where it is given, and chance.
"""

from __future__ import annotations

import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.decompose.r2 import GAP
from bindscope.core.tidy import NO_CONTROL
from bindscope.estimators.verdicts import Measured

BEYOND = "objects beyond concepts"
AFTER = "objects after concepts"
COLUMNS = (
    CardColumn(
        BEYOND,
        "object − concept additive R², held out",
        "r2",
        "a scene sums object vectors that are not sums of concept vectors (held-out R² gap beyond a bag of concepts)",
    ),
    CardColumn(
        AFTER,
        "object probe after removing concepts, %",
        "rate",
        "objects decodable after the concept-additive part is removed",
    ),
)


def r2_gap(table: pd.DataFrame, control: str = NO_CONTROL) -> pd.Series:
    """The held-out gap object-additive minus concept-additive R² per seed under ``control`` (indexed by seed)."""
    rows = table[
        (table["part"] == "additive")
        & (table["variant"] == GAP)
        & (table["control"] == control)
        & (table["group"] == "test")
    ]
    return rows.set_index("seed")["value"].sort_index()


def subtraction_acc(table: pd.DataFrame, variant: str, control: str = NO_CONTROL) -> pd.DataFrame:
    """The object probe's test rows of one subtraction variant (``chance``: its chance) under ``control``, one
    per seed."""
    rows = table[
        (table["part"] == "subtraction")
        & (table["variant"] == variant)
        & (table["control"] == control)
        & (table["group"] == "test")
        & (table["metric"] == "object_acc")
    ]
    return rows.sort_values("seed")


def cases_per_seed(rows: pd.DataFrame) -> int | None:
    """The cases per seed of rate rows (their mean ``n_cases``, rounded), None where none is known."""
    cases = pd.to_numeric(rows.get("n_cases", pd.Series(dtype=float)), errors="coerce").dropna()
    return int(round(float(cases.mean()))) if len(cases) else None


def measure_decompose(table: pd.DataFrame) -> dict[str, Measured]:
    """Both columns per seed: the held-out R² gap and the object probe after the concept-additive part is removed
    (with its cases and chance), each with ``+rand`` where it was run. A column without rows is left out."""
    out: dict[str, Measured] = {}
    gap, rand = r2_gap(table), r2_gap(table, "rand")
    if len(gap):
        rand_gap = rand.tolist() if len(rand) else None
        out[BEYOND] = Measured(values=gap.tolist(), rand=rand_gap, ceiling=1.0, scored_on="held-out scenes")
    after, chance = subtraction_acc(table, "concepts"), subtraction_acc(table, "chance")
    after_rand = subtraction_acc(table, "concepts", "rand")
    if len(after):
        out[AFTER] = Measured(
            values=after["value"].tolist(),
            n_cases=cases_per_seed(after),
            chance=float(chance["value"].mean()) if len(chance) else None,
            rand=after_rand["value"].tolist() if len(after_rand) else None,
            scored_on="test scenes, the concept-additive fit removed",
        )
    return out
