"""``decompose`` (docs/method/04-decomposition.md): is a scene embedding a sum of its parts?

:mod:`.r2` scores the additive models, :mod:`.subtraction` re-runs the probes after removing each,
:mod:`.compute` runs both, :mod:`.summary` gives the main numbers (:class:`DecomposeSummary`),
:mod:`.present` the headline, :mod:`.analysis` is the registered analysis.
"""

from bindscope.analyses.decompose.analysis import DecomposeAnalysis, DecomposeResult
from bindscope.analyses.decompose.compute import decompose_analysis
from bindscope.analyses.decompose.settings import DecomposeSettings
from bindscope.analyses.decompose.subtraction import SUBTRACTION_VARIANTS
from bindscope.analyses.decompose.summary import DecomposeSummary, decompose_summary

__all__ = [
    "SUBTRACTION_VARIANTS",
    "DecomposeAnalysis",
    "DecomposeResult",
    "DecomposeSettings",
    "DecomposeSummary",
    "decompose_analysis",
    "decompose_summary",
]
