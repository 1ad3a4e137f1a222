"""Run an analysis on an embedding folder and write its output folder (the CLI's and API's entry).

Loading and writing happen here; the science is in :mod:`bindscope.analyses.suite`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bindscope.analyses.complexity.sweep import ComplexitySettings, complexity_summary, complexity_sweep
from bindscope.analyses.probes import ProbeSet, save_probes
from bindscope.analyses.results import write_run
from bindscope.analyses.suite import (
    ProbeRun,
    ProbeSettings,
    approximate_warnings,
    decompose_analysis,
    decompose_summary,
    probe_analysis,
    probe_summary,
    probe_variant,
)
from bindscope.core.errors import BindscopeError
from bindscope.core.io import check_output_dir
from bindscope.data.datasets import Dataset, load_dataset
from bindscope.embeddings.store import EmbeddingSet, find_rand_control, load_embeddings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inputs:
    """An embedding folder, its dataset, and the ``+rand`` control if there is one."""

    embeddings: EmbeddingSet
    dataset: Dataset
    control: EmbeddingSet | None

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The embeddings and the control's, as arrays."""
        ctrl = np.asarray(self.control.array) if self.control is not None else None
        return np.asarray(self.embeddings.array), ctrl


def load_inputs(
    emb_dir: str | Path,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    *,
    find_control: bool = True,
) -> Inputs:
    """Load an embedding folder with its dataset (from the manifest unless given) and control.

    Without ``control``, a sibling ``+rand`` folder is used when ``find_control`` is set.
    """
    emb_dir = Path(emb_dir)
    raw = load_embeddings(emb_dir)
    ds_path = Path(dataset) if dataset is not None else Path(raw.manifest.get("dataset_path", ""))
    if not str(ds_path) or not ds_path.is_dir():
        raise BindscopeError(f"the dataset of {emb_dir} is not at {ds_path or '(unknown)'}; pass --dataset DIR")
    ds = load_dataset(ds_path)
    emb = load_embeddings(emb_dir, ds)
    control_dir = Path(control) if control is not None else (find_rand_control(emb) if find_control else None)
    ctrl = load_embeddings(control_dir, ds) if control_dir is not None else None
    if ctrl is not None:
        log.info("using %s as the +rand control", control_dir)
    return Inputs(emb, ds, ctrl)


def _manifest(command: str, inputs: Inputs, settings: ProbeSettings, seconds: float, **extra: object) -> dict:
    emb = inputs.embeddings
    return {
        "command": command,
        "embeddings": {
            "path": str(emb.root.resolve()),
            "name": emb.name,
            "modality": emb.modality,
            "dim": emb.dim,
            "num_rows": len(emb),
            "model_spec": emb.manifest.get("model_spec"),
        },
        "dataset": {
            "path": str(inputs.dataset.root.resolve()),
            "preset": inputs.dataset.name,
            "hash": inputs.dataset.hash,
        },
        "control": str(inputs.control.root.resolve()) if inputs.control is not None else None,
        "settings": settings.to_dict(),
        **extra,
        "seconds": round(seconds, 3),
    }


def _save_probes(stage: Path, run: ProbeRun, inputs: Inputs, settings: ProbeSettings) -> None:
    """Per seed, a probe folder ``probes/seed{s}/`` (see :func:`bindscope.analyses.probes.save_probes`)."""
    labels = {"object": "object ids (mixed radix)", **inputs.dataset.space.to_dict()}
    for seed, weights in run.weights.items():
        meta = {
            "labels": labels,
            "seed": seed,
            "split": {"kind": "scene", "train_fraction": settings.train_fraction, "seed": seed},
            "optimizer": settings.optimizer,
            "solver": run.solver[seed],
            "embeddings": str(inputs.embeddings.root.resolve()),
            "dataset_hash": inputs.dataset.hash,
        }
        save_probes(
            stage / "probes" / f"seed{seed}",
            weights,
            run.means[seed],
            center=settings.center,
            normalize=settings.normalize,
            meta=meta,
        )


def _prepare(emb_dir, out, dataset, control, overwrite: bool, find_control: bool = True) -> Inputs:
    """Refuse a bad output folder first (before long work), then load the inputs."""
    check_output_dir(Path(out), overwrite=overwrite)
    return load_inputs(emb_dir, dataset, control, find_control=find_control)


def run_probe(
    emb_dir: str | Path,
    out: str | Path,
    settings: ProbeSettings = ProbeSettings(),
    *,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    overwrite: bool = False,
) -> dict:
    """``bindscope probe``: fit and score the probes, write the folder, return the summary."""
    inputs = _prepare(emb_dir, out, dataset, control, overwrite)
    start = time.perf_counter()
    y, ctrl = inputs.arrays
    table, base, per_scene = probe_analysis(y, inputs.dataset.scenes, settings, control=ctrl)
    summary = probe_summary(table)
    summary["solver"] = {str(s): e for s, e in base.solver.items()}
    summary["warnings"] = approximate_warnings({"base": base.solver})

    def extra(stage: Path) -> None:
        per_scene.to_parquet(stage / "per_scene.parquet", index=False)
        _save_probes(stage, base, inputs, settings)

    write_run(
        Path(out),
        summary=summary,
        results=table,
        manifest=_manifest("probe", inputs, settings, time.perf_counter() - start),
        extra=extra,
        overwrite=overwrite,
    )
    return summary


