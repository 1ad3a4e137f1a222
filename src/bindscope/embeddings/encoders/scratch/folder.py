"""A finished model folder of ``bindscope scratch train`` (what ``scratch:DIR`` loads): its record and weights.

::

    config.json         format, the training config, vocabulary, object roles, selected step
    model.safetensors   the selected weights (best validation accuracy)
    final.safetensors   the weights after the last step
    metrics.csv         the training log: loss per task, logit scale, learning rate
    evaluation.csv      accuracies at every evaluation, long format (step, split, metric, value)
    summary.json        the selected step and its accuracies, final accuracies, timings
    manifest.json       versions, device, seconds

Weights are safetensors files (never a pickle); everything else is JSON or CSV.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from safetensors.torch import load

from bindscope.core.errors import BindscopeError
from bindscope.core.io import check_inside, read_json
from bindscope.core.validation import check_fields, one_line
from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.embeddings.encoders.scratch.model import DualEncoder, build_model
from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary

MODEL_FORMAT = "bindscope-scratch-v1"
#: The format of an image-text model folder (a CLIP in miniature): ``config.json`` holds its config, words,
#: dataset hash and split instead of a token vocabulary and object roles.
CLIP_FORMAT = "bindscope-clip-v1"
RETRAIN = "train the model again with bindscope scratch train"
#: Types of ``config.json``'s keys in a finished model folder.
RECORD_TYPES: dict[str, type | tuple[type, ...]] = {
    "config": dict,
    "preset": dict,
    "vocabulary": dict,
    "objects": dict,
    "selected_step": int,
}
CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def load_weights(path: Path, root: Path | None = None) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors (never a pickle); with ``root``, a file leading out of it is refused."""
    if root is not None:
        check_inside(root, path, RETRAIN)
    try:
        tensors = load(path.read_bytes())  # bytes, not a path: safetensors cannot open a path that is not UTF-8
    except FileNotFoundError:
        raise BindscopeError(f"{path} is missing; train the model again with bindscope scratch train") from None
    except Exception as exc:  # safetensors raises its own error types for damaged files
        raise BindscopeError(f"{path} is not a readable safetensors file ({one_line(exc)}); {RETRAIN}") from None
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise BindscopeError(f"{path} holds NaN or infinite values (in {bad[0]}); {RETRAIN}")
    return tensors


def read_model_config(folder: str | Path) -> dict[str, Any]:
    """``config.json`` of a finished model folder, checked."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BindscopeError(
            f"scratch model folder {folder} does not exist; train one with bindscope scratch train --out {folder}"
        )
    if not (folder / CONFIG).is_file():
        partial = [p.name for p in folder.parent.glob(f".{folder.name}.training")]
        hint = " (its training has not finished: run the same train command again)" if partial else ""
        raise BindscopeError(f"{folder} holds no {CONFIG}: it is not a bindscope scratch model folder{hint}")
    data = read_json(folder / CONFIG, "scratch model config", folder)
    if data.get("format") == CLIP_FORMAT:
        for key in ("config", "words", "dataset_hash", "split", "selected_step"):
            if key not in data:
                raise BindscopeError(f"{folder / CONFIG} is damaged (no {key!r}); train the model again")
        return data
    if data.get("format") != MODEL_FORMAT:
        raise BindscopeError(
            f"{folder / CONFIG} is not a bindscope scratch model config (format {data.get('format')!r})"
        )
    for key in ("config", "objects", "selected_step", "vocabulary"):
        if key not in data:
            raise BindscopeError(f"{folder / CONFIG} is damaged (no {key!r}); train the model again")
    _check_record(data, f"scratch model config {folder / CONFIG}")
    return data


def _check_record(data: dict[str, Any], where: str) -> None:
    """Types of a model record: its parts, the vocabulary's sizes and the object roles' ids."""
    check_fields(data, RECORD_TYPES, where, RETRAIN)
    vocab, roles = data["vocabulary"], data["objects"]
    parts = {"sizes": vocab.get("sizes"), "max_objects": [vocab.get("max_objects")]}
    parts.update({k: roles.get(k) for k in ("fit", "validation", "test")})
    for name, values in parts.items():
        whole = isinstance(values, list) and all(type(v) is int and v >= 0 for v in values)
        if not whole:
            raise BindscopeError(f"{where}: {name!r} must hold whole numbers >= 0; {RETRAIN}")


def load_model(
    folder: str | Path, *, weights: str = WEIGHTS, random_seed: int | None = None, device: str = "cpu"
) -> tuple[DualEncoder, dict]:
    """A finished model folder's model (eval mode) and its ``config.json`` record.

    With ``random_seed`` the weights are not read: the same architecture is initialised from that
    seed (the ``+rand`` control).
    """
    folder = Path(folder)
    record = read_model_config(folder)
    if record.get("format") == CLIP_FORMAT:
        raise BindscopeError(
            f"{folder} is an image-text model (a CLIP in miniature), not a token-level one; embed its images and "
            f"captions with `bindscope embed --model scratch:{folder} --modality image|text`"
        )
    try:
        config = ScratchConfig.model_validate(record["config"])
    except ValidationError:
        raise BindscopeError(f"{folder / CONFIG} holds an invalid training config; train the model again") from None
    vocab = Vocabulary(tuple(record["vocabulary"]["sizes"]), int(record["vocabulary"]["max_objects"]))
    if vocab != Vocabulary.for_space(config.preset().space, config.max_objects):
        raise BindscopeError(f"{folder / CONFIG}: the vocabulary disagrees with its training config; train again")
    if random_seed is not None:
        return build_model(config, vocab, seed=random_seed).to(device).eval(), record
    model = build_model(config, vocab)
    try:
        model.load_state_dict(load_weights(folder / weights, root=folder))
    except RuntimeError as exc:
        raise BindscopeError(
            f"{folder / weights} does not match its config ({str(exc).splitlines()[0]}); train again"
        ) from None
    return model.to(device).eval(), record
