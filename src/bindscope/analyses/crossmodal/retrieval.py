"""Cross-modal retrieval (docs/method.md §7): image -> text and text -> image, top-1 and top-5.

A retrieved caption (or image) is a *strict* hit when it is the scene's own or names the same objects
in the other mention order, and a *concept-level* hit when it holds the same multiset of values of
every concept: what a bag of concepts gets right. Scores are cosines, computed in chunks of queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

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


def unit_rows(x: np.ndarray, device: str = "cpu") -> torch.Tensor:
    """Rows scaled to unit norm, float32 (zero rows stay zero), on ``device``."""
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    return torch.nn.functional.normalize(t, dim=1)


#: Queries per matrix product: memory stays at ``CHUNK x keys`` scores (1.3 GB for 160,000 keys).
CHUNK = 2048


def chunks(queries: int) -> int:
    """How many chunks :func:`retrieve` scores for ``queries`` scenes (both directions)."""
    return 2 * math.ceil(queries / CHUNK)


def top_k(queries: torch.Tensor, keys: torch.Tensor, k: int, tick: Callable[[], object] | None = None) -> np.ndarray:
    """Indices ``[Q, k]`` of the ``k`` keys of highest cosine with each (unit) query, best first.

    One matrix product per chunk of queries; ``tick()`` after each.
    """
    out = np.empty((len(queries), min(k, len(keys))), dtype=np.int64)
    for s in range(0, len(queries), CHUNK):
        out[s : s + CHUNK] = torch.topk(queries[s : s + CHUNK] @ keys.T, out.shape[1], dim=1).indices.cpu().numpy()
        if tick is not None:
            tick()
    return out


def retrieval_hits(
    found: dict[str, np.ndarray], scenes: SceneSet, queries: np.ndarray | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """Per direction, query and top-k: strict and concept-level hits ``{direction: {"strict@k": bool [Q]}}``.

    ``found``: per direction the retrieved scene rows ``[Q, k]`` (:func:`retrieve`); query row i is scene
    ``queries[i]`` of ``scenes`` (default: scene i). The scenes' keys are computed once for all directions.
    """
    rows = np.arange(len(scenes)) if queries is None else np.asarray(queries)
    other = same_objects(scenes)[rows]
    bags = bag_keys(scenes)
    out: dict[str, dict[str, np.ndarray]] = {}
    for direction, retrieved in found.items():
        strict = (retrieved == rows[:, None]) | (retrieved == other[:, None])
        concept = bags[retrieved] == bags[rows][:, None]
        hits = out.setdefault(direction, {})
        for k in TOP:
            if k <= retrieved.shape[1]:
                hits[f"strict@{k}"] = strict[:, :k].any(axis=1)
                hits[f"concept@{k}"] = concept[:, :k].any(axis=1)
    return out


def retrieve(
    image: np.ndarray,
    text: np.ndarray,
    tick: Callable[[], object] | None = None,
    device: str = "cpu",
    queries: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The top-5 captions of each image and the top-5 images of each caption among all of them (rows:
    scenes); only the rows ``queries`` ask when given."""
    i, t = unit_rows(image, device), unit_rows(text, device)
    k = max(TOP)
    if queries is None:
        return {"image_to_text": top_k(i, t, k, tick), "text_to_image": top_k(t, i, k, tick)}
    q = torch.from_numpy(np.asarray(queries, dtype=np.int64)).to(i.device)
    return {"image_to_text": top_k(i[q], t, k, tick), "text_to_image": top_k(t[q], i, k, tick)}


def retrieval(image: np.ndarray, text: np.ndarray, scenes: SceneSet) -> dict[str, dict[str, float]]:
    """Strict and concept-level top-1 / top-5 accuracy, image -> text and text -> image."""
    return {
        direction: {m: float(h.mean()) for m, h in hits.items()}
        for direction, hits in retrieval_hits(retrieve(image, text), scenes).items()
    }
