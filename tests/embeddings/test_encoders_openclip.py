"""The open_clip backend on tiny models saved to folders and loaded back through ``openclip:local-dir:``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("open_clip")

import open_clip
import torch
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders import load_encoder, parse_spec
from bindscope.embeddings.encoders import openclip as backend
from bindscope.embeddings.encoders.base import weights_sha256
from tiny_openclip import CONTEXT, EMBED, LAYERS, WIDTH, save_tiny_openclip

TEXTS = [
    "a red cube",
    "a small blue sphere left of a green cylinder",
    "",
    "two yellow cubes",
    "a very long caption that goes on and on well past the tiny context length of sixteen tokens",
    "x",
    "cube",
]


def _images(n: int = 7) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    sizes = [(32, 32), (48, 40), (40, 64), (33, 31), (64, 64), (20, 50), (32, 36)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes[:n]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_openclip(tmp_path_factory.mktemp("openclip") / "tiny")


@pytest.fixture(scope="module")
def reference(tiny: Path):
    """open_clip's own model, eval transform and tokenizer for the tiny folder."""
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{tiny}")
    return model.eval(), preprocess, open_clip.get_tokenizer(f"local-dir:{tiny}")


def _spec(folder: Path, suffix: str = "") -> str:
    return f"openclip:local-dir:{folder}{suffix}"


# -- final embeddings ----------------------------------------------------------------------------


def test_final_embeddings_equal_encode_image_and_encode_text(tiny, reference):
    model, preprocess, tokenizer = reference
    enc = load_encoder(_spec(tiny))
    images = _images()
    with torch.no_grad():
        want_img = model.encode_image(torch.stack([preprocess(im) for im in images])).numpy()
        want_txt = model.encode_text(tokenizer(TEXTS)).numpy()
    got_img, got_txt = enc.encode_images(images), enc.encode_texts(TEXTS)
    assert got_img.dtype == np.float32 and got_img.shape == (7, EMBED) and got_txt.shape == (7, EMBED)
    np.testing.assert_allclose(got_img, want_img, atol=1e-6)
    np.testing.assert_allclose(got_txt, want_txt, atol=1e-6)
    # not normalised (normalize=False), as the description says
    assert not np.allclose(np.linalg.norm(got_img, axis=1), 1.0)


def test_prepare_is_open_clip_preprocess_and_tokenizer(tiny, reference):
    _, preprocess, tokenizer = reference
    enc = load_encoder(_spec(tiny))
    images = _images(3)
    assert torch.equal(enc.prepare("image", images), torch.stack([preprocess(im) for im in images]))
    tokens = enc.prepare("text", TEXTS)
    assert torch.equal(tokens, tokenizer(TEXTS)) and tokens.shape == (7, CONTEXT)


# -- layers --------------------------------------------------------------------------------------


def _vision_states(model, pixels: torch.Tensor, layer: int) -> torch.Tensor:
    """Token states after block ``layer`` of open_clip's ViT, computed by hand from its modules."""
    v = model.visual
    x = v.conv1(pixels).flatten(2).transpose(1, 2)
    x = torch.cat([v.class_embedding.expand(x.shape[0], 1, -1), x], dim=1) + v.positional_embedding
    x = v.ln_pre(x)
    for block in v.transformer.resblocks[:layer]:
        x = block(x)
    return x


def _text_states(model, tokens: torch.Tensor, layer: int) -> torch.Tensor:
    """Token states after block ``layer`` of CLIP's text transformer, by hand."""
    x = model.token_embedding(tokens) + model.positional_embedding
    for block in model.transformer.resblocks[:layer]:
        x = block(x, attn_mask=model.attn_mask)
    return x


@pytest.mark.parametrize("layer", [0, 1, 2, -1])
def test_layer_is_the_pooled_hidden_state(tiny, reference, layer):
    model, preprocess, tokenizer = reference
    enc = load_encoder(_spec(tiny), layer=layer)
    index = layer % (LAYERS + 1)
    images = _images(4)
    tokens = tokenizer(TEXTS)
    with torch.no_grad():
        want_img = _vision_states(model, torch.stack([preprocess(im) for im in images]), index)[:, 0]
        states = _text_states(model, tokens, index)
        want_txt = states[torch.arange(len(TEXTS)), tokens.argmax(dim=-1)]
    got_img, got_txt = enc.encode_images(images), enc.encode_texts(TEXTS)
    assert got_img.shape == (4, WIDTH) and got_txt.shape == (7, WIDTH)
    np.testing.assert_allclose(got_img, want_img.numpy(), atol=1e-5)
    np.testing.assert_allclose(got_txt, want_txt.numpy(), atol=1e-5)


