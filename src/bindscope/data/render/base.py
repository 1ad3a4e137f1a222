"""What every renderer takes and returns: a batch of scenes as arrays in, RGB images out.

A renderer is a pure function ``render(batch, *, width, height, jitter, seed) -> uint8 [B, H, W, 3]``
over a :class:`SceneBatch`. It knows nothing about datasets or files: the dataset layer maps
concept values to palette colors and shape codes, and writes the PNGs.

Beyond its slot, an object may have a **place** (its side of a relation, :data:`PLACES`): it is then drawn at
that place's position, so that the relation reads unambiguously, and a **count**: it is then drawn as that many
copies inside its cell. ``read_back(images, num_slots, *, places, copies) -> Readout`` reads objects back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.families import CONVERSE, MAX_COUNT

#: Named colors and their RGB values (0-255). CLEVR's eight come first, with CLEVR's own values.
PALETTE: dict[str, tuple[int, int, int]] = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (255, 238, 51),
    "orange": (255, 140, 0),
    "pink": (255, 105, 180),
    "black": (20, 20, 20),
    "white": (245, 245, 245),
}

#: Places an object can stand at (a relation's sides, :data:`bindscope.space.families.CONVERSE`); ``places`` codes.
PLACES: tuple[str, ...] = tuple(CONVERSE)
#: Most copies of one object (``counts`` values run 1..MAX_COPIES).
MAX_COPIES = MAX_COUNT
#: Where the copies of an object stand in its cell, per count: in a 2 x 2 grid of sub-cells, in units of a
#: sub-cell's half-size from the cell's centre, x to the right, y down (towards the viewer). 1: the middle;
#: 2: one above the other; 3: two above, one below; 4: all four.
COPY_OFFSETS: dict[int, tuple[tuple[float, float], ...]] = {
    1: ((0.0, 0.0),),
    2: ((0.0, -1.0), (0.0, 1.0)),
    3: ((-1.0, -1.0), (1.0, -1.0), (0.0, 1.0)),
    4: ((-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)),
}


@dataclass(frozen=True)
class SceneBatch:
    """B scenes of up to K objects each, as arrays.

    Attributes
    ----------
    colors : float32 [B, K, 3]
        RGB in 0..1 of each object (ignored where ``shapes`` is -1).
    shapes : int [B, K]
        Index into the renderer's ``SHAPES`` tuple; -1 where the slot is empty.
    slots : int [B, K]
        Which of ``num_slots`` layout positions each object stands in (row k usually slot k; a
        single-object image puts its one object at any slot).
    num_slots : int
        Number of layout positions (the dataset's K).
    materials : int [B, K] or None
        0 rubber (matte), 1 metal (shiny); None: all rubber. Renderers without materials ignore it.
    scales : float [B, K] or None
        Size multiplier per object (1 = the default size); None: all 1.
    keys : int [B]
        A stable key per scene (its row in the dataset): jitter is drawn from ``seed`` and the
        key, so an image never depends on which batch it was rendered in.
    places : int [B, K] or None
        Index into :data:`PLACES` per object: it stands at that place's position (its slot then only keys
        its jitter); None: every object stands at its slot.
    counts : int [B, K] or None
        Copies of each object (1..MAX_COPIES), drawn side by side in its cell; None: one each.
    """

    colors: np.ndarray
    shapes: np.ndarray
    slots: np.ndarray
    num_slots: int
    keys: np.ndarray
    materials: np.ndarray | None = None
    scales: np.ndarray | None = None
    places: np.ndarray | None = None
    counts: np.ndarray | None = None

    def __post_init__(self) -> None:
        b, k = self.shapes.shape
        if self.colors.shape != (b, k, 3) or self.slots.shape != (b, k) or self.keys.shape != (b,):
            raise BindscopeError("SceneBatch arrays disagree in shape: colors [B,K,3], shapes/slots [B,K], keys [B]")
        if self.num_slots < 1 or ((self.slots < 0) | (self.slots >= self.num_slots))[self.shapes >= 0].any():
            raise BindscopeError(f"slot indices must lie in 0..{self.num_slots - 1}")
        present = self.shapes >= 0
        for name, values, top in (("places", self.places, len(PLACES) - 1), ("counts", self.counts, MAX_COPIES)):
            if values is None:
                continue
            low = 1 if name == "counts" else 0
            if values.shape != (b, k) or ((values < low) | (values > top))[present].any():
                raise BindscopeError(
                    f"SceneBatch {name} must be ints [B, K] in {low}..{top} where a slot holds an object"
                )

    def __len__(self) -> int:
        return int(self.shapes.shape[0])

    def jitter_rng(self, seed: int, row: int) -> np.random.Generator:
        """The generator of one scene's jitter: the same for a scene whatever batch it is in."""
        return np.random.default_rng([int(seed), int(self.keys[row])])

    def jitter_draws(self, seed: int, shape: tuple[int, ...]) -> np.ndarray:
        """Uniform draws in [-1, 1), float64 [B, *shape]: row b holds ``jitter_rng(seed, b).uniform(-1, 1, shape)``.

        Seeding a generator per scene is most of the cost of jitter, and numpy seeds one at a time: here the
        seed states (numpy's :class:`~numpy.random.SeedSequence` of ``[seed, key]``) are worked out for every
        scene at once (:func:`seed_states`), and each scene's PCG64 only draws. Seeds or keys outside
        ``[0, 2**32)`` take numpy's own path.
        """
        keys = np.asarray(self.keys, dtype=np.int64)
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= int(seed) < 1 << 32 and ((keys >= 0) & (keys < 1 << 32)).all()):
            return np.stack([self.jitter_rng(seed, row).uniform(-1.0, 1.0, size=shape) for row in range(len(self))])
        states = seed_states(np.stack([np.full(keys.shape, int(seed)), keys], axis=1).astype(np.uint32))
        seeded = [cast(Any, _Seeded(state)) for state in states]  # numpy's stubs name SeedSequence only
        raw = np.array([np.random.PCG64(s).random_raw(count) for s in seeded], dtype=np.uint64)
        raw = raw.reshape(len(self), *shape)
        return -1.0 + 2.0 * ((raw >> np.uint64(11)) * (1.0 / 9007199254740992.0))  # Generator.uniform's double


