"""The registry of analyses (in the spirit of lm-eval's task registry) and the one way to run one.

>>> from bindscope.analyses.registry import list_analyses
>>> list_analyses()
['complexity', 'crossmodal', 'decompose', 'geometry', 'intervene', 'probe']
"""

from __future__ import annotations

import importlib
import logging
import math
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.analyses import results
from bindscope.analyses.base import Analysis, Progress, Result, RunContext
from bindscope.analyses.card import bag_inputs, judge_columns
from bindscope.analyses.inputs import INPUT_KINDS, AnalysisInputs, Inputs, describe_arrays, read_inputs
from bindscope.analyses.results import SUMMARIES, LoadedResult, Summary, content_key, header, load_result, write_result
from bindscope.core.errors import BindscopeError, did_you_mean
from bindscope.core.executors import keeping_units
from bindscope.core.io import check_output_dir
from bindscope.core.locks import writes
from bindscope.core.places import check_state_folder
from bindscope.estimators.verdicts import Verdict

log = logging.getLogger(__name__)

_REGISTRY: dict[str, Analysis] = {}
#: The shipped analyses not imported yet: name -> the module defining its class, and the class. Each is imported
#: when it is first asked for (:func:`get_analysis`), so a command imports only its own analysis and the
#: libraries that one needs (``probe`` never imports the complexity sweep's torch, nor geometry's scikit-learn).
_SHIPPED: dict[str, tuple[str, str]] = {
    "probe": ("bindscope.analyses.probe.analysis", "ProbeAnalysis"),
    "decompose": ("bindscope.analyses.decompose.analysis", "DecomposeAnalysis"),
    "complexity": ("bindscope.analyses.complexity.analysis", "ComplexityAnalysis"),
    "intervene": ("bindscope.analyses.intervene.analysis", "InterveneAnalysis"),
    "crossmodal": ("bindscope.analyses.crossmodal.analysis", "CrossmodalAnalysis"),
    "geometry": ("bindscope.analyses.geometry.analysis", "GeometryAnalysis"),
}


def register(cls: type[Analysis]) -> type[Analysis]:
    """Add an analysis class to the registry under its ``name`` (usable as a class decorator)."""
    if cls.name in _REGISTRY or cls.name in _SHIPPED:
        raise BindscopeError(f"analysis {cls.name!r} is registered already")
    summary = getattr(cls, "Summary", None)
    if not (isinstance(summary, type) and issubclass(summary, Summary)):
        raise BindscopeError(
            f"{cls.name} declares no Summary; give it one: a subclass of bindscope.analyses.results.Summary"
        )
    unknown = (cls.needs | cls.uses) - set(INPUT_KINDS)
    if unknown:
        raise BindscopeError(f"{cls.name} names unknown input kinds {sorted(unknown)}; use {', '.join(INPUT_KINDS)}")
    _REGISTRY[cls.name] = cls()
    SUMMARIES[cls.name] = cls.Summary
    return cls


def _import_shipped(name: str) -> None:
    """Import the shipped analysis ``name`` and register it."""
    module, attribute = _SHIPPED[name]
    cls = getattr(importlib.import_module(module), attribute)
    del _SHIPPED[name]
    register(cls)


def _summary_model(name: str) -> type[Summary] | None:
    """The summary model of analysis ``name`` (:data:`~bindscope.analyses.results.SUMMARIES`), its shipped
    analysis imported on first use; None for a name nothing registered."""
    if name in _SHIPPED:
        _import_shipped(name)
    return SUMMARIES.get(name)


results.summary_lookup = _summary_model


def unregister(name: str) -> None:
    """Remove the analysis registered as ``name`` (e.g. a toy analysis a test registered)."""
    get_analysis(name)  # an unknown name: one line naming the registered ones
    del _REGISTRY[name]
    SUMMARIES.pop(name, None)


def list_analyses() -> list[str]:
    """The names of the registered analyses (a shipped one is listed before it is imported)."""
    return sorted({*_REGISTRY, *_SHIPPED})


