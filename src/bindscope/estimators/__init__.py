"""Estimators: the science every analysis shares, sklearn-style over arrays (no files, no results).

Linear probes (:mod:`.probes`, fitted as :class:`~.probes.ProbeFit` says; run over seeds in
:mod:`.probe_runs`, whose :class:`~.probe_runs.ProbeSettings` extend it), exact additive fits
(:mod:`.additive`), object banks (:mod:`.object_banks`), a scene index (:mod:`.scene_index`), the
bag-of-concepts floors (:mod:`.floors`), metric helpers (:mod:`.metrics`) and rates with their n and 95% Wilson
interval (:mod:`.intervals`).
"""
