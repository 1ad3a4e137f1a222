"""Seeded train/test splits (docs/method/02-splits.md), saved and loaded as JSON with their seed.

- scene level: permute scenes; the first ``train_fraction`` train, the rest test. The
  permutation comes from numpy (``source="bindscope"``) or, scene for scene as the research code
  draws it, from ``torch.randperm`` (``source="paper"``).
- object level: permute the U objects; the first ``floor(f * U)`` are train objects. Scenes are
  ``train_only`` (every object train), ``test_only`` (every object test) or ``mixed``. For one
  seed the train objects are nested across fractions. The ``covering`` order moves to the front
  the fewest objects (greedily) that hold every concept value, so from that many train objects on
  every test scene is made of values seen in training; ``random`` is the plain permutation (the
  research code's). ``closed`` (relation and count spaces) permutes *units* instead: an object at both places
  of a relation axis ("red cube, left of" with "red cube, right of"), or an object at every count, and cuts
  between units, so the held-out (object, relation) and (object, count) combinations are closed under the
  relation and count swaps: a test scene's swap is a test scene too.
- validation: carved out of the training side only, by scenes or by a slice of train objects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_write_text, read_json
from bindscope.core.locks import writes
from bindscope.core.validation import MAX_ITEMS, check_fields, check_seed, short_repr
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet
from bindscope.space.families import CONVERSE, COUNT, PLACE

SPLIT_FORMAT = "bindscope-split-v1"


#: The object-level fractions of the paper's sweeps (0.1 ... 0.9) and the default seeds of every analysis.
DEFAULT_FRACTIONS = tuple(round(0.1 * i, 1) for i in range(1, 10))
DEFAULT_SEEDS = (0, 1, 2)
#: Where a scene split's permutation comes from: numpy's ``default_rng(seed)`` (every bindscope
#: split) or ``torch.randperm`` under ``torch.Generator().manual_seed(seed)`` (the research code).
SPLIT_SOURCES = ("bindscope", "paper")
#: How objects are ordered before the first ``floor(f * U)`` become train objects (see the module doc).
OBJECT_ORDERS = ("random", "covering", "closed")
ObjectOrder = Literal["random", "covering", "closed"]


def check_fraction(value: float, name: str = "fraction") -> float:
    """Return ``value`` as a float if it lies strictly between 0 and 1."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise BindscopeError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < f < 1.0:
        raise BindscopeError(f"{name} must be in (0, 1) (exclusive), got {value!r}")
    return f


def check_fractions(values: Sequence[float], name: str = "fraction") -> tuple[float, ...]:
    """Return ``values`` as floats if there is at least one (at most :data:`MAX_ITEMS`), each in (0, 1), none
    repeated."""
    if not len(values):
        raise BindscopeError(f"give at least one {name}")
    if len(values) > MAX_ITEMS:
        raise BindscopeError(f"give at most {MAX_ITEMS} {name}s, got {len(values)}")
    out = tuple(check_fraction(v, name) for v in values)
    if len(set(out)) != len(out):
        raise BindscopeError(f"{name}s repeat: {list(out)}")
    return out


def fraction_count(fraction: float, total: int) -> int:
    """``floor(fraction * total)``; the epsilon keeps 0.29 * 100 at 29 despite float rounding."""
    return int(math.floor(fraction * total + 1e-9))


