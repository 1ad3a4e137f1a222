"""A hostile trial of kill -9 and disk trouble for every writer (issue 54, f and g).

f  Every writing command is SIGKILLed at every named kill point it passes (``BINDSCOPE_KILL_AT=NAME:N``, the
   first, the last and a seeded pass between) and, for ``scratch train``, ``complexity`` and ``report``, at seeded
   random moments of its run. ``stage-swap`` is reached by replacing an earlier result of other settings with
   ``--overwrite``. After each kill the same command runs again; its output must equal an uninterrupted run's
   (file by file, JSON without its timings, as tests/faults/test_kill.py) and no hidden file may be left (a lock,
   a staging folder, a temporary file, resume state).

g  Every writer replaces an earlier result (of other settings) with ``--overwrite`` (``run`` reruns its folder with
   another config, ``report`` rewrites a run's report) under a disk fault: a file-size limit (``ulimit -f``) of
   half the smallest file it writes, of 3,000 bytes and of half the largest, a tmpfs filled to the last block and
   the same tmpfs remounted read-only (where the machine lets the trial mount one: root; skipped elsewhere).
   Each must exit 1 with one line ``error: ...`` (no traceback) naming the path and the fix, leave the earlier
   result byte for byte (a run may rewrite its ``config.yaml`` and ``manifest.json``, the manifest then saying
   ``interrupted``) and no new hidden file but the resumable state the docs promise (``.<out>.units``,
   ``.training``, ``.sweep``, ``.embedding-*``). After the 3,000-byte limit, the same command without it must
   equal an uninterrupted run.

The points each command passes are counted in a reference run (a fresh interpreter whose ``kill_point`` also
logs every pass), which is also the uninterrupted run the killed ones are compared with. The other commands run in
processes of their own forked from a fork server (tests/helpers/forked_cli.py: the imports paid once), under a
HOME, XDG_CACHE_HOME, HF_HOME and TMPDIR in the trial's temp folder.

Each case prints a row, case | outcome | held; the exit status is 1 when any does not hold.

Run it from the repository root (about 17 minutes on 2 cores; ``--only`` takes writer names and ``kill``/``disk``)::

    .venv/bin/python benchmarks/trial_kills_disks.py [--only probe,kill] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "helpers")]  # the fork server and the tiny scratch config the tests use

from trial_env import Done, sandbox_env  # noqa: E402

from forked_cli import BINDSCOPE, PRELOAD, ForkServer  # noqa: E402
from tiny_scratch import tiny_scratch_yaml  # noqa: E402

#: The mark every output folder carries (bindscope.core.io.OUTPUT_MARK): not a leftover.
OUTPUT_MARK = ".bindscope.json"
MODEL_LIBRARIES = ("sentence_transformers",)
#: Fields that say when, how fast or by which process, not what was computed (as tests/faults/test_kill.py).
VOLATILE = {"created", "seconds", "steps_per_second", "started", "finished", "rows_reused", "fits", "status", "steps"}
VOLATILE |= {"pid", "git"}
RUN_CONFIG = """\
name: trial
seeds: [{seed}]
datasets:
  - {{name: clevr, preset: clevr, max_scenes: 120}}
models:
  - {{spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}}
analyses:
  probe: {{optimizer: lbfgs}}
  decompose: {{optimizer: lbfgs, seeds: [{seed}]}}
