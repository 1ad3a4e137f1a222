"""Object roles (fit / validation / test objects), fixed evaluation scenes and set-separation accuracy.

The probes of a controlled model are its query encoder's L2-normalised embeddings: one per
concept value and one per object. A scene is scored by cosine against them, and set separation
(docs/method/03-probes.md) decides whether it is correct. Object accuracy is also reported on the scenes
that need binding (a bag of concepts cannot decide them), beside the share a bag of concepts gets
right (:func:`bag_of_concepts_accuracy`).

The research code's batch-query evaluation (``batch_eval``) is reported next to it: fresh batches
of 1..Kmax objects, each scene scored only against the queries sampled for its batch
(:func:`batch_query_evaluation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.embeddings.encoders.scratch.model import DualEncoder
from bindscope.estimators.floors import bag_embeddings, bag_query_embeddings, object_floors
from bindscope.estimators.probes import OBJECT, chance_per_scene, set_separation_correct, soft_targets
from bindscope.scratch.data import Batch, SceneSampler, fixed_scenes
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.splits import fraction_count, object_order

EVAL_BATCH = 4096


@dataclass(frozen=True)
class ObjectRoles:
    """Object ids: ``fit`` (trained on), ``validation`` (held out, for checkpoint selection), ``test`` (held out)."""

    fit: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    def to_dict(self) -> dict[str, list[int]]:
        return {k: [int(i) for i in getattr(self, k)] for k in ("fit", "validation", "test")}

    @classmethod
    def from_dict(cls, data: dict) -> ObjectRoles:
        return cls(*(np.asarray(data[k], dtype=np.int64) for k in ("fit", "validation", "test")))


def object_roles(config: ScratchConfig, space: ConceptSpace) -> ObjectRoles:
    """The object-level split of docs/method/02-splits.md at ``config.fraction``, with validation objects held out.

    The fit objects are the first ``floor(f*U)`` of the seeded object order (nested across fractions
    for one seed): the model trains on exactly that share (the coverage). The held-out rest is split
    in the same order: its first ``validation_fraction`` (at least one object when the fraction is
    positive) are validation objects, the others test objects. Neither is ever trained on, and no
    object is both.
    """
    u = space.num_objects
    n_fit = fraction_count(config.fraction, u)
    if n_fit < 1 or n_fit >= u:
        raise BindscopeError(
            f"fraction {config.fraction} of {u} objects leaves no "
            f"{'train' if n_fit < 1 else 'held-out'} objects; choose a fraction in "
            f"[{1 / u:.3g}, {(u - 1) / u:.3g}]"
        )
    n_held = u - n_fit
    n_val = max(1, fraction_count(config.validation_fraction, n_held)) if config.validation_fraction > 0 else 0
    if n_val >= n_held:
        raise BindscopeError(
            f"a validation fraction of {config.validation_fraction} leaves no test objects (of the {n_held} "
            f"held-out objects at fraction {config.fraction}); lower validation_fraction or the fraction"
        )
    order = object_order(u, config.seed)
    held = order[n_fit:]
    return ObjectRoles(np.sort(order[:n_fit]), np.sort(held[:n_val]), np.sort(held[n_val:]))


def evaluation_scenes(config: ScratchConfig, space: ConceptSpace, roles: ObjectRoles) -> dict[str, np.ndarray]:
    """Fixed scenes of ``eval_objects`` objects: ``test`` (test objects only), ``validation`` (fit and
    validation objects, at least one of them a validation object) and ``train`` (fit objects only)."""
    k, cap, seed = config.eval_objects, config.eval_scenes, config.seed
    sets = {"test": fixed_scenes(space, roles.test, k, cap, seed)}
    if len(roles.validation):
        seen_or_validation = np.concatenate([roles.fit, roles.validation])
        sets["validation"] = fixed_scenes(space, seen_or_validation, k, cap, seed + 1, require=roles.validation)
    sets["train"] = fixed_scenes(space, roles.fit, k, cap, seed + 2)
    return sets


@torch.no_grad()
def query_probes(model: DualEncoder, space: ConceptSpace, device: str) -> dict[str, torch.Tensor]:
    """L2-normalised query embeddings: ``{concept: [V_c, d], "object": [U, d]}``."""
    vocab = model.vocab
    concepts = _encode(model.query, vocab.concept_queries(), device)
    values = torch.from_numpy(space.all_objects().astype(np.int64))
    objects = _encode(model.query, vocab.object_queries(values), device)
    out = dict(zip(space.concepts, torch.split(concepts, list(space.sizes))))
    out[OBJECT] = objects
    return {k: torch.nn.functional.normalize(v, dim=-1) for k, v in out.items()}


@torch.no_grad()
def scene_embeddings(model: DualEncoder, values: np.ndarray, device: str) -> torch.Tensor:
    """Scene-encoder outputs ``[N, d_out]`` for scenes ``[N, K, C]``."""
    return _encode(model.scene, model.vocab.scene_tokens(torch.from_numpy(np.asarray(values, dtype=np.int64))), device)


def _encode(encoder: torch.nn.Module, tokens: torch.Tensor, device: str) -> torch.Tensor:
    parts = [encoder(tokens[i : i + EVAL_BATCH].to(device)) for i in range(0, len(tokens), EVAL_BATCH)]
    return torch.cat(parts).float()


def accuracies(z: torch.Tensor, probes: dict[str, torch.Tensor], scenes: SceneSet) -> dict[str, float]:
    """Set-separation accuracy of scene embeddings under the probes: ``object_acc``, ``concept_acc``
    (mean over concepts), ``acc_<concept>`` and, where some scene needs binding,
    ``binding_object_acc``: the object accuracy on the scenes a bag of concepts cannot decide
    (:meth:`SceneSet.binding_ambiguous`)."""
    targets = soft_targets(scenes)
    ambiguous = scenes.binding_ambiguous()
    out: dict[str, float] = {}
    for name, w in probes.items():
        ok = set_separation_correct(z @ w.T, torch.from_numpy(targets[name]).to(z.device))
        out["object_acc" if name == OBJECT else f"acc_{name}"] = float(ok.mean())
        if name == OBJECT and ambiguous.any():
            out["binding_object_acc"] = float(ok[ambiguous].mean())
    out["concept_acc"] = float(np.mean([out[f"acc_{c}"] for c in scenes.space.concepts]))
    return out


def strict_floors(space: ConceptSpace, sets: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """``{<set>_<metric>: {"bag": ..., "chance": ...}}``: an ideal bag of concepts and chance on each
    evaluation set's scenes, under every metric of :func:`accuracies` (:func:`object_floors`)."""
    out = {}
    for name, values in sets.items():
        out.update({f"{name}_{k}": v for k, v in object_floors(SceneSet(space, values)).items()})
    return out


