"""R² of the four exact additive models on train and held-out scenes (docs/method/04-decomposition.md), per seed."""

from __future__ import annotations

import numpy as np

from bindscope.core.tidy import NO_CONTROL, result_row
from bindscope.estimators.additive import MODELS, design_columns, fit_additive, r2_score
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import check_fraction, scene_split


def r2_rows(
    y: np.ndarray,
    scenes: SceneSet,
    seeds: tuple[int, ...],
    test_fraction: float,
    control: str = NO_CONTROL,
    split_source: str = "bindscope",
) -> list[dict]:
    """R² of every additive model on train and held-out scenes, per seed (rows of part ``additive``)."""
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