"""
DISK_SIZE = "32m"
#: The points that only ever move a finished output into place (every writer has them).
STAGE_POINTS = ("stage-move", "stage-swap", "atomic-replace")


# -- the writers -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Writer:
    """A writing command: ``args`` (``{out}`` and the inputs' names filled in), and ``other``, the same output
    with other settings (the earlier result a disk fault or ``stage-swap`` replaces)."""

    args: tuple[str, ...]
    other: tuple[str, ...]
    #: random moments to kill it at (beside its named points)
    delays: int = 0
    #: it takes --overwrite (a run reruns its folder; a report rewrites its run's)
    overwrite: bool = True
    #: the output is a copy of the trial's run folder that the command writes into (``report``)
    on_run: bool = False
    #: files that describe the folder's state rather than a result: a failed write may change them (a run's config
    #: and manifest, which then says ``interrupted``)
    state_files: tuple[str, ...] = ()
    #: the files it writes (default: those of its result that differ from the earlier one)
    writes: tuple[str, ...] = ()


ANALYSIS = ("--seeds", "0", "-q")
WRITERS: dict[str, Writer] = {
    "dataset-build": Writer(
        ("dataset", "build", "clevr2d", "--image-size", "24", "--workers", "1", "-q"),
        ("dataset", "build", "clevr", "--image-size", "24", "--workers", "1", "-q"),
    ),
    "embed": Writer(
        ("embed", "{clevr}", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--chunk-rows", "192", "-q"),
        ("embed", "{clevr}", "--model", "st:all-MiniLM-L6-v2+rand", "--modality", "text", "-q"),
    ),
    "embeddings-import": Writer(
        ("embeddings", "import", "{clevr}", "{inputs}/planted.npy", "--name", "p", "--modality", "text"),
        ("embeddings", "import", "{clevr}", "{inputs}/control.npy", "--name", "p", "--modality", "text"),
    ),
    "probe": Writer(("probe", "{planted}", "--optimizer", "lbfgs", *ANALYSIS), ("probe", "{planted}", "-q")),
    "decompose": Writer(
        ("decompose", "{planted}", "--control", "{control}", "--optimizer", "lbfgs", *ANALYSIS),
        ("decompose", "{planted}", "--control", "{control}", "--optimizer", "lbfgs", "--seeds", "1", "-q"),
    ),
    "intervene": Writer(
        ("intervene", "{planted}", "--control", "{control}", "--probe-optimizer", "lbfgs", *ANALYSIS),
        ("intervene", "{planted}", "--control", "{control}", "--probe-optimizer", "lbfgs", "--seeds", "1", "-q"),
    ),
    "complexity": Writer(
        ("complexity", "{planted}", "--approximators", "additive", "--fractions", "0.5", "--epochs", "60", *ANALYSIS),
        ("complexity", "{planted}", "--approximators", "additive", "--fractions", "0.4", "--epochs", "60", *ANALYSIS),
        delays=3,
    ),
    "geometry": Writer(
        ("geometry", "{planted}", "--fractions", "0.5", *ANALYSIS),
        ("geometry", "{planted}", "--fractions", "0.4", *ANALYSIS),
    ),
    "scratch-train": Writer(
        ("scratch", "train", "--config", "{scratch}", "-q"),
        ("scratch", "train", "--config", "{scratch}", "--seed", "1", "-q"),
        delays=3,
    ),
    "scratch-export": Writer(
        ("scratch", "export", "{model}", "-q"), ("scratch", "export", "{model}", "--no-control", "-q")
    ),
    "scratch-sweep": Writer(
        (
            "scratch",
            "sweep",
            "--config",
            "{scratch}",
            "--fractions",
            "0.5,0.8",
            "--steps",
            "20",
            "--workers",
            "1",
            "-q",
        ),
        ("scratch", "sweep", "--config", "{scratch}", "--fractions", "0.6", "--steps", "20", "--workers", "1", "-q"),
    ),
    "run": Writer(
        ("run", "{inputs}/run.yaml", "-q"),
        ("run", "{inputs}/run-other.yaml", "-q"),
        overwrite=False,
        state_files=("config.yaml", "manifest.json"),
    ),
    "compare": Writer(("compare", "{run}", "{run2}"), ("compare", "{run}", "{run2}", "{run3}")),
    "report": Writer(
        ("report", "{out}"),
        ("report", "{out}"),
        delays=3,
        overwrite=False,
        on_run=True,
        writes=("report.html", "report/card.csv"),
    ),
}


# -- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    case: str
    outcome: str
    held: bool | None  # None: skipped (the machine cannot arrange it)


ROWS: list[Row] = []


def record(case: str, problems: list[str], outcome: str, skipped: bool = False) -> None:
    """One row: held when no problem was found; the outcome (or the problems) in words."""
    row = Row(case, "; ".join(problems) if problems else outcome, None if skipped else not problems)
    ROWS.append(row)
    held = "skipped" if row.held is None else "yes" if row.held else "NO"
    print(f"| {row.case} | {row.outcome} | {held} |", flush=True)


class TrialError(RuntimeError):
    """The trial could not arrange a case (not a finding about bindscope)."""


# -- processes -------------------------------------------------------------------------------------------------
#: A reference run: ``kill_point`` logs each pass (pid and name) before doing what it does, so forked workers are
#: counted too; the command's own time (after the imports a forked command does not pay) is written at its end.
COUNTER = r"""
import json, os, sys, time, types
for name in json.loads(os.environ.pop("TRIAL_PRELOAD")):
    __import__(name)
import bindscope.core.faults as faults
faults._trial_log = os.environ.pop("TRIAL_COUNTS")
faults._trial_original = types.FunctionType(faults.kill_point.__code__, faults.__dict__)
def counting(name):
    with open(_trial_log, "a") as fh:
        fh.write(f"{os.getpid()} {name}\n")
    _trial_original(name)
faults.kill_point.__code__ = counting.__code__  # in place: every module's imported name counts too
args = json.loads(sys.argv[1])
sys.argv = [sys.argv[2], *args]
from bindscope.cli import main
started = time.perf_counter()
try:
    main(args)
finally:
    with open(os.environ["TRIAL_SECONDS"], "w") as fh:
        fh.write(str(time.perf_counter() - started))
"""


class Sandbox:
    """A temp folder with its own HOME and caches, and a fork server that runs ``bindscope`` there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = sandbox_env(root)
        self.server = ForkServer(self.env, root / "forks", preload=MODEL_LIBRARIES)
        self._count = 0

    def run(self, args: list[str], *, limit: int | None = None, env: dict[str, str] | None = None) -> Done:
        """``bindscope ARGS`` to its end (with ``limit``: no file may grow past that many bytes)."""
        full = {**self.env, **(env or {})}
        if limit is None:
            done = self.server.run(args, full, cwd=self.root, timeout=900)
        else:
            done = self.server.run_with_file_limit(args, full, limit, timeout=900)
        return Done(args, done.returncode, done.stdout, done.stderr)

    def start(self, args: list[str], env: dict[str, str] | None = None):
        return self.server.start(args, {**self.env, **(env or {})}, cwd=self.root)

    def counted(self, args: list[str]) -> tuple[Done, Counter[tuple[str, bool]], float]:
        """A reference run in a fresh interpreter: what it did, how often it passed each point (name, whether in
        the command's own process), and its own seconds."""
        self._count += 1
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        log, seconds = logs / f"count-{self._count}.log", logs / f"count-{self._count}.seconds"
        env = {
            **self.env,
            "TRIAL_PRELOAD": json.dumps([*PRELOAD, *MODEL_LIBRARIES]),
            "TRIAL_COUNTS": str(log),
            "TRIAL_SECONDS": str(seconds),
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", COUNTER, json.dumps(args), str(BINDSCOPE)],
            env=env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=1800)
        passes: Counter[tuple[str, bool]] = Counter()
        for line in log.read_text().splitlines() if log.exists() else []:
            pid, name = line.split(" ", 1)
            passes[(name, int(pid) == proc.pid)] += 1
        return Done(args, proc.returncode, out, err), passes, float(seconds.read_text())

    def close(self) -> None:
        self.server.close()


# -- oracles ---------------------------------------------------------------------------------------------------
def last_lines(text: str, n: int = 2) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:])[-400:] or "(nothing on stderr)"


