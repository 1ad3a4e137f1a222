"""Single-object caption wording: template ("a red cube") or bare ("red cube"), in the key and manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import SINGLE_CAPTION_FORMS, load_dataset, single_object_captions
from bindscope.embeddings.embed import content_key, embed_dataset, embed_items
from bindscope.embeddings.encoders import Encoder, load_encoder, parse_spec
from bindscope.space.captions import bare_phrase
from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


@pytest.fixture(scope="module")
def clip_text(tiny_clip: Path) -> Encoder:
    return load_encoder(f"hf:{tiny_clip}")


def _manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


#: A fixed model description, and the content keys bindscope 0.2 gave it before the caption
#: wording existed (computed with that release's ``content_key``): they must not change.
FIXED_INFO: dict[str, Any] = {
    "backend": "hf",
    "model_class": "CLIPModel",
    "revision": None,
    "weights_sha256": "ab" * 32,
    "parameters": 1234,
    "layer": None,
    "random_init": None,
    "dtype": "float32",
    "dim": {"text": 32},
    "pooling": {"text": "eos"},
    "preprocessing": {"text": {"max_length": 77}},
}
GOLDEN_KEYS = {
    "scenes": "c3f6aa4f91ba79b1f3a1ed235726cca3cf704f95059384da235a78df495e6153",
    "single_objects": "6751dbf0eaf603f99ede69996e0e7a24d5883742888d7c479b7ca662f06419be",
}


def test_keys_made_before_the_wording_existed_are_unchanged() -> None:
    for rows, key in GOLDEN_KEYS.items():
        assert content_key("d" * 64, "text", rows, FIXED_INFO, None) == key
        assert content_key("d" * 64, "text", rows, FIXED_INFO, None, "template") == key
    assert content_key("d" * 64, "text", "single_objects", FIXED_INFO, None, "bare") != GOLDEN_KEYS["single_objects"]


# -- the phrase and the captions ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phrase", "bare"),
    [
        ("a red circle", "red circle"),
        ("an orange cube", "orange cube"),
        ("the blue sphere", "blue sphere"),
        ("A red circle", "red circle"),
        ("THE Big Cube", "Big Cube"),
        ("red circle", "red circle"),
        ("another red circle", "another red circle"),  # an article must be a whole word
        ("theatre mask", "theatre mask"),
        ("red a circle", "red a circle"),  # only at the very start
        ("a", "a"),  # nothing after it: not an article of a phrase
        ("", ""),
    ],
)
def test_bare_phrase(phrase: str, bare: str) -> None:
    assert bare_phrase(phrase) == bare


def test_single_object_captions_in_both_forms(clevr_dir: Path) -> None:
    ds = load_dataset(clevr_dir)
    template = single_object_captions(ds)
    bare = single_object_captions(ds, "bare")
    assert SINGLE_CAPTION_FORMS == ("template", "bare")
    assert list(single_object_captions(ds, "template")) == list(template)
    assert list(template[:2]) == ["a blue cube", "a brown cube"]
    assert list(bare[:2]) == ["blue cube", "brown cube"]
    assert len(bare) == len(template) == ds.space.num_objects
    assert all(t == "a " + b for t, b in zip(template, bare))


def test_a_bad_form_names_the_choices(clevr_dir: Path) -> None:
    ds = load_dataset(clevr_dir)
    with pytest.raises(BindscopeError, match="must be one of template, bare, got 'none'"):
        single_object_captions(ds, "none")
    with pytest.raises(BindscopeError, match="--single-captions must be one of template, bare, got 'Bare'"):
        embed_items(ds, "text", True, "Bare")


def test_embed_items_words_text_single_object_banks(clevr_dir: Path) -> None:
    ds = load_dataset(clevr_dir)
    assert embed_items(ds, "text", True, "bare")[0] == "blue cube"
    assert embed_items(ds, "text", True)[0] == "a blue cube"
    assert embed_items(ds, "text", False, "template") == list(ds.captions)


# -- bad uses ---------------------------------------------------------------------------------------------
def test_bare_with_images_is_refused(clevr_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match=r"applies to text single-object banks .* not to images; drop"):
        embed_dataset(
            clevr_dir, "hf:unused", modality="image", single_objects=True, single_captions="bare", out=tmp_path
        )


def test_bare_with_scene_rows_is_refused(clevr_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match=r"applies to text single-object banks .* not to scene captions; drop"):
        embed_dataset(clevr_dir, "hf:unused", modality="text", single_captions="bare", out=tmp_path / "e")
    assert not (tmp_path / "e").exists()


def test_a_bad_form_is_refused_before_any_model_loads(clevr_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="--single-captions must be one of template, bare, got 'plain'"):
        embed_dataset(
            clevr_dir, "hf:unused", modality="text", single_objects=True, single_captions="plain", out=tmp_path / "e"
        )


class OwnItems(Encoder):
    """An encoder that embeds its own items of a dataset (as the scratch models do), not captions."""

    modalities = ("text",)

    def dataset_items(self, dataset: Any, modality: str, single_objects: bool = False) -> Any:
        return np.zeros((dataset.space.num_objects, 1, 2), dtype=np.int64)

    def prepare(self, modality: str, items: Any) -> Any:
        return items

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        return np.ones((len(inputs), 3), dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "test",
            "model_class": "OwnItems",
            "resolved": "own",
            "dim": {"text": 3},
            "pooling": {"text": "none"},
            "preprocessing": {"text": {}},
        }


def test_an_encoder_of_its_own_items_cannot_take_bare(clevr_dir: Path, tmp_path: Path) -> None:
    encoder = OwnItems(parse_spec(f"scratch:{tmp_path / 'model'}", check_folders=False))
    with pytest.raises(BindscopeError, match=r"not captions, so --single-captions bare does not apply .* drop"):
        embed_dataset(
            clevr_dir, encoder, modality="text", single_objects=True, single_captions="bare", out=tmp_path / "e"
        )
    assert not (tmp_path / "e").exists()
    emb = embed_dataset(clevr_dir, encoder, modality="text", single_objects=True, out=tmp_path / "e").embeddings
    assert emb.array.shape == (24, 3)
    assert "single_captions" not in emb.manifest, "it embedded no captions"


# -- keys and manifests ----------------------------------------------------------------------------------
def test_bare_bank_has_its_own_key_and_manifest(clevr_dir: Path, tmp_path: Path, clip_text: Encoder) -> None:
    ds = load_dataset(clevr_dir)
    kw: dict[str, Any] = dict(modality="text", single_objects=True)
    template = embed_dataset(ds, clip_text, out=tmp_path / "template", **kw).embeddings
    bare = embed_dataset(ds, clip_text, out=tmp_path / "bare", single_captions="bare", **kw).embeddings
    m_template, m_bare = _manifest(tmp_path / "template"), _manifest(tmp_path / "bare")
    assert m_template["single_captions"] == "template" and m_bare["single_captions"] == "bare"
    assert m_bare["rows"] == "single_objects" and bare.array.shape == template.array.shape == (
        24,
        clip_text.dim("text"),
    )
    np.testing.assert_allclose(bare.array, clip_text.encode_texts(single_object_captions(ds, "bare")), atol=1e-5)
    assert not np.allclose(bare.array, template.array), "the wording reaches the model"

    info = clip_text.describe()
    old = content_key(ds.hash, "text", "single_objects", info, None)
    assert m_template["content_key"] == old == content_key(ds.hash, "text", "single_objects", info, None)
    assert content_key(ds.hash, "text", "single_objects", info, None, "template") == old
    assert m_bare["content_key"] == content_key(ds.hash, "text", "single_objects", info, None, "bare") != old


def test_other_keys_are_unchanged(clevr_dir: Path, tmp_path: Path, clip_text: Encoder) -> None:
    ds = load_dataset(clevr_dir)
    scenes = embed_dataset(ds, clip_text, modality="text", out=tmp_path / "scenes", chunk_rows=10_000)
    info = clip_text.describe()
    assert scenes.embeddings.manifest["content_key"] == content_key(ds.hash, "text", "scenes", info, None)
    assert "single_captions" not in scenes.embeddings.manifest, "only text single-object banks record it"


def test_a_folder_of_the_other_wording_is_not_reused(clevr_dir: Path, tmp_path: Path, clip_text: Encoder) -> None:
    ds = load_dataset(clevr_dir)
    kw: dict[str, Any] = dict(modality="text", single_objects=True, out=tmp_path / "e")
    embed_dataset(ds, clip_text, **kw)
    with pytest.raises(BindscopeError, match=r"single_captions 'template' \(asked 'bare'\).*--overwrite"):
        embed_dataset(ds, clip_text, single_captions="bare", **kw)
    assert embed_dataset(ds, clip_text, **kw).status == "existing"
    redone = embed_dataset(ds, clip_text, single_captions="bare", overwrite=True, **kw)
    assert redone.status == "embedded" and redone.embeddings.manifest["single_captions"] == "bare"
    with pytest.raises(BindscopeError, match=r"single_captions 'bare' \(asked 'template'\)"):
        embed_dataset(ds, clip_text, **kw)
    assert embed_dataset(ds, clip_text, single_captions="bare", **kw).status == "existing"


def test_the_key_alone_refuses_the_other_wording(clevr_dir: Path, tmp_path: Path, clip_text: Encoder) -> None:
    """Even where the manifest's wording field is gone, the content key tells the two apart."""
    ds = load_dataset(clevr_dir)
    kw: dict[str, Any] = dict(modality="text", single_objects=True, out=tmp_path / "e")
    embed_dataset(ds, clip_text, single_captions="bare", **kw)
    m = _manifest(tmp_path / "e")
    del m["single_captions"]  # reads as template in the early check, so only the key can tell
    (tmp_path / "e" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BindscopeError, match="single-object caption wording: content key differs"):
        embed_dataset(ds, clip_text, **kw)


