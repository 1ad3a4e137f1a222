"""open_clip backend: CLIP-style models by name and tag, from a hub repository or from a folder.

Specs (see :mod:`bindscope.embeddings.encoders.spec`)::

    openclip:<arch>/<pretrained tag>     e.g. openclip:ViT-B-32/openai
    openclip:hf-hub:<org>/<repo>         e.g. openclip:hf-hub:timm/ViT-B-16-SigLIP
    openclip:local-dir:<path>            a folder with open_clip_config.json and the weights
    ... +rand[:SEED]                     the same architecture with random weights

The model, its eval transform and its tokenizer all come from open_clip's own factory
(``create_model_from_pretrained``, ``create_model_and_transforms``, ``get_tokenizer``). The final
embeddings are ``model.encode_image`` / ``model.encode_text`` with ``normalize=False``. A layer is
the token states after block L of a tower (taken with forward hooks, which stop the forward pass
there), pooled as the tower pools, with no final norm and no projection.

The tokenizer is loaded on first use, so a model whose tokenizer is missing (e.g. a folder whose
text_cfg names an hf_tokenizer_name without its files) still embeds images. A hub repo is pinned
to the commit its ``open_clip_config.json`` resolves to, and its weights are fetched at that commit
before open_clip's factory runs (which then finds them in the cache), so a download that breaks is
one line; when the hub cannot be reached the model loads from the cache.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import (
    Encoder,
    Items,
    LazyParts,
    count_parameters,
    pool,
    resolve_layer,
    seeded_init,
    short_reason,
    snapshot_commit,
    to_float32,
    torch_dtype,
    unreadable_weights,
    weights_sha256,
)
from bindscope.embeddings.encoders.hub import HubFiles, fetch, hub_error, pin, quiet_hub_logs
from bindscope.embeddings.encoders.openclip_checkpoint import CONFIG_NAME, conversion_record, trainer_checkpoints
from bindscope.embeddings.encoders.spec import ModelSpec

#: Weight files open_clip looks for in a local-dir folder (open_clip.factory._find_checkpoint_in_dir).
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pth")
#: Weight files open_clip's factory takes from a hub repo, in its order of preference.
HUB_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
_CROP = {
    "shortest": "resize the short side to size, then center crop to size",
    "longest": "resize the long side to size, then center crop or pad (fill_color) to size",
    "squash": "resize to size without keeping the aspect ratio, no crop",
}


class _Stop(Exception):
    """Raised by a hook once the wanted hidden state is captured, to skip the rest of the forward pass."""


@dataclass(frozen=True)
class Tower:
    """Where a tower's blocks are and how it pools a hidden state ``[B, T, D]`` (None: no layer taps)."""

    blocks: Any
    pooling: str
    prefix_tokens: int = 1
    text_pool: str = ""
    eos_id: int | None = None


def load(spec: ModelSpec, *, layer: int | None, device: str, dtype: str) -> OpenClipEncoder:
    """Load an open_clip model for a parsed ``openclip:`` spec (see the module docstring)."""
    return OpenClipEncoder(spec, layer=layer, device=device, dtype=dtype)


