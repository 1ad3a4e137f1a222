"""Flat 2-D shapes on a light gray canvas: the ``clevr2d`` renderer.

Layout
------
The canvas is cut into ``num_slots`` equal columns, left to right; slot k's object stands at the
column's centre, halfway down. Every shape is drawn inside a circle of radius
``RADIUS_SHARE * scale * h``, where ``h`` is half the smaller side of a slot column, so it stays
inside its column (no overlap, never off the canvas) at any rotation, for every ``scale`` up to
``MAX_SCALE`` and every jitter.

Relations and counts generalise the columns to **cells** (a centre and a half-size each, :func:`cells`). An
object with a place (``batch.places``) stands in its place's cell: "left of" and "right of" are the left and
right halves' middles, "above" and "below" the top and bottom halves' (square cells, so that jitter moves an
object as far across as along, and a pair stays clearly side by side, or one clearly above the other: at any
jitter the centres are at least ``a + r`` apart along the relation and at most ``a - r`` across it, a the
cell's half-size, r the radius). "in front of" and "behind" need depth: flat2d refuses them. An object with a
count c (``batch.counts``) is drawn as c copies in a 2 x 2 grid of square sub-cells of its cell (1: the
middle; 2: one above the other; 3: two above, one below; 4: all four), each copy sized to its sub-cell and
jittered inside it (in a two-slot scene a copy is about 14% of the image across: :func:`read_back` reads them
right from 128 px).

Jitter (``jitter`` in [0, 1], drawn per scene from ``batch.jitter_rng(seed, row)``) multiplies
the radius by ``1 +- 0.15 * jitter``, turns the shape by up to ``20 * jitter`` degrees and moves
it by up to ``jitter`` times half the free space left in its column, along each axis.

Drawing is exact (no anti-aliasing): a pixel belongs to an object when its centre passes the
shape's analytic inside-test (:func:`_inside`, in float32); it holds the object's color rounded to
8 bits, and every other pixel holds :data:`CANVAS`, so :func:`identify` segments by equality. Each
distinct (shape, radius, turn, sub-pixel offset) makes one stamp (without jitter: one per shape and
slot). A convex shape's stamp is found row by row: the test passes on one run of each row, whose
ends are found exactly (:func:`_spans`), at a cost per row rather than per pixel; the star, not
convex, is tested pixel by pixel. Each object is written through its stamp into a view of the
canvas, which a pool thread fills meanwhile. The same seed gives the same pixels as before these
shortcuts. Materials are ignored.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.threads import shared_pool
from bindscope.data.render import silhouette
from bindscope.data.render.base import (
    COPY_OFFSETS,
    MAX_COPIES,
    PALETTE,
    PLACES,
    Readout,
    SceneBatch,
    cell_readout,
    copies_kept,
    pair_sides,
)

#: Shape names in code order (``batch.shapes`` indexes this tuple).
SHAPES: tuple[str, ...] = ("square", "triangle", "circle", "star", "hexagon", "diamond")

#: Background RGB, light gray. No palette color equals it (the nearest, white (245, 245, 245), is
#: 43 away in RGB), and drawing is exact, so objects segment by inequality to it.
CANVAS: tuple[int, int, int] = (220, 220, 220)

#: Default circumradius as a share of half the smaller side of a slot column.
RADIUS_SHARE = 0.55
#: Largest ``batch.scales`` value: RADIUS_SHARE * MAX_SCALE * (1 + JITTER_SIZE) stays below 0.95.
MAX_SCALE = 1.5
JITTER_SIZE = 0.15
JITTER_DEGREES = 20.0
JITTER_SHIFT = 0.5
MIN_SIDE = 16

# Each shape inside the unit circle, angles in degrees clockwise from +x (y points down):
# ("disc",), ("polygon", edge-normal angles, inradius) for shapes with an incircle (a pixel is
# inside when no edge normal projects it beyond the inradius), or ("star", points, inner vertex
# radius, angle of the first point).
_DIAMOND = (0.6, 1.0)  # half-width, half-height
_DIAMOND_NORMAL = math.degrees(math.atan2(_DIAMOND[0], _DIAMOND[1]))
_FORMS: dict[str, tuple] = {
    "square": ("polygon", (0.0, 90.0, 180.0, 270.0), math.cos(math.pi / 4)),
    "triangle": ("polygon", (90.0, 210.0, 330.0), 0.5),  # apex up
    "circle": ("disc",),
    "star": ("star", 5, 0.45, -90.0),  # a point up
    "hexagon": ("polygon", tuple(60.0 * k for k in range(6)), math.cos(math.pi / 6)),  # a vertex up
    "diamond": (
        "polygon",
        (-_DIAMOND_NORMAL, _DIAMOND_NORMAL, 180.0 - _DIAMOND_NORMAL, 180.0 + _DIAMOND_NORMAL),
        _DIAMOND[0] * _DIAMOND[1] / math.hypot(*_DIAMOND),
    ),
}

#: Places flat2d draws ("in front of" and "behind" need depth: raycast3d draws them).
DRAWN_PLACES: tuple[str, ...] = ("left of", "right of", "above", "below")
_PLACE_CODES = np.array([PLACES.index(p) for p in DRAWN_PLACES])  # left, right, top, bottom

_STAMP_PIXELS = 1 << 18  # stamp pixels per chunk (masks, inside-tests): temporaries stay in cache


def slot_centers(num_slots: int, width: int, height: int) -> np.ndarray:
    """Pixel (x, y) of each slot's object centre without jitter.

    Parameters
    ----------
    num_slots : int
        Number of layout positions.
    width, height : int
        Image size in pixels.

    Returns
    -------
    np.ndarray
        float64 [num_slots, 2]: slot k at ((k + 0.5) * width / num_slots, height / 2).
    """
    width, height = _check_size(width, height)
    if not isinstance(num_slots, (int, np.integer)) or num_slots < 1:
        raise BindscopeError(f"num_slots must be a whole number, at least 1 (got {num_slots})")
    xs = (np.arange(num_slots) + 0.5) * (width / num_slots)
    return np.stack([xs, np.full_like(xs, height / 2)], axis=1)


def cells(num_slots: int, width: int, height: int, *, places: bool = False) -> np.ndarray:
    """Layout cells in pixels: one per slot (the columns), or one per :data:`PLACES` entry.

    Parameters
    ----------
    num_slots : int
        Number of slots (columns).
    width, height : int
        Image size in pixels.
    places : bool
        The place cells instead: left of / right of the left and right halves' middles, above / below the top
        and bottom halves', each square; NaN rows for the places flat2d does not draw.

    Returns
    -------
    np.ndarray
        float64 [num_slots or len(PLACES), 4]: centre x, centre y, half-width, half-height.
    """
    centers = slot_centers(num_slots, width, height)
    if not places:
        half = np.broadcast_to([width / (2 * num_slots), height / 2], centers.shape)
        return np.concatenate([centers, half], axis=1)
    side, up = min(width / 4, height / 2), min(width / 2, height / 4)
    where = {
        "left of": (width / 4, height / 2, side, side),
        "right of": (3 * width / 4, height / 2, side, side),
        "above": (width / 2, height / 4, up, up),
        "below": (width / 2, 3 * height / 4, up, up),
    }
    return np.array([where.get(p, (np.nan,) * 4) for p in PLACES])


def render(batch: SceneBatch, *, width: int = 224, height: int = 224, jitter: float = 0.0, seed: int = 0) -> np.ndarray:
    """Draw a batch of scenes as flat shapes on the canvas.

    Parameters
    ----------
    batch : SceneBatch
        Scenes; ``shapes`` index :data:`SHAPES`, ``colors`` are RGB in 0..1, ``materials`` ignored.
    width, height : int
        Image size in pixels, at least 16 each.
    jitter : float
        0 (exact layout) to 1 (largest position, size and rotation noise).
    seed : int
        Jitter seed, combined with each scene's key.

    Returns
    -------
    np.ndarray
        uint8 [B, height, width, 3].
    """
    width, height = _check_size(width, height)
    jitter = _check_jitter(jitter)
    rows, cols = _check_batch(batch)
    blank = np.empty((height, width, 3), dtype=np.uint8)
    blank[...] = CANVAS
    canvas = np.empty((len(batch), height, width, 3), dtype=np.uint8)
    filled = _fill_soon(canvas, blank)
    try:
        if rows.size:
            if batch.places is None and batch.counts is None:
                cx, cy, radius, turn = _placements(batch, rows, cols, width, height, jitter, seed)
            else:
                rows, cols, cx, cy, radius, turn = _cell_placements(batch, rows, cols, width, height, jitter, seed)
            rgb = np.rint(batch.colors[rows, cols].astype(np.float64) * 255).astype(np.uint8)
            _paint(canvas, filled, rows, batch.shapes[rows, cols], cx, cy, radius, turn, rgb, dedupe=jitter == 0)
    finally:
        filled()
    return canvas


def identify(images: np.ndarray, num_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Recover each slot's color and shape name from the pixels alone.

    Every pixel that differs from :data:`CANVAS` belongs to the object of the nearest slot centre.
    The color is the PALETTE entry nearest to the per-channel median of the object's pixels. The
    shape comes from the silhouette's rotation symmetry: the normalised angular harmonics
    ``|sum z^n| / sum |z|^n`` (z: pixel offset from the centroid as a complex number, n = 2..6)
    are compared with those of the ideal silhouettes (a diamond shows n = 2, a triangle 3, a
    square 4, a star 5, a hexagon 6 alone, a circle none). Reliable for objects at least about
    16 pixels across.

    Parameters
    ----------
    images : np.ndarray
        uint8 [B, H, W, 3] as :func:`render` returns them.
    num_slots : int
        Number of layout positions the images were rendered with.

    Returns
    -------
    colors, shapes : np.ndarray
        object [B, num_slots] of names; "" where a slot holds no object.
    """
    images = _check_images(images, num_slots)
    b, h, w, _ = images.shape
    groups = b * num_slots
    differs = images != np.asarray(CANVAS, dtype=np.uint8)
    img, y, x = np.nonzero(differs[..., 0] | differs[..., 1] | differs[..., 2])
    slot = np.minimum(((x + 0.5) * num_slots / w).astype(np.int64), num_slots - 1)
    group = img * num_slots + slot
    count = np.bincount(group, minlength=groups)
    colors = _median_colors(images[img, y, x], group, count)
    shapes = _silhouette_shapes(x + 0.5, y + 0.5, group, count)
    color_names, shape_names = np.full(groups, "", dtype=object), np.full(groups, "", dtype=object)
    present = count > 0
    color_names[present] = np.asarray(list(PALETTE), dtype=object)[_nearest_palette(colors[present])]
    shape_names[present] = np.asarray(list(_SIGNATURES), dtype=object)[shapes[present]]
    return color_names.reshape(b, num_slots), shape_names.reshape(b, num_slots)


