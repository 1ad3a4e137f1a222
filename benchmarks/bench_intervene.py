"""Benchmark ``bindscope intervene``'s scoring (docs/method/05-interventions.md) against per-case scoring.

What is timed
-------------
ours
    :func:`bindscope.analyses.intervene.score.score_jobs` on every left and right attribute edit
    (target seed 42) of every 2-object scene under three banks (obj-avg, pos-avg, single): exact
    top-1 cosine retrieval among all scenes, the rank of the expected scene, the bound hit and both
    cosines, from Gram blocks of the scenes and gathered bank projections, in memory bounded by
    ``MEMORY_BUDGET``. At the ``text`` size also ``--sample-cases N`` (``--sampled``, default 5,000 edits
    per plan: a seeded, stratified sample, scored exactly against every scene).
loop
    A per-case loop: for each edit, ``x' = x - k (e_src - e_tgt)``, cosines against all unit-norm
    scenes (one matrix-vector product), argmax and rank. This is how one would write it case by
    case; it is timed on a random sample of cases (``--loop-sample`` per bank up to 10,000 scenes, fewer
    beyond in proportion, at least 100) and extrapolated linearly to all of them.
batched matmul
    The research code's way: the edited vectors stacked and normalised, their cosines against every
    scene in batches of 512 rows (one matrix product per batch), argmax. Timed on every case where
    there are at most ``--sample`` per bank, else on a random sample of that many and extrapolated
    linearly (its products grow with cases x scenes, ours' Gram blocks with scenes² / 2).
batched matmul with ranks
    The same, also counting for each case the scenes that score strictly above the expected one (its rank):
    the part of ours' work the plain argmax leaves out.

Every side is timed ``--repeats`` times (default 3) and its fastest run kept, except at the ``text`` size
(once: minutes each). The baselines' best matches (and the loop's ranks) are compared with ours on the
sampled cases.

Data: planted object-additive scene embeddings (``planted_embeddings(..., "object_additive")``, dim 384,
``--noise`` so that not every edit lands); the single bank is the pos-avg bank's vectors plus noise (a
stand-in for single-object embeddings, of the same shape). Sizes: ``clevr`` (576 scenes), ``10k`` (10
attributes x 10 nouns, every ordered pair of the 100 objects: 10,000 scenes) and ``text`` (20 x 20: the
160,400 scenes of the ``text`` preset, of which 160,000 hold two objects).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_intervene.py [--sizes clevr,10k,text] [--sample N] [--loop-sample N]
        [--sampled N] [--noise X] [--repeats N] [--csv PATH]

The figures go to ``benchmarks/results/bench_intervene.csv`` (or ``--csv``): per size, ours against each
baseline.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.intervene.edits import EditPlan, plan_edits, sample_plan
from bindscope.analyses.intervene.score import MEMORY_BUDGET, Job, Scores, score_jobs
from bindscope.data.presets import get_preset
from bindscope.estimators.object_banks import Bank, obj_avg_bank, pos_avg_bank, single_bank
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

DIM = 384
K = 1.0
BATCH = 512
SIZES = ("clevr", "10k", "text")
OURS = "intervene.score.score_jobs (Gram blocks, gathered projections)"


def scenes_for(size: str) -> tuple[SceneSet, int]:
    """The 2-object scenes of a size, and the scenes of its dataset."""
    if size == "10k":
        space = ConceptSpace.from_dict(
            {"attribute": [f"a{i}" for i in range(10)], "noun": [f"n{i}" for i in range(10)]}
        )
        scenes = SceneSet.enumerate(space, 2)
        return scenes, len(scenes)
    scenes = get_preset(size).build_scenes()
    return scenes.subset(scenes.full()), len(scenes)


def banks_for(scenes: SceneSet, y: np.ndarray, noise: float) -> list[Bank]:
    """obj-avg and pos-avg from the scenes; the single bank: pos-avg's vectors plus noise (object-major)."""
    ids, u = scenes.object_ids(), scenes.space.num_objects
    pos = pos_avg_bank(ids, y, u)
    rng = np.random.default_rng(1)
    singles = np.transpose(pos.vectors, (1, 0, 2)).reshape(2 * u, DIM)
    singles = singles + rng.normal(0, noise / np.sqrt(DIM), singles.shape)
    return [obj_avg_bank(ids, y, u), pos, single_bank(singles.astype(np.float32), u, 2)]


def jobs_for(plan: EditPlan, banks: list[Bank]) -> list[Job]:
    return [
        Job(plan, b.name, b.name, b.rows(plan.side, plan.source_object), b.rows(plan.side, plan.target_object))
        for b in banks
    ]


