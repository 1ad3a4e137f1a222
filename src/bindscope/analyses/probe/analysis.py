"""The registered ``probe`` analysis (docs/method/03-probes.md): is object information recoverable from the
embeddings?"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.probe.card import COLUMNS, measure_objects
from bindscope.analyses.probe.compute import probe_analysis
from bindscope.analyses.probe.present import headline_rows, readings
from bindscope.analyses.probe.settings import ProbeSettings
from bindscope.analyses.probe.summary import ProbeSummary, probe_summary
from bindscope.analyses.results import ResultFiles
from bindscope.estimators.probe_runs import ProbeRun, approximate_warnings, save_fitted_probes
from bindscope.estimators.verdicts import Measured
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of


@dataclass
class ProbeResult(Result):
    """What ``probe`` computes: the tidy table, per-scene correctness (``tables``), and the base run (its
    probes are saved, and later analyses reuse them) with the scenes it labelled."""

    run: ProbeRun = field(kw_only=True)
    scenes: SceneSet = field(kw_only=True)


class ProbeAnalysis(Analysis):
    """``probe``: concept and object probes over seeds, with chance and the controls."""

    name = "probe"
    title = "Is object information recoverable? Concept and object probes with chance and controls."
    Settings = ProbeSettings
    Summary = ProbeSummary
    extra_columns = ("n_cases",)
    uses = frozenset({"control"})
    story = "recoverable"
    order = 10
    columns = COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: ProbeSettings, progress: Progress | None = None) -> ProbeResult:
        y = np.asarray(inputs.embeddings)
        ctrl = np.asarray(inputs.control) if inputs.control is not None else None
        table, base, per_scene = probe_analysis(y, inputs.scenes, settings, control=ctrl, progress=progress)
        warnings = approximate_warnings({"base": base.solver})
        return ProbeResult(table, {"per_scene": per_scene}, warnings, run=base, scenes=inputs.scenes)

    def summarize(self, result: ProbeResult, settings: ProbeSettings) -> ProbeSummary:
        return probe_summary(result.table, result.run.solver)

    def measure(self, result: ProbeResult, settings: ProbeSettings) -> dict[str, Measured]:
        return measure_objects(result.table, roles=family_of(result.scenes.space) != "attribution")

    def headline(self, summary: ProbeSummary) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: ProbeSummary) -> list[str]:
        """The readings: objects recoverable (against +rand and chance), each accuracy beside its floors,
        and whether the object probe binds beyond a bag of concepts."""
        return readings(summary)

    def files(self, result: ProbeResult, settings: ProbeSettings, context: RunContext) -> ResultFiles:
        run, scenes = result.run, result.scenes

        def extra(stage: Path) -> None:  # the fitted probes, one folder per seed
            save_fitted_probes(stage, run, scenes, settings, **context.probe_source())

        return ResultFiles(result.table, dict(result.tables), extra, parquet_only=frozenset({"per_scene"}))
