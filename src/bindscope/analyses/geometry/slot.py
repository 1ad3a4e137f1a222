"""The geometry of one slot's object vectors (docs/method/08-geometry.md): every measure, as tidy rows and tables.

Pure functions over arrays: :func:`slot_geometry` runs the factorization, orthogonality, rank,
held-out sweep and rank axes on the object vectors ``[U, D]`` of one slot position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.geometry.factorization import concept_shares, factorize, residual_norms, whitened_fit_scores
from bindscope.analyses.geometry.structure import (
    component_cosine_values,
    effective_rank,
    mean_cosines,
    numerical_rank,
    principal_angles,
    singular_values,
)
from bindscope.analyses.geometry.sweeps import held_out_rows, rank_axis_rows
from bindscope.core.tidy import result_row
from bindscope.estimators.additive import r2_score
from bindscope.space.concepts import ConceptSpace


@dataclass(frozen=True)
class SweepSettings:
    """What the held-out sweep and the rank axes take from the analysis settings."""

    fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    labelled: tuple[int, ...]
    whitening_ridge: float
    head_c: float
    rank_tolerance: float
    device: str = "cpu"


@dataclass
class SlotGeometry:
    """The rows and tables of one slot position."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    objects: pd.DataFrame | None = None
    spectra: pd.DataFrame | None = None
    cosines: pd.DataFrame | None = None


def factorization_rows(
    x: np.ndarray, space: ConceptSpace, present: np.ndarray, ridge: float, device: str = "cpu"
) -> tuple[list, Any]:
    """R² of the factorization on every present object, raw and whitened, and each concept's share."""
    fit = factorize(x, space, present)
    raw = r2_score(x[present], fit.predict(space.all_objects()[present])), concept_shares(x, fit, space, present)
    out = []
    for variant, (r2, shares) in (
        ("factorization", raw),
        ("factorization_whitened", whitened_fit_scores(x, fit, space, present, ridge, device)),
    ):
        out.append(result_row("geometry", variant, "all", "r2", 0, r2, objects=len(present)))
        out += [result_row("geometry", variant, c, "share", 0, v, objects=len(present)) for c, v in shares.items()]
    return out, fit


def structure_rows(
    components: list[np.ndarray], cosines: dict[str, np.ndarray], space: ConceptSpace, dim: int, tolerance: float
) -> list:
    """Within / across |cos| (the means of ``cosines``, :func:`component_cosine_values`), principal angles per
    concept pair, and the rank of each concept's components."""
    out = [result_row("geometry", "orthogonality", k, "mean_abs_cos", 0, v) for k, v in mean_cosines(cosines).items()]
    for (a, ta), (b, tb) in combinations(zip(space.concepts, components), 2):
        angles = principal_angles(ta, tb)
        if len(angles):
            out.append(result_row("geometry", "angles", f"{a}|{b}", "min_angle", 0, float(angles.min())))
            out.append(result_row("geometry", "angles", f"{a}|{b}", "mean_angle", 0, float(angles.mean())))
    total = 0
    for name, table in zip(space.concepts, components):
        rank = numerical_rank(table, tolerance)
        total += rank
        out.append(result_row("geometry", "rank", name, "numerical_rank", 0, float(rank)))
        out.append(result_row("geometry", "rank", name, "effective_rank", 0, effective_rank(table)))
        out.append(result_row("geometry", "rank", name, "max_rank", 0, float(len(table) - 1)))
    out.append(result_row("geometry", "rank", "all", "sum_rank", 0, float(total)))
    out.append(result_row("geometry", "rank", "all", "dim", 0, float(dim)))
    return out


def spectra_table(components: list[np.ndarray], space: ConceptSpace) -> pd.DataFrame:
    """Per concept, its components' singular values in descending order."""
    parts = []
    for name, table in zip(space.concepts, components):
        s = singular_values(table)
        parts.append(pd.DataFrame({"concept": name, "index": np.arange(len(s)), "singular_value": s}))
    return pd.concat(parts, ignore_index=True)


def objects_table(x: np.ndarray, fit: Any, space: ConceptSpace, present: np.ndarray) -> pd.DataFrame:
    """Per present object: its values and the share of it the factorization leaves out."""
    values = space.value_names(space.all_objects()[present])
    table = pd.DataFrame({"object": present.astype(np.int64)})
    for name, names in zip(space.concepts, values):
        table[name] = names
    table["residual"] = residual_norms(x, fit, space, present)
    return table


def slot_geometry(
    x: np.ndarray, space: ConceptSpace, present: np.ndarray, settings: SweepSettings, tick: Any = None
) -> SlotGeometry:
    """Every measure of §8 on one slot's object vectors ``x`` ``[U, D]`` (rows of absent objects unused)."""
    x = np.asarray(x, dtype=np.float64)
    out = SlotGeometry()
    rows, fit = factorization_rows(x, space, present, settings.whitening_ridge, settings.device)
    cos = component_cosine_values(fit.components)
    out.rows += rows + structure_rows(fit.components, cos, space, x.shape[1], settings.rank_tolerance)
    out.objects = objects_table(x, fit, space, present)
    out.spectra = spectra_table(fit.components, space)
    out.cosines = pd.DataFrame(
        {"kind": np.repeat(list(cos), [len(v) for v in cos.values()]), "abs_cos": np.concatenate(list(cos.values()))}
    )
    if tick:
        tick()
    out.rows += held_out_rows(
        x,
        space,
        present,
        settings.fractions,
        settings.seeds,
        ridge=settings.whitening_ridge,
        c=settings.head_c,
        device=settings.device,
    )
    if tick:
        tick()
    for concept in space.ordinal:
        out.rows += rank_axis_rows(x, space, present, concept, settings.labelled, settings.seeds)
    return out