def succeeded(done: Done) -> list[str]:
    if done.status == 0 and "Traceback" not in done.stderr:
        return []
    return [f"`{' '.join(done.args[:2])}` exit {done.status}: {last_lines(done.stderr)}"]


def normalised(value: object) -> object:
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


#: What a report page shows of the volatile fields: its table of step times, and the manifest's times.
HTML_VOLATILE = (
    re.compile(rb"<section id='time'>.*?</section>", re.S),
    re.compile(rb"&quot;(?:created|started|finished|seconds)&quot;: [^,\n]*"),
)


def fingerprint(folder: Path, copied_from: Path | None = None) -> dict[str, object]:
    """Every file under ``folder`` (its own path written as ``<out>``, and that of the folder it was copied from:
    what a rerun reuses keeps the path it was made at): JSON as data without the volatile fields, HTML without its
    times, anything else by its bytes."""
    prints: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        raw = path.read_bytes().replace(str(folder).encode(), b"<out>")
        raw = raw if copied_from is None else raw.replace(str(copied_from).encode(), b"<out>")
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".html":
            for pattern in HTML_VOLATILE:
                raw = pattern.sub(b"", raw)
        prints[rel] = normalised(json.loads(raw)) if path.suffix == ".json" else hashlib.sha256(raw).hexdigest()
    return prints


