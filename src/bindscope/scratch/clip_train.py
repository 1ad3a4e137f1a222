"""Training a CLIP in miniature on a dataset's rendered scenes (docs/method/09-scratch.md): seeded and resumable.

Each step draws a batch of training scenes (:class:`~bindscope.scratch.clip_data.ClipBatches`),
embeds their images and captions, adds the captions of their hard negatives as extra negatives of
the images, and minimises the symmetric contrastive loss (image -> caption over the batch's captions
and hard negatives, caption -> image over the batch's images) with a learned temperature, AdamW,
linear warm-up and linear decay. Every ``eval_every`` steps every scene of the dataset is embedded
and read on the trained-on and the held-out scenes: concept-level and strict top-1 retrieval
(image -> caption, among the part's scenes) and the swap tests of docs/method/07-crossmodal.md,
beside chance and an ideal bag of concepts. The weights after the last step are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from bindscope.analyses.crossmodal.retrieval import bag_strict_ceiling, retrieval, retrieval_chance
from bindscope.analyses.crossmodal.scoring import FAMILY_METRICS
from bindscope.analyses.crossmodal.swaps import mean_and_count, swap_cases, swap_scores, swap_wins
from bindscope.core.errors import BindscopeError
from bindscope.core.faults import kill_point
from bindscope.core.locks import writes
from bindscope.data.datasets import Dataset, load_dataset, single_object_captions
from bindscope.embeddings.encoders.base import count_parameters
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.embeddings.encoders.scratch.clip_model import ClipModel, Words, build_clip, image_tensor
from bindscope.embeddings.encoders.scratch.folder import CLIP_FORMAT, WEIGHTS
from bindscope.scratch.clip_data import ClipBatches, ClipSplit, clip_split
from bindscope.scratch.config import warmup_steps
from bindscope.scratch.schedule import scheduled_lr
from bindscope.scratch.trainer_base import TrainerBase, write_model_folder
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of

#: The swap tests' names (:func:`~bindscope.analyses.crossmodal.swaps.swap_wins`) and their metric names here.
SWAP_KEYS = {
    "attribute": "swap_attribute",
    "noun": "swap_noun",
    "relation": "swap_relation",
    "count": "swap_count",
    "order_sensitivity": "order_sensitivity",
}
EMBED_BATCH = 512


def training_dataset(config: ClipConfig) -> Dataset:
    """The dataset a config trains on, checked: images and captions of 2-object scenes, a noun concept."""
    if config.dataset is None:
        raise BindscopeError(
            f"image-text config {config.name} names no dataset; give --dataset DATASET (a folder with rendered images, "
            "e.g. from `bindscope dataset build clevr2d --size 64`)"
        )
    ds = load_dataset(config.dataset)
    k = ds.scenes.max_objects
    if k != 2:
        raise BindscopeError(
            f"dataset {ds.root} has up to {k} object{'s' if k != 1 else ''} per scene; an image-text model is "
            "trained on scenes of two objects, whose binding swaps it is read on (objects_per_scene: 2)"
        )
    if ds.preset.config.noun is None or ds.space.num_concepts < 2:
        raise BindscopeError(
            f"dataset {ds.root} names no noun concept besides its attributes; its swaps are undefined (set `noun:` in "
            "the preset)"
        )
    if "image" not in ds.manifest.get("modalities", ()) or not all(ds.images):
        raise BindscopeError(
            f"dataset {ds.root} has no rendered images; build it with images (`bindscope dataset build PRESET --out "
            f"{ds.root}`, a preset with a renderer) before training an image-text model on it"
        )
    return ds


def check_same_dataset(recorded: dict[str, Any], ds: Dataset) -> None:
    """Refuse a finished model whose dataset's content changed since it was trained."""
    if recorded.get("dataset_hash") != ds.hash:
        raise BindscopeError(
            f"the model was trained on another content of {ds.root} (hash "
            f"{str(recorded.get('dataset_hash'))[:12]}, now {ds.hash[:12]}); choose another --out or pass --overwrite "
            "to train it again"
        )


def dataset_words(ds: Dataset) -> Words:
    """The words of every caption of the dataset, its single-object captions included."""
    return Words.of([*ds.captions, *single_object_captions(ds)])


