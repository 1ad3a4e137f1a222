"""The hf: backend on tiny CLIP / SigLIP / DINOv2 models saved to folders, checked against transformers' own calls."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders import load_encoder
from bindscope.embeddings.encoders.base import count_parameters, weights_sha256
from tiny_models import save_tiny_bert, save_tiny_clip, save_tiny_dinov2, save_tiny_siglip

TEXTS = [
    "a red cube",
    "a small blue sphere left of a large green cylinder",
    "cube",
    "two red cubes and a ball",
    "a yellow cylinder behind a purple cube",
    " ".join(["a big shiny metal sphere"] * 8),  # > 32 tokens: truncated
    "green",
    "a cube right of a sphere",
    "the blue one",
]
# transformers (and huggingface_hub, which reads HF_HUB_OFFLINE and HF_HOME once, at import) is imported inside
# the tests, after conftest has isolated the environment, not at collection.
DESCRIBE_KEYS = {
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
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and two threads on a busy 2-core machine mostly wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("hf_models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield {
            "clip": save_tiny_clip(root / "clip"),
            "siglip": save_tiny_siglip(root / "siglip"),
            "dinov2": save_tiny_dinov2(root / "dinov2"),
        }


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Image.Image]:
    """Nine PNG files of different sizes and modes, opened as the pipeline opens them."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("pngs")
    out = []
    for i in range(9):
        h, w = 32 + 4 * i, 48 - 2 * i
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image = Image.fromarray(pixels).convert("L") if i == 3 else Image.fromarray(pixels)
        image = image.convert("RGBA") if i == 5 else image
        image.save(folder / f"{i}.png")
        out.append(Image.open(folder / f"{i}.png"))
    return out


def _model(family: str, path: Path) -> torch.nn.Module:
    import transformers

    name = {"clip": "CLIPModel", "siglip": "SiglipModel", "dinov2": "Dinov2Model"}[family]
    return getattr(transformers, name).from_pretrained(path, local_files_only=True).eval()


def _hf(path: Path, suffix: str = "") -> str:
    return f"hf:{path}{suffix}"


def _features(out: object) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def _pixels(path: Path, images: list[Image.Image]) -> torch.Tensor:
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
    return processor(images=[im.convert("RGB") for im in images], return_tensors="pt")["pixel_values"]


def _tokens(path: Path, **kwargs: object) -> dict[str, torch.Tensor]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return dict(tokenizer(TEXTS, truncation=True, max_length=32, return_tensors="pt", **kwargs))


def _close(got: np.ndarray, want: torch.Tensor, atol: float = 1e-5) -> None:
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=atol)


# -- CLIP ----------------------------------------------------------------------------------------


def test_clip_final_embeddings_are_the_models_features(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["clip"]))
    model = _model("clip", models["clip"])
    tokens = _tokens(models["clip"], padding=True)
    with torch.no_grad():
        want_image = _features(model.get_image_features(pixel_values=_pixels(models["clip"], images)))
        want_text = _features(
            model.get_text_features(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        )
    got_image, got_text = enc.encode_images(images), enc.encode_texts(TEXTS)
    assert got_image.shape == (9, 24) and got_text.shape == (9, 24)
    assert enc.dim("image") == enc.dim("text") == 24
    _close(got_image, want_image)
    _close(got_text, want_text)


@pytest.mark.parametrize("family", ["clip", "siglip", "dinov2"])
def test_embeddings_do_not_depend_on_batch_size(
    models: dict[str, Path], images: list[Image.Image], family: str
) -> None:
    enc = load_encoder(_hf(models[family]))
    np.testing.assert_allclose(
        enc.encode_images(images, batch_size=2), enc.encode_images(images, batch_size=7), atol=1e-5
    )
    if family != "dinov2":
        np.testing.assert_allclose(
            enc.encode_texts(TEXTS, batch_size=2), enc.encode_texts(TEXTS, batch_size=7), atol=1e-5
        )


def test_images_are_converted_to_rgb(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["clip"]))
    grey, rgba = images[3], images[5]
    assert (grey.mode, rgba.mode) == ("L", "RGBA")
    np.testing.assert_array_equal(
        enc.encode_images([grey, rgba]), enc.encode_images([grey.convert("RGB"), rgba.convert("RGB")])
    )


