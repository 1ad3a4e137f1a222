"""Cross-modal retrieval on planted embeddings (known answers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.crossmodal import retrieval as retrieval_module
from bindscope.analyses.crossmodal import scan as scan_module
from bindscope.analyses.crossmodal.retrieval import (
    HitKeys,
    bag_keys,
    bag_strict_ceiling,
    rank,
    retrieval,
    retrieve,
    same_objects,
)
from bindscope.analyses.crossmodal.scan import key_block
from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, pairwise_accuracy, swap_accuracy, swap_cases, swap_scores
from bindscope.analyses.crossmodal.ties import CANDIDATES, tie_counts, tie_credit
from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.families import relation_scenes, with_families
from bindscope.space.planted import planted_embeddings
from crossmodal_reference import dense_rank, dense_retrieve
from family_spaces import COUNTS, RELATION


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
    return tie_credit(*tie_counts(s, hit_scores), k).tolist()


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


def test_ties_running_past_the_candidates_are_counted_over_every_key() -> None:
    """Eight keys tie with the hit (more than the candidates a query keeps) and one beats them: counted over
    every key, top-5 holds four places among the eight tied keys."""
    keys = angled([0.0, *[0.3] * 8, 1.0])
    hits = HitKeys.of(np.array([[2, -1]]), np.array([0]), np.arange(len(keys)))
    credit = rank(np.array([[1.0, 0.0]], dtype=np.float32), keys, hits, budget=32 * 4).credit
    assert CANDIDATES < 8 and credit["strict@1"][0] == 0.0 and credit["strict@5"][0] == pytest.approx(4 / 8)


def clevr_scenes() -> SceneSet:
    scenes = get_preset("clevr").build_scenes()
    return scenes.subset(scenes.full())


def family_scenes() -> dict[str, SceneSet]:
    """The small relation and count spaces of the family tests, and a relation and a count space of 12 objects."""
    base = ConceptSpace.from_dict({"color": ["red", "green", "blue", "yellow"], "shape": ["cube", "ball", "cone"]})
    relations = ["left of", "above"]
    return {
        "relation": preset_from_dict(RELATION).build_scenes(),
        "count": preset_from_dict(COUNTS).build_scenes(),
        "relation-12": relation_scenes(with_families(base, relations, None), relations, allow_identical=False),
        "count-12": SceneSet.enumerate(with_families(base, None, [1, 2]), 2, allow_identical=False),
    }


def planted_pairs(scenes: SceneSet, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Images and captions: captions a noisy copy; captions one bag-of-concepts vector per bag (exact ties); or
    images those bag vectors and captions a hair from them (ties within the tolerance, not exact)."""
    image = planted_embeddings(scenes, "object_additive", dim=24, seed=0)
    rng = np.random.default_rng(1)
    if kind == "noisy":
        return image, image + 0.3 * rng.normal(size=image.shape).astype(np.float32)
    bag = planted_embeddings(scenes, "bag_of_concepts", dim=24, seed=2)
    if kind == "bag":
        return bag + 0.05 * image, bag
    return bag, bag + 1e-7 * rng.normal(size=bag.shape).astype(np.float32)


def same_credits(a: dict[str, dict[str, np.ndarray]], b: dict[str, retrieval_module.Ranked]) -> bool:
    return all(np.array_equal(a[d][m], b[d].credit[m]) for d in a for m in a[d])


