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
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.data.render import silhouette
from bindscope.data.render.base import PALETTE, SceneBatch

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
    """Positions, sizes and turns of every object (jitter drawn per scene and slot)."""
    layout = _layout(batch.num_slots)
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
    layout = _layout(num_slots)
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


@lru_cache(maxsize=8)
def _windows(num_slots: int, width: int, height: int) -> tuple[np.ndarray, ...]:
    """Flat pixel indices inside each slot's box (one pixel of margin, clipped to the image)."""
    out = []
    for x0, y0, x1, y1 in slot_boxes(num_slots, width, height):
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
    objs = place_objects(batch, jitter, seed)
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
                rgb = _render_chunk(objs.rows(rows), slots[rows], batch.num_slots, width, height, cols)
                out[rows, cols] = np.floor(np.clip(rgb, 0, 1) * 255 + 0.5).astype(np.uint8)
    return out.reshape(b, height, width, 3)


def _render_chunk(objs: Objects, slots: np.ndarray, num_slots: int, width: int, height: int, cols: slice) -> np.ndarray:
    """float32 [b, n, 3] RGB in 0..1 of a chunk of scenes and a range of pixels (row-major)."""
    dirs = _ray_directions(width, height, cols)
    origin = camera(width, height).position.astype(np.float32)
    windows = [idx[(idx >= cols.start) & (idx < cols.stop)] - cols.start for idx in _windows(num_slots, width, height)]
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
    slots = np.where(present, batch.slots, -1 - np.arange(shapes.shape[1]))
    if (np.sort(slots, axis=1)[:, 1:] == np.sort(slots, axis=1)[:, :-1]).any():
        raise BindscopeError("two objects of one scene stand in the same slot; give each object its own slot")


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
