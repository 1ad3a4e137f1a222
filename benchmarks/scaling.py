"""How each analysis's time and peak memory grow with the number of scenes, and the fitted exponent.

What is measured
----------------
For each size (``--sizes``, default 1,000, 10,000 and 100,000 scenes) a custom text space of ``K`` objects
(``a`` attributes x ``n`` nouns, ``K = a * n`` chosen so that the ``K^2`` ordered pairs and ``K`` single
objects come closest to the size, as the ``text`` preset's 400 objects give 160,400 scenes) is built with
``bindscope dataset build``. Planted embeddings (:func:`bindscope.space.planted.planted_embeddings`,
``--dim`` wide) stand for the model: ``additive_concepts_objects`` for the model's captions,
``bag_of_concepts`` for its ``+rand`` control, ``additive_concepts_objects`` of another seed for its images
(the cross-modal tests' image side), each with Gaussian noise; the single-object bank is the single-object
scenes' rows. They are imported with ``bindscope embeddings import`` (the control and singles as siblings).

Then every analysis (``--analyses``: probe, decompose, intervene, complexity, crossmodal, geometry) runs
with its defaults through the real CLI, each as a process of its own: its time is the analysis's own
(``seconds`` of its ``summary.json``), beside the process's wall time, and its peak resident memory is the
process's (``ru_maxrss`` from ``wait4``). As in ``bindscope run``, intervene and complexity are given the
probe step's folder (``--probes``) when it finished. A run still going after ``--timeout`` seconds is killed
and recorded as over the limit, and that analysis is not run at the larger sizes (recorded as not run). The
CSV is written again after each size, so a long run stopped part way keeps the sizes it finished.

Per analysis the time exponent is the slope of log(seconds) against log(scenes) over the sizes that
finished (1: linear; 2: quadratic), and the memory growth is the peak's added MB per 1,000 scenes between
the smallest and the largest size that finished (the interpreter and its libraries, several hundred MB,
cancel out).

Run it from the repository root (the 100,000 size takes the longest: each analysis up to ``--timeout``)::

    .venv/bin/python benchmarks/scaling.py [--sizes 1000,10000,100000] [--analyses probe,geometry]
        [--timeout SECONDS] [--dim D] [--csv PATH]

It prints a table and writes ``benchmarks/results/scaling.csv`` (``--csv``): a row per analysis and size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from paper_scale import BINDSCOPE, FAILED, NOT_RUN, OVER, git_commit, run_child, write_rows
from record import add_csv_argument, command, machine

ANALYSES = ("probe", "decompose", "intervene", "complexity", "crossmodal", "geometry")
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_TIMEOUT_S = 1200
#: The planted kinds standing for the model's captions, its ``+rand`` control and its images.
MODEL_KIND, CONTROL_KIND, IMAGE_KIND = "additive_concepts_objects", "bag_of_concepts", "additive_concepts_objects"
#: The planted embeddings' noise, relative to a unit-norm component.
NOISE = 0.5
#: The columns of ``scaling.csv``, in order.
COLUMNS = (
    "analysis",
    "size",
    "scenes",
    "objects",
    "dim",
    "status",
    "seconds",
    "wall_seconds",
    "cpu_seconds",
    "peak_mb",
    "time_exponent",
    "mb_per_1000_scenes",
    "note",
    "load",
    "commit",
    "measured",
    "machine",
    "command",
)


@dataclass(frozen=True)
class Space:
    """A custom space of ``attributes x nouns`` objects: every ordered pair of objects and every object alone."""

    attributes: int
    nouns: int

    @property
    def objects(self) -> int:
        return self.attributes * self.nouns

    @property
    def scenes(self) -> int:
        return self.objects**2 + self.objects

    def yaml(self) -> str:
        attributes = ", ".join(f"a{i}" for i in range(self.attributes))
        nouns = ", ".join(f"n{i}" for i in range(self.nouns))
        return "\n".join(
            [
                f"name: scaling-{self.objects}",
                f"description: {self.objects} objects, every ordered pair and every object alone",
                "concepts:",
                f"  attribute: [{attributes}]",
                f"  noun: [{nouns}]",
                "objects_per_scene: 2",
                "scenes:",
                "  include_single_objects: true",
                "caption:",
                '  object: "a {attribute} {noun}"',
                "noun: noun",
                "modalities: [image, text]",  # no images are drawn (no renderer): the image side is planted
                "",
            ]
        )


def space_for(size: int) -> Space:
    """The space whose scene count is closest to ``size`` (the larger of two as close), of ``a <= n <= 2a``
    attributes x nouns (at least 2 x 2)."""
    root = math.isqrt(size) + 2
    spaces = [Space(a, n) for a in range(2, root + 1) for n in range(a, 2 * a + 1) if a * n <= root]
    return min(spaces, key=lambda space: (abs(space.scenes - size), -space.scenes))


@dataclass
class Measured:
    """One analysis at one size, with the machine's 1-minute load average as it ended."""

    analysis: str
    size: int
    space: Space
    status: str
    seconds: float
    wall_seconds: float
    peak_mb: float
    note: str = ""
    load: float = field(default_factory=lambda: os.getloadavg()[0])
    cpu_seconds: float = 0.0


