"""Dataset folder -> rendered PNGs: every scene, and every object alone at every slot position.

A relation space's ``place`` and a count space's ``count`` concepts are drawn too (the renderer puts an object
at its place's position, or draws it as that many copies): an object alone is drawn at its place, or as its
copies in the slot's cell.

Images are written one file at a time, each atomically (a temporary file renamed into place),
by worker processes; a file that exists is complete, so re-running renders only what is
missing. Once every file exists the caller records the paths (``datasets.attach_images``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.faults import kill_point
from bindscope.core.io import atomic_file
from bindscope.core.processes import spawn_pool, submit_all
from bindscope.core.progress import progress_bar
from bindscope.data.presets import Preset
from bindscope.data.render import RENDERERS, get_renderer
from bindscope.data.render.base import MAX_COPIES, PALETTE, PLACES, SceneBatch
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet
from bindscope.space.families import COUNT, PLACE


class Dataset(Protocol):
    """What rendering reads of a dataset folder (:class:`bindscope.data.datasets.Dataset` has it; datasets
    calls this module, so the dataset is described here rather than imported)."""

    @property
    def root(self) -> Path: ...
    @property
    def preset(self) -> Preset: ...
    @property
    def scenes(self) -> SceneSet: ...
    @property
    def space(self) -> ConceptSpace: ...


MATERIALS = {"rubber": 0, "matte": 0, "metal": 1, "shiny": 1}
SIZES = {"tiny": 0.55, "small": 0.7, "medium": 0.85, "large": 1.0}
CHUNK = 32


@dataclass(frozen=True)
class ImageJob:
    """What to render: one SceneBatch row per file, and the files (relative to the dataset)."""

    batch: SceneBatch
    paths: list[str]


def renders_images(ds: Dataset) -> bool:
    """Whether the dataset's preset names a renderer of this package (not e.g. ``import``)."""
    return ds.preset.config.renderer in RENDERERS and "image" in ds.preset.config.modalities


def scene_batch(
    scenes: SceneSet,
    shapes: tuple[str, ...],
    keys: np.ndarray,
    slots: np.ndarray | None = None,
    num_slots: int | None = None,
) -> SceneBatch:
    """Map a scene set's color / shape (and optional material / size / place / count) values to renderer arrays."""
    space = scenes.space
    arr = scenes.scenes
    present = arr[:, :, 0] != PAD
    color_rgb = _lookup(
        space,
        "color",
        {c: np.asarray(rgb) / 255.0 for c, rgb in PALETTE.items()},
        "a named color of the palette (bindscope.data.render.PALETTE)",
    )
    shape_code = _lookup(space, "shape", {s: i for i, s in enumerate(shapes)}, f"one of {', '.join(shapes)}")
    c, s = space.concept_index("color"), space.concept_index("shape")
    colors = np.zeros((*arr.shape[:2], 3), dtype=np.float32)
    colors[present] = np.stack(color_rgb)[arr[present][:, c]]
    codes = np.where(present, np.asarray(shape_code)[np.where(present, arr[:, :, s], 0)], -1)
    return SceneBatch(
        colors=colors,
        shapes=codes,
        slots=slots if slots is not None else np.broadcast_to(np.arange(arr.shape[1]), arr.shape[:2]).copy(),
        num_slots=num_slots or arr.shape[1],
        keys=np.asarray(keys, dtype=np.int64),
        materials=_optional(scenes, "material", MATERIALS, present),
        scales=_optional(scenes, "size", SIZES, present),
        places=_codes(scenes, PLACE, {p: i for i, p in enumerate(PLACES)}, present),
        counts=_codes(scenes, COUNT, {str(c): c for c in range(1, MAX_COPIES + 1)}, present),
    )


def _lookup(space: Any, concept: str, table: Mapping[str, Any], what: str) -> list[Any]:
    if concept not in space.concepts:
        raise BindscopeError(f"rendering needs a concept named {concept!r}; this space has {', '.join(space.concepts)}")
    values = space.values[space.concept_index(concept)]
    unknown = [v for v in values if v not in table]
    if unknown:
        raise BindscopeError(f"{concept} value(s) {', '.join(map(repr, unknown))} cannot be drawn; use {what}")
    return [table[v] for v in values]


def _optional(scenes: SceneSet, concept: str, table: Mapping[str, float], present: np.ndarray) -> np.ndarray | None:
    space = scenes.space
    if concept not in space.concepts:
        return None
    mapped = np.asarray(_lookup(space, concept, table, f"one of {', '.join(table)}"), dtype=np.float32)
    idx = scenes.scenes[:, :, space.concept_index(concept)]
    return np.where(present, mapped[np.where(present, idx, 0)], 0).astype(np.float32)


