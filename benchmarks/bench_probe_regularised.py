"""Benchmark the default ``regularised`` probe solver (docs/method/03-probes.md), cross-validation included,
against the solver it replaced and against scikit-learn.

What is timed, per case, in one run and on the same inputs
-----------------------------------------------------------
ours
    ``bindscope.estimators.regularised.fit_regularised`` on numpy arrays (each seed's 40% training scenes as
    ``probe_variant`` prepares them, float32): per seed, k-fold cross-validation over the strength and shrinkage
    grids, every setting refitted on all training scenes, each fit to a gradient norm of 1e-6. Hand-written
    gradients, the strengths solved from the largest down (each from the one above), no torch imported.
before
    The same call into ``benchmarks/regularised_autograd.py``, a frozen copy of the solver before issue 57
    (gradients by torch.autograd, every strength from zero), on torch tensors, with the torch threads its caller
    set (``bindscope.core.threads.threads_for``).
sklearn
    ``sklearn.linear_model.LogisticRegression`` (lbfgs, no intercept, ``tol`` 1e-6), one fit per probe, setting
    and fold, on the same folds, minimising the same objective: inputs whitened by the penalty's ``S`` (so that
    ``lam ||W S^½||²`` is ``lam ||V||²``), soft targets as weighted rows (a scene once per label it holds, weighted
    by its target), ``C = 1 / (2 lam n)``. Its refits on all training scenes are compared with ours, and where it
    ran every fit of a seed, its held-out losses and choices too.

Sizes (``--sizes``; planted ``object_additive`` embeddings, ``--dim`` 384, noise 1.0; 2-object scenes):
``clevr`` (576 scenes: 24 objects), ``10k`` (9,900 scenes: every ordered pair of a 10 x 10 space's 100 objects)
and ``text`` (160,000 scenes: 20 x 20, the ``text`` preset). The work of each size is in :data:`WORK`: at
``10k`` and ``text`` the default grid takes far longer than a benchmark run on 2 cores (at ``10k``, about 85 s
of one core for ours and 145 s for before per seed; at ``text``, hours), so fewer seeds, settings or folds are
timed, the same for all three (said in the case label). sklearn, one fit at a time, runs on the first seed
only, and at ``10k`` and ``text`` on a random sample of its fits; its time is scaled to all of them (said in
the baseline's label). ``--emb`` adds cases of embedding folders at the clevr work. ``--csv`` names the results
file (default ``benchmarks/results/bench_probe_regularised.csv``).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_probe_regularised.py [--sizes clevr,10k,text] [--emb EMB_DIR,...] [--csv PATH]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import regularised_autograd as before
import torch
from record import Measurement, add_csv_argument, write_results
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from bindscope.analyses import load_inputs
from bindscope.core.threads import SMALL_WORK, threads_for
from bindscope.data.presets import get_preset
from bindscope.estimators import regularised
from bindscope.estimators.probe_runs import ProbeSettings, seed_splits, select_scenes
from bindscope.estimators.probes import soft_targets, stack_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SIZES = ("clevr", "10k", "text")


@dataclass(frozen=True)
class Work:
    """What one size times: seeds, grids and folds; sklearn runs on the first ``sklearn_seeds`` seeds and a share
    ``sklearn_share`` of their fits (its time then scaled to all of them)."""

    seeds: tuple[int, ...]
    strengths: tuple[float, ...] = regularised.DEFAULT_STRENGTHS
    shrinkage: tuple[float, ...] = regularised.DEFAULT_SHRINKAGE
    folds: int = regularised.DEFAULT_FOLDS
    sklearn_seeds: int = 1
    sklearn_share: float = 1.0

    @property
    def grid(self) -> tuple[float, ...]:
        """The strengths in the solver's order (ascending)."""
        return regularised.check_strengths(self.strengths)

    @property
    def rhos(self) -> tuple[float, ...]:
        """The shrinkages in the solver's order (ascending)."""
        return regularised.check_shrinkage(self.shrinkage)

    def label(self) -> str:
        grid = "the default grid" if self.strengths == regularised.DEFAULT_STRENGTHS else f"strengths {self.strengths}"
        rhos = "" if self.shrinkage == regularised.DEFAULT_SHRINKAGE else f", shrinkage {self.shrinkage}"
        return f"{len(self.seeds)} seed(s), {grid}{rhos}, {self.folds} folds"

    def sklearn_label(self) -> str:
        """What of sklearn's work was timed, when not all of it."""
        parts = []
        if self.sklearn_seeds < len(self.seeds):
            parts.append(f"{self.sklearn_seeds} of {len(self.seeds)} seeds")
        if self.sklearn_share < 1:
            parts.append(f"a random {100 * self.sklearn_share:.0f}% of the fits")
        return f"; timed on {' and '.join(parts)}, scaled to all" if parts else ""


