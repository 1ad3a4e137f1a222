"""`bindscope crossmodal` through the real command: a tiny random local CLIP's images, captions and
single-object captions, the uni-modal probe results beside them, and the command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import ProbeSettings, load_inputs, run_analysis
from bindscope.embeddings.store import import_embeddings
from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip


@pytest.fixture(scope="module")
def clip_embeddings(tmp_path_factory: pytest.TempPathFactory, clevr_images_dir: Path, run_cli_module) -> Path:
    """Image, caption and single-object caption embeddings of one tiny random CLIP (sibling folders, through
    the real CLI); captions of another model (imported); a probe result per modality (the Python API)."""
    root = tmp_path_factory.mktemp("crossmodal")
    clip = save_tiny_clip(root / "tiny-clip")
    for name, modality, extra in (
        ("image", "image", ()),
        ("text", "text", ()),
        ("text-single", "text", ("--single-objects",)),
    ):
        out = run_cli_module(
            "embed", clevr_images_dir, "--model", f"hf:{clip}", "--modality", modality, *extra,
            "--out", root / "emb" / name, "-q",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    text = np.load(root / "emb" / "text" / "embeddings.npy")
    np.save(root / "other.npy", text[:, ::-1].copy())
    import_embeddings(
        clevr_images_dir, root / "other.npy", name="other", modality="text", out=root / "emb" / "other-text",
        model_spec="hf:another/model",
    )  # fmt: skip
    for modality in ("image", "text"):
        settings = ProbeSettings(seeds=(0,), optimizer="lbfgs")
        run_analysis("probe", load_inputs("probe", root / "emb" / modality), root / f"probe-{modality}", settings)
    return root


@pytest.fixture(scope="module")
def result(clip_embeddings: Path, run_cli_module) -> tuple[Path, str]:
    emb = clip_embeddings / "emb"
    out = clip_embeddings / "result"
    done = run_cli_module(
        "crossmodal",
        emb / "image",
        emb / "text",
        "--probes-image",
        clip_embeddings / "probe-image",
        "--probes-text",
        clip_embeddings / "probe-text",
        "--fractions",
        "0.5,0.7",
        "--seeds",
        "0,1",
        "--out",
        out,
        "-q",
    )
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_every_test_is_written(result: tuple[Path, str]) -> None:
    out, _ = result
    summary = json.loads((out / "summary.json").read_text())
    assert summary["concepts"] == {"attribute": "color", "noun": "shape"} and summary["scenes"] == 576
    for metric in ("swap_attribute", "swap_noun", "order_sensitivity", "image_to_text_strict@1"):
        assert 0 <= summary["raw"][metric]["mean"] <= 1
    assert set(summary["bridge"]["fractions"]) == {"0.5", "0.7"}
    assert set(summary["bridge"]["fractions"]["0.5"]) == {"raw", "bridged"}
    assert summary["bridge"]["fractions"]["0.5"]["bridged"]["swap_attribute"]["n_seeds"] == 2  # two seeds
    assert set(summary["half_truths"]) == {"wrong_attribute", "wrong_noun", "wrong_object", "full_beats_short"}
    assert summary["inputs"]["singles"]["path"].endswith("text-single")
    assert summary["inputs"]["other"]["modality"] == "text"
    assert set(summary["unimodal"]) == {"image", "text"}
    assert 0 <= summary["unimodal"]["image"]["object_acc"]["mean"] <= 1
    for plot in ("swaps", "bridge", "half_truths"):
        assert (out / "plots" / f"{plot}.png").is_file()
    table = pd.read_parquet(out / "results.parquet")
    assert {"fraction", "n_cases"} <= set(table.columns)
    assert set(table.variant) == {"raw", "bridged", "chance", "bag_of_concepts", "half_truth", "half_truth_per_scene"}


def test_cases_hold_per_scene_scores(result: tuple[Path, str]) -> None:
    out, _ = result
    cases = pd.read_parquet(out / "cases.parquet")
    raw = cases[(cases.variant == "raw") & cases.fraction.isna()]
    assert len(raw) == 576 and sorted(raw.scene) == list(range(576))
    distinct = raw[raw.cos_correct.notna()]
    assert len(distinct) == 576 - 24  # scenes of two distinct objects carry swap scores
    att = distinct[distinct.attribute_caption >= 0]
    assert att.cos_attribute.notna().all() and (att.attribute_caption != att.scene).all()
    bridge = pd.read_csv(out / "bridge.csv")
    assert len(bridge) == 4 and bridge.fitted.all() and set(bridge.kind) == {"ridge"}
    tested = cases[cases.variant == "bridged"]
    assert set(tested.seed) == {0, 1} and set(tested.fraction.round(2)) == {0.5, 0.7}


def test_terminal_report(result: tuple[Path, str]) -> None:
    _, stdout = result
    assert "swap_attribute" in stdout and "bag of concepts %" in stdout and "half-truth wrong_noun" in stdout
    assert "attribute swap skipped: no true negative 216" in stdout
    assert "uni-modal vs cross-modal: image object probe" in stdout


def test_contrastive_bridge_without_cases(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli(
        "crossmodal", emb / "image", emb / "text", "--bridge", "contrastive", "--contrastive-steps", "20",
        "--fractions", "0.5", "--seeds", "0", "--max-scenes", "300", "--retrieval-queries", "50", "--no-cases",
        "--out", tmp_path / "c", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["scenes"] == 300 and summary["subsampled"] and summary["bridge"]["kind"] == "contrastive"
    assert summary["raw"]["image_to_text_strict@1"]["mean"] * 50 % 1 == 0  # 50 queries asked
    assert summary["settings"]["retrieval_queries"] == 50
    assert "half-truths: absent" not in done.stdout  # the sibling single-object captions were found
    assert not (tmp_path / "c" / "cases.parquet").exists()
    assert "a seeded subsample of 300 2-object scenes" in done.stdout


def test_error_two_image_folders(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "image", "--out", tmp_path / "c")
    assert_one_line_error(done, "give one image and one text folder")
    assert not (tmp_path / "c").exists()


def test_error_text_folder_first(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "text", emb / "image", "--out", tmp_path / "c")
    assert_one_line_error(done, "give the image folder first, then the text one")


def test_error_different_models(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "other-text", "--out", tmp_path / "c")
    assert_one_line_error(done, "cross-modal tests need one joint model (or pass --allow-different-models)")
    allowed = run_cli(
        "crossmodal", emb / "image", emb / "other-text", "--allow-different-models", "--bridge", "none",
        "--out", tmp_path / "ok", "-q",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert "half-truths: absent" in allowed.stdout  # the sibling captions are of the other model


def test_error_probe_result_of_the_wrong_modality(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli(
        "crossmodal", emb / "image", emb / "text", "--probes-image", clip_embeddings / "probe-text",
        "--out", tmp_path / "c",
    )  # fmt: skip
    assert_one_line_error(done, "is of text embeddings; give one of image embeddings")


def test_error_probe_result_of_another_analysis(
    clip_embeddings: Path, result: tuple[Path, str], tmp_path: Path, run_cli
) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "text", "--probes-text", result[0], "--out", tmp_path / "c")
    assert_one_line_error(done, "is a crossmodal result; give a `bindscope probe` output folder")


def test_error_bad_fractions(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "text", "--fractions", "0.5,1.5", "--out", tmp_path / "c")
    assert_one_line_error(done, "fraction must be in (0, 1) (exclusive), got 1.5")


def test_error_device_without_cuda(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "text", "--device", "cuda:7", "--out", tmp_path / "c")
    assert_one_line_error(done, "use --device cpu")


def test_sampled_retrieval_reports_its_interval(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    """--retrieval-queries: the retrieval rows' n is the sample and the terminal says so, with its 95% interval."""
    emb = clip_embeddings / "emb"
    done = run_cli(
        "crossmodal", emb / "image", emb / "text", "--bridge", "none", "--retrieval-queries", "40", "--no-cases",
        "--out", tmp_path / "q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    assert summary["raw_cases"]["image_to_text_strict@1"] == 40 and summary["raw_cases"]["swap_attribute"] > 40
    assert "retrieval: estimated from 40 seeded queries of the 576 scenes per scoring" in done.stdout
    row = next(line for line in done.stdout.splitlines() if "image_to_text_strict@1" in line)
    assert " 40 " in row and "–" in row  # the sample's n and its Wilson interval


def test_error_no_retrieval_queries(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    emb = clip_embeddings / "emb"
    done = run_cli("crossmodal", emb / "image", emb / "text", "--retrieval-queries", "0", "--out", tmp_path / "c")
    assert_one_line_error(done, "retrieval")
