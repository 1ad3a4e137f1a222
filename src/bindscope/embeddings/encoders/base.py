"""What every backend provides: an :class:`Encoder` that turns images or texts into float32 rows.

A backend splits its work in two so that the embedding loop can overlap them:
:meth:`Encoder.prepare` (CPU preprocessing of one batch: decoding, resizing, tokenising) and
:meth:`Encoder.forward` (the model on those inputs). :meth:`Encoder.encode` chains both.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.spec import ModelSpec

MODALITIES = ("image", "text")
DTYPES = ("float32", "float16", "bfloat16")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")

#: What an encoder embeds, a batch or all of a dataset's rows: strings or PIL images, or an
#: array of rows (a scratch model's ``[N, K, C]`` value indices, see :meth:`Encoder.dataset_items`).
Items: TypeAlias = Sequence[Any] | np.ndarray


class Encoder(ABC):
    """A loaded model that embeds images and/or texts.

    Parameters
    ----------
    spec : ModelSpec
        What was asked for.
    layer : int or None
        None: the model's final embedding. Otherwise the pooled hidden state after block
        ``layer`` (0 = the embedding layer's output, num_layers = the last block; negative
        values count from the end, -1 = the last block).
    device : str
        Torch device.
    dtype : str
        Weights and activations: float32, float16 or bfloat16. Outputs are always float32.
    """

    #: The modalities this backend can embed, set by each subclass.
    modalities: tuple[str, ...] = ()

    def __init__(
        self, spec: ModelSpec, *, layer: int | None = None, device: str = "cpu", dtype: str = "float32"
    ) -> None:
        if dtype not in DTYPES:
            raise BindscopeError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.spec = spec
        self.layer = layer
        self.device = device
        self.dtype = dtype

    @abstractmethod
    def prepare(self, modality: str, items: Items) -> Any:
        """Preprocess one batch (PIL images or strings) into model inputs, on the CPU."""

    @abstractmethod
    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        """Run the model on prepared inputs; float32 ``[batch, dim]``."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What was resolved, for the manifest.

        Keys: backend, model_class, resolved (path or hub id), revision, weights_sha256,
        parameters, dim (per modality), dtype, layer, num_layers (per modality), pooling (per
        modality), preprocessing (per modality), random_init (``{"seed": s}`` or None).
        """

    def dataset_items(self, dataset: Any, modality: str, single_objects: bool = False) -> Items | None:
        """What this model embeds of a dataset's rows, when it is not their captions or images (None)."""
        return None

    def check_modality(self, modality: str) -> None:
        """Refuse a modality this model cannot embed, saying which it can."""
        if modality not in MODALITIES:
            raise BindscopeError(f"modality must be 'image' or 'text', got {modality!r}")
        if modality not in self.modalities:
            raise BindscopeError(
                f"{self.spec} embeds {' and '.join(self.modalities)} only, not {modality}; "
                f"use --modality {self.modalities[0]} or a model with a {modality} tower"
            )

    def encode(self, modality: str, items: Items, batch_size: int = 32) -> np.ndarray:
        """Embed ``items`` in batches; float32 ``[len(items), dim]``."""
        self.check_modality(modality)
        if batch_size < 1:
            raise BindscopeError(f"batch size must be at least 1, got {batch_size}")
        parts = [
            self.forward(modality, self.prepare(modality, items[i : i + batch_size]))
            for i in range(0, len(items), batch_size)
        ]
        if not parts:
            return np.zeros((0, self.dim(modality)), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32, copy=False)

    def encode_images(self, images: Sequence[Any], batch_size: int = 32) -> np.ndarray:
        """Embed PIL images; float32 ``[len(images), dim]``."""
        return self.encode("image", images, batch_size)

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Embed strings; float32 ``[len(texts), dim]``."""
        return self.encode("text", list(texts), batch_size)

    def dim(self, modality: str) -> int:
        """Width of the rows this encoder returns for ``modality``."""
        return int(self.describe()["dim"][modality])


class LazyParts:
    """What prepares each modality (an image processor, a tokenizer), each loaded on first use.

    A model used for images never needs its tokenizer, so a missing or broken tokenizer refuses
    texts only; a failure is kept and raised again on every use.

    Parameters
    ----------
    loaders : dict
        Per modality, a function that loads its part or raises a BindscopeError.
    """

    def __init__(self, loaders: dict[str, Callable[[], Any]]) -> None:
        self._loaders = loaders
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, modality: str) -> Any:
        """The part that prepares ``modality``; a BindscopeError when it cannot be loaded."""
        with self._lock:
            if modality not in self._values and modality not in self._errors:
                try:
                    self._values[modality] = self._loaders[modality]()
                except BindscopeError as exc:
                    self._errors[modality] = str(exc)
            if modality in self._errors:
                raise BindscopeError(self._errors[modality])
            return self._values[modality]

    def error(self, modality: str) -> str | None:
        """Why the part of ``modality`` cannot be loaded (loading it now if needed), or None."""
        try:
            self.get(modality)
        except BindscopeError as exc:
            return str(exc)
        return None


def lacks_vocabulary(tokenizer: Any) -> bool:
    """Whether a tokenizer holds only its special tokens: transformers builds such an empty tokenizer of the
    config's type when a folder has no tokenizer files, and every word then reads as unknown."""
    return len(tokenizer) <= len(set(tokenizer.all_special_ids))


