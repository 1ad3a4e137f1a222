"""The registered ``intervene`` analysis (docs/method/05-interventions.md): can one object inside a scene embedding be
edited?"""

from __future__ import annotations

from pathlib import Path

from bindscope.analyses.base import Analysis, Progress, Rows, RunContext
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.intervene import plot
from bindscope.analyses.intervene.card import COLUMNS, measure_edits
from bindscope.analyses.intervene.compute import InterveneResult, intervene_analysis
from bindscope.analyses.intervene.outcomes import EXTRA_COLUMNS
from bindscope.analyses.intervene.plot import k_curve_plot
from bindscope.analyses.intervene.present import headline_rows, note_lines
from bindscope.analyses.intervene.settings import InterveneSettings
from bindscope.analyses.intervene.summary import InterveneSummary, intervene_summary
from bindscope.analyses.results import ResultFiles
from bindscope.estimators.probe_runs import save_fitted_probes
from bindscope.estimators.verdicts import Measured


class InterveneAnalysis(Analysis):
    """``intervene``: edit one object inside a scene embedding and see whether it becomes the edited scene."""

    name = "intervene"
    title = "Can one object in a scene embedding be edited? Vector-arithmetic edits, scored by retrieval and probes."
    Settings = InterveneSettings
    Summary = InterveneSummary
    uses = frozenset({"control", "probes", "singles"})
    extra_columns = EXTRA_COLUMNS
    story = "editable"
    order = 30
    columns = COLUMNS
    captions = plot.CAPTIONS

    def compute(
        self, inputs: AnalysisInputs, settings: InterveneSettings, progress: Progress | None = None
    ) -> InterveneResult:
        return intervene_analysis(inputs, settings, progress)

    def summarize(self, result: InterveneResult, settings: InterveneSettings) -> InterveneSummary:
        return intervene_summary(result, settings)

    def measure(self, result: InterveneResult, settings: InterveneSettings) -> dict[str, Measured]:
        edit = result.edits[0]
        return measure_edits(result.table, settings, result.absent, result.split, edit, result.sampled.get(edit))

    def headline(self, summary: InterveneSummary) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: InterveneSummary) -> list[str]:
        return note_lines(summary)

    def seeds(self, settings: InterveneSettings) -> list[int]:
        return list(settings.seeds)

    def files(self, result: InterveneResult, settings: InterveneSettings, context: RunContext) -> ResultFiles:
        def extra(stage: Path) -> None:
            if len(settings.k) > 1:
                title = f"{context.title}: edits by strength k"
                k_curve_plot(result.table, stage / "plots" / "k_curve.png", title=title)
            if result.fitted is not None and result.probe_settings is not None:
                source = context.probe_source()
                save_fitted_probes(stage, result.fitted, result.scenes, result.probe_settings, **source)

        return ResultFiles(result.table, dict(result.tables), extra, parquet_only=frozenset({"cases"}))
