"""Benchmark a complexity sweep on Ray (2 CPUs) against local sequential execution, and project scale-out.

What is timed
-------------
local (baseline)
    ``complexity_sweep`` with the default executor: every unit (a stack of (fraction, seed) models of one
    family) in this process, one after another, torch on every core.
ray
    The same call on a Ray instance started here with ``--cpus`` CPUs: one task per unit, one CPU each.
    Ray's start-up (``ray.init`` until the instance takes tasks) is timed apart, and so is the overhead
    of one task (``--overhead-tasks`` empty units through the same executor, wall time per task).

The two tables must agree (checked: the same rows; values within 1e-4, thread counts differ).

Projection
----------
A simple model of a sweep on N workers: ``startup + waves x unit + units x overhead / N`` with
``waves = ceil(units / N)`` and ``unit`` the mean unit cost. The paper's budget (full-batch Adam for
every family, 4,000 epochs, no early stop) is projected from a short run of the same protocol
here (``--epochs``): a unit's cost scales with epochs, with training scenes and with width (the
cost of full-batch Adam on a table family), so the paper unit is ``measured x (4000 / epochs) x
(scenes_paper / scenes_here) x (dim_paper / dim_here) / gpu_speedup``. ``gpu_speedup`` (default 20:
one GPU against one CPU core on these small dense ops) is an assumption, not a measurement; the
output says so. The paper sweep: ``--paper-models`` embedding sets (models x modalities), each 5
families x 9 fractions x 3 seeds, one unit per (family, fraction, seed) model on a GPU worker.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_ray.py [--cpus 2] [--values 12] [--dim 64] [--epochs 200] [--csv PATH]

The measured figures (not the projection) go to ``benchmarks/results/bench_ray.csv`` (or ``--csv``): the sweep
on Ray against local sequential execution.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity import Budget, ComplexitySettings, complexity_sweep
from bindscope.core.executors import RayExecutor, Resources, Unit, executing_on
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAMILIES = ("additive", "mult", "mult_within_object", "sum_mult")
PAPER_EPOCHS = 4000


def args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--values", type=int, default=12, help="values per concept (2 concepts, 2 objects per scene)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--epochs", type=int, default=200, help="Adam epochs of the measured paper-protocol sweep")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--fractions", default="0.2,0.4,0.6,0.8")
    p.add_argument("--overhead-tasks", type=int, default=200)
    p.add_argument("--paper-models", type=int, default=12, help="embedding sets of the paper sweep")
    p.add_argument("--paper-scenes", type=int, default=160_000)
    p.add_argument("--paper-dim", type=int, default=768)
    p.add_argument("--gpu-speedup", type=float, default=20.0, help="assumed: one GPU against one CPU core")
    p.add_argument("--workers", default="1,8,32,64", help="GPU workers to project for")
    add_csv_argument(p, __file__)
    return p.parse_args()


def inputs(values: int, dim: int) -> tuple[np.ndarray, SceneSet, ProbeSet]:
    space = ConceptSpace.from_dict({"attr": [f"a{i}" for i in range(values)], "noun": [f"n{i}" for i in range(values)]})
    scenes = SceneSet.enumerate(space, 2)
    y = planted_embeddings(scenes, "mult_within_object", dim=dim, noise=0.05, seed=0)
    rows = np.random.default_rng(0).choice(len(scenes), min(len(scenes), 6000), replace=False)
    probes = ProbeSet("lbfgs").fit(y[rows], {k: v[rows] for k, v in soft_targets(scenes).items()})
    return y, scenes, probes


def timed(fn: Callable[..., Any], *a: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - start


def noop(state: object, i: int) -> int:
    return i


def main() -> None:
    a = args()
    y, scenes, probes = inputs(a.values, a.dim)
    budget = Budget(name="paper", protocol="paper", epochs=a.epochs, eval_every=max(1, a.epochs // 10), patience=None)
    settings = ComplexitySettings(
        approximators=FAMILIES,
        fractions=tuple(float(f) for f in a.fractions.split(",")),
        seeds=tuple(int(s) for s in a.seeds.split(",")),
        description_length=False,
        second_fit=False,
        budget=budget,
    )
    print(
        f"sweep: {len(scenes):,} scenes, dim {a.dim}, families {', '.join(FAMILIES)}, fractions {a.fractions}, "
        f"seeds {a.seeds}, paper protocol at {a.epochs} epochs"
    )
    local, t_local = timed(complexity_sweep, y, scenes, probes, settings)
    with tempfile.TemporaryDirectory(prefix="bsr-", dir="/tmp") as tmp:
        cluster, t_start = timed(lambda: RayExecutor(None, num_cpus=a.cpus, temp_dir=tmp))
        try:
            with executing_on(cluster):
                complexity_sweep(y, scenes, probes, settings)  # warm: workers start and import torch
                remote, t_ray = timed(complexity_sweep, y, scenes, probes, settings)
                units = [Unit(f"u{i}", f"noop {i}", noop, (i,), Resources(cpus=1)) for i in range(a.overhead_tasks)]
                _, t_noop = timed(lambda: list(cluster.map(units)))
        finally:
            cluster.close()
    keys = [c for c in local.table.columns if c != "value"]
    assert local.table[keys].equals(remote.table[keys])
    np.testing.assert_allclose(local.table["value"], remote.table["value"], rtol=0, atol=1e-4)
    n_units = len(local.history.groupby(["approximator", "fraction", "seed"]).size())  # models; units stack them
    busy = sum(local.seconds.values())
    overhead = t_noop / a.overhead_tasks
    print(f"\nlocal sequential (baseline): {t_local:8.2f} s")
    print(f"ray, {a.cpus} CPUs:            {t_ray:8.2f} s   ratio {t_local / t_ray:.2f}x (target >= 1.6x)")
    print(f"ray start-up:                {t_start:8.2f} s   (once per command; first sweep also starts workers)")
    print(f"ray per-task overhead:       {1000 * overhead:8.2f} ms  ({a.overhead_tasks} empty tasks, wall / task)")
    print(f"fits: {n_units} models in stacks; unit seconds per family: {local.seconds}")

    # -- projection ---------------------------------------------------------------------------------------------
    seen = float(np.mean(np.square(settings.fractions)))  # a scene is train_only when both its objects are seen
    train_here, train_paper = len(scenes) * seen, a.paper_scenes * seen
    per_model = busy / n_units  # seconds per (family, fraction, seed) model at this size, on this machine's cores
    scale = (PAPER_EPOCHS / a.epochs) * (train_paper / train_here) * (a.paper_dim / a.dim) / a.gpu_speedup
    unit = per_model * scale
    paper_units = a.paper_models * 5 * 9 * 3
    print(
        f"\nprojection (a model, not a measurement): paper budget, {a.paper_models} embedding sets x 5 families x "
        f"9 fractions x 3 seeds = {paper_units:,} units of ~{unit:,.0f} s each on one GPU (measured {per_model:.3f} s "
        f"per model here x {scale:,.1f}: epochs {PAPER_EPOCHS}/{a.epochs}, train scenes {train_paper:,.0f}/"
        f"{train_here:,.0f}, width {a.paper_dim}/{a.dim}, assumed GPU speed-up {a.gpu_speedup:g})"
    )
    for n in (int(w) for w in a.workers.split(",")):
        wall = t_start + math.ceil(paper_units / n) * unit + paper_units * overhead / n
        print(f"  {n:4d} GPU workers: {wall / 3600:8.1f} h")
    measurement = Measurement(
        f"complexity sweep: {len(scenes):,} scenes x {a.dim}, {len(FAMILIES)} families x {len(settings.fractions)} "
        f"fractions x {len(settings.seeds)} seeds, paper protocol at {a.epochs} epochs",
        f"complexity_sweep on Ray, {a.cpus} CPUs (start-up {t_start:.1f} s not included, workers warm)",
        "complexity_sweep, local sequential (default executor)",
        "s",
        t_ray,
        t_local,
        "1.6x",
        f"tables agree (same rows, values within 1e-4); per-task overhead {1000 * overhead:.2f} ms",
    )
    print(f"\nwrote {write_results(__file__, [measurement], a.csv)}")


if __name__ == "__main__":
    main()
