"""The analysis contract: what every analysis declares.

An analysis is a small class (in the spirit of open_clip's factory and lm-eval's task registry):

- ``name`` and a one-line ``title``;
- ``Settings``: a frozen, validated settings class (every range check lives there);
- ``needs`` / ``uses``: the inputs it must have / uses when present (:data:`INPUT_KINDS`);
- ``compute(inputs, settings) -> Result``: pure, over arrays;
- ``summarize(result, settings) -> dict``: the main numbers of ``summary.json``;
- ``headline(summary) -> rows``: the table the terminal shows (``notes``: lines after it);
- ``files(result, settings, context) -> ResultFiles``: its tables, plots and artefacts.

:mod:`bindscope.analyses.registry` finds analyses by name and runs them into folders.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bindscope.analyses.results import ResultFiles
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import Settings
from bindscope.space.concepts import SceneSet

if TYPE_CHECKING:
    from bindscope.analyses.inputs import Inputs
    from bindscope.analyses.probes import ProbeSet

#: What an analysis can take: scene embeddings (always), the ``+rand`` control's embeddings, frozen
#: probes, the single-object bank (rows object-major: row ``o * S + s`` is object ``o`` alone at
#: position ``s`` of ``S``), a second modality of the same model, and uni-modal probe results (the
#: object and concept probe accuracy of ``bindscope probe`` per modality).
INPUT_KINDS = ("embeddings", "control", "probes", "singles", "other", "unimodal")
Progress = Callable[[int, int], object]
Rows = list[tuple[str, ...]]  # a header row, then rows of cells


@dataclass(frozen=True)
class AnalysisInputs:
    """The arrays an analysis computes on, aligned with ``scenes``."""

    embeddings: np.ndarray
    scenes: SceneSet
    control: np.ndarray | None = None
    probes: ProbeSet | None = None
    singles: np.ndarray | None = None
    other: np.ndarray | None = None
    unimodal: dict[str, dict[str, Any]] | None = None  # per modality: probe accuracies (spreads)
    noun: str | None = None  # the dataset's noun concept (its preset's), when known

    def __post_init__(self) -> None:
        y = np.asarray(self.embeddings)
        if y.ndim != 2:
            raise BindscopeError(f"embeddings must be 2-D [scenes, dim], got shape {y.shape}")
        if len(y) != len(self.scenes):
            raise BindscopeError(f"{len(y)} embeddings but {len(self.scenes)} scenes; rows must align with scenes")
        if self.control is not None and np.shape(self.control)[0] != len(y):
            raise BindscopeError(f"the control has {np.shape(self.control)[0]} rows, the embeddings {len(y)}")

    def present(self) -> set[str]:
        """The input kinds given."""
        return {"embeddings"} | {k for k in INPUT_KINDS[1:] if getattr(self, k) is not None}


@dataclass
class Result:
    """What ``compute`` returns: the tidy table, further tables, warnings and analysis-specific parts."""

    table: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    parts: dict[str, Any] = field(default_factory=dict)


class Analysis(ABC):
    """One analysis; subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    title: ClassVar[str]
    Settings: ClassVar[type[Settings]]
    needs: ClassVar[frozenset[str]] = frozenset({"embeddings"})
    uses: ClassVar[frozenset[str]] = frozenset()
    extra_columns: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def compute(self, inputs: AnalysisInputs, settings: Any, progress: Progress | None = None) -> Result:
        """The analysis over arrays (pure: no files, no models)."""

    @abstractmethod
    def summarize(self, result: Result, settings: Any) -> dict[str, Any]:
        """The main numbers of ``summary.json``."""

    @abstractmethod
    def headline(self, summary: dict[str, Any]) -> Rows:
        """A table for the terminal: a header row, then rows of strings."""

    def notes(self, summary: dict[str, Any]) -> list[str]:
        """Lines the terminal shows after the headline table (e.g. a verdict); default none."""
        return []

    def files(self, result: Result, settings: Any, context: RunContext) -> ResultFiles:
        """The tables, plots and artefacts written beside the summary (default: the tables)."""
        return ResultFiles(result.table, dict(result.tables))

    def seeds(self, settings: Any) -> list[int]:
        """The seeds a run used (recorded in the header)."""
        return list(getattr(settings, "seeds", ()))

    def check_inputs(self, inputs: AnalysisInputs) -> None:
        """Refuse inputs that lack what the analysis needs."""
        missing = sorted(self.needs - inputs.present())
        if missing:
            raise BindscopeError(f"{self.name} needs {', '.join(missing)}, which were not given")


@dataclass(frozen=True)
class RunContext:
    """What the file writers of an analysis may want to know about the run's inputs."""

    inputs: Inputs | None
    arrays: AnalysisInputs
    title: str
