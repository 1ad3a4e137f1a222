"""The raycast3d renderer: layout, exactness, and labels read back from pixels (identify)."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import CLEVR_COLORS
from bindscope.data.render import raycast3d as r3d
from bindscope.data.render import silhouette
from bindscope.data.render.base import PALETTE, SceneBatch

OBJECTS = [(c, s) for c in CLEVR_COLORS for s in r3d.SHAPES]  # the 24 CLEVR objects


def scenes(
    rows: list[list[tuple[str, str, int]]],
    num_slots: int,
    *,
    materials: int | None = None,
    scales: float | None = None,
    keys: np.ndarray | None = None,
) -> SceneBatch:
    """A batch from rows of (color, shape, slot); shorter rows are padded with empty slots."""
    b, k = len(rows), max(1, max(len(r) for r in rows))
    colors = np.zeros((b, k, 3), dtype=np.float32)
    shapes = np.full((b, k), -1)
    slots = np.zeros((b, k), dtype=np.int64)
    for i, row in enumerate(rows):
        for j, (color, shape, slot) in enumerate(row):
            colors[i, j] = np.asarray(PALETTE[color]) / 255
            shapes[i, j] = r3d.SHAPES.index(shape)
            slots[i, j] = slot
    return SceneBatch(
        colors=colors,
        shapes=shapes,
        slots=slots,
        num_slots=num_slots,
        keys=np.arange(b) if keys is None else keys,
        materials=None if materials is None else np.full((b, k), materials),
        scales=None if scales is None else np.full((b, k), scales, dtype=np.float32),
    )


def expected(rows: list[list[tuple[str, str, int]]], num_slots: int) -> tuple[np.ndarray, np.ndarray]:
    colors = np.full((len(rows), num_slots), "", dtype=object)
    shapes = np.full((len(rows), num_slots), "", dtype=object)
    for i, row in enumerate(rows):
        for color, shape, slot in row:
            colors[i, slot], shapes[i, slot] = color, shape
    return colors, shapes


def assert_identified(rows, num_slots, *, size=224, jitter=0.0, seed=0, materials=None) -> None:
    images = r3d.render(scenes(rows, num_slots, materials=materials), width=size, height=size, jitter=jitter, seed=seed)
    got_c, got_s = r3d.identify(images, num_slots)
    want_c, want_s = expected(rows, num_slots)
    wrong = np.flatnonzero(((got_c != want_c) | (got_s != want_s)).any(axis=1))
    assert not len(wrong), [(rows[i], list(got_c[i]), list(got_s[i])) for i in wrong[:5]]


def pairs_covering_every_object(n_per_slot: int = 2) -> list[list[tuple[str, str, int]]]:
    """Two-object scenes in which every object stands n_per_slot times in each slot."""
    rows = []
    for i, (c, s) in enumerate(OBJECTS):
        for j in range(n_per_slot):
            partner = OBJECTS[(7 * i + 5 * j + 3) % len(OBJECTS)]
            rows.append([(c, s, 0), (*partner, 1)])
            rows.append([(*partner, 0), (c, s, 1)])
    return rows


# ---------------------------------------------------------------------------------------------- identify


def test_shape_order_is_the_clevr_presets():
    assert r3d.SHAPES == ("cube", "cylinder", "sphere")


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_identify_every_object_alone_at_every_slot(jitter):
    for num_slots in (1, 2, 3, 4):
        rows = [[(c, s, slot)] for c, s in OBJECTS for slot in range(num_slots)]
        assert_identified(rows, num_slots, size=160 if num_slots > 1 else 128, jitter=jitter, seed=num_slots)


def test_identify_all_576_clevr_scenes():
    assert_identified([[(*a, 0), (*b, 1)] for a in OBJECTS for b in OBJECTS], 2, size=160)


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_identify_two_object_scenes(jitter):
    assert_identified(pairs_covering_every_object(), 2, jitter=jitter, seed=5)


def test_identify_metal_objects():
    assert_identified([[(c, s, slot)] for c, s in OBJECTS for slot in range(2)], 2, jitter=0.3, seed=2, materials=1)
    assert_identified(pairs_covering_every_object(1), 2, jitter=0.3, seed=3, materials=1)


def test_identify_at_clevr_size_and_full_jitter():
    rows = pairs_covering_every_object(1)
    images = r3d.render(scenes(rows, 2), width=480, height=320, jitter=1.0, seed=9)
    got = r3d.identify(images, 2)
    for g, w in zip(got, expected(rows, 2)):
        np.testing.assert_array_equal(g, w)


def test_identify_reports_empty_slots():
    rows = [[], [("red", "cube", 1)], [("blue", "sphere", 0), ("gray", "cylinder", 2)]]
    assert_identified(rows, 3, size=160)


def test_swapped_shape_names_are_caught():
    # The published CLEVR export calls shape index 1 "cylinder" and 2 "sphere" the other way round:
    # a dataset that draws spheres but names them cylinders must disagree with identify.
    rows = [[(c, "sphere", 0), (c, "cylinder", 1)] for c in CLEVR_COLORS]
    images = r3d.render(scenes(rows, 2), width=160, height=160)
    claimed = np.array([["cylinder", "sphere"]] * len(rows), dtype=object)  # names swapped
    _, drawn = r3d.identify(images, 2)
    assert (drawn != claimed).all()
    assert (drawn == np.array([["sphere", "cylinder"]], dtype=object)).all()


def test_gray_objects_are_not_mistaken_for_shadows_or_floor():
    # Gray objects next to (and in) the other object's shadow, on the gray floor.
    rows = [[("gray", s0, 0), ("gray", s1, 1)] for s0 in r3d.SHAPES for s1 in r3d.SHAPES]
    for materials in (0, 1):
        assert_identified(rows, 2, jitter=0.5, seed=4, materials=materials)


# ---------------------------------------------------------------------------------------------- geometry


def test_slot_order_back_left_then_front_right():
    images = r3d.render(scenes([[("red", "sphere", 0)], [("red", "sphere", 1)]], 2), width=96, height=96)
    mask = r3d._object_mask(images)
    (y0, x0), (y1, x1) = (np.argwhere(m).mean(axis=0) for m in mask)
    assert x0 < 48 < x1  # slot 0 left, slot 1 right
    assert y0 < y1  # slot 0 higher in the image: further back
    assert mask[0].sum() < mask[1].sum()  # and so smaller
    objs = r3d.place_objects(scenes([[("red", "sphere", 0), ("red", "sphere", 1)]], 2), 0.0, 0)
    assert objs.cx[0, 0] < objs.cx[0, 1] and objs.cy[0, 0] > objs.cy[0, 1]  # back-left, front-right on the floor


def test_sphere_appears_where_projection_says():
    # Known answer: a sphere of radius R at distance d looks like a disc of radius ~ f R / d
    # around the projection of its centre, and that projection is slot_centers.
    size = 200
    images = r3d.render(scenes([[("blue", "sphere", 0)]], 1), width=size, height=size)
    ys, xs = np.nonzero(r3d._object_mask(images)[0])
    centre = r3d.slot_centers(1, size, size)[0]
    assert abs(xs.mean() - centre[0]) < 0.5 and abs(ys.mean() - centre[1]) < 1.0
    cam = r3d.camera(size, size)
    radius = r3d.LAYOUTS[1].radius
    distance = np.linalg.norm(np.array([0.0, 0.0, radius]) - cam.position)
    assert np.sqrt(len(xs) / np.pi) == pytest.approx(cam.focal * radius / distance, rel=0.03)


def test_lit_side_is_brighter_and_shadow_falls_on_the_floor():
    size = 160
    empty = r3d.render(scenes([[]], 1), width=size, height=size)[0].astype(int)
    image = r3d.render(scenes([[("red", "sphere", 0)]], 1), width=size, height=size)[0].astype(int)
    mask = r3d._object_mask(image[None].astype(np.uint8))[0]
    ys, xs = np.nonzero(mask)
    cy, cx = ys.mean(), xs.mean()
    red = image[..., 0]
    upper_left = red[mask & (np.arange(size)[:, None] < cy) & (np.arange(size)[None, :] < cx)].mean()
    lower_right = red[mask & (np.arange(size)[:, None] > cy) & (np.arange(size)[None, :] > cx)].mean()
    assert upper_left > lower_right + 40  # the light is up and to the front-left
    floor = ~mask
    darker = floor & (image.sum(-1) < empty.sum(-1) - 30)
    assert darker.sum() > 200  # a shadow, on the floor
    sy, sx = np.nonzero(darker)
    assert sx.mean() > cx  # cast to the right (away from the light)
    assert (image[floor][:, 0] == image[floor][:, 2]).all()  # the floor stays neutral gray, shadow included


@pytest.mark.parametrize("num_slots", [1, 2, 3, 4, 5, 6])
def test_layout_boxes_never_overlap_or_leave_the_image(num_slots):
    for width, height in [(224, 224), (480, 320), (320, 480), (16, 16), (500, 100)]:
        boxes = r3d.slot_boxes(num_slots, width, height)
        # pixel centres run from 0 to width - 1: the picture spans -0.5 .. width - 0.5
        assert (
            (boxes[:, :2] >= -0.5).all() and (boxes[:, 2] <= width - 0.5).all() and (boxes[:, 3] <= height - 0.5).all()
        )
        for i in range(num_slots):
            for j in range(i + 1, num_slots):
                apart_x = boxes[i, 2] < boxes[j, 0] or boxes[j, 2] < boxes[i, 0]
                apart_y = boxes[i, 3] < boxes[j, 1] or boxes[j, 3] < boxes[i, 1]
                assert apart_x or apart_y, (num_slots, width, height, i, j)


@pytest.mark.parametrize("num_slots", [2, 6])
def test_rendered_objects_stay_inside_their_boxes(num_slots):
    # Every slot filled with the largest object, at full jitter: every object is one component
    # of its own, inside its slot's box (so objects never touch each other or leave the image).
    width, height = 120, 90
    rows = [[(CLEVR_COLORS[(i + k) % 8], r3d.SHAPES[(i + k) % 3], k) for k in range(num_slots)] for i in range(12)]
    images = r3d.render(scenes(rows, num_slots, scales=1.0), width=width, height=height, jitter=1.0, seed=1)
    boxes = r3d.slot_boxes(num_slots, width, height)
    pix, labels = silhouette.components(r3d._object_mask(images))
    img, y, x = np.unravel_index(pix, (len(images), height, width))
    for i in range(len(images)):
        owners = []
        for label in np.unique(labels[img == i]):
            member = (img == i) & (labels == label)
            inside = (
                (x[member].min() >= boxes[:, 0] - 1)
                & (x[member].max() <= boxes[:, 2] + 1)
                & (y[member].min() >= boxes[:, 1] - 1)
                & (y[member].max() <= boxes[:, 3] + 1)
            )
            assert inside.sum() == 1, (i, label)
            owners.append(int(np.argmax(inside)))
        assert sorted(owners) == list(range(num_slots))


def test_any_aspect_ratio_keeps_proportions():
    rows = [[("green", "sphere", 0)]]
    wide = r3d.render(scenes(rows, 1), width=96, height=48)[0]
    tall = r3d.render(scenes(rows, 1), width=48, height=96)[0]
    assert wide.shape == (48, 96, 3) and tall.shape == (96, 48, 3)
    for image in (wide, tall):
        ys, xs = np.nonzero(r3d._object_mask(image[None])[0])
        assert (xs.max() - xs.min()) == pytest.approx(ys.max() - ys.min(), abs=2)  # a sphere stays round


def test_scales_shrink_objects():
    rows = [[("cyan", "cube", 0)]]
    big = r3d._object_mask(r3d.render(scenes(rows, 1, scales=1.0), width=96, height=96)).sum()
    small = r3d._object_mask(r3d.render(scenes(rows, 1, scales=0.5), width=96, height=96)).sum()
    assert small == pytest.approx(big / 4, rel=0.15)


def test_metal_differs_from_rubber():
    rows = [[("purple", "sphere", 0)]]
    rubber = r3d.render(scenes(rows, 1, materials=0), width=64, height=64)
    metal = r3d.render(scenes(rows, 1, materials=1), width=64, height=64)
    mask = r3d._object_mask(rubber)[0]
    whitest = lambda image: image[0][mask].min(axis=1).max()  # noqa: E731  (the weakest channel at the highlight)
    assert whitest(metal) > whitest(rubber) + 40  # a strong highlight
    assert np.median(metal[0][mask]) < np.median(rubber[0][mask])  # on a darker body


# ---------------------------------------------------------------------------------------------- exactness


def mixed_batch() -> SceneBatch:
    rng = np.random.default_rng(0)
    rows = [
        [(CLEVR_COLORS[rng.integers(8)], r3d.SHAPES[rng.integers(3)], k) for k in range(2) if rng.random() < 0.8]
        for _ in range(10)
    ]
    batch = scenes(rows, 2, keys=np.arange(100, 110))
    materials = rng.integers(0, 2, size=batch.shapes.shape)
    scales = rng.uniform(0.5, 1.0, size=batch.shapes.shape).astype(np.float32)
    return SceneBatch(
        colors=batch.colors,
        shapes=batch.shapes,
        slots=batch.slots,
        num_slots=2,
        keys=batch.keys,
        materials=materials,
        scales=scales,
    )


def test_deterministic_and_batch_independent(monkeypatch):
    batch = mixed_batch()
    first = r3d.render(batch, width=40, height=32, jitter=0.7, seed=3)
    assert first.dtype == np.uint8 and first.shape == (10, 32, 40, 3)
    assert np.array_equal(first, r3d.render(batch, width=40, height=32, jitter=0.7, seed=3))
    for i in range(len(batch)):
        one = SceneBatch(
            colors=batch.colors[i : i + 1],
            shapes=batch.shapes[i : i + 1],
            slots=batch.slots[i : i + 1],
            num_slots=2,
            keys=batch.keys[i : i + 1],
            materials=batch.materials[i : i + 1],
            scales=batch.scales[i : i + 1],
        )
        assert np.array_equal(first[i : i + 1], r3d.render(one, width=40, height=32, jitter=0.7, seed=3))
    monkeypatch.setattr(r3d, "_CHUNK", 700)  # one scene and a few hundred pixels per chunk
    assert np.array_equal(first, r3d.render(batch, width=40, height=32, jitter=0.7, seed=3))


def test_jitter_depends_on_seed_and_key_only():
    batch = mixed_batch()
    plain = r3d.render(batch, width=40, height=32)
    assert np.array_equal(plain, r3d.render(batch, width=40, height=32, seed=9))  # no jitter: seed unused
    a = r3d.render(batch, width=40, height=32, jitter=0.5, seed=1)
    b = r3d.render(batch, width=40, height=32, jitter=0.5, seed=2)
    assert not np.array_equal(a, plain) and not np.array_equal(a, b)
    rekeyed = SceneBatch(
        colors=batch.colors,
        shapes=batch.shapes,
        slots=batch.slots,
        num_slots=2,
        keys=batch.keys + 1,
        materials=batch.materials,
        scales=batch.scales,
    )
    assert not np.array_equal(a, r3d.render(rekeyed, width=40, height=32, jitter=0.5, seed=1))


def test_single_object_jitter_follows_its_slot():
    # The same object alone in slot 1 moves the same way whether or not slot 0 is filled.
    alone = scenes([[("red", "cube", 1)]], 2, keys=np.array([7]))
    both = scenes([[("blue", "sphere", 0), ("red", "cube", 1)]], 2, keys=np.array([7]))
    a, b = r3d.place_objects(alone, 1.0, 4), r3d.place_objects(both, 1.0, 4)
    assert (a.cx[0, 0], a.cy[0, 0], a.radius[0, 0], a.cos[0, 0]) == (
        b.cx[0, 1],
        b.cy[0, 1],
        b.radius[0, 1],
        b.cos[0, 1],
    )


# ---------------------------------------------------------------------------------------------- bad input


def test_unknown_shape_code():
    batch = scenes([[("red", "cube", 0)]], 1)
    bad = SceneBatch(colors=batch.colors, shapes=np.array([[3]]), slots=batch.slots, num_slots=1, keys=batch.keys)
    with pytest.raises(BindscopeError, match="unknown shape code 3.*codes 0..2"):
        r3d.render(bad)


def test_too_small_image():
    with pytest.raises(BindscopeError, match="too small; use at least 16 pixels"):
        r3d.render(scenes([[("red", "cube", 0)]], 1), width=15, height=64)
    with pytest.raises(BindscopeError, match="too small"):
        r3d.slot_centers(2, 64, 8)


@pytest.mark.parametrize("jitter", [-0.1, 1.5, float("nan")])
def test_jitter_outside_unit_interval(jitter):
    with pytest.raises(BindscopeError, match=r"jitter must lie in \[0, 1\]"):
        r3d.render(scenes([[("red", "cube", 0)]], 1), jitter=jitter)


def test_too_many_slots():
    with pytest.raises(BindscopeError, match="1 to 6 slots .* use fewer objects"):
        r3d.render(scenes([[("red", "cube", 0)]], 7))
    with pytest.raises(BindscopeError, match="1 to 6 slots"):
        r3d.identify(np.zeros((1, 32, 32, 3), dtype=np.uint8), 7)


def test_scale_too_large():
    with pytest.raises(BindscopeError, match=r"scales must lie in \(0, 1.0\]"):
        r3d.render(scenes([[("red", "cube", 0)]], 1, scales=1.5))


def test_colors_outside_unit_range():
    batch = scenes([[("red", "cube", 0)]], 1)
    bad = SceneBatch(colors=batch.colors * 255, shapes=batch.shapes, slots=batch.slots, num_slots=1, keys=batch.keys)
    with pytest.raises(BindscopeError, match="divide 8-bit colors by 255"):
        r3d.render(bad)


def test_unknown_material():
    with pytest.raises(BindscopeError, match=r"0 \(rubber\) or 1 \(metal\)"):
        r3d.render(scenes([[("red", "cube", 0)]], 1, materials=2))


def test_two_objects_in_one_slot():
    with pytest.raises(BindscopeError, match="same slot"):
        r3d.render(scenes([[("red", "cube", 0), ("blue", "sphere", 0)]], 2))


def test_identify_rejects_non_images():
    with pytest.raises(BindscopeError, match=r"uint8 RGB images \[B, H, W, 3\]"):
        r3d.identify(np.zeros((2, 32, 32), dtype=np.uint8), 1)
    with pytest.raises(BindscopeError, match="uint8 RGB"):
        r3d.identify(np.zeros((1, 32, 32, 3), dtype=np.float32), 1)
