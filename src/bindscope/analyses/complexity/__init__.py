"""``complexity`` (docs/method/06-complexity.md): how complex is the binding function, and does it generalise?

``settings`` (the knobs: :class:`ComplexitySettings`, :class:`Budget`), ``families`` (the approximator families),
``fitters/`` (stacked Adam, exact ALS), ``approximator`` (one model, sklearn style), ``plan``, ``score``,
``units``, ``reuse`` and ``sweep`` (the sweep), ``curves`` and ``verdict`` (what it finds), ``summary`` and
``summarize`` (``summary.json``), ``present`` (the words), ``analysis`` (the registered analysis), ``plot``.
"""

from bindscope.analyses.complexity.analysis import ComplexityAnalysis, ComplexityResult
from bindscope.analyses.complexity.approximator import Approximator
from bindscope.analyses.complexity.settings import BUDGETS, Budget, ComplexitySettings, resolve_budget
from bindscope.analyses.complexity.summarize import complexity_summary
from bindscope.analyses.complexity.summary import ComplexitySummary
from bindscope.analyses.complexity.sweep import SweepResult, complexity_sweep

__all__ = [
    "BUDGETS",
    "Approximator",
    "Budget",
    "ComplexityAnalysis",
    "ComplexityResult",
    "ComplexitySettings",
    "ComplexitySummary",
    "SweepResult",
    "complexity_summary",
    "complexity_sweep",
    "resolve_budget",
]
