"""The five-run subtraction table (docs/method/04-decomposition.md): the probes re-run after removing each fitted
additive model (and its permuted-label control) from the embeddings."""

from __future__ import annotations

import numpy as np

from bindscope.core.tidy import NO_CONTROL
from bindscope.estimators.additive import subtract
from bindscope.estimators.probe_runs import ProbeRun, ProbeSettings, probe_variant
from bindscope.space.concepts import SceneSet

SUBTRACTION_VARIANTS = ("base", "objects", "objects_perm", "concepts", "concepts_perm")
#: The variant also run on the ``+rand`` control: the floor of the card's ``objects after concepts``.
RAND_VARIANTS = ("concepts",)


def residual(y: np.ndarray, scenes: SceneSet, variant: str, residual_mean: str = "keep") -> np.ndarray:
    """The embeddings of one subtraction variant: ``base`` as they are, else less the object- or
    concept-additive fit (``_perm``: fitted to permuted labels)."""
    if variant == "base":
        return y
    model = "object_additive" if variant.startswith("objects") else "concept_additive"
    return subtract(scenes, y, model, permuted=variant.endswith("_perm"), keep_mean=residual_mean == "keep")


def subtraction_run(
    y: np.ndarray,
    scenes: SceneSet,
    settings: ProbeSettings,
    variant: str,
    residual_mean: str = "keep",
    control: str = NO_CONTROL,
    design: SceneSet | None = None,
) -> ProbeRun:
    """The probes of one subtraction variant over seeds (rows of part ``subtraction``; chance with ``base``
    of the embeddings themselves; ``control``: the rows' control, e.g. ``rand`` for the ``+rand`` embeddings;
    ``design``: the scenes the additive models are fitted on, where not ``scenes`` (a role view, whose objects
    are the same))."""
    return probe_variant(
        residual(y, scenes if design is None else design, variant, residual_mean),
        scenes,
        settings,
        analysis="decompose",
        variant=variant,
        control=control,
        chance=variant == "base" and control == NO_CONTROL,
        columns={"part": "subtraction"},
    )
