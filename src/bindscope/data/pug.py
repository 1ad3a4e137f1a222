"""Import the ``pug_spare`` dataset from a user's copy of PUG:SPARE (docs/method/01-concepts.md).

PUG:SPARE ships a CSV of rendered scenes (one row per image) and a folder of images. The paper
uses one world's two-animal scenes in the default positions: rows whose ``world_name`` is the
chosen world and whose ``character_pos`` and ``character2_pos`` are both empty. Each such row is
one scene of the ``pug_spare`` preset:

* slot 1 = (``character_name``, ``character_texture``): the first character, shown on the left
  in PUG:SPARE's default positions;
* slot 2 = (``character2_name``, ``character2_texture``): the second character, on the right.

Names must be the preset's values exactly (:data:`bindscope.data.presets.PUG_ANIMALS`,
:data:`bindscope.data.presets.PUG_TEXTURES`). Every preset scene (distinct animals, distinct
textures: 7,392) needs exactly one row. Nothing is skipped silently: rows of other worlds or
with positions are counted in the manifest, and every other problem is one
:class:`~bindscope.core.errors.BindscopeError` that lists the offenders.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file, check_output_dir, file_sha256, read_json, staged_dir, write_json
from bindscope.core.locks import writes
from bindscope.core.progress import progress_bar
from bindscope.core.version import utc_now
from bindscope.data.datasets import IMAGES_DIR, MANIFEST, Dataset, attach_images, build_dataset, load_dataset
from bindscope.data.presets import Preset, get_preset
from bindscope.space.concepts import SceneSet

logger = logging.getLogger(__name__)

PRESET = "pug_spare"
SOURCES_CSV = "sources.csv"
NAME_COLUMNS = ("character_name", "character_texture", "character2_name", "character2_texture")
POSITION_COLUMNS = ("character_pos", "character2_pos")
REQUIRED_COLUMNS = ("filename", "world_name", *NAME_COLUMNS, *POSITION_COLUMNS)
SHOW = 5  # offenders named in an error message
SHOW_FILES = 10  # missing image files named in an error message


@dataclass(frozen=True)
class PugSelection:
    """The kept CSV rows in scene order: source ``filenames``, CSV ``lines`` and the row counts."""

    filenames: list[str]
    lines: list[int]
    rows: dict[str, int]


@writes("out", what="dataset", kind="dataset", reads=("csv_path", "images_dir"))
def import_pug(
    csv_path: str | Path,
    images_dir: str | Path,
    *,
    out: str | Path,
    world: str = "Desert",
    overwrite: bool = False,
    progress: bool = False,
) -> Dataset:
    """Build the ``pug_spare`` dataset folder from a PUG:SPARE CSV and its images.

    Parameters
    ----------
    csv_path : path
        The PUG:SPARE CSV; it needs the columns ``filename, world_name, character_name,
        character2_name, character_texture, character2_texture, character_pos, character2_pos``
        (others are ignored).
    images_dir : path
        The folder the CSV's ``filename`` column is relative to.
    out : path
        The dataset folder to write. It must not exist or be empty, unless ``overwrite``.
    world : str
        The ``world_name`` whose default-position scenes are used (the paper: ``Desert``).
    overwrite : bool
        Replace an existing ``out`` (re-importing into the same folder needs it too).
    progress : bool
        Show a progress bar while copying images.

    Returns
    -------
    Dataset
        The loaded folder. It is the normal dataset folder of the ``pug_spare`` preset (same
        content hash as ``bindscope dataset build pug_spare``), with each scene's image copied to
        ``images/NNNNNN<ext>`` (scene number, the source file's extension) and recorded in the
        scene table. ``sources.csv`` maps each scene to its source ``filename`` and CSV line;
        ``manifest["source"]`` records the CSV (path, sha256), the images folder, the world and the
        row counts ``{"csv", "other_world", "with_position", "used"}``.

    The folder is built in a hidden staging folder beside ``out`` and moved into place only once
    complete, so an interrupted import leaves ``out`` as it was.
    """
    csv_path, images_dir, out = Path(csv_path), Path(images_dir), Path(out)
    check_output_dir(out, kind="dataset", overwrite=overwrite)  # at once (the sources are checked by @writes)
    preset = get_preset(PRESET)
    table = read_pug_csv(csv_path)
    selection = select_scenes(table, preset, world)
    sources = _check_images(images_dir, selection.filenames, selection.lines)
    source = {
        "dataset": "PUG:SPARE",
        "csv": str(csv_path.resolve()),
        "csv_sha256": file_sha256(csv_path),
        "images_dir": str(images_dir.resolve()),
        "world": world,
        "rows": selection.rows,
        "sources": SOURCES_CSV,
        "imported": utc_now(),
    }
    with staged_dir(out, kind="dataset", overwrite=overwrite) as stage:
        build_dataset(preset, stage)
        rel = _copy_images(sources, stage, progress)
        attach_images(stage, rel)
        _write_sources(stage / SOURCES_CSV, selection)
        manifest = read_json(stage / MANIFEST, "dataset manifest")
        write_json(stage / MANIFEST, {**manifest, "source": source})
    logger.info("imported %d PUG:SPARE scenes of world %s into %s (rows: %s)", len(rel), world, out, selection.rows)
    return load_dataset(out)


def read_pug_csv(csv_path: Path) -> pd.DataFrame:
    """Read the PUG:SPARE CSV as strings (empty cells NaN) and check its columns."""
    if not csv_path.is_file():
        raise BindscopeError(
            f"PUG:SPARE CSV {csv_path} does not exist; give the path of the CSV that comes with PUG:SPARE"
        )
    try:
        table = pd.read_csv(csv_path, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BindscopeError(f"PUG:SPARE CSV {csv_path} is not a readable CSV file ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        found = ", ".join(map(str, table.columns[:12])) + (", ..." if len(table.columns) > 12 else "")
        raise BindscopeError(
            f"PUG:SPARE CSV {csv_path} lacks {len(missing)} column(s): {', '.join(missing)}; it needs "
            f"{', '.join(REQUIRED_COLUMNS)} (columns found: {found})"
        )
    return table


def select_scenes(table: pd.DataFrame, preset: Preset, world: str) -> PugSelection:
    """Keep the rows of ``world`` without positions and match them one-to-one to the preset's scenes.

    ``table`` is as :func:`read_pug_csv` returns it (data row i is CSV line i + 2, after the header).
    Returns the kept rows in scene order (filename and CSV line per scene) and the row counts.
    """
    in_world = (table["world_name"] == world).to_numpy()
    no_position = np.logical_and.reduce([_is_empty(table[c]) for c in POSITION_COLUMNS])
    kept = table[in_world & no_position]
    lines = kept.index.to_numpy() + 2  # header is line 1
    values = _value_indices(kept, preset, lines)
    scenes = preset.build_scenes()
    scene_of_row = _scene_numbers(values, scenes, lines)
    _check_duplicates(scene_of_row, scenes, lines)
    _check_coverage(scene_of_row, scenes, table, world)
    order = np.argsort(scene_of_row)
    rows = {
        "csv": len(table),
        "other_world": int((~in_world).sum()),
        "with_position": int((in_world & ~no_position).sum()),
        "used": len(kept),
    }
    filenames = kept["filename"].fillna("").to_numpy()[order]
    return PugSelection([str(f) for f in filenames], [int(n) for n in lines[order]], rows)


def _is_empty(column: pd.Series) -> np.ndarray:
    """Cells that are NaN or only whitespace."""
    return (column.isna() | (column.fillna("").str.strip() == "")).to_numpy()


def _value_indices(kept: pd.DataFrame, preset: Preset, lines: np.ndarray) -> np.ndarray:
    """Value indices ``[rows, 2, 2]`` (slot, animal/texture) of the kept rows; unknown names are an error."""
    space = preset.space
    out = np.empty((len(kept), 2, 2), dtype=np.int64)
    problems: list[list[str]] = [[] for _ in range(len(kept))]
    for col_no, column in enumerate(NAME_COLUMNS):
        slot, concept = divmod(col_no, 2)
        lookup = {name: i for i, name in enumerate(space.values[concept])}
        idx = kept[column].map(lookup).to_numpy(dtype=float)
        for row in np.flatnonzero(np.isnan(idx)):
            name = kept[column].iloc[row]
            problems[row].append(f"{column} {name!r}" if isinstance(name, str) else f"{column} (empty)")
        out[:, slot, concept] = np.nan_to_num(idx, nan=-1).astype(np.int64)
    bad = [f"line {line}: {', '.join(p)}" for line, p in zip(lines, problems) if p]
    if bad:
        raise BindscopeError(
            f"{len(bad):,} kept PUG:SPARE row(s) name an animal or texture outside the pug_spare preset, "
            f"e.g. {_first(bad, SHOW)}; animals are {', '.join(space.values[0])} and textures "
            f"{', '.join(space.values[1])} (exact spelling); fix the CSV or check that it is PUG:SPARE's"
        )
    return out


def _scene_numbers(values: np.ndarray, scenes: SceneSet, lines: np.ndarray) -> np.ndarray:
    """The preset scene number of each kept row; a row that is no preset scene is an error."""
    space = scenes.space
    u = space.num_objects
    lookup = np.full(u * u, -1, dtype=np.int64)
    ids = space.object_ids(scenes.scenes)
    lookup[ids[:, 0] * u + ids[:, 1]] = np.arange(len(scenes))
    row_ids = space.object_ids(values) if len(values) else np.empty((0, 2), dtype=np.int64)
    number = lookup[row_ids[:, 0] * u + row_ids[:, 1]]
    bad = np.flatnonzero(number < 0)
    if len(bad):
        names = [f"line {lines[i]}: {_describe(values[i], scenes)}" for i in bad[:SHOW]]
        raise BindscopeError(
            f"{len(bad):,} kept PUG:SPARE row(s) pair an animal or a texture with itself, which the pug_spare "
            f"preset excludes (it has distinct animals and distinct textures), e.g. {_first(names, SHOW, len(bad))}; "
            "remove these rows from the CSV"
        )
    return number


def _check_duplicates(scene_of_row: np.ndarray, scenes: SceneSet, lines: np.ndarray) -> None:
    counts = np.bincount(scene_of_row, minlength=len(scenes))
    dup = np.flatnonzero(counts > 1)
    if len(dup):
        shown = [
            f"{_describe(scenes.scenes[s], scenes)} at lines {', '.join(map(str, lines[scene_of_row == s]))}"
            for s in dup[:SHOW]
        ]
        raise BindscopeError(
            f"{len(dup):,} pug_spare scene(s) have more than one kept PUG:SPARE row, "
            f"e.g. {_first(shown, SHOW, len(dup))}; keep one row per scene in the CSV"
        )


def _check_coverage(scene_of_row: np.ndarray, scenes: SceneSet, table: pd.DataFrame, world: str) -> None:
    missing = np.setdiff1d(np.arange(len(scenes)), scene_of_row)
    if len(missing):
        worlds = table["world_name"].fillna("(empty)").value_counts()
        present = ", ".join(f"{w} ({n:,} rows)" for w, n in worlds.items()) or "none"
        shown = [_describe(scenes.scenes[s], scenes) for s in missing[:SHOW]]
        raise BindscopeError(
            f"{len(missing):,} of the {len(scenes):,} pug_spare scenes have no row in the CSV with world_name "
            f"{world!r} and empty character_pos and character2_pos, e.g. {_first(shown, SHOW, len(missing))}; "
            f"worlds in the CSV: {present}; choose the world with --world or use the complete PUG:SPARE CSV"
        )


def _check_images(images_dir: Path, filenames: Sequence[str], lines: Sequence[int]) -> list[Path]:
    """The source image of each scene; all missing files are reported in one error."""
    if not images_dir.is_dir():
        raise BindscopeError(
            f"PUG:SPARE images folder {images_dir} does not exist; give the folder the CSV's filenames are in"
        )
    paths = [images_dir / f for f in filenames]
    missing = sorted(
        (n, f or "(empty filename)") for f, p, n in zip(filenames, paths, lines) if not f or not p.is_file()
    )
    if missing:
        raise BindscopeError(
            f"{len(missing):,} image file(s) named by the kept PUG:SPARE rows are missing under {images_dir}: "
            f"{_first([f'{f} (line {n})' for n, f in missing], SHOW_FILES)}; give the folder that holds the "
            "world's images (the CSV's filename column is relative to it)"
        )
    return paths


def _copy_image(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)


def _copy_images(sources: Sequence[Path], stage: Path, progress: bool) -> list[str]:
    """Copy each scene's image to ``images/NNNNNN<ext>``; returns the paths relative to ``stage``."""
    rel = [f"{IMAGES_DIR}/{i:06d}{src.suffix}" for i, src in enumerate(sources)]
    with progress_bar(len(rel), desc="copy PUG:SPARE images", unit="image", enabled=progress) as bar:
        for src, dst in zip(sources, rel):
            _copy_image(src, stage / dst)
            bar.update(1)
    return rel


def _write_sources(path: Path, selection: PugSelection) -> None:
    frame = pd.DataFrame(
        {"scene": np.arange(len(selection.filenames)), "filename": selection.filenames, "csv_line": selection.lines}
    )
    with atomic_file(path, "w") as fh:
        frame.to_csv(fh, index=False)


def _describe(scene: np.ndarray, scenes: SceneSet) -> str:
    names = scenes.space.values
    return " + ".join(f"{names[1][t]} {names[0][a]}" for a, t in scene)


def _first(items: Sequence[str], n: int, total: int | None = None) -> str:
    total = len(items) if total is None else total
    more = f" (and {total - n:,} more)" if total > n else ""
    return "; ".join(items[:n]) + more
