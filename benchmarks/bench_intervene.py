"""Benchmark ``bindscope intervene``'s batched scoring (docs/method/05-interventions.md) against per-case scoring.

What is timed
-------------
ours
    :func:`bindscope.analyses.intervene.score.score_jobs` on every left and right attribute edit
    (target seed 42) of every 2-object scene under three banks (obj-avg, pos-avg, single): exact
    top-1 cosine retrieval among all scenes, the rank of the expected scene and both cosines,
    from Gram blocks of the scenes (half of them, by symmetry) and gathered bank projections.
loop
    A per-case loop: for each edit, ``x' = x - k (e_src - e_tgt)``, cosines against all unit-norm
    scenes (one matrix-vector product), argmax and rank. This is how one would write it case by
    case; it is timed on a random sample of cases and extrapolated to all of them.
batched matmul
    The research code's way: the edited vectors stacked and normalised, their cosines against every
    scene in batches of 512 rows (one matrix product per batch), argmax. Timed on the same sample
    and extrapolated (its number of products grows with cases x banks; ours with scenes^2 / 2).

Both baselines' best matches and ranks are compared with ours on the sampled cases.

Data: planted object-additive scenes with per-position object vectors (``T_s[o] = v[o] + 0.5
w_s[o]``, plus noise so that not every edit lands), dim 384, on the ``clevr`` space (576 scenes)
and the ``text`` space (20 x 20: 160,000 2-object scenes, as the ``text`` preset).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_intervene.py [--sizes clevr,text] [--sample N] [--noise X] [--csv PATH]

The figures go to ``benchmarks/results/bench_intervene.csv`` (or ``--csv``): per size, ours against each
baseline.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.intervene.edits import EditPlan, plan_edits
from bindscope.analyses.intervene.score import Job, score_jobs
from bindscope.data.presets import get_preset
from bindscope.estimators.object_banks import Bank, obj_avg_bank, pos_avg_bank, single_bank
from bindscope.space.concepts import SceneSet

DIM = 384
K = 1.0
BATCH = 512


def planted(scenes: SceneSet, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scenes ``sum_s T_s[o_s] + noise`` and the single-object bank ``T_s[o]`` (object-major)."""
    rng = np.random.default_rng(seed)
    u, k = scenes.space.num_objects, scenes.max_objects
    v = rng.normal(0, 1 / np.sqrt(DIM), (u, DIM))
    tables = [v + 0.5 * rng.normal(0, 1 / np.sqrt(DIM), (u, DIM)) for _ in range(k)]
    ids = scenes.object_ids()
    y = sum(tables[s][ids[:, s]] for s in range(k)) + rng.normal(0, noise / np.sqrt(DIM), (len(scenes), DIM))
    return y.astype(np.float32), np.stack(tables, axis=1).reshape(u * k, DIM).astype(np.float32)


def scenes_for(size: str) -> SceneSet:
    scenes = get_preset(size).build_scenes()
    return scenes.subset(scenes.full())


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


def batched_scores(y: np.ndarray, unit_t: torch.Tensor, job: Job, table: np.ndarray, cases: np.ndarray) -> np.ndarray:
    """The research code's retrieval: edited vectors normalised, cosines in batches of 512, argmax."""
    x = y[job.plan.scene[cases]] - K * (table[job.src[cases]] - table[job.tgt[cases]])
    q = torch.from_numpy(x / np.linalg.norm(x, axis=1, keepdims=True))
    out = np.empty(len(cases), np.int64)
    for a in range(0, len(cases), BATCH):
        out[a : a + BATCH] = (q[a : a + BATCH] @ unit_t.T).argmax(dim=1).numpy()
    return out


