"""A tiny randomly initialised open_clip CLIP, saved as a folder that ``openclip:local-dir:`` loads.

The folder holds what open_clip's own hub export holds (``open_clip.push_to_hf_hub.save_for_hf``):
``open_clip_config.json`` with ``model_cfg`` and ``preprocess_cfg``, and the state dict as
``open_clip_model.safetensors``. The text tower uses open_clip's default SimpleTokenizer, whose
BPE vocabulary ships inside the open_clip package, so everything works offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WIDTH = 32
LAYERS = 2
PATCH = 8
CONTEXT = 16
EMBED = 24
VOCAB = 49408  # SimpleTokenizer's vocabulary (ids up to <end_of_text> = 49407)


def tiny_model_cfg(
    image_size: int = 32, *, custom_text: bool = False, text: dict[str, Any] | None = None, **vision: Any
) -> dict[str, Any]:
    """An open_clip model_cfg: ViT (width 32, 2 layers, patch 8) and text transformer (width 32, 2 layers)."""
    cfg: dict[str, Any] = {
        "embed_dim": EMBED,
        "vision_cfg": {
            "image_size": image_size,
            "layers": LAYERS,
            "width": WIDTH,
            "patch_size": PATCH,
            "head_width": 16,
            "mlp_ratio": 2.0,
            **vision,
        },
        "text_cfg": {
            "context_length": CONTEXT,
            "vocab_size": VOCAB,
            "width": WIDTH,
            "heads": 2,
            "layers": LAYERS,
            "mlp_ratio": 2.0,
            **(text or {}),
        },
    }
    if custom_text:
        cfg["custom_text"] = True
    return cfg


def save_tiny_openclip(
    path: str | Path,
    image_size: int = 32,
    *,
    seed: int = 1000,
    custom_text: bool = False,
    text: dict[str, Any] | None = None,
    **vision: Any,
) -> Path:
    """Build a tiny open_clip CLIP from a config under ``seed`` and save it into ``path``; returns ``path``.

    ``custom_text`` builds a ``CustomTextCLIP`` (text tower as ``model.text``), ``text`` updates
    ``text_cfg`` and other keywords update ``vision_cfg`` (e.g. ``pool_type="avg"``, or
    ``timm_model_name="test_vit3"`` for a timm vision tower). The same arguments always give the
    same weights; the default seed is not a small one, so that ``+rand`` (seed 0) differs from them.
    """
    import open_clip
    import torch
    from open_clip.push_to_hf_hub import save_config_for_hf
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model_cfg = tiny_model_cfg(image_size, custom_text=custom_text, text=text, **vision)
    model_class = open_clip.CustomTextCLIP if custom_text else open_clip.CLIP
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(**{k: v for k, v in model_cfg.items() if k != "custom_text"}).eval()
    # the factory would set these; save_config_for_hf reads them to write preprocess_cfg
    open_clip.set_model_preprocess_cfg(
        model,
        {
            "size": image_size,
            "mode": "RGB",
            "mean": open_clip.OPENAI_DATASET_MEAN,
            "std": open_clip.OPENAI_DATASET_STD,
            "interpolation": "bicubic",
            "resize_mode": "shortest",
            "fill_color": 0,
        },
    )
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path / "open_clip_model.safetensors")
    save_config_for_hf(model, path / "open_clip_config.json", model_config=model_cfg)
    return path
