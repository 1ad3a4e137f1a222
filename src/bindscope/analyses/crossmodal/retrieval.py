"""Cross-modal retrieval (docs/method.md §7): image -> text and text -> image, top-1 and top-5.

A retrieved caption (or image) is a *strict* hit when it is the scene's own or names the same objects
in the other mention order, and a *concept-level* hit when it holds the same multiset of values of
every concept: what a bag of concepts gets right. Scores are cosines, computed in chunks of queries.
"""

from __future__ import annotations

import numpy as np
import torch

from bindscope.analyses.intervene.edits import find_scenes, scene_lookup
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


def top_k(queries: np.ndarray, keys: np.ndarray, k: int, chunk: int = 4096) -> np.ndarray:
    """Indices ``[Q, k]`` of the ``k`` keys of highest cosine with each query, best first."""
    q = torch.nn.functional.normalize(torch.from_numpy(np.asarray(queries, dtype=np.float32)), dim=1)
    t = torch.nn.functional.normalize(torch.from_numpy(np.asarray(keys, dtype=np.float32)), dim=1)
    out = np.empty((len(q), min(k, len(t))), dtype=np.int64)
    for s in range(0, len(q), chunk):
        out[s : s + chunk] = torch.topk(q[s : s + chunk] @ t.T, out.shape[1], dim=1).indices.numpy()
    return out


def retrieval_hits(retrieved: np.ndarray, scenes: SceneSet) -> dict[str, np.ndarray]:
    """Per query row i (scene i) and top-k: strict and concept-level hits ``{"strict@k": bool [Q]}``."""
    other = same_objects(scenes)
    bags = bag_keys(scenes)
    rows = np.arange(len(scenes))[:, None]
    strict = (retrieved == rows) | (retrieved == other[:, None])
    concept = bags[retrieved] == bags[:, None]
    out = {}
    for k in TOP:
        if k <= retrieved.shape[1]:
            out[f"strict@{k}"] = strict[:, :k].any(axis=1)
            out[f"concept@{k}"] = concept[:, :k].any(axis=1)
    return out


def retrieval(image: np.ndarray, text: np.ndarray, scenes: SceneSet) -> dict[str, dict[str, float]]:
    """Strict and concept-level top-1 / top-5 accuracy, image -> text and text -> image."""
    k = max(TOP)
    out = {}
    for name, (q, t) in {"image_to_text": (image, text), "text_to_image": (text, image)}.items():
        hits = retrieval_hits(top_k(q, t, k), scenes)
        out[name] = {m: float(h.mean()) for m, h in hits.items()}
    return out
