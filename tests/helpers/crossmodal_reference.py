"""The cross-modal algorithms as they were before issue 57, kept as the reference the fast ones must match:
retrieval on whole float32 score rows (``torch.topk``, rows with a near tie scored again in float64 over every key)
and half-truth pairs from the dense images x objects x slots x concepts comparison."""

from __future__ import annotations

import numpy as np
import torch

from bindscope.analyses.crossmodal.retrieval import HitKeys, bag_keys, same_objects
from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, beats, mean_and_count, pairwise_accuracy, row_cosines
from bindscope.analyses.crossmodal.ties import FLOAT32_SLACK, TOP, tie_credit
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.concepts import SceneSet


def unit(x: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.from_numpy(np.ascontiguousarray(x)).to(dtype), dim=1)


def counts(scores: torch.Tensor, hit_scores: torch.Tensor, top: torch.Tensor, widen: float = 0.0):
    """Around each row's best hit: keys above it, keys tied (itself included), hits among them; among the top
    scores ``top``, over the whole row where the tied keys run past them."""
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


def hit_scores(hits: HitKeys, kind: str, scores: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    keys = hits.strict[rows] if kind == "strict" else hits.members[hits.query_bags[rows]]
    cols = torch.from_numpy(keys)
    return scores.gather(1, cols.clamp(min=0)).masked_fill(cols < 0, float("-inf"))


def dense_rank(queries: np.ndarray, keys: np.ndarray, hits: HitKeys) -> dict[str, np.ndarray]:
    """Per ``strict@k`` / ``concept@k``, each query's credit: whole float32 rows, near ties again in float64."""
    scores = unit(queries) @ unit(keys).T
    top = scores.topk(min(max(TOP) + 1, scores.shape[1]), dim=1).values
    rows = np.arange(len(queries))
    found = {k: counts(scores, hit_scores(hits, k, scores, rows), top, FLOAT32_SLACK) for k in ("strict", "concept")}
    near = torch.stack([tied > hit for _, tied, hit in found.values()]).any(dim=0)
    if near.any():
        exact = unit(queries[near.numpy()], torch.float64) @ unit(keys, torch.float64).T
        exact_top = exact.topk(top.shape[1], dim=1).values
        for kind, count in found.items():
            again = counts(exact, hit_scores(hits, kind, exact, rows[near.numpy()]), exact_top)
            for whole, part in zip(count, again):
                whole[near] = part
    return {
        f"{kind}@{k}": tie_credit(count[0], count[1], count[2], k).numpy()
        for kind, count in found.items()
        for k in TOP
        if k <= len(keys)
    }


def dense_retrieve(
    image: np.ndarray, text: np.ndarray, scenes: SceneSet, queries: np.ndarray | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """:func:`dense_rank` image -> text and text -> image, as ``retrieve`` builds the hits."""
    rows = np.arange(len(scenes)) if queries is None else np.asarray(queries, dtype=np.int64)
    bags = bag_keys(scenes)
    other = same_objects(scenes)[rows]
    hits = HitKeys.of(np.stack([rows, np.where(other == rows, -1, other)], axis=1), bags[rows], bags)
    return {
        "image_to_text": dense_rank(image[rows], text, hits),
        "text_to_image": dense_rank(text[rows], image, hits),
    }


def dense_half_truth_pairs(
    scenes: SceneSet, attribute: str, noun: str, rows: np.ndarray | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, (image rows, rows of the wrong longer caption), from the images x objects x slots x concepts cube
    (bindscope's algorithm before issue 57; ``benchmarks/bench_crossmodal.py`` times it): of the images ``rows``
    (default every two-object image of two different objects)."""
    space = scenes.space
    a, n = space.concept_index(attribute), space.concept_index(noun)
    ids = scenes.object_ids().astype(np.int64)
    if rows is None:
        rows = np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))
    values = scenes.scenes[rows].astype(np.int64)
    objects = space.all_objects().astype(np.int64)
    two = np.flatnonzero(scenes.num_objects() == 2)
    lookup = scene_lookup(scenes.subset(two))
    a1, o1 = values[:, 0, a][:, None], values[:, 0, n][:, None]
    a2, o2 = values[:, 1, a][:, None], values[:, 1, n][:, None]
    x, y = objects[None, :, a], objects[None, :, n]
    in_image = (objects[None, :, None] == values[:, None, :, :]).all(axis=3).any(axis=2)
    masks = {
        "wrong_attribute": (y == o2) & (x != a2),
        "wrong_noun": (x == a2) & (y != o2),
        "wrong_object": (x != a1) & (x != a2) & (y != o1) & (y != o2),
    }
    out = {}
    for kind, mask in masks.items():
        r, obj = np.nonzero(mask & ~in_image)
        found = find_scenes(lookup, ids[rows[r], 0] * space.num_objects + obj)
        keep = found >= 0
        out[kind] = (rows[r[keep]], two[found[keep]])
    return out


def dense_half_truth_rates(
    image: np.ndarray,
    text: np.ndarray,
    singles: np.ndarray,
    scenes: SceneSet,
    attribute: str,
    noun: str,
    rows: np.ndarray | None = None,
) -> dict[str, tuple[float, int]]:
    """Per kind, the pooled half-truth rate (ties half) and its pairs, each pair's cosines one by one, of the images
    ``rows`` (:func:`dense_half_truth_pairs`)."""
    ids = scenes.object_ids().astype(np.int64)
    out = {}
    for kind, (img, longer) in dense_half_truth_pairs(scenes, attribute, noun, rows).items():
        short = row_cosines(image, singles, img, ids[img, 0])
        out[kind] = mean_and_count(pairwise_accuracy(row_cosines(image, text, img, longer), short))
    return out
