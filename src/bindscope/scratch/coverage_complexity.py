"""The binding function's complexity against coverage: ``bindscope scratch complexity SWEEP --out OUT``.

For every run of a coverage sweep (``bindscope scratch sweep``): export it (every ordered object
pair through the scene encoder, and the query encoder's probes; :func:`export_model`), run the
``complexity`` analysis on those embeddings with those probes frozen, and gather per family its
AUC and f* against the run's coverage, beside the in-distribution line and each run's verdict.
Writes a result folder in the common format (analysis ``scratch-complexity``)::

    OUT/summary.json     per sweep fraction: coverage, the in-distribution line and, per family,
                         AUC (mean, std, min, max over the sweep's seeds) and f* per seed; each
                         run's verdict
    OUT/results.parquet  tidy rows (variant = family label or ``embeddings``; group ``test_only``;
                         metric ``auc``, ``f_star`` or ``in_distribution``) plus fraction and coverage
    OUT/results.csv
    OUT/plots/complexity_coverage.png
    OUT/runs/f0.8-s0/    each run's ``complexity`` result folder

Work happens in a hidden sibling ``.<name>.complexity/``: a run whose complexity folder is there
with the same settings is not computed again, so an interrupted command continues where it stopped.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses import load_inputs
from bindscope.analyses.complexity import ComplexitySettings
from bindscope.analyses.registry import run_analysis
from bindscope.analyses.results import ResultFiles, content_key, header, load_result, read_header, write_result
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import check_output_dir, read_json, write_json
from bindscope.core.locks import writes
from bindscope.core.places import check_state_folder
from bindscope.core.tidy import result_row, spread, tidy
from bindscope.scratch.export import export_model
from bindscope.scratch.sweep import ANALYSIS as SWEEP_ANALYSIS
from bindscope.scratch.sweep import run_name

ANALYSIS = "scratch-complexity"
EXTRA_COLUMNS = ("fraction", "coverage")
TEST = "test_only"


def sweep_runs(sweep_dir: Path) -> list[tuple[float, int, float]]:
    """``(fraction, seed, coverage)`` of every run of a finished sweep folder, in order."""
    head = read_header(sweep_dir)
    if head is None or head.get("analysis") != SWEEP_ANALYSIS:
        raise BindscopeError(
            f"{sweep_dir} is not a finished `bindscope scratch sweep` folder; run the sweep first and pass its --out"
        )
    table = load_result(sweep_dir, SWEEP_ANALYSIS).table
    runs = table[table.variant == "model"][["fraction", "seed", "coverage"]].drop_duplicates()
    out = [(float(f), int(s), float(c)) for f, s, c in runs.sort_values(["fraction", "seed"]).itertuples(index=False)]
    missing = [run_name(f, s) for f, s, _ in out if not (sweep_dir / "runs" / run_name(f, s)).is_dir()]
    if missing:
        raise BindscopeError(f"{sweep_dir}/runs lacks {', '.join(missing)}; run the sweep command again to restore it")
    return out


@writes("out", what="result folder", kind="result", reads=("sweep_dir",))
def complexity_by_coverage(
    sweep_dir: str | Path,
    out: str | Path,
    settings: ComplexitySettings | None = None,
    *,
    device: str = "cpu",
    overwrite: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict:
    """Run ``complexity`` on every model of a coverage sweep and summarise it against coverage.

    Parameters
    ----------
    sweep_dir : path
        A finished ``bindscope scratch sweep`` folder.
    out : path
        The result folder (see the module docstring).
    settings : ComplexitySettings, optional
        The complexity analysis's settings for every run (default: its defaults).
    device : str
        Torch device for the export.

    Returns
    -------
    dict
        The written summary.
    """
    sweep_dir, out = Path(sweep_dir), Path(out)
    settings = ComplexitySettings() if settings is None else settings
    runs = sweep_runs(sweep_dir)
    request = {"sweep": read_header(sweep_dir)["content_key"], "complexity": settings.to_dict()}  # type: ignore[index]
    inputs = {"sweep": {"path": str(sweep_dir.resolve()), "key": request["sweep"]}}
    existing = read_header(out)
    if existing is not None and not overwrite:
        if existing["analysis"] == ANALYSIS and existing["content_key"] == content_key(ANALYSIS, inputs, request):
            return existing
        raise BindscopeError(f"{out} holds another result; choose another --out or pass --overwrite")
    check_output_dir(out, kind="result", overwrite=overwrite)
    work = _work_dir(out, request, overwrite)
    start = time.perf_counter()
    rows, readings = [], {}
    for i, (fraction, seed, coverage) in enumerate(runs):
        name = run_name(fraction, seed)
        numbers = run_complexity(sweep_dir / "runs" / name, work / name, settings, device)
        rows.extend(run_rows(numbers, fraction, seed, coverage))
        readings[name] = numbers["verdict"]["reading"]
        if say is not None:
            say(f"[{i + 1}/{len(runs)}] fraction {fraction:g} seed {seed}: {numbers['verdict']['reading']}")
    table = tidy(rows, EXTRA_COLUMNS).sort_values(["fraction", "seed"], kind="stable", ignore_index=True)
    numbers = coverage_summary(table, settings)
    numbers["verdicts"] = readings

    def extra(stage: Path) -> None:
        complexity_coverage_plot(table, stage / "plots" / "complexity_coverage.png")
        for _, seed_dir in _run_dirs(work):
            shutil.copytree(seed_dir / "complexity", stage / "runs" / seed_dir.name)

    head = header(
        ANALYSIS,
        inputs=inputs,
        settings=request,
        seeds=sorted({s for _, s, _ in runs}),
        seconds=time.perf_counter() - start,
    )
    written = write_result(out, head, numbers, ResultFiles(table, extra=extra), overwrite=overwrite)
    shutil.rmtree(work, ignore_errors=True)
    return written


def run_complexity(model_dir: Path, folder: Path, settings: ComplexitySettings, device: str) -> dict:
    """Export one model into ``folder/export`` and run ``complexity`` into ``folder/complexity`` (kept
    when it is already there with these settings); returns the complexity summary's own numbers."""
    result_dir = folder / "complexity"
    previous = read_header(result_dir)
    if previous is not None and previous.get("settings") == settings.to_dict():
        return load_result(result_dir, "complexity").numbers
    exported = export_model(model_dir, folder / "export", control=False, device=device)
    inputs = load_inputs("complexity", exported.embeddings, probes=exported.probes, settings=settings)
    return run_analysis("complexity", inputs, result_dir, settings, overwrite=True).numbers