@pytest.mark.parametrize("kind", ["noisy", "bag", "hair"])
def test_blocked_retrieval_gives_the_dense_rule_bit_for_bit(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against the rule on whole score rows (tests/helpers/crossmodal_reference.py): the same credits, every bit,
    in one block, in blocks of 64 keys and chunks of 100 queries (the two-way product's transposes merged across
    chunks), and for a sample of queries."""
    scenes = clevr_scenes()
    image, text = planted_pairs(scenes, kind)
    expected = dense_retrieve(image, text, scenes)
    asked = np.arange(0, len(scenes), 5)
    sampled = dense_retrieve(image, text, scenes, asked)
    assert same_credits(expected, retrieve(image, text, scenes))
    monkeypatch.setattr(scan_module, "CHUNK", 100)
    monkeypatch.setattr(retrieval_module, "CHUNK", 100)
    budget = 64 * 128 * 4
    assert key_block(100, budget) == 64  # nine blocks of keys per chunk of queries
    assert same_credits(expected, retrieve(image, text, scenes, budget=budget))
    assert same_credits(sampled, retrieve(image, text, scenes, queries=asked, budget=budget))


@pytest.mark.parametrize("space", ["relation", "count", "relation-12", "count-12"])
def test_blocked_retrieval_gives_the_dense_rule_on_relation_and_count_spaces(space: str) -> None:
    scenes = family_scenes()[space]
    for kind in ("noisy", "bag"):
        image, text = planted_pairs(scenes, kind)
        assert same_credits(dense_retrieve(image, text, scenes), retrieve(image, text, scenes, budget=64 * 4 * 352))


def test_the_top_key_is_one_of_highest_cosine_the_lowest_on_a_tie() -> None:
    scenes = clevr_scenes()
    image, text = planted_pairs(scenes, "bag")  # a bag's captions are one vector: their cosines tie exactly
    found = retrieve(image, text, scenes, budget=64 * 4 * 576)
    scores = (torch.nn.functional.normalize(torch.from_numpy(image), dim=1)
              @ torch.nn.functional.normalize(torch.from_numpy(text), dim=1).T).numpy()  # fmt: skip
    best = scores.max(axis=1)
    assert np.allclose(scores[np.arange(len(scenes)), found["image_to_text"].top], best, rtol=0, atol=1e-6)
    tied = np.flatnonzero((scores == best[:, None]).sum(axis=1) > 1)
    assert len(tied) > 100
    first = np.argmax(scores[tied] >= best[tied, None], axis=1)
    assert (found["image_to_text"].top[tied] == first).all()


def test_a_block_of_cosines_stays_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries x keys are never held whole: every product block fits the budget (here a tenth of the whole)."""
    scenes = clevr_scenes()
    image, text = planted_pairs(scenes, "noisy")
    budget = 576 * 576 * 4 // 10
    sizes: list[int] = []
    products = scan_module.products

    def recorded(queries: torch.Tensor, keys: torch.Tensor, block: int):
        for start, n, scores in products(queries, keys, block):
            sizes.append(scores.numel() * scores.element_size())
            yield start, n, scores

    monkeypatch.setattr(scan_module, "products", recorded)
    expected = retrieve(image, text, scenes)
    blocked = retrieve(image, text, scenes, budget=budget)
    assert len(sizes) > 2 and max(sizes[1:]) <= budget < 576 * 576 * 4
    assert all(
        np.array_equal(expected[d].credit[m], blocked[d].credit[m]) for d in expected for m in expected[d].credit
    )


def test_small_retrieval_runs_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread count comes from bindscope.core.threads: a product of a few million multiply-adds runs on one."""
    scenes = clevr_scenes()
    image, text = planted_pairs(scenes, "noisy")
    threads: list[int] = []
    products = scan_module.products

    def recorded(queries: torch.Tensor, keys: torch.Tensor, block: int):
        threads.append(torch.get_num_threads())
        yield from products(queries, keys, block)

    monkeypatch.setattr(scan_module, "products", recorded)
    before = torch.get_num_threads()
    retrieve(image, text, scenes)
    assert threads == [1] and torch.get_num_threads() == before


def near_tie_keys(n: int = 150, dim: int = 2048) -> tuple[np.ndarray, np.ndarray, HitKeys]:
    """Per query its correct key and another key whose float64 cosine gap to it is within 5% of the tolerance
    (float32 products misjudge about a third of them); the first ``n`` keys are the correct ones."""
    rng = np.random.default_rng(0)
    queries = rng.normal(size=(n, dim)).astype(np.float32)
    correct = (queries + rng.normal(size=(n, dim))).astype(np.float32)
    step = rng.normal(size=(n, dim)).astype(np.float32)

    def cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = a.astype(np.float64), b.astype(np.float64)
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    slope = (cos(queries, correct + 1e-3 * step) - cos(queries, correct)) / 1e-3
    other = correct - (TIE_TOLERANCE * rng.uniform(0.95, 1.05, n) / slope)[:, None] * step
    hits = HitKeys.of(np.stack([np.arange(n), np.full(n, -1)], axis=1), np.arange(n), np.arange(2 * n))
    return queries, np.concatenate([correct, other.astype(np.float32)]), hits


def test_near_ties_in_blocks_are_judged_on_float64_cosines_as_the_dense_rule_does() -> None:
    queries, keys, hits = near_tie_keys()
    expected = dense_rank(queries, keys, hits)
    ranked = rank(queries, keys, hits, budget=64 * 4 * 160)  # blocks of 64 keys
    assert 0.2 < np.mean(expected["strict@1"] == 0.5) < 0.8  # ties and wins both
    assert all(np.array_equal(expected[m], ranked.credit[m]) for m in expected)
