"""What every trainer of a model from scratch shares: its step, logs, timings, kept weights and checkpoints.

A trainer (:class:`~bindscope.scratch.train.Trainer` for token-level models,
:class:`~bindscope.scratch.clip_train.ClipTrainer` for image-text ones) sets ``config``, ``device``,
``model`` and ``optimizer`` and implements ``train_step``, ``evaluate_now``, ``postfix`` and ``write``;
a checkpoint written by :meth:`TrainerBase.save` makes :meth:`TrainerBase.restore` continue exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import torch

from bindscope.analyses.results import versions
from bindscope.core.errors import BindscopeError
from bindscope.core.io import read_json, staged_dir, write_json
from bindscope.core.validation import check_fields, one_line
from bindscope.core.version import utc_now
from bindscope.embeddings.encoders.scratch.folder import CONFIG, load_weights
from bindscope.scratch.checkpoint import optimizer_tensors, restore_optimizer, save_weights, write_checkpoint

#: Types of a training checkpoint's ``state.json`` (all required but ``window``).
CHECKPOINT_TYPES: dict[str, type | tuple[type, ...]] = {
    "step": int,
    "best": dict,
    "param_groups": list,
    "log": list,
    "evaluation": list,
    "seconds": (int, float),
    "window": list,
}


class TrainerBase:
    """The state a run carries between steps, and its checkpoints."""

    config: Any
    device: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def __init__(self) -> None:
        self.step = 0
        self.log_rows: list[dict] = []
        self.eval_rows: list[dict] = []
        self.best: dict[str, Any] = {"step": None, "score": None}
        self.best_weights: dict[str, torch.Tensor] | None = None
        self.seconds = 0.0
        self._window: list[torch.Tensor] = []

    def mean_window(self) -> list[float]:
        """The mean of the values logged since the last log row (and a fresh window)."""
        mean = torch.stack(self._window).mean(0).cpu().tolist()
        self._window = []
        return mean

    def keep(self, score: float | None) -> None:
        """Keep the current weights when ``score`` beats the best so far (or when there is no score)."""
        if score is None or self.best["score"] is None or score > self.best["score"]:
            self.best = {"step": self.step, "score": score}
            self.best_weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def save(self, work: Path) -> None:
        tensors, groups = optimizer_tensors(self.optimizer)
        state = {
            "step": self.step,
            "best": self.best,
            "param_groups": groups,
            "log": self.log_rows,
            "evaluation": self.eval_rows,
            "seconds": self.seconds,
            "window": [w.cpu().tolist() for w in self._window],
        }
        files = {"model": self.model.state_dict(), "optimizer": tensors}
        if self.best_weights is not None:
            files["best"] = self.best_weights
        write_checkpoint(work, self.step, files, state)

    def restore(self, folder: Path) -> None:
        """Continue from a checkpoint folder; a damaged one is one error that says how to start over."""
        fix = "pass --overwrite to start the training over"
        state = read_json(folder / "state.json", "training checkpoint", folder)
        missing = [k for k in CHECKPOINT_TYPES if k != "window" and k not in state]
        if missing:
            raise BindscopeError(f"the training checkpoint {folder} lacks {', '.join(missing)}; {fix}")
        check_fields(state, CHECKPOINT_TYPES, f"training checkpoint {folder / 'state.json'}", fix)
        try:
            self.model.load_state_dict(load_weights(folder / "model.safetensors", root=folder))
            restore_optimizer(
                self.optimizer, load_weights(folder / "optimizer.safetensors", root=folder), state["param_groups"]
            )
            self._window = [torch.tensor(w, device=self.device) for w in state.get("window", [])]
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            if isinstance(exc, BindscopeError):
                raise
            raise BindscopeError(
                f"the training checkpoint {folder} does not fit this run ({one_line(exc, 100)}); {fix}"
            ) from None
        self.step, self.best = state["step"], state["best"]
        self.log_rows, self.eval_rows, self.seconds = state["log"], state["evaluation"], float(state["seconds"])
        best = folder / "best.safetensors"
        self.best_weights = (
            {k: v.to(self.device) for k, v in load_weights(best, root=folder).items()} if best.is_file() else None
        )


def write_model_folder(
    trainer: TrainerBase,
    out: Path,
    weights: dict[str, dict[str, torch.Tensor]],
    summary: dict[str, Any],
    record: dict[str, Any],
    *,
    overwrite: bool = False,
    command: str = "scratch train",
) -> None:
    """Write a finished model folder in one step (staged, then moved): each of ``weights`` as
    ``<name>.safetensors``, the training log and evaluations as CSV, ``summary``, ``record`` as the folder's
    config and a manifest of the command, device, seconds and versions."""
    manifest = {
        "command": command,
        "device": trainer.device,
        "seconds": trainer.seconds,
        "versions": versions(),
        "created": utc_now(),
    }
    with staged_dir(out, kind="model", overwrite=overwrite) as stage:
        for name, state in weights.items():
            save_weights(stage / f"{name}.safetensors", state)
        pd.DataFrame(trainer.log_rows).to_csv(stage / "metrics.csv", index=False)
        pd.DataFrame(trainer.eval_rows).to_csv(stage / "evaluation.csv", index=False)
        write_json(stage / "summary.json", summary)
        write_json(stage / "manifest.json", manifest)
        write_json(stage / CONFIG, record)
