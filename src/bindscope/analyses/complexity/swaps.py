"""Binding swaps (docs/method/06-complexity.md, *Generalises to unseen objects*): the scenes of a sweep that only
binding tells apart, and whether (predicted) embeddings tell them apart under the frozen object probe.

A scene that needs binding (:meth:`~bindscope.space.concepts.SceneSet.binding_ambiguous`) has a *binding swap*:
another scene with the same concept values, as counts, holding other objects ("a blue cube and a red sphere" for
"a red cube and a blue sphere"). A bag of concepts embeds the two alike. A scene is **told apart** from its swaps
(those among the sweep's scenes scored with it: :func:`unseen_pairs`) when, under the object probe,

- on the scene's embedding every object it holds scores above every object of its swaps that it does not hold,
- on each swap's embedding every object the swap holds scores above every object of the scene it does not hold,
- and the scene's true embedding is not that of a swap (:data:`TIED_WITHIN`): nothing read from a tie binds.

Every comparison is strict, so a tie is wrong. Two equal embeddings give the same scores, which cannot rank
the scene's objects first on one and the swap's first on the other: a bag of concepts, and any prediction
fitted to one that does not tell the two scenes apart, tells no scene apart. Read with the two embeddings
exchanged (``exchanged``), the same rule gives what embeddings that do not say which scene is which score: the
control a family's share must clear.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from bindscope.estimators.floors import role_view
from bindscope.space.concepts import SceneSet

#: A scene and its swap are tied when their true embeddings differ by at most this share of the larger
#: absolute coordinate (a bag of concepts: exactly; mean-pooled token embeddings: up to summation order).
TIED_WITHIN = 1e-5
#: Pairs compared at once when looking for ties (bounds the memory of ``[pairs, D]`` differences).
CHUNK = 8192


@dataclass(frozen=True)
class Swaps:
    """Every (scene, swap) pair among a sweep's scenes, sorted by scene.

    Attributes
    ----------
    scene, swap
        ``[P]`` indices into the sweep's scenes: a scene that needs binding and one of its binding swaps.
    tied
        ``[P]`` whether the two true embeddings are equal (within :data:`TIED_WITHIN`).
    scorable
        ``[N]`` whether a scene needs binding and has at least one swap among the sweep's scenes.
    """

    scene: np.ndarray
    swap: np.ndarray
    tied: np.ndarray
    scorable: np.ndarray

    def scored(self, idx: np.ndarray) -> np.ndarray:
        """The scenes of ``idx`` that are scored: those that need binding and have a swap here."""
        idx = np.asarray(idx, dtype=np.int64)
        return idx[self.scorable[idx]]

    def pairs(self, scenes: np.ndarray) -> np.ndarray:
        """Positions of the pairs whose scene is one of ``scenes``."""
        lo = np.searchsorted(self.scene, scenes, side="left")
        hi = np.searchsorted(self.scene, scenes, side="right")
        counts = hi - lo
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        return starts + np.arange(int(counts.sum()))


def find_swaps(scenes: SceneSet, y: np.ndarray, present: np.ndarray) -> Swaps:
    """Every binding swap among ``scenes`` (K-object scenes), with ``y`` their embeddings ``[N, D]`` and
    ``present`` ``[N, U]`` which objects each holds."""
    n = len(scenes)
    roles = role_view(scenes)  # a relation (count) space: the swaps a bag of roles ties, of places (counts)
    ambiguous = roles.binding_ambiguous()
    bag = np.concatenate(roles.value_counts(), axis=1)
    bag_id = np.unique(bag, axis=0, return_inverse=True)[1].reshape(-1)
    set_id = np.unique(np.packbits(present, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    order = np.argsort(bag_id, kind="stable")
    sizes = np.bincount(bag_id)
    starts = np.cumsum(sizes) - sizes
    m = sizes[bag_id]  # each scene's class size: it is paired with every scene of its class
    a = np.repeat(np.arange(n), m)
    offsets = np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)
    b = order[np.repeat(starts[bag_id], m) + offsets]
    keep = ambiguous[a] & (set_id[a] != set_id[b])
    a, b = a[keep], b[keep]
    tied = _tied(np.asarray(y), a, b)
    scorable = np.zeros(n, dtype=bool)
    scorable[a] = True
    return Swaps(a.astype(np.int64), b.astype(np.int64), tied, scorable)


def _tied(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair: whether the embeddings of ``a`` and ``b`` are equal within :data:`TIED_WITHIN`."""
    out = np.zeros(len(a), dtype=bool)
    for start in range(0, len(a), CHUNK):
        ya, yb = (y[i[start : start + CHUNK]].astype(np.float64) for i in (a, b))
        scale = np.maximum(np.abs(ya).max(axis=1, initial=0.0), np.abs(yb).max(axis=1, initial=0.0))
        out[start : start + CHUNK] = np.abs(ya - yb).max(axis=1, initial=0.0) <= TIED_WITHIN * scale
    return out


