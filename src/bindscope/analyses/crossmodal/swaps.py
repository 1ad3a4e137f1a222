"""Swap tests (docs/method.md §7): does an image prefer its own caption to a swapped one?

For each 2-object scene with two distinct objects, the image embedding is compared by cosine with
its correct caption and with the captions of the attribute swap (a2 o1 / a1 o2), the noun swap
(a1 o2 / a2 o1) and the same scene named in the other mention order (also correct). Captions of
other scenes are rows of the text embeddings (every swap of an enumerated preset is itself a scene);
a scene whose needed caption is not in the dataset is skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bindscope.analyses.intervene.edits import find_scenes, scene_lookup
from bindscope.space.captions import attribute_swap, object_swap, reverse_order
from bindscope.space.concepts import SceneSet

SWAPS = ("attribute", "noun", "order")


def pairwise_accuracy(correct: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Per pair: 1 where the correct score is higher, 0.5 on a tie, 0 where it is lower."""
    return np.where(correct > negative, 1.0, np.where(correct == negative, 0.5, 0.0))


def row_cosines(a: np.ndarray, b: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """``cos(a[rows_a[i]], b[rows_b[i]])`` for every i, in chunks (float64 accumulation)."""
    out = np.empty(len(rows_a), dtype=np.float64)
    for s in range(0, len(rows_a), chunk):
        x = a[rows_a[s : s + chunk]].astype(np.float64)
        y = b[rows_b[s : s + chunk]].astype(np.float64)
        den = np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1), 1e-300)
        out[s : s + chunk] = np.einsum("ij,ij->i", x, y) / den
    return out


@dataclass(frozen=True)
class SwapCases:
    """The scenes tested and, per swap, the row of its caption (-1 where not in the dataset)."""

    scene: np.ndarray
    negative: dict[str, np.ndarray]
    skipped: dict[str, int]


def swap_cases(scenes: SceneSet, noun: str) -> SwapCases:
    """Scenes with two distinct objects, and the caption row of each swap of them."""
    ids = scenes.object_ids()
    two = (scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1])
    rows = np.flatnonzero(two)
    lookup = scene_lookup(scenes.subset(rows))
    u = scenes.space.num_objects
    negative: dict[str, np.ndarray] = {}
    skipped: dict[str, int] = {}
    for name, (swapped, valid) in (
        ("attribute", attribute_swap(scenes.subset(rows), noun)),
        ("noun", object_swap(scenes.subset(rows), noun)),
        ("order", (reverse_order(scenes.subset(rows)), np.ones(len(rows), bool))),
    ):
        sid = swapped.object_ids().astype(np.int64)
        if name != "order":  # a true negative names other objects, not the same ones in the other order
            valid = valid & (np.sort(sid, axis=1) != np.sort(ids[rows], axis=1)).any(axis=1)
        found = find_scenes(lookup, sid[:, 0] * u + sid[:, 1])
        found = np.where(valid & (found >= 0), rows[np.maximum(found, 0)], -1)
        negative[name] = found
        skipped[name] = int((found < 0).sum())
    return SwapCases(rows, negative, skipped)


def swap_scores(image: np.ndarray, text: np.ndarray, cases: SwapCases) -> dict[str, np.ndarray]:
    """Per case: the cosine of the image with its caption and with each swap's caption (NaN where absent)."""
    out = {"correct": row_cosines(image, text, cases.scene, cases.scene)}
    for name, rows in cases.negative.items():
        score = np.full(len(cases.scene), np.nan)
        ok = rows >= 0
        score[ok] = row_cosines(image, text, cases.scene[ok], rows[ok])
        out[name] = score
    return out


def swap_accuracy(scores: dict[str, np.ndarray]) -> dict[str, float]:
    """Pairwise accuracy of the correct caption against the attribute and noun swaps (ties half), and
    order sensitivity: how often the correct caption in the other order loses to the attribute swap."""
    out = {}
    for name in ("attribute", "noun"):
        ok = ~np.isnan(scores[name])
        out[name] = (
            float(pairwise_accuracy(scores["correct"][ok], scores[name][ok]).mean()) if ok.any() else float("nan")
        )
    ok = ~np.isnan(scores["order"]) & ~np.isnan(scores["attribute"])
    loses = pairwise_accuracy(scores["attribute"][ok], scores["order"][ok])
    out["order_sensitivity"] = float(loses.mean()) if ok.any() else float("nan")
    return out
