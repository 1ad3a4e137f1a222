"""``crossmodal`` (docs/method.md §7): does image-text similarity see the binding?"""

from bindscope.analyses.crossmodal.analysis import CrossmodalAnalysis, CrossmodalSettings

__all__ = ["CrossmodalAnalysis", "CrossmodalSettings"]
