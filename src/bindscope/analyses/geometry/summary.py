"""The numbers of ``geometry``'s ``summary.json``: a typed model, and how it is read off a result."""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd

from bindscope.analyses.geometry.compute import GeometryResult
from bindscope.analyses.geometry.picture import MdsPicture
from bindscope.analyses.results import Summary
from bindscope.core.tidy import spread
from bindscope.core.validation import Schema
from bindscope.estimators.metrics import Spread
from bindscope.space.concepts import ConceptSpace

#: The fraction the terminal reports held-out numbers at (the nearest one run).
HEADLINE_FRACTION = 0.5


#: Rank axes: per ordinal concept, per method (extremes, least_squares), per labelled count, per metric
#: (spearman, spearman_ceiling, pairwise) its spread over seeds.
RankAxes = dict[str, dict[str, dict[str, dict[str, Spread]]]]


class HeldOut(Schema):
    """The numbers at one fraction of seen objects: held-out factorization R² raw and whitened (None where no
    unseen object is determined), each head's accuracy on the unseen objects (``object``: all concepts at
    once), how many unseen objects, and how many of them the seen ones do not determine (mean over seeds)."""

    r2_raw: Spread | None
    r2_whitened: Spread | None
    heads: dict[str, Spread]
    objects: int
    undetermined: float = 0.0


class ConceptShape(Schema):
    """One concept's components: numerical, effective and largest possible rank; its share of the variance."""

    numerical: float | None
    effective: float | None
    max: float | None
    share: float | None
    share_whitened: float | None


class Orthogonality(Schema):
    """Mean |cos| between components of one concept and of different concepts; per concept pair
    (``a|b``), its smallest and mean principal angle (degrees)."""

    within: float | None
    across: float | None
    angles: dict[str, dict[str, float]]


class PositionNumbers(Schema):
    """The numbers of one slot position's object vectors."""

    r2: float | None
    r2_whitened: float | None
    concepts: dict[str, ConceptShape]
    orthogonality: Orthogonality
    rank_sum: float | None
    held_out: dict[str, HeldOut]
    rank_axes: RankAxes


class ConceptInfo(Schema):
    """A concept of the space: how many values, whether ordinal."""

    values: int
    ordinal: bool


class MdsNumbers(Schema):
    """The MDS picture: the concepts drawn, the quadruple's value names, its points and composites, its stress."""

    roles: dict[str, str]
    quad: list[str]
    points: int
    composites: int
    stress: float
    normalized_stress: float


class GeometrySummary(Summary):
    """The main numbers of ``bindscope geometry``: the object vectors (their source, width, concepts and count),
    the fractions run and the one the terminal shows, chance per head, the numbers of each slot position, and
    the MDS picture (None, and why, when absent)."""

    source: Literal["single", "pos-avg"]
    dim: int
    concepts: dict[str, ConceptInfo]
    objects: int
    fractions: list[float]
    headline_fraction: float
    chance: dict[str, float]
    positions: list[PositionNumbers]
    mds: MdsNumbers | None
    mds_absent: str | None


def geometry_summary(result: GeometryResult) -> GeometrySummary:
    """The summary of one ``geometry`` result."""
    table, space = result.table, result.space
    chances = table[table.variant == "chance"]
    return GeometrySummary(
        source=result.source,
        dim=result.dim,
        concepts={c: ConceptInfo(values=n, ordinal=c in space.ordinal) for c, n in zip(space.concepts, space.sizes)},
        objects=space.num_objects,
        fractions=list(result.fractions),
        headline_fraction=headline_fraction(result.fractions),
        chance={str(g): float(v) for g, v in zip(chances.group, chances.value)},
        positions=[position_numbers(table[table.position == p], space) for p in range(result.positions)],
        mds=None if result.mds is None else mds_numbers(result.mds),
        mds_absent=result.mds_absent,
    )