class OpenClipEncoder(Encoder):
    """An open_clip image-text model (final embeddings or a layer's pooled hidden state)."""

    modalities = ("image", "text")

    def __init__(
        self, spec: ModelSpec, *, layer: int | None = None, device: str = "cpu", dtype: str = "float32"
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        import torch

        self._torch = torch
        self._dtype = torch_dtype(dtype)
        check_spec(spec)
        self._hub = hub_files(spec)
        self._revision = hub_revision(spec) if self._hub is None else self._hub.commit
        model, self._preprocess = create(spec, device, self._hub)
        self._model = model.to(device=device, dtype=self._dtype).eval()
        self._parts = LazyParts({"text": lambda: load_tokenizer(spec, model_name(spec), self._hub)})
        self._towers = {"image": vision_tower(model), "text": text_tower(model)}
        self._index, self._layer_errors = self._resolve_layers()
        self._dims = {"image": self._probe_dim("image")} if "image" not in self._layer_errors else {}
        self._description: dict[str, Any] | None = None

    @property
    def _tokenizer(self) -> Any:
        """open_clip's tokenizer for the model (loaded on first use)."""
        return self._parts.get("text")

    # -- the contract ---------------------------------------------------------------------------

    def prepare(self, modality: str, items: Items) -> Any:
        """Images: open_clip's eval transform, stacked ``[B, 3, H, W]``; texts: token ids ``[B, context_length]``."""
        self._check(modality)
        if modality == "image":
            return self._torch.stack([self._preprocess(image) for image in items])
        return self._tokenizer(list(items))

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        """The final embedding (``normalize=False``) or the pooled hidden state after block ``layer``."""
        self._check(modality)
        inputs = inputs.to(self.device, self._dtype) if modality == "image" else inputs.to(self.device)
        with self._torch.inference_mode():
            if self.layer is None:
                out = (
                    self._model.encode_image(inputs, normalize=False)
                    if modality == "image"
                    else self._model.encode_text(inputs, normalize=False)
                )
            else:
                out = self._layer_output(modality, inputs)
        return to_float32(out)

    def describe(self) -> dict[str, Any]:
        if self._description is None:
            self._description = self._describe()
        return self._description

    # -- layers ---------------------------------------------------------------------------------

    def _resolve_layers(self) -> tuple[dict[str, int | None], dict[str, str]]:
        """Hidden-state index per modality, and why a modality cannot give this layer.

        Towers differ in depth (ViT-L: 24 vision, 12 text blocks) and some have no layer taps, so a
        layer is checked per tower: the load fails when no tower can give it, otherwise the other
        modality fails at its first batch.
        """
        index: dict[str, int | None] = {m: None for m in self.modalities}
        errors: dict[str, str] = {}
        if self.layer is None:
            return index, errors
        for modality, tower in self._towers.items():
            if tower is None:
                errors[modality] = (
                    f"the {_TOWER_NAME[modality]} of {self.spec} ({tower_class(self._model, modality)}) has no "
                    f"per-layer outputs in bindscope; drop --layer to embed {modality}s with it"
                )
                continue
            try:
                index[modality] = resolve_layer(
                    self.layer, len(tower.blocks), f"{_TOWER_NAME[modality]} of {self.spec}"
                )
            except BindscopeError as exc:
                errors[modality] = str(exc)
        if len(errors) == len(self.modalities):
            raise BindscopeError("; ".join(errors[m] for m in self.modalities))
        return index, errors

    def _check(self, modality: str) -> None:
        self.check_modality(modality)

    def check_modality(self, modality: str) -> None:
        """Refuse a modality this model cannot embed (no layer taps or range for it, no tokenizer for texts)."""
        super().check_modality(modality)
        if modality in self._layer_errors:
            raise BindscopeError(self._layer_errors[modality])
        if modality == "text":
            self._parts.get("text")

    def _tap(self, modality: str) -> tuple[Tower, int]:
        """The tower and hidden-state index of a modality that can give ``layer`` (not in ``_layer_errors``)."""
        tower, index = self._towers[modality], self._index[modality]
        assert tower is not None and index is not None, f"{modality}: no layer tap ({self._layer_errors})"
        return tower, index

    def _layer_output(self, modality: str, inputs: Any) -> Any:
        tower, index = self._tap(modality)
        encode = self._model.encode_image if modality == "image" else self._model.encode_text
        hidden = hidden_state(lambda: encode(inputs, normalize=False), tower.blocks, index)
        return pool_tower(tower, hidden, inputs)

    def _probe_dim(self, modality: str) -> int:
        """Width of the rows, from one dummy input (exact for every tower type)."""
        if modality == "image":
            size = _size(self._model.visual.preprocess_cfg["size"])
            dummy = self._torch.zeros(1, 3, *size)
        else:
            dummy = self._tokenizer([""])
        return int(self.forward(modality, dummy).shape[1])

    # -- provenance -----------------------------------------------------------------------------

    def _describe(self) -> dict[str, Any]:
        spec, model = self.spec, self._model
        local = spec.source == "local-dir"
        text_error = self._parts.error("text")
        if "text" not in self._layer_errors and text_error is None and "text" not in self._dims:
            self._dims["text"] = self._probe_dim("text")
        weights = weights_sha256(spec.target) if local and not spec.random else None
        return {
            "backend": "openclip",
            "model_class": type(model).__name__,
            "towers": {m: tower_class(model, m) for m in self.modalities},
            "resolved": resolved(spec),
            "revision": self._revision,
            "weights_sha256": weights,
            "parameters": count_parameters(model),
            "dim": dict(self._dims),
            "dtype": self.dtype,
            "layer": self.layer,
            "num_layers": {m: (len(t.blocks) if t is not None else None) for m, t in self._towers.items()},
            "pooling": {m: self._pooling(m) for m in self.modalities},
            "preprocessing": {
                "image": image_preprocessing(model, self._preprocess),
                "text": text_preprocessing(self._tokenizer) if text_error is None else {"unavailable": text_error},
            },
            "random_init": {"seed": spec.rand_seed} if spec.random else None,
            **converted_from(spec, weights),
        }

    def _pooling(self, modality: str) -> str:
        if self.layer is None:
            return final_pooling(self._model, modality)
        if modality in self._layer_errors:
            return f"none: {self._layer_errors[modality]}"
        tower, index = self._tap(modality)
        return f"{tower.pooling} of hidden_states[{index}] (no final norm, no projection, normalize=False)"


_TOWER_NAME = {"image": "vision tower", "text": "text tower"}


# -- resolving and creating the model -----------------------------------------------------------


def model_name(spec: ModelSpec) -> str:
    """The ``model_name`` open_clip's factory takes for a spec (with its schema prefix)."""
    if spec.source == "local-dir":
        return f"local-dir:{spec.target}"
    if spec.source == "hf-hub":
        return f"hf-hub:{spec.target}"
    return spec.target


def resolved(spec: ModelSpec) -> str:
    """What was actually loaded: the folder, the hub repo, or the weights a tag names."""
    if spec.source == "local-dir":
        return str(Path(spec.target).resolve())
    if spec.source == "hf-hub":
        return spec.target
    if spec.pretrained is None or spec.random:  # +rand builds from the architecture's config alone
        return spec.target
    import open_clip

    cfg = open_clip.get_pretrained_cfg(spec.target, spec.pretrained)
    return cfg.get("hf_hub", "").rstrip("/") or cfg.get("url") or f"{spec.target}/{spec.pretrained}"


def check_spec(spec: ModelSpec) -> None:
    """Refuse an unknown architecture or tag, or a folder without a config or weights, before any loading."""
    if spec.source == "local-dir":
        check_folder(Path(spec.target), spec)
    elif spec.source == "name":
        check_name(spec)


def check_name(spec: ModelSpec) -> None:
    import open_clip

    arch, known = spec.target, open_clip.list_models()
    if arch not in known:
        close = difflib.get_close_matches(arch, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BindscopeError(
            f"{spec}: unknown open_clip architecture {arch!r}{hint}; open_clip.list_models() lists the "
            f"{len(known)} known ones, or give openclip:local-dir:<folder> for a custom config"
        )
    if spec.pretrained is None:
        return
    tags = open_clip.list_pretrained_tags_by_model(arch)
    if spec.pretrained not in tags:
        available = ", ".join(tags) if tags else "none (use +rand for random weights)"
        raise BindscopeError(
            f"{spec}: open_clip has no pretrained weights {spec.pretrained!r} for {arch}; its tags are: {available}"
        )


def converted_from(spec: ModelSpec, weights: str | None) -> dict[str, Any]:
    """For a folder of ``bindscope models convert``: ``{"converted_from": ...}``, the training checkpoint it came
    from, and whether its weights are still the ones converted (``weights_match``); else ``{}``."""
    record = conversion_record(spec.target) if spec.source == "local-dir" else None
    if record is None:
        return {}
    keys = ("checkpoint", "checkpoint_sha256", "epoch", "run_name", "architecture", "applied", "bindscope_version")
    found = {k: record.get(k) for k in keys}
    return {
        "converted_from": {**found, "weights_match": weights is not None and record.get("weights_sha256") == weights}
    }


def check_folder(folder: Path, spec: ModelSpec) -> None:
    config = folder / CONFIG_NAME
    has_weights = any(any(folder.glob(g)) for g in WEIGHT_GLOBS)
    if not has_weights and not spec.random:
        check_not_a_trainer_run(folder, spec, config)
    if not config.is_file():
        raise BindscopeError(
            f"{spec}: {folder} has no {CONFIG_NAME}; an openclip:local-dir: folder needs "
            'open_clip_config.json ({"model_cfg": ..., "preprocess_cfg": ...}) and the weights '
            "(open_clip_model.safetensors)"
        )
    try:
        model_cfg = json.loads(config.read_text(encoding="utf-8")).get("model_cfg")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise BindscopeError(
            f"{spec}: {config} is not a JSON object ({short_reason(exc)}); rewrite it as "
            '{"model_cfg": ..., "preprocess_cfg": ...}'
        ) from None
    if not isinstance(model_cfg, dict) or not {"embed_dim", "vision_cfg", "text_cfg"} <= model_cfg.keys():
        raise BindscopeError(
            f"{spec}: {config} has no model_cfg with embed_dim, vision_cfg and text_cfg; "
            "write the architecture config there (open_clip's model_configs/*.json show the format)"
        )
    if not spec.random and not has_weights:
        raise BindscopeError(
            f"{spec}: {folder} has no weights ({', '.join(WEIGHT_GLOBS)}); save the model's "
            "state_dict there as open_clip_model.safetensors, or add +rand for random weights"
        )


def check_not_a_trainer_run(folder: Path, spec: ModelSpec, config: Path) -> None:
    """Refuse a folder of open_clip training checkpoints (``epoch_N.pt``, or a run folder holding them in
    ``checkpoints/``), naming the command that turns one into a model folder."""
    found = trainer_checkpoints(folder)
    if not found:
        return
    latest = found[-1]
    if config.is_file():
        arch = f" --config {config}"
    elif latest.parent.name == "checkpoints" and (latest.parent.parent / "params.txt").is_file():
        arch = ""  # the run's params.txt names the architecture
    else:
        arch = " --arch ARCH (or --config FILE)"
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    raise BindscopeError(
        f"{spec}: {folder} holds open_clip training checkpoints ({latest.name}{more}), not a model folder; turn "
        f"one into a folder with `bindscope models convert {latest}{arch} --out MODEL`, then give "
        "openclip:local-dir:MODEL"
    )


def create(spec: ModelSpec, device: str, hub: HubFiles | None = None) -> tuple[Any, Callable[[Any], Any]]:
    """The model (on ``device``) and open_clip's eval transform, via open_clip's factory."""
    import open_clip

    name = model_name(spec)
    try:
        if spec.rand_seed is None:  # not spec.random
            with quiet_hub_logs():
                return open_clip.create_model_from_pretrained(name, pretrained=spec.pretrained, device=device)
        with seeded_init(spec.rand_seed), quiet_hub_logs():
            model, _, preprocess = open_clip.create_model_and_transforms(
                name,
                pretrained=None,
                load_weights=False,
                pretrained_image=False,
                pretrained_text=False,
                device=device,
                **tag_preprocess(spec),
            )
        return model, preprocess
    except BindscopeError:
        raise
    except Exception as exc:  # the factory raises RuntimeError, OSError, ValueError, hub errors...
        raise _load_error(spec, exc, hub, "model") from exc


def tag_preprocess(spec: ModelSpec) -> dict[str, Any]:
    """For ``<arch>/<tag>+rand``: the tag's own preprocessing, without downloading its weights."""
    if spec.source != "name" or spec.pretrained is None:
        return {}
    import open_clip

    cfg = open_clip.get_pretrained_cfg(spec.target, spec.pretrained)
    keys = {
        "mean": "image_mean",
        "std": "image_std",
        "interpolation": "image_interpolation",
        "resize_mode": "image_resize_mode",
    }
    return {arg: cfg[key] for key, arg in keys.items() if cfg.get(key) is not None}


def load_tokenizer(spec: ModelSpec, name: str, hub: HubFiles | None = None) -> Any:
    """open_clip's tokenizer for the model; a BindscopeError (which refuses texts only) when it cannot be loaded."""
    import open_clip

    try:
        with quiet_hub_logs():
            return open_clip.get_tokenizer(name)
    except Exception as exc:  # HF tokenizers fetched from the hub, missing tokenizer files in a folder
        if spec.source == "local-dir":
            raise BindscopeError(
                f"{spec} cannot embed texts: its tokenizer could not be loaded ({short_reason(exc)}); put the "
                "tokenizer files its text_cfg names (hf_tokenizer_name) into the folder, or embed --modality image"
            ) from exc
        raise _load_error(spec, exc, hub, "tokenizer") from exc


def _load_error(spec: ModelSpec, exc: Exception, hub: HubFiles | None = None, what: str = "model") -> BindscopeError:
    reason = short_reason(exc)
    if spec.source == "local-dir":
        return unreadable_weights(spec.target, spec) or BindscopeError(
            f"{spec}: the folder could not be loaded by open_clip ({reason}); check that the "
            f"weights fit the model_cfg in {CONFIG_NAME} (and that tokenizer files are there if "
            "text_cfg names an hf_tokenizer_name)"
        )
    if hub is not None:
        return hub_error(spec, hub, what, exc)
    return BindscopeError(
        f"{spec} could not be loaded (no network or no such model?): {reason}; give a local folder "
        "instead (openclip:local-dir:<path> with open_clip_config.json and the weights), or run once "
        "with network access to fill the Hugging Face cache"
    )


def hub_revision(spec: ModelSpec) -> str | None:
    """For ``<arch>/<tag>``: the hub commit of the weights (from their path in the hub cache), fetched first."""
    if spec.random or spec.source != "name" or spec.pretrained is None:
        return None
    from open_clip import pretrained

    try:
        with quiet_hub_logs():
            path = pretrained.download_pretrained(pretrained.get_pretrained_cfg(spec.target, spec.pretrained))
    except Exception as exc:  # offline, unknown repo, no hub client
        raise _load_error(spec, exc) from exc
    return snapshot_commit(path)


def hub_files(spec: ModelSpec) -> HubFiles | None:
    """For ``openclip:hf-hub:``: the repo pinned to the commit of its open_clip_config.json, weights fetched.

    The weights are downloaded here, at that commit, so that a broken download is one line and open_clip's
    factory then finds every file in the cache. None for other specs.
    """
    if spec.source != "hf-hub":
        return None
    files, _ = pin(
        spec,
        spec.target,
        CONFIG_NAME,
        None,
        CONFIG_NAME,
        missing=f"it is not an open_clip model: for transformers repositories use hf:{spec.target}",
        folder="a local folder instead (openclip:local-dir:<path> with open_clip_config.json and the weights)",
    )
    if spec.random:
        return files
    for name in HUB_WEIGHTS:
        if fetch(spec, files, name, f"weights ({name})", optional=True) is not None:
            return files
    what = f"weights ({' or '.join(HUB_WEIGHTS)})"
    if files.offline:
        from huggingface_hub.errors import LocalEntryNotFoundError

        raise hub_error(spec, files, what, LocalEntryNotFoundError("not in the local cache"))
    raise BindscopeError(
        f"{spec}: {files.repo} has no {what} at commit {files.commit}; give a repo saved with open_clip's "
        "push_to_hf_hub, or openclip:local-dir:<folder> with open_clip_config.json and the weights"
    )


# -- towers, hooks and pooling ------------------------------------------------------------------


def tower_class(model: Any, modality: str) -> str:
    """The class of a tower (CLIP builds its text transformer's modules into the model itself)."""
    if modality == "image":
        return type(model.visual).__name__
    text = getattr(model, "text", None)
    return type(text).__name__ if text is not None else "TextTransformer"


def vision_tower(model: Any) -> Tower | None:
    """Layer taps for open_clip's own ViT or a timm ViT; None for other vision towers (ResNets, ...)."""
    from open_clip.timm_model import TimmModel
    from open_clip.transformer import VisionTransformer

    visual = model.visual
    if isinstance(visual, VisionTransformer):
        blocks = visual.transformer.resblocks
        if visual.attn_pool is not None:
            return Tower(blocks, "class token (token 0; the model's attentional pooler is not applied to layers)")
        if visual.pool_type == "avg":
            return Tower(blocks, "mean over patch tokens (the model's own pool_type 'avg')")
        return Tower(blocks, "class token (token 0, the model's own pool_type 'tok')")
    trunk: Any = getattr(visual, "trunk", None)
    if isinstance(visual, TimmModel) and hasattr(trunk, "blocks") and hasattr(trunk, "num_prefix_tokens"):
        prefix = int(trunk.num_prefix_tokens)
        if getattr(trunk, "global_pool", "") == "token" and getattr(trunk, "cls_token", None) is not None:
            return Tower(trunk.blocks, "class token (token 0, timm global_pool 'token')", prefix)
        return Tower(
            trunk.blocks,
            f"mean over patch tokens (after {prefix} prefix tokens; timm global_pool "
            f"{getattr(trunk, 'global_pool', '')!r} is not applied to layers)",
            prefix,
        )
    return None


def text_tower(model: Any) -> Tower | None:
    """Layer taps for open_clip's own text transformer; None for Hugging Face text towers."""
    from open_clip.transformer import TextTransformer

    text = getattr(model, "text", None)
    if text is None:  # CLIP keeps its text tower's modules on the model itself
        return _text_tower(model.transformer.resblocks, model.text_pool_type, getattr(model, "text_eos_id", None))
    if isinstance(text, TextTransformer):
        if text.cls_emb is not None:
            return Tower(
                text.transformer.resblocks, "appended class token (last position, as the model pools)", text_pool="last"
            )
        return _text_tower(text.transformer.resblocks, text.pool_type, text.eos_id)
    return None


def _text_tower(blocks: Any, pool_type: str, eos_id: int | None) -> Tower | None:
    what = {
        "argmax": "end-of-text token (argmax of the token ids, the model's pool_type 'argmax')",
        "eos": f"end-of-text token (first id {eos_id}, the model's pool_type 'eos')",
        "first": "first token (the model's pool_type 'first')",
        "last": "last token (the model's pool_type 'last')",
    }
    if pool_type not in what:
        return None
    return Tower(blocks, what[pool_type], text_pool=pool_type, eos_id=eos_id)


def hidden_state(run: Callable[[], Any], blocks: Any, index: int) -> Any:
    """Token states ``[B, T, D]`` after block ``index`` (0: the input of the first block) while ``run()`` runs.

    A forward hook captures them and stops the pass there, so later blocks are not computed.
    """
    captured: list[Any] = []

    def grab(value: Any) -> None:
        captured.append(value[0] if isinstance(value, tuple) else value)
        raise _Stop

    if index == 0:
        handle = blocks[0].register_forward_pre_hook(lambda module, args: grab(args))
    else:
        handle = blocks[index - 1].register_forward_hook(lambda module, args, output: grab(output))
    try:
        run()
    except _Stop:
        pass
    finally:
        handle.remove()
    if not captured:
        raise RuntimeError(f"block {index} of the tower did not run; cannot take its hidden state")
    return captured[0]


def pool_tower(tower: Tower, hidden: Any, inputs: Any) -> Any:
    """Pool a hidden state as the tower pools (text: token ids in ``inputs`` pick the token)."""
    from open_clip.transformer import text_global_pool

    if tower.text_pool:
        return text_global_pool(hidden, inputs, tower.text_pool, eos_token_id=tower.eos_id)
    if tower.pooling.startswith("class token"):
        return pool(hidden, "cls")
    return pool(hidden[:, tower.prefix_tokens :], "mean")


# -- descriptions -------------------------------------------------------------------------------


def final_pooling(model: Any, modality: str) -> str:
    if modality == "image":
        return (
            "image_features: model.encode_image(normalize=False): the vision tower's own pooling, final norm and "
            "projection; not L2-normalised"
        )
    return (
        "text_features: model.encode_text(normalize=False): the text tower's final norm, its pooled token "
        f"(pool_type {_text_pool_type(model)!r}) and projection; not L2-normalised"
    )


def _text_pool_type(model: Any) -> str:
    text = getattr(model, "text", None)
    if text is None:
        return model.text_pool_type
    return getattr(text, "pool_type", None) or type(getattr(text, "pooler", text)).__name__


def image_preprocessing(model: Any, preprocess: Any) -> dict[str, Any]:
    """open_clip's resolved image preprocessing (the eval transform built from ``visual.preprocess_cfg``)."""
    cfg = dict(model.visual.preprocess_cfg)
    mode = cfg.get("resize_mode")
    return {
        "size": _size(cfg["size"]),
        "resize_mode": mode,
        "crop": _CROP.get(mode, mode) if mode is not None else None,
        "interpolation": cfg.get("interpolation"),
        "mean": [float(v) for v in cfg["mean"]],
        "std": [float(v) for v in cfg["std"]],
        "fill_color": cfg.get("fill_color"),
        "transforms": [type(t).__name__ for t in getattr(preprocess, "transforms", [preprocess])],
    }


def text_preprocessing(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer open_clip picked for the model and how it pads and truncates."""
    out: dict[str, Any] = {
        "tokenizer": type(tokenizer).__name__,
        "context_length": int(tokenizer.context_length),
        "padding": "to context_length (max_length)",
        "truncation": "to context_length",
    }
    if hasattr(tokenizer, "eot_token_id"):  # SimpleTokenizer (CLIP BPE)
        out.update(
            vocab_size=int(tokenizer.vocab_size),
            sot_token_id=int(tokenizer.sot_token_id),
            eot_token_id=int(tokenizer.eot_token_id),
            truncation="to context_length, keeping the end-of-text token last",
            padding="zeros to context_length",
        )
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None:  # HFTokenizer / SigLipTokenizer wrap a transformers tokenizer
        out.update(hf_tokenizer=type(inner).__name__, vocab_size=int(len(inner)))
    return out


def _size(size: Any) -> list[int]:
    return [int(size), int(size)] if isinstance(size, int) else [int(s) for s in size]