class ClipTrainer(TrainerBase):
    """One image-text run: the dataset's images and captions as tensors, its split, batches and model."""

    def __init__(self, config: ClipConfig, device: str = "cpu") -> None:
        super().__init__()
        self.config = config
        self.device = device
        self.dataset = training_dataset(config)
        scenes = self.dataset.scenes
        self.noun = str(self.dataset.preset.config.noun)
        self.words = dataset_words(self.dataset)
        self.images = image_tensor([self.dataset.root / p for p in self.dataset.images], config.image_size).to(device)
        self.tokens = self.words.tokens(list(self.dataset.captions)).to(device)
        self.split = clip_split(config, scenes)
        self.batches = ClipBatches(config, scenes, self.noun, self.split)
        self.cases = swap_cases(scenes, self.noun)
        self.floors = part_floors(scenes, self.split)
        self.model: ClipModel = build_clip(config, self.words).to(device)
        decay = [p for n, p in self.model.named_parameters() if n != "tau"]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": [self.model.tau], "weight_decay": 0.0}],
            lr=config.lr,
        )

    def learning_rate(self, step: int) -> float:
        cfg = self.config
        return scheduled_lr(cfg.lr, step, cfg.steps, warmup_steps(cfg))

    def train_step(self) -> None:
        """One step on batch ``self.step``."""
        rows, hard = self.batches.draw(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate(self.step)
        loss = contrastive_loss(self.model, self.images[rows], self.tokens[torch.cat([rows, hard])])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._window.append(torch.stack([loss.detach(), self.model.logit_scale().detach(), loss.new_tensor(len(hard))]))
        self.step += 1
        kill_point("train-step")
        if self.step % min(25, self.config.eval_every) == 0 or self.step == self.config.steps:
            loss_mean, scale, hard_mean = self.mean_window()
            self.log_rows.append(
                {
                    "step": self.step,
                    "loss": loss_mean,
                    "logit_scale": scale,
                    "hard_negatives": hard_mean,
                    "lr": self.learning_rate(self.step - 1),
                }
            )

    def embed_all(self) -> tuple[np.ndarray, np.ndarray]:
        """Every scene's image and caption embedding with the current weights."""
        self.model.eval()
        with torch.no_grad():
            image = torch.cat([self.model.embed_images(x) for x in self.images.split(EMBED_BATCH)])
            text = torch.cat([self.model.embed_texts(t) for t in self.tokens.split(EMBED_BATCH)])
        self.model.train()
        return image.cpu().numpy(), text.cpu().numpy()

    def evaluate_now(self) -> dict[str, float]:
        """Read the current weights on the trained-on and held-out scenes and log every number."""
        image, text = self.embed_all()
        metrics = clip_metrics(image, text, self.dataset.scenes, self.split, self.cases)
        for key, (value, cases) in metrics.items():
            part, metric = key.split("_", 1)
            floor = self.floors[part][metric]
            self.eval_rows.append(
                {"step": self.step, "split": part, "metric": metric, "value": value, "cases": cases, **floor}
            )
        return {k: v for k, (v, _) in metrics.items()}  # the last step's weights are the model: none are kept

    def postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        return {
            "concept@1": f"{metrics['train_concept_at_1']:.3f}",
            "swap": f"{metrics['heldout_swap_attribute']:.3f}",
            "loss": f"{self.log_rows[-1]['loss']:.3f}" if self.log_rows else "",
        }

    def write(self, out: Path, *, overwrite: bool = False) -> dict:
        return write_clip_model(self, out, overwrite=overwrite)

    def identity(self) -> dict[str, Any]:
        """What, besides its config, an unfinished run must find unchanged to resume: the dataset's content."""
        return {"dataset_hash": self.dataset.hash}


def contrastive_loss(model: ClipModel, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The symmetric InfoNCE loss of ``B`` images against their ``B`` captions, with ``tokens[B:]`` as extra
    (hard) negative captions of every image."""
    b = len(images)
    z = model.embed_images(images)
    w = model.embed_texts(tokens)
    logits = model.logit_scale() * z @ w.T  # [B, B + H]
    target = torch.arange(b, device=images.device)
    image_to_text = torch.nn.functional.cross_entropy(logits, target)
    text_to_image = torch.nn.functional.cross_entropy(logits[:, :b].T, target)
    return (image_to_text + text_to_image) / 2


def clip_metrics(
    image: np.ndarray, text: np.ndarray, scenes: SceneSet, split: ClipSplit, cases: Any
) -> dict[str, tuple[float, int]]:
    """``{<part>_<metric>: (value, cases)}`` for the trained-on and held-out scenes.

    Retrieval ranks the part's captions for each of its images; each swap test compares an image of the
    part with its caption and its swap's caption, wherever that scene lies.
    """
    scores = swap_scores(image, text, cases)
    out: dict[str, tuple[float, int]] = {}
    for part, rows in split.parts().items():
        two = np.isin(cases.scene, rows)
        wins = swap_wins({k: v[two] for k, v in scores.items()})
        ranked = retrieval(image[rows], text[rows], scenes.subset(rows))["image_to_text"]
        out[f"{part}_concept_at_1"] = (ranked["concept@1"], len(rows))
        out[f"{part}_strict_at_1"] = (ranked["strict@1"], len(rows))
        for name, key in SWAP_KEYS.items():
            if name in wins:  # a family swap only on its family's space
                out[f"{part}_{key}"] = mean_and_count(wins[name])
    return out


def part_floors(scenes: SceneSet, split: ClipSplit) -> dict[str, dict[str, dict[str, float]]]:
    """Per part and metric, what chance and an ideal bag of concepts score on the same scenes."""
    out = {}
    for part, rows in split.parts().items():
        sub = scenes.subset(rows)
        chance = retrieval_chance(sub)
        swap = {"chance": 0.5, "bag": 0.5}
        out[part] = {
            "concept_at_1": {"chance": chance["concept@1"], "bag": 1.0},
            "strict_at_1": {"chance": chance["strict@1"], "bag": bag_strict_ceiling(sub)},
            "swap_attribute": swap,
            "swap_noun": swap,
            "order_sensitivity": swap,
        }
        family = family_of(scenes.space)
        if family in FAMILY_METRICS:  # a family swap keeps the bag too
            out[part][FAMILY_METRICS[family]] = swap
    return out


def clip_summary(trainer: ClipTrainer) -> dict[str, Any]:
    """The summary of a finished image-text run (its last step's numbers beside their floors)."""
    cfg = trainer.config
    last = [r for r in trainer.eval_rows if r["step"] == trainer.step]
    return {
        "config": cfg.name,
        "kind": "image-text",
        "dataset": str(trainer.dataset.root),
        "towers": cfg.towers,
        "batches": cfg.batches,
        "hard_negatives": cfg.hard_negatives,
        "hard_negatives_available": trainer.batches.available,
        "split": cfg.split,
        "fraction": cfg.fraction,
        "coverage": trainer.split.coverage,
        "seed": cfg.seed,
        "scenes": {"train": len(trainer.split.train), "heldout": len(trainer.split.heldout)},
        "objects_trained_on": len(trainer.split.objects),
        "selected_step": trainer.step,
        "selected": {f"{r['split']}_{r['metric']}": r["value"] for r in last},
        "cases": {f"{r['split']}_{r['metric']}": r["cases"] for r in last},
        "floors": {f"{r['split']}_{r['metric']}": {"bag": r["bag"], "chance": r["chance"]} for r in last},
        "steps": cfg.steps,
        "seconds": trainer.seconds,
        "steps_per_second": cfg.steps / trainer.seconds if trainer.seconds > 0 else None,
        "parameters": {"image": count_parameters(trainer.model.image), "text": count_parameters(trainer.model.text)},
    }


@writes("out", what="model folder", kind="model")
def write_clip_model(trainer: ClipTrainer, out: Path, *, overwrite: bool = False) -> dict:
    """Write ``trainer``'s model folder (its last weights) to ``out``; returns its summary."""
    summary = clip_summary(trainer)
    record = {
        "format": CLIP_FORMAT,
        "config": trainer.config.to_dict(),
        "words": trainer.words.to_dict(),
        "dataset_hash": trainer.dataset.hash,
        "split": trainer.split.to_dict(),
        "selected_step": trainer.step,
    }
    weights = {WEIGHTS.removesuffix(".safetensors"): trainer.model.state_dict()}
    write_model_folder(trainer, out, weights, summary, record, overwrite=overwrite)
    return summary
