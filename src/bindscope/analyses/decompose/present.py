"""``decompose`` in words: the headline table of R² (with controls) and of the probes after each subtraction."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.decompose.summary import DecomposeControls, DecomposeSummary, R2Control
from bindscope.estimators.metrics import Splits, format_spread, pct


def r2_cell(part: Splits | None, group: str, model: str) -> str:
    """One model's R² in one group, ``-`` where missing."""
    values = getattr(part, group) if part is not None else None
    return format_spread((values or {}).get(model))


def control_r2(controls: DecomposeControls, name: str) -> Splits | None:
    """The R² under one control (None where it was not run)."""
    control: R2Control | None = getattr(controls, name)
    return control.r2 if control is not None else None


def headline_rows(summary: DecomposeSummary) -> Rows:
    """R² per model on train and test (beside the permuted-label and ``+rand`` controls), then the probes'
    test accuracies after subtracting each model."""
    perm, rand = control_r2(summary.controls, "permuted_labels"), control_r2(summary.controls, "rand")
    rows: Rows = [("model", "R2 train", "R2 test", "R2 test (permuted labels)", "R2 test (+rand)")]
    s = summary.r2
    for model in s.test or {}:
        rows.append(
            (
                model,
                r2_cell(s, "train", model),
                r2_cell(s, "test", model),
                r2_cell(perm, "test", model),
                r2_cell(rand, "test", model),
            )
        )
    rows.append(("", "", "", "", ""))
    rows.append(("probes after subtracting", "object_acc test %", "concept_acc test %", "", ""))
    for variant, part in summary.subtraction.items():
        rows.append((variant, pct(part.test, "object_acc"), pct(part.test, "concept_acc"), "", ""))
    return rows
