"""The MDS picture: a square is recovered, the quadruple's points are the research code's."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.geometry.mds import composite_keys, cosine_distances, mds_3d, quad_picture, quad_points


def test_a_square_is_recovered_up_to_rotation() -> None:
    square = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    distances = np.linalg.norm(square[:, None] - square[None], axis=-1)
    coords, raw, normalized = mds_3d(distances)
    assert normalized < 1e-4 and raw < 1e-3
    got = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    assert np.allclose(got, distances, atol=1e-2)  # the same distances: the square, up to rotation


def test_quad_points_and_distances() -> None:
    rng = np.random.default_rng(0)
    simple = rng.normal(size=(3, 4, 16))
    table = rng.normal(size=(3, 4, 3, 4, 16))
    composite = {key: table[key] for key in composite_keys((0, 1, 2, 3))}
    assert len(composite) == 10 and (0, 1, 2, 3) in composite and (0, 1, 0, 1) in composite  # identical pairs too
    labels, categories, vectors = quad_points(simple, composite, (0, 1, 2, 3))
    assert labels[:8] == ["B", "C", "R", "S", "BC", "BS", "RC", "RS"]
    assert {"BCRS", "BSRC", "BCRC", "BSRS", "BCBS", "RCRS", "RSRS", "BSBS", "BCBC", "RCRC"} <= set(labels)
    assert "BC+RS" not in labels and "BC + RS" in labels and "B+C" in labels
    assert len(labels) == len(set(labels)) == len(vectors) == 4 + 4 + 10 + 4 + 6
    assert set(categories) == {"mean", "simple", "composite", "synthetic"}
    assert np.allclose(vectors[labels.index("BCRS")], table[0, 1, 2, 3])
    mu = simple.mean(axis=(0, 1))
    assert np.allclose(vectors[labels.index("BC + RS")], simple[0, 1] + simple[2, 3] - mu)
    d = cosine_distances(vectors)
    assert np.allclose(d, d.T) and (d >= 0).all() and (d <= 2).all() and np.allclose(np.diag(d), 0)
    # i == k and j == l: R is B, S is C, every simple object is BC, every composite BCBC
    labels, _, _ = quad_points(simple, composite, (0, 1, 0, 1))
    assert labels == ["B", "C", "BC", "BCRS", "B+C", "BC + RS"]
    # given means replace those of the simple vectors
    attr, noun = rng.normal(size=(3, 16)), rng.normal(size=(4, 16))
    labels, _, vectors = quad_points(simple, composite, (0, 1, 2, 3), (attr, noun))
    assert np.allclose(vectors[labels.index("B")], attr[0]) and np.allclose(vectors[labels.index("S")], noun[3])
    # an object without a vector (NaN) takes no part in the mean
    holes = simple.copy()
    holes[2, 0] = np.nan
    labels, _, vectors = quad_points(holes, composite, (0, 1, 2, 3))
    assert np.isfinite(vectors).all() and "BC + RS" in labels
    partial = {key: v for key, v in composite.items() if key != (0, 1, 2, 3)}  # a composite without scenes
    assert "BCRS" not in quad_points(simple, partial, (0, 1, 2, 3))[0]
    picture = quad_picture(simple, composite, (0, 1, 2, 3))
    assert picture.coords.shape == (len(picture.labels), 3) and picture.normalized_stress < 1
