"""Linear probes over seeds (docs/method/03-probes.md): their settings, one variant's fit and score on each
seed's scene split, and the saved probe folders. Shared by every analysis that fits probes.

With the default ``regularised`` optimiser a run also records, per seed, how each probe's penalty was chosen
(:attr:`ProbeRun.strengths`, a :class:`~bindscope.estimators.regularised.StrengthChoice` per probe: the grids,
the cross-validated losses, the chosen setting, the one-standard-error band, convergence) and the scene counts
(:attr:`ProbeRun.scene_counts`). Its **band** is what the training scenes cannot tell apart: every setting
within one standard error of each probe's best, fitted on all training scenes and scored like the chosen fit.
:attr:`ProbeRun.band` holds, per seed, the lowest (``low``) and highest (``high``) test value of each metric over
the band's fits (each probe's extreme over its own band; ``concept_acc`` is the mean of the concepts'). The
tidy table carries them as rows of the variant ``"<variant>:band_low"`` / ``"<variant>:band_high"``
(:func:`band_variant`; train and test groups, the run's control): where the verdict read from ``low`` differs
from the one read from ``high``, the training data cannot decide it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from array_api_compat import array_namespace
from pydantic import Field, field_validator

from bindscope.core.display import display_path, run_folder
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, current_executor
from bindscope.core.tidy import NO_CONTROL, result_row
from bindscope.core.validation import ParitySettings, Seeds
from bindscope.estimators.lbfgs import separates
from bindscope.estimators.metrics import Splits, accuracy_metrics, mean, nested
from bindscope.estimators.probes import (
    ProbeFit,
    ProbeSet,
    chance_accuracy,
    fit_probe_weights,
    fit_regularised_probes,
    like,
    on_device,
    save_probes,
    set_separation_correct,
    soft_targets,
    stack_targets,
    to_numpy,
)
from bindscope.estimators.regularised import RegularisedFit, StrengthChoice
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import DEFAULT_SEEDS, SceneSplit, check_fraction, scene_split

#: The seed of the permuted-label control's shuffle.
PERMUTATION_SEED = 12345
#: The band's two ends: the lowest and highest value of each metric over the band's fits.
BAND_SIDES = ("low", "high")
#: Most logits (scenes x labels x fits) of the band's fits scored at once.
BAND_LOGITS = 2**22


def band_variant(variant: str, side: str) -> str:
    """The tidy-table variant of one end of a variant's band: ``"base:band_low"``, ``"objects:band_high"``."""
    return f"{variant}:band_{side}"


class ProbeSettings(ProbeFit, ParitySettings):
    """How probes are fitted and scored over seeds (docs/method/03-probes.md defaults): the fit (:class:`ProbeFit`),
    the scenes, and each seed's scene split.

    ``scenes``: ``full`` uses the scenes that hold all K objects (the research code: its
    2-object scenes; `text` drops its single-object captions), ``all`` every scene.
    ``split_source``: where the scene split's permutation comes from (numpy, or ``paper``:
    ``torch.randperm`` as the research code draws it; see :func:`~bindscope.space.splits.scene_split`).
    ``parity="paper"``: the research code's choices for the fields not given (:attr:`PAPER`), the paper's
    optimiser trajectory (``fast``) among them.
    """

    PAPER: ClassVar[dict[str, Any]] = {"split_source": "paper", "scenes": "full", "optimizer": "fast"}

    parity: Literal["bindscope", "paper"] = Field(
        "bindscope",
        description="paper: every choice of the published research code that this command has, for the options "
        "not given (docs/method/10-differences.md); bindscope (default): bindscope's defaults.",
    )
    scenes: Literal["full", "all"] = Field(
        "full",
        description="full (default, as the research code): only scenes holding all K objects (text: the 160,000 "
        "pairs); all: every scene, single objects included.",
    )
    split_source: Literal["bindscope", "paper"] = Field(
        "bindscope",
        description="Where the scene split's permutation comes from: bindscope (numpy, default) or paper "
        "(torch.randperm as the research code; seed 0 selects its scenes exactly).",
    )
    seeds: Seeds = Field(
        DEFAULT_SEEDS, description="Seed ids, comma-separated (splits and initialisations); default 0,1,2."
    )
    train_fraction: float = Field(0.4, description="Scene-level train fraction of the probes (0.4).")

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
    scene_counts: dict[int, dict[str, int]] = field(default_factory=dict)  # seed -> {"train": n, "test": m}
    strengths: dict[int, dict[str, StrengthChoice]] = field(default_factory=dict)  # regularised: seed -> probe
    band: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)  # seed -> low/high -> metric (test)


