"""The real ``bindscope`` command in a subprocess: outputs, files, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_checks import assert_one_line_error


def test_help_reads_well(run_cli) -> None:
    top = run_cli("--help")
    assert top.returncode == 0
    for word in ("presets", "dataset", "embeddings", "demo"):
        assert word in top.stdout
    build = run_cli("dataset", "build", "--help")
    assert build.returncode == 0
    assert "Preset name" in build.stdout and "--out" in build.stdout and "--overwrite" in build.stdout
    imp = run_cli("embeddings", "import", "--help")
    assert "--modality" in imp.stdout and "row i embeds scene i" in imp.stdout
    split = run_cli("dataset", "split", "--help")
    assert "--fractions" in split.stdout and "--validation" in split.stdout


def test_version(run_cli) -> None:
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("bindscope ")


def test_presets_table(run_cli) -> None:
    out = run_cli("presets")
    assert out.returncode == 0
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert "576" in lines["clevr"] and "576" in lines["clevr2d"]
    assert "160,400" in lines["text"] and "7,392" in lines["pug_spare"]


def test_build_info_split_import(run_cli, tmp_path: Path) -> None:
    ds = tmp_path / "clevr"
    built = run_cli("dataset", "build", "clevr", "--out", ds, "--no-images")
    assert built.returncode == 0, built.stderr
    assert "576" in built.stdout and "cube cylinder sphere" in built.stdout
    assert json.loads((ds / "manifest.json").read_text())["num_scenes"] == 576

    info = run_cli("dataset", "info", ds)
    assert info.returncode == 0 and "0 / 576 rendered" in info.stdout

    split = run_cli("dataset", "split", ds, "--fractions", "0.5", "--seed", "3", "--validation", "0.1")
    assert split.returncode == 0, split.stderr
    saved = json.loads((ds / "splits" / "object_seed3_f0.5.json").read_text())
    assert saved["seed"] == 3 and saved["fraction"] == 0.5 and len(saved["train_objects"]) == 12
    assert saved["validation"] and not set(saved["validation"]) & set(saved["train_only"])
    assert saved["order"] == "random"
    covering = run_cli(
        "dataset", "split", ds, "--fractions", "0.4", "--object-order", "covering", "--out", tmp_path / "c"
    )
    assert covering.returncode == 0, covering.stderr
    saved = json.loads((tmp_path / "c" / "object_seed0_f0.4.json").read_text())
    assert saved["order"] == "covering" and len(saved["train_objects"]) == 9
    from bindscope.data.datasets import load_dataset

    values = load_dataset(ds).scenes.space.object_values(saved["train_objects"])
    assert [len(set(v)) for v in values.T] == [8, 3]  # every colour and shape seen

    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(576, 8)))
    imp = run_cli(
        "embeddings",
        "import",
        ds,
        tmp_path / "x.npy",
        "--name",
        "planted",
        "--modality",
        "image",
        "--out",
        tmp_path / "emb",
    )
    assert imp.returncode == 0, imp.stderr
    assert "576 x 8" in imp.stdout
    assert np.load(tmp_path / "emb" / "embeddings.npy").dtype == np.float32
    info = run_cli("embeddings", "info", tmp_path / "emb")
    assert info.returncode == 0 and "planted" in info.stdout


def smaller(config: dict) -> dict:
    """The demo's config with its sizes cut (the same datasets, model, scratch model and analyses): subsamples
    that keep every object in every slot, a shorter scratch model on 5 x 5 of its concepts, shorter fits."""
    from bindscope.data.presets import TEXT_ATTRIBUTES, TEXT_NOUNS

    sizes = {"text": 400, "clevr": 264, "clevr2d": 264}  # text: 400 pair scenes (each object in both slots)
    for dataset in config["datasets"]:
        dataset["max_scenes"] = sizes[dataset["preset"]]
        if dataset["preset"] == "clevr2d":  # the images the CLIPs in miniature train on, drawn small
            dataset["image_size"] = "32"
    token, *image_text = config["scratch"]
    token["steps"] = 40
    token["overrides"]["concepts"] = {"attribute": list(TEXT_ATTRIBUTES[:5]), "noun": list(TEXT_NOUNS[:5])}
    for entry in image_text:
        entry["steps"] = 20
        tiny = {"channels": 8, "d_model": 16, "heads": 2, "d_out": 16, "batch_size": 16}
        entry["overrides"] = {**entry.get("overrides", {}), **tiny}
    config["analyses"]["complexity"]["budget"]["epochs"] = 20
    config["analyses"]["geometry"]["fractions"] = [0.6]
    return config


@pytest.mark.duration_limit(
    100,
    reason="the README's main job end to end in one run (three datasets, MiniLM and its control, a token-level "
    "scratch model, two image-text scratch models trained on rendered images, every analysis on each, the report) "
    "and again as a no-op (59 s alone here); its parts are tested small elsewhere",
)
def test_demo_runs_the_main_job_on_minilm(run_cli, tmp_path: Path) -> None:
    """`bindscope demo` is `bindscope run` on the shipped config it prints; that config, made smaller, runs the
    main job end to end (datasets, MiniLM and its +rand control, the scratch model, every analysis, the report)."""
    import yaml

    from bindscope.pipeline.demo import demo_config_path
    from browser import chromium, layout

    printed = run_cli("demo", "--quick", "--print-config")
    assert printed.returncode == 0, printed.stderr
    shipped = yaml.safe_load(printed.stdout)
    assert shipped == yaml.safe_load(demo_config_path(quick=True).read_text())
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    refused = run_cli("demo", "--quick", "--out", tmp_path / "mine", "--quiet")  # the demo runs into its --out
    assert_one_line_error(refused, "holds files that are not a bindscope run; choose another --out")
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(smaller(shipped)))
    demo = ("run", tmp_path / "demo.yaml")
    out = run_cli(*demo, "--out", tmp_path / "run", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "dataset      clevr: 264 scenes (computed, " in out.stdout and "dataset      text" in out.stdout
    assert "embeddings   clevr/minilm-text+rand (embedded, " in out.stdout
    for step in ("probe", "decompose", "intervene", "complexity", "geometry"):
        assert (tmp_path / "run" / "results" / "clevr" / "minilm-text" / step / "summary.json").is_file()
    probe = json.loads((tmp_path / "run" / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").read_text())
    assert probe["controls"]["rand"], "the +rand embeddings are found as the control"
    assert "clevr / minilm-text:\n  objects recoverable beyond a bag of concepts: " in out.stdout
    assert (tmp_path / "run" / "scratch" / "small-f0.8" / "model").is_dir()
    for name in ("clip-swapfree", "clip-hardneg"):  # both halves of the paper: images and captions of trained models
        assert (tmp_path / "run" / "results" / "clevr2d" / name / "crossmodal" / "summary.json").is_file()
        assert (tmp_path / "run" / "results" / "clevr2d" / f"{name}-image" / "probe" / "summary.json").is_file()
    assert (tmp_path / "run" / "report.html").is_file() and "report: " in out.stdout
    with chromium(tmp_path / "chrome", 1400, 900) as driver:  # the demo's card, every column, fits the window
        fit = layout(driver, tmp_path / "run" / "report.html")
    assert len(fit["cards"]) > 1 and all(box["content"] <= box["shown"] for box in fit["cards"]), fit
    assert fit["page"] <= fit["visible"] and not fit["scrolling"], fit
    stamp = (tmp_path / "run" / "results" / "clevr" / "minilm-text" / "complexity" / "summary.json").stat().st_mtime_ns
    again = run_cli(*demo, "--out", tmp_path / "run", "--quiet")  # finished steps are no-ops
    assert again.returncode == 0, again.stderr
    assert "(computed, " not in again.stdout.split("report")[0] and "(embedded, " not in again.stdout
    path = tmp_path / "run" / "results" / "clevr" / "minilm-text" / "complexity" / "summary.json"
    assert path.stat().st_mtime_ns == stamp


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bindscope.data.datasets import build_dataset

    out = tmp_path_factory.mktemp("cli") / "clevr"
    build_dataset("clevr", out, images=False)
    return out


def test_error_unknown_preset(run_cli, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("dataset", "build", "clevr3d", "--out", tmp_path / "d"),
        "unknown preset 'clevr3d' (did you mean clevr2d?); choose one of clevr, clevr-rel, clevr2d, clevr2d-count, "
        "clevr2d-rel, pug_spare, text, text-rel",
    )
    assert not (tmp_path / "d").exists()


def test_error_malformed_yaml(run_cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\nconcepts: {color: [red, blue\n")
    assert_one_line_error(
        run_cli("dataset", "build", tmp_path / "bad.yaml", "--out", tmp_path / "d"), "malformed YAML in"
    )


def test_error_invalid_yaml_setting(run_cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\nconcepts: {color: [red, red]}\nobjects_per_scene: 2\n")
    assert_one_line_error(
        run_cli("dataset", "build", tmp_path / "bad.yaml", "--out", tmp_path / "d"),
        "concept 'color' lists value(s) 'red' more than once",
    )


@pytest.mark.parametrize("fraction", ["0", "1", "1.5", "-0.2"])
def test_error_fraction_outside_unit_interval(run_cli, built: Path, tmp_path: Path, fraction: str) -> None:
    result = run_cli("dataset", "split", built, "--fractions", fraction, "--out", tmp_path / "s")
    assert_one_line_error(result, f"fraction must be in (0, 1) (exclusive), got {float(fraction)}")
    assert not (tmp_path / "s").exists()


def test_error_validation_fraction(run_cli, built: Path, tmp_path: Path) -> None:
    result = run_cli("dataset", "split", built, "--validation", "2", "--out", tmp_path / "s")
    assert_one_line_error(result, "validation fraction must be in (0, 1)")


def test_error_wrong_length_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((500, 4)))
    result = run_cli(
        "embeddings", "import", built, tmp_path / "x.npy", "--name", "m", "--modality", "image", "--out", tmp_path / "e"
    )
    assert_one_line_error(result, "has 500 rows but the dataset has 576 scenes")
    assert not (tmp_path / "e").exists()


def test_error_nan_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    x = np.zeros((576, 4))
    x[10, 2] = np.nan
    np.save(tmp_path / "x.npy", x)
    result = run_cli(
        "embeddings", "import", built, tmp_path / "x.npy", "--name", "m", "--modality", "text", "--out", tmp_path / "e"
    )
    assert_one_line_error(result, "contains NaN values in 1 row(s), first at row 10")
    assert not (tmp_path / "e").exists()


def test_error_non_2d_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((576, 2, 2)))
    result = run_cli(
        "embeddings", "import", built, tmp_path / "x.npy", "--name", "m", "--modality", "image", "--out", tmp_path / "e"
    )
    assert_one_line_error(result, "must be 2-D [num_scenes, dim], got 3-D shape (576, 2, 2)")


def test_error_missing_dataset(run_cli, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("dataset", "info", tmp_path / "nope"), "does not exist")


def test_bad_option_value_is_a_usage_error(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((576, 4)))
    result = run_cli(
        "embeddings", "import", built, tmp_path / "x.npy", "--name", "m", "--modality", "audio", "--out", tmp_path / "e"
    )
    assert_one_line_error(result, "Invalid value for '--modality'", status=2)
    assert "'audio' is not one of 'image', 'text'" in result.stderr
    assert "see 'bindscope embeddings import --help'" in result.stderr


def test_missing_option_is_a_usage_error(run_cli) -> None:
    assert_one_line_error(run_cli("dataset", "build", "clevr"), "Missing option '--out'", status=2)
    assert_one_line_error(run_cli("frobnicate"), "No such command 'frobnicate'", status=2)


@pytest.fixture(scope="module")
def planted_emb(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Path:
    """Object-additive planted embeddings with a +rand sibling, imported through the API."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("emb")
    scenes = load_dataset(built).scenes
    models = [("model", "object_additive", "hf:planted/x"), ("model_rand", "random", "hf:planted/x+rand")]
    for name, kind, spec in models:
        np.save(root / f"{name}.npy", planted_embeddings(scenes, kind, dim=64, noise=0.1, seed=0))
        import_embeddings(built, root / f"{name}.npy", name=name, modality="image", out=root / name, model_spec=spec)
    return root / "model"


