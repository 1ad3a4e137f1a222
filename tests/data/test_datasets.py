"""Dataset folders: what build writes, what load checks, and every way a folder can be wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import build_dataset, column_names, load_dataset
from bindscope.data.presets import get_preset


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def test_build_writes_the_documented_layout(clevr_dir: Path) -> None:
    assert sorted(p.name for p in clevr_dir.iterdir()) == [
        ".bindscope.json",
        "images",
        "manifest.json",
        "scenes.csv",
        "scenes.parquet",
    ]
    manifest = json.loads((clevr_dir / "manifest.json").read_text())
    assert manifest["preset"] == "clevr"
    assert manifest["num_scenes"] == 576
    assert manifest["objects_per_scene"] == 2
    assert manifest["concepts"] == {
        "color": ["blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow"],
        "shape": ["cube", "cylinder", "sphere"],
    }
    assert len(manifest["hash"]) == 64
    assert manifest["bindscope_version"]
    assert manifest["slot_layout"] == ["back-left", "front-right"]


def test_scene_table_columns_and_content(clevr_dir: Path) -> None:
    table = pd.read_parquet(clevr_dir / "scenes.parquet")
    space = get_preset("clevr").space
    assert list(table.columns) == column_names(space, 2)
    assert "object1_color" in table and "object2_shape_idx" in table
    row = table[
        (table.object1_color == "red")
        & (table.object1_shape == "cube")
        & (table.object2_color == "blue")
        & (table.object2_shape == "sphere")
    ]
    assert len(row) == 1
    r = row.iloc[0]
    assert (r.object1_color_idx, r.object1_shape_idx, r.object2_color_idx, r.object2_shape_idx) == (6, 0, 0, 2)
    assert r.caption == "a red cube and a blue sphere"
    assert r.image == ""
    csv = pd.read_csv(clevr_dir / "scenes.csv", keep_default_na=False)
    assert len(csv) == 576
    assert list(csv.columns) == list(table.columns)
    assert (csv.caption.to_numpy() == table.caption.to_numpy()).all()


def test_text_preset_pads_single_objects(tmp_path: Path) -> None:
    ds = build_dataset("text", tmp_path / "text")
    table = pd.read_parquet(tmp_path / "text" / "scenes.parquet")
    assert len(table) == 160_400
    singles = table[table.num_objects == 1]
    assert len(singles) == 400
    assert (singles.object2_noun_idx == -1).all() and singles.object2_noun.isna().all()
    csv_tail = (tmp_path / "text" / "scenes.csv").read_text().splitlines()[-1]
    assert ",,-1,,-1," in csv_tail  # empty name, -1 index in slot 2
    assert singles.caption.iloc[0] == "a red circle"
    assert ds.manifest["scene_counts"] == {"1": 400, "2": 160_000}


def test_load_round_trip(clevr_dir: Path) -> None:
    ds = load_dataset(clevr_dir)
    assert len(ds) == 576
    assert ds.scenes.scenes.shape == (576, 2, 2)
    assert ds.captions[0] == "a blue cube and a blue cube"
    assert ds.hash == json.loads((clevr_dir / "manifest.json").read_text())["hash"]
    assert "576" in ds.summary() and "color (8)" in ds.summary()


def test_rebuild_same_content_is_a_no_op(clevr_dir: Path) -> None:
    before = (clevr_dir / "manifest.json").stat().st_mtime_ns
    ds = build_dataset("clevr", clevr_dir, images=False)
    assert len(ds) == 576
    assert (clevr_dir / "manifest.json").stat().st_mtime_ns == before


def test_build_refuses_a_folder_holding_another_dataset(clevr_dir: Path, tmp_path: Path) -> None:
    out = _copy(clevr_dir, tmp_path)
    with pytest.raises(BindscopeError, match="already holds a different dataset.*--overwrite"):
        build_dataset("clevr2d", out)
    build_dataset("clevr2d", out, overwrite=True, images=False)
    assert load_dataset(out).name == "clevr2d"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging leftovers


def test_build_refuses_a_non_empty_unrelated_folder(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="not empty"):
        build_dataset("clevr", tmp_path / "x")
    assert (tmp_path / "x" / "notes.txt").read_text() == "mine"


def test_failed_build_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bindscope.data.datasets as datasets

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(datasets.pacsv, "write_csv", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build_dataset("clevr", tmp_path / "out", images=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: (d / "manifest.json").unlink(), "manifest .* is missing"),
        (lambda d: (d / "manifest.json").write_text("{not json"), "not valid JSON"),
        (lambda d: (d / "scenes.parquet").unlink(), "scenes.parquet is missing"),
        (lambda d: (d / "scenes.parquet").write_bytes(b"garbage"), "not a readable parquet"),
        (lambda d: (d / "scenes.csv").unlink(), "scenes.csv is missing"),
        (lambda d: _edit_manifest(d, num_scenes=575), "576 rows but the manifest says 575"),
        (lambda d: _edit_manifest(d, hash="0" * 64), "do not match the manifest hash"),
        (lambda d: _drop_manifest_key(d, "concepts"), "lacks concepts"),
        (lambda d: _edit_manifest(d, format="other-v9"), "format 'other-v9'"),
        (lambda d: _edit_table(d, lambda t: t.drop(columns=["caption"])), "lacks column.*caption"),
        (lambda d: _edit_table(d, lambda t: t.assign(extra=1)), "unexpected column.*extra"),
        (lambda d: _edit_table(d, lambda t: t.iloc[:-1]), "575 rows but the manifest says 576"),
        (lambda d: _edit_table(d, _swap_shape_names), "object1_shape is 'cylinder' but its index says 'cube'"),
        (lambda d: _edit_table(d, _edit_caption), "caption of scene 3 does not match"),
        (lambda d: _edit_table(d, _bad_index), "out of range for concept 'color'"),
        (lambda d: _edit_table(d, _missing_image), "1 image file.*missing.*images/x.png"),
        (lambda d: _truncate_csv(d), "scenes.csv has 575 data rows"),
    ],
)
def test_load_fails_loudly_on_any_mismatch(clevr_dir: Path, tmp_path: Path, corrupt, message: str) -> None:
    d = _copy(clevr_dir, tmp_path)
    corrupt(d)
    with pytest.raises(BindscopeError, match=message):
        load_dataset(d)


def test_load_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="does not exist; build it"):
        load_dataset(tmp_path / "nope")


def _edit_manifest(d: Path, **changes) -> None:
    m = json.loads((d / "manifest.json").read_text())
    m.update(changes)
    (d / "manifest.json").write_text(json.dumps(m))


def _drop_manifest_key(d: Path, key: str) -> None:
    m = json.loads((d / "manifest.json").read_text())
    del m[key]
    (d / "manifest.json").write_text(json.dumps(m))


def _edit_table(d: Path, change) -> None:
    table = pq.read_table(d / "scenes.parquet").to_pandas()
    change(table).to_parquet(d / "scenes.parquet", index=False)


def _swap_shape_names(t: pd.DataFrame) -> pd.DataFrame:
    """The published CLEVR export's mistake: shape names 1 and 2 swapped."""
    swap = {"cylinder": "sphere", "sphere": "cylinder", "cube": "cube"}
    t = t.copy()
    t["object1_shape"] = t["object1_shape"].map(swap)
    t.loc[0, "object1_shape"] = "cylinder"
    return t


