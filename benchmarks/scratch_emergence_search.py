"""Search for a CPU config where binding emerges: train config variants and print their trajectories.

Each variant is a built-in config plus overrides (JSON), trained at one fraction and seed with
``Trainer``; every ``eval_every`` steps it prints trained-on, validation-object and held-out object
accuracy (set separation over all objects) and held-out concept accuracy, and at the end one JSON
line with the numbers at the step selected on validation objects (appended to ``--record``).
``budget_s`` in the overrides stops a variant after that many seconds (its last evaluation counts).

Run from the repository root, e.g. (the README's search table)::

    .venv/bin/python benchmarks/scratch_emergence_search.py s12k '{"steps": 12000, "eval_every": 1000}'
    .venv/bin/python benchmarks/scratch_emergence_search.py k3 '{"steps": 8000, "max_objects": 3}' --threads 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bindscope.scratch.config import load_config
from bindscope.scratch.train import Trainer

SPLITS = ("train", "validation", "test")


def search(name: str, overrides: dict, base: str, fraction: float, seed: int) -> dict:
    """Train one variant, printing every evaluation; returns its numbers at the selected step."""
    budget = float(overrides.pop("budget_s", float("inf")))
    config = load_config(base, fraction=fraction, seed=seed, **overrides)
    trainer = Trainer(config)
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
            f"held-out concept acc {metrics['test_concept_acc']:.3f}",
            flush=True,
        )
        if best is None or metrics["validation_object_acc"] > best[1]["validation_object_acc"]:
            best = (trainer.step, metrics)
        if elapsed > budget:
            break
    assert best is not None
    step, metrics = best
    return {
        "name": name,
        "base": base,
        "overrides": overrides,
        "fraction": fraction,
        "seed": seed,
        "steps_done": trainer.step,
        "seconds": round(time.perf_counter() - start),
        "threads": torch.get_num_threads(),
        "selected_step": step,
        **{f"{split}_object_acc": round(metrics[f"{split}_object_acc"], 4) for split in SPLITS},
        "test_concept_acc": round(metrics["test_concept_acc"], 4),
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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    row = search(args.name, json.loads(args.overrides), args.base, args.fraction, args.seed)
    print(json.dumps(row), flush=True)
    if args.record is not None:
        with args.record.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
