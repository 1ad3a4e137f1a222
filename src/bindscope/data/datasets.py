"""Dataset folders: build them from a preset, load them back with full validation.

A dataset folder holds::

    manifest.json     what was built: preset config, sizes, concepts, content hash, version
    scenes.parquet    one row per scene (the source of truth)
    scenes.csv        the same table for spreadsheets and other tools
    images/           rendered images, filled in by a renderer (empty until then)
    singles.parquet   optional: one row per object alone at each slot position (columns ``object``
    singles.csv       = object id, ``slot`` = 1..S), its caption and image, once images are attached

Scene table columns: ``scene``, ``num_objects``, then for k = 1..K and each concept c
``object{k}_{c}`` (value name, empty where the scene has fewer objects) and ``object{k}_{c}_idx``
(value index, -1 there), then ``caption`` and ``image`` (relative path, empty until rendered).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file, check_inside, read_json, read_manifest, read_parquet, staged_dir, write_json
from bindscope.core.locks import writes
from bindscope.core.validation import MAX_WORKERS, check_size
from bindscope.core.version import stamp
from bindscope.data.presets import Preset, load_preset, preset_file, preset_from_dict
from bindscope.space.captions import bare_phrase
from bindscope.space.captions import captions as make_captions
from bindscope.space.concepts import PAD, ConceptSpace, SceneSet

DATASET_FORMAT = "bindscope-dataset-v1"
MANIFEST = "manifest.json"
SCENES_PARQUET = "scenes.parquet"
SCENES_CSV = "scenes.csv"
SINGLES_PARQUET = "singles.parquet"
SINGLES_CSV = "singles.csv"
IMAGES_DIR = "images"
#: Wordings of single-object captions (:func:`single_object_captions`): the caption template, or
#: the same without a leading article.
SINGLE_CAPTION_FORMS = ("template", "bare")
REQUIRED_MANIFEST_KEYS = (
    "format",
    "preset",
    "num_scenes",
    "objects_per_scene",
    "concepts",
    "hash",
    "bindscope_version",
    "spec",
)
#: Types of the manifest's keys (checked when present).
MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "preset": str,
    "num_scenes": int,
    "objects_per_scene": int,
    "concepts": dict,
    "hash": str,
    "bindscope_version": str,
    "spec": dict,
    "images": dict,
    "files": dict,
}
#: Manifest keys that follow from the spec and the scenes: they must equal what those give.
DERIVED_KEYS = (
    "preset",
    "description",
    "num_scenes",
    "objects_per_scene",
    "num_objects",
    "concepts",
    "noun",
    "modalities",
    "renderer",
    "slot_layout",
    "caption_template",
    "scene_counts",
    "scene_set_hash",
)
REBUILD = "rebuild it with `bindscope dataset build`"


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset folder: its preset, scenes, captions and image paths."""

    root: Path
    manifest: dict[str, Any]
    preset: Preset
    scenes: SceneSet
    captions: np.ndarray
    images: np.ndarray
    single_images: np.ndarray | None = None

    @property
    def space(self) -> ConceptSpace:
        return self.scenes.space

    @property
    def hash(self) -> str:
        return str(self.manifest["hash"])

    @property
    def name(self) -> str:
        return self.preset.name

    def __len__(self) -> int:
        return len(self.scenes)

    def summary(self) -> str:
        """A readable multi-line description (what ``bindscope dataset info`` prints)."""
        return format_summary(self)


def column_names(space: ConceptSpace, k: int) -> list[str]:
    """The scene table's columns, in order."""
    cols = ["scene", "num_objects"]
    for slot in range(1, k + 1):
        for c in space.concepts:
            cols += [f"object{slot}_{c}", f"object{slot}_{c}_idx"]
    return [*cols, "caption", "image"]


def dataset_hash(preset: Preset, scenes: SceneSet) -> str:
    """Content hash of a dataset: its scenes, caption template and renderer."""
    h = hashlib.sha256(b"bindscope-dataset-v1\n")
    h.update(scenes.content_hash().encode())
    extra: dict[str, Any] = {"caption": preset.template.to_dict(), "renderer": preset.config.renderer}
    if preset.config.renderer in ("flat2d", "raycast3d"):  # what the images look like is part of the content
        extra["image"] = preset.config.image.model_dump()
    h.update(json.dumps(extra, sort_keys=True).encode())
    return h.hexdigest()


