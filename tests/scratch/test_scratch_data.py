"""The controlled models' data (docs/method/09-scratch.md): the seeded scene/query sampler, token sequences and
fixed evaluation scenes, checked against slow per-scene Python references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary
from bindscope.scratch.data import SceneSampler, fixed_scenes
from bindscope.space.concepts import ConceptSpace

SPACE = ConceptSpace.from_dict(
    {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2", "b3"], "c": ["c0", "c1"]}
)  # 24 objects
TINY = ConceptSpace.from_dict({"color": ["red", "blue"], "shape": ["cube", "ball"]})  # 2x2 values: swaps hit objects


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- slow references -------------------------------------------------------------------------------
def objects_of(scene_ids: np.ndarray) -> list[int]:
    return [int(i) for i in scene_ids if i >= 0]


def candidate_swaps(space: ConceptSpace, objects: list[int], allowed: set[int]) -> set[int]:
    """Every allowed object made from object i of the scene by copying concept c's value from object j != i."""
    values = space.all_objects()
    out = set()
    for i, j in itertools.permutations(range(len(objects)), 2):
        vi, vj = values[objects[i]], values[objects[j]]
        for c in range(space.num_concepts):
            if vi[c] != vj[c]:
                new = vi.copy()
                new[c] = vj[c]
                oid = int(space.object_ids(new))
                if oid in allowed:
                    out.add(oid)
    return out


def check_batch(space: ConceptSpace, batch, allowed: set[int], kmax: int) -> None:
    """Every field of a batch against a per-scene recomputation."""
    ids = batch.scene_ids.numpy()
    queries = batch.query_ids.numpy()
    swaps = batch.swap_ids.numpy()
    b = len(ids)
    assert ids.shape == (b, kmax) and batch.scenes.shape == (b, kmax, space.num_concepts)
    # scenes are the values of scene_ids
    np.testing.assert_array_equal(batch.scenes.numpy(), space.object_values(ids))
    offsets = np.concatenate([[0], np.cumsum(space.sizes)[:-1]])
    values = space.all_objects()
    expect_obj = np.zeros((b, len(queries)), dtype=np.float32)
    expect_con = np.zeros((b, sum(space.sizes)), dtype=np.float32)
    present_ids, swap_ids = set(), set()
    for s in range(b):
        objs = objects_of(ids[s])
        n = len(objs)
        # 1..Kmax objects, the padding after them
        assert 1 <= n <= kmax
        assert (ids[s, :n] >= 0).all() and (ids[s, n:] == -1).all()
        assert set(objs) <= allowed
        present_ids.update(objs)
        for q, qid in enumerate(queries):
            expect_obj[s, q] = float(qid in objs)
        for o in objs:
            for c in range(space.num_concepts):
                expect_con[s, offsets[c] + values[o][c]] = 1.0
        # the swap: one of the allowed candidates, or -1 exactly when there is none
        cands = candidate_swaps(space, objs, allowed) if n > 1 else set()
        if cands:
            assert swaps[s] in cands, (objs, swaps[s], cands)
            swap_ids.add(int(swaps[s]))
        else:
            assert swaps[s] == -1, (objs, swaps[s])
    np.testing.assert_array_equal(batch.object_labels.numpy(), expect_obj)
    np.testing.assert_array_equal(batch.concept_labels.numpy(), expect_con)
    # queries: sorted, unique, the present objects plus the swaps
    assert (np.diff(queries) > 0).all()
    assert set(queries.tolist()) == present_ids | swap_ids
    assert set(queries.tolist()) <= allowed


def check_swap_shape(space: ConceptSpace, batch) -> None:
    """Each swap differs from one scene object in exactly one concept, taking that value from another object."""
    values = space.all_objects()
    ids = batch.scene_ids.numpy()
    for s, swap in enumerate(batch.swap_ids.numpy()):
        objs = objects_of(ids[s])
        if len(objs) == 1:
            assert swap == -1
        if swap < 0:
            continue
        w = values[swap]
        ok = False
        for i, j in itertools.permutations(range(len(objs)), 2):
            diff = np.flatnonzero(values[objs[i]] != w)
            if len(diff) == 1 and values[objs[j]][diff[0]] == w[diff[0]]:
                ok = True
        assert ok, (objs, swap)


# -- the sampler -------------------------------------------------------------------------------
@pytest.mark.parametrize(("seed", "step"), [(0, 0), (0, 7), (3, 1), (11, 123)])
def test_batches_match_the_reference(seed: int, step: int) -> None:
    sampler = SceneSampler(SPACE, np.arange(SPACE.num_objects), 3)
    batch = sampler.sample(96, seed, step)
    check_batch(SPACE, batch, set(range(SPACE.num_objects)), 3)
    check_swap_shape(SPACE, batch)
    # the scenes of a batch are varied: every object count and most objects occur
    counts = (batch.scene_ids >= 0).sum(1)
    assert set(counts.tolist()) == {1, 2, 3}
    assert len(torch.unique(batch.scene_ids[batch.scene_ids >= 0])) > SPACE.num_objects // 2
    assert (batch.swap_ids >= 0).any()


