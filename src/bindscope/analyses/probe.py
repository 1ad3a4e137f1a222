"""Uni-modal probes (docs/method.md §3): is object information recoverable from the embeddings?

Pure functions over arrays (embeddings ``[N, D]`` and the :class:`SceneSet` that labels them)
return tidy rows; :class:`ProbeAnalysis` is the registered analysis ``probe``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator

from bindscope.analyses.base import Analysis, AnalysisInputs, Progress, Result, Rows, RunContext
from bindscope.analyses.floors import bag_embeddings, binding_verdict, clearance_text, object_floors
from bindscope.analyses.metrics import accuracy_metrics, format_spread, mean, nested
from bindscope.analyses.probes import (
    Preprocessing,
    ProbeSet,
    chance_accuracy,
    fit_probe_weights,
    save_probes,
    set_separation_correct,
    soft_targets,
    stack_targets,
)
from bindscope.analyses.results import NO_CONTROL, ResultFiles, tidy
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, current_executor
from bindscope.core.validation import MAX_STEPS, Device, ParitySettings, Seeds
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import DEFAULT_SEEDS, SceneSplit, check_fraction, scene_split

PERMUTATION_SEED = 12345
BAG = "bag"  # the control: the same probes fitted on the ideal bag of concepts of the same scenes
BAG_FLOOR = "bag_floor"  # the variant: the ideal bag's analytic accuracy on each seed's test scenes
FLOOR_METRICS = ("object_acc", "concept_acc")


class ProbeSettings(ParitySettings):
    """How probes are fitted and scored (docs/method.md §3 defaults).

    ``scenes``: ``full`` uses the scenes that hold all K objects (the research code: its
    2-object scenes; `text` drops its single-object captions), ``all`` every scene.
    ``split_source``: where the scene split's permutation comes from (numpy, or ``paper``:
    ``torch.randperm`` as the research code draws it; see :func:`~bindscope.space.splits.scene_split`).
    ``parity="paper"``: the research code's choices for the fields not given (:attr:`PAPER`).
    """

    PAPER: ClassVar[dict[str, Any]] = {"split_source": "paper", "scenes": "full"}

    optimizer: Literal["fast", "reference", "lbfgs"] = "fast"
    scenes: Literal["full", "all"] = "full"
    split_source: Literal["bindscope", "paper"] = "bindscope"
    seeds: Seeds = DEFAULT_SEEDS
    train_fraction: float = 0.4
    center: bool = False
    normalize: bool = False
    steps: int = Field(10_000, ge=1, le=MAX_STEPS)
    lr: float = Field(1e-2, gt=0)
    max_iter: int = Field(500, ge=1, le=MAX_STEPS)
    exact_budget_s: float = Field(900.0, ge=0)
    device: Device = "cpu"

    @field_validator("train_fraction")
    @classmethod
    def _fraction(cls, v: float) -> float:
        return check_fraction(v, "train fraction")


@dataclass
class ProbeRun:
    """What fitting one variant's probes produced."""

    rows: list[dict] = field(default_factory=list)
    weights: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # seed -> name -> [L, D]
    means: dict[int, np.ndarray | None] = field(default_factory=dict)
    solver: dict[int, dict[str, str]] = field(default_factory=dict)
    per_scene: list[pd.DataFrame] = field(default_factory=list)
    train_scenes: dict[int, np.ndarray] = field(default_factory=dict)  # seed -> scene indices fitted on


def row(analysis: str, variant: str, control: str, group: str, metric: str, seed: int, value: float) -> dict:
    """One tidy row with the key columns."""
    return {
        "analysis": analysis,
        "variant": variant,
        "control": control,
        "group": group,
        "metric": metric,
        "seed": int(seed),
        "value": float(value),
    }


def _accuracy_rows(
    analysis: str, variant: str, control: str, group: str, seed: int, acc: Mapping[str, float]
) -> Iterator[dict]:
    for metric, value in accuracy_metrics(acc).items():
        yield row(analysis, variant, control, group, metric, seed, value)


