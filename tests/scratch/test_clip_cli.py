"""Image-text models trained from scratch through the real command: ``scratch train`` with an image-text config
(its table beside the floors, the ``scratch:`` hint), ``embed`` with ``scratch:MODEL`` (images, captions, ``+rand``,
single objects), ``scratch sweep``, ``scratch export`` and ``scratch configs``; one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from clip_data import SCENES, build_tiny

#: One worker runs the module: its tests share the dataset, the trained model, its embeddings and the sweep.

#: The sweep's config: tiny towers and a batch that fits the swap-free groups at fraction 0.5 (18 of 36).
SWEEP_YAML = """\
kind: image-text
name: clip-test
channels: 8
hidden: 64
d_model: 16
heads: 2
text_layers: 1
d_out: 16
batch_size: 8
steps: 10
eval_every: 10
checkpoint_every: 10
"""
TRAIN_OPTIONS = (
    "--towers",
    "slot",
    "--batches",
    "natural",
    "--hard-negatives",
    "attribute",
    "--fraction",
    "0.75",
    "--image-size",
    "16",
    "--steps",
    "20",
    "--batch-size",
    "16",
)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("clip-cli")


@pytest.fixture(scope="module")
def cli(run_cli_module):
    return run_cli_module


@pytest.fixture(scope="module")
def dataset(workdir: Path) -> Path:
    return build_tiny(workdir / "tiny")


@pytest.fixture(scope="module")
def trained(cli, workdir: Path, dataset: Path) -> tuple[Path, subprocess.CompletedProcess]:
    out = workdir / "model"
    return out, cli("scratch", "train", "-c", "clip-tiny", "--dataset", dataset, "--out", out, *TRAIN_OPTIONS, "-q")


@pytest.fixture(scope="module")
def model(trained) -> Path:
    out, result = trained
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def embedded(cli, workdir: Path, dataset: Path, model: Path) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """The model's embeddings: images, captions, the images' control, the captions of every object alone."""
    jobs = {
        "image": ("--modality", "image"),
        "text": ("--modality", "text"),
        "image+rand": ("--modality", "image"),
        "text-single": ("--modality", "text", "--single-objects"),
    }
    out = {}
    for name, options in jobs.items():
        spec = f"scratch:{model}" + ("+rand" if name.endswith("+rand") else "")
        folder = workdir / "embeddings" / name
        out[name] = folder, cli("embed", dataset, "-m", spec, *options, "--out", folder, "-q")
    return out


def table_rows(stdout: str, first: str) -> dict[tuple[str, str], list[str]]:
    """The rows of ``scratch train``'s image-text table, by (scenes, metric): their cells split on 2+ spaces."""
    rows = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in first and len(cells) == 6:
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


