"""Cross-modal retrieval on planted embeddings (known answers)."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.crossmodal.retrieval import bag_keys, bag_strict_ceiling, retrieval, same_objects
from bindscope.data.presets import get_preset
from bindscope.space.planted import planted_embeddings


def test_bags_and_other_orders() -> None:
    scenes = get_preset("clevr").build_scenes()
    bags = bag_keys(scenes)
    s = scenes.scenes
    i = int(np.flatnonzero((s[:, 0, 0] != s[:, 1, 0]) & (s[:, 0, 1] != s[:, 1, 1]))[0])
    swapped = [
        j
        for j in range(len(scenes))
        if s[j, 0, 0] == s[i, 1, 0] and s[j, 1, 0] == s[i, 0, 0] and (s[j, :, 1] == s[i, :, 1]).all()
    ]
    assert bags[swapped[0]] == bags[i]  # the attribute swap is the same bag
    other = same_objects(scenes)
    assert (s[other[i]][0] == s[i][1]).all() and (s[other[i]][1] == s[i][0]).all()


def test_text_equal_to_image_retrieves_its_scene() -> None:
    scenes = get_preset("clevr").build_scenes()
    image = planted_embeddings(scenes, "object_additive", dim=64, seed=0)
    text = image + 0.01 * np.random.default_rng(1).normal(size=image.shape)
    r = retrieval(image, text, scenes)
    assert r["image_to_text"]["strict@1"] > 0.99 and r["text_to_image"]["strict@1"] > 0.99


def test_a_bag_of_concepts_text_gets_the_bag_but_not_the_binding() -> None:
    scenes = get_preset("clevr").build_scenes()
    image = planted_embeddings(scenes, "bag_of_concepts", dim=64, seed=0)
    text = image + 0.001 * np.random.default_rng(1).normal(size=image.shape)
    r = retrieval(image, text, scenes)["image_to_text"]
    assert r["concept@1"] > 0.99
    # captions sharing a bag: up to 4 (attribute swap x mention order); strict counts 2 of them
    assert 0.4 < r["strict@1"] < 0.8


def test_object_additive_images_against_bag_texts_get_the_bag_ceiling() -> None:
    """Image = a bag of concepts plus an object-bound part (object-additive); text = the slot-free bag:
    concept-level retrieval near 1, strict near 1 / (captions sharing the bag) for each scene."""
    scenes = get_preset("clevr").build_scenes()
    text = planted_embeddings(scenes, "bag_of_concepts", dim=64, seed=0)
    image = text + 0.2 * planted_embeddings(scenes, "object_additive", dim=64, seed=1)
    r = retrieval(image, text, scenes)["image_to_text"]
    ceiling = bag_strict_ceiling(scenes)
    assert r["concept@1"] > 0.99
    assert abs(r["strict@1"] - ceiling) < 0.06
    bags = bag_keys(scenes)
    sizes = np.bincount(bags)
    assert 1 / sizes.max() <= ceiling <= 1 and sizes.max() == 4  # attribute swap x mention order
