"""Planning a complexity sweep: every (fraction, seed) model's training, validation and scored scenes
(nested object-level splits; test scenes never fitted or selected on), seeded samples within a budget's caps,
and stacks of models to fit together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bindscope.analyses.complexity.families import Family, Layout
from bindscope.analyses.complexity.settings import Budget, ComplexitySettings
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import ObjectSplit, carve_validation, object_splits

STACK_ELEMENTS = 2**25  # models x scenes x widest activation per stacked step (memory bound)
PAD_FREE_ELEMENTS = 2**22  # below this a stack's padding costs less than another stack's steps
PAD_WASTE = 1.4


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
    test_objects: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the objects never fitted


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

    ``unscored``: scene indices never scored in the test_only and mixed groups, nor in train_only (where some
    fitted scenes are left: :func:`fitted_scored`), the probes' training scenes under ``probe_scenes="exclude"``.
    """
    objects = scenes.object_ids()
    budget = settings.budget
    fractions = sorted(settings.fractions)
    plans = []
    for seed in settings.seeds:
        splits = object_splits(scenes, fractions, seed, order=settings.order_for(scenes.space))
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
    fit, val = _fit_and_validation(split, test_only, settings)
    groups = {"train_only": fit, "validation": val, "test_only": test_only, "mixed": mixed}
    cap = budget.max_eval_scenes
    train = covering_sample(fit, objects, budget.max_train_scenes, _rng(seed, f, 0))
    pools = {**groups, "train_only": fitted_scored(train, unscored)}  # scored on scenes it was fitted on
    scored = {g: sample(idx, cap, _rng(seed, f, 1 + j)) for j, (g, idx) in enumerate(pools.items())}
    nxt_train = nxt.train_only if nxt is not None else np.arange(len(scenes))
    block = np.setdiff1d(nxt_train, split.train_only, assume_unique=True)
    sizes = {g: len(v) for g, v in groups.items()}
    return Plan(f, seed, train, scored, sizes, sample(block, cap, _rng(seed, f, 9)), len(block), split.test_objects)


def fitted_scored(train: np.ndarray, unscored: np.ndarray | None) -> np.ndarray:
    """The fitted scenes a model's fit is scored on: those the probes were not fitted on (``unscored``), where
    known and any are left (probes read their own training scenes' noise, which a family that fits the signal
    does not reproduce: the in-distribution line there is out of any such family's reach), else all of them."""
    if unscored is None:
        return train
    rest = np.setdiff1d(train, unscored, assume_unique=True)
    return rest if len(rest) else train


def _fit_and_validation(
    split: ObjectSplit, test_only: np.ndarray, settings: ComplexitySettings
) -> tuple[np.ndarray, np.ndarray]:
    """The train_only scenes a model fits and those it selects on (none under ``selection="test"``: the
    research code fits every train_only scene and selects on test_only)."""
    f, seed = split.fraction, split.seed
    if len(split.train_only) < 2:
        raise BindscopeError(
            f"fraction {f:g} (seed {seed}) leaves {len(split.train_only)} scene(s) made only of train objects; "
            "at least 2 are needed (one to fit, one to validate): drop that fraction or start the sweep higher"
        )
    if settings.selection != "test":
        return carve_validation(split.train_only, settings.validation_fraction, seed, min_count=1)
    if not len(test_only):
        raise BindscopeError(
            f"fraction {f:g} (seed {seed}) leaves no test_only scene to select checkpoints on; drop that fraction"
        )
    return split.train_only, np.empty(0, np.int64)


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