def scenes_table(scenes: SceneSet, captions: np.ndarray, images: np.ndarray, key: str = "scene") -> pa.Table:
    """The scene table as a pyarrow Table, built column-wise (no per-scene Python loop).

    ``key`` names the row-number column: ``scene``, or ``object`` for the single-object table.
    """
    space = scenes.space
    data: dict[str, pa.Array] = {
        key: pa.array(np.arange(len(scenes), dtype=np.int64)),
        "num_objects": pa.array(scenes.num_objects().astype(np.int32)),
    }
    for slot in range(scenes.max_objects):
        for c, concept in enumerate(space.concepts):
            idx = scenes.scenes[:, slot, c]
            data[f"object{slot + 1}_{concept}"] = _value_names(space, c, idx)
            data[f"object{slot + 1}_{concept}_idx"] = pa.array(idx.astype(np.int32))
    data["caption"] = pa.array(captions, type=pa.string())
    data["image"] = pa.array(images, type=pa.string())
    return pa.table(data)


def _value_names(space: ConceptSpace, concept: int, idx: np.ndarray) -> pa.Array:
    """Value names of indices ``idx`` of one concept, null where padded (-1)."""
    names = pa.array(space.values[concept], type=pa.string())
    return pc.take(names, pa.array(idx, mask=idx == PAD))


@writes("out", what="dataset", kind="dataset", reads=lambda args: preset_file(args["preset"]))
def build_dataset(
    preset: str | Path | Preset,
    out: str | Path,
    *,
    overwrite: bool = False,
    images: bool = True,
    workers: int | None = None,
    progress: bool = False,
) -> Dataset:
    """Build a dataset folder for a preset name, a YAML file or a :class:`Preset`.

    Re-building the same content into the same folder is a no-op; a folder holding anything
    else is refused unless ``overwrite``. The folder appears only once complete. With
    ``images`` (and a preset that names a renderer) every scene, and every object alone at each
    slot position, is rendered into ``images/`` by ``workers`` processes (default: all cores);
    an interrupted render leaves only complete PNGs, and building again renders the rest.

    Parameters
    ----------
    preset
        A preset's name (:func:`~bindscope.data.presets.list_presets`: ``clevr``, ``text`` ...), a preset YAML
        file, or a :class:`Preset`.
    out
        The dataset folder to write.
    overwrite
        Replace a folder that holds another dataset (default: refuse it).
    images
        Render the images, where the preset has a renderer (False: the captions only).
    workers
        Processes that render the images (default: one per core).
    progress
        Show a progress bar of the images rendered on stderr.

    Returns
    -------
    Dataset
        The folder read back: ``.scenes``, ``.captions``, ``.images``, ``.manifest``.

    Examples
    --------
    >>> import bindscope as bs
    >>> ds = bs.build_dataset("clevr", "data/clevr", images=False)  # doctest: +SKIP
    >>> len(ds), ds.captions[0]  # doctest: +SKIP
    (576, 'a blue cube and a blue cube')
    """
    if workers is not None:
        check_size(workers, "--workers", 1, MAX_WORKERS)
    preset = preset if isinstance(preset, Preset) else load_preset(preset)
    out = Path(out)
    scenes = preset.build_scenes()
    content = dataset_hash(preset, scenes)
    if (out / MANIFEST).is_file() and not overwrite:
        existing = read_json(out / MANIFEST, "dataset manifest")
        if existing.get("hash") != content:
            raise BindscopeError(
                f"{out} already holds a different dataset ({existing.get('preset')}, hash "
                f"{str(existing.get('hash'))[:12]}); choose another --out or pass --overwrite"
            )
        return _with_images(load_dataset(out, check_images=not images), images, workers, progress)
    captions = make_captions(scenes, preset.template)
    paths = np.full(len(scenes), "", dtype=object)
    manifest = _manifest(preset, scenes, content)
    with staged_dir(out, kind="dataset", overwrite=overwrite) as stage:
        _write_table(scenes_table(scenes, captions, paths), stage / SCENES_PARQUET, stage / SCENES_CSV)
        (stage / IMAGES_DIR).mkdir()
        write_json(stage / MANIFEST, manifest)
    return _with_images(Dataset(out, manifest, preset, scenes, captions, paths), images, workers, progress)