def run_decompose(
    emb_dir: str | Path,
    out: str | Path,
    settings: ProbeSettings = ProbeSettings(),
    *,
    test_fraction: float = 0.2,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    overwrite: bool = False,
) -> dict:
    """``bindscope decompose``: additive R^2 and the five-run subtraction table."""
    inputs = _prepare(emb_dir, out, dataset, control, overwrite)
    start = time.perf_counter()
    y, ctrl = inputs.arrays
    table, solvers = decompose_analysis(y, inputs.dataset.scenes, settings, test_fraction=test_fraction, control=ctrl)
    summary = decompose_summary(table)
    summary["solver"] = {v: {str(s): e for s, e in per.items()} for v, per in solvers.items()}
    summary["warnings"] = approximate_warnings(solvers)
    write_run(
        Path(out),
        summary=summary,
        results=table,
        manifest=_manifest("decompose", inputs, settings, time.perf_counter() - start, test_fraction=test_fraction),
        overwrite=overwrite,
    )
    return summary


def load_frozen_probes(path: str | Path, inputs: Inputs, seed: int = 0) -> tuple[ProbeSet, Path]:
    """Probes from a probe folder (``probe.json``) or from a ``bindscope probe`` output folder.

    They must belong to this dataset (when they record its hash); :func:`load_probes` checks the
    files themselves, and the sweep checks their shapes against the dataset and embeddings.
    """
    path = Path(path)
    folder = path if (path / "probe.json").is_file() else path / "probes" / f"seed{seed}"
    if not (folder / "probe.json").is_file():
        raise BindscopeError(
            f"{path} holds no probes: give a probe folder (with probe.json) or the output folder of "
            f"`bindscope probe` (with probes/seed{seed}/)"
        )
    probes = ProbeSet.load(folder)
    recorded = probes.meta_.get("dataset_hash")
    if recorded is not None and recorded != inputs.dataset.hash:
        raise BindscopeError(
            f"the probes in {folder} were fitted on another dataset (hash {str(recorded)[:12]}, this one "
            f"{inputs.dataset.hash[:12]}); fit probes on these embeddings with bindscope probe"
        )
    return probes, folder


def run_complexity(
    emb_dir: str | Path,
    out: str | Path,
    settings: ComplexitySettings = ComplexitySettings(),
    *,
    probes: str | Path | None = None,
    probe_seed: int = 0,
    probe_settings: ProbeSettings | None = None,
    dataset: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> dict:
    """``bindscope complexity``: the approximator sweep under frozen probes; returns the summary.

    Without ``probes`` the probes are fitted here (scene-level split 0.4, seed ``probe_seed``,
    ``probe_settings``) and written to ``probes/seed{s}/`` of the output folder.
    """
    inputs = _prepare(emb_dir, out, dataset, None, overwrite, find_control=False)
    start = time.perf_counter()
    y, _ = inputs.arrays
    scenes = inputs.dataset.scenes
    fitted: ProbeRun | None = None
    probe_settings = probe_settings or ProbeSettings(seeds=(probe_seed,), device=settings.device)
    if probes is not None:
        probe_set, probe_source = load_frozen_probes(probes, inputs, probe_seed)
    else:
        fitted = probe_variant(y, scenes, probe_settings)
        seed = probe_settings.seeds[0]
        probe_set = ProbeSet.from_weights(
            fitted.weights[seed], fitted.means[seed], center=probe_settings.center, normalize=probe_settings.normalize
        )
        probe_source = Path(out) / "probes" / f"seed{seed}"
    with tqdm(desc="complexity", unit="stack", disable=None if progress else True) as bar:

        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        result = complexity_sweep(y, scenes, probe_set, settings, progress=advance)
    summary = complexity_summary(result, settings)
    summary["probes"] = str(probe_source.resolve())
    summary["warnings"] = approximate_warnings({"probes": fitted.solver}) if fitted is not None else []
    labels = [f.label for f in settings.families()]

    def extra(stage: Path) -> None:
        from bindscope.analyses.plots import complexity_plot

        result.history.to_parquet(stage / "training.parquet", index=False)
        result.history.to_csv(stage / "training.csv", index=False)
        complexity_plot(
            result.table,
            labels,
            stage / "plots" / "complexity.png",
            title=f"{inputs.embeddings.name}: binding-function complexity ({settings.budget.name} budget)",
        )
        if fitted is not None:
            _save_probes(stage, fitted, inputs, probe_settings)

    manifest = _manifest(
        "complexity",
        inputs,
        probe_settings,
        time.perf_counter() - start,
        complexity=settings.to_dict(),
        probes=str(probe_source.resolve()),
        dropped_scenes=result.dropped_scenes,
        seconds_per_approximator=result.seconds,
    )
    manifest["probe_settings"] = manifest.pop("settings")
    write_run(Path(out), summary=summary, results=result.table, manifest=manifest, extra=extra, overwrite=overwrite)
    return summary
