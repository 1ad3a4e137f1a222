"""A hostile trial of the faults a single command cannot see coming (issue 54): other processes and the machine.

Each scenario sets up tiny inputs in a temp folder, runs the real ``bindscope`` command in processes of its own
(HOME, XDG_CACHE_HOME, HF_HOME, TORCH_HOME, MPLCONFIGDIR and TMPDIR in that folder), disturbs it, and checks the
oracle of docs/guides/faults.md:

- a refused command exits 1 with one line on stderr, ``error: ...`` (no traceback), and writes nothing;
- a command that finishes gives what an undisturbed run gives (file by file, JSON without its timings);
- no byte of a file bindscope did not write changes, and no result mixes two inputs or two moments.

A command is paused at a known moment with the fault hook ``BINDSCOPE_KILL_AT=POINT:N:SIGSTOP`` (it stops
itself there; the trial acts, then sends SIGCONT), so the races are reproducible rather than timed.

Scenarios (the letters are issue 54's):

a  two ``run`` on one ``--out`` at once: the second is refused naming the holder, or queues with ``--wait``
b  ``report`` and ``compare`` of a run folder while a run writes it (a new run, and a rerun adding analyses)
c  ``embed --out RUN/embeddings/...`` into a run's folder while it runs, and after
d  the dataset deleted or rewritten while ``embed`` (captions, images) or ``probe`` reads it
e  ``probe`` while ``embeddings import --overwrite`` replaces its embeddings, again and again
h  unwritable cache folders, the working folder deleted mid-command, ``LANG=C`` with non-ASCII names
i  a Ray worker killed mid-sweep (``complexity --executor ray``), and the driver killed: the rerun

Each check prints a row, scenario | outcome | held; the exit status is 1 when any does not hold.

Run it from the repository root (about 10 minutes on 2 cores; 29 of 33 checks held on 2026-12-07, the 4 others are
reported in issue 54: an --out inside a run folder being written, a missing HOME, a folder name that is not UTF-8)::

    .venv/bin/python benchmarks/trial_concurrency.py [--only a,b,c,d,e,h,i] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "helpers")]  # the tiny CLIP builder the tests use

from trial_env import Done, sandbox_env  # noqa: E402

BINDSCOPE = Path(sys.executable).with_name("bindscope")
MINILM = "st:all-MiniLM-L6-v2"
#: Fields that say when, how fast or by which process, not what was computed (as tests/faults/test_kill.py).
VOLATILE = {"created", "seconds", "steps_per_second", "started", "finished", "rows_reused", "fits", "status", "steps"}
VOLATILE |= {"pid", "git"}
RUN_CONFIG = """\
name: trial
seeds: [0]
datasets:
  - {name: clevr, preset: clevr}
models:
  - {spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}
analyses:
  probe: {optimizer: lbfgs}
  decompose: {optimizer: lbfgs, seeds: [0]}
"""
#: The same run with two more analyses: a rerun into a finished folder adds them.
RUN_MORE = RUN_CONFIG + "  geometry: {fractions: [0.3, 0.6]}\n  intervene: {probe_optimizer: lbfgs}\n"


# -- the table -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    scenario: str
    outcome: str
    held: bool


ROWS: list[Row] = []
RAY_FOLDERS: list[Path] = []  # removed at the end, with the temp folder


def record(scenario: str, problems: list[str], outcome: str) -> None:
    """One row: held when no problem was found; the outcome (or the problems) in words."""
    row = Row(scenario, outcome if not problems else "; ".join(problems), not problems)
    ROWS.append(row)
    print(f"| {row.scenario} | {row.outcome} | {'yes' if row.held else 'NO'} |", flush=True)


# -- processes -----------------------------------------------------------------------------------------------
class Sandbox:
    """A temp folder with its own HOME and caches; runs ``bindscope`` there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = sandbox_env(root)
        ray_tmp = tempfile.mkdtemp(prefix="bsr-", dir="/tmp")  # Ray's sockets need a short path
        self.env["BINDSCOPE_RAY_TMPDIR"] = ray_tmp
        RAY_FOLDERS.append(Path(self.env["BINDSCOPE_RAY_TMPDIR"]))
        self._count = 0

    def start(self, *args: object, cwd: Path | None = None, env: dict[str, str] | None = None) -> Proc:
        """``bindscope ARGS`` in the background; its output goes to files."""
        self._count += 1
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        out, err = logs / f"{self._count}.out", logs / f"{self._count}.err"
        argv = [str(BINDSCOPE), *map(str, args)]
        with out.open("w") as o, err.open("w") as e:
            popen = subprocess.Popen(
                argv, cwd=cwd or self.root, env={**self.env, **(env or {})}, stdout=o, stderr=e, start_new_session=True
            )
        return Proc(popen, argv[1:], out, err)

    def run(
        self, *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
    ) -> Done:
        return self.start(*args, cwd=cwd, env=env).finish(timeout)


