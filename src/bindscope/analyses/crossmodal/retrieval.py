"""Cross-modal retrieval (docs/method/07-crossmodal.md): image -> text and text -> image, top-1 and top-5.

A retrieved caption (or image) is a *strict* hit when it is the scene's own or names the same objects
in the other mention order, and a *concept-level* hit when it holds the same multiset of values of
every concept: what a bag of concepts gets right. Scores are cosines: float32 products in blocks of bounded
memory keep each query's best keys (:mod:`~bindscope.analyses.crossmodal.scan`), and the tie rule reads them
(:mod:`~bindscope.analyses.crossmodal.ties`): a hit tied with other keys counts the chance that a random order of
the tied keys puts it in the top k (a tie with one swap caption at top-1: half).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.crossmodal.scan import BLOCK_BYTES, CHUNK, Candidates, blocks, scan, scan_both
from bindscope.analyses.crossmodal.ties import KINDS, RULE, TOP, Exact, judge, tie_credits
from bindscope.core.threads import threads_for
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.captions import reverse_order
from bindscope.space.concepts import SceneSet


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


DIRECTIONS = ("image_to_text", "text_to_image")


def chunks(queries: int) -> int:
    """How many progress ticks :func:`retrieve` gives for ``queries`` scenes: one per chunk of queries and direction."""
    return 2 * math.ceil(queries / CHUNK)


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

    def columns(self, device: str | torch.device = "cpu") -> torch.Tensor:
        """Every query's hit keys ``[Q, 2 + M]``: the strict ones, then its bag's
        (:data:`~bindscope.analyses.crossmodal.ties.SPANS`); -1 where padded."""
        cols = np.concatenate([self.strict, self.members[self.query_bags]], axis=1).astype(np.int64)
        return torch.from_numpy(cols).to(device)


@dataclass(frozen=True)
class Ranked:
    """Per query: ``top``, a key of highest float32 cosine (the lowest such key among its best on a tie);
    ``credit``, per ``strict@k`` / ``concept@k``, the chance of a hit in the top ``k`` with ties broken at random."""

    top: np.ndarray
    credit: dict[str, np.ndarray]


def raw_rows(x: np.ndarray, device: str) -> torch.Tensor:
    """``x`` as a tensor on ``device`` (no copy on the CPU)."""
    return torch.from_numpy(np.ascontiguousarray(x)).to(device)


def unit32(raw: torch.Tensor) -> torch.Tensor:
    """Raw rows scaled to unit norm in float32 (zero rows stay zero)."""
    return torch.nn.functional.normalize(raw.to(torch.float32), dim=1)


#: A direction's candidates, raw queries and raw keys.
Side = tuple[Candidates, torch.Tensor, torch.Tensor]


def credits(sides: list[Side], cols: torch.Tensor, budget: int) -> list[Ranked]:
    """Per side (the hit keys ``cols`` of every side's queries), the top key and the top-k credits of each query;
    the sides judged together (:func:`~bindscope.analyses.crossmodal.ties.judge`), :data:`CHUNK` queries at a
    time."""
    size = len(sides[0][2])
    tops = tuple(k for k in TOP if k <= size)
    credit = [{f"{kind}@{k}": np.empty(len(cols)) for kind in KINDS for k in tops} for _ in sides]
    for rows in blocks(len(cols), CHUNK):
        found = Candidates.stacked([side.rows(rows) for side, _, _ in sides], size)
        mine = torch.cat([torch.where(cols[rows] >= 0, cols[rows] + i * size, -1) for i in range(len(sides))])
        queries = torch.cat([queries[rows] for _, queries, _ in sides])
        counts = judge(found, mine, Exact(queries, tuple(keys for _, _, keys in sides), budget))
        value = torch.stack(list(tie_credits(*counts, tops).values())).cpu().numpy()  # [k, kind, side x query]
        for i, part in enumerate(np.split(value, len(sides), axis=-1)):
            for a, k in enumerate(tops):
                for j, kind in enumerate(KINDS):
                    credit[i][f"{kind}@{k}"][rows] = part[a, j]
    return [Ranked(side.top().cpu().numpy(), c) for (side, _, _), c in zip(sides, credit)]


def rank(
    queries: np.ndarray,
    keys: np.ndarray,
    hits: HitKeys,
    tick: Callable[[], object] | None = None,
    device: str = "cpu",
    budget: int = BLOCK_BYTES,
) -> Ranked:
    """Rank every key for each query by cosine: float32 products in blocks of at most ``budget`` bytes
    (:func:`~bindscope.analyses.crossmodal.scan.scan`, ``tick()`` after each chunk of queries), then the tie
    rule (:func:`judge`)."""
    q, k = raw_rows(queries, device), raw_rows(keys, device)
    cols = hits.columns(device)
    with threads_for(len(queries) * len(keys) * queries.shape[1]):
        found = scan(unit32(q), unit32(k), cols, RULE, tick, budget)
        return credits([(found, q, k)], cols, budget)[0]


def retrieve(
    image: np.ndarray,
    text: np.ndarray,
    scenes: SceneSet,
    tick: Callable[[], object] | None = None,
    device: str = "cpu",
    queries: np.ndarray | None = None,
    budget: int = BLOCK_BYTES,
) -> dict[str, Ranked]:
    """Every caption ranked for each image and every image for each caption (rows: ``scenes``); only
    the rows ``queries`` ask when given. When every scene asks, one product per block serves both directions
    (:func:`~bindscope.analyses.crossmodal.scan.scan_both`)."""
    rows = np.arange(len(scenes)) if queries is None else np.asarray(queries, dtype=np.int64)
    bags = bag_keys(scenes)
    other = same_objects(scenes)[rows]
    hits = HitKeys.of(np.stack([rows, np.where(other == rows, -1, other)], axis=1), bags[rows], bags)
    x, y = raw_rows(image, device), raw_rows(text, device)
    cols = hits.columns(device)
    with threads_for(2 * len(rows) * len(y) * x.shape[1]):
        if queries is None:
            to_text, to_image = scan_both(unit32(x), unit32(y), cols, RULE, tick, budget)
            sides = [(to_text, x, y), (to_image, y, x)]
        else:
            asked = torch.from_numpy(rows).to(x.device)
            q, p = x.index_select(0, asked), y.index_select(0, asked)
            to_text = scan(unit32(q), unit32(y), cols, RULE, tick, budget)
            sides = [(to_text, q, y), (scan(unit32(p), unit32(x), cols, RULE, tick, budget), p, x)]
        return dict(zip(DIRECTIONS, credits(sides, cols, budget)))


def retrieval(image: np.ndarray, text: np.ndarray, scenes: SceneSet) -> dict[str, dict[str, float]]:
    """Strict and concept-level top-1 / top-5 accuracy, image -> text and text -> image (ties: see
    :func:`tie_credit`)."""
    return {
        direction: {m: float(c.mean()) for m, c in ranked.credit.items()}
        for direction, ranked in retrieve(image, text, scenes).items()
    }
