"""Seeded scene-level and object-level splits, validation carve-outs, JSON round trip (docs/method/02-splits.md)."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet
from bindscope.space.splits import (
    ObjectSplit,
    SceneSplit,
    covering_order,
    load_split,
    object_order,
    object_split,
    object_splits,
    save_split,
    scene_split,
)

PROPERTY = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

BAD_FRACTIONS = [0, 1, 0.0, 1.0, -0.1, 1.5, "abc", None, float("nan")]


@functools.cache
def clevr_with_singles() -> SceneSet:
    """The 576 clevr pairs followed by the 24 objects alone (slot 2 padded with -1)."""
    space = get_preset("clevr").space
    return SceneSet.enumerate(space, 2).concat(SceneSet.singles(space, 2))


def as_set(a) -> set[int]:
    return set(np.asarray(a).tolist())


def scene_objects(scenes: SceneSet) -> list[set[int]]:
    return [{i for i in row if i != PAD} for row in scenes.object_ids().tolist()]


# -- scene-level -----------------------------------------------------------------------------------


@PROPERTY
@given(n=st.integers(2, 3000), percent=st.integers(1, 99), seed=st.integers(0, 2**32 - 1))
def test_scene_split_partitions_and_floors(n, percent, seed):
    f = percent / 100
    n_train = percent * n // 100  # exact floor(f * N), no float rounding
    if n_train == 0 or n_train == n:
        with pytest.raises(BindscopeError, match=r"empty train or test"):
            scene_split(n, f, seed)
        return
    split = scene_split(n, f, seed)
    assert split.kind == "scene"
    assert split.seed == seed and split.train_fraction == f
    assert len(split.train) == n_train and len(split.test) == n - n_train
    assert not as_set(split.train) & as_set(split.test)
    assert np.array_equal(np.sort(np.concatenate([split.train, split.test])), np.arange(n))
    assert np.all(np.diff(split.train) > 0) and np.all(np.diff(split.test) > 0)
    assert len(split.validation) == 0
    again = scene_split(n, f, seed)
    assert np.array_equal(again.train, split.train) and np.array_equal(again.test, split.test)


def test_scene_split_default_fraction_and_seeds():
    a = scene_split(576)
    assert a.train_fraction == 0.4 and a.seed == 0
    assert len(a.train) == 230  # floor(0.4 * 576) = floor(230.4)
    b = scene_split(576, 0.4, seed=1)
    assert not np.array_equal(a.train, b.train)
    assert scene_split(576, 0.4, seed=0, dataset_hash="abc").dataset_hash == "abc"


@pytest.mark.parametrize(
    ("n", "f", "expected"), [(100, 0.29, 29), (100, 0.57, 57), (10, 0.3, 3), (10, 0.7, 7), (3, 0.5, 1)]
)
def test_scene_split_floor_survives_float_rounding(n, f, expected):
    # 0.29 * 100 == 28.999999999999996 and 0.57 * 100 == 56.99999999999999 in floating point
    assert len(scene_split(n, f, 0).train) == expected


@pytest.mark.parametrize("bad", BAD_FRACTIONS)
def test_scene_split_rejects_fractions_outside_open_unit_interval(bad):
    with pytest.raises(BindscopeError, match=r"train_fraction must be .*\(0, 1\)"):
        scene_split(100, bad)


def test_scene_split_with_validation():
    split = scene_split(600, 0.5, seed=4)
    val = split.with_validation(0.1)
    assert len(val.validation) == 30  # floor(0.1 * 300)
    assert as_set(val.validation) <= as_set(split.train)
    assert not as_set(val.validation) & as_set(val.train)
    assert as_set(val.validation) | as_set(val.train) == as_set(split.train)
    assert np.array_equal(val.test, split.test)
    assert np.all(np.diff(val.validation) > 0) and np.all(np.diff(val.train) > 0)
    # seeded: the split's seed by default, another seed gives another carve-out
    assert np.array_equal(split.with_validation(0.1).validation, val.validation)
    assert not np.array_equal(split.with_validation(0.1, seed=5).validation, val.validation)
    with pytest.raises(BindscopeError, match=r"validation fraction must be .*\(0, 1\)"):
        split.with_validation(1.0)


# -- object-level ----------------------------------------------------------------------------------


def check_object_split(split: ObjectSplit, scenes: SceneSet, f: float, u: int, n_train: int) -> None:
    train, test = as_set(split.train_objects), as_set(split.test_objects)
    assert split.kind == "object" and split.fraction == f
    assert len(split.train_objects) == n_train
    assert not train & test and train | test == set(range(u))
    assert np.all(np.diff(split.train_objects) > 0) and np.all(np.diff(split.test_objects) > 0)
    groups = [split.train_only, split.test_only, split.mixed]
    sets = [as_set(g) for g in groups]
    assert sum(len(g) for g in groups) == len(scenes)
    assert set().union(*sets) == set(range(len(scenes)))
    for g in groups:
        assert np.all(np.diff(g) > 0)
    ids = scenes.object_ids()
    present = ids != PAD
    in_train = np.isin(ids, split.train_objects) & present
    in_test = np.isin(ids, split.test_objects) & present
    assert np.array_equal(split.train_only, np.flatnonzero((in_train == present).all(axis=1)))
    assert np.array_equal(split.test_only, np.flatnonzero((in_test == present).all(axis=1)))
    assert np.array_equal(split.mixed, np.flatnonzero(in_train.any(axis=1) & in_test.any(axis=1)))


@PROPERTY
@given(
    percents=st.lists(st.integers(5, 95), min_size=1, max_size=5),
    seed=st.integers(0, 2**32 - 1),
)
def test_object_splits_partition_and_nest(percents, seed):
    scenes = clevr_with_singles()
    u = scenes.space.num_objects
    fractions = [p / 100 for p in percents]
    splits = object_splits(scenes, fractions, seed)
    assert len(splits) == len(fractions)
    for p, f, split in zip(percents, fractions, splits):
        assert split.seed == seed
        check_object_split(split, scenes, f, u, p * u // 100)
    # nested across fractions for one seed
    ordered = sorted(splits, key=lambda s: s.fraction)
    for small, large in zip(ordered, ordered[1:]):
        assert as_set(small.train_objects) <= as_set(large.train_objects)
        assert as_set(small.train_only) <= as_set(large.train_only)
        assert as_set(large.test_only) <= as_set(small.test_only)
    # the train objects are a prefix of the seed's object order
    order = object_order(u, seed)
    for split in splits:
        assert as_set(split.train_objects) == as_set(order[: len(split.train_objects)])
    # one fraction at a time gives the same split as all together
    single = object_split(scenes, fractions[0], seed)
    assert np.array_equal(single.train_objects, splits[0].train_objects)
    assert np.array_equal(single.train_only, splits[0].train_only)


def test_object_split_membership_by_naive_loop():
    scenes = clevr_with_singles()
    split = object_split(scenes, 0.5, seed=7)
    train = as_set(split.train_objects)
    expected = {"train_only": [], "test_only": [], "mixed": []}
    for i, objs in enumerate(scene_objects(scenes)):
        if objs <= train:
            expected["train_only"].append(i)
        elif not objs & train:
            expected["test_only"].append(i)
        else:
            expected["mixed"].append(i)
    assert split.train_only.tolist() == expected["train_only"]
    assert split.test_only.tolist() == expected["test_only"]
    assert split.mixed.tolist() == expected["mixed"]
    # 12 train objects: 12*12 train pairs + 12 singles; likewise for test
    assert len(split.train_only) == 144 + 12
    assert len(split.test_only) == 144 + 12
    assert len(split.mixed) == 2 * 12 * 12
    # every single-object scene (padded with -1) lands in train_only or test_only
    singles = np.arange(576, 600)
    assert not as_set(singles) & as_set(split.mixed)
    assert set(split.groups()) == {"train_only", "validation", "test_only", "mixed"}


def test_object_splits_floor_and_seeds():
    space = ConceptSpace(("a", "b"), (tuple("0123456789"), tuple("abcdefghij")))
    scenes = SceneSet.enumerate(space, 2)
    (s29,) = object_splits(scenes, [0.29], seed=0)
    assert len(s29.train_objects) == 29  # floor(0.29 * 100), not 28
    a = object_split(scenes, 0.5, seed=0)
    b = object_split(scenes, 0.5, seed=1)
    assert not np.array_equal(a.train_objects, b.train_objects)
    assert not np.array_equal(a.train_only, b.train_only)
    assert np.array_equal(object_split(scenes, 0.5, seed=0).train_objects, a.train_objects)
    assert object_split(scenes, 0.5, dataset_hash="h").dataset_hash == "h"


@pytest.mark.parametrize("bad", BAD_FRACTIONS)
def test_object_splits_reject_bad_fractions(bad):
    with pytest.raises(BindscopeError, match=r"\(0, 1\)"):
        object_splits(clevr_with_singles(), [0.5, bad])


def test_object_splits_other_errors():
    scenes = clevr_with_singles()
    with pytest.raises(BindscopeError, match=r"at least one fraction"):
        object_splits(scenes, [])
    with pytest.raises(
        BindscopeError,
        match=r"fraction 0.01 of 24 objects leaves no train objects; choose a fraction in \[0.04167, 0.9583\]",
    ):
        object_splits(scenes, [0.01])


def test_object_splits_reject_fraction_leaving_no_test_objects():
    # scene_split rejects the same fraction ("leaves an empty train or test set")
    with pytest.raises(BindscopeError, match=r"empty train or test"):
        scene_split(24, 1 - 1e-12)
    with pytest.raises(BindscopeError, match=r"leaves no test objects"):
        object_splits(clevr_with_singles(), [1 - 1e-12])


# -- validation carve-outs -------------------------------------------------------------------------


def test_object_split_validation_by_scenes():
    scenes = clevr_with_singles()
    split = object_split(scenes, 0.6, seed=3)
    val = split.with_validation(scenes, 0.1, by="scenes")
    old = as_set(split.train_only)
    assert len(val.validation) == math.floor(0.1 * len(split.train_only))
    assert as_set(val.validation) <= old
    assert not as_set(val.validation) & as_set(val.train_only)
    assert as_set(val.validation) | as_set(val.train_only) == old
    assert np.array_equal(val.test_only, split.test_only)
    assert np.array_equal(val.mixed, split.mixed)
    assert np.array_equal(val.train_objects, split.train_objects)
    assert np.array_equal(val.test_objects, split.test_objects)
    assert len(val.validation_objects) == 0
    assert np.all(np.diff(val.validation) > 0) and np.all(np.diff(val.train_only) > 0)
    # seeded by the split's seed unless told otherwise
    assert np.array_equal(split.with_validation(scenes, 0.1).validation, val.validation)
    other = split.with_validation(scenes, 0.1, seed=99)
    assert not np.array_equal(other.validation, val.validation)


@pytest.mark.parametrize(("fraction", "seed"), [(0.5, 0), (0.8, 1), (0.3, 2)])
def test_object_split_validation_by_objects(fraction, seed):
    scenes = clevr_with_singles()
    split = object_split(scenes, fraction, seed=seed)
    val = split.with_validation(scenes, 0.25, by="objects")
    vobj = as_set(val.validation_objects)
    n_train = len(split.train_objects)
    assert len(vobj) == max(1, math.floor(0.25 * n_train))
    assert vobj <= as_set(split.train_objects)
    assert not vobj & as_set(split.test_objects)
    objs = scene_objects(scenes)
    for i in val.train_only.tolist():
        assert not objs[i] & vobj
    assert len(val.validation) > 0
    for i in val.validation.tolist():
        assert objs[i] & vobj
        assert not objs[i] & as_set(split.test_objects)
    # validation comes from train_only, never from test_only or mixed
    assert as_set(val.validation) | as_set(val.train_only) == as_set(split.train_only)
    assert not as_set(val.validation) & as_set(val.train_only)
    assert np.array_equal(val.test_only, split.test_only)
    assert np.array_equal(val.mixed, split.mixed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_validation_objects_are_not_biased_to_high_ids(seed):
    scenes = get_preset("text").build_scenes()
    space = scenes.space
    split = object_split(scenes, 0.8, seed=seed)
    val = split.with_validation(scenes, 0.1, by="objects")
    fit_objects = np.setdiff1d(split.train_objects, val.validation_objects)
    # 320 train objects, 32 validation objects: a seeded slice leaves every noun and every
    # attribute in the fitting objects (each has ~16 train objects)
    for c in range(space.num_concepts):
        train_values = as_set(space.object_values(split.train_objects)[:, c])
        fit_values = as_set(space.object_values(fit_objects)[:, c])
        assert fit_values == train_values, f"concept {space.concepts[c]} lost values {train_values - fit_values}"


def test_validation_errors():
    scenes = clevr_with_singles()
    split = object_split(scenes, 0.5)
    with pytest.raises(BindscopeError, match=r"'scenes' or 'objects', got 'slots'"):
        split.with_validation(scenes, 0.1, by="slots")
    for bad in (0, 1, 1.5, "abc"):
        with pytest.raises(BindscopeError, match=r"validation fraction must be .*\(0, 1\)"):
            split.with_validation(scenes, bad)
    tiny = object_split(scenes, 0.05)  # floor(1.2) = 1 train object
    with pytest.raises(BindscopeError, match=r"leaves no fitting objects out of 1 train objects"):
        tiny.with_validation(scenes, 0.5, by="objects")
    with pytest.raises(BindscopeError, match=r"leaves an empty part"):
        tiny.with_validation(scenes, 0.1, by="scenes")  # one train_only scene


# -- save / load -------------------------------------------------------------------------------------


def assert_same_split(a, b) -> None:
    assert type(a) is type(b)
    for name, value in vars(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert other.dtype == np.int64, name
            assert np.array_equal(value, other), name
        else:
            assert value == other, name


def test_save_load_scene_split(tmp_path):
    split = scene_split(576, 0.4, seed=12, dataset_hash="deadbeef").with_validation(0.1)
    path = save_split(split, tmp_path / "nested" / "dir" / "split.json")
    assert path.is_file()
    data = json.loads(path.read_text())
    assert data["format"] == "bindscope-split-v1"
    assert data["seed"] == 12 and data["train_fraction"] == 0.4 and data["kind"] == "scene"
    loaded = load_split(path)
    assert isinstance(loaded, SceneSplit)
    assert loaded.seed == 12 and loaded.train_fraction == 0.4
    assert_same_split(split, loaded)
    assert not list(path.parent.glob(".*.tmp"))  # no temp file left behind


@pytest.mark.parametrize("by", [None, "scenes", "objects"])
def test_save_load_object_split(tmp_path, by):
    scenes = clevr_with_singles()
    split = object_split(scenes, 0.7, seed=5, dataset_hash="cafe")
    if by is not None:
        split = split.with_validation(scenes, 0.2, by=by)
    loaded = load_split(save_split(split, tmp_path / "split.json"))
    assert isinstance(loaded, ObjectSplit)
    assert loaded.seed == 5 and loaded.fraction == 0.7 and loaded.kind == "object"
    assert_same_split(split, loaded)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"a": 1}', r"not a bindscope split file"),
        ("[1, 2, 3]", r"must hold a JSON object"),
        ('{"format": "bindscope-dataset-v1"}', r"not a bindscope split file"),
        ('{"format": "bindscope-split-v1", "kind": "pixel"}', r"split kind must be 'scene' or 'object'"),
        ('{"format": "bindscope-split-v1", "kind": "scene", "train": [1]}', r"malformed scene split"),
        ("{not json", r"is not valid JSON"),
        ("", r"is not valid JSON"),
    ],
)
def test_load_split_rejects_bad_files(tmp_path, content, match):
    path = tmp_path / "split.json"
    path.write_text(content)
    with pytest.raises(BindscopeError, match=match):
        load_split(path)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"train_fraction": 5}, r"fraction must be in \(0, 1\)"),
        ({"train": [0.5, 1.7]}, r"'train' must be a list of whole numbers"),
        ({"train": [-3, 1]}, r"'train' holds a negative index \(-3\)"),
        ({"train": [0, 1], "test": [1, 2]}, r"train and test overlap \(e.g. index 1\)"),
        ({"train": [0, 0, 1]}, r"train lists an index twice"),
    ],
    ids=["fraction", "float-index", "negative-index", "overlap", "duplicate"],
)
def test_load_split_rejects_inconsistent_content(tmp_path, change, match):
    data = {"format": "bindscope-split-v1", "kind": "scene", "seed": 0, "train_fraction": 0.5}
    data.update(train=[0, 1], test=[2, 3])
    data.update(change)
    path = tmp_path / "split.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BindscopeError, match=match):
        load_split(path)


def test_load_split_missing_file(tmp_path):
    with pytest.raises(BindscopeError, match=r"split file .*missing\.json is missing"):
        load_split(tmp_path / "missing.json")
    with pytest.raises(BindscopeError, match=r"is a folder; give the path of the JSON file"):
        load_split(tmp_path)


def test_load_split_binary_file(tmp_path):
    path = tmp_path / "split.json"
    path.write_bytes(b"\xff\xfe\x00\x01binary")
    with pytest.raises(BindscopeError, match=r"not valid JSON"):
        load_split(path)


def _research_code_split(num_scenes: int, train_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """The research code's probe split, written out as it is there (split seed fixed at 0)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(0)
    perm = torch.randperm(int(num_scenes), generator=g, device="cpu")
    n_train = int(float(train_ratio) * int(num_scenes))
    n_train = max(1, min(int(num_scenes) - 1, n_train))
    return perm[:n_train].numpy(), perm[n_train:].numpy()


