"""Relations and counts as concepts of an object (docs/method/11-relations-counts.md): the spaces, scenes,
captions, swaps and swap-closed splits; and every bad relation or count setting refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset, preset_from_dict
from bindscope.space.captions import attribute_swap, captions, count_swap, family_swap, relation_swap
from bindscope.space.families import CONVERSE, COUNT, PLACE, base_space, family_of, places, plural
from bindscope.space.splits import object_splits, split_from_dict, split_to_dict, swap_units

RELATIONS = {
    "name": "rel",
    "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "sphere"]},
    "objects_per_scene": 2,
    "relations": ["left of", "above"],
    "caption": {"object": "a {color} {shape}"},
    "noun": "shape",
}
COUNTS = {
    "name": "cnt",
    "concepts": {"color": ["red", "blue"], "shape": ["cube", "sphere", "glass"]},
    "objects_per_scene": 2,
    "counts": [1, 2, 3],
    "noun": "shape",
}


def test_a_relation_space_adds_the_place_of_each_object() -> None:
    preset = preset_from_dict(RELATIONS)
    assert preset.space.concepts == ("color", "shape", PLACE) and preset.family == "relation"
    assert preset.space.values[-1] == ("left of", "above", "right of", "below")  # listed, then their converses
    assert preset.noun == "shape" and base_space(preset.space).concepts == ("color", "shape")
    scenes = preset.build_scenes()
    assert len(scenes) == 6 * 6 * 2  # every ordered pair of the 6 objects under each of the 2 relations
    names = preset.space.values[-1]
    subject, other = scenes.scenes[:, 0, -1], scenes.scenes[:, 1, -1]
    assert all(CONVERSE[names[a]] == names[b] for a, b in zip(subject, other))  # the object's place: the converse
    assert set(names[i] for i in subject) == {"left of", "above"}


def test_relation_captions_and_swaps() -> None:
    preset = preset_from_dict(RELATIONS)
    scenes = preset.build_scenes()
    text = captions(scenes, preset.template)
    row = int(np.flatnonzero(text == "a red cube to the left of a blue sphere")[0])
    one = scenes.subset([row])
    assert captions(one, preset.template, reverse=True)[0] == "a blue sphere to the right of a red cube"
    swapped, valid = relation_swap(one)
    assert valid[0] and captions(swapped, preset.template)[0] == "a blue sphere to the left of a red cube"
    colours, _ = attribute_swap(one, "shape")  # an attribute swap leaves the places alone
    assert captions(colours, preset.template)[0] == "a blue cube to the left of a red sphere"
    name, (same, _) = family_swap(one) or ("", (None, None))
    assert name == "relation" and (same.scenes == swapped.scenes).all()
    # the swap is a scene of the dataset, and a bag of concepts cannot tell it: the same values, bound otherwise
    assert text.tolist().count(captions(swapped, preset.template)[0]) == 1
    assert scenes.binding_ambiguous()[row]


def test_a_count_space_names_copies_in_the_plural() -> None:
    preset = preset_from_dict(COUNTS)
    assert preset.space.concepts == ("color", "shape", COUNT) and preset.family == "count"
    assert COUNT in preset.space.ordinal and preset.template.object == "{count} {color} {shape}"
    scenes = preset.build_scenes()
    text = captions(scenes, preset.template).tolist()
    assert "two red cubes and one blue glass" in text and "three blue glasses and one red sphere" in text
    row = text.index("two red cubes and one blue sphere")
    swapped, valid = count_swap(scenes.subset([row]))
    assert valid[0] and captions(swapped, preset.template)[0] == "one red cube and two blue spheres"
    assert family_of(preset.space) == "count" and family_of(get_preset("clevr").space) == "attribution"
    words = {**COUNTS, "caption": {"object": "{count} {color} {shape}", "words": {"count": {"1": "a"}}}}
    words["caption"]["plurals"] = {"glass": "glassware"}
    text = captions(preset_from_dict(words).build_scenes(), preset_from_dict(words).template).tolist()
    assert "a red cube and two blue glassware" in text
    assert [plural(w) for w in ("cube", "box", "berry", "day")] == ["cubes", "boxes", "berries", "days"]


def test_the_presets_of_each_family() -> None:
    sizes = {"text-rel": 16_384, "clevr-rel": 1_104, "clevr2d-rel": 1_104, "clevr2d-count": 1_260}
    for name, size in sizes.items():
        preset = get_preset(name)
        scenes = preset.build_scenes()
        assert len(scenes) == size and preset.family in ("relation", "count"), name
        assert len(set(captions(scenes, preset.template))) == size  # every scene its own caption
    assert places(["left of", "in front of"]) == ("left of", "in front of", "right of", "behind")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"objects_per_scene": 3}, "a relation relates two objects: objects_per_scene must be 2, got 3"),
        ({"relations": ["next to"]}, "unknown relation(s) 'next to'; choose from left of, right of"),
        ({"relations": []}, "relations: give at least one of left of"),
        ({"relations": ["above", "above"]}, "relations repeat: ['above', 'above']"),
        ({"scenes": {"mode": "sample", "num_scenes": 5}}, "relation scenes are enumerated"),
        (
            {"concepts": {"color": ["red"], "shape": ["cube"], "place": ["a"]}},
            "adds the concept 'place' itself; rename your",
        ),
        ({"caption": {"object": "a {color} {shape}", "relation": "{subject} near {object}"}}, "must name {subject}"),
        ({"caption": {"object": "a {color} {shape} {place}"}}, "a relation's place is named by the relation template"),
    ],
)
def test_bad_relation_settings_are_refused(change: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match="^invalid preset: ") as caught:
        preset_from_dict({**RELATIONS, **change})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"counts": [1, 5]}, "counts must be whole numbers from 1 to 4, got 5"),
        ({"counts": [2]}, "counts: give at least two different counts"),
        ({"counts": [0, 1]}, "counts must be whole numbers from 1 to 4, got 0"),
        ({"caption": {"object": "a {color} {shape}"}}, "leaves out concept(s) count"),
        ({"caption": {"object": "{count} {color} {shape}", "relation": "{subject} {relation} {object}"}}, "needs a"),
    ],
)
def test_bad_count_settings_are_refused(change: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match="^invalid preset: ") as caught:
        preset_from_dict({**COUNTS, **change})
    assert message in str(caught.value)


def closed_under(swap, scenes, split) -> bool:  # type: ignore[no-untyped-def]
    swapped, valid = swap(scenes.subset(split.test_only))
    return bool(np.isin(swapped.object_ids()[valid], split.test_objects).all())


@pytest.mark.parametrize(("config", "swap"), [(RELATIONS, relation_swap), (COUNTS, count_swap)])
def test_a_closed_split_holds_out_combinations_closed_under_the_swaps(config: dict, swap) -> None:  # type: ignore[no-untyped-def]
    preset = preset_from_dict(config)
    scenes = preset.build_scenes()
    units = swap_units(preset.space)
    assert len(set(np.bincount(units))) == 1  # units of one size: 2 places of an axis, or every count
    opened = []
    for seed in range(3):
        for fraction in (0.3, 0.5, 0.7):
            (split,) = object_splits(scenes, [fraction], seed, order="closed")
            assert len(split.test_only) and closed_under(swap, scenes, split), (seed, fraction)
            assert set(units[split.test_objects]).isdisjoint(units[split.train_objects])  # cut between units
            (plain,) = object_splits(scenes, [fraction], seed, order="random")
            opened.append(closed_under(swap, scenes, plain))
        assert split_from_dict(split_to_dict(split)).order == "closed"
    assert not all(opened)  # a random order is not closed: the test can fail


def test_a_closed_split_needs_a_family_space() -> None:
    with pytest.raises(BindscopeError, match="the closed object order needs a relation or count space"):
        object_splits(get_preset("clevr").build_scenes(), [0.5], 0, order="closed")


def test_a_subsample_of_a_family_space_keeps_each_scene_with_its_swap() -> None:
    from bindscope.space.swap_pairs import swap_partners

    data = get_preset("text-rel").to_dict()
    data["scenes"] = {**data["scenes"], "max_scenes": 1000}
    preset = preset_from_dict(data)
    scenes = preset.build_scenes()
    assert len(scenes) == 1000
    ids = scenes.object_ids()
    assert all(len(np.unique(ids[:, k])) == preset.space.num_objects for k in range(2))  # every object, every slot
    partner = swap_partners(scenes)
    assert (partner >= 0).mean() > 0.95 and (partner[partner[partner >= 0]] == np.flatnonzero(partner >= 0)).all()
    full = preset_from_dict({**data, "scenes": {}}).build_scenes()
    plain = full.subset(full.covering_subsample(1000, 0))  # the attribution subsample loses most swaps
    assert (swap_partners(plain) >= 0).mean() < 0.2
