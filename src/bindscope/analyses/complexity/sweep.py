"""Binding-function complexity (docs/method.md §6): which approximator families generalise to scenes of
unseen objects, and from how little coverage.

For every seed, nested object-level splits at each fraction f; every approximator is fitted on
the train_only scenes (a validation share of them held out for selection and early stopping,
never test) and its *predicted* embeddings are decoded by frozen probes. The sweep fits all
(fraction, seed) models of a family together (:func:`bindscope.analyses.complexity.approxfit.fit_stack`).

Outputs are tidy rows (the key columns of :mod:`bindscope.analyses.results` and
:data:`EXTRA_COLUMNS`), and a summary: per approximator the area under test_only object accuracy
over fractions and f*, the smallest fraction reaching 90% of the in-distribution accuracy (the
frozen probes on the true embeddings of the same scenes).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator, model_validator

from bindscope.analyses.complexity.als import Solver, fit_stack_exact
from bindscope.analyses.complexity.approxfit import (
    PROTOCOLS,
    SceneIndex,
    Schedule,
    Selector,
    StackFit,
    TargetBasis,
    fit_stack,
    pick_fits,
    predict_stack,
    principal_axes,
)
from bindscope.analyses.complexity.approximators import DEFAULT_HIDDEN, Family, Layout, Params, num_parameters
from bindscope.analyses.inputs import array_key, probes_key
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, UnitStore, current_executor, current_store
from bindscope.core.tidy import result_row, spread, tidy
from bindscope.core.validation import (
    MAX_ITEMS,
    MAX_SCENE_COUNT,
    MAX_STEPS,
    MAX_WIDTH,
    Device,
    ParitySettings,
    Seed,
    Seeds,
    Settings,
    short_repr,
)
from bindscope.core.version import __version__
from bindscope.estimators.additive import r2_score
from bindscope.estimators.metrics import accuracy_metrics
from bindscope.estimators.probes import ProbeSet, chance_accuracy, set_separation_correct, soft_targets
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import (
    DEFAULT_FRACTIONS,
    DEFAULT_SEEDS,
    ObjectOrder,
    ObjectSplit,
    carve_validation,
    check_fraction,
    check_fractions,
    object_splits,
)

#: The complexity table's own columns after the key columns (variant = the approximator's label).
EXTRA_COLUMNS = ("fraction", "checkpoint", "budget", "selection")
#: Training curves: ``epoch`` counts Adam epochs where ``unit`` is ``epoch`` and ALS sweeps where it is ``sweep``.
HISTORY_COLUMNS = ["approximator", "fraction", "seed", "unit", "epoch", "train_mse", "val_mse"]
DEFAULT_APPROXIMATORS = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")
#: The ``selection`` column of the results: how the scored checkpoints were chosen.
SELECTION_MARKS = {"validation": "validation", "test": "test (optimistic)"}
GENERALISES_AT = 0.9  # f*: the first fraction reaching this share of in-distribution accuracy
COVERED_AT = 0.9  # a fraction is decisive when this share of its test scenes hold fitted values only
POWER_Z = 1.645  # ... and enough of them for a true-embedding-accurate predictor to pass at 95%
#: Exact product fits are repeated from another initialisation (seed + this) and the one of lower
#: validation MSE is kept. Where the two fit the seen scenes equally well (validation MSEs within
#: TIED_WITHIN of the validation targets' variance) and both well (training R² at least
#: FITS_TRAINING_AT; else the form is ruled out anyway) but disagree on covered test_only scenes by
#: more than DETERMINED_BELOW of their variance, the data do not determine what the family predicts
#: for unseen objects. Fits not tied are a local minimum and a better one: no evidence either way.
SECOND_FIT_SEED = 1_000_003
DETERMINED_BELOW = 0.1
FITS_TRAINING_AT = 0.9
TIED_WITHIN = 0.005
UNDETERMINED_SEEDS = 0.5  # ... at a fraction where at least this share of its seeds are so
PRODUCTS = ("mult", "mult_within_object", "sum_mult")
STACK_ELEMENTS = 2**25  # models x scenes x widest activation per stacked step (memory bound)
PAD_FREE_ELEMENTS = 2**22  # below this a stack's padding costs less than another stack's steps
PAD_WASTE = 1.4
#: The folder, beside a run's units, where finished fits are kept by their own content keys (see
#: :func:`model_keys`): a rerun with more approximators, fractions or seeds fits only the new ones.
FITS = "fits"
#: A capped budget's principal subspace is widened until the probes read the embeddings' part inside it
#: at most this much (object accuracy) below the embeddings themselves.
READ_WITHIN = 0.01


class Budget(Settings):
    """How a sweep fits its models, and what it may spend per fit; every result records it.

    Parameters
    ----------
    name
        ``full`` (the exact protocol on every scene), ``cpu`` (the exact protocol, capped) or
        ``paper`` (docs/method.md §6's Adam for every family, on every scene).
    protocol
        ``exact``: alternating exact least squares for the table families (additive, mult,
        mult_within_object, sum_mult; :mod:`bindscope.analyses.complexity.als`) and Adam on
        standardised targets, stopped on a validation plateau, for the MLP. ``paper``: full-batch
        Adam for every family (docs/method.md §6).
    sweeps
        ALS sweeps at most per fit (exact protocol).
    epochs, eval_every, patience
        Full-batch Adam epochs at most, epochs between validation checks, and checks without
        improvement before a model stops (None: never stop early); the MLP's under the exact
        protocol, every family's under the paper protocol.
    max_train_scenes
        Cap on the train_only scenes one model is fitted on (a seeded sample that holds every
        train object in every slot), None for all.
    max_eval_scenes
        Cap on the scenes scored per group (a seeded sample), None for all.
    max_target_dims, target_variance
        Fit every model in the embeddings' leading principal subspace: the fewest components that
        hold ``target_variance`` of the variance, at most ``max_target_dims`` (None: the embeddings
        as they are). Predictions are restored to the embedding space before they are scored, so
        the dropped share of the variance counts against every family alike
        (:class:`~bindscope.analyses.complexity.approxfit.TargetBasis`).
    standardize
        Adam fits each model to its standardised training targets (mean 0, variance 1, one
        scalar), folded back into the output layer afterwards (:class:`Schedule`); on in the
        exact protocol's budgets, off in ``paper`` (the research code fits the raw targets).
    decay
        Adam's learning rate: ``cosine`` to 0 over ``epochs`` (the exact protocol's MLP) or
        ``constant`` (``paper``: the research code never steps its scheduler).
    starts, start_sweeps
        Random initialisations of an exact product fit, and the ALS sweeps each runs before the best
        one is continued (:class:`~bindscope.analyses.complexity.als.Solver`).
    probes
        The optimiser of the probes a run fits itself when none are given: ``fast`` (L-BFGS, and the
        reference Adam trajectory on separable training sets, within its time budget) or ``lbfgs``
        (L-BFGS alone: the probes only decode, here, and separable sets take the reference minutes).
    reason
        Why this budget was chosen (``--budget auto``), said in every output; empty when named.
    """

    name: str = "full"
    protocol: Literal["exact", "paper"] = "exact"
    sweeps: int = Field(800, ge=1, le=MAX_STEPS)
    epochs: int = Field(4000, ge=1, le=MAX_STEPS)
    eval_every: int = Field(50, ge=1, le=MAX_STEPS)
    patience: int | None = Field(10, ge=1, le=MAX_STEPS)
    max_train_scenes: int | None = Field(None, ge=2, le=MAX_SCENE_COUNT)
    max_eval_scenes: int | None = Field(None, ge=2, le=MAX_SCENE_COUNT)
    max_target_dims: int | None = Field(None, ge=1, le=MAX_WIDTH)
    target_variance: float = Field(0.999, gt=0, le=1)
    standardize: bool = True
    decay: Literal["cosine", "constant"] = "cosine"
    starts: int = Field(8, ge=1, le=MAX_ITEMS)
    start_sweeps: int = Field(10, ge=1, le=MAX_STEPS)
    probes: Literal["fast", "lbfgs"] = "fast"
    reason: str = ""

    @model_validator(mode="after")
    def _schedule(self) -> Budget:
        Schedule(self.epochs, 1e-2, self.eval_every, self.patience)  # validates the rest
        return self


BUDGETS = {
    "full": Budget(),
    "cpu": Budget(
        name="cpu",
        sweeps=800,
        epochs=600,
        eval_every=10,
        patience=3,
        max_train_scenes=512,
        max_eval_scenes=2000,
        max_target_dims=128,
        starts=4,
        start_sweeps=5,
        probes="lbfgs",
    ),
    "paper": Budget(
        name="paper", protocol="paper", epochs=4000, eval_every=50, patience=None, standardize=False, decay="constant"
    ),
}


def resolve_budget(
    name: str = "auto",
    device: str = "cpu",
    *,
    standardize: bool | None = None,
    protocol: str | None = None,
    **overrides: int | None,
) -> Budget:
    """A named budget (``auto``: ``full`` on CUDA, ``cpu`` otherwise, with the reason recorded) with
    explicit overrides.

    Overrides whose value is None are ignored; ``patience=0`` or a cap of 0 switches early
    stopping or the cap off. ``protocol`` switches the fitting protocol and keeps the caps.
    """
    reason = ""
    if name == "auto":
        name, reason = auto_budget(str(device))
    if name not in BUDGETS:
        raise BindscopeError(f"unknown budget {name!r}; choose auto, {', '.join(BUDGETS)}")
    if protocol is not None and protocol not in PROTOCOLS:
        raise BindscopeError(f"unknown protocol {protocol!r}; choose {' or '.join(PROTOCOLS)}")
    changes: dict[str, int | str | None] = {k: v for k, v in overrides.items() if v is not None}
    for key in ("epochs", "eval_every", "sweeps"):
        value = overrides.get(key)
        if value is not None and value < 1:
            raise BindscopeError(f"{key} must be at least 1, got {value}")
    for key in ("patience", "max_train_scenes", "max_eval_scenes", "max_target_dims"):
        value = overrides.get(key)
        if value is not None and value < 0:
            raise BindscopeError(f"{key} must be >= 0 (0 switches it off), got {value}")
        if value == 0:
            changes[key] = None
    if protocol is not None and protocol != BUDGETS[name].protocol:
        paper = BUDGETS["paper"]
        changes = {
            "protocol": protocol,
            "epochs": paper.epochs if protocol == "paper" else BUDGETS["full"].epochs,
            "patience": paper.patience if protocol == "paper" else BUDGETS["full"].patience,
            "standardize": protocol != "paper",
            "decay": paper.decay if protocol == "paper" else BUDGETS["full"].decay,
            **changes,
        }
    if standardize is not None:
        changes["standardize"] = standardize
    return BUDGETS[name].replace(reason=reason, **changes)


def auto_budget(device: str) -> tuple[str, str]:
    """``--budget auto``: the budget for ``device`` and why, in words."""
    if device.startswith("cuda"):
        return "full", f"auto: device {device}, so every scene, uncapped"
    cpu = BUDGETS["cpu"]
    return "cpu", (
        f"auto: device {device}, so capped to finish in minutes on 2 cores: at most {cpu.max_train_scenes:,} "
        f"training scenes per fit, fits in the embeddings' leading principal subspace (the fewest components "
        f"holding {cpu.target_variance:.1%} of the variance, at most {cpu.max_target_dims}), {cpu.starts} starts of "
        f"{cpu.start_sweeps} ALS sweeps and {cpu.sweeps} sweeps per product fit, {cpu.epochs} MLP epochs (stopping "
        f"after {cpu.patience} checks of {cpu.eval_every} without improvement), L-BFGS probes; --budget full fits "
        "every scene uncapped in the full embedding space (minutes on a GPU, hours on a CPU)"
    )


class ComplexitySettings(ParitySettings):
    """A complexity sweep (docs/method.md §6 defaults).

    Without frozen probes among the inputs, the probes are fitted first on a scene-level split
    (``probe_seed``, train fraction 0.4, the ``fast`` optimiser) and written with the result.

    ``r2_centre``: R² takes SST around the mean of all the sweep's scenes (``scenes``, the
    research code) or around the scored group's own mean (``group``). ``object_order``: train
    objects taken from a seeded order that first covers every concept value (``covering``), or
    from a plain permutation (``random``, the research code: at low fractions some test scenes then
    hold values no table row was fitted for). ``probe_scenes``: where the probes' own training
    scenes are known, leave them out of the scored test_only and mixed groups (``exclude``: probes
    that separate their training set read those scenes' true embeddings perfectly, noise
    included, which no prediction can match) or score them (``keep``, the research code).
    ``selection``: the
    checkpoint of the lowest validation MSE (``validation``), or, only to reproduce the research
    code's numbers, of the highest test_only object accuracy (``test``: optimistic; paper
    protocol only; every train_only scene is fitted on). ``parity="paper"``: the paper budget
    (Adam at a constant 1e-2 for 4,000 epochs on raw targets), R² around all scenes and the
    random object order and scored probe-training scenes, where not given.
    """

    PAPER: ClassVar[dict[str, Any]] = {
        "budget": BUDGETS["paper"],
        "r2_centre": "scenes",
        "object_order": "random",
        "probe_scenes": "keep",
    }

    approximators: tuple[str, ...] = DEFAULT_APPROXIMATORS
    hidden: tuple[int, ...] = (DEFAULT_HIDDEN,)
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    seeds: Seeds = DEFAULT_SEEDS
    lr: float = Field(1e-2, gt=0)
    width: int | None = None
    validation_fraction: float = 0.1
    budget: Budget = Field(default_factory=Budget)
    r2_centre: Literal["scenes", "group"] = "scenes"
    object_order: ObjectOrder = "covering"
    probe_scenes: Literal["exclude", "keep"] = "exclude"
    selection: Literal["validation", "test"] = "validation"
    description_length: bool = True
    second_fit: bool = True
    probe_seed: Seed = 0
    device: Device = "cpu"

    @field_validator("approximators")
    @classmethod
    def _approximators(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} approximators, got {len(v)}")
        return v

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return check_fractions(v)

    @field_validator("validation_fraction")
    @classmethod
    def _validation(cls, v: float) -> float:
        return check_fraction(v, "validation fraction")

    @field_validator("width")
    @classmethod
    def _width(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"table width must be at least 1, got {v}")
        if v is not None and v > MAX_WIDTH:
            raise ValueError(f"table width must be at most {MAX_WIDTH}, got {v}")
        return v

    @field_validator("hidden")
    @classmethod
    def _hidden(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or min(v) < 1:
            raise ValueError(f"give MLP hidden widths of at least 1, got {short_repr(list(v))}")
        if max(v) > MAX_WIDTH:
            raise ValueError(f"MLP hidden widths must be at most {MAX_WIDTH}, got {short_repr(list(v))}")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} MLP hidden widths, got {len(v)}")
        return v

    @model_validator(mode="after")
    def _selection(self) -> ComplexitySettings:
        if self.selection == "test" and self.budget.protocol != "paper":
            raise ValueError(
                "selection on test accuracy reproduces the research code's (optimistic) checkpoints and runs "
                "under the paper protocol only; add --protocol paper (or --parity paper)"
            )
        return self

    @model_validator(mode="after")
    def _families(self) -> ComplexitySettings:
        try:
            self.families()  # unknown names fail here, not after an hour of fitting
        except BindscopeError as exc:
            raise ValueError(str(exc)) from None
        return self

    def families(self) -> list[Family]:
        """The families to fit, ``mlp`` expanded to one per hidden width."""
        out: list[Family] = []
        for name in self.approximators:
            out += [Family("mlp", h) for h in self.hidden] if name.strip() == "mlp" else [Family.parse(name)]
        if not out:
            raise BindscopeError("give at least one approximator")
        labels = [f.label for f in out]
        if len(set(labels)) != len(labels):
            raise BindscopeError(f"approximators repeat: {labels}")
        return out

    def schedule(self) -> Schedule:
        """Adam's schedule (every family under the paper protocol, the MLP under the exact one)."""
        b = self.budget
        return Schedule(b.epochs, self.lr, b.eval_every, b.patience, standardize=b.standardize, decay=b.decay)

    def solver(self) -> Solver:
        """The exact protocol's block solver."""
        b = self.budget
        return Solver(sweeps=b.sweeps, starts=b.starts, start_sweeps=b.start_sweeps)

    def exact(self, family: Family) -> bool:
        """Whether ``family`` is fitted by exact block solves (else by Adam)."""
        return self.budget.protocol == "exact" and family.name != "mlp"


