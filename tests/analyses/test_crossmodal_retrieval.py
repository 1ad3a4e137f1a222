"""Cross-modal retrieval on planted embeddings (known answers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.crossmodal.retrieval import (
    HitKeys,
    bag_keys,
    bag_strict_ceiling,
    rank,
    retrieval,
    retrieve,
    same_objects,
    tie_counts,
    tie_credit,
    top_scores,
)
from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, pairwise_accuracy, swap_accuracy, swap_cases, swap_scores
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
    assert r["concept@1"] == 1.0
    assert abs(r["strict@1"] - ceiling) < 1e-12  # a bag's captions tie exactly: each counts its share
    bags = bag_keys(scenes)
    sizes = np.bincount(bags)
    assert 1 / sizes.max() <= ceiling <= 1 and sizes.max() == 4  # attribute swap x mention order


def credits(scores: list[list[float]], hit: list[list[int]], k: int) -> list[float]:
    """:func:`tie_credit` of each row of ``scores`` whose hits are the key columns ``hit`` (-1: none)."""
    s = torch.tensor(scores, dtype=torch.float64)
    cols = torch.tensor(hit)
    hit_scores = s.gather(1, cols.clamp(min=0)).masked_fill(cols < 0, float("-inf"))
    return tie_credit(*tie_counts(s, hit_scores, top_scores(s)[0]), k).tolist()


def test_tie_credit_shares_the_places_among_tied_keys() -> None:
    scores = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.5, 1.0, 1.0], [1.0, 0.9, 0.8]]
    one = [[0, -1], [0, -1], [0, -1], [1, -1]]
    assert credits(scores, one, 1) == pytest.approx([0.5, 1 / 3, 0.0, 0.0], abs=1e-15)
    assert credits(scores, one, 2) == pytest.approx([1.0, 2 / 3, 0.0, 1.0], abs=1e-15)
    two = [[0, 1], [0, 1], [0, 2], [1, 2]]
    assert credits(scores, two, 1) == pytest.approx([1.0, 2 / 3, 0.5, 0.0], abs=1e-15)


def test_ties_running_past_the_top_five_are_all_counted() -> None:
    """Seven keys tie with the one hit (more than the five counted first), one key beats them all."""
    scores = [[1.0] + [0.5] * 8]
    assert credits(scores, [[1, -1]], 1) == [0.0]
    assert credits(scores, [[1, -1]], 5) == pytest.approx([4 / 8])  # four places among 8 tied keys
    scores = [[0.5] * 9 + [0.1]]
    assert credits(scores, [[3, -1]], 5) == pytest.approx([5 / 9])


def angled(degrees_from_first: list[float]) -> np.ndarray:
    """Unit keys in the plane at the given angles (radians) from (1, 0), float32."""
    a = np.asarray(degrees_from_first)
    return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def one_query_credit(keys: np.ndarray, hit: int) -> float:
    """Top-1 strict credit of the query (1, 0) whose only hit is key ``hit``."""
    hits = HitKeys.of(np.array([[hit, -1]]), np.array([0]), np.arange(len(keys)))
    return float(rank(np.array([[1.0, 0.0]], dtype=np.float32), keys, hits).credit["strict@1"][0])


@pytest.mark.parametrize(
    ("gap", "expected"),
    [(0.0, 0.5), (0.3 * TIE_TOLERANCE, 0.5), (-0.3 * TIE_TOLERANCE, 0.5), (5 * TIE_TOLERANCE, 1.0), (-5e-6, 0.0)],
)
def test_a_key_within_the_tolerance_of_the_correct_one_is_a_tie(gap: float, expected: float) -> None:
    """The correct key at cosine 1 - d with the query, another at 1 - d - gap (float64 cosines): a gap
    within the tie tolerance is a tie (half), beyond it the correct key wins (or loses)."""
    d = 1e-3
    correct, other = np.arccos(1 - d), np.arccos(1 - d - gap)
    keys = angled([correct, -other, np.pi / 2])
    exact = np.cos(np.arccos(keys[:, 0].astype(np.float64)))
    assert abs((exact[0] - exact[1]) - gap) < 2e-7  # float32 keys keep the gap to a fraction of the tolerance
    assert one_query_credit(keys, hit=0) == expected


def test_retrieval_counts_a_tie_with_the_swap_caption_as_the_swap_test_does() -> None:
    """Two scenes, one the attribute swap of the other, with equal captions: the swap test and top-1
    retrieval both count the tie half (index order would give the first scene a full hit)."""
    scenes = get_preset("clevr").build_scenes()
    cases = swap_cases(scenes, "shape")
    i = int(cases.scene[np.flatnonzero(cases.negative["attribute"] >= 0)[0]])
    pair = scenes.subset([i, int(cases.negative["attribute"][cases.scene == i][0])])
    rng = np.random.default_rng(0)
    caption = rng.normal(size=8).astype(np.float32)
    image = rng.normal(size=(2, 8)).astype(np.float32)
    text = np.stack([caption, caption])
    swap = swap_accuracy(swap_scores(image, text, swap_cases(pair, "shape")))["attribute"]
    found = retrieve(image, text, pair)["image_to_text"]
    assert swap == 0.5 and found.credit["strict@1"].tolist() == [0.5, 0.5]
    assert found.top.tolist() == [0, 0]  # the top-ranked index alone would have counted scene 0 right
    text[1] = caption - 1e-3 * image[1] / np.linalg.norm(image[1])  # a clear step away from image 1 ...
    found = retrieve(image, text, pair)["image_to_text"]
    assert found.credit["strict@1"][1] == 0.0  # ... loses it (image 1's own caption is worse)


def test_near_ties_are_judged_on_float64_cosines_as_the_swap_tests_are() -> None:
    """Keys whose cosine gap to the correct one lies within 5% of the tolerance, in 2,048 dimensions:
    float32 products alone misjudge about a third of them; the credit must follow the float64 rule."""
    rng = np.random.default_rng(0)
    dim, judged = 2048, []
    for _ in range(60):
        query = rng.normal(size=(1, dim)).astype(np.float32)
        correct = (query[0] + rng.normal(size=dim)).astype(np.float32)
        step = rng.normal(size=dim).astype(np.float32)
        slope = float(np.diff(cosines(np.stack([correct, correct + 1e-3 * step]), query))[0]) / 1e-3
        along = -TIE_TOLERANCE * rng.uniform(0.95, 1.05) / slope
        keys = np.stack([correct, correct + along * step]).astype(np.float32)
        exact = cosines(keys, query)
        want = pairwise_accuracy(exact[:1], exact[1:])[0]
        hits = HitKeys.of(np.array([[0, -1]]), np.array([0]), np.array([0, 1]))
        judged.append(rank(query, keys, hits).credit["strict@1"][0] == want)
    assert all(judged)


def cosines(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """float64 cosines of ``keys`` with the one ``query`` row."""
    k, q = keys.astype(np.float64), query[0].astype(np.float64)
    return k @ q / np.linalg.norm(k, axis=1) / np.linalg.norm(q)


def test_a_scene_naming_one_object_twice_is_one_strict_hit() -> None:
    """Its other order is itself: tied with one other caption it still counts half, not a double hit."""
    scenes = get_preset("clevr").build_scenes()
    ids = scenes.object_ids()
    twice, other = np.flatnonzero(ids[:, 0] == ids[:, 1])[0], np.flatnonzero(ids[:, 0] != ids[:, 1])[0]
    pair = scenes.subset([twice, other])
    assert same_objects(pair)[0] == 0
    rng = np.random.default_rng(0)
    image, caption = rng.normal(size=(2, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)
    found = retrieve(image, np.stack([caption, caption]), pair)["image_to_text"]
    assert found.credit["strict@1"].tolist() == [0.5, 0.5]