def bindscope(env: dict[str, str], *args: str) -> None:
    """Run a setup command; stop with its output when it fails."""
    child = run_child([str(BINDSCOPE), *args], env, timeout=3600)
    if child.returncode != 0:
        raise SystemExit(f"bindscope {' '.join(args)} failed:\n{child.output}")


def prepare(root: Path, space: Space, dim: int, env: dict[str, str]) -> dict[str, Path]:
    """Build the space's dataset and import its planted embeddings; the folders the analyses read."""
    from bindscope.data.datasets import load_dataset
    from bindscope.space.planted import planted_embeddings

    (root / "space.yaml").write_text(space.yaml())
    data = root / "data"
    bindscope(env, "dataset", "build", str(root / "space.yaml"), "--out", str(data), "-q")
    scenes = load_dataset(data).scenes
    alone = np.flatnonzero(scenes.num_objects() == 1)
    order = alone[np.argsort(scenes.object_ids()[alone, 0])]  # the single-object rows, in object id order
    folders = {}
    for name, kind, seed, modality, spec in (
        ("text", MODEL_KIND, 0, "text", "hf:planted"),
        ("text+rand", CONTROL_KIND, 1, "text", "hf:planted+rand"),
        ("image", IMAGE_KIND, 2, "image", "hf:planted"),
    ):
        array = planted_embeddings(scenes, kind, dim=dim, noise=NOISE, seed=seed)
        np.save(root / f"{name}.npy", array)
        np.save(root / f"{name}-singles.npy", array[order])
        out = root / "emb" / modality / name
        args = ["embeddings", "import", str(data), str(root / f"{name}.npy"), "--name", "planted"]
        args += ["--modality", modality, "--model-spec", spec, "--out", str(out)]
        if not name.endswith("+rand"):
            args += ["--singles", str(root / f"{name}-singles.npy")]
        bindscope(env, *args)
        folders[name] = out
    return folders


def analysis_args(analysis: str, folders: dict[str, Path], results: Path, probes: Path | None) -> list[str]:
    """The command line of one analysis with its defaults (the probes given where the run gives them)."""
    given = ["--probes", str(probes)] if probes is not None and analysis in ("intervene", "complexity") else []
    inputs = [str(folders["image"]), str(folders["text"])] if analysis == "crossmodal" else [str(folders["text"])]
    return [str(BINDSCOPE), analysis, *inputs, *given, "--out", str(results / analysis), "-q"]


def own_seconds(folder: Path) -> float | None:
    """The analysis's own seconds, from its ``summary.json``."""
    path = folder / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    seconds = summary.get("seconds", summary.get("header", {}).get("seconds"))
    return None if seconds is None else float(seconds)


