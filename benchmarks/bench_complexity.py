"""Benchmark the binding-function complexity sweep (docs/method/06-complexity.md) against fitting one model at a time.

What is timed
-------------
ours
    One call of ``bindscope.analyses.complexity.complexity_sweep`` with the default settings: 9 fractions
    (0.1 ... 0.9) x 3 seeds x the 5 families (``mlp`` at width 1024) under the ``cpu`` budget
    (the default on a CPU: at most 400 epochs, validation every 20, early stopping after 8
    checks without improvement, at most 1,024 training scenes per fit and 5,000 scored scenes per
    group). Every (fraction, seed) model of a family is fitted in stacks, and scored under frozen
    probes.
ours, no early stopping
    The same with ``patience`` off (every model runs every epoch), to separate what stacking and
    folding save from what early stopping saves. Clevr size only.
baseline
    The paper's way, written out here, with the same budget and the same scenes (the same plans):
    one ``nn.Module`` per (family, fraction, seed) with ``nn.Embedding`` tables per slot, the
    family's formula written literally (``mlp`` on the concatenated embeddings), initialised with
    the same parameters as ours, ``torch.optim.Adam`` + ``CosineAnnealingLR`` full batch for every
    epoch of the budget, a validation check every ``eval_every`` epochs keeping the best state,
    then the same scoring. At clevr size it runs in full and its test accuracies are compared
    with ours (no early stopping: the same trajectories). At text size it would take hours, so
    each family's epoch time is measured on one model at the capped training size for
    ``--slice-epochs`` epochs and extrapolated to every model and epoch (scaled by each model's
    training size; validation and scoring time are left out, which favours the baseline); the
    output says so.

Data: planted embeddings (``--kind``, default ``mult_within_object``, dim 512, noise 0.5) of the
``clevr`` (576 scenes) and ``text`` (160,000 pairs) presets; probes fitted by L-BFGS on (a
sample of) the scenes, not timed.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_complexity.py [--sizes clevr,text] [--kind K] [--slice-epochs N] [--csv PATH]

The figures go to ``benchmarks/results/bench_complexity.csv`` (or ``--csv``): per size, ours (early
stopping) against the baseline, and at clevr size also ours without early stopping against it.
"""

from __future__ import annotations

import argparse
import copy
import math
import time

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results
from torch import nn

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.analyses.complexity.families import Family, Layout, init_params
from bindscope.analyses.complexity.plan import plan_sweep
from bindscope.analyses.complexity.score import score
from bindscope.data.presets import get_preset
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import SceneSet
from bindscope.space.planted import planted_embeddings

DIM = 512
PROBE_ROWS = 20_000


