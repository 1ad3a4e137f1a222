"""Check a model before a long run: it loads, and each of its towers embeds a test input.

``bindscope models check SPEC`` runs :func:`check_model`: the spec is parsed (a local folder must exist),
the model is loaded as ``bindscope embed`` loads it, and each modality it has embeds one caption or one
blank image, so a folder that lacks its processor or tokenizer is named before hours of work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bindscope.core.errors import BindscopeError

#: What each modality embeds to check it.
TEST_CAPTION = "a red cube and a blue sphere"
TEST_IMAGE_SIZE = 224


@dataclass(frozen=True)
class ModelCheck:
    """What a check found: the model's description, and per modality its width or why it cannot embed."""

    spec: str
    description: dict[str, Any]
    widths: dict[str, int] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """Whether every modality of the model embeds."""
        return not self.problems


def _test_input(modality: str) -> list[Any]:
    if modality == "text":
        return [TEST_CAPTION]
    from PIL import Image

    return [Image.new("RGB", (TEST_IMAGE_SIZE, TEST_IMAGE_SIZE), (128, 128, 128))]


def check_model(spec: str, *, device: str = "cpu", layer: int | None = None) -> ModelCheck:
    """Load ``spec`` and embed a test input in each of its modalities.

    Parameters
    ----------
    spec : str
        A model spec (``hf:PATH``, ``st:PATH``, ``openclip:local-dir:PATH``, a hub id, ``+rand``).
    device : str
        Torch device to load it on.
    layer : int or None
        Check this layer instead of the final embedding.

    Returns
    -------
    ModelCheck
        A model that cannot be loaded at all raises :class:`BindscopeError` instead.
    """
    from bindscope.embeddings.encoders import load_encoder

    encoder = load_encoder(spec, layer=layer, device=device)
    widths: dict[str, int] = {}
    problems: dict[str, str] = {}
    for modality in encoder.modalities:
        try:
            rows = encoder.encode(modality, _test_input(modality))
        except BindscopeError as exc:
            problems[modality] = str(exc)
            continue
        if rows.ndim != 2 or rows.shape[0] != 1 or not np.isfinite(rows).all():
            problems[modality] = f"the test input gave rows of shape {rows.shape} with non-finite values"
            continue
        widths[modality] = int(rows.shape[1])
    return ModelCheck(str(encoder.spec), encoder.describe(), widths, problems)
