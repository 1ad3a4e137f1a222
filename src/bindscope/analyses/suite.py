"""The probe and decomposition analyses over seeds, with their controls, as tidy tables.

Pure functions over arrays: embeddings ``[N, D]`` and the :class:`SceneSet` that labels them
in, tidy :class:`pandas.DataFrame` rows (analysis, variant, split, metric, seed, value) out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch

from bindscope.analyses.decomposition import MODELS, design_columns, fit_additive, r2_score, subtract
from bindscope.analyses.probes import (
    OBJECT,
    Preprocessing,
    chance_accuracy,
    fit_probe_weights,
    set_separation_correct,
    soft_targets,
    stack_targets,
)
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import check_fraction, scene_split

COLUMNS = ["analysis", "variant", "split", "metric", "seed", "value"]
SUBTRACTION_VARIANTS = ("base", "objects", "objects_perm", "concepts", "concepts_perm")


@dataclass(frozen=True)
class ProbeSettings:
    """How probes are fitted and scored (METHOD §3 defaults)."""

    optimizer: str = "fast"
    seeds: tuple[int, ...] = (0, 1, 2)
    train_fraction: float = 0.4
    center: bool = False
    normalize: bool = False
    steps: int = 10_000
    lr: float = 1e-2
    max_iter: int = 500
    exact_budget_s: float = 900.0
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_fraction(self.train_fraction, "train fraction")
        if not self.seeds:
            raise BindscopeError("give at least one seed")
        if self.steps < 1 or self.max_iter < 1:
            raise BindscopeError("steps and max_iter must be at least 1")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProbeRun:
    """What fitting one variant's probes produced."""

    rows: list[dict] = field(default_factory=list)
    weights: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # seed -> name -> [L, D]
    means: dict[int, np.ndarray | None] = field(default_factory=dict)
    solver: dict[int, dict[str, str]] = field(default_factory=dict)
    per_scene: list[pd.DataFrame] = field(default_factory=list)


def _row(analysis: str, variant: str, split: str, metric: str, seed: int, value: float) -> dict:
    return dict(zip(COLUMNS, (analysis, variant, split, metric, int(seed), float(value))))


def accuracy_metrics(acc: Mapping[str, float]) -> dict[str, float]:
    """Per-probe accuracies as object_acc, concept_acc (mean over concepts) and concept_acc.<name>."""
    concepts = [k for k in acc if k != OBJECT]
    out = {"object_acc": float(acc[OBJECT])}
    if concepts:
        out["concept_acc"] = float(np.mean([acc[c] for c in concepts]))
    out.update({f"concept_acc.{c}": float(acc[c]) for c in concepts})
    return out


def _accuracy_rows(analysis: str, variant: str, split: str, seed: int, acc: Mapping[str, float]) -> Iterator[dict]:
    for metric, value in accuracy_metrics(acc).items():
        yield _row(analysis, variant, split, metric, seed, value)


def probe_variant(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    analysis: str = "probe",
    variant: str = "base",
    chance: bool = False,
    per_scene: bool = False,
) -> ProbeRun:
    """Fit and score probes on one embedding array for every seed's scene-level split."""
    if len(y) != len(scenes):
        raise BindscopeError(f"{len(y)} embeddings but {len(scenes)} scenes")
    targets = soft_targets(scenes)
    names, blocks, t_all = stack_targets(targets, len(y))
    prep = Preprocessing(settings.center, settings.normalize)
    splits = {s: scene_split(len(y), settings.train_fraction, s) for s in settings.seeds}
    means = {s: prep.fit(y[sp.train]) for s, sp in splits.items()}
    x = torch.stack(
        [torch.from_numpy(prep.apply(y[sp.train], means[s]).astype(np.float32)) for s, sp in splits.items()]
    )
    t = torch.stack([torch.from_numpy(t_all[sp.train]) for sp in splits.values()])
    w, solver = fit_probe_weights(
        x.to(settings.device),
        t.to(settings.device),
        blocks,
        list(settings.seeds),
        optimizer=settings.optimizer,
        steps=settings.steps,
        lr=settings.lr,
        max_iter=settings.max_iter,
        exact_budget_s=settings.exact_budget_s,
    )
    run = ProbeRun()
    for i, (seed, sp) in enumerate(splits.items()):
        coef = w[i].cpu().numpy()
        run.weights[seed] = {n: coef[b] for n, b in zip(names, blocks)}
        run.means[seed] = means[seed]
        run.solver[seed] = {n: str(e) for n, e in zip(names, solver[i])}
        for split_name, idx in (("train", sp.train), ("test", sp.test)):
            xs = prep.apply(y[idx], means[seed]).astype(np.float32)
            correct = {n: set_separation_correct(xs @ run.weights[seed][n].T, targets[n][idx]) for n in names}
            run.rows += _accuracy_rows(analysis, variant, split_name, seed, {n: c.mean() for n, c in correct.items()})
            if chance:
                run.rows += _accuracy_rows(
                    analysis, "chance", split_name, seed, {n: chance_accuracy(targets[n][idx]) for n in names}
                )
            if per_scene:
                run.per_scene += [
                    pd.DataFrame({"scene": idx, "seed": seed, "split": split_name, "probe": n, "correct": c})
                    for n, c in correct.items()
                ]
    return run


def permuted_labels(scenes: SceneSet, seed: int = 12345) -> SceneSet:
    """The control: the same labels, shuffled across scenes with a fixed seed."""
    return scenes.subset(np.random.default_rng(seed).permutation(len(scenes)))