#: numpy's SeedSequence constants (numpy/random/bit_generator.pyx): pool of 4 words, hash and mix multipliers.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _POOL = 0xCA01F9DD, 0x4973F715, 4


def seed_states(entropy: np.ndarray) -> np.ndarray:
    """PCG64 seed states, uint64 [N, 4]: row n is ``SeedSequence(entropy[n]).generate_state(4, np.uint64)``.

    ``entropy`` is uint32 [N, W], W <= 4: each row the words of numpy's entropy list (an int below 2**32 is
    one word), so that ``[seed, key]`` gives ``default_rng([seed, key])``'s state. numpy's algorithm (Melissa
    O'Neill's seed_seq) on every row at once, in wrapping uint32 arithmetic.
    """
    n, words = entropy.shape
    if words > _POOL:
        raise ValueError(f"seed_states takes at most {_POOL} entropy words, got {words}")
    u32 = np.uint32
    const = [u32(_INIT_A)]

    def hashmix(value: np.ndarray) -> np.ndarray:
        value = value ^ const[0]
        const[0] = u32(const[0] * u32(_MULT_A))
        value = value * const[0]
        return value ^ (value >> u32(16))

    with np.errstate(over="ignore"):
        pool: list[np.ndarray] = [hashmix(entropy[:, i] if i < words else np.zeros(n, dtype=u32)) for i in range(_POOL)]
        for src in range(_POOL):
            for dst in range(_POOL):
                if src != dst:
                    mixed: np.ndarray = u32(_MIX_L) * pool[dst] - u32(_MIX_R) * hashmix(pool[src])
                    pool[dst] = mixed ^ (mixed >> u32(16))
        state, const[0] = [], u32(_INIT_B)
        for i in range(2 * _POOL):  # 8 uint32 words, read as 4 little-endian uint64
            value = pool[i % _POOL] ^ const[0]
            const[0] = u32(const[0] * u32(_MULT_B))
            value = value * const[0]
            state.append(value ^ (value >> u32(16)))
    low, high = np.stack(state[0::2], axis=1).astype(np.uint64), np.stack(state[1::2], axis=1).astype(np.uint64)
    return low | (high << np.uint64(32))


