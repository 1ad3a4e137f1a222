"""The analyses: one contract, one registry, one result format.

>>> from bindscope.analyses import list_analyses, get_analysis, run_analysis, load_inputs, load_result
>>> list_analyses()
['complexity', 'crossmodal', 'decompose', 'geometry', 'intervene', 'probe']
>>> settings = get_analysis("probe").Settings(seeds=(0,))          # doctest: +SKIP
>>> run_analysis("probe", load_inputs("probe", "emb/clip"), "results/probe", settings)   # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bindscope.analyses.base import Analysis, Result
from bindscope.analyses.inputs import INPUT_KINDS, AnalysisInputs, Inputs, load_frozen_probes, read_inputs
from bindscope.analyses.registry import get_analysis, list_analyses, load_inputs, register, run_analysis, unregister
from bindscope.analyses.results import LoadedResult, load_result, write_result
from bindscope.core.lazy import lazy_attributes
from bindscope.core.tidy import KEY_COLUMNS, spread

#: Each analysis's settings, imported on first use (PEP 562): importing the package (or one of its modules)
#: imports no analysis, so a command loads only the libraries of the analysis it runs.
_LAZY: dict[str, str] = {
    "Budget": "bindscope.analyses.complexity",
    "ComplexitySettings": "bindscope.analyses.complexity",
    "resolve_budget": "bindscope.analyses.complexity",
    "CrossmodalSettings": "bindscope.analyses.crossmodal",
    "DecomposeSettings": "bindscope.analyses.decompose",
    "GeometrySettings": "bindscope.analyses.geometry",
    "InterveneSettings": "bindscope.analyses.intervene",
    "ProbeSettings": "bindscope.estimators.probe_runs",
}

if TYPE_CHECKING:  # what type checkers read; at run time __getattr__ imports each name when first used
    from bindscope.analyses.complexity import Budget, ComplexitySettings, resolve_budget
    from bindscope.analyses.crossmodal import CrossmodalSettings
    from bindscope.analyses.decompose import DecomposeSettings
    from bindscope.analyses.geometry import GeometrySettings
    from bindscope.analyses.intervene import InterveneSettings
    from bindscope.estimators.probe_runs import ProbeSettings
else:  # hidden from type checkers, which would otherwise take any misspelt name for one of these
    __getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())


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
