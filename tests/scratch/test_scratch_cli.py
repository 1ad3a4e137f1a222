"""``bindscope scratch`` through the real command: configs, train, sweep, export, and the exported
embeddings through ``bindscope probe`` and ``bindscope complexity``; one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from bindscope.analyses.results import load_result
from bindscope.estimators.floors import BINDS, MARGIN
from cli_checks import assert_one_line_error
from tiny_scratch import tiny_scratch_yaml

TINY_YAML = tiny_scratch_yaml(steps=40, every=20)

#: One worker runs the module: its tests share the trained, exported, probed and swept folders.


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine is small and shared: one torch thread in every command keeps tiny models fast."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch-cli")


@pytest.fixture(scope="module")
def cli(run_cli_module):
    """The real command for module fixtures (a process of its own, forked by the session's fork server),
    with its own isolated caches and temp folder; one torch thread (tests/conftest.py sets it)."""
    return run_cli_module


@pytest.fixture(scope="module")
def tiny_yaml(workdir: Path) -> Path:
    path = workdir / "tiny.yaml"
    path.write_text(TINY_YAML)
    return path


@pytest.fixture(scope="module")
def trained(cli, workdir: Path, tiny_yaml: Path) -> tuple[Path, subprocess.CompletedProcess]:
    out = workdir / "model"
    return out, cli("scratch", "train", "--config", tiny_yaml, "--out", out, "-q")


@pytest.fixture(scope="module")
def exported(cli, workdir: Path, trained) -> tuple[Path, subprocess.CompletedProcess]:
    model, result = trained
    assert result.returncode == 0, result.stderr
    out = workdir / "export"
    return out, cli("scratch", "export", model, "--out", out, "-q")


@pytest.fixture(scope="module")
def probed(cli, workdir: Path, exported) -> tuple[Path, subprocess.CompletedProcess]:
    exp, result = exported
    assert result.returncode == 0, result.stderr
    out = workdir / "probe"
    return out, cli(
        "probe", exp / "embeddings" / "scene", "--out", out, "--seeds", "0", "--optimizer", "lbfgs", "--max-iter", "100"
    )


def test_configs_lists_the_builtins(run_cli) -> None:
    result = run_cli("scratch", "configs")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert {"cpu-small", "paper"} <= set(rows)
    header = rows["config"]
    assert rows["paper"][header.index("objects")] == "400" and rows["paper"][header.index("d_model")] == "256"
    assert rows["cpu-small"][header.index("objects")] == "100"


def test_train_writes_a_model(run_cli, trained, tiny_yaml: Path) -> None:
    out, result = trained
    assert result.returncode == 0, result.stderr
    assert f"scratch:{out}" in result.stdout
    # fraction 0.8 of 20 objects: exactly 16 trained on; the 4 held out are 1 validation and 3 test objects
    assert "config tiny, fraction 0.8 (16 objects trained on, 1 validation, 3 held out), seed 0" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"] == "tiny" and summary["steps"] == 40 and summary["objects"]["test"] == 3
    assert summary["coverage"] == 0.8
    # every accuracy beside its floors, and the verdict with its margin
    assert "bag of concepts %" in result.stdout and "chance %" in result.stdout
    bag = summary["floors"]["test_object_acc"]["bag"]
    held_out = next(line for line in result.stdout.splitlines() if line.startswith("held out") and "object acc" in line)
    assert f"{100 * bag:.1f}" in held_out
    assert f"held-out objects: {summary['binding']['reading']}" in result.stdout and "one seed" in result.stdout
    assert f"selected step {summary['selected_step']}" in result.stdout
    for name in (
        "config.json",
        "model.safetensors",
        "final.safetensors",
        "metrics.csv",
        "evaluation.csv",
        "manifest.json",
    ):
        assert (out / name).is_file(), name
    assert not (out.parent / f".{out.name}.training").exists()
    again = run_cli("scratch", "train", "--config", tiny_yaml, "--out", out, "-q")
    assert again.returncode == 0, again.stderr
    assert "already holds this model; nothing to do" in again.stdout


def sweep_args(tiny_yaml: Path, out: Path) -> tuple:
    return ("scratch", "sweep", "--config", tiny_yaml, "--fractions", "0.3,0.6", "--seeds", "0,1", "--out", out, "-q")


@pytest.fixture(scope="module")
def sweep_run(cli, workdir: Path, tiny_yaml: Path) -> tuple[Path, subprocess.CompletedProcess, float]:
    """The sweep (4 tiny models), run once for the module: its folder, the command's result, its seconds."""
    out = workdir / "sweep"
    start = time.perf_counter()
    result = cli(*sweep_args(tiny_yaml, out))
    return out, result, time.perf_counter() - start


def test_sweep(run_cli, sweep_run: tuple[Path, subprocess.CompletedProcess, float], tiny_yaml: Path) -> None:
    out, result, first = sweep_run
    args = sweep_args(tiny_yaml, out)
    assert result.returncode == 0, result.stderr
    assert "[4/4] fraction 0.6 seed 1" in result.stdout and "chance" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["per_fraction"]) == {"0.3", "0.6"} and summary["seeds"] == [0, 1]
    assert summary["analysis"] == "scratch-sweep" and summary["format"]["version"] == 3
    loaded = load_result(out, "scratch-sweep")
    assert loaded.header.seeds == [0, 1] and len(loaded.table) == len(pd.read_parquet(out / "results.parquet"))
    for entry in summary["per_fraction"].values():
        for key in ("test_object_acc", "train_object_acc", "validation_object_acc", "test_concept_acc"):
            assert entry[key]["n_seeds"] == 2, key
            assert entry[key]["min"] <= entry[key]["mean"] <= entry[key]["max"] and entry[key]["std"] is not None
    assert summary["per_fraction"]["0.3"]["coverage"] == 0.3 and summary["per_fraction"]["0.6"]["coverage"] == 0.6
    table = pd.read_csv(out / "results.csv")
    assert set(table.fraction) == {0.3, 0.6} and set(table.seed) == {0, 1}
    assert list(table.columns)[:7] == ["analysis", "variant", "control", "group", "metric", "seed", "value"]
    assert set(table.variant) == {"model", "chance", "bag of concepts"}
    assert set(table.group) == {"train", "validation", "test"}
    models = table[table.variant == "model"][["group", "metric", "fraction", "seed"]]
    for variant in ("bag of concepts", "chance"):  # every number has both floors
        floors = table[table.variant == variant][["group", "metric", "fraction", "seed"]]
        assert sorted(map(tuple, floors.to_numpy())) == sorted(map(tuple, models.to_numpy())), variant
    held_out = (table.group == "test") & (table.metric == "object_acc")
    bag = table[(table.variant == "bag of concepts") & held_out].set_index(["fraction", "seed"])["value"]
    acc = table[(table.variant == "model") & held_out].set_index(["fraction", "seed"])["value"]
    for (fraction, seed), value in bag.items():  # each run's own held-out scenes decide it
        run = json.loads((out / "runs" / f"f{fraction:g}-s{seed}" / "summary.json").read_text())
        assert value == run["bag_of_concepts_test_object_acc"] and 0 < value < 1
    for f, entry in summary["per_fraction"].items():
        assert entry["test_bag_of_concepts_object_acc"]["mean"] == pytest.approx(bag.loc[float(f)].mean())
        assert entry["floors"]["test_object_acc"]["bag"] == pytest.approx(bag.loc[float(f)].mean())
        assert entry["floors"]["train_concept_acc"]["bag"] == 1.0
        assert entry["test_binding_object_acc"]["n_seeds"] == 2
        clearance = acc.loc[float(f)] - bag.loc[float(f)]
        assert entry["binding"]["seeds"] == 2
        assert entry["binding"]["clearance_min"] == pytest.approx(clearance.min())
        assert (entry["binding"]["reading"] == BINDS) == bool(clearance.min() >= MARGIN)
    assert "bag %" in result.stdout and "binds" in result.stdout and "needing binding %" in result.stdout
    assert (out / "plots" / "coverage.png").stat().st_size > 1000
    for run in ("f0.3-s0", "f0.3-s1", "f0.6-s0", "f0.6-s1"):
        assert (out / "runs" / run / "model.safetensors").is_file(), run
    run_config = json.loads((out / "runs" / "f0.6-s1" / "config.json").read_text())["config"]
    assert (run_config["fraction"], run_config["seed"], run_config["name"]) == (0.6, 1, "tiny")
    assert not (out.parent / ".sweep.sweep").exists()
    stamp = (out / "summary.json").stat().st_mtime_ns
    start = time.perf_counter()
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert time.perf_counter() - start < first
    assert (out / "summary.json").stat().st_mtime_ns == stamp
    assert "[1/4]" not in again.stdout and "chance" in again.stdout


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ("0.2,x", "--fractions takes comma-separated values, e.g. 0.2,0.4,0.6,0.8; got '0.2,x'"),
        ("1.5", "fractions: fraction must be in (0, 1) (exclusive), got 1.5"),
    ],
)
def test_sweep_bad_fractions(run_cli, tiny_yaml: Path, tmp_path: Path, fractions: str, message: str) -> None:
    result = run_cli("scratch", "sweep", "--config", tiny_yaml, "--fractions", fractions, "--out", tmp_path / "s", "-q")
    assert_one_line_error(result, message)
    assert not (tmp_path / "s").exists()


