"""Benchmark the probe and decomposition suite (docs/method/03-probes.md, docs/method/04-decomposition.md) against
the paper's way of computing it.

What is timed
-------------
ours
    One call of ``bindscope.analyses.decompose.decompose_analysis(y, scenes, ProbeSettings())``: R^2 of the
    four additive models on each seed's 80/20 scene split (plus its permuted-label control),
    and the five subtraction probe runs (base, objects, objects_perm, concepts, concepts_perm)
    on each seed's 40/60 split with the default ``fast`` optimiser.
baseline
    The paper's way, written out here: for each model and seed a dense one-hot design matrix
    and ``numpy.linalg.lstsq``; for each variant (residuals from
    ``bindscope.estimators.additive.subtract``, as ours) and seed one probe fit at a time with
    autograd: ``nn.Linear``'s initialisation, ``torch.optim.Adam`` (lr 1e-2) with
    ``CosineAnnealingLR`` over 10,000 full-batch steps, scored by set separation on the test
    scenes.

Data: planted ``object_additive`` embeddings (dim 512) of the ``clevr`` (576 scenes) and
``text`` (160,400 scenes) presets, with Gaussian noise so that test accuracies are not
saturated. At clevr size the baseline runs in full and both sides' R^2 and test accuracies are
compared. At text size the baseline would take about a day on a small CPU, so its probe time
is extrapolated from ``--text-steps`` Adam steps of one fit, and its lstsq time from the first
seed when all seeds would take over two minutes; the output says which numbers are
extrapolated.

``fast`` follows the reference Adam trajectory exactly (solver ``reference``) for a probe whose
training set is separable -- always at clevr size, 230 training scenes < 512 dimensions -- and
otherwise uses L-BFGS (``lbfgs``), whose optimum the reference schedule also reaches; a
separable probe whose reference run would exceed the exact budget keeps an approximate L-BFGS
fit (``lbfgs-separable``). The count of each is printed. The noise defaults differ per size:
at text size the object probes of some variants separate their 64,160 training scenes up to a
noise of about 6, so the default there (8) keeps every probe on the ``lbfgs`` path.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_probe_suite.py [--sizes clevr,text] [--noise X] [--text-steps N] [--seeds N] \\
        [--csv PATH]

The figures go to ``benchmarks/results/bench_probe_suite.csv`` (or ``--csv``): one row per size.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.decompose import SUBTRACTION_VARIANTS, decompose_analysis
from bindscope.data.presets import get_preset
from bindscope.estimators.additive import MODELS, design_columns, r2_score, subtract
from bindscope.estimators.probe_runs import ProbeSettings
from bindscope.estimators.probes import (
    OBJECT,
    _default_init,
    _loss,
    set_separation_correct,
    soft_targets,
    stack_targets,
)
from bindscope.space.concepts import PAD, SceneSet
from bindscope.space.planted import planted_embeddings
from bindscope.space.splits import scene_split

SIZES = ("clevr", "text")
DEFAULT_NOISE = {"clevr": 1.5, "text": 8.0}
DIM = 512
STEPS, LR = 10_000, 1e-2
PROBE_TRAIN, R2_TEST = 0.4, 0.2
LSTSQ_FULL_LIMIT_S = 120.0
Accuracy = dict[str, tuple[float, float]]  # variant -> (object_acc, concept_acc), means over seeds


# -- ours -------------------------------------------------------------------------------------------
def time_ours(y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]) -> tuple[float, pd.DataFrame, list[str]]:
    """Seconds of one ``decompose_analysis`` call, its table, and the solver of every probe it fitted."""
    start = time.perf_counter()
    table, solvers = decompose_analysis(y, scenes, ProbeSettings(seeds=seeds))
    seconds = time.perf_counter() - start
    return seconds, table, [s for per_seed in solvers.values() for per in per_seed.values() for s in per.values()]


def ours_r2(table: pd.DataFrame) -> dict[tuple[str, int, str], float]:
    rows = table[(table.part == "additive") & (table.control == "none")]
    return {(r.variant, r.seed, r.group): r.value for r in rows.itertuples()}


def ours_accuracy(table: pd.DataFrame) -> Accuracy:
    rows = table[(table.part == "subtraction") & (table.group == "test")]
    mean = rows.groupby(["variant", "metric"]).value.mean()
    return {v: (mean[v, "object_acc"], mean[v, "concept_acc"]) for v in SUBTRACTION_VARIANTS}


# -- baseline: dense least squares ------------------------------------------------------------------
def dense_design(columns: np.ndarray, width: int) -> np.ndarray:
    """The one-hot design as a dense float64 matrix (a column used twice in a row counts 2)."""
    rows = np.broadcast_to(np.arange(len(columns))[:, None], columns.shape)
    present = columns != PAD
    design = np.zeros((len(columns), width))
    np.add.at(design, (rows[present], columns[present]), 1.0)
    return design


def lstsq_r2(y: np.ndarray, scenes: SceneSet, seed: int) -> dict[tuple[str, int, str], float]:
    """R^2 on train and test of every model for one seed's split, by ``numpy.linalg.lstsq``."""
    sp = scene_split(len(y), 1.0 - R2_TEST, seed)
    out = {}
    for model in MODELS:
        columns, width = design_columns(scenes, model)
        design = dense_design(columns[sp.train], width)
        coef = np.linalg.lstsq(design, y[sp.train].astype(np.float64), rcond=None)[0]
        for split, idx in (("train", sp.train), ("test", sp.test)):
            out[model, seed, split] = r2_score(y[idx], dense_design(columns[idx], width) @ coef)
    return out


