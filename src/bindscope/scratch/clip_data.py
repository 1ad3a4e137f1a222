"""Scenes, splits, batches and hard negatives of an image-text model trained from scratch (docs/method/09-scratch.md).

A scene's *group* is its bag of concepts (how often each concept value occurs in it). A group is
closed under every binding swap and every reordering of the objects, so

- the ``combinations`` split holds out a seeded share of the groups: no held-out caption is ever
  seen in training, not even as a negative;
- ``swap-free`` batches take at most one scene per group: a scene never meets its binding swap in
  a batch.

Hard negatives of a training scene are the captions of its attribute swap (a2 o1 / a1 o2) and noun
swap (a1 o2 / a2 o1) and, on a relation or count space, of its family swap (subject and object exchanged,
the relation kept; the counts exchanged), added where the swap is a training scene of the dataset and
names other objects than the scene; a batch's hard negatives are distinct and none is a caption of the batch (in
natural batches a swap can be one: it is then an ordinary negative, never a false one). Every batch
is a pure function of ``(seed, step)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.crossmodal.retrieval import bag_keys
from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.scratch.data import step_generator
from bindscope.space.captions import attribute_swap, count_swap, object_swap, relation_swap
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of
from bindscope.space.splits import fraction_count, object_order

SWAPS = ("attribute", "noun")
#: A relation or count space's family swap, by family (:func:`~bindscope.space.families.family_of`).
FAMILY_SWAPS = {"relation": relation_swap, "count": count_swap}


@dataclass(frozen=True)
class ClipSplit:
    """Which dataset scenes are trained on (``train``) and held out (``heldout``), the trained-on objects, and
    the coverage: the share of scene groups (``combinations``) or of objects (``objects``) trained on.

    ``heldout`` holds the scenes of held-out groups (``combinations``) or of held-out objects only
    (``objects``); under the object split, scenes mixing both kinds of object are in neither.
    """

    train: np.ndarray
    heldout: np.ndarray
    objects: np.ndarray
    coverage: float

    def parts(self) -> dict[str, np.ndarray]:
        """The dataset rows of each part: ``train`` and ``heldout``."""
        return {"train": self.train, "heldout": self.heldout}

    def to_dict(self) -> dict:
        return {
            "train": self.train.tolist(),
            "heldout": self.heldout.tolist(),
            "objects": self.objects.tolist(),
            "coverage": self.coverage,
        }


def clip_split(config: ClipConfig, scenes: SceneSet) -> ClipSplit:
    """The seeded split of ``config`` over a dataset's scenes; a split leaving a side empty is an error."""
    ids = scenes.object_ids()
    present = ids >= 0
    if config.split == "objects":
        u = scenes.space.num_objects
        n_fit = fraction_count(config.fraction, u)
        fit = np.sort(object_order(u, config.seed)[:n_fit])
        known = np.isin(ids, fit) | ~present
        train, heldout = np.flatnonzero(known.all(1)), np.flatnonzero((~known | ~present).all(1))
        coverage = n_fit / u
    else:
        groups = bag_keys(scenes)
        count = int(groups.max()) + 1
        order = np.random.default_rng(np.random.SeedSequence([config.seed, 0xC11B])).permutation(count)
        kept = order[: fraction_count(config.fraction, count)]
        coverage = len(kept) / count
        inside = np.isin(groups, kept)
        train, heldout = np.flatnonzero(inside), np.flatnonzero(~inside)
        fit = np.unique(ids[train][present[train]])
    if len(train) < 2 or len(heldout) < 1:
        raise BindscopeError(
            f"fraction {config.fraction} ({config.split} split) of the dataset's {len(scenes):,} scenes leaves "
            f"{len(train)} training and {len(heldout)} held-out scenes; choose a fraction nearer 0.5 or a larger "
            "dataset"
        )
    return ClipSplit(train, heldout, fit, coverage)


