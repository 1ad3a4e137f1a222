"""A grid of a dataset's images with their captions (like the paper's dataset figure)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file, load_image
from bindscope.core.locks import writes
from bindscope.core.validation import check_seed
from bindscope.data.datasets import Dataset, single_object_captions

#: The most rows or columns of a preview grid (1,024 images at most; each is drawn at 260 x 290 pixels).
MAX_GRID = 32


@writes("out", what="preview image", reads=("ds",))
def preview_grid(
    ds: Dataset, out: str | Path, *, rows: int = 4, cols: int = 4, seed: int = 0, singles: bool = False
) -> Path:
    """Draw ``rows x cols`` images picked with ``seed`` (scenes, or single objects) with captions as PNG."""
    from bindscope.core.figures import pyplot

    plt = pyplot()
    check_grid(rows, cols, seed)
    paths, captions = _items(ds, singles)
    pick = np.sort(np.random.default_rng(seed).choice(len(paths), size=min(rows * cols, len(paths)), replace=False))
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, i in zip(axes.ravel(), pick):
        ax.imshow(np.asarray(load_image(ds.root / paths[i])))
        ax.set_title(_wrap(captions[i]), fontsize=8)
    fig.suptitle(
        f"{ds.name}: {len(pick)} of {len(paths):,} {'single-object images' if singles else 'scenes'}", fontsize=10
    )
    fig.tight_layout()
    out = Path(out)
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    return out


def check_grid(rows: int, cols: int, seed: int) -> None:
    """Refuse a grid outside 1..:data:`MAX_GRID` rows and columns, or a seed that is not one."""
    if rows < 1 or cols < 1:
        raise BindscopeError(f"--rows and --cols must be at least 1, got {rows} x {cols}")
    if rows > MAX_GRID or cols > MAX_GRID:
        raise BindscopeError(f"--rows and --cols must be at most {MAX_GRID}, got {rows} x {cols}")
    check_seed(seed, "--seed")


def _items(ds: Dataset, singles: bool) -> tuple[np.ndarray, list[str]]:
    if singles:
        if ds.single_images is None:
            raise BindscopeError(f"dataset {ds.root} has no single-object images; build it with images")
        positions = ds.single_images.shape[1]
        captions = [f"{c} (slot {s + 1})" for c in single_object_captions(ds) for s in range(positions)]
        return ds.single_images.ravel(), captions
    if not all(ds.images):
        raise BindscopeError(
            f"dataset {ds.root} has no images to preview; build it with images "
            "(`bindscope dataset build` without --no-images)"
        )
    return ds.images, [f"#{i}: {c}" for i, c in enumerate(ds.captions)]


def _wrap(text: str, width: int = 34) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])
