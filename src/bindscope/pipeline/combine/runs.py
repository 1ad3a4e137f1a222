"""``bindscope compare RUN_DIR... --out DIR``: several runs side by side.

The output folder holds ``results.parquet`` / ``.csv`` (every run's tidy tables, with ``run``,
``dataset``, ``embeddings`` and ``analysis_folder`` columns first), ``card.csv`` (the report card of every
run as one long table: a row per run, embedding folder and card column, with its value, sd over seeds,
``n_cases``, ``ci_low``, ``ci_high``, verdict, reason and floors; :data:`bindscope.pipeline.card.CARD_COLUMNS`),
``plots/<column>.png`` (a horizontal bar per model for each card column, rates with their 95% Wilson interval,
each row's floors as marks and its verdict on the bar) and ``compare.html`` (the card and the captioned figures,
self-contained), and ``warnings.json`` (what makes the runs not like for like, :func:`run_warnings`; also at the
head of ``compare.html``). No file of it names an absolute path (:func:`~bindscope.core.display.display_path`: a run
is shown from ``~`` or by its last part). Runs sharing a dataset name must hold the same dataset (content hash);
runs that differ in datasets, scene counts, seeds or solver settings are compared with a warning. Each run is
labelled by its config name (``name (folder)`` where two share one).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.card import plain
from bindscope.analyses.results import LoadedResult, read_header
from bindscope.core.display import display_path, display_values
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file, atomic_write_text, read_json, staged_dir, write_parquet
from bindscope.core.locks import is_locked, lock_path, writes
from bindscope.core.validation import short_repr
from bindscope.data.datasets import DATASET_FORMAT
from bindscope.estimators.verdicts import BAG, CHANCE, RAND
from bindscope.pipeline.card import (
    CardRow,
    card_html,
    card_table,
    columns_in_order,
    loaded_results,
    report_card,
    result_folders,
    row_analyses,
)
from bindscope.pipeline.report import STYLE, figure_html, manifest_skips
from bindscope.pipeline.run import FINISHED, MANIFEST, RUN_FORMAT


def check_runs(run_dirs: list[Path]) -> dict[str, str]:
    """Refuse folders that are not runs, repeated runs and runs whose same-named datasets differ; returns the
    dataset hashes by name."""
    if len(run_dirs) < 2:
        raise BindscopeError("give at least two run folders to compare")
    names = [p.resolve() for p in run_dirs]
    if len(set(names)) != len(names):
        raise BindscopeError("a run folder is given twice")
    hashes: dict[str, tuple[str, Path]] = {}
    for run in run_dirs:
        manifest = run_manifest(run)
        for name, entry in (manifest.get("datasets") or {}).items():
            if name in hashes and hashes[name][0] != entry["hash"]:
                raise BindscopeError(
                    f"dataset {name!r} differs between {hashes[name][1]} and {run} (hash {hashes[name][0][:12]} vs "
                    f"{entry['hash'][:12]}); compare runs of the same datasets"
                )
            hashes.setdefault(name, (entry["hash"], run))
    return {k: v[0] for k, v in hashes.items()}


def run_manifest(run: Path) -> dict[str, Any]:
    """The manifest of a finished run folder that holds results; anything else is refused in one line naming it.

    An interrupted run is refused too: its tables lack what it did not reach, and a comparison would not show it
    (a run complete with skips is finished: its skipped analyses are cells of the card). So is a run folder that a
    live process is writing (:func:`check_not_being_written`).
    """
    give = "give --out folders of bindscope run"
    check_not_being_written(run)
    why = None
    if not run.exists():
        why = "it does not exist"
    elif not run.is_dir():
        why = "it is a file"
    elif not (run / MANIFEST).is_file():
        why = f"no {MANIFEST}"
    if why:
        raise BindscopeError(f"{run} is not a finished run folder ({why}); {give}")
    manifest = read_json(run / MANIFEST, "run manifest")
    kind = manifest.get("format")
    if not isinstance(kind, dict) or kind.get("name") != RUN_FORMAT:
        what = "a dataset's" if kind == DATASET_FORMAT else "not a run's"
        raise BindscopeError(f"{run} is not a finished run folder (its {MANIFEST} is {what}); {give}")
    if manifest.get("status") not in FINISHED:
        raise BindscopeError(
            f"{run} is not a finished run folder (status {short_repr(manifest.get('status'))}: its tables lack what it "
            f"did not reach); finish it with `bindscope run CONFIG --out {run}` (it resumes), then compare"
        )
    datasets = manifest.get("datasets") or {}
    hashed = isinstance(datasets, dict) and all(
        isinstance(d, dict) and isinstance(d.get("hash"), str) for d in datasets.values()
    )
    if not hashed:
        raise BindscopeError(f"run manifest {run / MANIFEST} is damaged (its datasets have no hashes); run it again")
    if not result_folders(run):
        raise BindscopeError(
            f"{run} is a run folder without results (nothing under results/); {give} whose analyses ran"
        )
    return manifest


def check_not_being_written(run: Path) -> None:
    """Refuse a run folder that another bindscope process is writing now (a run, or its report): until that run
    ends, its manifest describes the last finished run while its tables are partly the new one's."""
    if is_locked(run.resolve()):
        raise BindscopeError(
            f"{run} is being written by another bindscope process now ({lock_holder(run)}); wait for it to finish, "
            "then compare"
        )


