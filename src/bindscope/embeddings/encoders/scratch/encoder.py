"""Controlled models trained from scratch (``scratch:<model folder>``): their scene encoder.

A scratch model reads scenes as token sequences, not free text, so it embeds the *scenes* of a
dataset whose concept space is the model's (the same concepts and values, in order; ``bindscope
scratch export`` builds one). Its modality is ``text``: the symbolic description of a scene. The
final embedding is the scene encoder's output; ``--layer L`` is the EOS hidden state after
block L (0 = token + position embedding), before the final LayerNorm (if the config has one) and the head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import Encoder, Items, count_parameters, resolve_layer, to_float32, torch_dtype
from bindscope.embeddings.encoders.spec import ModelSpec

#: The ``model_class`` a scratch encoder records. It enters the embeddings' content key, so it keeps the label
#: it was first recorded with (the class's module before it moved here): embeddings made before still match.
MODEL_CLASS = ".".join(("bindscope", "scratch", "SequenceEncoder (scene)"))


def load(spec: ModelSpec, *, layer: int | None, device: str, dtype: str) -> Encoder:
    """Load a parsed ``scratch:`` spec: a token-level model's scene encoder, or both towers of an image-text one."""
    from bindscope.embeddings.encoders.scratch.folder import CLIP_FORMAT, read_model_config

    record = read_model_config(spec.target)
    if record.get("format") == CLIP_FORMAT:
        from bindscope.embeddings.encoders.scratch.clip_encoder import ClipEncoder

        return ClipEncoder(spec, record, layer=layer, device=device, dtype=dtype)
    return ScratchEncoder(spec, layer=layer, device=device, dtype=dtype)


class ScratchEncoder(Encoder):
    """The scene encoder of a model folder written by ``bindscope scratch train``."""

    modalities = ("text",)

    def __init__(
        self, spec: ModelSpec, *, layer: int | None = None, device: str = "cpu", dtype: str = "float32"
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        import torch

        from bindscope.core.io import file_sha256
        from bindscope.data.presets import preset_from_dict
        from bindscope.embeddings.encoders.scratch.folder import WEIGHTS, load_model

        self._torch = torch
        self.folder = Path(spec.target).resolve()
        model, record = load_model(self.folder, random_seed=spec.rand_seed)
        self.record = record
        self.space = preset_from_dict(record["preset"], origin=f"{self.folder}/config.json").space
        self.vocab = model.vocab
        self.num_layers = len(model.scene.blocks.layers)
        self._layer = resolve_layer(layer, self.num_layers, "scene encoder")
        self.scene = model.scene.to(device=device, dtype=torch_dtype(dtype))
        self._weights = None if spec.random else file_sha256(self.folder / WEIGHTS)

    def dataset_items(self, dataset: Any, modality: str, single_objects: bool = False) -> Items:
        """The scenes to embed, ``[N, K, C]`` value indices, after checking the dataset's concept space."""
        from bindscope.data.datasets import single_object_scenes

        if dataset.space != self.space:
            raise BindscopeError(
                f"dataset {dataset.root} has concepts {dataset.space.to_dict()} but {self.spec} was trained on "
                f"{self.space.to_dict()}; embed the dataset that `bindscope scratch export` builds for this model"
            )
        scenes = single_object_scenes(dataset) if single_objects else dataset.scenes
        return np.asarray(scenes.scenes, dtype=np.int64)

    def prepare(self, modality: str, items: Items) -> Any:
        self.check_modality(modality)
        if len(items) and isinstance(items[0], str):
            raise BindscopeError(
                f"{self.spec} reads scenes as value indices [N, K, C], not captions; embed a "
                "dataset whose concept space is the model's (bindscope scratch export builds one)"
            )
        values = self._torch.as_tensor(np.asarray(items, dtype=np.int64))
        if values.ndim != 3 or values.shape[1] > self.vocab.max_objects or values.shape[2] != self.vocab.num_concepts:
            raise BindscopeError(
                f"scenes of shape {tuple(values.shape)} do not fit {self.spec}: it reads "
                f"[N, <= {self.vocab.max_objects}, {self.vocab.num_concepts}] value indices"
            )
        return self.vocab.scene_tokens(values)

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        with self._torch.inference_mode():
            tokens = inputs.to(self.device)
            if self._layer is None:
                return to_float32(self.scene(tokens))
            return to_float32(self.scene.hidden(tokens, self._layer))

    def describe(self) -> dict[str, Any]:
        config = self.record["config"]
        dim = config["d_out"] if self._layer is None else config["d_model"]
        return {
            "backend": "scratch",
            "model_class": MODEL_CLASS,
            "resolved": str(self.folder),
            "revision": None,
            "weights_sha256": self._weights,
            "parameters": count_parameters(self.scene),
            "dim": {"text": int(dim)},
            "dtype": self.dtype,
            "layer": self.layer,
            "num_layers": {"text": self.num_layers},
            "pooling": {"text": "eos" if self._layer is None else "eos (hidden state, no final norm or head)"},
            "preprocessing": {
                "text": {
                    "tokens": "[SOO values EOO] per object, EOS, PAD",
                    "concept_sizes": list(self.vocab.sizes),
                    "max_objects": self.vocab.max_objects,
                }
            },
            "random_init": {"seed": self.spec.rand_seed} if self.spec.random else None,
            "selected_step": self.record["selected_step"],
        }
