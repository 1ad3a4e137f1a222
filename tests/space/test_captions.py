"""Captions, mention order and swap negatives (docs/method/01-concepts.md caption template,
docs/method/07-crossmodal.md negatives)."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.space.captions import (
    CaptionTemplate,
    attribute_swap,
    captions,
    default_template,
    object_phrases,
    object_swap,
    reverse_order,
    swap_concept,
)
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# clevr value indices: color blue=0 ... gray=3 ... red=6; shape cube=0 cylinder=1 sphere=2
BLUE, GRAY, RED = 0, 3, 6
CUBE, CYLINDER, SPHERE = 0, 1, 2
NO = [PAD, PAD]


@functools.cache
def preset_scenes(name: str) -> SceneSet:
    return get_preset(name).build_scenes()


def clevr(rows) -> SceneSet:
    return SceneSet(get_preset("clevr").space, np.asarray(rows))


def clevr_caption(rows, **kw) -> list[str]:
    return captions(clevr(rows), get_preset("clevr").template, **kw).tolist()


# -- strategies ---------------------------------------------------------------------------------

LITERALS = ["a ", "the ", " ", "-", ", ", ": "]
JOINERS = [" and ", " with ", "; ", " + "]


@st.composite
def captioned_scenes(draw):
    """A random space, a template naming every concept once (in any order), words, and scenes."""
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    concepts = tuple(f"c{i}" for i in range(len(sizes)))
    values = tuple(tuple(f"c{i}v{j}" for j in range(n)) for i, n in enumerate(sizes))
    space = ConceptSpace(concepts, values)
    order = draw(st.permutations(concepts))
    parts = []
    for c in order:
        parts.append(draw(st.sampled_from(LITERALS)))
        parts.append("{" + c + "}")
    parts.append(draw(st.sampled_from(["", "!", " here"])))
    words = {}
    for i, c in enumerate(concepts):
        chosen = draw(st.sets(st.integers(0, sizes[i] - 1)))
        if chosen:
            words[c] = {values[i][j]: f"W{i}x{j}" for j in chosen}
    template = CaptionTemplate("".join(parts), draw(st.sampled_from(JOINERS)), words)
    k = draw(st.integers(1, 3))
    n = draw(st.integers(1, 6))
    arr = np.full((n, k, len(sizes)), PAD)
    for i in range(n):
        for s in range(draw(st.integers(1, k))):
            arr[i, s] = [draw(st.integers(0, v - 1)) for v in sizes]
    return SceneSet(space, arr), template


def oracle_phrase(space: ConceptSpace, template: CaptionTemplate, obj) -> str:
    """The phrase of one object via str.format (independent of object_phrases)."""
    fields = {}
    for c, concept in enumerate(space.concepts):
        name = space.values[c][obj[c]]
        fields[concept] = template.words.get(concept, {}).get(name, name)
    return template.object.format(**fields)


def oracle_phrases(scenes: SceneSet, template: CaptionTemplate) -> list[list[str]]:
    return [
        [oracle_phrase(scenes.space, template, obj) for obj in scene if obj[0] != PAD]
        for scene in scenes.scenes.tolist()
    ]


# -- the method's template ----------------------------------------------------------------------------


def test_clevr_two_objects():
    assert clevr_caption([[[RED, CUBE], [BLUE, SPHERE]]]) == ["a red cube and a blue sphere"]
    assert clevr_caption([[[BLUE, SPHERE], [RED, CUBE]]]) == ["a blue sphere and a red cube"]
    assert clevr_caption([[[RED, SPHERE], [RED, SPHERE]]]) == ["a red sphere and a red sphere"]


def test_clevr_single_object():
    assert clevr_caption([[[RED, CUBE], NO]]) == ["a red cube"]
    assert clevr_caption([[[GRAY, CYLINDER]]]) == ["a gray cylinder"]


def test_clevr2d_template():
    p = get_preset("clevr2d")
    s = SceneSet(p.space, [[[RED, 0], [BLUE, 2]]])
    assert captions(s, p.template).tolist() == ["a red square and a blue circle"]


def test_clevr_object_phrases_in_id_order():
    p = get_preset("clevr")
    phrases = object_phrases(p.space, p.template)
    assert phrases.shape == (24,)
    assert phrases[0] == "a blue cube"
    assert phrases[22] == "a red sphere"  # id 6 + 8 * 2
    assert phrases[8 + 7] == "a yellow cylinder"
    assert len(set(phrases.tolist())) == 24


def test_full_clevr_captions():
    p = get_preset("clevr")
    caps = captions(preset_scenes("clevr"), p.template)
    assert caps.shape == (576,)
    assert caps[0] == "a blue cube and a blue cube"
    assert caps[1] == "a blue cube and a brown cube"
    assert caps[-1] == "a yellow sphere and a yellow sphere"
    assert len(set(caps.tolist())) == 576
    pattern = re.compile(r"^a [a-z]+ (cube|cylinder|sphere) and a [a-z]+ (cube|cylinder|sphere)$")
    assert all(pattern.match(c) for c in caps)


def test_text_preset_captions():
    p = get_preset("text")
    scenes = preset_scenes("text")
    caps = captions(scenes, p.template)
    assert caps.shape == (160_400,)
    assert caps[0] == "a red circle and a red circle"
    assert caps[1] == "a red circle and a blue circle"
    singles = caps[160_000:]
    assert singles[0] == "a red circle"
    assert singles[1] == "a blue circle"
    assert singles[20] == "a red square"
    assert singles[399] == "a glossy fish"
    attrs, nouns = p.space.values
    assert singles.tolist() == [f"a {attrs[i % 20]} {nouns[i // 20]}" for i in range(400)]
    assert not any(" and " in c for c in singles)
    assert all(c.count(" and a ") == 1 for c in caps[:160_000])


def test_pug_spare_word_overrides():
    p = get_preset("pug_spare")
    space = p.space
    stag, fox = space.value_index("animal", "DeerStag"), space.value_index("animal", "Fox")
    red, blue = space.value_index("texture", "Red"), space.value_index("texture", "Blue")
    doe, hippo = space.value_index("animal", "DeerDoe"), space.value_index("animal", "Hippopotamus")
    gray = space.value_index("texture", "Gray")
    s = SceneSet(space, [[[stag, red], [fox, blue]], [[doe, gray], [hippo, red]]])
    assert captions(s, p.template).tolist() == [
        "a red deer stag and a blue fox",
        "a gray deer doe and a red hippopotamus",
    ]
    caps = captions(preset_scenes("pug_spare"), p.template)
    assert len(caps) == 7_392
    assert all(c == c.lower() for c in caps)
    assert not any(re.search(r"[a-z][A-Z]", c) for c in caps)
    assert all(re.fullmatch(r"a [a-z]+ [a-z ]+ and a [a-z]+ [a-z ]+", c) for c in caps)


def test_custom_words_and_joiner():
    space = get_preset("clevr").space
    t = CaptionTemplate("the {shape} colored {color}", joiner="; ", words={"shape": {"cube": "block"}})
    s = SceneSet(space, [[[RED, CUBE], [BLUE, SPHERE]], [[GRAY, CUBE], NO]])
    assert captions(s, t).tolist() == [
        "the block colored red; the sphere colored blue",
        "the block colored gray",
    ]


def test_default_template():
    assert default_template(get_preset("clevr").space).object == "a {color} {shape}"
    space = ConceptSpace(("size", "color", "shape"), (("big",), ("red",), ("cube",)))
    t = default_template(space)
    assert t.object == "a {size} {color} {shape}" and t.joiner == " and "
    assert captions(SceneSet(space, [[[0, 0, 0], [0, 0, 0]]]), t).tolist() == ["a big red cube and a big red cube"]


def test_empty_scene_set_has_no_captions():
    space = get_preset("clevr").space
    out = captions(SceneSet(space, np.zeros((0, 2, 2), int)), get_preset("clevr").template)
    assert out.shape == (0,)


# -- mention order -------------------------------------------------------------------------------------


def test_reverse_known_answers():
    rows = [
        [[RED, CUBE], [BLUE, SPHERE], NO],
        [[RED, CUBE], NO, NO],
        [[RED, CUBE], [BLUE, SPHERE], [GRAY, CYLINDER]],
    ]
    assert clevr_caption(rows) == [
        "a red cube and a blue sphere",
        "a red cube",
        "a red cube and a blue sphere and a gray cylinder",
    ]
    assert clevr_caption(rows, reverse=True) == [
        "a blue sphere and a red cube",
        "a red cube",
        "a gray cylinder and a blue sphere and a red cube",
    ]
    rev = reverse_order(clevr(rows))
    assert rev.scenes.tolist() == [
        [[BLUE, SPHERE], [RED, CUBE], NO],
        [[RED, CUBE], NO, NO],
        [[GRAY, CYLINDER], [BLUE, SPHERE], [RED, CUBE]],
    ]


def test_reverse_of_the_full_clevr_set_is_the_transposed_pair():
    p = get_preset("clevr")
    scenes = preset_scenes("clevr")
    rev = captions(scenes, p.template, reverse=True)
    fwd = captions(scenes, p.template)
    # scene (i, j) sits at row 24*i + j, its reverse (j, i) at row 24*j + i
    i, j = np.divmod(np.arange(576), 24)
    assert np.array_equal(rev, fwd[24 * j + i])


@PROPERTY
@given(case=captioned_scenes())
def test_captions_name_every_object_in_slot_order(case):
    scenes, template = case
    expected = oracle_phrases(scenes, template)
    caps = captions(scenes, template).tolist()
    rev = captions(scenes, template, reverse=True).tolist()
    for cap, back, phrases in zip(caps, rev, expected):
        assert cap == template.joiner.join(phrases)
        assert back == template.joiner.join(phrases[::-1])
        assert cap.count(template.joiner) == len(phrases) - 1
        if len(phrases) == 1:
            assert back == cap
    # reversing twice restores the scenes
    assert np.array_equal(reverse_order(reverse_order(scenes)).scenes, scenes.scenes)


# -- swap negatives ----------------------------------------------------------------------------------


def test_attribute_and_object_swap_known_answers():
    s = clevr([[[RED, CUBE], [BLUE, SPHERE]]])
    t = get_preset("clevr").template
    a, va = attribute_swap(s, "shape")
    assert a.scenes.tolist() == [[[BLUE, CUBE], [RED, SPHERE]]]
    assert captions(a, t).tolist() == ["a blue cube and a red sphere"]
    assert va.tolist() == [True]
    o, vo = object_swap(s, "shape")
    assert o.scenes.tolist() == [[[RED, SPHERE], [BLUE, CUBE]]]
    assert captions(o, t).tolist() == ["a red sphere and a blue cube"]
    assert vo.tolist() == [True]
    assert s.scenes.tolist() == [[[RED, CUBE], [BLUE, SPHERE]]]  # input untouched


def test_swap_valid_mask():
    rows = [
        [[RED, CUBE], [BLUE, SPHERE]],  # both swaps change the scene
        [[RED, CUBE], [RED, SPHERE]],  # same color: attribute swap changes nothing
        [[RED, CUBE], [BLUE, CUBE]],  # same shape: object swap changes nothing
        [[RED, CUBE], [RED, CUBE]],  # identical objects
        [[RED, CUBE], NO],  # one object
    ]
    s = clevr(rows)
    a, va = attribute_swap(s, "shape")
    o, vo = object_swap(s, "shape")
    assert va.tolist() == [True, False, True, False, False]
    assert vo.tolist() == [True, True, False, False, False]
    assert va.dtype == bool and vo.dtype == bool
    # where invalid, the scene is unchanged
    for swapped, valid in [(a, va), (o, vo)]:
        same = (swapped.scenes == s.scenes).all(axis=(1, 2))
        assert np.array_equal(same, ~valid)
    assert a.scenes[4].tolist() == [[RED, CUBE], NO]


def test_swap_counts_on_full_clevr():
    scenes = preset_scenes("clevr")
    _, va = attribute_swap(scenes, "shape")
    _, vo = object_swap(scenes, "shape")
    assert va.sum() == 576 - 8 * 9  # every pair whose two colors differ
    assert vo.sum() == 576 - 3 * 64  # every pair whose two shapes differ


def test_swap_touches_only_slots_one_and_two():
    s = clevr([[[RED, CUBE], [BLUE, SPHERE], [GRAY, CYLINDER]]])
    a, valid = attribute_swap(s, "shape")
    assert a.scenes.tolist() == [[[BLUE, CUBE], [RED, SPHERE], [GRAY, CYLINDER]]]
    assert valid.tolist() == [True]


def test_attribute_swap_swaps_every_non_noun_concept():
    space = ConceptSpace(("size", "color", "shape"), (("small", "big"), ("red", "blue"), ("cube", "ball")))
    s = SceneSet(space, [[[0, 0, 0], [1, 1, 1]], [[0, 0, 0], [0, 1, 1]]])
    a, va = attribute_swap(s, "shape")
    assert a.scenes.tolist() == [[[1, 1, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 1]]]
    assert va.tolist() == [True, True]
    t = default_template(space)
    assert captions(a, t).tolist() == [
        "a big blue cube and a small red ball",
        "a small blue cube and a small red ball",
    ]
    both, vb = swap_concept(s, ["size", "color", "shape"])
    assert both.scenes.tolist() == [[[1, 1, 1], [0, 0, 0]], [[0, 1, 1], [0, 0, 0]]]
    assert vb.tolist() == [True, True]


@PROPERTY
@given(case=captioned_scenes(), data=st.data())
def test_swap_properties(case, data):
    scenes, template = case
    if scenes.max_objects < 2:
        with pytest.raises(BindscopeError, match=r"at least two objects"):
            swap_concept(scenes, scenes.space.concepts[0])
        return
    concept = data.draw(st.sampled_from(scenes.space.concepts))
    c = scenes.space.concept_index(concept)
    swapped, valid = swap_concept(scenes, concept)
    two = scenes.num_objects() >= 2
    changed = (swapped.scenes != scenes.scenes).any(axis=(1, 2))
    assert np.array_equal(valid, changed)
    assert not valid[~two].any()
    before, after = scenes.scenes, swapped.scenes
    # only concept c of slots 1 and 2 of multi-object scenes moves
    assert np.array_equal(after[two, 0, c], before[two, 1, c])
    assert np.array_equal(after[two, 1, c], before[two, 0, c])
    others = [i for i in range(scenes.space.num_concepts) if i != c]
    assert np.array_equal(after[:, :, others], before[:, :, others])
    assert np.array_equal(after[:, 2:], before[:, 2:])
    assert np.array_equal(after[~two], before[~two])
    assert np.array_equal(valid, two & (before[:, 0, c] != before[:, 1, c]))
    # a swap is an involution, and keeps the bag of words of the caption
    again, _ = swap_concept(swapped, concept)
    assert np.array_equal(again.scenes, scenes.scenes)
    plain = default_template(scenes.space)  # words separated by spaces
    for x, y, v in zip(captions(scenes, plain), captions(swapped, plain), valid):
        assert sorted(x.split()) == sorted(y.split())
        assert (x != y) == v


def test_swap_errors():
    space = get_preset("clevr").space
    singles = SceneSet.singles(space)  # K = 1
    with pytest.raises(BindscopeError, match=r"at least two objects"):
        attribute_swap(singles, "shape")
    with pytest.raises(BindscopeError, match=r"at least two objects"):
        object_swap(singles, "shape")
    pairs = preset_scenes("clevr")
    with pytest.raises(BindscopeError, match=r"unknown concept 'size'"):
        object_swap(pairs, "size")
    with pytest.raises(BindscopeError, match=r"unknown concept 'size'"):
        swap_concept(pairs, ["color", "size"])
    only_noun = ConceptSpace(("shape",), (("cube", "ball"),))
    with pytest.raises(BindscopeError, match=r"at least one concept besides the noun"):
        attribute_swap(SceneSet.enumerate(only_noun, 2), "shape")


def test_attribute_swap_rejects_unknown_noun():
    pairs = clevr([[[RED, CUBE], [BLUE, SPHERE]]])
    with pytest.raises(BindscopeError, match=r"unknown concept 'shap'"):
        attribute_swap(pairs, "shap")


# -- template validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "match"),
    [
        (CaptionTemplate("a {colour} {shape}"), r"names unknown concept\(s\) colour; the concepts are color, shape"),
        (CaptionTemplate("a {color}"), r"leaves out concept\(s\) shape"),
        (CaptionTemplate("a {shape}"), r"leaves out concept\(s\) color"),
        (CaptionTemplate("a {color} {color} {shape}"), r"names color more than once"),
        (CaptionTemplate("a {} {shape}"), r"has an empty \{\} field"),
        (CaptionTemplate("a {color {shape}"), r"is malformed"),
        (CaptionTemplate("a {color} {shape}", words={"color": {"magenta": "m"}}), r"unknown value\(s\) magenta"),
        (CaptionTemplate("a {color} {shape}", words={"colour": {"red": "r"}}), r"unknown concept 'colour'"),
    ],
)
def test_template_validation_errors(template, match):
    space = get_preset("clevr").space
    with pytest.raises(BindscopeError, match=match):
        template.validate(space)
    # captions validate too, before producing anything
    with pytest.raises(BindscopeError, match=match):
        captions(SceneSet.singles(space), template)


def test_valid_templates_pass_and_round_trip():
    space = get_preset("clevr").space
    t = CaptionTemplate("{shape} in {color}", " plus ", {"color": {"red": "crimson"}})
    t.validate(space)  # no error
    assert t.fields() == ["shape", "color"]
    assert t.to_dict() == {"object": "{shape} in {color}", "joiner": " plus ", "words": {"color": {"red": "crimson"}}}
    assert CaptionTemplate(**t.to_dict()).to_dict() == t.to_dict()
    for name in ["clevr", "clevr2d", "text", "pug_spare"]:
        p = get_preset(name)
        p.template.validate(p.space)