class Literal(nn.Module):
    """One approximator written as docs/method/06-complexity.md states it (per-slot ``nn.Embedding`` tables)."""

    def __init__(self, family: Family, scenes: SceneSet, width: int, params: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.family, self.k, self.sizes = family, scenes.max_objects, scenes.space.sizes
        self.tables = nn.ModuleList(nn.Embedding(v, width) for _ in range(self.k) for v in self.sizes)
        self._load_table(self.tables, params["table"][0])
        if family.name == "sum_mult":
            self.adds = nn.ModuleList(nn.Embedding(v, width) for _ in range(self.k) for v in self.sizes)
            self._load_table(self.adds, params["table_add"][0])
        if family.name == "mlp":
            w1 = torch.cat([params[f"w1.{s}"][0] for s in range(len(self.tables))], dim=1)  # [h, S * d]
            self.hidden = nn.Linear(w1.shape[1], w1.shape[0])
            self.hidden.weight.data, self.hidden.bias.data = w1.clone(), params["b1"][0].clone()
        self.out = nn.Linear(params["w"].shape[2], params["w"].shape[1])
        self.out.weight.data, self.out.bias.data = params["w"][0].clone(), params["b"][0].clone()

    def _load_table(self, tables: nn.ModuleList, flat: torch.Tensor) -> None:
        start = 0
        for emb in tables:
            emb.weight.data = flat[start : start + emb.num_embeddings].clone()
            start += emb.num_embeddings

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        c = len(self.sizes)
        es = [self.tables[k * c + j](values[:, k, j]) for k in range(self.k) for j in range(c)]
        name = self.family.name
        if name == "mlp":
            return self.out(torch.relu(self.hidden(torch.cat(es, dim=1))))
        if name == "additive":
            z = sum(es)
        elif name == "mult":
            z = math.prod(es)
        elif name == "mult_within_object":
            z = sum(math.prod(es[k * c : (k + 1) * c]) for k in range(self.k))
        else:
            fs = [self.adds[k * c + j](values[:, k, j]) for k in range(self.k) for j in range(c)]
            z = torch.cat([math.prod(es), sum(fs)], dim=1)
        return self.out(z)


def fit_literal(
    model: Literal,
    values: torch.Tensor,
    y: torch.Tensor,
    val_values: torch.Tensor,
    val_y: torch.Tensor,
    epochs: int,
    lr: float,
    eval_every: int,
) -> Literal:
    """The paper's loop: full-batch Adam + cosine, keep the state with the best validation MSE."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs, eta_min=0.0)
    best, best_state = math.inf, None
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        nn.functional.mse_loss(model(values), y).backward()
        opt.step()
        sched.step()
        if epoch % eval_every == 0 or epoch == epochs:
            with torch.no_grad():
                val = nn.functional.mse_loss(model(val_values), val_y).item()
            if val < best * (1 - 1e-4):
                best, best_state = val, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    return model


def baseline(y, scenes, probes, settings, *, slice_epochs: int | None) -> tuple[float, dict[str, float], bool]:
    """Seconds of the one-at-a-time sweep (measured, or extrapolated from a slice), test accuracies."""
    plans = plan_sweep(scenes, settings)
    layout, width = Layout.of(scenes), DIM
    values = torch.as_tensor(scenes.scenes.astype(np.int64))
    yt = torch.as_tensor(y)
    targets = soft_targets(scenes)
    budget = settings.budget
    total, acc = 0.0, {}
    per_family: dict[str, float] = {}
    for family in settings.families():
        before = total
        if slice_epochs is not None:  # time a slice of one model at the largest training size
            big = max(plans, key=lambda p: len(p.train))
            model = Literal(family, scenes, width, init_params(family, layout, width, DIM, [big.seed]))
            start = time.perf_counter()
            fit_literal(
                model,
                values[big.train],
                yt[big.train],
                values[big.groups["validation"]],
                yt[big.groups["validation"]],
                slice_epochs,
                settings.lr,
                slice_epochs,
            )
            per_scene_epoch = (time.perf_counter() - start) / slice_epochs / len(big.train)
            total += per_scene_epoch * budget.epochs * sum(len(p.train) for p in plans)
            per_family[family.label] = round(total - before, 1)
            continue
        start = time.perf_counter()
        accs = []
        for p in plans:
            model = Literal(family, scenes, width, init_params(family, layout, width, DIM, [p.seed]))
            fit_literal(
                model,
                values[p.train],
                yt[p.train],
                values[p.groups["validation"]],
                yt[p.groups["validation"]],
                budget.epochs,
                settings.lr,
                budget.eval_every,
            )
            idx = p.groups["test_only"]
            with torch.no_grad():
                pred = model(values[idx]).numpy()
            accs.append(score(pred, y[idx], {n: v[idx] for n, v in targets.items()}, probes)["object_acc"])
        total += time.perf_counter() - start
        acc[family.label] = float(np.mean(accs))
        per_family[family.label] = round(total - before, 1)
    print(f"baseline per family (s): {per_family}", flush=True)
    return total, acc, slice_epochs is not None


def ours(y, scenes, probes, settings) -> tuple[float, dict[str, float], dict]:
    start = time.perf_counter()
    result = complexity_sweep(y, scenes, probes, settings)
    seconds = time.perf_counter() - start
    summary = complexity_summary(result, settings).numbers()
    table = result.table
    sel = table[(table.group == "test_only") & (table.metric == "object_acc") & (table.checkpoint == "selected")]
    acc = sel.groupby("variant")["value"].mean().to_dict()
    return seconds, acc, summary


def _seconds(summary: dict) -> dict[str, float]:
    return {k: v["seconds"] for k, v in summary["approximators"].items()}


def run(size: str, kind: str, slice_epochs: int) -> list[Measurement]:
    scenes = get_preset(size).build_scenes()
    scenes = scenes.subset(np.flatnonzero(scenes.num_objects() == 2))
    y = planted_embeddings(scenes, kind, dim=DIM, noise=0.5, seed=0)
    rows = np.random.default_rng(0).choice(len(scenes), min(PROBE_ROWS, len(scenes)), replace=False)
    probes = ProbeSet("lbfgs", max_iter=200).fit(y[rows], {k: v[rows] for k, v in soft_targets(scenes).items()})
    settings = ComplexitySettings(budget=resolve_budget("cpu"), description_length=False)
    print(
        f"\n== {size}: {len(scenes):,} scenes x {DIM}, planted {kind}; default sweep (9 fractions x 3 seeds x 5 "
        f"families, mlp 1024), budget {settings.budget.to_dict()}",
        flush=True,
    )
    t_ours, acc_ours, summary = ours(y, scenes, probes, settings)
    print(f"ours (stacked, early stopping): {t_ours:8.1f} s   per family (s): {_seconds(summary)}", flush=True)
    extrapolated = size != "clevr"
    plain = settings.replace(budget=settings.budget.replace(patience=None))
    if not extrapolated:
        t_plain, acc_plain, plain_summary = ours(y, scenes, probes, plain)
        print(
            f"ours (stacked, every epoch):    {t_plain:8.1f} s   per family (s): {_seconds(plain_summary)}", flush=True
        )
    t_base, acc_base, _ = baseline(y, scenes, probes, plain, slice_epochs=slice_epochs if extrapolated else None)
    how = f"extrapolated from {slice_epochs} epochs of one model per family" if extrapolated else "measured in full"
    print(f"baseline (one at a time, every epoch, {how}): {t_base:8.1f} s = {t_base / 3600:.2f} h", flush=True)
    print(
        f"ratio baseline / ours: {t_base / t_ours:.1f}x"
        + ("" if extrapolated else f"   (vs ours every epoch: {t_base / t_plain:.1f}x)")
    )
    if not extrapolated:
        print(
            "test_only object_acc (mean over fractions and seeds): "
            "family, ours early-stopped, ours every epoch, baseline"
        )
        for name in acc_base:
            print(f"  {name:20s} {acc_ours[name]:.4f}  {acc_plain[name]:.4f}  {acc_base[name]:.4f}")
    print(f"verdict (ours): {summary['verdict']['reading']}")
    case = f"{size}: {len(scenes):,} scenes x {DIM}, planted {kind}, default sweep (9 fractions x 3 seeds x 5 families)"
    base_name = (
        f"one nn.Module at a time, Adam every epoch of the cpu budget ({how})"
        if not extrapolated
        else f"one nn.Module at a time, Adam every epoch of the cpu budget (EXTRAPOLATED from {slice_epochs} "
        "epochs of one model per family; validation and scoring left out)"
    )
    if extrapolated:
        return [Measurement(case, "complexity_sweep, stacked, early stopping", base_name, "s", t_ours, t_base)]
    worst = max(abs(acc_plain[name] - acc_base[name]) for name in acc_base)
    checks = f"test_only object_acc of ours every epoch within {worst:.4f} of the baseline (same trajectories)"
    return [
        Measurement(case, "complexity_sweep, stacked, early stopping", base_name, "s", t_ours, t_base, checks=checks),
        Measurement(case, "complexity_sweep, stacked, every epoch", base_name, "s", t_plain, t_base, checks=checks),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="clevr,text")
    parser.add_argument("--kind", default="mult_within_object")
    parser.add_argument("--slice-epochs", type=int, default=10)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    torch.manual_seed(0)
    measured = []
    for size in args.sizes.split(","):
        measured += run(size.strip(), args.kind, args.slice_epochs)
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
