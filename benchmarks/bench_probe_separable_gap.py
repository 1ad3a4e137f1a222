"""Separable probes on real embeddings: how far L-BFGS lands from the paper's Adam trajectory.

What is run
-----------
On an embedding folder (``--emb``, e.g. all-MiniLM-L6-v2 on the ``text`` captions), for each
subsample size in ``--sizes`` (a seeded sample of the scenes holding all K objects, as the
research code keeps them), one scene split (train 0.4, ``--split-source``) and the probes of
docs/method/03-probes.md fitted twice:

- ``lbfgs``: L-BFGS on whitened inputs to convergence (what ``fast`` keeps for a separable probe
  beyond ``--exact-budget``);
- the baseline, ``reference``: the paper's full-batch Adam, lr 1e-2, cosine, 10,000 steps.

Printed per size: seconds of each, whether each probe's training set is separable, and the test
accuracy of each probe under both with their difference in points (the parity issue's bar: 1
point). The gap at the full size is what this estimates: the reference run there takes hours on
a CPU.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_probe_separable_gap.py --emb EMB_DIR [--sizes 2000,4000,8000] [--csv PATH]

The figures go to ``benchmarks/results/bench_probe_separable_gap.csv`` (or ``--csv``): per size, the seconds of
``lbfgs`` (ours) against the reference run, with the accuracy gap as the check.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses import ProbeSettings, load_inputs
from bindscope.estimators.probe_runs import probe_variant, used_scenes


def fit(y: np.ndarray, scenes, optimizer: str, seed: int, source: str) -> tuple[float, dict, dict]:
    settings = ProbeSettings(optimizer=optimizer, seeds=(seed,), split_source=source, exact_budget_s=0)
    start = time.perf_counter()
    run = probe_variant(y, scenes, settings)
    seconds = time.perf_counter() - start
    test = {r["metric"]: r["value"] for r in run.rows if r["group"] == "test" and r["variant"] == "base"}
    return seconds, test, run.solver[seed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emb", required=True)
    parser.add_argument("--sizes", default="2000,4000,8000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split-source", default="paper")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    arrays = load_inputs("probe", args.emb, find_siblings=False).arrays()
    full = used_scenes(arrays.scenes, "full")
    print(f"{args.emb}: {len(full):,} scenes with all K objects, {arrays.embeddings.shape[1]} dimensions")
    measured = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows = np.sort(np.random.default_rng(args.seed).choice(full, size=min(size, len(full)), replace=False))
        y, scenes = arrays.embeddings[rows], arrays.scenes.subset(rows)
        t_l, acc_l, solver = fit(y, scenes, "lbfgs", args.seed, args.split_source)
        t_r, acc_r, _ = fit(y, scenes, "reference", args.seed, args.split_source)
        separable = sorted(n for n, s in solver.items() if s == "lbfgs-separable")
        sep = ", ".join(separable) or "none"
        print(f"\n{len(rows):,} scenes: lbfgs {t_l:.0f} s, reference {t_r:.0f} s; separable: {sep}")
        for metric in sorted(acc_r):
            gap = 100 * (acc_l[metric] - acc_r[metric])
            lb, ref = 100 * acc_l[metric], 100 * acc_r[metric]
            print(f"  {metric:24s} lbfgs {lb:6.2f}%  reference {ref:6.2f}%  gap {gap:+.2f} points")
        gaps = ", ".join(f"{m} {100 * (acc_l[m] - acc_r[m]):+.2f}" for m in sorted(acc_r))
        measured.append(
            Measurement(
                f"{args.emb}: {len(rows):,} scenes x {y.shape[1]}, split source {args.split_source}, seed {args.seed}",
                "probe_variant, lbfgs (whitened, to convergence)",
                "probe_variant, reference (full-batch Adam, lr 1e-2, cosine, 10,000 steps)",
                "s",
                t_l,
                t_r,
                checks=f"test accuracy gap lbfgs - reference in points (bar 1): {gaps}; separable: {sep}",
            )
        )
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
