"""CLEVR-like 3-D scenes by vectorised ray casting: the ``clevr`` renderer.

Scene
-----
Cubes, cylinders and spheres stand on an infinite gray floor (z = 0, world units, z up). The
camera looks down at the middle of the floor at 30 degrees from 11 units away. Its focal length
makes a fixed view cone (tan of the half-angle :data:`TAN_HALF_VIEW`) fit the shorter side, so
480x320 gets CLEVR's framing (48 degrees across; CLEVR: 49), a square image shows the middle of
it, any aspect keeps its proportions and every object stays in the picture. One point light
(up, to the front-left) casts hard shadows, found by shadow rays, on the floor and on other
objects; an ambient term lights the rest. Shading is Lambert diffuse plus Blinn-Phong specular:
rubber (material 0) is matte with a faint highlight, metal (material 1) has a darker diffuse
part and a strong, color-tinted highlight.

Sizes follow CLEVR: an object of scale 1 is a sphere of radius R, a cylinder of radius R and
height 2R, or a cube of half-side R / sqrt(2); ``batch.scales`` multiplies R (at most
:data:`MAX_SCALE`). R depends on the number of slots.

Layout
------
Slots zig-zag from left to right, even slots at the back and odd slots at the front, so two
slots are back-left (slot 0) and front-right (slot 1) as in the paper's CLEVR images; one slot
is in the middle. :data:`LAYOUTS` holds the floor positions, R and the largest jitter shift for
1..6 slots, chosen (by a search maximising the smallest object) so that no two objects' images
overlap and none leaves the picture, even at the largest jitter and scale: :func:`slot_boxes`
bounds each slot's object in the image, and the tests check the boxes.

Jitter (``jitter`` in [0, 1], drawn per scene and slot from ``batch.jitter_rng(seed, key)``)
moves an object by up to ``jitter * shift`` along each floor axis, shrinks it by up to
``20 * jitter`` percent and turns a cube by up to ``45 * jitter`` degrees about the vertical
(from a default turn of 20 degrees, so that a cube shows two side faces).

Relations and counts
--------------------
An object with a place (``batch.places``) stands at its place's floor position (:data:`PLACE_LAYOUT`):
"left of" and "right of" side by side at one depth, "in front of" and "behind" one behind the other on the
middle line, far enough apart in depth that the front object never hides the back one. Jitter moves an object
by at most :data:`PLACE_LAYOUT`'s shift (0.34) along each floor axis, against 3.8 between the centres of a
left/right pair and 6.6 between front and back, so a pair always stands clearly side by side (or one clearly
in front). "above" and "below" are refused: objects stand on the floor, and stacking one on another would
hide most of the lower one. :func:`read_back` reads every clevr-rel image right from 160 px at any jitter.

An object with a count (``batch.counts``) is drawn as that many smaller copies in a 2 x 2 grid around its
slot's position (:data:`COUNT_LAYOUTS`, for 1 or 2 slots, slots left to right at one depth; the grid's rows are
a depth apart, so that no copy hides another); two slots' copies are read right at 224 px at any jitter.
Places and counts together are refused (flat2d draws both).

Exactness
---------
There is no anti-aliasing: a floor pixel holds one of two neutral grays (lit or in shadow, the
lit one varying smoothly over the floor), and no rubber gray object is lit as brightly as the
floor in shadow, which :func:`identify` uses to segment objects. Scenes are cast in chunks of
about two million ray-object pairs (scenes, and pixel ranges of large images), every per-pixel
operation is elementwise IEEE arithmetic (no transcendental functions, no reductions across
rays), and jitter is drawn per scene, so an image is byte-identical whatever batch it is in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from bindscope.core.errors import BindscopeError
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

#: Shape names in code order (``batch.shapes`` indexes this tuple; the clevr preset's order).
SHAPES: tuple[str, ...] = ("cube", "cylinder", "sphere")
MAX_SLOTS = 6
#: Largest ``batch.scales`` value (1 is CLEVR's large size).
MAX_SCALE = 1.0
MIN_SIDE = 16

# Camera: elevation, distance to the point looked at, and that point.
CAMERA_ELEVATION = math.radians(30.0)
CAMERA_DISTANCE = 11.0
CAMERA_TARGET = (0.0, 0.0, 0.35)
# tan of half the field of view that must fit both across and up/down: at 480x320 the horizontal
# field is then 48.4 degrees (CLEVR's: 49.1); a square image shows the middle of that frame.
TAN_HALF_VIEW = 0.3

# Light: key light position, ambient and diffuse strength, floor albedo. The floor in shadow
# (FLOOR_ALBEDO * AMBIENT) is brighter than any rubber gray object's diffuse shade (at most
# 87/255 * (AMBIENT + DIFFUSE)).
LIGHT_POSITION = (-5.0, -4.0, 9.0)
AMBIENT = 0.5
DIFFUSE = 0.5
FLOOR_ALBEDO = 0.8
BACKDROP = 0.62  # the color of rays that miss the floor (above the horizon)

# Materials: (diffuse factor, specular strength, specular exponent as a power of two, how much of
# the object's own color tints the highlight).
MATERIALS = ((1.0, 0.12, 4, 0.0), (0.7, 0.85, 6, 0.6))

# Jitter: largest shrink of the size and largest turn of a cube.
JITTER_SHRINK = 0.2
JITTER_TURN = math.radians(45.0)
CUBE_YAW = math.radians(20.0)  # default turn of a cube, so that it shows two side faces

_EPS = 1e-3
_CHUNK = 1 << 21  # ray-object pairs per chunk of scenes


@dataclass(frozen=True)
class Layout:
    """Where each slot's object stands: floor positions [K, 2], radius R, largest shift."""

    xy: tuple[tuple[float, float], ...]
    radius: float
    shift: float


