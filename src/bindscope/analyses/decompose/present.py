"""``decompose`` in words: the headline table of R² (with controls and the bag of concepts beside them) and of
the probes after each subtraction."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.decompose.r2 import GAP
from bindscope.analyses.decompose.summary import DecomposeControls, DecomposeSummary, R2Control
from bindscope.estimators.metrics import Splits, Spread, format_spread, pct

#: How the gap row is named in the table.
GAP_LABEL = "object − concept (gap)"


def r2_cell(part: Splits | None, group: str, model: str) -> str:
    """One model's R² in one group, ``-`` where missing."""
    values = getattr(part, group) if part is not None else None
    return format_spread((values or {}).get(model))


def control_r2(controls: DecomposeControls, name: str) -> Splits | None:
    """The R² under one control (None where it was not run)."""
    control: R2Control | None = getattr(controls, name)
    return control.r2 if control is not None else None


def seeds_of(*parts: dict[str, Spread] | None) -> int:
    """The most seeds any spread of ``parts`` was taken over."""
    return max((s.n_seeds for part in parts for s in (part or {}).values()), default=0)


def sd_label(seeds: int) -> str:
    """What a ``±`` in a header means: `` (± sd over 3 seeds)``; nothing for one seed (no ± is shown)."""
    return f" (± sd over {seeds} seeds)" if seeds > 1 else ""


def headline_rows(summary: DecomposeSummary) -> Rows:
    """R² per model on train and test, beside the permuted-label and ``+rand`` controls and the ideal bag of
    concepts (the gap object − concept last), then the probes' test accuracies after subtracting each model."""
    perm, rand = control_r2(summary.controls, "permuted_labels"), control_r2(summary.controls, "rand")
    bag = control_r2(summary.controls, "bag")
    s = summary.r2
    sd = sd_label(seeds_of(s.test, s.train))
    rows: Rows = [
        (
            "model",
            f"R2 train{sd}",
            f"R2 test{sd}",
            "R2 test (permuted labels)",
            "R2 test (+rand)",
            "R2 test (bag of concepts)",
        )
    ]
    for model in s.test or {}:
        rows.append(
            (
                GAP_LABEL if model == GAP else model,
                r2_cell(s, "train", model),
                r2_cell(s, "test", model),
                r2_cell(perm, "test", model),
                r2_cell(rand, "test", model),
                r2_cell(bag, "test", model),
            )
        )
    rows.append(("", "", "", "", "", ""))
    tests = [part.test for part in summary.subtraction.values()]
    n = f", n = {summary.test_scenes:,} per seed" if summary.test_scenes else ""
    sd = sd_label(seeds_of(*tests))
    rows.append(("probes after subtracting", f"object_acc test %{sd}{n}", f"concept_acc test %{sd}", "", "", ""))
    for variant, part in summary.subtraction.items():
        rows.append((variant, pct(part.test, "object_acc"), pct(part.test, "concept_acc"), "", "", ""))
    for variant, part in (summary.subtraction_rand or {}).items():
        rows.append((f"{variant} (+rand)", pct(part.test, "object_acc"), pct(part.test, "concept_acc"), "", "", ""))
    return rows


#: What the role-aware and count-aware designs fit as the "concepts" (docs/method/11-relations-counts.md).
DESIGN_PARTS = {"role-aware": "place", "count-aware": "count"}


def design_notes(summary: DecomposeSummary) -> list[str]:
    """On a relation or count space, a line naming the design: which vectors the concept-additive model sums,
    and what the gap then asks; none on other spaces."""
    if summary.design not in DESIGN_PARTS:
        return []
    part = DESIGN_PARTS[summary.design]
    return [
        f"{summary.design} design: concept_additive sums a vector per object (its other concepts bound) and one per "
        f"{part}; {GAP_LABEL} asks whether each (object, {part}) has a vector of its own beyond them"
    ]
