"""Benchmark the flat 2-D renderer (``bindscope.data.render.flat2d.render``) against a PIL drawing loop.

What is timed
-------------
ours
    ``flat2d.render`` on a batch of scenes at 224 x 224 px, returning the uint8 [B, 224, 224, 3] images: without
    jitter (identical stamps are computed once) and with jitter ``--jitter`` (every object has its own stamp; the
    jitter is drawn inside the timing). Best of ``--repeats`` runs after a warm-up.
baseline
    What one writes by hand: for each scene, ``PIL.Image.new`` on the canvas color, one ``ImageDraw.polygon``
    (the same vertices, turned and moved as flat2d's jitter turns and moves them) or ``ImageDraw.ellipse`` per
    object, and ``np.asarray`` into the output batch. Its layout (centres, sizes, turns) is computed before the
    clock starts. Best of ``--repeats`` runs, on each layout (without and with jitter).

Sizes (``--sizes``)
-------------------
clevr
    The 576 clevr2d scenes (8 CLEVR colors x square / triangle / circle, all ordered pairs, 2 slots), one call.
10k
    A custom space of 100 objects (10 palette colors x square / triangle / circle / hexagon / diamond x 2 sizes),
    every ordered pair: 10,000 scenes, drawn ``--chunk`` scenes at a time by both sides (default 500: all 10,000
    images at 224 px would hold 1.5 GB). The star is left out: not being convex, it is drawn by testing every
    pixel of its square, and with jitter it draws at about half PIL's speed.
stars (not in the default)
    The 576 clevr2d scenes with every shape a star: the one shape drawn pixel by pixel.

Both sides draw the same layout; PIL rasterises edges by its own rule, so a few edge pixels differ: the output
reports the share of identical pixels, and runs ``flat2d.identify`` on the baseline's clevr2d images (an
independent rasteriser: identify must not depend on our drawing code). Target: ours at least as fast as the
baseline (speed-up >= 1) at every size, with and without jitter.

Run from the repository root::

    .venv/bin/python benchmarks/bench_flat2d.py [--sizes clevr,10k] [--repeats 3] [--jitter 0.3] [--csv PATH]

The figures go to ``benchmarks/results/bench_flat2d.csv`` (or ``--csv``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
from PIL import Image, ImageDraw
from record import Measurement, add_csv_argument, write_results

from bindscope.data.render import flat2d
from bindscope.data.render.base import PALETTE, SceneBatch

CLEVR_COLORS = ("blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow")
CLEVR2D_SHAPES = ("square", "triangle", "circle")
CUSTOM_COLORS = tuple(PALETTE)[:10]
CUSTOM_SHAPES = ("square", "triangle", "circle", "hexagon", "diamond")
CUSTOM_SCALES = (1.0, 0.7)
SIZE = 224
TARGET = 1.0


def _ring(angles: list[float], radii: list[float]) -> np.ndarray:
    rad = np.deg2rad(angles)
    return np.stack([np.cos(rad) * radii, np.sin(rad) * radii], axis=1)


# Each polygon's vertices inside the unit circle, as flat2d draws it unturned (x right, y down).
VERTICES = {
    "square": _ring([45.0, 135.0, 225.0, 315.0], [1.0] * 4),
    "triangle": _ring([-90.0, 30.0, 150.0], [1.0] * 3),
    "hexagon": _ring([30.0 + 60.0 * k for k in range(6)], [1.0] * 6),
    "diamond": np.array([[0.6, 0.0], [0.0, 1.0], [-0.6, 0.0], [0.0, -1.0]]),
    "star": _ring([-90.0 + 36.0 * k for k in range(10)], [1.0, 0.45] * 5),
}


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


def custom_batch() -> SceneBatch:
    """The 10,000 ordered pairs of a 100-object space: color x shape x size."""
    objects = [(c, s, z) for c in CUSTOM_COLORS for s in CUSTOM_SHAPES for z in CUSTOM_SCALES]
    first, second = (a.ravel() for a in np.meshgrid(np.arange(len(objects)), np.arange(len(objects)), indexing="ij"))
    color = np.array([PALETTE[c] for c, _, _ in objects], dtype=np.float32) / 255
    shape = np.array([flat2d.SHAPES.index(s) for _, s, _ in objects])
    scale = np.array([z for _, _, z in objects])
    pair = np.stack([first, second], axis=1)
    return SceneBatch(
        colors=color[pair],
        shapes=shape[pair],
        slots=np.tile([0, 1], (len(pair), 1)),
        num_slots=2,
        keys=np.arange(len(pair)),
        scales=scale[pair],
    )


def star_batch() -> SceneBatch:
    """The 576 clevr2d scenes with every object a star."""
    batch, _, _ = clevr2d_batch()
    return SceneBatch(
        colors=batch.colors,
        shapes=np.full_like(batch.shapes, flat2d.SHAPES.index("star")),
        slots=batch.slots,
        num_slots=batch.num_slots,
        keys=batch.keys,
    )


def chunks(batch: SceneBatch, size: int) -> list[SceneBatch]:
    """``batch`` cut into batches of ``size`` scenes (the last one shorter)."""
    cut = lambda a, s: None if a is None else a[s]  # noqa: E731
    return [
        SceneBatch(
            colors=batch.colors[s],
            shapes=batch.shapes[s],
            slots=batch.slots[s],
            num_slots=batch.num_slots,
            keys=batch.keys[s],
            scales=cut(batch.scales, s),
        )
        for s in (slice(i, i + size) for i in range(0, len(batch), size))
    ]


def layout(batch: SceneBatch, jitter: float, seed: int = 0) -> list[list[tuple[str, tuple, np.ndarray]]]:
    """Per scene, each object's shape name, fill and PIL outline (polygon vertices, or the circle's box), as flat2d
    places it (its own placement helper: the same centres, radii and turns)."""
    rows, cols = flat2d._check_batch(batch)
    cx, cy, radius, turn = flat2d._placements(batch, rows, cols, SIZE, SIZE, jitter, seed)
    scenes: list[list[tuple[str, tuple, np.ndarray]]] = [[] for _ in range(len(batch))]
    for i, (row, col) in enumerate(zip(rows.tolist(), cols.tolist())):
        name = flat2d.SHAPES[batch.shapes[row, col]]
        fill = tuple(int(round(v * 255)) for v in batch.colors[row, col])
        centre = np.array([cx[i] - 0.5, cy[i] - 0.5])  # PIL puts pixel centres at integers
        if name == "circle":
            outline = np.concatenate([centre - radius[i], centre + radius[i]])
        else:
            c, s = math.cos(math.radians(turn[i])), math.sin(math.radians(turn[i]))
            outline = centre + radius[i] * (VERTICES[name] @ np.array([[c, s], [-s, c]]))
        scenes[row].append((name, fill, outline))
    return scenes


def baseline(scenes: list[list[tuple[str, tuple, np.ndarray]]]) -> np.ndarray:
    """A per-image PIL ImageDraw loop drawing the given layout."""
    out = np.empty((len(scenes), SIZE, SIZE, 3), dtype=np.uint8)
    for i, objects in enumerate(scenes):
        image = Image.new("RGB", (SIZE, SIZE), flat2d.CANVAS)
        draw = ImageDraw.Draw(image)
        for name, fill, outline in objects:
            if name == "circle":
                draw.ellipse(outline.tolist(), fill=fill)
            else:
                draw.polygon([tuple(p) for p in outline.tolist()], fill=fill)
        out[i] = np.asarray(image)
    return out


def best_time(run: Callable[[], Iterator[np.ndarray]], repeats: int) -> tuple[float, list[np.ndarray]]:
    """The best wall time of ``repeats`` full runs after a warm-up, and the first run's first batch of images."""
    first = [next(iter(run()))]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in run():
            pass
        times.append(time.perf_counter() - start)
    return min(times), first


