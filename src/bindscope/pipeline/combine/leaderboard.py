"""``bindscope export RUN_DIR... --out STEM``: one leaderboard table across runs, as CSV and Markdown.

A row per run and report-card row (an embedding folder; a model, for the cross-modal tests): the run's label
(:func:`~bindscope.pipeline.combine.runs.run_labels`), the dataset (the run's name for it and its content hash),
the embeddings (the folder's label, the model spec, the modality, the layer), then a value and a verdict per card
column (each analysis's headline numbers, in the order of the story): ``STEM.csv`` holds the numbers as stored
(rates as shares in [0, 1]) with the typed verdicts (``binds``, ``no_binding``, ``undetermined``, ``skipped``),
``STEM.md`` the same table in words (``87.5% binds``), with the runs and the warnings above it.

Runs that are not like for like (datasets, scene counts, seeds, solver settings) are exported with a warning each,
as ``compare`` warns (:func:`~bindscope.pipeline.combine.runs.run_warnings`); a run's same-named dataset of other
content is a warning here, not an error: each row carries its dataset's hash. Each file is written atomically; an
existing file is replaced only with ``overwrite``. No cell names an absolute path
(:func:`~bindscope.core.display.display_path`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bindscope.analyses.card import ANSWER_WORDS, CardColumn, number_text
from bindscope.analyses.results import LoadedResult, identity
from bindscope.core.display import display_path, display_values
from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file
from bindscope.core.locks import writes
from bindscope.pipeline.card import CardRow, columns_in_order, loaded_results, report_card, row_analyses
from bindscope.pipeline.combine.runs import run_labels, run_manifest, run_warnings
from bindscope.pipeline.report import manifest_skips

#: The formats ``export`` writes, by name: the file suffix of each.
FORMATS = {"csv": ".csv", "md": ".md"}
#: The leading columns of a leaderboard: which run, dataset and embeddings a row is.
ROW_COLUMNS = ("run", "dataset", "dataset_hash", "embeddings", "model", "modality", "layer")
#: A card column's verdict in the table where its analysis was skipped for the row.
SKIPPED = "skipped"


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """The formats asked for, each known and named once."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise BindscopeError(
            f"--format takes {' and '.join(FORMATS)}, comma-separated (e.g. --format csv,md); got "
            f"{', '.join(unknown) or 'none'}"
        )
    return tuple(dict.fromkeys(formats))


def file_paths(stem: Path, formats: Sequence[str]) -> list[Path]:
    """The files of a leaderboard: ``STEM.csv``, ``STEM.md`` (``stem`` names no suffix of its own)."""
    if stem.suffix.lower() in FORMATS.values():
        raise BindscopeError(
            f"--out {stem} ends in {stem.suffix}; give the file name without its suffix, --out {stem.with_suffix('')} "
            f"(bindscope adds {' and '.join(FORMATS.values())})"
        )
    return [stem.with_name(stem.name + FORMATS[f]) for f in formats]


def check_files(paths: Sequence[Path], overwrite: bool) -> None:
    """Refuse a file that is a folder, and an existing file unless ``overwrite``."""
    for path in paths:
        if path.is_dir():
            raise BindscopeError(f"{path} is a folder; choose another --out")
        if (path.exists() or path.is_symlink()) and not overwrite:
            raise BindscopeError(f"{path} already exists; choose another --out or pass --overwrite to replace it")


def check_run_list(run_dirs: Sequence[Path]) -> None:
    """At least one run, none given twice (each is then read as a finished run, or refused in one line)."""
    if not run_dirs:
        raise BindscopeError("give at least one run folder to export")
    names = [p.resolve() for p in run_dirs]
    if len(set(names)) != len(names):
        raise BindscopeError("a run folder is given twice; give each run once")
    for run in run_dirs:
        run_manifest(run)


def row_identity(row: CardRow, group: dict[str, LoadedResult], manifest: dict[str, Any]) -> dict[str, Any]:
    """What a card row was measured on: from its first result's header; for a row of skipped analyses only, the
    dataset's hash and the model's spec from the run's manifest (its label names a model of the run)."""
    first = next(iter(group.values()), None)
    if first is not None:
        return identity(first.summary, first.path)
    dataset = (manifest.get("datasets") or {}).get(row.dataset) or {}
    model = (manifest.get("models") or {}).get(row.label) or {}
    return {"dataset_hash": dataset.get("hash"), "model": model.get("spec")}


