"""Cross-modal retrieval (docs/method/07-crossmodal.md): image -> text and text -> image, top-1 and top-5.

A retrieved caption (or image) is a *strict* hit when it is the scene's own or names the same objects
in the other mention order, and a *concept-level* hit when it holds the same multiset of values of
every concept: what a bag of concepts gets right. Scores are cosines, computed in chunks of queries.
Ties follow the swap tests' rule: a hit tied with other keys counts the chance that a random order of
the tied keys puts it in the top k (a tie with one swap caption at top-1: half).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, beats
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.captions import reverse_order
from bindscope.space.concepts import SceneSet

TOP = (1, 5)


def bag_keys(scenes: SceneSet) -> np.ndarray:
    """Per scene, an id of its multiset of concept values (equal ids: the same bag of concepts)."""
    values = np.sort(scenes.scenes, axis=1)  # per concept, the values over slots, sorted
    flat = values.reshape(len(scenes), -1)
    _, ids = np.unique(flat, axis=0, return_inverse=True)
    return ids.ravel()


def same_objects(scenes: SceneSet) -> np.ndarray:
    """Per scene, the row naming the same objects in the other order (itself for symmetric scenes, -1 if absent)."""
    u = scenes.space.num_objects
    ids = reverse_order(scenes).object_ids().astype(np.int64)
    return find_scenes(scene_lookup(scenes), ids[:, 0] * u + ids[:, 1])


def bag_strict_ceiling(scenes: SceneSet) -> float:
    """Strict top-1 accuracy of a perfect bag of concepts: it ranks every caption of the scene's bag
    equal, so on average it picks one naming the scene's objects (itself or its other order) with
    probability (1 or 2) / the bag's size."""
    bags = bag_keys(scenes)
    return float(np.mean(strict_counts(scenes) / np.bincount(bags)[bags]))


def strict_counts(scenes: SceneSet) -> np.ndarray:
    """Per scene, how many captions are strict hits: its own, and its other order where that differs."""
    other = same_objects(scenes)
    return 1 + ((other >= 0) & (other != np.arange(len(scenes))))


def retrieval_chance(scenes: SceneSet) -> dict[str, float]:
    """Top-1 accuracy of a uniformly random pick: strict and concept-level."""
    n = len(scenes)
    bags = bag_keys(scenes)
    return {
        "strict@1": float(strict_counts(scenes).mean() / n),
        "concept@1": float(np.bincount(bags)[bags].mean() / n),
    }


