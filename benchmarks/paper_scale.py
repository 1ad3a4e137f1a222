"""The paper-scale run, step by step: each step's time and peak memory against the targets.

What is measured
----------------
The whole run a user makes of a text model on the ``text`` preset at full size (160,400 captions)::

    bindscope run --model st:all-MiniLM-L6-v2 --dataset text --max-scenes all --out DIR

split into the steps a user can run one by one, each as a ``bindscope`` process of its own so that its
peak resident memory is its own (``ru_maxrss`` from ``wait4``, which covers what the process waited for):

- ``dataset``: ``bindscope dataset build`` of the preset (a YAML of it with ``--max-scenes N``);
- ``embed``, ``embed-control``, ``embed-singles``: ``bindscope embed`` of the captions with the model, its
  ``+rand`` control and every object alone (the single-object bank), as the run embeds them;
- one step per analysis the run gives the model (read from ``bindscope run ... --print-config``: probe,
  decompose, intervene, complexity, geometry for a text model), each on the model and its ``+rand``
  control: ``bindscope run CONFIG`` with those embedding folders and that analysis switched on (the probes
  reused by the later steps, as in the one-process run), no report;
- ``report``: the same run with every analysis (all reused) and the report.

A step's seconds are the step's own (from the run's manifest for an analysis and the report; the process's
wall time for the others); the process's wall time (with the interpreter's start and the reading of the
dataset) is beside it. The targets: every analysis together within 10 minutes once the embeddings exist,
and no step above 4 GB of peak memory. A step still running after ``--timeout`` seconds is killed and
recorded as over the limit.

``--out DIR`` keeps the folders (``DIR/<dataset>``, ``DIR/emb/<name>[+rand|-single]``, ``DIR/run``): a
dataset and embeddings already there are reused (the commands are no-ops), while each analysis step named
in ``--steps`` removes its own earlier result first, so the analyses are timed again without embedding
again. Without ``--out`` everything goes to a temporary folder that is removed at the end.

Run it from the repository root (the full size embeds 2 x 160,400 captions: hours on 2 cores; the
analyses alone, with the embeddings in ``--out``, are the target's 10 minutes)::

    .venv/bin/python benchmarks/paper_scale.py --out runs/paper-scale
    .venv/bin/python benchmarks/paper_scale.py --out runs/paper-scale \
        --steps probe,decompose,intervene,complexity,geometry,report
    .venv/bin/python benchmarks/paper_scale.py --dataset text --max-scenes 2000   # a quick look

It prints a table and writes ``benchmarks/results/paper_scale.csv`` (``--csv``): a row per step, then the
analyses together, written again after every step so that a run stopped part way keeps the steps it
measured. A SIGTERM to the script (``timeout``, a job scheduler) stops the step it is running too.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from record import add_csv_argument, command, machine

BINDSCOPE = Path(sys.executable).with_name("bindscope")
REPO = Path(__file__).resolve().parents[1]
#: Every analysis together within this many seconds once the embeddings exist.
ANALYSES_WITHIN_S = 600.0
#: No step's peak resident memory above this many MB.
PEAK_WITHIN_MB = 4096.0
#: A step still running after this many seconds is killed and recorded as over the limit.
DEFAULT_TIMEOUT_S = 1200
EMBED_STEPS = ("dataset", "embed", "embed-control", "embed-singles")
REPORT = "report"
OVER = "over limit"
FAILED = "failed"
NOT_RUN = "not run"
#: What a step that finished did: made its output, found it, or linked it from the embedding cache.
FINISHED = ("computed", "replaced", "reused", "cached")
#: The row of every analysis step together.
TOTAL = "analyses together"
#: The columns of ``paper_scale.csv``, in order.
COLUMNS = (
    "step",
    "status",
    "seconds",
    "wall_seconds",
    "cpu_seconds",
    "peak_mb",
    "target",
    "met",
    "note",
    "load",
    "scenes",
    "model",
    "commit",
    "measured",
    "machine",
    "command",
    "script_command",
)


@dataclass
class Outcome:
    """One step as it ran: its status, its own seconds, the process's wall seconds and peak MB, a note, and the
    machine's 1-minute load average as it ended (the other work beside it: a busy machine slows every step)."""

    step: str
    command: str
    status: str
    seconds: float
    wall_seconds: float
    peak_mb: float
    note: str = ""
    load: float = field(default_factory=lambda: os.getloadavg()[0])
    cpu_seconds: float = 0.0


