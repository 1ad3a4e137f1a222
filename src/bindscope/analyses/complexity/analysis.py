"""The registered ``complexity`` analysis: the approximator sweep under frozen probes, and its verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.complexity.plot import complexity_plot
from bindscope.analyses.complexity.sweep import (
    EXTRA_COLUMNS,
    FITS,
    ComplexityResult,
    ComplexitySettings,
    complexity_summary,
    complexity_sweep,
    describe_fits,
    unconverged_fits,
)
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.executors import UnitStore
from bindscope.estimators.metrics import format_spread
from bindscope.estimators.probe_runs import (
    ProbeRun,
    ProbeSettings,
    approximate_warnings,
    fit_probe_set,
    recorded_training_scenes,
    save_fitted_probes,
)
from bindscope.estimators.probes import ProbeSet
from bindscope.space.concepts import SceneSet


def fit_probes_for(
    y: np.ndarray, scenes: SceneSet, settings: ComplexitySettings
) -> tuple[ProbeSet, ProbeRun, np.ndarray]:
    """Probes fitted on a scene-level split (seed ``probe_seed``) when none were given, and the
    indices of the scenes they were fitted on."""
    probes, run = fit_probe_set(y, scenes, fitting_settings(settings))
    return probes, run, run.train_scenes[settings.probe_seed]


def fitting_settings(settings: ComplexitySettings) -> ProbeSettings:
    """The probe settings used when the complexity run fits its own probes: on every scene
    (``scenes="all"``), so that the split a saved ``probe.json`` records is the one fitted."""
    return ProbeSettings(
        seeds=(settings.probe_seed,), device=settings.device, scenes="all", optimizer=settings.budget.probes
    )


def probe_scenes_note(unscored: int | None, settings: ComplexitySettings) -> str:
    """Whether the probes' training scenes were scored (``probe_scenes``), in one line."""
    if unscored is not None:
        return f"the {unscored:,} scenes the probes were fitted on are not scored in test_only or mixed"
    if settings.probe_scenes == "keep":
        return "scored (--probe-scenes keep, the research code): the in-distribution line includes the probes' own"
    return (
        "scored: the frozen probes record no training split, so the in-distribution line may include scenes they "
        "fitted (use probes from `bindscope probe`, or fit them here, to leave them out)"
    )


def fitted_in_note(targets: dict[str, Any] | None) -> str:
    """Where the models were fitted (the embeddings, or their leading principal subspace), in one line."""
    if not targets:
        return "fitted in: the embeddings as they are"
    return (
        f"fitted in: the embeddings' leading {targets['dims']} of {targets['of']} principal components, holding "
        f"{targets['variance_kept']:.2%} of the variance; the probes read the embeddings' part inside them at "
        f"{targets['object_acc']:.1%} object accuracy (the embeddings: {targets['object_acc_embeddings']:.1%}). "
        "Predictions are scored in the full embedding space; --max-target-dims 0 fits the embeddings as they are"
    )


#: Every output of a sweep that selected checkpoints on test accuracy says so.
OPTIMISTIC = (
    "optimistic: checkpoints were selected on test_only object accuracy (--selection test, the research code's "
    "choice); the test accuracies, AUC and f* overstate generalisation"
)


