"""Additive decomposition (docs/method/04-decomposition.md): is a scene embedding a sum of its parts?

R² of the four exact additive models on train and held-out scenes (with controls, and beside them the ideal bag
of concepts of the same scenes), and the five-run subtraction table: the probes re-run after removing each
fitted model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bindscope.analyses.base import Progress
from bindscope.analyses.card import bag_counts
from bindscope.analyses.decompose.r2 import r2_rows
from bindscope.analyses.decompose.subtraction import RAND_VARIANTS, SUBTRACTION_VARIANTS, subtraction_run
from bindscope.core.tidy import tidy
from bindscope.estimators.floors import role_view
from bindscope.estimators.probe_runs import ProbeSettings, permuted_labels, select_scenes, with_scene_cases
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of

#: ``part``: which half of the analysis a row belongs to.
PARTS = ("additive", "subtraction")
#: The results table's own columns: the part, and the cases per seed a rate row is a share of (NaN for R²).
EXTRA_COLUMNS = ("part", "n_cases")
PARTS_COLUMN = EXTRA_COLUMNS[:1]
#: The control of the R² rows of the ideal bag of concepts (each scene as the counts of its concept values).
BAG_CONTROL = "bag"
Solvers = dict[str, dict[int, dict[str, str]]]  # subtraction variant -> seed -> probe -> solver
#: The additive design on each family's space (docs/method/11-relations-counts.md); none on an attribution space.
DESIGNS = {"relation": "role-aware", "count": "count-aware"}


def design_name(scenes: SceneSet) -> str | None:
    """``role-aware`` on a relation space, ``count-aware`` on a count space, None on any other."""
    return DESIGNS.get(family_of(scenes.space))


def decompose_analysis(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    test_fraction: float = 0.2,
    residual_mean: str = "keep",
    control: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, Solvers]:
    """R² of the four additive models (with controls and the bag of concepts) and the five-run subtraction
    probe table (with the ``concepts`` run repeated on the ``+rand`` control where it is given).

    On a relation (count) space the design is role-aware (count-aware, :func:`design_name`): its "concepts" are
    the object without its place (count) and the place (count), so ``concept_additive`` is a vector per object
    plus one per place, and the gap asks whether an (object, place) pair has a vector of its own beyond them.

    Returns the tidy table (with the columns ``part``, additive or subtraction, and ``n_cases``) and, per
    subtraction variant, seed and probe, the solver used.
    """
    _, y, scenes, control = select_scenes(y, scenes, settings.scenes, control)
    total = len(SUBTRACTION_VARIANTS) + (4 + len(RAND_VARIANTS) if control is not None else 3)
    tick = progress or (lambda done, total: None)
    tick(0, total)
    source = settings.split_source
    design = role_view(scenes)  # a relation (count) space: the role-aware (count-aware) design
    rows = r2_rows(y, design, settings.seeds, test_fraction, split_source=source)
    rows += r2_rows(y, permuted_labels(design), settings.seeds, test_fraction, "permuted_labels", source)
    rows += r2_rows(bag_counts(scenes), design, settings.seeds, test_fraction, BAG_CONTROL, source)
    done = 3
    tick(done, total)
    if control is not None:
        rows += r2_rows(control, design, settings.seeds, test_fraction, "rand", source)
        done += 1
        tick(done, total)
    solvers: Solvers = {}
    for variant in SUBTRACTION_VARIANTS:
        run = subtraction_run(y, scenes, settings, variant, residual_mean, design=design)
        rows += run.rows
        solvers[variant] = run.solver
        done += 1
        tick(done, total)
    if control is not None:
        for variant in RAND_VARIANTS:
            rows += subtraction_run(control, scenes, settings, variant, residual_mean, "rand", design).rows
            done += 1
            tick(done, total)
    return with_cases(tidy(rows, PARTS_COLUMN), len(y), settings), solvers


def with_cases(table: pd.DataFrame, scenes: int, settings: ProbeSettings) -> pd.DataFrame:
    """``table`` with ``n_cases`` on the subtraction probes' accuracy rows: the scenes of their seed's group
    (chance and R² rows are no share of counted cases: NaN)."""
    counted = (table["part"] == "subtraction") & (table["variant"] != "chance")
    return with_scene_cases(table, scenes, settings, counted)
