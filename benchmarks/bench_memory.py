"""Peak memory of each ``bindscope`` command on imported planted arrays, against the floor of a bare numpy process.

What is measured
----------------
Each command runs as a process of its own through the real CLI; its peak resident memory is ``ru_maxrss``
from ``wait4`` (the largest of the process and every process it waited for), in MB (2^20 bytes).

ours
    ``dataset build --no-images`` of a custom space (image and text modalities, so that ``crossmodal``
    has both), ``embeddings import`` of a float32 ``scenes x --dim`` array for each modality, then each
    analysis on the imported arrays: ``probe``, ``decompose``, ``intervene``, ``complexity``,
    ``crossmodal`` and ``geometry`` (``--analyses``). Settings are cut to one seed and one fraction (and
    ``--optimizer lbfgs``, frozen probes for ``intervene`` and ``complexity``) so the run stays short: a
    command's peak is that of its largest fit, which more seeds repeat, not stack.
baseline
    ``python -c "import numpy, pandas; numpy.load(<array>)"``: the interpreter, the two libraries every
    command needs and the bare data (``data`` in the checks: the array's bytes). The ratio
    ``baseline / ours`` is below 1 by construction (a command is that process plus its own work); what
    matters is how far below, i.e. how much a command holds beyond the data it reads.

Sizes (``--sizes``): ``clevr`` (8 x 3 = 24 objects, every ordered pair: 576 scenes, as the clevr preset),
``10k`` (10 x 10 = 100 objects, every ordered pair of two different objects and every object alone: 10,000
scenes) and ``text`` (20 x 20 = 400 objects, every ordered pair and every object alone: 160,400 scenes; many
minutes on 2 cores, so not in the default).

Run it from the repository root (about 4 minutes on 2 idle cores with the default sizes)::

    .venv/bin/python benchmarks/bench_memory.py [--sizes clevr,10k] [--analyses probe,geometry] [--csv PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.data.datasets import load_dataset
from bindscope.space.planted import planted_embeddings

BINDSCOPE = Path(sys.executable).with_name("bindscope")
MB = 2**20
#: size name -> (attribute values, noun values, identical objects allowed, every object alone too)
SIZES = {"clevr": (8, 3, True, False), "10k": (10, 10, False, True), "text": (20, 20, True, True)}
DEFAULT_SIZES = ("clevr", "10k")
ANALYSES = ("probe", "decompose", "intervene", "complexity", "crossmodal", "geometry")
BASELINE = '`python -c "import numpy, pandas; numpy.load(array)"`'


def space_yaml(attributes: int, nouns: int, identical: bool, singles: bool) -> str:
    """A custom space of ``attributes x nouns`` objects: every ordered pair (of two different objects unless
    ``identical``), and every object alone with ``singles``."""
    return "\n".join(
        [
            "name: memory",
            "description: every ordered pair of objects",
            "concepts:",
            f"  attribute: [{', '.join(f'a{i}' for i in range(attributes))}]",
            f"  noun: [{', '.join(f'n{i}' for i in range(nouns))}]",
            "objects_per_scene: 2",
            "scenes:",
            "  mode: enumerate",
            f"  allow_identical: {str(identical).lower()}",
            f"  include_single_objects: {str(singles).lower()}",
            "caption:",
            '  object: "a {attribute} {noun}"',
            '  joiner: " and "',
            "noun: noun",
            "modalities: [image, text]",
            "",
        ]
    )


#: Runs ``argv[2:]`` and writes its peak resident memory to the file ``argv[1]``: ``ru_maxrss`` of its children in
#: KiB (the command and every process it waited for). On Linux a child's ``ru_maxrss`` starts from its parent's
#: peak (fork, or vfork then exec, carries it over), so a command started from this script, which holds the
#: planted arrays, would count the script's peak as its own: the commands start from this small launcher instead.
LAUNCHER = (
    "import resource, subprocess, sys; status = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(status)"
)


def peak_mb(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``args``; its peak resident memory in MB (itself and every process it waited for) and its wall time."""
    with tempfile.NamedTemporaryFile("r", suffix=".kib") as peak:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", LAUNCHER, peak.name, *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr}")
        return int(peak.read()) * 1024 / MB, elapsed  # ru_maxrss is in KiB on Linux