# -- train ----------------------------------------------------------------------------------------------------
def test_train_prints_the_table_beside_its_floors(trained, dataset: Path) -> None:
    out, result = trained
    assert result.returncode == 0, result.stderr
    stdout = result.stdout
    assert "config clip-tiny: slot towers, natural batches, hard negatives attribute (" in stdout
    assert "attribute training scenes have one)" in stdout
    assert "combinations split at fraction 0.75, seed 0: " in stdout
    header = [line for line in stdout.splitlines() if line.startswith("scenes ")]
    assert header and header[0].split() == ["scenes", "metric", "model", "%", "bag", "of", "concepts", "%"] + [
        "chance",
        "%",
        "cases",
    ]
    rows = table_rows(stdout, ("trained on", "held out"))
    metrics = (
        "concept@1 (image -> caption)",
        "strict top-1 (image -> caption)",
        "attribute swap",
        "noun swap",
        "order sensitivity",
    )
    assert set(rows) == {(part, m) for part in ("trained on", "held out") for m in metrics}
    summary = json.loads((out / "summary.json").read_text())
    for (part, metric), (value, bag, chance, cases) in rows.items():
        key = ("train_" if part == "trained on" else "heldout_") + {
            metrics[0]: "concept_at_1",
            metrics[1]: "strict_at_1",
            metrics[2]: "swap_attribute",
            metrics[3]: "swap_noun",
            metrics[4]: "order_sensitivity",
        }[metric]
        assert value == f"{100 * summary['selected'][key]:.1f}", key
        assert bag == f"{100 * summary['floors'][key]['bag']:.1f}" and cases == str(summary["cases"][key]), key
        assert chance == f"{100 * summary['floors'][key]['chance']:.1f}", key
    assert rows[("trained on", "attribute swap")][1:3] == ["50.0", "50.0"]
    assert rows[("held out", "concept@1 (image -> caption)")][1] == "100.0"
    assert f"wrote {out}; use it as the model spec scratch:{out} (--modality image or text)" in stdout
    config = json.loads((out / "config.json").read_text())["config"]
    given = {k: config[k] for k in ("towers", "batches", "hard_negatives", "fraction", "image_size", "steps")}
    assert given == {
        "towers": "slot",
        "batches": "natural",
        "hard_negatives": "attribute",
        "fraction": 0.75,
        "image_size": 16,
        "steps": 20,
    }
    assert config["batch_size"] == 16 and config["dataset"] == str(dataset.resolve())


def test_training_again_is_a_no_op(run_cli, model: Path, dataset: Path) -> None:
    stamp = (model / "model.safetensors").stat().st_mtime_ns
    again = run_cli("scratch", "train", "-c", "clip-tiny", "--dataset", dataset, "--out", model, *TRAIN_OPTIONS, "-q")
    assert again.returncode == 0, again.stderr
    assert f"{model} already holds this model; nothing to do" in again.stdout and "attribute swap" in again.stdout
    assert (model / "model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("-c", "clip-tiny", "--dataset", "DATA", "--final-norm"),
            "--final-norm applies to token-level configs only, not to the image-text config clip-tiny; drop it",
        ),
        (
            ("-c", "clip-tiny", "--dataset", "DATA", "--queries", "sampled", "--selection", "test"),
            "--queries, --selection apply to token-level configs only, not to the image-text config clip-tiny; "
            "drop them",
        ),
        (
            ("-c", "cpu-small", "--dataset", "DATA"),
            "--dataset applies to image-text configs only, not to the token-level config cpu-small",
        ),
        (
            ("-c", "cpu-small", "--towers", "slot"),
            "--towers applies to image-text configs only, not to the token-level config cpu-small",
        ),
        (("-c", "clip-tiny", "--steps", "5"), "image-text config clip-tiny names no dataset; give --dataset DATASET"),
        (("-c", "clip-tiny", "--dataset", "DATA"), "batch size 64 exceeds the 28 swap-free scene groups"),
    ],
)
def test_train_refuses_options_of_the_other_kind(
    run_cli, dataset: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "m"
    args = tuple(str(dataset) if a == "DATA" else a for a in args)
    assert_one_line_error(run_cli("scratch", "train", *args, "--out", out, "-q"), message)
    assert not out.exists()


def test_sweep_refuses_options_of_the_other_kind(run_cli, tmp_path: Path) -> None:
    result = run_cli("scratch", "sweep", "-c", "cpu-small", "--split", "objects", "--out", tmp_path / "s", "-q")
    assert_one_line_error(
        result, "--split applies to image-text configs only, not to the token-level config cpu-small; drop it"
    )
    assert not (tmp_path / "s").exists()


# -- embed ----------------------------------------------------------------------------------------------------
def test_embed_images_and_captions(embedded, model: Path) -> None:
    for name, (_, result) in embedded.items():
        assert result.returncode == 0, (name, result.stderr)
    arrays = {name: np.load(folder / "embeddings.npy") for name, (folder, _) in embedded.items()}
    assert arrays["image"].shape == arrays["text"].shape == arrays["image+rand"].shape == (SCENES, 64)
    assert arrays["text-single"].shape == (9, 64)  # every object alone, in its template caption
    for name, x in arrays.items():
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5, err_msg=name)
    assert not np.allclose(arrays["image"], arrays["image+rand"])
    manifests = {name: json.loads((folder / "manifest.json").read_text()) for name, (folder, _) in embedded.items()}
    assert manifests["image"]["modality"] == "image" and manifests["text"]["modality"] == "text"
    assert manifests["text-single"]["rows"] == "single_objects"
    described = manifests["image"]["model"]
    assert described["model_class"] == "bindscope.scratch.ClipModel" and described["layer"] is None
    assert described["preprocessing"]["image"]["resize"] == [16, 16]  # the size it was trained at
    assert described["weights_sha256"] and manifests["image+rand"]["model"]["weights_sha256"] is None
    assert manifests["image+rand"]["model"]["random_init"] is not None


