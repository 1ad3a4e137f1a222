"""complexity on the report card: binding swaps told apart, the train-fit evidence beside the held-out scores, and
the column's verdict: a bag of concepts never reads ``binds``, a planted within-object product does, a family that
cannot fit even its training scenes gives ``undetermined`` (``no_fit``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import run_analysis
from bindscope.analyses.card import bag_counts, bag_inputs
from bindscope.analyses.complexity import ComplexitySettings, resolve_budget
from bindscope.analyses.complexity.analysis import ComplexityAnalysis
from bindscope.analyses.complexity.card import GENERALISES, column_fraction
from bindscope.analyses.complexity.families import Family
from bindscope.analyses.complexity.present import card_words, headline, reading
from bindscope.analyses.complexity.summary import ComplexitySummary
from bindscope.analyses.complexity.swaps import find_swaps, swap_chance, told_apart, unseen_pairs
from bindscope.analyses.complexity.verdict import decide
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.estimators.floors import bag_embeddings
from bindscope.estimators.probes import soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings


def _space(n: int, m: int | None = None) -> ConceptSpace:
    return ConceptSpace.from_dict({"color": [f"c{i}" for i in range(n)], "shape": [f"s{i}" for i in range(m or n)]})


@pytest.fixture(scope="module")
def small() -> SceneSet:
    return SceneSet.enumerate(_space(5), 2)


@pytest.fixture(scope="module")
def eight() -> SceneSet:
    return SceneSet.enumerate(_space(8), 2)


# -- binding swaps ------------------------------------------------------------------------------------------------
def test_a_scene_is_told_apart_from_its_swaps_only_where_its_embedding_differs() -> None:
    scenes = SceneSet.enumerate(_space(2), 2)  # 16 ordered pairs of 4 objects
    present = soft_targets(scenes)["object"] > 0
    binder = planted_embeddings(scenes, "object_additive", dim=8)
    swaps = find_swaps(scenes, binder, present)
    every = np.arange(len(scenes))
    assert np.array_equal(swaps.scorable, scenes.binding_ambiguous())  # two objects differing in both concepts
    assert swaps.scorable.sum() == 4 and not swaps.tied.any()  # 2 such pairs of objects, in 2 orders
    pos = unseen_pairs(swaps, swaps.scored(every), present, np.arange(4))  # every object unseen: every pair
    assert len(pos) == 8
    # objects 0 and 3 unseen: only the swaps holding them are scored (the others hold seen objects)
    kept = unseen_pairs(swaps, swaps.scored(every), present, np.array([0, 3]))
    assert set(swaps.swap[kept]) == {3, 12} and len(kept) == 4
    perfect = present.astype(np.float64)  # logits ranking each scene's own objects first
    assert told_apart(swaps, pos, every, perfect, present).all()
    assert not told_apart(swaps, pos, every, perfect, present, exchanged=True).any()
    # the same scores for a scene and its swaps (a bag: one embedding for both) tell none apart
    shared = np.repeat(perfect[:1], len(scenes), axis=0)
    assert not told_apart(swaps, pos, every, shared, present).any()
    # random scores: the scene's 2 objects above its swap's 2 (1/6), each of the swap's 2 orders likewise
    assert swap_chance(swaps, pos, present) == pytest.approx(1 / 216)
    rng = np.random.default_rng(0)
    drawn = [told_apart(swaps, pos, every, rng.normal(size=perfect.shape), present).mean() for _ in range(4000)]
    assert np.mean(drawn) == pytest.approx(1 / 216, abs=0.002)
    bag = find_swaps(scenes, bag_counts(scenes), present)
    assert bag.tied.all() and swap_chance(bag, pos, present) == 0.0
    assert not told_apart(bag, pos, every, perfect, present).any()  # ties are wrong, whatever the scores


# -- the evidence: fit on the training scenes beside the held-out scores ------------------------------------------
def test_every_fit_is_scored_on_its_training_scenes_beside_its_held_out_ones(small: SceneSet) -> None:
    y = planted_embeddings(small, "additive_concepts_objects", dim=16, noise=0.02)
    settings = ComplexitySettings(
        approximators=("additive", "mlp"),
        hidden=(8,),
        fractions=(0.5, 0.75),
        seeds=(0, 1),
        description_length=False,
        budget=resolve_budget("cpu", epochs=30, eval_every=10),
    )
    analysis = ComplexityAnalysis()
    result = analysis.compute(AnalysisInputs(y, small), settings)
    table = result.table
    fitted = table[(table.checkpoint == "selected") & (table.metric.isin(["object_acc", "r2"]))]
    for group in ("train_only", "test_only"):
        counts = fitted[fitted.group == group].groupby(["variant", "metric"]).size()
        assert (counts == 4).all() and len(counts) == 4  # each family, metric, fraction and seed
    rates = table[table.metric.isin(["object_acc", "swap_acc", "covered_share"]) & (table.variant != "chance")]
    assert rates.n_cases.notna().all() and (rates.n_cases > 0).all()
    assert table[table.metric.isin(["r2", "mse", "converged"])].n_cases.isna().all()
    train = table[(table.group == "train_only") & (table.metric == "object_acc") & (table.variant == "embeddings")]
    scored = table[(table.group == "train_only") & (table.metric == "scored_scenes")]
    assert np.array_equal(train.n_cases.to_numpy(), scored.value.to_numpy())
    summary = analysis.summarize(result, settings)
    entry = summary.approximators["additive"]
    assert set(entry.train_object_acc) == set(entry.train_r2) == set(entry.fits_training) == {"0.5", "0.75"}
    assert entry.train_r2["0.75"].mean > 0.9 and entry.fits_training["0.75"].mean == 1.0
    assert summary.verdict.fitting is not None and "additive" in summary.verdict.fitting
    rows = headline(summary)
    assert "AUC (± sd over 2 seeds)" in rows[0] and "train acc@0.75 %" in rows[0] and "train R²@0.75" in rows[0]


# -- the column's verdict --------------------------------------------------------------------------------------------
def _settings(families: tuple[str, ...], **budget: object) -> ComplexitySettings:
    return ComplexitySettings(
        approximators=families,
        hidden=(16,),
        fractions=(0.75,),
        seeds=(0,),
        description_length=False,
        second_fit=False,
        budget=resolve_budget("cpu", **budget),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("bag", ["counts", "multi-hot"])
def test_a_bag_of_concepts_never_reads_binds(small: SceneSet, bag: str, tmp_path: Path) -> None:
    y = bag_counts(small) if bag == "counts" else bag_embeddings(small)
    settings = _settings(("additive", "mult_within_object", "mlp"), epochs=40, eval_every=10).replace(fractions=(0.4,))
    out = run_analysis("complexity", AnalysisInputs(y, small), tmp_path / "out", settings)
    verdict = out.summary["verdicts"][GENERALISES]
    assert verdict["answer"] in ("no_binding", "undetermined"), verdict
    assert verdict["value"] == 0.0 and verdict["n_cases"] > 0  # a bag tells no scene from its swap
    table = out.table
    told = table[(table.metric.str.startswith("swap_acc")) & (table.variant != "chance")]
    assert len(told) == 8 and (told.value == 0.0).all()  # every family and the true embeddings, both readings


def test_the_analysis_runs_on_the_bag_of_a_clevr_sized_space() -> None:
    scenes = SceneSet.enumerate(_space(8, 3), 2)  # 11 collinear columns (each concept's counts sum to 2)
    inputs = bag_inputs(AnalysisInputs(planted_embeddings(scenes, "object_additive", dim=16), scenes))
    assert inputs.embeddings.shape == (576, 11)
    settings = ComplexitySettings(
        approximators=("additive", "mult", "mult_within_object", "sum_mult", "mlp"),
        hidden=(8,),
        fractions=(0.4,),
        seeds=(0,),
        budget=resolve_budget("cpu", epochs=20, eval_every=10, sweeps=20),
    )
    result = ComplexityAnalysis().compute(inputs, settings)
    measured = ComplexityAnalysis().measure(result, settings)[GENERALISES]
    assert list(measured.values) == [0.0] and measured.n_cases and column_fraction(result.table) == 0.4


def test_a_planted_within_object_product_reads_binds(eight: SceneSet, tmp_path: Path) -> None:
    y = planted_embeddings(eight, "mult_within_object", dim=16, width=4)  # determined by 38 of 64 objects
    settings = _settings(("additive", "mult_within_object")).replace(width=4, fractions=(0.6,), second_fit=True)
    out = run_analysis("complexity", AnalysisInputs(y, eight), tmp_path / "out", settings)
    verdict = out.summary["verdicts"][GENERALISES]
    assert verdict["answer"] == "binds", verdict
    assert verdict["value"] > 0.3 and verdict["floors"][0] == {"name": "bag of concepts", "value": 0.0}
    read = out.summary["generalisation"]
    assert read["family"] == "mult_within_object" and "mult_within_object" in read["fitting"]
    assert "mult_within_object at f = 0.6" in verdict["scored_on"]


def test_a_family_that_cannot_fit_its_training_scenes_reads_no_fit(small: SceneSet, tmp_path: Path) -> None:
    y = planted_embeddings(small, "object_additive", dim=16)
    settings = _settings(("additive", "mlp"), protocol="paper", epochs=3, eval_every=1).replace(fractions=(0.4,))
    out = run_analysis("complexity", AnalysisInputs(y, small), tmp_path / "out", settings)
    verdict = out.summary["verdicts"][GENERALISES]
    assert (verdict["answer"], verdict["reason"]) == ("undetermined", "no_fit")
    assert out.summary["generalisation"]["fitting"] == []
    fits = out.summary["approximators"]["mlp(16)"]["fits_training"]["0.4"]["mean"]  # 3 Adam epochs
    assert fits == 0.0


def test_no_high_complexity_without_a_family_that_fits_its_training_scenes() -> None:
    families = [Family("additive"), Family("mlp", 64)]
    f_stars: dict[str, float | None] = {"additive": None, "mlp(64)": None}
    none_fit = decide(families, f_stars, 0.9, decisive=[0.9], fitting=[])
    assert none_fit.finding == "no_fit"
    said = reading(none_fit, "exact")
    assert "high-complexity" not in said and "raise the budget" in said and "--epochs" in said and "budget:" in said
    assert "--protocol exact" in reading(none_fit, "paper")
    mlp_fits = decide(families, f_stars, 0.9, decisive=[0.9], fitting=["mlp(64)"])
    assert mlp_fits.finding == "high_complexity"
    assert reading(mlp_fits, "exact").endswith("fits the scenes it was fitted on): a high-complexity binding function")
    assert decide(families, f_stars, 0.9, decisive=[0.9]).finding == "high_complexity"  # fit not recorded
    summary = ComplexitySummary.model_construct(
        verdict=_numbers(none_fit), approximators={}, in_distribution={"0.9": None}
    )
    assert card_words(summary).startswith("unknown: no family up to 90% seen, and no family fits")


def _numbers(verdict: object) -> object:
    from bindscope.analyses.complexity.summarize import verdict_numbers

    return verdict_numbers(verdict, "exact")  # type: ignore[arg-type]
