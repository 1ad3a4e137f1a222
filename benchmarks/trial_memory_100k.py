"""Peak memory of ``embeddings import``, ``probe`` and ``decompose`` on 100,000 scenes, as a multiple of the array.

What is measured
----------------
A dataset of ``--scenes`` two-object text scenes (default 100,000, sampled from 20 attributes x 20 nouns)
and a float32 array of ``--scenes x --dim`` (default 384, the width of all-MiniLM-L6-v2) saved as ``.npy``.
Each command runs as a process of its own through the real CLI; its peak resident memory (``ru_maxrss``
from ``wait4``, which covers the processes it waited for) is measured at a tenth of ``--scenes`` and at
``--scenes``, and beside it ``numpy.load`` of the array alone, the same way.

The figure is the marginal multiple ``(peak at N - peak at N/10) / (array at N - array at N/10)``: how many
bytes a command holds per byte of array it is given, free of what every process holds before it reads
anything (the interpreter and its libraries; torch alone is several hundred MiB). ``numpy.load`` is 1x by
construction. Probes and decompositions fit with ``--optimizer`` (default ``lbfgs``, the quickest; the
default ``regularised`` optimiser's cross-validation takes many minutes at this size on a CPU).

The script prints a markdown table and exits 1 when a command's multiple exceeds ``--bound`` (default
12), 2 when a command fails. All files go to temporary folders that are removed afterwards.

Run it from the repository root (about 7 minutes on 2 cores)::

    .venv/bin/python benchmarks/trial_memory_100k.py [--scenes N] [--dim D] [--bound X] [--optimizer NAME]
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

BINDSCOPE = Path(sys.executable).with_name("bindscope")
EXIT_OK, EXIT_OVER, EXIT_FAILED = 0, 1, 2


def space_yaml(scenes: int) -> str:
    """A custom concept space of 20 attributes x 20 nouns with ``scenes`` sampled two-object scenes."""
    attributes = [f"a{i}" for i in range(20)]
    nouns = [f"n{i}" for i in range(20)]
    return "\n".join(
        [
            "name: memory_trial",
            "description: two-object text scenes for the memory trial",
            "concepts:",
            f"  attribute: [{', '.join(attributes)}]",
            f"  noun: [{', '.join(nouns)}]",
            "objects_per_scene: 2",
            "scenes:",
            "  mode: sample",
            f"  num_scenes: {scenes}",
            "  seed: 0",
            "  allow_identical: false",
            "  include_single_objects: false",
            "caption:",
            '  object: "a {attribute} {noun}"',
            '  joiner: " and "',
            "noun: noun",
            "modalities: [text]",
            "",
        ]
    )


def peak_rss(args: list[str], env: dict[str, str]) -> tuple[int, float]:
    """Run ``args``; its peak resident memory in bytes (itself and what it waited for) and its wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        assert proc.stderr is not None
        print(f"{' '.join(args)} failed:\n{proc.stderr.read().decode(errors='replace')}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED)
    return usage.ru_maxrss * 1024, elapsed  # ru_maxrss is in KiB on Linux


def commands(root: Path, array: Path, optimizer: str) -> list[tuple[str, list[str]]]:
    """The measured commands on the dataset ``root/data`` and ``array``, in order (each needs the one before)."""
    bs, emb = str(BINDSCOPE), str(root / "emb")
    return [
        ("numpy: `numpy.load` of the array", [sys.executable, "-c", f"import numpy; numpy.load({str(array)!r})"]),
        ("`embeddings import`", [bs, "embeddings", "import", str(root / "data"), str(array), "--name", "x",
                                 "--modality", "text", "--out", emb]),
        (f"`probe --seeds 0 --optimizer {optimizer}`", [bs, "probe", emb, "--seeds", "0", "--optimizer", optimizer,
                                                        "--out", str(root / "probe"), "-q"]),
        (f"`decompose --seeds 0 --optimizer {optimizer}`", [bs, "decompose", emb, "--seeds", "0", "--optimizer",
                                                            optimizer, "--out", str(root / "dec"), "-q"]),
    ]  # fmt: skip


def measure(scenes: int, dim: int, optimizer: str) -> tuple[int, list[tuple[str, int, float]]]:
    """The array's size in bytes and each command's (name, peak bytes, seconds) at ``scenes`` x ``dim``."""
    with tempfile.TemporaryDirectory(prefix="bindscope-memory-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "HOME": tmp, "XDG_CACHE_HOME": str(root / "cache"), "TMPDIR": tmp}
        env["MPLCONFIGDIR"] = str(root / "mpl")
        (root / "space.yaml").write_text(space_yaml(scenes))
        build = [str(BINDSCOPE), "dataset", "build", str(root / "space.yaml"), "--out", str(root / "data"), "-q"]
        subprocess.run(build, env=env, check=True, stdout=subprocess.DEVNULL)
        array = root / "x.npy"
        np.save(array, np.random.default_rng(0).standard_normal((scenes, dim), dtype=np.float32))
        return array.stat().st_size, [(name, *peak_rss(args, env)) for name, args in commands(root, array, optimizer)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--bound", type=float, default=12.0, help="the largest marginal multiple of the array")
    parser.add_argument("--optimizer", default="lbfgs", help="the probes' optimizer (default lbfgs: the quickest)")
    opts = parser.parse_args()
    small_scenes = opts.scenes // 10
    small, at_small = measure(small_scenes, opts.dim, opts.optimizer)
    large, at_large = measure(opts.scenes, opts.dim, opts.optimizer)
    mib = 2**20
    print(f"{small_scenes:,} and {opts.scenes:,} scenes x {opts.dim} float32: the arrays are "
          f"{small / mib:,.1f} and {large / mib:,.1f} MiB\n")  # fmt: skip
    print(f"| command | peak at {small_scenes:,} | peak at {opts.scenes:,} | marginal multiple of the array | "
          f"wall at {opts.scenes:,} |")  # fmt: skip
    print("|---|---|---|---|---|")
    worst = 0.0
    for (name, peak_small, _), (_, peak_large, elapsed) in zip(at_small, at_large):
        multiple = (peak_large - peak_small) / (large - small)
        if name.startswith("`"):
            worst = max(worst, multiple)
        print(f"| {name} | {peak_small / mib:,.0f} MiB | {peak_large / mib:,.0f} MiB | {multiple:.2f}x | "
              f"{elapsed:.1f} s |")  # fmt: skip
    print(f"\nworst command: {worst:.2f}x the array per added byte (bound {opts.bound:g}x)")
    return EXIT_OK if worst <= opts.bound else EXIT_OVER


if __name__ == "__main__":
    sys.exit(main())
