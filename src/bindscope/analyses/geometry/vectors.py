"""Object vectors for the geometry analyses (docs/method/08-geometry.md), per slot.

From the single-object bank when there is one (an object alone: per image position, or one caption
per object), else the position-averaged vectors of the 2-object scenes (the mean embedding of the
scenes holding the object in that slot, as the interventions' ``pos-avg`` bank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.estimators.object_banks import pos_avg_bank, single_bank
from bindscope.space.concepts import SceneSet


@dataclass(frozen=True)
class ObjectVectors:
    """``vectors`` ``[P, U, D]`` per slot position and object id, which of them exist, and their source."""

    vectors: np.ndarray
    present: np.ndarray
    source: str

    @property
    def positions(self) -> int:
        return int(self.vectors.shape[0])


def object_vectors(y: np.ndarray, scenes: SceneSet, singles: np.ndarray | None) -> ObjectVectors:
    """The single-object bank (one position for captions) or, without it, ``pos-avg`` of the 2-object scenes."""
    u = scenes.space.num_objects
    if singles is not None:
        bank = single_bank(singles, u, max(len(singles) // u, 1))  # as many positions as it has (checked there)
        return ObjectVectors(np.asarray(bank.vectors), np.asarray(bank.present), "single")
    rows = scenes.full() if scenes.max_objects == 2 else np.arange(0)
    if not len(rows):
        raise BindscopeError(
            "geometry needs object vectors: give the single-object bank (`bindscope embed --single-objects`) "
            "or embeddings of 2-object scenes"
        )
    bank = pos_avg_bank(scenes.subset(rows).object_ids(), np.asarray(y)[rows], u)
    return ObjectVectors(np.asarray(bank.vectors), np.asarray(bank.present), "pos-avg")
