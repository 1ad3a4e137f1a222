"""The real ``bindscope`` command in a subprocess: outputs, files, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def assert_one_line_error(result, message: str, status: int = 1) -> None:
    assert result.returncode == status, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0], lines[0]


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
    assert "--fraction" in split.stdout and "--validation" in split.stdout


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
    built = run_cli("dataset", "build", "clevr", "--out", ds)
    assert built.returncode == 0, built.stderr
    assert "576" in built.stdout and "cube cylinder sphere" in built.stdout
    assert json.loads((ds / "manifest.json").read_text())["num_scenes"] == 576

    info = run_cli("dataset", "info", ds)
    assert info.returncode == 0 and "0 / 576 rendered" in info.stdout

    split = run_cli("dataset", "split", ds, "--fraction", "0.5", "--seed", "3", "--validation", "0.1")
    assert split.returncode == 0, split.stderr
    saved = json.loads((ds / "splits" / "object_seed3_f0.5.json").read_text())
    assert saved["seed"] == 3 and saved["fraction"] == 0.5 and len(saved["train_objects"]) == 12
    assert saved["validation"] and not set(saved["validation"]) & set(saved["train_only"])

    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(576, 8)))
    imp = run_cli("embeddings", "import", ds, tmp_path / "x.npy", "--name", "planted",
                  "--modality", "image", "--out", tmp_path / "emb")
    assert imp.returncode == 0, imp.stderr
    assert "576 x 8" in imp.stdout
    assert np.load(tmp_path / "emb" / "embeddings.npy").dtype == np.float32
    info = run_cli("embeddings", "info", tmp_path / "emb")
    assert info.returncode == 0 and "planted" in info.stdout


def test_demo_builds_clevr_and_text(run_cli, tmp_path: Path) -> None:
    out = run_cli("demo", "--out", tmp_path / "run")
    assert out.returncode == 0, out.stderr
    assert "dataset      clevr" in out.stdout and "dataset      text" in out.stdout
    assert (tmp_path / "run" / "datasets" / "text" / "scenes.parquet").is_file()
    again = run_cli("demo", "--out", tmp_path / "run")  # a finished step is a no-op
    assert again.returncode == 0 and again.stdout == out.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bindscope.datasets import build_dataset

    out = tmp_path_factory.mktemp("cli") / "clevr"
    build_dataset("clevr", out)
    return out


def test_error_unknown_preset(run_cli, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("dataset", "build", "clevr3d", "--out", tmp_path / "d"),
                          "unknown preset 'clevr3d'; choose one of clevr, clevr2d, pug_spare, text")
    assert not (tmp_path / "d").exists()


def test_error_malformed_yaml(run_cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\nconcepts: {color: [red, blue\n")
    assert_one_line_error(run_cli("dataset", "build", tmp_path / "bad.yaml", "--out", tmp_path / "d"),
                          "malformed YAML in")


def test_error_invalid_yaml_setting(run_cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\nconcepts: {color: [red, red]}\nobjects_per_scene: 2\n")
    assert_one_line_error(run_cli("dataset", "build", tmp_path / "bad.yaml", "--out", tmp_path / "d"),
                          "concept 'color' lists value(s) 'red' more than once")


@pytest.mark.parametrize("fraction", ["0", "1", "1.5", "-0.2"])
def test_error_fraction_outside_unit_interval(run_cli, built: Path, tmp_path: Path, fraction: str) -> None:
    result = run_cli("dataset", "split", built, "--fraction", fraction, "--out", tmp_path / "s")
    assert_one_line_error(result, f"fraction must be in (0, 1) (exclusive), got {float(fraction)}")
    assert not (tmp_path / "s").exists()


def test_error_validation_fraction(run_cli, built: Path, tmp_path: Path) -> None:
    result = run_cli("dataset", "split", built, "--validation", "2", "--out", tmp_path / "s")
    assert_one_line_error(result, "validation fraction must be in (0, 1)")


def test_error_wrong_length_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((500, 4)))
    result = run_cli("embeddings", "import", built, tmp_path / "x.npy", "--name", "m",
                     "--modality", "image", "--out", tmp_path / "e")
    assert_one_line_error(result, "has 500 rows but the dataset has 576 scenes")
    assert not (tmp_path / "e").exists()


def test_error_nan_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    x = np.zeros((576, 4))
    x[10, 2] = np.nan
    np.save(tmp_path / "x.npy", x)
    result = run_cli("embeddings", "import", built, tmp_path / "x.npy", "--name", "m",
                     "--modality", "text", "--out", tmp_path / "e")
    assert_one_line_error(result, "contains NaN values in 1 row(s), first at row 10")
    assert not (tmp_path / "e").exists()


def test_error_non_2d_embeddings(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((576, 2, 2)))
    result = run_cli("embeddings", "import", built, tmp_path / "x.npy", "--name", "m",
                     "--modality", "image", "--out", tmp_path / "e")
    assert_one_line_error(result, "must be 2-D [num_scenes, dim], got 3-D shape (576, 2, 2)")


def test_error_missing_dataset(run_cli, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("dataset", "info", tmp_path / "nope"), "does not exist")


def test_bad_option_value_is_a_usage_error(run_cli, built: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((576, 4)))
    result = run_cli("embeddings", "import", built, tmp_path / "x.npy", "--name", "m",
                     "--modality", "audio", "--out", tmp_path / "e")
    assert_one_line_error(result, "Invalid value for '--modality'", status=2)
    assert "'audio' is not one of 'image', 'text'" in result.stderr
    assert "see 'bindscope embeddings import --help'" in result.stderr


def test_missing_option_is_a_usage_error(run_cli) -> None:
    assert_one_line_error(run_cli("dataset", "build", "clevr"), "Missing option '--out'", status=2)
    assert_one_line_error(run_cli("frobnicate"), "No such command 'frobnicate'", status=2)
