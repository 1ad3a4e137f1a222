"""The probe metrics of the edits (docs/method/05-interventions.md): do frozen concept probes read the expected scene's
values from an edited embedding (the paper's probe hit), and does the object probe read its objects, telling it from
the scenes with the same concept values (the bound probe hit)? Probes fitted here when none are given."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bindscope.analyses.intervene.edits import bag_classes
from bindscope.analyses.intervene.settings import InterveneSettings
from bindscope.core.errors import BindscopeError
from bindscope.estimators.probe_runs import ProbeRun, ProbeSettings, fit_probe_set
from bindscope.estimators.probes import OBJECT, ProbeSet, set_separation_correct, soft_targets
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
    probes: ProbeSet, scenes: SceneSet, concepts: Sequence[str], y: np.ndarray
) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]:
    """``hits(x_edited, expected_rows) -> (paper, bound)``, bool per case each.

    ``paper``: the probes of ``concepts`` (the attribute and the noun; on a relation or count space the place or
    count too) set-separate the expected scene's values, jointly (the research code's hit). ``bound``: the object
    probe set-separates the expected scene's objects from the edited vector, and it reads every scene of the
    expected scene's bag class (the scenes with its concept values: itself, its reversed order, its binding swaps)
    right from that scene's own embedding. A bag of concepts embeds a class alike, so its probe cannot read two of
    its object sets right: its bound hit is never true. None where the probes have no object probe.
    """
    names = list(concepts)
    check_probes(probes, scenes, names, y.shape[1])
    space = scenes.space
    objects = soft_targets(scenes)[OBJECT]
    told = None
    if OBJECT in probes.coef_:
        read = set_separation_correct(probes.decision_function(y, [OBJECT])[OBJECT], objects)
        classes = bag_classes(scenes)
        told = np.bincount(classes, weights=~read, minlength=int(classes.max(initial=-1)) + 1) == 0
        told = told[classes]  # per scene: every scene of its class read right

    def hits(x: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        logits = probes.decision_function(x, [*names, OBJECT])
        counts = scenes.subset(expected).value_counts()  # per concept: the expected scene's values
        ok = np.ones(len(x), dtype=bool)
        for name in names:
            ok &= set_separation_correct(logits[name], counts[space.concept_index(name)])
        if told is None:
            return ok, None
        return ok, set_separation_correct(logits[OBJECT], objects[expected]) & told[expected]

    return hits


def fit_probes(
    y: np.ndarray, scenes: SceneSet, settings: InterveneSettings
) -> tuple[ProbeSet, ProbeRun, ProbeSettings]:
    """Probes fitted here with the full probe settings (scene split 0.4, ``probe_seed``, ``probe_optimizer``)."""
    probe_settings = ProbeSettings(
        seeds=(settings.probe_seed,), device=settings.device, scenes="full", optimizer=settings.probe_optimizer
    )
    probes, run = fit_probe_set(y, scenes, probe_settings)
    return probes, run, probe_settings
