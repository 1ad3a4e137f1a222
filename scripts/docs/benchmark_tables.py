"""The benchmarks page's tables, generated from the CSV files the benchmark scripts write
(``benchmarks/results/<script>.csv``, one row per measured case; see ``benchmarks/record.py``)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _record_columns() -> tuple[str, ...]:
    """The columns the benchmark scripts write: ``COLUMNS`` of ``benchmarks/record.py`` (loaded by path, as the
    scripts load it, without putting the benchmarks folder on ``sys.path``)."""
    spec = importlib.util.spec_from_file_location("bindscope_benchmarks_record", BENCHMARKS / "record.py")
    assert spec is not None and spec.loader is not None, BENCHMARKS
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return tuple(module.COLUMNS)


COLUMNS = _record_columns()


def read_results(path: Path) -> list[dict[str, str]]:
    """The rows of one results CSV; a file without the expected columns is refused by name."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; run the benchmark again to rewrite it")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path}: no measurements; run the benchmark again to rewrite it")
    return rows


def _number(text: str) -> str:
    value = float(text)
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def script_table(rows: list[dict[str, str]]) -> str:
    """One script's measurements as markdown, with the command, date and machine that produced them."""
    first = rows[0]
    lines = [
        f"### `{first['script']}`",
        "",
        "| case | ours | baseline | ours | baseline | speed-up | target | checks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = r["unit"]
        lines.append(
            f"| {_cell(r['case'])} | {_cell(r['ours'])} | {_cell(r['baseline'])} | {_number(r['ours_value'])} {unit} "
            f"| {_number(r['baseline_value'])} {unit} | **{float(r['speedup']):.2f}x** | {_cell(r['target'])} "
            f"| {_cell(r['checks'])} |"
        )
    commands = sorted({r["command"] for r in rows})
    lines += ["", f"Measured {first['measured']} on {first['machine']} by:", ""]
    lines += ["```bash", *commands, "```", ""]
    return "\n".join(lines)


def benchmark_tables(folder: Path = BENCHMARKS) -> str:
    """Every results CSV as a table, then the benchmark scripts that have no results yet."""
    results = sorted((folder / "results").glob("*.csv"))
    parts = [script_table(read_results(path)) for path in results]
    measured = {p.stem for p in results}
    missing = sorted(p.name for p in folder.glob("bench_*.py") if p.stem not in measured)
    if missing:
        parts += [
            "### Not measured in this release",
            "",
            "These scripts have no results file yet; run one to write `benchmarks/results/<script>.csv`:",
            "",
            *[f"- `.venv/bin/python benchmarks/{name}`" for name in missing],
            "",
        ]
    return "\n".join(parts)