def probe_variant(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    analysis: str = "probe",
    variant: str = "base",
    control: str = NO_CONTROL,
    chance: bool = False,
    per_scene: bool = False,
) -> ProbeRun:
    """Fit and score probes on one embedding array for every seed's scene-level split (on a cluster,
    ``--executor ray``, each seed is a unit of work; locally all seeds are fitted at once)."""
    if len(y) != len(scenes):
        raise BindscopeError(f"{len(y)} embeddings but {len(scenes)} scenes")
    options = {"analysis": analysis, "variant": variant, "control": control, "chance": chance, "per_scene": per_scene}
    executor = current_executor()
    if executor.distributed and len(settings.seeds) > 1:
        need = Resources.for_device(settings.device)
        units = [
            Unit(f"{variant}-{control}-{seed}", f"{variant} probes, seed {seed}", _seed_unit, (seed, options), need)
            for seed in settings.seeds
        ]
        runs = {done.unit.args[0]: done.result for done in executor.map(units, (y, scenes, settings))}
        return merge_runs([runs[seed] for seed in settings.seeds])
    targets = soft_targets(scenes)
    names, blocks, t_all = stack_targets(targets, len(y))
    prep = Preprocessing(settings.center, settings.normalize)
    splits = seed_splits(len(y), settings)
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
        run.train_scenes[seed] = sp.train
        run.solver[seed] = {n: str(e) for n, e in zip(names, solver[i])}
        for group, idx in (("train", sp.train), ("test", sp.test)):
            xs = prep.apply(y[idx], means[seed]).astype(np.float32)
            correct = {n: set_separation_correct(xs @ run.weights[seed][n].T, targets[n][idx]) for n in names}
            acc = {n: c.mean() for n, c in correct.items()}
            run.rows += _accuracy_rows(analysis, variant, control, group, seed, acc)
            if chance:
                chance_acc = {n: chance_accuracy(targets[n][idx]) for n in names}
                run.rows += _accuracy_rows(analysis, "chance", NO_CONTROL, group, seed, chance_acc)
            if per_scene:
                run.per_scene += [
                    pd.DataFrame({"scene": idx, "seed": seed, "group": group, "probe": n, "correct": c})
                    for n, c in correct.items()
                ]
    return run


def seed_splits(n: int, settings: ProbeSettings) -> dict[int, SceneSplit]:
    """Each seed's scene-level split of ``n`` scenes."""
    return {s: scene_split(n, settings.train_fraction, s, source=settings.split_source) for s in settings.seeds}


def bag_settings(settings: ProbeSettings) -> ProbeSettings:
    """The bag control's fit: the model's, with ``fast`` as ``lbfgs``.

    A bag's concept probes always separate their training scenes (it holds every value), so ``fast``
    would follow the reference Adam schedule for them on every run (on clevr 17 s against 3 s), for
    the same object accuracies there: its object probe does not separate its training scenes, which
    hold both bindings of tied pairs. ``reference`` stays ``reference``.
    """
    return settings.model_copy(update={"optimizer": "lbfgs"}) if settings.optimizer == "fast" else settings


def bag_control(scenes: SceneSet, settings: ProbeSettings) -> list[dict]:
    """The bag-of-concepts floors on each seed's split: rows of the probes fitted on the ideal bag's
    embeddings (control ``bag``) and of the ideal bag's analytic accuracy on the test scenes
    (variant ``bag_floor``, see :func:`bindscope.analyses.floors.object_floors`)."""
    rows = probe_variant(bag_embeddings(scenes), scenes, bag_settings(settings), control=BAG).rows
    for seed, split in seed_splits(len(scenes), settings).items():
        floors = object_floors(scenes.subset(split.test))
        rows += [row("probe", BAG_FLOOR, NO_CONTROL, "test", m, seed, floors[m]["bag"]) for m in FLOOR_METRICS]
    return rows


def _seed_unit(shared: tuple[np.ndarray, SceneSet, ProbeSettings], seed: int, options: dict[str, Any]) -> ProbeRun:
    y, scenes, settings = shared
    return probe_variant(y, scenes, settings.model_copy(update={"seeds": (seed,)}), **options)


def merge_runs(runs: list[ProbeRun]) -> ProbeRun:
    """One run from runs of single seeds, in their order (what fitting the seeds together gives)."""
    out = ProbeRun()
    for run in runs:
        out.rows += run.rows
        out.per_scene += run.per_scene
        for part in ("weights", "means", "solver", "train_scenes"):
            getattr(out, part).update(getattr(run, part))
    return out


def fit_probe_set(y: np.ndarray, scenes: SceneSet, settings: ProbeSettings) -> tuple[ProbeSet, ProbeRun]:
    """Probes fitted on the scene split of the first of ``settings.seeds``, as a :class:`ProbeSet`, and
    their run (for saving them with :func:`save_fitted_probes`)."""
    run = probe_variant(y, scenes, settings)
    seed = settings.seeds[0]
    probes = ProbeSet.from_weights(
        run.weights[seed], run.means[seed], center=settings.center, normalize=settings.normalize
    )
    return probes, run


