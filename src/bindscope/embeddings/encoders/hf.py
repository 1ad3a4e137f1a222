"""The ``hf:`` backend: transformers CLIP, SigLIP and DINOv2 models from the hub or a local folder.

Specs are ``hf:<hub id or local folder>[@revision]`` with an optional ``+rand[:SEED]``. The model
family comes from the config's ``model_type``:

========  ==============  ============  =============================================================
type      class           modalities    final embedding
========  ==============  ============  =============================================================
clip      CLIPModel       image, text   ``get_image_features`` / ``get_text_features`` (projected)
siglip    SiglipModel     image, text   ``get_image_features`` / ``get_text_features`` (pooled heads)
dinov2    Dinov2Model     image         ``pooler_output`` (layer-normed CLS token)
========  ==============  ============  =============================================================

Images go through the model's ``AutoImageProcessor`` (its torchvision backend, which gives the
same pixels as the PIL one up to one 8-bit level on a few edge pixels, about 2.5x faster) after a
conversion to RGB; texts through its ``AutoTokenizer``: CLIP pads to the longest text of the
batch, SigLIP to ``max_position_embeddings`` (as it was trained: it pools the last position), both
truncate at ``max_position_embeddings``.

The image processor and the tokenizer are loaded on first use, so a folder without tokenizer files
still embeds images (and one without an image processor texts); the modality that lacks its part is
refused with one line naming it. Weights that lack one tower's parameters likewise refuse only that
tower's modality.

Hub ids are pinned to one commit (the one ``config.json`` resolves to) for every file, and that
commit is reported as the revision; when the hub cannot be reached the model loads from the local
cache (see :mod:`bindscope.embeddings.encoders.hub`). A local folder has no revisions:
``hf:/folder@rev`` is refused rather than ignored, so a manifest never claims a revision that was
not loaded.
"""

from __future__ import annotations

import logging
import pickle
import threading
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import (
    Encoder,
    Items,
    LazyParts,
    count_parameters,
    lacks_vocabulary,
    load_reason,
    pool,
    resolve_layer,
    seeded_init,
    short_reason,
    to_float32,
    torch_dtype,
    unreadable_weights,
    weights_sha256,
)
from bindscope.embeddings.encoders.hub import HubFiles, held_logs, hub_error, pin, quiet_hub_logs
from bindscope.embeddings.encoders.spec import ModelSpec

logger = logging.getLogger(__name__)

_IMAGE_SETTINGS = (
    "do_convert_rgb",
    "do_resize",
    "size",
    "resample",
    "do_center_crop",
    "crop_size",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
)
_NO_LAYER_NOTE = "no final norm, no projection"


@dataclass(frozen=True)
class _Source:
    """Where a model's files came from: what the manifest records about them (``hub``: None for a folder)."""

    resolved: str
    revision: str | None
    local: bool
    hub: HubFiles | None = None


