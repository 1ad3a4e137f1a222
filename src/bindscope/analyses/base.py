"""The analysis contract: what every analysis declares.

An analysis is a small class (in the spirit of open_clip's factory and lm-eval's task registry):

- ``name`` and a one-line ``title``;
- ``Settings``: a frozen, validated settings class (every range check lives there);
- ``needs`` / ``uses``: the inputs it must have / uses when present (:data:`INPUT_KINDS`);
- ``compute(inputs, settings) -> Result``: pure, over arrays;
- ``Summary``: the typed numbers of ``summary.json``; ``summarize(result, settings)`` builds them;
- ``headline(summary) -> rows``: the table the terminal shows (``notes``: lines after it);
- ``files(result, settings, context) -> ResultFiles``: its tables, plots and artefacts;
- its place on the report card: ``story`` (the step of the paper it answers) and ``order``, ``columns`` (the
  questions it answers, :class:`~bindscope.analyses.card.CardColumn`), ``measure(summary)`` (each column's number
  per seed, judged by the registry against the same analysis run on the ideal bag of concepts) and ``captions``
  (what each of its figures shows, by file stem).

:mod:`bindscope.analyses.registry` finds analyses by name and runs them into folders.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from bindscope.analyses.card import CardColumn
from bindscope.analyses.inputs import AnalysisInputs, Inputs
from bindscope.analyses.results import ResultFiles
from bindscope.analyses.results import Summary as BaseSummary
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import Settings
from bindscope.estimators.verdicts import Measured

Progress = Callable[[int, int], object]
Rows = list[tuple[str, ...]]  # a header row, then rows of cells


@dataclass
class Result:
    """What ``compute`` returns: the tidy table, further tables and warnings. Each analysis subclasses it
    with typed fields (declared ``field(kw_only=True)``) for what its ``summarize`` and ``files`` read."""

    table: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Analysis(ABC):
    """One analysis; subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    title: ClassVar[str]
    Settings: ClassVar[type[Settings]]
    Summary: ClassVar[type[BaseSummary]]
    needs: ClassVar[frozenset[str]] = frozenset({"embeddings"})
    uses: ClassVar[frozenset[str]] = frozenset()
    extra_columns: ClassVar[tuple[str, ...]] = ()
    #: Whether the embedding folder may itself be a single-object bank (``embed --single-objects``).
    reads_single_objects: ClassVar[bool] = False
    #: The step of the paper's story it answers (the report's section heading) and its place in that story.
    story: ClassVar[str] = ""
    order: ClassVar[int] = 100
    #: The questions it answers on the report card, in order; each is measured by :meth:`measure`.
    columns: ClassVar[tuple[CardColumn, ...]] = ()
    #: What each of its figures shows, by file stem (the report's captions, in the order the figures are shown).
    captions: ClassVar[dict[str, str]] = {}

    @abstractmethod
    def compute(self, inputs: AnalysisInputs, settings: Any, progress: Progress | None = None) -> Result:
        """The analysis over arrays (pure: no files, no models)."""

    @abstractmethod
    def summarize(self, result: Any, settings: Any) -> BaseSummary:
        """The main numbers of ``summary.json`` (an instance of the analysis's ``Summary``)."""

    @abstractmethod
    def headline(self, summary: Any) -> Rows:
        """A table for the terminal from the typed summary: a header row, then rows of strings."""

    def measure(self, result: Any, settings: Any) -> dict[str, Measured]:
        """Each card column's number per seed with its cases, chance and ``+rand`` (keys: :attr:`columns`), from
        what ``compute`` returned; the registry judges them against the same columns measured on the ideal bag
        of concepts."""
        return {}

    def notes(self, summary: Any) -> list[str]:
        """Lines the terminal shows after the headline table (e.g. a verdict); default none."""
        return []

    def files(self, result: Any, settings: Any, context: RunContext) -> ResultFiles:
        """The tables, plots and artefacts written beside the summary (default: the tables)."""
        return ResultFiles(result.table, dict(result.tables))

    def seeds(self, settings: Any) -> list[int]:
        """The seeds a run used (recorded in the header)."""
        return list(getattr(settings, "seeds", ()))

    def check_folders(self, inputs: Inputs) -> None:
        """Refuse folder-backed inputs that cannot be right for this analysis (default: accept)."""
        return None

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

    def probe_source(self) -> dict[str, Any]:
        """Where probes fitted in this run come from: the embedding folder and the dataset's hash (None in memory)."""
        if self.inputs is None:
            return {"embeddings": None, "dataset_hash": None}
        return {"embeddings": self.inputs.embeddings.root, "dataset_hash": self.inputs.dataset.hash}
