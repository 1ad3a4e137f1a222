"""The scenes an image-text model trains on (docs/method/09-scratch.md): the combinations split is closed under
the binding swap and the order reversal, the object split holds trained-on objects only, swap-free batches never
hold a scene with its swap, batches are a pure function of (seed, step), and hard negatives are the swaps that
name other objects, among the training scenes only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.crossmodal.retrieval import bag_keys
from bindscope.analyses.crossmodal.swaps import swap_cases
from bindscope.core.errors import BindscopeError
from bindscope.scratch.clip_data import ClipBatches, ClipSplit, clip_split, hard_negative_rows
from bindscope.scratch.config import load_config
from bindscope.space.captions import reverse_order
from bindscope.space.splits import fraction_count
from clip_data import GROUPS, SCENES, tiny_preset

NOUN = "shape"


@pytest.fixture(scope="module")
def scenes():
    """The tiny dataset's 81 scenes (no folder: the split and the batches read scenes only)."""
    scenes = tiny_preset().build_scenes()
    assert len(scenes) == SCENES and int(bag_keys(scenes).max()) + 1 == GROUPS
    return scenes


def config(**overrides):
    return load_config("clip-tiny", **{"batch_size": 16, **overrides})


def row_index(scenes) -> dict[tuple[int, ...], int]:
    """Each scene's row by its values ``(color 1, shape 1, color 2, shape 2)``."""
    return {tuple(int(v) for v in s.ravel()): i for i, s in enumerate(scenes.scenes)}


def batches(scenes, **overrides) -> ClipBatches:
    cfg = config(**overrides)
    return ClipBatches(cfg, scenes, NOUN, clip_split(cfg, scenes))


# -- splits ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("fraction", "seed"), [(0.8, 0), (0.5, 1), (0.3, 7)])
def test_the_combinations_split_is_closed(scenes, fraction: float, seed: int) -> None:
    split = clip_split(config(fraction=fraction, seed=seed), scenes)
    train, heldout = set(split.train.tolist()), set(split.heldout.tolist())
    assert not train & heldout and train | heldout == set(range(SCENES))
    bags = bag_keys(scenes)
    assert not set(bags[split.heldout].tolist()) & set(bags[split.train].tolist())  # no held-out bag is trained on
    kept = fraction_count(fraction, GROUPS)
    assert len(set(bags[split.train].tolist())) == kept and split.coverage == kept / GROUPS
    # closed: every scene's order reversal and binding swaps lie on its own side (found without bag keys)
    index = row_index(scenes)
    reversed_rows = [index[tuple(int(v) for v in s.ravel())] for s in reverse_order(scenes).scenes]
    for scene, other in enumerate(reversed_rows):
        assert (scene in train) == (other in train), ("order", scene, other)
    cases = swap_cases(scenes, NOUN)
    assert {name: int((rows >= 0).sum()) for name, rows in cases.negative.items()} == {
        "attribute": 36,
        "noun": 36,
        "order": 72,
    }
    for name, rows in cases.negative.items():
        for scene, other in zip(cases.scene, rows, strict=True):
            if other >= 0:
                assert (scene in train) == (other in train), (name, scene, other)
    # every hard negative of a training scene is a training scene
    for name, rows in hard_negative_rows(scenes, NOUN, split.train).items():
        assert set(rows[rows >= 0].tolist()) <= train, name
        assert (rows[split.heldout] == -1).all(), name
    assert np.array_equal(split.objects, np.unique(scenes.object_ids()[split.train]))


def test_the_combinations_split_is_seeded(scenes) -> None:
    a, b = clip_split(config(seed=3), scenes), clip_split(config(seed=3), scenes)
    assert np.array_equal(a.train, b.train) and np.array_equal(a.heldout, b.heldout)
    assert not np.array_equal(a.train, clip_split(config(seed=4), scenes).train)
    record = a.to_dict()
    assert record["train"] == a.train.tolist() and record["coverage"] == a.coverage


