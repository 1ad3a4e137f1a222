"""The benchmarks' CSV writer (``benchmarks/record.py``), and that every benchmark script uses it."""

from __future__ import annotations

import ast
import csv
import sys
from datetime import datetime
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import record  # noqa: E402
from record import COLUMNS, Measurement, write_results  # noqa: E402

SCRIPT = str(BENCHMARKS / "bench_example.py")  # need not exist: only its name is used
EXPECTED_COLUMNS = [
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
]


def read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_writes_exactly_the_columns_in_order(tmp_path: Path) -> None:
    out = tmp_path / "bench_example.csv"
    written = write_results(
        SCRIPT,
        [
            Measurement(
                "clevr size (576 x 512)", "ours.fn", "a loop, one at a time", "s", 0.5, 2.0, "10x", "R2 within 1e-7"
            ),
            Measurement("text size", "ours.fn", "a loop", "images/s", 1200.0, 30.0),
        ],
        out,
        argv=["--sizes", "clevr", "--csv", "my results.csv"],
    )
    assert written == out
    header, rows = read(out)
    assert header == EXPECTED_COLUMNS == list(COLUMNS)
    assert len(rows) == 2
    first, second = rows
    assert first["script"] == "bench_example.py"
    assert (first["case"], first["ours"], first["baseline"], first["unit"]) == (
        "clevr size (576 x 512)",
        "ours.fn",
        "a loop, one at a time",
        "s",
    )
    assert (float(first["ours_value"]), float(first["baseline_value"])) == (0.5, 2.0)
    assert (first["target"], first["checks"]) == ("10x", "R2 within 1e-7")
    assert (second["target"], second["checks"]) == ("", "")
    stamp = datetime.strptime(first["measured"], "%Y-%m-%dT%H:%M:%SZ")
    assert stamp.year >= 2024
    assert first["machine"].startswith(f"{record.os.cpu_count()} cores, ")
    assert "python " in first["machine"]
    assert first["command"] == ".venv/bin/python benchmarks/bench_example.py --sizes clevr --csv 'my results.csv'"
    assert {r["measured"] for r in rows} == {first["measured"]}


@pytest.mark.parametrize(
    ("unit", "ours", "baseline", "speedup"),
    [
        ("s", 2.0, 10.0, 5.0),  # a time: baseline / ours
        ("s", 4.0, 1.0, 0.25),  # slower than the baseline
        ("images/s", 1000.0, 50.0, 20.0),  # a throughput: ours / baseline
        ("rows/s", 90.0, 100.0, 0.9),
        ("MB", 400.0, 100.0, 0.25),  # a peak memory: lower is better, as a time
        ("MB", 50.0, 100.0, 2.0),
    ],
)
def test_speedup_both_ways(tmp_path: Path, unit: str, ours: float, baseline: float, speedup: float) -> None:
    m = Measurement("case", "ours", "base", unit, ours, baseline)
    assert m.speedup == pytest.approx(speedup)
    _, rows = read(write_results(SCRIPT, [m], tmp_path / "out.csv", argv=[]))
    assert float(rows[0]["speedup"]) == pytest.approx(speedup)


def test_refuses_an_empty_list(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    with pytest.raises(ValueError, match="pass at least one Measurement"):
        write_results(SCRIPT, [], out)
    assert not out.exists()


@pytest.mark.parametrize(
    ("unit", "value"), [("images/s", 0.0), ("seconds", 1.0), ("s", float("nan")), ("MiB", 1.0), ("MB", -1.0)]
)
def test_refuses_a_unit_or_value_it_cannot_compare(unit: str, value: float) -> None:
    with pytest.raises(ValueError):
        Measurement("case", "ours", "base", unit, 1.0, value)


def test_writes_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results" / "out.csv"  # the folder is created
    m = Measurement("case", "ours", "base", "s", 1.0, 3.0)
    write_results(SCRIPT, [m], out, argv=[])
    assert [p.name for p in out.parent.iterdir()] == ["out.csv"]  # no temporary file left
    before = out.read_bytes()

    def killed(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(record.os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_results(SCRIPT, [m, m], out, argv=[])
    assert out.read_bytes() == before  # the previous file is whole
    assert [p.name for p in out.parent.iterdir()] == ["out.csv"]


def test_default_path_is_results_next_to_the_script() -> None:
    assert record.default_path(BENCHMARKS / "bench_flat2d.py") == BENCHMARKS / "results" / "bench_flat2d.csv"


def calls(source: str, name: str) -> bool:
    tree = ast.parse(source)
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in ast.walk(tree)
    )


@pytest.mark.parametrize("script", sorted(BENCHMARKS.glob("bench_*.py")), ids=lambda p: p.name)
def test_every_benchmark_writes_its_results(script: Path) -> None:
    source = script.read_text(encoding="utf-8")
    assert calls(source, "write_results"), f"{script.name} must record its figures with record.write_results"
    assert calls(source, "add_csv_argument"), f"{script.name} must take --csv (record.add_csv_argument)"


def test_there_are_benchmarks() -> None:
    assert len(list(BENCHMARKS.glob("bench_*.py"))) >= 10
