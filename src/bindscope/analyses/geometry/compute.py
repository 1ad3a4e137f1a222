"""Every measure of ``geometry`` (docs/method/08-geometry.md) on every slot's object vectors, then the MDS picture,
as one typed result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.base import Progress, Result
from bindscope.analyses.geometry.heads import chance
from bindscope.analyses.geometry.picture import MdsPicture, mds_picture, picture_roles, resolve_quad
from bindscope.analyses.geometry.settings import GeometrySettings
from bindscope.analyses.geometry.slot import SweepSettings, slot_geometry
from bindscope.analyses.geometry.sweeps import usable_fractions
from bindscope.analyses.geometry.vectors import ObjectVectors, object_vectors
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import KEY_COLUMNS, result_row, tidy
from bindscope.space.concepts import ConceptSpace, SceneSet

#: The results table's own columns (NaN where they do not apply): the slot position (-1 for rows of no
#: slot), the fraction of objects seen, the labelled objects of a rank axis, the objects scored, and the cases
#: per seed a rate row is a share of (the heads: unseen objects; a rank axis's pairwise order: pairs).
EXTRA_COLUMNS = ("position", "fraction", "labelled", "objects", "n_cases")
#: The further tables, one part per slot position.
TABLES = ("objects", "spectra", "cosines")


@dataclass
class GeometryResult(Result):
    """What ``geometry`` computed: the tidy table and further tables, and what the summary says of the run:
    the object vectors' source and slot positions, the embedding width, the space (ordinal concepts marked),
    the fractions run, and the MDS picture (or why there is none)."""

    source: str = field(kw_only=True)
    positions: int = field(kw_only=True)
    dim: int = field(kw_only=True)
    space: ConceptSpace = field(kw_only=True)
    fractions: tuple[float, ...] = field(kw_only=True)
    mds: MdsPicture | None = field(kw_only=True)
    mds_absent: str | None = field(kw_only=True)


def sweep_settings(settings: GeometrySettings, fractions: tuple[float, ...]) -> SweepSettings:
    """What the held-out sweep and the rank axes take from the settings, at the usable ``fractions``."""
    return SweepSettings(
        fractions,
        tuple(settings.seeds),
        settings.labelled,
        settings.whitening_ridge,
        settings.head_c,
        settings.rank_tolerance,
        settings.device,
    )


def geometry_analysis(
    inputs: AnalysisInputs, settings: GeometrySettings, progress: Progress | None = None
) -> GeometryResult:
    """Every measure on every slot's object vectors, then the MDS picture."""
    space = inputs.scenes.space.with_ordinal(settings.ordinal)
    bank = object_vectors(np.asarray(inputs.embeddings), SceneSet(space, inputs.scenes.scenes), inputs.singles)
    fractions, warnings = usable_fractions(settings.fractions, space.num_objects)
    roles, why = picture_roles(space, settings.mds, settings.attribute, settings.noun or inputs.noun)
    quad = resolve_quad(space, roles, settings.quad) if roles is not None else None  # bad names fail before the work
    total, done = 2 * bank.positions + 1, 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    rows, tables = slot_measures(bank, space, sweep_settings(settings, fractions), tick)
    rows += [result_row("geometry", "chance", g, "accuracy", 0, v, position=-1) for g, v in chance(space).items()]
    mds = None if roles is None or quad is None else mds_picture(inputs, bank, space, roles, quad)
    if mds is not None:
        rows.append(result_row("geometry", "mds", "all", "stress", 0, mds.picture.stress, position=-1))
        rows.append(
            result_row("geometry", "mds", "all", "normalized_stress", 0, mds.picture.normalized_stress, position=-1)
        )
        tables["mds_points"] = mds.points()
    tick()
    return GeometryResult(
        results_table(rows),
        tables,
        warnings,
        source=bank.source,
        positions=bank.positions,
        dim=int(np.shape(inputs.embeddings)[1]),
        space=space,
        fractions=fractions,
        mds=mds,
        mds_absent=None if mds is not None else why,
    )


def slot_measures(
    bank: ObjectVectors, space: ConceptSpace, sweep: SweepSettings, tick: Any
) -> tuple[list[dict[str, Any]], dict[str, pd.DataFrame]]:
    """The rows and tables of every slot position (its ``position`` marked on each)."""
    rows: list[dict[str, Any]] = []
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    for p in range(bank.positions):
        present = np.flatnonzero(bank.present[p])
        if len(present) < 2:
            raise BindscopeError(f"slot {p} has {len(present)} object vector(s); the geometry needs at least two")
        slot = slot_geometry(bank.vectors[p], space, present, sweep, tick)
        rows += [{**r, "position": p} for r in slot.rows]
        for name in TABLES:
            part = getattr(slot, name)
            part.insert(0, "position", p)
            parts[name].append(part)
    return rows, {name: pd.concat(frames, ignore_index=True) for name, frames in parts.items()}


def results_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The tidy table; ``fraction``, ``labelled`` and ``objects`` are NaN on the rows they do not apply to."""
    table = tidy(pd.DataFrame(rows).reindex(columns=[*KEY_COLUMNS, *EXTRA_COLUMNS]), EXTRA_COLUMNS)
    table["position"] = table["position"].astype("int64")
    table["n_cases"] = table["n_cases"].astype("Int64")
    return table