@dataclass
class Child:
    """A finished (or killed) process: its exit code (None when killed at the limit), wall seconds, peak MB, what
    it printed, and its CPU seconds (user and system, the processes it waited for included: on a busy machine
    they grow far less than the wall time)."""

    returncode: int | None
    wall_seconds: float
    peak_mb: float
    output: str
    cpu_seconds: float = 0.0

    def outcome(self, step: str, shown: str, status: str, seconds: float | None = None, note: str = "") -> Outcome:
        """This process as the outcome of ``step``: its own ``seconds`` (default the wall time)."""
        own = self.wall_seconds if seconds is None else seconds
        return Outcome(step, shown, status, own, self.wall_seconds, self.peak_mb, note, cpu_seconds=self.cpu_seconds)


@dataclass
class Plan:
    """Where everything goes and what the run does: the folders, the model, the analyses and the run config."""

    out: Path
    model: str
    name: str
    dataset: str
    preset: str
    config: dict[str, Any]
    analyses: dict[str, Any] = field(default_factory=dict)

    @property
    def dataset_dir(self) -> Path:
        return self.out / self.dataset

    def embeddings(self, step: str) -> Path:
        suffix = {"embed": "", "embed-control": "+rand", "embed-singles": "-single"}[step]
        return self.out / "emb" / f"{self.name}{suffix}"

    @property
    def run_dir(self) -> Path:
        return self.out / "run"


