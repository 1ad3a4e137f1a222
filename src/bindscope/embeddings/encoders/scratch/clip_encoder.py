"""An image-text model trained from scratch (``scratch:<model folder>`` of a CLIP in miniature): both towers.

Images are read as the model was trained on them
(:func:`~bindscope.embeddings.encoders.scratch.clip_model.image_tensor`); captions must use the words of its
training dataset. ``+rand`` is the same towers at initialisation.
Outputs are the L2-normalised embeddings of the shared space; there are no layers to choose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from bindscope.core.errors import BindscopeError
from bindscope.core.io import file_sha256
from bindscope.embeddings.encoders.base import Encoder, Items, count_parameters, to_float32, torch_dtype
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.embeddings.encoders.scratch.clip_model import ClipModel, Words, build_clip, image_tensor
from bindscope.embeddings.encoders.scratch.folder import CONFIG, RETRAIN, WEIGHTS, load_weights

MODEL_CLASS = "bindscope.scratch.ClipModel"


def load_clip(folder: str | Path, record: dict, *, random_seed: int | None = None, device: str = "cpu") -> ClipModel:
    """The model of an image-text folder (eval mode); with ``random_seed``, its towers at initialisation."""
    folder = Path(folder)
    try:
        config = ClipConfig.model_validate(record["config"])
        words = Words.from_dict(record["words"])
    except (ValidationError, KeyError, TypeError, ValueError):
        raise BindscopeError(f"{folder / CONFIG} holds an invalid image-text config; {RETRAIN}") from None
    model = build_clip(config, words, seed=random_seed)
    if random_seed is None:
        try:
            model.load_state_dict(load_weights(folder / WEIGHTS, root=folder))
        except RuntimeError as exc:
            raise BindscopeError(f"{folder / WEIGHTS} does not fit its config ({str(exc)[:100]}); {RETRAIN}") from None
    return model.to(device).eval()


class ClipEncoder(Encoder):
    """Both towers of a model folder written by ``bindscope scratch train`` with an image-text config."""

    modalities = ("image", "text")

    def __init__(
        self,
        spec: Any,
        record: dict,
        *,
        layer: int | None = None,
        device: str = "cpu",
        dtype: str = "float32",
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        if layer is not None:
            raise BindscopeError(f"{spec} is an image-text scratch model: it has no layers to choose; drop --layer")
        self.folder = Path(spec.target).resolve()
        self.record = record
        self.model = load_clip(self.folder, record, random_seed=spec.rand_seed, device=device)
        self.model.to(dtype=torch_dtype(dtype))
        self.config: ClipConfig = self.model.config
        self._weights = None if spec.random else file_sha256(self.folder / WEIGHTS)

    def dataset_items(self, dataset: Any, modality: str, single_objects: bool = False) -> Items | None:
        """The dataset's own captions or images (None); its captions are checked here, before any folder is made,
        to hold only words the model read."""
        if modality == "text":
            from bindscope.data.datasets import single_object_captions

            captions = single_object_captions(dataset) if single_objects else dataset.captions
            self.model.words.tokens([str(c) for c in captions])
        return None

    def prepare(self, modality: str, items: Items) -> Any:
        self.check_modality(modality)
        if modality == "text":
            return self.model.words.tokens([str(x) for x in items])
        return image_tensor(list(items), self.config.image_size)

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        with torch.inference_mode():
            x = inputs.to(self.device)
            if modality == "image":
                return to_float32(self.model.embed_images(x.to(torch_dtype(self.dtype))))
            return to_float32(self.model.embed_texts(x))

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        size = cfg.image_size
        return {
            "backend": "scratch",
            "model_class": MODEL_CLASS,
            "resolved": str(self.folder),
            "revision": None,
            "weights_sha256": self._weights,
            "parameters": count_parameters(self.model),
            "dim": {"image": cfg.d_out, "text": cfg.d_out},
            "dtype": self.dtype,
            "layer": None,
            "num_layers": {
                "image": 3 if cfg.towers == "pooled" else 2,
                "text": cfg.text_layers if cfg.towers == "pooled" else 1,
            },
            "pooling": {
                "image": "mean over positions" if cfg.towers == "pooled" else "flattened (slot MLP)",
                "text": "mean over words" if cfg.towers == "pooled" else "last GRU state",
            },
            "preprocessing": {
                "image": {"resize": [size, size], "filter": "box", "scale": "[-1, 1]"},
                "text": {"words": len(self.model.words.words) - 1, "max_length": self.model.words.max_length},
            },
            "random_init": {"seed": self.spec.rand_seed} if self.spec.random else None,
            "selected_step": self.record["selected_step"],
        }
