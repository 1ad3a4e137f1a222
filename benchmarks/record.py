"""The one CSV writer of the benchmark scripts: each ``bench_*.py`` records what it measured with it.

A script builds one :class:`Measurement` per measured case and calls :func:`write_results`, which adds
the speed-up, the time of the run, the machine and the command line, and writes
``benchmarks/results/<script stem>.csv`` (or the script's ``--csv`` path) atomically. The
documentation's benchmarks page is generated from these files, so the columns (:data:`COLUMNS`) and
their order are fixed.

Benchmark scripts are run by path, so their folder is on ``sys.path``::

    from record import Measurement, add_csv_argument, write_results
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import platform
import shlex
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

#: The columns of every results file, in order.
COLUMNS = (
    "script",
    "case",
    "ours",
    "baseline",
    "unit",
    "ours_value",
    "baseline_value",
    "speedup",
    "target",
    "checks",
    "measured",
    "machine",
    "command",
)
#: The unit of a time (lower is better).
TIME_UNIT = "s"
#: The units where lower is better: a time and a peak memory in MB (2^20 bytes); a unit with a ``/`` is a
#: throughput (higher is better).
LOWER_IS_BETTER = (TIME_UNIT, "MB")


@dataclass(frozen=True)
class Measurement:
    """One measured case: bindscope's side against a named baseline, in one unit.

    Parameters
    ----------
    case
        What was measured, with its size, e.g. ``clevr size (576 x 512)``.
    ours
        Short description of bindscope's side, e.g. ``flat2d.render``.
    baseline
        The named baseline, e.g. ``PIL ImageDraw, one image at a time``; say so here (or in
        ``checks``) when its figure is extrapolated.
    unit
        ``s`` for a time or ``MB`` for a peak memory (lower is better), or a throughput unit with a ``/`` such
        as ``images/s`` (higher is better).
    ours_value, baseline_value
        The two figures in ``unit``; finite and positive.
    target
        The target the script names (e.g. ``10x``, ``1000 images/s``), or empty.
    checks
        The agreement checks the script made (e.g. ``R2 within 1e-7``), or empty.
    """

    case: str
    ours: str
    baseline: str
    unit: str
    ours_value: float
    baseline_value: float
    target: str = ""
    checks: str = ""

    def __post_init__(self) -> None:
        if self.unit not in LOWER_IS_BETTER and "/" not in self.unit:
            raise ValueError(
                f"unit {self.unit!r} of case {self.case!r}: use 's' for a time, 'MB' for a peak memory or a "
                "throughput such as 'images/s'"
            )
        for name in ("ours_value", "baseline_value"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} of case {self.case!r} must be finite and positive, got {value!r}")

    @property
    def speedup(self) -> float:
        """How many times better ours is (> 1: faster, or smaller): baseline / ours for a time or a memory, ours /
        baseline for a throughput."""
        ours, baseline = float(self.ours_value), float(self.baseline_value)
        return baseline / ours if self.unit in LOWER_IS_BETTER else ours / baseline


def default_path(script_file: str | Path) -> Path:
    """``results/<script stem>.csv`` in the folder of ``script_file``."""
    script = Path(script_file).resolve()
    return script.parent / "results" / f"{script.stem}.csv"


def add_csv_argument(parser: argparse.ArgumentParser, script_file: str | Path) -> None:
    """Add the ``--csv PATH`` option every benchmark script takes (default: :func:`default_path`)."""
    default = default_path(script_file)
    shown = Path(default.parent.parent.name, default.parent.name, default.name)
    parser.add_argument(
        "--csv",
        type=Path,
        default=default,
        metavar="PATH",
        help=f"where to write the measured figures as CSV (default {shown})",
    )


def machine() -> str:
    """The machine in words: cores, system, Python and the versions of torch and numpy where installed."""
    parts = [
        f"{os.cpu_count()} cores",
        f"{platform.system()} {platform.machine()}",
        f"python {platform.python_version()}",
    ]
    for package in ("torch", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            parts.append(f"{package} {metadata.version(package)}")
    return ", ".join(parts)


def command(script_file: str | Path, argv: list[str] | None = None) -> str:
    """The command line that ran the script, as typed from the repository root (the script's parent folder's
    parent): ``.venv/bin/python benchmarks/<script> <args>``, the arguments from ``argv`` (default
    ``sys.argv[1:]``)."""
    script = Path(script_file).resolve()
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join([".venv/bin/python", f"{script.parent.name}/{script.name}", *args])


def _number(value: float, digits: int = 6) -> str:
    """A float rounded to ``digits`` significant digits, written as Python writes it."""
    return repr(float(f"{float(value):.{digits}g}"))


def write_results(
    script_file: str,
    measurements: list[Measurement],
    out: Path | None = None,
    *,
    argv: list[str] | None = None,
) -> Path:
    """Write one CSV row per measurement, atomically, and return the path written.

    Parameters
    ----------
    script_file
        The benchmark script's ``__file__``: its name fills ``script``, its stem the default file name.
    measurements
        The measured cases, at least one.
    out
        The file to write; default :func:`default_path` (``benchmarks/results/<stem>.csv``). Its folder
        is created.
    argv
        The script's arguments for the ``command`` column; default ``sys.argv[1:]``.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ValueError
        When ``measurements`` is empty.
    """
    if not measurements:
        raise ValueError(
            f"no measurements to write for {Path(script_file).name}: pass at least one Measurement "
            "(a benchmark that measured nothing should not write a results file)"
        )
    path = Path(out) if out is not None else default_path(script_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    shared = {
        "script": Path(script_file).name,
        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "command": command(script_file, argv),
    }
    rows = [
        {
            **shared,
            "case": m.case,
            "ours": m.ours,
            "baseline": m.baseline,
            "unit": m.unit,
            "ours_value": _number(m.ours_value),
            "baseline_value": _number(m.baseline_value),
            "speedup": _number(m.speedup, 4),
            "target": m.target,
            "checks": m.checks,
        }
        for m in measurements
    ]
    temporary: Path | None = None
    try:  # a temporary file in the same folder, then a rename: a killed run leaves the previous file whole
        with tempfile.NamedTemporaryFile(
            "w", newline="", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            temporary = Path(handle.name)
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.chmod(0o644)  # a temporary file is private; a results file is not
        os.replace(temporary, path)
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
    return path
