"""The main numbers of ``intervene`` (its part of ``summary.json``): :class:`InterveneSummary` and how a run
gives them."""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import Field, PrivateAttr, ValidationInfo, model_validator
from typing_extensions import Self

from bindscope.analyses.intervene.compute import InterveneResult
from bindscope.analyses.intervene.outcomes import ALL, BOUND, GROUPS, METRICS
from bindscope.analyses.intervene.settings import TABLE_K, InterveneSettings
from bindscope.analyses.intervene.variants import UNEDITED
from bindscope.analyses.results import Summary
from bindscope.core.tidy import NO_CONTROL, spread
from bindscope.core.validation import Schema
from bindscope.estimators.intervals import rate
from bindscope.estimators.metrics import Spread, is_absent


class Concepts(Schema):
    """The concepts edited (``attribute``) and kept (``noun``) by attribute edits; noun edits swap them (relation and
    count edits change the place or count)."""

    attribute: str
    noun: str


class BankStatus(Schema):
    """Whether a bank asked for was built, and ``why`` not (absent where it was)."""

    available: bool
    why: str | None = Field(None, exclude_if=is_absent)


class AtK(Schema):
    """One variant's numbers in one group at one strength k: the paper's retrieval and probe accuracy (spread
    over the target seeds) and the cases scored (over all seeds); their bound forms (on the edits that need
    binding, ties counted wrong; absent where no edit needs binding or, for the probe, no object probe was
    given) and the cases those scored (over all seeds). ``intervals``: where the edits are a sample
    (``--sample-cases``), each rate's 95% Wilson interval ``[low, high]`` over the cases of one seed."""

    retrieval: Spread
    probe: Spread
    cases: int
    retrieval_binding: Spread | None = Field(None, exclude_if=is_absent)
    probe_binding: Spread | None = Field(None, exclude_if=is_absent)
    binding_cases: int | None = Field(None, exclude_if=is_absent)
    intervals: dict[str, tuple[float, float]] | None = Field(None, exclude_if=is_absent)


class SampledCases(Schema):
    """The edits of one kind scored (a seeded sample, ``--sample-cases``) and planned, over all target seeds."""

    cases: int
    of: int


class ProbesRecord(Schema):
    """Whether the probes were fitted here, and the folder (in the result) they were saved to."""

    fitted_here: bool
    folder: str | None


#: edit -> variant -> group -> k (as ``f"{k:g}"``) -> numbers
Results = dict[str, dict[str, dict[str, dict[str, AtK]]]]


class InterveneSummary(Summary):
    """The numbers of ``bindscope intervene``: the concepts, edits, strengths and groups; each bank's
    availability; retrieval and probe accuracy per edit, variant, group and k; the cases skipped per edit,
    variant and reason; where the probes came from; per edit kind scored on a sample, the edits sampled and
    planned (``sampled``; absent when every edit was scored)."""

    concepts: Concepts
    edits: list[str]
    k: list[float]
    table_k: float
    groups: list[str]
    banks: dict[str, BankStatus]
    results: Results
    skipped: dict[str, dict[str, dict[str, int]]]
    probes: ProbesRecord
    sampled: dict[str, SampledCases] | None = Field(None, exclude_if=is_absent)
    #: The single bank's record in the result header (``inputs.singles``) when read with the header as
    #: validation context (``{"header": summary}``); None otherwise.
    _singles: dict[str, Any] | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _header_singles(self, info: ValidationInfo) -> Self:
        header = (info.context or {}).get("header") if isinstance(info.context, dict) else None
        inputs = header.get("inputs") if isinstance(header, dict) else None
        singles = inputs.get("singles") if isinstance(inputs, dict) else None
        self._singles = singles if isinstance(singles, dict) else None
        return self

    @property
    def singles(self) -> dict[str, Any] | None:
        """The single bank's record in the result header, where known."""
        return self._singles


def table_k(ks: tuple[float, ...] | list[float]) -> float:
    """The k the table and terminal report: 1 when swept, else the one nearest to it."""
    return min(ks, key=lambda k: (abs(k - TABLE_K), k))


def sample_interval(rows: pd.DataFrame) -> tuple[float, float] | None:
    """The 95% Wilson interval of one metric's rate (its rows per seed: the mean over seeds, the cases of one seed)."""
    found = rate(float(rows["value"].mean()), int(round(float(rows["n_cases"].mean()))))
    return None if found is None else (found.low, found.high)


def results_summary(result: InterveneResult) -> Results:
    """The paper's retrieval and probe accuracy and their bound forms (spread over seeds), and the cases, per
    edit, variant, group and k (of the embeddings, not of their ``+rand`` control); on an edit kind scored on a
    sample, each rate's 95% interval."""
    out: dict[str, Any] = {}
    table = result.table[result.table["control"] == NO_CONTROL]
    for (edit, variant, group, k), rows in table.groupby(["edit", "variant", "group", "k"], sort=False):
        node = out.setdefault(str(edit), {}).setdefault(str(variant), {}).setdefault(str(group), {})
        numbers: dict[str, Any] = {m: spread(rows[rows.metric == m]["value"]) for m in METRICS}
        numbers["cases"] = int(rows[rows.metric == "retrieval"]["n_cases"].sum())
        for m in BOUND.values():
            if (rows.metric == m).any():
                numbers[m] = spread(rows[rows.metric == m]["value"])
        if (rows.metric == BOUND["retrieval"]).any():
            numbers["binding_cases"] = int(rows[rows.metric == BOUND["retrieval"]]["n_cases"].sum())
        if edit in result.sampled:
            found = {m: sample_interval(rows[rows.metric == m]) for m in (*METRICS, *BOUND.values()) if m in numbers}
            numbers["intervals"] = {m: bounds for m, bounds in found.items() if bounds is not None}
        node[f"{k:g}"] = numbers
    return out


def intervene_summary(result: InterveneResult, settings: InterveneSettings) -> InterveneSummary:
    """The main numbers of ``bindscope intervene``."""
    fitted = result.fitted is not None
    banks = {
        name: BankStatus(available=name not in result.absent, why=result.absent.get(name)) for name in settings.banks
    }
    return InterveneSummary(
        concepts=result.concepts,
        edits=list(result.edits),
        k=list(settings.k),
        table_k=table_k(settings.k),
        groups=[*GROUPS, ALL] if result.split else [ALL],
        banks=banks,
        results=results_summary(result),
        skipped=result.skipped,
        probes=ProbesRecord(fitted_here=fitted, folder=f"probes/seed{settings.probe_seed}" if fitted else None),
        sampled={e: SampledCases(cases=n, of=of) for e, (n, of) in result.sampled.items()} or None,
    )


def at_k(summary: InterveneSummary, edit: str, variant: str, group: str, k: float) -> AtK | None:
    """A variant's numbers at one k (the unedited scene's at k = 0, where they are recorded)."""
    per_k = summary.results.get(edit, {}).get(variant, {}).get(group)
    if not per_k:
        return None
    return per_k.get(f"{k:g}") or (per_k.get("0") if variant == UNEDITED else None)
