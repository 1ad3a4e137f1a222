"""Half-truths on planted embeddings (known answers)."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses import AnalysisInputs
from bindscope.analyses.crossmodal import CrossmodalAnalysis, CrossmodalSettings
from bindscope.analyses.crossmodal.compute import crossmodal_analysis
from bindscope.analyses.crossmodal.halftruth import (
    KINDS,
    half_truth_pairs,
    half_truth_rates,
    pair_blocks,
    per_scene_mean,
)
from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.families import relation_scenes, with_families
from bindscope.space.planted import planted_embeddings
from crossmodal_reference import dense_half_truth_pairs, dense_half_truth_rates
from family_spaces import COUNTS, RELATION


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
    rates = {k: r["pooled"][0] for k, r in half_truth_rates(image, text, singles, scenes, "color", "shape").items()}
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
    rates = {k: r["pooled"][0] for k, r in half_truth_rates(image, text, singles, scenes, "color", "shape").items()}
    # the longer wrong caption adds an object the image lacks; the short one is a part of the image
    assert max(rates["wrong_attribute"], rates["wrong_noun"], rates["wrong_object"]) < 0.01
    assert rates["full_beats_short"] > 0.99


def test_per_scene_mean_weighs_every_scene_once() -> None:
    assert per_scene_mean(np.array([4, 4, 4, 7]), np.array([1.0, 1.0, 1.0, 0.0])) == (0.5, 2)
    assert per_scene_mean(np.array([3, 3, 9]), np.array([1.0, 0.5, 0.25])) == (0.5, 2)
    assert np.isnan(per_scene_mean(np.array([], dtype=int), np.array([]))[0])


def tiny_scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["c", "s"]})
    return SceneSet.enumerate(space, 2)


def brute_force_pairs(scenes: SceneSet) -> dict[str, list[int]]:
    """Per kind, the image row of every eligible pair, by a loop over the tiny space's objects."""
    out: dict[str, list[int]] = {"wrong_attribute": [], "wrong_noun": [], "wrong_object": []}
    objects = [tuple(o) for o in scenes.space.all_objects().tolist()]
    for row, scene in enumerate(scenes.scenes.tolist()):
        (a1, o1), (a2, o2) = scene
        if (a1, o1) == (a2, o2):
            continue
        for x, y in objects:
            if (x, y) in ((a1, o1), (a2, o2)):
                continue
            if y == o2 and x != a2:
                out["wrong_attribute"].append(row)
            if x == a2 and y != o2:
                out["wrong_noun"].append(row)
            if x not in (a1, a2) and y not in (o1, o2):
                out["wrong_object"].append(row)
    return out


def red_and_green_circles(scenes: SceneSet) -> int:
    """The row of the scene (r c, g c)."""
    s = scenes.scenes
    return int(np.flatnonzero((s[:, 0] == [0, 0]).all(axis=1) & (s[:, 1] == [1, 0]).all(axis=1))[0])


