"""Dataset commands: presets, build, info, split, preview, check, PUG:SPARE import."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.cli.app import app, dataset_app
from bindscope.cli.common import ObjectOrderChoice, WaitOpt, parse_fractions
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_SCENE_COUNT, MAX_WORKERS, check_seed, check_size


class SplitLevel(str, Enum):
    scene = "scene"
    object = "object"


class ValidationBy(str, Enum):
    scenes = "scenes"
    objects = "objects"


@app.command()
def presets() -> None:
    """List the built-in dataset presets."""
    from bindscope.data.presets import get_preset, list_presets

    rows = []
    for name in list_presets():
        p = get_preset(name)
        n = len(p.build_scenes())
        concepts = " x ".join(f"{c}({len(v)})" for c, v in zip(p.space.concepts, p.space.values))
        rows.append((name, concepts, str(p.objects_per_scene), f"{n:,}", ",".join(p.config.modalities), p.family))
    header = ("preset", "concepts", "K", "scenes", "modalities", "family")
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
    wait: WaitOpt = False,
) -> None:
    """Write a dataset folder: manifest.json, scenes.parquet/.csv, images/ (rendered; resumable)."""
    from bindscope.data.datasets import build_dataset
    from bindscope.data.presets import load_preset, with_image_settings

    if workers is not None:
        check_size(workers, "--workers", 1, MAX_WORKERS)
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
    wait: WaitOpt = False,
) -> None:
    """Draw a grid of images with their captions: check that names match pixels."""
    from bindscope.data.datasets import load_dataset
    from bindscope.data.preview import check_grid, preview_grid

    check_grid(rows, cols, seed)  # before the dataset is read
    typer.echo(f"wrote {preview_grid(load_dataset(root), out, rows=rows, cols=cols, seed=seed, singles=singles)}")


@dataset_app.command("check")
def dataset_check(
    root: Annotated[Path, typer.Argument(help="A dataset folder with rendered images.")],
    scenes: Annotated[
        Optional[int], typer.Option(help="Read back this many scene images (a seeded sample; default all).")
    ] = None,
) -> None:
    """Prove the labels: read color, shape, place and count back from the pixels and compare with the names."""
    from bindscope.data.check import check_labels
    from bindscope.data.datasets import load_dataset

    if scenes is not None:
        check_size(scenes, "--scenes", 1, MAX_SCENE_COUNT)
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
    wait: WaitOpt = False,
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
    fractions: Annotated[
        Optional[str],
        typer.Option(
            help="Train fractions in (0, 1), comma-separated. Scene level: one (default 0.4). Object level: one or "
            "more, nested for one seed (default 0.1,...,0.9).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the permutation.")] = 0,
    object_order: Annotated[
        ObjectOrderChoice,
        typer.Option(
            help="Object level: a plain seeded permutation (random), one that first takes a cover of every "
            "concept value (covering, as `bindscope complexity` does by default), or units closed under the "
            "relation and count swaps (closed: relation and count spaces)."
        ),
    ] = ObjectOrderChoice.random,
    validation: Annotated[
        Optional[float], typer.Option(help="Carve this share of the training side out as validation.")
    ] = None,
    validation_by: Annotated[
        ValidationBy, typer.Option(help="Object level: carve validation by scenes or by train objects.")
    ] = ValidationBy.scenes,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Folder for the split files (default DATASET/splits).")
    ] = None,
    wait: WaitOpt = False,
) -> None:
    """Write seeded split files (JSON with indices, seed and fraction)."""
    from bindscope.data.datasets import load_dataset
    from bindscope.space.splits import (
        DEFAULT_FRACTIONS,
        check_fraction,
        object_splits,
        save_split,
        scene_split,
        split_file_name,
    )

    check_seed(seed, "--seed")
    ds = load_dataset(root)
    out = out or root / "splits"
    if validation is not None:
        check_fraction(validation, "validation fraction")
    chosen = parse_fractions(fractions)
    if level is SplitLevel.scene:
        scene_fraction = chosen or (0.4,)
        if len(scene_fraction) != 1:
            raise BindscopeError("a scene-level split takes exactly one fraction, e.g. --fractions 0.4")
        by_scene = scene_split(len(ds), scene_fraction[0], seed, dataset_hash=ds.hash)
        if validation is not None:
            by_scene = by_scene.with_validation(validation)
        path = save_split(by_scene, out / split_file_name(by_scene))
        sizes = f"train {len(by_scene.train):,}, validation {len(by_scene.validation):,}, test {len(by_scene.test):,}"
        typer.echo(f"{path}: {sizes}")
        return
    ordered = object_splits(
        ds.scenes, chosen or DEFAULT_FRACTIONS, seed, dataset_hash=ds.hash, order=object_order.value
    )
    for split in ordered:
        if validation is not None:
            split = split.with_validation(ds.scenes, validation, by=validation_by.value)
        path = save_split(split, out / split_file_name(split))
        sizes = ", ".join(f"{k} {len(v):,}" for k, v in split.groups().items())
        typer.echo(f"{path}: {len(split.train_objects)} train objects; {sizes}")
