"""The settings of ``geometry``: the held-out sweep, the linear heads, the rank, the ordinal concepts, the MDS."""

from __future__ import annotations

from pydantic import Field, field_validator

from bindscope.analyses.geometry.structure import RANK_TOLERANCE
from bindscope.core.validation import MAX_ITEMS, MAX_SCENE_COUNT, Device, Seeds, Settings, short_repr
from bindscope.space.splits import DEFAULT_SEEDS, check_fractions

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LABELLED = (2, 8, 32)


class GeometrySettings(Settings):
    """Object-level fractions and seeds of the held-out sweep, the ordinal concepts, the MDS quadruple.

    ``fractions`` x ``seeds``: object-level splits (covering order) of the held-out factorization and
    the linear heads. ``attribute`` / ``noun`` and ``quad``: the MDS picture.
    """

    fractions: tuple[float, ...] = Field(
        FRACTIONS, description="Object-level fractions seen by the held-out fits and heads (0.1,0.2,...,0.9)."
    )
    seeds: Seeds = Field(
        DEFAULT_SEEDS, description="Seed ids, comma-separated (splits and initialisations); default 0,1,2."
    )
    whitening_ridge: float = Field(
        0.1, ge=0, description="Whitening: ridge added to the covariance, times its mean eigenvalue (0.1)."
    )
    head_c: float = Field(10.0, gt=0, description="Linear heads: inverse L2 strength C (10).")
    rank_tolerance: float = Field(
        RANK_TOLERANCE,
        gt=0,
        lt=1,
        description="Numerical rank: singular values above this times the largest (1e-6).",
    )
    ordinal: tuple[str, ...] = Field(
        (),
        description="Concepts to treat as ordinal (values in the space's order), comma-separated, besides those the "
        "dataset marks; they get rank axes.",
    )
    labelled: tuple[int, ...] = Field(
        LABELLED,
        description="Labelled objects per rank axis, comma-separated (2,8,32; all of them are always added).",
    )
    attribute: str | None = Field(
        None, description="The attribute concept (default: the concept that is not the noun, in a 2-concept space)."
    )
    noun: str | None = Field(None, description="The noun concept (default: the dataset's noun).")
    quad: tuple[str, ...] | None = Field(
        None,
        description="The MDS quadruple: attribute i, noun j, attribute k, noun l as value names, e.g. "
        "red,cube,blue,sphere (default: the first two values of each).",
    )
    mds: bool = Field(True, description="Draw the MDS picture (on by default).")
    device: Device = Field(
        "cpu",
        description="Torch device of the factorization fits and the whitening: cpu, cuda, cuda:1 ... (the heads, "
        "rank axes and MDS run on the CPU).",
    )

    @field_validator("quad")
    @classmethod
    def _quad(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(v) != 4:
            raise ValueError(
                f"name attribute i, noun j, attribute k, noun l: 4 value names, e.g. red,cube,blue,sphere; got {len(v)}"
            )
        return v

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(sorted(check_fractions(v)))

    @field_validator("labelled")
    @classmethod
    def _labelled(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 2 for n in v):
            raise ValueError(f"a rank axis needs at least 2 labelled objects, got {short_repr(list(v))}")
        if any(n > MAX_SCENE_COUNT for n in v):
            raise ValueError(f"labelled counts must be at most {MAX_SCENE_COUNT}, got {short_repr(list(v))}")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} labelled counts, got {len(v)}")
        return tuple(sorted(set(v)))
