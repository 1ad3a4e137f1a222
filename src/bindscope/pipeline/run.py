"""``bindscope run CONFIG.yaml --out RUN_DIR``: datasets -> embeddings -> every analysis that applies -> report.

A run folder::

    config.yaml      the resolved config (every default filled in)
    manifest.json    versions, git hash, seeds, dataset hashes, model specs, every step with its status
                     (computed / reused / cached (linked from the shared embedding cache) / replaced /
                     skipped, and why and the fix) and seconds; the run's status
                     (``complete``, ``complete_with_skips`` with the ``skipped`` analyses, or ``interrupted``)
                     (``interrupted`` from the moment a run into the folder starts until it finishes)
    datasets/<name>/                         dataset folders
    embeddings/<dataset>/<model>-<modality>[-L<layer>]   embedding folders, with ``+rand`` and ``-single``
                                             siblings (the control and the single-object bank)
    results/<dataset>/<model>-<modality>[-L<layer>]/<analysis>/   uni-modal analyses
    results/<dataset>/<model>[-L<layer>]/crossmodal/              the cross-modal tests
    report.html      the report (``bindscope report RUN_DIR``)

Before anything is written, every analysis's fractions and seeds are checked against each dataset's scenes
(:mod:`bindscope.pipeline.preflight`); an analysis that still cannot run on an embedding folder is skipped,
recorded with its reason and fix, and the run completes with skips. Every step whose content key (inputs,
settings, version) matches is reused, so running again does
no work and an interrupted run resumes where it stopped; a lock keeps two runs out of one folder.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bindscope.analyses import get_analysis, load_inputs
from bindscope.analyses.inputs import Inputs
from bindscope.analyses.results import content_key
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, current_executor
from bindscope.core.io import OUTPUT_MARK, atomic_file, mark_output, write_json
from bindscope.core.locks import remove_leftovers, writes
from bindscope.core.version import stamp
from bindscope.data.datasets import Dataset, build_dataset
from bindscope.data.presets import preset_file
from bindscope.embeddings.encoders.spec import model_paths
from bindscope.pipeline.config import DatasetConfig, EmbeddingsEntry, ModelConfig, RunConfig, ScratchEntry
from bindscope.pipeline.preflight import check_layers, check_splits
from bindscope.pipeline.steps import ProgressFactory, StepLog, StepRecord, Where, described, error_fix, step

Say = Callable[[str], None]
CONFIG = "config.yaml"
MANIFEST = "manifest.json"
RUN_FORMAT = "bindscope-run"
#: The statuses of a finished run (every step reached): ``complete``, or ``complete_with_skips`` when some
#: analyses could not run (the manifest's ``skipped`` lists each with its reason and fix).
FINISHED = ("complete", "complete_with_skips")
#: The temporary names of a run's first files (``atomic_file``'s): left by a run killed as it started.
_STARTING = re.compile(r"^\.(config\.yaml|manifest\.json|\.bindscope\.json)\.[A-Za-z0-9_]{8}\.tmp$")


@dataclass(frozen=True)
class EmbeddingSpec:
    """One embedding folder of the run: a model's modality (and layer) on a dataset."""

    dataset: str
    model: ModelConfig
    modality: str
    layer: int | None

    @property
    def layer_suffix(self) -> str:
        return "" if self.layer is None else f"-L{self.layer}"

    @property
    def stem(self) -> str:
        """``<model>[-L<layer>]``."""
        return self.model.label + self.layer_suffix

    @property
    def label(self) -> str:
        """``<model>-<modality>[-L<layer>]``."""
        return f"{self.model.label}-{self.modality}{self.layer_suffix}"