def test_last_layer_matches_forward_intermediates(tiny, reference):
    model, preprocess, tokenizer = reference
    images = _images(3)
    with torch.no_grad():
        out = model.forward_intermediates(
            image=torch.stack([preprocess(im) for im in images]),
            text=tokenizer(TEXTS),
            image_indices=[LAYERS - 1],
            text_indices=[LAYERS - 1],
            intermediates_only=True,
            image_output_fmt="NLC",
            image_output_extra_tokens=True,
        )
    enc = load_encoder(_spec(tiny), layer=LAYERS)
    np.testing.assert_allclose(enc.encode_images(images), out["image_intermediates_prefix"][0][:, 0].numpy(), atol=1e-5)
    tokens = tokenizer(TEXTS)
    want = out["text_intermediates"][0][torch.arange(len(TEXTS)), tokens.argmax(-1)]
    np.testing.assert_allclose(enc.encode_texts(TEXTS), want.numpy(), atol=1e-5)


def test_avg_pooled_vit_layer_is_the_mean_over_patch_tokens(tmp_path):
    folder = save_tiny_openclip(tmp_path / "avg", pool_type="avg")
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{folder}")
    images = _images(3)
    with torch.no_grad():
        want = _vision_states(model.eval(), torch.stack([preprocess(im) for im in images]), 1)[:, 1:].mean(dim=1)
    enc = load_encoder(_spec(folder), layer=1)
    np.testing.assert_allclose(enc.encode_images(images), want.numpy(), atol=1e-5)
    assert enc.describe()["pooling"]["image"].startswith("mean over patch tokens")


def test_timm_tower_and_custom_text_tower(tmp_path):
    """A SigLIP-like model: timm ViT without a class token ('map' pool), bidirectional text pooled at the last token."""
    pytest.importorskip("timm")
    folder = save_tiny_openclip(
        tmp_path / "siglipish",
        image_size=160,
        custom_text=True,
        timm_model_name="test_vit3",
        timm_pool="map",
        timm_proj="linear",
        text={"no_causal_mask": True, "pool_type": "last"},
    )
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{folder}")
    model = model.eval()
    tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
    images, tokens = _images(2), tokenizer(TEXTS[:3])
    pixels = torch.stack([preprocess(im) for im in images])
    trunk, text = model.visual.trunk, model.text
    with torch.no_grad():
        final_img, final_txt = model.encode_image(pixels).numpy(), model.encode_text(tokens).numpy()
        patches = trunk.forward_intermediates(pixels, indices=[2], output_fmt="NLC", intermediates_only=True)[0]
        x = text.token_embedding(tokens) + text.positional_embedding
        for block in text.transformer.resblocks[:1]:
            x = block(x)
    enc = load_encoder(_spec(folder))
    np.testing.assert_allclose(enc.encode_images(images), final_img, atol=1e-6)
    np.testing.assert_allclose(enc.encode_texts(TEXTS[:3]), final_txt, atol=1e-6)
    # forward_intermediates drops the prefix (register) token: the mean over what is left
    enc3 = load_encoder(_spec(folder), layer=3)
    np.testing.assert_allclose(enc3.encode_images(images), patches.mean(dim=1).numpy(), atol=1e-5)
    # the towers differ in depth: layer 3 exists in the vision tower only, so text fails at once
    with pytest.raises(BindscopeError, match="--layer 3 is out of range: the text tower of .* has 2 layers"):
        enc3.prepare("text", TEXTS[:1])
    assert enc3.describe()["pooling"]["text"].startswith("none: --layer 3 is out of range")
    enc1 = load_encoder(_spec(folder), layer=1)
    np.testing.assert_allclose(enc1.encode_texts(TEXTS[:3]), x[:, -1].numpy(), atol=1e-5)
    info = enc1.describe()
    assert info["num_layers"] == {"image": len(trunk.blocks), "text": LAYERS}
    assert info["towers"] == {"image": "TimmModel", "text": "TextTransformer"}
    assert "mean over patch tokens" in info["pooling"]["image"] and "last token" in info["pooling"]["text"]


