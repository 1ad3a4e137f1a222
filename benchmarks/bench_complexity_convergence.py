"""Benchmark the complexity verdicts on planted binding functions: the exact protocol against the previous trainer.

What is run
-----------
For each planted kind (``--kinds``; the expected verdict in brackets):

- ``additive_concepts_objects``: a sum of concept vectors per object, summed over slots (additive);
- ``mult_within_object``: a product of concept vectors per object, summed over slots
  (mult_within_object);
- ``mult_all_slots``: a product of mean-one vectors over every slot (mult);
- ``sum_mult``: that product plus concept vectors at half its scale (sum_mult);
- ``object_lookup``: a random vector per object (no family generalises),

one ``complexity_sweep`` under the default ``cpu`` budget (the exact protocol: ALS for the table
families, Adam on standardised targets for the MLP) and, as the baseline, one under the previous
default trainer (full-batch Adam for every family on raw targets, 400 epochs at lr 1e-2 with cosine
decay, patience 8 checks of 20 epochs, the same caps): the same fits (fractions x seeds x families) and probes.
Printed per run: wall seconds, the verdict (simplest generalising family, f*, reliable or not),
per family the test_only object accuracy at the largest fraction, and how many fits converged.

Data: a ``--space``-by-``--space`` concept space (default 20 x 20 like ``text``), all ordered pairs
of distinct-or-equal objects, planted embeddings of ``--dim`` dimensions (default 512) with noise
``--noise``; probes fitted by L-BFGS on a sample of the scenes (not timed).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_complexity_convergence.py [--kinds K1,K2] [--dim 32] [--space 20] [--seeds 3] \\
        [--csv PATH]

The figures go to ``benchmarks/results/bench_complexity_convergence.csv`` (or ``--csv``): per kind, the wall
seconds of the exact protocol (ours) against the previous trainer, with both verdicts as the check.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

EXPECTED = {
    "additive_concepts_objects": "additive",
    "mult_within_object": "mult_within_object",
    "mult_all_slots": "mult",
    "sum_mult": "sum_mult",
    "object_lookup": None,
}


def run(y: np.ndarray, scenes: SceneSet, probes: ProbeSet, settings: ComplexitySettings) -> tuple[float, dict]:
    """One sweep: wall seconds and its summary."""
    start = time.perf_counter()
    result = complexity_sweep(y, scenes, probes, settings)
    return time.perf_counter() - start, complexity_summary(result, settings).numbers()


def describe(seconds: float, summary: dict, expected: str | None) -> str:
    """The verdict against the expected one, accuracies at the largest fraction, converged fits."""
    v = summary["verdict"]
    ok = "right" if v["simplest_generalising"] == expected else "WRONG"
    ok += "" if v["reliable"] else " (unreliable)"
    lines = [
        f"  {seconds:7.1f} s  verdict {v['simplest_generalising']} (f* {v['f_star']}), "
        f"reliable {v['reliable']}: {ok} (expected {expected})"
    ]
    last = max(summary["in_distribution"], key=float)
    lines.append(f"    in-distribution at {last}: {summary['in_distribution'][last]['mean']:.3f}")
    for label, entry in summary["approximators"].items():
        converged = np.mean([c["mean"] for c in entry["converged"].values()])
        lines.append(
            f"    {label:20s} AUC {entry['auc']['mean']:.3f}, "
            f"test_only object_acc {entry['object_acc'][last]['mean']:.3f}, "
            f"r2 {entry['r2'][last]['mean']:8.3f}, fits converged {100 * converged:5.1f}%, {entry['seconds']:.0f} s"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(EXPECTED))
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--space", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--fractions", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=1024)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    values = [f"v{i}" for i in range(args.space)]
    space = ConceptSpace.from_dict({"attribute": values, "noun": [f"n{i}" for i in range(args.space)]})
    scenes = SceneSet.enumerate(space, 2)
    fractions = tuple(float(f) for f in args.fractions.split(","))
    print(f"{len(scenes):,} scenes, {args.dim} dimensions, fractions {fractions}, {args.seeds} seed(s)")
    previous = resolve_budget(
        "cpu", protocol="paper", epochs=400, eval_every=20, patience=8, standardize=False
    ).replace(decay="cosine")  # the previous default decayed its rate (the paper protocol's is constant)
    budgets = {"exact protocol (cpu budget)": resolve_budget("cpu"), "previous trainer (Adam, 400 epochs)": previous}
    measured = []
    for kind in args.kinds.split(","):
        y = planted_embeddings(scenes, kind, dim=args.dim, noise=args.noise, seed=0)
        rows = np.random.default_rng(0).choice(len(scenes), min(6000, len(scenes)), replace=False)
        probes = ProbeSet("lbfgs").fit(y[rows], {k: v[rows] for k, v in soft_targets(scenes).items()})
        print(f"\n{kind}")
        runs = {}
        for label, budget in budgets.items():
            settings = ComplexitySettings(
                hidden=(args.hidden,),
                fractions=fractions,
                seeds=tuple(range(args.seeds)),
                description_length=False,
                budget=budget,
            )
            seconds, summary = run(y, scenes, probes, settings)
            runs[label] = seconds, summary["verdict"]
            print(f" {label}")
            print(describe(seconds, summary, EXPECTED.get(kind)))
        (ours_s, ours_v), (base_s, base_v) = runs.values()
        measured.append(
            Measurement(
                f"{kind}: {len(scenes):,} scenes x {args.dim}, {len(fractions)} fractions x {args.seeds} seed(s)",
                "complexity_sweep, exact protocol (ALS + Adam on standardised targets, cpu budget)",
                "complexity_sweep, previous trainer (Adam for every family, 400 epochs, cosine)",
                "s",
                ours_s,
                base_s,
                checks=f"expected verdict {EXPECTED.get(kind)}; exact protocol {ours_v['simplest_generalising']} "
                f"(reliable {ours_v['reliable']}), previous {base_v['simplest_generalising']} "
                f"(reliable {base_v['reliable']})",
            )
        )
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
