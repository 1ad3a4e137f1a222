"""Training a controlled model (docs/method/09-scratch.md): resumable, seeded, selected on validation.

Each step draws a fresh batch from the fit objects (:class:`SceneSampler`), scores every scene
against the batch's concept and object queries (every concept value and every present object plus
the swaps, or the research code's sample: ``queries``), and minimises the soft cross-entropy of
both tasks with AdamW (warm-up, then linear decay to zero). Every ``eval_every`` steps the model
is scored on fixed scenes of test, validation and train objects (and, with ``batch_eval``, by the
research code's batch-query evaluation too), beside what an ideal bag of concepts and chance score
on the same scenes and queries; the weights with the best validation object accuracy of the fixed
scenes are kept (on test only with ``selection: test``, marked optimistic wherever it is reported).
Checkpoints every ``checkpoint_every`` steps make an interrupted run continue exactly: the
result equals an uninterrupted run's.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from bindscope.core.devices import check_device
from bindscope.core.errors import BindscopeError
from bindscope.core.faults import kill_point
from bindscope.core.io import check_output_dir, read_json, write_json
from bindscope.core.locks import writes
from bindscope.core.places import check_state_folder
from bindscope.core.progress import progress_bar
from bindscope.embeddings.encoders.base import count_parameters
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.embeddings.encoders.scratch.folder import CLIP_FORMAT, CONFIG, MODEL_FORMAT, WEIGHTS
from bindscope.embeddings.encoders.scratch.model import DualEncoder, build_model
from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary
from bindscope.estimators.floors import MARGIN, binding_verdict
from bindscope.scratch.checkpoint import latest_checkpoint
from bindscope.scratch.clip_train import ClipTrainer, check_same_dataset, training_dataset
from bindscope.scratch.config import warmup_steps
from bindscope.scratch.data import SceneSampler
from bindscope.scratch.evaluate import (
    ObjectRoles,
    batch_eval_samplers,
    batch_query_evaluation,
    evaluate,
    evaluation_scenes,
    object_roles,
    strict_floors,
)
from bindscope.scratch.losses import active_soft_cross_entropy, soft_cross_entropy
from bindscope.scratch.schedule import scheduled_lr
from bindscope.scratch.trainer_base import TrainerBase, write_model_folder
from bindscope.space.concepts import ConceptSpace

log = logging.getLogger(__name__)
LOG_EVERY = 25
#: How each ``selection`` is named in a summary: the metric selected on, and the label of its numbers.
SELECTED_ON = {"validation": "validation_object_acc", "test": "test_object_acc"}
OPTIMISTIC = "optimistic: the weights were selected on the test objects"


@dataclass
class TrainResult:
    """What :func:`train_model` did: ``status`` is trained, resumed or existing."""

    out: Path
    summary: dict[str, Any]
    status: str


def training_sampler(config: ScratchConfig, space: ConceptSpace, roles: ObjectRoles) -> SceneSampler:
    """The sampler of training batches: scenes of fit objects, queries as ``config.queries`` says, swaps
    among the fit objects (any object with ``heldout_negatives``, the research code's leak)."""
    return SceneSampler(
        space,
        roles.fit,
        config.max_objects,
        swap_allowed=np.arange(space.num_objects) if config.heldout_negatives else None,
        queries=config.queries,
        max_object_queries=config.max_object_queries,
        max_concept_queries=config.max_concept_queries,
    )


def learning_rate(config: ScratchConfig, step: int) -> float:
    """Linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0 (or constant)."""
    return scheduled_lr(config.lr, step, config.steps, warmup_steps(config), constant=config.schedule == "constant")


def make_optimizer(model: DualEncoder, config: ScratchConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on every parameter but ``tau``."""
    decay = [p for n, p in model.named_parameters() if n != "tau"]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": [model.tau], "weight_decay": 0.0}],
        lr=config.lr,
    )


class Trainer(TrainerBase):
    """One run's model, optimizer, sampler and evaluation sets."""

    def __init__(self, config: ScratchConfig, device: str = "cpu") -> None:
        super().__init__()
        self.config = config
        self.device = device
        self.preset = config.preset()
        self.space = self.preset.space
        self.vocab = Vocabulary.for_space(self.space, config.max_objects)
        self.roles = object_roles(config, self.space)
        self.sampler = training_sampler(config, self.space, self.roles)
        self.sets = evaluation_scenes(config, self.space, self.roles)
        self.batch_samplers = batch_eval_samplers(config, self.space, self.roles) if config.batch_eval else {}
        self.floors = strict_floors(self.space, self.sets)
        self.model: DualEncoder = build_model(config, self.vocab).to(device)
        self.optimizer = make_optimizer(self.model, config)
        self.concept_queries = self.vocab.concept_queries().to(device)

    def train_step(self) -> None:
        """One optimisation step on batch ``self.step``."""
        cfg = self.config
        batch = self.sampler.sample(cfg.batch_size, cfg.seed, self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(cfg, self.step)
        scenes = self.vocab.scene_tokens(batch.scenes).to(self.device)
        objects = self.vocab.object_queries(self.sampler.values[batch.query_ids]).to(self.device)
        concepts = self.concept_queries[batch.concept_ids.to(self.device)]
        scores = self.model.scores(scenes, torch.cat([concepts, objects]))
        n_values = len(concepts)
        task_loss = soft_cross_entropy if cfg.queries == "all" else active_soft_cross_entropy
        concept_loss = task_loss(scores[:, :n_values], batch.concept_labels.to(self.device))
        object_loss = task_loss(scores[:, n_values:], batch.object_labels.to(self.device))
        loss = cfg.concept_weight * concept_loss + object_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._window.append(torch.stack([loss, concept_loss, object_loss, self.model.logit_scale()]).detach())
        self.step += 1
        kill_point("train-step")
        if self.step % min(LOG_EVERY, cfg.eval_every) == 0 or self.step == cfg.steps:
            self._log()

    def _log(self) -> None:
        mean = self.mean_window()
        self.log_rows.append(
            {
                "step": self.step,
                "loss": mean[0],
                "concept_loss": mean[1],
                "object_loss": mean[2],
                "logit_scale": mean[3],
                "lr": learning_rate(self.config, self.step - 1),
            }
        )

    def evaluate_now(self) -> dict[str, float]:
        """Score the current weights, log the numbers and keep them if validation improved."""
        metrics = evaluate(self.model, self.space, self.sets, self.device)
        floors = dict(self.floors)
        if self.batch_samplers:
            batch, batch_floors = batch_query_evaluation(
                self.model, self.batch_samplers, self.config, self.step, self.device
            )
            metrics.update(batch)
            floors.update(batch_floors)
        for key, value in metrics.items():
            split, metric = key.split("_", 1)
            floor = floors.get(key, {})
            self.eval_rows.append(
                {
                    "step": self.step,
                    "split": split,
                    "metric": metric,
                    "value": value,
                    "bag": floor.get("bag"),
                    "chance": floor.get("chance"),
                }
            )
        self.keep(metrics.get(SELECTED_ON[self.config.selection]))
        return metrics

    def postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        """What the progress bar shows after an evaluation."""
        return {
            "test_obj": f"{metrics['test_object_acc']:.3f}",
            "bag": f"{self.floors['test_object_acc']['bag']:.3f}",
            "loss": f"{self.log_rows[-1]['loss']:.3f}",
        }

    def write(self, out: Path, *, overwrite: bool = False) -> dict:
        return write_model(self, out, overwrite=overwrite)

    def identity(self) -> dict[str, Any]:
        """What, besides its config, an unfinished run must find unchanged to resume: nothing (the config
        defines the data)."""
        return {}


@writes("out", what="model folder", kind="model")
def train_model(
    config: ScratchConfig | ClipConfig,
    out: str | Path,
    *,
    device: str = "cpu",
    overwrite: bool = False,
    progress: bool = False,
    on_step: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train (or resume, or find finished) a controlled model into the folder ``out``.

    Parameters
    ----------
    config : ScratchConfig or ClipConfig
        A token-level config, or an image-text one (which names its dataset).
    out : path
        The model folder; it appears only when training is complete.
    device : str
        Torch device (``cpu``, ``cuda``, ``cuda:1``, ``mps``).
    overwrite : bool
        Replace a finished model or an unfinished run of another config.
    progress : bool
        Show a progress bar.
    on_step : callable, optional
        Called with the step count after every step (e.g. to stop a run early in tests).
    """
    out = Path(out)
    check_device(device)
    work = check_state_folder(out.with_name(f".{out.name}.training"))
    existing = _finished(out, config, overwrite)
    if existing is not None:
        shutil.rmtree(work, ignore_errors=True)  # left by a crash after the model was written
        return TrainResult(out, existing, "existing")
    check_output_dir(out, kind="model", overwrite=overwrite)
    trainer = make_trainer(config, device)  # refuses a bad config or dataset before any folder is made
    resumed = _prepare_work(work, config, overwrite, trainer.identity())
    if resumed is not None:
        trainer.restore(resumed)
        log.info("resuming %s at step %d", out, trainer.step)
    _run(trainer, work, progress, on_step)
    summary = trainer.write(out, overwrite=overwrite)
    shutil.rmtree(work, ignore_errors=True)
    return TrainResult(out, summary, "resumed" if resumed is not None else "trained")


def make_trainer(config: ScratchConfig | ClipConfig, device: str = "cpu") -> Trainer | ClipTrainer:
    """The trainer of a config: token-level or image-text."""
    return ClipTrainer(config, device) if isinstance(config, ClipConfig) else Trainer(config, device)


def _run(trainer: Trainer | ClipTrainer, work: Path, progress: bool, on_step: Callable[[int], None] | None) -> None:
    cfg = trainer.config
    bar = progress_bar(cfg.steps, initial=trainer.step, desc="train", unit="step", enabled=progress)
    started = time.perf_counter() - trainer.seconds
    with bar:
        while trainer.step < cfg.steps:
            trainer.train_step()
            bar.update(1)
            if trainer.step % cfg.eval_every == 0 or trainer.step == cfg.steps:
                metrics = trainer.evaluate_now()
                bar.set_postfix(**trainer.postfix(metrics))
            if trainer.step % cfg.checkpoint_every == 0 and trainer.step < cfg.steps:
                trainer.seconds = time.perf_counter() - started
                trainer.save(work)
            if on_step is not None:
                on_step(trainer.step)
    trainer.seconds = time.perf_counter() - started


def _prepare_work(
    work: Path, config: ScratchConfig | ClipConfig, overwrite: bool, identity: dict[str, Any] | None = None
) -> Path | None:
    """The checkpoint to resume from (None: a fresh start); refuses a run of another config, or of other training
    data (``identity``, e.g. an image-text model's dataset hash)."""
    record = work / "run.json"
    identity = identity or {}
    if work.exists() and (overwrite or not record.is_file()):
        shutil.rmtree(work)
    if record.is_file():
        data = read_json(record, "unfinished training record")
        recorded = _normalised(data.get("config"))
        other = {k: v for k, v in identity.items() if data.get(k) != v}
        if other:
            raise BindscopeError(
                f"{work} holds an unfinished run trained on other data (its {', '.join(sorted(other))} changed); "
                "restore the data to finish it, or pass --overwrite to start over"
            )
        if recorded != config.to_dict():
            known = recorded if isinstance(recorded, dict) else {}
            changed = sorted(k for k in config.to_dict() if known.get(k) != config.to_dict()[k])
            raise BindscopeError(
                f"{work} holds an unfinished run of another config (differs in {', '.join(changed)}); "
                "run the original command to finish it, or pass --overwrite to start over"
            )
        return latest_checkpoint(work)
    work.mkdir(parents=True)
    write_json(record, {"config": config.to_dict(), **identity})
    return None


def _finished(out: Path, config: ScratchConfig | ClipConfig, overwrite: bool) -> dict | None:
    """The summary of a finished run of this config in ``out`` (None: nothing finished there)."""
    if overwrite or not (out / CONFIG).is_file() or not (out / "summary.json").is_file():
        return None
    recorded = read_json(out / CONFIG, "scratch model config")
    same = _normalised(recorded.get("config")) == config.to_dict()
    if isinstance(config, ClipConfig) and recorded.get("format") == CLIP_FORMAT and same:
        check_same_dataset(recorded, training_dataset(config))
        return read_json(out / "summary.json", "training summary")
    if isinstance(config, ScratchConfig) and recorded.get("format") == MODEL_FORMAT and same:
        if recorded.get("objects") != object_roles(config, config.preset().space).to_dict():
            raise BindscopeError(
                f"{out} was trained on another object split of this config (before 0.2, validation objects were "
                "taken out of the trained share); pass --overwrite to train it again with the exact coverage"
            )
        return read_json(out / "summary.json", "training summary")
    raise BindscopeError(f"{out} holds a model trained with another config; choose another --out or pass --overwrite")


def _normalised(recorded: Any) -> Any:
    """A recorded config with every field spelled out (records written before a field existed hold
    its default), or the record as it is when it is not a valid config."""
    kind = ClipConfig if isinstance(recorded, dict) and recorded.get("kind") == "image-text" else ScratchConfig
    try:
        return kind.model_validate(recorded).to_dict()
    except ValidationError:
        return recorded


def _at(rows: list[dict], step: int | None, column: str = "value") -> dict[str, Any]:
    return {f"{r['split']}_{r['metric']}": r.get(column) for r in rows if r["step"] == step}


def _floors_at(rows: list[dict], step: int | None) -> dict[str, dict[str, float]]:
    """``{<split>_<metric>: {"bag": ..., "chance": ...}}`` of the numbers evaluated at ``step``."""
    bag, chance = _at(rows, step, "bag"), _at(rows, step, "chance")
    return {k: {"bag": bag[k], "chance": chance[k]} for k in bag if bag[k] is not None and chance[k] is not None}


def run_summary(trainer: Trainer, selected: int | None) -> dict[str, Any]:
    """The summary of a finished run whose weights of step ``selected`` are kept."""
    cfg = trainer.config
    numbers, floors = _at(trainer.eval_rows, selected), _floors_at(trainer.eval_rows, selected)
    test_bag = floors.get("test_object_acc", {}).get("bag", float("nan"))
    binding = binding_verdict([numbers.get("test_object_acc", float("nan"))], [test_bag])
    binding["metric"] = "test_object_acc"
    binding["note"] = (
        f"one seed: no spread; a sweep over seeds asks every seed to clear the bag by {MARGIN:.0%}"
        if cfg.selection == "validation"
        else OPTIMISTIC
    )
    selected_on = SELECTED_ON[cfg.selection] if trainer.best["score"] is not None else "last step"
    return {
        "config": cfg.name,
        "fraction": cfg.fraction,
        "seed": cfg.seed,
        "objects": {k: len(v) for k, v in trainer.roles.to_dict().items()},
        "coverage": len(trainer.roles.fit) / trainer.space.num_objects,
        "selection": cfg.selection,
        "selected_step": selected,
        "selected_on": selected_on + (f" ({OPTIMISTIC})" if cfg.selection == "test" else ""),
        "selected": numbers,
        "floors": floors,
        "final": _at(trainer.eval_rows, trainer.step),
        "binding": binding,
        "not_comparable": cfg.not_comparable(),
        "chance_test_object_acc": trainer.floors["test_object_acc"]["chance"],
        "bag_of_concepts_test_object_acc": trainer.floors["test_object_acc"]["bag"],
        "steps": cfg.steps,
        "seconds": trainer.seconds,
        "steps_per_second": cfg.steps / trainer.seconds if trainer.seconds > 0 else None,
        "parameters": {"scene": count_parameters(trainer.model.scene), "query": count_parameters(trainer.model.query)},
    }


@writes("out", what="model folder", kind="model")
def write_model(trainer: Trainer, out: Path, *, overwrite: bool = False, command: str = "scratch train") -> dict:
    """Write ``trainer``'s model folder (best weights on validation, else the current ones) to ``out``;
    returns its summary. ``command`` is recorded in the manifest."""
    cfg = trainer.config
    selected = trainer.best["step"] if trainer.best_weights is not None else trainer.step
    weights = trainer.best_weights if trainer.best_weights is not None else trainer.model.state_dict()
    summary = run_summary(trainer, selected)
    record = {
        "format": MODEL_FORMAT,
        "config": cfg.to_dict(),
        "preset": trainer.preset.to_dict(),
        "vocabulary": {"sizes": list(trainer.vocab.sizes), "max_objects": trainer.vocab.max_objects},
        "objects": trainer.roles.to_dict(),
        "selected_step": selected,
    }
    final = trainer.model.state_dict()
    write_model_folder(
        trainer,
        out,
        {WEIGHTS.removesuffix(".safetensors"): weights, "final": final},
        summary,
        record,
        overwrite=overwrite,
        command=command,
    )
    return summary


def roles_of(record: dict) -> ObjectRoles:
    return ObjectRoles.from_dict(record["objects"])
