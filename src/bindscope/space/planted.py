"""Planted embeddings: scene embeddings whose binding function is known by construction.

They are the backbone of bindscope's known-answer tests and benchmarks, and a way for users to
check that an analysis reaches the right verdict before trusting it on a real model.

Every kind maps a :class:`~bindscope.space.concepts.SceneSet` to float32 ``[N, dim]``; padded slots
contribute nothing. Component vectors are drawn i.i.d. N(0, 1/dim) (unit norm in expectation),
and ``noise`` adds N(0, noise^2/dim) per coordinate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import PAD, SceneSet
from bindscope.space.families import COUNT, PLACE


def _vectors(rng: np.random.Generator, count: int, dim: int) -> np.ndarray:
    return rng.normal(0.0, 1.0 / np.sqrt(dim), size=(count, dim))


def _sum_over_slots(table_per_slot: list[np.ndarray], ids: np.ndarray) -> np.ndarray:
    """``sum_s table_per_slot[s][ids[:, s]]``, skipping padded slots."""
    out = np.zeros((ids.shape[0], table_per_slot[0].shape[1]))
    for s, table in enumerate(table_per_slot):
        present = ids[:, s] != PAD
        out[present] += table[ids[present, s]]
    return out


def object_additive(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per (slot, object), summed over slots: ``sum_s T_s[o_s]``."""
    u = scenes.space.num_objects
    tables = [_vectors(rng, u, dim) for _ in range(scenes.max_objects)]
    return _sum_over_slots(tables, scenes.object_ids())


