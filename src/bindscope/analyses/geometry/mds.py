"""The MDS picture (docs/method/08-geometry.md; the research code's figure): objects, their parts and scenes in 3-D.

For a quadruple (attribute i, noun j, attribute k, noun l), labelled after the research code as
B = attribute i, C = noun j, R = attribute k, S = noun l:

- the means: B, C, R, S (attribute / noun means: given, or those of the simple object vectors);
- the simple objects: BC, BS, RC, RS;
- the composites, mean 2-object scene vectors: BCRS, BSRC, BCRC, BSRS, BCBS, RCRS, and the identical
  pairs RSRS, BSBS, BCBC, RCRC (the research code draws them too);
- the synthetic sums: B+C, B+S, R+C, R+S (``A + O - mu``) and BC + RS, RC + BS, BC + RC, BS + RS,
  BC + BS, RC + RS (``(S - mu) + (S' - mu) + mu``).

Every point is L2-normalised; a zero vector or a repeat of an earlier point is dropped (so i = k or
j = l draws each point once). Distances are
``1 - cos`` clipped to [0, 2]; metric MDS (SMACOF, scikit-learn) in 3 dimensions, 4 random starts,
seed 0; the raw stress and the stress over the sum of squared distances are reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sklearn.manifold import MDS

from bindscope.analyses.geometry.structure import unit

CATEGORIES = ("mean", "simple", "composite", "synthetic")


@dataclass(frozen=True)
class Picture:
    """Labelled points, their 3-D coordinates and the stress of the embedding."""

    labels: list[str]
    categories: list[str]
    coords: np.ndarray
    distances: np.ndarray
    stress: float
    normalized_stress: float


def mds_3d(distances: np.ndarray, seed: int = 0, n_init: int = 4) -> tuple[np.ndarray, float, float]:
    """3-D metric MDS of a precomputed distance matrix: coordinates, raw and normalised stress."""
    d = np.asarray(distances, dtype=np.float64)
    model = MDS(
        n_components=3, metric="precomputed", n_init=n_init, init="random", random_state=seed, normalized_stress=False
    )
    coords = model.fit_transform(d)
    raw = float(model.stress_)
    return coords, raw, raw / max(float((d**2).sum()), 1e-12)


def cosine_distances(vectors: np.ndarray) -> np.ndarray:
    """``1 - cos`` between rows, clipped to [0, 2], zero on the diagonal."""
    v = unit(np.asarray(vectors, dtype=np.float64))
    d = np.clip(1.0 - v @ v.T, 0.0, 2.0)
    np.fill_diagonal(d, 0.0)
    return d


Quad = tuple[int, int, int, int]


COMPOSITES = ("BCRS", "BSRC", "BCRC", "BSRS", "BCBS", "RCRS", "RSRS", "BSBS", "BCBC", "RCRC")


def quad_pairs(quad: Quad) -> dict[str, tuple[int, int]]:
    """The quadruple's four simple objects, (attribute, noun) by label: BC, BS, RC, RS."""
    i, j, k, m = quad
    return {"BC": (i, j), "BS": (i, m), "RC": (k, j), "RS": (k, m)}


def quad_points(
    simple: np.ndarray,
    composite: Mapping[Quad, np.ndarray],
    quad: Quad,
    means: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """The labelled points of a quadruple (see the module doc).

    ``simple``: ``[A, O, D]`` object vectors by (attribute, noun); ``composite``: the mean scene vector by
    (a1, o1, a2, o2) of the 2-object scenes (a composite without scenes is left out); ``means``: the
    attribute ``[A, D]`` and noun ``[O, D]`` means, by default those of ``simple``.
    """
    i, j, k, m = quad
    s = np.asarray(simple, dtype=np.float64)
    mu = np.nanmean(s.reshape(-1, s.shape[-1]), axis=0)  # objects without a vector (NaN) left out
    centred = s - mu
    attr, noun = (np.nanmean(centred, axis=1) + mu, np.nanmean(centred, axis=0) + mu) if means is None else means
    letters = {"B": ("a", i), "C": ("o", j), "R": ("a", k), "S": ("o", m)}
    points: dict[str, tuple[str, np.ndarray]] = {}

    def add(label: str, category: str, v: np.ndarray) -> None:
        repeated = any(np.allclose(v, w) for _, w in points.values())
        if label not in points and not repeated and np.linalg.norm(v) > 1e-9:
            points[label] = (category, v)

    for letter, (kind, index) in letters.items():
        add(letter, "mean", attr[index] if kind == "a" else noun[index])
    pairs = quad_pairs(quad)
    for label, pair in pairs.items():
        add(label, "simple", s[pair])
    for label in COMPOSITES:
        key = pairs[label[:2]] + pairs[label[2:]]
        if key in composite:  # with scenes
            add(label, "composite", np.asarray(composite[key], dtype=np.float64))
    for pair_label in pairs:
        b, n = pair_label[0], pair_label[1]
        add(f"{b}+{n}", "synthetic", attr[letters[b][1]] + noun[letters[n][1]] - mu)
    for x, y in (("BC", "RS"), ("RC", "BS"), ("BC", "RC"), ("BS", "RS"), ("BC", "BS"), ("RC", "RS")):
        add(f"{x} + {y}", "synthetic", (s[pairs[x]] - mu) + (s[pairs[y]] - mu) + mu)
    labels = list(points)
    return labels, [points[x][0] for x in labels], np.stack([points[x][1] for x in labels])


def composite_keys(quad: Quad) -> list[Quad]:
    """The (a1, o1, a2, o2) of the composites a quadruple draws."""
    pairs = quad_pairs(quad)
    return list(dict.fromkeys((*pairs[x[:2]], *pairs[x[2:]]) for x in COMPOSITES))


def quad_picture(
    simple: np.ndarray,
    composite: Mapping[Quad, np.ndarray],
    quad: Quad,
    means: tuple[np.ndarray, np.ndarray] | None = None,
    seed: int = 0,
) -> Picture:
    """The MDS picture of one quadruple."""
    labels, categories, vectors = quad_points(simple, composite, quad, means)
    distances = cosine_distances(vectors)
    coords, raw, normalized = mds_3d(distances, seed)
    return Picture(labels, categories, coords, distances, raw, normalized)
