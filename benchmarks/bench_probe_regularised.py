"""Benchmark the default ``regularised`` probe optimiser (docs/method/03-probes.md), cross-validation included,
against L-BFGS alone on the same embeddings.

What is timed
-------------
ours
    ``probe_variant(y, scenes, ProbeSettings(seeds=...))``: the default ``regularised`` optimiser. Per seed,
    5-fold cross-validation inside the training scenes over 10 strengths x 2 shrinkages (each fold fit from
    the all-scenes fit at the same setting), every setting refitted on all training scenes, each fit to a
    gradient norm of 1e-6; the band's test accuracies.
baseline
    The same call with ``optimizer="lbfgs"``: one L-BFGS fit per seed on whitened inputs, stopped once a
    probe separates its training scenes (on separable scenes its answer is where it stopped). A second row
    times the previous default, ``fast`` (L-BFGS, then the paper's 10,000-step Adam trajectory for probes
    that separate their training scenes), on the same embeddings.

Data: each embedding folder of ``--emb`` (e.g. MiniLM on ``clevr2d`` captions, a run with ``max_scenes: 240``),
and planted ``object_additive`` embeddings of the ``clevr`` preset (576 scenes, ``--dim`` 384, noise 1.0): in
both, fewer training scenes (0.4) than dimensions, so L-BFGS's unpenalised loss has no minimiser. Printed per
case: seconds of each, the ratio, and each seed's test object accuracy under both with the chosen penalty.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_probe_regularised.py [--emb EMB_DIR[,EMB_DIR...]] [--seeds 0,1,2] \\
        [--dim 384] [--csv PATH]

The figures go to ``benchmarks/results/bench_probe_regularised.csv`` (or ``--csv``): one row per case.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses import load_inputs
from bindscope.data.presets import get_preset
from bindscope.estimators.probe_runs import ProbeRun, ProbeSettings, probe_variant, select_scenes
from bindscope.space.concepts import SceneSet
from bindscope.space.planted import planted_embeddings


def timed(y: np.ndarray, scenes: SceneSet, settings: ProbeSettings) -> tuple[float, ProbeRun]:
    start = time.perf_counter()
    run = probe_variant(y, scenes, settings)
    return time.perf_counter() - start, run


def test_object_acc(run: ProbeRun) -> dict[int, float]:
    return {
        r["seed"]: r["value"]
        for r in run.rows
        if (r["variant"], r["group"], r["metric"]) == ("base", "test", "object_acc")
    }


def measure(case: str, y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]) -> list[Measurement]:
    t_ours, ours = timed(y, scenes, ProbeSettings(seeds=seeds))
    acc_ours = test_object_acc(ours)
    print(f"\n{case}: regularised {t_ours:.1f} s")
    for seed in seeds:
        choice = ours.strengths[seed]["object"]
        low, high = (100 * ours.band[seed][side]["object_acc"] for side in ("low", "high"))
        print(
            f"  seed {seed}: object_acc test {100 * acc_ours[seed]:.1f}% (rho {choice.shrinkage:g}, lam "
            f"{choice.strength:g}; band {low:.1f}-{high:.1f}%; {ours.solver[seed]['object']})"
        )
    out = []
    for baseline, words in (
        ("lbfgs", "lbfgs (one L-BFGS fit per seed)"),
        ("fast", "fast, the previous default (L-BFGS, then the 10,000-step Adam trajectory where separable)"),
    ):
        t_base, base = timed(y, scenes, ProbeSettings(seeds=seeds, optimizer=baseline))
        acc_base = test_object_acc(base)
        print(f"  {baseline}: {t_base:.1f} s ({baseline} / regularised {t_base / t_ours:.3f})")
        for seed in seeds:
            print(f"    seed {seed}: object_acc test {100 * acc_base[seed]:.1f}% ({base.solver[seed]['object']})")
        per_seed = "; ".join(f"seed {s}: {100 * acc_ours[s]:.1f}% vs {100 * acc_base[s]:.1f}%" for s in seeds)
        out.append(
            Measurement(
                case,
                "probe_variant, regularised (5-fold CV over 10 strengths x 2 shrinkages, refits, band)",
                f"probe_variant, {words}",
                "s",
                t_ours,
                t_base,
                checks=f"object_acc test regularised vs {baseline}: {per_seed}",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emb", default="", help="embedding folders, comma-separated (default: planted only)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--dim", type=int, default=384, help="width of the planted embeddings")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    seeds = tuple(int(s) for s in args.seeds.split(","))
    torch.manual_seed(0)
    measured = []
    for folder in filter(None, args.emb.split(",")):
        arrays = load_inputs("probe", folder, find_siblings=False).arrays()
        _, y, scenes, _ = select_scenes(arrays.embeddings, arrays.scenes, "full")
        name = f"{Path(folder).parent.name}/{Path(folder).name}"
        measured += measure(f"{name} ({len(y):,} scenes x {y.shape[1]})", y, scenes, seeds)
    clevr = get_preset("clevr").build_scenes()
    y = planted_embeddings(clevr, "object_additive", dim=args.dim, noise=1.0, seed=0)
    case = f"planted object_additive, clevr ({len(y)} scenes x {args.dim}, noise 1.0)"
    measured += measure(case, y, clevr, seeds)
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
