"""Floors: what a model that binds nothing scores under each accuracy (docs/method/03-probes.md,
docs/method/09-scratch.md).

An *ideal bag of concepts* represents a scene by the set of concept values it holds, and nothing
else: a multi-hot vector over all values (:func:`bag_embeddings`). It reads an object query by how
many of the object's values the scene holds (the dot product with the object's multi-hot,
:func:`bag_scores`), so it gives a scene's objects the top score, and gives the same score to every
object formed from the scene's values: a binding swap ("a blue cube" in "a red cube and a blue
sphere") ties with the scene's objects. Set separation counts a tie as wrong (for every model), so
the bag is right exactly on the scenes that need no binding. That share is its floor under the strict
object accuracy; under the needing-binding accuracy its floor is 0, and under the concept accuracy 1.

*Chance* is the expected accuracy of random scores (:func:`bindscope.estimators.probes.chance_accuracy`).

A number "binds beyond a bag of concepts" only when it clears the bag's floor by :data:`MARGIN` on
every seed (:func:`binding_verdict`).

On a relation or count space (docs/method/11-relations-counts.md) the question is whether the place (count) is
bound to its object, so the bag is one of *roles* (:func:`role_view`): it knows each object with its attributes
bound and the places (counts) the scene holds, but not which object holds which. It ties a scene with its
relation (count) swap, and only there: a model that binds attributes to nouns but not places reaches its floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.estimators.probes import chance_per_scene
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet
from bindscope.space.families import COUNT, PLACE

#: The one concept of a role view (:func:`role_view`) that stands for an object without its place or count.
OBJECT_ROLE = "object"

#: How far above the bag-of-concepts floor an accuracy must be, on every seed, to read "binds".
MARGIN = 0.05
BINDS = "binds beyond a bag of concepts"
NOT_SHOWN = "not shown: some seed is within the margin of a bag of concepts"
BAG_LEVEL = "does not clear a bag of concepts by the margin"
#: Each reading in a table cell (the scratch sweep's ``binds`` column, the report card's ``beyond bag``).
SHORT_READINGS = {BINDS: "yes", NOT_SHOWN: "not shown", BAG_LEVEL: "no"}


def role_view(scenes: SceneSet) -> SceneSet:
    """The scenes as a bag of roles sees them: on a relation or count space, a space of one concept
    :data:`OBJECT_ROLE` (the object without its place and count: every other concept's values, joined) and the
    place and/or count; on any other space the scenes themselves.

    Object ids are unchanged (the place and count are the last concepts, the most significant digits), so the
    object probe's labels are the same; the view's bag of concepts (:func:`bag_embeddings`, ``value_counts``) is the
    bag of roles, and its binding swaps (:meth:`~bindscope.space.concepts.SceneSet.binding_ambiguous`) are the
    relation (count) swaps.
    """
    space = scenes.space
    family = [c for c, name in enumerate(space.concepts) if name in (PLACE, COUNT)]
    if not family:
        return scenes
    rest = [c for c in range(space.num_concepts) if c not in family]
    if family != list(range(len(rest), space.num_concepts)):
        raise BindscopeError(f"internal: the place and count must be a space's last concepts, got {space.concepts}")
    base = ConceptSpace(
        tuple(space.concepts[c] for c in rest), tuple(space.values[c] for c in rest)
    )  # the objects without their place and count
    names = tuple(" ".join(v) for v in zip(*(n.tolist() for n in base.value_names(base.all_objects()))))
    roles = ConceptSpace(
        (OBJECT_ROLE, *(space.concepts[c] for c in family)),
        (names, *(space.values[c] for c in family)),
        tuple(o for o in space.ordinal if o in (PLACE, COUNT)),
    )
    values = scenes.scenes
    out = np.full((*values.shape[:2], roles.num_concepts), PAD, dtype=values.dtype)
    out[..., 0] = base.object_ids(values[..., rest])
    out[..., 1:] = values[..., family]
    return SceneSet(roles, out)


def bag_embeddings(scenes: SceneSet) -> np.ndarray:
    """Ideal bag-of-concepts scene embeddings: which values each scene holds, ``[N, sum V_c]`` float32."""
    return np.concatenate([(counts > 0) for counts in scenes.value_counts()], axis=1).astype(np.float32)


def bag_query_embeddings(space: ConceptSpace, values: np.ndarray) -> np.ndarray:
    """Multi-hot of objects given as value rows ``[Q, C]``: ``[Q, sum V_c]`` float32."""
    values = np.asarray(values, dtype=np.int64).reshape(-1, space.num_concepts)
    offsets = np.concatenate([[0], np.cumsum(space.sizes)[:-1]])
    out = np.zeros((len(values), int(sum(space.sizes))), dtype=np.float32)
    np.put_along_axis(out, values + offsets, 1.0, axis=1)
    return out


def bag_scores(scenes: SceneSet, query_values: np.ndarray | None = None) -> np.ndarray:
    """How many of each query object's values each scene holds, ``[N, Q]`` (default queries: all objects)."""
    queries = scenes.space.all_objects() if query_values is None else query_values
    return bag_embeddings(scenes) @ bag_query_embeddings(scenes.space, queries).T


def bag_of_concepts_accuracy(scenes: SceneSet) -> float:
    """The bag's strict object accuracy, analytically: the share of scenes that need no binding."""
    return float(1.0 - scenes.binding_ambiguous().mean()) if len(scenes) else float("nan")


def object_floors(scenes: SceneSet) -> dict[str, dict[str, float]]:
    """Floors of the strict accuracies on ``scenes`` against all objects and values.

    Returns ``{metric: {"bag": ..., "chance": ...}}`` for ``object_acc``, ``acc_<concept>``,
    ``concept_acc`` (mean over concepts) and, where some scene needs binding, ``binding_object_acc``
    (those scenes only). A bag reads every concept value, so its concept accuracies are 1.
    """
    ambiguous = scenes.binding_ambiguous()
    objects = scenes.distinct_objects()
    concepts = {
        c: chance_per_scene(size, (counts > 0).sum(axis=1)).mean()
        for c, size, counts in zip(scenes.space.concepts, scenes.space.sizes, scenes.value_counts())
    }
    u = scenes.space.num_objects
    out = {
        "object_acc": {"bag": bag_of_concepts_accuracy(scenes), "chance": float(chance_per_scene(u, objects).mean())},
        **{f"acc_{c}": {"bag": 1.0, "chance": float(v)} for c, v in concepts.items()},
        "concept_acc": {"bag": 1.0, "chance": float(np.mean(list(concepts.values())))},
    }
    if ambiguous.any():
        out["binding_object_acc"] = {"bag": 0.0, "chance": float(chance_per_scene(u, objects[ambiguous]).mean())}
    return out


def binding_verdict(accuracies: Sequence[float], floors: Sequence[float], margin: float = MARGIN) -> dict[str, Any]:
    """Does an accuracy beat the bag-of-concepts floor, by ``margin``, on every seed?

    Parameters
    ----------
    accuracies
        The model's accuracy, one per seed.
    floors
        The bag-of-concepts floor of each seed, under the same metric and scenes as ``accuracies``.
    margin
        How far above the floor an accuracy must be to count as clearing it (:data:`MARGIN` by default).

    Returns
    -------
    dict
        ``reading`` (:data:`BINDS`, :data:`NOT_SHOWN` or :data:`BAG_LEVEL`), ``margin``, the mean and
        smallest clearance over seeds (accuracy - floor), and ``seeds``.
    """
    acc, floor = np.asarray(accuracies, dtype=float), np.asarray(floors, dtype=float)
    if acc.shape != floor.shape or not len(acc) or np.isnan(acc).any() or np.isnan(floor).any():
        return {"reading": "undetermined", "margin": margin, "clearance_mean": None, "clearance_min": None, "seeds": 0}
    clearance = acc - floor
    if clearance.min() >= margin:
        reading = BINDS
    elif clearance.mean() >= margin:
        reading = NOT_SHOWN
    else:
        reading = BAG_LEVEL
    return {
        "reading": reading,
        "margin": margin,
        "clearance_mean": float(clearance.mean()),
        "clearance_min": float(clearance.min()),
        "seeds": int(len(acc)),
    }


def clearance_text(verdict: dict[str, Any]) -> str:
    """How far a :func:`binding_verdict` cleared the bag, in words (points: the smallest and mean over seeds)."""
    low, mean, seeds = 100 * verdict["clearance_min"], 100 * verdict["clearance_mean"], verdict["seeds"]
    spread = "one seed, no spread" if seeds == 1 else f"{mean:+.1f} on average over {seeds} seeds"
    least = " at least" if seeds > 1 else ""
    return f"{low:+.1f} points above the bag{least}, {spread} (margin {100 * verdict['margin']:g})"