#: Layouts for 1..MAX_SLOTS slots.
LAYOUTS: dict[int, Layout] = {
    1: Layout(((0.0, 0.0),), 1.0, 0.5),
    2: Layout(((-1.4, 1.5), (1.4, -0.9)), 0.85, 0.34),
    3: Layout(((-1.75, 4.4), (0.0, -2.4), (1.75, 4.4)), 0.9, 0.22),
    4: Layout(((-1.65, 4.1), (-0.95, -2.1), (1.25, 4.1), (1.35, -2.1)), 0.8, 0.2),
    5: Layout(((-2.6, 3.6), (-1.15, -2.6), (0.0, 3.6), (1.15, -2.6), (2.6, 3.6)), 0.8, 0.2),
    6: Layout(((-2.2, 3.2), (-1.5, -1.2), (-0.2, 3.2), (0.2, -1.2), (1.8, 3.2), (1.9, -1.2)), 0.54, 0.14),
}

#: Places raycast3d draws, in :data:`PLACE_LAYOUT`'s order ("above" and "below" would need stacking).
DRAWN_PLACES: tuple[str, ...] = ("left of", "right of", "behind", "in front of")
#: Floor positions of :data:`DRAWN_PLACES` (left and right at depth 1.5, behind and in front 3.3 from it), the
#: clevr preset's R and shift; chosen like :data:`LAYOUTS` (boxes of a pair apart and inside the picture) and
#: so that identify reads every clevr-rel image right from 160 px at any jitter (the front object nearer the
#: camera, or the back one further, is misread at times).
PLACE_LAYOUT = Layout(((-1.9, 1.5), (1.9, 1.5), (0.0, 4.8), (0.0, -1.8)), 0.85, 0.34)


@dataclass(frozen=True)
class CountLayout:
    """Where the copies of each slot's object stand: around ``xy[k]`` on :data:`COPY_OFFSETS`' grid, ``gap``
    apart (across, in depth; the grid's bottom row in front), each of radius ``radius``, shifted by at most
    ``shift``."""

    xy: tuple[tuple[float, float], ...]
    gap: tuple[float, float]
    radius: float
    shift: float

    def cells(self) -> Layout:
        """One cell per slot and copy position (:data:`COPY_CELLS`), slot-major."""
        gx, gy = self.gap
        xy = tuple((x + ox * gx, y - oy * gy) for x, y in self.xy for ox, oy in COPY_CELLS)
        return Layout(xy, self.radius, self.shift)


#: Layouts of counts for 1 and 2 slots, searched like :data:`LAYOUTS`. Copies of 2 slots are read right at 224 px
#: at any jitter; with 3 slots they would be at most R = 0.3 and misread at 224 px, so 3 are refused.
COUNT_LAYOUTS: dict[int, CountLayout] = {
    1: CountLayout(((0.0, 0.5),), (1.4, 2.2), 0.6, 0.18),
    2: CountLayout(((-1.7, 2.5), (1.7, 2.5)), (1.0, 1.9), 0.45, 0.135),
}
#: The copy positions of COPY_OFFSETS, each once, and per count the position of each copy.
COPY_CELLS: tuple[tuple[float, float], ...] = tuple(dict.fromkeys(o for at in COPY_OFFSETS.values() for o in at))
_ARRANGEMENT = np.zeros((MAX_COPIES + 1, MAX_COPIES), dtype=np.int64)
for _count, _at in COPY_OFFSETS.items():
    _ARRANGEMENT[_count, :_count] = [COPY_CELLS.index(o) for o in _at]
_PLACE_CELL = np.array([DRAWN_PLACES.index(p) if p in DRAWN_PLACES else -1 for p in PLACES])


# ----------------------------------------------------------------------------------------------
# camera


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: position, orthonormal axes (right, up, forward), focal length in pixels."""

    position: np.ndarray
    right: np.ndarray
    up: np.ndarray
    forward: np.ndarray
    focal: float
    width: int
    height: int


@lru_cache(maxsize=8)
def camera(width: int, height: int) -> Camera:
    """The camera for a ``width`` x ``height`` image (the same scene framing at every size)."""
    target = np.asarray(CAMERA_TARGET)
    position = target + CAMERA_DISTANCE * np.array([0.0, -math.cos(CAMERA_ELEVATION), math.sin(CAMERA_ELEVATION)])
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    focal = min(width, height) / (2 * TAN_HALF_VIEW)
    return Camera(position, right, up, forward, float(focal), int(width), int(height))


def _ray_directions(width: int, height: int, pixels: slice) -> np.ndarray:
    """Unit direction of the ray through each pixel centre of a range of pixels (row-major
    indices), float32 [n, 3]; computed elementwise, so the same whatever the range."""
    cam = camera(width, height)
    index = np.arange(pixels.start, pixels.stop)
    x = (index % width + 0.5 - width / 2) / cam.focal
    y = (height / 2 - index // width - 0.5) / cam.focal
    d = cam.forward + x[:, None] * cam.right + y[:, None] * cam.up
    length = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
    return (d / length[:, None]).astype(np.float32)


def project(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pixel (x, y) of world points [..., 3]; pixel j's centre is at x = j."""
    cam = camera(width, height)
    v = np.asarray(points, dtype=np.float64) - cam.position
    depth = v @ cam.forward
    x = width / 2 + cam.focal * (v @ cam.right) / depth - 0.5
    y = height / 2 - cam.focal * (v @ cam.up) / depth - 0.5
    return np.stack([x, y], axis=-1)


