"""`bindscope compare`: runs labelled by their config name, and a warning for each way the runs it merges are not
like for like (datasets, scene counts, seeds, solver settings); a run complete with skips is comparable. Then what a
run shares names no absolute path, and `bindscope export` writes the runs' leaderboard."""

from __future__ import annotations

import html
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from bindscope.analyses.results import FORMAT_NAME, FORMAT_VERSION
from bindscope.core.errors import BindscopeError
from bindscope.pipeline.card import report_card
from bindscope.pipeline.combine.runs import WARNINGS, run_labels, run_manifest, run_warnings
from bindscope.pipeline.report import manifest_skips
from bindscope.pipeline.run import RUN_FORMAT
from cli_checks import assert_one_line_error

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


# -- results that travel: no absolute path in what a run shares; the leaderboard of `bindscope export` ---------------
def shared_run(tiny_run: Path, home: Path, name: str) -> Path:
    """A copy of the tiny run in the test's home folder, as a user keeps one (``~/runs/<name>``)."""
    copy = home / "runs" / name
    shutil.copytree(tiny_run, copy)
    return copy


def test_nothing_shared_names_an_absolute_path(
    tiny_run: Path, run_cli, isolated_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    a, b = shared_run(tiny_run, isolated_home, "a"), shared_run(tiny_run, isolated_home, "b")
    for args in (
        ("report", a),
        ("compare", a, b, "--out", isolated_home / "cmp"),
        ("export", a, b, "--out", isolated_home / "board"),
    ):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
    shared = [a / "report.html", a / "report" / "card.csv", *sorted((isolated_home / "cmp").glob("*.*"))]
    shared += [*sorted(a.glob("results/*/*/*/summary.json")), isolated_home / "board.csv", isolated_home / "board.md"]
    assert len(shared) >= 10
    places = {str(tmp_path_factory.getbasetemp()), str(tmp_path_factory.getbasetemp().resolve()), sys.prefix}
    for path in shared:  # neither the home folder, nor any temp folder, nor where the model was loaded from
        text = path.read_bytes().decode("utf-8", errors="replace")
        assert not [p for p in places if p in text], path
    page = (a / "report.html").read_text()
    assert "<pre>bindscope run ~/runs/a/config.yaml --out ~/runs/a</pre>" in page
    # the copy's manifest still names the first run's dataset folder (outside this run and home): its last part
    assert '"path": "…/clevr"' in html.unescape(page)
    assert "tiny (a): ~/runs/a, tiny (b): ~/runs/b" in (isolated_home / "cmp" / "compare.html").read_text()
    summary = json.loads((a / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").read_text())
    assert summary["inputs"]["embeddings"]["path"] == "embeddings/clevr/minilm-text"
    assert summary["inputs"]["dataset"]["path"] == "datasets/clevr"
    # the merged tables say what each number was measured on
    merged = pd.read_csv(isolated_home / "cmp" / "results.csv")
    hash_ = json.loads((a / "manifest.json").read_text())["datasets"]["clevr"]["hash"]
    assert set(merged.dataset) == {"clevr"} and set(merged.dataset_hash) == {hash_}
    assert set(merged.model) == {"st:all-MiniLM-L6-v2"} and set(merged.modality) == {"text"}
    assert merged.layer.isna().all() and {"n_cases", "ci_low", "ci_high"} <= set(merged.columns)


def test_export_writes_one_leaderboard_row_per_run_and_embeddings(tiny_run: Path, run_cli, tmp_path: Path) -> None:
    done = run_cli("export", tiny_run, "--out", tmp_path / "board")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {tmp_path / 'board.csv'}, {tmp_path / 'board.md'}"
    board = pd.read_csv(tmp_path / "board.csv")
    rows = {r.label: r for r in report_card(tiny_run, None, manifest_skips(run_manifest(tiny_run)))}
    assert list(board.embeddings) == list(rows) == ["minilm-text", "minilm"]  # the crossmodal row: its skips
    assert set(board.run) == {"tiny"} and set(board.dataset) == {"clevr"}
    text, crossmodal = board.iloc[0], board.iloc[1]
    objects = rows["minilm-text"].verdict("objects recoverable")
    assert text["objects recoverable"] == pytest.approx(objects.value)
    assert text["objects recoverable verdict"] == objects.answer
    assert text.model == "st:all-MiniLM-L6-v2" and text.modality == "text" and pd.isna(text.layer)
    assert len(text.dataset_hash) == 64 and crossmodal["attribute swap verdict"] == "skipped"
    markdown = (tmp_path / "board.md").read_text()
    shown = f"{100 * objects.value:.1f}% {objects.answer.replace('_', ' ')}"
    assert f"| tiny | clevr | minilm-text | {shown} | - | - | - |" in markdown
    assert "| tiny | clevr | minilm | - | skipped | skipped | skipped |" in markdown
    done = run_cli("export", tiny_run, "--out", tmp_path / "only", "--format", "md")
    assert done.returncode == 0 and [p.name for p in tmp_path.glob("only*")] == ["only.md"]


def test_export_warns_about_runs_not_like_for_like_and_still_writes(tiny_run: Path, run_cli, tmp_path: Path) -> None:
    other = tmp_path / "again"
    shutil.copytree(tiny_run, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["datasets"]["clevr"]["hash"] = "0" * 64  # the same name, other content: compare refuses, export warns
    (other / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("export", tiny_run, other, "--out", tmp_path / "board")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning: the runs differ in datasets (content hash): tiny (run): clevr ")
    assert "their numbers are not like for like" in done.stderr
    assert "Warnings: these runs are not like for like." in (tmp_path / "board.md").read_text()
    assert list(pd.read_csv(tmp_path / "board.csv").run) == ["tiny (run)", "tiny (run)", "tiny (again)", "tiny (again)"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("existing", "board.csv already exists; choose another --out or pass --overwrite to replace it"),
        ("a folder", "board.csv is a folder; choose another --out"),
        ("suffix", "ends in .csv; give the file name without its suffix"),
        ("format", "--format takes csv and md, comma-separated (e.g. --format csv,md); got xlsx"),
        ("twice", "a run folder is given twice; give each run once"),
        ("not a run", "is not a finished run folder (no manifest.json); give --out folders of bindscope run"),
        ("inside the run", "lies inside the input"),
    ],
)
def test_export_refuses_bad_input_in_one_line(tiny_run: Path, run_cli, tmp_path: Path, case: str, message: str) -> None:
    out, runs, extra = tmp_path / "board", [tiny_run], []
    if case == "existing":
        (tmp_path / "board.csv").write_text("mine\n")
    elif case == "a folder":
        (tmp_path / "board.csv").mkdir()
    elif case == "suffix":
        out = tmp_path / "board.csv"
    elif case == "format":
        extra = ["--format", "csv,xlsx"]
    elif case == "twice":
        runs = [tiny_run, tiny_run]
    elif case == "not a run":
        (tmp_path / "notes").mkdir()
        runs = [tiny_run, tmp_path / "notes"]
    else:
        out = tiny_run / "board"
    done = run_cli("export", *runs, "--out", out, *extra)
    assert_one_line_error(done, message)
    assert not (tiny_run / "board.csv").exists() and not (tmp_path / "board.md").exists()
    if case == "existing":  # what the user owns is kept; --overwrite replaces it
        assert (tmp_path / "board.csv").read_text() == "mine\n"
        assert run_cli("export", tiny_run, "--out", out, "--overwrite").returncode == 0
        assert (tmp_path / "board.csv").read_text().startswith("run,dataset,dataset_hash,embeddings,model")
