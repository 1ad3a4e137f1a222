"""The analyses: one contract, one registry, one result format.

>>> from bindscope.analyses import list_analyses, get_analysis, run_analysis, load_inputs, load_result
>>> list_analyses()
['complexity', 'crossmodal', 'decompose', 'geometry', 'intervene', 'probe']
>>> settings = get_analysis("probe").Settings(seeds=(0,))          # doctest: +SKIP
>>> run_analysis("probe", load_inputs("probe", "emb/clip"), "results/probe", settings)   # doctest: +SKIP
"""

from __future__ import annotations

from bindscope.analyses.base import Analysis, Result
from bindscope.analyses.complexity import Budget, ComplexitySettings, resolve_budget
from bindscope.analyses.crossmodal import CrossmodalSettings
from bindscope.analyses.decompose import DecomposeSettings
from bindscope.analyses.geometry import GeometrySettings
from bindscope.analyses.inputs import INPUT_KINDS, AnalysisInputs, Inputs, load_frozen_probes, read_inputs
from bindscope.analyses.intervene import InterveneSettings
from bindscope.analyses.registry import get_analysis, list_analyses, load_inputs, register, run_analysis, unregister
from bindscope.analyses.results import LoadedResult, load_result, write_result
from bindscope.core.tidy import KEY_COLUMNS, spread
from bindscope.estimators.probe_runs import ProbeSettings

__all__ = [
    "INPUT_KINDS",
    "KEY_COLUMNS",
    "Analysis",
    "AnalysisInputs",
    "Budget",
    "ComplexitySettings",
    "CrossmodalSettings",
    "DecomposeSettings",
    "GeometrySettings",
    "Inputs",
    "InterveneSettings",
    "LoadedResult",
    "ProbeSettings",
    "Result",
    "get_analysis",
    "list_analyses",
    "load_frozen_probes",
    "load_inputs",
    "read_inputs",
    "load_result",
    "register",
    "resolve_budget",
    "run_analysis",
    "spread",
    "unregister",
    "write_result",
]
