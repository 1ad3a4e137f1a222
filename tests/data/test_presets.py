"""Built-in presets match docs/method/01-concepts.md; custom YAML spaces validate with clear messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset, list_presets, load_preset


def test_registry_lists_the_papers_datasets() -> None:
    assert list_presets() == [
        "clevr",
        "clevr-rel",
        "clevr2d",
        "clevr2d-count",
        "clevr2d-rel",
        "pug_spare",
        "text",
        "text-rel",
    ]


@pytest.mark.parametrize(
    ("name", "sizes", "count", "noun"),
    [
        ("clevr", (8, 3), 576, "shape"),
        ("clevr2d", (8, 3), 576, "shape"),
        ("text", (20, 20), 160_400, "noun"),
        ("pug_spare", (12, 8), 7_392, "animal"),
    ],
)
def test_preset_shapes(name: str, sizes: tuple[int, int], count: int, noun: str) -> None:
    p = get_preset(name)
    assert p.space.sizes == sizes
    assert p.objects_per_scene == 2
    assert len(p.build_scenes()) == count
    assert p.noun == noun


def test_preset_value_orders_follow_method() -> None:
    assert get_preset("clevr").space.values == (
        ("blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow"),
        ("cube", "cylinder", "sphere"),
    )
    assert get_preset("clevr2d").space.values[1] == ("square", "triangle", "circle")
    text = get_preset("text").space
    assert text.values[0][:3] == ("red", "blue", "green") and text.values[0][-1] == "glossy"
    assert text.values[1][:3] == ("circle", "square", "triangle") and text.values[1][-1] == "fish"
    pug = get_preset("pug_spare")
    assert pug.space.values[0][2:4] == ("DeerStag", "DeerDoe")
    assert pug.config.source["world"] == "Desert"


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


MINIMAL = "name: tiny\nconcepts:\n  color: [red, blue]\n  shape: [cube, ball]\nobjects_per_scene: 2\n"


def test_minimal_yaml_gets_defaults(tmp_path: Path) -> None:
    p = load_preset(_yaml(tmp_path, MINIMAL))
    assert p.template.object == "a {color} {shape}"
    assert p.noun == "shape"
    assert len(p.build_scenes()) == 16


def test_a_covering_subsample_of_enumerated_scenes(tmp_path: Path) -> None:
    text = MINIMAL.replace("[red, blue]", "[red, blue, green, cyan]") + "scenes: {max_scenes: 10, subsample_seed: 1}\n"
    scenes = load_preset(_yaml(tmp_path, text)).build_scenes()
    ids = scenes.object_ids()
    assert len(scenes) == 10 and set(ids[:, 0]) == set(ids[:, 1]) == set(range(8))
    bad = MINIMAL + "scenes: {mode: sample, num_scenes: 5, max_scenes: 4}\n"
    with pytest.raises(BindscopeError, match="max_scenes subsamples enumerated scenes"):
        load_preset(_yaml(tmp_path, bad))


def test_sampled_yaml_is_seeded(tmp_path: Path) -> None:
    text = (
        MINIMAL.replace("objects_per_scene: 2", "objects_per_scene: 3")
        + "scenes: {mode: sample, num_scenes: 10, seed: 3}\n"
    )
    a = load_preset(_yaml(tmp_path, text)).build_scenes()
    b = load_preset(_yaml(tmp_path, text)).build_scenes()
    np.testing.assert_array_equal(a.scenes, b.scenes)
    assert len(a) == 10


def test_ordinal_concepts_two_spellings(tmp_path: Path) -> None:
    inline = load_preset(_yaml(tmp_path, MINIMAL.replace("[red, blue]", "{values: [red, blue], ordinal: true}")))
    listed = load_preset(_yaml(tmp_path, MINIMAL + "ordinal: [color]\n"))
    plain = load_preset(_yaml(tmp_path, MINIMAL))
    assert inline.space.ordinal == listed.space.ordinal == ("color",)
    assert inline.to_dict()["concepts"] == plain.to_dict()["concepts"] and inline.to_dict()["ordinal"] == ["color"]
    assert inline.space == plain.space
    assert inline.build_scenes().content_hash() == plain.build_scenes().content_hash()
    assert plain.space.ordinal == () and plain.space.with_ordinal(["shape"]).ordinal == ("shape",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed\n", r"malformed YAML in .*space.yaml at line \d+"),
        ("concepts: {a: [x]\n  b: [y]}", "malformed YAML"),
        ("", "is empty"),
        ("- just\n- a list\n", "must be a mapping"),
        (MINIMAL + "colour: red\n", "colour: unknown setting; check its spelling"),
        (
            MINIMAL.replace("objects_per_scene: 2", "objects_per_scene: 0"),
            "objects_per_scene: must be at least 1, got 0",
        ),
        (MINIMAL.replace("[red, blue]", "[]"), "concept 'color' has no values"),
        (MINIMAL.replace("[red, blue]", "[red, red]"), "concept 'color' lists value.*'red' more than once"),
        (MINIMAL.replace("[red, blue]", "red"), "concepts.color: Input should be a valid list"),
        ("name: t\nconcepts: {}\nobjects_per_scene: 1\n", "concepts: give at least one concept"),
        (MINIMAL + "caption: {object: 'a {colour} {shape}'}\n", "names unknown concept.*colour"),
        (MINIMAL + "caption: {object: 'a {shape}'}\n", "leaves out concept.*color"),
        (MINIMAL + "noun: size\n", "unknown concept 'size'"),
        (MINIMAL + "scenes: {mode: sample}\n", "mode 'sample' needs num_scenes"),
        (MINIMAL + "scenes: {mode: sample, num_scenes: 100}\n", None),  # raised at build time
        (MINIMAL + "slot_layout: [left]\n", "slot_layout names 1 slots but objects_per_scene is 2"),
        (MINIMAL.replace("name: tiny", "name: 'a b/c'"), "name: .*letters, digits"),
        (MINIMAL + "ordinal: [size]\n", "ordinal concept 'size' is not a concept; this space has color, shape"),
        (MINIMAL + "ordinal: [color, color]\n", "ordinal concepts repeat"),
        (MINIMAL.replace("[red, blue]", "{values: [red], ordinal: true}"), "ordinal concept 'color' has one value"),
        (MINIMAL.replace("[red, blue]", "{vals: [red, blue]}"), "concept 'color': write a list of values, or"),
        (MINIMAL.replace("[red, blue]", "{values: [red, blue], ordinal: yes please}"), "ordinal must be true or false"),
    ],
)
def test_bad_yaml_messages(tmp_path: Path, text: str, message: str | None) -> None:
    path = _yaml(tmp_path, text)
    if message is None:
        with pytest.raises(BindscopeError, match="asked for 100 scenes but only 16 distinct scenes exist"):
            load_preset(path).build_scenes()
        return
    with pytest.raises(BindscopeError, match=message):
        load_preset(path)


def test_unknown_preset_lists_the_choices() -> None:
    choices = (
        r"unknown preset 'clver' \(did you mean clevr\?\); choose one of clevr, clevr-rel, clevr2d, clevr2d-count, "
        r"clevr2d-rel, pug_spare, text, text-rel"
    )
    with pytest.raises(BindscopeError, match=choices):
        load_preset("clver")
    with pytest.raises(BindscopeError, match="preset file .*missing.yaml does not exist"):
        load_preset("missing.yaml")


def test_a_mistyped_preset_gets_the_closest_name() -> None:
    with pytest.raises(BindscopeError, match=r"unknown preset 'clevr_2d' \(did you mean clevr2d\?\); choose one of"):
        get_preset("clevr_2d")
    with pytest.raises(BindscopeError, match=r"unknown preset 'zzz'; choose one of"):  # nothing close: no guess
        get_preset("zzz")
