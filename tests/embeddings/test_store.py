"""Embedding folders: importing arrays made elsewhere, loading them back, refusing bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import build_dataset, load_dataset
from bindscope.embeddings.store import import_embeddings, load_embeddings


def _save(tmp_path: Path, array: np.ndarray, name: str = "emb.npy") -> Path:
    path = tmp_path / name
    np.save(path, array)
    return path


def test_import_writes_aligned_float32_folder(clevr_dir: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(0).normal(size=(576, 16))  # float64 on purpose
    emb = import_embeddings(clevr_dir, _save(tmp_path, x), name="planted", modality="image", out=tmp_path / "e")
    arr = np.load(tmp_path / "e" / "embeddings.npy")
    assert arr.dtype == np.float32 and arr.shape == (576, 16)
    np.testing.assert_allclose(arr, x.astype(np.float32))
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert manifest["name"] == "planted"
    assert manifest["modality"] == "image"
    assert manifest["dim"] == 16 and manifest["num_rows"] == 576
    assert manifest["dataset_hash"] == load_dataset(clevr_dir).hash
    assert manifest["source"]["dtype"] == "float64"
    assert emb.dim == 16


def test_load_checks_against_dataset(clevr_dir: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(0).normal(size=(576, 4)).astype(np.float32)  # not constant: that is refused
    import_embeddings(clevr_dir, _save(tmp_path, x), name="ones", modality="text", out=tmp_path / "e")
    ds = load_dataset(clevr_dir)
    assert len(load_embeddings(tmp_path / "e", ds)) == 576
    other = build_dataset("clevr2d", tmp_path / "clevr2d", images=False)
    with pytest.raises(BindscopeError, match="were made for dataset hash .* embed or import them for this dataset"):
        load_embeddings(tmp_path / "e", other)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((575, 8)), "has 575 rows but the dataset has 576 scenes"),
        (np.zeros((577, 8)), "has 577 rows but the dataset has 576 scenes"),
        (np.zeros(576), "must be 2-D .* got 1-D shape"),
        (np.zeros((576, 2, 4)), "must be 2-D .* got 3-D shape"),
        (np.zeros((576, 0)), "zero columns"),
        (np.array([["a"] * 3] * 576), "must hold real numbers"),
        (
            np.where(np.arange(576 * 3).reshape(576, 3) == 7, np.nan, 1.0),
            "contains NaN values in 1 row.*first at row 2",
        ),
        (
            np.where(np.arange(576 * 3).reshape(576, 3) == 9, np.inf, 1.0),
            "contains inf values in 1 row.*first at row 3",
        ),
        (np.full((576, 2), 1e300), r"inf values \(values too large for float32\)"),
    ],
)
def test_import_refuses_bad_arrays(clevr_dir: Path, tmp_path: Path, array: np.ndarray, message: str) -> None:
    with pytest.raises(BindscopeError, match=message):
        import_embeddings(clevr_dir, _save(tmp_path, array), name="bad", modality="image", out=tmp_path / "e")
    assert not (tmp_path / "e").exists()


def test_import_refuses_a_corrupt_or_pickled_file(clevr_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    with pytest.raises(BindscopeError, match="not a readable .npy array"):
        import_embeddings(clevr_dir, tmp_path / "junk.npy", name="x", modality="image", out=tmp_path / "e")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BindscopeError, match="not a readable .npy array"):
        import_embeddings(clevr_dir, tmp_path / "obj.npy", name="x", modality="image", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="is missing"):
        import_embeddings(clevr_dir, tmp_path / "absent.npy", name="x", modality="image", out=tmp_path / "e")


def test_import_refuses_a_modality_the_dataset_lacks(tmp_path: Path) -> None:
    preset = tmp_path / "tiny.yaml"
    preset.write_text("name: tiny\nconcepts: {color: [red, blue], shape: [cube, ball]}\nobjects_per_scene: 2\n")
    build_dataset(preset, tmp_path / "tiny")
    path = _save(tmp_path, np.zeros((16, 3)))
    with pytest.raises(BindscopeError, match="has no image modality"):
        import_embeddings(tmp_path / "tiny", path, name="x", modality="image", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="--name"):
        import_embeddings(tmp_path / "tiny", path, name=" ", modality="text", out=tmp_path / "e")


def test_import_refuses_to_overwrite(clevr_dir: Path, tmp_path: Path) -> None:
    path = _save(tmp_path, np.random.default_rng(0).normal(size=(576, 3)))
    import_embeddings(clevr_dir, path, name="a", modality="image", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="already exists and is not empty"):
        import_embeddings(clevr_dir, path, name="b", modality="image", out=tmp_path / "e")
    import_embeddings(clevr_dir, path, name="b", modality="image", out=tmp_path / "e", overwrite=True)
    assert load_embeddings(tmp_path / "e").name == "b"


def test_load_refuses_damaged_folders(clevr_dir: Path, tmp_path: Path) -> None:
    path = _save(tmp_path, np.random.default_rng(0).normal(size=(576, 3)))
    import_embeddings(clevr_dir, path, name="a", modality="image", out=tmp_path / "e")
    npy = tmp_path / "e" / "embeddings.npy"
    good = npy.read_bytes()
    npy.write_bytes(good[: len(good) // 2])
    with pytest.raises(BindscopeError, match="not a readable .npy array"):
        load_embeddings(tmp_path / "e")
    np.save(npy, np.ones((576, 3), np.float64))
    with pytest.raises(BindscopeError, match="must be float32"):
        load_embeddings(tmp_path / "e")
    np.save(npy, np.ones((570, 3), np.float32))
    with pytest.raises(BindscopeError, match=r"shape \(570, 3\) but the manifest says \(576, 3\)"):
        load_embeddings(tmp_path / "e")
    np.save(npy, np.full((576, 3), np.nan, np.float32))
    with pytest.raises(BindscopeError, match="NaN or inf"):
        load_embeddings(tmp_path / "e")
    (tmp_path / "e" / "manifest.json").write_text("{}")
    with pytest.raises(BindscopeError, match="lacks format, name, modality"):
        load_embeddings(tmp_path / "e")


def test_load_missing_embedding_folder(tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="embedding folder .* does not exist; import or embed"):
        load_embeddings(tmp_path / "nope")
