"""The crossmodal analysis end to end on planted arrays: known answers and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses import AnalysisInputs, run_analysis
from bindscope.analyses.crossmodal import CrossmodalAnalysis, CrossmodalSettings
from bindscope.analyses.crossmodal.bridge import fit_contrastive_bridge
from bindscope.analyses.crossmodal.compute import crossmodal_analysis
from bindscope.analyses.crossmodal.swaps import swap_accuracy, swap_cases, swap_scores
from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.space.concepts import SceneSet
from bindscope.space.planted import planted_embeddings
from bindscope.space.splits import object_splits


@pytest.fixture(scope="module")
def clevr() -> SceneSet:
    return get_preset("clevr").build_scenes()


def rotated(image: np.ndarray, seed: int = 1, noise: float = 0.01) -> np.ndarray:
    dim = image.shape[1]
    rotation = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))[0]
    return (image @ rotation + noise * np.random.default_rng(seed + 1).normal(size=image.shape)).astype(np.float32)


def value(table, variant: str, metric: str, group: str = "all") -> float:
    return float(table[(table.variant == variant) & (table.metric == metric) & (table.group == group)]["value"].mean())


def test_rotated_text_is_bag_like_raw_and_bound_after_the_bridge(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=64, seed=0)
    settings = CrossmodalSettings(fractions=(0.7,), seeds=(0,))
    result = crossmodal_analysis(AnalysisInputs(image, clevr, other=rotated(image), noun="shape"), settings)
    t = result.table
    assert value(t, "raw", "swap_attribute") < 0.8 and value(t, "raw", "image_to_text_strict@1") < 0.1
    assert value(t, "bridged", "swap_attribute", "test_only") > 0.97
    assert value(t, "bridged", "image_to_text_strict@1", "test_only") > 0.9
    summary = CrossmodalAnalysis().summarize(result, settings)
    rows = CrossmodalAnalysis().headline(summary)
    assert rows[0][0] == "test" and len({len(r) for r in rows}) == 1
    assert summary.headline_fraction == 0.7 and summary.references["bag_of_concepts"]["swap_attribute"] == 0.5


def test_text_equal_to_image_binds(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=64, seed=0)
    text = image + 0.01 * np.random.default_rng(3).normal(size=image.shape).astype(np.float32)
    result = crossmodal_analysis(
        AnalysisInputs(image, clevr, other=text), CrossmodalSettings(bridge="none", cases=False)
    )
    t = result.table
    assert value(t, "raw", "swap_attribute") > 0.99 and value(t, "raw", "swap_noun") > 0.99
    assert value(t, "raw", "image_to_text_strict@1") > 0.99 and value(t, "raw", "text_to_image_strict@1") > 0.99
    assert "cases" not in result.tables and "bridge" not in result.tables


def test_bag_of_concepts_text_ties_exactly(clevr: SceneSet) -> None:
    text = planted_embeddings(clevr, "bag_of_concepts", dim=64, seed=0)
    image = text + 0.2 * planted_embeddings(clevr, "object_additive", dim=64, seed=1)
    t = crossmodal_analysis(AnalysisInputs(image, clevr, other=text), CrossmodalSettings(bridge="none")).table
    assert value(t, "raw", "swap_attribute") == 0.5 and value(t, "raw", "swap_noun") == 0.5
    assert value(t, "raw", "image_to_text_concept@1") > 0.99
    ceiling = value(t, "bag_of_concepts", "image_to_text_strict@1")
    assert abs(value(t, "raw", "image_to_text_strict@1") - ceiling) < 1e-12  # the bag's captions tie exactly


def test_contrastive_bridge_recovers_a_rotation(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "mult_within_object", dim=32, seed=0)
    text = rotated(image)
    split = object_splits(clevr, [0.7], 0, order="covering")[0].with_validation(clevr, 0.1)
    bridge = fit_contrastive_bridge(text, image, split.train_only, split.validation, steps=50)
    assert bridge.kind == "contrastive" and np.isfinite(bridge.validation_loss)
    test = split.test_only
    acc = swap_accuracy(swap_scores(image[test], bridge.apply(text[test]), swap_cases(clevr.subset(test), "shape")))
    assert acc["attribute"] > 0.95 and acc["noun"] > 0.95


def test_max_scenes_subsamples_with_a_seed(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    settings = CrossmodalSettings(bridge="none", max_scenes=100, subsample_seed=3)
    a = crossmodal_analysis(AnalysisInputs(image, clevr, other=image), settings)
    b = crossmodal_analysis(AnalysisInputs(image, clevr, other=image), settings)
    assert a.scenes == 100 and a.subsampled
    assert a.tables["cases"]["scene"].tolist() == b.tables["cases"]["scene"].tolist()
    assert len(set(a.tables["cases"]["scene"])) == 100


def test_refusals(clevr: SceneSet, tmp_path) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    with pytest.raises(BindscopeError, match="crossmodal needs other, which were not given"):
        run_analysis("crossmodal", AnalysisInputs(image, clevr), tmp_path / "x", CrossmodalSettings())
    wide = np.hstack([image, image])
    with pytest.raises(BindscopeError, match="fit a bridge"):
        crossmodal_analysis(AnalysisInputs(image, clevr, other=wide), CrossmodalSettings(bridge="none"))
    singles = np.ones((5, 16), np.float32)
    with pytest.raises(BindscopeError, match="the single-object bank has 5 rows, this space 24 objects"):
        crossmodal_analysis(
            AnalysisInputs(image, clevr, other=image, singles=singles), CrossmodalSettings(bridge="none")
        )
    one = SceneSet.enumerate(clevr.space, 1)
    with pytest.raises(BindscopeError, match="cross-modal tests need 2-object scenes"):
        crossmodal_analysis(
            AnalysisInputs(np.ones((len(one), 4)), one, other=np.ones((len(one), 4))), CrossmodalSettings()
        )
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\) \(exclusive\), got 1.0"):
        CrossmodalSettings(fractions=(0.5, 1.0))
    with pytest.raises(BindscopeError, match="'size' is not a concept of this space"):
        crossmodal_analysis(AnalysisInputs(image, clevr, other=image), CrossmodalSettings(noun="size"))


def test_a_wider_text_is_compared_through_the_bridge_only(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    text = np.hstack([rotated(image), np.zeros((len(image), 8), np.float32)])
    result = crossmodal_analysis(
        AnalysisInputs(image, clevr, other=text), CrossmodalSettings(fractions=(0.7,), seeds=(0,))
    )
    assert set(result.table.variant) == {"bridged"} and result.widths == {"image": 16, "text": 24}


def test_progress_counts_every_retrieval_chunk_and_fit(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    for text in (image, np.hstack([image, image])):  # one width: raw and bridged; two: bridged only
        calls: list[tuple[int, int]] = []
        settings = CrossmodalSettings(fractions=(0.5, 0.7), seeds=(0,))
        crossmodal_analysis(AnalysisInputs(image, clevr, other=text), settings, lambda d, t, c=calls: c.append((d, t)))
        assert [d for d, _ in calls] == list(range(1, len(calls) + 1)) and calls[-1][0] == calls[-1][1]


def test_retrieval_queries_are_a_sample_ranked_exactly(clevr: SceneSet) -> None:
    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    text = image + 0.3 * planted_embeddings(clevr, "random", dim=16, seed=4)
    full = crossmodal_analysis(AnalysisInputs(image, clevr, other=text), CrossmodalSettings(bridge="none"))
    sampled = crossmodal_analysis(
        AnalysisInputs(image, clevr, other=text), CrossmodalSettings(bridge="none", retrieval_queries=100)
    )
    t = sampled.table
    assert (t[(t.variant == "raw") & (t.metric == "image_to_text_strict@1")]["n_cases"] == 100).all()
    a, b = full.tables["cases"], sampled.tables["cases"]
    asked = b.image_to_text_top1 >= 0
    assert asked.sum() == 100 and b.image_to_text_strict.isna().sum() == 576 - 100
    assert (a.image_to_text_top1[asked] == b.image_to_text_top1[asked]).all()
    assert (a.text_to_image_top1[asked] == b.text_to_image_top1[asked]).all()
    assert value(t, "raw", "swap_attribute") == value(full.table, "raw", "swap_attribute")  # swaps: every scene


def test_the_typed_summary_reads_folders_written_before_per_scene_half_truths(clevr: SceneSet, tmp_path) -> None:
    import json

    from bindscope.analyses import load_result
    from bindscope.analyses.crossmodal import CrossmodalSummary

    image = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    done = run_analysis(
        "crossmodal", AnalysisInputs(image, clevr, other=image), tmp_path / "r", CrossmodalSettings(bridge="none")
    )
    assert isinstance(done.typed, CrossmodalSummary) and done.typed.numbers() == done.numbers
    summary = json.loads((done.path / "summary.json").read_text())
    for key in ("half_truths_per_scene", "half_truths_differ", "half_truths_absent"):
        del summary[key]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "old" / "results.parquet").write_bytes((done.path / "results.parquet").read_bytes())
    older = load_result(tmp_path / "old", "crossmodal").typed
    assert older.half_truths_differ == [] and older.half_truths_per_scene is None and older.half_truths_absent is None
    assert CrossmodalAnalysis().headline(older) == CrossmodalAnalysis().headline(done.view)
