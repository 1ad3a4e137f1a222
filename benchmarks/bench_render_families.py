"""Benchmark rendering relation and count scenes against the committed renderers on attribute scenes.

What is timed
-------------
committed
    ``render`` of the renderers as committed before relations and counts (``git show 8a9f47f:...``, loaded
    as temporary modules) on two-object attribute scenes: the clevr2d preset's 576 scenes (flat2d) and
    every 6th of the clevr preset's (96 scenes, raycast3d), at ``--size`` px, jitter ``--jitter``.
ours
    The working tree's ``render`` on the same scenes (its images must be byte-identical to the committed
    ones), then on relation scenes (clevr2d-rel and clevr-rel: every 12th of 1,104 scenes) and count scenes
    (clevr2d-count: every 12th of 1,260; raycast3d copies: every 48th of a clevr variant with counts 1-3).
    Each family row is compared with the committed renderer's time per image on the attribute scenes of
    the same renderer: a count scene draws up to 8 objects where an attribute scene draws 2.
read back
    ``identify`` on the attribute images, committed (with the committed ``silhouette`` module: components by
    label propagation) and now (``scipy.ndimage.label``), which must name the same; and ``read_back`` of the
    family images (places or copies: components, per-blob color and shape) against the committed identify.

Best of ``--repeats`` runs after a warm-up, one process (one core). Run from the repository root::

    .venv/bin/python benchmarks/bench_render_families.py [--repeats 3] [--size 224] [--jitter 0.3] [--csv PATH]

The figures go to ``benchmarks/results/bench_render_families.csv`` (or ``--csv``).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.data.render import get_renderer
from bindscope.data.render.base import SceneBatch
from bindscope.data.render.images import _rows, scene_batch
from bindscope.space.concepts import SceneSet
from bindscope.space.families import COUNT, PLACE

COMMIT = "8a9f47f"  # the renderers before relations and counts
ROOT = Path(__file__).resolve().parent.parent


def committed(name: str, folder: Path) -> ModuleType:
    """The renderer module ``name`` as committed at COMMIT, loaded from a temporary file."""
    source = subprocess.run(
        ["git", "show", f"{COMMIT}:src/bindscope/data/render/{name}.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = folder / f"committed_{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"committed_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    if hasattr(module, "silhouette"):  # raycast3d reads components with the committed silhouette module too
        module.silhouette = committed("silhouette", folder)
    return module


def scenes_of(preset_name: str, step: int, shapes: tuple[str, ...], **changes) -> tuple[SceneBatch, SceneSet]:
    """Every ``step``-th scene of a preset (with ``changes`` to its config) as a SceneBatch, and the scenes."""
    config = {**get_preset(preset_name).config.model_dump(), **changes}
    scenes = preset_from_dict(config, origin=preset_name).build_scenes()
    rows = np.arange(0, len(scenes), step)
    return _rows(scene_batch(scenes, shapes, np.arange(len(scenes))), rows), scenes.subset(rows)


def best_time(fn: Callable[[], np.ndarray], repeats: int) -> tuple[float, np.ndarray]:
    (best, result), *_ = best_times([fn], repeats)
    return best, result


def best_times(fns: list[Callable[[], np.ndarray]], repeats: int) -> list[tuple[float, np.ndarray]]:
    """Best time and result of each function; the functions take turns in every round (after a warm-up
    round), so that a busy spell of the machine weighs on each alike."""
    results = [fn() for fn in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            results[i] = fn()
            times[i].append(time.perf_counter() - start)
    return [(min(t), r) for t, r in zip(times, results)]


def attribute_case(name: str, old: ModuleType, attr: str, step: int, opts: dict, repeats: int) -> dict:
    """Time the committed and the working tree's renderer (and identify) on two-object attribute scenes."""
    new = get_renderer(name)
    batch, _ = scenes_of(attr, step, new.SHAPES)
    (t_old, images_old), (t_new, images_new) = best_times(
        [partial(old.render, batch, **opts), partial(new.render, batch, **opts)], repeats
    )
    (t_id_old, seen_old), (t_id, seen) = best_times(
        [lambda: np.stack(old.identify(images_old, 2)), lambda: np.stack(new.identify(images_new, 2))], repeats
    )
    same = bool(np.array_equal(images_old, images_new)) and bool(np.array_equal(seen_old, seen))
    return {"n": len(batch), "old": t_old, "new": t_new, "identify_old": t_id_old, "identify": t_id, "same": same}