@pytest.mark.parametrize("layer", [0, 1, -1])
def test_clip_layers_are_hidden_states_at_cls_and_end_of_text(
    models: dict[str, Path], images: list[Image.Image], layer: int
) -> None:
    model = _model("clip", models["clip"])
    tokens = _tokens(models["clip"], padding=True)
    with torch.no_grad():
        vision = model.vision_model(
            pixel_values=_pixels(models["clip"], images), output_hidden_states=True
        ).hidden_states
        text = model.text_model(
            input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"], output_hidden_states=True
        ).hidden_states
    assert len(vision) == 4 and len(text) == 3
    eos = tokens["attention_mask"].sum(dim=1) - 1  # BERT's [SEP] ends every row: the last attended token
    assert (tokens["input_ids"][torch.arange(9), eos] == 102).all()
    enc = load_encoder(_hf(models["clip"]), layer=layer)
    _close(enc.encode_images(images), vision[layer][:, 0])
    _close(enc.encode_texts(TEXTS), text[layer][torch.arange(9), eos])
    assert enc.dim("image") == enc.dim("text") == 32
    assert f"hidden_states[{layer % 4}]" in enc.describe()["pooling"]["image"]
    assert f"hidden_states[{layer % 3}]" in enc.describe()["pooling"]["text"]


@pytest.mark.parametrize("eos_token_id", [102, 2])
def test_clip_last_layer_through_norm_and_projection_is_the_final_embedding(
    models: dict[str, Path], images: list[Image.Image], tmp_path: Path, eos_token_id: int
) -> None:
    """Layer -1 pools where CLIP pools, for the current (first eos) and legacy (eos id 2: argmax) rules."""
    folder = shutil.copytree(models["clip"], tmp_path / "clip")
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["eos_token_id"] = eos_token_id
    (folder / "config.json").write_text(json.dumps(config))
    final, last = load_encoder(_hf(folder)), load_encoder(_hf(folder), layer=-1)
    model = last.model
    with torch.no_grad():
        text = model.text_projection(model.text_model.final_layer_norm(torch.from_numpy(last.encode_texts(TEXTS))))
        image = model.visual_projection(model.vision_model.post_layernorm(torch.from_numpy(last.encode_images(images))))
    _close(final.encode_texts(TEXTS), text)
    _close(final.encode_images(images), image)
    assert ("argmax" in final.describe()["pooling"]["text"]) == (eos_token_id == 2)


def test_clip_layer_out_of_range(models: dict[str, Path]) -> None:
    with pytest.raises(
        BindscopeError,
        match=r"--layer 4 is out of range: the vision tower of .* has 3 layers .*; the text "
        r"tower of .* has 2 layers",
    ):
        load_encoder(_hf(models["clip"]), layer=4)
    with pytest.raises(BindscopeError, match="--layer -5 is out of range"):
        load_encoder(_hf(models["clip"]), layer=-5)


def test_clip_layer_that_fits_only_the_vision_tower(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["clip"]), layer=3)
    assert enc.encode_images(images[:2]).shape == (2, 32)
    with pytest.raises(BindscopeError, match=r"--layer 3 is out of range: the text tower of .* has 2 layers"):
        enc.encode_texts(TEXTS)