def read_back(images: np.ndarray, num_slots: int, *, places: bool = False, copies: bool = False) -> Readout:
    """Recover each cell's color, shape and (with ``copies`` or ``places``) number of copies from the pixels.

    Without ``places`` or ``copies`` this is :func:`identify`. Otherwise each 8-connected blob of non-canvas
    pixels is one copy, assigned by its centroid to a slot's column or, with ``places``, to its side of the
    image's left/right or above/below pair (:func:`bindscope.data.render.base.pair_sides`). Blobs under
    :data:`~bindscope.data.render.base.COPY_SHARE` of their cell's largest are left out. Color and shape are
    read per blob as
    :func:`identify` reads them per slot; a cell's are those most of its copies' pixels show
    (:func:`bindscope.data.render.base.vote`).

    Parameters
    ----------
    images : np.ndarray
        uint8 [B, H, W, 3] as :func:`render` returns them.
    num_slots : int
        Number of slots the images were rendered with.
    places : bool
        Read cells by place: the result's column p is the object standing at ``PLACES[p]``.
    copies : bool
        Count copies (also counted with ``places``).

    Returns
    -------
    Readout
        [B, num_slots] or [B, len(PLACES)] names and copy counts.
    """
    if not (places or copies):
        return Readout(*identify(images, num_slots))
    images = _check_images(images, num_slots)
    b, h, w, _ = images.shape
    differs = (images != np.asarray(CANVAS, dtype=np.uint8)).any(axis=-1)
    pix, labels = silhouette.components(differs)
    ids, blob, size = np.unique(labels, return_inverse=True, return_counts=True)
    img, y, x = np.unravel_index(pix, differs.shape)
    mx = np.bincount(blob, weights=x + 0.5) / size
    my = np.bincount(blob, weights=y + 0.5) / size
    many = len(PLACES) if places else num_slots
    if places:
        sides = pair_sides(img[ids], mx, my, b, cells(num_slots, w, h, places=True)[_PLACE_CODES, :2])
        where = _PLACE_CODES[sides]
    else:
        where = np.minimum((mx * num_slots / w).astype(np.int64), many - 1)
    group = img[ids] * many + where
    kept = copies_kept(group, size, b * many)
    color = _nearest_palette(_median_colors(images[img, y, x], blob, size))
    shape = _silhouette_shapes(x + 0.5, y + 0.5, blob, size)
    colors = np.asarray(list(PALETTE), dtype=object)[color[kept]]
    shapes = np.asarray(list(_SIGNATURES), dtype=object)[shape[kept]]
    return cell_readout(group[kept], colors, shapes, size[kept], (b, many))