def get_analysis(name: str) -> Analysis:
    """The analysis registered as ``name`` (a shipped one is imported on first use)."""
    if name in _SHIPPED:
        _import_shipped(name)
    if name not in _REGISTRY:
        names = list_analyses()
        hint = did_you_mean(str(name), names)
        raise BindscopeError(f"unknown analysis {name!r}; choose one of {', '.join(names)}{hint}")
    return _REGISTRY[name]


def load_inputs(
    analysis: str,
    embeddings: str | Path,
    *,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    probes: str | Path | None = None,
    singles: str | Path | None = None,
    other: str | Path | None = None,
    unimodal: Mapping[str, str | Path] | None = None,
    settings: Any = None,
    find_siblings: bool = True,
    find_control: bool | None = None,
    allow_different_models: bool = False,
) -> Inputs:
    """The one way to read an analysis's inputs from folders: what it needs, and what it uses when given.

    The folders an analysis can take are :data:`~bindscope.analyses.inputs.INPUT_KINDS`; giving one that it
    neither needs nor uses is an error.

    Parameters
    ----------
    analysis
        A registered analysis (:func:`list_analyses`); its ``needs`` and ``uses`` decide what is read.
    embeddings
        The embedding folder (for ``crossmodal``: the image one; ``other`` is the text one).
    dataset
        The dataset folder, if not where the embedding manifest says.
    control
        The ``+rand`` embedding folder of the same model and modality: the random-weights control.
    probes
        Frozen probes: a probe folder (``probe.json``) or a ``bindscope probe`` output, of which the probes
        of seed ``settings.probe_seed`` are taken.
    singles
        A single-object embedding folder (``bindscope embed --single-objects``) of the same model.
    other
        The embedding folder of the other modality of the same model (``crossmodal``: the text one).
    unimodal
        Per modality (``"image"``, ``"text"``), a ``bindscope probe`` result folder of it.
    settings
        The analysis's ``Settings``; only ``probe_seed`` is read here (default: seed 0).
    find_siblings
        Without ``control`` / ``singles``, use a sibling folder of the same model holding one, when the
        analysis uses it.
    find_control
        Whether to look for the ``+rand`` sibling (default: as ``find_siblings``).
    allow_different_models
        Accept an ``other`` folder embedded by a different model than ``embeddings``.
    """
    kind = get_analysis(analysis)
    takes = kind.needs | kind.uses
    given = {"control": control, "probes": probes, "singles": singles, "other": other, "unimodal": unimodal}
    refused = [k for k, v in given.items() if v and k not in takes]
    if refused:
        taken = sorted(takes - {"embeddings"})
        raise BindscopeError(
            f"{analysis} does not take {', '.join(refused)}; it takes {', '.join(taken) or 'the embeddings only'}"
        )
    inputs = read_inputs(
        embeddings,
        dataset,
        control,
        find_control=(find_siblings if find_control is None else find_control) and "control" in takes,
        probes=probes,
        probe_seed=int(getattr(settings, "probe_seed", 0)),
        singles=singles,
        find_singles=find_siblings and "singles" in takes,
        other=other,
        allow_different_models=allow_different_models,
        unimodal=dict(unimodal) if unimodal else None,
        single_objects=kind.reads_single_objects,
    )
    missing = sorted(k for k in kind.needs if getattr(inputs, k) is None)  # not given, and no sibling holds it
    if missing:
        raise BindscopeError(f"{analysis} needs {', '.join(missing)}, which was not given")
    kind.check_folders(inputs)
    return inputs


def input_record(analysis: Analysis, inputs: Inputs | AnalysisInputs) -> dict[str, Any]:
    """The header's ``inputs``: provenance and content key of each input the analysis takes, and the dataset."""
    described = inputs.describe() if isinstance(inputs, Inputs) else describe_arrays(inputs)
    return {k: v for k, v in described.items() if k in analysis.needs | analysis.uses | {"dataset"}}


