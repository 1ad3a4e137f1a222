"""Benchmark building the ``text`` preset dataset (160,400 scenes) against a plain Python loop.

What is timed
-------------
ours
    ``bindscope.data.datasets.build_dataset("text", out)`` end to end: enumerate the scenes,
    caption them, write ``scenes.parquet``, ``scenes.csv`` and ``manifest.json``. Run
    ``--repeats`` times (default 3), each into a fresh folder; the best time is reported.
baseline
    A straightforward per-scene Python loop: ``itertools.product`` over the 400 objects for
    the ordered pairs, then a loop over the single objects, one dict row per scene with an
    f-string caption, then ``pandas.DataFrame(rows)`` with ``to_parquet`` and ``to_csv``.
    Run once.

Both parquet files are read back with pandas and compared after normalising dtypes and
nulls, so the two paths are known to produce the same table. The script exits 0 when the
tables match and ours takes under 5 s, 1 when ours misses the target, and 2 when the
tables differ. All output goes to a temporary folder that is removed afterwards.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_text_dataset.py [--repeats N] [--csv PATH]

The figures go to ``benchmarks/results/bench_text_dataset.csv`` (or ``--csv``) when the tables match.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from record import Measurement, add_csv_argument, write_results

from bindscope.data.datasets import build_dataset
from bindscope.data.presets import get_preset

PRESET = "text"
TARGET_S = 5.0
EXIT_OK, EXIT_SLOW, EXIT_MISMATCH = 0, 1, 2


def time_ours(root: Path, repeats: int) -> tuple[list[float], Path]:
    """Build the dataset ``repeats`` times into fresh folders; the times and the first folder."""
    times = []
    for i in range(1, repeats + 1):
        start = time.perf_counter()
        build_dataset(PRESET, root / f"ours-{i}")
        times.append(time.perf_counter() - start)
    return times, root / "ours-1"


def baseline_rows() -> list[dict[str, Any]]:
    """One dict per scene: every ordered pair of objects, then every object alone."""
    space = get_preset(PRESET).space
    attributes, nouns = space.values
    # Object ids are mixed-radix with the attribute as the fastest digit, so nouns vary slowest.
    objects = [(a, ai, n, ni) for ni, n in enumerate(nouns) for ai, a in enumerate(attributes)]
    rows = []
    for (a1, a1i, n1, n1i), (a2, a2i, n2, n2i) in itertools.product(objects, repeat=2):
        rows.append(
            {
                "scene": len(rows),
                "num_objects": 2,
                "object1_attribute": a1,
                "object1_attribute_idx": a1i,
                "object1_noun": n1,
                "object1_noun_idx": n1i,
                "object2_attribute": a2,
                "object2_attribute_idx": a2i,
                "object2_noun": n2,
                "object2_noun_idx": n2i,
                "caption": f"a {a1} {n1} and a {a2} {n2}",
                "image": "",
            }
        )
    for a, ai, n, ni in objects:
        rows.append(
            {
                "scene": len(rows),
                "num_objects": 1,
                "object1_attribute": a,
                "object1_attribute_idx": ai,
                "object1_noun": n,
                "object1_noun_idx": ni,
                "object2_attribute": None,
                "object2_attribute_idx": -1,
                "object2_noun": None,
                "object2_noun_idx": -1,
                "caption": f"a {a} {n}",
                "image": "",
            }
        )
    return rows


def run_baseline(out: Path) -> float:
    """Build and write the baseline table into ``out``; the seconds it took."""
    start = time.perf_counter()
    out.mkdir()
    table = pd.DataFrame(baseline_rows())
    table.to_parquet(out / "scenes.parquet", index=False)
    table.to_csv(out / "scenes.csv", index=False)
    return time.perf_counter() - start


def normalised(path: Path) -> pd.DataFrame:
    """A parquet table with integer columns as int64 and every other column as object/None."""
    table = pd.read_parquet(path)
    columns = {}
    for name in table.columns:
        col = table[name]
        if pd.api.types.is_integer_dtype(col):
            columns[name] = col.astype("int64")
        else:
            columns[name] = col.astype(object).where(col.notna(), None)
    return pd.DataFrame(columns)


def table_difference(ours: Path, baseline: Path) -> str | None:
    """Where the two parquet tables first differ, or None when their content is the same."""
    a, b = normalised(ours), normalised(baseline)
    if list(a.columns) != list(b.columns):
        return f"columns differ:\n  ours     {list(a.columns)}\n  baseline {list(b.columns)}"
    if len(a) != len(b):
        return f"ours has {len(a):,} rows, the baseline {len(b):,}"
    for name in a.columns:
        x, y = a[name], b[name]
        if x.dtype != y.dtype:
            return f"column {name!r}: ours holds {x.dtype}, the baseline {y.dtype}"
        same = (x == y) | (x.isna() & y.isna())
        if not same.all():
            row = int(same.idxmin())
            got, want = x.iloc[[row]].tolist()[0], y.iloc[[row]].tolist()[0]
            return f"column {name!r}, row {row:,}: ours {got!r}, baseline {want!r}"
    return None


def summary(ours: list[float], baseline: float, rows: int) -> str:
    """The lines the benchmark prints."""
    best = min(ours)
    runs = ", ".join(f"{t:.2f}" for t in ours)
    verdict = "yes" if best < TARGET_S else "NO"
    return "\n".join(
        [
            f"text dataset: {rows:,} scenes, tables identical (parquet content compared)",
            f"ours      build_dataset('text')              {best:7.2f} s  (best of {len(ours)}: {runs})",
            f"baseline  per-scene Python loop + pandas     {baseline:7.2f} s  (1 run)",
            f"speed-up  {baseline / best:.1f}x  (baseline / ours)",
            f"target    ours under {TARGET_S:g} s: {verdict}",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of ours; the best counts (default 3)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours, ours_dir = time_ours(root, args.repeats)
        baseline = run_baseline(root / "baseline")
        problem = table_difference(ours_dir / "scenes.parquet", root / "baseline" / "scenes.parquet")
        if problem is not None:
            print(
                f"FAIL: the baseline table differs from ours, so the timings are not comparable\n{problem}",
                file=sys.stderr,
            )
            return EXIT_MISMATCH
        rows = len(pd.read_parquet(ours_dir / "scenes.parquet", columns=["scene"]))
    print(summary(ours, baseline, rows))
    measurement = Measurement(
        f"text preset, {rows:,} scenes",
        f"build_dataset('text'), best of {len(ours)}",
        "per-scene Python loop + pandas to_parquet / to_csv (1 run)",
        "s",
        min(ours),
        baseline,
        f"under {TARGET_S:g} s",
        "parquet tables identical (content compared)",
    )
    print(f"wrote {write_results(__file__, [measurement], args.csv, argv=argv)}")
    return EXIT_OK if min(ours) < TARGET_S else EXIT_SLOW


if __name__ == "__main__":
    sys.exit(main())
