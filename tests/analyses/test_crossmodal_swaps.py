"""Swap tests on planted image and text embeddings (known answers)."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.crossmodal.swaps import pairwise_accuracy, swap_accuracy, swap_cases, swap_scores
from bindscope.data.presets import get_preset
from bindscope.space.planted import planted_embeddings


@pytest.fixture(scope="module")
def clevr():
    return get_preset("clevr").build_scenes()


def test_pairwise_accuracy_counts_ties_as_half() -> None:
    assert pairwise_accuracy(np.array([2.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0])).tolist() == [1.0, 0.5, 0.0]
    # the same vector summed in another order differs in its last bits: still a tie
    assert pairwise_accuracy(np.array([0.5 + 1e-8, 0.5 + 1e-4]), np.array([0.5, 0.5])).tolist() == [0.5, 1.0]


def test_swap_cases_find_every_swap_of_an_enumerated_preset(clevr) -> None:
    cases = swap_cases(clevr, "shape")
    assert len(cases.scene) == 576 - 24  # two distinct objects
    s = clevr.scenes
    i = int(
        np.flatnonzero((s[cases.scene, 0, 0] != s[cases.scene, 1, 0]) & (s[cases.scene, 0, 1] != s[cases.scene, 1, 1]))[
            0
        ]
    )
    scene, att = s[cases.scene[i]], s[cases.negative["attribute"][i]]
    assert att[0, 0] == scene[1, 0] and att[1, 0] == scene[0, 0] and (att[:, 1] == scene[:, 1]).all()
    order = s[cases.negative["order"][i]]
    assert (order[0] == scene[1]).all() and (order[1] == scene[0]).all()
    # a shared attribute leaves the scene unchanged, a shared noun makes the swap the same objects in
    # the other order: neither is a negative
    shared = s[cases.scene, 0, 0] == s[cases.scene, 1, 0]
    same_noun = s[cases.scene, 0, 1] == s[cases.scene, 1, 1]
    assert (cases.negative["attribute"][shared | same_noun] == -1).all()
    assert cases.skipped["attribute"] == {"no true negative": int((shared | same_noun).sum())}
    assert int((shared | same_noun).sum()) == 48 + 168


def test_text_equal_to_image_separates_every_swap(clevr) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=64, seed=0)
    text = image + 0.01 * np.random.default_rng(1).normal(size=image.shape)
    acc = swap_accuracy(swap_scores(image, text, swap_cases(clevr, "shape")))
    assert acc["attribute"] > 0.99 and acc["noun"] > 0.99


def test_a_bag_of_concepts_text_ties_every_attribute_swap(clevr) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=64, seed=0)
    text = planted_embeddings(clevr, "bag_of_concepts", dim=64, seed=2)
    scores = swap_scores(image, text, swap_cases(clevr, "shape"))
    ok = ~np.isnan(scores["attribute"])
    assert np.allclose(scores["correct"][ok], scores["attribute"][ok])  # the same bag, the same vector
    assert swap_accuracy(scores)["attribute"] == 0.5  # every pair a tie, exactly