def _with_images(ds: Dataset, images: bool, workers: int | None, progress: bool) -> Dataset:
    """Render what is missing, when asked and when the preset has a renderer of this package."""
    from bindscope.data.render.images import render_dataset_images, renders_images

    if not images or not renders_images(ds):
        return ds
    wants_singles = ds.preset.config.image.single_objects
    listed = [*ds.images, *(ds.single_images.ravel() if ds.single_images is not None else [])]
    complete = all(ds.images) and (ds.single_images is not None or not wants_singles)
    if complete and all((ds.root / p).is_file() for p in listed):
        if _images_recorded(ds):
            return ds
        return attach_images(ds.root, ds.images, ds.single_images)  # killed before the manifest said so
    scene_paths, grid = render_dataset_images(ds, workers=workers, progress=progress)
    return attach_images(ds.root, scene_paths, grid)


def _images_recorded(ds: Dataset) -> bool:
    """Whether the manifest counts the images the tables list (:func:`attach_images` writes it last)."""
    recorded = ds.manifest.get("images")
    recorded = recorded if isinstance(recorded, dict) else {}
    wanted = {"rendered": int(sum(1 for p in ds.images if p))}
    if ds.single_images is not None:
        wanted.update(single_objects=int(ds.single_images.shape[0]), single_positions=int(ds.single_images.shape[1]))
    return all(recorded.get(k) == v for k, v in wanted.items())


def _manifest(preset: Preset, scenes: SceneSet, content: str) -> dict[str, Any]:
    counts = np.bincount(scenes.num_objects(), minlength=scenes.max_objects + 1)
    return {
        "format": DATASET_FORMAT,
        "preset": preset.name,
        "description": preset.config.description,
        "num_scenes": len(scenes),
        "objects_per_scene": scenes.max_objects,
        "num_objects": scenes.space.num_objects,
        "concepts": scenes.space.to_dict(),
        "noun": preset.noun,
        "modalities": list(preset.config.modalities),
        "renderer": preset.config.renderer,
        "slot_layout": preset.config.slot_layout,
        "caption_template": preset.template.to_dict(),
        "scene_counts": {str(n): int(c) for n, c in enumerate(counts) if c},
        "hash": content,
        "scene_set_hash": scenes.content_hash(),
        **stamp(),
        "files": {"scenes": SCENES_PARQUET, "scenes_csv": SCENES_CSV, "images": IMAGES_DIR},
        "images": {"rendered": 0},
        "spec": preset.to_dict(),
    }


def load_dataset(root: str | Path, *, check_images: bool = True) -> Dataset:
    """Load and validate a dataset folder; any inconsistency is a :class:`BindscopeError`.

    ``check_images=False`` skips checking that the listed image files exist (the builder uses it
    to render what is missing).
    """
    root = Path(root)
    manifest = read_manifest(
        root,
        "dataset",
        REQUIRED_MANIFEST_KEYS,
        DATASET_FORMAT,
        "build it with `bindscope dataset build`",
        types=MANIFEST_TYPES,
    )
    preset = preset_from_dict(manifest["spec"], origin=f"spec in {root / MANIFEST}")
    if manifest["concepts"] != preset.space.to_dict():
        raise BindscopeError(f"{root / MANIFEST}: 'concepts' disagrees with the stored spec")
    k = manifest["objects_per_scene"]
    _check(
        k == preset.objects_per_scene,
        root,
        f"the manifest says {k} objects per scene but its spec says {preset.objects_per_scene}; {REBUILD}",
    )
    table = _read_table(root / SCENES_PARQUET)
    scenes = _scenes_from_table(table, preset.space, k, root)
    _check(
        len(scenes) == manifest["num_scenes"],
        root,
        f"{SCENES_PARQUET} has {len(scenes)} rows but the manifest says {manifest['num_scenes']}",
    )
    _check(
        np.array_equal(table["scene"].to_numpy(), np.arange(len(scenes))),
        root,
        "column 'scene' must number the rows 0..N-1 in order",
    )
    _check(
        np.array_equal(table["num_objects"].to_numpy(), scenes.num_objects()),
        root,
        "column 'num_objects' disagrees with the object columns",
    )
    _check(
        dataset_hash(preset, scenes) == manifest["hash"],
        root,
        "the scenes do not match the manifest hash (edited or truncated?); rebuild the dataset",
    )
    captions = np.asarray(table["caption"].to_pylist(), dtype=object)
    expected = make_captions(scenes, preset.template)
    bad = np.flatnonzero(captions != expected)
    _check(
        len(bad) == 0,
        root,
        f"caption of scene {bad[0] if len(bad) else 0} does not match its objects "
        f"({captions[bad[0]] if len(bad) else ''!r})",
    )
    _check_derived(root, manifest, _manifest(preset, scenes, manifest["hash"]))
    images = np.asarray([p or "" for p in table["image"].to_pylist()], dtype=object)
    _check_images(root, images, check_images)
    _check_csv(root, SCENES_CSV, len(scenes))
    singles = _load_single_images(root, preset, check_images) if (root / SINGLES_PARQUET).exists() else None
    return Dataset(root, manifest, preset, scenes, captions, images, singles)