def _edit_caption(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t.loc[3, "caption"] = "a red cube and a blue sphere"
    return t


def _bad_index(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t.loc[5, "object2_color_idx"] = 9
    return t


def _missing_image(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t.loc[0, "image"] = "images/x.png"
    return t


def _truncate_csv(d: Path) -> None:
    lines = (d / "scenes.csv").read_text().splitlines(keepends=True)
    (d / "scenes.csv").write_text("".join(lines[:-1]))


def test_custom_yaml_dataset(tmp_path: Path) -> None:
    ds = build_dataset(Path(__file__).parents[2] / "configs" / "custom_space.yaml", tmp_path / "c")
    assert ds.name == "sized_shapes"
    assert len(ds) == 2000 + 36
    assert ds.space.ordinal == ("size",)
    assert ds.preset.config.ordinal == ["size"]
    assert ds.scenes.max_objects == 3
    assert ds.captions[0].count(" and ") == 2
    ids = ds.scenes.object_ids()[:2000]
    assert (ids[:, 0] != ids[:, 1]).all()  # allow_identical: false
    again = load_dataset(tmp_path / "c")
    np.testing.assert_array_equal(again.scenes.scenes, ds.scenes.scenes)
    assert again.space.ordinal == ("size",)


# -- attached images -------------------------------------------------------------------------------------


def _blank_images(root: Path, n: int, prefix: str) -> list[str]:
    from PIL import Image

    paths = []
    for i in range(n):
        rel = f"images/{prefix}{i:04d}.png"
        Image.new("RGB", (4, 4), (i % 256, 0, 0)).save(root / rel)
        paths.append(rel)
    return paths


def test_attach_images_records_scene_and_single_object_files(clevr_dir: Path, tmp_path: Path) -> None:
    from bindscope.data.datasets import attach_images, single_object_captions

    root = tmp_path / "ds"
    shutil.copytree(clevr_dir, root)
    before = load_dataset(root)
    scenes = _blank_images(root, 576, "s")
    flat = _blank_images(root, 48, "o")
    singles = [flat[2 * o : 2 * o + 2] for o in range(24)]
    ds = attach_images(root, scenes, singles)
    assert ds.hash == before.hash, "attaching images does not change the content hash"
    assert list(ds.images) == scenes and ds.single_images.tolist() == singles
    assert ds.manifest["images"] == {"rendered": 576, "single_objects": 24, "single_positions": 2}
    assert "576 / 576 rendered, 48 single-object (24 objects x 2 positions)" in ds.summary()
    assert list(single_object_captions(ds)[:3]) == ["a blue cube", "a brown cube", "a cyan cube"]
    again = load_dataset(root)
    assert again.single_images.tolist() == singles
    table = pq.read_table(root / "singles.parquet")
    assert table["object"].to_pylist()[:4] == [0, 0, 1, 1] and table["slot"].to_pylist()[:4] == [1, 2, 1, 2]
    assert table["caption"].to_pylist()[:3] == ["a blue cube", "a blue cube", "a brown cube"]
    np.testing.assert_array_equal(again.scenes.scenes, before.scenes.scenes)
    import pyarrow.csv as pacsv

    assert pacsv.read_csv(root / "scenes.csv")["image"].to_pylist() == scenes


def test_attach_images_refuses_bad_lists(clevr_dir: Path, tmp_path: Path) -> None:
    from bindscope.data.datasets import attach_images

    root = tmp_path / "ds"
    shutil.copytree(clevr_dir, root)
    scenes = _blank_images(root, 576, "s")
    with pytest.raises(BindscopeError, match="got 575 image paths but the dataset has 576 scenes"):
        attach_images(root, scenes[:-1])
    with pytest.raises(BindscopeError, match="must be relative to the dataset folder"):
        attach_images(root, [str(root / scenes[0])] + scenes[1:])
    with pytest.raises(BindscopeError, match="must be relative to the dataset folder"):
        attach_images(root, ["../x.png"] + scenes[1:])
    with pytest.raises(BindscopeError, match=r"image of scene 3 .* does not exist"):
        attach_images(root, scenes[:3] + ["images/nope.png"] + scenes[4:])
    with pytest.raises(BindscopeError, match="got 2 single-object image lists but the dataset has 24 objects"):
        attach_images(root, scenes, scenes[:2])
    with pytest.raises(BindscopeError, match="image of single-object image 1 .* does not exist"):
        attach_images(root, scenes, [[scenes[0], "images/nope.png"]] + [scenes[:2]] * 23)
    assert load_dataset(root).images[0] == "", "a refused attach changes nothing"


def test_tampered_singles_table_is_refused(clevr_dir: Path, tmp_path: Path) -> None:
    from bindscope.data.datasets import attach_images

    root = tmp_path / "ds"
    shutil.copytree(clevr_dir, root)
    attach_images(root, _blank_images(root, 576, "s"), _blank_images(root, 24, "o"))
    table = pq.read_table(root / "singles.parquet")
    pq.write_table(table.slice(0, 23), root / "singles.parquet")
    with pytest.raises(
        BindscopeError,
        match="singles.parquet has 23 rows, not a whole number of rows per each of the space's 24 objects",
    ):
        load_dataset(root)
    captions = table["caption"].to_pylist()
    captions[0] = "a red sphere"
    import pyarrow as pa

    pq.write_table(
        table.set_column(table.column_names.index("caption"), "caption", pa.array(captions)), root / "singles.parquet"
    )
    with pytest.raises(
        BindscopeError, match="does not list the objects in id order, each at slots 1..1, with their captions"
    ):
        load_dataset(root)