@dataclass
class RunState:
    """Where the run writes, what it has, and what it did."""

    root: Path
    config: RunConfig
    say: Say
    progress: ProgressFactory | None
    log: StepLog
    datasets: dict[str, Dataset]
    summaries: dict[str, dict[str, Any]]
    folders: dict[str, Path] = field(default_factory=dict)  # embedding folders outside embeddings/ (exports)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # model spec -> what was loaded
    trained: list[ModelConfig] = field(default_factory=list)  # image-text scratch models, embedded like the others
    imported: dict[str, EmbeddingsEntry] = field(default_factory=dict)  # "<dataset>/<label>" -> embeddings entry

    def embedding_folder(self, spec: EmbeddingSpec, suffix: str = "") -> Path:
        key = f"{spec.dataset}/{spec.label}{suffix}"
        return self.folders.get(key, self.root / "embeddings" / spec.dataset / f"{spec.label}{suffix}")

    def result_folder(self, spec: EmbeddingSpec, analysis: str) -> Path:
        return self.root / "results" / spec.dataset / spec.label / analysis


def git_hash() -> str | None:
    """The source tree's git commit, when bindscope runs from a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def dataset_preset(entry: DatasetConfig) -> Any:
    """The preset of a run's dataset, with its covering subsample when ``max_scenes`` is set."""
    return entry.load_preset()


def check_text_path(root: Path) -> None:
    """Refuse a run folder whose absolute path is not UTF-8: a run records paths as text (its models' specs)."""
    try:
        os.path.abspath(root).encode("utf-8")
    except UnicodeEncodeError:
        raise BindscopeError(
            f"the run folder's path {os.path.abspath(root)!a} holds a name that is not UTF-8 text; a run records its "
            "paths as text: choose an --out whose path is UTF-8 (or rename the folder)"
        ) from None


def preflight(config: RunConfig, root: Path) -> None:
    """What a run into ``root`` needs before it writes anything and its config alone did not check: images it
    cannot draw (e.g. PUG:SPARE's) already imported into ``root``, and every analysis's fractions and seeds
    splitting its datasets' scenes (:mod:`bindscope.pipeline.preflight`: a ``max_scenes`` too small refuses the
    run, naming the smallest that works or the fractions that do), and every listed layer within its model's."""
    from bindscope.data.render import RENDERERS

    for entry in config.datasets:
        preset = entry.load_preset()
        folder = root / "datasets" / entry.name
        images = any("image" in m.modalities for m in config.models_for(entry.name))
        if images and preset.config.renderer not in RENDERERS and not (folder / "manifest.json").is_file():
            raise BindscopeError(
                f"dataset {entry.name}: a run cannot draw preset {preset.name}'s images (renderer "
                f"{preset.config.renderer}); put the dataset with its images in {folder} first (PUG:SPARE: "
                f"`bindscope dataset import-pug CSV IMAGES --out {folder}`), or embed its text only"
            )
    check_splits(config)
    check_layers(config)


def build_datasets(state: RunState) -> None:
    for entry in state.config.datasets:
        folder = state.root / "datasets" / entry.name
        images = entry.images or state.config.trains_images(entry.name)
        images = images or any("image" in m.modalities for m in state.config.models_for(entry.name))
        with state.log.timed("dataset", entry.name, folder) as outcome:
            existed = (folder / "manifest.json").is_file()
            ds = build_dataset(dataset_preset(entry), folder, images=images, progress=state.progress is not None)
            outcome["status"] = "reused" if existed else "computed"
        state.datasets[entry.name] = ds
        state.say(f"dataset      {entry.name}: {len(ds):,} scenes ({described(outcome)})")


def layer_counts(spec: str, device: str) -> dict[str, int]:
    """A model's number of layers per modality (from its config where the backend can, else it is loaded)."""
    from bindscope.embeddings.encoders import count_layers

    return count_layers(spec, device=device)


def layers_of(model: ModelConfig, modality: str, counts: dict[str, dict[str, int]], device: str) -> list[int | None]:
    """The layers a model is embedded at: its final embedding (``None``: the model's output, projected and
    pooled as it is used), always, then the listed layers or all of them (``counts`` keeps each model's layer
    counts for the run, so a model is loaded once for them, not per dataset and modality)."""
    if model.layers is None:
        return [None]
    if model.layers != "all":
        return [None, *model.layers]
    if model.spec not in counts:
        counts[model.spec] = layer_counts(model.spec, device)
    return [None, *range(counts[model.spec][modality] + 1)]


