"""The main numbers of ``decompose`` (its part of ``summary.json``): :class:`DecomposeSummary` and how the
tidy table gives them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from pydantic import Field

from bindscope.analyses.decompose.subtraction import SUBTRACTION_VARIANTS
from bindscope.analyses.results import Summary
from bindscope.core.tidy import NO_CONTROL
from bindscope.core.validation import Schema
from bindscope.estimators.metrics import Splits, is_absent, nested
from bindscope.estimators.probe_runs import accuracy_summary, chance_summary


class R2Control(Schema):
    """R² of the additive models under one control, per group and model."""

    r2: Splits


class DecomposeControls(Schema):
    """R² under each control (``rand``: None where no ``+rand`` embeddings were given) and of the ideal bag of
    concepts of the same scenes and splits (``bag``: None in results written before it was measured)."""

    permuted_labels: R2Control
    rand: R2Control | None
    bag: R2Control | None = None


class DecomposeSummary(Summary):
    """The numbers of ``bindscope decompose``: R² per group and model (with controls and the bag of concepts;
    ``object_minus_concept`` is the gap object-additive minus concept-additive R²), the subtraction probes'
    accuracies per variant (``subtraction_rand``: those repeated on the ``+rand`` control), chance, the solver
    of every subtraction probe, and the test scenes per seed the probes' test accuracies are shares of."""

    r2: Splits
    controls: DecomposeControls
    subtraction: dict[str, Splits]
    chance: dict[str, float]
    solver: dict[str, dict[str, dict[str, str]]]
    subtraction_rand: dict[str, Splits] | None = None
    test_scenes: int | None = None
    #: ``role-aware`` (a relation space) or ``count-aware`` (a count space): the concept-additive model's
    #: "concepts" are the object without its place (count) and the place (count); absent on other spaces.
    design: str | None = Field(None, exclude_if=is_absent)


def decompose_summary(
    table: pd.DataFrame,
    solvers: Mapping[str, Mapping[int, Mapping[str, str]]] | None = None,
    design: str | None = None,
) -> DecomposeSummary:
    """The main numbers of ``bindscope decompose`` from its tidy table and the subtraction probes' solvers."""
    additive = table[table.part == "additive"]
    subtraction = table[table.part == "subtraction"]
    r2 = nested(additive, ["control", "group", "variant"])
    controls = {c: {"r2": r2[c]} for c in r2 if c != NO_CONTROL}
    return DecomposeSummary(
        r2=r2.get(NO_CONTROL, {}),
        controls=DecomposeControls.model_validate({"rand": None, **controls}),
        subtraction={v: accuracy_summary(subtraction, v) or Splits() for v in SUBTRACTION_VARIANTS},
        subtraction_rand=rand_runs(subtraction),
        chance=chance_summary(subtraction),
        solver={v: {str(s): dict(e) for s, e in per.items()} for v, per in (solvers or {}).items()},
        test_scenes=test_scenes(subtraction),
        design=design,
    )


def rand_runs(subtraction: pd.DataFrame) -> dict[str, Splits] | None:
    """The subtraction runs repeated on the ``+rand`` control (None where none was)."""
    runs = {v: accuracy_summary(subtraction, v, "rand") for v in SUBTRACTION_VARIANTS}
    found = {v: s for v, s in runs.items() if s is not None}
    return found or None


def test_scenes(subtraction: pd.DataFrame) -> int | None:
    """The test scenes per seed of the subtraction probes (the mean over seeds of ``n_cases``; None without)."""
    if "n_cases" not in subtraction:
        return None
    cases = pd.to_numeric(subtraction[subtraction.group == "test"]["n_cases"], errors="coerce").dropna()
    return int(round(float(cases.mean()))) if len(cases) else None
