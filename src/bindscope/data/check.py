"""Label integrity: do a dataset's names agree with its pixels?

Each image is read back, the renderer's ``identify`` recovers the color and shape in every slot
from the pixels alone (nearest palette color, silhouette features), and the result is compared
with the names the dataset gives that scene. A dataset whose names are permuted relative to its
pixels (the published CLEVR export swaps cylinder and sphere) fails here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.io import load_image
from bindscope.data.datasets import Dataset
from bindscope.data.render import get_renderer
from bindscope.data.render.images import renders_images
from bindscope.space.concepts import PAD

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
    c, s = space.concept_index("color"), space.concept_index("shape")
    colors = np.asarray([*space.values[c], ""], dtype=object)  # index -1 (empty slot) -> ""
    shapes = np.asarray([*space.values[s], ""], dtype=object)
    for start in range(0, len(paths), BATCH):
        part = paths[start : start + BATCH]
        images = np.stack([np.asarray(load_image(ds.root / p)) for p in part])
        got_color, got_shape = renderer.identify(images, values.shape[1])
        want_color = colors[values[start : start + BATCH, :, c]]
        want_shape = shapes[values[start : start + BATCH, :, s]]
        bad = ~((got_color == want_color) & (got_shape == want_shape)).all(axis=1)
        for i in np.flatnonzero(bad):
            report.mismatches.append(
                {
                    "image": str(part[i]),
                    "named": _describe(want_color[i], want_shape[i]),
                    "drawn": _describe(got_color[i], got_shape[i]),
                }
            )
        report.checked += len(part)


def _describe(colors: np.ndarray, shapes: np.ndarray) -> str:
    return " | ".join(f"{c} {s}".strip() or "(empty)" for c, s in zip(colors, shapes))
