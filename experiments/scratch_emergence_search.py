"""Search for a CPU config where binding emerges: train config variants and print their trajectories.

Each variant is a built-in config plus overrides (JSON), trained at one fraction and seed with
``Trainer``; every ``eval_every`` steps it prints trained-on, validation-object and held-out object
accuracy (set separation over all objects), held-out object accuracy on the scenes that need binding
and held-out concept accuracy, and at the end one JSON
line with the numbers at the step selected on validation objects (appended to ``--record``), how
much an object's match leaks to objects sharing one concept (:func:`concept_leakage`), and
where the held-out scenes fail at those weights (:func:`error_breakdown`; ``--save DIR`` writes the model
folder, as ``bindscope scratch train`` does, for ``scratch export`` and the analyses).
``budget_s`` in the overrides stops a variant after that many seconds (its last evaluation counts).

Run from the repository root, e.g. (the README's search table)::

    .venv/bin/python experiments/scratch_emergence_search.py s12k '{"steps": 12000, "eval_every": 1000}'
    .venv/bin/python experiments/scratch_emergence_search.py k3 '{"steps": 8000, "max_objects": 3}' --threads 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from bindscope.embeddings.encoders.scratch.folder import load_model
from bindscope.estimators.floors import bag_of_concepts_accuracy
from bindscope.scratch.config import load_config
from bindscope.scratch.evaluate import ObjectRoles, query_probes, scene_embeddings
from bindscope.scratch.train import Trainer, roles_of, write_model
from bindscope.space.concepts import ConceptSpace, SceneSet

SPLITS = ("train", "validation", "test")


def error_breakdown(trainer: Trainer) -> dict[str, float]:
    """Where the held-out scenes fail, at the weights in ``trainer.model``.

    A one-object scene of each held-out object: is its own object the top query
    (``heldout_single_acc``)? Per held-out object of a test scene: is it above every object outside the scene
    (``heldout_object_recall``)? Per failing scene: is its strongest wrong object a binding swap of
    the scene (one object's attribute with the other's noun), does it share one concept with a scene
    object, or neither; and is it a trained-on (fit), validation or held-out object?
    """
    model, space, roles = trainer.model, trainer.space, trainer.roles
    values = trainer.sets["test"]
    probes = query_probes(model, space, trainer.device)["object"]
    scores = scene_embeddings(model, values, trainer.device) @ probes.T  # [N, U]
    ids = torch.from_numpy(space.object_ids(values.reshape(-1, space.num_concepts)).reshape(len(values), -1))
    present = torch.zeros_like(scores, dtype=torch.bool).scatter_(1, ids, True)
    worst_negative = scores.masked_fill(present, float("-inf")).max(1)
    recall = scores.gather(1, ids) > worst_negative.values[:, None]
    failing = ~recall.all(1)
    singles = space.object_values(roles.test)[:, None, :]  # one-object scenes of the held-out objects
    single_top = (scene_embeddings(model, singles, trainer.device) @ probes.T).argmax(1).numpy()
    return {
        "heldout_single_acc": round(float(np.mean(single_top == roles.test)), 4),
        "heldout_object_recall": round(float(recall.float().mean()), 4),
        **_wrong_kinds(space, roles, values[failing.numpy()], worst_negative.indices[failing].numpy()),
        **_failure_by_trained_swaps(space, roles, values, failing.numpy()),
    }


@torch.no_grad()
def concept_leakage(trainer: Trainer) -> dict[str, float]:
    """How much of an object's match leaks to the objects that share one concept with it, by role.

    Per object o, a one-object scene of o is compared (cosine) with the query of every object o' that
    shares exactly one concept value with o, relative to its own query: ``cos(z_o, w_o') / cos(z_o,
    w_o)``. ``leak_fit`` averages it over trained-on o and o', ``leak_test`` over held-out o and o'.
    In a two-object scene a binding swap collects one such share from each object while a true object
    gets its own match, so a share near 0.5 lets the swaps win. ``additivity``: the mean cosine of a
    two-object scene with the normalised sum of its two one-object scenes.
    """
    model, space, roles = trainer.model, trainer.space, trainer.roles
    values = space.object_values(np.arange(space.num_objects))
    probes = query_probes(model, space, trainer.device)["object"]
    singles = torch.nn.functional.normalize(scene_embeddings(model, values[:, None, :], trainer.device), dim=-1)
    ratio = (singles @ probes.T).numpy()
    ratio /= np.diag(ratio)[:, None]
    one_shared = (values[:, None, :] == values[None, :, :]).sum(-1) == 1
    out = {}
    for name in ("fit", "test"):
        ids = getattr(roles, name)
        out[f"leak_{name}"] = round(float(ratio[np.ix_(ids, ids)][one_shared[np.ix_(ids, ids)]].mean()), 3)
    pairs = trainer.sets["test"]
    if pairs.shape[1] == 2:
        both = scene_embeddings(model, pairs, trainer.device)
        ids = space.object_ids(pairs.reshape(-1, space.num_concepts)).reshape(len(pairs), 2)
        summed = singles[ids[:, 0]] + singles[ids[:, 1]]
        out["additivity"] = round(float(torch.nn.functional.cosine_similarity(both, summed).mean()), 3)
    return out


def _failure_by_trained_swaps(
    space: ConceptSpace, roles: ObjectRoles, scenes: np.ndarray, failing: np.ndarray
) -> dict[str, float]:
    """Failure rate of the two-object test scenes with two binding swaps (no shared value), by how many
    of the swaps are trained-on (fit) objects: 0, 1 or 2 (``fail_rate_fit_swaps_<k>``, with ``n_...``)."""
    if scenes.shape[1] != 2 or space.num_concepts != 2:
        return {}
    (a1, n1), (a2, n2) = scenes[:, 0].T, scenes[:, 1].T
    distinct = (a1 != a2) & (n1 != n2)
    swaps = space.object_ids(np.stack([np.stack([a1, n2], 1), np.stack([a2, n1], 1)], 1).reshape(-1, 2))
    trained = np.isin(swaps, roles.fit).reshape(-1, 2).sum(1)
    out: dict[str, float] = {}
    for k in (0, 1, 2):
        at = distinct & (trained == k)
        out[f"n_fit_swaps_{k}"] = int(at.sum())
        out[f"fail_rate_fit_swaps_{k}"] = round(float(failing[at].mean()), 3) if at.any() else float("nan")
    return out


def _wrong_kinds(space: ConceptSpace, roles: ObjectRoles, scenes: np.ndarray, wrong: np.ndarray) -> dict[str, float]:
    """Shares of the failing scenes by the kind and role of their strongest wrong object."""
    n = max(len(wrong), 1)
    wrong_values = space.object_values(wrong)  # [F, C]
    shares = (scenes == wrong_values[:, None, :]).any(1)  # [F, C]: a value the scene holds, per concept
    swap = shares.all(1)
    role = {name: np.isin(wrong, getattr(roles, name)) for name in ("fit", "validation", "test")}
    return {
        "failing_scenes": int(len(wrong)),
        "wrong_is_swap": round(float(swap.sum()) / n, 3),
        "wrong_shares_one_concept": round(float((shares.any(1) & ~swap).sum()) / n, 3),
        **{f"wrong_is_{name}_object": round(float(mask.sum()) / n, 3) for name, mask in role.items()},
    }


def search(
    name: str,
    overrides: dict,
    base: str,
    fraction: float,
    seed: int,
    save: Path | None = None,
    start_from: Path | None = None,
) -> dict:
    """Train one variant, printing every evaluation; returns its numbers at the selected step.

    ``start_from``: a model folder whose selected weights the run starts from (with a fresh
    optimizer and schedule); it must have the variant's architecture and object roles.
    """
    budget = float(overrides.pop("budget_s", float("inf")))
    config = load_config(base, fraction=fraction, seed=seed, **overrides)
    trainer = Trainer(config)
    if start_from is not None:
        model, record = load_model(start_from)
        if roles_of(record).to_dict() != trainer.roles.to_dict():
            raise SystemExit(f"{start_from} was trained on other object roles; give its --fraction and --seed")
        trainer.model.load_state_dict(model.state_dict())
    start = time.perf_counter()
    best: tuple[int, dict] | None = None
    while trainer.step < config.steps:
        trainer.train_step()
        if trainer.step % config.eval_every and trainer.step != config.steps:
            continue
        metrics = trainer.evaluate_now()
        elapsed = time.perf_counter() - start
        accs = " ".join(f"{split} {metrics[f'{split}_object_acc']:.3f}" for split in SPLITS)
        print(
            f"{name} step {trainer.step} {elapsed:.0f}s loss {trainer.log_rows[-1]['loss']:.3f} object acc: {accs}; "
            f"held-out needing binding {metrics.get('test_binding_object_acc', float('nan')):.3f}, "
            f"concept acc {metrics['test_concept_acc']:.3f}",
            flush=True,
        )
        if best is None or metrics["validation_object_acc"] > best[1]["validation_object_acc"]:
            best = (trainer.step, metrics)
        if elapsed > budget:
            break
    assert best is not None
    step, metrics = best
    assert trainer.best_weights is not None
    trainer.seconds = time.perf_counter() - start
    if save is not None:
        write_model(trainer, save, overwrite=True, command="experiments/scratch_emergence_search.py")
    trainer.model.load_state_dict(trainer.best_weights)
    return {
        "name": name,
        "base": base,
        "overrides": overrides,
        "fraction": fraction,
        "seed": seed,
        "start_from": None if start_from is None else str(start_from),
        "steps_done": trainer.step,
        "seconds": round(time.perf_counter() - start),
        "threads": torch.get_num_threads(),
        "selected_step": step,
        **{f"{split}_object_acc": round(metrics[f"{split}_object_acc"], 4) for split in SPLITS},
        "test_concept_acc": round(metrics["test_concept_acc"], 4),
        "test_binding_object_acc": round(metrics.get("test_binding_object_acc", float("nan")), 4),
        "bag_of_concepts_acc": round(bag_of_concepts_accuracy(SceneSet(trainer.space, trainer.sets["test"])), 4),
        **error_breakdown(trainer),
        **concept_leakage(trainer),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("overrides", help='config overrides as JSON, e.g. \'{"steps": 8000, "lr": 0.002}\'')
    parser.add_argument("--base", default="cpu-small")
    parser.add_argument("--fraction", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--record", type=Path, default=None, help="append the result's JSON line to this file")
    parser.add_argument(
        "--save", type=Path, default=None, help="write a model folder (as `scratch train` does) to this path"
    )
    parser.add_argument(
        "--start-from", type=Path, default=None, help="start from a model folder's selected weights (fresh optimizer)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    overrides = json.loads(args.overrides)
    row = search(args.name, overrides, args.base, args.fraction, args.seed, args.save, args.start_from)
    print(json.dumps(row), flush=True)
    if args.record is not None:
        with args.record.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
