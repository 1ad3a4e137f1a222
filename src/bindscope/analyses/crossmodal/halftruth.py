"""Half-truths (docs/method/07-crossmodal.md): does a correct caption gain similarity when a wrong detail is added?

For each 2-object image (a1 o1, a2 o2) the one-object caption of its first object, "a a1 o1" (the
single-object caption bank), is compared with the scene captions "a a1 o1 and a x y" for every object
(x, y) that is not in the image, by kind: a wrong attribute on the right noun (y = o2), the right
attribute on a wrong noun (x = a2), and an entirely wrong object (x, y outside the image's values).
The half-truth rate is how often the longer, wrong caption scores higher, pooled over every pair and
per scene (the mean over images of each image's rate; images differ in their number of pairs). Also:
how often the correct full caption beats the correct short one (a good model prefers it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.crossmodal.swaps import mean_and_count, pairwise_accuracy, row_cosines
from bindscope.core.errors import BindscopeError
from bindscope.core.threads import threads_for
from bindscope.estimators.scene_index import scene_lookup
from bindscope.space.concepts import SceneSet

KINDS = ("wrong_attribute", "wrong_noun", "wrong_object")
#: The table's variant of each half-truth rate: pooled over pairs (cases: pairs), per scene (cases: images).
HALF_VARIANTS = {"pooled": "half_truth", "per_scene": "half_truth_per_scene"}
#: Bytes one block of images may take while its pairs are found and scored (about 24 per image and object).
BLOCK_BYTES = 8 * 2**20


@dataclass(frozen=True)
class Captions:
    """The 2-object scenes ordered by their objects: those whose first object is ``g`` are ``second[starts[g] :
    starts[g + 1]]`` (their second objects, ascending) at rows ``row`` of the same slice."""

    starts: np.ndarray
    second: np.ndarray
    row: np.ndarray

    @classmethod
    def of(cls, scenes: SceneSet) -> Captions:
        """From the scenes (refused when two hold the same two objects: :func:`scene_lookup`)."""
        u = scenes.space.num_objects
        two = np.flatnonzero(scenes.num_objects() == 2)
        keys, order = scene_lookup(scenes.subset(two))
        return cls(np.searchsorted(keys // u, np.arange(u + 1)), keys % u, two[order])

    def table(self, first: np.ndarray, objects: int) -> np.ndarray:
        """Per first object of ``first``, the row of the scene naming it then each object ``[len(first), U]``
        (-1 where the dataset has none)."""
        count = self.starts[first + 1] - self.starts[first]
        owner = np.repeat(np.arange(len(first)), count)
        at = self.starts[first][owner] + np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
        out = np.full((len(first), objects), -1, dtype=np.int64)
        out[owner, self.second[at]] = self.row[at]
        return out


@dataclass(frozen=True)
class PairBlock:
    """Consecutive eligible images ``rows`` (scenes of two different objects), the row of the scene naming each
    one's first object then each object (``longer``, ``[R, U]``, -1 where absent) and, per kind, where that scene
    is one of its wrong longer captions (``masks``)."""

    rows: np.ndarray
    longer: np.ndarray
    masks: dict[str, np.ndarray]

    def pairs(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(image rows, rows of the wrong longer caption) of ``kind``, image by image, objects ascending."""
        r, obj = np.nonzero(self.masks[kind])
        return self.rows[r], self.longer[r, obj]