def test_batches_match_the_reference_with_held_out_objects() -> None:
    allowed = np.array([0, 1, 2, 5, 7, 8, 11, 13, 17, 18, 20, 23])
    sampler = SceneSampler(SPACE, allowed, 3)
    for step in range(4):
        batch = sampler.sample(128, 5, step)
        check_batch(SPACE, batch, set(allowed.tolist()), 3)
        check_swap_shape(SPACE, batch)


def test_held_out_objects_never_appear() -> None:
    rng = np.random.default_rng(0)
    allowed = np.sort(rng.choice(SPACE.num_objects, 9, replace=False))
    held_out = torch.from_numpy(np.setdiff1d(np.arange(SPACE.num_objects), allowed))
    sampler = SceneSampler(SPACE, allowed, 3)
    swaps = 0
    for step in range(50):
        batch = sampler.sample(256, 1, step)
        for name in ("scene_ids", "query_ids", "swap_ids"):
            t = getattr(batch, name)
            assert not torch.isin(t, held_out).any(), (name, step)
            assert ((t >= 0) & ~torch.isin(t, torch.from_numpy(allowed))).sum() == 0
        swaps += int((batch.swap_ids >= 0).sum())
    assert swaps > 0  # swaps were drawn, only allowed ones


def test_a_swap_that_is_an_object_of_its_scene_is_a_positive() -> None:
    space = TINY
    sampler = SceneSampler(space, np.arange(4), 2)
    positives = negatives = 0
    for step in range(20):
        batch = sampler.sample(64, 0, step)
        check_batch(space, batch, {0, 1, 2, 3}, 2)
        check_swap_shape(space, batch)
        q = {int(v): i for i, v in enumerate(batch.query_ids)}
        for s, swap in enumerate(batch.swap_ids.tolist()):
            if swap < 0:
                continue
            label = float(batch.object_labels[s, q[swap]])
            if swap in batch.scene_ids[s].tolist():
                assert label == 1.0
                positives += 1
            else:
                assert label == 0.0
                negatives += 1
        if positives and negatives:
            break
    assert positives > 0 and negatives > 0


def test_one_object_scenes_get_no_swap() -> None:
    sampler = SceneSampler(SPACE, np.arange(SPACE.num_objects), 1)
    batch = sampler.sample(64, 0, 0)
    assert (batch.swap_ids == -1).all() and (batch.scene_ids >= 0).all()
    assert batch.query_ids.tolist() == sorted(set(batch.scene_ids[:, 0].tolist()))
    check_batch(SPACE, batch, set(range(SPACE.num_objects)), 1)


def test_scenes_with_identical_objects_get_no_swap() -> None:
    sampler = SceneSampler(SPACE, np.array([6]), 3)  # one allowed object: every scene repeats it
    batch = sampler.sample(32, 0, 0)
    assert (batch.swap_ids == -1).all()
    assert batch.query_ids.tolist() == [6]
    assert (batch.object_labels == 1).all()


def test_batches_are_a_function_of_seed_and_step() -> None:
    a = SceneSampler(SPACE, np.arange(20), 3)
    b = SceneSampler(SPACE, np.arange(20), 3)
    first, again = a.sample(64, 4, 9), b.sample(64, 4, 9)
    for name in ("scenes", "scene_ids", "query_ids", "object_labels", "concept_labels", "swap_ids"):
        assert torch.equal(getattr(first, name), getattr(again, name)), name
    a.sample(64, 4, 3)  # no carried state: another batch in between changes nothing
    assert torch.equal(a.sample(64, 4, 9).scene_ids, first.scene_ids)
    assert not torch.equal(a.sample(64, 4, 10).scene_ids, first.scene_ids)
    assert not torch.equal(a.sample(64, 5, 9).scene_ids, first.scene_ids)


@pytest.mark.parametrize(
    ("allowed", "message"),
    [
        (np.array([], dtype=np.int64), "needs at least one allowed object"),
        (np.array([0, 24]), "allowed object ids must lie in [0, 24)"),
        (np.array([-1, 3]), "allowed object ids must lie in [0, 24)"),
    ],
)
def test_sampler_refuses_bad_allowed_objects(allowed: np.ndarray, message: str) -> None:
    with pytest.raises(BindscopeError) as err:
        SceneSampler(SPACE, allowed, 3)
    assert message in str(err.value)