def evaluate(model: DualEncoder, space: ConceptSpace, sets: dict[str, np.ndarray], device: str) -> dict[str, float]:
    """``{<set>_<metric>: value}`` for every evaluation set."""
    was_training = model.training
    model.eval()
    try:
        probes = query_probes(model, space, device)
        out = {}
        for name, values in sets.items():
            acc = accuracies(scene_embeddings(model, values, device), probes, SceneSet(space, values))
            out.update({f"{name}_{k}": v for k, v in acc.items()})
        return out
    finally:
        model.train(was_training)


# -- the research code's batch-query evaluation ---------------------------------------------------------
#: A batch family per split, so each split's evaluation batches are their own seeded stream.
BATCH_EVAL_STREAMS = {"test": 1, "validation": 2, "train": 3}


def batch_eval_samplers(config: ScratchConfig, space: ConceptSpace, roles: ObjectRoles) -> dict[str, SceneSampler]:
    """Samplers of the batch-query evaluation: scenes of held-out (``test``), ``validation`` or fit
    (``train``) objects, the research code's sampled queries, and swaps that may be any object (the
    research code's evaluation queries may be any object; that is no leak in an evaluation)."""
    pools = {"test": roles.test, "validation": roles.validation, "train": roles.fit}
    every = np.arange(space.num_objects)
    return {
        name: SceneSampler(
            space,
            pool,
            config.max_objects,
            swap_allowed=every,
            queries="sampled",
            max_object_queries=config.max_object_queries,
            max_concept_queries=config.max_concept_queries,
        )
        for name, pool in pools.items()
        if len(pool)
    }