def slot_centers(num_slots: int, width: int, height: int) -> np.ndarray:
    """Pixel (x, y) where the middle of each slot's object appears (scale 1, no jitter).

    Parameters
    ----------
    num_slots : int
        Number of layout positions, 1..MAX_SLOTS.
    width, height : int
        Image size in pixels.

    Returns
    -------
    np.ndarray
        float64 [num_slots, 2]: the projection of the point at height R above each slot.
    """
    _check_size(width, height)
    layout = _layout(num_slots)
    xy = np.asarray(layout.xy)
    points = np.concatenate([xy, np.full((len(xy), 1), layout.radius)], axis=1)
    return project(points, width, height)


# ----------------------------------------------------------------------------------------------
# scene arrays


@dataclass(frozen=True)
class Objects:
    """Per scene and column: shape code (-1 empty), base centre, R, cube turn, color, material."""

    shape: np.ndarray  # int [B, K]
    cx: np.ndarray  # float32 [B, K]
    cy: np.ndarray
    radius: np.ndarray
    cos: np.ndarray
    sin: np.ndarray
    color: np.ndarray  # float32 [B, K, 3]
    material: np.ndarray  # int [B, K]

    def rows(self, sl: slice) -> Objects:
        return Objects(*(getattr(self, f)[sl] for f in self.__dataclass_fields__))


def place_objects(batch: SceneBatch, jitter: float, seed: int) -> Objects:
    """Positions, sizes and turns of every object (jitter drawn per scene and slot); with places or counts,
    one column per copy, standing in its cell (:func:`_cells`)."""
    return _place(*_cells(batch), jitter, seed)


def _cells(batch: SceneBatch) -> tuple[SceneBatch, Layout]:
    """The batch with each object (copy) in its own cell, and the layout of the cells.

    Without places and counts: the batch itself and its slots' layout. With places: the slot becomes the
    place's cell of :data:`PLACE_LAYOUT`. With counts: column k becomes MAX_COPIES columns, one per copy (-1
    past the count), in slot k's cells of :data:`COUNT_LAYOUTS`.
    """
    if batch.places is None and batch.counts is None:
        return batch, _layout(batch.num_slots)
    present = batch.shapes >= 0
    if batch.places is not None:
        cell = np.where(present, _PLACE_CELL[np.where(present, batch.places, 0)], 0)
        return replace(batch, slots=cell, num_slots=len(DRAWN_PLACES), places=None), PLACE_LAYOUT
    b, k = batch.shapes.shape
    assert batch.counts is not None, "without places or counts the batch is returned above"
    counts = np.where(present, batch.counts, 0)
    on = np.arange(MAX_COPIES) < counts[..., None]  # [B, K, MAX_COPIES]
    cell = np.asarray(batch.slots)[..., None] * len(COPY_CELLS) + _ARRANGEMENT[counts]
    spread = lambda a: None if a is None else np.repeat(np.asarray(a), MAX_COPIES, axis=1)  # noqa: E731
    copies = SceneBatch(
        colors=np.repeat(np.asarray(batch.colors), MAX_COPIES, axis=1),
        shapes=np.where(on, np.asarray(batch.shapes)[..., None], -1).reshape(b, k * MAX_COPIES),
        slots=np.where(on, cell, 0).reshape(b, k * MAX_COPIES),
        num_slots=batch.num_slots * len(COPY_CELLS),
        keys=batch.keys,
        materials=spread(batch.materials),
        scales=spread(batch.scales),
    )
    return copies, COUNT_LAYOUTS[batch.num_slots].cells()


def _place(batch: SceneBatch, layout: Layout, jitter: float, seed: int) -> Objects:
    b, k = batch.shapes.shape
    present = batch.shapes >= 0
    slots = np.where(present, batch.slots, 0)
    draws = np.zeros((b, batch.num_slots, 5))
    for row in range(b):
        draws[row] = _slot_draws(batch.jitter_rng(seed, row), batch.num_slots, jitter)
    d = draws[np.arange(b)[:, None], slots]  # [B, K, 5]
    xy = np.asarray(layout.xy)[slots] + layout.shift * d[..., :2]
    scale = np.ones((b, k)) if batch.scales is None else np.asarray(batch.scales, dtype=np.float64)
    material = (
        np.zeros((b, k), dtype=np.int64) if batch.materials is None else np.asarray(batch.materials, dtype=np.int64)
    )
    f32 = np.float32
    return Objects(
        shape=np.asarray(batch.shapes, dtype=np.int64),
        cx=xy[..., 0].astype(f32),
        cy=xy[..., 1].astype(f32),
        radius=(layout.radius * scale * d[..., 2]).astype(f32),
        cos=d[..., 3].astype(f32),
        sin=d[..., 4].astype(f32),
        color=np.asarray(batch.colors, dtype=f32),
        material=np.where(present, material, 0),
    )


def _slot_draws(rng: np.random.Generator, num_slots: int, jitter: float) -> np.ndarray:
    """One scene's jitter per slot: shift x, shift y (in units of the layout's shift), size factor,
    cos and sin of the cube's turn; float64 [num_slots, 5]."""
    u = rng.uniform(-1.0, 1.0, size=(num_slots, 4)) * jitter
    yaw = CUBE_YAW + JITTER_TURN * u[:, 3]
    size = 1.0 - JITTER_SHRINK * 0.5 * (u[:, 2] + jitter)
    return np.stack([u[:, 0], u[:, 1], size, np.cos(yaw), np.sin(yaw)], axis=1)