def test_export(exported, trained) -> None:
    out, result = exported
    assert result.returncode == 0, result.stderr
    assert f"bindscope probe {out / 'embeddings' / 'scene'}" in result.stdout
    for part in (
        "dataset/manifest.json",
        "embeddings/scene/embeddings.npy",
        "embeddings/scene-rand/embeddings.npy",
        "probes/probe.json",
        "probes/object.npy",
        "export.json",
    ):
        assert (out / part).is_file(), part
    record = json.loads((out / "export.json").read_text())
    assert record["scenes"] == 400 and record["model"] == str(trained[0].resolve())


def test_probe_on_exported_embeddings(probed) -> None:
    out, result = probed
    assert result.returncode == 0, result.stderr
    assert "rand" in result.stdout and "chance" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert "object_acc" in summary["test"] and "rand" in summary["controls"]
    assert summary["inputs"]["control"]["path"].endswith("scene-rand")


COMPLEXITY = (
    "--approximators",
    "additive,mult",
    "--fractions",
    "0.5",
    "--seeds",
    "0",
    "--budget",
    "cpu",
    "--epochs",
    "50",
    "--eval-every",
    "10",
    "--no-description-length",
    "-q",
)


def test_complexity_on_exported_embeddings(run_cli, exported, probed, tmp_path: Path) -> None:
    exp, _ = exported
    probe_run, result = probed
    assert result.returncode == 0, result.stderr
    out = tmp_path / "cx"
    result = run_cli("complexity", exp / "embeddings" / "scene", "--probes", probe_run, "--out", out, *COMPLEXITY)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["approximators"]) == {"additive", "mult"}


