"""Additive decomposition (docs/method.md §4): is a scene embedding a sum of its parts?

R² of the four exact additive models on train and held-out scenes (with controls), and the
five-run subtraction table: the probes re-run after removing each fitted model.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import field_validator

from bindscope.analyses.base import Analysis, Progress, Result, Rows
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.core.tidy import NO_CONTROL, result_row, tidy
from bindscope.estimators.additive import MODELS, design_columns, fit_additive, r2_score, subtract
from bindscope.estimators.metrics import format_spread, nested
from bindscope.estimators.probe_runs import (
    ProbeSettings,
    accuracy_summary,
    approximate_warnings,
    chance_summary,
    pct,
    permuted_labels,
    probe_variant,
    select_scenes,
)
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import check_fraction, scene_split

SUBTRACTION_VARIANTS = ("base", "objects", "objects_perm", "concepts", "concepts_perm")
#: ``part``: which half of the analysis a row belongs to.
PARTS = ("additive", "subtraction")


class DecomposeSettings(ProbeSettings):
    """The probe settings of the subtraction runs, the held-out share of scenes for R², and
    whether a subtraction residual keeps the embeddings' mean.

    ``residual_mean``: ``keep`` (the research code) subtracts only the model's deviation from
    the mean, so the residual keeps the mean embedding ȳ of the scenes used; ``remove`` subtracts
    the whole fit, intercept included, leaving residuals of mean 0 (docs/method.md §4).
    """

    PAPER: ClassVar[dict[str, Any]] = {**ProbeSettings.PAPER, "residual_mean": "keep", "test_fraction": 0.01}
    test_fraction: float = 0.2
    residual_mean: Literal["keep", "remove"] = "keep"

    @field_validator("test_fraction")
    @classmethod
    def _test_fraction(cls, v: float) -> float:
        return check_fraction(v, "test fraction")


def r2_rows(
    y: np.ndarray,
    scenes: SceneSet,
    seeds: tuple[int, ...],
    test_fraction: float,
    control: str = NO_CONTROL,
    split_source: str = "bindscope",
) -> list[dict]:
    """R² of every additive model on train and held-out scenes, per seed."""
    check_fraction(test_fraction, "test fraction")
    rows = []
    designs = {m: design_columns(scenes, m) for m in MODELS}
    for seed in seeds:
        sp = scene_split(len(y), 1.0 - test_fraction, seed, source=split_source)
        for model, (cols, width) in designs.items():
            fit = fit_additive(cols[sp.train], width, y[sp.train], model)
            for group, idx in (("train", sp.train), ("test", sp.test)):
                r2 = r2_score(y[idx], fit.predict(cols[idx]))
                rows.append(result_row("decompose", model, group, "r2", seed, r2, control=control, part="additive"))
    return rows


def decompose_analysis(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    *,
    test_fraction: float = 0.2,
    residual_mean: str = "keep",
    control: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[int, dict[str, str]]]]:
    """R² of the four additive models (with controls) and the five-run subtraction probe table.

    Returns the tidy table (with the column ``part``: additive or subtraction) and, per
    subtraction variant, seed and probe, the solver used.
    """
    _, y, scenes, control = select_scenes(y, scenes, settings.scenes, control)
    total = len(SUBTRACTION_VARIANTS) + (3 if control is not None else 2)
    tick = progress or (lambda done, total: None)
    tick(0, total)
    source = settings.split_source
    rows = r2_rows(y, scenes, settings.seeds, test_fraction, split_source=source)
    rows += r2_rows(y, permuted_labels(scenes), settings.seeds, test_fraction, "permuted_labels", source)
    done = 2
    tick(done, total)
    if control is not None:
        rows += r2_rows(control, scenes, settings.seeds, test_fraction, "rand", source)
        done += 1
        tick(done, total)
    solvers = {}
    for variant in SUBTRACTION_VARIANTS:
        if variant == "base":
            y_variant = y
        else:
            model = "object_additive" if variant.startswith("objects") else "concept_additive"
            keep_mean = residual_mean == "keep"
            y_variant = subtract(scenes, y, model, permuted=variant.endswith("_perm"), keep_mean=keep_mean)
        run = probe_variant(
            y_variant, scenes, settings, analysis="decompose", variant=variant, chance=variant == "base"
        )
        rows += [{**r, "part": "subtraction"} for r in run.rows]
        solvers[variant] = run.solver
        done += 1
        tick(done, total)
    return tidy(rows, ["part"]), solvers


def decompose_summary(table: pd.DataFrame) -> dict[str, Any]:
    """The main numbers of ``bindscope decompose``."""
    additive = table[table.part == "additive"]
    subtraction = table[table.part == "subtraction"]
    r2 = nested(additive, ["control", "group", "variant"])
    controls: dict[str, dict[str, Any] | None] = {c: {"r2": r2[c]} for c in r2 if c != NO_CONTROL}
    controls.setdefault("rand", None)
    return {
        "r2": r2.get(NO_CONTROL, {}),
        "controls": controls,
        "subtraction": {v: accuracy_summary(subtraction, v) for v in SUBTRACTION_VARIANTS},
        "chance": chance_summary(subtraction),
    }


class DecomposeAnalysis(Analysis):
    """``decompose``: additive R² with controls, and probes after subtracting each additive model."""

    name = "decompose"
    title = "Is a scene a sum of its parts? Additive R² and probes after subtracting each model."
    Settings = DecomposeSettings
    uses = frozenset({"control"})
    extra_columns = ("part",)

    def compute(self, inputs: AnalysisInputs, settings: DecomposeSettings, progress: Progress | None = None) -> Result:
        y = np.asarray(inputs.embeddings)
        ctrl = np.asarray(inputs.control) if inputs.control is not None else None
        table, solvers = decompose_analysis(
            y,
            inputs.scenes,
            settings,
            test_fraction=settings.test_fraction,
            residual_mean=settings.residual_mean,
            control=ctrl,
            progress=progress,
        )
        return Result(table, warnings=approximate_warnings(solvers), parts={"solvers": solvers})

    def summarize(self, result: Result, settings: DecomposeSettings) -> dict[str, Any]:
        summary = decompose_summary(result.table)
        solvers = result.parts["solvers"]
        summary["solver"] = {v: {str(s): e for s, e in per.items()} for v, per in solvers.items()}
        return summary

    def headline(self, summary: dict[str, Any]) -> Rows:
        def r2(part: dict | None, group: str, model: str) -> str:
            return format_spread(((part or {}).get(group) or {}).get(model))

        perm = (summary["controls"].get("permuted_labels") or {}).get("r2")
        rand = (summary["controls"].get("rand") or {}).get("r2")
        rows: Rows = [("model", "R2 train", "R2 test", "R2 test (permuted labels)", "R2 test (+rand)")]
        for model in summary["r2"].get("test", {}):
            s = summary["r2"]
            rows.append(
                (model, r2(s, "train", model), r2(s, "test", model), r2(perm, "test", model), r2(rand, "test", model))
            )
        rows.append(("", "", "", "", ""))
        rows.append(("probes after subtracting", "object_acc test %", "concept_acc test %", "", ""))
        for variant, part in summary["subtraction"].items():
            rows.append((variant, pct(part.get("test"), "object_acc"), pct(part.get("test"), "concept_acc"), "", ""))
        return rows
