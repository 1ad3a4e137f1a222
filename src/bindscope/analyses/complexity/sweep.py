"""Binding-function complexity (docs/method/06-complexity.md): the sweep. Every approximator family at every
(fraction, seed), fitted on the train_only scenes of nested object-level splits (a validation share of them
held out for selection and early stopping, never test), its *predicted* embeddings decoded by frozen probes.

This module orchestrates: the scenes and probes are checked, the sweep planned (:mod:`.plan`), fits kept from
an earlier run found (:mod:`.reuse`), the missing stacks of models fitted and scored as units of work
(:mod:`.units`, :mod:`.score`) on the current executor, and every number gathered into one tidy table
(the key columns and :data:`EXTRA_COLUMNS`) with the training curves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from bindscope.analyses.complexity.families import Family, Layout, Memorises, memorising_families, num_parameters
from bindscope.analyses.complexity.plan import plan_sweep
from bindscope.analyses.complexity.reuse import fit_stores, kept_fits, missing_stacks, model_keys
from bindscope.analyses.complexity.score import baseline_block_rows, reference_rows
from bindscope.analyses.complexity.settings import SELECTION_MARKS, ComplexitySettings
from bindscope.analyses.complexity.subspace import target_basis
from bindscope.analyses.complexity.swaps import find_swaps
from bindscope.analyses.complexity.units import SweepShared, sweep_units, unit_state
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import current_executor
from bindscope.core.tidy import tidy
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import SceneSet

#: The complexity table's own columns after the key columns (variant = the approximator's label); ``n_cases``: the
#: scored scenes a rate is a share of (empty for other numbers).
EXTRA_COLUMNS = ("fraction", "checkpoint", "budget", "selection", "n_cases")
#: Training curves: ``epoch`` counts Adam epochs where ``unit`` is ``epoch`` and ALS sweeps where it is ``sweep``.
HISTORY_COLUMNS = ["approximator", "fraction", "seed", "unit", "epoch", "train_mse", "val_mse"]


@dataclass
class SweepResult:
    """What a sweep measured: the tidy table, the training curves, and what it fitted and how."""

    table: pd.DataFrame
    history: pd.DataFrame
    dropped_scenes: int
    seconds: dict[str, float]
    parameters: dict[str, int]
    capacity: dict[str, Memorises] = field(default_factory=dict)  # families that can memorise
    probe_scenes_unscored: int | None = None  # probe-training scenes left out of test_only and mixed
    fits: dict[str, dict] = field(default_factory=dict)  # every model's fit (rows, history, seconds) by its key
    reused: int = 0  # fits found kept from an earlier run (see reuse.model_keys), not fitted again
    targets: dict[str, Any] | None = None  # the principal subspace fitted in (see subspace.target_basis)


def complexity_sweep(
    y: np.ndarray,
    scenes: SceneSet,
    probes: ProbeSet,
    settings: ComplexitySettings = ComplexitySettings(),
    *,
    progress: Callable[[int, int], object] | None = None,
    probe_fitted: np.ndarray | None = None,
) -> SweepResult:
    """Fit every approximator at every (fraction, seed) and score it under the frozen probes.

    Parameters
    ----------
    y
        Scene embeddings ``[N, D]`` aligned with ``scenes``.
    scenes
        The scenes; only those with all K objects are used (others, e.g. single objects, are
        dropped and counted in ``dropped_scenes``).
    probes
        Frozen probes (an object probe and one per concept) for these embeddings.
    settings
        Families, fractions, seeds, budget and device.
    progress
        Called as ``progress(done, total)`` with the number of stacks fitted so far (first 0)
        and the number to fit.
    probe_fitted
        Indices into ``scenes`` of the scenes the probes were fitted on, when known: under
        ``probe_scenes="exclude"`` they are not scored in the test_only and mixed groups.
    """
    y = np.asarray(y, dtype=np.float32)
    if y.ndim != 2 or len(y) != len(scenes):
        raise BindscopeError(f"embeddings must be [{len(scenes)}, D], got {y.shape}")
    keep = k_object_scenes(scenes)
    sc, ys = scenes.subset(keep), y[keep]
    check_probes(probes, sc, ys.shape[1])
    probe_train, held_out = _probe_scenes(keep, len(sc), probe_fitted)
    unscored = probe_train if settings.probe_scenes == "exclude" else None
    shared, fitted_in = _shared(ys, sc, probes, settings, unscored, held_out)
    rows = reference_rows(shared.plans, shared.truth, sc.scenes)
    if settings.description_length:
        rows += baseline_block_rows(shared.plans, ys)
    parts, keys, reused = _fit_all(shared, progress)
    ordered = [key for family_keys in keys.values() for key in family_keys]  # family, then plan order
    rows += [row for key in ordered for row in parts[key]["rows"]]
    history = [tuple(h) for key in ordered for h in parts[key]["history"]]
    if settings.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return SweepResult(
        _table(rows, settings),
        pd.DataFrame(history, columns=HISTORY_COLUMNS).assign(budget=settings.budget.name),
        len(scenes) - len(keep),
        _seconds(parts, keys),
        _parameters(shared),
        dict(shared.capacity),
        None if unscored is None else len(unscored),
        {key: parts[key] for key in ordered},
        reused,
        fitted_in,
    )


def k_object_scenes(scenes: SceneSet) -> np.ndarray:
    """Indices of the scenes holding all K objects (the sweep's scenes)."""
    keep = scenes.full()
    if len(keep) == 0:
        raise BindscopeError("no scene holds all K objects; the complexity sweep needs K-object scenes")
    return keep


def check_probes(probes: ProbeSet, scenes: SceneSet, dim: int) -> None:
    """Frozen probes must decode this space: an object probe and one per concept, of width ``dim``."""
    space = scenes.space
    want = {"object": space.num_objects, **dict(zip(space.concepts, space.sizes))}
    have = {n: w.shape for n, w in probes.coef_.items()}
    missing = [n for n in want if n not in have]
    if missing:
        raise BindscopeError(
            f"the probes have no {', '.join(missing)} probe (they have {', '.join(have)}); "
            "use probes fitted on this dataset (bindscope probe)"
        )
    for name, labels in want.items():
        if have[name] != (labels, dim):
            raise BindscopeError(
                f"probe {name!r} is {have[name][0]} x {have[name][1]} but this dataset and these "
                f"embeddings need {labels} x {dim}; use probes fitted on these embeddings"
            )


def _probe_scenes(
    keep: np.ndarray, count: int, probe_fitted: np.ndarray | None
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The probes' training scenes among the sweep's ``count`` scenes (``keep`` of all), and the rest; None
    where unknown."""
    if probe_fitted is None:
        return None, None
    probe_train = np.flatnonzero(np.isin(keep, np.asarray(probe_fitted, dtype=np.int64)))
    return probe_train, np.setdiff1d(np.arange(count), probe_train)


def _shared(
    y: np.ndarray,
    scenes: SceneSet,
    probes: ProbeSet,
    settings: ComplexitySettings,
    unscored: np.ndarray | None,
    held_out: np.ndarray | None,
) -> tuple[SweepShared, dict[str, Any] | None]:
    """What every unit reads: the plans, the space the models are fitted in (and what it keeps), their width."""
    targets = soft_targets(scenes)
    layout = Layout.of(scenes)
    basis, fitted_in = target_basis(y, settings.budget, probes, targets["object"], held_out)
    width = settings.width or (y.shape[1] if basis is None else basis.dims)
    plans = plan_sweep(scenes, settings, unscored)
    centre = y.astype(np.float64).mean(axis=0) if settings.r2_centre == "scenes" else None
    capacity = memorising_families(settings.families(), layout, width, _distinct(scenes))
    swaps = find_swaps(scenes, y, targets["object"] > 0)
    shared = SweepShared(y, scenes, probes, settings, plans, targets, layout, width, centre, capacity, basis, swaps)
    return shared, fitted_in


def _parameters(shared: SweepShared) -> dict[str, int]:
    """Trainable parameters of one model of each family, as fitted (in the subspace, where there is one)."""
    dim = shared.y.shape[1] if shared.basis is None else shared.basis.dims
    return {f.label: num_parameters(f, shared.layout, shared.width, dim) for f in shared.settings.families()}


def _seconds(parts: dict[str, dict], keys: dict[Family, list[str]]) -> dict[str, float]:
    """Per family, the seconds its models' fits took (those kept from an earlier run at their own)."""
    return {family.label: round(sum(parts[key]["seconds"] for key in mine), 3) for family, mine in keys.items()}


def _table(rows: list[dict], settings: ComplexitySettings) -> pd.DataFrame:
    """The tidy table, every row marked with the budget and how its checkpoints were selected."""
    if settings.selection == "test":  # the criterion kept per fit is 1 - test_only object accuracy
        rows = [{**r, "metric": "best_test_error"} if r["metric"] == "best_val_mse" else r for r in rows]
    marks = {"budget": settings.budget.name, "selection": SELECTION_MARKS[settings.selection]}
    table = tidy([{"n_cases": None, **r, **marks} for r in rows], EXTRA_COLUMNS)
    return table.astype({"n_cases": "Int64"})


def _distinct(scenes: SceneSet) -> int:
    """The number of distinct scenes."""
    return len(np.unique(scenes.scenes.reshape(len(scenes), -1), axis=0))


def _fit_all(
    shared: SweepShared, progress: Callable[[int, int], object] | None
) -> tuple[dict[str, dict], dict[Family, list[str]], int]:
    """Every planned model's fit by its key (kept ones found, the others fitted in stacks on the current
    executor, each kept at once), the keys per family, and how many were found kept."""
    stores = fit_stores()
    keys = model_keys(shared)
    parts = kept_fits(stores, keys)
    reused = len(parts)
    missing = {family: [i for i, key in enumerate(mine) if key not in parts] for family, mine in keys.items()}
    work = {family: missing_stacks(shared.plans, models, family, shared) for family, models in missing.items()}
    units = sweep_units(shared, work, keys)
    total, done = len(units), 0
    if progress is not None:
        progress(done, total)
    for finished in current_executor().map(units, shared, setup=unit_state):
        family, members = finished.unit.args
        for key, part in zip([keys[family][i] for i in members], finished.result["models"]):
            parts[key] = part
            if stores:  # each fit kept at once: an interruption loses only running stacks
                stores[0].put(key, part)
        done += 1
        if progress is not None:
            progress(done, total)
    return parts, keys, reused
