"""``probe`` (docs/method/03-probes.md): is object information recoverable from the embeddings?

:mod:`.compute` fits the probes and their controls over seeds, :mod:`.summary` gives the main numbers
(:class:`ProbeSummary`), :mod:`.present` the readings, :mod:`.analysis` is the registered analysis.
"""

from bindscope.analyses.probe.analysis import ProbeAnalysis, ProbeResult
from bindscope.analyses.probe.compute import probe_analysis
from bindscope.analyses.probe.present import binding_reading, object_numbers, readings, recoverable_reading
from bindscope.analyses.probe.settings import ProbeSettings
from bindscope.analyses.probe.summary import ProbeSummary, probe_summary

__all__ = [
    "ProbeAnalysis",
    "ProbeResult",
    "ProbeSettings",
    "ProbeSummary",
    "binding_reading",
    "object_numbers",
    "probe_analysis",
    "probe_summary",
    "readings",
    "recoverable_reading",
]