def run_child(args: Sequence[str], env: dict[str, str], timeout: float) -> Child:
    """Run ``args`` in a session of its own; its peak resident memory (``wait4``), wall and CPU time. Past ``timeout``
    seconds the session is terminated (then killed) and the return code is None; an interrupted script stops it."""
    with tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        proc = subprocess.Popen(list(args), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        killed = False
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if not killed and time.perf_counter() - start > timeout:
                    killed = True
                    stop(proc.pid)
                time.sleep(0.2)
        except BaseException:  # interrupted: the child's session goes too (it would outlive this script)
            stop(proc.pid)
            proc.wait()
            raise
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    return Child(None if killed else proc.returncode, wall, usage.ru_maxrss / 1024, output, cpu)  # maxrss: KiB


def stop(pid: int, grace: float = 10.0) -> None:
    """Terminate a child's session, then kill it when it has not ended within ``grace`` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.perf_counter() + grace
    while time.perf_counter() < end:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return  # ended (a zombie until reaped)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def printed_config(model: str, dataset: str, max_scenes: str, env: dict[str, str]) -> dict[str, Any]:
    """The resolved config of ``bindscope run --model MODEL --dataset DATASET --max-scenes N`` (nothing is run)."""
    args = [str(BINDSCOPE), "run", "--model", model, "--dataset", dataset, "--max-scenes", max_scenes]
    done = subprocess.run([*args, "--print-config"], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(args)} --print-config failed:\n{done.stdout}{done.stderr}")
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


def model_name(spec: str) -> str:
    """A folder name for a model spec: its last path part, e.g. ``all-MiniLM-L6-v2``."""
    tail = re.split(r"[:/]", spec.removesuffix("+rand"))[-1] or "model"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", tail)


def make_plan(opts: argparse.Namespace, out: Path, env: dict[str, str]) -> Plan:
    """The run's config as ``bindscope run`` resolves it, and where each step writes."""
    config = printed_config(opts.model, opts.dataset, opts.max_scenes, env)
    datasets, models = config.get("datasets") or [], config.get("models") or []
    if len(datasets) != 1 or len(models) != 1:
        raise SystemExit(f"expected one dataset and one model in the run's config, got {datasets} and {models}")
    analyses = {k: v for k, v in (config.get("analyses") or {}).items() if v is not False}
    name = models[0].get("name") or model_name(opts.model)
    return Plan(out, opts.model, name, datasets[0]["name"], datasets[0]["preset"], config, analyses)


def preset_argument(plan: Plan) -> str:
    """What ``dataset build`` is given: the preset's name, or a YAML of the run's subsample of it."""
    entry = plan.config["datasets"][0]
    if entry.get("max_scenes") is None and entry.get("image_size") is None:
        return plan.preset
    from bindscope.pipeline.config import DatasetConfig

    path = plan.out / f"{plan.dataset}-preset.yaml"
    preset = DatasetConfig.model_validate(entry).load_preset()
    path.write_text(yaml.safe_dump(preset.to_dict(), sort_keys=False))
    return str(path)


def step_args(plan: Plan, step: str) -> list[str]:
    """The command line of a dataset or embedding step."""
    bs = str(BINDSCOPE)
    if step == "dataset":
        return [bs, "dataset", "build", preset_argument(plan), "--out", str(plan.dataset_dir), "-q"]
    spec = f"{plan.model}+rand" if step == "embed-control" else plan.model
    args = [bs, "embed", str(plan.dataset_dir), "--model", spec, "--modality", "text", "-q"]
    return args + (["--single-objects"] if step == "embed-singles" else []) + ["--out", str(plan.embeddings(step))]


def run_config(plan: Plan, analyses: dict[str, Any], report: bool) -> dict[str, Any]:
    """The run's config over the embedding folders of the embed steps, with ``analyses`` on and the report on or off
    (its seeds, device and analysis settings are the printed run's)."""
    entry = {
        "path": str(plan.embeddings("embed")),
        "name": plan.name,
        "control": str(plan.embeddings("embed-control")),
        "singles": str(plan.embeddings("embed-singles")),
    }
    drop = ("datasets", "models", "scratch", "embeddings", "analyses", "report")
    return {
        **{k: v for k, v in plan.config.items() if k not in drop},
        "embeddings": [entry],
        "analyses": analyses,
        "report": report,
    }


def analysis_args(plan: Plan, step: str) -> list[str]:
    """``bindscope run CONFIG --out RUN``: the analysis ``step`` (with the probes before it, reused) or the report
    (every analysis, reused)."""
    if step == REPORT:
        analyses, report = plan.analyses, True
    else:
        analyses, report = {k: v for k, v in plan.analyses.items() if k in ("probe", step)}, False
    path = plan.out / f"config-{step}.yaml"
    path.write_text(yaml.safe_dump(run_config(plan, analyses, report), sort_keys=False))
    return [str(BINDSCOPE), "run", str(path), "--out", str(plan.run_dir), "-q"]


def embed_status(output: str) -> str:
    """What an embed or dataset command did, from what it printed."""
    if "already holds" in output or "nothing to do" in output:
        return "reused"
    if "reused from the cache" in output:
        return "cached"
    return "computed"


def forget_result(plan: Plan, step: str) -> None:
    """Remove the earlier result of an analysis step from the run folder, so that the step runs again."""
    for folder in (plan.run_dir / "results").glob(f"*/*/{step}"):
        if (folder / "summary.json").is_file():
            shutil.rmtree(folder)


def manifest_steps(plan: Plan) -> list[dict[str, Any]]:
    path = plan.run_dir / "manifest.json"
    steps: list[dict[str, Any]] = json.loads(path.read_text())["steps"] if path.is_file() else []
    return steps


def run_step(plan: Plan, step: str, env: dict[str, str], timeout: float) -> Outcome:
    """Run one step as its own process and read what it did."""
    existed = (
        step in EMBED_STEPS
        and ((plan.dataset_dir if step == "dataset" else plan.embeddings(step)) / "manifest.json").is_file()
    )
    if step not in EMBED_STEPS and step != REPORT:
        forget_result(plan, step)
    args = step_args(plan, step) if step in EMBED_STEPS else analysis_args(plan, step)
    shown = shlex.join([Path(args[0]).name, *args[1:]])
    child = run_child(args, env, timeout)
    if child.returncode is None:
        return child.outcome(step, shown, OVER, note=f"killed at {timeout:g} s")
    if child.returncode != 0:
        last = child.output.strip().splitlines()[-1:] or ["no output"]
        print(f"step {step} failed ({shown}):\n{child.output}", file=sys.stderr)
        return child.outcome(step, shown, FAILED, note=last[0][:200])
    if step in EMBED_STEPS:
        status = "reused" if existed else embed_status(child.output)
        return child.outcome(step, shown, status)
    return from_manifest(plan, step, shown, child)


def from_manifest(plan: Plan, step: str, shown: str, child: Child) -> Outcome:
    """An analysis or report step's own seconds and status from the run's manifest; the other analyses the process
    had to compute too (not reused) are named in the note."""
    records = manifest_steps(plan)
    if step == REPORT:
        mine = [r for r in records if r["kind"] == "report"]
    else:
        mine = [r for r in records if r["kind"] == "analysis" and r.get("analysis") == step]
    others = [
        r["analysis"]
        for r in records
        if r["kind"] == "analysis" and r not in mine and r["status"] in ("computed", "replaced")
    ]
    if not mine:
        return child.outcome(step, shown, FAILED, note="not in the manifest")
    record = mine[0]
    notes = [f"also computed {', '.join(others)}"] if others else []
    if record["status"] == "skipped":
        notes.append(str(record.get("reason") or ""))
    return child.outcome(step, shown, record["status"], float(record["seconds"]), "; ".join(notes))


def git_commit() -> str:
    """The checkout's commit, ``+dirty`` when it has uncommitted changes."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty=+dirty", "--abbrev=12"], cwd=REPO, capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def analyses_total(outcomes: list[Outcome], analyses: list[str]) -> Outcome | None:
    """Every analysis step together: the sum of their seconds and the largest peak (None when none ran)."""
    ran = [o for o in outcomes if o.step in analyses and o.status != NOT_RUN]
    if not ran:
        return None
    missing = [a for a in analyses if a not in {o.step for o in ran}]
    bad = [o.step for o in ran if o.status not in FINISHED]
    note = "; ".join(
        [f"without {', '.join(missing)}"] * bool(missing) + [f"{', '.join(bad)} did not finish"] * bool(bad)
    )
    return Outcome(
        TOTAL,
        "",
        "incomplete" if missing or bad else "computed",
        sum(o.seconds for o in ran),
        sum(o.wall_seconds for o in ran),
        max(o.peak_mb for o in ran),
        note,
        max(o.load for o in ran),
        sum(o.cpu_seconds for o in ran),
    )


def judged(outcome: Outcome) -> tuple[str, str]:
    """The target a row is held to, and whether it is met: ``yes``, ``no``, or ``-`` for a step not run."""
    if outcome.step == TOTAL:
        target = f"<= {ANALYSES_WITHIN_S:g} s together, each <= {PEAK_WITHIN_MB:,.0f} MB"
        finished = outcome.status == "computed"
        met = finished and outcome.seconds <= ANALYSES_WITHIN_S and outcome.peak_mb <= PEAK_WITHIN_MB
        return target, "yes" if met else "no"
    target = f"peak <= {PEAK_WITHIN_MB:,.0f} MB"
    if outcome.status == NOT_RUN:
        return target, "-"
    if outcome.status in (OVER, FAILED):
        return target, "no"
    return target, "yes" if outcome.peak_mb <= PEAK_WITHIN_MB else "no"


def blocked(step: str, outcomes: list[Outcome], analyses: list[str]) -> str | None:
    """Why ``step`` cannot be timed, or None: a step before it that it needs did not finish (a dataset or embedding
    step blocks every later step; the probes block the analyses that take them; any analysis blocks the report)."""
    from bindscope.analyses import get_analysis

    unfinished = [o.step for o in outcomes if o.status not in FINISHED]
    needed = [s for s in unfinished if s in EMBED_STEPS]
    if step == REPORT:
        needed += [s for s in unfinished if s in analyses]
    elif step in analyses and "probes" in get_analysis(step).needs | get_analysis(step).uses:
        needed += [s for s in unfinished if s == "probe"]
    return f"needs {', '.join(needed)}, which did not finish" if needed else None


def rows(outcomes: list[Outcome], total: Outcome | None, shared: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for outcome in [*outcomes, *([total] if total else [])]:
        target, met = judged(outcome)
        out.append(
            {
                "step": outcome.step,
                "status": outcome.status,
                "seconds": f"{outcome.seconds:.1f}",
                "wall_seconds": f"{outcome.wall_seconds:.1f}",
                "cpu_seconds": f"{outcome.cpu_seconds:.1f}",
                "peak_mb": f"{outcome.peak_mb:.0f}",
                "target": target,
                "met": met,
                "note": outcome.note,
                "load": f"{outcome.load:.1f}",
                "command": outcome.command,
                **shared,
            }
        )
    return out


def write_rows(path: Path, columns: Sequence[str], table: list[dict[str, str]]) -> None:
    """Write the rows under ``columns`` atomically (a killed run leaves the previous file whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(table)
    os.replace(temporary, path)


def print_table(table: list[dict[str, str]]) -> None:
    heads = ("step", "status", "seconds", "wall_seconds", "cpu_seconds", "peak_mb", "met", "load", "note")
    widths = {h: max(len(h), *(len(r[h]) for r in table)) for h in heads}
    print("  ".join(h.ljust(widths[h]) for h in heads))
    for r in table:
        print("  ".join(r[h].ljust(widths[h]) for h in heads))


def scene_count(plan: Plan) -> str:
    path = plan.dataset_dir / "manifest.json"
    if not path.is_file():
        return ""
    manifest = json.loads(path.read_text())
    return str(manifest.get("num_scenes") or manifest.get("scenes") or "")


def parse_steps(text: str | None, plan: Plan) -> list[str]:
    every = [*EMBED_STEPS, *plan.analyses, REPORT]
    if text is None:
        return every
    wanted = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in every]
    if unknown or not wanted:
        raise SystemExit(f"--steps: unknown steps {unknown}; choose from {','.join(every)}")
    return [s for s in every if s in wanted]


def measured_rows(outcomes: list[Outcome], analyses: list[str], shared: dict[str, str]) -> list[dict[str, str]]:
    """The CSV rows of the steps run so far, and of the analyses together, measured now."""
    now = {**shared, "measured": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return rows(outcomes, analyses_total(outcomes, analyses), now)


def stop_on_sigterm() -> None:
    """Make SIGTERM (``timeout``, a job scheduler) raise ``SystemExit``, so that the running step's session is
    stopped (:func:`run_child`) and not left running after this script."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="st:all-MiniLM-L6-v2", help="the model spec (default all-MiniLM-L6-v2)")
    parser.add_argument("--dataset", default="text", help="the preset (default text)")
    parser.add_argument("--max-scenes", default="all", help="subsample the preset to N scenes (default all)")
    parser.add_argument(
        "--out", type=Path, help="keep the folders here and reuse what is there (default: a temporary folder)"
    )
    parser.add_argument("--steps", help="comma-separated steps to run (default every one, in order)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds before a step is killed")
    add_csv_argument(parser, __file__)
    opts = parser.parse_args(argv)
    stop_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bindscope-paper-scale-") as tmp:
        out = (opts.out or Path(tmp) / "out").resolve()
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ}
        env.setdefault("MPLCONFIGDIR", str(Path(tmp) / "mpl"))
        plan = make_plan(opts, out, env)
        steps = parse_steps(opts.steps, plan)
        commit = git_commit()  # the code measured: taken before, as the checkout may change during a long run
        print(f"{opts.model} on {plan.dataset} (max scenes {opts.max_scenes}) in {out}")
        print(f"analyses: {', '.join(plan.analyses)}; steps: {', '.join(steps)}")
        shared = {
            "scenes": scene_count(plan),
            "model": opts.model,
            "commit": commit,
            "machine": machine(),
            "script_command": command(__file__, argv),
        }
        outcomes: list[Outcome] = []
        table: list[dict[str, str]] = []
        for step in steps:
            why = blocked(step, outcomes, list(plan.analyses))
            outcome = Outcome(step, "", NOT_RUN, 0.0, 0.0, 0.0, why) if why else run_step(plan, step, env, opts.timeout)
            print(f"  {step}: {outcome.status}, {outcome.seconds:.1f} s, peak {outcome.peak_mb:,.0f} MB", flush=True)
            outcomes.append(outcome)
            table = measured_rows(outcomes, list(plan.analyses), shared)
            write_rows(opts.csv, COLUMNS, table)  # after every step: a run stopped part way keeps what it measured
    print()
    print_table(table)
    print(f"\nwrote {opts.csv}")
    return 0 if all(r["met"] != "no" for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