def test_clip_random_weights_are_seeded(models: dict[str, Path], images: list[Image.Image]) -> None:
    state = torch.random.get_rng_state()
    rand0, again = load_encoder(_hf(models["clip"], "+rand")), load_encoder(_hf(models["clip"], "+rand"))
    rand1, trained = load_encoder(_hf(models["clip"], "+rand:1")), load_encoder(_hf(models["clip"]))
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random state is left alone
    for modality, items in [("image", images), ("text", TEXTS)]:
        x0, x1 = rand0.encode(modality, items), rand1.encode(modality, items)
        np.testing.assert_array_equal(x0, again.encode(modality, items))
        assert np.abs(x0 - x1).max() > 1e-3
        assert np.abs(x0 - trained.encode(modality, items)).max() > 1e-3
    assert rand0.describe()["random_init"] == {"seed": 0} and rand1.describe()["random_init"] == {"seed": 1}
    assert rand0.describe()["weights_sha256"] is None  # the folder's weights are not read
    assert rand0.describe()["parameters"] == trained.describe()["parameters"]
    assert rand0.describe()["preprocessing"] == trained.describe()["preprocessing"]


@pytest.mark.parametrize("family", ["siglip", "dinov2"])
def test_random_weights_of_siglip_and_dinov2(models: dict[str, Path], images: list[Image.Image], family: str) -> None:
    rand, again, trained = (load_encoder(_hf(models[family], s)) for s in ("+rand:3", "+rand:3", ""))
    x = rand.encode_images(images[:3])
    np.testing.assert_array_equal(x, again.encode_images(images[:3]))
    assert np.abs(x - trained.encode_images(images[:3])).max() > 1e-3


def test_clip_describe(models: dict[str, Path]) -> None:
    path = models["clip"]
    info = load_encoder(_hf(path)).describe()
    assert set(info) == DESCRIBE_KEYS
    json.dumps(info)
    assert info["backend"] == "hf" and info["model_class"] == "CLIPModel"
    assert info["resolved"] == str(path.resolve()) and info["revision"] is None
    assert info["weights_sha256"] == weights_sha256(path) and len(info["weights_sha256"]) == 64
    assert load_encoder(_hf(path)).describe() == info  # deterministic: it is hashed into the store's content key
    assert info["parameters"] == count_parameters(_model("clip", path))
    assert info["dim"] == {"image": 24, "text": 24} and info["num_layers"] == {"image": 3, "text": 2}
    assert info["dtype"] == "float32" and info["layer"] is None and info["random_init"] is None
    assert "visual_projection" in info["pooling"]["image"] and "eos_token_id 102" in info["pooling"]["text"]
    image = info["preprocessing"]["image"]
    assert image["crop_size"] == {"height": 32, "width": 32} and image["size"] == {"shortest_edge": 32}
    assert image["resample"] == "bicubic" and image["image_mean"] == pytest.approx([0.48145466, 0.4578275, 0.40821073])
    assert image["backend"] == "torchvision"
    assert info["preprocessing"]["text"] == {
        "tokenizer": "BertTokenizer",
        "vocab_size": 30522,
        "max_length": 32,
        "padding": "longest",
        "truncation": True,
        "inputs": ["input_ids", "attention_mask"],
    }
    layered = load_encoder(_hf(path), layer=1).describe()
    assert layered["layer"] == 1 and layered["dim"] == {"image": 32, "text": 32}


@pytest.mark.parametrize(("dtype", "tolerance"), [("float16", 0.01), ("bfloat16", 0.05)])
def test_half_precision_gives_float32_rows_close_to_float32(
    models: dict[str, Path], images: list[Image.Image], dtype: str, tolerance: float
) -> None:
    """Half precision runs on the CPU too; bfloat16 keeps 8 mantissa bits, hence the looser bound.

    The bound is relative to the scale of the embeddings.
    """
    full, half = load_encoder(_hf(models["clip"])), load_encoder(_hf(models["clip"]), dtype=dtype)
    assert half.model.dtype == getattr(torch, dtype) and half.describe()["dtype"] == dtype
    for modality, items in [("image", images), ("text", TEXTS)]:
        want, got = full.encode(modality, items), half.encode(modality, items)
        assert got.dtype == np.float32 and got.shape == want.shape and np.isfinite(got).all()
        assert np.abs(got - want).max() < tolerance * np.abs(want).max()