def _indices(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class SceneSplit:
    """A scene-level split: row indices of train, validation and test scenes."""

    seed: int
    train_fraction: float
    train: np.ndarray
    test: np.ndarray
    validation: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    dataset_hash: str | None = None
    kind: Literal["scene"] = "scene"
    source: Literal["bindscope", "paper"] = "bindscope"

    def with_validation(self, fraction: float = 0.1, seed: int | None = None) -> SceneSplit:
        """Move a seeded ``fraction`` of the train scenes into ``validation``."""
        fit, val = carve_validation(self.train, fraction, self.seed if seed is None else seed)
        return replace(self, train=fit, validation=np.sort(np.concatenate([self.validation, val])))


@dataclass(frozen=True, eq=False)
class ObjectSplit:
    """An object-level split at one fraction: objects and the scene groups they induce."""

    seed: int
    fraction: float
    train_objects: np.ndarray
    test_objects: np.ndarray
    train_only: np.ndarray
    test_only: np.ndarray
    mixed: np.ndarray
    validation: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    validation_objects: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    dataset_hash: str | None = None
    kind: Literal["object"] = "object"
    order: ObjectOrder = "random"

    def groups(self) -> dict[str, np.ndarray]:
        """Scene indices per group: train_only, validation, test_only, mixed."""
        return {
            "train_only": self.train_only,
            "validation": self.validation,
            "test_only": self.test_only,
            "mixed": self.mixed,
        }

    def with_validation(
        self,
        scenes: SceneSet,
        fraction: float = 0.1,
        *,
        by: Literal["scenes", "objects"] = "scenes",
        seed: int | None = None,
    ) -> ObjectSplit:
        """Carve a validation part out of the training side (never out of test).

        Parameters
        ----------
        scenes
            The scene set this split was made on.
        fraction
            Share of train_only scenes (``by="scenes"``) or of train objects (``by="objects"``).
        by
            ``"scenes"``: a seeded share of the train_only scenes. ``"objects"``: the last
            ``fraction`` of the train objects become validation objects; train_only keeps the
            scenes without them and validation holds the train-side scenes that contain them, so
            validation measures generalisation to objects unseen in fitting.
        seed
            Seed of the scene carve-out; defaults to the split's seed.
        """
        check_fraction(fraction, "validation fraction")
        if by == "scenes":
            fit, val = carve_validation(self.train_only, fraction, self.seed if seed is None else seed)
            return replace(self, train_only=fit, validation=val)
        if by != "objects":
            raise BindscopeError(f"validation must be carved by 'scenes' or 'objects', got {by!r}")
        n_val = max(1, fraction_count(fraction, len(self.train_objects)))
        if n_val >= len(self.train_objects):
            raise BindscopeError(
                f"a validation fraction of {fraction} leaves no fitting objects out of "
                f"{len(self.train_objects)} train objects; lower it or raise the split fraction"
            )
        in_order = ordered_objects(scenes.space, self.seed, self.order)[: len(self.train_objects)]
        val_objects = in_order[-n_val:]  # the last train objects of the seeded order
        ids = scenes.object_ids()[self.train_only]
        has_val = np.isin(ids, val_objects).any(axis=1)
        return replace(
            self,
            train_only=self.train_only[~has_val],
            validation=self.train_only[has_val],
            validation_objects=np.sort(val_objects),
        )


Split = SceneSplit | ObjectSplit


def carve_validation(
    indices: np.ndarray, fraction: float, seed: int, *, min_count: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``indices`` into (fit, validation), validation = a seeded ``fraction`` of them.

    ``min_count`` raises the validation part to at least that many indices (when it leaves
    some to fit on).
    """
    check_fraction(fraction, "validation fraction")
    check_seed(seed, "validation seed")
    indices = _indices(indices)
    n_val = max(fraction_count(fraction, len(indices)), min(min_count, len(indices) - 1))
    if n_val == 0 or n_val == len(indices):
        raise BindscopeError(
            f"a validation fraction of {fraction} of {len(indices)} scenes leaves an empty part; "
            "choose a fraction that keeps both parts non-empty"
        )
    perm = np.random.default_rng(seed).permutation(indices)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def scene_split(
    num_scenes: int,
    train_fraction: float = 0.4,
    seed: int = 0,
    *,
    dataset_hash: str | None = None,
    source: str = "bindscope",
) -> SceneSplit:
    """Permute scenes with ``seed``; the first ``floor(train_fraction * N)`` train, the rest test.

    ``source="paper"`` draws the permutation as the research code does (``torch.randperm``
    under a generator seeded with ``seed``; its train count ``int(train_fraction * N)``), so seed
    0 selects the research code's scenes exactly.
    """
    f = check_fraction(train_fraction, "train_fraction")
    check_seed(seed, "split seed")
    if source not in SPLIT_SOURCES:
        raise BindscopeError(f"unknown split source {source!r}; choose {' or '.join(SPLIT_SOURCES)}")
    n_train = fraction_count(f, num_scenes) if source == "bindscope" else int(f * num_scenes)
    if n_train == 0 or n_train == num_scenes:
        raise BindscopeError(
            f"train_fraction {train_fraction} of {num_scenes} scenes leaves an empty train or test "
            "set; choose a fraction that keeps both non-empty"
        )
    perm = _permutation(num_scenes, seed, source)
    return SceneSplit(
        seed=int(seed),
        train_fraction=f,
        train=np.sort(perm[:n_train]),
        test=np.sort(perm[n_train:]),
        dataset_hash=dataset_hash,
        source="paper" if source == "paper" else "bindscope",
    )


def _permutation(n: int, seed: int, source: str) -> np.ndarray:
    if source == "bindscope":
        return np.random.default_rng(seed).permutation(n)
    import torch  # only the research code's permutation needs it

    return torch.randperm(n, generator=torch.Generator().manual_seed(int(seed))).numpy()


def object_order(num_objects: int, seed: int) -> np.ndarray:
    """The seeded permutation of object ids that every object split of ``seed`` shares."""
    return np.random.default_rng(seed).permutation(num_objects)


def covering_order(space: ConceptSpace, seed: int) -> np.ndarray:
    """The seeded object order with a cover of every concept value moved to the front.

    Greedy set cover: again and again the first object in the seeded order that holds the most
    values not yet held, until every value is held (``max(sizes)`` objects on a full grid); then
    the other objects in the seeded order.
    """
    order = object_order(space.num_objects, seed)
    offsets = np.concatenate([[0], np.cumsum(space.sizes)[:-1]]).astype(np.int64)
    codes = space.object_values(order) + offsets  # [U, C] one id per (concept, value)
    held = np.zeros(int(sum(space.sizes)), dtype=bool)
    taken = np.zeros(len(order), dtype=bool)
    front: list[int] = []
    while not held[np.unique(codes)].all():
        gain = np.where(taken, -1, (~held[codes]).sum(axis=1))
        first = int(np.argmax(gain))  # the first of the most gaining, in the seeded order
        front.append(first)
        taken[first] = True
        held[codes[first]] = True
    return np.concatenate([order[front], order[~taken]])


def swap_units(space: ConceptSpace) -> np.ndarray:
    """Per object ``[U]``: its unit of a ``closed`` split, the objects a relation or count swap moves it among.

    Two objects share a unit when they agree in every concept but the place and the count, and (a relation
    space) their places lie on one axis (``left of`` / ``right of``). Units are numbered in order of their
    first object; every unit has the same size.
    """
    values = space.all_objects()
    family = [space.concepts.index(c) for c in (COUNT, PLACE) if c in space.concepts]
    if not family:
        raise BindscopeError(
            "the closed object order needs a relation or count space (relations: or counts: in its YAML); "
            "use object order covering or random"
        )
    key = values.copy()
    if COUNT in space.concepts:
        key[:, space.concepts.index(COUNT)] = 0  # every count of an object in one unit
    if PLACE in space.concepts:
        names = space.values[space.concepts.index(PLACE)]
        axis = np.array([min(i, names.index(CONVERSE[v])) for i, v in enumerate(names)])
        key[:, space.concepts.index(PLACE)] = axis[values[:, space.concepts.index(PLACE)]]
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)


def closed_order(space: ConceptSpace, seed: int) -> np.ndarray:
    """Object ids unit by unit (:func:`swap_units`), the units in a seeded order, objects by id inside one."""
    units = swap_units(space)
    rank = np.argsort(np.random.default_rng(seed).permutation(int(units.max()) + 1))
    return np.lexsort((np.arange(len(units)), rank[units]))


def unit_size(space: ConceptSpace) -> int:
    """The objects in one unit of a ``closed`` split."""
    return int(np.bincount(swap_units(space)).max())


def ordered_objects(space: ConceptSpace, seed: int, order: str = "random") -> np.ndarray:
    """Object ids in the order their splits take them as train objects (see :data:`OBJECT_ORDERS`)."""
    if order == "random":
        return object_order(space.num_objects, seed)
    if order == "covering":
        return covering_order(space, seed)
    if order == "closed":
        return closed_order(space, seed)
    raise BindscopeError(f"unknown object order {order!r}; choose {' or '.join(OBJECT_ORDERS)}")


def object_split(
    scenes: SceneSet,
    fraction: float,
    seed: int = 0,
    *,
    dataset_hash: str | None = None,
    order: ObjectOrder = "random",
) -> ObjectSplit:
    """Object-level split at one fraction; nested with every other fraction of the same seed."""
    return object_splits(scenes, [fraction], seed, dataset_hash=dataset_hash, order=order)[0]


def object_splits(
    scenes: SceneSet,
    fractions: Sequence[float],
    seed: int = 0,
    *,
    dataset_hash: str | None = None,
    order: ObjectOrder = "random",
) -> list[ObjectSplit]:
    """Object-level splits at several fractions sharing one object order (train sets nested);
    ``order`` is ``random``, ``covering`` or ``closed`` (see the module doc; a closed split takes
    ``floor(f * U)`` train objects rounded down to whole units)."""
    if len(fractions) == 0:
        raise BindscopeError("give at least one fraction")
    check_seed(seed, "split seed")
    u = scenes.space.num_objects
    ranked = ordered_objects(scenes.space, seed, order)
    ids = scenes.object_ids()
    present = ids != PAD
    rank = np.full(ids.shape, -1, dtype=np.int64)
    rank[present] = np.argsort(ranked)[ids[present]]  # position of each object in the order
    worst = np.where(present, rank, -1).max(axis=1)  # a scene is train_only iff all ranks < n
    best = np.where(present, rank, u).min(axis=1)  # ... and test_only iff all ranks >= n
    out = []
    step = unit_size(scenes.space) if order == "closed" else 1  # a closed split cuts between units
    for fraction in fractions:
        f = check_fraction(fraction)
        n_train = fraction_count(f, u) // step * step
        if n_train == 0 or n_train == u:
            raise BindscopeError(
                f"fraction {fraction} of {u} objects leaves no {'train' if n_train == 0 else 'test'} "
                f"objects; choose a fraction in [{1 / u:.4g}, {(u - 1) / u:.4g}]"
            )
        out.append(
            ObjectSplit(
                seed=int(seed),
                fraction=f,
                train_objects=np.sort(ranked[:n_train]),
                test_objects=np.sort(ranked[n_train:]),
                train_only=np.flatnonzero(worst < n_train),
                test_only=np.flatnonzero(best >= n_train),
                mixed=np.flatnonzero((worst >= n_train) & (best < n_train)),
                dataset_hash=dataset_hash,
                order=order,
            )
        )
    return out


_ARRAY_FIELDS = {
    "scene": ("train", "test", "validation"),
    "object": (
        "train_objects",
        "test_objects",
        "train_only",
        "test_only",
        "mixed",
        "validation",
        "validation_objects",
    ),
}


def split_to_dict(split: Split) -> dict:
    """A JSON-ready dict of the split, arrays as lists."""
    data = asdict(split)
    for name in _ARRAY_FIELDS[split.kind]:
        data[name] = _indices(data[name]).tolist()
    return {"format": SPLIT_FORMAT, **data}


def split_from_dict(data: dict) -> Split:
    """Inverse of :func:`split_to_dict`, with validation of the fields."""
    if not isinstance(data, dict) or data.get("format") != SPLIT_FORMAT:
        raise BindscopeError(f"not a bindscope split file (expected format {SPLIT_FORMAT!r})")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _ARRAY_FIELDS:
        raise BindscopeError(f"split kind must be 'scene' or 'object', got {short_repr(kind)}")
    cls = SceneSplit if kind == "scene" else ObjectSplit
    check_fields(data, _FIELD_TYPES, f"{kind} split", "make it again with `bindscope dataset split`")
    for name, allowed in (("source", ("bindscope", "paper")), ("order", OBJECT_ORDERS)):
        if data.get(name, allowed[0]) not in allowed:
            raise BindscopeError(
                f"{kind} split: {name} must be one of {', '.join(allowed)}, got {short_repr(data[name])}"
            )
    fields = {k: v for k, v in data.items() if k != "format"}
    for name in _ARRAY_FIELDS[kind]:
        fields[name] = _index_list(fields.get(name, []), name)
    try:
        split = cls(**fields)
    except TypeError as exc:
        raise BindscopeError(f"malformed {kind} split: {exc}") from None
    check_split(split)
    return split


#: Types of a split file's scalar fields (checked when present).
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "seed": int,
    "train_fraction": (int, float),
    "fraction": (int, float),
    "dataset_hash": (str, type(None)),
    "source": str,
    "order": str,
}


def _index_list(values: object, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged nesting
        raise BindscopeError(f"split field {name!r} must be a list of whole numbers") from None
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise BindscopeError(f"split field {name!r} must be a list of whole numbers")
    if arr.size and arr.min() < 0:
        raise BindscopeError(f"split field {name!r} holds a negative index ({arr.min()})")
    return arr.astype(np.int64)


def check_split(split: Split) -> None:
    """Check a split's invariants: its fraction, and that its parts are disjoint."""
    check_fraction(split.train_fraction if split.kind == "scene" else split.fraction)
    if split.kind == "scene":
        parts = {"train": split.train, "validation": split.validation, "test": split.test}
    else:
        parts = {k: v for k, v in split.groups().items()}
        _check_disjoint({"train_objects": split.train_objects, "test_objects": split.test_objects})
        if len(split.validation_objects) and not np.isin(split.validation_objects, split.train_objects).all():
            raise BindscopeError("split: validation_objects must be train objects")
    _check_disjoint(parts)


def _check_disjoint(parts: dict[str, np.ndarray]) -> None:
    names = list(parts)
    for i, a in enumerate(names):
        if len(np.unique(parts[a])) != len(parts[a]):
            raise BindscopeError(f"split: {a} lists an index twice")
        for b in names[i + 1 :]:
            both = np.intersect1d(parts[a], parts[b])
            if len(both):
                raise BindscopeError(f"split: {a} and {b} overlap (e.g. index {both[0]}); they must be disjoint")


def split_file_name(split: Split) -> str:
    """The file name ``bindscope dataset split`` gives a split: level, seed and fraction."""
    if isinstance(split, SceneSplit):
        return f"scene_seed{split.seed}_f{split.train_fraction:g}.json"
    return f"object_seed{split.seed}_f{split.fraction:g}.json"


@writes("path", what="split file")
def save_split(split: Split, path: str | Path) -> Path:
    """Write ``split`` (with its seed and fraction) to a JSON file atomically."""
    path = Path(path)
    atomic_write_text(path, json.dumps(split_to_dict(split)))
    return path


def load_split(path: str | Path, dataset_hash: str | None = None) -> Split:
    """Read a split written by :func:`save_split`; with ``dataset_hash``, check it belongs there."""
    path = Path(path)
    split = split_from_dict(read_json(path, "split file"))
    if dataset_hash is not None and split.dataset_hash not in (None, dataset_hash):
        raise BindscopeError(
            f"split file {path} was made for dataset hash {split.dataset_hash[:12]}, not "
            f"{dataset_hash[:12]}; make a split for this dataset with `bindscope dataset split`"
        )
    return split