def used_scenes(scenes: SceneSet, which: str) -> np.ndarray:
    """Indices of the scenes an analysis uses: ``full`` (all K objects) or ``all``."""
    if which == "all":
        return np.arange(len(scenes))
    keep = scenes.full()
    if len(keep) == 0:
        raise BindscopeError(f"no scene holds all {scenes.max_objects} objects; use every scene with --scenes all")
    return keep


def select_scenes(
    y: np.ndarray, scenes: SceneSet, which: str, control: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, SceneSet, np.ndarray | None]:
    """The used scenes' indices, embeddings, labels and control embeddings."""
    used = used_scenes(scenes, which)
    if len(used) == len(scenes):
        return used, y, scenes, control
    return used, y[used], scenes.subset(used), None if control is None else control[used]


def permuted_labels(scenes: SceneSet, seed: int = PERMUTATION_SEED) -> SceneSet:
    """The control: the same labels, shuffled across scenes with a fixed seed."""
    return scenes.subset(np.random.default_rng(seed).permutation(len(scenes)))


def probe_analysis(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    control: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, ProbeRun, pd.DataFrame]:
    """Base probes, chance, the permuted-label control, the bag-of-concepts floors and (if given) the
    ``+rand`` control.

    Returns the tidy results, the base run (its probes are what later analyses reuse) and the
    base run's per-scene correctness.
    """
    used, y, scenes, control = select_scenes(y, scenes, settings.scenes, control)
    total = 4 if control is not None else 3
    tick = progress or (lambda done, total: None)
    tick(0, total)
    base = probe_variant(y, scenes, settings, chance=True, per_scene=True)
    tick(1, total)
    rows = list(base.rows)
    rows += probe_variant(y, permuted_labels(scenes), settings, control="permuted_labels").rows
    tick(2, total)
    rows += bag_control(scenes, settings)
    tick(3, total)
    if control is not None:
        rows += probe_variant(control, scenes, settings, control="rand").rows
        tick(4, total)
    per_scene = pd.concat(base.per_scene, ignore_index=True)
    per_scene["scene"] = used[per_scene["scene"].to_numpy()]  # rows of the dataset
    return tidy(rows), base, per_scene


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
def accuracy_summary(table: pd.DataFrame, variant: str, control: str = NO_CONTROL) -> dict[str, Any]:
    """``{group: {metric: {mean, std, n}}}`` of one variant and control."""
    sel = table[(table.variant == variant) & (table.control == control)]
    return nested(sel, ["group", "metric"])


def chance_summary(table: pd.DataFrame) -> dict[str, float]:
    """Chance accuracies on the test scenes, ``{metric: mean over seeds}``."""
    sel = table[(table.variant == "chance") & (table.group == "test")]
    return nested(sel, ["metric"], mean)


def seed_values(table: pd.DataFrame, variant: str, control: str, metric: str) -> pd.Series:
    """One metric's test values per seed (indexed by seed) of one variant and control."""
    sel = table[(table.variant == variant) & (table.control == control) & (table.group == "test")]
    return sel[sel.metric == metric].set_index("seed")["value"]


