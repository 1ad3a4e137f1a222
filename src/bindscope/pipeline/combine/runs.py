"""``bindscope compare RUN_DIR... --out DIR``: several runs side by side.

The output folder holds ``results.parquet`` / ``.csv`` (every run's tidy tables, with ``run``,
``dataset``, ``embeddings`` and ``analysis_folder`` columns first), ``card.csv`` (the report card of every
run as one table), ``plots/<metric>.png`` (a bar per model for each headline metric) and
``compare.html`` (the card and the figures, self-contained). Runs sharing a dataset name must hold
the same dataset (content hash).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.results import load_result
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file, read_json, staged_dir
from bindscope.core.locks import writes
from bindscope.core.validation import short_repr
from bindscope.data.datasets import DATASET_FORMAT
from bindscope.pipeline.report import (
    DEPTH_METRICS,
    STYLE,
    cell_text,
    image_tag,
    report_card,
    result_folders,
    table_html,
)
from bindscope.pipeline.run import MANIFEST, RUN_FORMAT


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

    An interrupted run is refused too: its tables lack what it did not reach, and a comparison would not show it.
    """
    give = "give --out folders of bindscope run"
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
    if manifest.get("status") != "complete":
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


def run_label(run: Path, taken: set[str]) -> str:
    label, k = run.resolve().name, 2
    while label in taken:
        label, k = f"{run.resolve().name}-{k}", k + 1
    taken.add(label)
    return label


def merged_tables(runs: dict[str, Path]) -> pd.DataFrame:
    parts = []
    for label, run in runs.items():
        for (dataset, embeddings), folders in result_folders(run).items():
            for name, folder in folders.items():
                table = load_result(folder).table.copy()
                for i, (column, value) in enumerate(
                    (("run", label), ("dataset", dataset), ("embeddings", embeddings), ("analysis_folder", name))
                ):
                    table.insert(i, column, value)
                parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def card_table(runs: dict[str, Path]) -> pd.DataFrame:
    rows = []
    for label, run in runs.items():
        for r in report_card(run):
            rows.append({"run": label, "dataset": r.dataset, "embeddings": r.label, **r.cells})
    return pd.DataFrame(rows)


def metric_plot(card: pd.DataFrame, metric: str, path: Path) -> Path:
    plt = pyplot()
    names = [f"{r.run}/{r.dataset}/{r.embeddings}" for r in card.itertuples()]
    values = pd.to_numeric(card[metric], errors="coerce").to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(names) + 2), 3.8))
    ax.bar(np.arange(len(names)), np.nan_to_num(values), color="#4c72b0")
    ax.set_xticks(np.arange(len(names)), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(metric)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


@writes("out", what="comparison folder", kind="comparison", reads=("run_dirs",))
def compare_runs(run_dirs: Sequence[str | Path], out: str | Path, *, overwrite: bool = False) -> Path:
    """Merge the tables and report cards of several runs into ``out`` (see the module doc)."""
    paths = [Path(p) for p in run_dirs]
    check_runs(paths)
    taken: set[str] = set()
    runs = {run_label(p, taken): p for p in paths}
    out = Path(out)
    with staged_dir(out, kind="comparison", overwrite=overwrite) as stage:
        merged = merged_tables(runs)
        merged.to_parquet(stage / "results.parquet", index=False)
        merged.to_csv(stage / "results.csv", index=False)
        card = card_table(runs)
        card.to_csv(stage / "card.csv", index=False)
        figures = []
        for metric in [m for m in DEPTH_METRICS if m in card.columns]:
            slug = re.sub(r"[^a-z0-9]+", "_", metric.lower()).strip("_")
            figures.append(metric_plot(card, metric, stage / "plots" / f"{slug}.png"))
        body = [
            ["run", "dataset", "embeddings", *[c for c in card.columns if c not in ("run", "dataset", "embeddings")]]
        ]
        for row in card.itertuples(index=False):
            body.append([cell_text(v) for v in row])
        page = [
            "<!doctype html><html><head><meta charset='utf-8'><title>bindscope compare</title>",
            f"<style>{STYLE}</style></head><body><h1>bindscope compare</h1>",
            "<p>" + ", ".join(f"{html.escape(k)}: {html.escape(str(v))}" for k, v in runs.items()) + "</p>",
            table_html(body) if len(body) > 1 else "<p>No results.</p>",
            *(image_tag(f) for f in figures),
            "</body></html>",
        ]
        with atomic_file(stage / "compare.html", "w") as fh:
            fh.write("\n".join(page))
    return out
