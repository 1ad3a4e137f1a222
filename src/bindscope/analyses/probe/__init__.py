"""``probe`` (docs/method.md §3): is object information recoverable from the embeddings?"""

from bindscope.analyses.probe.analysis import (
    ProbeAnalysis,
    binding_reading,
    object_numbers,
    probe_analysis,
    probe_summary,
    recoverable_reading,
)
from bindscope.estimators.probe_runs import ProbeSettings

__all__ = [
    "ProbeAnalysis",
    "ProbeSettings",
    "binding_reading",
    "object_numbers",
    "probe_analysis",
    "probe_summary",
    "recoverable_reading",
]