def test_hook_leaves_no_trace(tiny):
    enc = load_encoder(_spec(tiny), layer=1)
    enc.encode_images(_images(2))
    enc.encode_texts(TEXTS)
    model = enc._model
    blocks = [*model.visual.transformer.resblocks, *model.transformer.resblocks]
    assert not any(b._forward_hooks or b._forward_pre_hooks for b in blocks)


# -- random weights --------------------------------------------------------------------------------


def test_rand_is_reproducible_different_and_seed_dependent(tiny):
    images = _images(3)
    state = torch.random.get_rng_state()
    a, b = load_encoder(_spec(tiny, "+rand")), load_encoder(_spec(tiny, "+rand"))
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random state is untouched
    c, trained = load_encoder(_spec(tiny, "+rand:1")), load_encoder(_spec(tiny))
    for modality, items in (("image", images), ("text", TEXTS)):
        ea, eb, ec, et = (e.encode(modality, items) for e in (a, b, c, trained))
        np.testing.assert_array_equal(ea, eb)
        assert not np.allclose(ea, ec, atol=1e-3) and not np.allclose(ea, et, atol=1e-3)
        assert torch.equal(a.prepare(modality, items), trained.prepare(modality, items))  # same preprocessing
    for key, value in a._model.state_dict().items():
        assert torch.equal(value, b._model.state_dict()[key]), key
    assert a.describe()["random_init"] == {"seed": 0} and c.describe()["random_init"] == {"seed": 1}
    assert a.describe()["weights_sha256"] is None
    assert a.describe()["preprocessing"] == trained.describe()["preprocessing"]


def test_rand_by_architecture_name_needs_no_weights():
    enc = load_encoder("openclip:ViT-B-32+rand", layer=1)  # no download: random weights from the built-in config
    info = enc.describe()
    assert info["num_layers"] == {"image": 12, "text": 12} and info["dim"] == {"image": 768, "text": 512}
    assert info["preprocessing"]["image"]["size"] == [224, 224] and info["resolved"] == "ViT-B-32"
    assert info["preprocessing"]["text"]["context_length"] == 77


def test_rand_with_a_tag_keeps_the_tags_preprocessing_without_its_weights():
    spec = parse_spec("openclip:ViT-L-14/laion2b_s32b_b82k+rand")
    assert backend.tag_preprocess(spec) == {
        "image_mean": (0.5, 0.5, 0.5),
        "image_std": (0.5, 0.5, 0.5),
        "image_interpolation": "bicubic",
        "image_resize_mode": "shortest",
    }
    assert backend.resolved(spec) == "ViT-L-14" and backend.hub_revision(spec) is None
    assert backend.resolved(spec.trained()) == "laion/CLIP-ViT-L-14-laion2B-s32B-b82K"


# -- describe and batching ---------------------------------------------------------------------


def test_describe(tiny):
    enc = load_encoder(_spec(tiny))
    info = enc.describe()
    assert json.loads(json.dumps(info)) == info
    assert info == load_encoder(_spec(tiny)).describe()  # deterministic
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
    assert info["backend"] == "openclip" and info["model_class"] == "CLIP"
    assert info["resolved"] == str(tiny.resolve()) and info["revision"] is None
    assert info["weights_sha256"] == weights_sha256(tiny)
    assert info["parameters"] == sum(p.numel() for p in enc._model.parameters())
    assert info["dim"] == {"image": EMBED, "text": EMBED} and info["num_layers"] == {"image": LAYERS, "text": LAYERS}
    assert info["layer"] is None and info["random_init"] is None and info["dtype"] == "float32"
    assert "normalize=False" in info["pooling"]["image"] and "not L2-normalised" in info["pooling"]["text"]
    image = info["preprocessing"]["image"]
    assert image["size"] == [32, 32] and image["interpolation"] == "bicubic" and image["resize_mode"] == "shortest"
    assert image["mean"] == pytest.approx(list(open_clip.OPENAI_DATASET_MEAN)) and "center crop" in image["crop"]
    text = info["preprocessing"]["text"]
    assert text["tokenizer"] == "SimpleTokenizer" and text["context_length"] == CONTEXT
    layered = load_encoder(_spec(tiny), layer=-1).describe()
    assert layered["layer"] == -1 and layered["dim"] == {"image": WIDTH, "text": WIDTH}
    assert "hidden_states[2]" in layered["pooling"]["image"] and "no projection" in layered["pooling"]["text"]


