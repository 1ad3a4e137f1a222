"""Half-truths on planted embeddings (known answers)."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.crossmodal.halftruth import half_truth_pairs, half_truth_rates
from bindscope.data.presets import get_preset


def words(scenes, seed: int = 0, dim: int = 64):
    """Unnormalised sum-of-words captions: a vector per attribute and per noun, summed over the objects."""
    rng = np.random.default_rng(seed)
    tables = [rng.normal(0, 1 / np.sqrt(dim), (size, dim)) for size in scenes.space.sizes]
    out = np.zeros((len(scenes), dim))
    for slot in range(scenes.max_objects):
        present = scenes.scenes[:, slot, 0] >= 0
        for c, table in enumerate(tables):
            out[present] += table[scenes.scenes[present, slot, c]]
    singles = sum(table[scenes.space.all_objects()[:, c]] for c, table in enumerate(tables))
    return out.astype(np.float32), singles.astype(np.float32)


def test_pairs_are_the_kinds_they_claim() -> None:
    scenes = get_preset("clevr").build_scenes()
    pairs = half_truth_pairs(scenes, "color", "shape")
    s = scenes.scenes
    img, longer = pairs["wrong_noun"]
    assert len(img) and (s[longer, 0] == s[img, 0]).all()  # the first object is kept
    assert (s[longer, 1, 0] == s[img, 1, 0]).all() and (s[longer, 1, 1] != s[img, 1, 1]).all()
    img, longer = pairs["wrong_object"]
    assert ((s[longer, 1, 0] != s[img, 0, 0]) & (s[longer, 1, 0] != s[img, 1, 0])).all()


def test_sum_of_words_text_prefers_half_truths() -> None:
    scenes = get_preset("clevr").build_scenes()
    text, singles = words(scenes)
    image = text.copy()  # the image is the sum of its objects' vectors
    rates = {k: v for k, (v, _) in half_truth_rates(image, text, singles, scenes, "color", "shape").items()}
    assert rates["wrong_noun"] > 0.5 and rates["wrong_attribute"] > 0.5
    assert rates["full_beats_short"] > 0.95


def test_text_equal_to_image_rejects_half_truths() -> None:
    scenes = get_preset("clevr").build_scenes()
    rng = np.random.default_rng(0)
    objects = rng.normal(size=(scenes.space.num_objects, 64))
    ids = scenes.object_ids()
    image = (objects[ids[:, 0]] + np.where(ids[:, 1:2] >= 0, objects[np.maximum(ids[:, 1], 0)], 0)).astype(np.float32)
    singles = objects.astype(np.float32)
    text = image + 0.05 * rng.normal(size=image.shape).astype(np.float32)
    rates = {k: v for k, (v, _) in half_truth_rates(image, text, singles, scenes, "color", "shape").items()}
    # the longer wrong caption adds an object the image lacks; the short one is a part of the image
    assert max(rates["wrong_attribute"], rates["wrong_noun"], rates["wrong_object"]) < 0.01
    assert rates["full_beats_short"] > 0.99