@writes("out", what="result folder", kind="result", reads=("inputs",))
def run_analysis(
    name: str,
    inputs: Inputs | AnalysisInputs,
    out: str | Path,
    settings: Any = None,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> LoadedResult:
    """Run an analysis on folder-backed or in-memory inputs and write its folder.

    Parameters
    ----------
    name
        A registered analysis (:func:`list_analyses`).
    inputs
        :class:`bindscope.analyses.inputs.Inputs` (from :func:`load_inputs`: provenance is
        recorded) or bare :class:`AnalysisInputs` arrays.
    out
        The analysis folder to write; must be new or empty unless ``overwrite``.
    settings
        The analysis's ``Settings`` (default: its defaults).
    overwrite
        Replace an analysis result that bindscope wrote in ``out`` (anything else there is refused).
    progress
        Called as ``progress(done, total)`` during long work.
    """
    analysis = get_analysis(name)
    settings = analysis.Settings() if settings is None else settings
    if not isinstance(settings, analysis.Settings):
        raise BindscopeError(f"{name} takes {analysis.Settings.__name__}, got {type(settings).__name__}")
    out = Path(out)
    check_output_dir(out, kind="result", overwrite=overwrite)  # before long work
    folder_inputs = inputs if isinstance(inputs, Inputs) else None
    arrays = inputs.arrays() if isinstance(inputs, Inputs) else inputs
    analysis.check_inputs(arrays)
    start = time.perf_counter()
    record = input_record(analysis, inputs)
    units = units_folder(out, content_key(name, record, settings.to_dict()))
    with keeping_units(units):
        result = analysis.compute(arrays, settings, progress)
    summary = analysis.summarize(result, settings)
    with keeping_units(units.with_name(units.name + "-bag")):
        verdicts = judged(analysis, result, arrays, settings)
    numbers = summary.model_copy(update={"verdicts": verdicts, "rand_distance": rand_distance(arrays)}).numbers()
    head = header(
        name,
        inputs=record,
        settings=settings.to_dict(),
        seeds=analysis.seeds(settings),
        seconds=time.perf_counter() - start,
        warnings=result.warnings,
    )
    title = folder_inputs.embeddings.name if folder_inputs is not None else "embeddings"
    files = analysis.files(result, settings, RunContext(folder_inputs, arrays, title))
    write_result(out, head, numbers, files, overwrite=overwrite)
    shutil.rmtree(units.parent, ignore_errors=True)
    return load_result(out, name)


def judged(analysis: Analysis, result: Result, arrays: AnalysisInputs, settings: Any) -> dict[str, Verdict]:
    """Each card column of ``result`` judged against the same analysis run on the ideal bag of concepts of the
    same scenes and settings (docs/method/verdicts.md). Where the bag cannot be analysed (a
    :class:`BindscopeError`), its floor is missing and every verdict reads ``undetermined``."""
    if not analysis.columns:
        return {}
    measured = analysis.measure(result, settings)
    try:
        bag = analysis.measure(analysis.compute(bag_inputs(arrays), settings), settings)
    except BindscopeError as exc:
        log.warning(
            "%s: the bag-of-concepts floor could not be measured (%s); its verdicts are undetermined",
            analysis.name,
            exc,
        )
        bag = None
    return judge_columns(analysis.columns, measured, bag)


def rand_distance(arrays: AnalysisInputs) -> float | None:
    """``||Y - Y_rand|| / ||Y||`` (Frobenius) where the inputs hold the ``+rand`` control; None otherwise. Summed in
    float64 over blocks of rows, 4 MiB at a time: no float64 copy of either array (three of them at 160,000 x 384
    would be 1.5 GB)."""
    y, control = arrays.embeddings, arrays.control
    if control is None or np.shape(control) != np.shape(y) or np.ndim(y) != 2:
        return None
    rows = max(1, (1 << 19) // max(1, y.shape[1]))
    squares = differences = 0.0
    for start in range(0, len(y), rows):
        block = np.asarray(y[start : start + rows], dtype=np.float64)
        squares += float(np.einsum("ij,ij->", block, block))
        block -= control[start : start + rows]
        differences += float(np.einsum("ij,ij->", block, block))
    return math.sqrt(differences / squares) if squares else 0.0


def units_folder(out: Path, key: str) -> Path:
    """Where a run into ``out`` keeps its finished units until its result is written: a hidden
    sibling, one sub-folder per content key of the run (other inputs or settings start afresh)."""
    return check_state_folder(out.parent / f".{out.name}.units") / key[:16]
