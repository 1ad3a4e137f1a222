"""The analyses: one contract, one registry, one result format.

>>> from bindscope.analyses import list_analyses, get_analysis, run_analysis, load_inputs, load_result
>>> list_analyses()
['complexity', 'crossmodal', 'decompose', 'geometry', 'intervene', 'probe']
>>> settings = get_analysis("probe").Settings(seeds=(0,))          # doctest: +SKIP
>>> run_analysis("probe", load_inputs("emb/clip"), "results/probe", settings)   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bindscope.analyses.base import Analysis, Result
from bindscope.analyses.complexity.sweep import Budget, ComplexitySettings, resolve_budget
from bindscope.analyses.crossmodal.analysis import CrossmodalSettings
from bindscope.analyses.decompose.analysis import DecomposeSettings
from bindscope.analyses.geometry.analysis import GeometrySettings
from bindscope.analyses.inputs import INPUT_KINDS, AnalysisInputs, Inputs, load_frozen_probes, load_inputs
from bindscope.analyses.intervene.analysis import InterveneSettings
from bindscope.analyses.registry import get_analysis, list_analyses, register, run_analysis
from bindscope.analyses.results import LoadedResult, load_result, write_result
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import KEY_COLUMNS, spread
from bindscope.estimators.probe_runs import ProbeSettings


def run_probe(
    emb_dir: str | Path,
    out: str | Path,
    settings: ProbeSettings | None = None,
    *,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """``bindscope probe``, folder in and folder out; returns the written summary."""
    inputs = load_inputs(emb_dir, dataset, control)
    return run_analysis("probe", inputs, out, settings, overwrite=overwrite).summary


def run_decompose(
    emb_dir: str | Path,
    out: str | Path,
    settings: DecomposeSettings | None = None,
    *,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """``bindscope decompose``, folder in and folder out; returns the written summary."""
    inputs = load_inputs(emb_dir, dataset, control)
    return run_analysis("decompose", inputs, out, settings, overwrite=overwrite).summary


def run_complexity(
    emb_dir: str | Path,
    out: str | Path,
    settings: ComplexitySettings | None = None,
    *,
    probes: str | Path | None = None,
    dataset: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """``bindscope complexity``, folder in and folder out; returns the written summary.

    Without ``probes`` the probes are fitted first (see :class:`ComplexitySettings`).
    """
    settings = settings or ComplexitySettings()
    inputs = load_inputs(emb_dir, dataset, find_control=False, probes=probes, probe_seed=settings.probe_seed)
    return run_analysis("complexity", inputs, out, settings, overwrite=overwrite).summary


def intervene_inputs(
    emb_dir: str | Path,
    settings: InterveneSettings,
    *,
    probes: str | Path | None = None,
    singles: str | Path | None = None,
    dataset: str | Path | None = None,
) -> Inputs:
    """The inputs of ``intervene``: the embeddings, their frozen probes (``settings.probe_seed``)
    and the single-object bank (default: a sibling folder of the same model holding one)."""
    return load_inputs(
        emb_dir,
        dataset,
        find_control=False,
        probes=probes,
        probe_seed=settings.probe_seed,
        singles=singles,
        find_singles=True,
    )


def run_intervene(
    emb_dir: str | Path,
    out: str | Path,
    settings: InterveneSettings | None = None,
    *,
    probes: str | Path | None = None,
    singles: str | Path | None = None,
    dataset: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """``bindscope intervene``, folder in and folder out; returns the written summary.

    Without ``probes`` they are fitted first (see :class:`InterveneSettings`).
    """
    settings = settings or InterveneSettings()
    inputs = intervene_inputs(emb_dir, settings, probes=probes, singles=singles, dataset=dataset)
    return run_analysis("intervene", inputs, out, settings, overwrite=overwrite).summary


def crossmodal_inputs(
    image_dir: str | Path,
    text_dir: str | Path,
    *,
    singles: str | Path | None = None,
    probes_image: str | Path | None = None,
    probes_text: str | Path | None = None,
    dataset: str | Path | None = None,
    allow_different_models: bool = False,
) -> Inputs:
    """The inputs of ``crossmodal``: image and text embeddings of one dataset and joint model, the text
    single-object captions (default: a sibling of the text folder holding them) and, when given, the
    ``bindscope probe`` results of each modality."""
    unimodal = {m: p for m, p in (("image", probes_image), ("text", probes_text)) if p is not None}
    inputs = load_inputs(
        image_dir,
        dataset,
        find_control=False,
        singles=singles,
        find_singles=True,
        other=text_dir,
        allow_different_models=allow_different_models,
        unimodal=unimodal or None,
    )
    if inputs.embeddings.modality != "image":
        raise BindscopeError(
            f"{image_dir} holds {inputs.embeddings.modality} embeddings; give the image folder first, then the text one"
        )
    return inputs


def run_crossmodal(
    image_dir: str | Path,
    text_dir: str | Path,
    out: str | Path,
    settings: CrossmodalSettings | None = None,
    *,
    singles: str | Path | None = None,
    probes_image: str | Path | None = None,
    probes_text: str | Path | None = None,
    dataset: str | Path | None = None,
    allow_different_models: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """``bindscope crossmodal``, folders in and a folder out; returns the written summary."""
    inputs = crossmodal_inputs(
        image_dir,
        text_dir,
        singles=singles,
        probes_image=probes_image,
        probes_text=probes_text,
        dataset=dataset,
        allow_different_models=allow_different_models,
    )
    return run_analysis("crossmodal", inputs, out, settings, overwrite=overwrite).summary


__all__ = [
    "INPUT_KINDS",
    "KEY_COLUMNS",
    "Analysis",
    "AnalysisInputs",
    "Budget",
    "ComplexitySettings",
    "CrossmodalSettings",
    "DecomposeSettings",
    "GeometrySettings",
    "Inputs",
    "InterveneSettings",
    "LoadedResult",
    "ProbeSettings",
    "Result",
    "crossmodal_inputs",
    "get_analysis",
    "intervene_inputs",
    "list_analyses",
    "load_frozen_probes",
    "load_inputs",
    "load_result",
    "register",
    "resolve_budget",
    "run_analysis",
    "run_complexity",
    "run_crossmodal",
    "run_decompose",
    "run_intervene",
    "run_probe",
    "spread",
    "write_result",
]
