"""The benchmarks page's tables, generated from the CSV files the benchmark scripts write
(``benchmarks/results/<script>.csv``, one row per measured case; see ``benchmarks/record.py``), and the tables of
the two scripts with their own columns (:data:`OWN_TABLES`): the paper-scale run step by step
(``benchmarks/paper_scale.py``) and the scaling of each analysis with the scenes (``benchmarks/scaling.py``)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _script_columns(name: str) -> tuple[str, ...]:
    """The columns ``benchmarks/<name>.py`` writes (its ``COLUMNS``), loaded by path as the scripts load each
    other: the benchmarks folder is on ``sys.path`` only while the script is read."""
    spec = importlib.util.spec_from_file_location(f"bindscope_benchmarks_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None, BENCHMARKS
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return tuple(module.COLUMNS)


COLUMNS = _script_columns("record")


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
    """Every results CSV as a table (but those of :data:`OWN_TABLES`), then the benchmark scripts that have no
    results yet."""
    results = sorted(p for p in (folder / "results").glob("*.csv") if p.stem not in OWN_TABLES)
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


def _read_own(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a results CSV with its own ``columns``; a file without them, or empty, is refused by name."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; run benchmarks/{path.stem}.py again to rewrite it")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path}: no measurements; run benchmarks/{path.stem}.py again to rewrite it")
    return rows


def _provenance(rows: list[dict[str, str]], command_column: str) -> list[str]:
    """Where a table's figures come from: the date, the machine, the commit, the machine's load and the command."""
    first = rows[0]
    loads = sorted(float(r["load"]) for r in rows)
    busy = f" (1-minute load average {loads[0]:.1f} to {loads[-1]:.1f} as the steps ended)"
    return [
        "",
        f"Measured {first['measured']} on {first['machine']}{busy} at commit `{first['commit']}` by:",
        "",
        "```bash",
        first[command_column],
        "```",
        "",
    ]


#: The columns of ``paper_scale.csv`` (``benchmarks/paper_scale.py`` writes them).
PAPER_SCALE_COLUMNS = _script_columns("paper_scale")


#: The row of every analysis step together, shown in bold.
PAPER_SCALE_TOTAL = "analyses together"


def paper_scale_table(rows: list[dict[str, str]]) -> str:
    """The paper-scale run as markdown: a row per step (the analyses together in bold), then its provenance."""
    first = rows[0]
    scenes = f"{int(first['scenes']):,} scenes" if first["scenes"].isdigit() else "scenes"
    lines = [
        f"`{first['model']}` on {scenes}:",
        "",
        "| step | status | seconds | process wall s | process CPU s | peak MB | target | met | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        step = f"**{_cell(r['step'])}**" if r["step"] == PAPER_SCALE_TOTAL else _cell(r["step"])
        lines.append(
            f"| {step} | {_cell(r['status'])} | {_number(r['seconds'])} | {_number(r['wall_seconds'])} "
            f"| {_number(r['cpu_seconds'])} | {_number(r['peak_mb'])} | {_cell(r['target'])} | {_cell(r['met'])} "
            f"| {_cell(r['note'])} |"
        )
    return "\n".join(lines + _provenance(rows, "script_command"))


#: The columns of ``scaling.csv`` (``benchmarks/scaling.py`` writes them).
SCALING_COLUMNS = _script_columns("scaling")


def _scaling_cell(row: dict[str, str] | None) -> str:
    if row is None:
        return "not run"
    if row["status"] == "not run":
        return f"not run ({_cell(row['note'])})" if row["note"] else "not run"
    if row["status"] != "computed":
        return f"{row['status']} ({_number(row['seconds'])} s)"
    return f"{_number(row['seconds'])} s ({_number(row['cpu_seconds'])} s CPU), {_number(row['peak_mb'])} MB"


def scaling_table(rows: list[dict[str, str]]) -> str:
    """Each analysis's time and peak memory at each size, its time exponent and memory growth, as markdown."""
    sizes = sorted({int(r["size"]) for r in rows})
    scenes = {int(r["size"]): int(r["scenes"]) for r in rows}
    heads = [f"{scenes[s]:,} scenes" for s in sizes]
    lines = [
        f"| analysis | {' | '.join(heads)} | time exponent | MB per 1,000 scenes |",
        "|---" * (len(sizes) + 3) + "|",
    ]
    for analysis in dict.fromkeys(r["analysis"] for r in rows):
        mine = {int(r["size"]): r for r in rows if r["analysis"] == analysis}
        first = next(iter(mine.values()))
        cells = [_scaling_cell(mine.get(s)) for s in sizes]
        lines.append(
            f"| {_cell(analysis)} | {' | '.join(cells)} | {first['time_exponent'] or '-'} "
            f"| {first['mb_per_1000_scenes'] or '-'} |"
        )
    return "\n".join(lines + _provenance(rows, "command"))


#: The results with their own table: the file's stem -> (its columns, its table).
OWN_TABLES = {
    "paper_scale": (PAPER_SCALE_COLUMNS, paper_scale_table),
    "scaling": (SCALING_COLUMNS, scaling_table),
}


def own_table(name: str, folder: Path = BENCHMARKS) -> str:
    """The table of ``results/<name>.csv`` (a name of :data:`OWN_TABLES`), or how to measure it when absent."""
    if name not in OWN_TABLES:
        raise ValueError(f"unknown benchmark table {name!r}; choose from {', '.join(OWN_TABLES)}")
    columns, table = OWN_TABLES[name]
    path = folder / "results" / f"{name}.csv"
    if not path.is_file():
        return f"Not measured in this release: run `.venv/bin/python benchmarks/{name}.py` to write `{path.name}`.\n"
    return table(_read_own(path, columns))