# --------------------------------------------------------------------------- validation


def _check_size(width: int, height: int) -> tuple[int, int]:
    if not all(isinstance(v, (int, np.integer)) and v >= MIN_SIDE for v in (width, height)):
        raise BindscopeError(
            f"width and height must be whole numbers of pixels, at least {MIN_SIDE} (got {width} x {height}); "
            "render larger and downscale if you need smaller images"
        )
    return int(width), int(height)


def _check_jitter(jitter: float) -> float:
    try:
        value = float(jitter)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise BindscopeError(f"jitter must lie in [0, 1] (got {jitter}); use 0 for the exact layout")
    return value


def _check_batch(batch: SceneBatch) -> tuple[np.ndarray, np.ndarray]:
    """Validate the batch; return (row, column) indices of its present objects."""
    shapes = np.asarray(batch.shapes)
    bad = (shapes < -1) | (shapes >= len(SHAPES))
    if bad.any():
        raise BindscopeError(
            f"unknown shape code {int(shapes[bad][0])}: flat2d draws codes 0..{len(SHAPES) - 1} "
            f"({', '.join(SHAPES)}), and -1 marks an empty slot"
        )
    rows, cols = np.nonzero(shapes >= 0)
    colors = np.asarray(batch.colors, dtype=np.float64)[rows, cols]
    if not (np.isfinite(colors).all() and (colors >= 0).all() and (colors <= 1).all()):
        raise BindscopeError("object colors must be RGB values in 0..1 (divide 8-bit colors by 255)")
    if (np.rint(colors * 255) == CANVAS).all(axis=1).any():
        raise BindscopeError(f"an object color equals the canvas color {CANVAS}; pick another color for it")
    if batch.scales is not None:
        scales = np.asarray(batch.scales, dtype=np.float64)[rows, cols]
        if not (np.isfinite(scales).all() and (scales > 0).all() and (scales <= MAX_SCALE).all()):
            raise BindscopeError(f"scales must lie in (0, {MAX_SCALE}] so objects stay inside their slots")
    if batch.places is not None:
        drawn = np.isin(np.asarray(PLACES), DRAWN_PLACES)[np.asarray(batch.places)[rows, cols]]
        if not drawn.all():
            place = PLACES[int(np.asarray(batch.places)[rows, cols][~drawn][0])]
            raise BindscopeError(
                f"flat2d cannot draw the place {place!r} (it needs depth); use {', '.join(DRAWN_PLACES)}, "
                "or the raycast3d renderer for in front of / behind"
            )
    where = np.asarray(batch.slots if batch.places is None else batch.places)[rows, cols]
    many = batch.num_slots if batch.places is None else len(PLACES)
    key = np.unique(rows * many + where, return_counts=True)
    if (key[1] > 1).any():
        row = int(key[0][key[1] > 1][0] // many)
        what = "slot" if batch.places is None else "place"
        raise BindscopeError(f"scene row {row} puts two objects in one {what}; give every object its own {what}")
    return rows, cols


def _check_images(images: np.ndarray, num_slots: int) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise BindscopeError(
            f"images must be uint8 [B, H, W, 3] as render() returns them (got {images.dtype} {images.shape})"
        )
    if not isinstance(num_slots, (int, np.integer)) or not 1 <= num_slots <= images.shape[2]:
        raise BindscopeError(f"num_slots must be a whole number from 1 to the image width (got {num_slots})")
    return images


# --------------------------------------------------------------------------- drawing


def _placements(
    batch: SceneBatch, rows: np.ndarray, cols: np.ndarray, width: int, height: int, jitter: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Centre (x, y), circumradius and extra turn (degrees) of every present object."""
    k = batch.num_slots
    half = np.array([width / (2 * k), height / 2])
    centers = slot_centers(k, width, height)[np.asarray(batch.slots)[rows, cols]]
    scale = np.ones(rows.size) if batch.scales is None else np.asarray(batch.scales, dtype=np.float64)[rows, cols]
    radius = RADIUS_SHARE * half.min() * scale
    if jitter == 0:
        return centers[:, 0], centers[:, 1], radius, np.zeros(rows.size)
    draws = _jitter_draws(batch, seed)[rows, cols]  # [N, 4] in [-1, 1]: dx, dy, size, turn
    radius = radius * (1 + jitter * JITTER_SIZE * draws[:, 2])
    free = half[None, :] - radius[:, None]
    centers = centers + jitter * JITTER_SHIFT * free * draws[:, :2]
    return centers[:, 0], centers[:, 1], radius, jitter * JITTER_DEGREES * draws[:, 3]


def _cell_placements(
    batch: SceneBatch, rows: np.ndarray, cols: np.ndarray, width: int, height: int, jitter: float, seed: int
) -> tuple[np.ndarray, ...]:
    """Rows, columns, centre (x, y), circumradius and turn of every copy of every object placed by cell.

    An object's cell is its place's (``batch.places``) or its slot's; with ``batch.counts`` it becomes one
    square sub-cell per copy (:data:`COPY_OFFSETS`), each copy with its own jitter draws.
    """
    table = cells(batch.num_slots, width, height, places=batch.places is not None)
    where = np.asarray(batch.slots if batch.places is None else batch.places)[rows, cols]
    centers, half = table[where, :2], table[where, 2:]
    if batch.counts is None:
        draws = _jitter_draws(batch, seed)[rows, cols] if jitter else None
    else:
        n = np.asarray(batch.counts)[rows, cols]
        obj = np.repeat(np.arange(rows.size), n)
        copy = np.arange(obj.size) - np.repeat(np.cumsum(n) - n, n)
        offsets = np.zeros((MAX_COPIES + 1, MAX_COPIES, 2))
        for c, at in COPY_OFFSETS.items():
            offsets[c, :c] = at
        quarter = half[obj].min(axis=1, keepdims=True) / 2
        centers = centers[obj] + offsets[n[obj], copy] * quarter
        half = np.broadcast_to(quarter, (obj.size, 2))
        rows, cols = rows[obj], cols[obj]
        draws = _copy_draws(batch, seed)[rows, cols, copy] if jitter else None
    scale = np.ones(rows.size) if batch.scales is None else np.asarray(batch.scales, dtype=np.float64)[rows, cols]
    radius = RADIUS_SHARE * half.min(axis=1) * scale
    turn = np.zeros(rows.size)
    if draws is not None:
        radius = radius * (1 + jitter * JITTER_SIZE * draws[:, 2])
        centers = centers + jitter * JITTER_SHIFT * (half - radius[:, None]) * draws[:, :2]
        turn = jitter * JITTER_DEGREES * draws[:, 3]
    return rows, cols, centers[:, 0], centers[:, 1], radius, turn


def _copy_draws(batch: SceneBatch, seed: int) -> np.ndarray:
    """Uniform [-1, 1] draws [B, K, MAX_COPIES, 4] per scene: dx, dy, size, turn of each copy."""
    return batch.jitter_draws(seed, (batch.shapes.shape[1], MAX_COPIES, 4))


def _jitter_draws(batch: SceneBatch, seed: int) -> np.ndarray:
    """Uniform [-1, 1] draws [B, K, 4] per scene, each from that scene's own generator."""
    return batch.jitter_draws(seed, (batch.shapes.shape[1], 4))


def _paint(
    canvas: np.ndarray,
    filled: Callable[[], None],
    rows: np.ndarray,
    shapes: np.ndarray,
    cx: np.ndarray,
    cy: np.ndarray,
    radius: np.ndarray,
    turn: np.ndarray,
    rgb: np.ndarray,
    *,
    dedupe: bool = True,
) -> None:
    """Write every object's pixels into ``canvas``, object by object, once ``filled()`` returns (the blank images).

    A stamp (an object's inside pixels on a square grid around its centre) depends only on (shape, radius, turn,
    sub-pixel offset of the centre), so with ``dedupe`` identical stamps (every object of a shape and slot without
    jitter) are computed once. Each object is written through its stamp, cut to the stamp's bounding box, into a
    view of its window of the canvas: no per-pixel index arrays.
    """
    _, height, width, _ = canvas.shape
    half = int(np.ceil(radius.max())) + 1
    side = 2 * half + 1
    origin = np.stack([np.floor(cy), np.floor(cx)], axis=1).astype(np.int64) - half  # stamp's top row, left column
    keys = np.stack([shapes, radius, turn, cx - np.floor(cx), cy - np.floor(cy)], axis=1)
    if dedupe:
        unique, which = np.unique(keys, axis=0, return_inverse=True)
        which = which.ravel()
    else:  # with jitter every object's stamp is its own
        unique, which = keys, np.arange(len(keys))
    lo, hi = _spans(unique, half)
    boxes = _span_boxes(lo, hi)
    star = unique[:, 0] == SHAPES.index("star")
    texel = np.dtype((np.void, 3))  # one RGB pixel as one element
    pixels = canvas.reshape(len(canvas), height, width * 3).view(texel)
    values = np.ascontiguousarray(rgb).view(texel)[:, 0]
    column = np.arange(side, dtype=lo.dtype)
    per_chunk = max(1, _STAMP_PIXELS // (side * side))
    filled()
    for first in range(0, rows.size, per_chunk):
        part = slice(first, first + per_chunk)
        stamp = which[part]
        masks = np.empty((stamp.size, side, side), dtype=bool)  # filled in place: no large temporaries
        np.less_equal(lo[stamp][:, :, None], column, out=masks)
        masks &= column < hi[stamp][:, :, None]
        box = boxes[stamp]
        if star[stamp].any():  # not convex: the full inside-test, once per distinct stamp
            drawn = np.flatnonzero(star[stamp])
            needed, local = np.unique(stamp[drawn], return_inverse=True)
            masks[drawn] = _inside(unique[needed], half)[local.ravel()]
            box[drawn] = _mask_boxes(masks[drawn])
        start = np.maximum(origin[part] + box[:, :2], 0)  # on the canvas, cut to it
        stop = np.maximum(np.minimum(origin[part] + box[:, 2:], (height, width)), start)
        window = np.concatenate([start, stop], axis=1)
        cut = window - np.tile(origin[part], 2)
        for mask, row, (y0, x0, y1, x1), (r0, c0, r1, c1), value in zip(
            masks, rows[part].tolist(), window.tolist(), cut.tolist(), values[part]
        ):
            pixels[row, y0:y1, x0:x1][mask[r0:r1, c0:c1]] = value


def _fill_soon(canvas: np.ndarray, blank: np.ndarray) -> Callable[[], None]:
    """Start copying ``blank`` into every image of ``canvas`` on the shared thread pool, and return a function that
    returns once it is done.

    Whole-image copies release the GIL, so the copy runs beside the layout work (jitter, stamps) on a second core.
    When no pool thread has taken it by the time it is needed (a busy pool), the caller copies it itself: it never
    waits on a pool that may be waiting on it.
    """
    task = shared_pool().submit(_fill, canvas, blank)

    @functools.cache
    def done() -> None:
        if task.cancel():
            _fill(canvas, blank)
        else:
            task.result()

    return done


def _fill(canvas: np.ndarray, blank: np.ndarray) -> None:
    """Copy ``blank`` into every image of ``canvas`` (whole-image copies: far faster than broadcasting a 3-vector)."""
    canvas[...] = blank


def _span_boxes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """int [U, 4]: each stamp's bounding box (first row, first column, end row, end column) from its row spans;
    all 0 for a stamp without pixels."""
    side = lo.shape[1]
    full = np.greater(hi, lo)
    top, bottom = full.argmax(axis=1), side - full[:, ::-1].argmax(axis=1)
    left, right = np.where(full, lo, side).min(axis=1), np.where(full, hi, 0).max(axis=1)
    return np.stack([top, left, bottom, right], axis=1).astype(np.int64) * full.any(axis=1)[:, None]


def _mask_boxes(masks: np.ndarray) -> np.ndarray:
    """int [U, 4]: each stamp's bounding box from its mask, as :func:`_span_boxes` gives it."""
    rows, cols = np.any(masks, axis=2), np.any(masks, axis=1)
    side = masks.shape[1]
    left, right = cols.argmax(axis=1), side - cols[:, ::-1].argmax(axis=1)
    lo, hi = np.where(rows, left[:, None], 0), np.where(rows, right[:, None], 0)
    return _span_boxes(lo, hi)


def _spans(keys: np.ndarray, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Each stamp row's inside pixels as one span ``lo <= column < hi`` ([U, side] each, the smallest unsigned
    integers that hold ``side``), for convex shapes; empty rows for stars (not convex: :func:`_inside` tests them).

    Along a stamp row, :func:`_inside`'s test is monotone per polygon edge (and per half of a disc): every
    product and sum is rounded to float32, and rounding never reverses an order. So a row's passing pixels are
    one run, and its ends are found exactly: an analytic guess, checked by the same float32 test at the pixels
    beside it (:func:`_settle`). The cost is per row, not per pixel.
    """
    side = 2 * half + 1
    small = np.min_scalar_type(side)
    lo, hi = np.zeros((len(keys), side), dtype=small), np.zeros((len(keys), side), dtype=small)
    per_chunk = max(1, _STAMP_PIXELS // (side * 8))  # stamps per chunk: (stamp, edge, row) entries stay few
    for code, name in enumerate(SHAPES):
        kind, *form = _FORMS[name]
        if kind == "star":  # not convex: _inside tests it pixel by pixel
            continue
        every = np.flatnonzero(keys[:, 0] == code)
        offsets = np.arange(side) - half + 0.5
        for first in range(0, every.size, per_chunk):
            sel = every[first : first + per_chunk]
            radius = keys[sel, 1, None]
            dx = ((offsets[None, :] - keys[sel, 3, None]) / radius).astype(np.float32)  # the same values as _inside's
            dy = ((offsets[None, :] - keys[sel, 4, None]) / radius).astype(np.float32)
            centre = half - 0.5 + keys[sel, 3]  # the column where dx is 0
            if kind == "disc":
                ends = _disc_spans(dx, dy, radius[:, 0], centre)
            else:
                ux, uy = _directions(keys[sel, 2], form[0])
                ends = _polygon_spans(dx, dy, ux, uy, radius[:, 0], centre, form[1])
            lo[sel], hi[sel] = ends[0], np.maximum(ends[1], ends[0])
    return lo, hi


def _polygon_spans(
    dx: np.ndarray, dy: np.ndarray, ux: np.ndarray, uy: np.ndarray, radius: np.ndarray, centre: np.ndarray, inner: float
) -> tuple[np.ndarray, np.ndarray]:
    """Row spans of polygons ([n, side] each): along a row, an edge's test ``dx * ux + dy * uy <= inner`` passes on
    a prefix of the columns (``ux > 0``) or a suffix; the span is where every edge's passes."""
    n, side = dx.shape
    edges = ux.shape[1]
    table = (dx[:, None, :] * ux[:, :, None]).ravel()  # the column terms of each (stamp, edge), a row each
    across = dy[:, None, :] * uy[:, :, None]  # the row term of each entry [stamp, edge, row]
    flat = across.ravel()
    base = np.repeat(np.arange(0, n * edges * side, side, dtype=np.int32), side)  # each entry's table row
    prefix = np.repeat(ux.ravel() > 0, side)

    def keep(col: np.ndarray, at: np.ndarray | slice) -> np.ndarray:
        return (table[base[at] + col] + flat[at] <= inner) == prefix[at]

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # an edge along the rows: checked anyway
        cross = (inner - across) / ux[:, :, None] * radius.astype(np.float32)[:, None, None]
    cross += centre.astype(np.float32)[:, None, None]
    end = _settle(keep, cross.ravel(), 0, side, side).reshape(across.shape)
    before = prefix.reshape(across.shape)
    return np.where(before, 0, end).max(axis=1), np.where(before, end, side).min(axis=1)


def _disc_spans(
    dx: np.ndarray, dy: np.ndarray, radius: np.ndarray, centre: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row spans of discs ([n, side] each): ``dx * dx + dy * dy <= 1`` passes on a suffix of a row's columns left
    of the centre and a prefix of those right of it."""
    n, side = dx.shape
    table = (dx * dx).ravel()
    rest = (dy * dy).ravel()
    base = np.repeat(np.arange(0, n * side, side), side)
    base = base.astype(np.int32)
    middle = np.repeat((dx < 0).sum(axis=1, dtype=np.int32), side)  # the first column right of the centre
    with np.errstate(invalid="ignore"):  # a row outside the disc: no reach
        reach = np.nan_to_num(np.sqrt(1.0 - rest), nan=-1.0) * np.repeat(radius.astype(np.float32), side)
    mid = np.repeat(centre.astype(np.float32), side)
    ends = []
    for right, cross, start, stop in ((False, mid - reach, 0, middle), (True, mid + reach, middle, side)):

        def keep(col: np.ndarray, at: np.ndarray | slice, right: bool = right) -> np.ndarray:
            return (table[base[at] + col] + rest[at] <= 1.0) == right

        ends.append(_settle(keep, cross, start, stop, side).reshape(n, side))
    return ends[0], ends[1]


def _settle(
    keep: Callable[[np.ndarray, np.ndarray | slice], np.ndarray],
    cross: np.ndarray,
    start: np.ndarray | int,
    stop: np.ndarray | int,
    side: int,
) -> np.ndarray:
    """The exact first column in ``[start, stop]`` of each entry where ``keep`` turns false.

    ``keep(col, at)`` tests entries ``at`` at columns ``col`` (in ``[0, side)``); along each entry's range it holds,
    then fails. ``cross`` is where it turns, analytically: the guess is the first column past it, right when the
    test holds just before it and fails at it; the rare wrong ones (an edge almost along the row, a column on the
    boundary) are found by bisection.
    """
    end = np.fmin(np.fmax(np.floor(cross) + 1, start), stop).astype(np.int32)  # fmax and fmin drop a NaN
    everything = slice(None)
    right = (end == start) | keep(np.maximum(end - 1, 0), everything)
    right &= (end == stop) | ~keep(np.minimum(end, side - 1), everything)
    wrong = np.flatnonzero(~right)
    if wrong.size:
        low, high = (np.broadcast_to(at, end.shape)[wrong] for at in (start, stop))
        while (low < high).any():
            mid = (low + high) // 2
            holds = keep(np.minimum(mid, side - 1), wrong)
            low, high = np.where((low < high) & holds, mid + 1, low), np.where((low < high) & ~holds, mid, high)
        end[wrong] = low
    return end


def _inside(keys: np.ndarray, half: int) -> np.ndarray:
    """bool [U, side, side]: which stamp pixels' centres lie inside each key's shape.

    Coordinates are float32 offsets from the centre in units of the radius; dx is [U, 1, side]
    and dy [U, side, 1], so each full-grid value costs one broadcast operation.
    """
    offsets = np.arange(2 * half + 1) - half + 0.5
    radius = keys[:, 1, None, None]
    dx = ((offsets[None, None, :] - keys[:, 3, None, None]) / radius).astype(np.float32)
    dy = ((offsets[None, :, None] - keys[:, 4, None, None]) / radius).astype(np.float32)
    out = np.zeros((len(keys), 2 * half + 1, 2 * half + 1), dtype=bool)
    for code, name in enumerate(SHAPES):
        sel = np.flatnonzero(keys[:, 0] == code)
        if sel.size == 0:
            continue
        kind, *form = _FORMS[name]
        if kind == "disc":
            out[sel] = dx[sel] * dx[sel] + dy[sel] * dy[sel] <= 1.0
        elif kind == "polygon":
            out[sel] = _max_projection(dx[sel], dy[sel], keys[sel, 2], form[0]) <= form[1]
        else:
            out[sel] = _inside_star(dx[sel], dy[sel], keys[sel, 2], *form)
    return out


def _max_projection(dx: np.ndarray, dy: np.ndarray, turn: np.ndarray, angles: tuple[float, ...]) -> np.ndarray:
    """Largest projection of each pixel on the unit directions ``angles + turn`` (degrees)."""
    ux, uy = _directions(turn, angles)
    ux, uy = ux[:, :, None, None], uy[:, :, None, None]
    best = dx * ux[:, 0] + dy * uy[:, 0]
    for p in range(1, len(angles)):
        np.maximum(best, dx * ux[:, p] + dy * uy[:, p], out=best)
    return best


def _directions(turn: np.ndarray, angles: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """float32 [U, len(angles)] cosines and sines of the directions ``angles + turn`` (degrees)."""
    rad = np.deg2rad(np.asarray(angles)[None, :] + turn[:, None]).ravel()
    # scalar libm per direction: the same bits whatever the batch (no SIMD lane/tail split)
    ux = np.array([math.cos(a) for a in rad.tolist()], dtype=np.float32).reshape(-1, len(angles))
    uy = np.array([math.sin(a) for a in rad.tolist()], dtype=np.float32).reshape(-1, len(angles))
    return ux, uy


def _inside_star(
    dx: np.ndarray, dy: np.ndarray, turn: np.ndarray, points: int, inner: float, first: float
) -> np.ndarray:
    """Inside-test of a star polygon with its points on the unit circle.

    The projection on the nearest point's direction is the pixel's ``along`` coordinate in that
    point's sector, ``across`` its distance from that axis; the pixel is inside when it lies on
    the centre's side of the edge from the point (1, 0) to the next inner vertex (qx, qy):
    ``across <= slope * (1 - along)``, squared here to avoid a square root.
    """
    along = _max_projection(dx, dy, turn, tuple(first + 360.0 / points * k for k in range(points)))
    qx, qy = inner * math.cos(math.pi / points), inner * math.sin(math.pi / points)
    slope2 = np.float32((qy / (1.0 - qx)) ** 2)
    rest = 1.0 - along
    return (rest >= 0) & (dx * dx + dy * dy - along * along <= slope2 * rest * rest)


# --------------------------------------------------------------------------- identification

# Normalised angular harmonics n = 2..6 of ideal silhouettes (measured on large drawings). They
# are rotation invariant: a silhouette with n-fold symmetry shows only multiples of n.
_SIGNATURES: dict[str, tuple[float, ...]] = {
    "square": (0.00, 0.00, 0.41, 0.00, 0.00),  # 4-fold
    "triangle": (0.00, 0.66, 0.00, 0.00, 0.68),  # 3-fold (and 6)
    "circle": (0.00, 0.00, 0.00, 0.00, 0.00),  # none
    "star": (0.00, 0.00, 0.00, 0.82, 0.00),  # 5 points: 5-fold
    "hexagon": (0.00, 0.00, 0.00, 0.00, 0.23),  # 6-fold, weak
    "diamond": (0.46, 0.00, 0.61, 0.00, 0.63),  # rhombus 0.6 : 1: 2-fold (and 4, 6)
}


def _median_colors(pixels: np.ndarray, group: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per-group, per-channel (lower) median of uint8 pixels [N, 3] -> int [G, 3]."""
    groups = count.size
    out = np.zeros((groups, 3), dtype=np.int64)
    for c in range(3):
        hist = np.bincount(group * 256 + pixels[:, c], minlength=groups * 256).reshape(groups, 256)
        out[:, c] = np.argmax(np.cumsum(hist, axis=1) >= ((count + 1) // 2)[:, None], axis=1)
    return out


def _nearest_palette(rgb: np.ndarray) -> np.ndarray:
    table = np.asarray(list(PALETTE.values()), dtype=np.float64)
    return np.argmin(((rgb[:, None, :] - table[None]) ** 2).sum(-1), axis=1)


def _silhouette_shapes(x: np.ndarray, y: np.ndarray, group: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Index into _SIGNATURES of each group's silhouette (pixel centres x, y)."""
    groups = count.size
    n = np.maximum(count, 1)
    mx = np.bincount(group, weights=x, minlength=groups) / n
    my = np.bincount(group, weights=y, minlength=groups) / n
    dx, dy = x - mx[group], y - my[group]
    z, rho = dx + 1j * dy, np.sqrt(dx * dx + dy * dy)
    moments: list[np.ndarray] = []
    power, size = z * z, rho * rho
    for _ in range(2, 7):
        re = np.bincount(group, weights=power.real, minlength=groups)
        im = np.bincount(group, weights=power.imag, minlength=groups)
        den = np.bincount(group, weights=size, minlength=groups)
        moments.append(np.hypot(re, im) / np.maximum(den, 1e-12))
        power, size = power * z, size * rho
    features = np.stack(moments, axis=1)
    table = np.asarray(list(_SIGNATURES.values()))
    return np.argmin(((features[:, None, :] - table[None]) ** 2).sum(-1), axis=1)