def embedding_specs(state: RunState) -> list[EmbeddingSpec]:
    specs = []
    counts: dict[str, dict[str, int]] = {}
    for entry in state.config.datasets:
        for model in state.config.models_for(entry.name):
            for modality in model.modalities:
                for layer in layers_of(model, modality, counts, state.config.device):
                    specs.append(EmbeddingSpec(entry.name, model, modality, layer))
    return specs


def embed_jobs(specs: list[EmbeddingSpec]) -> dict[tuple[str, int | None, str], list[tuple[EmbeddingSpec, str, bool]]]:
    """Every embedding folder to write, ``(spec, suffix, single objects)``, grouped by the encoder that writes it
    (``(model spec, layer, dtype)``, in order of first use): the plain folder and its single-object bank share
    one, the ``+rand`` control has its own."""
    groups: dict[tuple[str, int | None, str], list[tuple[EmbeddingSpec, str, bool]]] = {}
    for spec in specs:
        model = spec.model
        jobs = [("", model.spec, False)]
        if model.control:
            jobs.append(("+rand", f"{model.spec}+rand", False))
        if model.single_objects:
            jobs.append(("-single", model.spec, True))
        for suffix, model_spec, singles in jobs:
            groups.setdefault((model_spec, spec.layer, model.dtype), []).append((spec, suffix, singles))
    return groups


EncoderKey = tuple[str, int | None, str]
EmbedJob = tuple[EmbeddingSpec, str, bool]


def embed_all(state: RunState, specs: list[EmbeddingSpec]) -> None:
    """Write (or find) every embedding folder. Here each encoder is loaded once for all the folders it
    writes; on a cluster (``--executor ray``) each folder's rows are embedded in chunks by the workers, as
    ``bindscope embed`` does, one folder after another (so every worker is busy on every model)."""
    for encoder_key, jobs in embed_jobs(specs).items():
        embed_group(state, encoder_key, jobs, sharded=fans_out())


def embed_group(state: RunState, encoder_key: EncoderKey, jobs: list[EmbedJob], *, sharded: bool = False) -> None:
    """The folders one encoder writes (it is loaded in the first folder's step: its time and any failure are
    that step's; ``sharded``: the workers load it, by its spec)."""
    from bindscope.embeddings.embed import embed_dataset
    from bindscope.embeddings.encoders import load_encoder

    model_spec, layer, dtype = encoder_key
    encoder = None
    for spec, suffix, singles in jobs:
        folder = state.embedding_folder(spec, suffix)
        with state.log.timed("embed", f"{spec.dataset}/{spec.label}{suffix}", folder) as outcome:
            if encoder is None and not sharded:
                encoder = load_encoder(model_spec, layer=layer, device=state.config.device, dtype=dtype)
            held = (folder / "manifest.json").is_file()  # other embeddings (written into the run since) are replaced
            result = embed_dataset(
                state.datasets[spec.dataset],
                encoder if encoder is not None else model_spec,
                modality=spec.modality,
                out=folder,
                layer=layer,
                device=state.config.device,
                dtype=dtype,
                batch_size=spec.model.batch_size,
                single_objects=singles,
                replace=True,
                progress=state.progress is not None,
            )
            state.sources[model_spec] = model_source(result.embeddings.manifest["model"])
            statuses = {"existing": "reused", "cached": "cached"}  # cached: linked from the embedding cache
            outcome["status"] = statuses.get(result.status, "replaced" if held else result.status)
        state.say(f"embeddings   {spec.dataset}/{spec.label}{suffix} ({described(outcome)})")
    del encoder


# -- fan-out: the run's steps as units of work on a cluster ----------------------------------------------
def fans_out() -> bool:
    """Whether the run's models go to workers (``--executor ray``) rather than run here one after another."""
    return current_executor().distributed