# ----------------------------------------------------------------------------------------------
# ray-object intersection (object frame: base centre at the origin, the cube's turn undone)

_INV_SQRT2 = float(1.0 / math.sqrt(2.0))


def _hit(shape: int, o: np.ndarray, d: np.ndarray, cx, cy, r, c, s) -> np.ndarray:
    """Distance along unit rays ``o + t d`` ([..., 3]) to objects of one shape; inf where missed.

    The object arrays (base centre ``cx, cy``, R, cos and sin of the turn) broadcast against
    ``o[..., 0]``.
    """
    qx, qy, qz = o[..., 0] - cx, o[..., 1] - cy, o[..., 2]
    dx, dy, dz = d[..., 0], d[..., 1], d[..., 2]
    if shape == 0:
        qx, qy = c * qx + s * qy, c * qy - s * qx
        dx, dy = c * dx + s * dy, c * dy - s * dx
    return (_hit_cube, _hit_cylinder, _hit_sphere)[shape](qx, qy, qz, dx, dy, dz, r)


def _hit_sphere(qx, qy, qz, dx, dy, dz, r):
    pz = qz - r
    b = qx * dx + qy * dy + pz * dz
    disc = b * b - (qx * qx + qy * qy + pz * pz - r * r)
    t = -b - np.sqrt(np.maximum(disc, 0))
    return np.where((disc >= 0) & (t > _EPS), t, np.inf)


def _hit_cylinder(qx, qy, qz, dx, dy, dz, r):
    a = dx * dx + dy * dy
    b = qx * dx + qy * dy
    disc = b * b - a * (qx * qx + qy * qy - r * r)
    side = (-b - np.sqrt(np.maximum(disc, 0))) / a
    z = qz + side * dz
    side = np.where((disc >= 0) & (side > _EPS) & (z >= 0) & (z <= 2 * r), side, np.inf)
    top = (2 * r - qz) / dz
    x, y = qx + top * dx, qy + top * dy
    top = np.where((top > _EPS) & (x * x + y * y <= r * r), top, np.inf)
    return np.minimum(side, top)


def _slab(q, d, lo, hi):
    """Entry and exit distances of rays ``q + t d`` through the slab ``lo <= coordinate <= hi``."""
    inv = 1 / d
    t1, t2 = (lo - q) * inv, (hi - q) * inv
    return np.minimum(t1, t2), np.maximum(t1, t2)


def _hit_cube(qx, qy, qz, dx, dy, dz, r):
    a = r * _INV_SQRT2
    near, far = _slab(qx, dx, -a, a)
    for q, d, lo, hi in ((qy, dy, -a, a), (qz, dz, 0, 2 * a)):
        n, f = _slab(q, d, lo, hi)
        near, far = np.maximum(near, n), np.minimum(far, f)
    return np.where((far >= near) & (near > _EPS), near, np.inf)