def test_embedded_text_matches_the_trained_model(embedded, model: Path, dataset: Path) -> None:
    """The trained pair scores as the training run evaluated it: its image and caption embeddings, read by the
    training's own evaluation, give the summary's numbers."""
    from bindscope.analyses.crossmodal.swaps import swap_cases
    from bindscope.data.datasets import load_dataset
    from bindscope.scratch.clip_data import ClipSplit
    from bindscope.scratch.clip_train import clip_metrics

    ds = load_dataset(dataset)
    record = json.loads((model / "config.json").read_text())["split"]
    split = ClipSplit(np.array(record["train"]), np.array(record["heldout"]), np.array(record["objects"]), 0.75)
    image = np.load(embedded["image"][0] / "embeddings.npy")
    text = np.load(embedded["text"][0] / "embeddings.npy")
    metrics = clip_metrics(image, text, ds.scenes, split, swap_cases(ds.scenes, "shape"))
    summary = json.loads((model / "summary.json").read_text())
    for key, (value, _) in metrics.items():
        assert value == pytest.approx(summary["selected"][key], abs=1e-6), key


def test_embed_refuses_a_layer(run_cli, dataset: Path, model: Path, tmp_path: Path) -> None:
    result = run_cli(
        "embed", dataset, "-m", f"scratch:{model}", "--modality", "text", "--layer", "1", "--out", tmp_path / "e", "-q"
    )
    assert_one_line_error(
        result, f"scratch:{model} is an image-text scratch model: it has no layers to choose; drop --layer"
    )
    assert not (tmp_path / "e").exists()


def test_embed_refuses_captions_of_unknown_words(run_cli, clevr_dir: Path, model: Path, tmp_path: Path) -> None:
    result = run_cli("embed", clevr_dir, "-m", f"scratch:{model}", "--modality", "text", "--out", tmp_path / "e", "-q")
    assert_one_line_error(
        result,
        "that the model never read; an image-text scratch model embeds captions of its training dataset's words only",
    )
    assert "word(s) cube" in result.stderr  # clevr's shapes are cubes, spheres and cylinders
    assert not (tmp_path / "e").exists()


def test_export_refuses_a_layer(run_cli, model: Path, tmp_path: Path) -> None:
    result = run_cli("scratch", "export", model, "--layer", "0", "--out", tmp_path / "x", "-q")
    assert_one_line_error(result, f"{model.resolve()} is an image-text model: it has no layers to export; drop --layer")
    assert not (tmp_path / "x").exists()


# -- sweep, export, configs -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def swept(cli, workdir: Path, dataset: Path) -> tuple[Path, subprocess.CompletedProcess]:
    config = workdir / "clip-test.yaml"
    config.write_text(SWEEP_YAML)
    out = workdir / "sweep"
    args = ("scratch", "sweep", "-c", config, "--dataset", dataset, "--fractions", "0.5,0.8", "--seeds", "0")
    return out, cli(*args, "--out", out, "-q")