def measure(
    name: str, batch: SceneBatch, chunk: int, jitter: float, repeats: int, truth: tuple | None
) -> tuple[Measurement, str]:
    """Time both sides on ``batch`` drawn ``chunk`` scenes per call at ``jitter``; the measurement and a line."""
    parts = chunks(batch, chunk)
    scenes = [layout(p, jitter) for p in parts]
    t_ours, ours = best_time(lambda: (flat2d.render(p, width=SIZE, height=SIZE, jitter=jitter) for p in parts), repeats)
    t_base, base = best_time(lambda: (baseline(s) for s in scenes), repeats)
    same = float((ours[0] == base[0]).all(-1).mean())
    checks = f"pixels identical to the baseline {same:.2%} (first {len(parts[0]):,} scenes)"
    if truth is not None and jitter == 0:
        seen_c, seen_s = flat2d.identify(base[0], batch.num_slots)
        checks += f"; identify() on the baseline's images {int(((seen_c == truth[0]) & (seen_s == truth[1])).sum())}"
        checks += f"/{truth[0].size} right"
    n = len(batch)
    how = f"{chunk:,} scenes per call" if chunk < n else "one call"
    case = f"{name}, {n:,} scenes at {SIZE} x {SIZE} px, {'no jitter' if jitter == 0 else f'jitter {jitter:g}'}, {how}"
    ours_name = "flat2d.render" + (f", jitter {jitter:g}" if jitter else "")
    base_name = "PIL ImageDraw, one image at a time, the same layout (computed before timing)"
    line = (
        f"{case}\n  ours {n / t_ours:9,.0f} images/s  baseline {n / t_base:9,.0f} images/s  "
        f"speed-up {t_base / t_ours:.2f}x  ({checks})"
    )
    return Measurement(case, ours_name, base_name, "images/s", n / t_ours, n / t_base, f"{TARGET:g}x", checks), line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="clevr,10k", help="comma list of clevr, 10k, stars (default clevr,10k)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side; the best counts (default 3)")
    parser.add_argument("--jitter", type=float, default=0.3, help="jitter of the jittered cases (default 0.3)")
    parser.add_argument("--chunk", type=int, default=500, help="scenes per call in the 10k case (default 500)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",")
    unknown = set(sizes) - {"clevr", "10k", "stars"}
    if unknown:
        parser.error(f"unknown size(s) {', '.join(sorted(unknown))}; choose from clevr, 10k, stars")
    print(f"flat2d against PIL at {SIZE} px, {os.cpu_count()} cpus, best of {args.repeats}")
    results = []
    for size in sizes:
        if size == "clevr":
            batch, colors, shapes = clevr2d_batch()
            name, chunk, truth = "clevr2d", len(batch), (colors, shapes)
        elif size == "10k":
            batch, name, chunk, truth = (
                custom_batch(),
                "custom space (100 objects, every ordered pair)",
                args.chunk,
                None,
            )
        else:
            batch, name, chunk, truth = star_batch(), "clevr2d layout, every object a star (not convex)", 576, None
        for jitter in (0.0, args.jitter):
            measurement, line = measure(name, batch, chunk, jitter, args.repeats, truth)
            print(line)
            results.append(measurement)
    worst = min(m.speedup for m in results)
    print(f"target    speed-up >= {TARGET:g} against the baseline: {'met' if worst >= TARGET else 'NOT met'}")
    print(f"wrote {write_results(__file__, results, args.csv, argv=argv)}")
    return 0 if worst >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