def hard_negative_rows(scenes: SceneSet, noun: str, train: np.ndarray) -> dict[str, np.ndarray]:
    """Per swap kind (``attribute``, ``noun`` and, on a relation or count space, ``relation`` or ``count``), per
    dataset scene, the row of its swap's caption when that is a clean hard negative (a training scene naming
    other objects), else -1; only training scenes get one."""
    ids = scenes.object_ids().astype(np.int64)
    two = np.flatnonzero((scenes.num_objects() == 2) & np.isin(np.arange(len(scenes)), train))
    lookup = scene_lookup(scenes)
    is_train = np.zeros(len(scenes), dtype=bool)
    is_train[train] = True
    out = {}
    for name, swap in swap_functions(scenes, noun).items():
        rows = np.full(len(scenes), -1, dtype=np.int64)
        if len(two):
            swapped, valid = swap(scenes.subset(two))
            sid = swapped.object_ids().astype(np.int64)
            other = (np.sort(sid, axis=1) != np.sort(ids[two][:, :2], axis=1)).any(1)
            found = find_scenes(lookup, sid[:, 0] * scenes.space.num_objects + sid[:, 1])
            ok = valid & other & (found >= 0)
            ok[ok] = is_train[found[ok]]
            rows[two[ok]] = found[ok]
        out[name] = rows
    return out


def swap_functions(scenes: SceneSet, noun: str) -> dict[str, Callable[[SceneSet], tuple[SceneSet, np.ndarray]]]:
    """Per hard-negative kind, its swap: attribute and noun, and a relation or count space's family swap."""
    out: dict[str, Callable[[SceneSet], tuple[SceneSet, np.ndarray]]] = {
        "attribute": lambda s: attribute_swap(s, noun),
        "noun": lambda s: object_swap(s, noun),
    }
    family = family_of(scenes.space)
    if family in FAMILY_SWAPS:
        out[family] = FAMILY_SWAPS[family]
    return out


def wanted_negatives(config: ClipConfig, scenes: SceneSet) -> tuple[str, ...]:
    """The hard-negative kinds a config asks for; on a relation or count space every choice but ``none`` adds the
    family swap (its binding swap: subject and object, or the counts, exchanged)."""
    wanted = {"none": (), "attribute": ("attribute",), "noun": ("noun",), "both": SWAPS}[config.hard_negatives]
    family = family_of(scenes.space)
    return (*wanted, family) if wanted and family in FAMILY_SWAPS else wanted


class ClipBatches:
    """Seeded training batches of dataset rows (``swap-free`` or ``natural``) with their hard negatives."""

    def __init__(self, config: ClipConfig, scenes: SceneSet, noun: str, split: ClipSplit) -> None:
        self.config = config
        self.train = torch.from_numpy(split.train)
        groups = bag_keys(scenes)[split.train]
        _, self.group = np.unique(groups, return_inverse=True)
        self.groups = int(self.group.max()) + 1
        self.group_t = torch.from_numpy(self.group.astype(np.int64))
        available = self.groups if config.batches == "swap-free" else len(split.train)
        if config.batch_size > available:
            what = "swap-free scene groups" if config.batches == "swap-free" else "training scenes"
            raise BindscopeError(
                f"batch size {config.batch_size} exceeds the {available} {what} of the training split; "
                f"lower the batch size to at most {available}"
                + (" or use natural batches" if config.batches == "swap-free" else "")
            )
        wanted = wanted_negatives(config, scenes)
        rows = hard_negative_rows(scenes, noun, split.train)
        self.negatives = {k: torch.from_numpy(rows[k]) for k in wanted}
        self.available = {k: int((rows[k][split.train] >= 0).sum()) for k in wanted}

    def draw(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch ``step``: the dataset rows of its scenes ``[B]`` and of its hard-negative captions ``[H]``."""
        g = step_generator(self.config.seed, step, 0xC11B)
        b = self.config.batch_size
        if self.config.batches == "natural":
            picked = torch.randperm(len(self.train), generator=g)[:b]
        else:  # b distinct groups, then one scene of each
            chosen = torch.randperm(self.groups, generator=g)[:b]
            key = torch.rand(len(self.train), generator=g)
            mask = torch.isin(self.group_t, chosen)
            order = torch.argsort(self.group_t * 2.0 + key)  # by group, then randomly within it
            candidates = order[mask[order]]
            first = torch.ones(len(candidates), dtype=torch.bool)
            first[1:] = self.group_t[candidates[1:]] != self.group_t[candidates[:-1]]
            picked = candidates[first]
        rows = self.train[picked]
        negatives = [self.negatives[k][rows] for k in self.negatives]
        hard = torch.cat(negatives) if negatives else rows.new_zeros(0)
        hard = torch.unique(hard[hard >= 0])
        return rows, hard[~torch.isin(hard, rows)]  # a caption of the batch is already a negative of the others
