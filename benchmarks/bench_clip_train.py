"""Benchmark the training of a CLIP in miniature (``bindscope scratch train -c clip-tiny``) and its sweep.

What is timed
-------------
training step, ours
    ``ClipTrainer.train_step`` on ``clevr2d`` rendered at 64 px and read at 32 px (pooled towers, swap-free
    batches of 64 with attribute hard negatives): drawing the batch, the learning-rate schedule, the symmetric
    contrastive loss, AdamW, the loss window. Steps per second, best of ``--repeats`` rounds of ``--steps``.
training step, baseline
    A plain torch loop of the same towers (a fresh copy of the same initial weights), the same optimiser and the
    same batches and hard negatives, drawn before the clock starts: index the image and caption tensors, the
    loss, ``backward``, ``step``. The target is ours >= 0.9 x the plain loop (the bookkeeping costs under 10 %).
    The first losses of both are printed: the maths is the same.
whole config
    The wall time of ``train_model`` on the built-in ``clip-tiny`` config (600 steps, three evaluations);
    target: under 60 s on 2 idle cores.
sweep
    The wall time of ``bindscope scratch sweep -c clip-tiny`` over ``--fractions`` x ``--seeds`` (one worker),
    against the sum of its runs' training seconds (the sweep's overhead: evaluation, summaries, the figure).

Run from the repository root::

    .venv/bin/python benchmarks/bench_clip_train.py [--steps 100] [--repeats 3] [--fractions 0.5,0.8] \\
        [--seeds 0,1] [--csv PATH]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.data.datasets import build_dataset
from bindscope.data.presets import load_preset, with_image_settings
from bindscope.scratch.clip_train import ClipTrainer, contrastive_loss
from bindscope.scratch.config import load_config
from bindscope.scratch.sweep import SweepSettings, sweep
from bindscope.scratch.train import train_model


def ours_rate(trainer: ClipTrainer, steps: int, repeats: int) -> float:
    """Steps per second of ``trainer.train_step`` (best round)."""
    for _ in range(5):
        trainer.train_step()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            trainer.train_step()
        rates.append(steps / (time.perf_counter() - start))
    return max(rates)


def plain_rate(trainer: ClipTrainer, steps: int, repeats: int) -> tuple[float, float]:
    """Steps per second of a plain torch loop of the same towers and batches, and its first loss."""
    model = copy.deepcopy(trainer.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=trainer.config.lr, weight_decay=trainer.config.weight_decay)
    batches = [trainer.batches.draw(step) for step in range(5 + steps * repeats)]
    first = None
    rates = []
    for round_ in range(-1, repeats):
        todo = batches[:5] if round_ < 0 else batches[5 + round_ * steps : 5 + (round_ + 1) * steps]
        start = time.perf_counter()
        for rows, hard in todo:
            loss = contrastive_loss(model, trainer.images[rows], trainer.tokens[torch.cat([rows, hard])])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            first = float(loss.detach()) if first is None else first
        if round_ >= 0:
            rates.append(steps / (time.perf_counter() - start))
    return max(rates), float(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fractions", default="0.5,0.8")
    parser.add_argument("--seeds", default="0,1")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-clip-"))
    dataset = build_dataset(with_image_settings(load_preset("clevr2d"), size="64"), work / "clevr2d", workers=1)
    config = load_config("clip-tiny", dataset=str(dataset.root), hard_negatives="attribute")
    measured = []

    trainer = ClipTrainer(config)
    rows, hard = trainer.batches.draw(0)
    with torch.no_grad():
        first_ours = float(
            contrastive_loss(trainer.model, trainer.images[rows], trainer.tokens[torch.cat([rows, hard])])
        )
    base, first_plain = plain_rate(trainer, args.steps, args.repeats)
    ours = ours_rate(trainer, args.steps, args.repeats)
    print(f"training step: ours {ours:.1f} steps/s, plain torch loop {base:.1f} steps/s, ratio {ours / base:.2f}")
    measured.append(
        Measurement(
            f"clip-tiny step, clevr2d 64 px read at {config.image_size} px, batch {config.batch_size} + hard negatives",
            "ClipTrainer.train_step",
            "plain torch loop, same towers, optimiser and batches",
            "steps/s",
            ours,
            base,
            ">= 0.9x",
            f"first loss {first_ours:.6f} vs {first_plain:.6f}",
        )
    )

    start = time.perf_counter()
    result = train_model(load_config("clip-tiny", dataset=str(dataset.root)), work / "model")
    whole = time.perf_counter() - start
    print(f"whole clip-tiny config: {whole:.1f} s ({result.summary['steps_per_second']:.1f} steps/s)")
    measured.append(
        Measurement(
            "clip-tiny, 600 steps with 3 evaluations",
            "train_model",
            "the 60 s target",
            "s",
            whole,
            60.0,
            "<= 60 s",
            f"held-out attribute swap {result.summary['selected']['heldout_swap_attribute']:.3f}",
        )
    )

    fractions = tuple(float(f) for f in args.fractions.split(","))
    seeds = tuple(int(s) for s in args.seeds.split(","))
    start = time.perf_counter()
    summary = sweep(
        load_config("clip-tiny", dataset=str(dataset.root)),
        SweepSettings(fractions=fractions, seeds=seeds),
        work / "sweep",
    )
    wall = time.perf_counter() - start
    runs = sum(entry["seconds"] * len(seeds) for entry in summary["per_fraction"].values())
    print(f"sweep {len(fractions)} fractions x {len(seeds)} seeds: {wall:.1f} s, its runs' training {runs:.1f} s")
    measured.append(
        Measurement(
            f"clip-tiny sweep, {len(fractions)} fractions x {len(seeds)} seeds",
            "scratch sweep (one worker)",
            "the sum of its runs' training seconds",
            "s",
            wall,
            runs,
            "",
            "",
        )
    )
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
