"""Benchmark the raycast3d renderer against a per-pixel Python loop of the same ray casting.

What is timed
-------------
ours
    ``bindscope.data.render.raycast3d.render`` on the 576 clevr scenes (8 CLEVR colors x 3 shapes,
    every ordered pair, two slots: back-left and front-right) at 224x224, rubber, no jitter, all
    in one call (it chunks internally). Best of ``--repeats``.
ours, jitter and metal
    The same with ``jitter=0.3`` and every object metal (cubes turned, different highlights).
identify
    ``raycast3d.identify`` reading the 576 images back (segmentation, components, hull
    features, colors), with the share of scenes whose colors and shapes it recovers exactly.
baseline
    The same ray casting written the straightforward way: for every pixel, a Python loop builds
    the camera ray, intersects the floor and every object (sphere, capped cylinder, slab test for
    the turned cube) with ``math``, takes the nearest hit, computes its normal, casts a shadow
    ray against every object, and shades it (ambient + Lambert + Blinn-Phong). It is run on a
    ``--crop`` x ``--crop`` window around slot 1's object (object, floor and shadow pixels) of
    ``--baseline-scenes`` scenes, and its time per pixel is extrapolated to whole 224x224 images
    (the output says so). Its pixels are compared with ours on the same crop (float64 there,
    float32 here: a few 8-bit levels of difference at most, on a few pixels).

Throughput is images per second; the target is at least 10 images/s at 224 px on 2 cores, i.e.
the 576 scenes in under a minute. numpy runs on one core.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_raycast3d.py [--repeats 3] [--crop 40] [--baseline-scenes 6] [--csv PATH]

The figures go to ``benchmarks/results/bench_raycast3d.csv`` (or ``--csv``); the jitter + metal row
compares with the same baseline figure (the loop is run on rubber objects without jitter only).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.data.presets import CLEVR_COLORS
from bindscope.data.render import raycast3d as r3d
from bindscope.data.render.base import PALETTE, SceneBatch

SIZE = 224


def clevr_scenes(materials: int = 0) -> SceneBatch:
    """The 576 ordered pairs of the 24 CLEVR objects, slot 0 back-left and slot 1 front-right."""
    objects = [(np.asarray(PALETTE[c]) / 255, s) for c in CLEVR_COLORS for s in range(len(r3d.SHAPES))]
    pairs = [(a, b) for a in objects for b in objects]
    colors = np.asarray([[a[0], b[0]] for a, b in pairs], dtype=np.float32)
    shapes = np.asarray([[a[1], b[1]] for a, b in pairs])
    return SceneBatch(
        colors=colors,
        shapes=shapes,
        slots=np.tile([0, 1], (len(pairs), 1)),
        num_slots=2,
        keys=np.arange(len(pairs)),
        materials=np.full(shapes.shape, materials),
    )


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


# ---------------------------------------------------------------------------------------------- baseline


def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _norm(a):
    n = math.sqrt(_dot(a, a))
    return (a[0] / n, a[1] / n, a[2] / n)


def _hit(obj, o, d):
    """Distance to one object (shape, cx, cy, r, cos, sin) along the ray, or inf."""
    shape, cx, cy, r, c, s = obj
    qx, qy, qz = o[0] - cx, o[1] - cy, o[2]
    dx, dy, dz = d
    if shape == 2:  # sphere of radius r resting on the floor
        pz = qz - r
        b = qx * dx + qy * dy + pz * dz
        disc = b * b - (qx * qx + qy * qy + pz * pz - r * r)
        if disc < 0:
            return math.inf
        t = -b - math.sqrt(disc)
        return t if t > 1e-3 else math.inf
    if shape == 1:  # cylinder: side, then the top disc
        best = math.inf
        a = dx * dx + dy * dy
        if a > 0:
            b = qx * dx + qy * dy
            disc = b * b - a * (qx * qx + qy * qy - r * r)
            if disc >= 0:
                t = (-b - math.sqrt(disc)) / a
                if t > 1e-3 and 0 <= qz + t * dz <= 2 * r:
                    best = t
        if dz != 0:
            t = (2 * r - qz) / dz
            x, y = qx + t * dx, qy + t * dy
            if t > 1e-3 and x * x + y * y <= r * r and t < best:
                best = t
        return best
    # cube: slab test in the cube's frame
    qx, qy = c * qx + s * qy, c * qy - s * qx
    dx, dy = c * dx + s * dy, c * dy - s * dx
    h = r / math.sqrt(2)
    near, far = -math.inf, math.inf
    for q, dd, lo, hi in ((qx, dx, -h, h), (qy, dy, -h, h), (qz, dz, 0.0, 2 * h)):
        if dd == 0:
            if not lo <= q <= hi:
                return math.inf
            continue
        t1, t2 = (lo - q) / dd, (hi - q) / dd
        near, far = max(near, min(t1, t2)), min(far, max(t1, t2))
    return near if far >= near and near > 1e-3 else math.inf


def _normal(obj, p):
    shape, cx, cy, r, c, s = obj
    qx, qy, qz = p[0] - cx, p[1] - cy, p[2]
    if shape == 2:
        return (qx / r, qy / r, (qz - r) / r)
    if shape == 1:
        return (0.0, 0.0, 1.0) if qz >= 2 * r - 1e-4 else (qx / r, qy / r, 0.0)
    h = r / math.sqrt(2)
    lx, ly, lz = (c * qx + s * qy) / h, (c * qy - s * qx) / h, qz / h - 1
    if abs(lz) >= abs(lx) and abs(lz) >= abs(ly):
        return (0.0, 0.0, math.copysign(1.0, lz))
    nx, ny = (math.copysign(1.0, lx), 0.0) if abs(lx) >= abs(ly) else (0.0, math.copysign(1.0, ly))
    return (c * nx - s * ny, s * nx + c * ny, 0.0)


def baseline_pixel(cam, objects, colors, materials, i, j):
    """RGB (0..1) of pixel (row i, column j), the straightforward way."""
    x = (j + 0.5 - cam.width / 2) / cam.focal
    y = (cam.height / 2 - i - 0.5) / cam.focal
    d = _norm(tuple(cam.forward[k] + x * cam.right[k] + y * cam.up[k] for k in range(3)))
    o = tuple(cam.position)
    t, hit = (-o[2] / d[2] if d[2] < 0 else math.inf), -1
    for k, obj in enumerate(objects):
        tk = _hit(obj, o, d)
        if tk < t:
            t, hit = tk, k
    if math.isinf(t):
        return (r3d.BACKDROP,) * 3
    p = tuple(o[k] + t * d[k] for k in range(3))
    n = (0.0, 0.0, 1.0) if hit < 0 else _normal(objects[hit], p)
    albedo = (r3d.FLOOR_ALBEDO,) * 3 if hit < 0 else colors[hit]
    to_light = _sub(r3d.LIGHT_POSITION, p)
    dist = math.sqrt(_dot(to_light, to_light))
    l_dir = (to_light[0] / dist, to_light[1] / dist, to_light[2] / dist)
    ndl = _dot(n, l_dir)
    lit = ndl > 0
    if lit:
        start = tuple(p[k] + 1e-3 * n[k] for k in range(3))
        lit = all(_hit(obj, start, l_dir) >= dist for obj in objects)
    shade = r3d.AMBIENT + (r3d.DIFFUSE * ndl if lit else 0.0)
    rgb = [a * shade for a in albedo]
    if hit >= 0:
        kd, ks, power, tint = r3d.MATERIALS[materials[hit]]
        half = _norm(tuple(l_dir[k] + v for k, v in enumerate(_norm(_sub(o, p)))))
        spec = ks * max(_dot(n, half), 0.0) ** (2**power) if lit else 0.0
        rgb = [kd * v + spec * (tint * a + 1 - tint) for v, a in zip(rgb, albedo)]
    return tuple(rgb)


def baseline(batch: SceneBatch, rows: range, crop: int) -> tuple[float, np.ndarray, tuple[int, int]]:
    """Seconds per pixel of the loop on a crop around slot 1's object, and the crop it drew."""
    cam = r3d.camera(SIZE, SIZE)
    objs = r3d.place_objects(batch, 0.0, 0)
    cx, cy = r3d.slot_centers(2, SIZE, SIZE)[1].round().astype(int)
    top, left = max(0, cy - crop // 2), max(0, min(SIZE - crop, cx - crop // 3))
    out = np.zeros((len(rows), crop, crop, 3))
    start = time.perf_counter()
    for n, b in enumerate(rows):
        objects = [
            (
                int(objs.shape[b, k]),
                float(objs.cx[b, k]),
                float(objs.cy[b, k]),
                float(objs.radius[b, k]),
                float(objs.cos[b, k]),
                float(objs.sin[b, k]),
            )
            for k in range(2)
        ]
        colors = [tuple(float(v) for v in objs.color[b, k]) for k in range(2)]
        materials = [int(objs.material[b, k]) for k in range(2)]
        for i in range(crop):
            for j in range(crop):
                out[n, i, j] = baseline_pixel(cam, objects, colors, materials, top + i, left + j)
    seconds = time.perf_counter() - start
    image = np.floor(np.clip(out, 0, 1) * 255 + 0.5).astype(np.uint8)
    return seconds / (len(rows) * crop * crop), image, (top, left)


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crop", type=int, default=40)
    parser.add_argument("--baseline-scenes", type=int, default=6)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()

    batch = clevr_scenes()
    n = len(batch)
    seconds, images = best_time(lambda: r3d.render(batch, width=SIZE, height=SIZE), args.repeats)
    print(f"ours                 : {n} images at {SIZE}x{SIZE} in {seconds:.2f} s = {n / seconds:,.1f} images/s")
    metal = clevr_scenes(materials=1)
    jitter_seconds, _ = best_time(lambda: r3d.render(metal, width=SIZE, height=SIZE, jitter=0.3), args.repeats)
    print(f"ours, jitter + metal : {n} images in {jitter_seconds:.2f} s = {n / jitter_seconds:,.1f} images/s")

    id_seconds, (colors, shapes) = best_time(lambda: r3d.identify(images, 2), 1)
    names = np.asarray(r3d.SHAPES, dtype=object)[batch.shapes]
    want_colors = np.asarray(
        [[c1, c2] for c1 in CLEVR_COLORS for _ in r3d.SHAPES for c2 in CLEVR_COLORS for _ in r3d.SHAPES]
    )
    right = ((colors == want_colors) & (shapes == names)).all(axis=1).mean()
    print(f"identify             : {n / id_seconds:,.1f} images/s, {right:.1%} of scenes read back exactly")

    rows = range(0, n, max(1, n // args.baseline_scenes))[: args.baseline_scenes]
    per_pixel, crop, (top, left) = baseline(batch, rows, args.crop)
    base_rate = 1.0 / (per_pixel * SIZE * SIZE)
    ours_crop = images[list(rows), top : top + args.crop, left : left + args.crop]
    diff = np.abs(ours_crop.astype(int) - crop.astype(int))
    print(
        f"baseline (Python loop): {per_pixel * 1e6:.1f} us per pixel on {len(rows)} crops of {args.crop}x{args.crop} "
        f"pixels, extrapolated to whole {SIZE}x{SIZE} images: {base_rate:.3f} images/s "
        f"({1 / base_rate:.1f} s per image, {n / base_rate / 60:.0f} min for the 576)"
    )
    print(
        f"  crop agreement with ours: {np.mean(diff == 0):.2%} of values identical, largest difference {diff.max()} "
        f"levels ({np.mean(diff.max(axis=-1) > 2):.2%} of pixels differ by more than 2)"
    )
    print(f"ratio ours / baseline: {n / seconds / base_rate:,.0f}x")
    print(f"target >= 10 images/s: {'met' if n / seconds >= 10 else 'NOT met'} ({n / seconds:,.1f})")
    case = f"clevr, {n} scenes at {SIZE} x {SIZE}"
    loop = (
        f"per-pixel Python loop (math), timed on {len(rows)} crops of {args.crop} x {args.crop} around slot 1, "
        f"extrapolated to whole images"
    )
    checks = (
        f"crop values identical to ours {np.mean(diff == 0):.2%}, largest difference {diff.max()} levels; "
        f"identify() reads back {right:.1%} of our scenes"
    )
    path = write_results(
        __file__,
        [
            Measurement(
                f"{case}, rubber, no jitter",
                "raycast3d.render",
                loop,
                "images/s",
                n / seconds,
                base_rate,
                "10 images/s",
                checks,
            ),
            Measurement(
                f"{case}, metal, jitter 0.3",
                "raycast3d.render, jitter 0.3, metal",
                loop + " (rubber, no jitter: not run on metal)",
                "images/s",
                n / jitter_seconds,
                base_rate,
                "10 images/s",
                checks,
            ),
        ],
        args.csv,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