@dataclass(frozen=True)
class Plan:
    """One model of the sweep: its fraction, seed and scene indices (into the K-object scenes)."""

    fraction: float
    seed: int
    train: np.ndarray  # scenes fitted on
    groups: dict[str, np.ndarray]  # scenes scored per group (possibly a sample)
    group_sizes: dict[str, int]  # scenes in each group before sampling
    block: np.ndarray  # prequential: the next block's scenes scored (possibly a sample)
    block_size: int


@dataclass
class ComplexityResult:
    """The tidy table, the training curves and the scenes actually used."""

    table: pd.DataFrame
    history: pd.DataFrame
    dropped_scenes: int
    seconds: dict[str, float]
    parameters: dict[str, int]
    capacity: dict[str, str] = field(default_factory=dict)  # see memorising_families
    probe_scenes_unscored: int | None = None  # probe-training scenes left out of test_only and mixed
    fits: dict[str, dict] = field(default_factory=dict)  # every model's fit (rows, history, seconds) by its key
    reused: int = 0  # fits found kept from an earlier run (see model_keys), not fitted again
    targets: dict[str, Any] | None = None  # the principal subspace fitted in (see target_basis)


# -- planning ------------------------------------------------------------------------------------------
def _rng(seed: int, fraction: float, purpose: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(round(fraction * 1_000_000)), purpose])


