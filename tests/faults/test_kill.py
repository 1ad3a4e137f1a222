"""Kill -9 anywhere: each long command is SIGKILLed at named points (``BINDSCOPE_KILL_AT``) and after a
seeded random delay, then run again; the result equals an uninterrupted run's and nothing is left behind.

One test per (command, kill point): the uninterrupted reference runs once per command, and every command is a
real process forked from the fork server (``forked_cli``), so torch is imported once, not per process. The
file runs on one xdist worker (``--dist loadfile``), so each reference is made once."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.io import OUTPUT_MARK
from forked_cli import ForkServer
from tiny_scratch import tiny_scratch_yaml

#: Fields that say when, how fast or by which process, not what was computed.
VOLATILE = {
    "created",
    "seconds",
    "steps_per_second",
    "started",
    "finished",
    "rows_reused",
    "fits",  # complexity: how many fits this invocation made and how many it found kept (like rows_reused)
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
    """The command's arguments (after ``bindscope``)."""
    args = [a.format(out=out, **inputs) for a in case.args]
    if "{out}" not in case.args:
        args += ["--out", str(out)]
    return args + ([] if "-q" in args or args[0] in ("run",) else ["-q"])


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
    """Hidden files or folders anywhere under ``root``: locks, staging folders, temp files, resume state (not
    the mark every output folder carries)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != OUTPUT_MARK)


@pytest.fixture
def env() -> dict[str, str]:
    """The test's isolated caches (conftest), one thread per command (they are small), no embedding cache (a rerun
    linked from it records the provenance of the embedding it links; tests/embeddings/test_cache.py kills a store)."""
    return {**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "BINDSCOPE_CACHE": "off"}


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


def finish(server: ForkServer, args: list[str], env: dict[str, str]) -> None:
    done = server.run(args, env, timeout=600)
    assert done.returncode == 0, done.stderr


def kill(server: ForkServer, args: list[str], env: dict[str, str], point: str, seconds: float) -> None:
    """Run the command until it is SIGKILLed at ``point`` (or, for "delay", at a seeded moment of its run)."""
    if point != "delay":
        env = {**env, "BINDSCOPE_KILL_AT": point.removeprefix("worker ")}
    proc = server.start(args, env)
    try:
        status = proc.wait(timeout=seconds if point == "delay" else 600)
    except subprocess.TimeoutExpired:
        status = None  # still running at the chosen moment: kill it there
    if point == "delay" and status is not None:  # it ran faster than its reference (a quieter machine): sooner
        assert seconds > 0.05, f"{args} ended before the kill, even after {seconds:.2f} s: choose an earlier moment"
        shutil.rmtree(args[args.index("--out") + 1], ignore_errors=True)
        return kill(server, args, env, point, seconds / 2)
    proc.kill_group(signal.SIGKILL)  # the command and any worker processes it started
    status = proc.wait(timeout=60)
    stderr = proc.stderr
    if point == "delay" and status == 0:  # it finished between the timeout and the kill: try sooner
        assert seconds > 0.05, f"{args} ended before the kill, even after {seconds:.2f} s: choose an earlier moment"
        shutil.rmtree(args[args.index("--out") + 1], ignore_errors=True)
        return kill(server, args, env, point, seconds / 2)
    if point.startswith("worker "):
        assert status == 1 and stderr.startswith("error: a ") and stderr.count("\n") == 1, stderr
        assert "worker process died" in stderr and "run the same command again" in stderr, stderr
    else:
        assert status == -signal.SIGKILL, f"{point}: not killed there (status {status}): {stderr}"


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run of a command: its output's fingerprint and how long it took."""

    fingerprint: dict[str, object]
    seconds: float


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """A fork server with the model libraries imported too: these commands load MiniLM from its package,
    never from the hub cache that huggingface_hub's import-time settings point at."""
    forks = ForkServer(dict(os.environ), tmp_path_factory.mktemp("forks"), preload=("sentence_transformers",))
    yield forks
    forks.close()


@pytest.fixture(scope="module")
def references(
    inputs: dict[str, Path], server: ForkServer, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Reference]:
    """Each command run once uninterrupted (on first use, then kept for its other kill points)."""
    made: dict[str, Reference] = {}
    env = {**os.environ, "NO_COLOR": "1", "BINDSCOPE_CACHE": "off"}

    def reference(name: str) -> Reference:
        if name not in made:
            clean_dir = tmp_path_factory.mktemp(f"clean-{name}")
            started = time.perf_counter()
            finish(server, command(CASES[name], inputs, clean_dir / "out"), env)
            took = time.perf_counter() - started
            assert hidden_leftovers(clean_dir) == []
            made[name] = Reference(fingerprint(clean_dir / "out"), took)
        return made[name]

    return reference


KILLS = [(name, point) for name in CASES for point in CASES[name].points]


@pytest.mark.parametrize(("name", "point"), KILLS)
def test_a_command_killed_anywhere_then_run_again_equals_an_uninterrupted_run(
    name: str,
    point: str,
    references: Callable[[str], Reference],
    inputs: dict[str, Path],
    server: ForkServer,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    reference = references(name)
    args = command(CASES[name], inputs, tmp_path / "out")
    rng = random.Random(f"{name}-{point}-kill")
    kill(server, args, env, point, rng.uniform(0.3, 0.7) * reference.seconds)
    finish(server, args, env)
    assert fingerprint(tmp_path / "out") == reference.fingerprint, (
        point,
        differences(fingerprint(tmp_path / "out"), reference.fingerprint),
    )
    assert hidden_leftovers(tmp_path) == [], point


def test_a_run_killed_before_its_config_was_in_place_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill at the run folder's first write (``config.yaml``, before the mark) leaves only its temporary file: the
    same command again is a run into that folder, not a refusal (a trial of issue 54 found `holds files that are
    not a bindscope run`), and the temporary file goes once the folder is marked."""
    from bindscope.pipeline import run as run_module
    from bindscope.pipeline.config import load_config

    class Stop(Exception):
        pass

    def stop(state: object) -> None:
        raise Stop  # the run got past its start: the rest is the kill matrix's

    (tmp_path / "run.yaml").write_text(RUN_CONFIG)
    out = tmp_path / "out"
    out.mkdir()
    (out / ".config.yaml.ab12cd34.tmp").write_text("name: kil")
    monkeypatch.setattr(run_module, "build_datasets", stop)
    with pytest.raises(Stop):
        run_module.run_pipeline(load_config(tmp_path / "run.yaml"), out, say=lambda line: None)
    assert (out / "config.yaml").is_file() and hidden_leftovers(tmp_path) == []
