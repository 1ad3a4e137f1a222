"""`bindscope geometry` through the real command: all-MiniLM-L6-v2's single-object captions of the `text`
preset; several planted folders compared; a custom space with an ordinal concept; the command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import build_dataset
from bindscope.embeddings.store import import_embeddings
from cli_checks import assert_one_line_error

SPACE = """name: sized
concepts:
  size: {values: [small, medium, large], ordinal: true}
  color: [red, green, blue, yellow, cyan, pink]
  shape: [cube, ball, cone, ring, star]
objects_per_scene: 2
noun: shape
"""


@pytest.fixture(scope="module")
def minilm_singles(tmp_path_factory: pytest.TempPathFactory, run_cli_module) -> Path:
    """The `text` preset's 400 single-object captions embedded by all-MiniLM-L6-v2 (through the real CLI)."""
    root = tmp_path_factory.mktemp("geometry-minilm")
    assert run_cli_module("dataset", "build", "text", "--out", root / "text").returncode == 0
    done = run_cli_module(
        "embed", root / "text", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--single-objects",
        "--out", root / "emb" / "minilm-single", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "emb" / "minilm-single"


@pytest.fixture(scope="module")
def minilm_result(minilm_singles: Path, run_cli_module) -> tuple[Path, str]:
    out = minilm_singles.parent.parent / "geometry"
    done = run_cli_module(
        "geometry", minilm_singles, "--fractions", "0.2,0.5", "--seeds", "0,1", "--quad", "red,circle,blue,square",
        "--out", out, "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_minilm_single_object_captions_end_to_end(minilm_result: tuple[Path, str]) -> None:
    out, stdout = minilm_result
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == "single" and summary["objects"] == 400 and summary["dim"] == 384
    assert summary["inputs"]["embeddings"]["model_spec"] == "st:all-MiniLM-L6-v2"
    assert summary["inputs"]["singles"]["path"] == summary["inputs"]["embeddings"]["path"]
    slot = summary["positions"][0]
    # measured: captions "a {attribute} {noun}" embed nearly additively (R² 0.95) and linear heads read
    # unseen combinations (object accuracy 0.99 at half the objects seen)
    assert slot["r2"] > 0.8 and slot["held_out"]["0.5"]["r2_raw"]["mean"] > 0.8
    assert slot["held_out"]["0.5"]["heads"]["object"]["mean"] > 0.9
    assert slot["held_out"]["0.5"]["heads"]["object"]["n_seeds"] == 2
    assert slot["orthogonality"]["across"] < slot["orthogonality"]["within"]
    assert slot["concepts"]["attribute"]["max"] == 19 and slot["concepts"]["noun"]["numerical"] <= 19
    assert summary["mds"]["quad"] == ["red", "circle", "blue", "square"] and summary["mds"]["composites"] == 0
    assert "factorization R² (all objects)" in stdout and "linear head object acc (f=0.5)" in stdout
    assert "object vectors: the single-object bank (each object alone); 400 objects, width 384" in stdout
    assert "rank axes: absent, no ordinal concept" in stdout
    for plot in ("factorization", "cosines", "spectra", "generalization", "mds"):
        assert (out / "plots" / f"{plot}.png").stat().st_size > 1000
    assert "red" not in pd.read_parquet(out / "mds_points.parquet").label.tolist()  # letters label the points
    assert len(pd.read_parquet(out / "objects.parquet")) == 400


@pytest.fixture(scope="module")
def planted_folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A custom space with an ordinal size, and three imported scene embeddings: factorised, half, random."""
    root = tmp_path_factory.mktemp("geometry-planted")
    (root / "sized.yaml").write_text(SPACE)
    ds = build_dataset(root / "sized.yaml", root / "sized")
    rng = np.random.default_rng(0)
    objects = ds.space.all_objects()
    ids = ds.scenes.object_ids()
    parts = [rng.normal(size=(n, 32)) for n in ds.space.sizes]
    additive = sum(p[objects[:, c]] for c, p in enumerate(parts))
    noise = rng.normal(size=additive.shape) * additive.std()
    for name, mix in (("additive", 0.0), ("half", 0.6), ("random", 1.0)):
        x = (1 - mix) * additive + mix * noise
        y = x[ids[:, 0]] + 0.7 * x[ids[:, 1]] + 0.01 * rng.normal(size=(len(ids), 32))
        np.save(root / f"{name}.npy", y.astype(np.float32))
        import_embeddings(ds, root / f"{name}.npy", name=name, modality="text", out=root / "emb" / name)
    return root


def test_several_folders_are_compared(planted_folders: Path, tmp_path: Path, run_cli) -> None:
    emb = planted_folders / "emb"
    out = tmp_path / "cmp"
    done = run_cli(
        "geometry", emb / "additive", emb / "half", emb / "random", "--fractions", "0.3,0.6", "--seeds", "0",
        "--labelled", "2,4", "--attribute", "color", "--out", out, "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {
        "additive", "half", "random", "comparison.csv", "comparison.parquet", "comparison.json", "plots",
        ".bindscope.json",
    }  # fmt: skip
    assert (out / "plots" / "correlation.png").is_file()
    comparison = json.loads((out / "comparison.json").read_text())
    pooled = comparison["correlations"]["r2_raw"]["pooled"]
    assert pooled["n"] == 6 and pooled["pearson"] > 0.8  # factorization quality tracks generalisation
    assert comparison["correlations"]["r2_raw"]["fractions"]["0.3"]["n"] == 3
    table = pd.read_csv(out / "comparison.csv")
    assert set(table["path"]) == {"additive", "half", "random"}  # each folder, relative to the comparison's
    assert str(planted_folders) not in (out / "comparison.json").read_text()  # no absolute path (docs: results)
    by = table.groupby("label")["head_object"].mean()
    assert by["additive"] > by["half"] > by["random"]
    summary = json.loads((out / "additive" / "summary.json").read_text())
    assert summary["source"] == "pos-avg" and len(summary["positions"]) == 2
    assert summary["concepts"]["size"] == {"values": 3, "ordinal": True}
    assert set(summary["positions"][0]["rank_axes"]["size"]) == {"extremes", "least_squares"}
    assert "== additive" in done.stdout and "factorization vs generalisation across folders" in done.stdout
    assert "rank axis size Spearman, extremes" in done.stdout


def test_the_shipped_custom_space_has_an_ordinal_size(tmp_path: Path) -> None:
    ds = build_dataset(Path(__file__).parents[2] / "configs" / "custom_space.yaml", tmp_path / "c")
    assert ds.space.ordinal == ("size",) and ds.space.values[0] == ("small", "medium", "large")
    assert "a small " in " ".join(ds.captions[:50]) or "a medium " in " ".join(ds.captions[:50])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--quad", "red,cube,blue"), "quad: name attribute i, noun j, attribute k, noun l: 4 value names"),
        (("--labels", "a,b"), "2 labels for 1 embedding folders; give one per folder"),
        (("--labelled", "1,8"), "a rank axis needs at least 2 labelled objects"),
        (("--device", "gpu7"), "unknown device 'gpu7'; use cpu, cuda or cuda:N"),
    ],
)
def test_bad_options(planted_folders: Path, tmp_path: Path, run_cli, args: tuple[str, ...], message: str) -> None:
    done = run_cli("geometry", planted_folders / "emb" / "half", *args, "--out", tmp_path / "g")
    assert_one_line_error(done, message)
    assert not (tmp_path / "g").exists()


def test_the_device_option(planted_folders: Path, tmp_path: Path, run_cli) -> None:
    """``--device cpu`` runs where the default runs and computes the same numbers; a CUDA device on a machine
    without one is refused before any work."""
    from bindscope.analyses import GeometrySettings
    from bindscope.pipeline.combine.geometry import run_geometry

    half = planted_folders / "emb" / "half"
    short = ("--fractions", "0.5", "--seeds", "0", "--labelled", "2", "--no-mds")
    done = run_cli("geometry", half, *short, "--device", "cpu", "--out", tmp_path / "cpu", "-q")
    assert done.returncode == 0, done.stderr
    settings = GeometrySettings(fractions=(0.5,), seeds=(0,), labelled=(2,), mds=False)
    run_geometry([half], tmp_path / "default", settings)
    got, want = (pd.read_parquet(tmp_path / name / "results.parquet") for name in ("cpu", "default"))
    pd.testing.assert_frame_equal(got, want)
    if not torch.cuda.is_available():
        done = run_cli("geometry", half, *short, "--device", "cuda:7", "--out", tmp_path / "cuda")
        assert_one_line_error(done, "no CUDA device is available on this machine; use --device cpu")
        assert not (tmp_path / "cuda").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ordinal": ("weight",)}, "ordinal concept 'weight' is not a concept; this space has size, color, shape"),
        ({"quad": ("red", "cube", "mauve", "ball"), "attribute": "color"}, "unknown value 'mauve' for concept 'color'"),
        ({"fractions": (0.001,)}, "no fraction of 0.001 splits 90 objects"),
        ({}, "the space has 3 concepts; name the picture's --attribute"),
    ],
)
def test_bad_settings_for_this_dataset(planted_folders: Path, tmp_path: Path, settings: dict, message: str) -> None:
    from bindscope.analyses import GeometrySettings
    from bindscope.pipeline.combine.geometry import run_geometry

    if not settings:  # a 3-concept space without --attribute: the picture is absent, with the reason
        run = run_geometry([planted_folders / "emb" / "half"], tmp_path / "g", GeometrySettings(seeds=(0,)))
        assert message in run.results["half"].summary["mds_absent"]
        return
    with pytest.raises(BindscopeError, match=message):
        run_geometry([planted_folders / "emb" / "half"], tmp_path / "g", GeometrySettings(**settings))
    assert not (tmp_path / "g").exists()


def test_bad_folders(planted_folders: Path, tmp_path: Path, run_cli) -> None:
    from bindscope.pipeline.combine.geometry import run_geometry

    emb = planted_folders / "emb"
    with pytest.raises(BindscopeError, match="--singles names the bank of one folder"):
        run_geometry([emb / "half", emb / "random"], tmp_path / "g", singles=emb / "half")
    with pytest.raises(BindscopeError, match="labels repeat"):
        run_geometry([emb / "half", emb / "half"], tmp_path / "g", labels=["a", "a"])
    with pytest.raises(BindscopeError, match="labels name folders: use letters"):
        run_geometry([emb / "half"], tmp_path / "g", labels=["a/b"])
    with pytest.raises(BindscopeError, match="give at least one embedding folder"):
        run_geometry([], tmp_path / "g")
    with pytest.raises(BindscopeError, match="nothing"):
        run_geometry([tmp_path / "nothing"], tmp_path / "g")
    assert not (tmp_path / "g").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    done = run_cli("geometry", emb / "half", emb / "random", "--out", tmp_path / "full")
    assert_one_line_error(done, "already exists and is not empty; choose another --out or pass --overwrite")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["x"]
