"""Coverage sweeps: held-out accuracy of models trained from scratch against the train fraction.

Token-level configs are read on held-out objects (object accuracy); image-text configs on held-out scenes
(the attribute swap, with concept@1, strict top-1, the noun swap and order sensitivity beside it).

``sweep(config, settings, out)`` trains one model per (fraction, seed) and writes a result folder
in the common format (:mod:`bindscope.analyses.results`, analysis ``scratch-sweep``)::

    OUT/summary.json     the common header, then per fraction: mean, std, n, min, max of
                         held-out-object accuracy (and on the scenes that need binding, concept
                         and in-distribution accuracy, and the batch-query accuracies of configs
                         with ``batch_eval``) over seeds, at each run's selected step, beside what an
                         ideal bag of concepts and chance score on the same scenes (``floors``), and
                         whether every seed clears the bag by the margin (``binding``)
    OUT/results.parquet  tidy rows: the key columns (variant "model", "chance" or "bag of concepts",
                         group = the objects scored: test, validation, train; every metric has
                         all three) plus fraction, coverage, selected_step
    OUT/results.csv
    OUT/plots/coverage.png
    OUT/runs/f0.2-s0/    every run's model folder (a ``scratch:`` model each)

Runs train in a hidden sibling ``.<name>.sweep/`` until all are done, so an interrupted sweep
continues with its unfinished runs and OUT appears only when complete.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import field_validator

from bindscope.analyses.results import ResultFiles, content_key, header, read_header, write_result
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, current_executor
from bindscope.core.faults import kill_point
from bindscope.core.io import check_output_dir, read_json, write_json
from bindscope.core.locks import writes
from bindscope.core.places import check_state_folder
from bindscope.core.tidy import result_row, spread, tidy
from bindscope.core.validation import MAX_ITEMS, MAX_SEED, MAX_WORKERS, Settings, WholeSeed
from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.estimators.floors import MARGIN, binding_verdict
from bindscope.scratch.config import config_from_dict
from bindscope.scratch.plot import BAG_OF_CONCEPTS, coverage_plot
from bindscope.scratch.train import train_model
from bindscope.space.splits import DEFAULT_SEEDS, check_fraction

ANALYSIS = "scratch-sweep"
EXTRA_COLUMNS = ("fraction", "coverage", "selected_step")
SPLITS = {"test": "held-out objects", "validation": "validation objects", "train": "training objects"}
#: Metrics summarised per fraction (the batch-query ones exist only for configs with ``batch_eval``).
SUMMARY_METRICS = ("object_acc", "binding_object_acc", "concept_acc", "batch_object_acc", "batch_concept_acc")


@dataclass(frozen=True)
class SweepKind:
    """What a sweep of one kind of config reads: its evaluation parts (group -> label), its metrics, the
    headline (group, metric) judged against the bag of concepts, and the metrics its figure shows."""

    splits: dict[str, str]
    metrics: tuple[str, ...]
    headline: tuple[str, str]
    panels: tuple[str, str]
    what: str

    @property
    def key(self) -> str:
        return "_".join(self.headline)


TOKEN = SweepKind(SPLITS, SUMMARY_METRICS, ("test", "object_acc"), ("object_acc", "concept_acc"), "held-out object acc")
IMAGE_TEXT = SweepKind(
    {"heldout": "held-out scenes", "train": "trained-on scenes"},
    ("swap_attribute", "swap_noun", "swap_relation", "swap_count", "order_sensitivity", "concept_at_1", "strict_at_1"),
    ("heldout", "swap_attribute"),
    ("swap_attribute", "concept_at_1"),
    "held-out attribute swap",
)


def sweep_kind(config: ScratchConfig | ClipConfig) -> SweepKind:
    return IMAGE_TEXT if isinstance(config, ClipConfig) else TOKEN


def run_name(fraction: float, seed: int) -> str:
    return f"f{fraction:g}-s{seed}"


class SweepSettings(Settings):
    """Which coverages (train fractions) and seeds a sweep trains; both are sorted and deduplicated."""

    fractions: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
    seeds: tuple[WholeSeed, ...] = DEFAULT_SEEDS

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v:
            raise ValueError("give at least one fraction, e.g. --fractions 0.2,0.4,0.6,0.8")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} fractions, got {len(v)}")
        return tuple(sorted({check_fraction(f, "fraction") for f in v}))

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or min(v) < 0 or max(v) > MAX_SEED:
            raise ValueError(f"give at least one seed (seeds are non-negative), each at most {MAX_SEED}")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} seeds, got {len(v)}")
        return tuple(sorted(set(v)))


@writes("out", what="sweep folder", kind="result")
def sweep(
    config: ScratchConfig | ClipConfig,
    settings: SweepSettings,
    out: str | Path,
    *,
    device: str = "cpu",
    overwrite: bool = False,
    workers: int = 1,
    progress: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict:
    """Train every (fraction, seed) run of ``config`` and summarise; returns the written summary.

    ``workers`` > 1 trains that many runs at once in worker processes, splitting the CPU threads
    between them (on 2 cores, 2 workers of 1 thread trained 1.4x more steps per second than one
    run on 2 threads). Each run's numbers are deterministic for a given thread count. A folder
    holding the same sweep (same content key) is returned as it is.
    """
    if workers < 1:
        raise BindscopeError(f"--workers must be at least 1, got {workers}")
    if workers > MAX_WORKERS:
        raise BindscopeError(f"--workers must be at most {MAX_WORKERS}, got {workers}")
    out = Path(out)
    fractions, seeds = list(settings.fractions), list(settings.seeds)
    request = {"config": config.to_dict(), "fractions": fractions, "seeds": seeds}
    inputs = {"config": {"name": config.name, "key": config.to_dict()}}
    existing = read_header(out)
    if existing is not None and not overwrite:
        if existing["analysis"] == ANALYSIS and existing["content_key"] == content_key(ANALYSIS, inputs, request):
            shutil.rmtree(_work_dir(out), ignore_errors=True)  # left by a crash after the result was written
            return existing
        raise BindscopeError(f"{out} holds another result; choose another --out or pass --overwrite")
    check_output_dir(out, kind="result", overwrite=overwrite)
    runs_dir = _runs_dir(out, request, overwrite)
    start = time.perf_counter()
    jobs = [
        (config.model_copy(update={"fraction": f, "seed": s}), runs_dir / run_name(f, s))
        for f in fractions
        for s in seeds
    ]
    kind = sweep_kind(config)
    for job_config, _ in jobs:
        type(config).model_validate(job_config.model_dump())  # the overrides must still be valid
    rows, runs = [], []
    for i, (job_config, summary, status) in enumerate(_train_all(jobs, device, workers, progress)):
        if say is not None:
            acc = summary["selected"].get(kind.key, float("nan"))
            say(
                f"[{i + 1}/{len(jobs)}] fraction {job_config.fraction:g} seed {job_config.seed}: {kind.what} "
                f"{acc:.3f} ({status})"
            )
        rows.extend(_rows(summary, job_config.fraction, job_config.seed))
        runs.append({"fraction": job_config.fraction, **run_facts(summary)})
        kill_point("sweep-run")
    table = tidy(rows, EXTRA_COLUMNS).sort_values(["fraction", "seed"], kind="stable", ignore_index=True)
    numbers = sweep_summary(table, config, fractions, kind)
    add_run_facts(numbers["per_fraction"], runs)
    title = (
        f"scratch {config.name}: binding generalisation against coverage "
        f"({len(seeds)} seed{'s' if len(seeds) > 1 else ''})"
        + ("; selected on test: optimistic" if getattr(config, "selection", None) == "test" else "")
    )

    def extra(stage: Path) -> None:
        coverage_plot(
            table,
            stage / "plots" / "coverage.png",
            title=title,
            splits=tuple(kind.splits.items()),
            panels=kind.panels,
            headline=kind.headline,
        )
        shutil.copytree(runs_dir, stage / "runs", ignore=_not_runs(runs_dir))  # a failure loses no run

    head = header(
        ANALYSIS,
        inputs=inputs,
        settings=request,
        seeds=seeds,
        seconds=time.perf_counter() - start,
    )
    numbers["device"] = device
    written = write_result(out, head, numbers, ResultFiles(table, extra=extra), overwrite=overwrite)
    shutil.rmtree(runs_dir, ignore_errors=True)
    return written


def _train_all(
    jobs: list, device: str, workers: int, progress: bool
) -> Iterator[tuple[ScratchConfig | ClipConfig, dict, str]]:
    """Train the (config, folder) jobs on the chosen executor, yielding (config, summary, status) as
    runs finish. Each run trains into its own folder (so on a cluster, the output must be on storage
    every node mounts); a run interrupted part-way continues from its checkpoint."""
    executor = current_executor(workers=workers)
    alone = not executor.distributed and (workers == 1 or len(jobs) == 1)
    need = Resources.for_device(device)
    units = [
        Unit(
            content_key("scratch-run", {}, {"config": c.to_dict(), "folder": str(f)}),
            f"fraction {c.fraction:g} seed {c.seed} of {c.name}",
            train_unit,
            (c.to_dict(), str(f), device, progress and alone),
            need,
        )
        for c, f in jobs
    ]
    configs = {u.key: c for u, (c, _) in zip(units, jobs)}
    for done in executor.map(units):
        summary, status = done.result
        folder = Path(done.unit.args[1])
        if not (folder / "summary.json").is_file():
            raise BindscopeError(
                f"run {done.unit.label} finished on a worker but {folder} is not on this machine: put --out on "
                "storage that every node of the cluster mounts"
            )
        yield configs[done.unit.key], summary, status


def train_unit(state: Any, config: dict, folder: str, device: str, progress: bool) -> tuple[dict, str]:
    """One run of a sweep: train (or continue, or reuse) the model in ``folder``."""
    result = train_model(config_from_dict(config, "sweep run config"), folder, device=device, progress=progress)
    return result.summary, result.status


def _not_runs(runs_dir: Path) -> Callable[[str, list[str]], list[str]]:
    """What of the work folder is not a finished run: its record, and the hidden state of dead writers beside the
    runs (a temporary record, a run's staging folder, lock or training state)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        if Path(folder) != runs_dir:
            return []
        return [n for n in names if n == "sweep.json" or n.startswith(".")]

    return ignore


def _work_dir(out: Path) -> Path:
    """The hidden folder beside ``out`` holding the runs of an unfinished sweep."""
    return check_state_folder(out.with_name(f".{out.name}.sweep"))


def _runs_dir(out: Path, request: dict, overwrite: bool) -> Path:
    work = _work_dir(out)
    record = work / "sweep.json"
    if record.is_file() and not overwrite and read_json(record, "sweep record") != request:
        raise BindscopeError(
            f"{work} holds an unfinished sweep of other settings; run its original command to "
            "finish it, or pass --overwrite to start over"
        )
    if overwrite and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_json(record, request)
    return work


def _rows(summary: dict, fraction: float, seed: int) -> list[dict]:
    """A run's tidy rows: every selected number (variant ``model``) and its floors (``bag of concepts``,
    ``chance``) on the same scenes and queries."""
    extra = {"fraction": fraction, "coverage": summary["coverage"], "selected_step": summary["selected_step"]}
    rows = []
    for key, value in summary["selected"].items():
        split, metric = key.split("_", 1)
        rows.append(_row("model", split, metric, seed, value, extra))
    floors = summary.get("floors") or {  # models trained before every number had its floors: the test ones
        "test_object_acc": {"chance": summary["chance_test_object_acc"]}
        | (
            {"bag": summary["bag_of_concepts_test_object_acc"]}
            if summary.get("bag_of_concepts_test_object_acc") is not None
            else {}
        )
    }
    for key, floor in floors.items():
        split, metric = key.split("_", 1)
        for variant, name in ((BAG_OF_CONCEPTS, "bag"), ("chance", "chance")):
            if floor.get(name) is not None:
                rows.append(_row(variant, split, metric, seed, floor[name], extra))
    return rows


def _row(variant: str, group: str, metric: str, seed: int, value: float, extra: dict[str, Any]) -> dict[str, Any]:
    return result_row(ANALYSIS, variant, group, metric, seed, value, **extra)


def _spread(values: pd.Series) -> dict[str, Any]:
    v = values.to_numpy(dtype=float)
    return {**spread(v), "min": float(v.min()), "max": float(v.max())}


def run_facts(summary: dict) -> dict[str, Any]:
    """What a sweep reports of each run besides its numbers: its steps, seconds and clean hard negatives."""
    return {
        "steps": summary.get("steps"),
        "seconds": summary.get("seconds"),
        "hard_negatives": sum((summary.get("hard_negatives_available") or {}).values()),
    }


def add_run_facts(per_fraction: dict[str, dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    """Per fraction: the steps, the mean seconds and mean clean hard negatives (training scenes that have one)."""
    frame = pd.DataFrame(runs)
    for fraction, at in frame.groupby("fraction"):
        per_fraction[f"{fraction:g}"].update(
            {
                "steps": int(at["steps"].max()),
                "seconds": float(at["seconds"].mean()),
                "hard_negatives": float(at["hard_negatives"].mean()),
            }
        )


def sweep_summary(
    table: pd.DataFrame, config: ScratchConfig | ClipConfig, fractions: list[float], kind: SweepKind = TOKEN
) -> dict:
    """Mean and spread over seeds of every split's metrics (object and concept accuracy, strict and batch-query
    where reported; image-text: swaps and retrieval), per fraction, each beside its floors (an ideal bag of
    concepts and chance on the same scenes, mean over seeds), and whether the headline (held-out object
    accuracy; image-text: held-out attribute swap) beats a bag of concepts on every seed (:func:`binding_verdict`)."""
    per = {}
    group, metric_name = kind.headline
    for fraction in fractions:
        at = table[table.fraction == fraction]
        models = at[at.variant == "model"]
        entry: dict[str, Any] = {"floors": {}}
        for split in kind.splits:
            for metric in kind.metrics:
                where = (at.group == split) & (at.metric == metric)
                values = at[where & (at.variant == "model")]["value"]
                if not len(values):
                    continue
                key = f"{split}_{metric}"
                entry[key] = _spread(values)
                floors = {
                    name: float(at[where & (at.variant == variant)]["value"].mean())
                    for variant, name in ((BAG_OF_CONCEPTS, "bag"), ("chance", "chance"))
                    if (where & (at.variant == variant)).any()
                }
                if floors:
                    entry["floors"][key] = floors
        bag = at[(at.variant == BAG_OF_CONCEPTS) & (at.group == group) & (at.metric == metric_name)]
        if len(bag):
            entry[f"{group}_bag_of_concepts_{metric_name}"] = _spread(bag["value"])
        entry["binding"] = _binding(models, bag, kind)
        entry["coverage"] = round(float(models["coverage"].mean()), 6)
        per[f"{fraction:g}"] = entry
    headline = {f: per[f].get(kind.key, {}).get("mean") for f in per}
    chance = table[(table.variant == "chance") & (table.group == group) & (table.metric == metric_name)]["value"]
    if isinstance(config, ClipConfig):
        return {
            "config": config.name,
            "kind": "image-text",
            "fractions": fractions,
            "held_out_swap_attribute": {f: per[f].get(kind.key) for f in per},
            "per_fraction": per,
            "chance_swap_attribute": float(np.mean(chance)),
            "margin": MARGIN,
            "gain_low_to_high": _gain(headline, fractions),
            "not_comparable": [],
            "metric": "held-out attribute swap: how often a held-out scene's image scores its caption above its "
            "attribute swap's (ties half; a bag of concepts ties every swap: 50 %), after the last step",
        }
    selection = "the test objects (optimistic)" if config.selection == "test" else "validation objects"
    return {
        "config": config.name,
        "fractions": fractions,
        "held_out_object_acc": {f: per[f].get("test_object_acc") for f in per},
        "per_fraction": per,
        "chance_object_acc": float(np.mean(chance)),
        "margin": MARGIN,
        "gain_low_to_high": _gain(headline, fractions),
        "selection": config.selection,
        "not_comparable": config.not_comparable(),
        "metric": "held-out-object accuracy: set separation of scenes built only from objects never trained on, "
        f"scored against every object's query embedding, at the step selected on {selection}",
    }


def _gain(headline: dict[str, float | None], fractions: list[float]) -> float | None:
    low, high = headline[f"{fractions[0]:g}"], headline[f"{fractions[-1]:g}"]
    return high - low if len(fractions) > 1 and low is not None and high is not None else None


def _binding(models: pd.DataFrame, bag: pd.DataFrame, kind: SweepKind = TOKEN) -> dict[str, Any]:
    """The binding verdict of one fraction: the headline against the bag, seed by seed."""
    group, metric = kind.headline
    acc = models[(models.group == group) & (models.metric == metric)].set_index("seed")["value"]
    floor = bag.set_index("seed")["value"].reindex(acc.index)
    return binding_verdict(acc.to_list(), floor.to_list())
