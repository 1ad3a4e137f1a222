"""``intervene`` (docs/method/05-interventions.md): edit one object inside a scene embedding by vector arithmetic.

The object vectors come from :mod:`bindscope.estimators.object_banks`; :mod:`.edits` plans which edits
to make, :mod:`.variants` the banks and the bag-of-concepts edit each plan is scored under, :mod:`.score`
scores them in batches (:mod:`.probing`: the probe metric), :mod:`.outcomes` turns scores into rows,
:mod:`.compute` runs it all, :mod:`.summary` gives the main numbers (:class:`InterveneSummary`),
:mod:`.present` the words, :mod:`.analysis` is the registered analysis.
"""

from bindscope.analyses.intervene.analysis import InterveneAnalysis
from bindscope.analyses.intervene.compute import InterveneResult, intervene_analysis
from bindscope.analyses.intervene.outcomes import ALL, GROUPS
from bindscope.analyses.intervene.settings import TABLE_K, InterveneSettings
from bindscope.analyses.intervene.summary import AtK, InterveneSummary, at_k, intervene_summary

__all__ = [
    "ALL",
    "GROUPS",
    "TABLE_K",
    "AtK",
    "InterveneAnalysis",
    "InterveneResult",
    "InterveneSettings",
    "InterveneSummary",
    "at_k",
    "intervene_analysis",
    "intervene_summary",
]