WORK = {
    "clevr": Work(seeds=(0, 1, 2)),
    "10k": Work(seeds=(0,), strengths=(1e-3, 0.01, 0.1, 1.0), shrinkage=(0.01,), sklearn_share=0.1),
    "text": Work(seeds=(0,), strengths=(1.0, 10.0), shrinkage=(0.01,), folds=2, sklearn_share=0.15),
}


def planted_space(size: str, dim: int) -> tuple[np.ndarray, SceneSet]:
    """Planted embeddings and the 2-object scenes of one size."""
    if size == "10k":
        space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(10)], "shape": [f"s{i}" for i in range(10)]})
        scenes = SceneSet.enumerate(space, 2)
    else:
        scenes = get_preset(size).build_scenes()
    y = planted_embeddings(scenes, "object_additive", dim=dim, noise=1.0, seed=0)
    _, y, scenes, _ = select_scenes(y, scenes, "full")
    return y, scenes


def training_arrays(y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, list]:
    """Each seed's training inputs ``[F, n, D]`` and targets ``[F, n, L]`` (float32), as ``probe_variant`` makes
    them, and the probes' blocks of labels."""
    settings = ProbeSettings(seeds=seeds)
    _, blocks, t_all = stack_targets(soft_targets(scenes), len(y))
    prep = settings.preprocessing
    xs, ts = [], []
    for sp in seed_splits(len(y), settings).values():
        xs.append(prep.apply(y[sp.train], prep.fit(y[sp.train])).astype(np.float32))
        ts.append(t_all[sp.train])
    return np.stack(xs), np.stack(ts), blocks


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def knobs(work: Work) -> dict[str, Any]:
    return {"strengths": work.strengths, "shrinkage": work.shrinkage, "folds": work.folds}


def run_ours(x: np.ndarray, t: np.ndarray, blocks: list, work: Work) -> regularised.RegularisedFit:
    """Ours with the thread rule of ``threads_for`` applied to numpy's BLAS (one thread for small work)."""
    _, n, d = x.shape
    with threadpool_limits(1 if n * d * t.shape[2] < SMALL_WORK else None):
        return regularised.fit_regularised(x, t, blocks, list(work.seeds), **knobs(work))


def run_before(x: np.ndarray, t: np.ndarray, blocks: list, work: Work) -> Any:
    """The frozen solver as its caller ran it (``fit_regularised_probes``: torch threads by work size)."""
    _, n, d = x.shape
    with threads_for(n * d * t.shape[2]):
        return before.fit_regularised(torch.from_numpy(x), torch.from_numpy(t), blocks, list(work.seeds), **knobs(work))


# -- the sklearn baseline ----------------------------------------------------------------------------------------
def whiten(x: np.ndarray, rho: float) -> np.ndarray:
    """``S^-½`` on the span of ``S`` (the penalty's matrix of the rows ``x``): ``[D, r]``."""
    second = x.T @ x / len(x)
    s = (1 - rho) * second + rho * np.trace(second) / x.shape[1] * np.eye(x.shape[1])
    e, v = np.linalg.eigh(s)
    keep = e > e.max() * regularised.RANK_TOL
    return v[:, keep] / np.sqrt(e[keep])