def probe_analysis(
    y: np.ndarray, scenes: SceneSet, settings: ProbeSettings, *, control: np.ndarray | None = None
) -> tuple[pd.DataFrame, ProbeRun, pd.DataFrame]:
    """Base probes, chance, the permuted-label control and (if given) the ``+rand`` control.

    Returns the tidy results, the base run (its probes are what later analyses reuse) and the
    base run's per-scene correctness.
    """
    base = probe_variant(y, scenes, settings, chance=True, per_scene=True)
    rows = list(base.rows)
    rows += probe_variant(y, permuted_labels(scenes), settings, variant="permuted_labels").rows
    if control is not None:
        rows += probe_variant(control, scenes, settings, variant="rand").rows
    return pd.DataFrame(rows, columns=COLUMNS), base, pd.concat(base.per_scene, ignore_index=True)


def r2_rows(
    y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...], test_fraction: float, variant_suffix: str = ""
) -> list[dict]:
    """R^2 of every additive model on train and held-out scenes, per seed."""
    check_fraction(test_fraction, "test fraction")
    rows = []
    designs = {m: design_columns(scenes, m) for m in MODELS}
    for seed in seeds:
        sp = scene_split(len(y), 1.0 - test_fraction, seed)
        for model, (cols, width) in designs.items():
            fit = fit_additive(cols[sp.train], width, y[sp.train], model)
            for split_name, idx in (("train", sp.train), ("test", sp.test)):
                rows.append(
                    _row(
                        "decompose",
                        model + variant_suffix,
                        split_name,
                        "r2",
                        seed,
                        r2_score(y[idx], fit.predict(cols[idx])),
                    )
                )
    return rows


def decompose_analysis(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    test_fraction: float = 0.2,
    control: np.ndarray | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[int, dict[str, str]]]]:
    """R^2 of the four additive models (with controls) and the five-run subtraction probe table.

    Returns the tidy table and, per subtraction variant, seed and probe, the solver used.
    """
    rows = r2_rows(y, scenes, settings.seeds, test_fraction)
    rows += r2_rows(y, permuted_labels(scenes), settings.seeds, test_fraction, "|permuted_labels")
    if control is not None:
        rows += r2_rows(control, scenes, settings.seeds, test_fraction, "|rand")
    solvers = {}
    for variant in SUBTRACTION_VARIANTS:
        if variant == "base":
            y_variant = y
        else:
            model = "object_additive" if variant.startswith("objects") else "concept_additive"
            y_variant = subtract(scenes, y, model, permuted=variant.endswith("_perm"))
        run = probe_variant(
            y_variant, scenes, settings, analysis="subtraction", variant=variant, chance=variant == "base"
        )
        rows += run.rows
        solvers[variant] = run.solver
    return pd.DataFrame(rows, columns=COLUMNS), solvers


def approximate_warnings(solvers: Mapping[str, Mapping[int, Mapping[str, str]]]) -> list[str]:
    """Warnings for probes that separate their training set but did not follow the reference."""
    out = []
    for variant, per_seed in solvers.items():
        names = sorted({n for per in per_seed.values() for n, v in per.items() if v == "lbfgs-separable"})
        if names:
            out.append(
                f"{variant}: probe(s) {', '.join(names)} separate their training sets and were not refitted "
                "along the reference trajectory (over --exact-budget, or --optimizer lbfgs); their test "
                "accuracy may differ from the paper optimiser's"
            )
    return out


# -- summaries ------------------------------------------------------------------------------------
def _mean_std(table: pd.DataFrame) -> tuple[float, float]:
    values = table["value"].to_numpy()
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def accuracy_summary(table: pd.DataFrame, analysis: str, variant: str) -> dict:
    """``{split: {metric: mean, metric_std: std}}`` for one analysis/variant."""
    out: dict = {}
    sel = table[(table.analysis == analysis) & (table.variant == variant)]
    for (split, metric), group in sel.groupby(["split", "metric"], sort=False):
        mean, std = _mean_std(group)
        out.setdefault(split, {})[metric] = mean
        out[split][f"{metric}_std"] = std
    return out


def probe_summary(table: pd.DataFrame) -> dict:
    """``summary.json`` of ``bindscope probe``."""
    base = accuracy_summary(table, "probe", "base")
    summary = {
        "train": base.get("train", {}),
        "test": base.get("test", {}),
        "chance": {
            k: v
            for k, v in accuracy_summary(table, "probe", "chance").get("test", {}).items()
            if not k.endswith("_std")
        },
        "controls": {"permuted_labels": accuracy_summary(table, "probe", "permuted_labels")},
    }
    rand = accuracy_summary(table, "probe", "rand")
    summary["controls"]["rand"] = rand or None
    return summary


def decompose_summary(table: pd.DataFrame) -> dict:
    """``summary.json`` of ``bindscope decompose``."""
    r2 = table[table.analysis == "decompose"]
    out: dict = {"r2": {}, "r2_std": {}, "controls": {}}
    for (variant, split), group in r2.groupby(["variant", "split"], sort=False):
        model, _, control = variant.partition("|")
        mean, std = _mean_std(group)
        if control:
            out["controls"].setdefault(control, {"r2": {}})["r2"].setdefault(split, {})[model] = mean
        else:
            out["r2"].setdefault(split, {})[model] = mean
            out["r2_std"].setdefault(split, {})[model] = std
    out["controls"].setdefault("rand", None)
    out["subtraction"] = {v: accuracy_summary(table, "subtraction", v) for v in SUBTRACTION_VARIANTS}
    out["chance"] = {
        k: v
        for k, v in accuracy_summary(table, "subtraction", "chance").get("test", {}).items()
        if not k.endswith("_std")
    }
    return out
