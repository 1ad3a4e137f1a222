"""The training config of an image-text model trained from scratch (a CLIP in miniature, docs/method/09-scratch.md).

Its ``config.json`` records this schema. ``kind: image-text`` tells it from the token-level
:class:`~bindscope.embeddings.encoders.scratch.config.ScratchConfig`. A config names the towers,
how batches are drawn, which hard negatives are added, how the dataset's scenes are split, the
image size the towers read, the widths and the schedule; the dataset itself is given when training
(``--dataset``) and recorded beside the config.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from bindscope.core.validation import MAX_STEPS, Schema, Seed

Towers = Literal["pooled", "slot"]
Batches = Literal["swap-free", "natural"]
HardNegatives = Literal["none", "attribute", "noun", "both"]
Split = Literal["combinations", "objects"]


class ClipConfig(Schema):
    """Everything that defines one image-text training run; every field is validated, unknown keys are errors."""

    model_config = ConfigDict(use_attribute_docstrings=True)  # frozen, extra="forbid": Schema

    kind: Literal["image-text"] = "image-text"
    """Marks an image-text config (a token-level config has no ``kind``)."""
    name: str = Field(default="custom", description="A label for the run, recorded in the model folder.")
    dataset: str | None = Field(
        default=None,
        description="The dataset folder trained on (with rendered images and captions); given with `--dataset`.",
    )
    towers: Towers = "pooled"
    """``pooled``: a convolutional image tower with global average pooling and a transformer text tower
    with mean pooling (CLIP-like: both towers pool over positions). ``slot``: an MLP on the flattened
    image and a GRU over the words (every position has its own weights: a positional shortcut is open)."""
    batches: Batches = "swap-free"
    """``swap-free``: no scene and its binding swap (nor either in the other mention order) in one batch,
    as web captions behave. ``natural``: scenes drawn uniformly, so a scene's swap can be an ordinary
    in-batch negative."""
    hard_negatives: HardNegatives = "none"
    """Captions added as extra negatives of each image (NegCLIP-style): its ``attribute`` swap, its
    ``noun`` swap, ``both`` or ``none``; on a relation or count space every choice but ``none`` adds the
    family swap too (subject and object, or the counts, exchanged); only swaps of trained-on scenes are added."""
    split: Split = "combinations"
    """How the dataset's scenes are held out. ``combinations``: a share of the scene groups closed under
    the binding swap and the order reversal, so no held-out caption is ever seen, not even as a
    negative. ``objects``: bindscope's object split; training scenes hold trained-on objects only."""
    fraction: float = Field(
        default=0.8,
        gt=0.0,
        lt=1.0,
        description="Share trained on (the coverage): of the scene groups (`split: combinations`) or of the objects "
        "(`split: objects`); in (0, 1).",
    )
    seed: Seed = Field(default=0, description="Seed of the split, the initialisation and the batches.")
    image_size: int = Field(
        default=32, ge=8, le=512, description="The towers read images resized to this square side; 8-512."
    )
    channels: int = Field(
        default=32, ge=4, le=1_024, description="Width of the convolutional image tower's first layer; 4-1,024."
    )
    hidden: int = Field(default=256, ge=8, le=16_384, description="Width of the slot image tower's hidden layer.")
    d_model: int = Field(default=64, ge=8, le=4_096, description="Width of the text tower; a multiple of `heads`.")
    text_layers: int = Field(default=2, ge=1, le=48, description="Transformer blocks of the pooled text tower.")
    heads: int = Field(default=4, ge=1, le=64, description="Attention heads of the pooled text tower.")
    text_positions: bool = True
    """Sinusoidal word positions in the pooled text tower (without them it reads a bag of words)."""
    d_out: int = Field(default=64, ge=2, le=4_096, description="Width of the shared image-text embedding.")
    steps: int = Field(default=600, ge=1, le=MAX_STEPS, description="Training steps; 1-1,000,000.")
    batch_size: int = Field(default=64, ge=2, le=65_536, description="Image-caption pairs per step.")
    lr: float = Field(default=2e-3, gt=0.0, description="Peak AdamW learning rate.")
    weight_decay: float = Field(default=0.01, ge=0.0, description="AdamW weight decay (not on the temperature).")
    warmup_fraction: float = Field(default=0.05, ge=0.0, lt=1.0, description="Share of the steps of linear warm-up.")
    tau_init: float = Field(default=2.659, description="Initial log logit scale (learned; CLIP's log(1/0.07) = 2.659).")
    max_logit_scale: float = Field(default=100.0, gt=0.0, description="Cap on the learned logit scale.")
    eval_every: int = Field(default=200, ge=1, le=MAX_STEPS, description="Steps between evaluations (and the last).")
    checkpoint_every: int = Field(
        default=200, ge=1, le=MAX_STEPS, description="Steps between checkpoints an interrupted run resumes from."
    )

    @model_validator(mode="after")
    def _consistent(self) -> ClipConfig:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        return self

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")