def test_batch_size_does_not_change_rows(tiny):
    for layer in (None, 1):
        enc = load_encoder(_spec(tiny), layer=layer)
        images = _images()
        np.testing.assert_allclose(
            enc.encode_images(images, batch_size=2), enc.encode_images(images, batch_size=7), atol=1e-5
        )
        np.testing.assert_allclose(
            enc.encode_texts(TEXTS, batch_size=2), enc.encode_texts(TEXTS, batch_size=7), atol=1e-5
        )


def test_half_precision_weights(tiny):
    enc = load_encoder(_spec(tiny), dtype="bfloat16")
    assert next(enc._model.parameters()).dtype == torch.bfloat16
    out = enc.encode_images(_images(2))
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(out, load_encoder(_spec(tiny)).encode_images(_images(2)), atol=0.1)


# -- bad inputs ----------------------------------------------------------------------------------


def test_folder_without_config(tmp_path):
    (tmp_path / "open_clip_model.safetensors").write_bytes(b"")
    with pytest.raises(BindscopeError, match="has no open_clip_config.json"):
        load_encoder(_spec(tmp_path))


def test_folder_without_weights(tiny, tmp_path):
    shutil.copy(tiny / "open_clip_config.json", tmp_path)
    with pytest.raises(BindscopeError, match=r"has no weights .*open_clip_model.safetensors.*\+rand"):
        load_encoder(_spec(tmp_path))


def test_config_without_model_cfg(tmp_path):
    (tmp_path / "open_clip_config.json").write_text(json.dumps({"preprocess_cfg": {}}))
    with pytest.raises(BindscopeError, match="no model_cfg"):
        load_encoder(_spec(tmp_path, "+rand"))


def test_weights_that_do_not_fit_the_config(tiny, tmp_path):
    shutil.copy(tiny / "open_clip_model.safetensors", tmp_path)
    config = json.loads((tiny / "open_clip_config.json").read_text())
    config["model_cfg"]["vision_cfg"]["width"] = 48
    (tmp_path / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(BindscopeError, match="could not be loaded by open_clip .*weights fit the model_cfg"):
        load_encoder(_spec(tmp_path))


def test_unknown_architecture():
    with pytest.raises(BindscopeError, match=r"unknown open_clip architecture 'ViT-B-33'.*did you mean.*ViT-B-32"):
        load_encoder("openclip:ViT-B-33+rand")


def test_unknown_pretrained_tag():
    with pytest.raises(BindscopeError, match=r"no pretrained weights 'nope' for ViT-B-32; its tags are: .*openai"):
        load_encoder("openclip:ViT-B-32/nope")


def test_hub_repo_offline(monkeypatch):
    # huggingface_hub reads HF_HUB_OFFLINE when imported (here at collection, before conftest sets it)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(BindscopeError, match=r"could not be loaded \(no network or no such model\?\).*local-dir"):
        load_encoder("openclip:hf-hub:bindscope-tests/no-such-model")


@pytest.mark.parametrize("layer", [3, -4])
def test_bad_layer(tiny, layer):
    with pytest.raises(BindscopeError, match=r"--layer .* out of range: the vision tower of .* has 2 layers"):
        load_encoder(_spec(tiny), layer=layer)


def test_bad_modality(tiny):
    with pytest.raises(BindscopeError, match="modality must be 'image' or 'text'"):
        load_encoder(_spec(tiny)).prepare("audio", ["x"])


def test_resnet_tower_has_final_embeddings_but_no_layers(tmp_path):
    folder = save_tiny_openclip(tmp_path / "rn", layers=[1, 1, 1, 1], width=8, head_width=8)
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{folder}")
    images = _images(2)
    with torch.no_grad():
        want = model.eval().encode_image(torch.stack([preprocess(im) for im in images])).numpy()
    np.testing.assert_allclose(load_encoder(_spec(folder)).encode_images(images), want, atol=1e-6)
    enc = load_encoder(_spec(folder), layer=1)
    assert enc.encode_texts(TEXTS).shape == (7, WIDTH)  # the text tower still has its layers
    with pytest.raises(
        BindscopeError, match=r"vision tower of .* \(ModifiedResNet\) has no per-layer outputs.*drop --layer"
    ):
        enc.encode_images(images)
    assert enc.describe()["num_layers"] == {"image": None, "text": LAYERS}