def _codes(scenes: SceneSet, concept: str, table: Mapping[str, int], present: np.ndarray) -> np.ndarray | None:
    """Integer codes of a concept's values per object (0 where a slot is empty), or None without the concept."""
    if concept not in scenes.space.concepts:
        return None
    mapped = np.asarray(_lookup(scenes.space, concept, table, f"one of {', '.join(table)}"), dtype=np.int64)
    idx = scenes.scenes[:, :, scenes.space.concept_index(concept)]
    return np.where(present, mapped[np.where(present, idx, 0)], 0)


def image_jobs(ds: Dataset, shapes: tuple[str, ...], single_objects: bool = True) -> tuple[ImageJob, ImageJob | None]:
    """The scene images and the single-object images (each object alone at each slot position; one with a
    place stands at its place whatever the slot, which then only keys its jitter)."""
    n, k = len(ds.scenes), ds.scenes.max_objects
    scenes = ImageJob(scene_batch(ds.scenes, shapes, np.arange(n)), [f"images/{i:06d}.png" for i in range(n)])
    if not single_objects:
        return scenes, None
    u = ds.space.num_objects
    alone = SceneSet.singles(ds.space, 1).subset(np.repeat(np.arange(u), k))
    slots = np.tile(np.arange(k), u)[:, None]
    singles = ImageJob(
        scene_batch(alone, shapes, n + np.arange(u * k), slots=slots, num_slots=k),
        [f"images/single/{o:04d}_slot{s + 1}.png" for o in range(u) for s in range(k)],
    )
    return scenes, singles


def render_dataset_images(
    ds: Dataset, *, workers: int | None = None, progress: bool = False
) -> tuple[list[str], np.ndarray | None]:
    """Render every missing image of a dataset folder.

    Returns the scene image paths and the ``[objects, positions]`` grid of single-object paths
    (None when the preset has none), relative to the folder, for :func:`attach_images`.
    """
    cfg = ds.preset.config
    name = cfg.renderer
    renderer = get_renderer(name)
    assert name is not None, "get_renderer refuses a preset without a renderer"
    settings = cfg.image.model_dump()
    scenes, singles = image_jobs(ds, renderer.SHAPES, settings.pop("single_objects"))
    jobs = [j for j in (scenes, singles) if j is not None]
    todo = [(job, rows) for job in jobs for rows in _missing_chunks(ds.root, job.paths)]
    total = sum(len(rows) for _, rows in todo)
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    with progress_bar(total, desc="render", unit="image", enabled=progress) as bar:
        _run(todo, ds.root, name, settings, workers, bar.update)
    grid = None if singles is None else np.asarray(singles.paths, dtype=object).reshape(ds.space.num_objects, -1)
    return scenes.paths, grid


def _missing_chunks(root: Path, paths: list[str]) -> list[np.ndarray]:
    missing = np.flatnonzero([not (root / p).is_file() for p in paths])
    return [missing[i : i + CHUNK] for i in range(0, len(missing), CHUNK)]


def _run(
    todo: list[tuple[ImageJob, np.ndarray]],
    root: Path,
    name: str,
    settings: dict,
    workers: int,
    advance: Callable[[int], Any],
) -> None:
    tasks = [(name, _rows(job.batch, rows), [str(root / job.paths[i]) for i in rows], settings) for job, rows in todo]
    if workers == 1:
        for task in tasks:
            advance(render_files(*task))
            kill_point("render-chunk")
        return
    with spawn_pool(workers) as pool:
        for future in as_completed(submit_all(pool, ((render_files, task) for task in tasks))):
            try:
                advance(future.result())
            except BrokenProcessPool:
                raise BindscopeError(
                    "a render worker process died (killed, or out of memory); the images written so far are "
                    "complete: run the same command again to render the rest, with fewer --workers if memory is short"
                ) from None
            kill_point("render-chunk")


def _rows(batch: SceneBatch, rows: np.ndarray) -> SceneBatch:
    take = lambda a: None if a is None else a[rows]  # noqa: E731
    return SceneBatch(
        colors=batch.colors[rows],
        shapes=batch.shapes[rows],
        slots=batch.slots[rows],
        num_slots=batch.num_slots,
        keys=batch.keys[rows],
        materials=take(batch.materials),
        scales=take(batch.scales),
        places=take(batch.places),
        counts=take(batch.counts),
    )


def render_files(name: str, batch: SceneBatch, paths: list[str], settings: dict) -> int:
    """Render one chunk and write each image atomically as PNG; returns how many were written."""
    from PIL import Image

    images = get_renderer(name).render(batch, **settings)
    for image, path in zip(images, paths):
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target, "wb") as fh:
            Image.fromarray(image).save(fh, format="PNG")
    return len(paths)
