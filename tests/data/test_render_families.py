"""Relation and count scenes drawn by both renderers and read back: places, copies, planted wrong labels."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.data.check import check_labels
from bindscope.data.datasets import Dataset, build_dataset, load_dataset
from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.data.render import flat2d, silhouette
from bindscope.data.render import raycast3d as r3d
from bindscope.data.render.base import MAX_COPIES, PALETTE, PLACES, SceneBatch
from bindscope.data.render.images import _rows, scene_batch
from bindscope.space.captions import count_swap, relation_swap
from bindscope.space.concepts import SceneSet

SCENES = 96  # scenes of each preset built here (every object in every slot, with swaps; its single-object images too)
#: Image sizes at which each preset reads back right at any jitter (copies and far objects are small).
SIZES = {"clevr2d-rel": 96, "clevr2d-count": 128, "clevr-rel": 160}
RGB = {name: np.asarray(rgb, dtype=np.float32) / 255 for name, rgb in PALETTE.items()}
LEFT, RIGHT, ABOVE, BELOW, FRONT, BEHIND = range(6)
assert PLACES[FRONT] == "in front of" and PLACES[BELOW] == "below"


def small(name: str, jitter: float, **changes) -> dict:
    """The preset's config with SCENES scenes, its test size and ``jitter``; ``changes`` replace top-level keys."""
    config = get_preset(name).config.model_dump()
    config["scenes"]["max_scenes"] = SCENES
    config["image"].update(width=SIZES[name], height=SIZES[name], jitter=jitter)
    return {**config, **changes}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """Build (once per module) a small dataset of a preset at a jitter."""
    done: dict[tuple[str, float], Path] = {}

    def build(name: str, jitter: float) -> Dataset:
        if (name, jitter) not in done:
            out = tmp_path_factory.mktemp("families") / f"{name}-{jitter}"
            config = small(name, jitter)
            # 3-D single-object images are the slow part: with jitter only in test_an_object_alone_stands_at_its_place
            config["image"]["single_objects"] = name != "clevr-rel" or jitter == 0
            build_dataset(preset_from_dict(config, origin=name), out, workers=2)
            done[name, jitter] = out
        return load_dataset(done[name, jitter])

    return build


def relabelled(ds: Dataset, config: dict | None = None, scenes: SceneSet | None = None) -> Dataset:
    """The same images under other names: another config (e.g. relations renamed) and/or other scenes."""
    preset = ds.preset if config is None else preset_from_dict(config, origin="planted names")
    values = ds.scenes.scenes if scenes is None else scenes.scenes
    return dataclasses.replace(ds, preset=preset, scenes=SceneSet(preset.space, values))


def batch(colors, shapes, *, places=None, counts=None, keys=None, scales=None) -> SceneBatch:
    """A batch from [B, K] color names and shape codes, in slots 0..K-1."""
    colors, shapes = np.asarray(colors, dtype=object), np.asarray(shapes)
    b, k = shapes.shape
    rgb = np.stack([[RGB[c] for c in row] for row in colors])
    return SceneBatch(
        colors=rgb,
        shapes=shapes,
        slots=np.broadcast_to(np.arange(k), (b, k)).copy(),
        num_slots=k,
        keys=np.arange(b) if keys is None else np.asarray(keys),
        places=None if places is None else np.asarray(places),
        counts=None if counts is None else np.asarray(counts),
        scales=None if scales is None else np.full((b, k), scales),
    )


def blobs(mask: np.ndarray) -> list[list[tuple[float, float, int, int, int, int]]]:
    """Per image, each 8-connected blob's centroid (x, y) and box (x0, y0, x1, y1)."""
    pix, labels = silhouette.components(mask)
    img, y, x = np.unravel_index(pix, mask.shape)
    out: list[list[tuple[float, float, int, int, int, int]]] = [[] for _ in range(len(mask))]
    for label in np.unique(labels):
        m = labels == label
        out[img[m][0]].append((x[m].mean(), y[m].mean(), x[m].min(), y[m].min(), x[m].max(), y[m].max()))
    return out


