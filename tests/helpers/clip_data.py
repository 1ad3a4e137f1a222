"""A tiny rendered dataset and tiny image-text (CLIP in miniature) settings, shared by the tests of models trained
from scratch on images and captions: 3 colors x 3 shapes drawn flat at 32 x 32, every ordered pair (81 scenes in
36 bags of concepts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: The preset: 9 objects, 81 two-object scenes (identical pairs included), captions "a red square and a ...".
TINY_PRESET: dict[str, Any] = {
    "name": "tiny2d",
    "description": "3 colors x 3 shapes, flat, 32 x 32",
    "concepts": {"color": ["red", "green", "blue"], "shape": ["square", "triangle", "circle"]},
    "objects_per_scene": 2,
    "caption": {"object": "a {color} {shape}"},
    "noun": "shape",
    "modalities": ["image", "text"],
    "renderer": "flat2d",
    "image": {"width": 32, "height": 32},
    "slot_layout": ["left", "right"],
}
SCENES = 81
GROUPS = 36  # bags of concepts: a multiset of 2 colors (6) x a multiset of 2 shapes (6)

#: Tiny towers: seconds for a few hundred steps on one core. ``batch_size`` fits the 28 swap-free groups of the
#: default split (fraction 0.8 of 36 groups).
TINY_MODEL: dict[str, Any] = {
    "channels": 8,
    "hidden": 64,
    "d_model": 16,
    "heads": 2,
    "text_layers": 1,
    "d_out": 16,
    "batch_size": 16,
    "lr": 3e-3,
}


def tiny_preset(**changes: Any):
    """The tiny preset (a :class:`~bindscope.data.presets.Preset`), with top-level ``changes``."""
    from bindscope.data.presets import preset_from_dict

    return preset_from_dict({**TINY_PRESET, **changes}, origin="tiny test preset")


def tiny_preset_yaml(path: Path, **changes: Any) -> Path:
    """Write the tiny preset as a YAML file (for the CLI and run configs); returns its path."""
    path.write_text(yaml.safe_dump({**TINY_PRESET, **changes}, sort_keys=False))
    return path


def build_tiny(out: Path, *, images: bool = True, **changes: Any) -> Path:
    """Build the tiny dataset (rendered unless ``images`` is false) into ``out``; returns ``out``."""
    from bindscope.data.datasets import build_dataset

    build_dataset(tiny_preset(**changes), out, images=images, workers=1)
    return out


def tiny_clip(dataset: Path | str, **overrides: Any):
    """``clip-tiny`` on ``dataset`` with :data:`TINY_MODEL` widths and ``overrides``."""
    from bindscope.scratch.config import load_config

    return load_config("clip-tiny", dataset=str(dataset), **{**TINY_MODEL, **overrides})
