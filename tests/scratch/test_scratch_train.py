"""Training controlled models (docs/method/09-scratch.md): object roles, seeded and resumable training, selection on
validation, config errors, and the conversion into an ordinary embedding set with probes."""

from __future__ import annotations

import errno
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import TEXT_ATTRIBUTES, TEXT_NOUNS
from bindscope.embeddings.encoders.scratch.folder import load_model
from bindscope.estimators.floors import BINDS, MARGIN
from bindscope.estimators.probes import ProbeSet, load_probes, soft_targets
from bindscope.scratch import train as train_module
from bindscope.scratch.config import load_config
from bindscope.scratch.evaluate import (
    accuracies,
    evaluate,
    evaluation_scenes,
    object_roles,
    query_probes,
    scene_embeddings,
)
from bindscope.scratch.train import Trainer, learning_rate, train_model
from bindscope.space.concepts import SceneSet

#: Tiny model settings: 40 steps, evaluations and checkpoints every 20.
TINY = {
    "steps": 40,
    "eval_every": 20,
    "checkpoint_every": 20,
    "eval_scenes": 64,
    "d_model": 16,
    "ff": 32,
    "d_out": 8,
    "layers": 1,
    "heads": 2,
    "batch_size": 64,
}
#: A 4 x 5 space (20 objects) for a model that learns something in 150 steps (PyTorch's N(0, 1) token
#: embeddings: they learn concepts fastest; the small default init pays off only over longer runs).
SMALL_SPACE = {"attribute": TEXT_ATTRIBUTES[:4], "noun": TEXT_NOUNS[:5]}
LEARN = {
    "concepts": SMALL_SPACE,
    "steps": 150,
    "eval_every": 25,
    "checkpoint_every": 1000,
    "eval_scenes": 128,
    "d_model": 32,
    "ff": 64,
    "d_out": 16,
    "layers": 1,
    "heads": 2,
    "batch_size": 64,
    "lr": 3e-3,
    "embedding_std": 1.0,
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(**overrides):
    return load_config("cpu-small", **{**TINY, **overrides})


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted tiny run."""
    out = tmp_path_factory.mktemp("reference") / "model"
    result = train_model(tiny(), out)
    assert result.status == "trained"
    return out


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A small model that learns: 150 steps at lr 3e-3 on 20 objects."""
    out = tmp_path_factory.mktemp("learned") / "model"
    result = train_model(load_config("cpu-small", **LEARN), out)
    return out, result.summary


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, learned):
    from bindscope.scratch.export import export_model

    out = tmp_path_factory.mktemp("export") / "exp"
    return export_model(learned[0], out), out


def same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


# -- object roles ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fraction", "validation", "seed"), [(0.8, 0.1, 0), (0.4, 0.1, 3), (0.55, 0.0, 1), (0.3, 0.25, 7)]
)
def test_object_roles_partition_the_objects(fraction: float, validation: float, seed: int) -> None:
    config = load_config("cpu-small", fraction=fraction, validation_fraction=validation, seed=seed)
    space = config.preset().space
    u = space.num_objects
    roles = object_roles(config, space)
    fit, val, test = (set(x.tolist()) for x in (roles.fit, roles.validation, roles.test))
    assert not (fit & val) and not (fit & test) and not (val & test)
    assert fit | val | test == set(range(u))
    n_fit = int(np.floor(fraction * u + 1e-9))  # the model trains on exactly this share: the coverage
    n_val = max(1, int(np.floor(validation * (u - n_fit) + 1e-9))) if validation > 0 else 0
    assert (len(fit), len(val), len(test)) == (n_fit, n_val, u - n_fit - n_val)
    assert len(fit) / u == pytest.approx(fraction)  # 100 objects: every fraction here is a whole count
    for ids in (roles.fit, roles.validation, roles.test):
        assert (np.diff(ids) > 0).all()
    assert roles.from_dict(json.loads(json.dumps(roles.to_dict()))).to_dict() == roles.to_dict()


