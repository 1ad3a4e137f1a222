"""Subsamples of a relation or count space that keep each scene with its swap (docs/method/11-relations-counts.md,
"Scenes and captions")."""

from __future__ import annotations

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.captions import family_swap
from bindscope.space.concepts import SceneSet


def swap_partners(scenes: SceneSet) -> np.ndarray:
    """Per scene ``[N]``: the row of its relation (count) swap among ``scenes``, -1 where it has none (one
    object, a swap naming the same objects, or a swap outside the set)."""
    found = family_swap(scenes)
    if found is None:
        raise BindscopeError("swap partners need a relation or count space")
    swapped, valid = found[1]
    u = scenes.space.num_objects

    def keys(ids: np.ndarray) -> np.ndarray:
        first = ids[:, 0].astype(np.int64)
        second = ids[:, 1].astype(np.int64) if ids.shape[1] > 1 else np.full(len(ids), -1, np.int64)
        return first * (u + 1) + (second + 1)

    own, other = keys(scenes.object_ids()), keys(swapped.object_ids())
    order = np.argsort(own, kind="stable")
    at = np.minimum(np.searchsorted(own[order], other), len(own) - 1) if len(own) else np.zeros(0, np.int64)
    row = order[at] if len(own) else at
    hit = valid & (own[row] == other) & (row != np.arange(len(scenes)))
    return np.where(hit, row, -1)


def swap_closed_subsample(scenes: SceneSet, num_scenes: int, seed: int = 0) -> np.ndarray:
    """Sorted rows of a seeded subsample of ``num_scenes`` scenes that keeps each scene's relation (count) swap
    with it, and every object in every slot (:meth:`SceneSet.covering_subsample` picks half the scenes, their
    swaps join them, and swap pairs in a seeded order fill up the rest)."""
    if num_scenes >= len(scenes):
        return np.arange(len(scenes))
    partner = swap_partners(scenes)
    keep = np.zeros(len(scenes), dtype=bool)
    first = scenes.covering_subsample(max(num_scenes // 2, 1), seed)
    keep[first] = True
    keep[partner[first][partner[first] >= 0]] = True
    taken = int(keep.sum())
    for row in np.random.default_rng(seed).permutation(len(scenes)):
        if taken >= num_scenes:
            break
        if keep[row]:
            continue
        pair = [row] if partner[row] < 0 or keep[partner[row]] else [row, partner[row]]
        if taken + len(pair) > num_scenes:
            continue
        keep[pair] = True
        taken += len(pair)
    return np.flatnonzero(keep)
