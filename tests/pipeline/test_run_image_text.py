"""A run that trains an image-text model from scratch on one of its datasets (rendered for it), then embeds that
dataset's images and captions with it, its ``+rand`` control and single objects, and analyses them like any model's
(cross-modal tests included); the run config's errors for image-text entries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from bindscope.analyses import load_result
from bindscope.core.errors import BindscopeError
from bindscope.pipeline.config import parse_config
from clip_data import SCENES, tiny_preset_yaml

#: The tiny rendered dataset drawn at 40 x 40 for the run; a clip-tiny model with tiny widths, 20 steps. The
#: cross-modal bridge is fitted on 0.8 of the 9 objects (fewer leave its validation part empty).
CONFIG = """name: clip-run
seeds: [0]
report: false
datasets:
  - {name: tiny, preset: tiny.yaml, image_size: "40"}
scratch:
  - name: clip
    config: clip-tiny
    dataset: tiny
    steps: 20
    overrides: {batch_size: 16, channels: 8, hidden: 64, d_model: 16, heads: 2, text_layers: 1, d_out: 16}
analyses:
  probe: {optimizer: lbfgs, max_iter: 30}
  intervene: true
  crossmodal: {fractions: [0.8]}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, run_cli_module) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("clip-run")
    tiny_preset_yaml(root / "tiny.yaml")
    (root / "run.yaml").write_text(CONFIG)
    done = run_cli_module("run", root / "run.yaml", "--out", root / "run", "-q")
    assert done.returncode == 0, done.stderr
    return root / "run", done.stdout


def test_a_run_trains_embeds_and_analyses_an_image_text_model(run: tuple[Path, str]) -> None:
    out, stdout = run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["skipped"] == []
    with Image.open(out / "datasets" / "tiny" / "images" / "000000.png") as image:
        assert image.size == (40, 40)  # rendered at the run's image_size
    model = out / "scratch" / "clip" / "model"
    record = json.loads((model / "config.json").read_text())
    assert record["format"] == "bindscope-clip-v1" and record["selected_step"] == 20
    assert record["config"]["dataset"] == str((out / "datasets" / "tiny").resolve())
    assert record["config"]["batch_size"] == 16 and record["config"]["steps"] == 20
    assert record["dataset_hash"] == manifest["datasets"]["tiny"]["hash"]
    embeddings = out / "embeddings" / "tiny"
    rows = {"": SCENES, "+rand": SCENES}
    for modality in ("image", "text"):
        for suffix, n in rows.items():
            x = np.load(embeddings / f"clip-{modality}{suffix}" / "embeddings.npy")
            assert x.shape == (n, 16), (modality, suffix)
        assert (embeddings / f"clip-{modality}-single" / "embeddings.npy").is_file()
    trained = np.load(embeddings / "clip-image" / "embeddings.npy")
    assert not np.allclose(trained, np.load(embeddings / "clip-image+rand" / "embeddings.npy"))
    results = out / "results" / "tiny"
    crossmodal = load_result(results / "clip" / "crossmodal", "crossmodal")
    assert len(crossmodal.table) and crossmodal.header.seeds == [0]
    # what its numbers were measured on: both modalities of the trained model (its spec relative to the run)
    assert set(crossmodal.table.modality) == {"image+text"} and set(crossmodal.table.dataset) == {"tiny"}
    assert set(crossmodal.table.model) == {"scratch:scratch/clip/model"}
    for modality in ("image", "text"):
        probe = load_result(results / f"clip-{modality}" / "probe", "probe")
        assert len(probe.table) and probe.header.seeds == [0]
        assert (results / f"clip-{modality}" / "intervene" / "summary.json").is_file()
    for name in ("tiny/clip/crossmodal", "tiny/clip-image/probe", "tiny/clip-text/intervene"):
        assert f" {name} (computed, " in stdout, name
    steps = {s["name"]: s["status"] for s in manifest["steps"]}
    assert steps["clip/model"] == "trained"


def test_running_again_reuses_the_model(run: tuple[Path, str], run_cli) -> None:
    out, _ = run
    weights = out / "scratch" / "clip" / "model" / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = run_cli("run", out.parent / "run.yaml", "--out", out, "-q")
    assert again.returncode == 0, again.stderr
    assert "scratch      clip: model (reused" in again.stdout
    assert weights.stat().st_mtime_ns == stamp


# -- config errors ----------------------------------------------------------------------------------------------
BASE = {"name": "r", "datasets": [{"name": "tiny", "preset": "clevr2d"}]}


@pytest.mark.parametrize(
    ("entry", "datasets", "message"),
    [
        (
            {"name": "clip", "config": "clip-tiny"},
            None,
            "scratch model clip: image-text config clip-tiny trains on a dataset of the run; set `dataset` to one of "
            "tiny",
        ),
        (
            {"name": "clip", "config": "clip-tiny", "dataset": "nope"},
            None,
            "scratch model clip: image-text config clip-tiny trains on a dataset of the run; set `dataset` to one of "
            "tiny",
        ),
        (
            {"name": "clip", "config": "clip-tiny", "dataset": "tiny"},
            [],
            "set `dataset` to one of (none: add a dataset with images, e.g. preset clevr2d)",
        ),
        (
            {"name": "clip", "config": "clip-tiny", "dataset": "words"},
            [{"name": "words", "preset": "text"}],
            "scratch model clip: dataset words has no rendered images and captions; give it a preset with a renderer "
            "(clevr2d, clevr)",
        ),
        (
            {"name": "tok", "config": "cpu-small", "dataset": "tiny"},
            None,
            "scratch model tok: config cpu-small is token-level and trains on its own concept space; drop `dataset` "
            "(only image-text configs such as clip-tiny train on a dataset)",
        ),
        (
            {"name": "clip", "config": "clip-tiny", "dataset": "tiny", "overrides": {"final_norm": False}},
            None,
            "scratch model clip: invalid scratch config clip-tiny: final_norm: unknown setting",
        ),
        (
            {"name": "clip", "config": "clip-tiny", "dataset": "tiny"},
            [{"name": "tiny", "preset": "text", "image_size": "64"}],
            "datasets.0: dataset tiny: preset text draws no images, so image_size does not apply; drop it",
        ),
    ],
)
def test_bad_image_text_entries(entry: dict, datasets: list | None, message: str) -> None:
    config = {**BASE, "scratch": [entry], **({} if datasets is None else {"datasets": datasets})}
    with pytest.raises(BindscopeError) as err:
        parse_config(config)
    assert str(err.value).startswith("invalid run config: ") and message in str(err.value)


def test_an_image_text_entry_trains_on_the_folder_it_is_given(tmp_path: Path) -> None:
    config = parse_config(yaml.safe_load(CONFIG.replace("tiny.yaml", "clevr2d")))
    entry = config.scratch[0]
    assert entry.image_text() and config.trains_images("tiny") and not config.trains_images("other")
    trained = entry.training_config(str(tmp_path / "data"))
    assert trained.kind == "image-text" and trained.dataset == str(tmp_path / "data")
    assert (trained.steps, trained.batch_size, trained.d_out) == (20, 16, 16)
    assert config.datasets[0].load_preset().config.image.width == 40