def commands(root: Path, analyses: list[str]) -> list[tuple[str, list[str]]]:
    """(name, arguments) of each measured bindscope command, in order (each needs the ones before)."""
    data, text, image, out = str(root / "data"), root / "emb" / "text", root / "emb" / "image", root / "out"
    probes = str(out / "probe")
    one = ["--seeds", "0", "-q"]
    analysis = {
        "probe": ["probe", str(text), "--optimizer", "lbfgs", *one],
        "decompose": ["decompose", str(text), "--optimizer", "lbfgs", *one],
        "intervene": ["intervene", str(text), "--probes", probes, "--seeds", "42", "-q"],
        "complexity": ["complexity", str(text), "--probes", probes, "--fractions", "0.5", "--budget", "cpu", *one],
        "crossmodal": ["crossmodal", str(image), str(text), "--bridge", "ridge", "--fractions", "0.5", *one],
        "geometry": ["geometry", str(text), "--fractions", "0.5", "--no-mds", *one],
    }
    needed = {*analyses, *(["probe"] if {"intervene", "complexity"} & set(analyses) else [])}
    steps = [
        ("dataset build --no-images", ["dataset", "build", str(root / "space.yaml"), "--out", data, "--no-images"])
    ]
    for modality, folder in (("text", text), ("image", image)):
        array = str(root / f"{modality}.npy")
        imported = ["--name", "planted", "--modality", modality, "--out", str(folder)]
        steps.append((f"embeddings import ({modality})", ["embeddings", "import", data, array, *imported]))
    steps += [(name, [*analysis[name], "--out", str(out / name)]) for name in ANALYSES if name in needed]
    return [(name, [str(BINDSCOPE), *args]) for name, args in steps]


def plant(root: Path, dim: int) -> int:
    """Planted object-additive arrays for the text and the image modality of ``root/data``; their rows."""
    scenes = load_dataset(root / "data").scenes
    for seed, modality in enumerate(("text", "image")):
        np.save(root / f"{modality}.npy", planted_embeddings(scenes, "object_additive", dim=dim, noise=0.1, seed=seed))
    return len(scenes)


def run_size(size: str, dim: int, analyses: list[str]) -> list[Measurement]:
    """Every command's peak memory at ``size``, each against the numpy floor on the same array."""
    attributes, nouns, identical, singles = SIZES[size]
    measured: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bindscope-memory-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "HOME": tmp, "XDG_CACHE_HOME": str(root / "cache"), "MPLCONFIGDIR": str(root / "mpl")}
        (root / "space.yaml").write_text(space_yaml(attributes, nouns, identical, singles))
        steps = commands(root, analyses)
        build = peak_mb(steps[0][1], env)
        rows = plant(root, dim)
        array = root / "text.npy"
        data = array.stat().st_size / MB
        floor, _ = peak_mb([sys.executable, "-c", f"import numpy, pandas; numpy.load({str(array)!r})"], env)
        label = f"{size} size ({rows:,} x {dim})"
        print(f"\n{label}: data {data:.1f} MB per array, floor {floor:.0f} MB ({BASELINE})")
        print("| command | peak MB | over the floor MB | floor / peak | seconds |\n|---|---|---|---|---|")
        for name, args in steps:
            peak, seconds = build if name == steps[0][0] else peak_mb(args, env)
            if name not in analyses and name in ANALYSES:
                continue  # the probes intervene and complexity read, not asked for itself
            print(f"| {name} | {peak:.0f} | {peak - floor:+.0f} | {floor / peak:.2f}x | {seconds:.1f} |")
            one = " ".join(a for a in args[1:] if not a.startswith(tmp))
            measured.append(
                Measurement(
                    f"`{name}` peak memory, {label}",
                    f"bindscope {one}",
                    f"{BASELINE}: the interpreter, numpy, pandas and the bare array",
                    "MB",
                    peak,
                    floor,
                    checks=f"data {data:.1f} MB per array; {peak - floor:+.0f} MB over the floor",
                )
            )
    return measured


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(DEFAULT_SIZES),
        help=f"comma-separated subset of {','.join(SIZES)} (default clevr,10k)",
    )
    parser.add_argument(
        "--analyses", default=",".join(ANALYSES), help="comma-separated analyses to measure (default all)"
    )
    parser.add_argument("--dim", type=int, default=384, help="embedding width (default 384, as all-MiniLM-L6-v2)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    args.analyses = [a.strip() for a in args.analyses.split(",") if a.strip()]
    if not args.sizes or any(s not in SIZES for s in args.sizes):
        parser.error(f"--sizes takes a comma-separated subset of {','.join(SIZES)}")
    if any(a not in ANALYSES for a in args.analyses):
        parser.error(f"--analyses takes a comma-separated subset of {','.join(ANALYSES)}")
    if args.dim < 1:
        parser.error("--dim must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    measured = [m for size in args.sizes for m in run_size(size, args.dim, args.analyses)]
    print(f"\nwrote {write_results(__file__, measured, args.csv, argv=argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