@dataclass(frozen=True)
class RunPlan:
    """What a worker needs to act for the run: its folder, config, datasets and exported embedding folders."""

    root: Path
    config: RunConfig
    datasets: dict[str, Path]
    folders: dict[str, Path]


def remote_step(plan: RunPlan, fn: Callable[..., None], *args: Any) -> dict[str, Any]:
    """``fn(state, *args)`` on a worker, for a run state rebuilt from ``plan``: the steps it recorded, the lines
    it said, the summaries and model sources it found."""
    from bindscope.data.datasets import load_dataset

    lines: list[str] = []
    datasets = {name: load_dataset(root) for name, root in plan.datasets.items()}
    state = RunState(plan.root, plan.config, lines.append, None, StepLog(), datasets, {}, dict(plan.folders))
    fn(state, *args)
    return {"records": state.log.to_list(), "lines": lines, "summaries": state.summaries, "sources": state.sources}


def merge_units(state: RunState, units: list[Unit]) -> None:
    """Run the units on the chosen executor and take in what each did, as it finishes."""
    plan = RunPlan(state.root, state.config, {n: d.root for n, d in state.datasets.items()}, dict(state.folders))
    for done in current_executor().map(units, plan):
        out = done.result
        state.log.records += [StepRecord(**r) for r in out["records"]]
        state.summaries.update(out["summaries"])
        state.sources.update(out["sources"])
        for line in out["lines"]:
            state.say(line)


def scratch_all(state: RunState) -> list[EmbeddingSpec]:
    """Train (or find) each scratch model, then make it analysable: a token-level model's export is analysed like
    an embedding folder (dataset ``scratch-<name>``: every ordered object pair of its space); an image-text model
    embeds its dataset's images and captions, with its ``+rand`` control and single-object banks, like any model."""
    specs = []
    for entry in state.config.scratch:
        root = state.root / "scratch" / entry.name
        dataset = state.datasets[entry.dataset].root.resolve() if entry.dataset is not None else None
        train_scratch(state, entry, root, None if dataset is None else str(dataset))
        specs += image_text_specs(state, entry, root) if entry.image_text() else [export_scratch(state, entry, root)]
    return specs


def train_scratch(state: RunState, entry: ScratchEntry, root: Path, dataset: str | None) -> None:
    from bindscope.scratch.train import train_model

    with state.log.timed("scratch", f"{entry.name}/model", root / "model") as outcome:
        trained = train_model(
            entry.training_config(dataset),
            root / "model",
            device=state.config.device,
            progress=state.progress is not None,
        )
        outcome["status"] = "reused" if trained.status == "existing" else trained.status
    state.say(f"scratch      {entry.name}: model ({described(outcome)})")


def export_scratch(state: RunState, entry: ScratchEntry, root: Path) -> EmbeddingSpec:
    """A token-level model's export (its scene embeddings, control and probes) as the run's embedding folders."""
    from bindscope.data.datasets import load_dataset
    from bindscope.scratch.export import export_model

    with state.log.timed("export", f"{entry.name}/export", root / "export") as outcome:
        existed = (root / "export" / "export.json").is_file()
        export_model(root / "model", root / "export", control=entry.control, device=state.config.device)
        outcome["status"] = "reused" if existed else "computed"
    state.say(f"export       {entry.name}: embeddings and probes ({described(outcome)})")
    dataset = f"scratch-{entry.name}"
    state.datasets[dataset] = load_dataset(root / "export" / "dataset")
    model = ModelConfig(
        spec=f"scratch:{(root / 'model').resolve()}", name=entry.name, control=entry.control, single_objects=False
    )
    spec = EmbeddingSpec(dataset, model, "text", None)
    state.folders[f"{dataset}/{spec.label}"] = root / "export" / "embeddings" / "scene"
    state.folders[f"{dataset}/{spec.label}+rand"] = root / "export" / "embeddings" / "scene-rand"
    return spec


