"""Controlled models on relation and count spaces (docs/method/09-scratch.md, docs/method/11-relations-counts.md).

Token-level: a relation space's training and evaluation scenes are relations (the second object holds the converse
place), and models of the relation and count presets and of custom YAML spaces train and export. Image-text: the
family swap is a hard negative and a swap test, read right on planted embeddings; the captions' words ("to the left
of", "two", plurals) are the text tower's vocabulary; a tiny model trains on a rendered family dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from bindscope.analyses.crossmodal.swaps import swap_cases
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import load_dataset
from bindscope.data.presets import get_preset
from bindscope.embeddings.encoders.scratch.clip_model import Words
from bindscope.estimators.probes import load_probes
from bindscope.pipeline.config import ScratchEntry
from bindscope.scratch.clip_data import ClipBatches, clip_split, hard_negative_rows, wanted_negatives
from bindscope.scratch.clip_train import clip_metrics, part_floors
from bindscope.scratch.config import config_from_dict, load_config
from bindscope.scratch.data import SceneSampler, converse_places, fixed_scenes
from bindscope.scratch.export import export_model
from bindscope.scratch.train import train_model
from bindscope.space.captions import captions, count_swap, relation_swap
from bindscope.space.concepts import SceneSet
from clip_data import build_tiny, tiny_clip, tiny_preset

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NOUN = "shape"
#: Tiny token-level models: 30 steps, one evaluation at the end.
TINY = {
    "steps": 30,
    "eval_every": 30,
    "checkpoint_every": 30,
    "eval_scenes": 64,
    "d_model": 16,
    "ff": 32,
    "d_out": 8,
    "layers": 1,
    "heads": 2,
    "batch_size": 32,
    "max_objects": 2,
}
#: The tiny image-text preset (3 colors x 3 shapes) with relations or counts: every ordered pair of different
#: objects left of each other (72 scenes), or in one or two copies each (306).
FAMILY_PRESETS = {
    "relation": {"relations": ["left of"], "scenes": {"allow_identical": False}},
    "count": {"counts": [1, 2], "caption": {"object": "{count} {color} {shape}"}, "scenes": {"allow_identical": False}},
}
SWAPS = {"relation": relation_swap, "count": count_swap}


def relation_space():
    return get_preset("clevr2d-rel").space


def is_relation(space, scenes: np.ndarray) -> np.ndarray:
    """Per scene ``[N, 2, C]``: whether its second object holds the converse of the first's place."""
    converse = converse_places(space)
    assert converse is not None
    return scenes[:, 1, -1] == converse[scenes[:, 0, -1]]


# -- token-level: relation scenes -----------------------------------------------------------------------------
def test_training_scenes_of_a_relation_space_are_relations() -> None:
    space = relation_space()
    allowed = np.sort(np.random.default_rng(0).choice(space.num_objects, 60, replace=False))
    batch = SceneSampler(space, allowed, 2).sample(512, seed=0, step=0)
    ids, values = batch.scene_ids.numpy(), batch.scenes.numpy()
    two = ids[:, 1] >= 0
    assert two.sum() > 100 and (~two).sum() > 100  # 1 or 2 objects, uniformly
    assert is_relation(space, values[two]).all()
    assert np.isin(ids[ids >= 0], allowed).all()  # held-out objects appear nowhere
    swaps = batch.swap_ids.numpy()
    moved = swaps[two] >= 0
    place = space.all_objects()[swaps[two][moved], -1]
    assert (place == values[two][moved, 1, -1]).any()  # some swap queries give the subject the object's side


def test_evaluation_scenes_of_a_relation_space_are_relations() -> None:
    space = relation_space()
    objects = np.arange(0, space.num_objects, 3)
    scenes = fixed_scenes(space, objects, 2, cap=100, seed=0)
    assert len(scenes) == 100 and is_relation(space, scenes).all()
    ids = SceneSet(space, scenes).object_ids()
    assert np.isin(ids, objects).all() and len(np.unique(ids, axis=0)) == 100
    needed = objects[:4]
    required = fixed_scenes(space, objects, 2, cap=10_000, seed=0, require=needed)
    assert np.isin(SceneSet(space, required).object_ids(), needed).any(1).all()
    left = np.flatnonzero(space.all_objects()[:, -1] == 0)  # every object on the left: no relation of two of them
    with pytest.raises(BindscopeError, match="converse places"):
        fixed_scenes(space, left, 2, cap=10, seed=0)


def test_a_relation_relates_two_objects() -> None:
    space = relation_space()
    with pytest.raises(BindscopeError, match="relation relates two objects"):
        SceneSampler(space, np.arange(space.num_objects), 3)


# -- token-level: training and export -------------------------------------------------------------------------
def space_yaml(tmp_path: Path, family: str) -> Path:
    """A custom space with relations or counts, and a scratch config training on it."""
    space = {
        "name": f"mine-{family}",
        "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "ball"]},
        "objects_per_scene": 2,
        "noun": "shape",
        **({"relations": ["above"]} if family == "relation" else {"counts": [1, 2, 3]}),
    }
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"name": "mine", "space": str(tmp_path / "space.yaml"), **TINY}))
    return path


