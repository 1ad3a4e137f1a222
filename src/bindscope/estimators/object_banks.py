"""Object-vector banks (docs/method/05-interventions.md, docs/method/08-geometry.md): what one object looks like inside
a scene, or alone.

A bank holds a vector per (slot position, object) with a mask of which exist. ``obj-avg`` and
``pos-avg`` average the scene embeddings that hold an object; ``single`` takes the embedding of
the object shown (or captioned) alone. The bag-of-concepts reference edits with per-value means of
one concept instead: no object, no position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import sparse

from bindscope.core.errors import BindscopeError

BankName = Literal["obj-avg", "pos-avg", "single"]
BANKS: tuple[BankName, ...] = ("obj-avg", "pos-avg", "single")


@dataclass(frozen=True)
class Bank:
    """Vectors ``[P, U, D]`` per (slot position, object id) and the mask ``[P, U]`` of those present."""

    name: str
    vectors: np.ndarray
    present: np.ndarray

    def __post_init__(self) -> None:
        if self.vectors.shape[:2] != self.present.shape:
            raise BindscopeError(
                f"internal: bank {self.name} has vectors {self.vectors.shape} but mask {self.present.shape}"
            )

    @property
    def table(self) -> np.ndarray:
        """The vectors as rows ``[P * U, D]``: row ``p * U + o``."""
        return self.vectors.reshape(-1, self.vectors.shape[-1])

    def rows(self, position: np.ndarray, obj: np.ndarray) -> np.ndarray:
        """Row of ``table`` for each (position, object), -1 where the bank has no vector."""
        u = self.vectors.shape[1]
        row = position.astype(np.int64) * u + obj
        return np.where(self.present[position, obj], row, -1)


def group_means(keys: np.ndarray, y: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the rows of ``y`` per key, and the count per key.

    ``keys`` is ``[N]`` or ``[N, S]``: with several columns a row counts once per column it appears
    in (a scene holding an object in both slots counts twice, as the research code does).
    """
    keys = np.asarray(keys).reshape(len(y), -1)
    rows = np.repeat(np.arange(len(y)), keys.shape[1])
    hits = sparse.csr_matrix((np.ones(keys.size, dtype=np.float64), (keys.ravel(), rows)), shape=(num_keys, len(y)))
    counts = np.asarray(hits.sum(axis=1)).ravel()
    sums = hits @ np.asarray(y, dtype=np.float64)
    means = sums / np.maximum(counts, 1)[:, None]
    return means.astype(np.float32), counts.astype(np.int64)


def obj_avg_bank(ids: np.ndarray, y: np.ndarray, num_objects: int) -> Bank:
    """``obj-avg``: per object, the mean embedding of the scenes that hold it in any slot; the same
    vector at every position."""
    means, counts = group_means(ids, y, num_objects)
    slots = ids.shape[1]
    return Bank(
        "obj-avg", np.broadcast_to(means, (slots, *means.shape)), np.broadcast_to(counts > 0, (slots, num_objects))
    )


def pos_avg_bank(ids: np.ndarray, y: np.ndarray, num_objects: int) -> Bank:
    """``pos-avg``: per (slot, object), the mean embedding of the scenes holding the object in that slot."""
    slots = ids.shape[1]
    keys = ids + num_objects * np.arange(slots)[None, :]
    means, counts = group_means(keys, y, slots * num_objects)
    return Bank("pos-avg", means.reshape(slots, num_objects, -1), (counts > 0).reshape(slots, num_objects))


def single_bank(singles: np.ndarray, num_objects: int, slots: int) -> Bank:
    """``single``: the embeddings of objects alone, rows object-major (row ``o * S + s``).

    ``S`` positions per object: one per slot (single-object images at each slot's position) or a
    single position-free row (captions), which then serves every slot.
    """
    singles = np.asarray(singles, dtype=np.float32)
    if singles.ndim != 2 or len(singles) % num_objects:
        raise BindscopeError(
            f"the single-object bank has {len(singles)} rows, not a whole number per each of the "
            f"{num_objects} objects; embed it with `bindscope embed --single-objects` for this dataset"
        )
    positions = len(singles) // num_objects
    if positions not in (1, slots):
        raise BindscopeError(
            f"the single-object bank has {positions} positions per object but scenes have {slots} slots; "
            "give one row per object (captions) or one per object and slot (images)"
        )
    per_object = singles.reshape(num_objects, positions, -1).transpose(1, 0, 2)
    vectors = np.broadcast_to(per_object, (slots, num_objects, singles.shape[1]))
    return Bank("single", vectors, np.ones((slots, num_objects), dtype=bool))


def concept_value_means(values: np.ndarray, y: np.ndarray, num_values: int) -> tuple[np.ndarray, np.ndarray]:
    """The bag-of-concepts table: per value of one concept, the mean embedding of the scenes holding
    it in any slot (``values`` ``[N, S]``), and which values occur."""
    means, counts = group_means(values, y, num_values)
    return means, counts > 0