def differences(
    a: dict[str, object], b: dict[str, object], a_root: Path | None = None, b_root: Path | None = None
) -> list[str]:
    """Where two fingerprints differ, in short (for a text file of the two folders, its first differing line)."""
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    out = []
    for k in keys:
        where = f"{k} {'missing' if k not in a else 'extra' if k not in b else 'differs'}"
        if k in a and k in b and a_root is not None and b_root is not None and k.endswith((".html", ".csv", ".yaml")):
            pairs = zip(*(r.joinpath(k).read_text(errors="replace").splitlines() for r in (a_root, b_root)))
            where += next((f" (first at {x[:80]!r} / {y[:80]!r})" for x, y in pairs if x != y), "")
        out.append(where)
    return out


def files(folder: Path, sizes: bool = False) -> dict[str, Any]:
    """Every file under ``folder`` by its bytes (the mark included); with ``sizes``, (digest, size) pairs."""
    out: dict[str, Any] = {}
    for path in (p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out[path.relative_to(folder).as_posix()] = (digest, path.stat().st_size) if sizes else digest
    return out


def hidden_leftovers(root: Path) -> list[str]:
    """Hidden files or folders under ``root``: locks, staging folders, temporary files, resume state."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".*") if p.name != OUTPUT_MARK)


#: The resumable state a failed command keeps beside its output (docs/guides/faults.md, "what survives a kill").
RESUME_STATE = re.compile(r"^\..+\.(units|training|sweep|embedding-[0-9a-f]+)$")


def resume_state(path: str) -> bool:
    return bool(RESUME_STATE.match(path.rsplit("/", 1)[-1]))


# -- the inputs ------------------------------------------------------------------------------------------------
@dataclass
class Trial:
    box: Sandbox
    inputs: dict[str, Path]
    #: the earlier result of each writer's other settings, made once, copied where a case needs it
    others: dict[str, Path] = field(default_factory=dict)
    references: dict[str, tuple[dict[str, object], Counter[tuple[str, bool]], float, Path]] = field(
        default_factory=dict
    )

    def command(self, name: str, out: Path, other: bool = False, overwrite: bool = False) -> list[str]:
        writer = WRITERS[name]
        names = {k: str(v) for k, v in self.inputs.items()}
        args = [a.format(out=out, **names) for a in (writer.other if other else writer.args)]
        if not writer.on_run:
            args += ["--out", str(out)]
        return args + (["--overwrite"] if overwrite and writer.overwrite else [])

    def prepare(self, name: str, case: Path, earlier: bool = False) -> Path:
        """A fresh case folder; its ``out`` (a copy of the run folder for ``report``; with ``earlier``, a copy of
        the other settings' result)."""
        shutil.rmtree(case, ignore_errors=True)
        case.mkdir(parents=True)
        out = case / "out"
        if WRITERS[name].on_run:
            shutil.copytree(self.inputs["run"], out, symlinks=True)
        elif earlier:
            shutil.copytree(self.other(name), out, symlinks=True)
        return out

    def other(self, name: str) -> Path:
        """The result of the writer's other settings (made on first use)."""
        if name not in self.others:
            folder = self.box.root / "others" / name
            out = self.prepare(name, folder)
            done = self.box.run(self.command(name, out, other=True))
            if done.status != 0:
                raise TrialError(f"{name}'s other settings failed: {last_lines(done.stderr)}")
            self.others[name] = out
        return self.others[name]

    def reference(self, name: str) -> tuple[dict[str, object], Counter[tuple[str, bool]], float, Path]:
        """The writer's uninterrupted run: its fingerprint, the points it passed, its seconds, its output."""
        if name not in self.references:
            folder = self.box.root / "references" / name
            out = self.prepare(name, folder)
            done, passes, seconds = self.box.counted(self.command(name, out))
            if done.status != 0:
                raise TrialError(f"{name}'s reference run failed: {last_lines(done.stderr)}")
            if hidden_leftovers(folder):
                raise TrialError(f"{name}'s reference run left {hidden_leftovers(folder)}")
            self.references[name] = (fingerprint(out), passes, seconds, out)
        return self.references[name]


def make_inputs(box: Sandbox) -> dict[str, Path]:
    """The clevr dataset, planted embeddings (object-additive, 12 wide) with a single-object bank and a random
    control, a tiny scratch config and a model trained from it, two run configs and a run folder (and copies)."""
    from bindscope.data.datasets import build_dataset
    from bindscope.space.planted import planted_embeddings

    root = box.root / "inputs"
    ds = build_dataset("clevr", root / "clevr", images=False)
    rng = np.random.default_rng(0)
    np.save(root / "planted.npy", planted_embeddings(ds.scenes, "object_additive", dim=12, noise=0.2, seed=0))
    np.save(root / "control.npy", rng.normal(size=(len(ds), 12)).astype(np.float32))
    np.save(root / "singles.npy", rng.normal(size=(ds.space.num_objects, 12)).astype(np.float32))
    (root / "tiny.yaml").write_text(tiny_scratch_yaml(steps=60, every=20))
    (root / "run.yaml").write_text(RUN_CONFIG.format(seed=0))
    (root / "run-other.yaml").write_text(RUN_CONFIG.format(seed=1))
    inputs = {"inputs": root, "clevr": root / "clevr", "scratch": root / "tiny.yaml"}
    made: list[tuple[str, list[object]]] = [
        ("planted", ["embeddings", "import", root / "clevr", root / "planted.npy", "--name", "planted"]),
        ("control", ["embeddings", "import", root / "clevr", root / "control.npy", "--name", "planted+rand"]),
        ("model", ["scratch", "train", "--config", root / "tiny.yaml", "-q"]),
        ("run", ["run", root / "run.yaml", "-q"]),
    ]
    extra: dict[str, list[object]] = {"planted": ["--singles", root / "singles.npy"]}
    for name, given in made:
        args = [str(a) for a in (*given, *extra.get(name, []))]
        if args[0] == "embeddings":
            args += ["--modality", "text"]
        done = box.run([*args, "--out", str(root / name)])
        if done.status != 0:
            raise TrialError(f"making the input {name} failed: {last_lines(done.stderr)}")
        inputs[name] = root / name
    for copy in ("run2", "run3"):  # compare takes several runs: copies of one, told apart by their folders
        shutil.copytree(root / "run", root / copy, symlinks=True)
        inputs[copy] = root / copy
    return inputs


# -- f: kill -9 ------------------------------------------------------------------------------------------------
def chosen_passes(name: str, point: str, count: int) -> list[int]:
    """The first and the last pass of a point, and a seeded one between."""
    picks = {1, count}
    if count > 2:
        picks.add(random.Random(f"{name}-{point}").randint(2, count - 1))
    return sorted(picks)


def kill_cases(trial: Trial, name: str) -> None:
    prints, passes, seconds, _ = trial.reference(name)
    own = {point for (point, main), n in passes.items() if main}
    counts = Counter({point: n for (point, main), n in passes.items() if main})
    workers = Counter({point: n for (point, main), n in passes.items() if not main and point not in own})
    passed = ", ".join(f"{p} x{n}" for p, n in sorted(counts.items())) or "none"
    in_workers = f"; in workers: {dict(workers)}" if workers else ""
    print(f"# {name} passes {passed}{in_workers} in its reference run ({seconds:.1f} s)", flush=True)
    cases: list[tuple[str, str, bool]] = []  # (label, BINDSCOPE_KILL_AT or "delay:SECONDS", over an earlier result)
    for point, count in sorted(counts.items()):
        cases += [(f"{point}:{n}", f"{point}:{n}", False) for n in chosen_passes(name, point, count)]
    for point, count in sorted(workers.items()):
        cases += [(f"worker {point}:{n}", f"{point}:{n}", False) for n in chosen_passes(name, point, count)]
    if WRITERS[name].overwrite:
        cases.append(("stage-swap:1 (--overwrite over an earlier result)", "stage-swap:1", True))
    elif "stage-swap" not in counts:
        record(f"{name}: kill at stage-swap", [], "never passed: it replaces no folder", skipped=True)
    rng = random.Random(f"{name}-delays")
    for i in range(WRITERS[name].delays):
        moment = rng.uniform(0.1, 0.9) * seconds
        cases.append((f"delay {i + 1} ({moment:.2f} s)", f"delay:{moment}", False))
    for label, point, earlier in cases:
        case = trial.box.root / "cases" / f"kill-{name}-{label.split(' (')[0].replace(' ', '-').replace(':', '-')}"
        problems, outcome = kill_case(trial, name, case, point, earlier, worker=label.startswith("worker"))
        record(f"kill {name} at {label}", problems, outcome)
        if not problems and not KEEP:
            shutil.rmtree(case, ignore_errors=True)


def kill_case(trial: Trial, name: str, case: Path, point: str, earlier: bool, worker: bool) -> tuple[list[str], str]:
    prints = trial.reference(name)[0]
    out = trial.prepare(name, case, earlier)
    args = trial.command(name, out, overwrite=earlier)
    if point.startswith("delay:"):
        moment = float(point.removeprefix("delay:"))
        while True:
            proc = trial.box.start(args)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=moment)
            proc.kill_group(signal.SIGKILL)
            status = proc.wait(timeout=60)
            if status != 0:
                break
            if moment < 0.05:  # it ended before the kill, even at once
                return [f"it finished before any kill (exit {status})"], ""
            moment /= 2  # a quieter machine than the reference's: sooner
            out = trial.prepare(name, case, earlier)
        how = f"killed at {moment:.2f} s"
        if status != -signal.SIGKILL:
            return [f"exit {status} at the kill: {last_lines(proc.stderr)}"], ""
    else:
        proc = trial.box.start(args, {"BINDSCOPE_KILL_AT": point})
        status = proc.wait(timeout=900)
        how = "killed there"
        if worker:  # a worker process dies there: the command fails in one line
            lines = proc.stderr.strip().splitlines()
            if status != 1 or len(lines) != 1 or not lines[0].startswith("error: "):
                return [f"a worker killed at {point}: exit {status}, {last_lines(proc.stderr)}"], ""
            how = f"its worker killed there: {lines[0][:90]}"
        elif status != -signal.SIGKILL:
            return [f"not killed at {point} (exit {status}): {last_lines(proc.stderr)}"], ""
    left = hidden_leftovers(case)
    done = trial.box.run(args)
    problems = succeeded(done)
    if not problems:
        found = differences(fingerprint(out), prints, out, trial.reference(name)[3])
        problems += [f"differs from an uninterrupted run: {d}" for d in found][:4]
        problems += [f"hidden leftover after the rerun: {p}" for p in hidden_leftovers(case)]
    state = f"; left by the kill: {', '.join(left[:3])}{' ...' if len(left) > 3 else ''}" if left else ""
    return problems, f"{how}{state}; the rerun equals an uninterrupted run, nothing hidden left"


# -- g: disk trouble -------------------------------------------------------------------------------------------
def disk_refusal(
    done: Done, case: Path, before: dict[str, str], out: Path, fix: str, hidden: list[str], writer: Writer
) -> list[str]:
    """Problems with a write the disk refused: exit 1, one line naming a path in ``case`` and ``fix``, no
    traceback, ``out`` byte for byte ``before`` (but the writer's state files), nothing hidden left in ``case``
    that was not there (``hidden``) but resume state."""
    problems = []
    lines = done.stderr.strip().splitlines()
    if "Traceback" in done.stderr:
        problems.append(f"traceback: {last_lines(done.stderr)}")
    elif done.status != 1:
        problems.append(f"exit {done.status} (1 expected): {last_lines(done.stderr)}")
    elif len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"not one 'error:' line: {last_lines(done.stderr, 3)}")
    else:
        if str(case) not in lines[0]:
            problems.append(f"no path named: {lines[0]}")
        if fix not in lines[0]:
            problems.append(f"no fix ({fix!r}) named: {lines[0]}")
    after = files(out) if out.exists() else {}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    state = [k for k in changed if k in writer.state_files]
    changed = [k for k in changed if k not in writer.state_files]
    if changed:
        problems.append(f"the earlier result changed: {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}")
    if state and json.loads((out / "manifest.json").read_text()).get("status") != "interrupted":
        problems.append(f"{', '.join(state)} changed, and the manifest does not say the run was interrupted")
    new = [p for p in hidden_leftovers(case) if p not in hidden and not resume_state(p)]
    problems += [f"hidden leftover: {p}" for p in new]
    return problems


