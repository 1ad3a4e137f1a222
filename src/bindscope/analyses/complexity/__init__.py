"""``complexity`` (docs/method.md §6): how complex is the binding function, and does it generalise?"""

from bindscope.analyses.complexity.analysis import ComplexityAnalysis
from bindscope.analyses.complexity.sweep import Budget, ComplexitySettings, complexity_sweep, resolve_budget

__all__ = ["Budget", "ComplexityAnalysis", "ComplexitySettings", "complexity_sweep", "resolve_budget"]
