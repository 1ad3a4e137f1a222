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
from bindscope.space.families import COUNT, COUNT_WORDS, PLACE, RELATION_WORDS, plural

#: How a relation scene reads unless the YAML's ``caption: {relation: ...}`` says otherwise.
DEFAULT_RELATION = "{subject} {relation} {object}"
#: The concepts a relation or count space adds (never the noun).
FAMILY = (COUNT, PLACE)


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
    relation
        How a relation scene reads, with the fields ``{subject}``, ``{relation}`` and ``{object}``
        (a relation space: :data:`~bindscope.space.families.PLACE`); None for every other space.
    plurals
        ``{value: plural}`` of the noun where a count space names more than one copy and the
        English rule (:func:`~bindscope.space.families.plural`) is wrong.
    noun
        The concept put in the plural (a count space); None: the last concept.
    """

    object: str
    joiner: str = " and "
    words: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    relation: str | None = None
    plurals: Mapping[str, str] = field(default_factory=dict)
    noun: str | None = None

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
        """Check that the template names every concept of ``space`` once and nothing else (a relation space's
        place is named by the relation template instead)."""
        names = self.fields()
        named = [c for c in space.concepts if c != PLACE]
        unknown = [n for n in names if n not in named]
        if unknown:
            raise BindscopeError(
                f"caption template {self.object!r} names unknown concept(s) {', '.join(unknown)}; "
                f"the concepts are {', '.join(named)}"
                + (" (a relation's place is named by the relation template)" if PLACE in unknown else "")
            )
        missing = [c for c in named if c not in names]
        if missing:
            raise BindscopeError(
                f"caption template {self.object!r} leaves out concept(s) {', '.join(missing)}; "
                "a caption must name every concept of an object"
            )
        if PLACE in space.concepts:
            self._validate_relation()
        elif self.relation is not None:
            raise BindscopeError("a relation caption template needs a space with relations; add relations: [...]")
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

    def _validate_relation(self) -> None:
        try:
            parsed = [f for _, f, _, _ in string.Formatter().parse(self.relation or DEFAULT_RELATION) if f is not None]
        except ValueError as exc:
            raise BindscopeError(f"relation template {self.relation!r} is malformed: {exc}") from None
        if sorted(parsed) != ["object", "relation", "subject"]:
            raise BindscopeError(
                f"relation template {self.relation!r} must name {{subject}}, {{relation}} and {{object}} once each"
            )

    def to_dict(self) -> dict:
        out = {"object": self.object, "joiner": self.joiner, "words": {k: dict(v) for k, v in self.words.items()}}
        if self.relation is not None:  # only where set: the captions (and hashes) of other spaces are unchanged
            out["relation"] = self.relation
        if self.plurals:
            out["plurals"] = dict(self.plurals)
        if self.noun is not None:
            out["noun"] = self.noun
        return out


def default_template(space: ConceptSpace) -> CaptionTemplate:
    """``"a {c_0} {c_1} ... {c_last}"``: attributes in concept order, the last one as the noun."""
    return CaptionTemplate("a " + " ".join("{" + c + "}" for c in space.concepts))


def object_phrases(space: ConceptSpace, template: CaptionTemplate) -> np.ndarray:
    """The phrase of every object, in id order: an object array of length U."""
    template.validate(space)
    words = []
    for concept, names in zip(space.concepts, space.values):
        override = (
            {**COUNT_WORDS, **template.words.get(concept, {})} if concept == COUNT else template.words.get(concept, {})
        )
        words.append(np.array([override.get(v, v) for v in names], dtype=object))
    values = space.all_objects()
    counted = COUNT in space.concepts
    if counted:  # "two red cubes": the noun in the plural where there is more than one copy
        noun = space.concept_index(template.noun or next(c for c in reversed(space.concepts) if c not in FAMILY))
        many = np.array([v != "1" for v in space.values[space.concept_index(COUNT)]])[
            values[:, space.concept_index(COUNT)]
        ]
        plurals = np.array(
            [template.plurals.get(v, plural(str(w))) for v, w in zip(space.values[noun], words[noun])], dtype=object
        )
    parts = string.Formatter().parse(template.object)
    phrases = np.full(space.num_objects, "", dtype=object)
    for literal, name, _, _ in parts:
        phrases = phrases + literal
        if name is not None:
            c = space.concept_index(name)
            named = words[c][values[:, c]]
            if counted and c == noun:
                named = np.where(many, plurals[values[:, c]].astype(object), named)
            phrases = phrases + named
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
    if PLACE in scenes.space.concepts:
        return _relation_captions(ordered, template, phrases, ids, out)
    for k in range(1, scenes.max_objects):
        present = ids[:, k] != PAD
        out[present] = out[present] + template.joiner + phrases[ids[present, k]]
    return out


def _relation_captions(
    scenes: SceneSet, template: CaptionTemplate, phrases: np.ndarray, ids: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """A relation scene's caption: "{subject} {relation} {object}", the relation the subject's place (slot 1);
    a lone object is its phrase."""
    if scenes.max_objects > 2:
        raise BindscopeError("relation scenes hold two objects; a caption cannot relate more")
    place = scenes.space.concept_index(PLACE)
    names = scenes.space.values[place]
    override = template.words.get(PLACE, {})
    relation_words = np.array([override.get(v, RELATION_WORDS.get(v, v)) for v in names], dtype=object)
    form = template.relation or DEFAULT_RELATION
    if scenes.max_objects < 2:
        return out  # lone objects (single-object images): their phrases
    two = np.flatnonzero(ids[:, -1] != PAD)
    subject, relation, other = phrases[ids[two, 0]], relation_words[scenes.scenes[two, 0, place]], phrases[ids[two, 1]]
    out[two] = [form.format(subject=s, relation=r, object=o) for s, r, o in zip(subject, relation, other)]
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
    """Swap every attribute (every concept but the noun, a place and a count) between objects 1 and 2:
    (a1 o1, a2 o2) -> (a2 o1, a1 o2)."""
    scenes.space.concept_index(noun)  # a misspelled noun would swap everything: refuse it
    attributes = [c for c in scenes.space.concepts if c != noun and c not in FAMILY]
    if not attributes:
        raise BindscopeError("attribute swaps need at least one concept besides the noun")
    return swap_concept(scenes, attributes)


def object_swap(scenes: SceneSet, noun: str) -> tuple[SceneSet, np.ndarray]:
    """Swap the noun between objects 1 and 2: (a1 o1, a2 o2) -> (a1 o2, a2 o1)."""
    return swap_concept(scenes, noun)


def relation_swap(scenes: SceneSet) -> tuple[SceneSet, np.ndarray]:
    """Exchange subject and object, the relation kept: "a red cube to the left of a blue sphere" -> "a blue
    sphere to the left of a red cube" (every concept but the place swapped between objects 1 and 2)."""
    if PLACE not in scenes.space.concepts:
        raise BindscopeError("relation swaps need a relation space (relations: [...])")
    return swap_concept(scenes, [c for c in scenes.space.concepts if c != PLACE])


def count_swap(scenes: SceneSet) -> tuple[SceneSet, np.ndarray]:
    """Exchange the counts of objects 1 and 2: "two red cubes and one blue sphere" -> "one red cube and two blue
    spheres"."""
    if COUNT not in scenes.space.concepts:
        raise BindscopeError("count swaps need a count space (counts: [...])")
    return swap_concept(scenes, COUNT)


def family_swap(scenes: SceneSet) -> tuple[str, tuple[SceneSet, np.ndarray]] | None:
    """A relation space's relation swap or a count space's count swap, by name; None for other spaces."""
    if PLACE in scenes.space.concepts:
        return "relation", relation_swap(scenes)
    if COUNT in scenes.space.concepts:
        return "count", count_swap(scenes)
    return None
