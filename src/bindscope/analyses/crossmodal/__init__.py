"""``crossmodal`` (docs/method/07-crossmodal.md): does image-text similarity see the binding?

=================  ===========================================================================================
``settings``       the settings (concepts' roles, the bridge and its splits, a subsample), with their help text
``compute``        every test on the 2-object scenes, as one typed result (:class:`CrossmodalResult`)
``scoring``        one scoring of images against captions (swap tests, retrieval, per scene) and its references
``swaps``          swap tests; ``retrieval``: strict and concept-level retrieval with ties
``bridge``         the linear bridge text -> image (ridge, contrastive) and its object-level splits
``halftruth``      half-truth rates, pooled and per scene
``summary``        the typed numbers of ``summary.json`` (:class:`CrossmodalSummary`)
``present``        the words: the terminal's table and readings
``plot``           the figures
``analysis``       the registered analysis
=================  ===========================================================================================
"""

from bindscope.analyses.crossmodal.analysis import CrossmodalAnalysis
from bindscope.analyses.crossmodal.compute import CrossmodalResult
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.analyses.crossmodal.summary import CrossmodalSummary

__all__ = ["CrossmodalAnalysis", "CrossmodalResult", "CrossmodalSettings", "CrossmodalSummary"]