def loop_scores(
    y: np.ndarray, unit: np.ndarray, job: Job, table: np.ndarray, cases: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per case: edit, cosines against every scene, best match and rank."""
    retrieved, rank = np.empty(len(cases), np.int64), np.empty(len(cases), np.int64)
    for n, i in enumerate(cases):
        x = y[job.plan.scene[i]] - K * (table[job.src[i]] - table[job.tgt[i]])
        s = unit @ (x / np.linalg.norm(x))
        retrieved[n] = int(np.argmax(s))
        rank[n] = int((s > s[job.plan.expected[i]]).sum()) + 1
    return retrieved, rank


def batched_scores(
    y: np.ndarray, unit_t: torch.Tensor, job: Job, table: np.ndarray, cases: np.ndarray, ranked: bool = False
) -> np.ndarray:
    """The research code's retrieval: edited vectors normalised, cosines in batches of 512, argmax; with
    ``ranked`` also each case's rank (1 + the scenes scoring strictly above the expected one), as ours reports."""
    x = y[job.plan.scene[cases]] - K * (table[job.src[cases]] - table[job.tgt[cases]])
    q = torch.from_numpy(x / np.linalg.norm(x, axis=1, keepdims=True))
    expected = torch.from_numpy(job.plan.expected[cases])
    out = np.empty(len(cases), np.int64)
    for a in range(0, len(cases), BATCH):
        s = q[a : a + BATCH] @ unit_t.T
        out[a : a + BATCH] = s.argmax(dim=1).numpy()
        if ranked:
            (s > s.gather(1, expected[a : a + BATCH, None])).sum(dim=1)
    return out


@dataclass
class Baselines:
    """The baselines' times, extrapolated to every case, and their agreement with ours on the cases timed."""

    loop: float
    batched: float
    ranked: float
    loop_cases: int
    batched_cases: int
    agree_loop: float
    agree_rank: float
    agree_batched: float


def time_baselines(
    y: np.ndarray, jobs: list[Job], tables: dict[str, np.ndarray], ours: dict, sample: int, loop_sample: int
) -> Baselines:
    """Both baselines on a random sample of each job's cases (all where there are no more), scaled to all."""
    rng = np.random.default_rng(0)
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    unit_t = torch.from_numpy(unit)
    m, scenes = len(jobs[0].plan), len(y)
    n_batch = min(sample, m)
    n_loop = min(m, loop_sample, max(100, loop_sample * 10_000 // scenes))  # its time per case grows with scenes
    t_loop = t_batch = t_ranked = 0.0
    agree = np.zeros(3)
    for j, job in enumerate(jobs):
        mine: Scores = ours[(j, K)]
        cases = np.sort(rng.choice(m, n_batch, replace=False))
        start = time.perf_counter()
        batch = batched_scores(y, unit_t, job, tables[job.table], cases)
        t_batch += time.perf_counter() - start
        start = time.perf_counter()
        batched_scores(y, unit_t, job, tables[job.table], cases, ranked=True)
        t_ranked += time.perf_counter() - start
        agree[2] += int((mine.retrieved[cases] == batch).sum())
        cases = np.sort(rng.choice(m, n_loop, replace=False))
        start = time.perf_counter()
        retrieved, rank = loop_scores(y, unit, job, tables[job.table], cases)
        t_loop += time.perf_counter() - start
        agree[0] += int((mine.retrieved[cases] == retrieved).sum())
        agree[1] += int((mine.rank[cases] == rank).sum())
    k = len(jobs)
    return Baselines(
        t_loop * m / n_loop,
        t_batch * m / n_batch,
        t_ranked * m / n_batch,
        n_loop,
        n_batch,
        agree[0] / (k * n_loop),
        agree[1] / (k * n_loop),
        agree[2] / (k * n_batch),
    )


def best_of(repeats: int, run: Callable[[], dict]) -> tuple[float, dict]:
    """The fastest of ``repeats`` runs (seconds) and the last result."""
    best, out = math.inf, {}
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def best_baselines(repeats: int, run: Callable[[], Baselines]) -> Baselines:
    """Each baseline's fastest of ``repeats`` timings (the agreements are the same every time)."""
    runs = [run() for _ in range(repeats)]
    fastest = {name: min(getattr(r, name) for r in runs) for name in ("loop", "batched", "ranked")}
    return replace(runs[-1], **fastest)


def measurements(case: str, ours_name: str, t_ours: float, base: Baselines, m: int, banks: int) -> list[Measurement]:
    """Ours against the loop and against the batched matmul, with how each baseline was timed."""

    def how(n: int) -> str:
        return "" if n == m else f", timed on {n:,} cases per bank and extrapolated x{m / n:.0f}"

    agree = "best match agrees with the baseline on {:.4%} of " + "{:,} sampled cases"
    return [
        Measurement(
            case,
            ours_name,
            f"per-case numpy loop{how(base.loop_cases)}",
            "s",
            t_ours,
            base.loop,
            checks=agree.format(base.agree_loop, banks * base.loop_cases) + f"; rank on {base.agree_rank:.4%}",
        ),
        Measurement(
            case,
            ours_name,
            f"batched matmul of edited vectors, {BATCH} rows per product{how(base.batched_cases)}",
            "s",
            t_ours,
            base.batched,
            checks=agree.format(base.agree_batched, banks * base.batched_cases),
        ),
        Measurement(
            case,
            ours_name,
            f"batched matmul of edited vectors with each case's rank (ours' work), {BATCH} rows per product"
            f"{how(base.batched_cases)}",
            "s",
            t_ours,
            base.ranked,
        ),
    ]


def report(name: str, t_ours: float, base: Baselines, cases: int) -> None:
    print(f"  {name:<24}{t_ours:9.2f} s   ({t_ours / cases * 1e6:.1f} µs per case)")
    print(f"  per-case loop           {base.loop:9.2f} s   ratio loop / ours    = {base.loop / t_ours:7.1f}x")
    print(f"  batched matmul          {base.batched:9.2f} s   ratio batched / ours = {base.batched / t_ours:7.1f}x")
    print(f"  batched, with ranks     {base.ranked:9.2f} s   ratio ranked / ours  = {base.ranked / t_ours:7.1f}x")
    print(
        f"  agreement: best match {base.agree_loop:.4%} (loop, {base.loop_cases:,} per bank), "
        f"{base.agree_batched:.4%} (batched, {base.batched_cases:,} per bank); rank {base.agree_rank:.4%}"
    )


def bench(size: str, args: argparse.Namespace) -> list[Measurement]:
    scenes, dataset = scenes_for(size)
    y = planted_embeddings(scenes, "object_additive", dim=DIM, noise=args.noise, seed=0)
    banks = banks_for(scenes, y, args.noise)
    plan = plan_edits(scenes, *scenes.space.concepts, 42, "attribute")
    jobs = jobs_for(plan, banks)
    tables = {b.name: b.table for b in banks}
    total = len(plan) * len(jobs)
    print(
        f"\n{size}: {dataset:,} scenes ({len(scenes):,} with two objects), dim {DIM}, "
        f"{len(plan):,} edits x {len(jobs)} banks = {total:,} cases"
    )
    repeats = args.repeats if size != "text" else 1
    t_ours, ours = best_of(repeats, lambda: score_jobs(y, jobs, tables, [K], None))
    base = best_baselines(repeats, lambda: time_baselines(y, jobs, tables, ours, args.sample, args.loop_sample))
    report("ours", t_ours, base, total)
    hits = {job.variant: float(ours[(j, K)].hit.mean()) for j, job in enumerate(jobs)}
    print("  retrieval hits: " + ", ".join(f"{b} {100 * h:.1f}%" for b, h in hits.items()))
    case = f"{size}: {dataset:,} scenes x {DIM}, {total:,} cases ({len(plan):,} edits x {len(jobs)} banks)"
    found = measurements(case, f"{OURS}, memory {MEMORY_BUDGET >> 20:,} MiB", t_ours, base, len(plan), len(jobs))
    if size != "text" or args.sampled >= len(plan):
        return found
    sample = sample_plan(plan, args.sampled)
    sample_jobs = jobs_for(sample, banks)
    start = time.perf_counter()
    part = score_jobs(y, sample_jobs, tables, [K], None)
    t_part = time.perf_counter() - start
    base = time_baselines(y, sample_jobs, tables, part, args.sample, args.loop_sample)
    print(f"  --sample-cases {args.sampled:,}: {len(sample) * len(jobs):,} cases")
    report("ours, sampled", t_part, base, len(sample) * len(jobs))
    case = f"{size}: {dataset:,} scenes x {DIM}, --sample-cases {args.sampled:,}: {len(sample) * len(jobs):,} cases"
    return found + measurements(case, f"{OURS}, base rows of the sample", t_part, base, len(sample), len(jobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--sample", type=int, default=2000, help="cases per bank the batched matmul is timed on")
    parser.add_argument("--loop-sample", type=int, default=800, help="cases per bank the per-case loop is timed on")
    parser.add_argument("--sampled", type=int, default=5000, help="--sample-cases of ours' sampled row (text)")
    parser.add_argument("--noise", type=float, default=0.6)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs, every size but text")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",")]
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}: choose from {', '.join(SIZES)}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    measured = []
    for size in sizes:
        measured += bench(size, args)
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
