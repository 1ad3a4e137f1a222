"""Swap tests (docs/method/07-crossmodal.md): does an image prefer its own caption to a swapped one?

For each 2-object scene with two distinct objects, the image embedding is compared by cosine with
its correct caption and with the captions of the attribute swap (a2 o1 / a1 o2), the noun swap
(a1 o2 / a2 o1), a relation or count space's family swap (subject and object exchanged, the relation
kept; the counts exchanged: :func:`~bindscope.space.captions.family_swap`) and the same scene named in
the other mention order (also correct). Captions of other scenes are rows of the text embeddings
(every swap of an enumerated preset is itself a scene); a scene whose needed caption is not in the
dataset is skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.captions import attribute_swap, family_swap, object_swap, reverse_order
from bindscope.space.concepts import SceneSet

#: Cosines closer than this are a tie: the same vector summed in another order differs in its last bits.
TIE_TOLERANCE = 1e-6
NO_NEGATIVE = "no true negative"
NOT_IN_DATASET = "caption not in the dataset"
#: The swaps whose negative is a true one, scored as ``swap_<name>`` (a family swap only in its family's space).
NEGATIVES = ("attribute", "noun", "relation", "count")


def beats(score: Any, other: Any, tolerance: float = TIE_TOLERANCE) -> Any:
    """Where ``score`` beats ``other`` by more than ``tolerance`` (a smaller difference is a tie).

    The one tie rule of the swap tests, half-truths and retrieval; numpy arrays or torch tensors.
    """
    return score - other > tolerance


def outcome(score: Any, other: Any, tolerance: float = TIE_TOLERANCE) -> Any:
    """+1 where ``score`` beats ``other`` (:func:`beats`), -1 where it loses, 0 on a tie."""
    return beats(score, other, tolerance) * 1 - beats(other, score, tolerance) * 1


def pairwise_accuracy(correct: np.ndarray, negative: np.ndarray, tolerance: float = TIE_TOLERANCE) -> np.ndarray:
    """Per pair: 1 where the correct score is higher, 0.5 on a tie (within ``tolerance``), 0 where lower."""
    wins = outcome(np.asarray(correct, dtype=np.float64), np.asarray(negative, dtype=np.float64), tolerance)
    return 0.5 * (wins + 1.0)


def mean_and_count(values: np.ndarray) -> tuple[float, int]:
    """The mean of per-pair scores (NaN when there are none) and their number."""
    return (float(np.mean(values)) if len(values) else float("nan")), int(len(values))


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
    """The scenes tested and, per swap, the row of its caption (-1 where there is none), and per swap
    why scenes have none: the swap names the same objects (no true negative) or is not in the dataset."""

    scene: np.ndarray
    negative: dict[str, np.ndarray]
    skipped: dict[str, dict[str, int]]

    def restrict(self, keep: np.ndarray) -> SwapCases:
        """The cases where ``keep`` (skip counts stay those of the whole set)."""
        return SwapCases(self.scene[keep], {k: v[keep] for k, v in self.negative.items()}, self.skipped)


def swap_cases(scenes: SceneSet, noun: str) -> SwapCases:
    """Scenes with two distinct objects, and the caption row of each swap of them (the attribute and noun
    swaps, a relation or count space's family swap, and the other mention order)."""
    ids = scenes.object_ids()
    two = (scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1])
    rows = np.flatnonzero(two)
    pairs = scenes.subset(rows)
    lookup = scene_lookup(pairs)
    u = scenes.space.num_objects
    negative: dict[str, np.ndarray] = {}
    skipped: dict[str, dict[str, int]] = {}
    swaps = [("attribute", attribute_swap(pairs, noun)), ("noun", object_swap(pairs, noun))]
    family = family_swap(pairs)
    swaps += [family] if family is not None else []
    for name, (swapped, valid) in (*swaps, ("order", (reverse_order(pairs), np.ones(len(rows), bool)))):
        sid = swapped.object_ids().astype(np.int64)
        if name != "order":  # a true negative names other objects, not the same ones in the other order
            valid = valid & (np.sort(sid, axis=1) != np.sort(ids[rows], axis=1)).any(axis=1)
        found = find_scenes(lookup, sid[:, 0] * u + sid[:, 1])
        negative[name] = np.where(valid & (found >= 0), rows[np.maximum(found, 0)], -1)
        why = {NO_NEGATIVE: int((~valid).sum()), NOT_IN_DATASET: int((valid & (found < 0)).sum())}
        skipped[name] = {reason: n for reason, n in why.items() if n}
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


def swap_wins(scores: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per scene with the swap: 1 / 0.5 / 0 as the correct caption beats / ties / loses to the attribute
    and noun swaps (and a family swap, where scored); and, for order sensitivity, as the correct caption in
    the other order loses to / ties / beats the attribute swap."""
    out = {}
    for name in (n for n in NEGATIVES if n in scores):
        ok = ~np.isnan(scores[name])
        out[name] = pairwise_accuracy(scores["correct"][ok], scores[name][ok])
    ok = ~np.isnan(scores["order"]) & ~np.isnan(scores["attribute"])
    out["order_sensitivity"] = pairwise_accuracy(scores["attribute"][ok], scores["order"][ok])
    return out


def swap_accuracy(scores: dict[str, np.ndarray]) -> dict[str, float]:
    """The mean of :func:`swap_wins` (NaN where no scene has the swap)."""
    return {name: mean_and_count(w)[0] for name, w in swap_wins(scores).items()}