def test_object_roles_nest_across_fractions() -> None:
    space = load_config("cpu-small").preset().space
    for seed in (0, 5):
        trains = []
        for fraction in (0.2, 0.4, 0.6, 0.8):
            roles = object_roles(load_config("cpu-small", fraction=fraction, seed=seed), space)
            trains.append(set(roles.fit.tolist()))
        for small, large in itertools.pairwise(trains):
            assert small < large
    a = object_roles(load_config("cpu-small", fraction=0.4, seed=0), space)
    b = object_roles(load_config("cpu-small", fraction=0.4, seed=1), space)
    assert not np.array_equal(a.fit, b.fit)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fraction": 0.005}, "leaves no train objects"),
        ({"fraction": 0.99999999999}, "leaves no held-out objects"),
        ({"concepts": SMALL_SPACE, "fraction": 0.95}, "leaves no test objects (of the 1 held-out objects"),
    ],
)
def test_object_roles_refuse_bad_fractions(overrides: dict, message: str) -> None:
    config = load_config("cpu-small", **overrides)
    with pytest.raises(BindscopeError) as err:
        object_roles(config, config.preset().space)
    assert message in str(err.value)


def test_evaluation_scenes_use_their_roles() -> None:
    config = load_config("cpu-small", eval_scenes=200)
    space = config.preset().space
    roles = object_roles(config, space)
    sets = evaluation_scenes(config, space, roles)
    ids = {k: space.object_ids(v) for k, v in sets.items()}
    assert np.isin(ids["test"], roles.test).all()
    assert np.isin(ids["train"], roles.fit).all()
    assert np.isin(ids["validation"], np.concatenate([roles.fit, roles.validation])).all()
    assert np.isin(ids["validation"], roles.validation).any(1).all()
    assert all(len(v) <= 200 for v in sets.values())


# -- training -------------------------------------------------------------------------------------
def test_seeded_runs_are_byte_identical(reference: Path, tmp_path: Path) -> None:
    again = train_model(tiny(), tmp_path / "again")
    assert again.status == "trained"
    for name in ("model.safetensors", "final.safetensors"):
        assert same_bytes(reference / name, tmp_path / "again" / name), name
    assert (reference / "metrics.csv").read_text() == (tmp_path / "again" / "metrics.csv").read_text()
    other = train_model(tiny(seed=1), tmp_path / "other")
    assert not same_bytes(reference / "final.safetensors", tmp_path / "other" / "final.safetensors")
    assert other.summary["seed"] == 1


class Stop(KeyboardInterrupt):
    pass


def interrupt_at(step: int):
    def on_step(s: int) -> None:
        if s == step:
            raise Stop

    return on_step