def test_complexity_with_the_exported_probes(run_cli, exported, tmp_path: Path) -> None:
    exp, result = exported
    assert result.returncode == 0, result.stderr
    out = tmp_path / "cx"
    result = run_cli("complexity", exp / "embeddings" / "scene", "--probes", exp / "probes", "--out", out, *COMPLEXITY)
    assert result.returncode == 0, result.stderr
    assert set(json.loads((out / "summary.json").read_text())["approximators"]) == {"additive", "mult"}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--seeds", "0,-1"), "seeds: give at least one seed (seeds are non-negative)"),
        (("--workers", "0"), "--workers must be at least 1, got 0"),
    ],
)
def test_sweep_bad_counts(run_cli, tiny_yaml: Path, tmp_path: Path, option: tuple[str, str], message: str) -> None:
    result = run_cli("scratch", "sweep", "--config", tiny_yaml, *option, "--out", tmp_path / "s", "-q")
    assert_one_line_error(result, message)
    assert not (tmp_path / "s").exists() and not (tmp_path / ".s.sweep").exists()


def test_bad_train_inputs(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert_one_line_error(
        run_cli("scratch", "train", "--config", "nope", "--out", out, "-q"),
        "unknown scratch config 'nope'; choose one of clip-small, clip-tiny, cpu-small, paper or give a YAML file",
    )
    assert_one_line_error(
        run_cli("scratch", "train", "--fraction", "1.5", "--out", out, "-q"),
        "invalid scratch config cpu-small: fraction",
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nconcepts: {color: [red, blue]\n")
    assert_one_line_error(run_cli("scratch", "train", "--config", broken, "--out", out, "-q"), "malformed YAML in")
    assert not out.exists()


def test_bad_model_folders(run_cli, exported, tmp_path: Path) -> None:
    exp, _ = exported
    assert_one_line_error(
        run_cli(
            "embed",
            exp / "dataset",
            "--model",
            "scratch:/no/such/dir",
            "--modality",
            "text",
            "--out",
            tmp_path / "e",
            "-q",
        ),
        "checkpoint folder /no/such/dir does not exist",
    )
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "notamodel" / "x.txt").write_text("hello")
    assert_one_line_error(
        run_cli("scratch", "export", tmp_path / "notamodel", "--out", tmp_path / "x", "-q"),
        "is not a bindscope scratch model folder",
    )
    assert not (tmp_path / "e").exists() and not (tmp_path / "x").exists()


# -- complexity against coverage ---------------------------------------------------------------------
#: One fraction for the fits: these tests check how the sweep's runs are measured and gathered (by sweep
#: fraction and seed); the area over several fit fractions is tests/analyses/test_complexity.py's.
SWEEP_COMPLEXITY = ("--approximators", "additive,mult", "--fractions", "0.5", "--seeds", "0", "--budget", "cpu")


@pytest.fixture(scope="module")
def swept(sweep_run: tuple[Path, subprocess.CompletedProcess, float]) -> Path:
    out, result, _ = sweep_run
    assert result.returncode == 0, result.stderr
    return out


def test_complexity_against_coverage(run_cli, swept: Path, tmp_path: Path) -> None:
    out = tmp_path / "cc"
    args = ("scratch", "complexity", swept, "--out", out, *SWEEP_COMPLEXITY, "--no-description-length")
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "[4/4] fraction 0.6 seed 1:" in result.stdout and "AUC mult" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["analysis"] == "scratch-complexity" and summary["seeds"] == [0, 1]
    assert set(summary["per_fraction"]) == {"0.3", "0.6"} and summary["families"] == ["additive", "mult"]
    assert set(summary["verdicts"]) == {"f0.3-s0", "f0.3-s1", "f0.6-s0", "f0.6-s1"}
    for fraction, entry in summary["per_fraction"].items():
        for family in ("additive", "mult"):
            auc = entry[family]["auc"]
            assert auc["n_seeds"] == 2 and auc["min"] <= auc["mean"] <= auc["max"], (fraction, family)
            assert set(entry[family]["f_star"]) == {"0", "1"}
            runs = [json.loads((out / "runs" / f"f{fraction}-s{s}" / "summary.json").read_text()) for s in (0, 1)]
            assert all(r["analysis"] == "complexity" for r in runs)
            per_run = [r["approximators"][family]["auc"]["mean"] for r in runs]
            assert auc["mean"] == pytest.approx(sum(per_run) / 2) and auc["min"] == pytest.approx(min(per_run))
            assert [entry[family]["f_star"][str(s)] for s in (0, 1)] == [
                r["approximators"][family]["f_star"] for r in runs
            ]
    assert summary["per_fraction"]["0.3"]["coverage"] == 0.3  # exactly the trained share
    table = load_result(out, "scratch-complexity").table
    assert set(table.metric) == {"auc", "f_star", "in_distribution"} and set(table.seed) == {0, 1}
    assert (out / "plots" / "complexity_coverage.png").stat().st_size > 1000
    assert not (tmp_path / ".cc.complexity").exists()
    stamp = (out / "summary.json").stat().st_mtime_ns
    again = run_cli(*args)
    assert again.returncode == 0 and "[1/4]" not in again.stdout
    assert (out / "summary.json").stat().st_mtime_ns == stamp


def test_complexity_against_coverage_resumes_after_an_interruption(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindscope.analyses import ComplexitySettings, resolve_budget
    from bindscope.scratch import coverage_complexity

    calls = []
    real = coverage_complexity.run_analysis
    monkeypatch.setattr(coverage_complexity, "run_analysis", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    settings = ComplexitySettings(
        budget=resolve_budget("cpu"),
        approximators=("additive",),
        fractions=(0.5,),
        seeds=(0,),
        description_length=False,
    )

    def stop(line: str) -> None:
        raise KeyboardInterrupt(line)

    out = tmp_path / "cc"
    with pytest.raises(KeyboardInterrupt):
        coverage_complexity.complexity_by_coverage(swept, out, settings, say=stop)
    assert len(calls) == 1 and not out.exists() and (tmp_path / ".cc.complexity" / "f0.3-s0" / "complexity").is_dir()
    summary = coverage_complexity.complexity_by_coverage(swept, out, settings)
    assert len(calls) == 4 and len(summary["verdicts"]) == 4  # the finished run was not computed again
    assert not (tmp_path / ".cc.complexity").exists()


def test_complexity_against_coverage_bad_inputs(run_cli, swept: Path, exported, tmp_path: Path) -> None:
    exp, _ = exported
    assert_one_line_error(
        run_cli("scratch", "complexity", exp, "--out", tmp_path / "a", "-q"),
        f"{exp} is not a finished `bindscope scratch sweep` folder; run the sweep first and pass its --out",
    )
    assert_one_line_error(
        run_cli("scratch", "complexity", swept, "--out", tmp_path / "b", "--budget", "huge", "-q"),
        "unknown budget 'huge'; choose auto, ",
    )
    assert_one_line_error(
        run_cli("scratch", "complexity", swept, "--out", tmp_path / "c", "--approximators", "cubic", "-q"),
        "cubic",
    )
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c", ".c.complexity"))


def test_long_work_shows_progress_lines_in_a_log_and_quiet_hides_them(
    run_cli, workdir: Path, tiny_yaml: Path, exported, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINDSCOPE_PROGRESS_SECONDS", "0")  # a line at every update (30 s apart by default)
    shown = run_cli("scratch", "train", "--config", tiny_yaml, "--out", workdir / "shown")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if line.startswith("train: ")]
    assert lines and "\r" not in shown.stderr, shown.stderr  # plain lines in a log, not a redrawn bar
    assert re.fullmatch(r"train: \d+/\d+ steps \(\d+%\), \d+ s.*", lines[0]), lines[0]
    quiet = run_cli("scratch", "train", "--config", tiny_yaml, "--out", workdir / "quiet", "-q")
    assert quiet.returncode == 0 and "train: " not in quiet.stderr
    exp, _ = exported
    probe = run_cli("probe", exp / "embeddings" / "scene", "--out", workdir / "probe-shown", "--seeds", "0")
    assert probe.returncode == 0, probe.stderr
    assert re.search(r"^probe: \d+/\d+ \w+s \(\d+%\)", probe.stderr, re.M), probe.stderr