def _normals(shape, p: np.ndarray, cx, cy, r, c, s) -> np.ndarray:
    """Outward unit normals at surface points ``p`` [N, 3] of objects with these [N] arrays."""
    qx, qy, qz = p[:, 0] - cx, p[:, 1] - cy, p[:, 2]
    n = np.zeros_like(p)
    # sphere
    n[:, 0], n[:, 1], n[:, 2] = qx / r, qy / r, (qz - r) / r
    # cylinder: the top disc or the side
    cyl = shape == 1
    top = cyl & (qz >= 2 * r - 1e-4)
    side = cyl & ~top
    n[cyl] = 0
    n[top, 2] = 1
    n[side, 0], n[side, 1] = qx[side] / r[side], qy[side] / r[side]
    # cube: the face whose axis is furthest out, in the cube's frame, turned back
    cube = shape == 0
    a = r[cube] * _INV_SQRT2
    lx, ly = (c * qx + s * qy)[cube] / a, (c * qy - s * qx)[cube] / a
    lz = qz[cube] / a - 1
    ax, ay, az = np.abs(lx), np.abs(ly), np.abs(lz)
    on_z = (az >= ax) & (az >= ay)
    on_x = ~on_z & (ax >= ay)
    on_y = ~on_z & ~on_x
    nx, ny = np.where(on_x, np.sign(lx), 0), np.where(on_y, np.sign(ly), 0)
    cc, ss = c[cube], s[cube]
    n[cube] = np.stack([cc * nx - ss * ny, ss * nx + cc * ny, np.where(on_z, np.sign(lz), 0)], axis=1)
    return n.astype(np.float32)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _unit(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    length = np.sqrt(_dot(a, a))
    return a / length[..., None], length


# ----------------------------------------------------------------------------------------------
# layout windows


def slot_boxes(num_slots: int, width: int, height: int) -> np.ndarray:
    """Pixel box (x0, y0, x1, y1) that holds each slot's object at any jitter and scale.

    It is the box around the projection of the object's bounding cylinder (radius R, height 2R)
    at the four corners of its shift square; float64 [num_slots, 4], not clipped to the image.
    """
    return _boxes(_layout(num_slots), width, height)


def _boxes(layout: Layout, width: int, height: int) -> np.ndarray:
    """:func:`slot_boxes` of the cells of any layout."""
    r = layout.radius * MAX_SCALE
    angle = np.linspace(0, 2 * np.pi, 65)[:-1]
    outer = r / math.cos(math.pi / 64)  # a 64-gon around the circle, not inside it
    ring = np.stack([outer * np.cos(angle), outer * np.sin(angle)], axis=1)
    corners = np.array([[-1, -1], [-1, 1], [1, -1], [1, 1]]) * layout.shift
    boxes = []
    for x, y in layout.xy:
        foot = (np.asarray([x, y]) + corners[:, None, :] + ring[None]).reshape(-1, 2)
        points = np.concatenate([np.c_[foot, np.zeros(len(foot))], np.c_[foot, np.full(len(foot), 2 * r)]])
        px = project(points, width, height)
        boxes.append([*px.min(axis=0), *px.max(axis=0)])
    return np.asarray(boxes)


@lru_cache(maxsize=16)
def _windows(layout: Layout, width: int, height: int) -> tuple[np.ndarray, ...]:
    """Flat pixel indices inside each cell's box (one pixel of margin, clipped to the image)."""
    out = []
    for x0, y0, x1, y1 in _boxes(layout, width, height):
        xs = np.arange(max(0, math.floor(x0) - 1), min(width, math.ceil(x1) + 2))
        ys = np.arange(max(0, math.floor(y0) - 1), min(height, math.ceil(y1) + 2))
        idx = (ys[:, None] * width + xs[None, :]).ravel()
        idx.flags.writeable = False
        out.append(idx)
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# rendering


def render(batch: SceneBatch, *, width: int = 224, height: int = 224, jitter: float = 0.0, seed: int = 0) -> np.ndarray:
    """Ray-cast a batch of scenes.

    Parameters
    ----------
    batch : SceneBatch
        Colors, shape codes (indices into :data:`SHAPES`, -1 empty), slots, materials, scales.
    width, height : int
        Image size in pixels (at least 16 each).
    jitter : float
        In [0, 1]: how much of the largest position / size / turn jitter to apply (0: exact layout).
    seed : int
        Seed of the jitter (combined with each scene's key).

    Returns
    -------
    np.ndarray
        uint8 [B, height, width, 3].
    """
    _check_size(width, height)
    jitter = _check_jitter(jitter)
    _check_batch(batch)
    batch, layout = _cells(batch)
    objs = _place(batch, layout, jitter, seed)
    b, k = batch.shapes.shape
    pixels = width * height
    out = np.empty((b, pixels, 3), dtype=np.uint8)
    span = min(pixels, max(1024, _CHUNK // max(k, 1)))  # pixels per chunk
    step = max(1, _CHUNK // (span * max(k, 1)))  # scenes per chunk
    slots = np.where(batch.shapes >= 0, batch.slots, -1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for start in range(0, b, step):
            rows = slice(start, start + step)
            for first in range(0, pixels, span):
                cols = slice(first, min(first + span, pixels))
                rgb = _render_chunk(objs.rows(rows), slots[rows], layout, width, height, cols)
                out[rows, cols] = np.floor(np.clip(rgb, 0, 1) * 255 + 0.5).astype(np.uint8)
    return out.reshape(b, height, width, 3)


def _render_chunk(objs: Objects, slots: np.ndarray, layout: Layout, width: int, height: int, cols: slice) -> np.ndarray:
    """float32 [b, n, 3] RGB in 0..1 of a chunk of scenes and a range of pixels (row-major)."""
    dirs = _ray_directions(width, height, cols)
    origin = camera(width, height).position.astype(np.float32)
    windows = [idx[(idx >= cols.start) & (idx < cols.stop)] - cols.start for idx in _windows(layout, width, height)]
    t, which = _primary(objs, slots, windows, dirs, origin)
    points = origin + t[..., None] * dirs
    seen = np.isfinite(t)
    normal, albedo = _surfaces(objs, points, which)
    return _shade(objs, points, normal, albedo, which, seen, origin)


def _primary(
    objs: Objects, slots: np.ndarray, windows: list[np.ndarray], dirs: np.ndarray, origin: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit of every camera ray: distance [b, P] (inf: sky) and column hit (-1: floor)."""
    b = len(slots)
    floor = np.where(dirs[:, 2] < 0, -origin[2] / dirs[:, 2], np.inf).astype(np.float32)
    t = np.broadcast_to(floor, (b, len(dirs))).copy()
    which = np.full((b, len(dirs)), -1, dtype=np.int64)
    for slot, idx in enumerate(windows):
        rows, cols = np.nonzero(slots == slot)
        for code in range(len(SHAPES)):
            pick = objs.shape[rows, cols] == code
            if not pick.any():
                continue
            rb, cb = rows[pick], cols[pick]
            par = [getattr(objs, f)[rb, cb][:, None] for f in ("cx", "cy", "radius", "cos", "sin")]
            tk = _hit(code, origin, dirs[idx][None], *par)
            old = t[rb[:, None], idx[None]]
            nearer = tk < old
            t[rb[:, None], idx[None]] = np.where(nearer, tk, old)
            which[rb[:, None], idx[None]] = np.where(nearer, cb[:, None], which[rb[:, None], idx[None]])
    return t, which


def _surfaces(objs: Objects, points: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normal [b, P, 3] and albedo [b, P, 3] of every visible point (the floor where ``which`` is -1)."""
    normal = np.zeros(points.shape, dtype=np.float32)
    normal[..., 2] = 1
    albedo = np.full(points.shape, FLOOR_ALBEDO, dtype=np.float32)
    rows, pix = np.nonzero(which >= 0)
    cols = which[rows, pix]
    par = [getattr(objs, f)[rows, cols] for f in ("cx", "cy", "radius", "cos", "sin")]
    normal[rows, pix] = _normals(objs.shape[rows, cols], points[rows, pix], *par)
    albedo[rows, pix] = objs.color[rows, cols]
    return normal, albedo


def _shade(
    objs: Objects,
    points: np.ndarray,
    normal: np.ndarray,
    albedo: np.ndarray,
    which: np.ndarray,
    seen: np.ndarray,
    origin: np.ndarray,
) -> np.ndarray:
    """Ambient + shadowed Lambert + Blinn-Phong; the backdrop where nothing was seen."""
    to_light, dist = _unit(np.asarray(LIGHT_POSITION, dtype=np.float32) - points)
    ndl = _dot(normal, to_light)
    lit = seen & (ndl > 0)
    lit &= ~_in_shadow(objs, points + _EPS * normal, to_light, dist, lit)
    view, _ = _unit(origin - points)
    half, _ = _unit(to_light + view)
    spec = np.maximum(_dot(normal, half), 0)
    material = np.full(which.shape, -1)
    rows, pix = np.nonzero(which >= 0)
    material[rows, pix] = objs.material[rows, which[rows, pix]]
    rgb = albedo * (AMBIENT + DIFFUSE * np.where(lit, ndl, 0))[..., None]
    for code, (kd, ks, power, tint) in enumerate(MATERIALS):
        on = material == code
        if not on.any():
            continue
        s = spec[on]
        for _ in range(power):
            s = s * s
        s = np.where(lit[on], ks * s, 0)[:, None]
        rgb[on] = kd * rgb[on] + s * (tint * albedo[on] + (1 - tint))
    rgb[~seen] = BACKDROP
    return rgb


def _in_shadow(
    objs: Objects, start: np.ndarray, to_light: np.ndarray, dist: np.ndarray, test: np.ndarray
) -> np.ndarray:
    """Whether the ray from ``start`` towards the light hits an object first ([b, P] bool)."""
    shadow = np.zeros(test.shape, dtype=bool)
    for col in range(objs.shape.shape[1]):
        code = objs.shape[:, col]
        r = objs.radius[:, col][:, None]
        w = np.stack(
            [objs.cx[:, col][:, None] - start[..., 0], objs.cy[:, col][:, None] - start[..., 1], r - start[..., 2]],
            axis=-1,
        )
        # candidates: rays passing within the bounding sphere (centre R above the base, radius R sqrt 2)
        along = np.maximum(_dot(w, to_light), 0)
        near = test & ~shadow & (code[:, None] >= 0) & (_dot(w, w) - along * along < 2 * r * r)
        rows, pix = np.nonzero(near)
        for shape in range(len(SHAPES)):
            pick = code[rows] == shape
            if not pick.any():
                continue
            rb, pb = rows[pick], pix[pick]
            par = [getattr(objs, f)[rb, col] for f in ("cx", "cy", "radius", "cos", "sin")]
            hit = _hit(shape, start[rb, pb], to_light[rb, pb], *par) < dist[rb, pb]
            shadow[rb[hit], pb[hit]] = True
    return shadow


# ----------------------------------------------------------------------------------------------
# checks


def _layout(num_slots: int) -> Layout:
    if int(num_slots) not in LAYOUTS:
        raise BindscopeError(
            f"raycast3d lays out 1 to {MAX_SLOTS} slots (got {num_slots}); use fewer objects per scene"
        )
    return LAYOUTS[int(num_slots)]


def _check_size(width: int, height: int) -> None:
    if int(width) < MIN_SIDE or int(height) < MIN_SIDE:
        raise BindscopeError(f"image size {width}x{height} is too small; use at least {MIN_SIDE} pixels per side")


def _check_jitter(jitter: float) -> float:
    value = float(jitter)
    if not 0.0 <= value <= 1.0:
        raise BindscopeError(f"jitter must lie in [0, 1] (got {jitter}); use 0 for the exact layout")
    return value


def _check_batch(batch: SceneBatch) -> None:
    _layout(batch.num_slots)
    shapes = np.asarray(batch.shapes)
    bad = (shapes < -1) | (shapes >= len(SHAPES))
    if bad.any():
        raise BindscopeError(
            f"unknown shape code {int(shapes[bad][0])}; raycast3d draws codes 0..{len(SHAPES) - 1} "
            f"({', '.join(SHAPES)}) and -1 for an empty slot"
        )
    present = shapes >= 0
    colors = np.asarray(batch.colors)[present]
    if not np.isfinite(colors).all() or (colors < 0).any() or (colors > 1).any():
        raise BindscopeError("object colors must be RGB values in 0..1; divide 8-bit colors by 255")
    if batch.scales is not None:
        scales = np.asarray(batch.scales)[present]
        if not np.isfinite(scales).all() or (scales <= 0).any() or (scales > MAX_SCALE).any():
            raise BindscopeError(
                f"object scales must lie in (0, {MAX_SCALE}] (1 is CLEVR's large size); shrink the sizes"
            )
    if batch.materials is not None and not np.isin(np.asarray(batch.materials)[present], (0, 1)).all():
        raise BindscopeError("materials must be 0 (rubber) or 1 (metal)")
    _check_families(batch, present)
    where = batch.slots if batch.places is None else batch.places
    slots = np.where(present, where, -1 - np.arange(shapes.shape[1]))
    if (np.sort(slots, axis=1)[:, 1:] == np.sort(slots, axis=1)[:, :-1]).any():
        what = "slot" if batch.places is None else "place"
        raise BindscopeError(f"two objects of one scene stand in the same {what}; give each object its own {what}")


def _check_families(batch: SceneBatch, present: np.ndarray) -> None:
    """Refuse places raycast3d cannot draw, places with counts, and counts in more slots than it lays out."""
    if batch.places is not None and batch.counts is not None:
        raise BindscopeError("raycast3d draws places or counts, not both in one scene; flat2d draws both")
    if batch.places is not None:
        bad = np.asarray(batch.places)[present & (_PLACE_CELL[np.where(present, batch.places, 0)] < 0)]
        if bad.size:
            raise BindscopeError(
                f"raycast3d cannot draw the place {PLACES[int(bad[0])]!r} unambiguously (its objects stand on the "
                f"floor); use {', '.join(DRAWN_PLACES)}, or the flat2d renderer for above / below"
            )
    if batch.counts is not None:
        _count_layout(batch.num_slots)


# ----------------------------------------------------------------------------------------------
# reading images back


# Read-back constants (see identify).
FLOOR_MARGIN = 6  # 8-bit levels below the floor's shadow still counted as floor
NEUTRAL_SPREAD = 2  # largest max - min channel difference of a floor pixel
MIN_PIXELS = 12  # smaller components are ignored
SHADE_MIN, SHADE_MAX = 0.4, 1.1
ROUND_SPREAD = 0.03
CORNER_SCORE = 0.045
ASPECT_POWER = 4
_PALETTE_NAMES = np.asarray(list(PALETTE), dtype=object)
_PALETTE_RGB = np.asarray(list(PALETTE.values()), dtype=np.float64)


def identify(images: np.ndarray, num_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Recover each slot's color and shape name from the pixels alone.

    Segmentation uses a rendering-free model of the floor: it is neutral gray (R = G = B) and
    never darker than in shadow (``FLOOR_ALBEDO * AMBIENT``), while every CLEVR color is either
    chromatic or, for gray, darker than that. Object pixels are the rest; 8-connected components
    of them are objects (a highlight that looks like floor only makes a hole), each assigned to
    the nearest of :func:`slot_centers` (the largest one wins a slot).

    The color is the PALETTE entry nearest to the median of the object's 50-80th brightness
    percentile pixels (lit, but below the highlight), allowing for shading: the distance to a
    palette color P is ``min ||c - s P||`` over brightness factors ``s`` in
    [:data:`SHADE_MIN`, :data:`SHADE_MAX`].

    The shape comes from the convex hull of the silhouette (pixel centres of each row's ends;
    it also closes highlight holes): a sphere's outline is an ellipse, so its radii in the frame
    that whitens the hull's second moments are nearly constant (relative spread below
    :data:`ROUND_SPREAD`); a cube's outline is a convex polygon with at most six corners, so the
    largest hexagon on the hull's vertices leaves only thin slivers along pixel steps, while a
    cylinder's elliptical top and bottom leave caps (``silhouette.corner_score``); a cylinder of
    height 2R is also taller for its width (height / width about 1.26) than most cubes (about
    1.1), so the score is weighted by ``(height / width) ** ASPECT_POWER`` before it is compared
    with :data:`CORNER_SCORE`. Measured over 1 to 4 slots and jitter 0 to 1: spheres spread at
    most 0.011, cubes and cylinders at least 0.047; at 224 px weighted scores of cubes are at most
    0.033 and of cylinders at least 0.107 (at 160 px: 0.034 and 0.070). Shapes are read reliably
    for objects about 20 pixels across or more: at 96 px for 2 slots without jitter, at 160 px
    for up to 4 slots at any jitter. White objects (not a CLEVR color) would pass for floor.

    Parameters
    ----------
    images : np.ndarray
        uint8 [B, H, W, 3] as :func:`render` returns them (rubber or metal).
    num_slots : int
        Number of layout positions the images were rendered with.

    Returns
    -------
    colors, shapes : np.ndarray
        object [B, num_slots] of names; "" where a slot holds no object.
    """
    images = _check_images(images, num_slots)
    b, h, w, _ = images.shape
    colors = np.full((b, num_slots), "", dtype=object)
    shapes = np.full((b, num_slots), "", dtype=object)
    for img, slot, ys, xs in _slot_objects(_object_mask(images), slot_centers(num_slots, w, h)):
        colors[img, slot] = _color_name(images[img, ys, xs])
        shapes[img, slot] = _shape_name(xs, ys)
    return colors, shapes


def read_back(images: np.ndarray, num_slots: int, *, places: bool = False, copies: bool = False) -> Readout:
    """Recover each cell's color, shape and (with ``copies`` or ``places``) number of copies from the pixels.

    Without ``places`` or ``copies`` this is :func:`identify`. Otherwise every component of object pixels (as
    :func:`identify` segments them, at least :data:`MIN_PIXELS`) is one copy. With ``copies`` it belongs to
    the slot whose :data:`COUNT_LAYOUTS` position (projected at the copies' half height) is nearest its
    centroid; with ``places`` to its side of the image's left/right or behind/in front pair
    (:func:`bindscope.data.render.base.pair_sides`: behind is the upper one). Components under
    :data:`~bindscope.data.render.base.COPY_SHARE` of their cell's largest are left out; color and shape are
    read per component, and a
    cell's are those most of its copies' pixels show (:func:`bindscope.data.render.base.vote`: a far copy, small
    in the image, may misread a cylinder as a cube).

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
    if places and copies:
        raise BindscopeError("raycast3d draws places or counts, not both; read places or copies")
    b, h, w, _ = images.shape
    many = len(PLACES) if places else num_slots
    img, ys, xs = _blobs(_object_mask(images))
    mx = np.array([x.mean() for x in xs])
    my = np.array([y.mean() for y in ys])
    if places:
        centres = project(np.c_[PLACE_LAYOUT.xy, np.full(len(DRAWN_PLACES), PLACE_LAYOUT.radius)], w, h)
        # pair_sides wants left, right, top, bottom: behind stands higher in the image than in front
        where = np.array([PLACES.index(p) for p in DRAWN_PLACES])[pair_sides(img, mx, my, b, centres)]
    else:
        layout = _count_layout(num_slots)
        centres = project(np.c_[layout.xy, np.full(num_slots, layout.radius)], w, h)
        where = np.argmin((mx[:, None] - centres[:, 0]) ** 2 + (my[:, None] - centres[:, 1]) ** 2, axis=1)
    group = img * many + where
    size = np.array([len(x) for x in xs], dtype=np.int64)
    kept = np.flatnonzero(copies_kept(group, size, b * many))
    colors = [_color_name(images[img[i], ys[i], xs[i]]) for i in kept]
    shapes = [_shape_name(xs[i], ys[i]) for i in kept]
    return cell_readout(group[kept], colors, shapes, size[kept], (b, many))


def _blobs(mask: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Every component of at least MIN_PIXELS: its image, and its pixels' rows and columns."""
    pix, labels = silhouette.components(mask)
    ids, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    img, y, x = np.unravel_index(pix, mask.shape)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    keep = np.flatnonzero(counts >= MIN_PIXELS)
    members = [order[starts[c] : starts[c + 1]] for c in keep]
    return img[ids[keep]], [y[m] for m in members], [x[m] for m in members]


def _count_layout(num_slots: int) -> CountLayout:
    if int(num_slots) not in COUNT_LAYOUTS:
        raise BindscopeError(
            f"raycast3d draws counts in scenes of 1 to {max(COUNT_LAYOUTS)} objects (got {num_slots}); "
            "use fewer objects per scene, or the flat2d renderer"
        )
    return COUNT_LAYOUTS[int(num_slots)]


def _check_images(images: np.ndarray, num_slots: int) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise BindscopeError(
            f"identify needs uint8 RGB images [B, H, W, 3] (got {images.dtype} {list(images.shape)}); "
            "pass what render returns or PNGs read as RGB"
        )
    _check_size(images.shape[2], images.shape[1])
    _layout(num_slots)
    return images


def _object_mask(images: np.ndarray) -> np.ndarray:
    """Pixels that cannot be floor: chromatic, or darker than the floor in shadow ([B, H, W] bool)."""
    r, g, b = images[..., 0], images[..., 1], images[..., 2]
    spread = np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b)  # no wrap-around: max >= min
    darkest_floor = math.floor(255 * FLOOR_ALBEDO * AMBIENT) - FLOOR_MARGIN
    total = r.astype(np.uint16) + g + b
    return (spread > NEUTRAL_SPREAD) | (total < 3 * darkest_floor)


def _slot_objects(mask: np.ndarray, centers: np.ndarray):
    """Yield (image, slot, ys, xs) for the largest component nearest to each slot centre."""
    pix, labels = silhouette.components(mask)
    ids, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    img, y, x = np.unravel_index(pix, mask.shape)
    cx = np.bincount(inverse, weights=x) / counts
    cy = np.bincount(inverse, weights=y) / counts
    comp_img = img[ids]
    slot = np.argmin((cx[:, None] - centers[:, 0]) ** 2 + (cy[:, None] - centers[:, 1]) ** 2, axis=1)
    best: dict[tuple[int, int], int] = {}
    for c in np.flatnonzero(counts >= MIN_PIXELS):
        key = (int(comp_img[c]), int(slot[c]))
        if key not in best or counts[c] > counts[best[key]]:
            best[key] = int(c)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    for (i, s), comp in best.items():
        members = order[starts[comp] : starts[comp + 1]]
        yield i, s, y[members], x[members]


def _color_name(pixels: np.ndarray) -> str:
    """Nearest palette name to the lit, non-highlight pixels, allowing for shading."""
    rgb = pixels.astype(np.float64)
    brightness = rgb.sum(axis=1)
    lo, hi = np.percentile(brightness, [50, 80])
    c = np.median(rgb[(brightness >= lo) & (brightness <= hi)], axis=0)
    s = np.clip(_PALETTE_RGB @ c / (_PALETTE_RGB * _PALETTE_RGB).sum(axis=1), SHADE_MIN, SHADE_MAX)
    return str(_PALETTE_NAMES[np.argmin(((c - s[:, None] * _PALETTE_RGB) ** 2).sum(axis=1))])


def _shape_name(xs: np.ndarray, ys: np.ndarray) -> str:
    """Sphere, cube or cylinder from the hull of the silhouette."""
    hull = silhouette.row_hull(xs, ys)
    if silhouette.ellipse_spread(hull) < ROUND_SPREAD:
        return "sphere"
    aspect = (ys.max() - ys.min() + 1) / (xs.max() - xs.min() + 1)
    return "cube" if silhouette.corner_score(hull) * aspect**ASPECT_POWER < CORNER_SCORE else "cylinder"