def test_probe_command(run_cli, planted_emb: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe"
    grid = ("--strengths", "1e-3,1e-2,1e-1", "--shrinkage", "0", "--folds", "3")  # the default's options, shortened
    result = run_cli("probe", planted_emb, "--out", out, "--seeds", "0,1", *grid)
    assert result.returncode == 0, result.stderr
    assert "base" in result.stdout and "rand" in result.stdout and "chance" in result.stdout
    assert "seeds 0, 1; wrote" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test"]["object_acc"]["mean"] > 0.9 and "concept_acc" in summary["train"]
    assert summary["test"]["object_acc"]["n_seeds"] == 2
    assert summary["chance"]["object_acc"] == pytest.approx((552 / 276 + 24 / 24) / 576, abs=5e-4)  # test split
    assert summary["controls"]["rand"]["test"]["object_acc"]["mean"] < 0.1
    table = pd.read_parquet(out / "results.parquet")
    keys = ["analysis", "variant", "control", "group", "metric", "seed", "value"]
    identity = ["dataset", "dataset_hash", "model", "modality", "layer"]  # what the numbers were measured on
    assert list(table.columns) == [*keys, "n_cases", "ci_low", "ci_high", *identity]  # each rate's n and interval
    assert set(table.dataset_hash) == {summary["inputs"]["dataset"]["hash"]} and set(table.model) == {"hf:planted/x"}
    assert sorted(table.seed.unique()) == [0, 1]
    assert len(pd.read_csv(out / "results.csv")) == len(table)
    probe = json.loads((out / "probes" / "seed0" / "probe.json").read_text())
    assert probe["names"] == ["object", "color", "shape"]
    assert np.load(out / "probes" / "seed1" / "object.npy").shape == (24, 64)
    assert summary["format"] == {"name": "bindscope-result", "version": 3} and summary["analysis"] == "probe"
    assert summary["inputs"]["control"]["path"].endswith("model_rand") and summary["settings"]["seeds"] == [0, 1]
    assert summary["seeds"] == [0, 1] and len(summary["content_key"]) == 64
    # the default: the penalised fit, its penalty cross-validated on the training scenes
    assert summary["solver"]["0"]["object"] == "regularised" and summary["warnings"] == []
    again = run_cli("probe", planted_emb, "--out", out)
    assert_one_line_error(again, "already exists and is not empty; choose another --out or pass --overwrite")


def test_decompose_command(run_cli, planted_emb: Path, tmp_path: Path) -> None:
    out = tmp_path / "dec"
    result = run_cli(
        "decompose", planted_emb, "--out", out, "--seeds", "0,1", "--optimizer", "lbfgs", "--test-fraction", "0.01"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    models = {"object_additive", "concept_additive", "object_bag", "concept_bag", "object_minus_concept"}
    assert set(summary["r2"]["test"]) == models  # the four models and the gap object - concept
    assert summary["r2"]["train"]["object_additive"]["mean"] > 0.95
    assert set(summary["subtraction"]) == {"base", "objects", "objects_perm", "concepts", "concepts_perm"}
    assert summary["controls"]["rand"]["r2"]["test"]["object_additive"]["mean"] < 0.2
    assert summary["settings"]["test_fraction"] == 0.01
    table = pd.read_parquet(out / "results.parquet")
    assert set(table.part) == {"additive", "subtraction"}
    assert set(table.control) == {"none", "permuted_labels", "rand", "bag"}


def test_the_paper_parity_switch_is_recorded_and_explicit_options_win(
    run_cli, planted_emb: Path, tmp_path: Path
) -> None:
    args = ["--seeds", "0", "--optimizer", "lbfgs", "--max-iter", "30", "-q"]
    result = run_cli("decompose", planted_emb, "--out", tmp_path / "p", "--parity", "paper", *args)
    assert result.returncode == 0, result.stderr
    settings = json.loads((tmp_path / "p" / "summary.json").read_text())["settings"]
    assert settings["parity"] == "paper" and settings["split_source"] == "paper" and settings["test_fraction"] == 0.01
    assert settings["residual_mean"] == "keep" and settings["scenes"] == "full"
    mixed = ["--parity", "paper", "--split-source", "bindscope", "--residual-mean", "remove", "--scenes", "all"]
    result = run_cli("decompose", planted_emb, "--out", tmp_path / "m", *mixed, *args)
    assert result.returncode == 0, result.stderr
    settings = json.loads((tmp_path / "m" / "summary.json").read_text())["settings"]
    assert (settings["split_source"], settings["residual_mean"], settings["scenes"]) == ("bindscope", "remove", "all")
    bad = run_cli("probe", planted_emb, "--out", tmp_path / "b", "--split-source", "torch")
    assert bad.returncode == 2 and "'torch' is not one of 'bindscope', 'paper'" in bad.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["--seeds", "0,0"], "seeds: seeds repeat: [0, 0]", 1),
        (["--seeds", "-1"], "seeds: seeds are non-negative", 1),
        (["--seeds", "0,,1"], "--seeds takes comma-separated values without empty items", 1),
        (["--seeds", "three"], "--seeds takes comma-separated values, e.g. 0,1,2; got 'three'", 1),
        (["--train-fraction", "1.5"], "train_fraction: train fraction must be in (0, 1) (exclusive), got 1.5", 1),
        (["--optimizer", "sgd"], "Invalid value for '--optimizer'", 2),
        (["--steps", "0"], "steps: must be at least 1, got 0", 1),
        (["--exact-budget", "-1"], "exact_budget_s: must be at least 0.0, got -1.0", 1),
    ],
)
def test_probe_bad_options(run_cli, planted_emb: Path, tmp_path: Path, args, message: str, status: int) -> None:
    assert_one_line_error(run_cli("probe", planted_emb, "--out", tmp_path / "p", *args), message, status)
    assert not (tmp_path / "p").exists()


def test_probe_bad_inputs(run_cli, planted_emb: Path, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("probe", tmp_path / "none", "--out", tmp_path / "p"), "embedding folder", 1)
    assert_one_line_error(
        run_cli("probe", planted_emb, "--out", tmp_path / "p", "--dataset", tmp_path), "dataset manifest", 1
    )
    assert_one_line_error(
        run_cli("decompose", planted_emb, "--out", tmp_path / "p", "--test-fraction", "0"),
        "test fraction must be in (0, 1)",
        1,
    )
    assert not (tmp_path / "p").exists()


def test_probe_warns_when_separable_probes_skip_the_reference(run_cli, planted_emb: Path, tmp_path: Path) -> None:
    args = ("--seeds", "0", "--optimizer", "fast", "--exact-budget", "0")
    result = run_cli("probe", planted_emb, "--out", tmp_path / "p", *args)
    assert result.returncode == 0, result.stderr
    assert "warning: base: probe(s)" in result.stderr and "object" in result.stderr
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["solver"]["0"]["object"] == "lbfgs-separable" and len(summary["warnings"]) == 1