def lock_holder(run: Path) -> str:
    """``pid N`` of the process holding a run folder's lock, as its lock file records it."""
    try:
        return f"pid {int(json.loads(lock_path(run.resolve()).read_text())['pid'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown"


def manifest_identity(run: Path) -> tuple[int, int, int]:
    """What changes whenever a run (re)writes its manifest: the file's inode, time and size."""
    stat = (run / MANIFEST).stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def check_unchanged(run_dirs: Sequence[Path], before: dict[Path, tuple[int, int, int]]) -> None:
    """Refuse a comparison during which a run started writing one of its runs (its manifest changes as it starts)."""
    for run in run_dirs:
        check_not_being_written(run)
        if manifest_identity(run) != before[run]:
            raise BindscopeError(
                f"{run} changed while it was being compared (a bindscope run wrote into it); run compare again"
            )


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """Each run's label: its config name (the manifest's ``run``; the folder's name where it has none); names that
    repeat are told apart by their folder, ``name (folder)``, then by a count."""
    names = [str(run_manifest(run).get("run") or run.resolve().name) for run in run_dirs]
    labels = [f"{n} ({run.resolve().name})" if names.count(n) > 1 else n for n, run in zip(names, run_dirs)]
    out: list[str] = []
    for label in labels:
        unique, k = label, 2
        while unique in out or (unique != label and unique in labels):
            unique, k = f"{label}-{k}", k + 1
        out.append(unique)
    return out


#: The settings that choose a solver (an analysis's ``optimizer``, and ``parity``: the research code's
#: trajectory), whose values the compared runs should share; compared by name, whatever their values.
SOLVER_SETTINGS = ("optimizer", "parity")


def run_warnings(run_dirs: Sequence[Path]) -> list[str]:
    """What makes the runs' numbers not like for like, one line each: different datasets (content hashes), scene
    counts, and per analysis different seeds or solver settings (each result's recorded settings,
    :data:`SOLVER_SETTINGS`, whatever their values).

    Runs whose same-named datasets differ in content are refused by :func:`check_runs`, not warned about.
    """
    labels = run_labels(run_dirs)
    manifests = [run_manifest(run) for run in run_dirs]
    settings = [result_settings(run) for run in run_dirs]
    found = [
        differs("datasets (content hash)", labels, [dataset_facts(m, "hash") for m in manifests]),
        differs("scene counts", labels, [dataset_facts(m, "scenes") for m in manifests]),
        *(differs_per_analysis(key, labels, settings) for key in ("seeds", *SOLVER_SETTINGS)),
    ]
    return [line for line in found if line]


LIKE_FOR_LIKE = "their numbers are not like for like"


def differs(what: str, labels: list[str], values: list[dict[str, str]]) -> str | None:
    """A warning line when the runs' ``values`` of ``what`` (a mapping each, e.g. dataset -> hash) differ."""
    if len({repr(v) for v in values}) < 2:
        return None
    parts = [f"{label}: " + (", ".join(f"{k} {x}" for k, x in v.items()) or "none") for label, v in zip(labels, values)]
    return f"the runs differ in {what}: " + " | ".join(parts) + f"; {LIKE_FOR_LIKE}"