def row_cells(row: CardRow, columns: list[tuple[str, CardColumn]]) -> dict[str, Any]:
    """A card row's value and verdict per column (``skipped`` where its analysis was; empty where it has none)."""
    cells: dict[str, Any] = {}
    for _, column in columns:
        cell = row.cells.get(column.key)
        value = None if cell is None or cell.skip is not None else cell.verdict.value
        verdict = None if cell is None else SKIPPED if cell.skip is not None else cell.verdict.answer
        cells[column.key], cells[f"{column.key} verdict"] = value, verdict
    return cells


def leaderboard(run_dirs: Sequence[str | Path]) -> tuple[pd.DataFrame, list[tuple[str, CardColumn]], list[str]]:
    """The leaderboard of ``run_dirs`` (see the module doc): the table, the card columns it holds, the warnings."""
    paths = [Path(p) for p in run_dirs]
    check_run_list(paths)
    records, present = [], set()
    for label, run in zip(run_labels(paths), paths):
        results = loaded_results(run)
        manifest = display_values(run_manifest(run), run)
        for row in report_card(run, results, manifest_skips(manifest)):
            ident = row_identity(row, results.get((row.dataset, row.label), {}), manifest)
            present |= set(row.cells)
            records.append((row, {"run": label, **ident, "dataset": row.dataset, "embeddings": row.label}))
    columns = [(a, c) for a, c in columns_in_order(row_analyses(r for r, _ in records)) if c.key in present]
    rows = [{**{k: lead.get(k) for k in ROW_COLUMNS}, **row_cells(row, columns)} for row, lead in records]
    names = [*ROW_COLUMNS, *(n for _, c in columns for n in (c.key, f"{c.key} verdict"))]
    table = pd.DataFrame(rows, columns=names).astype({"layer": "Int64"})
    return table, columns, run_warnings(paths)


def markdown(
    table: pd.DataFrame, columns: list[tuple[str, CardColumn]], runs: dict[str, str], warnings: list[str]
) -> str:
    """The leaderboard as a Markdown page: the runs, the warnings, then a row per card row with each column's number
    in its unit and its verdict in words."""
    lines = ["# bindscope leaderboard", "", "Runs: " + ", ".join(f"{k} (`{v}`)" for k, v in runs.items()) + ".", ""]
    if warnings:
        lines += ["Warnings: these runs are not like for like.", "", *(f"- {w}" for w in warnings), ""]
    head = ["run", "dataset", "embeddings", *(c.key for _, c in columns)]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 3 + ["---:"] * len(columns)) + "|"]
    for _, r in table.iterrows():
        cells = [str(r["run"]), str(r["dataset"]), str(r["embeddings"])]
        cells += [cell_words(r[c.key], r[f"{c.key} verdict"], c) for _, c in columns]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    lines += ["", "Each number: the card's (a rate in percent of its cases, a mean over seeds), then its verdict."]
    return "\n".join(lines) + "\n"


def cell_words(value: Any, verdict: Any, column: CardColumn) -> str:
    """One Markdown cell: ``87.5% binds``, ``skipped``, or ``-`` where the row has no such column."""
    if verdict is None or (isinstance(verdict, float) and pd.isna(verdict)):
        return "-"
    if verdict == SKIPPED:
        return SKIPPED
    shown = "-" if value is None or pd.isna(value) else number_text(float(value), column.unit)
    return f"{shown} {ANSWER_WORDS[str(verdict)]}"


@writes("out", what="leaderboard", reads=("run_dirs",))
def export_runs(
    run_dirs: Sequence[str | Path], out: str | Path, *, formats: Sequence[str] = tuple(FORMATS), overwrite: bool = False
) -> tuple[list[Path], list[str]]:
    """Write the leaderboard of ``run_dirs`` as ``OUT.csv`` and / or ``OUT.md`` (``formats``); returns the files
    written and the warnings (see the module doc)."""
    chosen = check_formats(list(formats))
    paths = file_paths(Path(out), chosen)
    check_files(paths, overwrite)
    table, columns, warnings = leaderboard(run_dirs)
    runs = {label: display_path(run) for label, run in zip(run_labels([Path(p) for p in run_dirs]), run_dirs)}
    texts = {".csv": table.to_csv(index=False), ".md": markdown(table, columns, runs, warnings)}
    with contextlib.ExitStack() as stack:  # every file written in full before any replaces an older one
        handles = [stack.enter_context(atomic_file(p, "w")) for p in paths]
        for path, handle in zip(paths, handles):
            handle.write(texts[path.suffix])
            handle.flush()
    return paths, warnings
