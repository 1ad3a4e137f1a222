"""The paper's datasets as presets, and custom spaces from YAML (docs/method/01-concepts.md).

A preset is a validated :class:`PresetConfig`: the concept space, objects per scene, how the
scenes are made (all ordered tuples or a seeded sample), the caption template and the noun.
Built-in presets and YAML files go through the same schema, and every dataset folder stores
the config it was built from, so it can be rebuilt and checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from bindscope.core.errors import BindscopeError, did_you_mean
from bindscope.core.io import read_yaml
from bindscope.core.validation import Schema, Seed, check_name, check_printable
from bindscope.space.captions import CaptionTemplate, default_template
from bindscope.space.concepts import MAX_OBJECTS_PER_SCENE, MAX_SCENES, ConceptSpace, SceneSet
from bindscope.space.families import (
    COUNT,
    PLACE,
    family_of,
    relation_scenes,
    with_families,
)
from bindscope.space.swap_pairs import swap_closed_subsample

Modality = Literal["image", "text"]


def _text_only() -> list[Modality]:
    return ["text"]


class SceneConfig(Schema):
    """How scenes are made from the objects of a space."""

    mode: Literal["enumerate", "sample"] = "enumerate"
    allow_identical: bool = True
    distinct_values: bool = False
    num_scenes: int | None = Field(default=None, ge=1, le=MAX_SCENES)
    seed: Seed = 0
    include_single_objects: bool = False
    max_scenes: int | None = Field(default=None, ge=1, le=MAX_SCENES)
    subsample_seed: Seed = 0

    @model_validator(mode="after")
    def _sample_needs_count(self) -> SceneConfig:
        if self.mode == "sample" and self.num_scenes is None:
            raise ValueError("mode 'sample' needs num_scenes")
        if self.mode == "enumerate" and self.num_scenes is not None:
            raise ValueError("num_scenes only applies to mode 'sample'; remove it or sample")
        if self.mode == "sample" and self.max_scenes is not None:
            raise ValueError("max_scenes subsamples enumerated scenes; with mode 'sample' set num_scenes instead")
        return self


def _unset(value: Any) -> bool:
    """A field left out of the stored config where unset, so that configs written before it existed (and their
    dataset hashes) stay the same."""
    return value is None or value == {}


class CaptionConfig(Schema):
    """Object template (one ``{concept}`` field per concept), joiner and word overrides; a relation space's
    relation template and a count space's plurals."""

    object: str
    joiner: str = " and "
    words: dict[str, dict[str, str]] = Field(default_factory=dict)
    relation: str | None = Field(None, exclude_if=_unset)
    plurals: dict[str, str] = Field(default_factory=dict, exclude_if=_unset)

    @field_validator("object", "joiner", "relation")
    @classmethod
    def _printable(cls, v: str | None) -> str | None:
        return None if v is None else check_printable(v, "text")

    @field_validator("words")
    @classmethod
    def _printable_words(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for concept, words in v.items():
            for value, word in words.items():
                check_printable(word, f"word for {concept} value {value!r}")
        return v


class ImageConfig(Schema):
    """How a renderer draws the dataset's images (ignored for presets without a renderer)."""

    width: int = Field(default=224, ge=16, le=4096)
    height: int = Field(default=224, ge=16, le=4096)
    jitter: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: Seed = 0
    single_objects: bool = True


class PresetConfig(Schema):
    """Everything that defines a dataset: the schema of YAML files and of built-in presets."""

    name: str = Field(min_length=1)
    description: str = ""
    concepts: dict[str, list[str]]
    ordinal: list[str] = Field(default_factory=list)
    objects_per_scene: int = Field(ge=1, le=MAX_OBJECTS_PER_SCENE)
    scenes: SceneConfig = Field(default_factory=SceneConfig)
    caption: CaptionConfig | None = None
    noun: str | None = None
    modalities: list[Modality] = Field(default_factory=_text_only, min_length=1)
    renderer: str | None = None
    image: ImageConfig = Field(default_factory=ImageConfig)
    slot_layout: list[str] | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    relations: list[str] | None = Field(None, exclude_if=_unset)
    counts: list[int] | None = Field(None, exclude_if=_unset)

    @field_validator("name")
    @classmethod
    def _name_is_slug(cls, v: str) -> str:
        return check_name(v, "preset name")

    @model_validator(mode="before")
    @classmethod
    def _ordinal_inline(cls, data: Any) -> Any:
        """Accept ``size: {values: [small, large], ordinal: true}`` in ``concepts`` as well as ``ordinal: [size]``."""
        if not isinstance(data, dict) or not isinstance(data.get("concepts"), dict):
            return data
        if not isinstance(data.get("ordinal") or [], list):
            return data  # the field's own validation names the problem
        concepts, ordinal = {}, list(data.get("ordinal") or [])
        for name, entry in data["concepts"].items():
            if isinstance(entry, dict):
                unknown = sorted(map(str, set(entry) - {"values", "ordinal"}))
                if unknown or "values" not in entry:
                    raise ValueError(
                        f"concept {name!r}: write a list of values, or {{values: [...], ordinal: true}} "
                        f"(got keys {sorted(map(str, entry))})"
                    )
                if entry.get("ordinal") is True and name not in ordinal:
                    ordinal.append(name)
                elif entry.get("ordinal") not in (None, True, False):
                    raise ValueError(f"concept {name!r}: ordinal must be true or false, got {entry['ordinal']!r}")
                entry = entry["values"]
            concepts[name] = entry
        return {**data, "concepts": concepts, "ordinal": ordinal}

    @field_validator("concepts")
    @classmethod
    def _concepts_non_empty(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        if not v:
            raise ValueError("give at least one concept")
        return v


@dataclass(frozen=True)
class Preset:
    """A validated dataset definition with its concept space and caption template."""

    config: PresetConfig
    space: ConceptSpace
    template: CaptionTemplate
    source: Path | None = field(default=None, compare=False)  # the YAML file it was read from (None: built-in)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def objects_per_scene(self) -> int:
        return self.config.objects_per_scene

    @property
    def noun(self) -> str:
        return self.config.noun or next(c for c in reversed(self.space.concepts) if c not in (COUNT, PLACE))

    @property
    def family(self) -> str:
        """``attribution``, ``relation`` or ``count`` (:func:`bindscope.space.families.family_of`)."""
        return family_of(self.space)

    def build_scenes(self) -> SceneSet:
        """The scene set this preset defines (K-object scenes, then single objects if asked).

        A ``max_scenes`` subsample larger than the K-object scenes is refused: it would silently
        keep them all.
        """
        sc = self.config.scenes
        scenes = self.k_object_scenes()
        if sc.max_scenes is not None:  # a seeded subsample keeping every object in every slot
            check_max_scenes(sc.max_scenes, len(scenes), self.name)
            if self.family == "attribution":
                scenes = scenes.subset(scenes.covering_subsample(sc.max_scenes, sc.subsample_seed))
            else:  # ... and each scene's relation (count) swap with it
                scenes = scenes.subset(swap_closed_subsample(scenes, sc.max_scenes, sc.subsample_seed))
        if sc.include_single_objects and self.objects_per_scene > 1:
            scenes = scenes.concat(SceneSet.singles(self.space, self.objects_per_scene))
        return scenes

    def k_object_scenes(self) -> SceneSet:
        """The K-object scenes of the preset (enumerated or sampled), before any subsample."""
        sc = self.config.scenes
        k = self.objects_per_scene
        if self.config.relations is not None:
            return relation_scenes(
                self.space,
                self.config.relations,
                allow_identical=sc.allow_identical,
                distinct_values=sc.distinct_values,
            )
        if sc.mode == "enumerate":
            scenes = SceneSet.enumerate(
                self.space, k, allow_identical=sc.allow_identical, distinct_values=sc.distinct_values
            )
        else:
            assert sc.num_scenes is not None, "SceneConfig requires num_scenes in mode 'sample'"
            scenes = SceneSet.sample(
                self.space,
                k,
                sc.num_scenes,
                seed=sc.seed,
                allow_identical=sc.allow_identical,
                distinct_values=sc.distinct_values,
            )
        return scenes

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what YAML files and dataset manifests hold)."""
        return self.config.model_dump(mode="json")


def check_max_scenes(max_scenes: int, available: int, preset: str) -> None:
    """Refuse a subsample of ``max_scenes`` scenes from a preset of only ``available`` K-object scenes."""
    if max_scenes > available:
        raise BindscopeError(
            f"max_scenes {max_scenes} is more than the {available} scenes of preset {preset}; "
            f"give at most {available} or drop max_scenes"
        )


def preset_from_dict(data: Any, origin: str = "preset") -> Preset:
    """Validate a config mapping into a :class:`Preset`; errors are one line naming ``origin``."""
    config = PresetConfig.parse(data, origin)
    try:
        named = ConceptSpace.from_dict(config.concepts, config.ordinal)
        if config.noun is not None:
            named.concept_index(config.noun)
        space = with_families(named, config.relations, config.counts)
        template = caption_template(config, named)
        template.validate(space)
        check_family_scenes(config)
    except BindscopeError as exc:
        raise BindscopeError(f"invalid {origin}: {exc}") from None
    if config.slot_layout is not None and len(config.slot_layout) != config.objects_per_scene:
        raise BindscopeError(
            f"invalid {origin}: slot_layout names {len(config.slot_layout)} slots but "
            f"objects_per_scene is {config.objects_per_scene}"
        )
    return Preset(config, space, template)


def caption_template(config: PresetConfig, named: ConceptSpace) -> CaptionTemplate:
    """The caption template of a config: its own, or ``"a {c_0} ... {c_last}"`` (``"{count} ..."`` where it
    counts); a count space's noun is put in the plural."""
    noun = (config.noun or named.concepts[-1]) if config.counts is not None else None
    if config.caption is None:
        template = default_template(named)
        if config.counts is not None:
            template = replace(template, object="{count} " + template.object.removeprefix("a "))
        return replace(template, noun=noun)
    c = config.caption
    return CaptionTemplate(c.object, c.joiner, c.words, c.relation, c.plurals, noun)


def check_family_scenes(config: PresetConfig) -> None:
    """Refuse what a relation space cannot be: more or fewer than two objects a scene, sampled scenes."""
    if config.relations is None:
        return
    if config.objects_per_scene != 2:
        raise BindscopeError(
            f"a relation relates two objects: objects_per_scene must be 2, got {config.objects_per_scene}"
        )
    if config.scenes.mode != "enumerate":
        raise BindscopeError(
            "relation scenes are enumerated (every pair under every relation); use max_scenes to subsample"
        )


def load_preset_file(path: str | Path) -> Preset:
    """Read a custom space from a YAML file (same schema as :class:`PresetConfig`)."""
    path = Path(path)
    if not path.exists():
        raise BindscopeError(f"preset file {path} does not exist")
    data = read_yaml(path, "preset file")
    if data is None:
        raise BindscopeError(f"preset file {path} is empty; see configs/custom_space.yaml for an example")
    return replace(preset_from_dict(data, origin=f"preset file {path}"), source=path)


# -- built-in presets ---------------------------------------------------------------------------

CLEVR_COLORS = ["blue", "brown", "cyan", "gray", "green", "purple", "red", "yellow"]

TEXT_ATTRIBUTES = [
    "red",
    "blue",
    "green",
    "yellow",
    "purple",
    "orange",
    "pink",
    "brown",
    "gray",
    "black",
    "small",
    "large",
    "tiny",
    "round",
    "sharp",
    "rough",
    "bumpy",
    "smooth",
    "matte",
    "glossy",
]
TEXT_NOUNS = [
    "circle",
    "square",
    "triangle",
    "star",
    "heart",
    "spiral",
    "sphere",
    "cylinder",
    "cone",
    "pyramid",
    "car",
    "cat",
    "dog",
    "man",
    "woman",
    "tree",
    "flower",
    "rock",
    "bird",
    "fish",
]
PUG_ANIMALS = [
    "Crow",
    "Fox",
    "DeerStag",
    "DeerDoe",
    "Wolf",
    "Crocodile",
    "Elephant",
    "Hippopotamus",
    "Lion",
    "Lioness",
    "Rhinoceros",
    "Zebra",
]
PUG_TEXTURES = ["Red", "Blue", "Green", "Yellow", "Brown", "Purple", "Cyan", "Gray"]


def _caption_word(value: str) -> str:
    """``DeerStag`` -> ``deer stag``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", value).lower()


_BUILTIN: dict[str, dict[str, Any]] = {
    "clevr": {
        "name": "clevr",
        "description": "CLEVR-like 3-D scenes: 8 colors x 3 shapes, all 576 ordered pairs",
        "concepts": {"color": CLEVR_COLORS, "shape": ["cube", "cylinder", "sphere"]},
        "objects_per_scene": 2,
        "caption": {"object": "a {color} {shape}"},
        "noun": "shape",
        "modalities": ["image", "text"],
        "renderer": "raycast3d",
        "slot_layout": ["back-left", "front-right"],
    },
    "clevr2d": {
        "name": "clevr2d",
        "description": "flat 2-D scenes on light gray: 8 colors x 3 shapes, all 576 ordered pairs",
        "concepts": {"color": CLEVR_COLORS, "shape": ["square", "triangle", "circle"]},
        "objects_per_scene": 2,
        "caption": {"object": "a {color} {shape}"},
        "noun": "shape",
        "modalities": ["image", "text"],
        "renderer": "flat2d",
        "slot_layout": ["left", "right"],
    },
    "text": {
        "name": "text",
        "description": "captions only: 20 attributes x 20 nouns, 160,000 ordered pairs + 400 single objects",
        "concepts": {"attribute": TEXT_ATTRIBUTES, "noun": TEXT_NOUNS},
        "objects_per_scene": 2,
        "scenes": {"include_single_objects": True},
        "caption": {"object": "a {attribute} {noun}"},
        "noun": "noun",
        "modalities": ["text"],
        "slot_layout": ["first mentioned", "second mentioned"],
    },
    "text-rel": {
        "name": "text-rel",
        "description": "captions only: 8 attributes x 8 nouns, every ordered pair under 4 relations: 16,384 scenes",
        "concepts": {"attribute": TEXT_ATTRIBUTES[:8], "noun": TEXT_NOUNS[:8]},
        "objects_per_scene": 2,
        "relations": ["left of", "right of", "above", "below"],
        "caption": {"object": "a {attribute} {noun}"},
        "noun": "noun",
        "modalities": ["text"],
        "slot_layout": ["subject", "object"],
    },
    "clevr-rel": {
        "name": "clevr-rel",
        "description": "3-D scenes: 8 colors x 3 shapes, pairs of different objects left of, in front of: 1,104",
        "concepts": {"color": CLEVR_COLORS, "shape": ["cube", "cylinder", "sphere"]},
        "objects_per_scene": 2,
        "relations": ["left of", "in front of"],
        "scenes": {"allow_identical": False},
        "caption": {"object": "a {color} {shape}"},
        "noun": "shape",
        "modalities": ["image", "text"],
        "renderer": "raycast3d",
        "slot_layout": ["subject", "object"],
    },
    "clevr2d-rel": {
        "name": "clevr2d-rel",
        "description": "flat 2-D scenes: 8 colors x 3 shapes, every pair of different objects left of and above: 1,104",
        "concepts": {"color": CLEVR_COLORS, "shape": ["square", "triangle", "circle"]},
        "objects_per_scene": 2,
        "relations": ["left of", "above"],
        "scenes": {"allow_identical": False},
        "caption": {"object": "a {color} {shape}"},
        "noun": "shape",
        "modalities": ["image", "text"],
        "renderer": "flat2d",
        "slot_layout": ["subject", "object"],
    },
    "clevr2d-count": {
        "name": "clevr2d-count",
        "description": "flat 2-D scenes: 4 colors x 3 shapes x 1-3 copies, ordered pairs of different objects: 1,260",
        "concepts": {"color": CLEVR_COLORS[:4], "shape": ["square", "triangle", "circle"]},
        "objects_per_scene": 2,
        "counts": [1, 2, 3],
        "scenes": {"allow_identical": False},
        "caption": {"object": "{count} {color} {shape}"},
        "noun": "shape",
        "modalities": ["image", "text"],
        "renderer": "flat2d",
        "slot_layout": ["left", "right"],
    },
    "pug_spare": {
        "name": "pug_spare",
        "description": "PUG:SPARE animals x textures, distinct animals and textures: 7,392 pairs",
        "concepts": {"animal": PUG_ANIMALS, "texture": PUG_TEXTURES},
        "objects_per_scene": 2,
        "scenes": {"distinct_values": True},
        "caption": {
            "object": "a {texture} {animal}",
            "words": {
                "animal": {a: _caption_word(a) for a in PUG_ANIMALS},
                "texture": {t: _caption_word(t) for t in PUG_TEXTURES},
            },
        },
        "noun": "animal",
        "modalities": ["image", "text"],
        "renderer": "import",
        "slot_layout": ["left", "right"],
        "source": {"dataset": "PUG:SPARE", "world": "Desert", "images": "imported from the user's CSV + images"},
    },
}


def with_image_settings(preset: Preset, *, size: str | None = None, jitter: float | None = None) -> Preset:
    """The preset with another image size (``"224"`` or ``"480x320"``) and/or jitter."""
    if size is None and jitter is None:
        return preset
    update: dict[str, Any] = {}
    if size is not None:
        match = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", size)
        if not match:
            raise BindscopeError(f"image size {size!r}: write SIZE or WIDTHxHEIGHT, e.g. 224 or 480x320")
        update["width"] = int(match.group(1))
        update["height"] = int(match.group(2) or match.group(1))
    if jitter is not None:
        update["jitter"] = jitter
    config = preset.config.model_dump()
    config["image"] = {**config["image"], **update}
    return replace(preset_from_dict(config, origin="image settings"), source=preset.source)


def list_presets() -> list[str]:
    """Names of the built-in presets."""
    return sorted(_BUILTIN)


def get_preset(name: str) -> Preset:
    """A built-in preset by name."""
    if name not in _BUILTIN:
        raise BindscopeError(
            f"unknown preset {name!r}{did_you_mean(name, _BUILTIN)}; choose one of {', '.join(list_presets())} or "
            "give a YAML file"
        )
    return preset_from_dict(_BUILTIN[name], origin=f"built-in preset {name}")


def is_preset_file(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` names a custom space's YAML file (not a built-in preset)."""
    text = str(name_or_path)
    return text not in _BUILTIN and (text.endswith((".yaml", ".yml")) or Path(text).is_file())


def preset_file(preset: object) -> list[Path]:
    """The YAML file a preset argument (a name, a path or a :class:`Preset`) was read from, as a list (empty
    for a built-in preset)."""
    if isinstance(preset, Preset):
        return [preset.source] if preset.source is not None else []
    return [Path(preset)] if isinstance(preset, (str, Path)) and is_preset_file(preset) else []


def load_preset(name_or_path: str | Path) -> Preset:
    """A built-in preset by name, or a custom space from a ``.yaml``/``.yml`` file."""
    if is_preset_file(name_or_path):
        return load_preset_file(name_or_path)
    return get_preset(str(name_or_path))