def sklearn_fit(z: np.ndarray, t: np.ndarray, lam: float) -> LogisticRegression:
    """One probe's penalised soft-target fit: each scene once per label it holds, weighted by its target."""
    rows, labels = np.nonzero(t)
    model = LogisticRegression(C=1 / (2 * lam * len(z)), fit_intercept=False, tol=regularised.GRAD_TOL, max_iter=10_000)
    return model.fit(z[rows], labels, sample_weight=t[rows, labels])


def held_out_loss(model: LogisticRegression, z: np.ndarray, t: np.ndarray) -> float:
    if len(model.classes_) != t.shape[1]:
        raise RuntimeError("a label is missing from a fold's training scenes: sklearn cannot score it")
    return float(-(t * model.predict_log_proba(z)).sum(1).mean())


@dataclass
class SklearnRun:
    """sklearn's seconds for one seed (scaled to all its fits), its held-out losses ``[P, G, B]`` (None when
    sampled), and the largest gap between its refits on all training scenes and ours, relative to ours."""

    seconds: float
    loss: np.ndarray | None
    refit_gap: float


def sklearn_cv(x: np.ndarray, t: np.ndarray, blocks: list, seed: int, work: Work, path: np.ndarray) -> SklearnRun:
    """sklearn's cross-validation and refits for one seed (fold fits and refits in random order when sampled),
    compared with our refits ``path`` ``[P, G, L, D]`` of the same seed."""
    n, k = len(x), work.folds
    folds = regularised.fold_ids(n, k, seed)
    fits = list(np.ndindex(k + 1, len(work.rhos), len(work.grid), len(blocks)))
    if work.sklearn_share < 1:
        pick = np.random.default_rng(seed).choice(len(fits), max(1, round(work.sklearn_share * len(fits))), False)
        fits = [fits[i] for i in sorted(pick)]
    x64, t64 = x.astype(np.float64), t.astype(np.float64)
    loss = np.zeros((len(work.rhos), len(work.grid), len(blocks), k))
    maps: dict[tuple[int, int], np.ndarray] = {}
    refits: dict[tuple[int, int, int], np.ndarray] = {}
    start = time.perf_counter()
    for j, p, g, b in fits:
        train = folds != j if j < k else np.ones(n, dtype=bool)
        if (j, p) not in maps:
            maps[j, p] = whiten(x64[train], work.rhos[p])
        model = sklearn_fit(x64[train] @ maps[j, p], t64[train][:, blocks[b]], work.grid[g])
        if j < k:
            loss[p, g, b, j] = held_out_loss(model, x64[~train] @ maps[j, p], t64[~train][:, blocks[b]])
        else:
            refits[p, g, b] = model.coef_ @ maps[j, p].T
    seconds = (time.perf_counter() - start) * (k + 1) * loss[..., 0].size / len(fits)
    scale = np.abs(path).max()
    gap = max((np.abs(w - path[p, g, blocks[b]]).max() / scale for (p, g, b), w in refits.items()), default=np.nan)
    return SklearnRun(seconds, None if work.sklearn_share < 1 else loss.mean(-1), float(gap))


# -- one case -----------------------------------------------------------------------------------------------------
def chosen(fit: Any) -> list[list[tuple[float, float]]]:
    return [[(c.shrinkage, c.strength) for c in row] for row in fit.choices]


