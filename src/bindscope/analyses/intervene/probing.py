"""The probe metric of the edits (docs/method/05-interventions.md): do frozen concept probes read the expected scene's
values from an edited embedding? Probes fitted here when none are given."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bindscope.analyses.intervene.settings import InterveneSettings
from bindscope.core.errors import BindscopeError
from bindscope.estimators.probe_runs import ProbeRun, ProbeSettings, fit_probe_set
from bindscope.estimators.probes import ProbeSet, set_separation_correct
from bindscope.space.concepts import SceneSet


def check_probes(probes: ProbeSet, scenes: SceneSet, names: list[str], dim: int) -> None:
    """Refuse probes without a probe for each of ``names``, or of another shape than the dataset and embeddings."""
    missing = [n for n in names if n not in probes.coef_]
    if missing:
        raise BindscopeError(
            f"the probes have no probe for {', '.join(missing)} (they have {', '.join(probes.coef_)}); "
            "give probes fitted on this dataset"
        )
    space = scenes.space
    for name in names:
        labels, width = np.shape(probes.coef_[name])
        size = space.sizes[space.concept_index(name)]
        if labels != size or width != dim:
            raise BindscopeError(
                f"the {name} probe is [{labels}, {width}] but this dataset's {name} has {size} values and the "
                f"embeddings width {dim}; give probes fitted on these embeddings"
            )


def probe_hits_for(
    probes: ProbeSet, scenes: SceneSet, concepts: dict[str, str], dim: int
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``hits(x_edited, expected_rows)``: do the attribute and noun probes set-separate the expected
    scene's values, jointly?"""
    names = list(concepts.values())
    check_probes(probes, scenes, names, dim)
    space = scenes.space

    def hits(x: np.ndarray, expected: np.ndarray) -> np.ndarray:
        logits = probes.decision_function(x, names)
        counts = scenes.subset(expected).value_counts()  # per concept: the expected scene's values
        ok = np.ones(len(x), dtype=bool)
        for name in names:
            ok &= set_separation_correct(logits[name], counts[space.concept_index(name)])
        return ok

    return hits


def fit_probes(
    y: np.ndarray, scenes: SceneSet, settings: InterveneSettings
) -> tuple[ProbeSet, ProbeRun, ProbeSettings]:
    """Probes fitted here with the full probe settings (scene split 0.4, ``probe_seed``)."""
    probe_settings = ProbeSettings(seeds=(settings.probe_seed,), device=settings.device, scenes="full")
    probes, run = fit_probe_set(y, scenes, probe_settings)
    return probes, run, probe_settings
