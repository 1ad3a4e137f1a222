"""`bindscope intervene` through the real command: a tiny local CLIP's scene and single-object images,
the paper's table from result folders, and the command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip


@pytest.fixture(scope="module")
def clip_embeddings(tmp_path_factory: pytest.TempPathFactory, clevr_images_dir: Path, run_cli_module) -> Path:
    """Scene and single-object image embeddings of a tiny random CLIP, as sibling folders."""
    root = tmp_path_factory.mktemp("intervene")
    clip = save_tiny_clip(root / "tiny-clip")
    for name, extra in (("clip", ()), ("clip-single", ("--single-objects",))):
        out = run_cli_module(
            "embed",
            clevr_images_dir,
            "--model",
            f"hf:{clip}",
            "--modality",
            "image",
            *extra,
            "--out",
            root / "emb" / name,
            "-q",
        )
        assert out.returncode == 0, out.stderr
    return root / "emb"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory, clip_embeddings: Path, run_cli_module) -> Path:
    out = tmp_path_factory.mktemp("intervene-result") / "iv"
    done = run_cli_module("intervene", clip_embeddings / "clip", "--out", out, "--k", "0,1,2", "-q")
    assert done.returncode == 0, done.stderr
    return out


def test_single_bank_from_single_object_images(result: Path) -> None:
    summary = json.loads((result / "summary.json").read_text())
    assert summary["banks"]["single"] == {"available": True}
    singles = summary["inputs"]["singles"]
    assert singles["positions"] == 2 and singles["captions"] is None and singles["path"].endswith("clip-single")
    assert summary["probes"]["fitted_here"] and (result / "probes" / "seed0" / "probe.json").is_file()
    cases = pd.read_parquet(result / "cases.parquet")
    assert set(cases.variant) == {"unedited", "obj-avg", "pos-avg", "single", "bag-of-concepts"}
    assert set(cases.k) == {0.0, 1.0, 2.0} and (cases["rank"] >= 1).all()
    assert len(cases[(cases.variant == "unedited")]) == 2 * (576 - 192)  # every scene with two shapes, both sides
    assert (result / "plots" / "k_curve.png").is_file()
    table = pd.read_parquet(result / "results.parquet")
    assert {"edit", "k", "n_cases", "chance"} <= set(table.columns) and set(table.group) == {
        "shared",
        "different",
        "all",
    }
    assert set(table.metric) == {"retrieval", "probe", "retrieval_binding", "probe_binding"}
    assert set(summary["verdicts"]) == {"edit shared", "edit different", "edit probe"}


def with_probes(run_cli, clip_embeddings: Path, result: Path, out: Path, *args: str):
    """``intervene`` on the CLIP embeddings with the probes the module's run fitted (no refit)."""
    probes = result / "probes" / "seed0"
    return run_cli("intervene", clip_embeddings / "clip", "--probes", probes, "--out", out, *args, "-q")


def test_terminal_report(clip_embeddings: Path, result: Path, tmp_path: Path, run_cli) -> None:
    done = with_probes(run_cli, clip_embeddings, result, tmp_path / "iv", "--banks", "pos-avg", "--no-cases")
    assert done.returncode == 0, done.stderr
    assert "shared retrieval (paper) %" in done.stdout and "shared retrieval (binding) %" in done.stdout
    assert "table at k = 1" in done.stdout
    assert "pos-avg" in done.stdout and "bag-of-concepts" in done.stdout
    assert "attribute cases skipped: same shape 384" in done.stdout
    assert not (tmp_path / "iv" / "cases.parquet").exists()


def test_sampled_edits(clip_embeddings: Path, result: Path, tmp_path: Path, run_cli) -> None:
    """``--sample-cases``: a seeded sample of the edits, said in the notes and the summary, with intervals."""
    done = with_probes(run_cli, clip_embeddings, result, tmp_path / "iv", "--banks", "pos-avg", "--sample-cases", "50")
    assert done.returncode == 0, done.stderr
    assert "attribute: a seeded sample of 50 of 768 edits" in done.stdout
    summary = json.loads((tmp_path / "iv" / "summary.json").read_text())
    assert summary["settings"]["sample_cases"] == 50 and summary["sampled"] == {"attribute": {"cases": 50, "of": 768}}
    at_one = summary["results"]["attribute"]["pos-avg"]["all"]["1"]
    low, high = at_one["intervals"]["retrieval"]
    assert at_one["cases"] == 50 and low <= at_one["retrieval"]["mean"] <= high
    assert len(pd.read_parquet(tmp_path / "iv" / "cases.parquet").query("variant == 'pos-avg'")) == 50


@pytest.mark.parametrize("value", ["0", "-3"])
def test_error_bad_sample_cases(clip_embeddings: Path, tmp_path: Path, run_cli, value: str) -> None:
    done = run_cli("intervene", clip_embeddings / "clip", "--sample-cases", value, "--out", tmp_path / "iv")
    assert_one_line_error(done, f"sample_cases: must be at least 1, got {value}")
    assert not (tmp_path / "iv").exists()


def test_table_from_result_folders(result: Path, tmp_path: Path, run_cli) -> None:
    done = run_cli("intervene", "--table", result, "--out", tmp_path / "tab")
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "tab" / "table.md").read_text()
    assert "| clevr | hf:" in md and "shared · pos-avg · retrieval" in md
    tex = (tmp_path / "tab" / "table.tex").read_text()
    assert r"\multicolumn{6}{c}{shared}" in tex and r"\bottomrule" in tex


def test_error_table_needs_k_one(clip_embeddings: Path, result: Path, tmp_path: Path, run_cli) -> None:
    done = with_probes(run_cli, clip_embeddings, result, tmp_path / "iv", "--k", "2", "--banks", "pos-avg")
    assert done.returncode == 0, done.stderr
    assert_one_line_error(
        run_cli("intervene", "--table", tmp_path / "iv", "--out", tmp_path / "tab"), "run it again with --k including 1"
    )
    assert not (tmp_path / "tab").exists()


def test_error_table_of_another_analysis(tmp_path: Path, run_cli, result: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line_error(
        run_cli("intervene", "--table", tmp_path / "empty", "--out", tmp_path / "t"), "is not an analysis folder"
    )
    duplicate = run_cli("intervene", "--table", result, result, "--out", tmp_path / "t2")
    assert_one_line_error(duplicate, "both hold clevr")


def test_error_two_embedding_folders(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    done = run_cli("intervene", clip_embeddings / "clip", clip_embeddings / "clip", "--out", tmp_path / "iv")
    assert_one_line_error(done, "give one embedding folder (got 2 paths); to tabulate result folders, add --table")


def test_error_singles_of_scenes(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    done = run_cli(
        "intervene", clip_embeddings / "clip", "--singles", clip_embeddings / "clip", "--out", tmp_path / "iv"
    )
    assert_one_line_error(done, "single-object embeddings (embed --single-objects) are needed here")


def test_error_bad_k(clip_embeddings: Path, tmp_path: Path, run_cli) -> None:
    done = run_cli("intervene", clip_embeddings / "clip", "--k", "1,x", "--out", tmp_path / "iv")
    assert_one_line_error(done, "--k takes comma-separated values")
