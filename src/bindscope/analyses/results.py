"""One result format for every analysis: written by :func:`write_result`, read by :func:`load_result`.

An analysis folder holds::

    summary.json      the common header (format, analysis, versions, inputs, settings, seeds,
                      seconds, content_key, warnings), then the analysis's main numbers
    results.parquet   tidy rows: the key columns KEY_COLUMNS plus the analysis's own columns
    results.csv       the same table
    <name>.parquet    further tables of the analysis (and .csv unless large), e.g. per-scene correctness
    plots/*.png       its figures
    ...               its artefacts (e.g. fitted probes)

A folder appears only once complete; spread over seeds is always ``{"mean", "std", "n"}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, ValidationError

from bindscope.core.errors import BindscopeError
from bindscope.core.io import read_json, read_parquet, staged_dir, to_frame, write_json, write_parquet
from bindscope.core.tidy import KEY_COLUMNS
from bindscope.core.validation import Schema, format_validation, one_line
from bindscope.core.version import __version__, stamp
from bindscope.estimators.intervals import with_intervals
from bindscope.estimators.verdicts import Verdict

FORMAT_NAME = "bindscope-result"
FORMAT_VERSION = 2
SUMMARY = "summary.json"
RESULTS = "results.parquet"
RERUN = "run the analysis again"


class ResultFormat(Schema):
    name: str
    version: int


class ResultHeader(Schema):
    """The common header of every ``summary.json`` (the analysis's numbers that follow it are ignored here)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    format: ResultFormat
    analysis: str
    bindscope_version: str
    created: str
    content_key: str
    inputs: dict[str, Any]
    settings: dict[str, Any]
    seeds: list[int]
    seconds: float
    versions: dict[str, str]
    warnings: list[str]


HEADER_KEYS = tuple(ResultHeader.model_fields)


class Summary(Schema):
    """The base of an analysis's main numbers (the part of ``summary.json`` after the header).

    Each analysis declares a subclass beside its settings; :func:`write_result` writes it and
    :func:`load_result` validates it back (a folder whose numbers do not fit is damaged or older). A key
    added by hand is ignored, not refused; the common header is passed as validation context ``header``.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    #: Each card column's typed verdict (:class:`~bindscope.estimators.verdicts.Verdict`), judged by the registry
    #: against the same analysis run on the ideal bag of concepts; empty for an analysis without card columns.
    verdicts: dict[str, Verdict] = Field(default_factory=dict, exclude_if=lambda v: not v)
    #: How far the embeddings are from their ``+rand`` control's (relative Frobenius distance), where the analysis
    #: was given the control: near 0, the model's weights did not shape its embeddings.
    rand_distance: float | None = Field(None, exclude_if=lambda v: v is None)

    def numbers(self) -> dict[str, Any]:
        """The numbers as ``summary.json`` holds them."""
        return self.model_dump(mode="json")


#: The summary model of each registered analysis (the registry fills it; results never import analyses).
SUMMARIES: dict[str, type[Summary]] = {}


@dataclass(frozen=True)
class LoadedResult:
    """An analysis folder read back: its header, the whole summary, the tidy results table."""

    path: Path
    header: ResultHeader
    summary: dict[str, Any]
    table: pd.DataFrame
    typed: Summary | None = None  # the numbers validated by the analysis's Summary (None: not registered)

    @property
    def analysis(self) -> str:
        return self.header.analysis

    @property
    def view(self) -> Summary | dict[str, Any]:
        """What the analysis's ``headline`` and ``notes`` read: its typed numbers (:class:`Summary`), or the
        whole summary where the analysis declares none."""
        return self.typed if self.typed is not None else self.summary

    @property
    def numbers(self) -> dict[str, Any]:
        """The analysis's own part of the summary (everything after the header)."""
        return {k: v for k, v in self.summary.items() if k not in HEADER_KEYS}

    def read_table(self, name: str) -> pd.DataFrame:
        """A further table of the folder (``<name>.parquet``), e.g. ``per_scene`` or ``training``."""
        path = self.path / f"{name}.parquet"
        if not path.is_file() and not path.is_symlink():
            tables = sorted(p.stem for p in self.path.glob("*.parquet") if p.name != RESULTS)
            raise BindscopeError(f"{self.path} has no table {name!r}; it has {', '.join(tables) or 'none'}")
        return to_frame(read_parquet(path, "result table", RERUN, root=self.path), path, "result table", RERUN)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A block that reads the analysis's own numbers: a missing key or a wrong type met there
        means a damaged ``summary.json``, reported as one :class:`BindscopeError`."""
        try:
            yield
        except BindscopeError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
            raise BindscopeError(
                f"{self.path / SUMMARY} is damaged ({type(exc).__name__}: {one_line(exc, 100)}); {RERUN}"
            ) from None


@dataclass
class ResultFiles:
    """What an analysis writes besides the summary: tables, and a hook for plots and artefacts."""

    table: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    extra: Callable[[Path], None] | None = None
    parquet_only: frozenset[str] = frozenset()  # large tables written without a CSV copy


# -- spread ---------------------------------------------------------------------------------------
# -- provenance -----------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    """Versions of what produced a result."""
    import torch

    return {
        "bindscope": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "torch": torch.__version__,
    }


def content_key(analysis: str, inputs: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """What makes a result what it is: analysis, format, bindscope version, inputs' keys, settings.

    Two folders with the same key hold the same computation; a step is reused only on a match.
    """
    keys = {k: v.get("key") if isinstance(v, Mapping) else v for k, v in inputs.items()}
    blob = {
        "analysis": analysis,
        "format": FORMAT_VERSION,
        "bindscope": __version__,
        "inputs": keys,
        "settings": settings,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def header(
    analysis: str,
    *,
    inputs: Mapping[str, Any],
    settings: Mapping[str, Any],
    seeds: Iterable[int],
    seconds: float,
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    """The common header of ``summary.json``."""
    return {
        "format": {"name": FORMAT_NAME, "version": FORMAT_VERSION},
        "analysis": analysis,
        **stamp(),
        "content_key": content_key(analysis, inputs, settings),
        "inputs": dict(inputs),
        "settings": dict(settings),
        "seeds": [int(s) for s in seeds],
        "seconds": round(float(seconds), 3),
        "versions": versions(),
        "warnings": list(warnings),
    }


# -- writing and reading --------------------------------------------------------------------------
def write_result(
    out: str | Path,
    head: Mapping[str, Any],
    numbers: Mapping[str, Any],
    files: ResultFiles,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write an analysis folder atomically; returns the summary as written.

    ``head`` is :func:`header`'s output, ``numbers`` the analysis's main numbers (their keys may
    not reuse a header key).
    """
    clash = sorted(set(numbers) & set(HEADER_KEYS))
    if clash:
        raise BindscopeError(f"internal: summary keys {clash} clash with the common header")
    summary = {**head, **numbers}
    ResultHeader.model_validate(summary)
    out = Path(out)
    with staged_dir(out, kind="result", overwrite=overwrite) as stage:
        write_json(stage / SUMMARY, summary)
        for name, table in {"results": files.table, **files.tables}.items():
            table = with_intervals(table) if "value" in table.columns else table
            write_parquet(table, stage / f"{name}.parquet")
            if name not in files.parquet_only:
                table.to_csv(stage / f"{name}.csv", index=False)
        if files.extra is not None:
            files.extra(stage)
    return summary


def read_header(folder: str | Path) -> dict[str, Any] | None:
    """The summary of a folder written by :func:`write_result` in this format, else None (no error)."""
    path = Path(folder) / SUMMARY
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
        ResultHeader.model_validate(summary)
    except (OSError, ValueError, ValidationError):
        return None
    fmt = summary.get("format", {})
    return summary if (fmt.get("name"), fmt.get("version")) == (FORMAT_NAME, FORMAT_VERSION) else None


def load_result(folder: str | Path, analysis: str | None = None) -> LoadedResult:
    """Read an analysis folder back, checking its format, version and (if given) its analysis.

    Raises
    ------
    BindscopeError
        For a folder that is not an analysis folder, one of an older (or newer) format version,
        one of another analysis than ``analysis``, or a damaged one.
    """
    folder = Path(folder)
    if not (folder / SUMMARY).is_file() and not (folder / SUMMARY).is_symlink():
        raise BindscopeError(f"{folder} is not an analysis folder (no {SUMMARY}); give the --out folder of an analysis")
    summary = read_json(folder / SUMMARY, "analysis summary", folder)
    fmt = summary.get("format")
    if not isinstance(fmt, dict) or fmt.get("name") != FORMAT_NAME:
        raise BindscopeError(
            f"{folder} was written by an older bindscope (no result format tag in {SUMMARY}); "
            "run the analysis again with this version"
        )
    if fmt.get("version") != FORMAT_VERSION:
        raise BindscopeError(
            f"{folder} has result format version {fmt.get('version')}, this bindscope reads version "
            f"{FORMAT_VERSION}; run the analysis again with this version"
        )
    try:
        head = ResultHeader.model_validate(summary)
    except ValidationError as exc:
        raise BindscopeError(f"{folder / SUMMARY} is damaged: {format_validation(exc)}") from None
    if analysis is not None and head.analysis != analysis:
        raise BindscopeError(f"{folder} holds a {head.analysis!r} result, not {analysis!r}")
    results = folder / RESULTS
    if not results.is_file() and not results.is_symlink():
        raise BindscopeError(f"{folder} has no {RESULTS}; the folder is incomplete, run the analysis again")
    arrow = read_parquet(results, "results table", RERUN, root=folder)
    missing = [c for c in KEY_COLUMNS if c not in arrow.column_names]
    if missing:
        raise BindscopeError(f"{results} lacks the key columns {missing}; run the analysis again")
    check_key_columns(arrow.schema, arrow.num_rows, results)
    typed = typed_numbers(folder, head.analysis, summary)
    return LoadedResult(folder, head, summary, to_frame(arrow, results, "results table", RERUN), typed)


def typed_numbers(folder: Path, analysis: str, summary: Mapping[str, Any]) -> Summary | None:
    """The numbers of a summary validated by the analysis's :class:`Summary` (None for an unregistered one)."""
    schema = SUMMARIES.get(analysis)
    if schema is None:
        return None
    numbers = {k: v for k, v in summary.items() if k not in HEADER_KEYS}
    try:
        return schema.model_validate(numbers, context={"header": dict(summary)})
    except ValidationError as exc:
        raise BindscopeError(
            f"{folder / SUMMARY} does not hold {analysis} numbers ({one_line(format_validation(exc), 160)}); "
            f"the folder is damaged or was written by another bindscope version; {RERUN}"
        ) from None


def check_key_columns(schema: Any, num_rows: int, path: Path) -> None:
    """Key columns of the right kinds (in the file, before pandas metadata could convert them): ``seed``
    whole numbers, ``value`` numbers, the others text; any type in a table without rows."""
    import pyarrow as pa

    for column in KEY_COLUMNS:
        kind = schema.field(column).type
        if column == "seed":
            ok = pa.types.is_integer(kind)
        elif column == "value":
            ok = pa.types.is_integer(kind) or pa.types.is_floating(kind)
        else:
            ok = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        if num_rows and not ok:
            raise BindscopeError(f"{path}: key column {column!r} holds {kind}, not the kind it should; {RERUN}")