def sample(indices: np.ndarray, cap: int | None, rng: np.random.Generator) -> np.ndarray:
    """All ``indices`` or a seeded sample of ``cap`` of them, sorted."""
    if cap is None or len(indices) <= cap:
        return np.sort(indices)
    return np.sort(rng.choice(indices, size=cap, replace=False))


def covering_sample(indices: np.ndarray, objects: np.ndarray, cap: int | None, rng: np.random.Generator) -> np.ndarray:
    """A seeded sample of ``cap`` scenes that holds every object present in every slot where it occurs.

    ``objects`` is ``[N, K]`` (object ids per slot of all scenes). One random scene per (slot,
    object) comes first, the rest is filled at random; if the cover alone exceeds ``cap`` a random
    part of it is kept.
    """
    if cap is None or len(indices) <= cap:
        return np.sort(indices)
    perm = rng.permutation(indices)
    first = np.unique(
        np.concatenate([np.unique(objects[perm, k], return_index=True)[1] for k in range(objects.shape[1])])
    )
    if len(first) >= cap:
        return np.sort(perm[rng.choice(first, size=cap, replace=False)])
    rest = np.setdiff1d(np.arange(len(perm)), first, assume_unique=True)[: cap - len(first)]
    return np.sort(perm[np.concatenate([first, rest])])


def plan_sweep(scenes: SceneSet, settings: ComplexitySettings, unscored: np.ndarray | None = None) -> list[Plan]:
    """Every (fraction, seed) model: its training scenes, scored groups and prequential block.

    ``unscored``: scene indices never scored in the test_only and mixed groups (the probes'
    training scenes under ``probe_scenes="exclude"``).
    """
    objects = scenes.object_ids()
    budget = settings.budget
    fractions = sorted(settings.fractions)
    plans = []
    for seed in settings.seeds:
        splits = object_splits(scenes, fractions, seed, order=settings.object_order)
        for i, split in enumerate(splits):
            nxt = splits[i + 1] if i + 1 < len(splits) else None
            plans.append(_plan(scenes, objects, split, nxt, settings, budget, unscored))
    return plans


def _plan(
    scenes: SceneSet,
    objects: np.ndarray,
    split: ObjectSplit,
    nxt: ObjectSplit | None,
    settings: ComplexitySettings,
    budget: Budget,
    unscored: np.ndarray | None = None,
) -> Plan:
    f, seed = split.fraction, split.seed
    test_only, mixed = split.test_only, split.mixed
    if unscored is not None:
        test_only, mixed = (np.setdiff1d(g, unscored, assume_unique=True) for g in (test_only, mixed))
    if len(split.train_only) < 2:
        raise BindscopeError(
            f"fraction {f:g} (seed {seed}) leaves {len(split.train_only)} scene(s) made only of train objects; "
            "at least 2 are needed (one to fit, one to validate): drop that fraction or start the sweep higher"
        )
    if settings.selection == "test":  # the research code fits every train_only scene, selects on test_only
        if not len(test_only):
            raise BindscopeError(
                f"fraction {f:g} (seed {seed}) leaves no test_only scene to select checkpoints on; drop that fraction"
            )
        fit, val = split.train_only, np.empty(0, np.int64)
    else:
        fit, val = carve_validation(split.train_only, settings.validation_fraction, seed, min_count=1)
    groups = {"train_only": fit, "validation": val, "test_only": test_only, "mixed": mixed}
    cap = budget.max_eval_scenes
    train = covering_sample(fit, objects, budget.max_train_scenes, _rng(seed, f, 0))
    pools = {**groups, "train_only": train}  # train_only is scored on the scenes it was fitted on
    scored = {g: sample(idx, cap, _rng(seed, f, 1 + j)) for j, (g, idx) in enumerate(pools.items())}
    nxt_train = nxt.train_only if nxt is not None else np.arange(len(scenes))
    block = np.setdiff1d(nxt_train, split.train_only, assume_unique=True)
    return Plan(
        f, seed, train, scored, {g: len(v) for g, v in groups.items()}, sample(block, cap, _rng(seed, f, 9)), len(block)
    )


