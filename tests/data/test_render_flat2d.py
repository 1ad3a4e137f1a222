"""The flat 2-D renderer: known answers through identify(), layout, determinism and bad input."""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np
import pytest
from PIL import Image, ImageDraw

from bindscope.core.errors import BindscopeError
from bindscope.data.render import flat2d
from bindscope.data.render.base import PALETTE, PLACES, SceneBatch

NAMES = np.array(list(PALETTE), dtype=object)
RGB = np.array(list(PALETTE.values()), dtype=np.float32) / 255
SHAPE_NAMES = np.array(flat2d.SHAPES, dtype=object)
CLEVR_COLORS = ["blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow"]
SIDE = 48  # px per slot column in most tests: objects about 26 px across


def make_batch(shapes, colors, slots, num_slots, keys=None, scales=None) -> SceneBatch:
    """A SceneBatch from shape codes, PALETTE color indices and slots, all [B, K]."""
    shapes, colors, slots = (np.asarray(a, dtype=np.int64) for a in (shapes, colors, slots))
    keys = np.arange(len(shapes)) if keys is None else np.asarray(keys)
    return SceneBatch(
        colors=RGB[colors],
        shapes=shapes,
        slots=slots,
        num_slots=num_slots,
        keys=keys,
        scales=None if scales is None else np.asarray(scales, dtype=np.float64),
    )


def singles(num_slots: int) -> tuple[SceneBatch, np.ndarray, np.ndarray]:
    """Every (color, shape) alone at every slot: batch, expected color names, expected shape names."""
    rows = list(itertools.product(range(num_slots), range(len(PALETTE)), range(len(flat2d.SHAPES))))
    slot, color, shape = (np.array(c)[:, None] for c in zip(*rows))
    batch = make_batch(shape, color, slot, num_slots)
    want_color = np.full((len(rows), num_slots), "", dtype=object)
    want_shape = want_color.copy()
    want_color[np.arange(len(rows)), slot[:, 0]] = NAMES[color[:, 0]]
    want_shape[np.arange(len(rows)), slot[:, 0]] = SHAPE_NAMES[shape[:, 0]]
    return batch, want_color, want_shape


def clevr2d_scenes() -> tuple[SceneBatch, np.ndarray, np.ndarray]:
    """The 576 clevr2d scenes (8 colors x square/triangle/circle, all ordered pairs)."""
    objects = [(NAMES.tolist().index(c), s) for c in CLEVR_COLORS for s in range(3)]
    pairs = np.array([(objects[a], objects[b]) for a in range(24) for b in range(24)])  # [576, 2, 2]
    batch = make_batch(pairs[..., 1], pairs[..., 0], np.tile([0, 1], (576, 1)), 2)
    return batch, NAMES[pairs[..., 0]], SHAPE_NAMES[pairs[..., 1]]