def floor_summary(table: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """Each accuracy's floors on the test scenes, means over seeds (None where not run).

    ``{metric: {"chance", "rand", "bag", "bag_fitted"}}`` for object_acc and concept_acc: chance, the
    ``+rand`` control, the ideal bag's analytic accuracy and the probes fitted on the ideal bag.
    """
    sources = {"chance": ("chance", NO_CONTROL), "rand": ("base", "rand"), "bag": (BAG_FLOOR, NO_CONTROL)}
    sources["bag_fitted"] = ("base", BAG)
    out: dict[str, dict[str, float | None]] = {}
    for metric in FLOOR_METRICS:
        values = {k: seed_values(table, v, c, metric) for k, (v, c) in sources.items()}
        out[metric] = {k: float(v.mean()) if len(v) else None for k, v in values.items()}
    return out


def binding_summary(table: pd.DataFrame) -> dict[str, Any]:
    """Does the object probe bind beyond a bag of concepts? :func:`~bindscope.analyses.floors.binding_verdict`
    of the test object accuracy per seed against that seed's bag floor: the larger of the ideal bag's
    analytic accuracy and the fitted bag's (``floor_mean``: its mean over seeds)."""
    acc = seed_values(table, "base", NO_CONTROL, "object_acc")
    ideal = seed_values(table, BAG_FLOOR, NO_CONTROL, "object_acc").reindex(acc.index)
    fitted = seed_values(table, "base", BAG, "object_acc").reindex(acc.index)
    floor = np.maximum(ideal.to_numpy(), fitted.to_numpy())
    verdict = binding_verdict(acc.tolist(), floor.tolist())
    return {"metric": "object_acc", **verdict, "floor_mean": None if verdict["seeds"] == 0 else float(floor.mean())}


def probe_summary(table: pd.DataFrame) -> dict[str, Any]:
    """The main numbers of ``bindscope probe``."""
    base = accuracy_summary(table, "base")
    rand = accuracy_summary(table, "base", "rand")
    return {
        "train": base.get("train", {}),
        "test": base.get("test", {}),
        "chance": chance_summary(table),
        "controls": {
            "permuted_labels": accuracy_summary(table, "base", "permuted_labels"),
            "rand": rand or None,
            BAG: accuracy_summary(table, "base", BAG) or None,
        },
        "floors": floor_summary(table),
        "binding": binding_summary(table),
    }


def pct(part: Mapping[str, Any] | None, metric: str) -> str:
    """``mean ± std`` of a spread in percent, ``-`` where missing."""
    return format_spread((part or {}).get(metric), digits=1, scale=100)


def percent(value: float | None) -> str:
    """A share as a percentage, with enough digits to tell a small one from zero (chance among 160,000)."""
    if value is None:
        return "-"
    digits = 1 if value == 0 or abs(value) >= 0.001 else 3 if abs(value) >= 0.00001 else 5
    return f"{100 * value:.{digits}f}%"


def spread_mean(node: Any) -> float | None:
    """The mean of a summary's spread (``{mean, std, n}``), None where missing."""
    return node.get("mean") if isinstance(node, dict) else None


def object_numbers(summary: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
    """A probe summary's test object accuracy, its ``+rand`` control's and chance (None where missing)."""
    rand = ((summary.get("controls") or {}).get("rand") or {}).get("test", {})
    acc = spread_mean(summary["test"].get("object_acc"))
    return acc, spread_mean(rand.get("object_acc")), (summary.get("chance") or {}).get("object_acc")


#: How far above random weights and chance the object probe must be to read "objects recoverable".
RECOVERABLE_MARGIN = 0.1


def recoverable_reading(summary: Mapping[str, Any]) -> str:
    """``objects recoverable: yes|no``: the test object accuracy against ``+rand`` and chance."""
    acc, rand, chance = object_numbers(summary)
    floor = max(v for v in (rand, chance, 0.0) if v is not None)
    verdict = "yes" if acc is not None and acc > floor + RECOVERABLE_MARGIN else "no"
    return (
        f"objects recoverable: {verdict}, {percent(acc)} vs {percent(rand)} for random weights "
        f"(chance {percent(chance)})"
    )


def floor_reading(summary: Mapping[str, Any], metric: str) -> str:
    """One test accuracy with its floors beside it: chance, ``+rand`` and the bag (ideal, fitted)."""
    f = (summary.get("floors") or {}).get(metric) or {}
    rand = "not given" if f.get("rand") is None else percent(f["rand"])
    return (
        f"{metric} {percent(spread_mean(summary['test'].get(metric)))}: chance {percent(f.get('chance'))}, "
        f"+rand {rand}, bag of concepts {percent(f.get('bag'))} ideal / {percent(f.get('bag_fitted'))} fitted"
    )


def binding_reading(summary: Mapping[str, Any]) -> str:
    """The binding verdict in words: "binds beyond a bag of concepts" only when every seed clears it."""
    b = summary.get("binding")
    if not b:
        return "beyond a bag of concepts: not measured (these probe results predate the bag control; run probe again)"
    if b["reading"] == "undetermined":
        return "beyond a bag of concepts: undetermined (no seed has both an object accuracy and a bag floor)"
    acc = spread_mean(summary["test"].get(b["metric"]))
    return (
        f"{b['reading']}; object probe {percent(acc)} vs {percent(b['floor_mean'])} for a bag of concepts, "
        f"{clearance_text(b)}"
    )


def probe_labels(scenes: SceneSet) -> dict[str, Any]:
    """What the rows of each probe's weights stand for."""
    return {"object": "object ids (mixed radix)", **scenes.space.to_dict()}


def recorded_training_scenes(meta: dict[str, Any], scenes: SceneSet) -> np.ndarray | None:
    """Indices into ``scenes`` of the scenes loaded probes were fitted on, rebuilt from the scene
    split their ``probe.json`` records (see :func:`save_fitted_probes`); None when it records none
    or no dataset to tie it to."""
    split = meta.get("split") or {}
    if not isinstance(split, dict) or split.get("kind") != "scene" or meta.get("dataset_hash") is None:
        return None
    try:
        used = used_scenes(scenes, str(split.get("scenes", "all")))
        part = scene_split(
            len(used), float(split["train_fraction"]), int(split["seed"]), source=str(split.get("source", "bindscope"))
        )
    except (KeyError, TypeError, ValueError, BindscopeError):
        return None
    return used[part.train]


def split_record(settings: ProbeSettings, seed: int) -> dict[str, Any]:
    """The scene split one seed's probes were fitted on, as ``probe.json`` records it (read back
    by :func:`recorded_training_scenes`)."""
    return {
        "kind": "scene",
        "train_fraction": settings.train_fraction,
        "seed": seed,
        "scenes": settings.scenes,
        "source": settings.split_source,
    }


def save_fitted_probes(
    stage: Path, run: ProbeRun, scenes: SceneSet, settings: ProbeSettings, context: RunContext
) -> None:
    """Per seed, a probe folder ``probes/seed{s}/`` (see :func:`bindscope.analyses.probes.save_probes`)."""
    inputs = context.inputs
    for seed, weights in run.weights.items():
        meta = {
            "labels": probe_labels(scenes),
            "seed": seed,
            "split": split_record(settings, seed),
            "optimizer": settings.optimizer,
            "solver": run.solver[seed],
            "embeddings": str(inputs.embeddings.root.resolve()) if inputs is not None else None,
            "dataset_hash": inputs.dataset.hash if inputs is not None else None,
        }
        save_probes(
            stage / "probes" / f"seed{seed}",
            weights,
            run.means[seed],
            center=settings.center,
            normalize=settings.normalize,
            meta=meta,
        )


class ProbeAnalysis(Analysis):
    """``probe``: concept and object probes over seeds, with chance and the controls."""

    name = "probe"
    title = "Is object information recoverable? Concept and object probes with chance and controls."
    Settings = ProbeSettings
    uses = frozenset({"control"})

    def compute(self, inputs: AnalysisInputs, settings: ProbeSettings, progress: Progress | None = None) -> Result:
        y = np.asarray(inputs.embeddings)
        ctrl = np.asarray(inputs.control) if inputs.control is not None else None
        table, base, per_scene = probe_analysis(y, inputs.scenes, settings, control=ctrl, progress=progress)
        return Result(
            table,
            {"per_scene": per_scene},
            approximate_warnings({"base": base.solver}),
            {"run": base, "scenes": inputs.scenes},
        )

    def summarize(self, result: Result, settings: ProbeSettings) -> dict[str, Any]:
        summary = probe_summary(result.table)
        summary["solver"] = {str(s): e for s, e in result.parts["run"].solver.items()}
        return summary

    def headline(self, summary: dict[str, Any]) -> Rows:
        rows: Rows = [("variant", "object_acc test %", "concept_acc test %", "object_acc train %")]
        labels = {BAG: "bag (fitted)"}
        parts = {"base": summary, **{k: v for k, v in summary["controls"].items() if v}}
        for label, part in parts.items():
            test, train = part.get("test"), part.get("train")
            rows.append(
                (labels.get(label, label), pct(test, "object_acc"), pct(test, "concept_acc"), pct(train, "object_acc"))
            )
        ideal = {m: (summary.get("floors") or {}).get(m, {}).get("bag") for m in FLOOR_METRICS}
        if ideal["object_acc"] is not None:
            rows.append(("bag (ideal)", *(f"{100 * v:.1f}" if v is not None else "-" for v in ideal.values()), ""))
        chance = summary["chance"]
        concept = chance.get("concept_acc")
        rows.append(
            ("chance", f"{100 * chance['object_acc']:.2f}", "-" if concept is None else f"{100 * concept:.1f}", "")
        )
        return rows

    def notes(self, summary: dict[str, Any]) -> list[str]:
        """The readings: objects recoverable (against +rand and chance), each accuracy beside its floors,
        and whether the object probe binds beyond a bag of concepts."""
        floors = [floor_reading(summary, m) for m in FLOOR_METRICS if m in summary["test"]]
        return [recoverable_reading(summary), *floors, binding_reading(summary)]

    def files(self, result: Result, settings: ProbeSettings, context: RunContext) -> ResultFiles:
        run, scenes = result.parts["run"], result.parts["scenes"]
        return ResultFiles(
            result.table,
            dict(result.tables),
            lambda stage: save_fitted_probes(stage, run, scenes, settings, context),
            parquet_only=frozenset({"per_scene"}),
        )
