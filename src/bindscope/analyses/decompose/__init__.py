"""``decompose`` (docs/method.md §4): is a scene embedding a sum of its parts?"""

from bindscope.analyses.decompose.analysis import DecomposeAnalysis, DecomposeSettings, decompose_analysis

__all__ = ["DecomposeAnalysis", "DecomposeSettings", "decompose_analysis"]
