"""The text-side swap test of a relation or count space (bindscope.estimators.paraphrase): known answers on
planted embeddings, role-bound against a bag, and its bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.estimators.paraphrase import paraphrase_cases, paraphrase_wins
from bindscope.space.concepts import PAD, SceneSet
from bindscope.space.families import COUNT, PLACE

SPACES = {
    "relation": {
        "name": "rel",
        "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "sphere", "cone"]},
        "objects_per_scene": 2,
        "relations": ["left of", "right of", "above", "below"],
    },
    "count": {
        "name": "cnt",
        "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "sphere"]},
        "objects_per_scene": 2,
        "counts": [1, 2, 3],
    },
}


def planted(scenes: SceneSet, bound: bool, seed: int = 0, dim: int = 64) -> np.ndarray:
    """Role-bound: a random vector per object (its place or count included), summed over the scene. Bag: a
    vector per object without its place or count, plus a vector per place or count value present."""
    space = scenes.space
    rng = np.random.default_rng(seed)
    family = space.concept_index(PLACE if PLACE in space.concepts else COUNT)
    if bound:
        table = rng.normal(size=(space.num_objects, dim))
        ids = scenes.object_ids()
        return np.where((ids != PAD)[..., None], table[ids], 0).sum(axis=1)
    plain = scenes.scenes.copy()
    plain[..., family] = np.where(plain[..., family] == PAD, PAD, 0)
    table = rng.normal(size=(space.num_objects, dim))
    ids = space.object_ids(plain)
    values = rng.normal(size=(space.sizes[family], dim))
    counts = scenes.value_counts()[family] > 0
    return np.where((ids != PAD)[..., None], table[ids], 0).sum(axis=1) + counts @ values


@pytest.mark.parametrize("family", ["relation", "count"])
def test_role_bound_embeddings_pass_and_a_bag_ties(family: str) -> None:
    scenes = preset_from_dict(SPACES[family]).build_scenes()
    scene, paraphrase, swap = paraphrase_cases(scenes)
    assert len(scene) > 50 and (paraphrase != scene).all() and (swap != scene).all()
    for seed in range(3):
        assert paraphrase_wins(planted(scenes, True, seed), scenes).mean() == 1.0
        assert (paraphrase_wins(planted(scenes, False, seed), scenes) == 0.5).all()  # ties: chance, the bag's 0.5


def test_the_paraphrase_test_needs_a_family_space_and_a_row_per_scene() -> None:
    scenes = get_preset("clevr").build_scenes()
    with pytest.raises(BindscopeError, match="needs a relation or count space"):
        paraphrase_cases(scenes)
    rel = preset_from_dict(SPACES["relation"]).build_scenes()
    with pytest.raises(BindscopeError, match=r"got 3 embeddings for 324 scenes; give one row per scene"):
        paraphrase_wins(np.zeros((3, 4)), rel)
