"""Labels beside crowded points that never overlap: a deterministic greedy placement in display coordinates.

Each label is tried at positions around its point, ring by ring outwards (right, upper right, up, ..., then one
step further), and put at the first whose box overlaps no box placed before and covers no point. Labels are
placed in the order given, so the same points always give the same picture.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

#: The directions tried on each ring, right first, counter-clockwise.
DIRECTIONS = np.array([[np.cos(a), np.sin(a)] for a in np.deg2rad(np.arange(0, 360, 45))])


def overlaps(box: np.ndarray, boxes: np.ndarray, pad: float = 0.0) -> bool:
    """Whether ``box`` (x0, y0, x1, y1) overlaps any row of ``boxes`` ([m, 4]) by more than ``-pad``."""
    if not len(boxes):
        return False
    apart = (
        (box[2] + pad <= boxes[:, 0])
        | (boxes[:, 2] + pad <= box[0])
        | (box[3] + pad <= boxes[:, 1])
        | (boxes[:, 3] + pad <= box[1])
    )
    return bool((~apart).any())


def covers(box: np.ndarray, points: np.ndarray, radius: float) -> bool:
    """Whether ``box`` comes within ``radius`` of any of ``points`` ([m, 2])."""
    near_x = (points[:, 0] > box[0] - radius) & (points[:, 0] < box[2] + radius)
    near_y = (points[:, 1] > box[1] - radius) & (points[:, 1] < box[3] + radius)
    return bool((near_x & near_y).any())


def candidate(anchor: np.ndarray, size: np.ndarray, direction: np.ndarray, distance: float) -> np.ndarray:
    """The box (x0, y0, x1, y1) of a label of ``size`` (w, h) put ``distance`` from ``anchor`` in ``direction``,
    on that side of it (to the left of a point when the direction points left, centred when straight up)."""
    corner = anchor + distance * direction - size * (1 - np.sign(np.round(direction, 6))) / 2
    return np.concatenate([corner, corner + size])


def place_labels(
    anchors: np.ndarray,
    sizes: np.ndarray,
    *,
    gap: float = 4.0,
    step: float = 4.0,
    marker: float = 5.0,
    pad: float = 1.0,
    bounds: tuple[float, float, float, float] | None = None,
    max_rings: int = 400,
) -> np.ndarray:
    """Boxes for labels beside their points such that no two boxes overlap.

    Parameters
    ----------
    anchors
        ``[n, 2]`` points the labels belong to (display units, e.g. pixels).
    sizes
        ``[n, 2]`` width and height of each label.
    gap, step
        The distance of the first ring from its point, and between rings.
    marker
        How far from any point a box must stay (the marker's radius).
    pad
        The least space between two boxes.
    bounds
        (x0, y0, x1, y1) a box should stay inside; given up for a label after ``max_rings`` rings.
    max_rings
        The rings tried inside ``bounds`` before a label may leave them.

    Returns
    -------
    numpy.ndarray
        ``[n, 4]`` boxes (x0, y0, x1, y1), in the order of ``anchors``.
    """
    anchors, sizes = np.asarray(anchors, dtype=float), np.asarray(sizes, dtype=float)
    placed = np.empty((0, 4))
    for anchor, size in zip(anchors, sizes):
        box = first_free(anchor, size, placed, anchors, gap, step, marker, pad, bounds, max_rings)
        placed = np.vstack([placed, box])
    return placed


def first_free(
    anchor: np.ndarray,
    size: np.ndarray,
    placed: np.ndarray,
    points: np.ndarray,
    gap: float,
    step: float,
    marker: float,
    pad: float,
    bounds: tuple[float, float, float, float] | None,
    max_rings: int,
) -> np.ndarray:
    """The first box around ``anchor``, ring by ring, clear of the ``placed`` boxes and of the ``points``
    (see :func:`place_labels`). Boxes grow further out on every ring, so one is always found."""
    for ring in itertools.count():
        for direction in DIRECTIONS:
            box = candidate(anchor, size, direction, gap + ring * step)
            if ring < max_rings and bounds is not None and not inside(box, bounds):
                continue
            if not overlaps(box, placed, pad) and not covers(box, points, marker):
                return box
    raise AssertionError("unreachable")  # pragma: no cover


def inside(box: np.ndarray, bounds: tuple[float, float, float, float]) -> bool:
    """Whether ``box`` lies within ``bounds`` (x0, y0, x1, y1)."""
    return bool(box[0] >= bounds[0] and box[1] >= bounds[1] and box[2] <= bounds[2] and box[3] <= bounds[3])


def label_points_3d(fig: Any, ax: Any, points: Any, colors: list[str], fontsize: float = 7) -> list[Any]:
    """Label the points of a 3-D axes (``points``: rows with ``x``, ``y``, ``z``, ``label``) without overlap.

    The figure's layout must be final (call after ``tight_layout``): the labels are placed in figure
    coordinates from the points' projection, with a thin line back to a point its label had to move away
    from. Returns the text artists, in the order of ``points``.
    """
    from matplotlib.lines import Line2D
    from mpl_toolkits.mplot3d import proj3d

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    x2, y2, _ = proj3d.proj_transform(points.x.to_numpy(), points.y.to_numpy(), points.z.to_numpy(), ax.get_proj())
    anchors = ax.transData.transform(np.column_stack([x2, y2]))
    texts = [
        fig.text(0, 0, str(label), fontsize=fontsize, color=c, va="bottom", ha="left")
        for label, c in zip(points.label, colors)
    ]
    sizes = np.array([[t.get_window_extent(renderer).width, t.get_window_extent(renderer).height] for t in texts])
    width, height = fig.canvas.get_width_height()
    boxes = place_labels(anchors, sizes, bounds=(0, 0, width, height))
    to_figure = fig.transFigure.inverted()
    for text, box, anchor, color in zip(texts, boxes, anchors, colors):
        text.set_position(to_figure.transform(box[:2]))
        nearest = np.clip(anchor, box[:2], box[2:])
        if np.hypot(*(nearest - anchor)) > 8:
            ends = to_figure.transform(np.array([anchor, nearest]))
            fig.add_artist(Line2D(ends[:, 0], ends[:, 1], lw=0.4, color=color, alpha=0.6))
    return texts
