"""Benchmark the complexity sweep's scoring under frozen probes against one probe product per model and group.

What is timed
-------------
The scoring of a default sweep (fractions 0.1 ... 0.9 x ``--seeds``, the 5 default families, their selected and
final checkpoints) once the models are fitted: the probes on the true embeddings of every (fraction, seed)'s
scene groups, and on each model's predictions of its groups, its test_only scenes that need binding and their
swaps.

ours
    :func:`bindscope.analyses.complexity.score.reference_rows` and
    :func:`~bindscope.analyses.complexity.score.prediction_rows`: each model's scenes read by every probe at once
    (the probes' weights stacked, one torch product per 8,192 rows, threads from ``bindscope.core.threads``), every
    group a mean over rows read once; the true embeddings of all (fraction, seed)s' groups read once.
baseline
    The scoring as the sweep did it before (written out here): per (fraction, seed) and group,
    ``ProbeSet.decision_function`` and ``score`` on its true embeddings; per model, checkpoint and group, ``score``
    of its predictions; the binding scenes read again by the object probe. Ours also writes the reference rows'
    scene counts and coverage, which the baseline leaves out (in its favour).

Both give the same numbers (checked: every accuracy, R², MSE and binding share; a probe's logits come from
another matrix kernel, so an accuracy may move by one scene at an exact tie, which is counted).

Data: planted ``additive_concepts_objects`` embeddings (width ``--dim``, noise 0.1) of every ordered pair of
objects at the sizes a user has (``--sizes``): ``clevr`` (8 x 3 = 24 objects, 576 scenes), ``1k`` (4 x 8 = 32
objects, 1,024 scenes), ``space10k`` (10 x 10 = 100 objects, 10,000 scenes) and ``text`` (20 x 20 = 400 objects,
160,000 scenes); L-BFGS probes fitted on 4,000 scenes (not timed); a model's predictions are the true embeddings
plus noise (the same for every family: scoring does not depend on the family).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_complexity_scoring.py [--sizes clevr,1k,space10k,text] [--seeds 0,1,2] \\
        [--dim 64] [--csv PATH]

The figures go to ``benchmarks/results/bench_complexity_scoring.csv`` (or ``--csv``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity import ComplexitySettings
from bindscope.analyses.complexity.plan import Plan, plan_sweep
from bindscope.analyses.complexity.score import (
    EXCHANGED,
    SWAP,
    UNSEEN,
    Truth,
    prediction_rows,
    reference_rows,
    score,
    scored_scenes,
)
from bindscope.analyses.complexity.swaps import find_swaps, told_apart
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SIZES = {"clevr": (8, 3), "1k": (4, 8), "space10k": (10, 10), "text": (20, 20)}
FAMILIES = ("additive", "mult_within_object", "mult", "sum_mult", "mlp")
CHECKPOINTS = ("selected", "final")

Key = tuple[str, float, int, str, str, str]


def setup(size: str, dim: int, seeds: tuple[int, ...]) -> tuple[Truth, list[Plan], np.ndarray]:
    """The sweep's truth (planted embeddings, fitted probes, swaps) and plans at one size."""
    a, b = SIZES[size]
    space = ConceptSpace.from_dict({"attribute": [f"a{i}" for i in range(a)], "noun": [f"n{i}" for i in range(b)]})
    scenes = SceneSet.enumerate(space, 2)
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=dim, noise=0.1, seed=0)
    targets = soft_targets(scenes)
    sample = np.random.default_rng(0).permutation(len(scenes))[:4000]
    probes = ProbeSet("lbfgs").fit(y[sample], {n: t[sample] for n, t in targets.items()})
    truth = Truth(y, targets, probes, y.astype(np.float64).mean(axis=0), find_swaps(scenes, y, targets["object"] > 0))
    return truth, plan_sweep(scenes, ComplexitySettings(seeds=seeds)), scenes.scenes


def ours(truth: Truth, plans: list[Plan], values: np.ndarray, wanted: list[np.ndarray], preds: dict) -> list[dict]:
    rows = reference_rows(plans, truth, values)
    binding = [truth.binding(p) for p in plans]
    for family in FAMILIES:
        for checkpoint in CHECKPOINTS:
            rows += prediction_rows(family, plans, binding, wanted, preds[checkpoint], checkpoint, truth, False)
    return rows


