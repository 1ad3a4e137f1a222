"""The benchmarks page's generated tables (``scripts/docs/benchmark_tables.py``): the record-format results, and
the paper-scale and scaling tables with their own columns."""

from __future__ import annotations

import csv
from pathlib import Path

import benchmark_tables
import hooks
import pytest

SHARED = {"commit": "abc123+dirty", "measured": "2026-12-07T00:00:00Z", "machine": "2 cores, Linux x86_64"}


def write(path: Path, columns: tuple[str, ...], rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)


def paper_row(
    step: str, status: str, seconds: str, peak: str, met: str, command: str = "bindscope x"
) -> dict[str, str]:
    return {
        "step": step,
        "status": status,
        "seconds": seconds,
        "wall_seconds": seconds,
        "cpu_seconds": "2",
        "peak_mb": peak,
        "target": "peak <= 4,096 MB",
        "met": met,
        "note": "",
        "load": seconds[:1],  # a load average per step: 3, 4, 1, 1
        "scenes": "160400",
        "model": "st:all-MiniLM-L6-v2",
        "command": command,
        "script_command": ".venv/bin/python benchmarks/paper_scale.py --out x",
        **SHARED,
    }


def scaling_row(
    analysis: str, size: int, scenes: int, status: str, seconds: str, peak: str, slope: str
) -> dict[str, str]:
    return {
        "analysis": analysis,
        "size": str(size),
        "scenes": str(scenes),
        "status": status,
        "seconds": seconds,
        "cpu_seconds": "1",
        "peak_mb": peak,
        "time_exponent": slope,
        "mb_per_1000_scenes": "2.5" if slope else "",
        "note": "over the limit at 1,056 scenes" if status == "not run" else "",
        "load": "1.5",
        "command": ".venv/bin/python benchmarks/scaling.py --sizes 1000,10000",
        **SHARED,
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A benchmarks folder with one record-format result, a paper-scale result and a scaling result."""
    record = dict.fromkeys(benchmark_tables.COLUMNS, "x")
    record.update(script="bench_one.py", ours_value="1", baseline_value="2", speedup="2", unit="s")
    write(tmp_path / "results" / "bench_one.csv", benchmark_tables.COLUMNS, [record])
    paper = [
        paper_row("embed", "reused", "3.5", "1125", "yes"),
        paper_row("probe", "computed", "412.0", "2900", "yes"),
        paper_row("decompose", "over limit", "1200", "5000", "no"),
        paper_row("analyses together", "incomplete", "1612", "5000", "no", command=""),
    ]
    write(tmp_path / "results" / "paper_scale.csv", benchmark_tables.PAPER_SCALE_COLUMNS, paper)
    scaling = [
        scaling_row("probe", 1000, 1056, "computed", "2.0", "500", "2.00"),
        scaling_row("probe", 10000, 10100, "computed", "200", "900", "2.00"),
        scaling_row("geometry", 1000, 1056, "computed", "1.5", "450", ""),
        scaling_row("geometry", 10000, 10100, "over limit", "600", "3000", ""),
        scaling_row("decompose", 1000, 1056, "over limit", "600", "3000", ""),
        scaling_row("decompose", 10000, 10100, "not run", "0", "0", ""),
    ]
    write(tmp_path / "results" / "scaling.csv", benchmark_tables.SCALING_COLUMNS, scaling)
    return tmp_path


def test_the_script_tables_leave_out_the_results_with_their_own_tables(folder: Path) -> None:
    text = benchmark_tables.benchmark_tables(folder)
    assert "### `bench_one.py`" in text
    assert "paper_scale" not in text and "scaling" not in text


def test_paper_scale_table_has_a_row_per_step_and_the_total_in_bold(folder: Path) -> None:
    text = benchmark_tables.own_table("paper_scale", folder)
    assert text.startswith("`st:all-MiniLM-L6-v2` on 160,400 scenes:")
    assert "| probe | computed | 412 | 412 | 2 | 2,900 | peak <= 4,096 MB | yes |  |" in text
    assert "| decompose | over limit | 1,200 | 1,200 | 2 | 5,000 |" in text
    assert "| **analyses together** | incomplete | 1,612 |" in text
    assert "(1-minute load average 1.0 to 4.0 as the steps ended) at commit `abc123+dirty` by:" in text
    assert ".venv/bin/python benchmarks/paper_scale.py --out x" in text


def test_scaling_table_has_a_column_per_size_and_the_exponent(folder: Path) -> None:
    lines = benchmark_tables.own_table("scaling", folder).splitlines()
    assert lines[0] == "| analysis | 1,056 scenes | 10,100 scenes | time exponent | MB per 1,000 scenes |"
    assert lines[1] == "|---|---|---|---|---|"
    assert lines[2] == "| probe | 2 s (1 s CPU), 500 MB | 200 s (1 s CPU), 900 MB | 2.00 | 2.5 |"
    assert lines[3] == "| geometry | 1.5 s (1 s CPU), 450 MB | over limit (600 s) | - | - |"
    assert lines[4] == "| decompose | over limit (600 s) | not run (over the limit at 1,056 scenes) | - | - |"
    assert "on 2 cores, Linux x86_64 (1-minute load average 1.5 to 1.5 as the steps ended) at commit" in lines[6]


def test_a_size_an_analysis_did_not_reach_reads_not_run(folder: Path) -> None:
    path = folder / "results" / "scaling.csv"
    rows = [
        scaling_row("probe", 1000, 1056, "computed", "2.0", "500", ""),
        scaling_row("decompose", 10000, 10100, "computed", "3", "600", ""),
    ]
    write(path, benchmark_tables.SCALING_COLUMNS, rows)
    text = benchmark_tables.own_table("scaling", folder)
    assert "| probe | 2 s (1 s CPU), 500 MB | not run | - | - |" in text
    assert "| decompose | not run | 3 s (1 s CPU), 600 MB | - | - |" in text


def test_an_absent_result_says_how_to_measure_it(tmp_path: Path) -> None:
    text = benchmark_tables.own_table("scaling", tmp_path)
    assert "run `.venv/bin/python benchmarks/scaling.py`" in text


def test_an_unknown_table_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown benchmark table 'nothing'; choose from paper_scale, scaling"):
        benchmark_tables.own_table("nothing")


def test_a_result_without_its_columns_is_refused_by_name(folder: Path) -> None:
    path = folder / "results" / "paper_scale.csv"
    write(path, ("step", "seconds"), [{"step": "probe", "seconds": "1"}])
    with pytest.raises(ValueError, match=r"paper_scale.csv: missing columns \['status'.*run benchmarks/paper_scale.py"):
        benchmark_tables.own_table("paper_scale", folder)


def test_an_empty_result_is_refused(folder: Path) -> None:
    write(folder / "results" / "scaling.csv", benchmark_tables.SCALING_COLUMNS, [])
    with pytest.raises(ValueError, match="scaling.csv: no measurements"):
        benchmark_tables.own_table("scaling", folder)


@pytest.mark.parametrize("name", ["paper_scale", "scaling"])
def test_the_marker_with_a_name_expands_to_that_table(name: str) -> None:
    assert hooks.expand(f"<!-- generated: benchmarks {name} -->") == benchmark_tables.own_table(name)


def test_the_marker_with_an_unknown_name_stops_the_build() -> None:
    with pytest.raises(ValueError, match="unknown benchmark table 'nothing'"):
        hooks.expand("<!-- generated: benchmarks nothing -->")
