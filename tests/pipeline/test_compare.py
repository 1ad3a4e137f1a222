"""`bindscope compare`: runs labelled by their config name, and a warning for each way the runs it merges are not
like for like (datasets, scene counts, seeds, solver settings); a run complete with skips is comparable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from bindscope.analyses.results import FORMAT_NAME, FORMAT_VERSION
from bindscope.core.errors import BindscopeError
from bindscope.pipeline.combine.runs import WARNINGS, run_labels, run_manifest, run_warnings
from bindscope.pipeline.run import RUN_FORMAT

HASH = "a" * 64
PROBE = {"optimizer": "lbfgs", "parity": "bindscope", "train_fraction": 0.4}


def fake_run(
    folder: Path,
    name: str | None = "tiny",
    *,
    datasets: dict[str, tuple[str, int]] | None = None,
    results: dict[str, tuple[list[int], dict[str, Any]]] | None = None,
    status: str = "complete",
) -> Path:
    """A run folder as compare reads it: a manifest and result headers (``results``: analysis -> seeds,
    settings) under ``results/<first dataset>/minilm-text/``."""
    datasets = datasets or {"clevr": (HASH, 240)}
    results = results or {"probe": ([0], PROBE)}
    folder.mkdir(parents=True)
    manifest = {
        "format": {"name": RUN_FORMAT, "version": 1},
        "run": name,
        "status": status,
        "seeds": [0],
        "datasets": {n: {"path": "x", "hash": h, "scenes": k} for n, (h, k) in datasets.items()},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for analysis, (seeds, settings) in results.items():
        out = folder / "results" / next(iter(datasets)) / "minilm-text" / analysis
        out.mkdir(parents=True)
        header = {
            "format": {"name": FORMAT_NAME, "version": FORMAT_VERSION},
            "analysis": analysis,
            "bindscope_version": "0",
            "created": "2024-01-01T00:00:00",
            "content_key": "k",
            "inputs": {},
            "settings": settings,
            "seeds": seeds,
            "seconds": 0.0,
            "versions": {},
            "warnings": [],
        }
        (out / "summary.json").write_text(json.dumps(header))
    return folder


def test_runs_are_labelled_by_their_config_name(tmp_path: Path) -> None:
    a = fake_run(tmp_path / "a" / "first", "clip")
    b = fake_run(tmp_path / "b" / "second", "minilm")
    assert run_labels([a, b]) == ["clip", "minilm"]
    c = fake_run(tmp_path / "c" / "third", "clip")
    assert run_labels([a, b, c]) == ["clip (first)", "minilm", "clip (third)"]  # a repeated name: its folder
    d = fake_run(tmp_path / "d" / "first", "clip")
    assert run_labels([a, d]) == ["clip (first)", "clip (first)-2"]  # same name, same folder name: a count
    e = fake_run(tmp_path / "e", None)
    assert run_labels([a, e]) == ["clip", "e"]  # no name recorded: the folder's


def test_like_for_like_runs_have_no_warning(tmp_path: Path) -> None:
    assert run_warnings([fake_run(tmp_path / "a", "one"), fake_run(tmp_path / "b", "two")]) == []


def test_a_warning_for_each_difference(tmp_path: Path) -> None:
    a = fake_run(tmp_path / "a", "one", results={"probe": ([0], PROBE), "complexity": ([0], {"parity": "paper"})})
    b = fake_run(
        tmp_path / "b",
        "two",
        datasets={"clevr-full": ("b" * 64, 576)},
        results={"probe": ([0, 1, 2], {**PROBE, "optimizer": "regularised"}), "complexity": ([0], {"parity": "paper"})},
    )
    assert run_warnings([a, b]) == [
        f"the runs differ in datasets (content hash): one: clevr {HASH[:12]} | two: clevr-full {'b' * 12}; their "
        "numbers are not like for like",
        "the runs differ in scene counts: one: clevr 240 scenes | two: clevr-full 576 scenes; their numbers are not "
        "like for like",
        "the runs differ in seeds: probe (one: [0] | two: [0, 1, 2]); their numbers are not like for like",
        "the runs differ in optimizer: probe (one: lbfgs | two: regularised); their numbers are not like for like",
    ]


def test_the_same_datasets_with_other_scene_counts_and_solver_parity(tmp_path: Path) -> None:
    a = fake_run(tmp_path / "a", "one", datasets={"clevr": (HASH, 240), "text": ("c" * 64, 2400)})
    b = fake_run(
        tmp_path / "b",
        "two",
        datasets={"clevr": (HASH, 240), "text": ("d" * 64, 3400)},
        results={"probe": ([0], {**PROBE, "parity": "paper"})},
    )
    warnings = run_warnings([a, b])
    assert len(warnings) == 3
    assert warnings[1].startswith(
        "the runs differ in scene counts: one: clevr 240 scenes, text 2400 scenes | two: clevr 240 scenes, text 3400"
    )
    assert warnings[2].startswith("the runs differ in parity: probe (one: bindscope | two: paper)")


def test_a_run_complete_with_skips_is_comparable_an_interrupted_one_is_not(tmp_path: Path) -> None:
    assert run_manifest(fake_run(tmp_path / "a", status="complete_with_skips"))["status"] == "complete_with_skips"
    with pytest.raises(BindscopeError, match="is not a finished run folder \\(status 'interrupted'"):
        run_manifest(fake_run(tmp_path / "b", status="interrupted"))


TINY = """name: tiny
seeds: [0]
report: false
datasets:
  - {name: clevr, preset: clevr, max_scenes: 48}
models:
  - {spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}
analyses:
  probe: {optimizer: lbfgs, max_iter: 30}
  crossmodal: true
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run complete with skips (the text-only model has no cross-modal tests)."""
    from bindscope.pipeline.config import parse_config
    from bindscope.pipeline.run import run_pipeline

    out = tmp_path_factory.mktemp("compare") / "run"
    run_pipeline(parse_config(yaml.safe_load(TINY)), out, say=lambda _: None)
    return out


def test_compare_warns_in_the_terminal_and_its_folder(tiny_run: Path, run_cli, tmp_path: Path) -> None:
    other = tmp_path / "again"
    shutil.copytree(tiny_run, other)
    assert json.loads((tiny_run / "manifest.json").read_text())["status"] == "complete_with_skips"
    assert run_warnings([tiny_run, other]) == []
    summary = other / "results" / "clevr" / "minilm-text" / "probe" / "summary.json"
    data = json.loads(summary.read_text())
    data["settings"]["optimizer"] = "another-solver"  # as another bindscope's default would record it
    summary.write_text(json.dumps(data))
    done = run_cli("compare", tiny_run, other, "--out", tmp_path / "cmp")
    assert done.returncode == 0, done.stderr
    line = "the runs differ in optimizer: probe (tiny (run): lbfgs | tiny (again): another-solver)"
    assert f"warning: {line}; their numbers are not like for like" in done.stderr.splitlines()
    assert json.loads((tmp_path / "cmp" / WARNINGS).read_text())[0].startswith(line)
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert "<div class='warnings'>" in page and line in page
    assert page.index("<div class='warnings'>") < page.index("<table")  # at the head, before the card
    merged = pd.read_parquet(tmp_path / "cmp" / "results.parquet")
    assert set(merged.run) == {"tiny (run)", "tiny (again)"}  # the config's name, told apart by folder