def test_a_resumed_run_equals_an_uninterrupted_one(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "model"
    work = tmp_path / ".model.training"
    with pytest.raises(KeyboardInterrupt):
        train_model(tiny(), out, on_step=interrupt_at(30))
    assert not out.exists() and work.is_dir()
    assert sorted(p.name for p in work.glob("step-*")) == ["step-00000020"]
    resumed = train_model(tiny(), out)
    assert resumed.status == "resumed"
    assert not work.exists()
    for name in ("model.safetensors", "final.safetensors"):
        assert same_bytes(reference / name, out / name), name
    for name in ("metrics.csv", "evaluation.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(reference / name), pd.read_csv(out / name))
    ref_summary = json.loads((reference / "summary.json").read_text())
    for key in ("selected_step", "selected", "final", "objects"):
        assert resumed.summary[key] == ref_summary[key], key


@pytest.fixture(scope="module")
def misaligned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run checkpointed every 10 steps (the loss is logged every 20) interrupted at 15 and resumed,
    and the same run uninterrupted."""
    root = tmp_path_factory.mktemp("misaligned")
    config = tiny(checkpoint_every=10)
    with pytest.raises(KeyboardInterrupt):
        train_model(config, root / "resumed", on_step=interrupt_at(15))
    assert train_model(config, root / "resumed").status == "resumed"
    train_model(config, root / "straight")
    return root / "resumed", root / "straight"


def test_resuming_between_log_rows_keeps_the_weights(misaligned) -> None:
    resumed, straight = misaligned
    for name in ("model.safetensors", "final.safetensors"):
        assert same_bytes(resumed / name, straight / name), name
    pd.testing.assert_frame_equal(pd.read_csv(resumed / "evaluation.csv"), pd.read_csv(straight / "evaluation.csv"))


def test_resuming_between_log_rows_keeps_the_training_log(misaligned) -> None:
    resumed, straight = misaligned
    pd.testing.assert_frame_equal(pd.read_csv(resumed / "metrics.csv"), pd.read_csv(straight / "metrics.csv"))


def test_a_short_run_learns(learned) -> None:
    out, summary = learned
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.step) == [25, 50, 75, 100, 125, 150]
    assert metrics.loss.iloc[0] > metrics.loss.iloc[-1] + 0.5
    assert metrics.object_loss.iloc[0] > metrics.object_loss.iloc[-1]
    assert metrics.concept_loss.iloc[0] > metrics.concept_loss.iloc[-1]
    chance = summary["chance_test_object_acc"]
    assert 0 < chance < 0.05
    test_scenes = SceneSet(config_space(), evaluation_scenes_of_learn()["test"])
    assert summary["bag_of_concepts_test_object_acc"] == 1 - test_scenes.binding_ambiguous().mean()
    assert 0 <= summary["final"]["test_binding_object_acc"] <= 1
    assert summary["final"]["train_object_acc"] > max(5 * chance, 0.1)
    assert summary["final"]["train_concept_acc"] > 0.3
    assert summary["objects"] == {"fit": 16, "validation": 1, "test": 3} and summary["coverage"] == 0.8
    # every number of the selected step has its floors beside it: a bag of concepts and chance
    assert set(summary["floors"]) == set(summary["selected"])
    assert summary["floors"]["test_object_acc"] == {
        "bag": summary["bag_of_concepts_test_object_acc"],
        "chance": chance,
    }
    assert summary["floors"]["train_concept_acc"]["bag"] == 1.0
    assert summary["floors"]["test_binding_object_acc"]["bag"] == 0.0
    clears = summary["selected"]["test_object_acc"] - summary["floors"]["test_object_acc"]["bag"]
    assert summary["binding"]["clearance_min"] == pytest.approx(clears)
    assert summary["binding"]["reading"] == (BINDS if clears >= MARGIN else summary["binding"]["reading"])
    assert summary["selection"] == "validation" and summary["selected_on"] == "validation_object_acc"
    assert summary["not_comparable"] == []
    evaluation = pd.read_csv(out / "evaluation.csv")
    assert {"bag", "chance"} <= set(evaluation.columns) and evaluation[["bag", "chance"]].notna().all().all()
    assert summary["steps"] == 150 and summary["seconds"] > 0


def config_space():
    return load_config("cpu-small", **LEARN).preset().space


def evaluation_scenes_of_learn() -> dict[str, np.ndarray]:
    config = load_config("cpu-small", **LEARN)
    space = config.preset().space
    return evaluation_scenes(config, space, object_roles(config, space))


def test_accuracy_on_scenes_needing_binding_known_answers() -> None:
    """A bag of concepts scores exactly the scenes that need no binding; an object lookup scores all."""
    space = config_space()
    pairs = [[[0, 0], [1, 1]], [[0, 0], [0, 1]], [[0, 0], [1, 0]], [[2, 3], [2, 3]], [[3, 4], [1, 2]]]
    scenes = SceneSet(space, np.array(pairs))  # swap, shared attribute, shared noun, one object twice, swap
    ambiguous = scenes.binding_ambiguous()
    assert ambiguous.tolist() == [True, False, False, False, True]
    counts = scenes.value_counts()
    bag = torch.from_numpy(np.concatenate(counts, axis=1).astype(np.float32))  # [N, sum V]: the values present
    values = torch.from_numpy(space.all_objects())
    offsets = torch.tensor([0, space.sizes[0]])
    object_probes = torch.zeros(space.num_objects, bag.shape[1]).scatter_(1, values + offsets, 1.0)
    concept_probes = dict(zip(space.concepts, torch.split(torch.eye(bag.shape[1]), list(space.sizes))))
    bag_acc = accuracies(bag, {**concept_probes, "object": object_probes}, scenes)
    assert bag_acc["object_acc"] == pytest.approx(1 - ambiguous.mean()) and bag_acc["binding_object_acc"] == 0.0
    assert bag_acc["concept_acc"] == 1.0
    lookup = torch.from_numpy(soft_targets(scenes)["object"])  # one dimension per object
    by_object = {c: torch.nn.functional.one_hot(values[:, i]).T.float() for i, c in enumerate(space.concepts)}
    lookup_probes = {**by_object, "object": torch.eye(space.num_objects)}
    lookup_acc = accuracies(lookup, lookup_probes, scenes)
    assert lookup_acc["object_acc"] == 1.0 and lookup_acc["binding_object_acc"] == 1.0
    assert lookup_acc["concept_acc"] == 1.0
    assert "binding_object_acc" not in accuracies(lookup[~ambiguous], lookup_probes, scenes.subset(~ambiguous))


def test_selection_is_on_validation(learned) -> None:
    out, summary = learned
    table = pd.read_csv(out / "evaluation.csv")
    val = table[(table.split == "validation") & (table.metric == "object_acc")].sort_values("step")
    assert list(val.step) == [25, 50, 75, 100, 125, 150]
    best = val.value.max()
    assert summary["selected_step"] == int(val[val.value == best].step.iloc[0])
    assert summary["selected_on"] == "validation_object_acc"
    assert summary["selected"]["validation_object_acc"] == best
    # model.safetensors holds the weights of the selected step: they score what was logged there
    model, record = load_model(out)
    assert record["selected_step"] == summary["selected_step"]
    config = load_config("cpu-small", **LEARN)
    space = config.preset().space
    roles = object_roles(config, space)
    again = evaluate(model, space, evaluation_scenes(config, space, roles), "cpu")
    for key, value in summary["selected"].items():
        assert again[key] == pytest.approx(value, abs=1e-9), key


def test_selection_never_looks_at_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scripted accuracies: validation peaks (tied) at steps 20 and 30, test at steps 10 and 40."""
    validation = iter([0.2, 0.6, 0.6, 0.4])
    test = iter([0.9, 0.1, 0.3, 0.95])
    snapshots = []
    real = train_module.evaluate

    def scripted(model, space, sets, device):
        out = real(model, space, sets, device)
        out["validation_object_acc"], out["test_object_acc"] = next(validation), next(test)
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return out

    monkeypatch.setattr(train_module, "evaluate", scripted)
    out = tmp_path / "model"
    result = train_model(tiny(eval_every=10), out)
    assert len(snapshots) == 4
    assert result.summary["selected_step"] == 20  # first of the tie, not test's best (40)
    assert result.summary["selected"]["validation_object_acc"] == 0.6
    assert result.summary["selected"]["test_object_acc"] == 0.1
    assert result.summary["final"]["test_object_acc"] == 0.95
    from safetensors.torch import load_file

    selected, final = load_file(str(out / "model.safetensors")), load_file(str(out / "final.safetensors"))
    for k, v in snapshots[1].items():
        assert torch.equal(selected[k], v), k
        assert torch.equal(final[k], snapshots[3][k]), k
    assert not all(torch.equal(selected[k], final[k]) for k in selected)


def test_without_validation_objects_the_last_step_is_kept(tmp_path: Path) -> None:
    result = train_model(tiny(validation_fraction=0.0), tmp_path / "model")
    assert result.summary["selected_on"] == "last step" and result.summary["selected_step"] == 40
    assert result.summary["objects"]["validation"] == 0
    assert same_bytes(tmp_path / "model" / "model.safetensors", tmp_path / "model" / "final.safetensors")


def test_finished_and_conflicting_runs(reference: Path, tmp_path: Path) -> None:
    stamp = (reference / "model.safetensors").stat().st_mtime_ns
    again = train_model(tiny(), reference)
    assert again.status == "existing"
    assert again.summary == json.loads((reference / "summary.json").read_text())
    assert (reference / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(BindscopeError) as err:
        train_model(tiny(lr=5e-4), reference)
    assert "another config" in str(err.value) and "--overwrite" in str(err.value)
    assert (reference / "model.safetensors").stat().st_mtime_ns == stamp
    # an unfinished run of one config refuses another config, and the first one can still finish
    out = tmp_path / "model"
    with pytest.raises(KeyboardInterrupt):
        train_model(tiny(), out, on_step=interrupt_at(25))
    with pytest.raises(BindscopeError) as err:
        train_model(tiny(steps=60), out)
    assert "unfinished run of another config" in str(err.value) and "steps" in str(err.value)
    assert "--overwrite" in str(err.value)
    assert train_model(tiny(), out).status == "resumed"


def test_overwrite_replaces_a_model_of_another_config(tmp_path: Path) -> None:
    out = tmp_path / "model"
    train_model(tiny(steps=20), out)
    result = train_model(tiny(steps=20, seed=2), out, overwrite=True)
    assert result.status == "trained"
    assert json.loads((out / "config.json").read_text())["config"]["seed"] == 2


# -- configs --------------------------------------------------------------------------------------
def test_builtin_configs_load() -> None:
    small = load_config("cpu-small")
    assert small.preset().space.num_objects == 100 and small.max_objects == 2
    paper = load_config("paper")
    assert (paper.d_model, paper.layers, paper.heads, paper.d_out, paper.lr) == (256, 6, 4, 64, 3e-5)
    assert paper.preset().space.num_objects == 400
    assert load_config("cpu-small", steps=7, seed=None).steps == 7  # None overrides are ignored


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 30, "heads": 4}, "d_model (30) must be a multiple of heads (4)"),
        ({"space": "clevr"}, "give exactly one of 'space'"),
        ({"fraction": 1.5}, "fraction"),
        ({"eval_objects": 3}, "eval_objects (3) cannot exceed max_objects (2)"),
    ],
)
def test_bad_overrides(overrides: dict, message: str) -> None:
    with pytest.raises(BindscopeError) as err:
        load_config("cpu-small", **overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_config_files(tmp_path: Path) -> None:
    with pytest.raises(BindscopeError) as err:
        load_config("nope")
    assert "unknown scratch config 'nope'" in str(err.value) and "cpu-small, paper" in str(err.value)
    good = tmp_path / "good.yaml"
    good.write_text("name: mine\nconcepts:\n  color: [red, blue, green]\n  shape: [cube, ball]\nsteps: 10\n")
    config = load_config(good, steps=12)
    assert (config.name, config.steps, config.preset().space.sizes) == ("mine", 12, (3, 2))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("concepts:\n  color: [red, blue]\ncolour_count: 3\n")
    with pytest.raises(BindscopeError) as err:
        load_config(unknown)
    assert "colour_count" in str(err.value) and str(unknown) in str(err.value)
    broken = tmp_path / "broken.yaml"
    broken.write_text("concepts: [unclosed\n")
    with pytest.raises(BindscopeError, match="malformed YAML in"):
        load_config(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(BindscopeError, match="must be a mapping"):
        load_config(listing)
    with pytest.raises(BindscopeError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


# -- conversion into an embedding set -------------------------------------------------------------
def test_export_round_trip(learned, exported) -> None:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import load_embeddings

    model_dir, _ = learned
    result, out = exported
    model, record = load_model(model_dir)
    ds = load_dataset(result.dataset)
    u = ds.space.num_objects
    assert u == 20 and len(ds) == u * u
    assert ds.space.to_dict() == SMALL_SPACE
    emb = load_embeddings(result.embeddings, ds)
    assert emb.array.shape == (u * u, 16) and emb.manifest["model_spec"] == f"scratch:{model_dir.resolve()}"
    expected = scene_embeddings(model, ds.scenes.scenes, "cpu").numpy()
    np.testing.assert_allclose(emb.array, expected, rtol=1e-5, atol=1e-6)
    probes = query_probes(model, ds.space, "cpu")
    weights, mean, meta = load_probes(result.probes)
    assert mean is None and set(weights) == set(probes) == {"attribute", "noun", "object"}
    for name, w in probes.items():
        np.testing.assert_allclose(weights[name], w.numpy(), rtol=1e-6, atol=1e-7)
    assert meta["selected_step"] == record["selected_step"]
    export = json.loads((out / "export.json").read_text())
    assert export["scenes"] == u * u and export["control"] is True and export["model"] == str(model_dir.resolve())


def fit_pair_rows(learned, exported):
    """The exported rows whose two objects are both fit objects, their scenes and embeddings, and the model."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import load_embeddings
    from bindscope.scratch.train import roles_of

    model_dir, _ = learned
    result, _ = exported
    model, record = load_model(model_dir)
    ds = load_dataset(result.dataset)
    fit = roles_of(record).fit
    rows = np.flatnonzero(np.isin(ds.scenes.object_ids(), fit).all(1))
    assert len(rows) == len(fit) ** 2
    scenes = SceneSet(ds.space, ds.scenes.scenes[rows])
    return model, scenes, load_embeddings(result.embeddings, ds).array[rows]


def assert_same_accuracy(probe: ProbeSet, model, scenes: SceneSet, x: np.ndarray) -> None:
    correct = probe.correct(x, soft_targets(scenes))
    expected = accuracies(torch.from_numpy(x), query_probes(model, scenes.space, "cpu"), scenes)
    assert expected["object_acc"] > 0.05  # the comparison means something
    tol = 1.5 / len(x)  # one near-tie flipped by float rounding at most
    assert float(correct["object"].mean()) == pytest.approx(expected["object_acc"], abs=tol)
    for concept in scenes.space.concepts:
        assert float(correct[concept].mean()) == pytest.approx(expected[f"acc_{concept}"], abs=tol)


def test_exported_probes_score_like_the_training_evaluation(learned, exported) -> None:
    model, scenes, x = fit_pair_rows(learned, exported)
    weights, mean, meta = load_probes(exported[0].probes)
    probe = ProbeSet.from_weights(weights, mean, center=meta["center"], normalize=meta["normalize"])
    assert_same_accuracy(probe, model, scenes, x)


def test_exported_probes_load_as_a_probe_set(learned, exported) -> None:
    model, scenes, x = fit_pair_rows(learned, exported)
    probe = ProbeSet.load(exported[0].probes)
    assert set(probe.names_) == {"attribute", "noun", "object"}
    assert_same_accuracy(probe, model, scenes, x)


def test_export_control_and_again(learned, exported) -> None:
    from bindscope.embeddings.store import load_embeddings
    from bindscope.scratch.export import export_model

    model_dir, _ = learned
    result, out = exported
    assert result.control is not None and result.control.name == "scene-rand"
    control = load_embeddings(result.control)
    emb = load_embeddings(result.embeddings)
    assert control.manifest["model_spec"] == emb.manifest["model_spec"] + "+rand"
    assert control.array.shape == emb.array.shape
    assert not np.allclose(control.array, emb.array, atol=1e-3)
    files = [result.embeddings / "embeddings.npy", result.control / "embeddings.npy", result.dataset / "manifest.json"]
    stamps = [p.stat().st_mtime_ns for p in files]
    again = export_model(model_dir, out)
    assert again == result
    assert [p.stat().st_mtime_ns for p in files] == stamps
    np.testing.assert_array_equal(load_embeddings(again.embeddings).array, emb.array)


def test_export_refuses_another_models_folder(reference: Path, exported, tmp_path: Path) -> None:
    from bindscope.scratch.export import export_model

    _, out = exported
    with pytest.raises(BindscopeError) as err:
        export_model(reference, out)
    assert "holds an export of" in str(err.value) and "--overwrite" in str(err.value)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="holds files that are not a bindscope export; choose another --out"):
        export_model(reference, other)
    with pytest.raises(BindscopeError, match="--overwrite replaces only a scratch model's export that bindscope wrote"):
        export_model(reference, other, overwrite=True)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_scratch_models_embed_only_their_own_concept_space(learned, clevr_dir: Path, tmp_path: Path) -> None:
    from bindscope.embeddings.embed import embed_dataset

    model_dir, _ = learned
    with pytest.raises(BindscopeError) as err:
        embed_dataset(clevr_dir, f"scratch:{model_dir}", modality="text", out=tmp_path / "emb")
    message = str(err.value)
    assert "was trained on" in message and "bindscope scratch export" in message and "\n" not in message
    assert not (tmp_path / "emb").exists()


def test_load_encoder_and_layers(learned) -> None:
    from bindscope.embeddings.encoders import load_encoder

    model_dir, _ = learned
    model, _ = load_model(model_dir)
    space = load_config("cpu-small", **LEARN).preset().space
    scenes = SceneSet.enumerate(space, 2).scenes[:50].astype(np.int64)
    final = load_encoder(f"scratch:{model_dir}")
    out = final.encode("text", scenes, batch_size=16)
    assert out.shape == (50, 16) and out.dtype == np.float32 and final.dim("text") == 16
    np.testing.assert_allclose(out, scene_embeddings(model, scenes, "cpu").numpy(), rtol=1e-5, atol=1e-6)
    last = load_encoder(f"scratch:{model_dir}", layer=1)
    minus = load_encoder(f"scratch:{model_dir}", layer=-1)
    zero = load_encoder(f"scratch:{model_dir}", layer=0)
    a, b, z = (e.encode("text", scenes) for e in (last, minus, zero))
    assert a.shape == b.shape == z.shape == (50, 32) and last.dim("text") == 32
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, z)
    with torch.no_grad():
        tokens = model.vocab.scene_tokens(torch.from_numpy(scenes))
        np.testing.assert_allclose(a, model.scene.hidden(tokens, 1).numpy(), rtol=1e-5, atol=1e-6)
    for bad in (2, -3):
        with pytest.raises(BindscopeError, match=f"--layer {bad} is out of range"):
            load_encoder(f"scratch:{model_dir}", layer=bad)
    with pytest.raises(BindscopeError, match="reads scenes as value indices"):
        final.encode("text", ["a red circle and a blue square"])
    with pytest.raises(BindscopeError, match="do not fit"):
        final.encode("text", np.zeros((2, 3, 2), dtype=np.int64))


def test_a_shared_encoder_model_saves_and_loads(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    result = train_model(tiny(shared_encoder=True, steps=20), out)
    assert result.summary["parameters"]["scene"] == result.summary["parameters"]["query"]
    model, record = load_model(out)
    assert record["config"]["shared_encoder"] is True and model.query is model.scene
    assert train_model(tiny(shared_encoder=True, steps=20), out).status == "existing"


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [("linear", [0.1, 1.0, 1.0, 0.5, 1 / 90]), ("constant", [0.1, 1.0, 1.0, 1.0, 1.0])],
)
def test_learning_rate_schedules(schedule: str, expected: list[float]) -> None:
    config = tiny(steps=100, lr=1.0, warmup_fraction=0.1, schedule=schedule)
    rates = [learning_rate(config, step) for step in (0, 9, 10, 55, 99)]
    assert rates == pytest.approx(expected)


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_the_concept_weight_scales_the_concept_loss(weight: float) -> None:
    trainer = Trainer(tiny(concept_weight=weight))
    for _ in range(20):
        trainer.train_step()
    row = trainer.log_rows[-1]
    assert row["concept_loss"] > 0.1
    assert row["loss"] == pytest.approx(weight * row["concept_loss"] + row["object_loss"], rel=1e-5)


def test_a_checkpoint_the_disk_refused_leaves_no_half_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bindscope.scratch import checkpoint

    def full(path: Path, tensors: dict) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "save_weights", full)
    with pytest.raises(OSError):
        checkpoint.write_checkpoint(tmp_path, 20, {"model": {"w": torch.zeros(2)}}, {"step": 20})
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_keeps_only_finished_runs_of_its_work_folder(tmp_path: Path) -> None:
    """What dead writers left beside the runs (a temporary record, a run's lock, staging or training state) is not
    copied into the result; each run's own mark is."""
    import shutil

    from bindscope.scratch.sweep import _not_runs

    work = tmp_path / ".out.sweep"
    (work / "f0.5-s0").mkdir(parents=True)
    for name in ("f0.5-s0/.bindscope.json", "f0.5-s0/summary.json", "sweep.json", ".sweep.json.ab12cd34.tmp"):
        (work / name).write_text("{}")
    (work / ".f0.8-s0.lock").write_text("")
    for name in (".f0.8-s0.training", ".f0.8-s0.ab12cd34.partial"):
        (work / name).mkdir()
    shutil.copytree(work, tmp_path / "runs", ignore=_not_runs(work))
    copied = sorted(p.relative_to(tmp_path / "runs").as_posix() for p in (tmp_path / "runs").rglob("*"))
    assert copied == ["f0.5-s0", "f0.5-s0/.bindscope.json", "f0.5-s0/summary.json"]


def test_an_export_killed_writing_its_mark_leaves_nothing_after_the_rerun(reference: Path, tmp_path: Path) -> None:
    """The mark is the export folder's first file: a kill there leaves its temporary file in a folder that is not
    yet marked (so the next lock does not clean inside it); the export cleans it once marked."""
    from bindscope.scratch.export import export_model

    out = tmp_path / "exp"
    out.mkdir()
    (out / "..bindscope.json.ab12cd34.tmp").write_text('{"written_by"')
    export_model(reference, out, control=False)
    assert [p.name for p in out.rglob(".*") if p.name != ".bindscope.json"] == []
