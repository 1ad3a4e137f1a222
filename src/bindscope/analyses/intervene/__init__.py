"""Interventions (docs/method.md §5): edit one object inside a scene embedding by vector arithmetic.

The object vectors come from :mod:`bindscope.estimators.object_banks`; :mod:`edits` plans which edits
to make, :mod:`score` scores them in batches, :mod:`analysis` is the registered ``intervene``
analysis and :mod:`table` writes the paper's table from result folders.
"""
