"""The registered ``decompose`` analysis (docs/method/04-decomposition.md): is a scene embedding a sum of its parts?"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bindscope.analyses.base import Analysis, Progress, Result, Rows
from bindscope.analyses.decompose.card import COLUMNS, measure_decompose
from bindscope.analyses.decompose.compute import EXTRA_COLUMNS, Solvers, decompose_analysis, design_name
from bindscope.analyses.decompose.present import design_notes, headline_rows
from bindscope.analyses.decompose.settings import DecomposeSettings
from bindscope.analyses.decompose.summary import DecomposeSummary, decompose_summary
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.estimators.probe_runs import approximate_warnings
from bindscope.estimators.verdicts import Measured


@dataclass
class DecomposeResult(Result):
    """What ``decompose`` computes: the tidy table (column ``part``), the solver of every subtraction probe and the
    design (``role-aware`` / ``count-aware`` on a relation / count space, else None)."""

    solvers: Solvers = field(kw_only=True)
    design: str | None = field(kw_only=True, default=None)


class DecomposeAnalysis(Analysis):
    """``decompose``: additive R² with controls, and probes after subtracting each additive model."""

    name = "decompose"
    title = "Is a scene a sum of its parts? Additive R² and probes after subtracting each model."
    Settings = DecomposeSettings
    Summary = DecomposeSummary
    uses = frozenset({"control"})
    extra_columns = EXTRA_COLUMNS
    story = "additive"
    order = 20
    columns = COLUMNS

    def compute(
        self, inputs: AnalysisInputs, settings: DecomposeSettings, progress: Progress | None = None
    ) -> DecomposeResult:
        y = np.asarray(inputs.embeddings)
        ctrl = np.asarray(inputs.control) if inputs.control is not None else None
        table, solvers = decompose_analysis(
            y,
            inputs.scenes,
            settings,
            test_fraction=settings.test_fraction,
            residual_mean=settings.residual_mean,
            control=ctrl,
            progress=progress,
        )
        design = design_name(inputs.scenes)
        return DecomposeResult(table, warnings=approximate_warnings(solvers), solvers=solvers, design=design)

    def summarize(self, result: DecomposeResult, settings: DecomposeSettings) -> DecomposeSummary:
        return decompose_summary(result.table, result.solvers, result.design)

    def measure(self, result: DecomposeResult, settings: DecomposeSettings) -> dict[str, Measured]:
        return measure_decompose(result.table)

    def headline(self, summary: DecomposeSummary) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: DecomposeSummary) -> list[str]:
        return design_notes(summary)