def _accuracy_rows(
    analysis: str,
    variant: str,
    control: str,
    group: str,
    seed: int,
    acc: Mapping[str, float],
    columns: Mapping[str, Any],
) -> Iterator[dict]:
    for metric, value in accuracy_metrics(acc).items():
        yield result_row(analysis, variant, group, metric, seed, value, control=control, **columns)


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
    columns: Mapping[str, Any] | None = None,
) -> ProbeRun:
    """Fit and score probes on one embedding array for every seed's scene-level split (on a cluster,
    ``--executor ray``, each seed is a unit of work; locally all seeds are fitted at once).

    ``columns``: further columns of every row (e.g. decompose's ``part``).
    """
    if len(y) != len(scenes):
        raise BindscopeError(f"{len(y)} embeddings but {len(scenes)} scenes")
    columns = dict(columns or {})
    options = {
        "analysis": analysis,
        "variant": variant,
        "control": control,
        "chance": chance,
        "per_scene": per_scene,
        "columns": columns,
    }
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
    prep = settings.preprocessing
    splits = seed_splits(len(y), settings)
    means = {s: prep.fit(y[sp.train]) for s, sp in splits.items()}
    stacked = np.stack([prep.apply(y[sp.train], means[s]).astype(np.float32) for s, sp in splits.items()])
    x = on_device(stacked, settings.device)  # numpy arrays on the cpu: torch is not imported
    t = on_device(np.stack([t_all[sp.train] for sp in splits.values()]), settings.device)
    fit: RegularisedFit | None = None
    if settings.optimizer == "regularised":
        fit = fit_regularised_probes(x, t, blocks, list(settings.seeds), **settings.regularised_options())
        w, solver = fit.weights, fit.solver
    else:
        w, solver = fit_probe_weights(x, t, blocks, list(settings.seeds), **settings.solver_options())
    run = ProbeRun()
    for i, (seed, sp) in enumerate(splits.items()):
        coef = to_numpy(w[i])
        run.weights[seed] = {n: coef[b] for n, b in zip(names, blocks)}
        run.means[seed] = means[seed]
        run.train_scenes[seed] = sp.train
        run.scene_counts[seed] = {"train": len(sp.train), "test": len(sp.test)}
        run.solver[seed] = {n: str(e) for n, e in zip(names, solver[i])}
        if fit is not None:
            run.strengths[seed] = dict(zip(names, fit.choices[i]))
        for group, idx in (("train", sp.train), ("test", sp.test)):
            xs = prep.apply(y[idx], means[seed]).astype(np.float32)
            correct = {n: set_separation_correct(xs @ run.weights[seed][n].T, targets[n][idx]) for n in names}
            acc = {n: c.mean() for n, c in correct.items()}
            run.rows += _accuracy_rows(analysis, variant, control, group, seed, acc, columns)
            if fit is not None:
                ends = band_ends(xs, fit, i, {n: targets[n][idx] for n in names}, names, blocks, acc)
                for side, side_acc in ends.items():
                    run.rows += _accuracy_rows(
                        analysis, band_variant(variant, side), control, group, seed, side_acc, columns
                    )
                if group == "test":
                    run.band[seed] = {side: accuracy_metrics(side_acc) for side, side_acc in ends.items()}
            if chance:
                chance_acc = {n: chance_accuracy(targets[n][idx]) for n in names}
                run.rows += _accuracy_rows(analysis, "chance", NO_CONTROL, group, seed, chance_acc, columns)
            if per_scene:
                run.per_scene += [
                    pd.DataFrame({"scene": idx, "seed": seed, "group": group, "probe": n, "correct": c})
                    for n, c in correct.items()
                ]
    return run