def one_image_falls_for_it(scenes: SceneSet, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Image ``row`` points at every (longer) caption, the other images at every short one: only that
    image's longer wrong captions win."""
    e = np.eye(4, dtype=np.float32)
    image = np.tile(e[0], (len(scenes), 1))
    image[row] = e[1]
    text = np.tile(e[1], (len(scenes), 1))
    singles = np.tile(e[0], (scenes.space.num_objects, 1))
    return image, text, singles


def test_pooled_and_per_scene_rates_differ_when_images_have_unequal_pairs() -> None:
    """(r c, g c) has one wrong-attribute pair, (r c, g s) two: with only the first image falling for
    half-truths, pooled = its pairs / all pairs, per scene = 1 / images."""
    scenes = tiny_scenes()
    expected = brute_force_pairs(scenes)
    row = red_and_green_circles(scenes)
    assert expected["wrong_attribute"].count(row) == 1
    image, text, singles = one_image_falls_for_it(scenes, row)
    rates = half_truth_rates(image, text, singles, scenes, "color", "shape")
    pairs = expected["wrong_attribute"]
    assert rates["wrong_attribute"]["pooled"] == (1 / len(pairs), len(pairs))
    assert rates["wrong_attribute"]["per_scene"] == (1 / len(set(pairs)), len(set(pairs)))
    assert len(pairs) != len(set(pairs))  # so the two differ
    for kind, rows in expected.items():
        assert rates[kind]["pooled"][1] == len(rows) and rates[kind]["per_scene"][1] == len(set(rows))
    # full_beats_short: one pair per image, the two ways agree (here the full caption wins on that image only)
    assert rates["full_beats_short"]["pooled"] == rates["full_beats_short"]["per_scene"]


def test_the_summary_and_terminal_show_both_rates_only_where_they_differ() -> None:
    scenes = tiny_scenes()
    row = red_and_green_circles(scenes)
    image, text, singles = one_image_falls_for_it(scenes, row)
    settings = CrossmodalSettings(bridge="none", cases=False)
    analysis = CrossmodalAnalysis()
    inputs = AnalysisInputs(image, scenes, other=text, singles=singles, noun="shape")
    summary = analysis.summarize(crossmodal_analysis(inputs, settings), settings)
    differ = summary.half_truths_differ
    assert "wrong_attribute" in differ and "full_beats_short" not in differ
    labels = [r[0] for r in analysis.headline(summary)]
    assert "half-truth wrong_attribute pooled" in labels and "half-truth wrong_attribute per scene" in labels
    assert "half-truth full_beats_short" in labels and "half-truth full_beats_short per scene" not in labels
    assert any("differ for wrong_attribute" in line for line in analysis.notes(summary))
    image = np.tile(np.eye(4, dtype=np.float32)[0], (len(scenes), 1))  # no image falls for it: 0 both ways
    inputs = AnalysisInputs(image, scenes, other=text, singles=singles, noun="shape")
    summary = analysis.summarize(crossmodal_analysis(inputs, settings), settings)
    assert summary.half_truths_differ == [] and summary.half_truths_per_scene["wrong_noun"].mean == 0.0
    assert not any(r[0].endswith("per scene") for r in analysis.headline(summary))
    assert any("per scene (the mean of each image's rate) are equal" in line for line in analysis.notes(summary))


def spaces() -> dict[str, tuple[SceneSet, str, str]]:
    """Scene sets of every shape half-truths meet: clevr whole and subsampled, a third concept, the small relation
    and count spaces of the family tests and a relation and a count space of 12 objects."""
    clevr = get_preset("clevr").build_scenes()
    base = ConceptSpace.from_dict({"color": ["red", "green", "blue", "yellow"], "shape": ["cube", "ball", "cone"]})
    three = ConceptSpace.from_dict({"color": ["r", "g", "b"], "size": ["s", "l"], "shape": ["c", "s", "t"]})
    relations = ["left of", "above"]
    return {
        "clevr": (clevr, "color", "shape"),
        "clevr subsample": (
            clevr.subset(np.sort(np.random.default_rng(0).choice(len(clevr), 300, replace=False))),
            "color",
            "shape",
        ),
        "three concepts": (SceneSet.enumerate(three, 2), "color", "shape"),
        "relation": (preset_from_dict(RELATION).build_scenes(), "attribute", "noun"),
        "count": (preset_from_dict(COUNTS).build_scenes(), "color", "shape"),
        "relation-12": (
            relation_scenes(with_families(base, relations, None), relations, allow_identical=False),
            "color",
            "shape",
        ),
        "count-12": (SceneSet.enumerate(with_families(base, None, [1, 2]), 2, allow_identical=False), "color", "shape"),
    }


@pytest.mark.parametrize("name", list(spaces()))
def test_pairs_are_the_dense_algorithms_in_its_order(name: str) -> None:
    """The same pairs, in the same order, as the images x objects x slots x concepts comparison
    (tests/helpers/crossmodal_reference.py), in one block and in blocks of seven images."""
    scenes, attribute, noun = spaces()[name]
    expected = dense_half_truth_pairs(scenes, attribute, noun)
    assert all(len(expected[kind][0]) for kind in KINDS)
    small = 24 * scenes.space.num_objects * 7
    blocks = list(pair_blocks(scenes, attribute, noun, budget=small))
    assert len(blocks) > 1 and all(len(b.rows) <= 7 for b in blocks)
    for found in (
        half_truth_pairs(scenes, attribute, noun),
        {k: tuple(map(np.concatenate, zip(*(b.pairs(k) for b in blocks)))) for k in KINDS},
    ):
        for kind in KINDS:
            assert np.array_equal(found[kind][0], expected[kind][0]) and np.array_equal(
                found[kind][1], expected[kind][1]
            )


@pytest.mark.parametrize("name", ["clevr", "relation", "count-12"])
def test_rates_are_the_dense_algorithms(name: str) -> None:
    """Scored block by block with one matrix product per first object: the pooled rates and pair counts of scoring
    every pair of the dense algorithm one by one."""
    scenes, attribute, noun = spaces()[name]
    image = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    text = image + 0.5 * planted_embeddings(scenes, "bag_of_concepts", dim=16, seed=1)
    singles = np.random.default_rng(2).normal(size=(scenes.space.num_objects, 16)).astype(np.float32)
    expected = dense_half_truth_rates(image, text, singles, scenes, attribute, noun)
    rates = half_truth_rates(image, text, singles, scenes, attribute, noun)
    assert {kind: rates[kind]["pooled"] for kind in KINDS} == expected
    assert 0 < min(v for v, _ in expected.values()) < max(v for v, _ in expected.values()) < 1


def test_a_block_of_pairs_stays_within_its_budget() -> None:
    scenes = get_preset("clevr").build_scenes()
    budget = 24 * scenes.space.num_objects * 50
    for block in pair_blocks(scenes, "color", "shape", budget=budget):
        held = block.longer.nbytes + sum(mask.nbytes for mask in block.masks.values())
        assert len(block.rows) <= 50 and held <= budget