def image_text_specs(state: RunState, entry: ScratchEntry, root: Path) -> list[EmbeddingSpec]:
    """An image-text model's embeddings of its dataset (images and captions, ``+rand``, single objects)."""
    model = ModelConfig(
        spec=f"scratch:{(root / 'model').resolve()}",
        name=entry.name,
        modalities=("image", "text"),
        control=entry.control,
        single_objects=True,
    )
    specs = [EmbeddingSpec(str(entry.dataset), model, modality, None) for modality in model.modalities]
    embed_all(state, specs)
    state.trained.append(model)
    return specs


def imported_specs(state: RunState) -> list[EmbeddingSpec]:
    """The embedding folders made elsewhere (``embeddings:``), each with the dataset it was made of: a dataset of
    the run (whose scenes must be the same) or the folder its manifest records, loaded as it is."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import find_single_objects, load_embeddings

    specs = []
    for entry in state.config.embeddings:
        dataset = entry.dataset_name
        if dataset not in state.datasets:
            state.datasets[dataset] = load_dataset(entry.dataset_folder)
        check_same_scenes(entry, dataset, state.datasets[dataset])
        singles = entry.singles is not None or find_single_objects(load_embeddings(entry.path, mmap=True)) is not None
        model = imported_model(entry, singles)
        spec = EmbeddingSpec(dataset, model, entry.modality, entry.manifest.get("layer"))
        state.folders[f"{dataset}/{spec.label}"] = Path(entry.path)
        state.imported[f"{dataset}/{spec.label}"] = entry
        state.say(f"embeddings   {dataset}/{spec.label} (made elsewhere: {entry.path})")
        specs.append(spec)
    return specs


def imported_model(entry: EmbeddingsEntry, singles: bool) -> ModelConfig:
    """An embedding folder made elsewhere as a model of the run (not validated as a spec: no backend loads it)."""
    return ModelConfig.model_construct(
        spec=str(entry.manifest.get("model_spec") or f"import:{entry.label}"),
        name=entry.label,
        modalities=(entry.modality,),
        layers=None,
        control=True,
        single_objects=singles,
        datasets=None,
        batch_size=None,
        dtype="float32",
    )


def check_same_scenes(entry: EmbeddingsEntry, name: str, dataset: Dataset) -> None:
    """Refuse embeddings made of another dataset than the run's ``name``."""
    recorded = str(entry.manifest.get("dataset_hash") or "")
    if recorded != dataset.hash:
        raise BindscopeError(
            f"embeddings {entry.path} were made of another dataset (hash {recorded[:12] or 'unknown'}) than the run's "
            f"dataset {name} (hash {dataset.hash[:12]}); name the dataset they were made of (dataset: ...), or embed "
            "the run's dataset"
        )


def applies(name: str, state: RunState, spec: EmbeddingSpec) -> tuple[str, str] | None:
    """Why analysis ``name`` does not apply to this embedding folder and what to change, or None when it does."""
    scenes = state.datasets[spec.dataset].scenes
    two = scenes.max_objects == 2 and len(scenes.full()) > 0
    if name == "intervene" and not two:
        return "interventions need 2-object scenes", (
            f"give the run a dataset of 2-object scenes (objects_per_scene: 2), or switch intervene off "
            f"(analyses: {{intervene: false}}); dataset {spec.dataset} has up to {scenes.max_objects} objects per scene"
        )
    if name == "geometry" and not two and not spec.model.single_objects:
        return "geometry needs 2-object scenes or the single-object bank", (
            f"embed every object alone too (single_objects: true on model {spec.model.label}), or give the run a "
            "dataset of 2-object scenes"
        )
    return None


def analysis_inputs(name: str, state: RunState, spec: EmbeddingSpec) -> Inputs:
    folder = state.embedding_folder(spec)
    probes = state.result_folder(spec, "probe")
    has_probes = "probe" in state.config.enabled_analyses()
    kind = get_analysis(name)
    takes = kind.needs | kind.uses
    given = probes if has_probes and "probes" in takes else None
    imported = state.imported.get(f"{spec.dataset}/{spec.label}")
    if imported is not None:  # the control and single-object bank given with embeddings made elsewhere
        control = imported.control if "control" in takes else None
        singles = imported.singles if "singles" in takes else None
        return load_inputs(name, folder, probes=given, control=control, singles=singles)
    # the +rand sibling only where the run embedded one (not a folder an earlier config left)
    return load_inputs(name, folder, probes=given, find_control=spec.model.control)