def test_a_template_bank_made_before_the_option_is_reused(clevr_dir: Path, tmp_path: Path, clip_text) -> None:
    ds = load_dataset(clevr_dir)
    kw: dict[str, Any] = dict(modality="text", single_objects=True, out=tmp_path / "e")
    embed_dataset(ds, clip_text, **kw)
    m = _manifest(tmp_path / "e")
    del m["single_captions"]  # as written before the option existed
    (tmp_path / "e" / "manifest.json").write_text(json.dumps(m))
    assert embed_dataset(ds, clip_text, **kw).status == "existing"
    with pytest.raises(BindscopeError, match=r"single_captions 'template' \(asked 'bare'\)"):
        embed_dataset(ds, clip_text, single_captions="bare", **kw)


# -- the command -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_cli_option_end_to_end(run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    out = run_cli(
        "embed",
        clevr_dir,
        "-m",
        f"hf:{tiny_clip}",
        "--modality",
        "text",
        "--single-objects",
        "--single-captions",
        "bare",
        "-o",
        tmp_path / "bare",
        "-q",
    )
    assert out.returncode == 0, out.stderr
    assert "embedded 24 rows" in out.stdout
    m = _manifest(tmp_path / "bare")
    assert m["single_captions"] == "bare" and m["rows"] == "single_objects"
    ds = load_dataset(clevr_dir)
    assert m["content_key"] == content_key(ds.hash, "text", "single_objects", m["model"], None, "bare")
    encoder = load_encoder(f"hf:{tiny_clip}")
    want = encoder.encode_texts(single_object_captions(ds, "bare"))
    np.testing.assert_allclose(np.load(tmp_path / "bare" / "embeddings.npy"), want, atol=1e-5)


def test_the_cli_option_refuses_bad_uses(run_cli, clevr_dir: Path, tmp_path: Path) -> None:
    base = ["embed", clevr_dir, "-m", "hf:unused", "--modality", "text"]
    bad = run_cli(*base, "--single-objects", "--single-captions", "none", "-o", tmp_path / "bad")
    assert bad.returncode == 2 and "'none' is not one of 'template', 'bare'" in bad.stderr
    scenes = run_cli(*base, "--single-captions", "bare", "-o", tmp_path / "scenes")
    assert_one_line_error(scenes, "--single-captions bare applies to text single-object banks")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "scenes").exists()