@dataclass
class Proc:
    popen: subprocess.Popen
    args: list[str]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def state(self) -> str:
        """The process's state letter (R, S, T for stopped, Z), or '' once it is gone."""
        try:
            return Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return ""

    def wait_paused(self, timeout: float = 300) -> None:
        """Until it stopped itself at its pause point (SIGSTOP); fails if it ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.state() == "T":
                return
            if self.popen.poll() is not None:
                raise TrialError(
                    f"{self.args[0]} ended ({self.popen.returncode}) before its pause: {self.err.read_text()}"
                )
            time.sleep(0.05)
        raise TrialError(f"{self.args[0]} did not reach its pause in {timeout} s")

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def finish(self, timeout: float = 600) -> Done:
        try:
            status = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TrialError(f"bindscope {' '.join(self.args)} did not end in {timeout} s") from None
        return Done(self.args, status, self.out.read_text(errors="replace"), self.err.read_text(errors="replace"))

    def kill(self, signum: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)
        self.popen.wait(60)


class TrialError(RuntimeError):
    """The trial itself could not arrange a scenario (not a finding about bindscope)."""


def pause_at(point: str) -> dict[str, str]:
    """The environment that makes a command stop itself (SIGSTOP) the N-th time it passes ``POINT:N``."""
    return {"BINDSCOPE_KILL_AT": f"{point}:SIGSTOP"}


# -- oracles -------------------------------------------------------------------------------------------------
def refused(done: Done, *needles: str) -> list[str]:
    """Problems with a refusal: exit status 1, one line ``error: ...`` holding each needle, no traceback."""
    problems = []
    lines = done.stderr.strip().splitlines()
    if "Traceback" in done.stderr:
        problems.append(f"traceback: {last_lines(done.stderr)}")
    elif done.status != 1:
        problems.append(f"exit {done.status} (refusal expected): {last_lines(done.stderr)}")
    elif len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"not one 'error:' line: {last_lines(done.stderr)}")
    else:
        problems += [f"the error does not say {n!r}: {lines[0]}" for n in needles if n not in lines[0]]
    return problems


def succeeded(done: Done) -> list[str]:
    if done.status == 0 and "Traceback" not in done.stderr:
        return []
    return [f"`{' '.join(done.args[:2])}` exit {done.status}: {last_lines(done.stderr)}"]


def last_lines(text: str, n: int = 2) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:])[-300:] or "(nothing on stderr)"


def normalised(value: object) -> object:
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def fingerprint(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """Every file under ``folder`` (its own path written as ``<out>``): JSON as data without the volatile fields,
    anything else by its bytes; HTML is left out (figures carry random ids), and paths starting with ``skip``."""
    prints: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".html" or rel.startswith(skip) or path.name.endswith(".lock"):
            continue
        raw = path.read_bytes().replace(os.fsencode(folder), b"<out>")
        prints[rel] = normalised(json.loads(raw)) if path.suffix == ".json" else hashlib.sha256(raw).hexdigest()
    return prints


def differences(a: dict[str, object], b: dict[str, object]) -> list[str]:
    """Where two fingerprints differ, in short."""
    out = [f"{k} {'missing' if k not in a else 'extra' if k not in b else 'differs'}" for k in sorted(set(a) | set(b))]
    return [d for d, k in zip(out, sorted(set(a) | set(b))) if a.get(k) != b.get(k)]


def same_as(
    folder: Path, reference: dict[str, object], what: str, skip: tuple[str, ...] = (), paths: bool = True
) -> list[str]:
    """Problems with ``folder`` against an undisturbed run's fingerprint (``paths=False``: the inputs' paths aside,
    for a folder made from a copy of the reference's inputs)."""
    if not folder.is_dir():
        return [f"{what}: {folder.name} was not written"]
    got = fingerprint(folder, skip)
    diff = differences(got, reference) if paths else differences(without_paths(got), without_paths(reference))
    return [f"{what} differs from an undisturbed run: {', '.join(diff[:4])}"] if diff else []


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, by path, with its bytes (the user's files: nothing may change them)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- inputs ----------------------------------------------------------------------------------------------------
@dataclass
class World:
    """What every scenario may read and none may change: a dataset, planted arrays and their embedding folder, run
    configs, a user's notes; and the undisturbed references, made once."""

    box: Sandbox
    dataset: Path
    array_a: Path
    array_b: Path
    planted: Path
    run_yaml: Path
    run_more_yaml: Path
    _references: dict[str, dict[str, object]]

    def reference(self, name: str, *args: object, out_name: str | None = None) -> dict[str, object]:
        """The fingerprint of an undisturbed ``bindscope ARGS --out REF`` (made once per name)."""
        if name not in self._references:
            out = self.box.root / "references" / (out_name or name)
            done = self.box.run(*args, "--out", out)
            if succeeded(done):
                raise TrialError(f"the reference {name} failed: {done.stderr}")
            self._references[name] = fingerprint(out)
        return self._references[name]

    def owned(self) -> dict[str, bytes]:
        """The inputs and the user's files, byte for byte (the references and built models aside)."""
        return {
            f"{folder.name}/{k}": v
            for folder in (self.dataset, self.planted, self.box.root / "notes")
            for k, v in snapshot(folder).items()
        } | {p.name: p.read_bytes() for p in (self.array_a, self.array_b, self.run_yaml, self.run_more_yaml)}

    def reference_run(self) -> dict[str, object]:
        return self.reference("run", "run", self.run_yaml, "-q", out_name="run")


def make_world(root: Path) -> World:
    from bindscope.data.datasets import build_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    box = Sandbox(root / "world")
    inputs = box.root / "inputs"
    ds = build_dataset("clevr", inputs / "clevr", images=False)
    paths = []
    for seed in (0, 1):
        path = inputs / f"planted-{seed}.npy"
        np.save(path, planted_embeddings(ds.scenes, "object_additive", dim=12, noise=0.2, seed=seed))
        paths.append(path)
    planted = import_embeddings(ds.root, paths[0], name="planted", modality="text", out=inputs / "planted").root
    (box.root / "notes").mkdir()
    (box.root / "notes" / "todo.txt").write_text("my notes\n")
    (inputs / "run.yaml").write_text(RUN_CONFIG)
    (inputs / "run-more.yaml").write_text(RUN_MORE)
    return World(box, ds.root, paths[0], paths[1], planted, inputs / "run.yaml", inputs / "run-more.yaml", {})


def probe_args(world: World) -> tuple[object, ...]:
    """The probe the scenarios run on the planted embeddings (its undisturbed result is the reference ``probe``)."""
    return ("probe", world.planted, "--optimizer", "lbfgs", "--seeds", "0")


def fresh(world: World, name: str) -> Sandbox:
    """A sandbox of its own for a scenario, beside the world's."""
    return Sandbox(world.box.root.parent / name)


# -- a: two runs on one --out ------------------------------------------------------------------------------------
def scenario_a(world: World) -> None:
    box = fresh(world, "a")
    out = box.root / "runs" / "r"
    reference = world.reference_run()
    first = box.start("run", world.run_yaml, "--out", out, "-q", env=pause_at("embed-chunk:1"))
    first.wait_paused()
    second = box.run("run", world.run_yaml, "--out", out, "-q")
    problems = refused(second, f"another bindscope process (pid {first.pid}", f"is writing run folder {out}", "--wait")
    record("a. second `run` on a busy --out", problems, f"refused in one line naming the holder (pid {first.pid})")

    queued = box.start("run", world.run_yaml, "--out", out, "-q", "--wait")
    problems = []
    deadline = time.monotonic() + 120
    while "waiting for" not in queued.err.read_text() and time.monotonic() < deadline and queued.popen.poll() is None:
        time.sleep(0.1)
    said = queued.err.read_text().strip()
    if f"waiting for pid {first.pid}" not in said:
        problems.append(f"--wait did not say whom it waits for: {said!r}")
    if queued.popen.poll() is not None:
        problems.append(f"--wait ended while the first still held the lock: {said}")
    first.resume()
    done_first, done_queued = first.finish(), queued.finish()
    problems += succeeded(done_first) + succeeded(done_queued)
    if "reused" not in done_queued.stdout and "computed" in done_queued.stdout:
        problems.append("the queued run computed steps again instead of reusing the first's")
    problems += same_as(out, reference, "the run folder")
    record(
        "a. `run --wait` on a busy --out",
        problems,
        "queues (`waiting for pid N ...`), then reuses every finished step; the folder equals an undisturbed run",
    )


# -- b: report and compare while a run writes ------------------------------------------------------------------
def scenario_b(world: World) -> None:
    box = fresh(world, "b")
    other = box.root / "runs" / "other"
    world.reference_run()
    shutil.copytree(world.box.root / "references" / "run", other)  # a finished run to compare with
    out = box.root / "runs" / "r"

    running = box.start("run", world.run_yaml, "--out", out, "-q", env=pause_at("embed-chunk:1"))
    running.wait_paused()
    report = box.run("report", out)
    problems = refused(report, f"another bindscope process (pid {running.pid}", "run folder")
    record("b. `report RUN` while a new run writes it", problems, "refused in one line naming the run's process")
    cmp = box.root / "cmp-0"
    compared = box.run("compare", out, other, "--out", cmp)
    problems = refused(compared, str(out)) + (["compare wrote its --out"] if cmp.exists() else [])
    record(
        "b. `compare RUN OTHER` while a new run writes RUN", problems, f"refused in one line: {first_line(compared)}"
    )
    running.resume()
    problems = succeeded(running.finish())

    # a rerun that adds two analyses to the finished folder, paused after the first new result is in place
    rerun = box.start("run", world.run_more_yaml, "--out", out, "-q", env=pause_at("stage-move:2"))
    rerun.wait_paused()
    report = box.run("report", out)
    problems = refused(report, f"another bindscope process (pid {rerun.pid}")
    record("b. `report RUN` while a rerun adds analyses", problems, "refused in one line naming the run's process")
    cmp = box.root / "cmp-1"
    compared = box.run("compare", out, other, "--out", cmp)
    problems = refused(compared, str(out)) + (["compare wrote its --out"] if cmp.exists() else [])
    record(
        "b. `compare RUN OTHER` while a rerun adds analyses to RUN",
        problems,
        f"refused in one line: {first_line(compared)}",
    )
    rerun.kill()  # killed -9 half-way: the folder holds some of the new results, its manifest the old run's
    cmp = box.root / "cmp-2"
    compared = box.run("compare", out, other, "--out", cmp)
    problems = refused(compared, str(out)) + (["compare wrote its --out"] if cmp.exists() else [])
    record(
        "b. `compare RUN OTHER` after a rerun adding analyses was killed -9",
        problems,
        f"refused in one line: {first_line(compared)}",
    )
    finished = box.run("run", world.run_more_yaml, "--out", out, "-q")
    cmp = box.root / "cmp-3"
    compared = box.run("compare", out, other, "--out", cmp)
    problems = succeeded(finished) + succeeded(compared)
    record("b. `compare` once the rerun finished", problems, "compares both runs")


def first_line(done: Done) -> str:
    lines = done.stderr.strip().splitlines()
    return (lines[0] if lines else "(nothing)")[:200]


# -- c: embed into a run's folder ----------------------------------------------------------------------------------
def scenario_c(world: World) -> None:
    box = fresh(world, "c")
    out = box.root / "runs" / "r"
    reference = world.reference_run()
    own = out / "embeddings" / "clevr" / "minilm-text"
    extra = out / "embeddings" / "clevr" / "extra"
    embed = ("embed", world.dataset, "--model", MINILM, "--modality", "text", "-q")

    running = box.start("run", world.run_yaml, "--out", out, "-q", env=pause_at("embed-chunk:1"))
    running.wait_paused()
    same = box.run(*embed, "--out", own)
    problems = refused(same, f"another bindscope process (pid {running.pid}")
    record("c. `embed --out RUN/embeddings/<the run's own>` while the run embeds it", problems, "refused in one line")
    inside = box.run(*embed, "--out", extra)
    problems = refused(inside, f"pid {running.pid}") + ([f"{extra} was written"] if extra.exists() else [])
    record(
        "c. `embed --out RUN/embeddings/new` while the run writes RUN",
        problems,
        "refused in one line naming the run's process",
    )
    running.resume()
    problems = succeeded(running.finish()) + same_as(out, reference, "the run folder", skip=("embeddings/clevr/extra",))
    record("c. the run then", problems, "finishes; its folder equals an undisturbed run's")

    # after the run: a folder of its own below embeddings/ is allowed, the run's own embeddings replaced with another
    # model's; the run's next rerun puts its own back and equals an undisturbed run
    after = box.run(*embed, "--out", extra)
    replaced = box.run(
        "embed", world.dataset, "--model", f"{MINILM}+rand", "--modality", "text", "-q", "--out", own, "--overwrite"
    )
    rerun = box.run("run", world.run_yaml, "--out", out, "-q")
    problems = succeeded(after) + succeeded(replaced) + succeeded(rerun)
    problems += same_as(out, reference, "the rerun run folder", skip=("embeddings/clevr/extra",))
    if "clevr/minilm-text (replaced" not in rerun.stdout:
        problems.append(f"the rerun did not replace the embeddings written over its own: {rerun.stdout[:300]}")
    record(
        "c. `embed --out RUN/embeddings/...` after the run (a new folder; the run's own with --overwrite)",
        problems,
        "written; the run's rerun replaces the folder written over its own (status replaced), recomputes its "
        "analyses and equals an undisturbed run",
    )


# -- d: the dataset deleted or rewritten while a command reads it ------------------------------------------------------
def image_world(world: World) -> tuple[Path, Path]:
    """A clevr2d dataset with 24-pixel images and a tiny CLIP (random weights) to embed them."""
    from tiny_models import save_tiny_clip

    root = world.box.root / "inputs"
    if not (root / "clip").is_dir():
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            save_tiny_clip(root / "clip", image_size=24)
        done = world.box.run("dataset", "build", "clevr2d", "--image-size", "24", "--out", root / "clevr2d", "-q")
        if succeeded(done):
            raise TrialError(done.stderr)
    return root / "clevr2d", root / "clip"


def scenario_d(world: World) -> None:
    box = fresh(world, "d")
    text = ("--model", MINILM, "--modality", "text", "--chunk-rows", "96", "-q")
    reference = world.reference("embed-text", "embed", world.dataset, *text)
    for how in ("deleted", "rewritten"):
        ds = box.root / f"data-{how}" / "clevr"
        shutil.copytree(world.dataset, ds)
        out = box.root / f"emb-{how}"
        embedding = box.start("embed", ds, *text, "--out", out, env=pause_at("embed-chunk:2"))
        embedding.wait_paused()
        disturb(box, ds, how, "clevr2d", "--no-images")
        embedding.resume()
        done = embedding.finish()
        problems, outcome = text_embed_outcome(box, done, out, reference, how)
        record(f"d. dataset {how} while `embed` embeds its captions", problems, outcome)

    clevr2d, clip = image_world(world)
    images = ("--model", f"hf:{clip}", "--modality", "image", "--chunk-rows", "96", "-q")
    reference = world.reference("embed-image", "embed", clevr2d, *images)
    redrawn = box.root / "redrawn" / "clevr2d"  # the same scenes drawn at 32 pixels: what the rewrite leaves
    shutil.copytree(clevr2d, redrawn)
    disturb(box, redrawn, "rewritten", "clevr2d", "--image-size", "32")
    new_reference = world.reference("embed-image-32", "embed", redrawn, *images)
    for how in ("deleted", "rewritten"):
        ds = box.root / f"images-{how}" / "clevr2d"
        shutil.copytree(clevr2d, ds)
        out = box.root / f"emb-images-{how}"
        embedding = box.start("embed", ds, *images, "--out", out, env=pause_at("embed-chunk:2"))
        embedding.wait_paused()
        disturb(box, ds, how, "clevr2d", "--image-size", "32")  # the same scenes, other pictures
        embedding.resume()
        done = embedding.finish()
        if done.status == 0:
            old = same_as(out, reference, "the embedding folder", paths=False)
            new = same_as(out, new_reference, "the embedding folder", paths=False)
            problems = [] if not old or not new else [f"the array is neither the old nor the new images' ({old[0]})"]
            outcome = f"finishes with the {'old' if not old else 'new'} images' array whole"
        else:
            problems = refused(done) + ([f"{out.name} was written"] if out.exists() else [])
            outcome = f"refused in one line: {first_line(done)}"
        record(f"d. dataset {how} while `embed` reads its images", problems, outcome)

    reference = world.reference("probe", *probe_args(world))
    rng = random.Random(54)
    for how in ("deleted", "rewritten"):
        outcomes: list[str] = []
        problems = []
        for attempt in range(4):  # three random moments, then once it has read everything (paused before writing)
            work = box.root / f"probe-{how}-{attempt}"
            ds = work / "clevr"
            shutil.copytree(world.dataset, ds)
            emb = work / "emb"
            imported = box.run("embeddings", "import", ds, world.array_a, "--name", "planted", "--modality", "text",
                               "--out", emb)  # fmt: skip
            problems += succeeded(imported)
            last = attempt == 3
            probing = box.start("probe", emb, "--optimizer", "lbfgs", "--seeds", "0", "--out", work / "p", "-q",
                                env=pause_at("stage-move:1") if last else None)  # fmt: skip
            if last:
                probing.wait_paused()
            else:
                time.sleep(rng.uniform(2.0, 6.0))  # somewhere in its start, its reading or its fit
            disturb(box, ds, how, "clevr2d", "--no-images")
            if last:
                probing.resume()
            done = probing.finish()
            if done.status == 0:
                problems += same_as(work / "p", reference, "the probe result", paths=False)
                outcomes.append("finished (equal to an undisturbed probe)")
            else:
                problems += refused(done) + ([f"{work.name}/p was written"] if (work / "p").exists() else [])
                outcomes.append(f"refused in one line ({first_line(done).split(' /')[0]} ...)")
        record(
            f"d. dataset {how} while `probe` reads it (3 random moments, 1 after its reading)",
            problems,
            "; ".join(f"{outcomes.count(o)} x {o}" for o in sorted(set(outcomes))),
        )


def disturb(box: Sandbox, ds: Path, how: str, *build: str) -> None:
    """Delete the dataset folder, or rebuild another preset (``build``) over it with ``--overwrite``."""
    if how == "deleted":
        shutil.rmtree(ds)
        return
    done = box.run("dataset", "build", *build, "--out", ds, "--overwrite", "-q")
    if succeeded(done):
        raise TrialError(f"rewriting {ds} failed: {done.stderr}")


def text_embed_outcome(
    box: Sandbox, done: Done, out: Path, reference: dict[str, object], how: str
) -> tuple[list[str], str]:
    """What an embed of captions gave when its dataset went: the array whole, and an analysis of it refused in one
    line (the dataset is gone, or holds other scenes); or the embed itself refused."""
    if done.status != 0:
        problems = refused(done) + ([f"{out.name} was written"] if out.exists() else [])
        return problems, f"refused in one line: {first_line(done)}"
    problems = same_as(out, reference, "the embedding folder", paths=False)
    probe = box.run("probe", out, "--out", out.parent / f"probe-{how}", "-q")
    problems += refused(probe, "dataset")
    return problems, f"finishes with the captions it read; `probe` of it then: {first_line(probe)[:120]}"


# -- e: probe while its embeddings are replaced --------------------------------------------------------------------
SWAPPER = """
import sys, itertools
from bindscope.embeddings.store import import_embeddings
ds, a, b, out = sys.argv[1:5]
for i in itertools.count():
    name, array = ("a", a) if i % 2 == 0 else ("b", b)
    import_embeddings(ds, array, name=name, modality="text", out=out, overwrite=True)
    if i == 0:
        print("ready", flush=True)
"""


@contextlib.contextmanager
def swapping(box: Sandbox, world: World, out: Path) -> Iterator[None]:
    """Another process replaces ``out`` with array a (name ``a``), then b, then a... as fast as it can."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, world.dataset, world.array_a, world.array_b, out],
        env=box.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        if proc.stdout.readline() != "ready\n":
            raise TrialError("the swapping process did not start")
        yield
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def scenario_e(world: World) -> None:
    from bindscope.core.errors import BindscopeError
    from bindscope.embeddings.store import load_embeddings

    box = fresh(world, "e")
    emb = box.root / "emb"
    arrays = {"a": np.load(world.array_a).astype(np.float32), "b": np.load(world.array_b).astype(np.float32)}
    loads, mixed, errors = 0, [], []
    with swapping(box, world, emb):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                got = load_embeddings(emb)
            except BindscopeError as exc:
                errors.append(str(exc))
                continue
            loads += 1
            if not np.array_equal(got.array, arrays[got.name]):
                other = "b" if got.name == "a" else "a"
                mixed.append("the other's array" if np.array_equal(got.array, arrays[other]) else "a mixed array")
    problems = [f"{len(mixed)} of {loads} loads paired a manifest with {mixed[0]}"] if mixed else []
    problems += [f"{len(errors)} loads failed, e.g. {errors[0][:150]}"] if errors and not mixed else []
    record(
        "e. the embedding loader while `import --overwrite` swaps the folder (15 s)",
        problems,
        f"{loads} loads, each the old or the new folder whole",
    )

    refs = {
        name: world.reference(
            f"probe-{name}", "probe", planted_copy(world, name), "--optimizer", "lbfgs", "--seeds", "0"
        )
        for name in ("a", "b")
    }
    outcomes, problems = [], []
    with swapping(box, world, emb):
        for attempt in range(4):
            out = box.root / f"probe-{attempt}"
            done = box.run("probe", emb, "--optimizer", "lbfgs", "--seeds", "0", "--out", out, "-q")
            if done.status == 0:
                result = fingerprint(out)
                match = [n for n, ref in refs.items() if not differences(without_paths(result), without_paths(ref))]
                if not match:
                    problems.append(f"probe {attempt}: results equal neither a's nor b's probe")
                outcomes.append(f"{match[0] if match else '?'}")
            else:
                problems += refused(done)
                outcomes.append("refused")
    record(
        "e. `probe` while `import --overwrite` swaps its embeddings (4 probes)",
        problems,
        f"each probe read one array whole: {', '.join(outcomes)}",
    )


def planted_copy(world: World, name: str) -> Path:
    """An embedding folder of array a or b named like the swapper's, for the probe references."""
    from bindscope.embeddings.store import import_embeddings

    out = world.box.root / "inputs" / f"emb-{name}"
    if not out.is_dir():
        array = world.array_a if name == "a" else world.array_b
        import_embeddings(world.dataset, array, name=name, modality="text", out=out)
    return out


def without_paths(prints: dict[str, object]) -> dict[str, object]:
    """A result's fingerprint without the input folder's path (the references read other folders)."""
    return {k: strip_paths(v) for k, v in prints.items()}


def strip_paths(value: object) -> object:
    """JSON without its absolute paths (a value starting with ``/``)."""
    if isinstance(value, dict):
        return {k: strip_paths(v) for k, v in value.items() if not (isinstance(v, str) and v.startswith("/"))}
    if isinstance(value, list):
        return [strip_paths(v) for v in value]
    return value


# -- h: the machine: caches, the working folder, the locale ---------------------------------------------------------
CACHES = ("HOME", "XDG_CACHE_HOME", "HF_HOME", "TORCH_HOME", "MPLCONFIGDIR")


def read_only(folder: Path) -> list[str] | None:
    """A command prefix that runs with ``folder`` mounted read-only (a user and mount namespace), or None."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && true"],
        capture_output=True,
    )
    return None if probe.returncode else ["unshare", "-rm", "sh", "-c"]


def scenario_h(world: World) -> None:
    box = fresh(world, "h")
    probe = probe_args(world)
    embed = ("embed", world.dataset, "--model", MINILM, "--modality", "text", "-q")
    references = {"probe": world.reference("probe", *probe), "embed": world.reference("embed-text-plain", *embed)}
    blocker = box.root / "a-file"
    blocker.write_text("not a folder")
    frozen = box.root / "read-only"
    frozen.mkdir()
    places = {
        "uncreatable (HOME a file, the caches below it)": {
            **{v: str(blocker / v.lower()) for v in CACHES},
            "HOME": str(blocker),
        },
        "missing (HOME=/nonexistent as for a service account; creatable)": {
            "HOME": str(box.root / "nonexistent"),
            **{v: str(box.root / "nonexistent" / v.lower()) for v in CACHES if v != "HOME"},
        },
    }
    prefix = read_only(frozen)
    if prefix is not None:
        places["read-only (a read-only mount)"] = {v: str(frozen / v.lower()) for v in CACHES}
    for where, caches in places.items():
        for name, args in (("probe", probe), ("embed", embed)):
            out = box.root / f"{name}-{len(ROWS)}"
            if where.startswith("read-only"):
                for folder in caches.values():
                    Path(folder).mkdir(exist_ok=True)
                assert prefix is not None
                line = " ".join(f"{k}={v}" for k, v in caches.items())
                script = (
                    f"mount --bind {frozen} {frozen} && mount -o remount,bind,ro {frozen} && "
                    f"exec env {line} {BINDSCOPE} {' '.join(map(str, args))} --out {out} -q"
                )
                raw = subprocess.run([*prefix, script], env=box.env, capture_output=True, text=True, timeout=600)
                done = Done([str(a) for a in args], raw.returncode, raw.stdout, raw.stderr)
            else:
                done = box.run(*args, "--out", out, "-q", env=caches)
            problems = succeeded(done) + same_as(out, references[name], f"the {name} output")
            noise = [line for line in done.stderr.splitlines() if line.strip()]
            outcome = "finishes, equal to an undisturbed run" + (f"; stderr: {noise[0][:100]}" if noise else "")
            record(f"h. `{name}` with HOME and every cache folder {where}", problems, outcome)
            shutil.rmtree(box.root / "nonexistent", ignore_errors=True)

    # the working folder deleted under a command that writes a relative --out
    for name, args, point in (
        ("embed", (*embed, "--chunk-rows", "96"), "embed-chunk:2"),
        ("run", ("run", world.run_yaml, "-q"), "embed-chunk:1"),
    ):
        work = box.root / f"cwd-{name}"
        work.mkdir()
        started = box.start(*args, "--out", "rel", cwd=work, env=pause_at(point))
        started.wait_paused()
        shutil.rmtree(work)
        started.resume()
        done = started.finish()
        if done.status == 0:
            problems = [] if "Traceback" not in done.stderr else [last_lines(done.stderr)]
            outcome = "finishes, writing into the deleted folder (nothing visible is left)"
        else:
            problems = refused(done)
            outcome = f"refused in one line: {first_line(done)}"
        leftovers = [str(p) for p in box.root.glob("**/rel") if p.exists()]
        problems += [f"left {leftovers}"] if leftovers else []
        record(f"h. the working folder deleted under `{name} --out rel`", problems, outcome)

    locale_trial(box, world)


SPACE_YAML = """\
name: epreuve
concepts:
  farbe: [rot, grün, blau, weiß]
  form: [würfel, kugel, kegel]
objects_per_scene: 2
caption: {object: "ein {farbe} {form}"}
"""


def locale_trial(box: Sandbox, world: World) -> None:
    """LANG=C and LC_ALL=C with non-ASCII folders, preset file and concept names: the same results as under UTF-8."""
    results = {}
    for locale in ("C.UTF-8", "C"):
        root = box.root / f"locale-{locale}" / "données-ü"
        root.mkdir(parents=True)
        preset = root / "räume.yaml"
        preset.write_text(SPACE_YAML, encoding="utf-8")
        env = {"LANG": locale, "LC_ALL": locale}
        env |= {"PYTHONUTF8": "", "PYTHONIOENCODING": ""} if locale == "C" else {}
        steps = [
            ("dataset", "build", preset, "--no-images", "--out", root / "jeu-é", "-q"),
            ("dataset", "info", root / "jeu-é"),
            ("embed", root / "jeu-é", "--model", MINILM, "--modality", "text", "--out", root / "emb-ö", "-q"),
            ("probe", root / "emb-ö", "--optimizer", "lbfgs", "--seeds", "0", "--out", root / "probe-ß"),
        ]
        problems = []
        outputs = []
        for step in steps:
            done = box.run(*step, env={k: v for k, v in env.items() if v})
            problems += succeeded(done)
            outputs.append(done.stdout)
        if "würfel" not in outputs[1]:
            problems.append(f"dataset info does not show the concept names: {outputs[1][:200]!r}")
        results[locale] = (
            problems,
            {p: fingerprint(root / p) for p in ("jeu-é", "emb-ö", "probe-ß") if (root / p).is_dir()},
        )
    problems = results["C"][0]
    if not problems and [without_paths(v) for v in results["C"][1].values()] != [
        without_paths(v) for v in results["C.UTF-8"][1].values()
    ]:
        problems.append("the results under LANG=C differ from those under C.UTF-8")
    record(
        "h. LANG=C, LC_ALL=C with non-ASCII paths, preset file and concept names",
        results["C.UTF-8"][0] + problems,
        "dataset build, info, embed and probe finish; results equal those under C.UTF-8",
    )

    # a folder name that is not UTF-8 (a Latin-1 'é', as old archives and some mounts hold): Python carries it
    # as a surrogate escape, and every library must be given it as the bytes it is
    odd = box.root / os.fsdecode(b"caf\xe9")
    odd.mkdir()
    steps = [
        ("dataset", "build", "clevr", "--no-images", "--out", odd / "ds", "-q"),
        ("embeddings", "import", odd / "ds", world.array_a, "--name", "planted", "--modality", "text", "--out",
         odd / "emb"),
        ("probe", odd / "emb", "--optimizer", "lbfgs", "--seeds", "0", "--out", odd / "probe", "-q"),
    ]  # fmt: skip
    problems = []
    for step in steps:
        done = box.run(*step, env={"LANG": "C", "LC_ALL": "C"})
        problems += succeeded(done)
        if done.status:
            break
    if not problems:
        problems = same_as(odd / "probe", world.reference("probe", *probe_args(world)), "the probe", paths=False)
    record(
        "h. a folder name that is not UTF-8 (b'caf\\xe9'), LANG=C",
        problems,
        "dataset build, embeddings import and probe finish; the probe equals an undisturbed one",
    )


# -- i: Ray ---------------------------------------------------------------------------------------------------------
def ray_workers(parent: int, busy: bool = True) -> list[int]:
    """The pids of Ray's processes started by the command ``parent`` (its session): the workers running a unit
    (``ray::run_unit``), or with ``busy=False`` any (idle workers and Ray's agents too)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = stat.read_bytes().split(b"\0")
            sid = os.getsid(int(stat.parent.name))
        except (OSError, ValueError):
            continue
        if cmd and sid == parent and (cmd[0] == b"ray::run_unit" if busy else cmd[0].startswith(b"ray::")):
            found.append(int(stat.parent.name))
    return found


def ray_leftovers(session_root: str) -> dict[int, str]:
    """Processes still naming Ray's session folder under ``session_root`` (raylet, gcs_server, agents, workers)."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            words = cmdline.read_bytes().replace(b"\0", b" ")
            if session_root.encode() in words and int(cmdline.parent.name) != os.getpid():
                found[int(cmdline.parent.name)] = words[:60].decode(errors="replace")
    return found


def scenario_i(world: World) -> None:
    try:
        import ray  # noqa: F401 (only whether it is installed)
    except ImportError:
        record("i. a Ray worker killed mid-sweep", ["Ray is not installed (pip install 'bindscope[ray]')"], "")
        return
    box = fresh(world, "i")
    sweep = ("complexity", world.planted, "--approximators", "additive,mult", "--fractions", "0.3,0.6",
             "--seeds", "0,1", "--no-description-length", "--sweeps", "40", "-q")  # fmt: skip
    reference = world.reference("complexity", *sweep)
    on_ray = ("--executor", "ray", "--memory", "0.25")

    out = box.root / "worker-killed"
    started = box.start(*sweep, *on_ray, "--out", out)
    killed: list[int] = []
    deadline = time.monotonic() + 240
    while not killed and time.monotonic() < deadline and started.popen.poll() is None:
        busy = ray_workers(started.pid)
        if busy:
            time.sleep(0.5)  # into its unit
            for pid in busy[:1]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        time.sleep(0.1)
    done = started.finish()
    if not killed:
        record("i. a Ray worker SIGKILLed mid-sweep", ["no busy Ray worker was seen to kill"], "")
    else:
        outcome = "Ray redoes the lost unit; the sweep finishes equal to a local run"
        if done.status != 0:  # one line, then the same command again resumes
            problems = refused(done)
            again = box.run(*sweep, *on_ray, "--out", out)
            problems += succeeded(again)
            outcome = f"one line ({first_line(done)[:80]}); the same command again finishes equal to a local run"
        else:
            problems = []
        problems += same_as(out, reference, "the sweep")
        record("i. a Ray worker SIGKILLed mid-sweep (`complexity --executor ray`)", problems, outcome)

    out = box.root / "driver-killed"
    started = box.start(*sweep, *on_ray, "--out", out)
    deadline = time.monotonic() + 240
    units = out.parent / f".{out.name}.units"
    while time.monotonic() < deadline and started.popen.poll() is None and not any(units.glob("*/*")):
        time.sleep(0.1)
    started.kill()
    time.sleep(10)  # Ray's own processes notice their driver is gone
    orphans = ray_leftovers(box.env["BINDSCOPE_RAY_TMPDIR"])
    again = box.run(*sweep, *on_ray, "--out", out)
    problems = succeeded(again) + same_as(out, reference, "the sweep")
    if orphans:
        problems.append(f"{len(orphans)} Ray processes outlived their killed driver: {list(orphans.values())[:3]}")
    for pid in ray_leftovers(box.env["BINDSCOPE_RAY_TMPDIR"]):  # not to leave them running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    record(
        "i. the driver of `complexity --executor ray` SIGKILLed, then run again",
        problems,
        "the rerun keeps the finished units and equals a local run",
    )


SCENARIOS: dict[str, Callable[[World], None]] = {
    "a": scenario_a,
    "b": scenario_b,
    "c": scenario_c,
    "d": scenario_d,
    "e": scenario_e,
    "h": scenario_h,
    "i": scenario_i,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCENARIOS), help=f"scenarios to run, of {', '.join(SCENARIOS)}")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (its path is printed)")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    root = Path(tempfile.mkdtemp(prefix="bindscope-trial-"))
    started = time.perf_counter()
    print("| scenario | outcome | held |\n|---|---|---|", flush=True)
    try:
        world = make_world(root)
        owned = world.owned()
        for name in names:
            try:
                SCENARIOS[name](world)
            except TrialError as exc:
                record(f"{name}. (the trial could not set it up)", [str(exc)[:300]], "")
        changed = sorted(k for k in set(owned) | set(world.owned()) if owned.get(k) != world.owned().get(k))
        record(
            "every scenario: the inputs and the user's files",
            [f"changed: {', '.join(changed[:5])}"] if changed else [],
            "byte for byte as they were",
        )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
        for folder in RAY_FOLDERS:
            shutil.rmtree(folder, ignore_errors=True)
    failed = sum(not r.held for r in ROWS)
    print(f"{len(ROWS) - failed} held, {failed} did not, in {time.perf_counter() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
