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
        self.records.append(
            StepRecord(
                kind,
                name,
                str(folder) if folder else None,
                outcome["status"],
                round(time.perf_counter() - start, 3),
                outcome.get("reason"),
            )
        )

    def skip(self, kind: str, name: str, reason: str) -> None:
        self.records.append(StepRecord(kind, name, None, "skipped", 0.0, reason))

    def to_list(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]
