"""Cross-modal retrieval (docs/method.md §7): image -> text and text -> image, top-1 and top-5.

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

from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, outcome
from bindscope.analyses.scene_index import find_scenes, scene_lookup
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


def tie_credit(scores: torch.Tensor, hit: torch.Tensor, k: int) -> torch.Tensor:
    """Per query row, the chance that a top-``k`` list with ties broken uniformly at random holds a hit.

    Ties are the swap tests' (:func:`~bindscope.analyses.crossmodal.swaps.outcome`), judged against the
    best hit: the keys that beat it are above it; it and the keys tied with it share the places left.
    Top-1: 1 when the best hit beats every other key; ``m / t`` when ``m`` hits tie with ``t - m`` other
    keys (0.5 for the correct caption tied with one swap, as the swap tests count it); 0 when a key
    beats it.
    """
    best = scores.masked_fill(~hit, float("-inf")).amax(dim=1, keepdim=True)
    order = outcome(scores, best)
    above = ((order > 0) & ~hit).sum(dim=1)
    tied = order == 0
    hits, group = (tied & hit).sum(dim=1), tied.sum(dim=1)
    places = (k - above).clamp(min=0)
    miss = torch.ones(len(scores), dtype=torch.float64, device=scores.device)
    for i in range(k):  # the chance that the first ``places`` of the tied keys are all misses
        draw = (group - hits - i).clamp(min=0).double() / (group - i).clamp(min=1)
        miss = torch.where(places > i, miss * draw, miss)
    return torch.where(places > 0, 1.0 - miss, torch.zeros_like(miss))


def near_ties(scores: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """Per query row: does a key other than a hit lie within the tie tolerance plus float32's slack of
    the best hit (so that float32 may rank them otherwise than float64)?"""
    best = scores.masked_fill(~hit, float("-inf")).amax(dim=1, keepdim=True)
    return (~hit & ((scores - best).abs() <= TIE_TOLERANCE + FLOAT32_SLACK)).any(dim=1)


@dataclass(frozen=True)
class HitKeys:
    """What a query counts as a hit: ``strict`` key rows ``[Q, 2]`` (its own and its other order, -1
    where absent) and the bag ids of the queries ``[Q]`` and of the keys ``[N]``."""

    strict: np.ndarray
    query_bags: np.ndarray
    key_bags: np.ndarray

    def masks(self, start: int, stop: int, device: torch.device) -> dict[str, torch.Tensor]:
        """``{"strict": bool [q, N], "concept": bool [q, N]}`` for queries ``start:stop``."""
        rows = torch.from_numpy(self.strict[start:stop]).to(device)
        strict = torch.zeros((stop - start, len(self.key_bags) + 1), dtype=torch.bool, device=device)
        strict.scatter_(1, torch.where(rows >= 0, rows, len(self.key_bags)), True)  # -1: a spare column
        bags = torch.from_numpy(self.key_bags).to(device)
        concept = bags[None, :] == torch.from_numpy(self.query_bags[start:stop]).to(device)[:, None]
        return {"strict": strict[:, :-1], "concept": concept}


@dataclass(frozen=True)
class Ranked:
    """Per query: ``top``, the key of highest cosine (the lowest index among equals); ``credit``, per
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
    (``tick()`` after each); queries with a near tie at their best hit are scored again in float64."""
    q32, k32 = unit_rows(queries, device), unit_rows(keys, device)
    k64: torch.Tensor | None = None
    tops = [k for k in TOP if k <= len(keys)]
    top = np.empty(len(queries), dtype=np.int64)
    credit = {f"{kind}@{k}": np.empty(len(queries)) for kind in ("strict", "concept") for k in tops}
    for s in range(0, len(queries), CHUNK):
        e = min(s + CHUNK, len(queries))
        scores = q32[s:e] @ k32.T
        top[s:e] = scores.argmax(dim=1).cpu().numpy()
        masks = hits.masks(s, e, scores.device)
        near = torch.stack([near_ties(scores, m) for m in masks.values()]).any(dim=0)
        if near.any():
            k64 = unit_rows(keys, device, torch.float64) if k64 is None else k64
            exact = unit_rows(queries[s:e][near.cpu().numpy()], device, torch.float64) @ k64.T
        for kind, mask in masks.items():
            for k in tops:
                got = tie_credit(scores, mask, k)
                if near.any():
                    got[near] = tie_credit(exact, mask[near], k)
                credit[f"{kind}@{k}"][s:e] = got.cpu().numpy()
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
    hits = HitKeys(np.stack([rows, same_objects(scenes)[rows]], axis=1), bags[rows], bags)
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
