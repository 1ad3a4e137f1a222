"""Geometry of object silhouettes in images, for reading labels back from pixels.

Generic tools, free of any renderer: connected components of a mask, the convex hull of a
silhouette, and two shape measures of that hull, how close it is to an ellipse
(:func:`ellipse_spread`) and to a polygon with few corners (:func:`corner_score`).
"""

from __future__ import annotations

import math

import numpy as np

MAX_STARTS = 64
_WITHIN_IMAGE = np.zeros((3, 3, 3), dtype=bool)
_WITHIN_IMAGE[1] = True  # 8-connected in each image, nothing across the batch axis


def components(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """8-connected components of a [B, H, W] mask: the flat indices of its pixels (sorted) and,
    for each, its component's smallest member (an index into that list).

    ``scipy.ndimage.label`` with a structure that connects the 8 neighbours within an image, never across
    images; the pixels are sorted, so a component's first pixel in the list is its smallest member.
    """
    from scipy import ndimage  # here: render workers, which never read images back, need not import it

    pix = np.flatnonzero(mask)
    labels, _ = ndimage.label(mask, structure=_WITHIN_IMAGE)
    number = labels.ravel()[pix]
    _, first = np.unique(number, return_index=True)
    return pix, first[number - 1]


def row_hull(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Convex hull (float [n, 2], one orientation) of the first and last pixel centre of each row."""
    top = ys.min()
    rows = ys - top
    n = rows.max() + 1
    left = np.full(n, np.iinfo(np.int64).max)
    right = np.full(n, -1)
    np.minimum.at(left, rows, xs)
    np.maximum.at(right, rows, xs)
    have = right >= 0
    r = np.flatnonzero(have) + top
    points = np.concatenate([np.c_[left[have], r], np.c_[right[have], r]]).astype(np.float64)
    points = np.unique(points, axis=0)  # sorted by x then y
    return monotone_chain(points)


def monotone_chain(points: np.ndarray) -> np.ndarray:
    """Convex hull of points sorted by (x, y), without collinear points (Andrew's algorithm)."""
    if len(points) < 3:
        return points

    def half(seq: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for p in seq:
            while (
                len(out) >= 2
                and (out[-1][0] - out[-2][0]) * (p[1] - out[-2][1]) - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0])
                <= 0
            ):
                out.pop()
            out.append(p)
        return out

    lower, upper = half(points), half(points[::-1])
    return np.asarray(lower[:-1] + upper[:-1])


def polygon_moments(v: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Area, centroid [2] and covariance [2, 2] of the filled polygon ``v`` [n, 2]."""
    x, y = v[:, 0], v[:, 1]
    x2, y2 = np.roll(x, -1), np.roll(y, -1)
    cross = x * y2 - x2 * y
    area = cross.sum() / 2
    cx, cy = ((x + x2) * cross).sum() / (6 * area), ((y + y2) * cross).sum() / (6 * area)
    sxx = ((x * x + x * x2 + x2 * x2) * cross).sum() / (12 * area) - cx * cx
    syy = ((y * y + y * y2 + y2 * y2) * cross).sum() / (12 * area) - cy * cy
    sxy = ((x * y2 + 2 * x * y + 2 * x2 * y2 + x2 * y) * cross).sum() / (24 * area) - cx * cy
    return float(abs(area)), np.array([cx, cy]), np.array([[sxx, sxy], [sxy, syy]])


def ellipse_spread(hull: np.ndarray) -> float:
    """Relative spread (std / mean) of the hull outline's radii in the whitened frame: 0 for an ellipse."""
    if len(hull) < 5:
        return 1.0
    _, centre, cov = polygon_moments(hull)
    nxt = np.roll(hull, -1, axis=0)
    steps = np.linspace(0.0, 1.0, 8, endpoint=False)
    outline = (hull[:, None, :] + steps[:, None] * (nxt - hull)[:, None, :]).reshape(-1, 2)
    vals, vecs = np.linalg.eigh(cov)
    radii = np.linalg.norm((outline - centre) @ vecs / np.sqrt(vals), axis=1)
    return float(radii.std() / radii.mean())


def corner_score(hull: np.ndarray, corners: int = 6) -> float:
    """How far the hull is from a polygon with ``corners`` corners: ``lost**2 / (area * perimeter)``.

    ``lost`` is the area of the hull outside the largest polygon on ``corners`` of its vertices;
    the score is the share of the area lost times the mean width (pixels) of the lost slivers, so
    that pixel steps along straight edges (which lose a thin sliver) weigh less than a curve.
    """
    area = polygon_moments(hull)[0] if len(hull) >= 3 else 0.0
    if area <= 0:
        return math.inf
    perimeter = float(np.linalg.norm(np.roll(hull, -1, axis=0) - hull, axis=1).sum())
    lost = area - largest_inscribed(hull, corners)
    return lost * lost / (area * perimeter)


def largest_inscribed(hull: np.ndarray, corners: int) -> float:
    """Largest area of a polygon on ``corners`` vertices of the convex polygon ``hull`` [n, 2].

    Dynamic programming over start vertices at once: ``best[s, a]`` is the largest area of a fan
    from start s whose last vertex is s + a. Hulls of more than ``MAX_STARTS`` vertices try every
    few vertices as a start (which keeps memory at MAX_STARTS * n**2 and the area within a sliver).
    """
    n = len(hull)
    if n <= corners:
        return polygon_moments(hull)[0]
    starts = np.arange(0, n, -(-n // MAX_STARTS))
    ring = hull[(starts[:, None] + np.arange(n)[None, :]) % n]  # [start, a, 2]
    d = ring - ring[:, :1]
    tri = 0.5 * np.abs(d[:, :, None, 0] * d[:, None, :, 1] - d[:, :, None, 1] * d[:, None, :, 0])
    tri = np.where(np.arange(n)[:, None] < np.arange(n)[None, :], tri, -np.inf)
    best = np.full((len(starts), n), -np.inf)
    best[:, 1:] = 0.0
    for _ in range(corners - 2):
        best = np.max(best[:, :, None] + tri, axis=1)
    return float(best.max())