def baseline_r2(y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]) -> tuple[float, dict, bool]:
    """Seconds and R^2 values of the lstsq part; extrapolated from the first seed (True) if over the limit."""
    start = time.perf_counter()
    r2 = lstsq_r2(y, scenes, seeds[0])
    first = time.perf_counter() - start
    if first * len(seeds) >= LSTSQ_FULL_LIMIT_S:
        return first * len(seeds), r2, True
    for seed in seeds[1:]:
        r2 |= lstsq_r2(y, scenes, seed)
    return time.perf_counter() - start, r2, False


# -- baseline: one autograd probe fit at a time -----------------------------------------------------
def residuals(y: np.ndarray, scenes: SceneSet) -> dict[str, np.ndarray]:
    """The five variants' embeddings, made as ``decompose_analysis`` makes them."""
    out = {}
    for variant in SUBTRACTION_VARIANTS:
        model = "object_additive" if variant.startswith("objects") else "concept_additive"
        out[variant] = y if variant == "base" else subtract(scenes, y, model, permuted=variant.endswith("_perm"))
    return out


def adam_fit(x: torch.Tensor, t: torch.Tensor, blocks: list[slice], seed: int, steps: int) -> torch.Tensor:
    """``steps`` full-batch Adam steps with cosine decay over the paper's 10,000; the weights ``[L, D]``."""
    w = _default_init(t.shape[1], x.shape[1], seed).requires_grad_()
    opt = torch.optim.Adam([w], lr=LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    for _ in range(steps):
        opt.zero_grad()
        _loss(x, w, t, blocks).backward()
        opt.step()
        schedule.step()
    return w.detach()


def test_accuracy(
    w: torch.Tensor, x: np.ndarray, t: np.ndarray, names: tuple[str, ...], blocks: list[slice]
) -> tuple[float, float]:
    """object_acc and concept_acc (mean over the concepts) by set separation."""
    logits = x @ w.numpy().T
    acc = {n: set_separation_correct(logits[:, b], t[:, b]).mean() for n, b in zip(names, blocks)}
    return float(acc[OBJECT]), float(np.mean([a for n, a in acc.items() if n != OBJECT]))


def baseline_probes(y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]) -> tuple[float, Accuracy]:
    """Seconds (residuals included) and test accuracies of all 5 x seeds fits, one at a time."""
    start = time.perf_counter()
    names, blocks, t_all = stack_targets(soft_targets(scenes), len(scenes))
    acc = {}
    for variant, x_all in residuals(y, scenes).items():
        per_seed = []
        for seed in seeds:
            sp = scene_split(len(scenes), PROBE_TRAIN, seed)
            x, t = torch.from_numpy(x_all[sp.train]), torch.from_numpy(t_all[sp.train])
            w = adam_fit(x, t, blocks, seed, STEPS)
            per_seed.append(test_accuracy(w, x_all[sp.test], t_all[sp.test], names, blocks))
        acc[variant] = tuple(np.mean(per_seed, axis=0))
    return time.perf_counter() - start, acc


