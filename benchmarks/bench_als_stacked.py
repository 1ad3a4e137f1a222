"""Benchmark the exact protocol's ALS on a whole stack at once against the same models fitted one at a time.

What is timed
-------------
ours
    :func:`bindscope.analyses.complexity.fitters.als.fit_stack_exact` on a stack of 27 models (9 fractions x 3
    seeds): every model, and while the starts run every model's starts, in batched tensor ops with a
    leading model axis; a model that stops leaves the batch.
baseline
    the same 27 models one at a time, a loop of ``fit_stack_exact`` on stacks of one (the loop over
    models that ``fit_stack_exact`` ran before the stacked ALS).

Both under the ``cpu`` budget's solver (``Solver(sweeps=800, starts=4, start_sweeps=5)``) and torch's
threads (``--threads``), which every fit lowers to one for small work
(:func:`~bindscope.core.threads.threads_for`): here the stack of 27 runs on all of them, a single
model on one. The two must fit every model alike: printed with the times are whether the sweep
counts agree and the largest relative difference of the selected validation MSEs.

Data: a 10 x 10 concept space, every 2-object scene (10,000), planted ``mult_within_object``
embeddings (noise 0.05) of ``--widths`` dimensions, fitted at a table width equal to the embedding
width. Model (fraction f, seed s) draws a share f of the objects (f = 0.1 .. 0.9); its scenes are
those whose two objects are both drawn, a fifth of them (at most 256) held out for validation and
the rest (at most 1,024, the ``cpu`` budget's cap when
this was measured; it is 512 now) fitted on. Printed per family and width: seconds
ours, seconds baseline, and the ratio baseline / ours.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_als_stacked.py [--families mult,sum_mult] [--widths 32,100] [--threads 1] \\
        [--csv PATH]

The figures go to ``benchmarks/results/bench_als_stacked.csv`` (or ``--csv``): one row per width and family.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity.families import Family, Layout
from bindscope.analyses.complexity.fitters.als import Solver, fit_stack_exact
from bindscope.analyses.complexity.fitters.stack import SceneIndex
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FRACTIONS = tuple(round(0.1 * i, 1) for i in range(1, 10))
SEEDS = (0, 1, 2)
SOLVER = Solver(sweeps=800, starts=4, start_sweeps=5)  # the cpu budget's
#: Per model: training scenes, validation scenes, seed.
Plans = tuple[list[np.ndarray], list[np.ndarray], list[int]]


def scenes_of_space(size: int) -> SceneSet:
    """Every 2-object scene of a ``size`` x ``size`` concept space."""
    space = ConceptSpace.from_dict({"a": [f"a{i}" for i in range(size)], "b": [f"b{i}" for i in range(size)]})
    every = SceneSet.enumerate(space, 2)
    return every.subset(np.flatnonzero(every.num_objects() == 2))


def plans(scenes: SceneSet) -> Plans:
    """Per model (fraction x seed): training scenes, validation scenes and seed."""
    ids = scenes.object_ids()
    train, val, seeds = [], [], []
    for f in FRACTIONS:
        for s in SEEDS:
            rng = np.random.default_rng([s, int(f * 10)])
            drawn = rng.choice(scenes.space.num_objects, round(f * scenes.space.num_objects), replace=False)
            pool = rng.permutation(np.flatnonzero(np.isin(ids, drawn).all(1)))
            held = min(len(pool) // 5, 256)
            val.append(pool[:held])
            train.append(pool[held : held + 1024])
            seeds.append(s)
    return train, val, seeds


def timed(
    family: Family, layout: Layout, data: SceneIndex, plans: Plans, width: int, stacked: bool
) -> tuple[float, np.ndarray, np.ndarray]:
    """Seconds, sweeps run and selected validation MSEs of the stack, fitted at once or one model at a time."""
    train, val, seeds = plans
    start = time.perf_counter()
    if stacked:
        fits = [fit_stack_exact(family, layout, data, train, val, seeds, SOLVER, width=width)]
    else:
        fits = [fit_stack_exact(family, layout, data, [t], [v], [s], SOLVER, width=width) for t, v, s in zip(*plans)]
    seconds = time.perf_counter() - start
    return seconds, np.concatenate([f.epochs_run for f in fits]), np.concatenate([f.best_val_mse for f in fits])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", default="mult,mult_within_object,sum_mult")
    parser.add_argument("--widths", default="32,100", help="embedding widths (the table width follows)")
    parser.add_argument("--space", type=int, default=10, help="values per concept")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    scenes = scenes_of_space(args.space)
    layout = Layout.of(scenes)
    parts = plans(scenes)
    sizes = [len(t) for t in parts[0]]
    print(f"{len(scenes)} scenes, {len(sizes)} models fitted on {min(sizes)}-{max(sizes)} scenes; {SOLVER}")
    print(f"torch threads: {torch.get_num_threads()}")
    measured = []
    for width in map(int, args.widths.split(",")):
        y = planted_embeddings(scenes, "mult_within_object", dim=width, noise=0.05, seed=0)
        data = SceneIndex.of(scenes, y)
        for name in args.families.split(","):
            family = Family(name)
            ours, sweeps, mse = timed(family, layout, data, parts, width, stacked=True)
            base, base_sweeps, base_mse = timed(family, layout, data, parts, width, stacked=False)
            same = np.array_equal(sweeps, base_sweeps)
            diff = float(np.max(np.abs(mse - base_mse) / np.abs(base_mse)))
            print(
                f"width {width:3d} {name:20s} ours {ours:7.1f} s  baseline {base:7.1f} s  ratio {base / ours:5.2f}x  "
                f"(sweeps {int(sweeps.sum())}, same sweeps {same}, max rel MSE diff {diff:.1e})"
            )
            measured.append(
                Measurement(
                    f"{name}, width {width}, {len(sizes)} models on a {args.space} x {args.space} space "
                    f"({len(scenes):,} scenes), {torch.get_num_threads()} torch threads",
                    f"fit_stack_exact on the stack of {len(sizes)} models at once",
                    "fit_stack_exact one model at a time",
                    "s",
                    ours,
                    base,
                    checks=f"same sweep counts: {same}; selected validation MSE within {diff:.1e} (relative)",
                )
            )
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