def differs_per_analysis(key: str, labels: list[str], settings: list[dict[str, dict[str, str]]]) -> str | None:
    """A warning line naming each analysis whose setting ``key`` differs between the runs that ran it."""
    parts = []
    for analysis in sorted({a for s in settings for a in s}):
        shown = [(label, s[analysis][key]) for label, s in zip(labels, settings) if key in s.get(analysis, {})]
        if len({v for _, v in shown}) > 1:
            parts.append(f"{analysis} (" + " | ".join(f"{label}: {v}" for label, v in shown) + ")")
    return f"the runs differ in {key}: {'; '.join(parts)}; {LIKE_FOR_LIKE}" if parts else None


def dataset_facts(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    """A run's datasets by name, each as one fact of its manifest entry (``hash``: its first 12 characters)."""
    datasets = sorted((manifest.get("datasets") or {}).items())
    if key == "hash":
        return {name: str(entry.get("hash"))[:12] for name, entry in datasets}
    return {name: f"{entry.get(key)} {key}" for name, entry in datasets}


def result_settings(run: Path) -> dict[str, dict[str, str]]:
    """Per analysis, the seeds and solver settings a run's result folders recorded (distinct values joined)."""
    seen: dict[str, dict[str, set[str]]] = {}
    for summary in sorted((run / "results").glob("*/*/*/summary.json")):
        header = read_header(summary.parent)
        if header is None:
            continue
        values = seen.setdefault(header["analysis"], {})
        values.setdefault("seeds", set()).add("[" + ", ".join(map(str, header["seeds"])) + "]")
        for key in SOLVER_SETTINGS:
            if key in header["settings"]:
                values.setdefault(key, set()).add(str(header["settings"][key]))
    return {a: {k: " / ".join(sorted(v)) for k, v in values.items()} for a, values in seen.items()}


#: The comparison's warnings (:func:`run_warnings`): a JSON list of lines in its folder.
WARNINGS = "warnings.json"


def warnings_html(warnings: list[str]) -> str:
    """The warnings at the head of ``compare.html`` (nothing when there are none)."""
    if not warnings:
        return ""
    items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
    return f"<div class='warnings'><p><b>Warnings</b>: these runs are not like for like.</p><ul>{items}</ul></div>"


#: Every run's result folders, read once: run label -> (dataset, embeddings) -> {analysis: result}.
RunResults = dict[str, dict[tuple[str, str], dict[str, LoadedResult]]]


def merged_tables(results: RunResults) -> pd.DataFrame:
    """Every run's results tables as one, with ``run``, ``dataset`` (the run's name for it, as the card names it),
    ``embeddings`` and ``analysis_folder`` first, then each table's columns (its common columns, what it was measured
    on included: :data:`~bindscope.core.tidy.COMMON_COLUMNS`)."""
    parts = []
    for label, run in results.items():
        for (dataset, embeddings), group in run.items():
            for name, loaded in group.items():
                table = loaded.table.drop(columns=["dataset"], errors="ignore")  # the run's name for it, below
                for i, (column, value) in enumerate(
                    (("run", label), ("dataset", dataset), ("embeddings", embeddings), ("analysis_folder", name))
                ):
                    table.insert(i, column, value)
                parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def card_rows(runs: dict[str, Path], results: RunResults) -> list[tuple[str, CardRow]]:
    """Every run's report-card rows (its skipped analyses included), each with its run's label."""
    return [
        (label, r)
        for label, run in runs.items()
        for r in report_card(run, results[label], manifest_skips(display_values(run_manifest(run), run)))
    ]


#: How each floor is marked on a comparison chart: colour and marker.
FLOOR_STYLE = {BAG: ("#c44e52", "s"), RAND: ("#dd8452", "D"), CHANCE: ("k", "|")}


def metric_plot(rows: list[tuple[str, CardRow]], column: str, path: Path) -> Path:
    """A horizontal bar per model (run / dataset / embeddings on the left) of one card column: rates in percent
    with their 95% Wilson interval, R² as is; each row's floors (bag of concepts, +rand, chance) as marks, and its
    verdict beside the bar."""
    plt = pyplot()
    shown = [(label, r, r.cells[column]) for label, r in rows if column in r.cells]
    unit = shown[0][2].column.unit
    scale = 1.0 if plain(unit) else 100.0
    names = [f"{label} / {r.dataset} / {r.label}" for label, r, _ in shown]
    verdicts = [cell.verdict for _, _, cell in shown]
    values = np.array([np.nan if v.value is None else v.value for v in verdicts], dtype=float)
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8.5, 1.9 + 0.45 * len(names)))
    ax.barh(y, scale * np.nan_to_num(values), color="#4c72b0", height=0.6, label=column)
    low = np.array([np.nan if v.ci_low is None else v.ci_low for v in verdicts], dtype=float)
    high = np.array([np.nan if v.ci_high is None else v.ci_high for v in verdicts], dtype=float)
    if np.isfinite(low).any():
        err = np.nan_to_num(np.stack([values - low, high - values]) * scale)
        ax.errorbar(scale * np.nan_to_num(values), y, xerr=err, fmt="none", ecolor="k", capsize=3, lw=1)
    for name, (color, marker) in FLOOR_STYLE.items():
        floors = np.array([np.nan if (f := v.floor_value(name)) is None else f for v in verdicts], dtype=float)
        if np.isfinite(floors).any():
            ax.scatter(scale * floors, y, color=color, marker=marker, s=40, zorder=3, label=name)
    for i, v in enumerate(verdicts):
        ax.annotate(
            v.answer.replace("_", " "),
            (0, y[i]),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=7,
            va="center",
            color="white" if np.nan_to_num(values[i]) * scale > 15 else "k",
        )
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()  # the first run on top, as in the card
    ax.set_xlabel(f"{column}, %" if scale == 100.0 else column)
    if scale == 100.0:
        ax.set_xlim(0, 102)
    ax.set_title(column)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.5 / fig.get_figheight() - 0.12), ncol=4)
    fig.tight_layout()  # the legend below the axes, clear of the bars
    return save_figure(fig, path)


