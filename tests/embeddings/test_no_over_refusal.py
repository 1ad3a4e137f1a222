"""No over-refusal: a model missing a part that one modality needs still embeds the other modality.

A tokenizer is needed for texts only, an image processor for images only, a tower's weights for
its own modality only; the modality that lacks its part is refused with one line naming the part.
(A hub repo without tokenizer files: tests/embeddings/test_local_hub.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders import load_encoder
from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip
from tiny_openclip import save_tiny_openclip

TEXTS = ["a red cube", "a blue sphere left of a green cylinder", "cube"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "clip")


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(3)]


def _without(folder: Path, dest: Path, *names: str) -> Path:
    copy = shutil.copytree(folder, dest)
    for name in names:
        (copy / name).unlink()
    return copy


def _drop_weights(folder: Path, keep: object) -> None:
    """Rewrite the folder's model.safetensors without the parameters ``keep(name)`` rejects."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = load_file(path)
    save_file({k: v for k, v in state.items() if keep(k)}, path, metadata={"format": "pt"})  # type: ignore[operator]


@pytest.fixture(scope="module")
def clip_without_tokenizer(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _without(clip, tmp_path_factory.mktemp("no-tok") / "clip", "tokenizer.json", "tokenizer_config.json")


@pytest.mark.slow
def test_clip_without_tokenizer_embeds_images(
    run_cli, clevr_images_dir: Path, clip_without_tokenizer: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "embed",
        clevr_images_dir,
        "-m",
        f"hf:{clip_without_tokenizer}",
        "--modality",
        "image",
        "-o",
        tmp_path / "e",
        "-q",
    )
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "e" / "embeddings.npy").shape == (576, 24)
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert "tokenizer has no vocabulary" in manifest["model"]["preprocessing"]["text"]["unavailable"]


@pytest.mark.slow
def test_clip_without_tokenizer_refuses_texts_in_one_line(
    run_cli, clevr_dir: Path, clip_without_tokenizer: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "embed", clevr_dir, "-m", f"hf:{clip_without_tokenizer}", "--modality", "text", "-o", tmp_path / "e"
    )
    assert_one_line_error(result, "cannot embed texts: its tokenizer has no vocabulary")
    assert "save the model's tokenizer there with save_pretrained" in result.stderr
    assert not (tmp_path / "e").exists()


def test_clip_without_image_processor_embeds_texts_and_refuses_images(
    clip: Path, images: list[Image.Image], tmp_path: Path
) -> None:
    folder = _without(clip, tmp_path / "clip", "preprocessor_config.json")
    enc = load_encoder(f"hf:{folder}")
    np.testing.assert_allclose(enc.encode_texts(TEXTS), load_encoder(f"hf:{clip}").encode_texts(TEXTS), atol=1e-6)
    with pytest.raises(
        BindscopeError, match=r"image processor \(preprocessor_config.json\) in folder .*--modality text"
    ):
        enc.encode_images(images)
    assert "could not be loaded" in enc.describe()["preprocessing"]["image"]["unavailable"]


def test_weights_without_the_text_tower_embed_images(clip: Path, images: list[Image.Image], tmp_path: Path) -> None:
    folder = shutil.copytree(clip, tmp_path / "clip")
    _drop_weights(folder, lambda name: not name.startswith(("text_model.", "text_projection.")))
    enc = load_encoder(f"hf:{folder}")
    np.testing.assert_allclose(enc.encode_images(images), load_encoder(f"hf:{clip}").encode_images(images), atol=1e-6)
    with pytest.raises(BindscopeError, match=r"cannot embed texts: the weights lack \d+ text-tower parameters .*image"):
        enc.encode_texts(TEXTS)


def test_weights_without_logit_scale_embed_both(clip: Path, images: list[Image.Image], tmp_path: Path) -> None:
    """CLIP's logit_scale only scales similarities: the embeddings do not need it."""
    folder = shutil.copytree(clip, tmp_path / "clip")
    _drop_weights(folder, lambda name: name != "logit_scale")
    enc, full = load_encoder(f"hf:{folder}"), load_encoder(f"hf:{clip}")
    np.testing.assert_allclose(enc.encode_texts(TEXTS), full.encode_texts(TEXTS), atol=1e-6)
    np.testing.assert_allclose(enc.encode_images(images), full.encode_images(images), atol=1e-6)


def test_open_clip_without_its_tokenizer_files_embeds_images(images: list[Image.Image], tmp_path: Path) -> None:
    """text_cfg names an hf_tokenizer_name, whose files the folder lacks: texts are refused, images are not."""
    folder = save_tiny_openclip(tmp_path / "oc", text={"hf_tokenizer_name": "bindscope-tests/no-such-tokenizer"})
    enc = load_encoder(f"openclip:local-dir:{folder}")
    assert enc.encode_images(images).shape == (3, 24)
    with pytest.raises(
        BindscopeError, match="cannot embed texts: its tokenizer could not be loaded .*--modality image"
    ):
        enc.encode_texts(TEXTS)
    info = enc.describe()
    assert set(info["dim"]) == {"image"} and "tokenizer" in info["preprocessing"]["text"]["unavailable"]
