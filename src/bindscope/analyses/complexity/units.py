"""A sweep's units of work: one stack of (fraction, seed) models of one family, fitted by the settings'
protocol (exact ALS or Adam; product families twice, from other initialisations) and scored, on whichever
worker the executor sends it to."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family, Layout, Memorises
from bindscope.analyses.complexity.fitters.adam import Schedule, Selector, fit_stack
from bindscope.analyses.complexity.fitters.als import fit_stack_exact
from bindscope.analyses.complexity.fitters.basis import TargetBasis
from bindscope.analyses.complexity.fitters.stack import SceneIndex, StackFit, pick_fits
from bindscope.analyses.complexity.plan import Plan
from bindscope.analyses.complexity.score import Truth, family_rows, second_fit_rows, test_accuracy_selector
from bindscope.analyses.complexity.settings import ComplexitySettings
from bindscope.analyses.complexity.swaps import Swaps
from bindscope.core.executors import Resources, Unit
from bindscope.estimators.probes import ProbeSet
from bindscope.space.concepts import SceneSet

#: Exact product fits are repeated from another initialisation (seed + this) and the one of lower validation
#: MSE is kept; the pair tells whether the data determine what the family predicts for unseen objects
#: (:func:`~bindscope.analyses.complexity.score.two_fits_undetermined`).
SECOND_FIT_SEED = 1_000_003
PRODUCTS = ("mult", "mult_within_object", "sum_mult")


@dataclass(frozen=True)
class SweepShared:
    """What every unit of a sweep reads (sent once per worker)."""

    y: np.ndarray  # the K-object scenes' embeddings
    scenes: SceneSet
    probes: ProbeSet
    settings: ComplexitySettings
    plans: list[Plan]
    targets: dict[str, np.ndarray]
    layout: Layout
    width: int
    centre: np.ndarray | None
    capacity: dict[str, Memorises]  # the families that can memorise, by label
    basis: TargetBasis | None = None  # the subspace the models are fitted in (None: the embeddings)
    swaps: Swaps | None = None  # the binding swaps among the scenes (None: scenes needing binding not scored)

    @property
    def truth(self) -> Truth:
        """What the models' predictions are scored against."""
        return Truth(self.y, self.targets, self.probes, self.centre, self.swaps)


def sweep_units(shared: SweepShared, work: dict[Family, list[list[int]]], keys: dict[Family, list[str]]) -> list[Unit]:
    """One unit per stack of models of a family, named by the family and its models' (fraction, seed)
    and keyed by its models' keys (:func:`~bindscope.analyses.complexity.reuse.model_keys`)."""
    units = []
    need = Resources.for_device(shared.settings.device)
    for family, family_stacks in work.items():
        for members in family_stacks:
            models = [(shared.plans[i].fraction, shared.plans[i].seed) for i in members]
            label = f"{family.label} at " + ", ".join(f"f={f:g} seed {s}" for f, s in models)
            key = hashlib.sha256("".join(keys[family][i] for i in members).encode()).hexdigest()
            cost = len(members) * max(len(shared.plans[i].train) for i in members)  # padded scenes of the stack
            units.append(Unit(key, label, fit_unit, (family, members), need, cost))
    return units


def unit_state(shared: SweepShared) -> tuple[SweepShared, SceneIndex]:
    """A worker's state: the shared inputs and the scene index on the sweep's device."""
    return shared, SceneIndex.of(shared.scenes, shared.y, shared.settings.device, shared.basis)


def fit_unit(state: tuple[SweepShared, SceneIndex], family: Family, members: list[int]) -> dict[str, Any]:
    """Fit one stack of models of ``family`` and score it: its rows, training history and seconds."""
    shared, data = state
    settings, plans, layout, width = shared.settings, shared.plans, shared.layout, shared.width
    start = time.perf_counter()
    chosen = [plans[i] for i in members]
    selector = None
    if settings.selection == "test":
        selector = test_accuracy_selector(family, layout, data, chosen, shared.targets["object"], shared.probes)
    fit = fit_models(settings, family, layout, data, chosen, settings.schedule(), width, selector)
    other = None
    exact = settings.exact(family)
    if settings.second_fit and exact and family.name in PRODUCTS and family.label not in shared.capacity:
        # (a family that can memorise is undetermined already: no need to show it twice)
        fit, other = best_of_two(settings, family, layout, data, chosen, fit, width)
    rows = family_rows(family, layout, data, plans, members, fit, shared.truth, settings.description_length)
    if other is not None:
        values = shared.scenes.scenes
        rows += second_fit_rows(family, layout, data, chosen, fit, other, shared.y, shared.centre, values)
    unit = "sweep" if exact else "epoch"
    history = [
        (family.label, plans[members[g]].fraction, plans[members[g]].seed, unit, e, t, v) for g, e, t, v in fit.history
    ]
    if settings.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"family": family.label, "models": split_fits(chosen, rows, history, time.perf_counter() - start)}


def split_fits(models: list[Plan], rows: list[dict], history: list[tuple], seconds: float) -> list[dict[str, Any]]:
    """A stack's rows and history, per model (by its fraction and seed), with a share of its seconds
    in proportion to the model's training scenes."""
    scenes = sum(len(p.train) for p in models)
    out = []
    for plan in models:
        mine = (plan.fraction, plan.seed)
        out.append(
            {
                "rows": [r for r in rows if (r["fraction"], r["seed"]) == mine],
                "history": [h for h in history if (h[1], h[2]) == mine],
                "seconds": seconds * len(plan.train) / scenes,
            }
        )
    return out


def fit_models(
    settings: ComplexitySettings,
    family: Family,
    layout: Layout,
    data: SceneIndex,
    members: list[Plan],
    schedule: Schedule,
    width: int,
    selector: Selector | None = None,
) -> StackFit:
    """Fit a stack of models by the settings' protocol: ALS for table families under ``exact``, else
    Adam; under ``selection="test"`` Adam keeps each model's checkpoint of the highest test_only
    object accuracy (``selector``)."""
    train = [p.train for p in members]
    seeds = [p.seed for p in members]
    held = [p.groups["validation" if selector is None else "test_only"] for p in members]
    if settings.exact(family):  # never with a selector: test selection runs under the paper protocol only
        return fit_stack_exact(family, layout, data, train, held, seeds, settings.solver(), width=width)
    if selector is not None:  # a strict improvement of test accuracy counts, as in the research code
        schedule = replace(schedule, min_delta=0.0)
    return fit_stack(family, layout, data, train, held, seeds, schedule, width=width, select=selector)


def best_of_two(
    settings: ComplexitySettings,
    family: Family,
    layout: Layout,
    data: SceneIndex,
    members: list[Plan],
    fit: StackFit,
    width: int,
) -> tuple[StackFit, StackFit]:
    """Refit a stack exactly from other initialisations; per model ``(kept, other)``: the fit of
    lower validation MSE and the other one."""
    train = [p.train for p in members]
    held = [p.groups["validation"] for p in members]
    seeds = [p.seed + SECOND_FIT_SEED for p in members]
    twin = fit_stack_exact(family, layout, data, train, held, seeds, settings.solver(), width=width)
    better = twin.best_val_mse < fit.best_val_mse
    return pick_fits(fit, twin, better), pick_fits(fit, twin, ~better)
