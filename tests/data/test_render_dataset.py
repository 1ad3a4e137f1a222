"""Rendered dataset folders: images for every scene and every object alone, resumable, label-checked."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.data.check import check_labels
from bindscope.data.datasets import build_dataset, load_dataset
from bindscope.data.presets import get_preset, preset_from_dict, with_image_settings
from bindscope.space.concepts import ConceptSpace, SceneSet
from cli_checks import assert_one_line_error

SIZE = "96"


@pytest.fixture(scope="module")
def clevr2d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("render") / "clevr2d"
    build_dataset(with_image_settings(get_preset("clevr2d"), size=SIZE), out, workers=2)
    return out


@pytest.fixture(scope="module")
def clevr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("render") / "clevr"
    build_dataset(with_image_settings(get_preset("clevr"), size=SIZE), out, workers=2)
    return out


def test_every_scene_and_every_single_object_has_an_image(clevr2d: Path) -> None:
    ds = load_dataset(clevr2d)
    assert all(ds.images) and ds.single_images.shape == (24, 2)
    assert ds.images[5] == "images/000005.png" and ds.single_images[3, 1] == "images/single/0003_slot2.png"
    with Image.open(clevr2d / ds.images[0]) as im:
        assert im.size == (96, 96) and im.mode == "RGB"
    m = json.loads((clevr2d / "manifest.json").read_text())
    assert m["images"] == {"rendered": 576, "single_objects": 24, "single_positions": 2}
    assert m["spec"]["image"]["width"] == 96


@pytest.mark.parametrize("name", ["clevr2d", "clevr"])
def test_labels_match_pixels_for_every_preset_that_renders(name: str, request: pytest.FixtureRequest) -> None:
    ds = load_dataset(request.getfixturevalue(name))
    report = check_labels(ds)
    assert report.ok, report.summary()
    assert report.checked == 576 + 48


def _swap_shape_names(ds, a: int, b: int):
    """The same images under names whose shape indices a and b are swapped (the published CLEVR export's error)."""
    config = ds.preset.config.model_dump()
    shapes = list(config["concepts"]["shape"])
    shapes[a], shapes[b] = shapes[b], shapes[a]
    config["concepts"]["shape"] = shapes
    preset = preset_from_dict(config, origin="swapped names")
    return dataclasses.replace(ds, preset=preset, scenes=SceneSet(preset.space, ds.scenes.scenes))


@pytest.mark.parametrize(("name", "a", "b"), [("clevr", 1, 2), ("clevr2d", 1, 2)])
def test_swapped_shape_names_fail_the_check(name: str, a: int, b: int, request: pytest.FixtureRequest) -> None:
    ds = _swap_shape_names(load_dataset(request.getfixturevalue(name)), a, b)
    assert isinstance(ds.space, ConceptSpace)
    report = check_labels(ds)
    assert not report.ok
    # every image showing a shape of index a or b disagrees: 16 objects x 2 slots alone, and their scenes
    affected = np.isin(ds.scenes.scenes[:, :, 1], [a, b]).any(axis=1).sum()
    assert len(report.mismatches) == 32 + affected
    assert "named" in report.summary() and "drawn" in report.summary()


def test_rebuilding_renders_only_what_is_missing(clevr2d: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(clevr2d, root)
    kept = root / "images" / "000001.png"
    stamp = kept.stat().st_mtime_ns
    (root / "images" / "000007.png").unlink()
    shutil.rmtree(root / "images" / "single")
    ds = build_dataset(with_image_settings(get_preset("clevr2d"), size=SIZE), root, workers=1)
    assert (root / "images" / "000007.png").is_file() and ds.single_images.shape == (24, 2)
    assert kept.stat().st_mtime_ns == stamp
    a = np.asarray(Image.open(root / "images" / "000007.png"))
    b = np.asarray(Image.open(clevr2d / "images" / "000007.png"))
    np.testing.assert_array_equal(a, b)  # deterministic


def test_a_build_killed_before_its_manifest_counted_the_images_is_finished_again(clevr2d: Path, tmp_path: Path) -> None:
    """Every image drawn and listed, but the kill fell before the manifest (written last) counted them: building
    again renders nothing and writes the manifest an uninterrupted build writes."""
    root = tmp_path / "ds"
    shutil.copytree(clevr2d, root)
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "images": {"rendered": 0}}))
    kept = root / "images" / "000001.png"
    stamp = kept.stat().st_mtime_ns
    build_dataset(with_image_settings(get_preset("clevr2d"), size=SIZE), root, workers=1)
    assert json.loads((root / "manifest.json").read_text())["images"] == manifest["images"]
    assert kept.stat().st_mtime_ns == stamp