# ---------------------------------------------------------------------------------------------- presets


@pytest.mark.parametrize("jitter", [0.0, 0.3])
@pytest.mark.parametrize("name", ["clevr2d-rel", "clevr2d-count", "clevr-rel"])
def test_every_image_preset_reads_back_right(name: str, jitter: float, built) -> None:
    ds = built(name, jitter)
    report = check_labels(ds)
    assert report.ok, report.summary()
    singles = 0 if ds.single_images is None else ds.single_images.size
    assert report.checked == SCENES + singles
    assert singles == 2 * ds.space.num_objects or (name == "clevr-rel" and jitter > 0)


def test_relation_swap_names_fail_the_check(built) -> None:
    """Subject and object exchanged, the relation kept: every scene's names contradict its pixels."""
    ds = built("clevr2d-rel", 0.0)
    report = check_labels(relabelled(ds, scenes=relation_swap(ds.scenes)[0]))
    assert len(report.mismatches) == SCENES  # single-object images keep their (right) names
    first = report.mismatches[0]
    named, drawn = first["named"], first["drawn"]
    place = next(p for p in ("left of", "above") if f" {p} " in named)
    subject, other = named.split(f" {place} ")
    assert drawn == f"{other} {place} {subject}"  # e.g. named "red square left of blue circle", drawn the other way
    assert f"named {named}, drawn {drawn}" in report.summary()


def test_renamed_places_fail_the_check_in_3d(built) -> None:
    """Names "right of" and "left of" exchanged: every image of a left/right pair, and every object alone on the
    left or right, disagrees; in front of / behind ones still agree."""
    ds = built("clevr-rel", 0.0)
    config = small("clevr-rel", 0.0, relations=["right of", "in front of"])
    report = check_labels(relabelled(ds, config))
    place = ds.space.concept_index("place")
    sideways = np.isin(np.asarray(ds.space.values[place])[ds.scenes.scenes[:, 0, place]], ["left of", "right of"])
    singles = np.isin(np.asarray(ds.space.values[place])[ds.space.all_objects()[:, place]], ["left of", "right of"])
    assert 0 < sideways.sum() < SCENES
    assert len(report.mismatches) == sideways.sum() + 2 * singles.sum()
    assert any("(left of)" in m["drawn"] and "(right of)" in m["named"] for m in report.mismatches)


def test_count_swap_and_shifted_count_names_fail_the_check(built) -> None:
    ds = built("clevr2d-count", 0.0)
    count = ds.space.concept_index("count")
    differ = (ds.scenes.scenes[:, 0, count] != ds.scenes.scenes[:, 1, count]).sum()
    report = check_labels(relabelled(ds, scenes=count_swap(ds.scenes)[0]))
    assert differ > 0 and len(report.mismatches) == differ  # scenes whose two counts are equal are unchanged
    assert " x" in report.mismatches[0]["named"] and " x" in report.mismatches[0]["drawn"]
    shifted = check_labels(relabelled(ds, small("clevr2d-count", 0.0, counts=[2, 3, 4])))
    assert len(shifted.mismatches) == shifted.checked  # every image names one copy more than it shows


# ---------------------------------------------------------------------------------------------- layout


def test_flat2d_jitter_keeps_every_relation_clear() -> None:
    pairs = [(LEFT, RIGHT), (RIGHT, LEFT), (ABOVE, BELOW), (BELOW, ABOVE)] * 16
    b = batch([["red", "blue"]] * 64, [[0, 3]] * 64, places=pairs, scales=flat2d.MAX_SCALE)
    images = flat2d.render(b, width=128, height=96, jitter=1.0, seed=5)
    for (subject, _), found in zip(pairs, blobs((images != flat2d.CANVAS).any(-1))):
        assert len(found) == 2  # never touching
        (ax, ay, *_), (bx, by, *_) = sorted(found, key=lambda f: f[0] if subject in (LEFT, RIGHT) else f[1])
        along, across = (bx - ax, abs(by - ay)) if subject in (LEFT, RIGHT) else (by - ay, abs(bx - ax))
        assert along > 2 * across and along > 20  # the pair is side by side (or one above the other), clearly