def analyse_all(state: RunState, specs: list[EmbeddingSpec]) -> None:
    """Every uni-modal analysis that applies to each embedding folder (on a cluster, a folder's analyses are
    a unit of work), then the cross-modal tests."""
    if not fans_out():
        for spec in specs:
            analyse_spec(state, spec)
    else:
        units = [
            Unit(
                content_key("run-analyses", {}, {"folder": str(state.embedding_folder(spec))}),
                f"analyses of {spec.dataset}/{spec.label}",
                remote_step,
                (analyse_spec, spec),
                Resources.for_device(state.config.device),
            )
            for spec in specs
        ]
        merge_units(state, units)
    if "crossmodal" in state.config.enabled_analyses():
        crossmodal_all(state, specs)


def unimodal(name: str) -> bool:
    """Whether an analysis runs on one embedding folder (every registered one but those needing a second modality)."""
    return "other" not in get_analysis(name).needs


def analyse_spec(state: RunState, spec: EmbeddingSpec) -> None:
    """The uni-modal analyses of one embedding folder, in order (complexity and intervene read the probes)."""
    for name in [n for n in state.config.enabled_analyses() if unimodal(n)]:
        where = Where(name, spec.dataset, spec.label)
        key = where.key
        why = applies(name, state, spec)
        if why:
            skip(state, where, *why)
            continue
        folder = state.result_folder(spec, name)
        with state.log.timed("analysis", key, folder, where) as outcome:
            settings = state.config.analysis_settings(name)
            run_step(state, outcome, key, name, partial(analysis_inputs, name, state, spec), folder, settings)
        state.say(f"{name:<12} {key} ({described(outcome)})")


def run_step(
    state: RunState,
    outcome: dict[str, Any],
    key: str,
    name: str,
    inputs: Callable[[], Inputs],
    folder: Path,
    settings: Any,
) -> None:
    """One analysis step; an analysis that cannot run on these data (a :class:`BindscopeError`, e.g. no edit can
    be made on a subsample) is recorded as skipped with its reason (the whole message) and a fix (its last part,
    which says what to do, in terms of the run config), and the run goes on."""
    try:
        summary, outcome["status"] = step(name, inputs(), folder, settings, state.progress)
    except BindscopeError as exc:
        outcome["status"], outcome["reason"], outcome["fix"] = "skipped", str(exc), error_fix(name, str(exc))
        return
    state.summaries[key] = summary


def crossmodal_all(state: RunState, specs: list[EmbeddingSpec]) -> None:
    """The cross-modal tests of every model (and layer) with both modalities on a dataset of 2-object scenes."""
    by_stem: dict[tuple[str, str], dict[str, EmbeddingSpec]] = {}
    for spec in specs:
        by_stem.setdefault((spec.dataset, spec.stem), {})[spec.modality] = spec
    for (dataset, stem), pair in by_stem.items():
        where = Where("crossmodal", dataset, stem)
        key = where.key
        if set(pair) != {"image", "text"}:
            skip(state, where, *one_modality(state, next(iter(pair.values()))))
            continue
        if applies("intervene", state, pair["image"]):
            skip(
                state,
                where,
                "cross-modal tests need 2-object scenes",
                "give the run a dataset of 2-object scenes with images and captions, or switch crossmodal off "
                "(analyses: {crossmodal: false})",
            )
            continue
        folder = state.root / "results" / dataset / stem / "crossmodal"
        has_probes = "probe" in state.config.enabled_analyses()
        unimodal = {m: state.result_folder(pair[m], "probe") for m in ("image", "text")} if has_probes else None
        text = state.imported.get(f"{dataset}/{pair['text'].label}")
        inputs = partial(
            load_inputs,
            "crossmodal",
            state.embedding_folder(pair["image"]),
            other=state.embedding_folder(pair["text"]),
            unimodal=unimodal,
            singles=text.singles if text is not None else None,
        )
        with state.log.timed("analysis", key, folder, where) as outcome:
            settings = state.config.analysis_settings("crossmodal")
            run_step(state, outcome, key, "crossmodal", inputs, folder, settings)
        state.say(f"{'crossmodal':<12} {key} ({described(outcome)})")