def measure_size(size: int, analyses: list[str], dim: int, timeout: float) -> list[Measured]:
    """Every analysis in ``analyses`` at one size, each in its own process."""
    space = space_for(size)
    out = []
    with tempfile.TemporaryDirectory(prefix=f"bindscope-scaling-{size}-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "HOME": tmp, "XDG_CACHE_HOME": str(root / "cache"), "MPLCONFIGDIR": str(root / "mpl")}
        folders = prepare(root, space, dim, env)
        probes: Path | None = None
        for analysis in analyses:
            measured = measure_one(analysis, size, space, folders, root / "results", probes, env, timeout)
            if measured.status == "computed" and analysis == "probe":
                probes = root / "results" / analysis
            print(
                f"  {analysis} at {space.scenes:,} scenes: {measured.status}, {measured.seconds:.1f} s, "
                f"peak {measured.peak_mb:,.0f} MB",
                flush=True,
            )
            out.append(measured)
    return out


def measure_one(
    analysis: str,
    size: int,
    space: Space,
    folders: dict[str, Path],
    results: Path,
    probes: Path | None,
    env: dict[str, str],
    timeout: float,
) -> Measured:
    """One analysis as a process of its own: its status, own seconds, wall and CPU seconds and peak memory."""
    args = analysis_args(analysis, folders, results, probes)
    child = run_child(args, env, timeout)
    status, note = "computed", "probes given" if "--probes" in args else ""
    if child.returncode is None:
        status, note = OVER, f"killed at {timeout:g} s"
    elif child.returncode != 0:
        print(f"{analysis} at {size:,} failed:\n{child.output}", file=sys.stderr)
        status, note = FAILED, (child.output.strip().splitlines() or ["no output"])[-1][:200]
    seconds = own_seconds(results / analysis) if status == "computed" else None
    wall = child.wall_seconds
    measured = Measured(analysis, size, space, status, seconds or wall, wall, child.peak_mb, note)
    measured.cpu_seconds = child.cpu_seconds
    return measured


def not_run(analyses: list[str], size: int, measured: list[Measured]) -> list[Measured]:
    """The analyses of ``analyses`` not run at ``size`` because they went over the limit at a smaller size (a larger
    one would only take longer), recorded as such."""
    over = {m.analysis: m.space.scenes for m in measured if m.status == OVER}
    space = space_for(size)
    return [
        Measured(a, size, space, NOT_RUN, 0.0, 0.0, 0.0, f"over the limit at {over[a]:,} scenes")
        for a in analyses
        if a in over
    ]


def exponent(points: list[Measured]) -> float | None:
    """The slope of log(seconds) against log(scenes) over the finished sizes (None under two)."""
    done = [m for m in points if m.status == "computed" and m.seconds > 0]
    if len({m.space.scenes for m in done}) < 2:
        return None
    x = np.log([m.space.scenes for m in done])
    y = np.log([m.seconds for m in done])
    return float(np.polyfit(x, y, 1)[0])


def memory_growth(points: list[Measured]) -> float | None:
    """The peak's added MB per 1,000 scenes from the smallest to the largest finished size (None under two)."""
    done = sorted((m for m in points if m.status == "computed"), key=lambda m: m.space.scenes)
    if len(done) < 2 or done[-1].space.scenes == done[0].space.scenes:
        return None
    return (done[-1].peak_mb - done[0].peak_mb) / (done[-1].space.scenes - done[0].space.scenes) * 1000


def table_rows(measured: list[Measured], dim: int, shared: dict[str, str]) -> list[dict[str, str]]:
    rows = []
    for analysis in dict.fromkeys(m.analysis for m in measured):
        points = [m for m in measured if m.analysis == analysis]
        slope, growth = exponent(points), memory_growth(points)
        for m in points:
            rows.append(
                {
                    "analysis": analysis,
                    "size": str(m.size),
                    "scenes": str(m.space.scenes),
                    "objects": str(m.space.objects),
                    "dim": str(dim),
                    "status": m.status,
                    "seconds": f"{m.seconds:.2f}",
                    "wall_seconds": f"{m.wall_seconds:.1f}",
                    "cpu_seconds": f"{m.cpu_seconds:.1f}",
                    "peak_mb": f"{m.peak_mb:.0f}",
                    "time_exponent": "" if slope is None else f"{slope:.2f}",
                    "mb_per_1000_scenes": "" if growth is None else f"{growth:.1f}",
                    "note": m.note,
                    "load": f"{m.load:.1f}",
                    **shared,
                }
            )
    return rows


def print_table(rows: list[dict[str, str]]) -> None:
    heads = ("analysis", "scenes", "status", "seconds", "wall_seconds", "cpu_seconds", "peak_mb", "time_exponent")
    widths = {h: max(len(h), *(len(r[h]) for r in rows)) for h in heads}
    print("  ".join(h.ljust(widths[h]) for h in heads))
    for r in rows:
        print("  ".join(r[h].ljust(widths[h]) for h in heads))


def parse_list(text: str, choices: tuple[str, ...] | None, what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in items if choices is not None and s not in choices]
    if not items or unknown:
        raise SystemExit(f"--{what}: unknown {unknown}; choose from {','.join(choices or ())}")
    return items


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(s.replace("_", "")) for s in parse_list(text, None, "sizes")})
    except ValueError:
        raise SystemExit(f"--sizes: {text!r} is not a comma-separated list of scene counts, e.g. 1000,10000") from None
    if sizes[0] < 6:
        raise SystemExit("--sizes: each size must be at least 6 scenes (2 x 2 objects)")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="scene counts, comma-separated")
    parser.add_argument("--analyses", default=",".join(ANALYSES), help="analyses to time, comma-separated")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds before a run is killed")
    parser.add_argument("--dim", type=int, default=384, help="embedding width (default 384, all-MiniLM-L6-v2's)")
    add_csv_argument(parser, __file__)
    opts = parser.parse_args(argv)
    sizes = parse_sizes(opts.sizes)
    wanted = parse_list(opts.analyses, ANALYSES, "analyses")
    analyses = [a for a in ANALYSES if a in wanted]  # probe first: intervene and complexity reuse its folder
    commit = git_commit()  # the code measured: taken before, as the checkout may change during a long run
    measured: list[Measured] = []
    for size in sizes:
        space = space_for(size)
        print(f"{size:,}: {space.attributes} x {space.nouns} objects, {space.scenes:,} scenes", flush=True)
        skipped = not_run(analyses, size, measured)
        left = [a for a in analyses if a not in {m.analysis for m in skipped}]
        measured += skipped + (measure_size(size, left, opts.dim, opts.timeout) if left else [])
        write_rows(opts.csv, COLUMNS, table_rows(measured, opts.dim, provenance(commit, argv)))  # each size as done
    rows = table_rows(measured, opts.dim, provenance(commit, argv))
    print()
    print_table(rows)
    write_rows(opts.csv, COLUMNS, rows)
    print(f"\nwrote {opts.csv}")
    return 0


def provenance(commit: str, argv: list[str] | None) -> dict[str, str]:
    """The columns every row shares: the commit measured, when, on what machine and by which command."""
    return {
        "commit": commit,
        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "command": command(__file__, argv),
    }


if __name__ == "__main__":
    sys.exit(main())
