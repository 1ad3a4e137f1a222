"""One result format for every analysis: written by :func:`write_result`, read by :func:`load_result`.

An analysis folder holds::

    summary.json      the common header (format, analysis, versions, inputs, settings, seeds,
                      seconds, content_key, warnings), then the analysis's main numbers
    results.parquet   tidy rows: the common columns COMMON_COLUMNS (the key columns, the cases and interval of a
                      rate, what was measured), then the analysis's own columns
    results.csv       the same table
    <name>.parquet    further tables of the analysis (and .csv unless large), e.g. per-scene correctness
    plots/*.png       its figures
    ...               its artefacts (e.g. fitted probes)

A folder appears only once complete; spread over seeds is always ``{"mean", "std", "n_seeds"}``. The paths a
summary records are shown by :func:`bindscope.core.display.display_path` (relative to the run folder the result
lies in): a result folder names no place outside itself and its run. Each analysis's ``summary.json`` has a JSON
Schema (:func:`summary_schema`), named by the format's version and the analysis: ``<analysis>.v<version>.json``.
Folders of format version 2 (spreads' count named ``n``, tables without the cases, interval and identity columns)
are read too: :func:`load_result` gives them in this version's terms.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, ValidationError

from bindscope.core.display import display_text, display_values, run_folder
from bindscope.core.errors import BindscopeError
from bindscope.core.io import read_json, read_parquet, staged_dir, to_frame, write_json, write_parquet
from bindscope.core.tidy import COMMON_COLUMNS, CONTROLS, IDENTITY_COLUMNS, KEY_COLUMNS
from bindscope.core.validation import Schema, format_validation, one_line, short_repr
from bindscope.core.version import __version__, stamp
from bindscope.estimators.intervals import with_intervals
from bindscope.estimators.verdicts import Verdict

FORMAT_NAME = "bindscope-result"
#: The version written. 3: spreads' count ``n_seeds`` (was ``n``), every results table with the cases, interval
#: and identity columns (:data:`~bindscope.core.tidy.COMMON_COLUMNS`), paths shown, never absolute.
FORMAT_VERSION = 3
#: The versions :func:`load_result` reads (an older one is given in this version's terms).
READABLE_VERSIONS = (2, 3)
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
#: The summary model of an analysis by name, None for an unregistered one: the registry replaces it by one that
#: imports a shipped analysis on first use (:mod:`bindscope.analyses.registry`).
summary_lookup: Callable[[str], type[Summary] | None] = SUMMARIES.get


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
    """Versions of what produced a result. torch's is the imported module's (with its build, e.g. ``+cu130``)
    where the analysis imported it, else the installed distribution's: torch is not imported for this."""
    torch = sys.modules.get("torch")
    out = {
        "bindscope": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
    }
    with contextlib.suppress(metadata.PackageNotFoundError):
        out["torch"] = str(torch.__version__) if torch is not None else metadata.version("torch")
    return out


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
    unknown = sorted(set(files.table["control"].astype(str)) - set(CONTROLS)) if len(files.table) else []
    if unknown:
        raise BindscopeError(f"internal: results rows with unknown controls {unknown}; add them to CONTROLS")
    out = Path(out)
    summary = {**shown_header(head, run_folder(out)), **numbers}
    ResultHeader.model_validate(summary)
    results = common_columns(files.table, identity(summary, out))
    with staged_dir(out, kind="result", overwrite=overwrite) as stage:
        write_json(stage / SUMMARY, summary)
        for name, table in {"results": results, **files.tables}.items():
            table = with_intervals(table) if "value" in table.columns and name != "results" else table
            write_parquet(table, stage / f"{name}.parquet")
            if name not in files.parquet_only:
                table.to_csv(stage / f"{name}.csv", index=False)
        if files.extra is not None:
            files.extra(stage)
    return summary


# -- what every results table holds, and where a result lies --------------------------------------------------------
#: The folder of a run that holds its result folders: ``results/<dataset>/<embeddings>/<analysis>``.
RUN_RESULTS = "results"
#: What the header records that may name places: shown by :func:`~bindscope.core.display.display_text`.
SHOWN_KEYS = ("inputs", "settings", "warnings")


def shown_header(head: Mapping[str, Any], root: Path | None) -> dict[str, Any]:
    """A header with the paths its inputs, settings and warnings record shown relative to ``root`` (the run folder
    the result lies in; else from ``~``, else only their last part): a summary names no absolute path."""
    return {k: display_values(v, root) if k in SHOWN_KEYS else v for k, v in head.items()}


def identity(summary: Mapping[str, Any], folder: str | Path) -> dict[str, Any]:
    """What a result's numbers were measured on (:data:`~bindscope.core.tidy.IDENTITY_COLUMNS`), from its header's
    inputs: the dataset's name (the run's name for it where the result lies in a run, else its preset's) and content
    hash, the model spec (a path in it shown, :func:`display_text`), the modality (``image+text`` for a result of
    both) and the layer (None: the model's output); None each for arrays given in memory."""
    inputs = summary.get("inputs") or {}
    dataset, emb, other = (inputs.get(k) or {} for k in ("dataset", "embeddings", "other"))
    run = run_folder(folder)
    parts = Path(os.path.abspath(folder)).relative_to(run).parts if run is not None else ()
    in_run = parts[1] if len(parts) == 4 and parts[0] == RUN_RESULTS else None
    spec = emb.get("model_spec")
    modalities = sorted({m for m in (emb.get("modality"), other.get("modality")) if m})
    return {
        "dataset": in_run or dataset.get("preset"),
        "dataset_hash": dataset.get("hash"),
        "model": None if spec is None else display_text(str(spec), run),
        "modality": "+".join(modalities) or None,
        "layer": emb.get("layer"),
    }