def test_sweep_prints_the_image_text_table(swept) -> None:
    out, result = swept
    assert result.returncode == 0, result.stderr
    assert "[1/2] fraction 0.5 seed 0: held-out attribute swap " in result.stdout
    assert "[2/2] fraction 0.8 seed 0: held-out attribute swap " in result.stdout
    lines = result.stdout.splitlines()
    (header,) = [line for line in lines if line.startswith("fraction ")]
    for column in ("held-out attribute swap %", "bag %", "binds", "noun swap %", "concept@1 %", "hard negatives"):
        assert column in header, column
    rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in ("0.5", "0.8")}
    assert set(rows) == {"0.5", "0.8"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "image-text" and summary["fractions"] == [0.5, 0.8]
    assert set(summary["per_fraction"]) == {"0.5", "0.8"} and summary["chance_swap_attribute"] == 0.5
    for fraction, entry in summary["per_fraction"].items():
        swap = entry["heldout_swap_attribute"]
        assert swap["n_seeds"] == 1 and swap["min"] == swap["mean"] == swap["max"]
        assert rows[fraction][1] == f"{100 * swap['mean']:.1f}"
        assert entry["floors"]["heldout_swap_attribute"]["bag"] == 0.5
        assert entry["binding"]["seeds"] == 1 and entry["steps"] == 10 and entry["hard_negatives"] == 0
        run = json.loads((out / "runs" / f"f{fraction}-s0" / "summary.json").read_text())
        assert run["kind"] == "image-text" and run["selected"]["heldout_swap_attribute"] == swap["mean"]
    assert summary["per_fraction"]["0.5"]["coverage"] == 0.5
    assert (out / "plots" / "coverage.png").stat().st_size > 1000


@pytest.fixture(scope="module")
def exported(cli, workdir: Path, model: Path) -> tuple[Path, subprocess.CompletedProcess]:
    out = workdir / "export"
    return out, cli("scratch", "export", model, "--out", out, "-q")


def test_export_writes_images_and_captions(exported, embedded, model: Path, dataset: Path) -> None:
    out, result = exported
    assert result.returncode == 0, result.stderr
    names = ("image", "image+rand", "image-single", "text", "text+rand", "text-single")
    assert sorted(p.name for p in (out / "embeddings").iterdir()) == sorted(names)
    shapes = {name: np.load(out / "embeddings" / name / "embeddings.npy").shape for name in names}
    assert shapes["image"] == shapes["text"] == shapes["image+rand"] == shapes["text+rand"] == (SCENES, 64)
    assert shapes["text-single"] == (9, 64) and shapes["image-single"][1] == 64
    for name in ("image", "text", "text-single"):  # the same numbers as ``bindscope embed``
        np.testing.assert_array_equal(
            np.load(out / "embeddings" / name / "embeddings.npy"), np.load(embedded[name][0] / "embeddings.npy")
        )
    record = json.loads((out / "export.json").read_text())
    assert record["model"] == str(model.resolve()) and record["scenes"] == SCENES and record["control"] is True
    assert record["dataset"] == str(dataset.resolve())
    assert f"bindscope crossmodal {out / 'embeddings' / 'image'} {out / 'embeddings' / 'text'}" in result.stdout
    assert not (out / "probes").exists()


def test_configs_lists_the_image_text_configs(run_cli) -> None:
    result = run_cli("scratch", "configs")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (header,) = [line.split() for line in lines if line.startswith("image-text config ")]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("clip-")}
    assert set(rows) == {"clip-tiny", "clip-small"}
    columns = header[2:]  # "image-text config" is two words, one column
    tiny = dict(zip(columns, rows["clip-tiny"][1:], strict=True))
    assert tiny["towers"] == "pooled" and tiny["batches"] == "swap-free" and tiny["image_size"] == "32"
    assert "scratch train -c clip-tiny --dataset DIR" in result.stdout
