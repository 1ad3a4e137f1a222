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

import numpy as np

from bindscope.analyses.crossmodal.swaps import mean_and_count, pairwise_accuracy, row_cosines
from bindscope.core.errors import BindscopeError
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.concepts import SceneSet

KINDS = ("wrong_attribute", "wrong_noun", "wrong_object")
#: The table's variant of each half-truth rate: pooled over pairs (cases: pairs), per scene (cases: images).
HALF_VARIANTS = {"pooled": "half_truth", "per_scene": "half_truth_per_scene"}


def half_truth_pairs(scenes: SceneSet, attribute: str, noun: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, (image rows, rows of the wrong longer caption) over every eligible pair."""
    space = scenes.space
    a, n = space.concept_index(attribute), space.concept_index(noun)
    ids = scenes.object_ids().astype(np.int64)
    rows = np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))
    values = scenes.scenes[rows].astype(np.int64)  # [R, 2, C]
    objects = space.all_objects().astype(np.int64)  # [U, C]
    lookup = scene_lookup(scenes.subset(np.flatnonzero(scenes.num_objects() == 2)))
    two = np.flatnonzero(scenes.num_objects() == 2)
    u = space.num_objects
    out = {}
    for kind in KINDS:
        a2, o2 = values[:, 1, a][:, None], values[:, 1, n][:, None]
        a1, o1 = values[:, 0, a][:, None], values[:, 0, n][:, None]
        x, y = objects[None, :, a], objects[None, :, n]
        in_image = (objects[None, :, None] == values[:, None, :, :]).all(axis=3).any(axis=2)
        if kind == "wrong_attribute":
            mask = (y == o2) & (x != a2)
        elif kind == "wrong_noun":
            mask = (x == a2) & (y != o2)
        else:
            mask = (x != a1) & (x != a2) & (y != o1) & (y != o2)
        mask &= ~in_image
        r, obj = np.nonzero(mask)
        found = find_scenes(lookup, ids[rows[r], 0] * u + obj)
        keep = found >= 0
        out[kind] = (rows[r[keep]], two[found[keep]])
    return out


def per_scene_mean(scene: np.ndarray, values: np.ndarray) -> tuple[float, int]:
    """The mean over scenes of each scene's mean of ``values`` (its pairs), and the number of scenes."""
    ids, inverse = np.unique(scene, return_inverse=True)
    if not len(ids):
        return float("nan"), 0
    sums = np.bincount(inverse.ravel(), weights=values, minlength=len(ids))
    return float(np.mean(sums / np.bincount(inverse.ravel(), minlength=len(ids)))), int(len(ids))


def half_truth_rates(
    image: np.ndarray, text: np.ndarray, singles: np.ndarray, scenes: SceneSet, attribute: str, noun: str
) -> dict[str, dict[str, tuple[float, int]]]:
    """Per kind, the half-truth rate (ties half), ``pooled`` over every pair (and their number) and
    ``per_scene``, the mean over images of each image's rate (and the number of images); and how often
    the full correct caption beats the short one (``full_beats_short``: one pair per image, the two equal).

    ``singles``: the single-object caption bank, one row per object id.
    """
    ids = scenes.object_ids().astype(np.int64)
    out = {}
    for kind, (img, longer) in half_truth_pairs(scenes, attribute, noun).items():
        short = row_cosines(image, singles, img, ids[img, 0])
        wins = pairwise_accuracy(row_cosines(image, text, img, longer), short)
        out[kind] = {"pooled": mean_and_count(wins), "per_scene": per_scene_mean(img, wins)}
    rows = np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))
    full = row_cosines(image, text, rows, rows)
    short = row_cosines(image, singles, rows, ids[rows, 0])
    wins = pairwise_accuracy(full, short)
    out["full_beats_short"] = {"pooled": mean_and_count(wins), "per_scene": per_scene_mean(rows, wins)}
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