class ComplexityAnalysis(Analysis):
    """``complexity``: which function families, fitted on scenes of seen objects, decode on unseen ones."""

    name = "complexity"
    title = "How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones."
    Settings = ComplexitySettings
    uses = frozenset({"probes"})
    extra_columns = EXTRA_COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: ComplexitySettings, progress: Progress | None = None) -> Result:
        y = np.asarray(inputs.embeddings)
        fitted, probe_fitted = None, None
        probes = inputs.probes
        if probes is None:
            probes, fitted, probe_fitted = fit_probes_for(y, inputs.scenes, settings)
        else:  # frozen probes: their scenes are known when their probe.json records the split
            probe_fitted = recorded_training_scenes(probes.meta_, inputs.scenes)
        sweep = complexity_sweep(y, inputs.scenes, probes, settings, progress=progress, probe_fitted=probe_fitted)
        warnings = approximate_warnings({"probes": fitted.solver}) if fitted is not None else []
        unconverged = unconverged_fits(sweep.table)
        if unconverged:
            warnings.append(f"fits that did not converge (see the 'converged' rows): {describe_fits(unconverged)}")
        if settings.selection == "test":
            warnings.append(OPTIMISTIC)
        return Result(sweep.table, {"training": sweep.history}, warnings, {"sweep": sweep, "fitted": fitted})

    def summarize(self, result: Result, settings: ComplexitySettings) -> dict[str, Any]:
        sweep: ComplexityResult = result.parts["sweep"]
        summary = complexity_summary(sweep, settings)
        fitted = result.parts["fitted"] is not None
        summary["probes"] = {
            "fitted_here": fitted,
            "folder": f"probes/seed{settings.probe_seed}" if fitted else None,
            "seed": settings.probe_seed,
            "scored_scenes": probe_scenes_note(sweep.probe_scenes_unscored, settings),
        }
        summary["fits"] = {"fitted": len(sweep.fits) - sweep.reused, "reused": sweep.reused}
        return summary

    def headline(self, summary: dict[str, Any]) -> Rows:
        fractions = sorted(summary["in_distribution"], key=float)
        shown = sorted({fractions[0], fractions[len(fractions) // 2], fractions[-1]}, key=float)

        def acc(curve: dict[str, Any], f: str) -> str:
            value = curve.get(f)
            return "-" if value is None else f"{100 * value['mean']:.1f}"

        rows: Rows = [("approximator", "params", "AUC", "f*", *(f"acc@{f} %" for f in shown), "seconds")]
        for label, a in summary["approximators"].items():
            rows.append(
                (
                    label,
                    f"{a['parameters']:,}",
                    format_spread(a["auc"]),
                    "-" if a["f_star"] is None else f"{a['f_star']:g}",
                    *(acc(a["object_acc"], f) for f in shown),
                    f"{a['seconds']:.0f}",
                )
            )
        rows.append(("in-distribution", "", "", "", *(acc(summary["in_distribution"], f) for f in shown), ""))
        rows.append(("values all fitted", "", "", "", *(acc(summary["coverage"], f) for f in shown), ""))
        return rows

    def notes(self, summary: dict[str, Any]) -> list[str]:
        b = summary["budget"]
        return [
            f"verdict: {summary['verdict']['reading']}",
            f"budget: {b['name']}, protocol {b['protocol']} (sweeps {b['sweeps']}, epochs {b['epochs']}, "
            f"lr {b['decay']}, patience {b['patience']}, train scenes <= "
            f"{b['max_train_scenes'] or 'all'}, scored scenes <= {b['max_eval_scenes'] or 'all'}, {b['starts']} "
            f"starts of {b['start_sweeps']} sweeps, {b['probes']} probes); "
            f"checkpoints selected on {summary['selection']}",
            *([f"budget chosen: {b['reason']}"] if b.get("reason") else []),
            fitted_in_note(summary.get("fitted_in")),
            *(f"capacity: {label}'s {why}" for label, why in summary["capacity"].items()),
            f"probe scenes: {summary['probes']['scored_scenes']}",
            f"fits: {summary['fits']['fitted']} fitted, {summary['fits']['reused']} reused from an earlier run into "
            f"this folder (kept in {FITS}/ per family, fraction and seed)",
        ]

    def files(self, result: Result, settings: ComplexitySettings, context: RunContext) -> ResultFiles:
        sweep: ComplexityResult = result.parts["sweep"]
        fitted: ProbeRun | None = result.parts["fitted"]
        labels = [f.label for f in settings.families()]
        title = f"{context.title}: binding-function complexity ({settings.budget.name} budget)"
        if settings.selection == "test":
            title += ", selected on test (optimistic)"

        def extra(stage: Path) -> None:
            complexity_plot(sweep.table, labels, stage / "plots" / "complexity.png", title=title)
            kept = UnitStore(stage / FITS)  # what a rerun with more approximators, fractions or seeds reuses
            for key, part in sweep.fits.items():
                kept.put(key, part)
            if fitted is not None:
                save_fitted_probes(
                    stage, fitted, context.arrays.scenes, fitting_settings(settings), **context.probe_source()
                )

        return ResultFiles(result.table, dict(result.tables), extra)
