"""Paths as documents show them: relative to the folder described, else from ``~``, else only their last part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bindscope.core.display import display_path, display_text, display_values


@pytest.fixture
def home(isolated_home: Path) -> Path:
    """The test's home folder (the conftest points HOME at a temp folder)."""
    return isolated_home.resolve()


def test_a_path_inside_the_folder_described_is_relative_to_it(home: Path, tmp_path: Path) -> None:
    run = home / "runs" / "a"
    assert display_path(run / "datasets" / "clevr", run) == "datasets/clevr"
    assert display_path(run, run) == "."
    assert display_path(str(run / "results" / "x" / ".." / "y"), str(run)) == "results/y"  # spelled as given


def test_a_path_in_the_home_folder_is_shown_from_it(home: Path) -> None:
    run = home / "runs" / "a"
    assert display_path(home / "data" / "clevr", run) == "~/data/clevr"  # outside the run, inside home
    assert display_path(home / "runs" / "a") == "~/runs/a"  # no folder described
    assert display_path(home) == "~"


def test_a_path_elsewhere_is_only_its_last_part(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "shared" / "clevr"
    assert not str(elsewhere).startswith(str(home))
    assert display_path(elsewhere, home / "runs" / "a") == "…/clevr"
    assert display_path("/srv/models/minilm") == "…/minilm"


def test_a_relative_path_is_taken_from_the_current_folder(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (home / "runs" / "a").mkdir(parents=True)
    monkeypatch.chdir(home / "runs")
    assert display_path("a/datasets/clevr", "a") == "datasets/clevr"
    assert display_path("a/datasets/clevr") == "~/runs/a/datasets/clevr"


def test_a_folder_reached_through_a_link_is_the_folder(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-run"
    (real / "datasets" / "clevr").mkdir(parents=True)
    link = home / "run-link"
    link.symlink_to(real)
    assert display_path(real / "datasets" / "clevr", link) == "datasets/clevr"
    assert display_path(link / "datasets" / "clevr", real) == "datasets/clevr"


def test_every_absolute_path_in_a_text_is_shown(home: Path, tmp_path: Path) -> None:
    run = home / "runs" / "a"
    assert display_text(f"scratch:{run}/scratch/tiny/model+rand", run) == "scratch:scratch/tiny/model+rand"
    assert display_text(f"openclip:local-dir:{home}/models/vit", run) == "openclip:local-dir:~/models/vit"
    message = f"the dataset of {run}/embeddings/x is not at {tmp_path}/gone; pass --dataset DIR"
    assert display_text(message, run) == "the dataset of embeddings/x is not at …/gone; pass --dataset DIR"
    assert display_text(f"({tmp_path}/clevr).", run) == "(…/clevr)."  # the prose around a path is kept
    block = json.dumps({"path": str(run / "datasets" / "clevr"), "resolved": "/srv/hub/minilm"}, indent=2)
    assert json.loads(display_text(block, run)) == {"path": "datasets/clevr", "resolved": "…/minilm"}


@pytest.mark.parametrize(
    "text",
    [
        "hf:openai/clip-vit-base-patch32",
        "openclip:ViT-B-32/openai",
        "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
        "run / dataset / embeddings",
        "and/or 1/2 ./x ~/data/clevr",
        "no slash at all",
    ],
)
def test_text_without_an_absolute_path_is_left_as_it_is(text: str) -> None:
    assert display_text(text, "/data/run") == text


def test_a_manifest_keeps_its_shape(home: Path) -> None:
    run = home / "runs" / "a"
    manifest = {"datasets": {"clevr": {"path": str(run / "datasets" / "clevr"), "scenes": 48}}, "seeds": [0, 1]}
    manifest["steps"] = [{"folder": str(run / "results"), "seconds": 1.5, "reason": None}]
    assert display_values(manifest, run) == {
        "datasets": {"clevr": {"path": "datasets/clevr", "scenes": 48}},
        "seeds": [0, 1],
        "steps": [{"folder": "results", "seconds": 1.5, "reason": None}],
    }