@pytest.mark.parametrize(("fraction", "seed"), [(0.8, 0), (0.6, 2), (0.5, 5)])
def test_the_object_split_trains_on_its_objects_only(scenes, fraction: float, seed: int) -> None:
    split = clip_split(config(split="objects", fraction=fraction, seed=seed), scenes)
    ids = scenes.object_ids()
    fit = set(split.objects.tolist())
    assert len(fit) == fraction_count(fraction, 9) and split.coverage == len(fit) / 9
    assert all(set(ids[r].tolist()) <= fit for r in split.train)
    assert all(not set(ids[r].tolist()) & fit for r in split.heldout)
    mixed = [r for r in range(SCENES) if set(ids[r].tolist()) & fit and set(ids[r].tolist()) - fit]
    assert len(split.train) == len(fit) ** 2 and len(split.heldout) == (9 - len(fit)) ** 2  # every ordered pair
    assert sorted([*split.train.tolist(), *split.heldout.tolist(), *mixed]) == list(range(SCENES))  # mixed: neither


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"fraction": 0.01},
            "fraction 0.01 (combinations split) of the dataset's 81 scenes leaves 0 training and 81 held-out scenes; "
            "choose a fraction nearer 0.5 or a larger dataset",
        ),
        (
            {"split": "objects", "fraction": 0.1},
            "fraction 0.1 (objects split) of the dataset's 81 scenes leaves 0 training and 81 held-out scenes",
        ),
    ],
)
def test_a_split_leaving_a_side_empty_is_refused(scenes, overrides: dict, message: str) -> None:
    with pytest.raises(BindscopeError) as err:
        clip_split(config(**overrides), scenes)
    assert message in str(err.value)


def test_a_fraction_outside_the_open_interval_is_refused() -> None:
    for fraction in (0.0, 1.0, 1.5):
        with pytest.raises(BindscopeError, match="fraction"):
            config(fraction=fraction)


# -- hard negatives -------------------------------------------------------------------------------------------
def test_hard_negatives_are_swaps_naming_other_objects(scenes) -> None:
    """(c1 s1, c2 s2) -> attribute swap (c2 s1, c1 s2), noun swap (c1 s2, c2 s1); only where both colors and both
    shapes differ (else the swap names the same objects) and the swap is a training scene."""
    index = row_index(scenes)
    everything = np.arange(SCENES)
    rows = hard_negative_rows(scenes, NOUN, everything)
    for i, ((c1, s1), (c2, s2)) in enumerate(scenes.scenes.tolist()):
        clean = c1 != c2 and s1 != s2
        assert rows["attribute"][i] == (index[(c2, s1, c1, s2)] if clean else -1), i
        assert rows["noun"][i] == (index[(c1, s2, c2, s1)] if clean else -1), i
    assert (rows["attribute"] >= 0).sum() == 36  # 3 x 2 colors x 3 x 2 shapes
    # a training part without a scene's swap gives that scene none; scenes outside it get none either
    train = np.arange(41)  # scenes whose first object is one of the first five: not closed under swaps
    part = hard_negative_rows(scenes, NOUN, train)
    assert 0 < (part["attribute"] >= 0).sum() < (rows["attribute"][train] >= 0).sum()
    for name in ("attribute", "noun"):
        full, got = rows[name], part[name]
        keep = np.isin(np.arange(SCENES), train) & np.isin(full, train)
        assert np.array_equal(got, np.where(keep, full, -1)), name