def run_rows(numbers: dict, fraction: float, seed: int, coverage: float) -> list[dict[str, Any]]:
    """Tidy rows of one run: per family its AUC and f* (NaN when none), and the mean in-distribution line."""
    extra = {"fraction": fraction, "coverage": coverage}
    rows = [_row(label, "auc", seed, e["auc"]["mean"], extra) for label, e in numbers["approximators"].items()]
    rows += [_row(label, "f_star", seed, e["f_star"], extra) for label, e in numbers["approximators"].items()]
    line = [v["mean"] for v in numbers["in_distribution"].values() if v["mean"] is not None]
    rows.append(_row("embeddings", "in_distribution", seed, float(np.mean(line)) if line else None, extra))
    return rows


def _row(variant: str, metric: str, seed: int, value: float | None, extra: dict[str, Any]) -> dict[str, Any]:
    return result_row(ANALYSIS, variant, TEST, metric, seed, np.nan if value is None else value, **extra)


def coverage_summary(table: pd.DataFrame, settings: ComplexitySettings) -> dict:
    """Per sweep fraction: coverage, the in-distribution line, and per family AUC over seeds and f* per seed."""
    per: dict[str, Any] = {}
    for fraction, at in table.groupby("fraction", sort=True):
        line = at[at.metric == "in_distribution"]["value"]
        entry: dict[str, Any] = {"coverage": round(float(at["coverage"].mean()), 6), "in_distribution": spread(line)}
        for label in [f.label for f in settings.families()]:
            auc = at[(at.variant == label) & (at.metric == "auc")]["value"].to_numpy(dtype=float)
            stars = at[(at.variant == label) & (at.metric == "f_star")].sort_values("seed")
            entry[label] = {
                "auc": {**spread(auc), "min": float(np.min(auc)), "max": float(np.max(auc))},
                "f_star": {str(int(s)): (None if np.isnan(v) else float(v)) for s, v in zip(stars.seed, stars.value)},
            }
        per[f"{fraction:g}"] = entry
    return {
        "per_fraction": per,
        "families": [f.label for f in settings.families()],
        "metric": "AUC of test_only object accuracy (scenes of objects no fit saw) over the complexity "
        "fractions, under the model's own query-encoder probes; f* per seed of the sweep (null: no f*)",
    }


def complexity_coverage_plot(table: pd.DataFrame, path: str | Path) -> Path:
    """AUC per family against the models' coverage, a min-max band over the sweep's seeds."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    auc = table[table.metric == "auc"]
    for label, rows in auc.groupby("variant", sort=False):
        by = rows.groupby("coverage")["value"]
        x = by.mean().index.to_numpy(dtype=float)
        (line,) = ax.plot(x, by.mean().to_numpy(), marker="o", ms=3, label=str(label))
        ax.fill_between(x, by.min().to_numpy(), by.max().to_numpy(), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("coverage of the trained model (share of objects trained on)")
    ax.set_ylabel("AUC of test_only object accuracy (band: min-max over seeds)")
    ax.set_title("binding-function complexity against coverage", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return save_figure(fig, path)


def _work_dir(out: Path, request: dict, overwrite: bool) -> Path:
    work = check_state_folder(out.with_name(f".{out.name}.complexity"))
    record = work / "request.json"
    if record.is_file() and not overwrite and read_json(record, "complexity-by-coverage record") != request:
        raise BindscopeError(
            f"{work} holds an unfinished run of other settings; run its original command to finish it, "
            "or pass --overwrite to start over"
        )
    if overwrite and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_json(record, request)
    return work


def _run_dirs(work: Path) -> list[tuple[str, Path]]:
    return sorted((p.name, p) for p in work.iterdir() if p.is_dir() and (p / "complexity").is_dir())