@pytest.mark.parametrize(("n", "f"), [(576, 0.4), (160_000, 0.4), (1000, 0.29)])
def test_the_paper_split_source_selects_the_research_code_scenes(n: int, f: float) -> None:
    train, test = _research_code_split(n, f)
    split = scene_split(n, f, 0, source="paper")
    assert np.array_equal(split.train, np.sort(train)) and np.array_equal(split.test, np.sort(test))
    assert split.source == "paper"
    assert not np.array_equal(scene_split(n, f, 0).train, split.train)  # the default is numpy's
    assert scene_split(n, f, 0).source == "bindscope"


def test_the_split_source_is_saved_and_checked(tmp_path) -> None:
    split = scene_split(100, 0.5, 3, source="paper")
    again = load_split(save_split(split, tmp_path / "s.json"))
    assert again.source == "paper" and np.array_equal(again.train, split.train)
    with pytest.raises(BindscopeError, match="unknown split source 'torch'; choose bindscope or paper"):
        scene_split(100, 0.5, 0, source="torch")


@pytest.mark.parametrize("sizes", [(8, 3), (20, 20), (3, 4, 5), (2, 2)])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_covering_order_fronts_the_fewest_objects_holding_every_value(sizes: tuple[int, ...], seed: int) -> None:
    space = ConceptSpace.from_dict({f"c{i}": [f"v{j}" for j in range(n)] for i, n in enumerate(sizes)})
    order = covering_order(space, seed)
    assert sorted(order.tolist()) == list(range(space.num_objects))  # a permutation
    front = space.object_values(order[: max(sizes)])
    for c, n in enumerate(sizes):  # on a full grid the first max(sizes) objects hold every value
        assert set(front[:, c].tolist()) == set(range(n))
    # after the cover, the other objects keep the seed's random order
    rest = [o for o in object_order(space.num_objects, seed) if o not in set(order[: max(sizes)].tolist())]
    assert order[max(sizes) :].tolist() == rest


