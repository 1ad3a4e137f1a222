"""Relations and counts as concepts of an object (docs/method/11-relations-counts.md).

Three families of composition are measured the same way. *Attribution*: which value goes with which object.
*Relations*: which object stands in which relation to which; a 2-object scene "A to the left of B" gives each
object a **place**, its side of the relation (A: ``left of``, B: ``right of``, the converse), so the relation is
a concept bound to an object and "B to the left of A" is the swap of the place between the two objects.
*Counting*: how many copies of an object a scene holds; "two red cubes and one blue sphere" gives each object
a **count**, and "one red cube and two blue spheres" is the swap of the count.

So a relation or count space is a concept space with one more concept (:data:`PLACE` or :data:`COUNT`), and
every analysis reads it as it reads colour or shape: the object probe reads which object is the subject, an
ideal bag of concepts knows the places (or counts) in a scene but not which object holds which, and so scores
chance on a relation (count) swap. Only the scenes differ: a relation scene has exactly two objects whose
places are converse, and its caption names the relation once ("{subject} {relation} {object}").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet

#: The concept a relation space adds: an object's side of the scene's relation.
PLACE = "place"
#: The concept a count space adds: how many copies of the object the scene holds.
COUNT = "count"
#: Every relation bindscope can draw and read back, with its converse (the other object's side).
CONVERSE = {
    "left of": "right of",
    "right of": "left of",
    "above": "below",
    "below": "above",
    "in front of": "behind",
    "behind": "in front of",
}
#: How a relation reads in a caption unless the YAML's caption words say otherwise.
RELATION_WORDS = {"left of": "to the left of", "right of": "to the right of"}
#: Counts a scene may give an object (the renderers lay out at most four copies in an object's cell).
MAX_COUNT = 4
#: How a count reads in a caption unless the YAML's caption words say otherwise.
COUNT_WORDS = {"1": "one", "2": "two", "3": "three", "4": "four"}
#: The relations of a relation space unless the YAML names others.
DEFAULT_RELATIONS = ("left of", "right of", "above", "below")
#: The counts of a count space unless the YAML names others.
DEFAULT_COUNTS = (1, 2, 3, 4)


def check_relations(relations: Sequence[str]) -> tuple[str, ...]:
    """The relations of a space, each one bindscope can draw, none repeated."""
    relations = tuple(relations)
    if not relations:
        raise BindscopeError(f"relations: give at least one of {', '.join(CONVERSE)}")
    unknown = [r for r in relations if r not in CONVERSE]
    if unknown:
        raise BindscopeError(f"unknown relation(s) {', '.join(map(repr, unknown))}; choose from {', '.join(CONVERSE)}")
    if len(set(relations)) != len(relations):
        raise BindscopeError(f"relations repeat: {list(relations)}")
    return relations


def check_counts(counts: Sequence[int]) -> tuple[int, ...]:
    """The counts of a space: whole numbers from 1 to :data:`MAX_COUNT`, at least two, none repeated."""
    counts = tuple(counts)
    bad = [c for c in counts if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_COUNT]
    if bad:
        raise BindscopeError(f"counts must be whole numbers from 1 to {MAX_COUNT}, got {bad[0]!r}")
    if len(counts) < 2 or len(set(counts)) != len(counts):
        raise BindscopeError(f"counts: give at least two different counts (a count swap needs two), got {list(counts)}")
    return tuple(sorted(counts))


def places(relations: Sequence[str]) -> tuple[str, ...]:
    """The values of the :data:`PLACE` concept: each relation, then each converse not already listed."""
    out = list(relations)
    out += [CONVERSE[r] for r in relations if CONVERSE[r] not in out]
    return tuple(out)


def with_families(space: ConceptSpace, relations: Sequence[str] | None, counts: Sequence[int] | None) -> ConceptSpace:
    """``space`` with the :data:`COUNT` concept (ordinal) and/or the :data:`PLACE` concept added last."""
    concepts, values, ordinal = list(space.concepts), list(space.values), list(space.ordinal)
    for name, wanted in ((COUNT, counts), (PLACE, relations)):
        if wanted is not None and name in concepts:
            raise BindscopeError(f"a space with {name}s adds the concept {name!r} itself; rename your concept {name!r}")
    if counts is not None:
        concepts.append(COUNT)
        values.append(tuple(str(c) for c in check_counts(counts)))
        ordinal.append(COUNT)
    if relations is not None:
        concepts.append(PLACE)
        values.append(places(check_relations(relations)))
    return ConceptSpace(tuple(concepts), tuple(values), tuple(ordinal))


def family_of(space: ConceptSpace) -> str:
    """``relation``, ``count`` or ``attribution``: what a space's binding swaps exchange beyond attributes."""
    if PLACE in space.concepts:
        return "relation"
    return "count" if COUNT in space.concepts else "attribution"


def base_space(space: ConceptSpace) -> ConceptSpace:
    """The space without its :data:`PLACE` concept (the objects a relation relates)."""
    keep = [i for i, c in enumerate(space.concepts) if c != PLACE]
    return ConceptSpace(
        tuple(space.concepts[i] for i in keep),
        tuple(space.values[i] for i in keep),
        tuple(o for o in space.ordinal if o != PLACE),
    )


def relation_scenes(
    space: ConceptSpace, relations: Sequence[str], *, allow_identical: bool = True, distinct_values: bool = False
) -> SceneSet:
    """Every ordered pair of objects under every relation: ``(subject, object)`` with the subject's place the
    relation and the object's its converse, in the order pair, then relation.

    Parameters
    ----------
    space
        A relation space (with its :data:`PLACE` concept last).
    relations
        The relations scenes are captioned with (a subset of the place values).
    allow_identical, distinct_values
        As in :meth:`SceneSet.enumerate`, over the objects without their place.
    """
    if space.concepts[-1] != PLACE:
        raise BindscopeError("relation scenes need a relation space (its place concept last)")
    base = base_space(space)
    pairs = SceneSet.enumerate(base, 2, allow_identical=allow_identical, distinct_values=distinct_values).scenes
    names = space.values[-1]
    subject = np.array([names.index(r) for r in relations], dtype=np.int32)
    other = np.array([names.index(CONVERSE[r]) for r in relations], dtype=np.int32)
    n, r = len(pairs), len(relations)
    scenes = np.empty((n * r, 2, space.num_concepts), dtype=np.int32)
    scenes[:, :, :-1] = np.repeat(pairs, r, axis=0)
    scenes[:, 0, -1] = np.tile(subject, n)
    scenes[:, 1, -1] = np.tile(other, n)
    return SceneSet(space, scenes)


def plural(word: str) -> str:
    """An English plural by the common rules: ``cube`` -> ``cubes``, ``glass`` -> ``glasses``, ``berry`` ->
    ``berries`` (a caption's ``plurals`` give the others)."""
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"