def band_ends(
    x: np.ndarray,
    fit: RegularisedFit,
    i: int,
    targets: Mapping[str, np.ndarray],
    names: tuple[str, ...],
    blocks: list[slice],
    chosen: Mapping[str, float],
) -> dict[str, dict[str, float]]:
    """Each probe's lowest and highest set-separation accuracy on inputs ``x`` ``[N, D]`` over the fits of its
    band (fit ``i`` of ``fit``; the chosen fit, whose accuracy is ``chosen``, among them, so that a near-tie
    scored by another matmul cannot put it outside): ``{"low": {probe: acc}, "high": {probe: acc}}``."""
    path = fit.path[i]  # [P, G, L, D], numpy or torch
    xp = array_namespace(path)
    path = xp.reshape(path, (-1, *path.shape[2:]))  # [P*G, L, D]
    xs = like(np.asarray(x, dtype=np.float32), path)
    ends: dict[str, dict[str, float]] = {side: {} for side in BAND_SIDES}
    for j, (name, b) in enumerate(zip(names, blocks)):
        members = np.flatnonzero(fit.band[i, j].reshape(-1))
        present = like(np.asarray(targets[name]) > 0, path)
        width = b.stop - b.start
        step = max(1, BAND_LOGITS // max(1, len(x) * width))  # members scored together: a bounded block of logits
        acc = np.concatenate(
            [
                _band_accuracy(xs, xp.astype(path[members[k : k + step], b, :], xp.float32), present)
                for k in range(0, len(members), step)
            ]
        )
        ends["low"][name] = min(float(acc.min()), float(chosen[name]))
        ends["high"][name] = max(float(acc.max()), float(chosen[name]))
    return ends


def _band_accuracy(x: Any, weights: Any, present: Any) -> np.ndarray:
    """Set-separation accuracy on inputs ``x`` ``[N, D]`` of each of M fits' weights ``[M, L, D]`` (one probe's)."""
    xp = array_namespace(weights)
    m, labels, d = weights.shape
    logits = xp.reshape(x @ xp.reshape(weights, (m * labels, d)).mT, (len(x), m, labels))
    return to_numpy(separates(xp.permute_dims(logits, (1, 0, 2)), present)).mean(1)


def seed_splits(n: int, settings: ProbeSettings) -> dict[int, SceneSplit]:
    """Each seed's scene-level split of ``n`` scenes."""
    return {s: scene_split(n, settings.train_fraction, s, source=settings.split_source) for s in settings.seeds}


def with_scene_cases(table: pd.DataFrame, scenes: int, settings: ProbeSettings, counted: pd.Series) -> pd.DataFrame:
    """``table`` with ``n_cases`` on the ``counted`` rows (probe accuracies): the scenes of their seed's train or
    test group; NaN on the other rows (chance, R², references: no share of counted cases)."""
    sizes = {(s, g): len(getattr(sp, g)) for s, sp in seed_splits(scenes, settings).items() for g in ("train", "test")}
    keys = zip(table["seed"], table["group"])
    table["n_cases"] = pd.array([sizes.get(k) if c else None for k, c in zip(keys, counted)], dtype="Int64")
    return table


def _seed_unit(shared: tuple[np.ndarray, SceneSet, ProbeSettings], seed: int, options: dict[str, Any]) -> ProbeRun:
    y, scenes, settings = shared
    return probe_variant(y, scenes, settings.model_copy(update={"seeds": (seed,)}), **options)


def merge_runs(runs: list[ProbeRun]) -> ProbeRun:
    """One run from runs of single seeds, in their order (what fitting the seeds together gives)."""
    out = ProbeRun()
    for run in runs:
        out.rows += run.rows
        out.per_scene += run.per_scene
        for part in ("weights", "means", "solver", "train_scenes", "scene_counts", "strengths", "band"):
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


def approximate_warnings(solvers: Mapping[str, Mapping[int, Mapping[str, str]]]) -> list[str]:
    """Warnings for probes that separate their training set but did not follow the reference, and for
    regularised probes whose fits did not converge."""
    out = []
    for variant, per_seed in solvers.items():
        names = sorted({n for per in per_seed.values() for n, v in per.items() if v == "lbfgs-separable"})
        if names:
            out.append(
                f"{variant}: probe(s) {', '.join(names)} separate their training sets and were not refitted "
                "along the reference trajectory (over --exact-budget, or --optimizer lbfgs); their test "
                "accuracy may differ from the paper optimiser's"
            )
        names = sorted({n for per in per_seed.values() for n, v in per.items() if v == "regularised-unconverged"})
        if names:
            out.append(
                f"{variant}: the regularised fits of probe(s) {', '.join(names)} stopped at --max-iter before "
                "their gradient norm reached the tolerance; raise --max-iter"
            )
    return out


def accuracy_summary(table: pd.DataFrame, variant: str, control: str = NO_CONTROL) -> Splits | None:
    """The accuracies of one variant and control, per group and metric (None where it has no rows)."""
    sel = table[(table.variant == variant) & (table.control == control)]
    return Splits.model_validate(nested(sel, ["group", "metric"])) if len(sel) else None


def chance_summary(table: pd.DataFrame) -> dict[str, float]:
    """Chance accuracies on the test scenes, ``{metric: mean over seeds}``."""
    sel = table[(table.variant == "chance") & (table.group == "test")]
    return nested(sel, ["metric"], mean)


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


def _strength_record(run: ProbeRun, seed: int) -> dict[str, Any]:
    """``{"strengths": {probe: choice}}`` for ``probe.json`` where the run chose penalties, else nothing."""
    if seed not in run.strengths:
        return {}
    return {"strengths": {n: c.to_dict() for n, c in run.strengths[seed].items()}}


def save_fitted_probes(
    stage: Path,
    run: ProbeRun,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    embeddings: Path | None = None,
    dataset_hash: str | None = None,
) -> None:
    """Per seed, a probe folder ``probes/seed{s}/`` (see :func:`bindscope.estimators.probes.save_probes`),
    recording the embedding folder (as :func:`~bindscope.core.display.display_path` shows it, relative to its run)
    and the dataset they were fitted on when known."""
    for seed, weights in run.weights.items():
        meta = {
            "labels": probe_labels(scenes),
            "seed": seed,
            "split": split_record(settings, seed),
            "optimizer": settings.optimizer,
            "solver": run.solver[seed],
            **_strength_record(run, seed),
            "embeddings": display_path(embeddings, run_folder(embeddings)) if embeddings is not None else None,
            "dataset_hash": dataset_hash,
        }
        save_probes(
            stage / "probes" / f"seed{seed}",
            weights,
            run.means[seed],
            center=settings.center,
            normalize=settings.normalize,
            meta=meta,
        )