def test_a_covering_split_leaves_no_test_scene_with_an_unseen_value():
    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(8)], "shape": ["a", "b", "c"]})
    scenes = SceneSet.enumerate(space, 2)
    for seed in range(5):
        random, covering = (object_splits(scenes, [0.4, 0.9], seed, order=o) for o in ("random", "covering"))
        for split in covering:  # 9 and 21 train objects: every colour and shape seen
            assert split.order == "covering"
            seen = space.object_values(split.train_objects)
            assert {len(set(seen[:, 0])), len(set(seen[:, 1]))} == {8, 3}
            check_object_split(split, scenes, split.fraction, space.num_objects, len(split.train_objects))
        assert [len(s.train_objects) for s in random] == [len(s.train_objects) for s in covering]
    with pytest.raises(BindscopeError, match="unknown object order 'sorted'; choose random or covering"):
        object_splits(scenes, [0.5], 0, order="sorted")  # type: ignore[arg-type]


def test_a_covering_split_round_trips_and_carves_validation_objects_in_its_order(tmp_path):
    scenes = clevr_with_singles()
    split = object_split(scenes, 0.5, seed=3, order="covering")
    loaded = load_split(save_split(split, tmp_path / "s.json"))
    assert loaded.order == "covering" and np.array_equal(loaded.train_objects, split.train_objects)
    carved = split.with_validation(scenes, 0.25, by="objects")
    order = covering_order(scenes.space, 3)[: len(split.train_objects)]
    assert as_set(carved.validation_objects) == as_set(order[-len(carved.validation_objects) :])