@pytest.mark.parametrize(
    ("space", "family", "words"),
    [
        ("clevr2d-rel", "relation", "to the left of"),
        ("clevr2d-count", "count", "two "),
        ("yaml", "relation", " above "),
        ("yaml", "count", "three "),
    ],
)
def test_token_level_models_train_and_export(space: str, family: str, words: str, tmp_path: Path) -> None:
    if space == "yaml":
        config = load_config(space_yaml(tmp_path, family))
        assert ScratchEntry(name="mine", config=str(space_yaml(tmp_path, family))).training_config() == config
    else:
        config = config_from_dict({"name": "tiny", "space": space, **TINY})
    concept = "place" if family == "relation" else "count"
    summary = train_model(config, tmp_path / "model").summary
    assert f"test_acc_{concept}" in summary["selected"]
    exported = export_model(tmp_path / "model", tmp_path / "export", control=False)
    ds = load_dataset(exported.dataset)
    assert ds.preset.family == family and ds.space.concepts[-1] == concept
    assert any(words in str(c) for c in ds.captions)
    if family == "relation":
        assert is_relation(ds.space, ds.scenes.scenes).all()
    weights, _, _ = load_probes(exported.probes)
    assert weights[concept].shape[0] == ds.space.sizes[-1]


def test_a_token_level_model_trains_on_text_rel(tmp_path: Path) -> None:
    config = config_from_dict({"name": "tiny", "space": "text-rel", **TINY})
    assert config.preset().family == "relation"
    summary = train_model(config, tmp_path / "model").summary
    assert 0.0 <= summary["selected"]["test_acc_place"] <= 1.0


# -- image-text: hard negatives, the swap test, the vocabulary ------------------------------------------------
@pytest.fixture(scope="module", params=list(FAMILY_PRESETS))
def family(request: pytest.FixtureRequest) -> tuple[str, SceneSet]:
    return request.param, tiny_preset(**FAMILY_PRESETS[request.param]).build_scenes()


def test_hard_negatives_include_the_family_swap(family) -> None:
    name, scenes = family
    rows = hard_negative_rows(scenes, NOUN, np.arange(len(scenes)))
    assert set(rows) == {"attribute", "noun", name}
    has = np.flatnonzero(rows[name] >= 0)
    swapped, valid = SWAPS[name](scenes.subset(has))
    assert valid.all() and np.array_equal(scenes.scenes[rows[name][has]], swapped.scenes)
    cases = swap_cases(scenes, NOUN)  # the same negatives the swap test scores
    assert np.array_equal(rows[name][cases.scene], cases.negative[name])
    for asked, wanted in (("none", ()), ("attribute", ("attribute", name)), ("both", ("attribute", "noun", name))):
        assert wanted_negatives(load_config("clip-tiny", hard_negatives=asked), scenes) == wanted
    cfg = load_config("clip-tiny", hard_negatives="attribute", batches="natural", batch_size=16)
    split = clip_split(cfg, scenes)
    batches = ClipBatches(cfg, scenes, NOUN, split)
    assert set(batches.available) == {"attribute", name} and batches.available[name] > 0
    table = torch.from_numpy(hard_negative_rows(scenes, NOUN, split.train)[name])
    rows_, hard = batches.draw(0)
    family_negatives = table[rows_][table[rows_] >= 0]
    assert torch.isin(family_negatives[~torch.isin(family_negatives, rows_)], hard).all()


def identity_and_role(scenes: SceneSet) -> tuple[np.ndarray, np.ndarray]:
    """One-hot objects (the place or count part of them) and one-hot places or counts, per slot ``[N, 2, .]``."""
    values, sizes = scenes.scenes, scenes.space.sizes
    identity = values[..., 0] * sizes[1] + values[..., 1]
    return np.eye(sizes[0] * sizes[1])[identity], np.eye(sizes[-1])[values[..., -1]]


#: Per planted code, the family swap's accuracy on either part (a bag of objects and places ties every swap).
KNOWN = {"bound": 1.0, "bag": 0.5}


@pytest.mark.parametrize("code", list(KNOWN))
def test_the_family_swap_is_read_on_both_parts(family, code: str) -> None:
    name, scenes = family
    identity, role = identity_and_role(scenes)
    if code == "bound":  # a one-hot per (object, place or count): the role bound to its object
        x = np.einsum("nsi,nsj->nij", identity, role).reshape(len(scenes), -1)
    else:
        x = np.concatenate([identity.sum(1), role.sum(1)], axis=1)
    split = clip_split(load_config("clip-tiny"), scenes)
    metrics = clip_metrics(x, x.copy(), scenes, split, swap_cases(scenes, NOUN))
    floors = part_floors(scenes, split)
    other = "count" if name == "relation" else "relation"
    for part in ("train", "heldout"):
        value, cases = metrics[f"{part}_swap_{name}"]
        assert cases > 0 and value == KNOWN[code], part
        assert floors[part][f"swap_{name}"] == {"chance": 0.5, "bag": 0.5}
        assert f"{part}_swap_{other}" not in metrics and f"swap_{other}" not in floors[part]


def test_the_text_tower_reads_the_family_words(family) -> None:
    name, scenes = family
    text = list(captions(scenes, tiny_preset(**FAMILY_PRESETS[name]).template))
    words = Words.of(text)
    expected = {"to", "the", "left", "of"} if name == "relation" else {"one", "two", "squares", "circles"}
    assert expected <= set(words.words)
    tokens = words.tokens(text)
    assert [" ".join(words.words[t] for t in row if t) for row in tokens.tolist()] == text


# -- image-text: a tiny model on a rendered family dataset -----------------------------------------------------
@pytest.mark.parametrize("name", list(FAMILY_PRESETS))
def test_an_image_text_model_trains_on_a_family_dataset(name: str, tmp_path: Path) -> None:
    dataset = build_tiny(tmp_path / "data", **FAMILY_PRESETS[name])
    config = tiny_clip(dataset, hard_negatives="both", batches="natural", steps=10, eval_every=10)
    summary = train_model(config, tmp_path / "model").summary
    assert summary["hard_negatives_available"][name] > 0
    for part in ("train", "heldout"):
        assert 0.0 <= summary["selected"][f"{part}_swap_{name}"] <= 1.0
        assert summary["floors"][f"{part}_swap_{name}"] == {"bag": 0.5, "chance": 0.5}
