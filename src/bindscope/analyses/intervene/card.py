"""``intervene`` on the report card: its columns and how each seed's number is read from the tidy table.

The paper's numbers (the research code's retrieval hit, whose arg-max gives a tie to the lowest row, and its joint
concept-probe hit) cannot show binding: an ideal bag of concepts scores 25.0% / 25.4% retrieval on shared /
different attributes and 100% on the probe. So the card reads their bound forms, on the edits that need binding
(whose expected scene has a binding swap among the scenes, which a bag embeds exactly as the expected scene) with
ties counted wrong, where a bag scores 0 by construction:

- ``edit shared`` / ``edit different``: the bound retrieval of the first available bank at the table's k, on the
  binding edits of scenes whose two objects share / do not share the edited value (``different`` reads every
  edit where no scene shares it);
- ``edit probe``: the bound probe hit (the object probe reads the expected scene's objects from the edit, and tells
  that scene from its bag class) of the same bank and k, on every binding edit.

Each is a rate per target seed, with the binding edits per seed as its cases, its chance (random scores), the
``+rand`` control's rate where the control was given, and the bag's analytic score 0 as a bound of the bag floor
(the registry also runs the same edits on the bag). With ``--sample-cases`` the cases are the sampled edits (so
the interval is the sample's) and what each column is scored on names the sample: "a seeded sample of 5,000 of
304,000 edits".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.intervene.compute import RAND
from bindscope.analyses.intervene.outcomes import ALL, BOUND
from bindscope.analyses.intervene.settings import InterveneSettings
from bindscope.analyses.intervene.summary import table_k
from bindscope.core.tidy import NO_CONTROL
from bindscope.estimators.verdicts import Measured

SHARED, DIFFERENT, PROBE = "edit shared", "edit different", "edit probe"
COLUMNS = (
    CardColumn(
        SHARED,
        "edit, shared value, %",
        "rate",
        "one object edited where both share the edited value, beyond a bag of concepts",
    ),
    CardColumn(
        DIFFERENT,
        "edit, different values, %",
        "rate",
        "one object edited where the two differ in the edited value, beyond a bag of concepts",
    ),
    CardColumn(
        PROBE,
        "edit read by object probe, %",
        "rate",
        "an edited object read by the object probe, beyond a bag of concepts",
    ),
)
#: What an ideal bag of concepts scores on every column: its edited vector ties with the binding swap.
BAG_BOUND = 0.0


def card_bank(settings: InterveneSettings, absent: dict[str, str]) -> str | None:
    """The bank the card reads: the first of the settings' banks that was built (None: none was)."""
    return next((b for b in settings.banks if b not in absent), None)


def per_seed(
    table: pd.DataFrame, edit: str, variant: str, group: str, metric: str, k: float, control: str = NO_CONTROL
) -> pd.DataFrame:
    """One metric's rows per seed (indexed by seed) of the embeddings or their control: value, n_cases, chance."""
    rows = table[
        (table["control"] == control)
        & (table["edit"] == edit)
        & (table["variant"] == variant)
        & (table["group"] == group)
        & (table["metric"] == metric)
        & np.isclose(table["k"], k)
    ]
    return rows.set_index("seed")[["value", "n_cases", "chance"]].sort_index()


def measured_rate(rows: pd.DataFrame | None, rand: pd.DataFrame | None, scored_on: str) -> Measured:
    """A bound rate per seed with its cases per seed (rounded mean over seeds), chance, the ``+rand`` control's
    rate per seed (where it was run) and the bag's bound (no value where ``rows`` is None or empty: not
    measured)."""
    if rows is None or not len(rows):
        return Measured(values=[], scored_on=scored_on, bag_bound=BAG_BOUND)
    return Measured(
        values=rows["value"].tolist(),
        n_cases=int(round(float(rows["n_cases"].mean()))),
        chance=float(rows["chance"].mean()),
        rand=rand["value"].tolist() if rand is not None and len(rand) else None,
        scored_on=scored_on,
        bag_bound=BAG_BOUND,
    )


def measure_edits(
    table: pd.DataFrame,
    settings: InterveneSettings,
    absent: dict[str, str],
    split: bool,
    edit: str | None = None,
    sampled: tuple[int, int] | None = None,
) -> dict[str, Measured]:
    """Each column's bound rate per seed, of ``edit`` (default: the first edit the settings ask for on an
    attribution space; a run passes the first it made), the first available bank and the table's k, with the
    ``+rand`` control's where it was run (``edit shared`` is not measured where no scene shares the edited value,
    as no relation edit does); ``sampled``: the edits scored and planned where they are a sample (said in what
    each column is scored on; its interval is over the sampled edits)."""
    bank = card_bank(settings, absent)
    if bank is None:
        return {}
    edit, k = edit or settings.edits()[0], table_k(settings.k)
    where = f"{edit} edits needing binding, {bank} bank, k = {k:g}, ties wrong"
    if sampled is not None:
        where += f"; a seeded sample of {sampled[0]:,} of {sampled[1]:,} edits"
    retrieval, probe = BOUND["retrieval"], BOUND["probe"]
    different = "different" if split else ALL

    def rate(group: str, metric: str, scored_on: str) -> Measured:
        rows = per_seed(table, edit, bank, group, metric, k)
        return measured_rate(rows, per_seed(table, edit, bank, group, metric, k, RAND), scored_on)

    return {
        SHARED: rate("shared", retrieval, f"shared-value {where}")
        if split
        else measured_rate(None, None, f"shared-value {where}"),
        DIFFERENT: rate(different, retrieval, f"different-value {where}"),
        PROBE: rate(ALL, probe, where),
    }