def headline_fraction(fractions: tuple[float, ...] | list[float]) -> float:
    """The fraction the terminal reports: 0.5, else the nearest one run."""
    return min(fractions, key=lambda f: (abs(f - HEADLINE_FRACTION), f))


def mds_numbers(mds: MdsPicture) -> MdsNumbers:
    return MdsNumbers(
        roles=mds.roles,
        quad=mds.quad,
        points=len(mds.picture.labels),
        composites=mds.composites,
        stress=mds.picture.stress,
        normalized_stress=mds.picture.normalized_stress,
    )


def value(table: pd.DataFrame, variant: str, group: str, metric: str) -> float | None:
    """The one value of (variant, group, metric), None where the table has none."""
    part = table[(table.variant == variant) & (table.group == group) & (table.metric == metric)]
    return float(part["value"].iloc[0]) if len(part) else None


def position_numbers(table: pd.DataFrame, space: ConceptSpace) -> PositionNumbers:
    """The numbers of one slot position (``table``: its rows)."""
    angles = table[table.variant == "angles"]
    return PositionNumbers(
        r2=value(table, "factorization", "all", "r2"),
        r2_whitened=value(table, "factorization_whitened", "all", "r2"),
        concepts={c: concept_shape(table, c) for c in space.concepts},
        orthogonality=Orthogonality(
            within=value(table, "orthogonality", "within", "mean_abs_cos"),
            across=value(table, "orthogonality", "across", "mean_abs_cos"),
            angles={
                str(pair): {str(m): float(v) for m, v in zip(part.metric, part.value)}
                for pair, part in angles.groupby("group", sort=False)
            },
        ),
        rank_sum=value(table, "rank", "all", "sum_rank"),
        held_out=held_out(table),
        rank_axes=rank_axes(table),
    )


def concept_shape(table: pd.DataFrame, concept: str) -> ConceptShape:
    return ConceptShape(
        numerical=value(table, "rank", concept, "numerical_rank"),
        effective=value(table, "rank", concept, "effective_rank"),
        max=value(table, "rank", concept, "max_rank"),
        share=value(table, "factorization", concept, "share"),
        share_whitened=value(table, "factorization_whitened", concept, "share"),
    )


def held_out(table: pd.DataFrame) -> dict[str, HeldOut]:
    """Per fraction run (``f"{f:g}"``), its held-out numbers."""
    held = table[table.fraction.notna() & table.variant.isin(["raw", "whitened", "heads"])]
    out: dict[str, HeldOut] = {}
    for f, part in held.groupby("fraction", sort=True):
        r2 = {v: part[(part.variant == v) & (part.metric == "r2_test")]["value"] for v in ("raw", "whitened")}
        heads = part[part.variant == "heads"]
        left_out = part[(part.variant == "raw") & (part.metric == "undetermined")]["value"]
        out[f"{f:g}"] = HeldOut(
            r2_raw=spread(r2["raw"]) if len(r2["raw"]) else None,
            r2_whitened=spread(r2["whitened"]) if len(r2["whitened"]) else None,
            heads={str(g): spread(h["value"]) for g, h in heads.groupby("group", sort=False)},
            objects=int(heads["objects"].iloc[0]),  # the unseen objects
            undetermined=float(left_out.mean()) if len(left_out) else 0.0,  # unseen objects left out, per seed
        )
    return out


def rank_axes(table: pd.DataFrame) -> RankAxes:
    """Per ordinal concept, method, labelled count and metric: its spread over seeds."""
    axes = table[table.variant.str.startswith("rank_axis:")]
    out: dict[str, Any] = {}
    for key, part in axes.groupby(["group", "variant", "labelled", "metric"], sort=True):
        concept, variant, n, metric = (str(k) for k in key)
        method = variant.split(":", 1)[1]
        out.setdefault(concept, {}).setdefault(method, {}).setdefault(f"{int(float(n))}", {})[metric] = spread(
            part["value"]
        )
    return out