def caption(rows: list[tuple[str, CardRow]], column: str) -> str:
    """What a comparison chart shows."""
    unit = next(r.cells[column].column.unit for _, r in rows if column in r.cells)
    text = f"{column} of each run's embeddings (run / dataset / embeddings)"
    if unit == "rate":
        text += ", in percent, with its 95% Wilson interval (n: the cases per seed)"
    return text + "; marked: its floors (bag of concepts, +rand, chance) and, on the bar, its verdict."


@writes("out", what="comparison folder", kind="comparison", reads=("run_dirs",))
def compare_runs(run_dirs: Sequence[str | Path], out: str | Path, *, overwrite: bool = False) -> Path:
    """Merge the tables and report cards of several runs into ``out`` (see the module doc)."""
    paths = [Path(p) for p in run_dirs]
    check_runs(paths)
    before = {run: manifest_identity(run) for run in paths}
    runs = dict(zip(run_labels(paths), paths))
    warnings = run_warnings(paths)
    out = Path(out)
    with staged_dir(out, kind="comparison", overwrite=overwrite) as stage:
        atomic_write_text(stage / WARNINGS, json.dumps(warnings, indent=2) + "\n")
        results = {label: loaded_results(run) for label, run in runs.items()}
        merged = merged_tables(results)
        write_parquet(merged, stage / "results.parquet")
        merged.to_csv(stage / "results.csv", index=False)
        rows = card_rows(runs, results)
        card_table([r for _, r in rows], runs=[label for label, _ in rows]).to_csv(stage / "card.csv", index=False)
        figures = []
        present = {k for _, r in rows for k, cell in r.cells.items() if cell.skip is None}
        for column in [c.key for _, c in columns_in_order(row_analyses(r for _, r in rows)) if c.key in present]:
            slug = re.sub(r"[^a-z0-9]+", "_", column.lower()).strip("_")
            chart = metric_plot(rows, column, stage / "plots" / f"{slug}.png")
            figures.append(figure_html(chart, caption(rows, column)))
        page = [
            "<!doctype html><html><head><meta charset='utf-8'><title>bindscope compare</title>",
            f"<style>{STYLE}</style></head><body><h1>bindscope compare</h1>",
            "<p>"
            + ", ".join(f"{html.escape(k)}: {html.escape(display_path(v, out))}" for k, v in runs.items())
            + "</p>",
            warnings_html(warnings),
            card_html([r for _, r in rows], runs=[label for label, _ in rows]) if rows else "<p>No results.</p>",
            *figures,
            "</body></html>",
        ]
        with atomic_file(stage / "compare.html", "w") as fh:
            fh.write("\n".join(page))
        check_unchanged(paths, before)  # what was read is one moment of each run: else nothing is moved into place
    return out
