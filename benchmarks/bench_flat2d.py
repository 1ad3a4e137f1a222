"""Benchmark the flat 2-D renderer (``bindscope.data.render.flat2d.render``) against a PIL drawing loop.

What is timed
-------------
ours
    One call of ``flat2d.render`` on the 576 clevr2d scenes (8 CLEVR colors x square / triangle /
    circle, all ordered pairs, 2 slots) at 224 x 224 px: the whole uint8 [576, 224, 224, 3]
    batch, with no jitter (identical stamps are computed once) and with jitter ``--jitter``
    (every object gets its own stamp). Best of ``--repeats`` runs after a warm-up.
baseline
    What one writes by hand: for each scene, ``PIL.Image.new`` on the canvas color, one
    ``ImageDraw.polygon`` (the same vertices) or ``ImageDraw.ellipse`` per object,
    and ``np.asarray`` into the output batch. No jitter. Best of ``--repeats`` runs.

Both produce the same layout; PIL rasterises edges by its own rule, so a few edge pixels differ:
the output reports the share of identical pixels, and runs ``flat2d.identify`` on the baseline's
images too (an independent rasteriser: identify must not depend on our drawing code).
Target: ours >= 1,000 images/s on 2 cores.

Run from the repository root::

    .venv/bin/python benchmarks/bench_flat2d.py [--repeats 3] [--jitter 0.3] [--csv PATH]

The figures go to ``benchmarks/results/bench_flat2d.csv`` (or ``--csv``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw
from record import Measurement, add_csv_argument, write_results

from bindscope.data.render import flat2d
from bindscope.data.render.base import PALETTE, SceneBatch

CLEVR_COLORS = ("blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow")
CLEVR2D_SHAPES = ("square", "triangle", "circle")
SIZE = 224
TARGET = 1_000.0


def clevr2d_batch() -> tuple[SceneBatch, np.ndarray, np.ndarray]:
    """The 576 scenes, and their color and shape names [576, 2]."""
    objects = [(c, s) for c in CLEVR_COLORS for s in CLEVR2D_SHAPES]
    pairs = [(a, b) for a in objects for b in objects]
    colors = np.array([[PALETTE[a[0]], PALETTE[b[0]]] for a, b in pairs], dtype=np.float32) / 255
    shapes = np.array([[flat2d.SHAPES.index(a[1]), flat2d.SHAPES.index(b[1])] for a, b in pairs])
    batch = SceneBatch(
        colors=colors, shapes=shapes, slots=np.tile([0, 1], (len(pairs), 1)), num_slots=2, keys=np.arange(len(pairs))
    )
    names = np.array([[a[0], b[0]] for a, b in pairs], dtype=object)
    return batch, names, np.array([[a[1], b[1]] for a, b in pairs], dtype=object)


# Vertices on the unit circle of the clevr2d polygons (degrees clockwise from +x, y down), as flat2d draws them.
VERTEX_ANGLES = {"square": (-45.0, 45.0, 135.0, 225.0), "triangle": (-90.0, 30.0, 150.0)}


def polygon(name: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    """A shape's polygon in PIL's coordinates (pixel centres at integers)."""
    return [
        (cx - 0.5 + r * math.cos(math.radians(a)), cy - 0.5 + r * math.sin(math.radians(a)))
        for a in VERTEX_ANGLES[name]
    ]


def baseline(batch: SceneBatch) -> np.ndarray:
    """A per-image PIL ImageDraw loop drawing the same layout without jitter."""
    centers = flat2d.slot_centers(batch.num_slots, SIZE, SIZE)
    r = flat2d.RADIUS_SHARE * min(SIZE / (2 * batch.num_slots), SIZE / 2)
    out = np.empty((len(batch), SIZE, SIZE, 3), dtype=np.uint8)
    for i in range(len(batch)):
        image = Image.new("RGB", (SIZE, SIZE), flat2d.CANVAS)
        draw = ImageDraw.Draw(image)
        for k in range(batch.shapes.shape[1]):
            name = flat2d.SHAPES[batch.shapes[i, k]]
            fill = tuple(int(round(v * 255)) for v in batch.colors[i, k])
            cx, cy = centers[batch.slots[i, k]]
            if name == "circle":
                draw.ellipse([cx - 0.5 - r, cy - 0.5 - r, cx - 0.5 + r, cy - 0.5 + r], fill=fill)
            else:
                draw.polygon(polygon(name, cx, cy, r), fill=fill)
        out[i] = np.asarray(image)
    return out


def best_time(fn, repeats: int) -> tuple[float, np.ndarray]:
    fn()  # warm-up
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side; the best counts (default 3)")
    parser.add_argument("--jitter", type=float, default=0.3, help="jitter of the second 'ours' row (default 0.3)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    batch, colors, shapes = clevr2d_batch()
    n = len(batch)
    t_ours, ours = best_time(lambda: flat2d.render(batch, width=SIZE, height=SIZE), args.repeats)
    t_jit, _ = best_time(
        lambda: flat2d.render(batch, width=SIZE, height=SIZE, jitter=args.jitter, seed=0), args.repeats
    )
    t_base, base = best_time(lambda: baseline(batch), args.repeats)
    same = float((ours == base).all(-1).mean())
    seen_c, seen_s = flat2d.identify(base, 2)
    base_ok = int(((seen_c == colors) & (seen_s == shapes)).sum())
    rate = n / t_ours
    print(f"flat2d: {n} clevr2d scenes at {SIZE} px, {os.cpu_count()} cpus, best of {args.repeats}")
    print(f"{'ours (no jitter)':28s} {rate:9,.0f} images/s  ({t_ours * 1e3:.0f} ms)")
    print(f"{f'ours (jitter {args.jitter:g})':28s} {n / t_jit:9,.0f} images/s  ({t_jit * 1e3:.0f} ms)")
    print(f"{'baseline (PIL ImageDraw loop)':28s} {n / t_base:9,.0f} images/s  ({t_base * 1e3:.0f} ms)")
    print(f"speed-up  {t_base / t_ours:.1f}x without jitter, {t_base / t_jit:.1f}x with  (baseline time / ours)")
    print(
        f"pixels identical to the baseline: {same:.2%}; "
        f"identify() on the baseline's images: {base_ok}/{2 * n} objects right"
    )
    print(f"target    ours >= {TARGET:,.0f} images/s: {'met' if min(rate, n / t_jit) >= TARGET else 'NOT met'}")
    case = f"clevr2d, {n} scenes at {SIZE} x {SIZE} px"
    baseline_name = "PIL ImageDraw, one image at a time (no jitter)"
    checks = f"pixels identical to the baseline {same:.2%}; identify() on the baseline's images {base_ok}/{2 * n} right"
    target = f"{TARGET:.0f} images/s"
    path = write_results(
        __file__,
        [
            Measurement(
                f"{case}, no jitter", "flat2d.render", baseline_name, "images/s", rate, n / t_base, target, checks
            ),
            Measurement(
                f"{case}, jitter {args.jitter:g}",
                f"flat2d.render, jitter {args.jitter:g}",
                baseline_name,
                "images/s",
                n / t_jit,
                n / t_base,
                target,
                checks,
            ),
        ],
        args.csv,
        argv=argv,
    )
    print(f"wrote {path}")
    return 0 if min(rate, n / t_jit) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
