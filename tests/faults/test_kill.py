"""Kill -9 anywhere: each long command is SIGKILLed at named points (``BINDSCOPE_KILL_AT``) and after a
seeded random delay, then run again; the result equals an uninterrupted run's and nothing is left behind."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tiny_scratch import tiny_scratch_yaml

BINDSCOPE = Path(sys.executable).with_name("bindscope")
#: Fields that say when, how fast or by which process, not what was computed.
VOLATILE = {
    "created",
    "seconds",
    "steps_per_second",
    "started",
    "finished",
    "rows_reused",
    "status",
    "steps",
    "pid",
    "git",
}
TINY_SCRATCH = tiny_scratch_yaml(steps=90, every=30)
RUN_CONFIG = """\
name: killed
seeds: [0]
datasets:
  - {name: clevr, preset: clevr}
models:
  - {spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}
analyses:
  probe: {optimizer: lbfgs}
  decompose: {optimizer: lbfgs, seeds: [0]}
"""


@dataclass(frozen=True)
class Case:
    """A command (``{out}`` and the inputs' names are filled in) and where it is killed."""

    args: tuple[str, ...]
    #: BINDSCOPE_KILL_AT values, "delay" for a seeded random moment, "worker POINT" for a point only worker
    #: processes pass (the command then fails with a one-line error instead of dying)
    points: tuple[str, ...]


CASES = {
    "dataset-build": Case(
        ("dataset", "build", "clevr2d", "--image-size", "24", "--workers", "2", "--out", "{out}", "-q"),
        ("stage-move", "render-chunk:2", "worker atomic-replace:300", "delay"),
    ),
    "embed": Case(
        ("embed", "{clevr}", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--chunk-rows", "96"),
        ("embed-chunk:3", "delay"),
    ),
    "probe": Case(("probe", "{planted}", "--optimizer", "lbfgs", "--seeds", "0,1"), ("atomic-replace:2", "delay")),
    "complexity": Case(
        ("complexity", "{planted}", "--approximators", "additive", "--fractions", "0.5", "--seeds", "0"),
        ("stage-move", "delay"),
    ),
    "scratch-train": Case(("scratch", "train", "--config", "{scratch}"), ("train-step:40", "stage-move", "delay")),
    "scratch-sweep": Case(
        ("scratch", "sweep", "--config", "{scratch}", "--fractions", "0.5,0.8", "--steps", "40", "--workers", "1"),
        ("sweep-run:1", "train-step:20", "delay"),
    ),
    "run": Case(("run", "{run}"), ("stage-move:3", "embed-chunk", "delay")),
}


def command(case: Case, inputs: dict[str, Path], out: Path) -> list[str]:
    args = [a.format(out=out, **inputs) for a in case.args]
    if "{out}" not in case.args:
        args += ["--out", str(out)]
    return [str(BINDSCOPE), *args] + ([] if "-q" in args or args[0] in ("run",) else ["-q"])


def normalised(value: object) -> object:
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def fingerprint(folder: Path) -> dict[str, object]:
    """Every file under ``folder`` (its own path written as ``<out>``): JSON as data without the volatile
    fields, anything else by its bytes."""
    prints: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".html":  # plotly figures carry random element ids
            continue
        raw = path.read_bytes().replace(str(folder).encode(), b"<out>")
        rel = str(path.relative_to(folder))
        prints[rel] = normalised(json.loads(raw)) if path.suffix == ".json" else hashlib.sha256(raw).hexdigest()
    return prints


def differences(a: object, b: object, where: str = "") -> list[str]:
    """Where two fingerprints differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{where}/{k}")]
    return [] if a == b else [f"{where}: {str(a)[:80]} != {str(b)[:80]}"]


def hidden_leftovers(root: Path) -> list[str]:
    """Hidden files or folders anywhere under ``root``: locks, staging folders, temp files, resume state."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


@pytest.fixture
def env() -> dict[str, str]:
    """The test's isolated caches (conftest), one thread per command (they are small)."""
    return {**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> dict[str, Path]:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("kill-inputs")
    array = planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=12, noise=0.2, seed=0)
    np.save(root / "planted.npy", array)
    planted = import_embeddings(clevr_dir, root / "planted.npy", name="planted", modality="text", out=root / "emb")
    (root / "tiny.yaml").write_text(TINY_SCRATCH)
    (root / "run.yaml").write_text(RUN_CONFIG)
    return {"clevr": clevr_dir, "planted": planted.root, "scratch": root / "tiny.yaml", "run": root / "run.yaml"}


def finish(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def kill(cmd: list[str], env: dict[str, str], point: str, seconds: float) -> None:
    """Run ``cmd`` until it is SIGKILLed at ``point`` (or, for "delay", at a seeded moment of its run)."""
    if point != "delay":
        env = {**env, "BINDSCOPE_KILL_AT": point.removeprefix("worker ")}
    pipes = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True}
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, **pipes)  # type: ignore[call-overload]
    if point == "delay":
        time.sleep(seconds)
        assert proc.poll() is None, f"{cmd} ended before the kill, after {seconds:.1f} s: choose an earlier moment"
    else:
        proc.wait(timeout=600)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the command and any worker processes it started
    _, stderr = proc.communicate(timeout=60)
    if point.startswith("worker "):
        assert proc.returncode == 1 and stderr.startswith("error: a ") and stderr.count("\n") == 1, stderr
        assert "worker process died" in stderr and "run the same command again" in stderr, stderr
    else:
        assert proc.returncode == -signal.SIGKILL, f"{point}: not killed there (status {proc.returncode}): {stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_a_command_killed_anywhere_then_run_again_equals_an_uninterrupted_run(
    name: str, inputs: dict[str, Path], env: dict[str, str], tmp_path: Path
) -> None:
    case = CASES[name]
    clean_dir, killed_dir = tmp_path / "clean", tmp_path / "killed"
    clean_dir.mkdir()
    killed_dir.mkdir()
    started = time.perf_counter()
    finish(command(case, inputs, clean_dir / "out"), env)
    took = time.perf_counter() - started
    reference = fingerprint(clean_dir / "out")
    rng = random.Random(f"{name}-kill")
    for point in case.points:
        out = killed_dir / "out"
        kill(command(case, inputs, out), env, point, rng.uniform(0.3, 0.7) * took)
        finish(command(case, inputs, out), env)
        assert fingerprint(out) == reference, (point, differences(fingerprint(out), reference))
        assert hidden_leftovers(killed_dir) == [], point
        shutil.rmtree(out)
    assert hidden_leftovers(clean_dir) == []