def stacks(plans: list[Plan], family: Family, width: int, dim: int, layout: Layout) -> list[list[int]]:
    """Group models to be fitted together: padding to the largest training set in a stack may waste
    at most 40% of its work (or any amount while the stack is small), within a memory bound."""
    widest = max(layout.num_slots * layout.num_concepts * width, family.hidden or 0, dim, 2 * width)
    order = sorted(range(len(plans)), key=lambda i: len(plans[i].train))
    out: list[list[int]] = []
    for i in order:
        n = len(plans[i].train)
        if out:
            group = out[-1]
            padded = (len(group) + 1) * n * widest
            used = (sum(len(plans[j].train) for j in group) + n) * widest
            if padded <= STACK_ELEMENTS and (padded <= PAD_FREE_ELEMENTS or padded <= PAD_WASTE * used):
                group.append(i)
                continue
        out.append([i])
    return out


# -- scoring -------------------------------------------------------------------------------------------
def score(
    pred: np.ndarray,
    y: np.ndarray,
    targets: dict[str, np.ndarray],
    probes: ProbeSet,
    centre: np.ndarray | None = None,
) -> dict[str, float]:
    """Accuracies of ``pred`` under the frozen probes, and R^2 (SST around ``centre``, by default
    the scored scenes' own mean) and MSE against ``y``."""
    logits = probes.decision_function(pred)
    correct = {n: set_separation_correct(logits[n], t) for n, t in targets.items()}
    out = accuracy_metrics({n: c.mean() for n, c in correct.items()})
    out["r2"] = r2_score(y, pred, centre)
    out["mse"] = float(np.mean((np.asarray(y, np.float64) - pred) ** 2))
    return out


def _rows(approximator: str, plan: Plan, group: str, checkpoint: str, metrics: dict[str, float]) -> Iterator[dict]:
    for metric, value in metrics.items():
        yield {
            **result_row("complexity", approximator, group, metric, plan.seed, value),
            "fraction": plan.fraction,
            "checkpoint": checkpoint,
        }


def covered_share(values: np.ndarray, fitted: np.ndarray, scored: np.ndarray) -> float:
    """Share of the ``scored`` scenes that are :func:`covered` (NaN for none)."""
    return float(covered(values, fitted, scored).mean()) if len(scored) else float("nan")


