"""Concept spaces, object ids and scene sets (docs/method/01-concepts.md).

An object is one value per concept; its id is the mixed-radix index of its values,
``id = v_0 + V_0 * (v_1 + V_1 * (...))``, independent of any data order. A scene set is an
integer array ``[N, K, C]`` of value indices whose missing objects are padded with -1.
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from bindscope.core.errors import BindscopeError
from bindscope.core.validation import check_printable

PAD = -1
MAX_ENUMERATED_TUPLES = 50_000_000
MAX_OBJECTS = 2**40
#: The most objects in one scene, and the most scenes in one set: bounds that keep a declared size
#: (a typo, a hostile file) from turning into a huge allocation.
MAX_OBJECTS_PER_SCENE = 64
MAX_SCENES = MAX_ENUMERATED_TUPLES


@dataclass(frozen=True)
class ConceptSpace:
    """Named concepts, each with an ordered tuple of value names.

    Parameters
    ----------
    concepts
        Concept names, in order (concept 0 is the fastest-varying digit of an object id).
    values
        For each concept, its value names in index order.
    ordinal
        Concepts whose values are ordered (``small < medium < large``: index order is rank order),
        used by rank axes (§8). It describes the values, not the objects: it does not take part in
        equality or in the content hash.
    """

    concepts: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    ordinal: tuple[str, ...] = field(default=(), compare=False)
    _strides: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "concepts", tuple(self.concepts))
        object.__setattr__(self, "values", tuple(tuple(v) for v in self.values))
        object.__setattr__(self, "ordinal", tuple(self.ordinal))
        _validate_space(self.concepts, self.values)
        _validate_ordinal(self.concepts, self.values, self.ordinal)
        strides = np.cumprod([1, *self.sizes[:-1]]).astype(np.int64)
        object.__setattr__(self, "_strides", strides)

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Sequence[str]], ordinal: Sequence[str] = ()) -> ConceptSpace:
        """Build a space from ``{concept: [values...]}`` (insertion order is concept order)."""
        if not isinstance(mapping, Mapping):
            raise BindscopeError(f"concepts must be a mapping {{concept: [values]}}, got {type(mapping).__name__}")
        values = []
        for name, vals in mapping.items():
            if isinstance(vals, str) or not isinstance(vals, Sequence):
                raise BindscopeError(f"concept {name!r} must list its values, e.g. {name}: [a, b], got {vals!r}")
            values.append(tuple(vals))
        return cls(tuple(mapping), tuple(values), tuple(ordinal))

    def with_ordinal(self, names: Sequence[str]) -> ConceptSpace:
        """The same space with ``names`` marked ordinal too (values in their index order)."""
        added = [n for n in names if n not in self.ordinal]
        return ConceptSpace(self.concepts, self.values, (*self.ordinal, *added)) if added else self

    def to_dict(self) -> dict[str, list[str]]:
        """``{concept: [values...]}`` in concept order."""
        return {c: list(v) for c, v in zip(self.concepts, self.values)}

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of values V_c of each concept."""
        return tuple(len(v) for v in self.values)

    @property
    def num_concepts(self) -> int:
        """C, the number of concepts."""
        return len(self.concepts)

    @property
    def num_objects(self) -> int:
        """U = prod V_c, the number of distinct objects."""
        return math.prod(self.sizes)

    def concept_index(self, concept: str) -> int:
        """Index of a concept by name."""
        try:
            return self.concepts.index(concept)
        except ValueError:
            raise BindscopeError(f"unknown concept {concept!r}; this space has {', '.join(self.concepts)}") from None

    def value_index(self, concept: str, value: str) -> int:
        """Index of a value name within its concept."""
        names = self.values[self.concept_index(concept)]
        try:
            return names.index(value)
        except ValueError:
            raise BindscopeError(
                f"unknown value {value!r} for concept {concept!r}; expected one of {', '.join(names)}"
            ) from None

    def object_ids(self, values: ArrayLike) -> np.ndarray:
        """Mixed-radix object ids of value tuples.

        Parameters
        ----------
        values
            Integer array ``[..., C]``; a tuple of all -1 is padding.

        Returns
        -------
        numpy.ndarray
            int64 ids ``[...]``, -1 where the input is padding.
        """
        arr = self._check_values(values)
        ids = arr.astype(np.int64) @ self._strides
        return np.where(arr[..., 0] == PAD, PAD, ids)

    def object_values(self, ids: ArrayLike) -> np.ndarray:
        """Value indices ``[..., C]`` of object ids ``[...]`` (-1 ids give all -1)."""
        arr = np.asarray(ids)
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise BindscopeError(f"object ids must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = (arr < PAD) | (arr >= self.num_objects)
        if bad.any():
            raise BindscopeError(
                f"object id {int(arr[bad].flat[0])} is outside 0..{self.num_objects - 1} (or -1 for padding)"
            )
        sizes = np.asarray(self.sizes, dtype=np.int64)
        vals = (arr[..., None] // self._strides) % sizes
        return np.where(arr[..., None] == PAD, PAD, vals)

    def all_objects(self) -> np.ndarray:
        """Value indices ``[U, C]`` of every object, in id order."""
        return self.object_values(np.arange(self.num_objects))

    def value_names(self, values: ArrayLike) -> list[np.ndarray]:
        """Per concept, an object array of value names for ``values[..., c]`` (None for padding)."""
        arr = self._check_values(values)
        out = []
        for c, names in enumerate(self.values):
            lookup = np.array([*names, None], dtype=object)  # index -1 -> None
            out.append(lookup[arr[..., c]])
        return out

    def _check_values(self, values: ArrayLike) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim == 0 or arr.shape[-1] != self.num_concepts:
            raise BindscopeError(
                f"value array must end in one entry per concept ({self.num_concepts}), got shape {arr.shape}"
            )
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise BindscopeError(f"value indices must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        pad = arr == PAD
        partial = pad.any(axis=-1) & ~pad.all(axis=-1)
        if partial.any():
            raise BindscopeError(
                "an object is partly padded (-1 for some concepts only); pad a missing object with -1 in every concept"
            )
        sizes = np.asarray(self.sizes)
        bad = ~pad & ((arr < 0) | (arr >= sizes))
        if bad.any():
            where = np.argwhere(bad)[0]
            c = int(where[-1])
            raise BindscopeError(
                f"value index {int(arr[tuple(where)])} is out of range for concept "
                f"{self.concepts[c]!r} (0..{sizes[c] - 1})"
            )
        return arr


def _validate_space(concepts: tuple[str, ...], values: tuple[tuple[str, ...], ...]) -> None:
    if not concepts:
        raise BindscopeError("a concept space needs at least one concept")
    if math.prod(len(v) for v in values) > MAX_OBJECTS:
        raise BindscopeError(f"the concepts make more than {MAX_OBJECTS:,} distinct objects; object ids would overflow")
    if len(concepts) != len(values):
        raise BindscopeError(
            f"got {len(concepts)} concept names but {len(values)} value lists; give one list per concept"
        )
    seen: set[str] = set()
    for name, vals in zip(concepts, values):
        if not isinstance(name, str) or not name.strip():
            raise BindscopeError(f"concept names must be non-empty strings, got {name!r}")
        check_printable(name, "concept name")
        if name in seen:
            raise BindscopeError(f"duplicate concept {name!r}; concept names must be unique")
        seen.add(name)
        if not vals:
            raise BindscopeError(f"concept {name!r} has no values; give it at least one")
        for v in vals:
            if not isinstance(v, str) or not v.strip():
                raise BindscopeError(f"values of concept {name!r} must be non-empty strings, got {v!r}")
            check_printable(v, f"value of concept {name!r}")
        dupes = sorted(v for v, n in collections.Counter(vals).items() if n > 1)  # linear: a hostile file may list many
        if dupes:
            raise BindscopeError(f"concept {name!r} lists value(s) {', '.join(map(repr, dupes))} more than once")


def _validate_ordinal(concepts: tuple[str, ...], values: tuple[tuple[str, ...], ...], ordinal: tuple[str, ...]) -> None:
    for name in ordinal:
        if name not in concepts:
            raise BindscopeError(f"ordinal concept {name!r} is not a concept; this space has {', '.join(concepts)}")
        if len(values[concepts.index(name)]) < 2:
            raise BindscopeError(f"ordinal concept {name!r} has one value; an order needs at least two")
    if len(set(ordinal)) != len(ordinal):
        raise BindscopeError(f"ordinal concepts repeat: {list(ordinal)}")


def _rows_in_chunks(array: np.ndarray, size: int = 4096) -> Iterator[tuple[int, list[int]]]:
    """``enumerate(array.tolist())``, converted a chunk at a time (a loop that stops early converts little)."""
    for start in range(0, len(array), size):
        yield from enumerate(array[start : start + size].tolist(), start)


@dataclass(frozen=True, eq=False)
class SceneSet:
    """Scenes as value indices ``[N, K, C]``, padded with -1, tied to a concept space.

    Every scene holds at least one object; missing objects come after the present ones.
    """

    space: ConceptSpace
    scenes: np.ndarray

    def __post_init__(self) -> None:
        arr = np.asarray(self.scenes)
        if arr.ndim != 3:
            raise BindscopeError(f"scenes must be an array [N, K, C], got shape {arr.shape}")
        if arr.shape[1] < 1:
            raise BindscopeError("scenes must have at least one object slot (K >= 1)")
        arr = self.space._check_values(arr).astype(np.int32)
        present = arr[..., 0] != PAD
        if arr.shape[0] and not present[:, 0].all():
            row = int(np.flatnonzero(~present[:, 0])[0])
            raise BindscopeError(f"scene {row} has no object in slot 1; every scene needs one")
        gaps = ~present[:, :-1] & present[:, 1:]
        if gaps.any():
            row = int(np.argwhere(gaps)[0, 0])
            raise BindscopeError(f"scene {row} has an object after an empty slot; padding (-1) must come last")
        arr.setflags(write=False)
        object.__setattr__(self, "scenes", arr)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def enumerate(
        cls,
        space: ConceptSpace,
        objects_per_scene: int,
        *,
        allow_identical: bool = True,
        distinct_values: bool = False,
    ) -> SceneSet:
        """Every ordered K-tuple of objects, in lexicographic order of object ids.

        Parameters
        ----------
        space
            The concept space.
        objects_per_scene
            K, the number of objects in each scene.
        allow_identical
            Keep tuples in which one object appears twice.
        distinct_values
            Keep only tuples whose objects differ in every concept (as PUG:SPARE does).
        """
        k = _check_k(objects_per_scene)
        total = space.num_objects**k
        if total > MAX_ENUMERATED_TUPLES:
            raise BindscopeError(
                f"enumerating {space.num_objects}^{k} = {total:,} scenes is too many; "
                "sample scenes instead (scenes: {mode: sample, num_scenes: N})"
            )
        ids = np.indices((space.num_objects,) * k).reshape(k, -1).T
        values = space.object_values(ids)
        keep = _valid_tuples(ids, values, allow_identical, distinct_values)
        return cls(space, values[keep])

    @classmethod
    def sample(
        cls,
        space: ConceptSpace,
        objects_per_scene: int,
        num_scenes: int,
        *,
        seed: int | np.random.Generator = 0,
        allow_identical: bool = True,
        distinct_values: bool = False,
    ) -> SceneSet:
        """``num_scenes`` distinct ordered K-tuples drawn uniformly without replacement.

        Scenes come out sorted by their object ids, so the result depends only on the seed.
        """
        k = _check_k(objects_per_scene)
        if num_scenes < 1:
            raise BindscopeError(f"num_scenes must be at least 1, got {num_scenes}")
        if num_scenes > MAX_SCENES:
            raise BindscopeError(f"num_scenes must be at most {MAX_SCENES:,}, got {num_scenes:,}")
        rng = np.random.default_rng(seed)
        if space.num_objects**k <= MAX_ENUMERATED_TUPLES:
            pool = cls.enumerate(space, k, allow_identical=allow_identical, distinct_values=distinct_values)
            if num_scenes > len(pool):
                raise BindscopeError(
                    f"asked for {num_scenes:,} scenes but only {len(pool):,} distinct scenes "
                    "exist with these options; lower num_scenes or enumerate them all"
                )
            pick = np.sort(rng.choice(len(pool), size=num_scenes, replace=False))
            return pool.subset(pick)
        ids = _rejection_sample(space, k, num_scenes, rng, allow_identical, distinct_values)
        return cls(space, space.object_values(ids))

    @classmethod
    def singles(cls, space: ConceptSpace, objects_per_scene: int = 1) -> SceneSet:
        """Every object alone, in id order, padded to ``objects_per_scene`` slots."""
        k = _check_k(objects_per_scene)
        scenes = np.full((space.num_objects, k, space.num_concepts), PAD, dtype=np.int32)
        scenes[:, 0] = space.all_objects()
        return cls(space, scenes)

    def concat(self, other: SceneSet) -> SceneSet:
        """This set followed by ``other`` (same space), padded to the larger K."""
        if other.space != self.space:
            raise BindscopeError("cannot concatenate scene sets over different concept spaces")
        k = max(self.max_objects, other.max_objects)
        return SceneSet(self.space, np.concatenate([self._padded(k), other._padded(k)]))

    def subset(self, indices: ArrayLike) -> SceneSet:
        """The scenes at ``indices`` (integer array or boolean mask)."""
        return SceneSet(self.space, self.scenes[np.asarray(indices)])

    def _padded(self, k: int) -> np.ndarray:
        pad = np.full((len(self), k - self.max_objects, self.space.num_concepts), PAD, np.int32)
        return np.concatenate([self.scenes, pad], axis=1)

    # -- views ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.scenes.shape[0])

    @property
    def max_objects(self) -> int:
        """K, the number of object slots."""
        return int(self.scenes.shape[1])

    def object_ids(self) -> np.ndarray:
        """Object id per slot ``[N, K]``, -1 for empty slots."""
        return self.space.object_ids(self.scenes)

    def num_objects(self) -> np.ndarray:
        """Number of objects in each scene ``[N]``."""
        return (self.scenes[..., 0] != PAD).sum(axis=1)

    def distinct_objects(self) -> np.ndarray:
        """Number of distinct objects in each scene ``[N]`` (an object in two slots counts once)."""
        ids = np.sort(self.object_ids(), axis=1)
        first = np.ones_like(ids, dtype=bool)
        first[:, 1:] = ids[:, 1:] != ids[:, :-1]  # the first slot of each distinct id, after sorting
        return (first & (ids != PAD)).sum(axis=1)

    def binding_ambiguous(self) -> np.ndarray:
        """Per scene ``[N]``: does an object outside the scene carry only values the scene holds?

        Such a scene has the same concept values as a scene holding that object instead (a binding
        swap: "a red cube and a blue sphere" against "a blue cube and a red sphere"). A bag of concepts
        cannot tell them apart; every other scene is decided by its concept values alone. The scene
        can form ``prod_c (distinct values of concept c)`` objects from its values; it is ambiguous when
        it holds fewer distinct objects than that.
        """
        formable = np.prod([(counts > 0).sum(axis=1) for counts in self.value_counts()], axis=0)
        return formable > self.distinct_objects()

    def covering_subsample(self, num_scenes: int, seed: int = 0) -> np.ndarray:
        """Sorted rows of a seeded subsample of ``num_scenes`` scenes that keeps every object in every slot
        it fills in this set.

        In a seeded order, a first pass keeps the scenes all of whose (slot, object) pairs are still
        uncovered, a second those with any uncovered pair (a near-minimal cover: about U scenes for
        2-object scenes of U objects), and the next scenes of the order fill up to ``num_scenes``.
        """
        if num_scenes >= len(self):
            return np.arange(len(self))
        order = np.random.default_rng(seed).permutation(len(self))
        ids = self.object_ids()[order]
        u = self.space.num_objects
        keys = np.where(ids != PAD, ids + u * np.arange(self.max_objects), -1)  # (slot, object) pair ids
        covered = np.ones(u * self.max_objects, dtype=bool)
        covered[keys[keys >= 0]] = False  # the pairs to cover
        remaining = int((~covered).sum())
        keep = np.zeros(len(self), dtype=bool)
        for every in (True, False):
            for row, pairs in _rows_in_chunks(keys):
                if not remaining:
                    break
                new = [not covered[k] for k in pairs if k >= 0]
                if new and (all(new) if every else any(new)):
                    keep[row] = True
                    remaining -= sum(new)
                    covered[[k for k in pairs if k >= 0]] = True
        needed = int(keep.sum())
        if needed > num_scenes:
            raise BindscopeError(
                f"keeping every object in every slot needs at least {needed:,} scenes; ask for that many or more "
                f"(got {num_scenes:,})"
            )
        keep[np.flatnonzero(~keep)[: num_scenes - needed]] = True
        return np.sort(order[keep])

    def full(self) -> np.ndarray:
        """Indices of the scenes that hold all K objects."""
        return np.flatnonzero(self.num_objects() == self.max_objects)

    def value_counts(self) -> list[np.ndarray]:
        """Per concept, how many objects of each scene carry each value: ``[N, V_c]`` int32."""
        n = len(self)
        rows = np.broadcast_to(np.arange(n)[:, None], self.scenes.shape[:2])
        out = []
        for c, size in enumerate(self.space.sizes):
            vals = self.scenes[..., c]
            present = vals != PAD
            flat = rows[present].astype(np.int64) * size + vals[present]
            out.append(np.bincount(flat, minlength=n * size).reshape(n, size).astype(np.int32))
        return out

    def content_hash(self) -> str:
        """sha256 of the concept space and the scene array (stable across platforms)."""
        h = hashlib.sha256(b"bindscope-sceneset-v1\n")
        h.update(json.dumps(self.space.to_dict(), separators=(",", ":")).encode())
        h.update(json.dumps(list(self.scenes.shape)).encode())
        h.update(np.ascontiguousarray(self.scenes, dtype="<i4").tobytes())
        return h.hexdigest()


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_OBJECTS_PER_SCENE:
        most = MAX_OBJECTS_PER_SCENE
        raise BindscopeError(f"objects_per_scene must be a whole number >= 1, at most {most}, got {k!r}")
    return int(k)


def _valid_tuples(ids: np.ndarray, values: np.ndarray, allow_identical: bool, distinct_values: bool) -> np.ndarray:
    """Mask over tuples ``ids [M, K]`` / ``values [M, K, C]`` that satisfy the options."""
    keep = np.ones(len(ids), dtype=bool)
    k = ids.shape[1]
    for i in range(k):
        for j in range(i + 1, k):
            if distinct_values:
                keep &= (values[:, i] != values[:, j]).all(axis=-1)
            elif not allow_identical:
                keep &= ids[:, i] != ids[:, j]
    return keep


def _rejection_sample(
    space: ConceptSpace,
    k: int,
    num_scenes: int,
    rng: np.random.Generator,
    allow_identical: bool,
    distinct_values: bool,
) -> np.ndarray:
    """Distinct valid id tuples ``[num_scenes, K]`` from a space too large to enumerate."""
    u = space.num_objects
    found = np.empty((0, k), dtype=np.int64)
    for _ in range(1000):
        draw = rng.integers(0, u, size=(2 * num_scenes, k))
        draw = draw[_valid_tuples(draw, space.object_values(draw), allow_identical, distinct_values)]
        found = np.concatenate([found, draw])
        _, first = np.unique(found, axis=0, return_index=True)
        found = found[np.sort(first)]
        if len(found) >= num_scenes:
            chosen = found[:num_scenes]
            return chosen[np.lexsort(chosen.T[::-1])]
    raise BindscopeError(f"could not draw {num_scenes:,} distinct scenes; the options leave too few valid scenes")
