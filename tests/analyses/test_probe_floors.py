"""The probes' floors (docs/method/03-probes.md): a bag-of-concepts control on the same scenes, split and probe fit,
the ideal bag's analytic floor and chance beside every accuracy; "binds beyond a bag of concepts" only when
every seed clears the bag by the margin. Known answers on planted embeddings, the CLI's reading, the card."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import load_result
from bindscope.analyses.probe import ProbeAnalysis, ProbeSummary, binding_reading, probe_analysis, probe_summary
from bindscope.analyses.probe.compute import bag_settings
from bindscope.analyses.probe.summary import seed_values
from bindscope.estimators.floors import (
    BAG_LEVEL,
    BINDS,
    MARGIN,
    bag_embeddings,
    bag_of_concepts_accuracy,
    binding_verdict,
)
from bindscope.estimators.probe_runs import ProbeSettings, seed_splits
from bindscope.pipeline.card import card_row
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

LBFGS = ProbeSettings(optimizer="lbfgs", max_iter=50)  # L-BFGS is what the bag control uses in place of fast


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(4)], "shape": [f"s{i}" for i in range(4)]})
    return SceneSet.enumerate(space, 2)  # 256 ordered pairs, 144 of them need binding


def summarized(y: np.ndarray, scenes: SceneSet, control: np.ndarray | None = None):
    table, _, _ = probe_analysis(y, scenes, LBFGS, control=control)
    return table, probe_summary(table)


def test_a_pure_bag_of_concepts_reads_bag_level_and_scores_as_its_control(scenes: SceneSet) -> None:
    # an injective linear image of the ideal bag: L-BFGS on whitened inputs fits the same logits
    mix = np.random.default_rng(0).normal(size=(8, 24)).astype(np.float32)
    table, summary = summarized(bag_embeddings(scenes) @ mix, scenes)
    model = seed_values(table, "base", "none", "object_acc")
    np.testing.assert_allclose(model, seed_values(table, "base", "bag", "object_acc"), atol=1e-9)
    ideal = seed_values(table, "bag_floor", "none", "object_acc")
    assert (model > ideal + MARGIN).all()  # a fitted bag picks one binding of a tied pair: above its ideal floor
    binding = summary.binding
    assert binding.reading == BAG_LEVEL and binding.clearance_min == pytest.approx(0.0, abs=1e-9)
    assert binding.floor_mean == pytest.approx(model.mean())  # the floor is the larger: here the fitted bag's
    notes = ProbeAnalysis().notes(summary)
    assert notes[-1].startswith("does not clear a bag of concepts by the margin; object probe")
    assert not any("binds beyond" in n for n in notes)


def test_object_vectors_that_are_not_sums_of_concepts_bind_beyond_a_bag(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "object_lookup", dim=32, seed=0)
    table, summary = summarized(y, scenes, control=planted_embeddings(scenes, "random", dim=32, seed=1))
    binding = summary.binding
    assert binding.reading == BINDS and binding.seeds == 3
    assert binding.clearance_min >= 0.3  # objects read exactly; a bag reads at most about half of the tied
    floors = summary.floors
    splits = seed_splits(len(scenes), LBFGS)
    ideal = np.mean([bag_of_concepts_accuracy(scenes.subset(s.test)) for s in splits.values()])
    assert floors["object_acc"].bag == pytest.approx(ideal)
    assert floors["concept_acc"].bag == 1.0 and floors["concept_acc"].bag_fitted == pytest.approx(1.0)
    assert floors["object_acc"].chance == summary.chance["object_acc"]
    assert floors["object_acc"].rand == summary.controls.rand.test["object_acc"].mean
    assert floors["object_acc"].bag_fitted == summary.controls.bag.test["object_acc"].mean
    notes = ProbeAnalysis().notes(summary)
    assert notes[1].startswith("objects recoverable: yes, 100.0%")
    assert notes[0].startswith("probes: ") and "test scenes per seed" in notes[0]  # the solver and the scenes
    assert notes[2].startswith("object_acc 100.0%: chance ") and " ideal / " in notes[2]
    assert notes[-1].startswith("binds beyond a bag of concepts; object probe 100.0% vs ")
    rows = {r[0]: r for r in ProbeAnalysis().headline(summary)}
    assert {"bag (fitted)", "bag (ideal)", "rand", "chance"} <= set(rows)


def test_no_rand_control_is_said(scenes: SceneSet) -> None:
    _, summary = summarized(planted_embeddings(scenes, "object_lookup", dim=32, seed=0), scenes)
    assert summary.floors["object_acc"].rand is None and summary.controls.rand is None
    assert "+rand not given" in ProbeAnalysis().notes(summary)[2]


def test_the_bag_control_fits_like_the_model_without_the_reference_detour() -> None:
    assert bag_settings(ProbeSettings(optimizer="fast")).optimizer == "lbfgs"  # its separable concept probes
    assert bag_settings(ProbeSettings()).optimizer == "regularised"  # the default: the model's own fit
    assert bag_settings(ProbeSettings(optimizer="reference")).optimizer == "reference"
    settings = ProbeSettings(seeds=(3, 4), train_fraction=0.5, center=True)
    assert bag_settings(settings).model_dump(exclude={"optimizer"}) == settings.model_dump(exclude={"optimizer"})


def test_results_from_before_the_bag_control_read_not_measured() -> None:
    spread = {"mean": 0.9, "std": None, "n_seeds": 1}
    old = {
        "train": {"object_acc": spread},
        "test": {"object_acc": spread},
        "chance": {"object_acc": 0.01},
        "controls": {"permuted_labels": {"test": {"object_acc": spread}}, "rand": None},
        "solver": {"0": {"object": "lbfgs"}},
    }
    loaded = ProbeSummary.model_validate(old)  # the numbers of a result from before the bag control
    assert loaded.numbers() == old  # and written back as they were
    assert binding_reading(loaded).startswith("beyond a bag of concepts: not measured")
    undetermined = {"metric": "object_acc", **binding_verdict([], []), "floor_mean": None}
    assert "undetermined" in binding_reading(ProbeSummary.model_validate({**old, "binding": undetermined}))


def test_the_cli_reads_each_accuracy_beside_its_floors_and_the_card_too(
    run_cli, clevr_dir: Path, tmp_path: Path
) -> None:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings

    clevr = load_dataset(clevr_dir).scenes
    for name, kind, spec in (
        ("lookup", "object_lookup", "hf:planted/y"),
        ("lookup_rand", "random", "hf:planted/y+rand"),
    ):
        np.save(tmp_path / f"{name}.npy", planted_embeddings(clevr, kind, dim=32, seed=0))
        import_embeddings(
            clevr_dir, tmp_path / f"{name}.npy", name=name, modality="image", out=tmp_path / name, model_spec=spec
        )
    out = tmp_path / "results" / "clevr" / "lookup" / "probe"
    done = run_cli("probe", tmp_path / "lookup", "--out", out, "--optimizer", "lbfgs", "--max-iter", "100", "-q")
    assert done.returncode == 0, done.stderr
    assert "bag (fitted)" in done.stdout and "bag (ideal)" in done.stdout
    assert "\nobject_acc 100.0%: chance 0.5%, +rand " in done.stdout
    assert "bag of concepts 42.6% ideal / " in done.stdout  # mean of the seeds' test scenes (all: 41.7%)
    assert "\nbinds beyond a bag of concepts; object probe 100.0% vs " in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    row = card_row("clevr", "lookup", {"probe": load_result(out)})
    verdict = row.verdict("objects recoverable")
    assert verdict is not None and verdict.answer == "binds" and verdict.value == summary["test"]["object_acc"]["mean"]
    assert verdict.floor_value("+rand") == summary["floors"]["object_acc"]["rand"]
    assert verdict.floor_value("bag of concepts") >= summary["floors"]["object_acc"]["bag"]  # the ideal bounds it
    assert row.readings[0].startswith("objects recoverable beyond a bag of concepts: binds, 100.0%")
    assert "verdict: objects recoverable beyond a bag of concepts: binds" in done.stdout