def test_prepare_is_thread_safe(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["clip"]))
    batches = [TEXTS[i:] for i in range(8)] * 4
    with ThreadPoolExecutor(4) as pool:
        prepared = list(pool.map(lambda b: enc.prepare("text", b), batches))
        pixels = list(pool.map(lambda i: enc.prepare("image", images[i:]), range(8)))
    for batch, inputs in zip(batches, prepared):
        assert torch.equal(inputs["input_ids"], enc.prepare("text", batch)["input_ids"])
    for i, inputs in enumerate(pixels):
        assert torch.equal(inputs["pixel_values"], enc.prepare("image", images[i:])["pixel_values"])


# -- SigLIP --------------------------------------------------------------------------------------


def test_siglip_final_embeddings_are_the_models_features(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["siglip"]))
    model = _model("siglip", models["siglip"])
    tokens = _tokens(models["siglip"], padding="max_length")
    assert tokens["input_ids"].shape == (9, 32)
    with torch.no_grad():
        want_image = _features(model.get_image_features(pixel_values=_pixels(models["siglip"], images)))
        want_text = _features(model.get_text_features(input_ids=tokens["input_ids"]))
    _close(enc.encode_images(images), want_image)
    _close(enc.encode_texts(TEXTS), want_text)
    info = enc.describe()
    assert info["dim"] == {"image": 32, "text": 32} and info["model_class"] == "SiglipModel"
    assert info["preprocessing"]["text"]["padding"] == "max_length"
    assert info["preprocessing"]["text"]["inputs"] == ["input_ids"]


@pytest.mark.parametrize("layer", [1, -1])
def test_siglip_layers_are_patch_means_and_last_tokens(
    models: dict[str, Path], images: list[Image.Image], layer: int
) -> None:
    model = _model("siglip", models["siglip"])
    tokens = _tokens(models["siglip"], padding="max_length")
    with torch.no_grad():
        vision = model.vision_model(
            pixel_values=_pixels(models["siglip"], images), output_hidden_states=True
        ).hidden_states
        text = model.text_model(input_ids=tokens["input_ids"], output_hidden_states=True).hidden_states
    enc = load_encoder(_hf(models["siglip"]), layer=layer)
    assert vision[layer].shape[1] == 16  # 4 x 4 patches, no cls token
    _close(enc.encode_images(images), vision[layer].mean(dim=1))
    _close(enc.encode_texts(TEXTS), text[layer][:, 31])
    if layer == -1:  # the model's own text pooling: final norm and head on the same token
        with torch.no_grad():
            head = model.text_model.head(model.text_model.final_layer_norm(torch.from_numpy(enc.encode_texts(TEXTS))))
        _close(load_encoder(_hf(models["siglip"])).encode_texts(TEXTS), head)


# -- DINOv2 --------------------------------------------------------------------------------------


def test_dinov2_final_embedding_is_the_pooler_output(models: dict[str, Path], images: list[Image.Image]) -> None:
    enc = load_encoder(_hf(models["dinov2"]))
    model = _model("dinov2", models["dinov2"])
    with torch.no_grad():
        out = model(pixel_values=_pixels(models["dinov2"], images), output_hidden_states=True)
    got = enc.encode_images(images)
    _close(got, out.pooler_output)
    with torch.no_grad():
        _close(got, model.layernorm(out.hidden_states[-1])[:, 0])
    info = enc.describe()
    assert (
        info["dim"] == {"image": 32} and info["num_layers"] == {"image": 3} and set(info["preprocessing"]) == {"image"}
    )
    assert info["preprocessing"]["image"]["size"] == {"shortest_edge": 37}