def family_case(name: str, preset: str, step: int, changes: dict, opts: dict, repeats: int) -> dict:
    """Time the working tree's renderer and read_back on relation or count scenes."""
    new = get_renderer(name)
    batch, scenes = scenes_of(preset, step, new.SHAPES, **changes)
    t_render, images = best_time(partial(new.render, batch, **opts), repeats)
    places, copies = PLACE in scenes.space.concepts, COUNT in scenes.space.concepts
    t_read, _ = best_time(partial(new.read_back, images, 2, places=places, copies=copies), repeats)
    drawn = int(batch.counts.sum()) if batch.counts is not None else int((batch.shapes >= 0).sum())
    return {"n": len(batch), "render": t_render, "read": t_read, "drawn": drawn / len(batch), "places": places}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case; the best counts (default 3)")
    parser.add_argument("--size", type=int, default=224, help="image side in px (default 224)")
    parser.add_argument("--jitter", type=float, default=0.3, help="jitter of every case (default 0.3)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    opts = {"width": args.size, "height": args.size, "jitter": args.jitter, "seed": 0}
    clevr_counts = {"name": "clevr-count", "counts": [1, 2, 3], "caption": {"object": "{count} {color} {shape}"}}
    cases = {  # renderer -> attribute preset and step, then family scenes (label, preset, step, config changes)
        "flat2d": ("clevr2d", 1, [("clevr2d-rel", "clevr2d-rel", 12, {}), ("clevr2d-count", "clevr2d-count", 12, {})]),
        "raycast3d": ("clevr", 6, [("clevr-rel", "clevr-rel", 12, {}), ("clevr-count", "clevr", 48, clevr_counts)]),
    }
    setting = f"at {args.size} px, jitter {args.jitter:g}"
    rows: list[Measurement] = []
    print(f"render per image {setting}, one process, best of {args.repeats}")
    print(f"{'case':52s} {'ms/image':>9s} {'committed':>10s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (attr, step, families) in cases.items():
            a = attribute_case(name, committed(name, Path(tmp)), attr, step, opts, args.repeats)
            n, base_ms = a["n"], a["old"] / a["n"] * 1e3
            case = f"{attr}, {n} two-object scenes"
            print(f"{f'{case} ({name})':52s} {a['new'] / n * 1e3:9.2f} {base_ms:10.2f} {a['new'] / a['old']:6.2f}")
            id_ms, id_old_ms = a["identify"] / n * 1e3, a["identify_old"] / n * 1e3
            print(f"{'  identify':52s} {id_ms:9.2f} {id_old_ms:10.2f} {id_ms / id_old_ms:6.2f}")
            print(f"{'  images and identify byte-identical to committed':52s} {a['same']!s:>9s}")
            rows.append(
                Measurement(
                    f"{case} {setting}",
                    f"{name}.render (working tree)",
                    f"{name}.render at {COMMIT}",
                    "images/s",
                    n / a["new"],
                    n / a["old"],
                    "ratio about 1 (no slow-down)",
                    f"images and identify's names identical to {COMMIT}: {a['same']}; identify {id_ms:.1f} ms per "
                    f"image ({COMMIT}: {id_old_ms:.1f} ms)",
                )
            )
            for label, preset, fstep, changes in families:
                f = family_case(name, preset, fstep, changes, opts, args.repeats)
                m, ms, read_ms = f["n"], f["render"] / f["n"] * 1e3, f["read"] / f["n"] * 1e3
                what = f"{label}, {m} scenes ({f['drawn']:.1f} objects drawn each)"
                print(f"{what:52s} {ms:9.2f} {base_ms:10.2f} {ms / base_ms:6.2f}")
                reading = "  read_back (committed: identify, attribute)"
                print(f"{reading:52s} {read_ms:9.2f} {id_old_ms:10.2f} {read_ms / id_old_ms:6.2f}")
                rows.append(
                    Measurement(
                        f"{what} {setting}",
                        f"{name}.render (working tree), {'places' if f['places'] else 'counts'}",
                        f"{name}.render at {COMMIT}, {attr} two-object scenes (per image)",
                        "images/s",
                        m / f["render"],
                        n / a["old"],
                        "",
                        f"read_back {read_ms:.1f} ms per image (identify on {attr} at {COMMIT}: {id_old_ms:.1f} ms)",
                    )
                )
    path = write_results(__file__, rows, args.csv, argv=argv)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
