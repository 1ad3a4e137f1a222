"""The linear bridge recovers a rotated text space on scenes of unseen objects (known answer)."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.crossmodal.bridge import fit_bridge
from bindscope.analyses.crossmodal.swaps import swap_accuracy, swap_cases, swap_scores
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings
from bindscope.space.splits import object_splits


def test_a_rotated_text_space_is_bridged_on_unseen_objects() -> None:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(8)], "shape": [f"s{i}" for i in range(6)]})
    scenes = SceneSet.enumerate(space, 2)
    image = planted_embeddings(scenes, "mult_within_object", dim=64, seed=0)
    rotation = np.linalg.qr(np.random.default_rng(1).normal(size=(64, 64)))[0]
    text = image @ rotation + 0.01 * np.random.default_rng(2).normal(size=image.shape)
    split = object_splits(scenes, [0.7], seed=0, order="covering")[0].with_validation(scenes, 0.1)
    test = scenes.subset(split.test_only)
    cases = swap_cases(test, "shape")
    raw = swap_accuracy(swap_scores(image[split.test_only], text[split.test_only], cases))
    bridge = fit_bridge(text, image, split.train_only, split.validation)
    bridged = swap_accuracy(swap_scores(image[split.test_only], bridge.apply(text[split.test_only]), cases))
    assert raw["attribute"] < 0.8 and raw["noun"] < 0.8
    assert bridged["attribute"] > 0.97 and bridged["noun"] > 0.97
    assert bridge.alpha < 1e-2  # a clean linear relation needs little ridge


def test_bridged_retrieval_counts_ties_as_the_swap_tests_do() -> None:
    """A bag-of-concepts text maps a bag's captions to one vector, whatever the bridge: bridged swap tests
    are exactly 0.5 and bridged strict top-1 retrieval is exactly a bag's share on the test_only scenes."""
    from bindscope.analyses import AnalysisInputs
    from bindscope.analyses.crossmodal import CrossmodalSettings
    from bindscope.analyses.crossmodal.compute import crossmodal_analysis
    from bindscope.analyses.crossmodal.retrieval import bag_strict_ceiling

    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(6)], "shape": [f"s{i}" for i in range(5)]})
    scenes = SceneSet.enumerate(space, 2)
    text = planted_embeddings(scenes, "bag_of_concepts", dim=32, seed=0)
    image = text + 0.2 * planted_embeddings(scenes, "object_additive", dim=32, seed=1)
    settings = CrossmodalSettings(fractions=(0.7,), seeds=(0,), cases=False)
    t = crossmodal_analysis(AnalysisInputs(image, scenes, other=text, noun="shape"), settings).table
    bridged = t[(t.variant == "bridged") & (t.group == "test_only")].set_index("metric").value
    split = object_splits(scenes, [0.7], seed=0, order="covering")[0]
    assert bridged["swap_attribute"] == 0.5 and bridged["swap_noun"] == 0.5
    assert abs(bridged["image_to_text_strict@1"] - bag_strict_ceiling(scenes.subset(split.test_only))) < 1e-12
