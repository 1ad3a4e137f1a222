"""Captions and caption negatives (docs/method/01-concepts.md, docs/method/07-crossmodal.md).

A caption names each object with a template such as ``"a {color} {shape}"`` and joins the
objects with ``" and "``: "a red cube and a blue sphere". Negatives are built on scenes (swap a
concept between objects 1 and 2) and then captioned, so they stay consistent with the names.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet


@dataclass(frozen=True)
class CaptionTemplate:
    """How a scene is put into words.

    Parameters
    ----------
    object
        Template of one object, with one ``{concept}`` field per concept, e.g. ``"a {color} {shape}"``.
    joiner
        Text between consecutive objects.
    words
        Optional ``{concept: {value: word}}`` overrides for value names that should read
        differently in a caption (e.g. ``DeerStag`` -> ``deer stag``).
    """

    object: str
    joiner: str = " and "
    words: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def fields(self) -> list[str]:
        """Concept names used by the object template, in order of appearance."""
        try:
            parsed = list(string.Formatter().parse(self.object))
        except ValueError as exc:
            raise BindscopeError(f"caption template {self.object!r} is malformed: {exc}") from None
        names = [f for _, f, spec, conv in parsed if f is not None]
        if any(not n for n in names):
            raise BindscopeError(f"caption template {self.object!r} has an empty {{}} field; name a concept in each")
        return names

    def validate(self, space: ConceptSpace) -> None:
        """Check that the template names every concept of ``space`` once and nothing else."""
        names = self.fields()
        unknown = [n for n in names if n not in space.concepts]
        if unknown:
            raise BindscopeError(
                f"caption template {self.object!r} names unknown concept(s) {', '.join(unknown)}; "
                f"the concepts are {', '.join(space.concepts)}"
            )
        missing = [c for c in space.concepts if c not in names]
        if missing:
            raise BindscopeError(
                f"caption template {self.object!r} leaves out concept(s) {', '.join(missing)}; "
                "a caption must name every concept of an object"
            )
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise BindscopeError(f"caption template {self.object!r} names {', '.join(repeated)} more than once")
        for concept, mapping in self.words.items():
            idx = space.concept_index(concept)
            extra = [v for v in mapping if v not in space.values[idx]]
            if extra:
                raise BindscopeError(
                    f"caption words for concept {concept!r} mention unknown value(s) {', '.join(extra)}"
                )

    def to_dict(self) -> dict:
        return {"object": self.object, "joiner": self.joiner, "words": {k: dict(v) for k, v in self.words.items()}}


def default_template(space: ConceptSpace) -> CaptionTemplate:
    """``"a {c_0} {c_1} ... {c_last}"``: attributes in concept order, the last one as the noun."""
    return CaptionTemplate("a " + " ".join("{" + c + "}" for c in space.concepts))


def object_phrases(space: ConceptSpace, template: CaptionTemplate) -> np.ndarray:
    """The phrase of every object, in id order: an object array of length U."""
    template.validate(space)
    words = []
    for concept, names in zip(space.concepts, space.values):
        override = template.words.get(concept, {})
        words.append(np.array([override.get(v, v) for v in names], dtype=object))
    values = space.all_objects()
    parts = string.Formatter().parse(template.object)
    phrases = np.full(space.num_objects, "", dtype=object)
    for literal, name, _, _ in parts:
        phrases = phrases + literal
        if name is not None:
            phrases = phrases + words[space.concept_index(name)][values[:, space.concept_index(name)]]
    return phrases


#: The English articles :func:`bare_phrase` removes from the start of a phrase.
ARTICLES = ("a", "an", "the")


def bare_phrase(phrase: str) -> str:
    """The phrase without a leading English article: "a red circle" -> "red circle".

    Parameters
    ----------
    phrase : str
        An object phrase, e.g. from :func:`object_phrases`.

    Returns
    -------
    str
        ``phrase`` without its first word when that word is "a", "an" or "the" (any case) followed
        by a space; otherwise ``phrase`` unchanged. Only the very start is looked at.
    """
    first, sep, rest = phrase.partition(" ")
    return rest if sep and first.lower() in ARTICLES else phrase


def captions(scenes: SceneSet, template: CaptionTemplate, *, reverse: bool = False) -> np.ndarray:
    """One caption per scene (object array ``[N]``), objects named in slot order.

    Parameters
    ----------
    scenes
        The scenes to describe.
    template
        Object template and joiner.
    reverse
        Name the objects in the other mention order (last present object first).
    """
    phrases = object_phrases(scenes.space, template)
    ordered = reverse_order(scenes) if reverse else scenes
    ids = ordered.object_ids()
    out = phrases[ids[:, 0]] if len(scenes) else np.empty(0, dtype=object)
    for k in range(1, scenes.max_objects):
        present = ids[:, k] != PAD
        out[present] = out[present] + template.joiner + phrases[ids[present, k]]
    return out


def reverse_order(scenes: SceneSet) -> SceneSet:
    """The same scenes with their present objects in reverse slot order (padding stays last)."""
    n = scenes.num_objects()[:, None]
    slot = np.arange(scenes.max_objects)[None, :]
    source = np.where(slot < n, n - 1 - slot, slot)
    rows = np.arange(len(scenes))[:, None]
    return SceneSet(scenes.space, scenes.scenes[rows, source])


def swap_concept(scenes: SceneSet, concepts: str | list[str]) -> tuple[SceneSet, np.ndarray]:
    """Exchange the values of ``concepts`` between objects 1 and 2 of every scene.

    Returns
    -------
    swapped
        The swapped scenes (unchanged where the swap is not possible).
    valid
        Boolean ``[N]``: the scene has two objects and the swap changed it, so the swapped
        caption is a true negative.
    """
    names = [concepts] if isinstance(concepts, str) else list(concepts)
    idx = [scenes.space.concept_index(c) for c in names]
    if scenes.max_objects < 2:
        raise BindscopeError("concept swaps need scenes with at least two objects")
    arr = scenes.scenes.copy()
    two = scenes.num_objects() >= 2
    first, second = arr[two, 0][:, idx], arr[two, 1][:, idx]
    sub = arr[two]
    sub[:, 0, idx], sub[:, 1, idx] = second, first
    arr[two] = sub
    valid = two & (arr != scenes.scenes).any(axis=(1, 2))
    return SceneSet(scenes.space, arr), valid


def attribute_swap(scenes: SceneSet, noun: str) -> tuple[SceneSet, np.ndarray]:
    """Swap every non-noun concept between objects 1 and 2: (a1 o1, a2 o2) -> (a2 o1, a1 o2)."""
    scenes.space.concept_index(noun)  # a misspelled noun would swap everything: refuse it
    attributes = [c for c in scenes.space.concepts if c != noun]
    if not attributes:
        raise BindscopeError("attribute swaps need at least one concept besides the noun")
    return swap_concept(scenes, attributes)


def object_swap(scenes: SceneSet, noun: str) -> tuple[SceneSet, np.ndarray]:
    """Swap the noun between objects 1 and 2: (a1 o1, a2 o2) -> (a1 o2, a2 o1)."""
    return swap_concept(scenes, noun)
