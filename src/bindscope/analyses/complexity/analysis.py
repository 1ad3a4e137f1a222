"""The registered ``complexity`` analysis: the approximator sweep under frozen probes (fitted here when none are
given), its summary and verdict, its card column (:mod:`.card`) and its files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.complexity import plot, present
from bindscope.analyses.complexity.card import COLUMNS, labels_by_simplicity, measure_generalisation
from bindscope.analyses.complexity.curves import unconverged_fits
from bindscope.analyses.complexity.plot import complexity_plot
from bindscope.analyses.complexity.reuse import FITS
from bindscope.analyses.complexity.settings import ComplexitySettings
from bindscope.analyses.complexity.summarize import complexity_summary
from bindscope.analyses.complexity.summary import ComplexitySummary, FitCounts, ProbeNumbers
from bindscope.analyses.complexity.sweep import EXTRA_COLUMNS, SweepResult, complexity_sweep
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.executors import UnitStore
from bindscope.estimators.probe_runs import (
    ProbeRun,
    ProbeSettings,
    approximate_warnings,
    fit_probe_set,
    recorded_training_scenes,
    save_fitted_probes,
)
from bindscope.estimators.probes import ProbeSet
from bindscope.estimators.verdicts import Measured
from bindscope.space.concepts import SceneSet


@dataclass
class ComplexityResult(Result):
    """What ``compute`` returns: the sweep, and the probes it fitted itself (None: frozen probes were given)."""

    sweep: SweepResult = field(kw_only=True)
    fitted_probes: ProbeRun | None = field(default=None, kw_only=True)


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


class ComplexityAnalysis(Analysis):
    """``complexity``: which function families, fitted on scenes of seen objects, decode on unseen ones."""

    name = "complexity"
    title = "How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones."
    Settings = ComplexitySettings
    Summary = ComplexitySummary
    uses = frozenset({"probes"})
    extra_columns = EXTRA_COLUMNS
    story = "complexity"
    order = 40
    columns = COLUMNS
    captions = plot.CAPTIONS

    def compute(
        self, inputs: AnalysisInputs, settings: ComplexitySettings, progress: Progress | None = None
    ) -> ComplexityResult:
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
            warnings.append(
                f"fits that did not converge (see the 'converged' rows): {present.describe_fits(unconverged)}"
            )
        if settings.selection == "test":
            warnings.append(present.OPTIMISTIC)
        return ComplexityResult(sweep.table, {"training": sweep.history}, warnings, sweep=sweep, fitted_probes=fitted)

    def summarize(self, result: ComplexityResult, settings: ComplexitySettings) -> ComplexitySummary:
        sweep, fitted = result.sweep, result.fitted_probes is not None
        probes = ProbeNumbers(
            fitted_here=fitted,
            folder=f"probes/seed{settings.probe_seed}" if fitted else None,
            seed=settings.probe_seed,
            scored_scenes=present.probe_scenes_note(sweep.probe_scenes_unscored, settings.probe_scenes),
        )
        fits = FitCounts(fitted=len(sweep.fits) - sweep.reused, reused=sweep.reused)
        return complexity_summary(sweep, settings, probes=probes, fits=fits)

    def measure(self, result: ComplexityResult, settings: ComplexitySettings) -> dict[str, Measured]:
        return measure_generalisation(result.table, labels_by_simplicity(settings))

    def headline(self, summary: ComplexitySummary) -> Rows:
        return present.headline(summary)

    def notes(self, summary: ComplexitySummary) -> list[str]:
        return present.notes(summary)

    def files(self, result: ComplexityResult, settings: ComplexitySettings, context: RunContext) -> ResultFiles:
        sweep, fitted = result.sweep, result.fitted_probes
        labels = [f.label for f in settings.families()]
        title = present.plot_title(context.title, settings.budget.name, settings.selection)

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
