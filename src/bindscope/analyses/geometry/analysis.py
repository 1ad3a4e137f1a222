"""The registered ``geometry`` analysis (docs/method/08-geometry.md): the shape of object embeddings.

On object vectors per slot (the single-object bank when given, else the position-averaged vectors of
the 2-object scenes): linear factorization (all objects, held-out objects, raw and whitened),
orthogonality and rank of the concepts' components, compositional generalisation of linear heads,
rank axes of ordinal concepts, and the research code's 3-D MDS picture of one quadruple.
"""

from __future__ import annotations

from pathlib import Path

from bindscope.analyses.base import Analysis, Progress, Rows, RunContext
from bindscope.analyses.geometry import plot
from bindscope.analyses.geometry.card import COLUMNS, measure_geometry
from bindscope.analyses.geometry.compute import EXTRA_COLUMNS, GeometryResult, geometry_analysis
from bindscope.analyses.geometry.present import headline_rows, notes_lines
from bindscope.analyses.geometry.settings import GeometrySettings
from bindscope.analyses.geometry.summary import GeometrySummary, geometry_summary
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.results import ResultFiles
from bindscope.estimators.verdicts import Measured
from bindscope.space.families import PLACE


class GeometryAnalysis(Analysis):
    """``geometry``: linear factorization, orthogonality, rank, linear heads, rank axes and the MDS picture."""

    name = "geometry"
    title = "What shape do object embeddings have? Factorization, orthogonality, rank, linear heads, rank axes, MDS."
    Settings = GeometrySettings
    Summary = GeometrySummary
    uses = frozenset({"singles"})
    reads_single_objects = True
    extra_columns = EXTRA_COLUMNS
    story = "geometry"
    order = 60
    columns = COLUMNS
    captions = plot.CAPTIONS

    def compute(
        self, inputs: AnalysisInputs, settings: GeometrySettings, progress: Progress | None = None
    ) -> GeometryResult:
        return geometry_analysis(inputs, settings, progress)

    def summarize(self, result: GeometryResult, settings: GeometrySettings) -> GeometrySummary:
        return geometry_summary(result)

    def measure(self, result: GeometryResult, settings: GeometrySettings) -> dict[str, Measured]:
        space = result.space
        return measure_geometry(result.table, result.fractions, space.num_objects, PLACE in space.concepts)

    def headline(self, summary: GeometrySummary) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: GeometrySummary) -> list[str]:
        return notes_lines(summary)

    def files(self, result: GeometryResult, settings: GeometrySettings, context: RunContext) -> ResultFiles:
        def extra(stage: Path) -> None:
            plot.geometry_plots(result, stage / "plots", context.title)

        return ResultFiles(result.table, dict(result.tables), extra)