class HFEncoder(Encoder):
    """A transformers model family: the shared loading, preprocessing and pooling machinery.

    Subclasses name their model class and say how the final embedding and the layer pooling are
    taken; everything else (devices, dtypes, tokenisation, describe) lives here.
    """

    model_type: ClassVar[str]
    model_class: ClassVar[str]
    #: How an intermediate hidden state is pooled, per modality (a :func:`pool` mode or "eos").
    layer_pool: ClassVar[dict[str, str]]
    #: State-dict prefixes of each modality's tower (parameters outside them, e.g. logit_scale, embed nothing).
    tower_prefixes: ClassVar[dict[str, tuple[str, ...]]]
    text_padding: ClassVar[str] = "longest"
    #: Tokenizer outputs the text tower takes (others, e.g. token_type_ids, are dropped).
    text_inputs: ClassVar[tuple[str, ...]] = ("input_ids", "attention_mask")

    def __init__(
        self,
        spec: ModelSpec,
        *,
        layer: int | None,
        device: str,
        dtype: str,
        model: Any,
        parts: LazyParts,
        source: _Source,
        unusable: dict[str, str] | None = None,
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        self.model = model
        self.config = model.config
        self.parts = parts
        self.source = source
        self._indices, layer_errors = self.layer_indices(self.config, spec, layer)
        #: Why a modality cannot be embedded (its tower's weights are missing, or the layer is out of its range).
        self._layer_errors = {**(unusable or {}), **layer_errors}
        self._tokenizer_lock = threading.Lock()
        self._torch_dtype = torch_dtype(dtype)
        self._description: dict[str, Any] | None = None

    @property
    def image_processor(self) -> Any:
        """The image processor (loaded on first use)."""
        return self.parts.get("image")

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (loaded on first use)."""
        return self.parts.get("text")

    # -- what each family says -------------------------------------------------------------------

    @classmethod
    def tower_config(cls, config: Any, modality: str) -> Any:
        """The config of the tower that embeds ``modality``."""
        return config.vision_config if modality == "image" else config.text_config

    def tower(self, modality: str) -> Any:
        """The module that embeds ``modality`` (its forward takes the prepared inputs)."""
        return self.model.vision_model if modality == "image" else self.model.text_model

    def final_features(self, modality: str, batch: dict[str, Any]) -> Any:
        """The model's own final embedding, ``[B, D]``."""
        out = self.model.get_image_features(**batch) if modality == "image" else self.model.get_text_features(**batch)
        return _pooled(out)

    @abstractmethod
    def final_dim(self, modality: str) -> int:
        """Width of the final embedding of ``modality``."""

    @abstractmethod
    def final_pooling(self, modality: str) -> str:
        """How the final embedding of ``modality`` is made, for describe()."""

    def pool_layer(self, modality: str, hidden: Any, batch: dict[str, Any]) -> Any:
        """Pool one hidden state ``[B, T, D]`` the way the model pools its last one."""
        return pool(hidden, self.layer_pool[modality])

    def layer_pooling(self, modality: str, index: int) -> str:
        how = {
            "cls": "cls token",
            "mean": "mean over all patch tokens (no cls token)",
            "last": "last token (position -1, padding included, as the model pools)",
        }[self.layer_pool[modality]]
        return f"{how} of hidden_states[{index}] ({_NO_LAYER_NOTE})"

    # -- the Encoder contract ---------------------------------------------------------------------

    @classmethod
    def layer_indices(
        cls, config: Any, spec: ModelSpec, layer: int | None
    ) -> tuple[dict[str, int | None], dict[str, str]]:
        """Index into ``hidden_states`` per modality, and the error for modalities where ``layer`` is out of range.

        Raises when ``layer`` fits no tower at all; a layer that fits only one tower (e.g. a 24-layer
        vision tower beside a 12-layer text tower) is refused when the other modality is asked for.
        """
        indices: dict[str, int | None] = {}
        errors: dict[str, str] = {}
        for modality in cls.modalities:
            tower = f"{'vision' if modality == 'image' else 'text'} tower of {spec}"
            try:
                indices[modality] = resolve_layer(layer, cls.tower_config(config, modality).num_hidden_layers, tower)
            except BindscopeError as exc:
                errors[modality] = str(exc)
        if len(errors) == len(cls.modalities):  # one message: "--layer L is out of range: the vision ...; the text ..."
            first, *others = errors.values()
            raise BindscopeError("; ".join([first, *(other.split(": ", 1)[1] for other in others)]))
        return indices, errors

    def check_modality(self, modality: str) -> None:
        """Refuse a modality this model cannot embed (no tower, weights, layer, processor or tokenizer for it)."""
        super().check_modality(modality)
        if modality in self._layer_errors:
            raise BindscopeError(self._layer_errors[modality])
        self.parts.get(modality)

    def prepare(self, modality: str, items: Items) -> dict[str, Any]:
        """Pixel values ``[B, 3, H, W]`` (float32) or token ids for one batch; CPU only, thread-safe."""
        self.check_modality(modality)
        if modality == "image":
            images = [_rgb(item, self.spec) for item in items]
            return {"pixel_values": self.image_processor(images=images, return_tensors="pt")["pixel_values"]}
        texts = _texts(items, self.spec)
        with self._tokenizer_lock:  # a fast tokenizer's padding/truncation state is mutable
            encoded = self.tokenizer(
                texts, padding=self.text_padding, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
        return {key: encoded[key] for key in self.text_inputs if key in encoded}

    def forward(self, modality: str, inputs: dict[str, Any]) -> np.ndarray:
        """Run the model on prepared inputs; float32 ``[B, dim]``."""
        import torch

        self.check_modality(modality)
        batch = {
            key: value.to(self.device, self._torch_dtype) if key == "pixel_values" else value.to(self.device)
            for key, value in inputs.items()
        }
        index = self._indices[modality]
        with torch.inference_mode():
            if index is None:
                out = self.final_features(modality, batch)
            else:
                hidden = self.tower(modality)(**batch, output_hidden_states=True).hidden_states[index]
                out = self.pool_layer(modality, hidden, batch)
        return to_float32(out)

    def describe(self) -> dict[str, Any]:
        """What was loaded (computed once; a part that cannot be loaded is described as unavailable)."""
        if self._description is None:
            self._description = self._describe()
        return self._description

    @property
    def max_length(self) -> int:
        """Token positions of the text tower: texts are truncated (SigLIP: padded) to this."""
        return int(self.tower_config(self.config, "text").max_position_embeddings)

    def _describe(self) -> dict[str, Any]:
        dims: dict[str, int] = {}
        pooling: dict[str, str] = {}
        for modality in self.modalities:
            index = self._indices.get(modality)
            if modality in self._layer_errors:
                dims[modality] = int(self.tower_config(self.config, modality).hidden_size)
                pooling[modality] = f"unavailable: {self._layer_errors[modality]}"
            elif index is None:
                dims[modality] = int(self.final_dim(modality))
                pooling[modality] = self.final_pooling(modality)
            else:
                dims[modality] = int(self.tower_config(self.config, modality).hidden_size)
                pooling[modality] = self.layer_pooling(modality, index)
        return {
            "backend": "hf",
            "model_class": self.model_class,
            "resolved": self.source.resolved,
            "revision": self.source.revision,
            "weights_sha256": weights_sha256(self.source.resolved)
            if self.source.local and not self.spec.random
            else None,
            "parameters": count_parameters(self.model),
            "dim": dims,
            "dtype": self.dtype,
            "layer": self.layer,
            "num_layers": {m: int(self.tower_config(self.config, m).num_hidden_layers) for m in self.modalities},
            "pooling": pooling,
            "preprocessing": {m: self._preprocessing(m) for m in self.modalities},
            "random_init": None if self.spec.rand_seed is None else {"seed": self.spec.rand_seed},
        }

    def _preprocessing(self, modality: str) -> dict[str, Any]:
        error = self.parts.error(modality)
        if error is not None:
            return {"unavailable": error}
        if modality == "image":
            settings = {key: _jsonable(getattr(self.image_processor, key, None)) for key in _IMAGE_SETTINGS}
            if isinstance(settings["resample"], int):
                import PIL.Image

                settings["resample"] = PIL.Image.Resampling(settings["resample"]).name.lower()
            return {
                "processor": type(self.image_processor).__name__,
                "backend": _processor_backend(self.image_processor),
                "convert": "PIL convert('RGB') first",
                **settings,
            }
        return {
            "tokenizer": type(self.tokenizer).__name__,
            "vocab_size": len(self.tokenizer),
            "max_length": self.max_length,
            "padding": self.text_padding,
            "truncation": True,
            "inputs": list(self.text_inputs),
        }


class ClipEncoder(HFEncoder):
    """CLIPModel: projected CLS (image) and end-of-text (text) embeddings."""

    model_type = "clip"
    model_class = "CLIPModel"
    modalities = ("image", "text")
    tower_prefixes: ClassVar[dict[str, tuple[str, ...]]] = {
        "image": ("vision_model.", "visual_projection."),
        "text": ("text_model.", "text_projection."),
    }
    layer_pool: ClassVar[dict[str, str]] = {"image": "cls", "text": "eos"}

    def final_dim(self, modality: str) -> int:
        projection = self.model.visual_projection if modality == "image" else self.model.text_projection
        return projection.out_features

    def final_pooling(self, modality: str) -> str:
        if modality == "image":
            return "image_embeds: visual_projection of post_layernorm(cls token of the last block)"
        return f"text_embeds: text_projection of final_layer_norm(state of the end-of-text token: {self._eos_rule()})"

    def pool_layer(self, modality: str, hidden: Any, batch: dict[str, Any]) -> Any:
        if modality == "image":
            return pool(hidden, "cls")
        return pool(hidden, "index", index=clip_eos_positions(batch["input_ids"], self.model.text_model.eos_token_id))

    def layer_pooling(self, modality: str, index: int) -> str:
        if modality == "image":
            return f"cls token of hidden_states[{index}] (0 = embeddings after pre_layrnorm; {_NO_LAYER_NOTE})"
        return f"end-of-text token ({self._eos_rule()}) of hidden_states[{index}] ({_NO_LAYER_NOTE})"

    def _eos_rule(self) -> str:
        eos = self.model.text_model.eos_token_id
        if eos == 2:
            return "argmax of input_ids, CLIP's legacy rule for eos_token_id 2"
        return f"first position of eos_token_id {eos}"


class SiglipEncoder(HFEncoder):
    """SiglipModel: attention-pooled image and last-token text embeddings."""

    model_type = "siglip"
    model_class = "SiglipModel"
    modalities = ("image", "text")
    tower_prefixes: ClassVar[dict[str, tuple[str, ...]]] = {"image": ("vision_model.",), "text": ("text_model.",)}
    layer_pool: ClassVar[dict[str, str]] = {"image": "mean", "text": "last"}
    text_padding = "max_length"
    # SigLIP was trained without an attention mask (its own tokenizer returns only input_ids).
    text_inputs = ("input_ids",)

    def check_modality(self, modality: str) -> None:
        super().check_modality(modality)
        if modality == "image" and self._indices["image"] is None and not self.model.vision_model.use_head:
            raise BindscopeError(
                f"{self.spec} has no vision pooling head (vision_use_head is false), so no final image "
                "embedding; give --layer to take a mean-pooled hidden state instead"
            )

    def final_dim(self, modality: str) -> int:
        if modality == "image":
            return self.config.vision_config.hidden_size
        return self.model.text_model.head.out_features

    def final_pooling(self, modality: str) -> str:
        if modality == "image":
            return "image_embeds: attention-pooling head (probe attention + MLP) over post_layernorm(last block)"
        return "text_embeds: head (linear) of final_layer_norm(last token of the last block, padding included)"


class Dinov2Encoder(HFEncoder):
    """Dinov2Model: the layer-normed CLS token (``pooler_output``); images only."""

    model_type = "dinov2"
    model_class = "Dinov2Model"
    modalities = ("image",)
    tower_prefixes: ClassVar[dict[str, tuple[str, ...]]] = {"image": ("",)}
    layer_pool: ClassVar[dict[str, str]] = {"image": "cls"}

    @classmethod
    def tower_config(cls, config: Any, modality: str) -> Any:
        return config

    def tower(self, modality: str) -> Any:
        return self.model

    def final_features(self, modality: str, batch: dict[str, Any]) -> Any:
        return self.model(**batch).pooler_output

    def final_dim(self, modality: str) -> int:
        return self.config.hidden_size

    def final_pooling(self, modality: str) -> str:
        return "pooler_output: layernorm(cls token of the last block)"

    def layer_pooling(self, modality: str, index: int) -> str:
        return f"cls token of hidden_states[{index}] (0 = embeddings; no final layernorm)"

    def check_modality(self, modality: str) -> None:
        if modality == "text":
            raise BindscopeError(
                f"{self.spec} is a DINOv2 model: it is image-only and has no text tower; "
                "use --modality image, or a CLIP/SigLIP model for texts"
            )
        super().check_modality(modality)


FAMILIES: dict[str, type[HFEncoder]] = {cls.model_type: cls for cls in (ClipEncoder, SiglipEncoder, Dinov2Encoder)}


def clip_eos_positions(input_ids: Any, eos_token_id: int | None) -> Any:
    """Where CLIPTextModel pools each row: argmax of the ids for the legacy eos id 2, else the first eos."""
    import torch

    ids = input_ids.to(torch.int)
    if eos_token_id == 2:
        return ids.argmax(dim=-1)
    return (ids == eos_token_id).int().argmax(dim=-1)


def load(spec: ModelSpec, *, layer: int | None, device: str, dtype: str) -> HFEncoder:
    """Load an ``hf:`` spec (see the module docstring); every bad input is a :class:`BindscopeError`.

    The config decides the family and the layer is checked against it before any weights are read.
    The image processor and tokenizer load on first use (see :class:`LazyParts`), except for an
    image-only family, which can do nothing without its image processor and loads it first.
    ``+rand`` builds the model from the config under ``seeded_init`` (no weights are read).
    """
    source = _source(spec)
    config = _load_config(spec, source)
    family = _family(config, spec)
    family.layer_indices(config, spec, layer)
    texts = "text" in family.modalities
    loaders = {
        "image": lambda: _load_image_processor(spec, source, texts),
        "text": lambda: _load_tokenizer(spec, source),
    }
    parts = LazyParts({m: loaders[m] for m in family.modalities})
    if len(family.modalities) == 1:
        parts.get(family.modalities[0])
    model, unusable = _load_model(spec, source, family, config, dtype)
    try:
        model = model.to(device)
    except (RuntimeError, AssertionError) as exc:
        raise BindscopeError(
            f"cannot put {spec} on device {device!r}: {short_reason(exc)}; choose an available device "
            "(e.g. cpu or cuda)"
        ) from None
    encoder = family(
        spec,
        layer=layer,
        device=device,
        dtype=dtype,
        model=model.eval(),
        parts=parts,
        source=source,
        unusable=unusable,
    )
    logger.debug(
        "loaded %s: %s from %s (revision %s) on %s", spec, family.model_class, source.resolved, source.revision, device
    )
    return encoder


def config_layers(spec: ModelSpec) -> dict[str, int]:
    """The number of layers of each modality's tower, from the model's config alone (no weights are read)."""
    source = _source(spec)
    config = _load_config(spec, source)
    family = _family(config, spec)
    return {m: int(family.tower_config(config, m).num_hidden_layers) for m in family.modalities}


# -- loading pieces ------------------------------------------------------------------------------


def _load_config(spec: ModelSpec, source: _Source) -> Any:
    """The model's config (``config.json``)."""
    auto = _auto("AutoConfig")
    return _hub_call(spec, source, "config", lambda: auto.from_pretrained(source.resolved, **_where(source)))


def _source(spec: ModelSpec) -> _Source:
    """Check a local folder, or pin a hub id to the commit its config.json resolves to."""
    if spec.is_local:
        folder = Path(spec.target).resolve()
        if spec.revision:
            raise BindscopeError(
                f"{spec}: a local folder has no revisions; drop '@{spec.revision}' (or check out that "
                "revision into the folder yourself)"
            )
        if not folder.is_dir():
            raise BindscopeError(f"{spec}: {folder} is not a folder; give a folder saved with save_pretrained")
        if not (folder / "config.json").is_file():
            raise BindscopeError(
                f"{spec}: folder {folder} is not a saved transformers model (no config.json); save the "
                "model, its image processor and tokenizer there with save_pretrained, or use st: for "
                "sentence-transformers folders and openclip:local-dir: for open_clip ones"
            )
        return _Source(str(folder), None, True)
    files, _ = pin(
        spec,
        spec.target,
        "config.json",
        spec.revision,
        "config.json",
        missing=f"it is not a transformers model: for open_clip repositories use openclip:hf-hub:{spec.target}, "
        f"for sentence-transformers ones st:{spec.target}",
        folder="a local folder saved with save_pretrained",
    )
    return _Source(spec.target, files.revision(spec.revision), False, files)


def _where(source: _Source) -> dict[str, Any]:
    """from_pretrained keywords: offline for folders, the pinned commit for hub ids (offline when the hub is not)."""
    if source.hub is None:
        return {"local_files_only": True}
    return {"revision": source.revision, "local_files_only": source.hub.offline}


def _family(config: Any, spec: ModelSpec) -> type[HFEncoder]:
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise BindscopeError(
            f"{spec} is a {model_type!r} model; the hf backend supports model types {', '.join(FAMILIES)} "
            f"({', '.join(c.model_class for c in FAMILIES.values())}); use st:{spec.target} for sentence encoders "
            f"and openclip:{'local-dir' if spec.is_local else 'hf-hub'}:{spec.target} for open_clip models"
        )
    return FAMILIES[model_type]


def _load_image_processor(spec: ModelSpec, source: _Source, texts: bool) -> Any:
    """The image processor; refused (for images only, when the model has a text tower) when it cannot be loaded."""
    import transformers

    auto = transformers.AutoImageProcessor
    fast = {"backend": "torchvision"} if _major(transformers.__version__) >= 5 else {"use_fast": True}
    try:
        return _hub_call(
            spec,
            source,
            "image processor (preprocessor_config.json)",
            lambda: auto.from_pretrained(source.resolved, **_where(source), **fast),
        )
    except BindscopeError as exc:
        if not texts:
            raise
        raise BindscopeError(f"{exc} (texts need no image processor: --modality text works without it)") from None


def _load_tokenizer(spec: ModelSpec, source: _Source) -> Any:
    """The tokenizer; refused (for texts only) when the folder or repo has no tokenizer files."""
    auto = _auto("AutoTokenizer")
    tokenizer = _hub_call(spec, source, "tokenizer", lambda: auto.from_pretrained(source.resolved, **_where(source)))
    if lacks_vocabulary(tokenizer):
        where = f"folder {source.resolved}" if source.local else f"hub repo {source.resolved}@{source.revision}"
        raise BindscopeError(
            f"{spec} cannot embed texts: its tokenizer has no vocabulary (only {len(tokenizer)} special tokens), "
            f"so the {where} has no tokenizer files; save the model's tokenizer there with save_pretrained "
            "(images need no tokenizer: --modality image works without it)"
        )
    return tokenizer


def _load_model(
    spec: ModelSpec, source: _Source, family: type[HFEncoder], config: Any, dtype: str
) -> tuple[Any, dict[str, str]]:
    """The model, and why a modality cannot be embedded when the weights lack its tower's parameters."""
    import transformers

    model_class = getattr(transformers, family.model_class)
    if spec.rand_seed is not None:
        with seeded_init(spec.rand_seed):
            model = model_class(config)
        return model.to(torch_dtype(dtype)), {}
    dtype_key = "dtype" if _major(transformers.__version__) >= 5 else "torch_dtype"
    model, info = _hub_call(
        spec,
        source,
        "weights",
        lambda: model_class.from_pretrained(
            source.resolved,
            config=config,
            output_loading_info=True,
            **_where(source),
            **{dtype_key: torch_dtype(dtype)},
        ),
    )
    parameters = dict(model.named_parameters())
    missing = sorted(key for key in info.get("missing_keys", ()) if key in parameters)
    return model, _missing_towers(spec, family, missing)


def _missing_towers(spec: ModelSpec, family: type[HFEncoder], missing: list[str]) -> dict[str, str]:
    """Per modality, why it cannot be embedded when the weights lack parameters of its tower.

    Parameters outside every tower (CLIP's logit_scale, SigLIP's logit_bias) embed nothing and are
    ignored; when every tower lacks some, the load is refused.
    """
    lacking = {m: [k for k in missing if k.startswith(prefixes)] for m, prefixes in family.tower_prefixes.items()}
    lacking = {m: keys for m, keys in lacking.items() if keys}
    if not lacking:
        return {}
    if len(lacking) == len(family.tower_prefixes):
        keys = sorted(k for ks in lacking.values() for k in ks)
        raise BindscopeError(
            f"{spec}: the weights lack {len(keys)} {family.model_class} parameters ({_shown(keys)}), which would "
            "be random; check that the weights belong to its config.json"
        )
    usable = next(m for m in family.modalities if m not in lacking)
    return {
        m: f"{spec} cannot embed {m}s: the weights lack {len(keys)} {_TOWER[m]} parameters ({_shown(keys)}), "
        f"which would be random; check that the weights belong to its config.json, or embed --modality {usable}"
        for m, keys in lacking.items()
    }


_TOWER = {"image": "vision-tower", "text": "text-tower"}


def _shown(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def _hub_call(spec: ModelSpec, source: _Source, what: str, call: Any) -> Any:
    """Run one from_pretrained-style call, turning its failures into one-line BindscopeErrors."""
    try:
        with quiet_hub_logs(), held_logs():  # transformers' report of a failed load: its one line says it
            return call()
    except BindscopeError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError, pickle.UnpicklingError) as exc:  # pickled weights: refused
        raise _load_error(spec, source, what, exc) from None
    except Exception as exc:  # from a hub id: httpx errors of a broken download, and whatever else the hub causes
        from safetensors import SafetensorError

        if source.hub is None and not isinstance(exc, SafetensorError):  # from a folder: damaged weights only
            raise
        raise _load_error(spec, source, what, exc) from None


def _load_error(spec: ModelSpec, source: _Source, what: str, exc: BaseException) -> BindscopeError:
    if source.hub is None:
        damaged = unreadable_weights(source.resolved, spec) if what == "weights" else None
        return damaged or BindscopeError(
            f"{spec}: the {what} in folder {source.resolved} could not be loaded ({load_reason(exc)}); "
            "re-save it with save_pretrained"
        )
    todo = {
        "weights": "give a repo that holds them (model.safetensors or pytorch_model.bin), or a local folder",
        "tokenizer": "give a repo with the model's tokenizer files, or embed --modality image",
        "image processor (preprocessor_config.json)": "give a repo with it, or embed --modality text",
    }.get(what, "")
    return hub_error(spec, source.hub, what, exc, spec.revision, missing=todo)


# -- small helpers -------------------------------------------------------------------------------


def _auto(name: str) -> Any:
    import transformers

    return getattr(transformers, name)


def _major(version: str) -> int:
    return int(version.split(".")[0])


def _pooled(out: Any) -> Any:
    """get_*_features returns a tensor in transformers 4 and a ModelOutput (pooler_output) in 5."""
    import torch

    return out if isinstance(out, torch.Tensor) else out.pooler_output


def _rgb(item: Any, spec: ModelSpec) -> Any:
    import PIL.Image

    if not isinstance(item, PIL.Image.Image):
        raise BindscopeError(f"{spec} embeds PIL images; got a {type(item).__name__}")
    return item if item.mode == "RGB" else item.convert("RGB")


def _texts(items: Items, spec: ModelSpec) -> list[str]:
    if isinstance(items, str):
        raise BindscopeError(f"{spec} embeds a list of strings; got one string")
    bad = next((item for item in items if not isinstance(item, str)), None)
    if bad is not None:
        raise BindscopeError(f"{spec} embeds a list of strings; got a {type(bad).__name__} among them")
    return list(items)


def _processor_backend(processor: Any) -> str:
    """``torchvision`` (transformers 5's default, 4's "fast" processors) or ``pil``."""
    names = {cls.__name__ for cls in type(processor).__mro__}
    return "torchvision" if names & {"TorchvisionBackend", "BaseImageProcessorFast"} else "pil"


def _jsonable(value: Any) -> Any:
    """Processor settings (SizeDicts, tuples, enums) as plain JSON values; None fields dropped from dicts."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(getattr(value, k)) for k in value.__dataclass_fields__ if getattr(value, k) is not None}
    if hasattr(value, "name"):
        return str(value.name).lower()
    return str(value)


__all__ = [
    "FAMILIES",
    "ClipEncoder",
    "Dinov2Encoder",
    "HFEncoder",
    "SiglipEncoder",
    "clip_eos_positions",
    "config_layers",
    "load",
]