def single_object_scenes(ds: Dataset) -> SceneSet:
    """Every object of the dataset's space alone (row o = object id o), one slot."""
    return SceneSet.singles(ds.space, 1)


def single_object_captions(ds: Dataset, form: str = "template") -> np.ndarray:
    """The caption of every object alone, in object-id order.

    Parameters
    ----------
    ds : Dataset
        The dataset whose concept space and caption template name the objects.
    form : {"template", "bare"}
        ``template``: the dataset's caption template ("a red cube"); ``bare``: the same without a
        leading article ("red cube", as the paper's research code words single objects).

    Returns
    -------
    np.ndarray
        Object array ``[U]``: row o is the caption of object id o.
    """
    if form not in SINGLE_CAPTION_FORMS:
        raise BindscopeError(
            f"single-object caption form must be one of {', '.join(SINGLE_CAPTION_FORMS)}, got {form!r}"
        )
    out = make_captions(single_object_scenes(ds), ds.preset.template)
    return np.array([bare_phrase(str(c)) for c in out], dtype=object) if form == "bare" else out


@writes("root", what="dataset", in_place=True)
def attach_images(
    root: str | Path,
    scene_images: Sequence[str] | np.ndarray,
    single_images: Sequence[Sequence[str]] | Sequence[str] | np.ndarray | None = None,
) -> Dataset:
    """Record rendered image files in a dataset folder.

    Parameters
    ----------
    root : path
        The dataset folder.
    scene_images : sequence of str
        One path per scene, in scene order, relative to ``root`` (e.g. ``images/000012.png``).
    single_images : [U][S] nested sequence of str, or [U] sequence, optional
        Per object (in object-id order), its image alone at each of S slot positions (a flat
        list means S = 1); written to ``singles.parquet`` for the interventions' ``single`` bank.

    The files must exist inside the folder. The scene table (parquet and CSV) gains the paths;
    the dataset's content hash does not change (it covers scenes, captions and renderer).
    """
    ds = load_dataset(root)
    root = ds.root
    scene_paths = _check_image_list(root, scene_images, len(ds), "scene")
    singles: np.ndarray | None = None
    if single_images is not None:
        grid: np.ndarray = np.asarray(single_images, dtype=object)
        grid = grid[:, None] if grid.ndim == 1 else grid
        if grid.ndim != 2 or grid.shape[0] != ds.space.num_objects:
            raise BindscopeError(
                f"got {grid.shape[0] if grid.ndim else 0:,} single-object image lists but the dataset "
                f"has {ds.space.num_objects:,} objects; give one list of slot positions per object"
            )
        singles = _check_image_list(root, grid.ravel(), grid.size, "single-object image").reshape(grid.shape)
        _write_table(singles_table(ds.preset, singles), root / SINGLES_PARQUET, root / SINGLES_CSV)
    _write_table(scenes_table(ds.scenes, ds.captions, scene_paths), root / SCENES_PARQUET, root / SCENES_CSV)
    singles = singles if singles is not None else ds.single_images
    rendered = {"rendered": int(sum(1 for p in scene_paths if p))}
    if singles is not None:
        rendered.update(single_objects=int(singles.shape[0]), single_positions=int(singles.shape[1]))
    write_json(root / MANIFEST, {**ds.manifest, "images": {**ds.manifest.get("images", {}), **rendered}})
    return load_dataset(root)


def singles_table(preset: Preset, images: np.ndarray) -> pa.Table:
    """The single-object table: one row per (object, slot position), object-major."""
    u, positions = images.shape
    singles = SceneSet.singles(preset.space, 1)
    rows = np.repeat(np.arange(u), positions)
    captions = make_captions(singles, preset.template)[rows]
    table = scenes_table(singles.subset(rows), captions, images.ravel(), key="object")
    table = table.set_column(0, "object", pa.array(rows.astype(np.int64)))
    return table.add_column(1, "slot", pa.array(np.tile(np.arange(1, positions + 1), u).astype(np.int32)))


