"""The embedding pipeline: real models in, embedding folders out; resume, no-op, bad inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import build_dataset, load_dataset, single_object_captions
from bindscope.embeddings.embed import PartialEmbedding, embed_dataset, load_image
from bindscope.embeddings.encoders import load_encoder
from bindscope.embeddings.store import find_rand_control, load_embeddings
from tiny_models import save_tiny_clip, save_tiny_dinov2

MINILM = "st:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm():
    return load_encoder(MINILM)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


def test_text_embeddings_are_the_models_own(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    from sentence_transformers import SentenceTransformer

    result = embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    emb = result.embeddings
    assert result.status == "embedded" and result.rows_computed == 576 and result.rows_reused == 0
    ds = load_dataset(clevr_dir)
    reference = SentenceTransformer(str(minilm.describe()["resolved"]), device="cpu").encode(list(ds.captions))
    np.testing.assert_allclose(emb.array, reference, atol=2e-5)
    m = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert m["model_spec"] == MINILM and m["rows"] == "scenes" and m["layer"] is None
    assert m["name"] == "all-MiniLM-L6-v2" and m["modality"] == "text" and m["dataset_hash"] == ds.hash
    assert m["model"]["dim"]["text"] == 384 and len(m["content_key"]) == 64
    assert m["source"]["kind"] == "embed" and m["source"]["batch_size"] == 256
    assert not list(tmp_path.glob(".e.embedding-*")), "the partial folder is removed once done"
    assert load_embeddings(tmp_path / "e", ds).dim == 384


def test_asking_again_is_a_noop(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    first = embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    stamp = (tmp_path / "e" / "embeddings.npy").stat().st_mtime_ns
    again = embed_dataset(clevr_dir, MINILM, modality="text", out=tmp_path / "e")
    assert again.status == "existing" and again.rows_computed == 0
    assert (tmp_path / "e" / "embeddings.npy").stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(again.embeddings.array, first.embeddings.array)


class Interrupted(RuntimeError):
    pass


def _interrupt_after(encoder, calls: int, monkeypatch: pytest.MonkeyPatch) -> None:
    forward = encoder.forward
    count = {"n": 0}

    def failing(modality, inputs):
        count["n"] += 1
        if count["n"] > calls:
            raise Interrupted("injected failure")
        return forward(modality, inputs)

    monkeypatch.setattr(encoder, "forward", failing)


def test_an_interrupted_run_resumes_to_the_same_array(clevr_dir: Path, tmp_path: Path, minilm, monkeypatch) -> None:
    kwargs = dict(modality="text", batch_size=32, chunk_rows=96, cache=None)  # no cache: "e" embeds, not links
    whole = embed_dataset(clevr_dir, minilm, out=tmp_path / "whole", **kwargs).embeddings.array
    _interrupt_after(minilm, 7, monkeypatch)  # 7 batches of 32 = two chunks of 96 saved, the third half done
    with pytest.raises(Interrupted):
        embed_dataset(clevr_dir, minilm, out=tmp_path / "e", **kwargs)
    assert not (tmp_path / "e").exists(), "no output folder until every row is done"
    (partial,) = tmp_path.glob(".e.embedding-*")
    assert sorted(p.name for p in partial.glob("rows-*.npy")) == ["rows-0000000000.npy", "rows-0000000096.npy"]
    monkeypatch.undo()
    resumed = embed_dataset(clevr_dir, minilm, out=tmp_path / "e", **kwargs)
    assert resumed.status == "resumed" and resumed.rows_reused == 192 and resumed.rows_computed == 576 - 192
    np.testing.assert_array_equal(resumed.embeddings.array, whole)
    assert resumed.embeddings.manifest["source"]["rows_reused"] == 192
    assert not partial.exists()


def test_a_damaged_chunk_is_embedded_again(clevr_dir: Path, tmp_path: Path, minilm, monkeypatch) -> None:
    kwargs = dict(modality="text", batch_size=64, chunk_rows=128, cache=None)
    whole = embed_dataset(clevr_dir, minilm, out=tmp_path / "whole", **kwargs).embeddings.array
    _interrupt_after(minilm, 6, monkeypatch)
    with pytest.raises(Interrupted):
        embed_dataset(clevr_dir, minilm, out=tmp_path / "e", **kwargs)
    monkeypatch.undo()
    (partial,) = tmp_path.glob(".e.embedding-*")
    (partial / "rows-0000000128.npy").write_bytes(b"not an npy file")
    resumed = embed_dataset(clevr_dir, minilm, out=tmp_path / "e", **kwargs)
    assert resumed.rows_reused == 256  # chunks 0 and 256 kept, 128 recomputed
    np.testing.assert_array_equal(resumed.embeddings.array, whole)


def test_single_object_captions_bank(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    ds = load_dataset(clevr_dir)
    emb = embed_dataset(ds, minilm, modality="text", out=tmp_path / "single", single_objects=True).embeddings
    assert emb.rows == "single_objects" and emb.array.shape == (24, 384)
    np.testing.assert_allclose(emb.array, minilm.encode_texts(single_object_captions(ds)), atol=1e-5)
    assert single_object_captions(ds)[0] == "a blue cube"
    with pytest.raises(BindscopeError, match="holds single-object embeddings .* but scene embeddings are needed"):
        load_embeddings(tmp_path / "single", ds)
    assert len(load_embeddings(tmp_path / "single", ds, rows="single_objects")) == 24


def test_image_embeddings_with_a_tiny_clip(clevr_images_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    spec = f"hf:{tiny_clip}"
    result = embed_dataset(
        clevr_images_dir, spec, modality="image", out=tmp_path / "img", batch_size=50, chunk_rows=200
    )
    ds = load_dataset(clevr_images_dir)
    encoder = load_encoder(spec)
    expected = encoder.encode_images([load_image(str(ds.root / p)) for p in ds.images], batch_size=64)
    np.testing.assert_allclose(result.embeddings.array, expected, atol=1e-5)
    assert result.embeddings.manifest["source"]["images_sha256"]
    assert len(np.unique(result.embeddings.array.round(5), axis=0)) == 576, "every scene's picture differs"
    singles = embed_dataset(ds, spec, modality="image", out=tmp_path / "single", single_objects=True).embeddings
    want = encoder.encode_images([load_image(str(ds.root / p)) for p in ds.single_images.ravel()])
    np.testing.assert_allclose(singles.array, want, atol=1e-5)
    assert singles.array.shape == (48, 24) and singles.manifest["single_positions"] == 2


def test_layer_and_rand_control_are_recorded_and_found(clevr_images_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    spec = f"hf:{tiny_clip}"
    base = embed_dataset(clevr_images_dir, spec, modality="text", out=tmp_path / "clip", layer=1).embeddings
    rand = embed_dataset(
        clevr_images_dir, spec + "+rand", modality="text", out=tmp_path / "clip-rand", layer=1
    ).embeddings
    assert base.manifest["layer"] == 1 and base.manifest["name"] == "tiny-clip-layer1"
    assert rand.manifest["model"]["random_init"] == {"seed": 0}
    assert not np.allclose(base.array, rand.array)
    assert find_rand_control(base) == tmp_path / "clip-rand"
    final = embed_dataset(clevr_images_dir, spec, modality="text", out=tmp_path / "clip-final").embeddings
    assert find_rand_control(final) is None, "a control of another layer does not count"
    assert base.manifest["content_key"] != final.manifest["content_key"]


# -- bad inputs -----------------------------------------------------------------------------------------


def test_dataset_without_images(clevr_dir: Path, tmp_path: Path, tiny_clip: Path) -> None:
    with pytest.raises(BindscopeError, match="has no images for 576 row.*render them with `bindscope dataset build`"):
        embed_dataset(clevr_dir, f"hf:{tiny_clip}", modality="image", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="has no single-object images"):
        embed_dataset(clevr_dir, f"hf:{tiny_clip}", modality="image", out=tmp_path / "e", single_objects=True)


def test_text_only_dataset_refuses_images(tmp_path: Path, minilm) -> None:
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(
        "name: tiny-text\nconcepts:\n  attribute: [red, blue]\n  noun: [cat, dog]\nobjects_per_scene: 2\n"
        "modalities: [text]\n"
    )
    built = build_dataset(yaml, tmp_path / "tiny")
    with pytest.raises(BindscopeError, match="has no image modality .*use --modality text"):
        embed_dataset(built, minilm, modality="image", out=tmp_path / "e")


def test_broken_image_files(clevr_images_dir: Path, tmp_path: Path, tiny_clip: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(clevr_images_dir, root)
    (root / "images" / "000007.png").write_bytes(b"not a png")
    with pytest.raises(BindscopeError, match="000007.png is not a readable image"):
        embed_dataset(root, f"hf:{tiny_clip}", modality="image", out=tmp_path / "e")
    (root / "images" / "000007.png").unlink()
    with pytest.raises(BindscopeError, match="image file.* missing"):
        embed_dataset(root, f"hf:{tiny_clip}", modality="image", out=tmp_path / "e")
    assert not (tmp_path / "e").exists()


def test_text_on_an_image_only_model(clevr_dir: Path, tmp_path: Path) -> None:
    dino = save_tiny_dinov2(tmp_path / "dino")
    with pytest.raises(BindscopeError, match="image-only and has no text tower; use --modality image"):
        embed_dataset(clevr_dir, f"hf:{dino}", modality="text", out=tmp_path / "e")


def test_corrupt_embeddings_file_is_reported(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    (tmp_path / "e" / "embeddings.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(BindscopeError, match="not a readable .npy array.*pass --overwrite to embed again"):
        embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    fixed = embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e", overwrite=True)
    assert fixed.status == "embedded" and load_embeddings(tmp_path / "e").array.shape == (576, 384)


def test_manifest_of_another_dataset(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    manifest = tmp_path / "e" / "manifest.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "dataset_hash": "f" * 64}))
    with pytest.raises(BindscopeError, match="holds embeddings of another dataset"):
        embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="were made for dataset hash ffffffffffff"):
        load_embeddings(tmp_path / "e", load_dataset(clevr_dir))


def test_output_holding_other_embeddings(clevr_dir: Path, tmp_path: Path, minilm) -> None:
    embed_dataset(clevr_dir, minilm, modality="text", out=tmp_path / "e")
    with pytest.raises(
        BindscopeError,
        match=r"holds other embeddings: model_spec 'st:all-MiniLM-L6-v2' \(asked 'st:all-MiniLM-L6-v2\+rand'\)",
    ):
        embed_dataset(clevr_dir, MINILM + "+rand", modality="text", out=tmp_path / "e")
    with pytest.raises(BindscopeError, match="layer None"):
        embed_dataset(clevr_dir, MINILM, modality="text", out=tmp_path / "e", layer=2)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="already exists and is not empty"):
        embed_dataset(clevr_dir, MINILM, modality="text", out=tmp_path / "junk")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(batch_size=0), "--batch-size must be at least 1"),
        (dict(chunk_rows=0), "chunk rows must be at least 1"),
        (dict(device="tpu"), "unknown device 'tpu'"),
        (dict(dtype="float64"), "dtype must be one of float32, float16, bfloat16"),
        (dict(name=" "), "--name must not be empty"),
        (dict(modality="audio"), "--modality must be image or text"),
    ],
)
def test_bad_options(clevr_dir: Path, tmp_path: Path, kwargs: dict, message: str) -> None:
    args = {"modality": "text", **kwargs}
    with pytest.raises(BindscopeError, match=message):
        embed_dataset(clevr_dir, MINILM, out=tmp_path / "e", **args)
    assert not (tmp_path / "e").exists()


def test_partial_state_of_other_settings_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "e"
    first = PartialEmbedding.open(out, "a" * 64, 10, 4, 3)
    first.save_chunk(0, np.ones((4, 3), np.float32))
    again = PartialEmbedding.open(out, "a" * 64, 10, 8, 3)  # same job: keeps its own chunk size
    assert again.chunk_rows == 4 and again.missing_chunks() == [(4, 8), (8, 10)]
    other_rows = PartialEmbedding.open(out, "a" * 64, 12, 4, 3)  # the state disagrees: start afresh
    assert other_rows.missing_chunks() == [(0, 4), (4, 8), (8, 12)]


def test_a_state_folder_without_its_state_starts_afresh(tmp_path: Path) -> None:
    """Killed (or the disk full) between making the folder and moving its state file in: the next run starts over
    instead of failing on the folder forever (a trial of issue 54 found `File exists`)."""
    out = tmp_path / "e"
    folder = PartialEmbedding.folder(out, "a" * 64)
    folder.mkdir()
    (folder / ".state.json.ab12cd34.tmp").write_text('{"key"')
    partial = PartialEmbedding.open(out, "a" * 64, 10, 4, 3)
    assert partial.missing_chunks() == [(0, 4), (4, 8), (8, 10)]
    assert sorted(p.name for p in folder.iterdir()) == ["state.json"]