@pytest.mark.parametrize("layer", [0, 2, -1])
def test_dinov2_layers_are_cls_tokens(models: dict[str, Path], images: list[Image.Image], layer: int) -> None:
    model = _model("dinov2", models["dinov2"])
    with torch.no_grad():
        hidden = model(pixel_values=_pixels(models["dinov2"], images), output_hidden_states=True).hidden_states
    _close(load_encoder(_hf(models["dinov2"]), layer=layer).encode_images(images), hidden[layer][:, 0])


def test_dinov2_refuses_text(models: dict[str, Path]) -> None:
    enc = load_encoder(_hf(models["dinov2"]))
    assert enc.modalities == ("image",)
    with pytest.raises(
        BindscopeError, match="DINOv2 model: it is image-only and has no text tower; use --modality image"
    ):
        enc.encode_texts(["a red cube"])


# -- bad inputs ----------------------------------------------------------------------------------


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(BindscopeError, match=r"is not a saved transformers model \(no config.json\); save the model"):
        load_encoder(_hf(tmp_path / "empty"))


def test_unsupported_model_type(tmp_path: Path) -> None:
    bert = save_tiny_bert(tmp_path / "bert")
    with pytest.raises(
        BindscopeError,
        match=r"is a 'bert' model; the hf backend supports model types clip, siglip, dinov2 "
        r".*use st:.* for sentence encoders and openclip:",
    ):
        load_encoder(_hf(bert))


def test_hub_id_offline_is_one_clear_line() -> None:
    """HF_HUB_OFFLINE is honoured as set now, even though huggingface_hub was imported before conftest set it."""
    with pytest.raises(
        BindscopeError,
        match=r"hf:bindscope-tests/no-such-clip could not be loaded \(no network or no "
        r"such model\?\): its config.json is not in the local hub cache and HF_HUB_OFFLINE is set; "
        r"give a local folder",
    ) as info:
        load_encoder("hf:bindscope-tests/no-such-clip")
    assert "\n" not in str(info.value) and len(str(info.value)) < 600
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_revision_on_a_local_folder_is_refused(models: dict[str, Path]) -> None:
    with pytest.raises(BindscopeError, match="a local folder has no revisions; drop '@v1'"):
        load_encoder(_hf(models["clip"], "@v1"))


def test_folder_without_weights(models: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(models["clip"], tmp_path / "clip")
    (folder / "model.safetensors").unlink()
    with pytest.raises(BindscopeError, match=r"the weights in folder .* could not be loaded \(OSError: .*re-save it"):
        load_encoder(_hf(folder))
    assert load_encoder(_hf(folder, "+rand")).encode_texts(["a cube"]).shape == (1, 24)  # random weights need none


def test_weights_of_another_model(models: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(models["clip"], tmp_path / "clip")
    shutil.copy(models["dinov2"] / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(
        BindscopeError, match=r"the weights lack \d+ CLIPModel parameters \(.*\), which would be random"
    ):
        load_encoder(_hf(folder))


def test_folder_without_tokenizer(models: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(models["clip"], tmp_path / "clip")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    enc = load_encoder(_hf(folder))  # images need no tokenizer: only texts are refused (issue 21)
    assert enc.encode_images([Image.new("RGB", (32, 32))]).shape == (1, 24)
    with pytest.raises(BindscopeError, match="tokenizer has no vocabulary .* save the model's tokenizer there"):
        enc.encode_texts(["a cube"])


def test_folder_without_image_processor(models: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(models["dinov2"], tmp_path / "dinov2")
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(
        BindscopeError, match=r"the image processor \(preprocessor_config.json\) in folder .* could not be"
    ):
        load_encoder(_hf(folder))


def test_items_of_the_wrong_type(models: dict[str, Path]) -> None:
    enc = load_encoder(_hf(models["clip"]))
    with pytest.raises(BindscopeError, match="embeds PIL images; got a ndarray"):
        enc.encode_images([np.zeros((32, 32, 3), np.uint8)])
    with pytest.raises(BindscopeError, match="embeds a list of strings; got a int among them"):
        enc.prepare("text", ["a", 2])