def skip(state: RunState, where: Where, reason: str, fix: str) -> None:
    """Record an analysis that does not run on ``where`` and say so, with the reason and the fix."""
    state.log.skip(where, reason, fix)
    state.say(f"{where.analysis:<12} {where.key}: skipped, {reason}; fix: {fix}")


def one_modality(state: RunState, spec: EmbeddingSpec) -> tuple[str, str]:
    """Why a model embedded in one modality has no cross-modal tests, and what to change (the dataset may lack
    the other modality)."""
    from bindscope.embeddings.encoders import embeds_images, parse_spec

    off = "switch crossmodal off (analyses: {crossmodal: false})"
    imported = state.imported.get(f"{spec.dataset}/{spec.label}")
    if imported is not None:
        other = "text" if spec.modality == "image" else "image"
        return (
            f"embeddings {spec.model.label} ({imported.path}) are {spec.modality} only; the cross-modal tests need "
            "the model's image and text embeddings",
            f"add its {other} embeddings with the same name (embeddings: [{{path: ..., name: {spec.model.label}}}]), "
            f"or {off}",
        )
    if not embeds_images(spec.model.spec):
        backend = parse_spec(spec.model.spec, check_folders=False).backend
        return (
            f"model {spec.model.label} is a text model ({backend}: no image tower); the cross-modal tests "
            "need an image-text model",
            f"nothing to change for this model; to drop the line, {off}",
        )
    reason = f"model {spec.model.label} is embedded in {spec.modality} only; the cross-modal tests need both"
    offered = dataset_modalities(state, spec.dataset)
    if {"image", "text"} <= offered:
        return reason, f"embed the model in both modalities (modalities: [image, text]), or {off}"
    return reason, (
        f"dataset {spec.dataset} has {' and '.join(sorted(offered)) or 'no'} modality only: give the run a dataset "
        f"with images and captions and embed the model in both modalities (modalities: [image, text]), or {off}"
    )


def dataset_modalities(state: RunState, dataset: str) -> set[str]:
    """The modalities a dataset of the run offers (its preset's; a scratch export's: text)."""
    entry = next((d for d in state.config.datasets if d.name == dataset), None)
    return set(entry.load_preset().config.modalities) if entry is not None else {"text"}


def run_status(log: StepLog) -> str:
    """A finished run's status: ``complete``, or ``complete_with_skips`` when any analysis was skipped."""
    return "complete_with_skips" if log.skips() else "complete"


def write_config(root: Path, config: RunConfig) -> None:
    with atomic_file(root / CONFIG, "w") as fh:
        fh.write(config.to_yaml())


SOURCE_KEYS = ("backend", "model_class", "resolved", "revision", "package", "weights_sha256", "parameters")
LIBRARIES = ("numpy", "pandas", "scikit-learn", "torch", "transformers", "sentence-transformers", "open_clip_torch")


def model_source(info: dict[str, Any]) -> dict[str, Any]:
    """What a loaded model was: where from, which revision and weights (from its encoder's description)."""
    return {k: info[k] for k in SOURCE_KEYS if k in info}


def library_versions() -> dict[str, str]:
    """Python's and the installed libraries' versions (those installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def model_entry(model: ModelConfig, sources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A model of the run in its manifest: spec, modalities, and what was loaded for it and its control."""
    entry: dict[str, Any] = {"spec": model.spec, "modalities": list(model.modalities)}
    for key, spec in (("source", model.spec), ("control_source", f"{model.spec}+rand")):
        if spec in sources:
            entry[key] = sources[spec]
    return entry