def test_a_batch_carries_the_hard_negatives_asked_for(scenes) -> None:
    none = batches(scenes, hard_negatives="none")
    assert none.available == {} and len(none.draw(0)[1]) == 0
    cfg = config(hard_negatives="both", batches="natural")
    split = clip_split(cfg, scenes)
    both = ClipBatches(cfg, scenes, NOUN, split)
    table = hard_negative_rows(scenes, NOUN, split.train)
    assert both.available == {k: int((table[k][split.train] >= 0).sum()) for k in ("attribute", "noun")}
    dropped = 0
    for step in range(20):  # distinct, and never a caption of the batch (it is an ordinary negative there)
        rows, hard = both.draw(step)
        expected = torch.cat([torch.from_numpy(table[k])[rows] for k in ("attribute", "noun")])
        expected = torch.unique(expected[expected >= 0])
        assert torch.equal(hard, expected[~torch.isin(expected, rows)])
        dropped += int(torch.isin(expected, rows).sum())
    assert dropped > 0, "natural batches do hold some of their scenes' swaps"
    attribute = batches(scenes, hard_negatives="attribute", batches="natural")
    rows, hard = attribute.draw(3)
    wanted = torch.unique(torch.from_numpy(table["attribute"])[rows])
    assert torch.equal(hard, wanted[(wanted >= 0) & ~torch.isin(wanted, rows)])
    assert set(attribute.available) == {"attribute"}


# -- batches --------------------------------------------------------------------------------------------------
def test_swap_free_batches_hold_one_scene_per_group(scenes) -> None:
    b = batches(scenes, batch_size=28)  # every group of the training split, each step
    split = clip_split(config(), scenes)
    groups = bag_keys(scenes)
    seen = set()
    for step in range(300):
        rows, _ = b.draw(step)
        assert len(rows) == 28
        assert len(set(groups[rows.numpy()].tolist())) == 28, step
        assert set(rows.tolist()) <= set(split.train.tolist())
        seen |= set(rows.tolist())
    assert seen == set(split.train.tolist())  # every scene of a group gets its turn


def test_natural_batches_can_hold_a_scene_with_its_swap(scenes) -> None:
    b = batches(scenes, batches="natural", batch_size=16)
    groups = bag_keys(scenes)
    repeats = 0
    for step in range(50):
        rows, _ = b.draw(step)
        assert len(set(rows.tolist())) == 16  # distinct scenes, drawn uniformly
        repeats += len(rows) - len(set(groups[rows.numpy()].tolist()))
    assert repeats > 0


def test_batches_are_a_pure_function_of_seed_and_step(scenes) -> None:
    a = batches(scenes, hard_negatives="both", batches="natural")
    b = batches(scenes, hard_negatives="both", batches="natural")
    later = [b.draw(s) for s in (9, 3, 7)]  # another order, another object
    for step, (rows, hard) in zip((9, 3, 7), later, strict=True):
        again_rows, again_hard = a.draw(step)
        assert torch.equal(rows, again_rows) and torch.equal(hard, again_hard)
    assert not torch.equal(a.draw(3)[0], a.draw(4)[0])
    other = batches(scenes, hard_negatives="both", batches="natural", seed=1)
    assert not torch.equal(a.draw(3)[0], other.draw(3)[0])
    swap_free = batches(scenes)
    assert torch.equal(swap_free.draw(5)[0], batches(scenes).draw(5)[0])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"batch_size": 29},
            "batch size 29 exceeds the 28 swap-free scene groups of the training split; lower the batch size to at "
            "most 28 or use natural batches",
        ),
        (
            {"batch_size": 66, "batches": "natural"},
            "batch size 66 exceeds the 65 training scenes of the training split; lower the batch size to at most 65",
        ),
    ],
)
def test_a_batch_larger_than_the_split_is_refused(scenes, overrides: dict, message: str) -> None:
    with pytest.raises(BindscopeError) as err:
        batches(scenes, **overrides)
    assert str(err.value) == message
    fits = {**overrides, "batch_size": overrides["batch_size"] - 1}
    assert len(batches(scenes, **fits).draw(0)[0]) == fits["batch_size"]


def test_the_split_record_is_plain_data(scenes) -> None:
    split = clip_split(config(split="objects"), scenes)
    again = ClipSplit(**{k: np.asarray(v) if k != "coverage" else v for k, v in split.to_dict().items()})
    assert again.to_dict() == split.to_dict()
