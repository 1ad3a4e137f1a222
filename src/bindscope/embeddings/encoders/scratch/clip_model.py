"""A CLIP in miniature (docs/method/09-scratch.md): an image tower, a text tower and a learned temperature.

Towers (``towers`` of :class:`ClipConfig`):

- ``pooled`` (CLIP-like): three 3x3 convolutions (stride 1, 2, 2; GELU) with global average pooling
  and a linear head; a pre-LN transformer over word embeddings (sinusoidal positions unless
  ``text_positions`` is off) with mean pooling over the words and a linear head.
- ``slot``: an MLP on the flattened image; a GRU over the words, its last state through a linear head.

Images are read as RGB, resized to ``image_size`` squared with PIL's box filter and scaled to [-1, 1]
(:func:`image_tensor`); captions are split on whitespace into the words of :class:`Words`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import seeded_init
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.embeddings.encoders.scratch.model import sinusoidal_positions

PAD_WORD = "<pad>"


@dataclass(frozen=True)
class Words:
    """The text tower's vocabulary: ``<pad>`` then the words of the training dataset's captions, sorted."""

    words: tuple[str, ...]
    max_length: int

    @classmethod
    def of(cls, captions: Sequence[str]) -> Words:
        """The vocabulary of ``captions`` (every word, and room for the longest)."""
        split = [str(c).split() for c in captions]
        if not split or not any(split):
            raise BindscopeError("the dataset has no captions to learn words from; give a dataset with captions")
        return cls((PAD_WORD, *sorted({w for s in split for w in s})), max(len(s) for s in split))

    @property
    def size(self) -> int:
        return len(self.words)

    def tokens(self, captions: Sequence[str]) -> torch.Tensor:
        """``[N, max_length]`` word ids (0: padding); an unknown word or a longer caption is an error."""
        index = {w: i for i, w in enumerate(self.words)}
        out = torch.zeros(len(captions), self.max_length, dtype=torch.long)
        for row, caption in enumerate(captions):
            split = str(caption).split()
            unknown = [w for w in split if w not in index]
            if unknown:
                raise BindscopeError(
                    f"caption {caption!r} has word(s) {', '.join(sorted(set(unknown)))} that the model never read; "
                    "an image-text scratch model embeds captions of its training dataset's words only"
                )
            if not split or len(split) > self.max_length:
                raise BindscopeError(
                    f"caption {caption!r} has {len(split)} words; this model reads 1 to {self.max_length} words"
                )
            out[row, : len(split)] = torch.tensor([index[w] for w in split])
        return out

    def to_dict(self) -> dict:
        return {"words": list(self.words), "max_length": self.max_length}

    @classmethod
    def from_dict(cls, data: dict) -> Words:
        return cls(tuple(data["words"]), int(data["max_length"]))


def image_tensor(images: Sequence[Any], size: int) -> torch.Tensor:
    """``[N, 3, size, size]`` float images in [-1, 1] of image paths or PIL images: RGB, resized with a box filter."""
    from PIL import Image

    def pixels(img: Any) -> np.ndarray:
        return np.asarray(img.convert("RGB").resize((size, size), Image.Resampling.BOX))

    out = np.empty((len(images), size, size, 3), dtype=np.uint8)
    for i, item in enumerate(images):
        if not isinstance(item, (str, Path)):
            out[i] = pixels(item)
            continue
        try:
            with Image.open(item) as img:
                out[i] = pixels(img)
        except (OSError, ValueError) as exc:
            raise BindscopeError(f"cannot read image {item} ({exc}); render the dataset again") from None
    return torch.from_numpy(out).permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)


class PooledImageTower(nn.Module):
    """Convolutions, then the mean over positions: each object's features are summed, wherever it is."""

    def __init__(self, config: ClipConfig) -> None:
        super().__init__()
        c = config.channels
        self.features = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1),
            nn.GELU(),
            nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1),
            nn.GELU(),
        )
        self.head = nn.Linear(2 * c, config.d_out)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))


class SlotImageTower(nn.Module):
    """An MLP on the flattened image: every pixel position has its own weights."""

    def __init__(self, config: ClipConfig) -> None:
        super().__init__()
        size = 3 * config.image_size**2
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(size, config.hidden), nn.GELU(), nn.Linear(config.hidden, config.d_out)
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


class PooledTextTower(nn.Module):
    """Word embeddings (+ positions), a pre-LN transformer, the mean over the words, a linear head."""

    positions: torch.Tensor

    def __init__(self, config: ClipConfig, words: Words) -> None:
        super().__init__()
        self.embed = nn.Embedding(words.size, config.d_model, padding_idx=0)
        codes = sinusoidal_positions(words.max_length, config.d_model)
        self.register_buffer("positions", codes if config.text_positions else torch.zeros_like(codes), persistent=False)
        layer = nn.TransformerEncoderLayer(
            config.d_model,
            config.heads,
            2 * config.d_model,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, config.text_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.d_out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        padding = tokens == 0
        x = self.blocks(self.embed(tokens) + self.positions[: tokens.shape[1]], src_key_padding_mask=padding)
        keep = (~padding).unsqueeze(-1).to(x.dtype)
        return self.head(self.norm((x * keep).sum(1) / keep.sum(1).clamp_min(1.0)))


class SlotTextTower(nn.Module):
    """A GRU over the words; its state after the last word through a linear head."""

    def __init__(self, config: ClipConfig, words: Words) -> None:
        super().__init__()
        self.embed = nn.Embedding(words.size, config.d_model, padding_idx=0)
        self.gru = nn.GRU(config.d_model, config.d_model, batch_first=True)
        self.head = nn.Linear(config.d_model, config.d_out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(self.embed(tokens))
        last = (tokens != 0).sum(1).clamp_min(1) - 1
        return self.head(states[torch.arange(len(tokens), device=tokens.device), last])


class ClipModel(nn.Module):
    """An image tower, a text tower and the learned log logit scale ``tau``."""

    def __init__(self, config: ClipConfig, words: Words) -> None:
        super().__init__()
        self.config = config
        self.words = words
        pooled = config.towers == "pooled"
        self.image: nn.Module = PooledImageTower(config) if pooled else SlotImageTower(config)
        self.text: nn.Module = PooledTextTower(config, words) if pooled else SlotTextTower(config, words)
        self.tau = nn.Parameter(torch.tensor(float(config.tau_init)))

    def logit_scale(self) -> torch.Tensor:
        return self.tau.exp().clamp(max=self.config.max_logit_scale)

    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.image(images), dim=-1)

    def embed_texts(self, tokens: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.text(tokens), dim=-1)


def build_clip(config: ClipConfig, words: Words, seed: int | None = None) -> ClipModel:
    """A fresh model, initialised from ``seed`` (default the config's) without touching torch's global state."""
    with seeded_init(config.seed if seed is None else seed):
        return ClipModel(config, words)