def baseline_probes_extrapolated(
    y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...], steps: int
) -> tuple[float, float, float]:
    """Seconds of the residuals (measured), seconds per Adam step of one base fit, and the projected total."""
    start = time.perf_counter()
    residuals(y, scenes)
    prep = time.perf_counter() - start
    _, blocks, t_all = stack_targets(soft_targets(scenes), len(scenes))
    sp = scene_split(len(scenes), PROBE_TRAIN, seeds[0])
    x, t = torch.from_numpy(y[sp.train]), torch.from_numpy(t_all[sp.train])
    adam_fit(x, t, blocks, seeds[0], 1)  # warm-up
    start = time.perf_counter()
    adam_fit(x, t, blocks, seeds[0], steps)
    per_step = (time.perf_counter() - start) / steps
    return prep, per_step, prep + per_step * STEPS * len(SUBTRACTION_VARIANTS) * len(seeds)


# -- report -----------------------------------------------------------------------------------------
def clock(seconds: float) -> str:
    return f"{seconds:9.1f} s" + (f"  (= {seconds / 3600:.1f} h)" if seconds >= 3600 else "")


def solver_lines(solvers: list[str]) -> list[str]:
    """How many probes took each path of ``fast``."""
    counts = ", ".join(f"{solvers.count(s)} {s}" for s in sorted(set(solvers)))
    return [
        f"solvers   ours, {len(solvers)} probes: {counts}",
        "          (reference = exact Adam trajectory, lbfgs = unique optimum, lbfgs-separable = approximate)",
    ]


def accuracy_table(ours: Accuracy, baseline: Accuracy | None, seeds: int) -> list[str]:
    """Test accuracies in %, mean over seeds; with the baseline and the difference in points when given."""
    if baseline is None:
        lines = [
            f"test accuracy (%), ours, mean over {seeds} seeds",
            f"  {'variant':<14}{'object_acc':>11}{'concept_acc':>12}",
        ]
        return lines + [f"  {v:<14}{100 * o:>11.2f}{100 * c:>12.2f}" for v, (o, c) in ours.items()]
    lines = [
        f"test accuracy (%), mean over {seeds} seeds; diff = ours - baseline in points",
        f"  {'variant':<14}{'object_acc: ours':>17}{'base':>8}{'diff':>7}"
        f"{'concept_acc: ours':>20}{'base':>8}{'diff':>7}",
    ]
    for v, (o, c) in ours.items():
        bo, bc = baseline[v]
        lines.append(
            f"  {v:<14}{100 * o:>17.2f}{100 * bo:>8.2f}{100 * (o - bo):>+7.2f}"
            f"{100 * c:>20.2f}{100 * bc:>8.2f}{100 * (c - bc):>+7.2f}"
        )
    return lines