def unseen_pairs(swaps: Swaps, scenes: np.ndarray, present: np.ndarray, test_objects: np.ndarray) -> np.ndarray:
    """Positions of the pairs of ``scenes`` (scenes of unseen objects) whose swap holds unseen objects only
    (``test_objects``): to a family that learned nothing of the unseen objects the two are alike, so neither
    prediction is the easier to read (a swap holding seen objects would be, and a family that only reproduces
    the seen objects would seem to tell the two apart)."""
    pos = swaps.pairs(np.asarray(scenes, dtype=np.int64))
    seen = np.ones(present.shape[1], dtype=bool)
    seen[np.asarray(test_objects, dtype=np.int64)] = False
    return pos[~(present[swaps.swap[pos]] & seen).any(axis=1)]


def told_apart(
    swaps: Swaps,
    pos: np.ndarray,
    lookup: np.ndarray,
    logits: np.ndarray,
    present: np.ndarray,
    *,
    exchanged: bool = False,
) -> np.ndarray:
    """Per scene with pairs among ``pos`` (sorted, unique scenes): is it told apart from every one of those swaps?

    Parameters
    ----------
    swaps, pos
        The sweep's swaps and the positions of the pairs scored (e.g. :func:`unseen_pairs`).
    lookup, logits
        Sorted scene indices holding those scenes and swaps, and the object probe's logits ``[len(lookup), U]``
        on their (predicted or true) embeddings.
    present
        ``[N, U]`` which objects each scene holds.
    exchanged
        Read each scene's objects on its swap's embedding and the swap's on the scene's: what embeddings that do
        not say which scene is which score (the control of :func:`told_apart`).
    """
    if not len(pos):
        return np.zeros(0, dtype=bool)
    a, b = swaps.scene[pos], swaps.swap[pos]
    la, lb = logits[np.searchsorted(lookup, a)], logits[np.searchsorted(lookup, b)]
    if exchanged:
        la, lb = lb, la
    pa, pb = present[a], present[b]
    ok = _ranks_first(la, pa, pb & ~pa) & _ranks_first(lb, pb, pa & ~pb) & ~swaps.tied[pos]
    scenes, at = np.unique(a, return_inverse=True)
    failed = np.zeros(len(scenes), dtype=np.int64)
    np.add.at(failed, at, ~ok)
    return failed == 0


def _ranks_first(logits: np.ndarray, own: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Per row: does every ``own`` label score strictly above every ``others`` label?"""
    lowest = np.where(own, logits, np.inf).min(axis=1)
    highest = np.where(others, logits, -np.inf).max(axis=1)
    return lowest > highest


def swap_chance(swaps: Swaps, pos: np.ndarray, present: np.ndarray) -> float:
    """Expected share of the scenes of the pairs ``pos`` told apart under random probe scores (each embedding's
    own; NaN for none).

    A scene's own m objects score above the r other objects of its swaps with probability ``1 / C(m + r, m)``;
    each swap's objects above the scene's others likewise, independently; a tied pair never.
    """
    if not len(pos):
        return float("nan")
    a, b = swaps.scene[pos], swaps.swap[pos]
    scenes, at = np.unique(a, return_inverse=True)
    pa, pb = present[a], present[b]
    own_a, own_b = present[scenes].sum(axis=1), pb.sum(axis=1)
    rows, objects = np.nonzero(pb & ~pa)  # the swaps' objects a scene does not hold, per scene (their union)
    keys = np.unique(at[rows] * present.shape[1] + objects)
    others_a = np.bincount(keys // present.shape[1], minlength=len(scenes))
    pair_log = np.where(swaps.tied[pos], -np.inf, -_log_comb(own_b + (pa & ~pb).sum(axis=1), own_b))
    total = np.zeros(len(scenes))
    np.add.at(total, at, pair_log)
    return float(np.exp(total - _log_comb(own_a + others_a, own_a)).mean())


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log C(n, k)`` elementwise."""
    n, k = np.asarray(n, dtype=np.float64), np.asarray(k, dtype=np.float64)
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
