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

Hub ids are pinned to one commit (the one ``config.json`` resolves to) for every file, and that
commit is reported as the revision. A local folder has no revisions: ``hf:/folder@rev`` is refused
rather than ignored, so a manifest never claims a revision that was not loaded.
"""

from __future__ import annotations

import logging
import os
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
    count_parameters,
    pool,
    resolve_layer,
    seeded_init,
    short_reason,
    snapshot_commit,
    to_float32,
    torch_dtype,
    weights_sha256,
)
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
    """Where a model's files came from: what the manifest records about them."""

    resolved: str
    revision: str | None
    local: bool


class HFEncoder(Encoder):
    """A transformers model family: the shared loading, preprocessing and pooling machinery.

    Subclasses name their model class and say how the final embedding and the layer pooling are
    taken; everything else (devices, dtypes, tokenisation, describe) lives here.
    """

    model_type: ClassVar[str]
    model_class: ClassVar[str]
    #: How an intermediate hidden state is pooled, per modality (a :func:`pool` mode or "eos").
    layer_pool: ClassVar[dict[str, str]]
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
        image_processor: Any,
        tokenizer: Any,
        source: _Source,
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        self.model = model
        self.config = model.config
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.source = source
        self._indices, self._layer_errors = self.layer_indices(self.config, spec, layer)
        self._tokenizer_lock = threading.Lock()
        self._torch_dtype = torch_dtype(dtype)
        self._description = self._describe()

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
        super().check_modality(modality)
        if modality in self._layer_errors:
            raise BindscopeError(self._layer_errors[modality])

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

    The config decides the family; the layer is checked against it and the processors are loaded
    before any weights, so a bad spec fails fast. ``+rand`` builds the model from the config under
    ``seeded_init`` (no weights are read).
    """
    source = _source(spec)
    config = _hub_call(
        spec, source, "config", lambda: _auto("AutoConfig").from_pretrained(source.resolved, **_where(source))
    )
    family = _family(config, spec)
    family.layer_indices(config, spec, layer)
    image_processor = _load_image_processor(spec, source)
    tokenizer = _load_tokenizer(spec, source) if "text" in family.modalities else None
    model = _load_model(spec, source, family, config, dtype)
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
        image_processor=image_processor,
        tokenizer=tokenizer,
        source=source,
    )
    logger.debug(
        "loaded %s: %s from %s (revision %s) on %s", spec, family.model_class, source.resolved, source.revision, device
    )
    return encoder


# -- loading pieces ------------------------------------------------------------------------------


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
    placeholder = _Source(spec.target, spec.revision, False)
    path = _hub_call(spec, placeholder, "config.json", lambda: _hf_hub_download(spec.target, spec.revision))
    commit = snapshot_commit(path)
    return _Source(spec.target, commit, False) if commit else placeholder


def _hf_hub_download(repo: str, revision: str | None) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo, "config.json", revision=revision, local_files_only=_offline())


def _where(source: _Source) -> dict[str, Any]:
    """from_pretrained keywords: offline for folders, the pinned commit for hub ids."""
    return {"local_files_only": True} if source.local else {"revision": source.revision, "local_files_only": _offline()}


def _family(config: Any, spec: ModelSpec) -> type[HFEncoder]:
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise BindscopeError(
            f"{spec} is a {model_type!r} model; the hf backend supports model types {', '.join(FAMILIES)} "
            f"({', '.join(c.model_class for c in FAMILIES.values())}); use st:{spec.target} for sentence encoders "
            f"and openclip:{'local-dir' if spec.is_local else 'hf-hub'}:{spec.target} for open_clip models"
        )
    return FAMILIES[model_type]


def _load_image_processor(spec: ModelSpec, source: _Source) -> Any:
    import transformers

    auto = transformers.AutoImageProcessor
    fast = {"backend": "torchvision"} if _major(transformers.__version__) >= 5 else {"use_fast": True}
    return _hub_call(
        spec,
        source,
        "image processor (preprocessor_config.json)",
        lambda: auto.from_pretrained(source.resolved, **_where(source), **fast),
    )


def _load_tokenizer(spec: ModelSpec, source: _Source) -> Any:
    auto = _auto("AutoTokenizer")
    tokenizer = _hub_call(spec, source, "tokenizer", lambda: auto.from_pretrained(source.resolved, **_where(source)))
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        # transformers builds an empty tokenizer of the config's type when a folder has no tokenizer files
        raise BindscopeError(
            f"{spec}: its tokenizer has no vocabulary (only {len(tokenizer)} special tokens), so the "
            "folder has no tokenizer files; save the model's tokenizer there with save_pretrained"
        )
    return tokenizer


def _load_model(spec: ModelSpec, source: _Source, family: type[HFEncoder], config: Any, dtype: str) -> Any:
    import transformers

    model_class = getattr(transformers, family.model_class)
    if spec.rand_seed is not None:
        with seeded_init(spec.rand_seed):
            model = model_class(config)
        return model.to(torch_dtype(dtype))
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
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise BindscopeError(
            f"{spec}: the weights lack {len(missing)} {family.model_class} parameters ({shown}), "
            "which would be random; check that the folder's weights belong to its config.json"
        )
    return model


def _hub_call(spec: ModelSpec, source: _Source, what: str, call: Any) -> Any:
    """Run one from_pretrained-style call, turning its failures into one-line BindscopeErrors."""
    try:
        return call()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise _load_error(spec, source, what, exc) from None


def _load_error(spec: ModelSpec, source: _Source, what: str, exc: BaseException) -> BindscopeError:
    from huggingface_hub.utils import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    reason = short_reason(exc)
    if source.local:
        return BindscopeError(
            f"{spec}: the {what} in folder {source.resolved} could not be loaded ({reason}); "
            "re-save it with save_pretrained"
        )
    if isinstance(exc, GatedRepoError):
        return BindscopeError(
            f"{spec}: {spec.target} is gated on the hub; accept its terms there and log in "
            "(hf auth login), or give a local folder"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return BindscopeError(
            f"{spec}: no model {spec.target!r} on the hub (or it is private: log in with hf auth "
            "login); check the id, or give a local folder"
        )
    if isinstance(exc, RevisionNotFoundError):
        return BindscopeError(
            f"{spec}: {spec.target} has no revision {spec.revision!r}; give an existing branch, tag or commit"
        )
    if isinstance(exc, EntryNotFoundError) and not isinstance(exc, LocalEntryNotFoundError):
        return BindscopeError(
            f"{spec}: {spec.target} has no {what}, so it is not a complete transformers model; "
            f"for open_clip repositories use openclip:hf-hub:{spec.target}"
        )
    if isinstance(exc, LocalEntryNotFoundError) and _offline():
        return BindscopeError(
            f"{spec} could not be loaded (no network or no such model?): its {what} is not in the "
            "local hub cache and HF_HUB_OFFLINE is set; give a local folder saved with save_pretrained, "
            "or unset HF_HUB_OFFLINE and check the id and your connection"
        )
    return BindscopeError(
        f"{spec} could not be loaded (no network or no such model?): {what}: {reason}; "
        "give a local folder saved with save_pretrained, or check the id and your connection"
    )


# -- small helpers -------------------------------------------------------------------------------


def _offline() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE as set now (huggingface_hub reads them once, at its import)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


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


__all__ = ["FAMILIES", "ClipEncoder", "Dinov2Encoder", "HFEncoder", "SiglipEncoder", "clip_eos_positions", "load"]