def test_an_interrupted_render_leaves_only_whole_pngs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bindscope.data.render.images as images

    real = images.render_files
    calls = {"n": 0}

    def failing(*args):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(images, "render_files", failing)
    preset = with_image_settings(get_preset("clevr2d"), size="48")
    with pytest.raises(KeyboardInterrupt):
        build_dataset(preset, tmp_path / "ds", workers=1)
    pngs = list((tmp_path / "ds" / "images").glob("*.png"))
    assert len(pngs) == 3 * images.CHUNK
    for p in pngs:
        Image.open(p).load()  # every file there is a whole PNG
    assert not list((tmp_path / "ds" / "images").glob(".*")), "no temporary files left"
    monkeypatch.undo()
    ds = build_dataset(preset, tmp_path / "ds", workers=1)
    assert all(ds.images) and load_dataset(tmp_path / "ds").single_images is not None


def test_image_settings_change_the_content_hash() -> None:
    from bindscope.data.datasets import dataset_hash

    base = get_preset("clevr")
    scenes = base.build_scenes()
    assert dataset_hash(with_image_settings(base, size="480x320"), scenes) != dataset_hash(base, scenes)
    assert with_image_settings(base, size="480x320").config.image.height == 320


def test_custom_space_with_unknown_color_is_refused(tmp_path: Path) -> None:
    yaml = tmp_path / "c.yaml"
    yaml.write_text(
        "name: teal\nconcepts:\n  color: [teal, red]\n  shape: [square, circle]\nobjects_per_scene: 2\n"
        "modalities: [image, text]\nrenderer: flat2d\n"
    )
    with pytest.raises(BindscopeError, match="color value.*'teal' cannot be drawn"):
        build_dataset(yaml, tmp_path / "out")


def test_cli_build_check_and_preview(run_cli, clevr2d: Path, tmp_path: Path) -> None:
    check = run_cli("dataset", "check", clevr2d)
    assert check.returncode == 0, check.stderr
    assert "labels match pixels: 624 of 624 images" in check.stdout
    preview = run_cli("dataset", "preview", clevr2d, "--out", tmp_path / "grid.png", "--rows", "2", "--cols", "3")
    assert preview.returncode == 0, preview.stderr
    with Image.open(tmp_path / "grid.png") as im:
        assert im.size[0] > 500
    built = run_cli("dataset", "build", "clevr2d", "--image-size", "32", "--out", tmp_path / "small", "-q")
    assert built.returncode == 0, built.stderr
    assert load_dataset(tmp_path / "small").single_images.shape == (24, 2)


def test_cli_errors(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("dataset", "preview", clevr_dir, "--out", tmp_path / "g.png"), "has no images to preview"
    )
    assert_one_line_error(run_cli("dataset", "check", clevr_dir), "has no images")
    assert_one_line_error(
        run_cli("dataset", "build", "clevr", "--image-size", "big", "--out", tmp_path / "x"),
        "write SIZE or WIDTHxHEIGHT",
    )
    assert_one_line_error(
        run_cli("dataset", "build", "clevr", "--workers", "0", "--out", tmp_path / "x"), "--workers must be at least 1"
    )


def test_check_names_an_unreadable_image(run_cli, clevr2d: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(clevr2d, root)
    (root / "images" / "000003.png").write_bytes(b"not a png")
    assert_one_line_error(run_cli("dataset", "check", root), "000003.png is not a readable image")