def resolve_layer(layer: int | None, num_layers: int, tower: str) -> int | None:
    """Index into a ``hidden_states`` tuple of ``num_layers + 1`` entries, or None for the final output."""
    if layer is None:
        return None
    index = layer + num_layers + 1 if layer < 0 else layer
    if not 0 <= index <= num_layers:
        raise BindscopeError(
            f"--layer {layer} is out of range: the {tower} has {num_layers} layers "
            f"(0 = embedding layer, {num_layers} = last block, -1 = last block)"
        )
    return index


def pool(hidden: Any, how: str, mask: Any = None, index: Any = None) -> Any:
    """Pool token states ``[B, T, D]`` into ``[B, D]``.

    ``how``: ``cls`` (token 0), ``last`` (token -1), ``mean`` (over tokens, ``mask`` [B, T] if
    given), ``index`` (token ``index[b]`` per row, e.g. CLIP's end-of-text token).
    """
    import torch

    if how == "cls":
        return hidden[:, 0]
    if how == "last":
        return hidden[:, -1]
    if how == "index":
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]
    if how == "mean":
        if mask is None:
            return hidden.mean(dim=1)
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp_min(1)
    raise ValueError(f"unknown pooling {how!r}")


@contextlib.contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Seed torch's global generator for a block (random weights), then restore it.

    The library never seeds globally: the caller's random state is the same after the block.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def count_parameters(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def weights_sha256(folder: str | Path) -> str | None:
    """One hash over the weight files of a local model folder (names and bytes), None if it has none."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        return None
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


def to_float32(tensor: Any) -> np.ndarray:
    """A torch tensor as a float32 numpy array on the CPU."""
    return tensor.detach().to("cpu").float().numpy()


_SNAPSHOT = re.compile(r"[/\\]snapshots[/\\]([0-9a-f]{40})(?:[/\\]|$)")


def snapshot_commit(path: str | Path | None) -> str | None:
    """The hub commit of a file or folder in the Hugging Face cache (``.../snapshots/<commit>/...``), if any."""
    match = _SNAPSHOT.search(str(path or ""))
    return match.group(1) if match else None


def short_reason(exc: BaseException, limit: int = 200) -> str:
    """An exception as one short line (its type when it has no message), for one-line errors."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_reason(exc: BaseException) -> str:
    """:func:`short_reason` of a failed load, with transformers' size-mismatch error said plainly (it points at a
    report that :func:`bindscope.embeddings.encoders.hub.held_logs` holds back)."""
    if "ignore_mismatched_sizes" in str(exc):
        return "the sizes of its weights differ from those its config.json gives"
    return short_reason(exc)


def unreadable_weights(folder: str | Path, spec: object) -> BindscopeError | None:
    """The one line for the first safetensors file of a model folder that does not open (truncated, emptied,
    a garbled header, a folder in its place), or None when each opens (only its header is read)."""
    from safetensors import safe_open

    for path in sorted(Path(folder).rglob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except Exception as exc:  # safetensors raises its own error type, and OSError for a folder
            return BindscopeError(
                f"{spec}: model weights {path} are not a readable safetensors file ({short_reason(exc)}); download "
                "or save the model again"
            )
    return None