def test_raycast3d_jitter_keeps_every_relation_clear() -> None:
    pairs = [(LEFT, RIGHT), (RIGHT, LEFT), (FRONT, BEHIND), (BEHIND, FRONT)] * 10
    b = batch([["red", "blue"]] * 40, [[0, 1]] * 40, places=pairs)
    objs = r3d.place_objects(b, 1.0, 3)  # floor positions, x to the right, y away from the camera
    dx, dy = objs.cx[:, 1] - objs.cx[:, 0], objs.cy[:, 1] - objs.cy[:, 0]
    side = np.array([p[0] in (LEFT, RIGHT) for p in pairs])
    sign = np.array([1 if p[0] in (LEFT, FRONT) else -1 for p in pairs])
    assert (sign[side] * dx[side] > 4 * np.abs(dy[side])).all()  # subject left of the object, at one depth
    assert (sign[~side] * dy[~side] > 4 * np.abs(dx[~side])).all()  # subject nearer the camera
    images = r3d.render(b, width=96, height=96, jitter=1.0, seed=3)
    for (subject, _), found in zip(pairs, blobs(r3d._object_mask(images))):
        big = sorted(found, key=lambda f: (f[4] - f[2]) * (f[5] - f[3]))[-2:]
        xs = [f[0] for f in big]
        ys = [f[1] for f in big]
        if subject in (LEFT, RIGHT):
            assert abs(xs[0] - xs[1]) > 3 * abs(ys[0] - ys[1])
        else:  # in front is lower in the image, behind higher
            assert abs(ys[0] - ys[1]) > 3 * abs(xs[0] - xs[1])


@pytest.mark.parametrize("module", [flat2d, r3d], ids=["flat2d", "raycast3d"])
def test_an_object_alone_stands_at_its_place(module) -> None:
    drawn = [p for p in range(len(PLACES)) if PLACES[p] in module.DRAWN_PLACES]
    places = np.repeat(drawn, 2)[:, None]
    b = batch([["green"]] * len(places), [[1]] * len(places), places=places, keys=np.arange(len(places)) + 7)
    b = dataclasses.replace(b, slots=np.tile([0, 1], len(drawn))[:, None], num_slots=2)  # slot 2 too: no matter
    images = module.render(b, width=160, height=160, jitter=1.0, seed=1)
    mask = (images != flat2d.CANVAS).any(-1) if module is flat2d else r3d._object_mask(images)
    for place, found in zip(places[:, 0], blobs(mask)):
        ((x, y, *_),) = found
        # the middle of the picture, or of the floor between the places (depth foreshortens: a smaller margin)
        (mid_x, mid_y), dy = ((80, 80), 25) if module is flat2d else (r3d.project([0.0, 1.5, 0.85], 160, 160), 12)
        expect = {
            LEFT: x < mid_x - 25 and abs(y - mid_y) < dy,
            RIGHT: x > mid_x + 25 and abs(y - mid_y) < dy,
            ABOVE: y < mid_y - 25 and abs(x - mid_x) < 25,
            BELOW: y > mid_y + 25 and abs(x - mid_x) < 25,
            BEHIND: y < mid_y - dy and abs(x - mid_x) < 25,
            FRONT: y > mid_y + dy and abs(x - mid_x) < 25,
        }
        assert expect[place], (PLACES[place], x, y)
    got = module.read_back(images, 2, places=True)
    assert (got.colors[np.arange(len(places)), places[:, 0]] == "green").all() and (got.counts.sum(1) == 1).all()