# -- tokens ---------------------------------------------------------------------------------------
def test_scene_tokens_by_hand() -> None:
    vocab = Vocabulary.for_space(SPACE, 3)  # values 3 + 4 + 2: offsets 0, 3, 7
    soo, eoo, eos, pad = 9, 10, 11, 12
    assert (vocab.soo, vocab.eoo, vocab.eos, vocab.pad, vocab.size) == (soo, eoo, eos, pad, 13)
    assert vocab.offsets.tolist() == [0, 3, 7]
    assert vocab.scene_length == (3 + 2) * 3 + 1 == 16 and vocab.query_length == 6
    scenes = torch.tensor(
        [
            [[1, 2, 0], [2, 3, 1], [-1, -1, -1]],
            [[0, 0, 1], [-1, -1, -1], [-1, -1, -1]],
            [[2, 1, 1], [0, 3, 0], [1, 0, 1]],
        ]
    )
    expected = [
        [soo, 1, 5, 7, eoo, soo, 2, 6, 8, eoo, eos, pad, pad, pad, pad, pad],
        [soo, 0, 3, 8, eoo, eos, pad, pad, pad, pad, pad, pad, pad, pad, pad, pad],
        [soo, 2, 4, 8, eoo, soo, 0, 6, 7, eoo, soo, 1, 3, 8, eoo, eos],
    ]
    assert vocab.scene_tokens(scenes).tolist() == expected
    # fewer object slots than max_objects is fine (padded to the full length)
    assert vocab.scene_tokens(scenes[:2, :2]).tolist() == expected[:2]


def test_query_tokens_by_hand() -> None:
    vocab = Vocabulary.for_space(SPACE, 2)
    objects = vocab.object_queries(torch.tensor([[1, 2, 0], [2, 0, 1]]))
    assert objects.tolist() == [[9, 1, 5, 7, 10, 11], [9, 2, 3, 8, 10, 11]]
    concepts = vocab.concept_queries()
    assert concepts.shape == (9, vocab.query_length)
    assert concepts[:, 0].tolist() == list(range(9))
    assert (concepts[:, 1] == vocab.eos).all() and (concepts[:, 2:] == vocab.pad).all()


def test_scene_tokens_refuse_scenes_that_do_not_fit() -> None:
    vocab = Vocabulary.for_space(SPACE, 2)
    with pytest.raises(BindscopeError, match="do not fit this model"):
        vocab.scene_tokens(torch.zeros((1, 3, 3), dtype=torch.long))
    with pytest.raises(BindscopeError, match="do not fit this model"):
        vocab.scene_tokens(torch.zeros((1, 2, 2), dtype=torch.long))


# -- fixed evaluation scenes ----------------------------------------------------------------------
def test_fixed_scenes_are_every_tuple_when_few() -> None:
    objects = np.array([7, 2, 19, 2])
    out = fixed_scenes(SPACE, objects, 2, cap=100, seed=0)
    ids = SPACE.object_ids(out)
    assert out.shape == (9, 2, 3)
    assert sorted(map(tuple, ids.tolist())) == sorted(itertools.product([2, 7, 19], repeat=2))


def test_fixed_scenes_are_capped_and_seeded_when_many() -> None:
    objects = np.arange(20)
    for cap in (10, 150):  # 400 tuples: sampled (400 > 4 cap) and enumerated then subsampled (400 <= 4 cap)
        out = fixed_scenes(SPACE, objects, 2, cap=cap, seed=3)
        ids = SPACE.object_ids(out)
        assert out.shape == (cap, 2, 3)
        assert len({tuple(r) for r in ids.tolist()}) == cap  # distinct tuples
        assert np.isin(ids, objects).all()
        np.testing.assert_array_equal(out, fixed_scenes(SPACE, objects, 2, cap=cap, seed=3))
        assert not np.array_equal(out, fixed_scenes(SPACE, objects, 2, cap=cap, seed=4))


def test_fixed_scenes_honour_require() -> None:
    objects, require = np.arange(6), np.array([4])
    out = SPACE.object_ids(fixed_scenes(SPACE, objects, 2, cap=100, seed=0, require=require))
    expected = [t for t in itertools.product(range(6), repeat=2) if 4 in t]
    assert sorted(map(tuple, out.tolist())) == expected
    many = SPACE.object_ids(fixed_scenes(SPACE, np.arange(24), 2, cap=20, seed=1, require=np.array([0, 1, 2, 3, 4, 5])))
    assert len(many) == 20 and np.isin(many, np.arange(6)).any(1).all()


def test_fixed_scenes_with_a_rare_require_still_fill_the_cap() -> None:
    objects, require, cap = np.arange(24), np.array([5]), 40
    qualifying = 2 * 24 - 1  # ordered pairs holding object 5
    out = SPACE.object_ids(fixed_scenes(SPACE, objects, 2, cap=cap, seed=0, require=require))
    assert (out == 5).any(1).all()
    assert len(out) == min(cap, qualifying)
