"""The registered ``crossmodal`` analysis (docs/method/07-crossmodal.md): the bag-of-concepts failure across modalities.

Image embeddings (``embeddings``) against the captions' text embeddings of the same model (``other``):
swap tests, strict and concept-level retrieval, a linear bridge fitted on seen objects and scored on
unseen ones, and half-truths (with the single-object caption bank, ``singles``); beside them, the
uni-modal object probe accuracy of each modality (``unimodal``), the paper's contrast.
"""

from __future__ import annotations

from pathlib import Path

from bindscope.analyses.base import Analysis, Progress, Rows, RunContext
from bindscope.analyses.crossmodal import plot
from bindscope.analyses.crossmodal.card import COLUMNS, measure_crossmodal
from bindscope.analyses.crossmodal.compute import EXTRA_COLUMNS, CrossmodalResult, crossmodal_analysis
from bindscope.analyses.crossmodal.present import headline_rows, notes_lines
from bindscope.analyses.crossmodal.scoring import TEST_ONLY
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.analyses.crossmodal.summary import CrossmodalSummary, crossmodal_summary
from bindscope.analyses.inputs import AnalysisInputs, Inputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.errors import BindscopeError
from bindscope.estimators.verdicts import Measured


class CrossmodalAnalysis(Analysis):
    """``crossmodal``: swap tests, retrieval, the linear bridge and half-truths across modalities."""

    name = "crossmodal"
    title = "Does image-text similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths."
    Settings = CrossmodalSettings
    Summary = CrossmodalSummary
    needs = frozenset({"embeddings", "other"})
    uses = frozenset({"singles", "unimodal"})
    extra_columns = EXTRA_COLUMNS
    story = "cross-modal"
    order = 50
    columns = COLUMNS
    captions = plot.CAPTIONS

    def check_folders(self, inputs: Inputs) -> None:
        """The image folder comes first, the text one second (``other``)."""
        if inputs.embeddings.modality != "image":
            raise BindscopeError(
                f"{inputs.embeddings.root} holds {inputs.embeddings.modality} embeddings; give the image folder "
                "first, then the text one"
            )

    def compute(
        self, inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None
    ) -> CrossmodalResult:
        return crossmodal_analysis(inputs, settings, progress)

    def summarize(self, result: CrossmodalResult, settings: CrossmodalSettings) -> CrossmodalSummary:
        return crossmodal_summary(result, settings)

    def measure(self, result: CrossmodalResult, settings: CrossmodalSettings) -> dict[str, Measured]:
        return measure_crossmodal(result.table)

    def headline(self, summary: CrossmodalSummary) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: CrossmodalSummary) -> list[str]:
        return notes_lines(summary)

    def files(self, result: CrossmodalResult, settings: CrossmodalSettings, context: RunContext) -> ResultFiles:
        table = result.table

        def extra(stage: Path) -> None:
            plots = stage / "plots"
            plot.swap_plot(table, plots / "swaps.png", title=context.title)
            if (table.group == TEST_ONLY).any():
                plot.bridge_plot(table, plots / "bridge.png", title=f"{context.title}: {settings.bridge} bridge")
            if (table.variant == "half_truth").any():
                plot.half_truth_plot(table, plots / "half_truths.png", title=context.title)

        return ResultFiles(table, dict(result.tables), extra, parquet_only=frozenset({"cases"}))