def pair_blocks(scenes: SceneSet, attribute: str, noun: str, budget: int = BLOCK_BYTES) -> Iterator[PairBlock]:
    """The eligible images in blocks of at most ``budget`` bytes of work (memory linear in the scenes): per image
    (a1 o1, a2 o2), the added objects (x, y) not in it, by kind, whose longer caption is in the dataset."""
    space = scenes.space
    a, n = space.concept_index(attribute), space.concept_index(noun)
    ids = scenes.object_ids().astype(np.int64)
    rows = np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))
    objects = space.all_objects().astype(np.int64)
    x, y, own = objects[:, a], objects[:, n], np.arange(space.num_objects)
    captions = Captions.of(scenes)
    size = max(1, budget // (24 * space.num_objects))
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        v = scenes.scenes[part].astype(np.int64)
        a1, o1, a2, o2 = (col[:, None] for col in (v[:, 0, a], v[:, 0, n], v[:, 1, a], v[:, 1, n]))
        longer = captions.table(ids[part, 0], space.num_objects)
        present = (longer >= 0) & (own != ids[part, :1]) & (own != ids[part, 1:2])
        masks = {
            "wrong_attribute": present & (y == o2) & (x != a2),
            "wrong_noun": present & (x == a2) & (y != o2),
            "wrong_object": present & (x != a1) & (x != a2) & (y != o1) & (y != o2),
        }
        yield PairBlock(part, longer, masks)


def half_truth_pairs(scenes: SceneSet, attribute: str, noun: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, (image rows, rows of the wrong longer caption) over every eligible pair (:func:`pair_blocks`)."""
    found: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {kind: [] for kind in KINDS}
    for block in pair_blocks(scenes, attribute, noun):
        for kind in KINDS:
            found[kind].append(block.pairs(kind))
    empty = np.zeros(0, dtype=np.int64)
    return {
        kind: (np.concatenate([p[0] for p in parts] or [empty]), np.concatenate([p[1] for p in parts] or [empty]))
        for kind, parts in found.items()
    }


def per_scene_mean(scene: np.ndarray, values: np.ndarray) -> tuple[float, int]:
    """The mean over scenes of each scene's mean of ``values`` (its pairs), and the number of scenes."""
    ids, inverse = np.unique(scene, return_inverse=True)
    if not len(ids):
        return float("nan"), 0
    sums = np.bincount(inverse.ravel(), weights=values, minlength=len(ids))
    return float(np.mean(sums / np.bincount(inverse.ravel(), minlength=len(ids)))), int(len(ids))


def longer_cosines(image: np.ndarray, text: np.ndarray, block: PairBlock, first: np.ndarray) -> np.ndarray:
    """``cos(image[i], text[j])`` (float64) of each image of ``block`` and each of its longer captions ``[R, U]``
    (NaN where absent): one matrix product per first object, whose images share their longer captions."""
    out = np.full(block.longer.shape, np.nan)
    groups, where = np.unique(first, return_inverse=True)
    x = image[block.rows].astype(np.float64)
    x_norm = np.linalg.norm(x, axis=1)
    with threads_for(block.longer.size * x.shape[1] // max(len(groups), 1)):
        for g in range(len(groups)):
            mine = np.flatnonzero(where == g)
            cols = np.flatnonzero(block.longer[mine[0]] >= 0)
            y = text[block.longer[mine[0], cols]].astype(np.float64)
            dots = (torch.from_numpy(x[mine]) @ torch.from_numpy(y).T).numpy()
            out[np.ix_(mine, cols)] = dots / np.maximum(x_norm[mine, None] * np.linalg.norm(y, axis=1), 1e-300)
    return out


def half_truth_rates(
    image: np.ndarray, text: np.ndarray, singles: np.ndarray, scenes: SceneSet, attribute: str, noun: str
) -> dict[str, dict[str, tuple[float, int]]]:
    """Per kind, the half-truth rate (ties half), ``pooled`` over every pair (and their number) and
    ``per_scene``, the mean over images of each image's rate (and the number of images); and how often
    the full correct caption beats the short one (``full_beats_short``: one pair per image, the two equal).
    Scored block by block (:func:`pair_blocks`): memory linear in the scenes.

    ``singles``: the single-object caption bank, one row per object id.
    """
    ids = scenes.object_ids().astype(np.int64)
    won_sum, pairs = dict.fromkeys(KINDS, 0.0), dict.fromkeys(KINDS, 0)
    per_image: dict[str, list[np.ndarray]] = {kind: [] for kind in KINDS}
    for block in pair_blocks(scenes, attribute, noun):
        short = row_cosines(image, singles, block.rows, ids[block.rows, 0])
        longer = longer_cosines(image, text, block, ids[block.rows, 0])
        for kind in KINDS:
            r, obj = np.nonzero(block.masks[kind])
            won = pairwise_accuracy(longer[r, obj], short[r])  # halves and ones: their sum is exact
            won_sum[kind] += float(won.sum())
            pairs[kind] += len(won)
            count = np.bincount(r, minlength=len(block.rows))
            per_image[kind].append(np.bincount(r, weights=won, minlength=len(block.rows))[count > 0] / count[count > 0])
    out = {}
    for kind in KINDS:
        rates = np.concatenate(per_image[kind])
        out[kind] = {
            "pooled": (won_sum[kind] / pairs[kind] if pairs[kind] else float("nan"), pairs[kind]),
            "per_scene": (float(np.mean(rates)) if len(rates) else float("nan"), len(rates)),
        }
    rows = np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))
    full = row_cosines(image, text, rows, rows)
    short = row_cosines(image, singles, rows, ids[rows, 0])
    won = pairwise_accuracy(full, short)
    out["full_beats_short"] = {"pooled": mean_and_count(won), "per_scene": per_scene_mean(rows, won)}
    return out


def half_truths(
    image: np.ndarray, text: np.ndarray, singles: np.ndarray, scenes: SceneSet, roles: dict[str, str]
) -> dict[str, dict[str, tuple[float, int]]]:
    """:func:`half_truth_rates`, checked against the single-object caption bank's shape."""
    u = scenes.space.num_objects
    if singles.shape[0] != u:
        raise BindscopeError(
            f"the single-object bank has {singles.shape[0]} rows, this space {u} objects; give the text "
            "single-object captions of this dataset (`bindscope embed --single-objects` on the text modality)"
        )
    if singles.shape[1] != text.shape[1] or image.shape[1] != text.shape[1]:
        raise BindscopeError(
            f"half-truths compare images ({image.shape[1]}) with captions ({text.shape[1]}) and single-object "
            f"captions ({singles.shape[1]}) by cosine: they need one width (one joint model)"
        )
    return half_truth_rates(image, text, singles, scenes, roles["attribute"], roles["noun"])