def baseline(truth: Truth, plans: list[Plan], wanted: list[np.ndarray], preds: dict) -> dict[Key, float]:
    """The scoring as the sweep did it before: one decision_function per model and group, the binding scenes
    read again."""
    out: dict[Key, float] = {}
    present = truth.targets["object"] > 0

    def binding(label: str, plan: Plan, checkpoint: str, embeddings: np.ndarray, lookup: np.ndarray) -> None:
        pos, _ = truth.binding(plan)
        assert truth.swaps is not None
        logits = truth.probes.decision_function(embeddings, ["object"])["object"]
        for metric, exchanged in ((SWAP, False), (EXCHANGED, True)):
            share = told_apart(truth.swaps, pos, lookup, logits, present, exchanged=exchanged).mean()
            out[(label, plan.fraction, plan.seed, UNSEEN, checkpoint, metric)] = float(share)

    for plan in plans:
        for group, idx in plan.groups.items():
            if len(idx):
                t = {n: v[idx] for n, v in truth.targets.items()}
                for metric, value in score(truth.y[idx], truth.y[idx], t, truth.probes).items():
                    if metric not in ("r2", "mse"):
                        out[("embeddings", plan.fraction, plan.seed, group, "", metric)] = value
        pos, lookup = truth.binding(plan)
        if len(pos):
            binding("embeddings", plan, "", truth.y[lookup], lookup)
    for family in FAMILIES:
        for checkpoint in CHECKPOINTS:
            for plan, lookup, pred in zip(plans, wanted, preds[checkpoint]):
                for group, idx in plan.groups.items():
                    if len(idx):
                        at = np.searchsorted(lookup, idx)
                        t = {n: v[idx] for n, v in truth.targets.items()}
                        for metric, value in score(pred[at], truth.y[idx], t, truth.probes, truth.centre).items():
                            out[(family, plan.fraction, plan.seed, group, checkpoint, metric)] = value
                pos, needed = truth.binding(plan)
                if checkpoint == "selected" and len(pos):
                    binding(family, plan, checkpoint, pred[np.searchsorted(lookup, needed)], needed)
    return out


def agreement(rows: list[dict], base: dict[Key, float]) -> tuple[int, int, float]:
    """How many of the baseline's numbers ours gives, how many accuracies differ (by at most one scene), and the
    largest difference of the rest."""
    got = {(r["variant"], r["fraction"], r["seed"], r["group"], r["checkpoint"], r["metric"]): r for r in rows}
    moved, worst = 0, 0.0
    for key, value in base.items():
        row = got[key]
        diff = abs(row["value"] - value)
        if row.get("n_cases") and diff > 1e-12:
            assert diff <= 1.0 / row["n_cases"] + 1e-12, (key, row["value"], value)
            moved += 1
        else:
            worst = max(worst, diff)
    return len(base), moved, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="clevr,1k,space10k,text", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--dim", type=int, default=64)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    seeds = tuple(int(s) for s in args.seeds.split(","))
    unknown = [s for s in args.sizes.split(",") if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    measured = []
    for size in args.sizes.split(","):
        truth, plans, values = setup(size, args.dim, seeds)
        wanted = scored_scenes(plans, [truth.binding(p) for p in plans])
        rng = np.random.default_rng(1)
        preds = {
            c: [truth.y[w] + rng.normal(0, 0.05, (len(w), args.dim)).astype(np.float32) for w in wanted]
            for c in CHECKPOINTS
        }
        start = time.perf_counter()
        rows = ours(truth, plans, values, wanted, preds)
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        base = baseline(truth, plans, wanted, preds)
        base_s = time.perf_counter() - start
        numbers, moved, worst = agreement(rows, base)
        scenes = len(values)
        label = f"{size}: {scenes:,} scenes x {args.dim}, {len(plans)} (fraction, seed)s x {len(FAMILIES)} families"
        print(
            f"{label}: ours {ours_s:.2f} s, baseline {base_s:.2f} s ({base_s / ours_s:.2f}x); {numbers:,} numbers, "
            f"{moved} accuracies one scene apart, the rest within {worst:.1e}"
        )
        assert worst < 1e-6
        measured.append(
            Measurement(
                label,
                "complexity scoring: every probe at once per model, true embeddings read once",
                "one ProbeSet.decision_function + score per model and group, binding scenes read again (as before)",
                "s",
                ours_s,
                base_s,
                checks=f"{numbers} numbers agree: {moved} accuracies one scene apart (a tie), the rest within "
                f"{worst:.1e}",
            )
        )
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
