"""Steps of a pipeline: an analysis run into a folder unless the folder holds the same result, and a record of
what each step did."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bindscope.analyses import Inputs, get_analysis, run_analysis
from bindscope.analyses.registry import input_record
from bindscope.analyses.results import content_key, read_header
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import Settings

ProgressFactory = Callable[[str], Any]


def step(
    name: str, inputs: Inputs, folder: Path, settings: Settings, progress: ProgressFactory | None = None
) -> tuple[dict[str, Any], str]:
    """Run an analysis into ``folder`` unless it holds the same result (same content key).

    Returns the summary and ``reused``, ``computed`` or ``replaced`` (the folder held a result
    of other inputs, settings, version or format). A folder holding anything else is refused.
    """
    wanted = content_key(name, input_record(get_analysis(name), inputs), settings.to_dict())
    existing = read_header(folder)
    if existing is not None and existing["content_key"] == wanted:
        return existing, "reused"
    if existing is None and folder.is_dir() and any(folder.iterdir()) and not (folder / "summary.json").is_file():
        raise BindscopeError(
            f"{folder} holds files that are not a bindscope result; move them away or choose another --out"
        )
    status = "replaced" if folder.exists() and any(folder.iterdir()) else "computed"
    if progress is None:
        return run_analysis(name, inputs, folder, settings, overwrite=True).summary, status
    with progress(name) as advance:
        return run_analysis(name, inputs, folder, settings, overwrite=True, progress=advance).summary, status


@dataclass
class StepRecord:
    """What one step did: its kind and name, the folder, computed / reused / replaced / skipped, the time."""

    kind: str
    name: str
    folder: str | None
    status: str
    seconds: float
    reason: str | None = None


@dataclass
class StepLog:
    """Every step of a run, in order."""

    records: list[StepRecord] = field(default_factory=list)

    @contextmanager
    def timed(self, kind: str, name: str, folder: Path | None) -> Iterator[dict[str, Any]]:
        """Time a step; the block sets ``status`` (and ``reason``) in the dict it gets."""
        start = time.perf_counter()
        outcome: dict[str, Any] = {"status": "computed"}
        yield outcome
        outcome["seconds"] = round(time.perf_counter() - start, 3)
        where = str(folder) if folder else None
        self.records.append(StepRecord(kind, name, where, outcome["status"], outcome["seconds"], outcome.get("reason")))

    def skip(self, kind: str, name: str, reason: str) -> None:
        self.records.append(StepRecord(kind, name, None, "skipped", 0.0, reason))

    def to_list(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]


def described(outcome: dict[str, Any]) -> str:
    """How a step ended, as its line says it: status, wall time, and the reason where there is one."""
    took = f", {outcome['seconds']:.1f} s" if "seconds" in outcome else ""
    return outcome["status"] + took + (f", {outcome['reason']}" if outcome.get("reason") else "")


def time_table(steps: list[dict[str, Any]]) -> list[str]:
    """The run's steps (as the manifest lists them) with their wall times, and the total, as text lines."""
    timed = [s for s in steps if s["status"] != "skipped"]
    if not timed:
        return []
    width = max(len(f"{s['kind']} {s['name']}") for s in timed)
    lines = [f"{'step':<{width}}  {'status':<10}  seconds"]
    lines += [f"{s['kind'] + ' ' + s['name']:<{width}}  {s['status']:<10}  {s['seconds']:>7.1f}" for s in timed]
    lines.append(f"{'total':<{width}}  {'':<10}  {sum(s['seconds'] for s in timed):>7.1f}")
    return lines
