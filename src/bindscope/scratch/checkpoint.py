"""Training checkpoints: weights and optimizer state as safetensors, everything else as JSON.

While training, the work lives in a hidden sibling ``.<name>.training/`` of the model folder
(:mod:`bindscope.embeddings.encoders.scratch.folder`) holding ``run.json`` and ``step-XXXXXXXX/``
checkpoints (``model``, ``optimizer`` and ``best`` safetensors plus ``state.json``), each written
under a temporary name and renamed once complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from bindscope.core.io import atomic_file, write_json

STEP_PREFIX = "step-"


def save_weights(path: Path, state: dict[str, torch.Tensor]) -> None:
    """Write a state dict atomically (contiguous CPU copies), with the permissions of any other file."""
    data = save({k: v.detach().cpu().contiguous() for k, v in state.items()})
    with atomic_file(path, "wb") as fh:
        fh.write(data)


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
    try:
        for name, tensors in files.items():
            save_weights(tmp / f"{name}.safetensors", tensors)
        write_json(tmp / "state.json", state)
    except BaseException:  # a full disk: no half checkpoint is left beside the complete ones
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
