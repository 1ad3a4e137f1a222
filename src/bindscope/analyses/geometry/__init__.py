"""``geometry`` (docs/method.md §8): how are concepts laid out in the embedding space?"""

from bindscope.analyses.geometry.analysis import GeometryAnalysis, GeometrySettings
from bindscope.analyses.geometry.compare import comparison_table, correlation_plot, correlations

__all__ = ["GeometryAnalysis", "GeometrySettings", "comparison_table", "correlation_plot", "correlations"]
