"""The settings of ``probe``: :class:`ProbeSettings` (how probes are fitted and scored over seeds).

They live in :mod:`bindscope.estimators.probe_runs`, beside the runs they drive: every analysis that fits
probes (decompose, complexity, intervene) takes or extends them.
"""

from bindscope.estimators.probe_runs import ProbeSettings

__all__ = ["ProbeSettings"]
