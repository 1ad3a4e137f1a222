"""A sweep's main numbers (:class:`~bindscope.analyses.complexity.summary.ComplexitySummary`): per approximator
AUC, f*, its fit on its own training scenes and its curves from the table (:mod:`.curves`), the verdict
(:mod:`.verdict`) and its reading (:mod:`.present`), what the card's column read (:mod:`.card`), the budget."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bindscope.analyses.complexity.card import generalisation, labels_by_simplicity
from bindscope.analyses.complexity.curves import (
    area,
    by_fraction,
    code_length,
    covered_scenes,
    curve,
    decisive_fractions,
    f_star,
    fits_training,
    fitting,
    unconverged_fits,
)
from bindscope.analyses.complexity.present import capacity_reason, open_reason, reading
from bindscope.analyses.complexity.score import EXCHANGED, SWAP, SWAP_SCENES, UNSEEN
from bindscope.analyses.complexity.settings import SELECTION_MARKS, ComplexitySettings
from bindscope.analyses.complexity.summary import (
    ApproximatorNumbers,
    ComplexitySummary,
    FitCounts,
    ProbeNumbers,
    VerdictNumbers,
)
from bindscope.analyses.complexity.sweep import SweepResult
from bindscope.analyses.complexity.verdict import Verdict, decide, undetermined_families
from bindscope.core.tidy import spread


def complexity_summary(
    result: SweepResult,
    settings: ComplexitySettings,
    *,
    probes: ProbeNumbers | None = None,
    fits: FitCounts | None = None,
) -> ComplexitySummary:
    """The main numbers of a sweep: per approximator AUC, f*, curves; the verdict; the budget (``probes``,
    ``fits``: what an analysis run adds)."""
    table = result.table
    ceiling_curve = curve(table, "embeddings", "test_only", "object_acc", "")
    ceiling = ceiling_curve.mean(axis=0)
    cover = curve(table, "scenes", "test_only", "covered_share", "")
    support = covered_scenes(table, cover)
    approximators = {
        family.label: approximator_numbers(table, family.label, ceiling, support, result, settings)
        for family in settings.families()
    }
    verdict = sweep_verdict(approximators, result, settings, decisive_fractions(cover, support, ceiling))
    numbers: dict[str, Any] = {
        "approximators": approximators,
        "in_distribution": by_fraction(ceiling_curve),
        "chance": by_fraction(curve(table, "chance", "test_only", "object_acc", "")),
        "train_in_distribution": by_fraction(curve(table, "embeddings", "train_only", "object_acc", "")),
        "swap_in_distribution": by_fraction(curve(table, "embeddings", UNSEEN, SWAP, "")),
        "swap_chance": by_fraction(curve(table, "chance", UNSEEN, SWAP, "")),
        "binding_scenes": by_fraction(curve(table, "scenes", UNSEEN, SWAP_SCENES, "")),
        "generalisation": generalisation(table, labels_by_simplicity(settings)),
    }
    if settings.description_length:
        numbers["description_length_baseline_bits"] = code_length(table, "mean")
    numbers |= {
        "coverage": by_fraction(cover),
        "capacity": {label: capacity_reason(why) for label, why in result.capacity.items()},
        "verdict": verdict_numbers(verdict, settings.budget.protocol),
        "budget": settings.budget,
        "fitted_in": result.targets,
        "selection": SELECTION_MARKS[settings.selection],
        "dropped_scenes": result.dropped_scenes,
        "probe_scenes_unscored": result.probe_scenes_unscored,
        "probes": probes,
        "fits": fits,
    }
    return ComplexitySummary.model_validate(numbers)


def approximator_numbers(
    table: pd.DataFrame,
    label: str,
    ceiling: pd.Series,
    support: pd.Series | None,
    result: SweepResult,
    settings: ComplexitySettings,
) -> ApproximatorNumbers:
    """One family's numbers (``ceiling``: the in-distribution line per fraction; ``support``: the covered scored
    test scenes per fraction, see :func:`~bindscope.analyses.complexity.curves.covered_scenes`)."""

    def by(group: str, metric: str, checkpoint: str = "selected") -> dict[str, dict[str, float | int | None]]:
        return by_fraction(curve(table, label, group, metric, checkpoint))

    acc = curve(table, label, "test_only", "object_acc", "selected")
    numbers: dict[str, Any] = {
        "auc": spread(area(acc)),
        "f_star": f_star(acc.mean(axis=0), ceiling, scenes=support),
        "f_star_any": f_star(acc.mean(axis=0), ceiling),
        "object_acc": by_fraction(acc),
        "train_object_acc": by("train_only", "object_acc"),
        "train_r2": by("train_only", "r2"),
        "fits_training": by_fraction(fits_training(table, label)),
        "swap_acc": by(UNSEEN, SWAP),
        "swap_exchanged": by(UNSEEN, EXCHANGED),
        "concept_acc": by("test_only", "concept_acc"),
        "mixed_object_acc": by("mixed", "object_acc"),
        "validation_object_acc": by("validation", "object_acc"),
        "final_object_acc": by("test_only", "object_acc", "final"),
        "r2": by("test_only", "r2"),
        "converged": by("train_only", "converged", ""),
        "parameters": result.parameters.get(label),
        "seconds": result.seconds.get(label),
    }
    if settings.description_length:
        numbers["description_length_bits"] = code_length(table, label)
    if not curve(table, label, "test_only", "second_fit_disagreement", "").empty:
        numbers["second_fit_disagreement"] = by("test_only", "second_fit_disagreement", "")
        numbers["second_fit_val_gap"] = by("test_only", "second_fit_val_gap", "")
        numbers["undetermined_share"] = by("test_only", "second_fit_undetermined", "")
    return ApproximatorNumbers.model_validate(numbers)


def sweep_verdict(
    approximators: dict[str, ApproximatorNumbers],
    result: SweepResult,
    settings: ComplexitySettings,
    decisive: list[float] | None,
) -> Verdict:
    """The verdict from the families' numbers, the fits that did not converge and the families left open."""
    f_stars = {label: a.f_star for label, a in approximators.items()}
    shares = {
        label: {float(f): s.mean for f, s in a.undetermined_share.items() if s.mean is not None}
        for label, a in approximators.items()
    }
    gaps = {
        label: {float(f): s.mean for f, s in a.second_fit_disagreement.items()} for label, a in approximators.items()
    }
    undetermined = undetermined_families(f_stars, result.capacity, decisive, shares, gaps)
    largest = max(settings.fractions)
    return decide(
        settings.families(),
        f_stars,
        largest,
        f_star_any={label: a.f_star_any for label, a in approximators.items()},
        unconverged=unconverged_fits(result.table),
        undetermined=undetermined,
        decisive=decisive,
        fitting=fitting(result.table, list(approximators), largest),
    )


def verdict_numbers(verdict: Verdict, protocol: str) -> VerdictNumbers:
    """The verdict as ``summary.json`` holds it, with its reading (the families it names in ``generalising``
    only when one generalises)."""
    numbers: dict[str, Any] = {"simplest_generalising": verdict.simplest, "f_star": verdict.f_star}
    if verdict.simplest is not None:
        numbers["generalising"] = verdict.generalising
    numbers |= {
        "reliable": verdict.reliable,
        "unconverged": verdict.unconverged,
        "decisive_fractions": verdict.decisive,
        "undetermined": {label: open_reason(why) for label, why in verdict.undetermined.items()},
        "reading": reading(verdict, protocol),
        "fitting": verdict.fitting,
    }
    return VerdictNumbers.model_validate(numbers)
