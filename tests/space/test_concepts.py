"""ConceptSpace (mixed-radix object ids) and SceneSet (enumeration, sampling, views), docs/method/01-concepts.md."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet

# Explicit settings on every property test: no example database in the repo, no deadline.
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@functools.cache
def preset_scenes(name: str) -> SceneSet:
    return get_preset(name).build_scenes()


# -- strategies ---------------------------------------------------------------------------------


@st.composite
def spaces(draw, max_concepts: int = 4, max_values: int = 6) -> ConceptSpace:
    """A random space: 1..max_concepts concepts with 1..max_values values each."""
    sizes = draw(st.lists(st.integers(1, max_values), min_size=1, max_size=max_concepts))
    concepts = tuple(f"c{i}" for i in range(len(sizes)))
    values = tuple(tuple(f"c{i}v{j}" for j in range(n)) for i, n in enumerate(sizes))
    return ConceptSpace(concepts, values)


@st.composite
def scene_sets(draw, max_scenes: int = 8, max_k: int = 3) -> SceneSet:
    """A random, valid scene set: each scene has 1..K objects, padded with -1 after them."""
    space = draw(spaces())
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(0, max_scenes))
    arr = np.full((n, k, space.num_concepts), PAD, dtype=np.int64)
    for i in range(n):
        n_obj = draw(st.integers(1, k))
        for s in range(n_obj):
            arr[i, s] = [draw(st.integers(0, size - 1)) for size in space.sizes]
    return SceneSet(space, arr)


def naive_id(values, sizes) -> int:
    """Horner form of id = v_0 + V_0 * (v_1 + V_1 * (v_2 + ...))."""
    out = 0
    for v, size in reversed(list(zip(values, sizes))):
        out = v + size * out
    return out


def falling(n: int, k: int) -> int:
    """n * (n - 1) * ... * (n - k + 1) (0 when k > n)."""
    return math.prod(range(n - k + 1, n + 1)) if k <= n else 0


def clevr_space() -> ConceptSpace:
    return get_preset("clevr").space


# -- ConceptSpace: ids ----------------------------------------------------------------------------


@PROPERTY
@given(space=spaces(), data=st.data())
def test_object_id_is_mixed_radix(space, data):
    values = data.draw(st.tuples(*[st.integers(0, n - 1) for n in space.sizes]))
    assert int(space.object_ids(np.array(values))) == naive_id(values, space.sizes)
    assert space.num_objects == math.prod(space.sizes)


@PROPERTY
@given(space=spaces())
def test_all_objects_enumerates_ids_in_order(space):
    objs = space.all_objects()
    assert objs.shape == (space.num_objects, space.num_concepts)
    assert [naive_id(v, space.sizes) for v in objs.tolist()] == list(range(space.num_objects))
    # every value tuple exactly once
    assert len({tuple(v) for v in objs.tolist()}) == space.num_objects


@PROPERTY
@given(space=spaces(), data=st.data())
def test_ids_to_values_round_trip_any_shape(space, data):
    ids = data.draw(
        hnp.arrays(
            np.int64,
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
            elements=st.integers(PAD, space.num_objects - 1),
        )
    )
    values = space.object_values(ids)
    assert values.shape == ids.shape + (space.num_concepts,)
    # padding <-> all -1; real ids <-> in-range values
    assert np.array_equal(values[ids == PAD], np.full(((ids == PAD).sum(), space.num_concepts), PAD))
    real = values[ids != PAD]
    assert ((real >= 0) & (real < np.array(space.sizes))).all()
    back = space.object_ids(values)
    assert back.shape == ids.shape
    assert np.array_equal(back, ids)


@PROPERTY
@given(space=spaces(), data=st.data())
def test_values_to_ids_round_trip_with_padding(space, data):
    lead = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4))
    n = int(np.prod(lead))
    rows = [data.draw(st.none() | st.tuples(*[st.integers(0, s - 1) for s in space.sizes])) for _ in range(n)]
    flat = np.array([[PAD] * space.num_concepts if r is None else list(r) for r in rows])
    values = flat.reshape(*lead, space.num_concepts)
    ids = space.object_ids(values)
    assert ids.shape == tuple(lead)
    expected = [PAD if r is None else naive_id(r, space.sizes) for r in rows]
    assert ids.reshape(-1).tolist() == expected
    assert np.array_equal(space.object_values(ids), values)


def test_clevr_known_ids():
    space = clevr_space()
    assert space.concepts == ("color", "shape")
    assert space.sizes == (8, 3)
    red, sphere = space.value_index("color", "red"), space.value_index("shape", "sphere")
    assert (red, sphere) == (6, 2)
    assert int(space.object_ids([red, sphere])) == 6 + 8 * 2 == 22
    assert space.object_ids([[0, 0], [7, 0], [0, 1], [7, 2], [PAD, PAD]]).tolist() == [0, 7, 8, 23, -1]
    assert space.object_values([22, 23, -1]).tolist() == [[6, 2], [7, 2], [-1, -1]]
    assert space.num_objects == 24


def test_ids_do_not_depend_on_data_order():
    space = clevr_space()
    vals = np.array([[6, 2], [0, 0], [3, 1]])
    perm = [2, 0, 1]
    assert np.array_equal(space.object_ids(vals[perm]), space.object_ids(vals)[perm])


def test_value_names_and_padding():
    space = clevr_space()
    color, shape = space.value_names([[6, 2], [PAD, PAD]])
    assert color.tolist() == ["red", None]
    assert shape.tolist() == ["sphere", None]


def test_from_dict_and_to_dict():
    space = ConceptSpace.from_dict({"size": ["small", "big"], "color": ["red", "blue", "green"]})
    assert space.concepts == ("size", "color")
    assert space.sizes == (2, 3)
    assert space.to_dict() == {"size": ["small", "big"], "color": ["red", "blue", "green"]}
    assert ConceptSpace.from_dict(space.to_dict()) == space
    # concept 0 is the fastest-varying digit
    assert int(space.object_ids([1, 2])) == 1 + 2 * 2


# -- ConceptSpace: errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("concepts", "values", "match"),
    [
        (("color", "color"), (("red",), ("blue",)), r"duplicate concept 'color'"),
        (("color", "shape"), (("red",), ()), r"concept 'shape' has no values"),
        (("color",), (("red", "blue", "red"),), r"'red' more than once"),
        (("color",), (("red", ""),), r"non-empty strings"),
        (("color",), (("red", "   "),), r"non-empty strings"),
        ((), (), r"at least one concept"),
        (("",), (("red",),), r"concept names must be non-empty"),
        (("color", "shape"), (("red",),), r"2 concept names but 1 value lists"),
    ],
)
def test_invalid_space(concepts, values, match):
    with pytest.raises(BindscopeError, match=match):
        ConceptSpace(concepts, values)


@pytest.mark.parametrize(
    ("mapping", "match"),
    [
        ({}, r"at least one concept"),
        ({"color": "red"}, r"must list its values"),
        (["color"], r"must be a mapping"),
    ],
)
def test_invalid_from_dict(mapping, match):
    with pytest.raises(BindscopeError, match=match):
        ConceptSpace.from_dict(mapping)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([8, 0], r"value index 8 is out of range for concept 'color' \(0\.\.7\)"),
        ([[0, 0], [0, 3]], r"value index 3 is out of range for concept 'shape' \(0\.\.2\)"),
        ([0, -2], r"value index -2 is out of range for concept 'shape'"),
        ([[0, 0], [PAD, 1]], r"partly padded"),
        ([[6.0, 2.0]], r"must be integers"),
        ([[True, False]], r"must be integers"),
        ([1, 2, 0], r"one entry per concept \(2\)"),
        (5, r"one entry per concept"),
    ],
)
def test_invalid_values(values, match):
    with pytest.raises(BindscopeError, match=match):
        clevr_space().object_ids(values)


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        ([24], r"object id 24 is outside 0\.\.23"),
        ([0, -2], r"object id -2 is outside"),
        ([1.0], r"object ids must be integers"),
    ],
)
def test_invalid_ids(ids, match):
    with pytest.raises(BindscopeError, match=match):
        clevr_space().object_values(ids)


def test_unknown_names():
    space = clevr_space()
    with pytest.raises(BindscopeError, match=r"unknown concept 'size'"):
        space.concept_index("size")
    with pytest.raises(BindscopeError, match=r"unknown value 'pink' for concept 'color'"):
        space.value_index("color", "pink")


# -- SceneSet: presets --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["clevr", "clevr2d"])
def test_clevr_presets_enumerate_all_576_pairs(name):
    scenes = preset_scenes(name)
    assert len(scenes) == 576 == 24 * 24
    assert scenes.scenes.shape == (576, 2, 2)
    ids = scenes.object_ids()
    assert (ids != PAD).all()
    assert len({tuple(r) for r in ids.tolist()}) == 576  # every ordered pair, identical included
    assert (ids[:, 0] == ids[:, 1]).sum() == 24
    # lexicographic order of object ids, slot 1 first
    assert ids[:3].tolist() == [[0, 0], [0, 1], [0, 2]]
    assert np.array_equal(np.lexsort(ids.T[::-1]), np.arange(576))


def test_text_preset_pairs_then_padded_singles():
    scenes = preset_scenes("text")
    assert len(scenes) == 160_400
    assert scenes.max_objects == 2
    ids = scenes.object_ids()
    pairs, singles = ids[:160_000], ids[160_000:]
    assert (pairs != PAD).all()
    assert len(np.unique(pairs[:, 0] * 400 + pairs[:, 1])) == 160_000
    # singles: every object once, in id order, slot 2 padded with -1 in every concept
    assert singles[:, 0].tolist() == list(range(400))
    assert (singles[:, 1] == PAD).all()
    assert (scenes.scenes[160_000:, 1] == PAD).all()
    n = scenes.num_objects()
    assert (n[:160_000] == 2).all() and (n[160_000:] == 1).all()


def test_pug_spare_distinct_animals_and_textures():
    scenes = preset_scenes("pug_spare")
    assert len(scenes) == 7_392 == 12 * 11 * 8 * 7
    arr = scenes.scenes
    assert (arr[:, 0, 0] != arr[:, 1, 0]).all()  # animals differ
    assert (arr[:, 0, 1] != arr[:, 1, 1]).all()  # textures differ
    assert len({tuple(r) for r in scenes.object_ids().tolist()}) == 7_392


# -- SceneSet: enumeration properties --------------------------------------------------------------


@st.composite
def enumeration_cases(draw):
    space = draw(spaces())
    max_k = 1
    while max_k < 3 and space.num_objects ** (max_k + 1) <= 5_000:
        max_k += 1
    k = draw(st.integers(1, max_k))
    return space, k, draw(st.booleans()), draw(st.booleans())


@PROPERTY
@given(case=enumeration_cases())
def test_enumerate_counts_and_validity(case):
    space, k, allow_identical, distinct_values = case
    scenes = SceneSet.enumerate(space, k, allow_identical=allow_identical, distinct_values=distinct_values)
    u = space.num_objects
    if distinct_values:
        expected = math.prod(falling(v, k) for v in space.sizes)
    elif not allow_identical:
        expected = falling(u, k)
    else:
        expected = u**k
    assert len(scenes) == expected
    assert scenes.scenes.shape == (expected, k, space.num_concepts)
    ids = scenes.object_ids()
    assert len({tuple(r) for r in ids.tolist()}) == expected  # no duplicates
    assert ((ids >= 0) & (ids < u)).all()  # full scenes, valid ids
    for i in range(k):
        for j in range(i + 1, k):
            if distinct_values:
                assert (scenes.scenes[:, i] != scenes.scenes[:, j]).all()
            elif not allow_identical:
                assert (ids[:, i] != ids[:, j]).all()
    if expected:
        assert np.array_equal(np.lexsort(ids.T[::-1]), np.arange(expected))


def test_enumerate_rejects_bad_k_and_huge_spaces():
    space = clevr_space()
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(BindscopeError, match=r"whole number >= 1"):
            SceneSet.enumerate(space, bad)
    big = ConceptSpace(tuple(f"c{i}" for i in range(6)), tuple(tuple(map(str, range(10))) for _ in range(6)))
    with pytest.raises(BindscopeError, match=r"too many; sample scenes instead"):
        SceneSet.enumerate(big, 2)


# -- SceneSet: sampling -----------------------------------------------------------------------------


def test_sample_is_seeded_sorted_and_distinct():
    space = clevr_space()
    a = SceneSet.sample(space, 2, 100, seed=3)
    b = SceneSet.sample(space, 2, 100, seed=3)
    c = SceneSet.sample(space, 2, 100, seed=4)
    assert len(a) == 100
    assert np.array_equal(a.scenes, b.scenes)
    assert not np.array_equal(a.scenes, c.scenes)
    ids = a.object_ids()
    assert len({tuple(r) for r in ids.tolist()}) == 100
    assert np.array_equal(np.lexsort(ids.T[::-1]), np.arange(100))
    # a generator seed works too and is reproducible
    g1 = SceneSet.sample(space, 2, 50, seed=np.random.default_rng(7))
    g2 = SceneSet.sample(space, 2, 50, seed=np.random.default_rng(7))
    assert np.array_equal(g1.scenes, g2.scenes)


def test_sample_everything_and_too_many():
    space = clevr_space()
    # 8*7 colors x 3*2 shapes = 336 scenes with distinct values
    full = SceneSet.sample(space, 2, 336, seed=0, distinct_values=True)
    assert np.array_equal(full.scenes, SceneSet.enumerate(space, 2, distinct_values=True).scenes)
    with pytest.raises(BindscopeError, match=r"asked for 337 scenes but only 336 distinct scenes exist"):
        SceneSet.sample(space, 2, 337, seed=0, distinct_values=True)
    with pytest.raises(BindscopeError, match=r"asked for 553 scenes but only 552"):
        SceneSet.sample(space, 2, 553, allow_identical=False)
    with pytest.raises(BindscopeError, match=r"num_scenes must be at least 1"):
        SceneSet.sample(space, 2, 0)


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 336))
def test_sample_respects_distinct_values(seed, n):
    scenes = SceneSet.sample(clevr_space(), 2, n, seed=seed, distinct_values=True)
    assert len(scenes) == n
    assert (scenes.scenes[:, 0] != scenes.scenes[:, 1]).all()
    assert len({tuple(r) for r in scenes.object_ids().tolist()}) == n


def huge_space() -> ConceptSpace:
    return ConceptSpace(tuple(f"c{i}" for i in range(6)), tuple(tuple(f"v{j}" for j in range(10)) for _ in range(6)))


@pytest.mark.parametrize(("allow_identical", "distinct_values"), [(True, False), (False, False), (True, True)])
def test_sample_rejection_path_for_huge_spaces(allow_identical, distinct_values):
    space = huge_space()
    assert space.num_objects**3 > 50_000_000  # too many to enumerate
    kw = dict(allow_identical=allow_identical, distinct_values=distinct_values)
    a = SceneSet.sample(space, 3, 500, seed=11, **kw)
    b = SceneSet.sample(space, 3, 500, seed=11, **kw)
    c = SceneSet.sample(space, 3, 500, seed=12, **kw)
    assert a.scenes.shape == (500, 3, 6)
    assert np.array_equal(a.scenes, b.scenes)
    assert not np.array_equal(a.scenes, c.scenes)
    ids = a.object_ids()
    assert ((ids >= 0) & (ids < space.num_objects)).all()
    assert len({tuple(r) for r in ids.tolist()}) == 500
    assert np.array_equal(np.lexsort(ids.T[::-1]), np.arange(500))
    if not allow_identical:
        assert (ids[:, 0] != ids[:, 1]).all() and (ids[:, 0] != ids[:, 2]).all()
        assert (ids[:, 1] != ids[:, 2]).all()
    if distinct_values:
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            assert (a.scenes[:, i] != a.scenes[:, j]).all()


def test_rejection_path_drops_repeated_draws():
    # 8,000 objects, 64e6 pairs (just above the enumeration limit): 50,000 uniform draws repeat
    # about 20 pairs, so the sampler must de-duplicate
    space = ConceptSpace(("a", "b", "c"), tuple(tuple(f"v{j}" for j in range(20)) for _ in range(3)))
    assert 50_000_000 < space.num_objects**2 < 100_000_000
    s = SceneSet.sample(space, 2, 50_000, seed=0)
    ids = s.object_ids()
    assert len(np.unique(ids[:, 0] * space.num_objects + ids[:, 1])) == 50_000
    assert np.array_equal(np.lexsort(ids.T[::-1]), np.arange(50_000))


def test_rejection_path_reports_impossible_requests():
    # 2^26 objects (too many pairs to enumerate), but with 2 values per concept no 3 objects
    # can differ in every concept: distinct_values with K=3 is impossible
    space = ConceptSpace(tuple(f"c{i}" for i in range(26)), tuple(("a", "b") for _ in range(26)))
    assert space.num_objects**3 > 50_000_000
    with pytest.raises(BindscopeError, match=r"could not draw 5 distinct scenes"):
        SceneSet.sample(space, 3, 5, seed=0, distinct_values=True)


def test_singles():
    space = clevr_space()
    s = SceneSet.singles(space, 3)
    assert s.scenes.shape == (24, 3, 2)
    assert s.object_ids()[:, 0].tolist() == list(range(24))
    assert (s.scenes[:, 1:] == PAD).all()
    assert SceneSet.singles(space).max_objects == 1


# -- SceneSet: views ----------------------------------------------------------------------------------


def test_views_on_a_known_scene_set():
    space = clevr_space()
    s = SceneSet(space, [[[6, 0], [0, 2], [PAD, PAD]], [[6, 2], [PAD, PAD], [PAD, PAD]], [[1, 1], [1, 1], [2, 0]]])
    assert s.object_ids().tolist() == [[6, 16, -1], [22, -1, -1], [9, 9, 2]]
    assert s.num_objects().tolist() == [2, 1, 3]
    colors, shapes = s.value_counts()
    assert colors.shape == (3, 8) and shapes.shape == (3, 3)
    assert colors[0].tolist() == [1, 0, 0, 0, 0, 0, 1, 0]
    assert colors[2].tolist() == [0, 2, 1, 0, 0, 0, 0, 0]
    assert shapes.tolist() == [[1, 0, 1], [0, 0, 1], [1, 2, 0]]
    assert s.scenes.dtype == np.int32
    assert len(s) == 3 and s.max_objects == 3


@PROPERTY
@given(scenes=scene_sets())
def test_views_match_naive_loops(scenes):
    space = scenes.space
    ids = scenes.object_ids()
    counts = scenes.value_counts()
    nums = scenes.num_objects()
    assert ids.shape == (len(scenes), scenes.max_objects)
    assert len(counts) == space.num_concepts
    for i, scene in enumerate(scenes.scenes.tolist()):
        present = [obj for obj in scene if obj[0] != PAD]
        assert nums[i] == len(present)
        expected_ids = [naive_id(o, space.sizes) for o in present]
        expected_ids += [PAD] * (scenes.max_objects - len(present))
        assert ids[i].tolist() == expected_ids
        for c, size in enumerate(space.sizes):
            naive = [0] * size
            for obj in present:
                naive[obj[c]] += 1
            assert counts[c][i].tolist() == naive


def test_scenes_are_read_only_copies():
    space = clevr_space()
    raw = np.array([[[1, 1], [2, 2]]])
    s = SceneSet(space, raw)
    raw[0, 0, 0] = 5
    assert s.scenes[0, 0, 0] == 1
    with pytest.raises(ValueError):
        s.scenes[0, 0, 0] = 3


def test_content_hash():
    space = clevr_space()
    arr = np.array([[[6, 0], [0, 2]], [[1, 1], [PAD, PAD]]])
    h = SceneSet(space, arr).content_hash()
    assert h == SceneSet(space, arr.astype(np.int16).tolist()).content_hash()
    assert h == SceneSet(space, arr.copy()).content_hash()
    assert len(h) == 64 and int(h, 16) >= 0
    changed = arr.copy()
    changed[1, 0, 1] = 2
    assert SceneSet(space, changed).content_hash() != h
    assert SceneSet(space, arr[::-1]).content_hash() != h  # order matters
    # same indices over another space (other value names) hash differently
    other = get_preset("clevr2d").space
    assert SceneSet(other, arr).content_hash() != h
    # extra padding slot changes the array, so the hash
    padded = np.concatenate([arr, np.full((2, 1, 2), PAD)], axis=1)
    assert SceneSet(space, padded).content_hash() != h
    # the full clevr enumeration hashes the same twice
    assert preset_scenes("clevr").content_hash() == SceneSet.enumerate(space, 2).content_hash()


def test_subset_and_concat():
    space = clevr_space()
    pairs = SceneSet.enumerate(space, 2)
    sub = pairs.subset([5, 0, 22])
    assert sub.object_ids().tolist() == [[0, 5], [0, 0], [0, 22]]
    mask = np.zeros(len(pairs), bool)
    mask[[1, 30]] = True
    assert pairs.subset(mask).object_ids().tolist() == [[0, 1], [1, 6]]
    singles = SceneSet.singles(space)
    both = singles.subset([3, 4]).concat(sub)
    assert both.max_objects == 2
    assert both.object_ids().tolist() == [[3, -1], [4, -1], [0, 5], [0, 0], [0, 22]]
    other = SceneSet.singles(get_preset("clevr2d").space)
    with pytest.raises(BindscopeError, match=r"different concept spaces"):
        singles.concat(other)


@pytest.mark.parametrize(
    ("arr", "match"),
    [
        ([[[PAD, PAD], [1, 1]]], r"scene 0 has no object in slot 1"),
        ([[[1, 1], [PAD, PAD]], [[PAD, PAD], [PAD, PAD]]], r"scene 1 has no object in slot 1"),
        ([[[1, 1], [1, 1], [2, 2]], [[1, 1], [PAD, PAD], [2, 2]]], r"scene 1 has an object after an empty slot"),
        ([[1, 1], [2, 2]], r"must be an array \[N, K, C\]"),
        ([[[[1, 1]]]], r"must be an array \[N, K, C\]"),
        (np.zeros((2, 0, 2), int), r"at least one object slot"),
        ([[[1, 1, 1]]], r"one entry per concept"),
        ([[[1, PAD]]], r"partly padded"),
        ([[[9, 1]]], r"out of range for concept 'color'"),
        ([[[1.0, 1.0]]], r"must be integers"),
    ],
)
def test_invalid_scene_sets(arr, match):
    with pytest.raises(BindscopeError, match=match):
        SceneSet(clevr_space(), np.asarray(arr))


def test_empty_scene_set_is_allowed():
    s = SceneSet(clevr_space(), np.zeros((0, 2, 2), int))
    assert len(s) == 0
    assert s.object_ids().shape == (0, 2)
    assert s.num_objects().shape == (0,)
    assert [c.shape for c in s.value_counts()] == [(0, 8), (0, 3)]


def test_too_many_objects_is_refused():
    values = tuple(tuple(f"v{j}" for j in range(1000)) for _ in range(5))  # 10^15 objects
    with pytest.raises(BindscopeError, match="distinct objects; object ids would overflow"):
        ConceptSpace(tuple(f"c{i}" for i in range(5)), values)


# -- SceneSet: binding ambiguity ----------------------------------------------------------------

PAD_ROW = [PAD, PAD]


def test_binding_ambiguous_known_answers():
    space = ConceptSpace(("color", "shape"), (("red", "blue", "green"), ("cube", "ball", "cone")))
    scenes = np.array(
        [
            [[0, 0], [1, 1], PAD_ROW],  # red cube, blue ball: the swap "blue cube, red ball" has the same values
            [[0, 0], [0, 1], PAD_ROW],  # red cube, red ball: shared color, decided by its values
            [[0, 0], [1, 0], PAD_ROW],  # shared shape
            [[0, 0], [0, 0], PAD_ROW],  # the same object twice
            [[0, 0], PAD_ROW, PAD_ROW],  # one object
            [[0, 0], [1, 1], [0, 1]],  # three of the four formable objects: blue cube is missing
            [[0, 0], [1, 1], [1, 0]],  # red cube, blue ball, blue cube: red ball is missing
            [[0, 0], [0, 1], [0, 2]],  # one color, three shapes: nothing else is formable
        ]
    )
    got = SceneSet(space, scenes).binding_ambiguous()
    assert got.tolist() == [True, False, False, False, False, True, True, False]


@PROPERTY
@given(scenes=scene_sets())
def test_binding_ambiguous_means_an_absent_object_has_only_present_values(scenes):
    """Brute force: some object outside the scene has, per concept, a value the scene holds."""
    expected = []
    for row in scenes.scenes:
        present = [tuple(o) for o in row if o[0] != PAD]
        held = [{o[c] for o in present} for c in range(scenes.space.num_concepts)]
        formable = {tuple(o) for o in scenes.space.all_objects() if all(o[c] in held[c] for c in range(len(held)))}
        expected.append(bool(formable - set(present)))
    assert scenes.binding_ambiguous().tolist() == expected


def test_covering_subsample_keeps_every_object_in_every_slot() -> None:
    """100 objects, 10,000 two-object scenes: a random 250 of them would miss about 8 objects per slot."""
    space = ConceptSpace.from_dict({"a": [str(i) for i in range(10)], "n": [str(i) for i in range(10)]})
    scenes = SceneSet.enumerate(space, 2)
    rows = scenes.covering_subsample(250, seed=3)
    assert len(rows) == 250 and (np.diff(rows) > 0).all()
    ids = scenes.subset(rows).object_ids()
    for slot in range(2):
        assert set(ids[:, slot]) == set(range(100))  # every object in every slot
    assert (scenes.covering_subsample(250, seed=3) == rows).all()  # seeded
    assert not (scenes.covering_subsample(250, seed=4) == rows).all()
    assert len(scenes.covering_subsample(10**6)) == len(scenes)
    assert len(scenes.covering_subsample(112)) == 112  # a near-minimal cover: about one scene per object
    with pytest.raises(BindscopeError, match="keeping every object in every slot needs at least 100 scenes"):
        scenes.covering_subsample(75)