def _check_image_list(root: Path, given: Sequence[str] | np.ndarray, expected: int, what: str) -> np.ndarray:
    paths = np.asarray([str(p) for p in given], dtype=object)
    if len(paths) != expected:
        raise BindscopeError(
            f"got {len(paths):,} image paths but the dataset has {expected:,} {what}s; give one per {what}"
        )
    for i, p in enumerate(paths):
        path = Path(p)
        if not p or path.is_absolute() or ".." in path.parts:
            raise BindscopeError(
                f"image path of {what} {i} ({p!r}) must be relative to the dataset folder, "
                f"e.g. {IMAGES_DIR}/{i:06d}.png"
            )
        if not (root / path).is_file():
            raise BindscopeError(f"image of {what} {i} ({root / path}) does not exist; write the file first")
    return paths


def _write_table(table: pa.Table, parquet: Path, csv: Path) -> None:
    """Write a table as parquet and CSV, each file atomically."""
    with atomic_file(parquet, "wb") as fh:
        pq.write_table(table, fh)
    with atomic_file(csv, "wb") as fh:
        pacsv.write_csv(table, fh)


def _load_single_images(root: Path, preset: Preset, check_images: bool = True) -> np.ndarray:
    """Validate ``singles.parquet`` against the space; its image paths as ``[objects, positions]``."""
    table = _read_table(root / SINGLES_PARQUET)
    u = preset.space.num_objects
    positions = table.num_rows // u if u else 0
    _check(
        positions >= 1 and table.num_rows == u * positions,
        root,
        f"{SINGLES_PARQUET} has {table.num_rows} rows, not a whole number of rows per each of the space's {u} objects; "
        "attach the images again",
    )
    expected = singles_table(preset, np.full((u, positions), "", dtype=object))
    _check(
        table.column_names == expected.column_names,
        root,
        f"{SINGLES_PARQUET} must have the columns {', '.join(expected.column_names)}; attach the images again",
    )
    _check_column_types(table, root, SINGLES_PARQUET)
    _check(
        table.drop_columns(["image"]).equals(expected.drop_columns(["image"])),
        root,
        f"{SINGLES_PARQUET} does not list the objects in id order, each at slots 1..{positions}, with their captions; "
        "attach the images again",
    )
    images = np.asarray([p or "" for p in table["image"].to_pylist()], dtype=object)
    _check_images(root, images, check_images)
    _check_csv(root, SINGLES_CSV, table.num_rows)
    return images.reshape(u, positions)


def _check(ok: bool, root: Path, message: str) -> None:
    if not ok:
        raise BindscopeError(f"dataset {root}: {message}")


def _read_table(path: Path) -> pa.Table:
    return read_parquet(path, "dataset table", "rebuild the dataset with `bindscope dataset build`", root=path.parent)


def _check_column_types(table: pa.Table, root: Path, name: str) -> None:
    """Whole-number ids, slots and value indices; text names, captions and image paths."""
    for field in table.schema:
        whole = field.name in ("scene", "object", "slot", "num_objects") or field.name.endswith("_idx")
        ok = (
            pa.types.is_integer(field.type)
            if whole
            else pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_null(field.type)
        )
        _check(
            ok,
            root,
            f"{name}: column {field.name!r} holds {field.type}, not {'whole numbers' if whole else 'text'}; {REBUILD}",
        )


def _check_derived(root: Path, manifest: dict[str, Any], expected: dict[str, Any]) -> None:
    """The manifest's keys that follow from the spec and the scenes must equal what those give."""
    for key in DERIVED_KEYS:
        if key in manifest and manifest[key] != json.loads(json.dumps(expected[key])):
            raise BindscopeError(f"{root / MANIFEST}: {key!r} disagrees with the stored spec and scenes; {REBUILD}")