def measure(case: str, x: np.ndarray, t: np.ndarray, blocks: list, work: Work) -> list[Measurement]:
    what = f"{case}, {work.label()}"
    print(f"\n{what}", flush=True)
    t_ours, ours = timed(lambda: run_ours(x, t, blocks, work))
    print(f"  ours {t_ours:.1f} s; choices {chosen(ours)}", flush=True)
    t_before, old = timed(lambda: run_before(x, t, blocks, work))
    path = np.asarray(ours.path, dtype=np.float64)  # [F, P, G, L, D]
    gap = float(np.abs(old.path.double().numpy() - path).max() / np.abs(path).max())
    same = chosen(ours) == chosen(old)
    print(f"  before {t_before:.1f} s (before / ours {t_before / t_ours:.2f}); same choices {same}, weights {gap:.1e}")
    runs = [
        sklearn_cv(x[i], t[i], blocks, seed, work, path[i]) for i, seed in enumerate(work.seeds[: work.sklearn_seeds])
    ]
    t_sk = sum(r.seconds for r in runs) * len(work.seeds) / len(runs)
    sk_check = f"sklearn's refits within {max(r.refit_gap for r in runs):.1e} of ours (of the largest weight)"
    for i, run in enumerate(runs):
        if run.loss is None:
            continue
        worst = max(
            float(np.abs(np.asarray(c.cv_loss) - run.loss[..., j]).max()) for j, c in enumerate(ours.choices[i])
        )
        picks = [np.unravel_index(run.loss[..., j].argmin(), run.loss.shape[:2]) for j in range(len(blocks))]
        sk_same = [(work.rhos[p], work.grid[g]) for p, g in picks] == chosen(ours)[i]
        sk_check += f"; seed {work.seeds[i]}: held-out losses within {worst:.1e}, same choices {sk_same}"
    print(f"  sklearn {t_sk:.1f} s (sklearn / ours {t_sk / t_ours:.2f}); {sk_check}", flush=True)
    note = work.sklearn_label()
    return [
        Measurement(
            what,
            "fit_regularised on numpy (hand-written gradients, strength path)",
            "the solver before issue 57 (torch autograd, every strength from zero; benchmarks/regularised_autograd.py)",
            "s",
            t_ours,
            t_before,
            checks=f"same chosen settings {same}; largest weight difference {gap:.1e} of the largest weight",
        ),
        Measurement(
            what,
            "fit_regularised on numpy (hand-written gradients, strength path)",
            f"sklearn LogisticRegression (lbfgs, tol 1e-6) per probe, setting and fold, C = 1/(2 lam n){note}",
            "s",
            t_ours,
            t_sk,
            checks=sk_check,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated subset of {','.join(SIZES)}")
    parser.add_argument("--emb", default="", help="embedding folders, comma-separated, timed at the clevr work")
    parser.add_argument("--dim", type=int, default=384, help="width of the planted embeddings")
    add_csv_argument(parser, __file__)
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if not sizes and not args.emb or any(s not in SIZES for s in sizes):
        parser.error(f"--sizes takes a comma-separated subset of {','.join(SIZES)}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    measured = []
    for folder in filter(None, args.emb.split(",")):
        arrays = load_inputs("probe", folder, find_siblings=False).arrays()
        _, y, scenes, _ = select_scenes(arrays.embeddings, arrays.scenes, "full")
        x, t, blocks = training_arrays(y, scenes, WORK["clevr"].seeds)
        name = f"{Path(folder).parent.name}/{Path(folder).name}"
        measured += measure(f"{name} ({len(y):,} scenes x {y.shape[1]})", x, t, blocks, WORK["clevr"])
    for size in sizes:
        y, scenes = planted_space(size, args.dim)
        x, t, blocks = training_arrays(y, scenes, WORK[size].seeds)
        case = f"{size}: {len(y):,} scenes ({x.shape[1]:,} training x {x.shape[2]}, {t.shape[2]} labels)"
        measured += measure(case, x, t, blocks, WORK[size])
    print(f"\nwrote {write_results(__file__, measured, args.csv, argv=None if argv is None else list(argv))}")


if __name__ == "__main__":
    main()