def common_columns(table: pd.DataFrame, ident: Mapping[str, Any]) -> pd.DataFrame:
    """A results table with the common columns first (:data:`~bindscope.core.tidy.COMMON_COLUMNS`): the key
    columns, ``n_cases`` (null where the analysis gave none), the 95% Wilson interval of each rate row
    (:func:`~bindscope.estimators.intervals.with_intervals`), what was measured (``ident``); then the analysis's
    own columns, in their order."""
    table = table.copy()
    cases = pd.to_numeric(table["n_cases"], errors="coerce") if "n_cases" in table else pd.Series(np.nan, table.index)
    table["n_cases"] = cases.round().astype("Int64")
    table = with_intervals(table)
    for column in IDENTITY_COLUMNS:
        table[column] = ident.get(column)
    table["layer"] = table["layer"].astype("Int64")
    own = [c for c in table.columns if c not in COMMON_COLUMNS]
    return table[[*COMMON_COLUMNS, *own]]


def read_header(folder: str | Path) -> dict[str, Any] | None:
    """The summary of a folder written by :func:`write_result` in a format version this bindscope reads
    (:data:`READABLE_VERSIONS`), else None (no error)."""
    path = Path(folder) / SUMMARY
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
        ResultHeader.model_validate(summary)
    except (OSError, ValueError, ValidationError):
        return None
    fmt = summary.get("format", {})
    return summary if fmt.get("name") == FORMAT_NAME and fmt.get("version") in READABLE_VERSIONS else None


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
    if fmt.get("version") not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise BindscopeError(
            f"{folder} has result format version {short_repr(fmt.get('version'))}, this bindscope reads versions "
            f"{readable}; run the analysis again with this version"
        )
    if fmt.get("version") != FORMAT_VERSION:
        summary = upgraded(summary)
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
    table = to_frame(arrow, results, "results table", RERUN)
    if fmt.get("version") != FORMAT_VERSION:  # an older table: its common columns from its header
        table = common_columns(table, identity(summary, folder))
    return LoadedResult(folder, head, summary, table, typed)


def upgraded(value: Any) -> Any:
    """A summary of format version 2 in this version's terms: each spread's ``n`` renamed ``n_seeds``."""
    if isinstance(value, list):
        return [upgraded(v) for v in value]
    if not isinstance(value, dict):
        return value
    spread = {"mean", "std", "n"} <= set(value) and "n_seeds" not in value
    return {("n_seeds" if spread and k == "n" else k): upgraded(v) for k, v in value.items()}


def typed_numbers(folder: Path, analysis: str, summary: Mapping[str, Any]) -> Summary | None:
    """The numbers of a summary validated by the analysis's :class:`Summary` (None for an unregistered one)."""
    schema = summary_lookup(analysis)
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


#: The JSON Schema dialect of :func:`summary_schema`.
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_name(analysis: str, version: int = FORMAT_VERSION) -> str:
    """The file name of an analysis's summary schema in a format version: ``<analysis>.v<version>.json``."""
    return f"{analysis}.v{version}.json"


def summary_schema(analysis: str) -> dict[str, Any]:
    """The JSON Schema of a registered analysis's ``summary.json`` in this format version: the common header
    (:class:`ResultHeader`, its ``format`` and ``analysis`` fixed), then the analysis's numbers (its
    :class:`Summary`), from the pydantic models as :func:`load_result` validates them (``model_json_schema``).
    Named by :func:`schema_name`; ``scripts/docs/summary_schemas.py`` writes them under docs/reference/schemas/."""
    numbers = summary_lookup(analysis)
    if numbers is None:
        raise BindscopeError(f"no summary model for {analysis!r}; choose one of {', '.join(sorted(SUMMARIES))}")
    head = ResultHeader.model_json_schema(mode="validation")
    body = numbers.model_json_schema(mode="validation")
    properties = {**head["properties"], **body.get("properties", {})}
    properties["format"] = {
        "type": "object",
        "properties": {"name": {"const": FORMAT_NAME}, "version": {"const": FORMAT_VERSION}},
        "required": ["name", "version"],
    }
    properties["analysis"] = {"const": analysis}
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": schema_name(analysis),
        "title": f"summary.json of {analysis}, {FORMAT_NAME} version {FORMAT_VERSION}",
        "description": one_line(numbers.__doc__ or "", 1000),
        "type": "object",
        "properties": properties,
        "required": [*head.get("required", []), *body.get("required", [])],
        "$defs": {**head.get("$defs", {}), **body.get("$defs", {})},
    }


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
