"""Benchmark ``bindscope complexity``'s default (``--budget auto`` on a CPU) against the previous default.

What is timed
-------------
Per planted kind (``--kinds``; the expected verdict in brackets):

- ``additive_concepts_objects``: a sum of concept vectors per object, summed over slots (additive);
- ``mult_within_object``: a product of concept vectors per object, summed over slots (mult_within_object);
- ``object_lookup``: a random vector per object (no family generalises),

the whole of what the command computes (``ComplexityAnalysis.compute`` and ``summarize``: the probes
fitted here, the sweep of the five default families at fractions 0.1 ... 0.9 and seeds 0, 1, 2, the
verdict), in a child process, under

ours
    the default now: ``resolve_budget("auto", "cpu")`` (the ``cpu`` budget: at most 512 training
    scenes per fit, fits in the embeddings' leading principal subspace holding 99.9% of the variance
    (at most 128 dimensions, wider where the probes need it), 4 starts of 5 ALS sweeps and 800 sweeps
    per product fit, 600 MLP epochs with a check every 10 and a stop after 3 without improvement,
    2,000 scored scenes per group, L-BFGS probes);
baseline
    the previous default: at most 1,024 training scenes per fit, 300 MLP epochs, the embeddings
    fitted as they are (table width = D), the rest as ours. It runs on the current code, whose ALS
    fits of a stack's models are batched (the same fits, faster): the ratio understates the gain
    over the previous commit. It is stopped after ``--cap`` seconds and then reported as "did not
    finish in X s" with the stacks it had fitted, not extrapolated.

Printed per run: wall seconds, the verdict (simplest generalising family, f*, reliable) against
the expected one, and the ratio of the baseline's time (or its cap) to ours.

Data: a ``--space`` x ``--space`` concept space (default 10 x 10: 100 objects), every ordered pair of
objects (10,000 two-object scenes), planted embeddings of ``--dim`` dimensions (default 32) with noise
``--noise``; ``--width W`` computes the planted function in W dimensions and carries it into ``--dim``
by a random orthonormal map (a within-object product of width 384 over 100 objects is not determined
by the seen objects: every model that fits it can give each object its own vector:
then the expected verdict is no family, with mult_within_object undetermined). Timings on a machine
shared with other work are inflated; run it alone.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_complexity_default.py [--dim 32] [--width W] [--kinds K1,K2] [--cap 900] \\
        [--only ours] [--csv PATH]

The figures go to ``benchmarks/results/bench_complexity_default.csv`` (or ``--csv``): per kind, ours against
the baseline in wall seconds, the baseline's cap as a lower bound where it did not finish. Nothing is
written when ``--only`` leaves one side out.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import time
from typing import Any

from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.complexity import BUDGETS, Budget, ComplexityAnalysis, ComplexitySettings, resolve_budget
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

EXPECTED = {
    "additive_concepts_objects": "additive",
    "mult_within_object": "mult_within_object",
    "object_lookup": None,
}
PREVIOUS = BUDGETS["cpu"].replace(max_target_dims=None, max_train_scenes=1024, epochs=300)


def scenes_of(space_size: int) -> SceneSet:
    """Every ordered pair of objects of a ``space_size`` x ``space_size`` concept space."""
    space = ConceptSpace.from_dict(
        {"attribute": [f"v{i}" for i in range(space_size)], "noun": [f"n{i}" for i in range(space_size)]}
    )
    return SceneSet.enumerate(space, 2)


def child(kind: str, args: dict[str, Any], budget: Budget, out: Any) -> None:
    """One run of what the command computes; reports progress and the summary's verdict on ``out``."""
    scenes = scenes_of(args["space"])
    y = planted_embeddings(scenes, kind, dim=args["dim"], noise=args["noise"], seed=0, width=args["width"])
    settings = ComplexitySettings(budget=budget)
    analysis = ComplexityAnalysis()
    start, cpu = time.perf_counter(), time.process_time()
    result = analysis.compute(
        AnalysisInputs(y, scenes), settings, progress=lambda done, total: out.put(("progress", done, total))
    )
    summary = analysis.summarize(result, settings).numbers()
    seconds = {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}
    seconds |= {label: a["seconds"] for label, a in summary["approximators"].items()}
    out.put(("done", seconds, {**summary["verdict"], "fitted_in": summary["fitted_in"]}))


