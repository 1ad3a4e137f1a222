"""``intervene`` (docs/method.md §5): edit one object inside a scene embedding by vector arithmetic.

The object vectors come from :mod:`bindscope.estimators.object_banks`; :mod:`.edits` plans which edits
to make, :mod:`.score` scores them in batches, :mod:`.analysis` is the registered analysis.
"""

from bindscope.analyses.intervene.analysis import ALL, GROUPS, TABLE_K, InterveneAnalysis, InterveneSettings, at_k

__all__ = ["ALL", "GROUPS", "TABLE_K", "InterveneAnalysis", "InterveneSettings", "at_k"]
