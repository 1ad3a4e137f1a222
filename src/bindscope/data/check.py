"""Label integrity: do a dataset's names agree with its pixels?

Each image is read back, the renderer's ``read_back`` recovers the color and shape in every slot
from the pixels alone (nearest palette color, silhouette features), and the result is compared
with the names the dataset gives that scene. A dataset whose names are permuted relative to its
pixels (the published CLEVR export swaps cylinder and sphere) fails here.

A relation dataset's objects are read by place (which side of the image's pair each stands on), so the
relation is read too; a count dataset's by slot with the number of copies in it. "named red cube left of blue
sphere, drawn blue sphere left of red cube" is a relation that disagrees with its pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.io import load_image
from bindscope.data.datasets import Dataset
from bindscope.data.render import get_renderer
from bindscope.data.render.base import PLACES, Readout
from bindscope.data.render.images import renders_images
from bindscope.space.concepts import PAD
from bindscope.space.families import CONVERSE, COUNT, PLACE

BATCH = 64


@dataclass
class LabelReport:
    """How many images were read back and which disagreed with their names."""

    checked: int = 0
    mismatches: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.checked > 0 and not self.mismatches

    def summary(self) -> str:
        if self.ok:
            return f"labels match pixels: {self.checked:,} of {self.checked:,} images"
        first = self.mismatches[0]
        return (
            f"labels disagree with pixels in {len(self.mismatches):,} of {self.checked:,} images, e.g. "
            f"{first['image']}: named {first['named']}, drawn {first['drawn']}"
        )


def check_labels(ds: Dataset, *, scenes: int | None = None, seed: int = 0) -> LabelReport:
    """Read back every single-object image and ``scenes`` scene images (all when None)."""
    if not renders_images(ds):
        raise BindscopeError(
            f"dataset {ds.root} was not drawn by a bindscope renderer; labels can only be read back "
            "from flat2d or raycast3d images"
        )
    if not all(ds.images):
        raise BindscopeError(f"dataset {ds.root} has no images; build it with images first")
    renderer = get_renderer(ds.preset.config.renderer)
    k = ds.scenes.max_objects
    report = LabelReport()
    if ds.single_images is not None:
        u, positions = ds.single_images.shape
        alone = np.full((u * positions, k, ds.space.num_concepts), PAD, dtype=np.int64)
        alone[np.arange(u * positions), np.tile(np.arange(positions), u)] = np.repeat(
            ds.space.all_objects(), positions, 0
        )
        _compare(ds, renderer, ds.single_images.ravel(), alone, report)
    rows = np.arange(len(ds))
    if scenes is not None and scenes < len(ds):
        rows = np.sort(np.random.default_rng(seed).choice(len(ds), size=scenes, replace=False))
    _compare(ds, renderer, ds.images[rows], ds.scenes.scenes[rows], report)
    return report


def _compare(ds: Dataset, renderer, paths: np.ndarray, values: np.ndarray, report: LabelReport) -> None:
    space = ds.space
    places, copies = PLACE in space.concepts, COUNT in space.concepts
    for start in range(0, len(paths), BATCH):
        part = paths[start : start + BATCH]
        images = np.stack([np.asarray(load_image(ds.root / p)) for p in part])
        got = renderer.read_back(images, values.shape[1], places=places, copies=copies)
        want = _named(space, values[start : start + BATCH], places, copies)
        bad = ~((got.colors == want.colors) & (got.shapes == want.shapes)).all(axis=1)
        if want.counts is not None:
            bad |= ~(got.counts == want.counts).all(axis=1)
        for i in np.flatnonzero(bad):
            subject = _subject(space, values[start + i]) if places else None
            report.mismatches.append(
                {
                    "image": str(part[i]),
                    "named": _describe(want, i, subject, copies),
                    "drawn": _describe(got, i, subject, copies),
                }
            )
        report.checked += len(part)


def _named(space, values: np.ndarray, places: bool, copies: bool) -> Readout:
    """What the names say each cell of each image holds, as ``read_back`` reports it: per slot, or per
    :data:`PLACES` entry when objects have places; copies per cell (one per placed object) where counted."""
    b, k = values.shape[:2]
    present = values[:, :, 0] != PAD
    cell = np.broadcast_to(np.arange(k), (b, k))
    if places:
        codes = np.array([PLACES.index(v) for v in space.values[space.concept_index(PLACE)]])
        cell = codes[np.where(present, values[:, :, space.concept_index(PLACE)], 0)]
    many = len(PLACES) if places else k
    rows, cols = np.nonzero(present)
    out = []
    for concept in ("color", "shape"):
        names = np.asarray(space.values[space.concept_index(concept)], dtype=object)
        table = np.full((b, many), "", dtype=object)
        table[rows, cell[rows, cols]] = names[values[rows, cols, space.concept_index(concept)]]
        out.append(table)
    counts = None
    if places or copies:
        counts = np.zeros((b, many), dtype=np.int64)
        number = np.ones(len(rows), dtype=np.int64)
        if copies:
            levels = np.array([int(v) for v in space.values[space.concept_index(COUNT)]])
            number = levels[values[rows, cols, space.concept_index(COUNT)]]
        counts[rows, cell[rows, cols]] = number
    return Readout(out[0], out[1], counts)


def _subject(space, scene: np.ndarray) -> str:
    """The place of a scene's first object (its subject)."""
    return str(space.values[space.concept_index(PLACE)][scene[0, space.concept_index(PLACE)]])


def _describe(cells: Readout, i: int | np.integer, subject: str | None, copies: bool) -> str:
    """One image's cells in words: "red cube | blue sphere" by slot, "red cube left of blue sphere" for a pair
    standing at converse places (the subject's place first), "red cube (left of)" for others; "x2" with copies."""
    items = []
    for j in range(cells.colors.shape[1]):
        name = f"{cells.colors[i, j]} {cells.shapes[i, j]}".strip()
        if copies and cells.counts is not None and cells.counts[i, j]:
            name = f"{name} x{cells.counts[i, j]}"
        items.append(name)
    if subject is None:
        return " | ".join(name or "(empty)" for name in items)
    held = {PLACES[j]: name for j, name in enumerate(items) if name}
    if len(held) == 2:
        first = subject if subject in held else next(iter(held))
        if CONVERSE[first] in held:
            return f"{held[first]} {first} {held[CONVERSE[first]]}"
    return " | ".join(f"{name} ({place})" for place, name in held.items()) or "(empty)"