def timed(kind: str, args: dict[str, Any], budget: Budget, cap: float) -> tuple[dict | None, dict | None, str]:
    """Seconds (wall, CPU of all threads, per family) and verdict of one run in a child process, or None
    after ``cap`` seconds (with its progress)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=child, args=(kind, args, budget, out))
    start = time.perf_counter()
    proc.start()
    progress = "not started"
    try:
        while True:
            left = cap - (time.perf_counter() - start)
            if left <= 0:
                return None, None, progress
            try:
                message = out.get(timeout=min(left, 5.0))
            except queue.Empty:
                if not proc.is_alive():
                    return None, None, f"the child died (exit code {proc.exitcode})"
                continue
            if message[0] == "progress":
                progress = f"{message[1]} of {message[2]} stacks fitted"
            else:
                return message[1], message[2], "finished"
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def line(label: str, seconds: dict | None, verdict: dict | None, expected: str | None, note: str, cap: float) -> str:
    """One run, as printed."""
    if seconds is None or verdict is None:
        return f"  {label:9s} did not finish in {cap:.0f} s ({note})"
    named = verdict["simplest_generalising"]
    ok = "right" if named == expected and verdict["reliable"] else "WRONG"
    families = ", ".join(f"{k} {v:.0f}" for k, v in seconds.items() if k not in ("wall", "cpu"))
    return (
        f"  {label:9s} {seconds['wall']:7.1f} s wall, {seconds['cpu']:.1f} s CPU  verdict {named} "
        f"(f* {verdict['f_star']}), reliable {verdict['reliable']}: {ok} (expected {expected})\n"
        f"            fitting seconds: {families}; fitted in {verdict['fitted_in'] or 'the embeddings'}\n"
        f"            {verdict['reading'][:240]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(EXPECTED))
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--width", type=int, default=None, help="the planted function's own width")
    parser.add_argument("--space", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--cap", type=float, default=900.0, help="seconds the baseline may run")
    parser.add_argument("--only", choices=("both", "ours", "baseline"), default="both")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    ours = resolve_budget("auto", "cpu")
    data = {"space": args.space, "dim": args.dim, "noise": args.noise, "width": args.width}
    width = f" (a planted function of width {args.width})" if args.width else ""
    print(f"{len(scenes_of(args.space)):,} scenes, {args.dim} dimensions{width}; ours: {ours.reason}")
    measured = []
    for kind in args.kinds.split(","):
        expected = EXPECTED.get(kind)
        if kind == "mult_within_object" and (args.width or args.dim) >= args.space**2:
            expected = None  # as wide as the objects are many: not determined by the seen ones
        print(f"\n{kind}")
        runs = {}
        if args.only in ("both", "ours"):
            runs["ours"] = timed(kind, data, ours, 10 * args.cap)
            print(line("ours", *runs["ours"][:2], expected, runs["ours"][2], 10 * args.cap))
        if args.only in ("both", "baseline"):
            runs["baseline"] = timed(kind, data, PREVIOUS, args.cap)
            print(line("baseline", *runs["baseline"][:2], expected, runs["baseline"][2], args.cap))
        if len(runs) == 2 and runs["ours"][0]:
            ours_s, base = runs["ours"][0]["wall"], runs["baseline"][0]
            ratio = f"{base['wall'] / ours_s:.1f}x" if base else f"more than {args.cap / ours_s:.1f}x"
            print(f"  ratio (baseline / ours, wall): {ratio}")
            verdicts = {
                k: f"{v[1]['simplest_generalising']} (reliable {v[1]['reliable']})" if v[1] else "none (did not finish)"
                for k, v in runs.items()
            }
            measured.append(
                Measurement(
                    f"{kind}: {len(scenes_of(args.space)):,} scenes x {args.dim}{width}",
                    "ComplexityAnalysis compute + summarize, --budget auto on a CPU (the cpu budget)",
                    "the previous default (1,024 training scenes per fit, 300 MLP epochs, full width)"
                    + ("" if base else f": did not finish in {args.cap:.0f} s, the cap is a lower bound"),
                    "s",
                    ours_s,
                    base["wall"] if base else args.cap,
                    checks=f"expected verdict {expected}; ours {verdicts['ours']}, baseline {verdicts['baseline']}",
                )
            )
    if measured:
        print(f"\nwrote {write_results(__file__, measured, args.csv)}")
    else:
        print("\nno CSV written: no kind has both sides finished (see --only)")


if __name__ == "__main__":
    main()
