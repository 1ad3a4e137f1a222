"""What the frozen probes read from embeddings (docs/method/06-complexity.md), every probe in one product.

A sweep scores many sets of embeddings under the same frozen probes: the true embeddings of every (fraction,
seed)'s scene groups, and each model's predictions of its groups, its binding scenes and their swaps.
:func:`probe_reads` reads a set once, every probe at once (their weights stacked, one matrix product per chunk of
rows, on the torch threads :func:`~bindscope.core.threads.threads_for` gives its size), and keeps per probe which
rows it reads right (set separation) and, where asked, the object probe's logits; the groups are then means over
rows already read, so a scene shared by several groups, or by several (fraction, seed)s, is read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.core.threads import threads_for
from bindscope.estimators.probes import ProbeSet, set_separation_correct

#: Rows read at once (bounds the memory of their logits: 8,192 x 440 labels of the text preset, 14 MB).
READ_CHUNK = 8192
OBJECT = "object"


@dataclass(frozen=True)
class Reads:
    """The probes' read of some rows: per probe, whether each row is right (``correct`` ``[n]``), and the object
    probe's logits of the rows kept (``logits`` ``[kept, U]``, in row order)."""

    correct: dict[str, np.ndarray]
    logits: np.ndarray

    def at(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """Per probe, the correctness of the rows at ``positions``."""
        return {name: c[positions] for name, c in self.correct.items()}


def probe_reads(
    probes: ProbeSet,
    x: np.ndarray,
    scenes: np.ndarray,
    targets: Mapping[str, np.ndarray],
    keep: np.ndarray | None = None,
) -> Reads:
    """Every probe named in ``targets`` read on embeddings ``x`` ``[n, D]`` of the ``scenes`` (row indices of each
    target ``[N, L]``): per probe, whether each row is right (its present labels' logits above the absent ones'),
    and the object probe's logits of the rows ``keep`` marks (a mask; none by default).

    The logits are those of :meth:`ProbeSet.decision_function`, all probes in one product."""
    names = list(targets)
    weights = [np.asarray(probes.coef_[n]) for n in names]
    bounds = np.cumsum([0, *(len(w) for w in weights)])
    stacked = np.concatenate(weights).T
    correct = {n: np.zeros(len(x), dtype=bool) for n in names}
    kept: list[np.ndarray] = []
    for start in range(0, len(x), READ_CHUNK):
        rows = slice(start, start + READ_CHUNK)
        xp = probes.preprocessing.apply(np.asarray(x[rows], dtype=np.float32), probes.mean_)
        dtype = np.result_type(xp, stacked)  # as numpy's product in decision_function
        with threads_for(xp.size * stacked.shape[1]):
            logits = torch.from_numpy(np.ascontiguousarray(xp, dtype=dtype)) @ torch.from_numpy(
                np.ascontiguousarray(stacked, dtype=dtype)
            )
            for k, name in enumerate(names):
                block = logits[:, bounds[k] : bounds[k + 1]]
                correct[name][rows] = set_separation_correct(block, targets[name][scenes[rows]])
        if keep is not None and OBJECT in names:
            k = names.index(OBJECT)
            kept.append(logits[:, bounds[k] : bounds[k + 1]].numpy()[keep[rows]])
    width = len(weights[names.index(OBJECT)]) if OBJECT in names else 0
    return Reads(correct, np.concatenate(kept) if kept else np.zeros((0, width), dtype=stacked.dtype))
