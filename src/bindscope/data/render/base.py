"""What every renderer takes and returns: a batch of scenes as arrays in, RGB images out.

A renderer is a pure function ``render(batch, *, width, height, jitter, seed) -> uint8 [B, H, W, 3]``
over a :class:`SceneBatch`. It knows nothing about datasets or files: the dataset layer maps
concept values to palette colors and shape codes, and writes the PNGs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bindscope.core.errors import BindscopeError

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
    """

    colors: np.ndarray
    shapes: np.ndarray
    slots: np.ndarray
    num_slots: int
    keys: np.ndarray
    materials: np.ndarray | None = None
    scales: np.ndarray | None = None

    def __post_init__(self) -> None:
        b, k = self.shapes.shape
        if self.colors.shape != (b, k, 3) or self.slots.shape != (b, k) or self.keys.shape != (b,):
            raise BindscopeError("SceneBatch arrays disagree in shape: colors [B,K,3], shapes/slots [B,K], keys [B]")
        if self.num_slots < 1 or ((self.slots < 0) | (self.slots >= self.num_slots))[self.shapes >= 0].any():
            raise BindscopeError(f"slot indices must lie in 0..{self.num_slots - 1}")

    def __len__(self) -> int:
        return int(self.shapes.shape[0])

    def jitter_rng(self, seed: int, row: int) -> np.random.Generator:
        """The generator of one scene's jitter: the same for a scene whatever batch it is in."""
        return np.random.default_rng([int(seed), int(self.keys[row])])