def run_size(size: str, noise: float, seeds: tuple[int, ...], text_steps: int) -> Measurement:
    scenes = get_preset(size).build_scenes()
    y = planted_embeddings(scenes, "object_additive", dim=DIM, noise=noise, seed=0)
    fits = len(SUBTRACTION_VARIANTS) * len(seeds)
    print(
        f"== {size}: {len(scenes):,} scenes, planted object_additive, dim {DIM}, noise {noise:g}, "
        f"{len(seeds)} seeds ({fits} probe fits) ==",
        flush=True,
    )
    ours_s, table, solvers = time_ours(y, scenes, seeds)
    print(f"ours      decompose_analysis, fast optimiser            {clock(ours_s)}", flush=True)
    lstsq_s, r2, lstsq_extra = baseline_r2(y, scenes, seeds)
    lstsq_how = f"extrapolated: first seed x {len(seeds)}" if lstsq_extra else "measured"
    if size == "clevr":
        probe_s, base_acc = baseline_probes(y, scenes, seeds)
        probe_how = f"measured, {fits} fits x {STEPS:,} steps"
    else:
        prep_s, per_step, probe_s = baseline_probes_extrapolated(y, scenes, seeds, text_steps)
        base_acc = None
        probe_how = (
            f"EXTRAPOLATED: {per_step:.3f} s/step from {text_steps} steps of one fit, "
            f"x {STEPS:,} steps x {fits} fits, + {prep_s:.1f} s residuals (measured)"
        )
    total = lstsq_s + probe_s
    label = "EXTRAPOLATED" if size != "clevr" or lstsq_extra else "measured"
    ours_r2_values = ours_r2(table)
    r2_diff = max(abs(ours_r2_values[k] - v) for k, v in r2.items())
    print(
        "\n".join(
            [
                f"baseline  dense lstsq + autograd Adam, one fit at a time  {clock(total)}  [{label}]",
                f"            lstsq  {lstsq_s:9.1f} s  ({lstsq_how})",
                f"            probes {probe_s:9.1f} s  ({probe_how})",
                f"speed-up  {total / ours_s:,.1f}x  (baseline / ours)",
                *solver_lines(solvers),
                f"R^2       max |ours - baseline| over {len(r2)} values (model x seed x split): {r2_diff:.1e}",
                *accuracy_table(ours_accuracy(table), base_acc, len(seeds)),
            ]
        )
    )
    if base_acc is None:
        print(
            "          baseline accuracy not measured: where a training set is not separable (solver lbfgs)\n"
            "          the loss has a unique optimum in logit space, which the reference schedule also reaches"
        )
    print(flush=True)
    checks = f"R2 within {r2_diff:.1e} of the baseline ({len(r2)} values)"
    if base_acc is not None:
        ours_acc = ours_accuracy(table)
        worst = max(abs(a - b) for v in ours_acc for a, b in zip(ours_acc[v], base_acc[v]))
        checks += f"; test accuracies within {100 * worst:.2f} points (mean over seeds)"
    else:
        checks += "; baseline accuracies not measured"
    lstsq_note = "" if not lstsq_extra else f"; lstsq extrapolated from the first seed x {len(seeds)}"
    probe_note = "" if size == "clevr" else f"; probes EXTRAPOLATED from {text_steps} Adam steps of one fit"
    return Measurement(
        f"{size}: {len(scenes):,} scenes x {DIM}, planted object_additive, noise {noise:g}, {len(seeds)} seeds",
        "decompose_analysis, fast optimiser",
        f"dense numpy lstsq + autograd Adam ({STEPS:,} steps), one fit at a time{lstsq_note}{probe_note}",
        "s",
        ours_s,
        total,
        checks=checks,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated subset of clevr,text (default both)")
    parser.add_argument(
        "--noise",
        type=float,
        default=None,
        help="noise of the planted embeddings for every size (default: clevr 1.5, text 8)",
    )
    parser.add_argument(
        "--text-steps", type=int, default=20, help="Adam steps of one fit timed for the text-size baseline (default 20)"
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if not args.sizes or any(s not in SIZES for s in args.sizes):
        parser.error(f"--sizes takes a comma-separated subset of {','.join(SIZES)}")
    if args.noise is not None and args.noise < 0:
        parser.error("--noise must be >= 0")
    if args.text_steps < 1 or args.seeds < 1:
        parser.error("--text-steps and --seeds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    measured = []
    for size in args.sizes:
        noise = DEFAULT_NOISE[size] if args.noise is None else args.noise
        measured.append(run_size(size, noise, tuple(range(args.seeds)), args.text_steps))
    print(f"wrote {write_results(__file__, measured, args.csv, argv=argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
