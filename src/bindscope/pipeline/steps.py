"""Steps of a pipeline: an analysis run into a folder unless the folder holds the same result, and a record of
what each step did."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
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


@dataclass(frozen=True)
class Where:
    """What an analysis step ran on: the analysis, the dataset and the embeddings label (``<model>-<modality>``,
    or ``<model>`` for the cross-modal tests)."""

    analysis: str
    dataset: str
    label: str

    @property
    def key(self) -> str:
        """``<dataset>/<label>/<analysis>``: the step's name in the manifest."""
        return f"{self.dataset}/{self.label}/{self.analysis}"


@dataclass
class StepRecord:
    """What one step did: its kind and name, the folder, computed / reused / replaced / skipped, the time; for a
    skipped step why (``reason``) and what to change (``fix``); for an analysis step what it ran on."""

    kind: str
    name: str
    folder: str | None
    status: str
    seconds: float
    reason: str | None = None
    fix: str | None = None
    analysis: str | None = None
    dataset: str | None = None
    label: str | None = None


@dataclass
class StepLog:
    """Every step of a run, in order."""

    records: list[StepRecord] = field(default_factory=list)

    @contextmanager
    def timed(self, kind: str, name: str, folder: Path | None, where: Where | None = None) -> Iterator[dict[str, Any]]:
        """Time a step; the block sets ``status`` (and ``reason`` and ``fix``) in the dict it gets."""
        start = time.perf_counter()
        outcome: dict[str, Any] = {"status": "computed"}
        yield outcome
        outcome["seconds"] = round(time.perf_counter() - start, 3)
        self.records.append(
            StepRecord(
                kind,
                name,
                str(folder) if folder else None,
                outcome["status"],
                outcome["seconds"],
                outcome.get("reason"),
                outcome.get("fix"),
                **(asdict(where) if where else {}),
            )
        )

    def skip(self, where: Where, reason: str, fix: str) -> None:
        """Record an analysis that does not run on ``where``, why and what to change."""
        self.records.append(StepRecord("analysis", where.key, None, "skipped", 0.0, reason, fix, **asdict(where)))

    def to_list(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]

    def skips(self) -> list[Skip]:
        """The skipped analyses so far."""
        return skipped_steps(self.to_list())


@dataclass(frozen=True)
class Skip:
    """An analysis a run skipped on one embedding folder (or model, for the cross-modal tests): why and the fix."""

    analysis: str
    dataset: str
    label: str
    reason: str
    fix: str

    def line(self) -> str:
        """The skip as one line: ``<analysis> <dataset>/<label>: <reason>; fix: <fix>``."""
        return f"{self.analysis} {self.dataset}/{self.label}: {self.reason}; fix: {self.fix}"


#: The fix of a skip recorded by a bindscope that did not record fixes.
UNRECORDED_FIX = "not recorded (the run was made by an older bindscope): run it again to record the fix"


def skipped_steps(steps: Iterable[Mapping[str, Any]]) -> list[Skip]:
    """The skipped analysis steps of a run (its manifest's ``steps``), in run order, each with its reason and fix.

    Steps of older manifests, which lack the ``analysis``, ``dataset``, ``label`` and ``fix`` fields, are read
    from their name (``<dataset>/<label>/<analysis>``).
    """
    out = []
    for s in steps:
        if s.get("status") != "skipped" or s.get("kind") != "analysis":
            continue
        dataset, label, analysis = (str(s.get("name", "")).split("/", 2) + ["", "", ""])[:3]
        out.append(
            Skip(
                s.get("analysis") or analysis,
                s.get("dataset") or dataset,
                s.get("label") or label,
                s.get("reason") or "not recorded",
                s.get("fix") or UNRECORDED_FIX,
            )
        )
    return out


def error_fix(analysis: str, message: str) -> str:
    """The fix of an analysis that refused its data with ``message`` (a :class:`BindscopeError`'s, whose last
    ``; ``-separated part says what to do, by the project's convention), in terms of the run config."""
    off = f"or switch {analysis} off (analyses: {{{analysis}: false}})"
    if "; " in message:
        return f"{message.rsplit('; ', 1)[1]} (analyses.{analysis} or the dataset in the run config), {off}"
    return f"change analyses.{analysis} or the dataset in the run config so that the reason no longer holds, {off}"


def described(outcome: dict[str, Any]) -> str:
    """How a step ended, as its line says it: status, wall time, and the reason and fix where there are."""
    took = f", {outcome['seconds']:.1f} s" if "seconds" in outcome else ""
    why = f", {outcome['reason']}" if outcome.get("reason") else ""
    return outcome["status"] + took + why + (f"; fix: {outcome['fix']}" if outcome.get("fix") else "")


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
