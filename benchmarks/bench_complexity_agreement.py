"""Agreement of the exact protocol with the paper's optimiser on planted binding functions.

What is run
-----------
For each planted kind (``--kinds``), the default sweep (9 fractions x ``--seeds`` seeds x 5
families) twice on the same scenes and frozen probes:

- the exact protocol (ALS for the table families, Adam on standardised targets for the MLP), no
  caps (the ``full`` budget);
- the paper's protocol (full-batch Adam for every family, 4,000 epochs at a constant lr 1e-2, raw
  targets, as the research code runs it; the ``paper`` budget).

Printed per kind: wall seconds and verdict of each, and per family the AUC of each with their
difference (the issue's bar: within 0.05) and the share of converged fits.

Data: a ``--space`` concept space (default ``8x3``, the size of ``clevr``: 576 ordered pairs),
planted embeddings of ``--dim`` dimensions with 2% noise; probes fitted as ``bindscope complexity``
fits them (a 40% scene split, seed 0), their training scenes left out of scoring.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_complexity_agreement.py [--kinds K1,K2] [--space 8x3] [--dim 32] [--csv PATH]

The figures go to ``benchmarks/results/bench_complexity_agreement.csv`` (or ``--csv``): per kind, the wall
seconds of the exact protocol (ours) against the paper's, with the AUC agreement as the check.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.analyses.complexity.analysis import fit_probes_for
from bindscope.estimators.probes import ProbeSet
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

KINDS = ("additive_concepts_objects", "mult_within_object", "mult_all_slots", "sum_mult", "object_lookup")


def sweep(
    y: np.ndarray, scenes: SceneSet, probes: ProbeSet, fitted: np.ndarray, protocol: str, seeds: int, hidden: int
) -> tuple:
    settings = ComplexitySettings(
        hidden=(hidden,),
        seeds=tuple(range(seeds)),
        description_length=False,
        budget=resolve_budget("paper" if protocol == "paper" else "full"),
    )
    start = time.perf_counter()
    summary = complexity_summary(complexity_sweep(y, scenes, probes, settings, probe_fitted=fitted), settings).numbers()
    return time.perf_counter() - start, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--space", default="8x3")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=1024)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    sizes = [int(v) for v in args.space.split("x")]
    space = ConceptSpace.from_dict({f"c{i}": [f"v{j}" for j in range(n)] for i, n in enumerate(sizes)})
    every = SceneSet.enumerate(space, 2)
    scenes = every.subset(np.flatnonzero(every.num_objects() == 2))
    print(f"{len(scenes):,} scenes ({args.space}), {args.dim} dimensions, {args.seeds} seed(s), mlp({args.hidden})")
    worst = 0.0
    measured = []
    for kind in args.kinds.split(","):
        y = planted_embeddings(scenes, kind, dim=args.dim, noise=0.02, seed=0)
        probes, _, fitted = fit_probes_for(y, scenes, ComplexitySettings())  # as `bindscope complexity` does
        runs = {p: sweep(y, scenes, probes, fitted, p, args.seeds, args.hidden) for p in ("exact", "paper")}
        print(f"\n{kind}")
        for p, (seconds, summary) in runs.items():
            v = summary["verdict"]
            found = f"{v['simplest_generalising']} (f* {v['f_star']})"
            print(f"  {p:5s} {seconds:7.1f} s  verdict {found}, reliable {v['reliable']}: {v['reading']}")
        kind_worst = 0.0
        for label, entry in runs["exact"][1]["approximators"].items():
            other = runs["paper"][1]["approximators"][label]
            diff = entry["auc"]["mean"] - other["auc"]["mean"]
            worst = max(worst, abs(diff))
            kind_worst = max(kind_worst, abs(diff))
            converged = [np.mean([c["mean"] for c in e["converged"].values()]) for e in (entry, other)]
            print(
                f"    {label:20s} AUC exact {entry['auc']['mean']:.3f}  paper {other['auc']['mean']:.3f}  "
                f"diff {diff:+.3f}   converged {100 * converged[0]:5.1f}% / {100 * converged[1]:5.1f}%"
            )
        verdicts = {p: runs[p][1]["verdict"]["simplest_generalising"] for p in runs}
        measured.append(
            Measurement(
                f"{kind}: {len(scenes):,} scenes ({args.space}) x {args.dim}, {args.seeds} seed(s), mlp({args.hidden})",
                "complexity_sweep, exact protocol (full budget)",
                "complexity_sweep, paper protocol (Adam, 4,000 epochs, lr 1e-2, raw targets)",
                "s",
                runs["exact"][0],
                runs["paper"][0],
                checks=f"AUC within {kind_worst:.3f} per family (bar 0.05); verdict exact {verdicts['exact']}, "
                f"paper {verdicts['paper']}",
            )
        )
    print(f"\nlargest AUC difference: {worst:.3f}")
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
