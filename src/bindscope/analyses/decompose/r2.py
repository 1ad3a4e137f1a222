"""R² of the four exact additive models on train and held-out scenes (docs/method/04-decomposition.md), per seed,
and the binding gap: object-additive minus concept-additive R²."""

from __future__ import annotations

import numpy as np

from bindscope.core.tidy import NO_CONTROL, result_row
from bindscope.estimators.additive import MODELS, design_columns, fit_additive, r2_score
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import check_fraction, scene_split

#: The variant of the gap rows: object-additive R² minus concept-additive R² (metric ``r2_gap``). A bag of
#: concepts is exactly concept-additive, so its gap is 0; a scene that sums object vectors which are not sums of
#: concept vectors has a positive gap on held-out scenes.
GAP = "object_minus_concept"


def r2_rows(
    y: np.ndarray,
    scenes: SceneSet,
    seeds: tuple[int, ...],
    test_fraction: float,
    control: str = NO_CONTROL,
    split_source: str = "bindscope",
) -> list[dict]:
    """R² of every additive model on train and held-out scenes, per seed, and the gap
    (:data:`GAP`) of each seed and group (rows of part ``additive``)."""
    check_fraction(test_fraction, "test fraction")
    rows = []
    designs = {m: design_columns(scenes, m) for m in MODELS}
    for seed in seeds:
        sp = scene_split(len(y), 1.0 - test_fraction, seed, source=split_source)
        fits = {
            model: fit_additive(cols[sp.train], width, y[sp.train], model) for model, (cols, width) in designs.items()
        }
        for group, idx in (("train", sp.train), ("test", sp.test)):
            r2 = {m: r2_score(y[idx], fits[m].predict(designs[m][0][idx])) for m in MODELS}
            extra = {"control": control, "part": "additive"}
            rows += [result_row("decompose", m, group, "r2", seed, v, **extra) for m, v in r2.items()]
            gap = r2["object_additive"] - r2["concept_additive"]
            rows.append(result_row("decompose", GAP, group, "r2_gap", seed, gap, **extra))
    return rows