def batch_correct(scores: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Set separation of the scenes with at least one positive: ``(correct of those scenes, which they are)``.

    As the research code scores a batch: a scene is correct when its lowest positive score beats its
    highest negative one (a scene without negatives is correct); scenes without a positive are left out.
    """
    active = labels.sum(1) > 0
    ok = set_separation_correct(scores[active], labels[active])
    return torch.from_numpy(np.asarray(ok, dtype=bool)), active


@torch.no_grad()
def batch_scores(model: DualEncoder, sampler: SceneSampler, batch: Batch, device: str) -> dict[str, torch.Tensor]:
    """``{"concept": [B, Qc], "object": [B, Q]}``: every scene of ``batch`` scored against its batch's queries."""
    vocab = model.vocab
    scenes = vocab.scene_tokens(batch.scenes).to(device)
    concepts = vocab.concept_queries()[batch.concept_ids].to(device)
    objects = vocab.object_queries(sampler.values[batch.query_ids]).to(device)
    scores = model.scores(scenes, torch.cat([concepts, objects])).float().cpu()
    return {"concept": scores[:, : len(concepts)], "object": scores[:, len(concepts) :]}


class BatchTally:
    """Accuracies over evaluation batches as the research code sums them: the overall accuracy is the mean
    of the per-batch accuracies (0 for a batch without a scored scene), the accuracy per object count
    pools the scenes of every batch."""

    def __init__(self) -> None:
        self.batch_means: list[float] = []
        self.by_count: dict[int, list[float]] = {}  # objects in the scene -> [correct, scenes]

    def add(self, correct: torch.Tensor, counts: torch.Tensor) -> None:
        """One batch: ``correct`` (bool, or the probability of being correct) and ``counts`` (objects per
        scene) of its scored scenes."""
        correct = correct.double()
        self.batch_means.append(float(correct.mean()) if len(correct) else 0.0)
        for k in torch.unique(counts).tolist():
            at = counts == k
            tally = self.by_count.setdefault(int(k), [0.0, 0])
            tally[0] += float(correct[at].sum())
            tally[1] += int(at.sum())

    def result(self, name: str) -> dict[str, float]:
        """``{name: mean over batches, f"{name}_n{k}": pooled accuracy of k-object scenes}``."""
        out = {name: float(np.mean(self.batch_means))}
        out.update({f"{name}_n{k}": c / n for k, (c, n) in sorted(self.by_count.items())})
        return out


def bag_batch_scores(sampler: SceneSampler, batch: Batch) -> dict[str, torch.Tensor]:
    """An ideal bag of concepts' scores of ``batch`` against its own queries (shapes of :func:`batch_scores`):
    which query values a scene holds, and how many of each query object's values it holds."""
    space = sampler.space
    bag = bag_embeddings(SceneSet(space, batch.scenes.numpy()))
    objects = bag @ bag_query_embeddings(space, sampler.values[batch.query_ids].numpy()).T
    return {"concept": torch.from_numpy(bag[:, batch.concept_ids.numpy()]), "object": torch.from_numpy(objects)}


def chance_correct(labels: torch.Tensor) -> torch.Tensor:
    """Per scene with a positive: the chance that random scores separate its m positives from the
    other queries, ``1 / C(Q, m)``."""
    active = labels[labels.sum(1) > 0] > 0
    return torch.from_numpy(chance_per_scene(active.shape[1], active.sum(1).numpy()))


def batch_query_evaluation(
    model: DualEncoder, samplers: dict[str, SceneSampler], config: ScratchConfig, step: int, device: str
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The research code's evaluation at ``step``: ``{<split>_batch_<task>_acc[_n<k>]: value}``, and the
    floors of each number on the same batches and queries: ``{key: {"bag": ..., "chance": ...}}``.

    Per split, ``batch_eval_batches`` fresh batches of ``batch_size`` scenes (a pure function of the
    seed, the step and the batch index) are scored against their own sampled queries, for the object
    task and the concept task (a scene's positives: its objects, or its concept values). An ideal bag
    of concepts is scored on the same batches, as is chance.
    """
    was_training = model.training
    model.eval()
    try:
        out: dict[str, float] = {}
        floors: dict[str, dict[str, float]] = {}
        for name, sampler in samplers.items():
            tallies = {
                (task, who): BatchTally() for task in ("object", "concept") for who in ("model", "bag", "chance")
            }
            for index in range(config.batch_eval_batches):
                batch = sampler.sample(config.batch_size, config.seed, step, BATCH_EVAL_STREAMS[name], index)
                counts = (batch.scene_ids >= 0).sum(1)
                labels = {"object": batch.object_labels, "concept": batch.concept_labels}
                bag = bag_batch_scores(sampler, batch)
                for task, scores in batch_scores(model, sampler, batch, device).items():
                    correct, active = batch_correct(scores, labels[task])
                    tallies[task, "model"].add(correct, counts[active])
                    tallies[task, "bag"].add(batch_correct(bag[task], labels[task])[0], counts[active])
                    tallies[task, "chance"].add(chance_correct(labels[task]), counts[active])
            for task in ("object", "concept"):
                metric = f"batch_{task}_acc"
                model_acc = tallies[task, "model"].result(metric)
                out.update({f"{name}_{k}": v for k, v in model_acc.items()})
                bag_acc, chance = tallies[task, "bag"].result(metric), tallies[task, "chance"].result(metric)
                floors.update({f"{name}_{k}": {"bag": bag_acc[k], "chance": chance[k]} for k in model_acc})
        return out, floors
    finally:
        model.train(was_training)