def object_lookup(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per object (no concept structure, no slot), summed: ``sum_s R[o_s]``."""
    table = _vectors(rng, scenes.space.num_objects, dim)
    return _sum_over_slots([table] * scenes.max_objects, scenes.object_ids())


def concept_additive(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per (slot, concept, value), summed: ``sum_s sum_c E_{c,s}[v_{s,c}]``."""
    out = np.zeros((len(scenes), dim))
    for s in range(scenes.max_objects):
        for c, size in enumerate(scenes.space.sizes):
            out += _lookup(_vectors(rng, size, dim), scenes.scenes[:, s, c])
    return out


def bag_of_concepts(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per (concept, value), summed over every object: no slots, no binding."""
    out = np.zeros((len(scenes), dim))
    for c, size in enumerate(scenes.space.sizes):
        table = _vectors(rng, size, dim)
        for s in range(scenes.max_objects):
            out += _lookup(table, scenes.scenes[:, s, c])
    return out


def additive_concepts_objects(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """Object vector = sum of its concept vectors, objects summed over slots (per-slot tables)."""
    out = np.zeros((len(scenes), dim))
    for s in range(scenes.max_objects):
        obj = np.zeros((len(scenes), dim))
        for c, size in enumerate(scenes.space.sizes):
            obj += _lookup(_vectors(rng, size, dim), scenes.scenes[:, s, c])
        out += obj
    return out


def mult_within_object(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """Object vector = elementwise product of its concept vectors, summed over slots."""
    tables = [rng.normal(0.0, 1.0, size=(size, dim)) for size in scenes.space.sizes]
    out = np.zeros((len(scenes), dim))
    for s in range(scenes.max_objects):
        present = scenes.scenes[:, s, 0] != PAD
        obj = np.ones((int(present.sum()), dim))
        for c, table in enumerate(tables):
            obj *= table[scenes.scenes[present, s, c]]
        out[present] += obj / np.sqrt(dim)
    return out


def mult_all_slots(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """Elementwise product of one vector per (slot, concept) over every slot of the scene.

    Factors are ``1 + N(0, 0.5^2)`` per coordinate: a product of zero-mean factors would hide every
    object from a linear read-out, while mean-one factors give each object a main effect (its own
    factors' product) beside the interactions across objects.
    """
    _need_all_objects(scenes, "mult_all_slots")
    out = np.ones((len(scenes), dim))
    for s in range(scenes.max_objects):
        for c, size in enumerate(scenes.space.sizes):
            out *= 1.0 + 0.5 * rng.normal(size=(size, dim))[scenes.scenes[:, s, c]]
    return (out - 1.0) / np.sqrt(dim)


def sum_mult(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A product over every slot (as ``mult_all_slots``) plus separate concept vectors summed over
    slots, at half the product's scale: both parts carry what the probes read (at equal scale the
    additive part alone nearly suffices; at a small one, the product alone)."""
    return mult_all_slots(scenes, rng, dim) + 0.5 * additive_concepts_objects(scenes, rng, dim)


def _need_all_objects(scenes: SceneSet, kind: str) -> None:
    if (scenes.num_objects() != scenes.max_objects).any():
        raise BindscopeError(f"{kind} needs scenes with all {scenes.max_objects} objects; drop the smaller ones first")


def random_per_scene(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """An independent random vector per scene: no structure at all."""
    return _vectors(rng, len(scenes), dim)


def role_bound(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per (object, place) or (object, count), summed over objects: the relation (count) is bound
    to the object it belongs to, ``sum_s R[o_s, f_s]`` (a relation or count space: :func:`family_concept`)."""
    family_concept(scenes)
    return object_lookup(scenes, rng, dim)


def role_bag(scenes: SceneSet, rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random vector per object without its place (count), plus a vector per place (count) the scene holds:
    ``sum_s R[o_s] + sum_s P[f_s]``; the scene's objects and places are known, but not which object holds which,
    so a relation (count) swap ties with the scene."""
    f = family_concept(scenes)
    rest = [c for c in range(scenes.space.num_concepts) if c != f]
    values = scenes.scenes[..., rest]
    sizes = np.array([scenes.space.sizes[c] for c in rest])
    strides = np.concatenate([np.cumprod(sizes[::-1])[::-1][1:], [1]])
    base = np.where(values[..., 0] != PAD, (values * strides).sum(axis=-1), PAD)
    objects, places = _vectors(rng, int(np.prod(sizes)), dim), _vectors(rng, scenes.space.sizes[f], dim)
    out = np.zeros((len(scenes), dim))
    for s in range(scenes.max_objects):
        out += _lookup(objects, base[:, s]) + _lookup(places, scenes.scenes[:, s, f])
    return out


def family_concept(scenes: SceneSet) -> int:
    """The index of a relation space's place concept, or a count space's count concept."""
    for name in (PLACE, COUNT):
        if name in scenes.space.concepts:
            return scenes.space.concept_index(name)
    raise BindscopeError(
        f"role-bound and role-bag embeddings need a relation or count space (a {PLACE!r} or {COUNT!r} concept); "
        f"this space has {', '.join(scenes.space.concepts)}"
    )


def _lookup(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = np.zeros((len(idx), table.shape[1]))
    present = idx != PAD
    out[present] = table[idx[present]]
    return out


KINDS: dict[str, Callable[[SceneSet, np.random.Generator, int], np.ndarray]] = {
    "object_additive": object_additive,
    "object_lookup": object_lookup,
    "concept_additive": concept_additive,
    "bag_of_concepts": bag_of_concepts,
    "additive_concepts_objects": additive_concepts_objects,
    "mult_within_object": mult_within_object,
    "mult_all_slots": mult_all_slots,
    "sum_mult": sum_mult,
    "random": random_per_scene,
    "role_bound": role_bound,
    "role_bag": role_bag,
}


def planted_embeddings(
    scenes: SceneSet, kind: str, *, dim: int = 64, noise: float = 0.0, seed: int = 0, width: int | None = None
) -> np.ndarray:
    """Embeddings ``[N, dim]`` (float32) with a known binding function.

    Parameters
    ----------
    scenes
        The scenes to embed.
    kind
        One of :data:`KINDS`: ``object_additive``, ``object_lookup``, ``concept_additive``,
        ``bag_of_concepts``, ``additive_concepts_objects``, ``mult_within_object``,
        ``mult_all_slots``, ``sum_mult``, ``random``; on a relation or count space also ``role_bound`` (a
        vector per (object, place) or (object, count)) and ``role_bag`` (objects and places, unbound).
    dim
        Embedding width.
    noise
        Standard deviation of added Gaussian noise, relative to a unit-norm component.
    seed
        Seed of the component vectors and the noise.
    width
        The planted function's own width: computed in ``width`` dimensions, then carried into ``dim``
        by a random orthonormal map (default: ``dim``, no map). A within-object product of width 32 in
        384 dimensions is determined by a 10 x 10 concept space's seen objects; one of width 384 is
        not (any model that fits it can give each of the 100 objects its own vector).
    """
    if kind not in KINDS:
        raise BindscopeError(f"unknown planted kind {kind!r}; choose one of {', '.join(KINDS)}")
    if dim < 1:
        raise BindscopeError(f"dim must be at least 1, got {dim}")
    if noise < 0:
        raise BindscopeError(f"noise must be >= 0, got {noise}")
    if width is not None and not 1 <= width <= dim:
        raise BindscopeError(f"width must be between 1 and dim ({dim}), got {width}")
    rng = np.random.default_rng(seed)
    out = KINDS[kind](scenes, rng, width or dim)
    if width is not None and width < dim:
        basis, _ = np.linalg.qr(rng.normal(size=(dim, width)))
        out = out @ basis.T
    if noise:
        out = out + rng.normal(0.0, noise / np.sqrt(dim), size=out.shape)
    return out.astype(np.float32)
