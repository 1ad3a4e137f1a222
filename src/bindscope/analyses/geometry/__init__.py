"""``geometry`` (docs/method/08-geometry.md): how are concepts laid out in the embedding space?

=================  ===========================================================================================
``settings``       the settings (the held-out sweep, heads, rank, ordinal concepts, the MDS), with their help text
``compute``        every measure on every slot's object vectors, then the MDS picture (:class:`GeometryResult`)
``vectors``        object vectors per slot: the single-object bank, else pos-avg of the 2-object scenes
``slot``           every measure of one slot's object vectors, as tidy rows and tables
``factorization``  the linear factorization; ``structure``: orthogonality and rank of its components
``sweeps``         held-out scores over object-level splits (factorization, heads) and rank axes
``heads``          linear heads; ``rank_axes``: rank axes of ordinal concepts
``picture``        the MDS picture of one quadruple from the inputs; ``mds``: its points and 3-D MDS
``summary``        the typed numbers of ``summary.json`` (:class:`GeometrySummary`)
``present``        the words: the terminal's table and readings
``plot``           the figures and their captions; ``labels``: MDS labels that never overlap
``compare``        several geometry results compared
``analysis``       the registered analysis
=================  ===========================================================================================
"""

from bindscope.analyses.geometry.analysis import GeometryAnalysis
from bindscope.analyses.geometry.compare import comparison_table, correlation_plot, correlations
from bindscope.analyses.geometry.compute import GeometryResult
from bindscope.analyses.geometry.settings import GeometrySettings
from bindscope.analyses.geometry.summary import GeometrySummary

__all__ = [
    "GeometryAnalysis",
    "GeometryResult",
    "GeometrySettings",
    "GeometrySummary",
    "comparison_table",
    "correlation_plot",
    "correlations",
]