def write_manifest(state: RunState, started: float, status: str) -> None:
    write_json(
        state.root / MANIFEST,
        {
            "format": {"name": RUN_FORMAT, "version": 1},
            "run": state.config.name,
            "status": status,
            **stamp(),
            "git": git_hash(),
            "versions": library_versions(),
            "seeds": list(state.config.seeds),
            "device": state.config.device,
            "datasets": {n: {"path": str(d.root), "hash": d.hash, "scenes": len(d)} for n, d in state.datasets.items()},
            "models": {
                **{m.label: model_entry(m, state.sources) for m in (*state.config.models, *state.trained)},
                **imported_entries(state),
            },
            "seconds": round(time.perf_counter() - started, 3),
            "steps": state.log.to_list(),
            "skipped": [asdict(s) for s in state.log.skips()],
        },
    )


def imported_entries(state: RunState) -> dict[str, dict[str, Any]]:
    """The embedding folders made elsewhere in the run's manifest: a model per name, its modalities and folders."""
    out: dict[str, dict[str, Any]] = {}
    for entry in state.config.embeddings:
        model = out.setdefault(
            entry.label,
            {"spec": entry.manifest.get("model_spec"), "modalities": [], "source": {"kind": "import", "folders": []}},
        )
        model["modalities"] = sorted({*model["modalities"], entry.modality})
        model["source"]["folders"].append(entry.path)
    return out


def run_inputs(args: dict[str, Any]) -> list[Path]:
    """What a run reads besides what it writes itself: its preset and scratch YAML files, its local model
    folders (a run folder may be none of them, hold none and lie inside none)."""
    config: RunConfig = args["config"]
    paths = [p for d in config.datasets for p in preset_file(d.preset)]
    paths += [Path(e.config) for e in config.scratch if e.config.endswith((".yaml", ".yml"))]
    paths += [Path(p) for e in config.embeddings for p in (e.path, e.control, e.singles) if p is not None]
    paths += [e.dataset_folder for e in config.embeddings if e.dataset is None]
    return paths + [p for m in config.models for p in model_paths(m.spec)]


def _starting(name: str) -> bool:
    """Whether ``name`` is what any run folder holds from its start: its lock and mark, or the temporary files of
    its first writes (a run killed before its config was in place)."""
    return name in (".lock", OUTPUT_MARK) or bool(_STARTING.match(name))


@writes("out", what="run folder", reads=run_inputs)
def run_pipeline(
    config: RunConfig,
    out: str | Path,
    *,
    say: Say = print,
    progress: ProgressFactory | None = None,
) -> RunState:
    """Run ``config`` into ``out`` (see the module doc); returns what it did."""
    root = Path(out)
    check_text_path(root)
    existing = root / CONFIG
    if root.is_dir() and any(not _starting(p.name) for p in root.iterdir()) and not existing.is_file():
        raise BindscopeError(f"{root} holds files that are not a bindscope run; choose another --out")
    preflight(config, root)  # nothing is written before every check that can be made has passed
    state = RunState(root, config, say, progress, StepLog(), {}, {})
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    if (root / MANIFEST).is_file():  # an earlier run's: from here on it no longer describes the folder
        write_manifest(state, started, "interrupted")  # (a kill -9 leaves it so; the end of this run rewrites it)
    write_config(root, config)
    mark_output(root, "run")
    remove_leftovers(root)  # marked now: a run killed before its mark left its first files' temporaries inside
    try:
        build_datasets(state)
        specs = embedding_specs(state)
        embed_all(state, specs)
        specs += scratch_all(state)
        specs += imported_specs(state)
        analyse_all(state, specs)
        if config.report:
            from bindscope.pipeline.report import write_report

            write_manifest(state, started, run_status(state.log))  # the report's provenance is this run's manifest
            with state.log.timed("report", "report.html", root / "report.html"):
                write_report(root)
    except BaseException:
        write_manifest(state, started, "interrupted")
        raise
    write_manifest(state, started, run_status(state.log))
    return state
