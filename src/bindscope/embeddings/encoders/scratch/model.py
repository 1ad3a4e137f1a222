"""The controlled model of docs/method/09-scratch.md: a scene encoder and a query encoder of the same shape.

Each encoder: token embedding, sinusoidal positions, a pre-LN transformer encoder (GELU, or
SwiGLU with ``ff_activation``; no dropout) with a final LayerNorm (``final_norm``), the hidden
state at the EOS token, a linear head to ``d_out``. ``init`` chooses bindscope's initialisation
or the research code's xavier one.
Scores are ``min(exp(tau), max_logit_scale) * cos(z_scene, w_query)`` with a learnable ``tau``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bindscope.embeddings.encoders.base import seeded_init
from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """``[length, dim]`` sine/cosine position codes (Vaswani et al.)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10_000.0) / dim))
    out = torch.zeros(length, dim)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return out


class SequenceEncoder(nn.Module):
    """Token sequence -> the EOS hidden state through a pre-LN transformer -> ``d_out``."""

    positions: torch.Tensor  # a buffer: [max length, d_model] position codes

    def __init__(self, vocab: Vocabulary, config: ScratchConfig) -> None:
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab.size, config.d_model)
        if config.init == "bindscope":
            nn.init.normal_(self.embed.weight, std=config.embedding_std)  # small: attention starts positional
        length = max(vocab.scene_length, vocab.query_length)
        self.register_buffer("positions", sinusoidal_positions(length, config.d_model), persistent=False)
        gated = config.ff_activation == "swiglu"
        layer = nn.TransformerEncoderLayer(
            config.d_model,
            config.heads,
            config.ff,
            dropout=0.0,
            activation=SwiGLU() if gated else "gelu",
            batch_first=True,
            norm_first=True,
        )
        if gated:
            layer.linear1 = nn.Linear(config.d_model, 2 * config.ff)  # the gate and the value
        norm = nn.LayerNorm(config.d_model) if config.final_norm else None
        self.blocks = nn.TransformerEncoder(layer, config.layers, norm=norm, enable_nested_tensor=False)
        self.head = nn.Linear(config.d_model, config.d_out)
        if config.init == "xavier":
            xavier_init(self)

    def hidden(self, tokens: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        """``[B, T]`` tokens -> ``[B, d_model]``: the EOS state after ``layer`` blocks (None: all, then the
        final LayerNorm if there is one)."""
        x = self.embed(tokens) + self.positions[: tokens.shape[1]]
        padding = tokens == self.vocab.pad
        eos = (tokens == self.vocab.eos).float().argmax(1)
        rows = torch.arange(len(tokens), device=tokens.device)
        blocks = list(self.blocks.layers)[: len(self.blocks.layers) if layer is None else layer]
        if not blocks:
            return x[rows, eos]
        for block in blocks[:-1]:
            x = block(x, src_key_padding_mask=padding)
        out = eos_block(blocks[-1], x, rows, eos, padding)
        if layer is None and self.blocks.norm is not None:
            out = self.blocks.norm(out)
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(tokens))


class SwiGLU(nn.Module):
    """The gated feed-forward activation ``silu(gate) * value`` of a ``[..., 2 * ff]`` input split in halves
    (Shazeer 2020): a product of two projections of the token, so a token that mixes two values can
    carry their product."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * value


def eos_block(
    block: nn.TransformerEncoderLayer, x: torch.Tensor, rows: torch.Tensor, eos: torch.Tensor, padding: torch.Tensor
) -> torch.Tensor:
    """``block(x, src_key_padding_mask=padding)[rows, eos]`` computed at the EOS token only.

    The same maths as the full pre-LN block (no dropout): every token is normalised and projected to
    keys and values, but only the EOS token queries them and goes through the feed-forward layer,
    since no other position of the last block reaches the output.
    """
    if not block.norm_first:
        raise ValueError("eos_block needs a pre-LN block (norm_first=True)")
    h = block.norm1(x)
    attended = block.self_attn(h[rows, eos][:, None], h, h, key_padding_mask=padding, need_weights=False)[0][:, 0]
    y = x[rows, eos] + attended
    return y + block.linear2(block.activation(block.linear1(block.norm2(y))))


def xavier_init(module: nn.Module) -> None:
    """The research code's initialisation: ``xavier_uniform_`` on every parameter with two or more
    dimensions, in parameter order; 1-D parameters (biases, LayerNorm) keep what they have."""
    for p in module.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)


class DualEncoder(nn.Module):
    """Scene and query encoders plus the learnable temperature ``tau``.

    With ``shared_encoder`` one encoder reads scenes and queries (an object query is then the
    one-object scene), and only ``scene.*`` weights exist.
    """

    def __init__(self, vocab: Vocabulary, config: ScratchConfig) -> None:
        super().__init__()
        self.vocab = vocab
        self.max_logit_scale = config.max_logit_scale
        self.scene = SequenceEncoder(vocab, config)
        if not config.shared_encoder:
            self._modules["query"] = SequenceEncoder(vocab, config)  # weights named query.*, read by the property
        self.tau = nn.Parameter(torch.tensor(float(config.tau_init)))

    @property
    def query(self) -> SequenceEncoder:
        """The query encoder: its own weights, or the scene encoder itself with ``shared_encoder``."""
        own = self._modules.get("query")
        return self.scene if own is None else own  # type: ignore[return-value]

    def logit_scale(self) -> torch.Tensor:
        return self.tau.exp().clamp(max=self.max_logit_scale)

    def scores(self, scene_tokens: torch.Tensor, query_tokens: torch.Tensor) -> torch.Tensor:
        """``[B, Q]`` scaled cosine similarities of every scene with every query."""
        z = nn.functional.normalize(self.scene(scene_tokens), dim=-1)
        w = nn.functional.normalize(self.query(query_tokens), dim=-1)
        return self.logit_scale() * z @ w.T


def build_model(config: ScratchConfig, vocab: Vocabulary, seed: int | None = None) -> DualEncoder:
    """A freshly initialised model, its weights drawn from ``seed`` (default: the config's)."""
    with seeded_init(config.seed if seed is None else seed):
        return DualEncoder(vocab, config)