@pytest.mark.parametrize("jitter", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("num_slots", [1, 2, 3, 4])
def test_identify_recovers_every_single_object_at_every_slot(num_slots, jitter):
    batch, want_color, want_shape = singles(num_slots)
    images = flat2d.render(batch, width=SIDE * num_slots, height=SIDE, jitter=jitter, seed=11)
    colors, shapes = flat2d.identify(images, num_slots)
    assert (colors == want_color).all()
    assert (shapes == want_shape).all()


@pytest.mark.parametrize("jitter", [0.0, 0.3, 1.0])
def test_identify_recovers_two_object_scenes(jitter):
    pairs = np.array(list(itertools.product(range(6), range(6))))  # all 36 ordered shape pairs
    colors = np.stack([np.arange(36) % 12, (np.arange(36) * 5 + 3) % 12], axis=1)
    batch = make_batch(pairs, colors, np.tile([0, 1], (36, 1)), 2)
    colors_seen, shapes_seen = flat2d.identify(
        flat2d.render(batch, width=2 * SIDE, height=SIDE, jitter=jitter, seed=2), 2
    )
    assert (colors_seen == NAMES[colors]).all()
    assert (shapes_seen == SHAPE_NAMES[pairs]).all()


def test_clevr2d_scenes_at_224_px_with_jitter():
    batch, want_color, want_shape = clevr2d_scenes()
    colors, shapes = flat2d.identify(flat2d.render(batch, jitter=0.5, seed=0), 2)
    assert (colors == want_color).all() and (shapes == want_shape).all()


def test_swapped_shape_names_are_caught():
    # A dataset whose names swap triangle and circle (as CLEVR's export swapped cylinder and sphere).
    batch, want_color, want_shape = clevr2d_scenes()
    claimed = np.vectorize({"triangle": "circle", "circle": "triangle", "square": "square"}.get, otypes=[object])(
        want_shape
    )
    _, shapes = flat2d.identify(flat2d.render(batch, width=2 * SIDE, height=SIDE), 2)
    disagree = shapes != claimed
    assert (disagree == (want_shape != "square")).all()


def polar(angles, radii, turn: float) -> list[tuple[float, float]]:
    """Polygon vertices around (32, 32) at the given angles (degrees) and radii, turned by ``turn``."""
    return [
        (32 + q * math.cos(math.radians(a + turn)), 32 + q * math.sin(math.radians(a + turn)))
        for a, q in zip(angles, radii)
    ]


def test_identify_reads_shapes_drawn_by_another_rasteriser():
    # PIL draws each shape, turned at random: identify knows silhouettes, not flat2d's drawing code.
    rng = np.random.default_rng(5)
    images, want = [], []
    for name in flat2d.SHAPES * 4:
        image = Image.new("RGB", (64, 64), flat2d.CANVAS)
        draw, turn, r = ImageDraw.Draw(image), rng.uniform(0, 360), rng.uniform(12, 28)
        if name == "circle":
            draw.ellipse([32 - r, 32 - r, 32 + r, 32 + r], fill=PALETTE["red"])
        elif name == "star":
            draw.polygon(polar(range(0, 360, 36), [r, 0.45 * r] * 5, turn), fill=PALETTE["red"])
        elif name == "diamond":
            draw.polygon(polar([0, 90, 180, 270], [r, 0.6 * r] * 2, turn), fill=PALETTE["red"])
        else:
            draw.regular_polygon(
                (32, 32, r), {"triangle": 3, "square": 4, "hexagon": 6}[name], rotation=turn, fill=PALETTE["red"]
            )
        images.append(np.asarray(image))
        want.append(name)
    colors, shapes = flat2d.identify(np.stack(images), 1)
    assert shapes[:, 0].tolist() == want and set(colors[:, 0]) == {"red"}


def test_empty_slots_are_empty_strings():
    batch = make_batch([[-1, 2, -1]], [[0, 1, 2]], [[0, 1, 2]], 3)
    images = flat2d.render(batch, width=3 * SIDE, height=SIDE)
    colors, shapes = flat2d.identify(images, 3)
    assert colors.tolist() == [["", "red", ""]] and shapes.tolist() == [["", "circle", ""]]
    blank = flat2d.render(make_batch([[-1]], [[0]], [[0]], 1), width=20, height=20)
    assert (blank == flat2d.CANVAS).all()


def test_pixels_are_exact_colors_on_the_exact_canvas():
    batch, _, _ = clevr2d_scenes()
    images = flat2d.render(batch, width=64, height=32, jitter=1.0)
    want = np.rint(batch.colors * 255).astype(np.uint8)  # [B, 2, 3]
    half = images.shape[2] // 2
    for slot, part in enumerate([images[:, :, :half], images[:, :, half:]]):
        background = (part == flat2d.CANVAS).all(-1)
        assert (~background).any(axis=(1, 2)).all()
        assert ((part == want[:, slot, None, None, :]).all(-1) | background).all()


def test_canvas_is_no_palette_color():
    table = np.array(list(PALETTE.values()))
    assert not (table == flat2d.CANVAS).all(axis=1).any()


def test_slot_centers_and_slot_order():
    centers = flat2d.slot_centers(2, 100, 40)
    np.testing.assert_allclose(centers, [[25, 20], [75, 20]])
    batch = make_batch([[0, 1]], [[1, 2]], [[0, 1]], 2)
    image = flat2d.render(batch, width=100, height=40)[0]
    # centroids of pixel centres (index + 0.5): slot 0 left of slot 1, both at their slot centres
    found = [np.argwhere((image == np.rint(RGB[c] * 255)).all(-1)).mean(axis=0)[::-1] + 0.5 for c in (1, 2)]
    assert found[0][0] < found[1][0]
    np.testing.assert_allclose(found[0], centers[0], atol=0.01)  # a square: symmetric about its centre
    np.testing.assert_allclose(found[1], centers[1], atol=2.0)  # a triangle: centroid near the centre


@pytest.mark.parametrize("num_slots", [1, 2, 3, 4, 5, 6])
def test_objects_stay_inside_their_slot_at_the_largest_size_and_jitter(num_slots):
    # Each object alone, largest scale, full jitter, many seeds: its pixels stay in its slot's
    # column and off the canvas border, so objects in different slots never overlap.
    n = 60
    slot = np.arange(n)[:, None] % num_slots
    batch = make_batch(
        np.arange(n)[:, None] % 6, np.full((n, 1), 1), slot, num_slots, scales=np.full((n, 1), flat2d.MAX_SCALE)
    )
    width, height = 224, 224
    images = flat2d.render(batch, width=width, height=height, jitter=1.0, seed=4)
    mask = (images != flat2d.CANVAS).any(-1)
    _, ys, xs = np.nonzero(mask)
    rows = np.nonzero(mask)[0]
    column = ((xs + 0.5) * num_slots / width).astype(int)
    assert (column == slot[rows, 0]).all()
    assert mask.any(axis=(1, 2)).all()
    assert ys.min() > 0 and ys.max() < height - 1 and xs.min() > 0 and xs.max() < width - 1


@pytest.mark.parametrize(("width", "height"), [(16, 16), (17, 33), (101, 57), (300, 90)])
def test_any_size_renders_inside_the_canvas(width, height):
    batch = make_batch([[5, 3, 0]], [[1, 2, 3]], [[0, 1, 2]], 3)
    images = flat2d.render(batch, width=width, height=height, jitter=1.0)
    assert images.shape == (1, height, width, 3) and images.dtype == np.uint8
    if min(width / 3, height) >= 32:
        colors, shapes = flat2d.identify(images, 3)
        assert colors.tolist() == [["red", "blue", "green"]] and shapes.tolist() == [["diamond", "star", "square"]]


def test_determinism_and_batch_independence():
    rng = np.random.default_rng(0)
    n = 24
    batch = make_batch(
        rng.integers(-1, 6, (n, 2)),
        rng.integers(0, 12, (n, 2)),
        np.tile([0, 1], (n, 1)),
        2,
        keys=rng.permutation(1000)[:n],
        scales=rng.uniform(0.5, 1.5, (n, 2)),
    )
    together = flat2d.render(batch, width=64, height=40, jitter=0.7, seed=9)
    assert together.tobytes() == flat2d.render(batch, width=64, height=40, jitter=0.7, seed=9).tobytes()
    for row in range(n):
        one = SceneBatch(
            colors=batch.colors[row : row + 1],
            shapes=batch.shapes[row : row + 1],
            slots=batch.slots[row : row + 1],
            num_slots=2,
            keys=batch.keys[row : row + 1],
            scales=batch.scales[row : row + 1],
        )
        assert flat2d.render(one, width=64, height=40, jitter=0.7, seed=9).tobytes() == together[row].tobytes()
    assert flat2d.render(batch, width=64, height=40, jitter=0.7, seed=10).tobytes() != together.tobytes()


def test_jitter_moves_turns_and_resizes_objects():
    batch = make_batch([[0, 0]], [[1, 1]], [[0, 1]], 2)
    still = flat2d.render(batch, width=128, height=64)
    moved = flat2d.render(batch, width=128, height=64, jitter=1.0, seed=3)
    assert not np.array_equal(still, moved)
    assert np.count_nonzero((moved[0, :, :64] != flat2d.CANVAS).any(-1)) != np.count_nonzero(
        (still[0, :, :64] != flat2d.CANVAS).any(-1)
    )
    # without jitter a square is an axis-aligned box filled completely
    ys, xs = np.nonzero((still[0, :, :64] != flat2d.CANVAS).any(-1))
    assert len(ys) == (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)


# --------------------------------------------------------------------------- bad input


def test_unknown_shape_code_is_refused():
    with pytest.raises(BindscopeError, match=r"unknown shape code 6: flat2d draws codes 0\.\.5"):
        flat2d.render(make_batch([[6]], [[0]], [[0]], 1), width=32, height=32)


def test_small_images_are_refused():
    batch = make_batch([[0]], [[0]], [[0]], 1)
    with pytest.raises(BindscopeError, match="at least 16"):
        flat2d.render(batch, width=15, height=32)
    with pytest.raises(BindscopeError, match="at least 16"):
        flat2d.slot_centers(2, 32, 8)
    with pytest.raises(BindscopeError, match="whole numbers of pixels"):
        flat2d.render(batch, width=32.5, height=32)


@pytest.mark.parametrize("jitter", [-0.1, 1.5, float("nan")])
def test_jitter_outside_unit_interval_is_refused(jitter):
    with pytest.raises(BindscopeError, match=r"jitter must lie in \[0, 1\]"):
        flat2d.render(make_batch([[0]], [[0]], [[0]], 1), width=32, height=32, jitter=jitter)


def test_too_large_scale_is_refused():
    with pytest.raises(BindscopeError, match=r"scales must lie in \(0, 1.5\]"):
        flat2d.render(make_batch([[0]], [[0]], [[0]], 1, scales=[[2.0]]), width=32, height=32)


def test_colors_outside_unit_range_or_equal_to_the_canvas_are_refused():
    batch = make_batch([[0]], [[0]], [[0]], 1)
    bad = SceneBatch(colors=batch.colors * 255, shapes=batch.shapes, slots=batch.slots, num_slots=1, keys=batch.keys)
    with pytest.raises(BindscopeError, match="divide 8-bit colors by 255"):
        flat2d.render(bad, width=32, height=32)
    hidden = SceneBatch(
        colors=np.full((1, 1, 3), 220 / 255, dtype=np.float32),
        shapes=batch.shapes,
        slots=batch.slots,
        num_slots=1,
        keys=batch.keys,
    )
    with pytest.raises(BindscopeError, match="equals the canvas color"):
        flat2d.render(hidden, width=32, height=32)


def test_two_objects_in_one_slot_are_refused():
    with pytest.raises(BindscopeError, match="scene row 0 puts two objects in one slot"):
        flat2d.render(make_batch([[0, 1]], [[0, 1]], [[1, 1]], 2), width=32, height=32)


def test_identify_refuses_non_images():
    with pytest.raises(BindscopeError, match=r"uint8 \[B, H, W, 3\]"):
        flat2d.identify(np.zeros((2, 32, 32, 3), dtype=np.float32), 2)
    with pytest.raises(BindscopeError, match="num_slots must be"):
        flat2d.identify(np.zeros((2, 32, 32, 3), dtype=np.uint8), 0)


# --------------------------------------------------------------------------- the same pictures, drawn faster

# sha256 of the images of each case below as flat2d drew them before its stamps became row spans (issue 57):
# drawing may get faster, never different.
BEFORE_ISSUE_57 = {
    "clevr2d 96x48": "4f7f6693a3081aed00c9620db5b0e98cf95fa025bffd30841377341e0d5f8a0b",
    "clevr2d 96x48 jitter 0.5": "2423a4f7d7366287bee41f78b88c084468d128bd73031e94636a9f5d74a2c0b1",
    "mixed 80x40": "eb77782453fd9da61f68ddbb6986131d4cebdea2b4138d7b0e88993090144ee1",
    "mixed 80x40 jitter 1": "15cca060501bca36feeea8c44163dd64e105698529c554e3b717686c13b067cf",
    "places 64x64 jitter 0.6": "a7cddc42fe40d502f8ebdde87bc2ce2a5fc062521a9afff621b32ff6548332c4",
    "counts 96x64 jitter 0.6": "a6de4c4cc8efb1d2128fe7e255c77558e839db29b142cb6acc6c4f6aa2f3b5cf",
}


def _cases() -> dict[str, tuple[SceneBatch, dict]]:
    clevr, _, _ = clevr2d_scenes()
    rng = np.random.default_rng(57)
    n = 60
    mixed = make_batch(
        rng.integers(-1, 6, (n, 3)),
        rng.integers(0, 12, (n, 3)),
        np.tile([0, 1, 2], (n, 1)),
        3,
        keys=rng.permutation(10_000)[:n],
        scales=rng.uniform(0.3, 1.5, (n, 3)),
    )
    pairs = [("left of", "right of"), ("right of", "left of"), ("above", "below"), ("below", "above")]
    sides = np.array([[PLACES.index(a), PLACES.index(b)] for a, b in pairs])
    colors, shapes = rng.integers(0, 12, (n, 2)), rng.integers(0, 6, (n, 2))
    placed = SceneBatch(
        colors=RGB[colors],
        shapes=shapes,
        slots=np.tile([0, 1], (n, 1)),
        num_slots=2,
        keys=np.arange(n),
        places=sides[rng.integers(0, 4, n)],
    )
    colors, shapes = rng.integers(0, 12, (n, 2)), rng.integers(0, 6, (n, 2))
    counted = SceneBatch(
        colors=RGB[colors],
        shapes=shapes,
        slots=np.tile([0, 1], (n, 1)),
        num_slots=2,
        keys=np.arange(n),
        counts=rng.integers(1, 5, (n, 2)),
    )
    return {
        "clevr2d 96x48": (clevr, {"width": 96, "height": 48}),
        "clevr2d 96x48 jitter 0.5": (clevr, {"width": 96, "height": 48, "jitter": 0.5, "seed": 0}),
        "mixed 80x40": (mixed, {"width": 80, "height": 40}),
        "mixed 80x40 jitter 1": (mixed, {"width": 80, "height": 40, "jitter": 1.0, "seed": 4}),
        "places 64x64 jitter 0.6": (placed, {"width": 64, "height": 64, "jitter": 0.6, "seed": 1}),
        "counts 96x64 jitter 0.6": (counted, {"width": 96, "height": 64, "jitter": 0.6, "seed": 2}),
    }


@pytest.mark.parametrize("case", list(BEFORE_ISSUE_57))
def test_images_are_those_drawn_before(case):
    batch, settings = _cases()[case]
    assert hashlib.sha256(flat2d.render(batch, **settings).tobytes()).hexdigest() == BEFORE_ISSUE_57[case]


def _keys(n: int, seed: int) -> np.ndarray:
    """Random stamp keys (shape, radius, turn, sub-pixel x, y), a third of them on exact turns and offsets."""
    rng = np.random.default_rng(seed)
    exact = rng.random((n, 3)) < 0.3
    turn = np.where(exact[:, 0], rng.choice([0.0, 90.0, -90.0, 45.0, 180.0, 20.0, -20.0], n), rng.uniform(-20, 20, n))
    fx = np.where(exact[:, 1], rng.choice([0.0, 0.25, 0.5], n), rng.random(n))
    fy = np.where(exact[:, 2], rng.choice([0.0, 0.25, 0.5], n), rng.random(n))
    radius = np.exp(rng.uniform(np.log(0.6), np.log(40.0), n))
    return np.stack([rng.integers(0, len(flat2d.SHAPES), n), radius, turn, fx, fy], axis=1)


@pytest.mark.parametrize("seed", [0, 1])
def test_row_spans_are_the_full_inside_test(seed):
    keys = _keys(600, seed)
    half = int(np.ceil(keys[:, 1].max())) + 1
    want = flat2d._inside(keys, half)
    lo, hi = flat2d._spans(keys, half)
    column = np.arange(2 * half + 1)
    got = (lo[:, :, None] <= column) & (column < hi[:, :, None])
    convex = keys[:, 0] != flat2d.SHAPES.index("star")
    assert (got[convex] == want[convex]).all()
    assert not got[~convex].any(), "stars have no spans: the full test draws them"
    assert (flat2d._span_boxes(lo, hi)[convex] == flat2d._mask_boxes(want)[convex]).all()
    rows, cols = want.any(axis=2), want.any(axis=1)
    top, left = rows.argmax(axis=1), cols.argmax(axis=1)
    boxes = np.stack([top, left, rows.sum(axis=1) + top, cols.sum(axis=1) + left], axis=1) * rows.any(axis=1)[:, None]
    assert (flat2d._mask_boxes(want)[convex] == boxes[convex]).all()  # convex: no gaps between first and last


def test_wrong_guesses_are_settled_exactly():
    rng = np.random.default_rng(3)
    side = 41
    turns = np.sort(rng.integers(0, side + 1, (500, 1)), axis=1)  # the first column where each entry's test fails

    def keep(col, at):
        return col < turns[at, 0]

    for guess in (np.full(500, np.nan), rng.uniform(-100, 100, 500), turns[:, 0] - 0.5):
        assert (flat2d._settle(keep, guess, 0, side, side) == turns[:, 0]).all()


def test_a_busy_thread_pool_does_not_hold_drawing_up():
    import threading

    from bindscope.core.threads import shared_pool

    pool = shared_pool()
    release, started = threading.Event(), threading.Semaphore(0)

    def busy():
        started.release()
        release.wait(30)

    blockers = [pool.submit(busy) for _ in range(pool._max_workers)]
    try:
        for _ in blockers:
            assert started.acquire(timeout=30)
        batch, settings = _cases()["mixed 80x40 jitter 1"]
        images = flat2d.render(batch, **settings)  # the canvas is filled here: no pool thread is free
        assert hashlib.sha256(images.tobytes()).hexdigest() == BEFORE_ISSUE_57["mixed 80x40 jitter 1"]
    finally:
        release.set()
        for blocker in blockers:
            blocker.result()


@pytest.mark.parametrize("seed", [0, 9, 2**32 - 1, 2**40])
def test_jitter_draws_are_each_scenes_own_generator(seed):
    rng = np.random.default_rng(1)
    keys = np.concatenate([np.arange(40), rng.integers(0, 2**32, 40), [2**33]])  # the last one: numpy's own path
    batch = make_batch(np.zeros((81, 2)), np.zeros((81, 2)), np.tile([0, 1], (81, 1)), 2, keys=keys)
    want = np.stack([batch.jitter_rng(seed, row).uniform(-1.0, 1.0, size=(2, 3, 4)) for row in range(81)])
    np.testing.assert_array_equal(batch.jitter_draws(seed, (2, 3, 4)), want)
    np.testing.assert_array_equal(
        make_batch([[0]], [[0]], [[0]], 1, keys=[5]).jitter_draws(seed, (4,)), want[5:6, 0, 0]
    )