def _scenes_from_table(table: pa.Table, space: ConceptSpace, k: int, root: Path) -> SceneSet:
    expected = column_names(space, k)
    missing = [c for c in expected if c not in table.column_names]
    _check(not missing, root, f"{SCENES_PARQUET} lacks column(s) {', '.join(missing)}")
    extra = [c for c in table.column_names if c not in expected]
    _check(not extra, root, f"{SCENES_PARQUET} has unexpected column(s) {', '.join(extra)}")
    _check_column_types(table, root, SCENES_PARQUET)
    arr = np.empty((table.num_rows, k, space.num_concepts), dtype=np.int64)
    for slot in range(k):
        for c, concept in enumerate(space.concepts):
            idx_col = table[f"object{slot + 1}_{concept}_idx"]
            _check(idx_col.null_count == 0, root, f"column object{slot + 1}_{concept}_idx has empty cells")
            arr[:, slot, c] = idx_col.to_numpy()
    try:
        scenes = SceneSet(space, arr)
    except BindscopeError as exc:
        raise BindscopeError(f"dataset {root}: {exc}") from None
    for slot in range(k):
        for c, concept in enumerate(space.concepts):
            want = _value_names(space, c, scenes.scenes[:, slot, c])
            got = table[f"object{slot + 1}_{concept}"].combine_chunks()
            same = pc.fill_null(pc.equal(got, want), False)
            both_null = pc.and_(pc.is_null(got), pc.is_null(want))
            ok = pc.or_(same, both_null).to_numpy(zero_copy_only=False)
            if not ok.all():
                row = int(np.flatnonzero(~ok)[0])
                raise BindscopeError(
                    f"dataset {root}: row {row}: object{slot + 1}_{concept} is {got[row].as_py()!r} "
                    f"but its index says {want[row].as_py()!r}"
                )
    return scenes


def _check_images(root: Path, images: np.ndarray, exist: bool = True) -> None:
    """Listed image paths stay inside the folder (relative, no ``..``, no link out); with ``exist``, they exist."""
    listed = [p for p in images if p]
    for p in listed:
        if Path(p).is_absolute() or ".." in Path(p).parts:
            raise BindscopeError(f"dataset {root}: image path {p!r} must be relative to the folder; {REBUILD}")
        check_inside(root, root / p, REBUILD)
    missing = [p for p in listed if exist and not (root / p).is_file()]
    if missing:
        raise BindscopeError(
            f"dataset {root}: {len(missing)} image file(s) listed in the scenes table are missing, "
            f"e.g. {missing[0]}; render or attach them again (bindscope.data.datasets.attach_images)"
        )


def _check_csv(root: Path, name: str, num_rows: int) -> None:
    path = check_inside(root, root / name, REBUILD)
    if not path.is_file():
        raise BindscopeError(f"dataset {root}: {name} is missing; rebuild the dataset")
    with path.open("rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    _check(
        lines == num_rows + 1,
        root,
        f"{name} has {lines - 1} data rows but its parquet table has {num_rows}; rebuild the dataset",
    )


def family_line(preset: Preset) -> str:
    """What a dataset's binding swaps exchange: ``attribution``, or the relations or counts it holds."""
    c = preset.config
    if c.relations is not None:
        return f"relation ({', '.join(c.relations)}; each object's side of it is its place)"
    if c.counts is not None:
        return f"count ({', '.join(map(str, c.counts))} copies of an object)"
    return "attribution"


def format_summary(ds: Dataset) -> str:
    """Human-readable summary of a dataset folder."""
    m = ds.manifest
    counts = ", ".join(f"{n} object{'s' if n != '1' else ''}: {c:,}" for n, c in m.get("scene_counts", {}).items())
    lines = [
        f"dataset      {ds.name}  ({ds.root})",
        f"description  {m.get('description') or '-'}",
        f"scenes       {len(ds):,}  ({counts})",
        f"slots        {ds.scenes.max_objects}"
        + (f"  ({', '.join(m['slot_layout'])})" if m.get("slot_layout") else ""),
        f"objects      {ds.space.num_objects:,} distinct (noun: {ds.preset.noun})",
        f"family       {family_line(ds.preset)}",
        "concepts",
    ]
    for concept, values in zip(ds.space.concepts, ds.space.values):
        lines.append(f"  {concept} ({len(values)}): {' '.join(values)}")
    examples = [repr(str(c)) for c in ds.captions[: min(3, len(ds))]]
    rendered = sum(1 for p in ds.images if p)
    lines += [
        f"captions     e.g. {', '.join(examples)}",
        f"modalities   {', '.join(m.get('modalities', []))}"
        + (f"  (renderer: {m['renderer']})" if m.get("renderer") else ""),
        f"images       {rendered:,} / {len(ds):,} rendered"
        + (
            f", {ds.single_images.size:,} single-object ({ds.single_images.shape[0]:,} objects x "
            f"{ds.single_images.shape[1]} positions)"
            if ds.single_images is not None
            else ""
        ),
        f"hash         {ds.hash}",
        f"built with   bindscope {m['bindscope_version']}, {m.get('created', '?')}",
    ]
    return "\n".join(lines)