def unit_rows(x: np.ndarray, device: str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Rows scaled to unit norm in ``dtype`` (zero rows stay zero), on ``device``."""
    t = torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dtype)
    return torch.nn.functional.normalize(t, dim=1)


#: Queries per matrix product: memory stays at ``CHUNK x keys`` scores (1.3 GB for 160,000 keys).
CHUNK = 2048
#: A bound on how far a float32 cosine of unit rows lies from the float64 one: a query with another key
#: this close (plus the tie tolerance) to its best hit is scored again in float64, so that the tie rule
#: sees the cosines the swap tests see.
FLOAT32_SLACK = 1e-4


def chunks(queries: int) -> int:
    """How many chunks :func:`retrieve` scores for ``queries`` scenes (both directions)."""
    return 2 * math.ceil(queries / CHUNK)


def tie_counts(
    scores: torch.Tensor, hit_scores: torch.Tensor, top: torch.Tensor, widen: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per query row, around its best hit (the largest of ``hit_scores``, -inf where no hit): the keys
    that beat it, the keys tied with it (itself included) and the hits among those, by the swap tests'
    rule (:func:`~bindscope.analyses.crossmodal.swaps.beats`) with the tolerance widened by ``widen``.

    Counted among ``top``, the top ``max(TOP) + 1`` scores of each row, best first (``max(TOP)`` keys
    above need no more count: no hit makes the top k); a row whose tied keys run past them is counted
    over all its keys.
    """
    best = hit_scores.amax(dim=1, keepdim=True)
    tolerance = TIE_TOLERANCE + widen
    above = beats(top, best, tolerance).count_nonzero(dim=1)
    tied = (~beats(best, top, tolerance)).count_nonzero(dim=1) - above
    deeper = torch.nonzero(~beats(best[:, 0], top[:, -1], tolerance) & (above < max(TOP))).ravel()
    if len(deeper):
        rows, level = scores[deeper], best[deeper]
        above[deeper] = beats(rows, level, tolerance).count_nonzero(dim=1)
        tied[deeper] = (~beats(level, rows, tolerance)).count_nonzero(dim=1) - above[deeper]
    return above, tied, (~beats(best, hit_scores, tolerance)).count_nonzero(dim=1)


def top_scores(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``max(TOP) + 1`` highest scores of each row, best first, and their keys."""
    found = scores.topk(min(max(TOP) + 1, scores.shape[1]), dim=1)
    return found.values, found.indices


def tie_credit(above: torch.Tensor, tied: torch.Tensor, hits: torch.Tensor, k: int) -> torch.Tensor:
    """Per query row, the chance that a top-``k`` list with ties broken uniformly at random holds a hit
    (:func:`tie_counts`: the keys above the best hit go first; it and the keys tied with it share the
    places left). Top-1: 1 when the best hit beats every other key; ``m / t`` when ``m`` hits tie with
    ``t - m`` other keys (0.5 for the correct caption tied with one swap, as the swap tests count it);
    0 when a key beats it.
    """
    places = (k - above).clamp(min=0)
    miss = torch.ones(len(above), dtype=torch.float64, device=above.device)
    for i in range(k):  # the chance that the first ``places`` of the tied keys are all misses
        draw = (tied - hits - i).clamp(min=0).double() / (tied - i).clamp(min=1)
        miss = torch.where(places > i, miss * draw, miss)
    return torch.where(places > 0, 1.0 - miss, torch.zeros_like(miss))


@dataclass(frozen=True)
class HitKeys:
    """What a query counts as a hit, as key rows padded with -1: ``strict`` ``[Q, 2]`` (its own and its
    other order, -1 where absent or the same); ``members`` ``[B, M]``, the keys of each bag, and
    ``query_bags`` ``[Q]`` (``concept``)."""

    strict: np.ndarray
    query_bags: np.ndarray
    members: np.ndarray

    @classmethod
    def of(cls, strict: np.ndarray, query_bags: np.ndarray, key_bags: np.ndarray) -> HitKeys:
        """From the bag id of every key: each bag's keys, in one padded table."""
        order = np.argsort(key_bags, kind="stable")
        sizes = np.bincount(key_bags)
        members = np.full((len(sizes), int(sizes.max(initial=1))), -1, dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        members[key_bags[order], np.arange(len(order)) - start[key_bags[order]]] = order
        return cls(strict, query_bags, members)

    def hit_scores(self, kind: str, scores: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """The scores of the hits of queries ``rows`` (score rows ``[q, N]``), -inf where padded."""
        keys = self.strict[rows] if kind == "strict" else self.members[self.query_bags[rows]]
        cols = torch.from_numpy(keys).to(scores.device)
        return scores.gather(1, cols.clamp(min=0)).masked_fill(cols < 0, float("-inf"))


KINDS = ("strict", "concept")


@dataclass(frozen=True)
class Ranked:
    """Per query: ``top``, a key of highest float32 cosine (one of them on a tie); ``credit``, per
    ``strict@k`` / ``concept@k``, the chance of a hit in the top ``k`` with ties broken at random."""

    top: np.ndarray
    credit: dict[str, np.ndarray]


def rank(
    queries: np.ndarray,
    keys: np.ndarray,
    hits: HitKeys,
    tick: Callable[[], object] | None = None,
    device: str = "cpu",
) -> Ranked:
    """Rank every key for each query by cosine, one float32 matrix product per chunk of queries
    (``tick()`` after each); a query with a key other than a hit within the tolerance plus
    :data:`FLOAT32_SLACK` of its best hit is counted again on float64 cosines."""
    q32, k32 = unit_rows(queries, device), unit_rows(keys, device)
    k64: torch.Tensor | None = None
    tops = [k for k in TOP if k <= len(keys)]
    top = np.empty(len(queries), dtype=np.int64)
    credit = {f"{kind}@{k}": np.empty(len(queries)) for kind in KINDS for k in tops}
    for s in range(0, len(queries), CHUNK):
        rows = np.arange(s, min(s + CHUNK, len(queries)))
        scores = q32[rows] @ k32.T
        values, index = top_scores(scores)
        top[rows] = index[:, 0].cpu().numpy()
        counts = {
            kind: tie_counts(scores, hits.hit_scores(kind, scores, rows), values, FLOAT32_SLACK) for kind in KINDS
        }
        near = torch.stack([tied > hit for _, tied, hit in counts.values()]).any(dim=0).cpu().numpy()
        if near.any():
            k64 = unit_rows(keys, device, torch.float64) if k64 is None else k64
            exact = unit_rows(queries[rows[near]], device, torch.float64) @ k64.T
            where, exact_top = torch.from_numpy(near).to(scores.device), top_scores(exact)[0]
            for kind, count in counts.items():
                again = tie_counts(exact, hits.hit_scores(kind, exact, rows[near]), exact_top)
                for whole, part in zip(count, again):
                    whole[where] = part
        for kind, (above, tied, hit) in counts.items():
            for k in tops:
                credit[f"{kind}@{k}"][rows] = tie_credit(above, tied, hit, k).cpu().numpy()
        if tick is not None:
            tick()
    return Ranked(top, credit)


def retrieve(
    image: np.ndarray,
    text: np.ndarray,
    scenes: SceneSet,
    tick: Callable[[], object] | None = None,
    device: str = "cpu",
    queries: np.ndarray | None = None,
) -> dict[str, Ranked]:
    """Every caption ranked for each image and every image for each caption (rows: ``scenes``); only
    the rows ``queries`` ask when given."""
    rows = np.arange(len(scenes)) if queries is None else np.asarray(queries, dtype=np.int64)
    bags = bag_keys(scenes)
    other = same_objects(scenes)[rows]
    hits = HitKeys.of(np.stack([rows, np.where(other == rows, -1, other)], axis=1), bags[rows], bags)
    return {
        "image_to_text": rank(image[rows], text, hits, tick, device),
        "text_to_image": rank(text[rows], image, hits, tick, device),
    }


def retrieval(image: np.ndarray, text: np.ndarray, scenes: SceneSet) -> dict[str, dict[str, float]]:
    """Strict and concept-level top-1 / top-5 accuracy, image -> text and text -> image (ties: see
    :func:`tie_credit`)."""
    return {
        direction: {m: float(c.mean()) for m, c in ranked.credit.items()}
        for direction, ranked in retrieve(image, text, scenes).items()
    }