class _Seeded(np.random.bit_generator.ISeedSequence):
    """A seed sequence whose state is already known (from :func:`seed_states`)."""

    def __init__(self, state: np.ndarray) -> None:
        self.state = state

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        return self.state


@dataclass(frozen=True)
class Readout:
    """What ``read_back`` recovers from images, per cell: a slot, or a place (cell p holds the object at
    ``PLACES[p]``) when read by place.

    Attributes
    ----------
    colors, shapes : object [B, S]
        Names; "" where a cell holds nothing; for copies, the name most of their pixels show (:func:`vote`).
    counts : int [B, S] or None
        How many separate copies each cell holds (None where copies were not counted).
    """

    colors: np.ndarray
    shapes: np.ndarray
    counts: np.ndarray | None = None


def pair_sides(image: np.ndarray, x: np.ndarray, y: np.ndarray, num_images: int, centres: np.ndarray) -> np.ndarray:
    """Which side of its image's pair each blob (centroid x, y; image index) is on: 0 left, 1 right, 2 top,
    3 bottom.

    ``centres`` [4, 2] are the pixel centres of the left, right, top and bottom cells. An image whose blobs lie
    further from the middle across (in units of half the left-right gap) than up or down (in units of half the
    top-bottom gap), summed over its blobs, holds a left/right pair, and each blob is on the side of its half;
    otherwise a top/bottom pair. Cells of the two pairs overlap near the middle, so the nearest cell centre
    would misplace copies there.
    """
    left, right, top, bottom = np.asarray(centres, dtype=np.float64)
    u = (x - (left[0] + right[0]) / 2) / ((right[0] - left[0]) / 2)
    v = (y - (top[1] + bottom[1]) / 2) / ((bottom[1] - top[1]) / 2)
    across = np.bincount(image, weights=np.abs(u), minlength=num_images)
    updown = np.bincount(image, weights=np.abs(v), minlength=num_images)
    return np.where((across >= updown)[image], np.where(u < 0, 0, 1), np.where(v < 0, 2, 3))


#: A separate blob counts as a copy when it has at least this share of the pixels of its cell's largest blob
#: (copies differ in size by perspective and jitter alone; a stray pixel at a star's tip does not count).
COPY_SHARE = 0.25


def copies_kept(group: np.ndarray, size: np.ndarray, groups: int) -> np.ndarray:
    """Which blobs (cell ``group``, pixel count ``size``) count as copies: at least :data:`COPY_SHARE` of the
    largest blob of their cell."""
    largest = np.zeros(groups, dtype=np.int64)
    np.maximum.at(largest, group, size)
    return size >= COPY_SHARE * largest[group]


def cell_readout(
    group: np.ndarray, colors: np.ndarray | list[str], shapes: np.ndarray | list[str], size: np.ndarray, shape: tuple
) -> Readout:
    """The :class:`Readout` of kept copies (cell ``group``, names, pixel counts) over cells of ``shape`` [B, S]:
    each cell's names by :func:`vote`, and its copies counted."""
    groups = shape[0] * shape[1]
    return Readout(
        vote(group, colors, size, groups).reshape(shape),
        vote(group, shapes, size, groups).reshape(shape),
        np.bincount(group, minlength=groups).reshape(shape),
    )


def vote(group: np.ndarray, names: np.ndarray | list[str], weight: np.ndarray, groups: int) -> np.ndarray:
    """Per group the name with the largest total weight among its members ("" for a group without members;
    ties go to the name first in sorted order)."""
    names = np.asarray(names, dtype=object)
    out = np.full(groups, "", dtype=object)
    if names.size == 0:
        return out
    table, code = np.unique(names.astype(str), return_inverse=True)
    total = np.zeros((groups, len(table)))
    np.add.at(total, (group, code), weight)
    have = total.sum(axis=1) > 0
    out[have] = table[np.argmax(total[have], axis=1)].astype(object)
    return out