def test_flat2d_copies_stay_apart_inside_their_cell() -> None:
    counts = np.array([[c, d] for c in range(1, MAX_COPIES + 1) for d in range(1, MAX_COPIES + 1)] * 3)
    b = batch([["purple", "cyan"]] * len(counts), [[3, 5]] * len(counts), counts=counts, scales=flat2d.MAX_SCALE)
    images = flat2d.render(b, width=160, height=128, jitter=1.0, seed=2)
    for want, found in zip(counts, blobs((images != flat2d.CANVAS).any(-1))):
        assert len(found) == want.sum()  # every copy its own blob: none touch
        slot = [0 if f[4] < 80 else 1 for f in found]
        assert all(f[2] >= 80 * s and f[4] < 80 * (s + 1) for f, s in zip(found, slot))  # inside its column
        assert np.bincount(slot, minlength=2).tolist() == want.tolist()
    got = flat2d.read_back(images, 2, copies=True)
    assert (got.counts == counts).all() and (got.shapes == [["star", "diamond"]]).all()


def test_flat2d_places_and_counts_together() -> None:
    places, counts = [[LEFT, RIGHT], [ABOVE, BELOW], [BELOW, ABOVE], [RIGHT, LEFT]], [[4, 3], [2, 4], [1, 3], [3, 1]]
    b = batch([["red", "blue"]] * 4, [[0, 2]] * 4, places=places, counts=counts)
    got = flat2d.read_back(flat2d.render(b, width=192, height=192, jitter=1.0, seed=0), 2, places=True)
    for i, (p, c) in enumerate(zip(places, counts)):
        assert got.colors[i, p].tolist() == ["red", "blue"] and got.counts[i, p].tolist() == c
        assert got.counts[i].sum() == sum(c)


def test_raycast3d_draws_and_reads_counts() -> None:
    counts = np.array([[c, d] for c in range(1, MAX_COPIES + 1) for d in range(1, MAX_COPIES + 1)])
    shapes = np.array([[0, 1], [1, 2], [2, 0], [1, 1]] * 4)
    b = batch([["yellow", "gray"]] * len(counts), shapes, counts=counts)
    images = r3d.render(b, width=224, height=224, jitter=1.0, seed=4)
    got = r3d.read_back(images, 2, copies=True)
    assert (got.counts == counts).all()
    assert (got.colors == [["yellow", "gray"]]).all() and (got.shapes == np.asarray(r3d.SHAPES)[shapes]).all()
    one = r3d.read_back(r3d.render(batch([["red"]], [[2]], counts=[[3]]), width=160, height=160), 1, copies=True)
    assert one.counts.tolist() == [[3]] and one.shapes.tolist() == [["sphere"]]