def bench(size: str, sample: int, noise: float) -> list[Measurement]:
    scenes = scenes_for(size)
    y, singles = planted(scenes, noise)
    ids, u = scenes.object_ids(), scenes.space.num_objects
    banks = [obj_avg_bank(ids, y, u), pos_avg_bank(ids, y, u), single_bank(singles, u, 2)]
    plan = plan_edits(scenes, *scenes.space.concepts, 42, "attribute")
    jobs = jobs_for(plan, banks)
    tables = {b.name: b.table for b in banks}
    cases_total = len(plan) * len(jobs)
    print(
        f"\n{size}: {len(scenes):,} scenes, dim {DIM}, {len(plan):,} edits x {len(jobs)} banks = {cases_total:,} cases"
    )

    start = time.perf_counter()
    ours = score_jobs(y, jobs, tables, [K], None)
    t_ours = time.perf_counter() - start
    print(f"  ours            {t_ours:9.1f} s   ({t_ours / cases_total * 1e6:.1f} µs per case)")

    rng = np.random.default_rng(0)
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    unit_t = torch.from_numpy(unit)
    n = min(sample, len(plan))
    t_loop = t_batch = 0.0
    agree_loop = agree_rank = agree_batch = 0
    for j, job in enumerate(jobs):
        cases = np.sort(rng.choice(len(plan), n, replace=False))
        start = time.perf_counter()
        retrieved, rank = loop_scores(y, unit, job, tables[job.table], cases)
        t_loop += time.perf_counter() - start
        start = time.perf_counter()
        batch = batched_scores(y, unit_t, job, tables[job.table], cases)
        t_batch += time.perf_counter() - start
        mine = ours[(j, K)]
        agree_loop += int((mine.retrieved[cases] == retrieved).sum())
        agree_rank += int((mine.rank[cases] == rank).sum())
        agree_batch += int((mine.retrieved[cases] == batch).sum())
    scale = len(plan) / n
    loop_full, batch_full = t_loop * scale, t_batch * scale
    note = "" if n == len(plan) else f" (timed on {n:,} cases per bank, extrapolated x{scale:.0f})"
    print(f"  per-case loop   {loop_full:9.1f} s{note}   ratio loop / ours      = {loop_full / t_ours:6.1f}x")
    print(f"  batched matmul  {batch_full:9.1f} s{note}   ratio batched / ours   = {batch_full / t_ours:6.1f}x")
    checked = n * len(jobs)
    print(
        f"  agreement on {checked:,} sampled cases: best match {agree_loop / checked:.4%} (loop), "
        f"{agree_batch / checked:.4%} (batched); rank {agree_rank / checked:.4%}"
    )
    hits = {job.variant: float(ours[(j, K)].hit.mean()) for j, job in enumerate(jobs)}
    print("  retrieval hits: " + ", ".join(f"{b} {100 * h:.1f}%" for b, h in hits.items()))
    case = f"{size}: {len(scenes):,} scenes x {DIM}, {cases_total:,} cases ({len(plan):,} edits x {len(jobs)} banks)"
    timed = "" if n == len(plan) else f", timed on {n:,} cases per bank and extrapolated"
    agree = f"best match agrees with the baseline on {{:.4%}} of {checked:,} sampled cases"
    ours_name = "intervene.score.score_jobs (Gram blocks, gathered projections)"
    return [
        Measurement(
            case,
            ours_name,
            f"per-case numpy loop{timed}",
            "s",
            t_ours,
            loop_full,
            checks=agree.format(agree_loop / checked) + f"; rank on {agree_rank / checked:.4%}",
        ),
        Measurement(
            case,
            ours_name,
            f"batched matmul of edited vectors, {BATCH} rows per product{timed}",
            "s",
            t_ours,
            batch_full,
            checks=agree.format(agree_batch / checked),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="clevr,text")
    parser.add_argument("--sample", type=int, default=2000, help="cases per bank timed in the baselines")
    parser.add_argument("--noise", type=float, default=0.6)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    measured = []
    for size in args.sizes.split(","):
        measured += bench(size.strip(), args.sample, args.noise)
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
