"""Checkpoint files: weights and optimizer state as safetensors, everything else as JSON.

A finished model folder (what ``scratch:DIR`` loads)::

    config.json         format, the training config, vocabulary, object roles, selected step
    model.safetensors   the selected weights (best validation accuracy)
    final.safetensors   the weights after the last step
    metrics.csv         the training log: loss per task, logit scale, learning rate
    evaluation.csv      accuracies at every evaluation, long format (step, split, metric, value)
    summary.json        the selected step and its accuracies, final accuracies, timings
    manifest.json       versions, device, seconds

While training, the work lives in a hidden sibling ``.<name>.training/`` holding ``run.json``
and ``step-XXXXXXXX/`` checkpoints (``model``, ``optimizer`` and ``best`` safetensors plus
``state.json``), each written under a temporary name and renamed once complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file, check_inside, read_json, write_json
from bindscope.core.validation import check_fields, one_line

MODEL_FORMAT = "bindscope-scratch-v1"
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
STEP_PREFIX = "step-"


def save_weights(path: Path, state: dict[str, torch.Tensor]) -> None:
    """Write a state dict atomically (contiguous CPU copies), with the permissions of any other file."""
    data = save({k: v.detach().cpu().contiguous() for k, v in state.items()})
    with atomic_file(path, "wb") as fh:
        fh.write(data)


def load_weights(path: Path, root: Path | None = None) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors (never a pickle); with ``root``, a file leading out of it is refused."""
    if root is not None:
        check_inside(root, path, RETRAIN)
    try:
        tensors = load_file(str(path))
    except FileNotFoundError:
        raise BindscopeError(f"{path} is missing; train the model again with bindscope scratch train") from None
    except Exception as exc:  # safetensors raises its own error types for damaged files
        raise BindscopeError(f"{path} is not a readable safetensors file ({one_line(exc)}); {RETRAIN}") from None
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise BindscopeError(f"{path} holds NaN or infinite values (in {bad[0]}); {RETRAIN}")
    return tensors


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The optimizer's per-parameter tensors (flat names) and its param groups (JSON-ready)."""
    sd = optimizer.state_dict()
    tensors = {f"{i}.{k}": v for i, st in sd["state"].items() for k, v in st.items()}
    return tensors, json.loads(json.dumps(sd["param_groups"]))


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: list[dict]) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in tensors.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def write_checkpoint(work: Path, step: int, files: dict[str, dict[str, torch.Tensor]], state: dict[str, Any]) -> Path:
    """``work/step-XXXXXXXX/`` with one safetensors file per entry of ``files`` and ``state.json``;
    older checkpoints are removed once it is complete."""
    final = work / f"{STEP_PREFIX}{step:08d}"
    tmp = work / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, tensors in files.items():
        save_weights(tmp / f"{name}.safetensors", tensors)
    write_json(tmp / "state.json", state)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in work.glob(f"{STEP_PREFIX}*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(work: Path) -> Path | None:
    """The newest complete checkpoint folder in ``work`` (None: none yet)."""
    done = sorted(p for p in work.glob(f"{STEP_PREFIX}*") if (p / "state.json").is_file())
    return done[-1] if done else None


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