def test_count_layout_boxes_keep_copies_apart_and_in_the_picture() -> None:
    for k, layout in r3d.COUNT_LAYOUTS.items():
        cells = layout.cells()
        for width, height in [(224, 224), (480, 320), (320, 480)]:
            boxes = r3d._boxes(cells, width, height)
            assert (boxes[:, :2] >= -0.5).all() and (boxes[:, 2] <= width - 0.5).all()
            assert (boxes[:, 3] <= height - 0.5).all()
            per = len(r3d.COPY_CELLS)
            groups = [[s * per + c for c in r3d._ARRANGEMENT[n, :n]] for s in range(k) for n in range(1, 5)]
            for s, group in enumerate(groups):  # copies of one arrangement, and of different slots
                others = [g for t, g in enumerate(groups) if t // 4 != s // 4]
                for i in group:
                    for j in [*(g for g in group if g != i), *(x for g in others for x in g)]:
                        apart_x = boxes[i, 2] < boxes[j, 0] or boxes[j, 2] < boxes[i, 0]
                        apart_y = boxes[i, 3] < boxes[j, 1] or boxes[j, 3] < boxes[i, 1]
                        assert apart_x or apart_y, (k, width, height, i, j)
    boxes = r3d._boxes(r3d.PLACE_LAYOUT, 224, 224)
    for i, j in ((0, 1), (2, 3)):  # left / right, behind / in front
        assert boxes[i, 2] < boxes[j, 0] or boxes[j, 3] < boxes[i, 1] or boxes[i, 3] < boxes[j, 1]


# ---------------------------------------------------------------------------------------------- unchanged


# sha256 (16 hex digits) of the images the committed renderers (8a9f47f) draw of the clevr2d and clevr presets'
# scenes (every 12th / 24th) and single-object images, at seed 3.
KNOWN = {
    ("flat2d", 0.0): "f8e6e8de4588f581",
    ("flat2d", 0.5): "6829ba5dbcbc13b0",
    ("raycast3d", 0.0): "1d8ac626c8452128",
    ("raycast3d", 0.5): "ba8db95c999f348a",
}


@pytest.mark.parametrize(("name", "jitter"), list(KNOWN))
def test_attribute_presets_draw_the_same_bytes_as_before(name: str, jitter: float) -> None:
    module = flat2d if name == "flat2d" else r3d
    preset, step, width, height = ("clevr2d", 12, 64, 64) if name == "flat2d" else ("clevr", 24, 48, 40)
    p = get_preset(preset)
    scenes = p.build_scenes()
    rows = _rows(scene_batch(scenes, module.SHAPES, np.arange(len(scenes))), np.arange(0, len(scenes), step))
    u = p.space.num_objects
    alone = SceneSet.singles(p.space, 1).subset(np.repeat(np.arange(u), 2))
    singles = scene_batch(
        alone, module.SHAPES, 10_000 + np.arange(2 * u), slots=np.tile([0, 1], u)[:, None], num_slots=2
    )
    digest = hashlib.sha256()
    for b in (rows, singles):
        digest.update(module.render(b, width=width, height=height, jitter=jitter, seed=3).tobytes())
    assert digest.hexdigest()[:16] == KNOWN[name, jitter]


# ---------------------------------------------------------------------------------------------- refused


def test_places_and_counts_a_renderer_cannot_draw_are_refused() -> None:
    with pytest.raises(BindscopeError, match="flat2d cannot draw the place 'in front of'"):
        flat2d.render(batch([["red", "blue"]], [[0, 1]], places=[[FRONT, BEHIND]]))
    with pytest.raises(BindscopeError, match="raycast3d cannot draw the place 'above' unambiguously"):
        r3d.render(batch([["red", "blue"]], [[0, 1]], places=[[ABOVE, BELOW]]), width=32, height=32)
    with pytest.raises(BindscopeError, match="raycast3d draws places or counts, not both"):
        r3d.render(batch([["red", "blue"]], [[0, 1]], places=[[LEFT, RIGHT]], counts=[[1, 2]]), width=32, height=32)
    with pytest.raises(BindscopeError, match="raycast3d draws counts in scenes of 1 to 2 objects"):
        r3d.render(batch([["red", "blue", "gray"]], [[0, 1, 2]], counts=[[1, 2, 3]]), width=32, height=32)
    with pytest.raises(BindscopeError, match="counts must be ints"):
        batch([["red"]], [[0]], counts=[[MAX_COPIES + 1]])
    with pytest.raises(BindscopeError, match="places must be ints"):
        batch([["red"]], [[0]], places=[[len(PLACES)]])
    with pytest.raises(BindscopeError, match="puts two objects in one place"):
        flat2d.render(batch([["red", "blue"]], [[0, 1]], places=[[LEFT, LEFT]]))


def test_cli_builds_checks_and_previews_a_relation_preset(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "rel"
    built = run_cli("dataset", "build", "clevr2d-rel", "--image-size", "64", "--jitter", "0.3", "--out", out, "-q")
    assert built.returncode == 0, built.stderr
    check = run_cli("dataset", "check", out, "--scenes", "100")
    assert check.returncode == 0, check.stderr
    assert "labels match pixels: 292 of 292 images" in check.stdout  # 100 scenes, 96 objects x 2 positions
    preview = run_cli("dataset", "preview", out, "--out", tmp_path / "grid.png", "--rows", "2", "--cols", "2")
    assert preview.returncode == 0, preview.stderr
    with Image.open(tmp_path / "grid.png") as im:
        assert im.size[0] > 400