def written(trial: Trial, name: str) -> list[int]:
    """The sizes of the files the writer writes over its earlier result."""
    out = trial.reference(name)[3]
    if WRITERS[name].writes:
        return [(out / f).stat().st_size for f in WRITERS[name].writes]
    earlier = files(trial.other(name))
    return [size for rel, (digest, size) in files(out, sizes=True).items() if earlier.get(rel) != digest]


def file_limit_cases(trial: Trial, name: str) -> None:
    """Replacing the earlier result under a file-size limit of 3,000 bytes, of half the largest file it writes and
    of half the smallest (of at least 512 bytes): each write fails at another moment. After the 3,000 bytes, the
    same command without the limit must give what an uninterrupted run gives (nothing the failure left blocks it)."""
    sizes = written(trial, name)
    limits = {3000, max(3000, max(sizes, default=0) // 2)}
    if any(n >= 512 for n in sizes):  # not below 400 bytes: the command's stderr (a file here) must hold its line
        limits.add(max(400, min(n for n in sizes if n >= 512) // 2))
    for limit in sorted(limits):
        case = trial.box.root / "cases" / f"fsize-{name}-{limit}"
        out = trial.prepare(name, case, earlier=True)
        before, hidden = files(out), hidden_leftovers(case)
        args = trial.command(name, out, overwrite=True)
        done = trial.box.run(args, limit=limit)
        problems = disk_refusal(done, case, before, out, "free some space", hidden, WRITERS[name])
        outcome = f"exit {done.status}: " + (done.stderr.strip().splitlines() or ["(nothing)"])[-1][:160]
        if limit == 3000:
            again = trial.box.run(args)
            now = fingerprint(out, trial.other(name))
            found = differences(now, trial.reference(name)[0], out, trial.reference(name)[3])
            recovered = succeeded(again) or [f"then: {d}" for d in found]
            recovered += [f"then, hidden leftover: {p}" for p in hidden_leftovers(case)]
            problems += recovered[:4]
            outcome += "; without the limit, the same command then equals an uninterrupted run"
        record(f"disk {name}: file-size limit {limit:,} B", problems, outcome)
        if not problems and not KEEP:
            shutil.rmtree(case, ignore_errors=True)


@contextlib.contextmanager
def tmpfs(root: Path) -> Iterator[Callable[[str], None] | str]:
    """A small tmpfs at ``root`` (yields its remount function), or why the machine does not allow one."""
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        yield "mounting a tmpfs needs root"
        return
    tried = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(root)], capture_output=True)
    if tried.returncode != 0:
        yield f"this machine does not allow mounting a tmpfs ({tried.stderr.decode().strip()})"
        return

    def remount(options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(root)], check=True, capture_output=True)

    try:
        yield remount
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last block; the filler file (not hidden)."""
    filler = disk / f"filler-{uuid.uuid4().hex[:8]}"
    with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
    with filler.open("ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 512)
    return filler


def tmpfs_cases(trial: Trial, names: list[str]) -> None:
    disk = trial.box.root / "disk"
    with tmpfs(disk) as remount:
        if isinstance(remount, str):
            for name in names:
                record(f"disk {name}: full tmpfs, read-only tmpfs", [], remount, skipped=True)
            return
        for name in names:
            case = disk / name
            out = trial.prepare(name, case, earlier=True)
            before, hidden = files(out), hidden_leftovers(case)
            filler = fill(disk)
            done = trial.box.run(trial.command(name, out, overwrite=True))
            problems = disk_refusal(done, case, before, out, "free some space", hidden, WRITERS[name])
            outcome = (done.stderr.strip().splitlines() or ["(nothing)"])[-1][:160]
            record(f"disk {name}: a full disk (tmpfs)", problems, f"exit {done.status}: {outcome}")
            filler.unlink()
            before, hidden = files(out), hidden_leftovers(case)  # the full disk's resume state stays
            remount("ro")
            try:
                done = trial.box.run(trial.command(name, out, overwrite=True))
            finally:
                remount("rw")
            problems = disk_refusal(done, case, before, out, "writable disk", hidden, WRITERS[name])
            outcome = (done.stderr.strip().splitlines() or ["(nothing)"])[-1][:160]
            record(f"disk {name}: a read-only disk (tmpfs remounted ro)", problems, f"exit {done.status}: {outcome}")
            shutil.rmtree(case, ignore_errors=True)


# -- main ------------------------------------------------------------------------------------------------------
KEEP = False


def main(argv: list[str] | None = None) -> int:
    global KEEP
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help=f"writers ({', '.join(WRITERS)}) and/or kill, disk")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder and every failing case's folder")
    options = parser.parse_args(argv)
    KEEP = options.keep
    only = [n for n in options.only.split(",") if n]
    unknown = sorted(set(only) - set(WRITERS) - {"kill", "disk"})
    if unknown:
        parser.error(f"unknown writer(s) {', '.join(unknown)}; choose from {', '.join(WRITERS)}, kill, disk")
    names = [n for n in WRITERS if n in only] or list(WRITERS)
    kinds = [k for k in ("kill", "disk") if k in only] or ["kill", "disk"]
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="bindscope-trial-kd-"))
    box = Sandbox(root)
    try:
        trial = Trial(box, make_inputs(box))
        print(f"inputs made in {time.perf_counter() - started:.0f} s under {root}", flush=True)
        print("| case | outcome | held |\n|---|---|---|", flush=True)
        for name in names:
            if "kill" in kinds:
                kill_cases(trial, name)
            if "disk" in kinds:
                file_limit_cases(trial, name)
        if "disk" in kinds:
            tmpfs_cases(trial, names)
    except TrialError as exc:
        record("the trial itself", [str(exc)], "")
    finally:
        box.close()
        if not KEEP:
            shutil.rmtree(root, ignore_errors=True)
    ran = [r for r in ROWS if r.held is not None]
    failed = [r for r in ran if not r.held]
    print(
        f"\n{len(ran)} cases, {len(ran) - len(failed)} held, {len(failed)} did not, "
        f"{len(ROWS) - len(ran)} skipped, in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    for row in failed:
        print(f"NOT HELD  {row.case}: {row.outcome}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