def covered(values: np.ndarray, fitted: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """Per ``scored`` scene: whether its every (slot, concept, value) occurs in the ``fitted`` ones.

    A table family has trained the rows of those values only: a scene holding any other value
    reads at least one row that never left its initialisation, so no table family can predict it.

    Parameters
    ----------
    values
        ``[N, K, C]`` concept values per slot (``PAD`` where a slot is empty).
    fitted, scored
        Row indices into ``values``.
    """
    top = int(values.max()) + 2  # PAD (-1) maps to 0, always "trained"
    shifted = values + 1
    trained = np.zeros((values.shape[1], values.shape[2], top), dtype=bool)
    trained[:, :, 0] = True
    k, c = np.meshgrid(np.arange(values.shape[1]), np.arange(values.shape[2]), indexing="ij")
    trained[k[None], c[None], shifted[fitted]] = True
    return trained[k[None], c[None], shifted[scored]].all(axis=(1, 2))


def reference_rows(
    plans: list[Plan], y: np.ndarray, targets: dict[str, np.ndarray], probes: ProbeSet, values: np.ndarray
) -> list[dict]:
    """Per model and group: the probes on the true embeddings ("embeddings"), chance, group sizes and
    the share of scenes whose concept values were all fitted (``covered_share``)."""
    rows: list[dict] = []
    for plan in plans:
        for group, idx in plan.groups.items():
            sizes: dict[str, float] = {"group_scenes": plan.group_sizes[group], "scored_scenes": len(idx)}
            if len(idx):
                sizes["covered_share"] = covered_share(values, plan.train, idx)
            rows += _rows("scenes", plan, group, "", sizes)
            if not len(idx):  # e.g. no test_only scene at this fraction: nothing to score
                continue
            t = {n: v[idx] for n, v in targets.items()}
            truth = score(y[idx], y[idx], t, probes)
            rows += _rows("embeddings", plan, group, "", {k: v for k, v in truth.items() if k not in ("r2", "mse")})
            chance = accuracy_metrics({n: chance_accuracy(v) for n, v in t.items()})
            rows += _rows("chance", plan, group, "", chance)
        rows += _rows("scenes", plan, "train_only", "", {"fitted_scenes": len(plan.train)})
    return rows


def _block_bits(mse: float, scenes: int, dim: int) -> float:
    """Bits to send ``scenes`` x ``dim`` values under a Gaussian with the block's own MSE (+ its variance)."""
    if scenes == 0:
        return 0.0
    return scenes * dim / 2 * math.log2(2 * math.pi * math.e * max(mse, 1e-300)) + 0.5 * math.log2(scenes * dim)


def _family_rows(
    family: Family,
    plans: list[Plan],
    fit: StackFit,
    members: list[int],
    data: SceneIndex,
    layout: Layout,
    y: np.ndarray,
    targets: dict[str, np.ndarray],
    probes: ProbeSet,
    description_length: bool,
    centre: np.ndarray | None = None,
) -> list[dict]:
    rows: list[dict] = []
    label, dim = family.label, y.shape[1]
    wanted = [np.unique(np.concatenate([*plans[i].groups.values(), plans[i].block])) for i in members]
    for checkpoint, params in (("selected", fit.selected), ("final", fit.final)):
        preds = predict_stack(family, params, layout, data, wanted)
        for j, i in enumerate(members):
            plan, lookup = plans[i], wanted[j]
            for group, idx in plan.groups.items():
                if not len(idx):
                    continue
                pred = preds[j][np.searchsorted(lookup, idx)]
                t = {n: v[idx] for n, v in targets.items()}
                rows += _rows(label, plan, group, checkpoint, score(pred, y[idx], t, probes, centre))
            if description_length and checkpoint == "selected" and len(plan.block):
                err = preds[j][np.searchsorted(lookup, plan.block)] - y[plan.block]
                mse = float(np.mean(err.astype(np.float64) ** 2))
                rows += _rows(
                    label,
                    plan,
                    "next_block",
                    checkpoint,
                    {
                        "block_mse": mse,
                        "block_scenes": plan.block_size,
                        "code_bits": _block_bits(mse, plan.block_size, dim),
                    },
                )
    for j, i in enumerate(members):
        rows += _rows(
            label,
            plans[i],
            "train_only",
            "",
            {
                "epochs_run": fit.epochs_run[j],
                "best_epoch": fit.best_epoch[j],
                "best_val_mse": fit.best_val_mse[j],
                "stopped_early": float(fit.stopped_early[j]),
                "unfinished_r2": float(fit.unfinished_r2[j]),
                "converged": float(fit.converged[j]),
            },
        )
    return rows


def baseline_block_rows(plans: list[Plan], y: np.ndarray) -> list[dict]:
    """Prequential code of the next block with no model: the mean of the scenes seen so far."""
    rows: list[dict] = []
    for plan in plans:
        if not len(plan.block):
            continue
        seen = np.concatenate([plan.groups["validation"], plan.train])
        mse = float(np.mean((y[plan.block].astype(np.float64) - y[seen].mean(axis=0)) ** 2))
        rows += _rows(
            "mean",
            plan,
            "next_block",
            "",
            {
                "block_mse": mse,
                "block_scenes": plan.block_size,
                "code_bits": _block_bits(mse, plan.block_size, y.shape[1]),
            },
        )
    return rows


# -- the sweep -----------------------------------------------------------------------------------------
def k_object_scenes(scenes: SceneSet) -> np.ndarray:
    """Indices of the scenes holding all K objects (the sweep's scenes)."""
    keep = scenes.full()
    if len(keep) == 0:
        raise BindscopeError("no scene holds all K objects; the complexity sweep needs K-object scenes")
    return keep


def complexity_sweep(
    y: np.ndarray,
    scenes: SceneSet,
    probes: ProbeSet,
    settings: ComplexitySettings = ComplexitySettings(),
    *,
    progress: Callable[[int, int], object] | None = None,
    probe_fitted: np.ndarray | None = None,
) -> ComplexityResult:
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
    targets = soft_targets(sc)
    layout = Layout.of(sc)
    probe_train, held_out = None, None  # the probes' training scenes (indices into sc) and the rest, where known
    if probe_fitted is not None:
        probe_train = np.flatnonzero(np.isin(keep, np.asarray(probe_fitted, dtype=np.int64)))
        held_out = np.setdiff1d(np.arange(len(sc)), probe_train)
    unscored = probe_train if settings.probe_scenes == "exclude" else None
    basis, fitted_in = target_basis(ys, settings.budget, probes, targets["object"], held_out)
    width = settings.width or (ys.shape[1] if basis is None else basis.dims)
    plans = plan_sweep(sc, settings, unscored)
    rows = reference_rows(plans, ys, targets, probes, sc.scenes)
    centre = ys.astype(np.float64).mean(axis=0) if settings.r2_centre == "scenes" else None
    if settings.description_length:
        rows += baseline_block_rows(plans, ys)
    history: list[tuple] = []
    distinct = len(np.unique(sc.scenes.reshape(len(sc), -1), axis=0))
    capacity = memorising_families(settings.families(), layout, width, distinct)
    fitted_dim = ys.shape[1] if basis is None else basis.dims
    parameters = {f.label: num_parameters(f, layout, width, fitted_dim) for f in settings.families()}
    shared = SweepShared(ys, sc, probes, settings, plans, targets, layout, width, centre, frozenset(capacity), basis)
    stores = fit_stores()
    keys = model_keys(shared)
    parts = kept_fits(stores, keys)
    reused = len(parts)
    work = {
        family: missing_stacks(plans, [i for i, key in enumerate(keys[family]) if key not in parts], family, shared)
        for family in settings.families()
    }
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
    seconds = dict.fromkeys(parameters, 0.0)
    for family, family_keys in keys.items():  # in family and plan order, however the fits were stacked or kept
        for key in family_keys:
            rows += parts[key]["rows"]
            history += [tuple(h) for h in parts[key]["history"]]
            seconds[family.label] += parts[key]["seconds"]
    seconds = {label: round(s, 3) for label, s in seconds.items()}
    if settings.device.startswith("cuda"):
        torch.cuda.empty_cache()
    if settings.selection == "test":  # the criterion kept per fit is 1 - test_only object accuracy
        rows = [{**r, "metric": "best_test_error"} if r["metric"] == "best_val_mse" else r for r in rows]
    marks = {"budget": settings.budget.name, "selection": SELECTION_MARKS[settings.selection]}
    table = tidy([{**r, **marks} for r in rows], EXTRA_COLUMNS)
    return ComplexityResult(
        table,
        pd.DataFrame(history, columns=HISTORY_COLUMNS).assign(budget=settings.budget.name),
        len(scenes) - len(keep),
        seconds,
        parameters,
        capacity,
        None if unscored is None else len(unscored),
        {key: parts[key] for family_keys in keys.values() for key in family_keys},
        reused,
        fitted_in,
    )


def target_basis(
    y: np.ndarray, budget: Budget, probes: ProbeSet, objects: np.ndarray, read_on: np.ndarray | None = None
) -> tuple[TargetBasis | None, dict[str, Any] | None]:
    """The principal subspace the budget fits in (see :class:`Budget`; None: the embeddings as they
    are) and what it keeps.

    The subspace is widened (doubled) while the frozen probes read the embeddings' part inside it
    more than :data:`READ_WITHIN` worse than the embeddings (object accuracy over the scenes
    ``read_on``, those the probes were not fitted on where known, else every scene): predictions
    confined to it could not otherwise reach the in-distribution line, and f* would read the cap as
    complexity. Small components can carry what the probes read (held-out scenes), or only the
    noise of the probes' own training scenes (which they may have fitted): hence the held-out read.
    """
    if budget.max_target_dims is None:
        return None, None

    on = np.arange(len(y)) if read_on is None or not len(read_on) else read_on

    def read(z: np.ndarray) -> float:
        logits = probes.decision_function(z[on], ["object"])["object"]
        return float(set_separation_correct(logits, objects[on]).mean())

    pca = principal_axes(y)  # fitted once, however often the subspace is widened
    basis = None if pca is None else TargetBasis.leading(pca, budget.target_variance, budget.max_target_dims)
    full = read(y)
    while basis is not None:
        inside = read(basis.within(y))
        if full - inside <= READ_WITHIN:
            return basis, {**basis.describe(), "object_acc": inside, "object_acc_embeddings": full}
        assert pca is not None  # a basis comes from the fitted axes
        basis = TargetBasis.leading(pca, budget.target_variance, budget.max_target_dims, min_dims=2 * basis.dims)
    return None, None


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
    capacity: frozenset[str]  # labels of the families that can memorise
    basis: TargetBasis | None = None  # the subspace the models are fitted in (None: the embeddings)


def sweep_units(shared: SweepShared, work: dict[Family, list[list[int]]], keys: dict[Family, list[str]]) -> list[Unit]:
    """One unit per stack of models of a family, named by the family and its models' (fraction, seed)
    and keyed by its models' keys (:func:`model_keys`)."""
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


def fit_stores() -> list[UnitStore]:
    """Where a sweep finds finished fits, the first one also keeping the new ones: :data:`FITS` beside
    the run's units folder (``.<out>.units/``, shared by every run into ``out`` whatever its
    approximators, fractions and seeds), then ``out/fits`` of a result already there; none without
    a units folder (a sweep outside :func:`~bindscope.analyses.registry.run_analysis`)."""
    store = current_store()
    if store is None:
        return []
    units = store.folder.parent
    out = units.parent / units.name.removeprefix(".").removesuffix(".units")
    return [UnitStore(units / FITS), UnitStore(out / FITS)]


def sweep_key(shared: SweepShared) -> str:
    """What every fit of a sweep depends on besides its family and model: the bindscope version, the
    embeddings, scenes and probes, and every setting but the lists of families, fractions and seeds."""
    settings = {
        k: v for k, v in shared.settings.to_dict().items() if k not in ("approximators", "hidden", "fractions", "seeds")
    }
    blob = {
        "bindscope": __version__,
        "settings": settings,
        "width": shared.width,
        "embeddings": array_key(shared.y),
        "scenes": array_key(shared.scenes.scenes),
        "probes": probes_key(shared.probes),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def model_keys(shared: SweepShared) -> dict[Family, list[str]]:
    """Per family, the content key of each planned model's fit: the family, the sweep's key
    (:func:`sweep_key`), the model's fraction and seed, and the scenes it fits, selects on and scores
    (with description lengths, its next block too, which the next fraction up decides)."""
    base = sweep_key(shared)
    plans = []
    for plan in shared.plans:
        h = hashlib.sha256(f"{base}|{plan.fraction!r}|{plan.seed}|{sorted(plan.group_sizes.items())}".encode())
        parts = [plan.train, *(plan.groups[g] for g in sorted(plan.groups))]
        if shared.settings.description_length:
            parts += [plan.block, np.array([plan.block_size])]
        for part in parts:
            h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes() + b"|")
        plans.append(h.hexdigest())
    return {
        f: [hashlib.sha256(f"{f.label}|{p}".encode()).hexdigest() for p in plans] for f in shared.settings.families()
    }


def kept_fits(stores: list[UnitStore], keys: dict[Family, list[str]]) -> dict[str, dict]:
    """The fits among ``keys`` that any of ``stores`` holds, by key."""
    out: dict[str, dict] = {}
    for key in (k for family_keys in keys.values() for k in family_keys):
        for store in stores:
            found, part = store.get(key)
            if found:
                out[key] = part
                break
    return out


def missing_stacks(plans: list[Plan], missing: list[int], family: Family, shared: SweepShared) -> list[list[int]]:
    """Stacks (:func:`stacks`) of the ``missing`` models only, as indices into ``plans``."""
    if not missing:
        return []
    chosen = [plans[i] for i in missing]
    groups = stacks(chosen, family, shared.width, shared.y.shape[1], shared.layout)
    return [[missing[j] for j in group] for group in groups]


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
    fit = _fit(settings, family, layout, data, chosen, settings.schedule(), width, selector)
    other = None
    exact = settings.exact(family)
    if settings.second_fit and exact and family.name in PRODUCTS and family.label not in shared.capacity:
        # (a family that can memorise is undetermined already: no need to show it twice)
        fit, other = best_of_two(settings, family, layout, data, chosen, fit, width)
    y, targets, probes = shared.y, shared.targets, shared.probes
    args = (family, plans, fit, members, data, layout, y, targets, probes, settings.description_length, shared.centre)
    rows = _family_rows(*args)
    if other is not None:
        rows += second_fit_rows(family, layout, data, chosen, fit, other, y, shared.centre, shared.scenes.scenes)
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


def _fit(
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


def second_fit_rows(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    members: list[Plan],
    kept: StackFit,
    other: StackFit,
    y: np.ndarray,
    centre: np.ndarray | None,
    values: np.ndarray,
) -> list[dict]:
    """Per model, what two fits from different initialisations say about unseen objects.

    ``second_fit_disagreement``: the squared distance of their predictions on the covered
    test_only scenes (see :func:`covered`; elsewhere tables keep their random initialisation) over
    the targets' sum of squares around ``centre``. ``second_fit_train_r2``: the other fit's training
    R². ``second_fit_val_gap``: how much higher its validation MSE is than the kept one's, over the
    validation targets' mean square around ``centre`` (else the training mean): an R² gap.
    ``second_fit_undetermined``: 1 where :func:`two_fits_undetermined`.
    """
    train = [p.train for p in members]
    test = [p.groups["test_only"][covered(values, p.train, p.groups["test_only"])] for p in members]
    ours, theirs = (predict_stack(family, f.selected, layout, data, test) for f in (kept, other))
    fits = {"kept": kept, "other": other}
    fitted = {name: predict_stack(family, f.selected, layout, data, train) for name, f in fits.items()}
    rows: list[dict] = []
    for j, plan in enumerate(members):
        if not len(test[j]):
            continue
        truth = y[test[j]].astype(np.float64)
        sst = float(((truth - (truth.mean(axis=0) if centre is None else centre)) ** 2).sum())
        gap = float(((ours[j].astype(np.float64) - theirs[j]) ** 2).sum()) / max(sst, 1e-300)
        train_r2 = {name: r2_score(y[train[j]], pred[j]) for name, pred in fitted.items()}
        held = y[plan.groups["validation"]].astype(np.float64)
        scale = float(((held - (y[train[j]].mean(axis=0) if centre is None else centre)) ** 2).mean())
        val_gap = float(other.best_val_mse[j] - kept.best_val_mse[j]) / max(scale, 1e-300)
        undetermined = two_fits_undetermined(val_gap, gap, list(train_r2.values()))
        metrics = {
            "second_fit_disagreement": gap,
            "second_fit_train_r2": train_r2["other"],
            "second_fit_val_gap": val_gap,
            "second_fit_undetermined": float(undetermined),
        }
        rows += _rows(family.label, plan, "test_only", "", metrics)
    return rows


def two_fits_undetermined(val_gap: float, disagreement: float, train_r2: list[float]) -> bool:
    """Whether two fits leave a family's unseen-object predictions open: they tie on validation
    (``val_gap`` at most :data:`TIED_WITHIN`), both fit their training scenes (R² at least
    :data:`FITS_TRAINING_AT`) and disagree on test scenes by more than :data:`DETERMINED_BELOW`."""
    return val_gap <= TIED_WITHIN and disagreement > DETERMINED_BELOW and min(train_r2) >= FITS_TRAINING_AT


def test_accuracy_selector(
    family: Family, layout: Layout, data: SceneIndex, members: list[Plan], targets: np.ndarray, probes: ProbeSet
) -> Selector:
    """``1 -`` test_only object accuracy of each model's predictions under the frozen probes (the
    research code's checkpoint choice: optimistic)."""
    test = [p.groups["test_only"] for p in members]

    def select(params: Params, models: np.ndarray) -> np.ndarray:
        preds = predict_stack(family, params, layout, data, [test[m] for m in models])
        acc = [
            set_separation_correct(probes.decision_function(pred, ["object"])["object"], targets[test[m]]).mean()
            for pred, m in zip(preds, models)
        ]
        return 1.0 - np.asarray(acc, dtype=np.float64)

    return select


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


# -- the verdict -----------------------------------------------------------------------------------------
def _curve(table: pd.DataFrame, approximator: str, group: str, metric: str, checkpoint: str) -> pd.DataFrame:
    """``[seed x fraction]`` values of one metric."""
    sel = table[
        (table.variant == approximator)
        & (table.group == group)
        & (table.metric == metric)
        & (table.checkpoint == checkpoint)
    ]
    return sel.pivot_table(index="seed", columns="fraction", values="value", aggfunc="mean")


def area(curve: pd.DataFrame) -> np.ndarray:
    """Per seed: the normalised area under accuracy over fractions (a mean accuracy)."""
    f = curve.columns.to_numpy(dtype=float)
    values = curve.to_numpy(dtype=float)
    if len(f) == 1:
        return values[:, 0]
    return np.trapezoid(values, f, axis=1) / (f[-1] - f[0])


def f_star(
    mean_acc: pd.Series,
    in_distribution: pd.Series,
    share: float = GENERALISES_AT,
    scenes: pd.Series | None = None,
) -> float | None:
    """The smallest fraction whose accuracy reaches ``share`` of the in-distribution accuracy.

    With ``scenes`` (covered scored test scenes per fraction, summed over seeds), a fraction counts
    only where the evidence from it upwards is enough: the scene-weighted accuracy of it and every
    larger fraction reaches ``share`` of the scene-weighted line, on at least :func:`scenes_needed`
    scenes. A crossing on a handful of scenes, or one the larger fractions contradict, is no f*.
    """
    line = in_distribution.reindex(mean_acc.index).to_numpy(dtype=float)
    acc = mean_acc.to_numpy(dtype=float)
    ok = acc >= share * line
    if scenes is not None:
        n = scenes.reindex(mean_acc.index).fillna(0.0).to_numpy(dtype=float)
        for i in np.flatnonzero(ok):
            total = n[i:].sum()
            if total <= 0:
                ok[i] = False
                continue
            pooled_line = float((n[i:] * line[i:]).sum() / total)
            pooled_acc = float((n[i:] * acc[i:]).sum() / total)
            ok[i] = pooled_acc >= share * pooled_line and total >= scenes_needed(pooled_line, share)
    return float(mean_acc.index[int(np.argmax(ok))]) if ok.any() else None


def covered_scenes(table: pd.DataFrame, cover: pd.DataFrame) -> pd.Series | None:
    """Per fraction, the scored test_only scenes whose every value was fitted, summed over seeds,
    from the ``[seed x fraction]`` ``covered_share`` curve; None when the table has no coverage rows."""
    if cover.empty:
        return None
    scored = _curve(table, "scenes", "test_only", "scored_scenes", "").reindex_like(cover)
    return (cover * scored).sum(axis=0)


def _by_fraction(curve: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """``{fraction: {mean, std, n}}`` over the seeds (rows) of a ``[seed x fraction]`` curve."""
    return {f"{f:g}": spread(curve[f].dropna().to_numpy()) for f in curve.columns}


def complexity_summary(result: ComplexityResult, settings: ComplexitySettings) -> dict:
    """The main numbers: per approximator AUC, f*, curves; the verdict; the budget."""
    table = result.table
    ceiling_curve = _curve(table, "embeddings", "test_only", "object_acc", "")
    ceiling = ceiling_curve.mean(axis=0)
    out: dict = {
        "approximators": {},
        "in_distribution": _by_fraction(ceiling_curve),
        "chance": _by_fraction(_curve(table, "chance", "test_only", "object_acc", "")),
    }
    cover = _curve(table, "scenes", "test_only", "covered_share", "")
    support = covered_scenes(table, cover)
    for family in settings.families():
        label = family.label
        acc = _curve(table, label, "test_only", "object_acc", "selected")
        entry: dict[str, Any] = {
            "auc": spread(area(acc)),
            "f_star": f_star(acc.mean(axis=0), ceiling, scenes=support),
            "f_star_any": f_star(acc.mean(axis=0), ceiling),
            "object_acc": _by_fraction(acc),
            "concept_acc": _by_fraction(_curve(table, label, "test_only", "concept_acc", "selected")),
            "mixed_object_acc": _by_fraction(_curve(table, label, "mixed", "object_acc", "selected")),
            "validation_object_acc": _by_fraction(_curve(table, label, "validation", "object_acc", "selected")),
            "final_object_acc": _by_fraction(_curve(table, label, "test_only", "object_acc", "final")),
            "r2": _by_fraction(_curve(table, label, "test_only", "r2", "selected")),
            "converged": _by_fraction(_curve(table, label, "train_only", "converged", "")),
            "parameters": result.parameters.get(label),
            "seconds": result.seconds.get(label),
        }
        if settings.description_length:
            entry["description_length_bits"] = _code_length(table, label)
        second = _curve(table, label, "test_only", "second_fit_disagreement", "")
        if not second.empty:
            entry["second_fit_disagreement"] = _by_fraction(second)
            entry["second_fit_val_gap"] = _by_fraction(_curve(table, label, "test_only", "second_fit_val_gap", ""))
            entry["undetermined_share"] = _by_fraction(_curve(table, label, "test_only", "second_fit_undetermined", ""))
        out["approximators"][label] = entry
    if settings.description_length:
        out["description_length_baseline_bits"] = _code_length(table, "mean")
    out["coverage"] = _by_fraction(cover)
    out["capacity"] = result.capacity
    decisive = decisive_fractions(cover, support, ceiling)
    undetermined = undetermined_families(out["approximators"], result.capacity, decisive)
    out["verdict"] = verdict(out["approximators"], settings, unconverged_fits(table), undetermined, decisive)
    out["budget"] = settings.budget.to_dict()
    out["fitted_in"] = result.targets
    out["selection"] = SELECTION_MARKS[settings.selection]
    out["dropped_scenes"] = result.dropped_scenes
    out["probe_scenes_unscored"] = result.probe_scenes_unscored
    return out


def _code_length(table: pd.DataFrame, approximator: str) -> float | None:
    """Mean over seeds of the prequential code length (bits) of every block after the first."""
    sel = table[(table.variant == approximator) & (table.group == "next_block") & (table.metric == "code_bits")]
    return float(sel.groupby("seed")["value"].sum().mean()) if len(sel) else None


def unconverged_fits(table: pd.DataFrame) -> dict[str, list[float]]:
    """Per approximator, the fractions at which a fit (any seed) did not converge."""
    sel = table[(table.group == "train_only") & (table.metric == "converged") & (table.value < 0.5)]
    return {str(k): sorted({float(f) for f in g.fraction}) for k, g in sel.groupby("variant")}


def memorising_families(families: list[Family], layout: Layout, width: int, num_scenes: int) -> dict[str, str]:
    """The table families wide enough to give every object (or every scene) any vector at all.

    With table width ``d >= U`` (the number of objects), ``mult_within_object`` holds one product
    term per object (``e_{k,c}[v][j] = 1`` iff object j has value v): ``W`` then lists a free vector
    per object. With ``d`` at least the number of distinct scenes, ``mult`` and ``sum_mult`` hold one
    term per scene. Such a family can fit the seen objects without tying unseen ones to their
    concepts, so what it predicts for them is the optimiser's implicit bias, not the family's form.
    """
    out = {}
    for family in families:
        if family.name == "mult_within_object" and width >= layout.num_objects:
            out[family.label] = (
                f"table width {width} >= {layout.num_objects} objects: it can give every object any vector"
            )
        elif family.name in ("mult", "sum_mult") and width >= num_scenes:
            out[family.label] = f"table width {width} >= {num_scenes} scenes: it can give every scene any vector"
    return out


def describe_fits(fits: dict[str, list[float]]) -> str:
    """``{approximator: fractions}`` as one line: ``mult at f = 0.2, 0.6; mlp(1024) at f = 0.1``."""
    return "; ".join(f"{k} at f = {', '.join(f'{f:g}' for f in v)}" for k, v in fits.items())


def scenes_needed(ceiling: float, share: float = GENERALISES_AT, z: float = POWER_Z) -> float:
    """Test scenes needed before a failure to reach ``share`` of the ``ceiling`` means something.

    A predictor as accurate as the true embeddings scores each scene right with probability
    ``ceiling``; it reaches ``share * ceiling`` with one-sided confidence ``z`` (1.645: 95%) once
    ``n >= (z sqrt(p (1 - p)) / ((1 - share) p))^2`` (binomial, normal approximation).
    """
    if not ceiling > 0:
        return math.inf
    return (z * math.sqrt(ceiling * (1 - ceiling)) / ((1 - share) * ceiling)) ** 2


def decisive_fractions(cover: pd.DataFrame, covered: pd.Series | None, ceiling: pd.Series) -> list[float] | None:
    """Fractions at which no family generalising is evidence of high complexity.

    There, at least :data:`COVERED_AT` of the scored test_only scenes (``cover``, the
    ``[seed x fraction]`` ``covered_share`` curve) hold only concept values that were fitted (else
    no table family could predict them), and those scenes, summed over seeds (``covered``, see
    :func:`covered_scenes`), number at least :func:`scenes_needed` for that fraction's
    in-distribution accuracy. None when the table has no coverage rows.
    """
    if covered is None:
        return None
    return [
        float(f)
        for f in cover.columns
        if cover[f].mean() >= COVERED_AT and covered[f] >= scenes_needed(float(ceiling.get(f, 0.0)))
    ]


def undetermined_families(
    approximators: dict[str, dict], capacity: dict[str, str], decisive: list[float] | None
) -> dict[str, str]:
    """Why a family's predictions for unseen objects are not fixed by its form and the data.

    Either it can memorise (``capacity``), or at least :data:`UNDETERMINED_SEEDS` of its seeds had
    two fits that tie on validation, both fit their training scenes, and disagree on covered test
    scenes (``undetermined_share``, see :func:`second_fit_rows`): at its f* if it has one; else at
    any decisive fraction (a failure says nothing where the data left the fit open).
    """
    out = {label: f"its {why}" for label, why in capacity.items() if label in approximators}
    for label, entry in approximators.items():
        shares = {float(f): v["mean"] for f, v in entry.get("undetermined_share", {}).items() if v["mean"] is not None}
        if label in out or not shares:
            continue
        fallback = decisive if decisive is not None else list(shares)
        wanted = [entry["f_star"]] if entry["f_star"] is not None else fallback
        seen = [f for f in wanted if f in shares and shares[f] >= UNDETERMINED_SEEDS]
        if seen:
            gaps = entry["second_fit_disagreement"]
            at = ", ".join(f"{gaps[f'{f:g}']['mean']:.2f} of the test variance at f = {f:g}" for f in seen)
            out[label] = f"two equally good fits from different initialisations disagree on unseen objects ({at})"
    return out


def _no_family_reading(
    settings: ComplexitySettings,
    caveat: str,
    undetermined: dict[str, str],
    decisive: list[float] | None,
    too_few: dict[str, float] | None = None,
) -> str:
    """The reading when no family generalises: high complexity only from converged, decisive evidence,
    which must include the sweep's largest fraction (failing from fewer objects is allowed to any
    family: f* may lie anywhere up to it). ``too_few``: families whose accuracy crosses the line
    (first at the fraction given) without the evidence :func:`f_star` asks for."""
    top = max(settings.fractions)
    enough = " on enough scenes" if too_few else ""
    reading = (
        f"no family reaches {GENERALISES_AT:.0%} of in-distribution accuracy on scenes of unseen objects{enough} "
        f"at any fraction up to {top:g}"
    )
    if too_few:
        named = ", ".join(f"{label} at f = {f:g}" for label, f in too_few.items())
        reading += f" ({named} crosses it on too few scenes, or the larger fractions fall back below it)"
    if caveat:
        return f"{caveat}: {reading}"
    if decisive is not None and top not in decisive:
        where = f"only at f = {', '.join(f'{f:g}' for f in decisive)}" if decisive else "at no fraction"
        return (
            f"cannot tell: {reading}, but the evidence is decisive {where}, not at {top:g}: a decisive fraction "
            f"needs {COVERED_AT:.0%} of its test scenes to hold only concept values seen in training, in numbers "
            "enough to tell a failure from chance (see coverage); use more --seeds or a larger concept space"
        )
    if undetermined:  # a family whose unseen-object predictions the data leave open says nothing by failing
        why = "; ".join(f"{label}: {reason}" for label, reason in undetermined.items())
        return (
            f"{reading}: high complexity for the other families, but not for {', '.join(undetermined)}, whose "
            f"predictions for unseen objects the data do not determine at this size ({why})"
        )
    return f"{reading}: a high-complexity binding function"


def _too_few(approximators: dict[str, dict]) -> dict[str, float]:
    """Families whose accuracy crosses the line (``f_star_any``) without the evidence for an f*."""
    return {
        label: entry["f_star_any"]
        for label, entry in approximators.items()
        if entry.get("f_star") is None and entry.get("f_star_any") is not None
    }


def verdict(
    approximators: dict[str, dict],
    settings: ComplexitySettings,
    unconverged: dict[str, list[float]] | None = None,
    undetermined: dict[str, str] | None = None,
    decisive: list[float] | None = None,
) -> dict:
    """The simplest family that generalises (reaches f*), and from what coverage.

    The verdict depends on every fit of the families simpler than the one it names and on that
    family's fits below its f* (all fits when none generalises). If any of those did not
    converge, the verdict is marked unreliable and never claims a high-complexity binding function.
    A family whose predictions for unseen objects the data do not determine (``undetermined``, see
    :func:`undetermined_families`) is said to be so when named, and its failure is no evidence of
    high complexity; with ``decisive`` fractions given (:func:`decisive_fractions`) and none of
    them, no high-complexity verdict is given either.
    """
    ranked = sorted(settings.families(), key=lambda f: f.simplicity)
    generalising = [f.label for f in ranked if approximators[f.label]["f_star"] is not None]
    unconverged = unconverged or {}
    best = generalising[0] if generalising else None
    fs = approximators[best]["f_star"] if best is not None else None
    doubtful: dict[str, list[float]] = {}
    for family in ranked:
        if family.label == best:
            below = [f for f in unconverged.get(best, []) if fs is not None and f < fs]
            if below:
                doubtful[best] = below
            break
        if unconverged.get(family.label):
            doubtful[family.label] = unconverged[family.label]
    caveat = ""
    if doubtful:
        more = (
            "more --sweeps (table families) or --epochs (mlp)"
            if settings.budget.protocol == "exact"
            else "more --epochs, or the exact protocol (--protocol exact)"
        )
        fits = describe_fits(doubtful)
        caveat = f"unreliable: fits did not converge ({fits}); rerun with {more} before reading this verdict"
    if best is None:
        return {
            "simplest_generalising": None,
            "f_star": None,
            "reliable": not doubtful,
            "unconverged": doubtful,
            "decisive_fractions": decisive,
            "undetermined": undetermined or {},
            "reading": _no_family_reading(settings, caveat, undetermined or {}, decisive, _too_few(approximators)),
        }
    reading = f"{best} generalises to scenes of unseen objects from a fraction of {fs:g} of the objects"
    if best in (undetermined or {}):
        reading += f" (but {(undetermined or {})[best]}: this f* reflects the optimiser, not the family's form)"
    return {
        "simplest_generalising": best,
        "f_star": fs,
        "generalising": generalising,
        "reliable": not doubtful,
        "unconverged": doubtful,
        "decisive_fractions": decisive,
        "undetermined": undetermined or {},
        "reading": f"{caveat}: {reading}" if caveat else reading,
    }
