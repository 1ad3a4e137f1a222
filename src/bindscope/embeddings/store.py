"""Embedding folders: ``embeddings.npy`` (float32 ``[N, D]``, row i = scene i) + ``manifest.json``.

Every analysis reads this layout. Embeddings computed elsewhere come in through
:func:`import_embeddings`; the encoders write the same layout.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.core.io import (
    check_output,
    check_output_dir,
    file_sha256,
    load_npy,
    read_json,
    read_manifest,
    save_npy,
    staged_dir,
    write_json,
)
from bindscope.core.locks import input_paths, is_locked, writes
from bindscope.core.validation import short_repr
from bindscope.core.version import stamp
from bindscope.data.datasets import Dataset, load_dataset

EMBEDDING_FORMAT = "bindscope-embeddings-v1"
EMBEDDINGS_FILE = "embeddings.npy"
MANIFEST = "manifest.json"
MODALITIES = ("image", "text")
ROWS = ("scenes", "single_objects")
#: What to do about an imported array nothing can be read from, or that the analyses cannot hold.
IMPORT_FIX = "import it again"
#: The same for an embedding folder an analysis reads.
LOAD_FIX = "embed or import the embeddings again"
REQUIRED_KEYS = ("format", "name", "modality", "dim", "num_rows", "dataset_hash")
#: Types of the manifest's keys (checked when present).
MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "modality": str,
    "dim": int,
    "num_rows": int,
    "dataset_hash": str,
    "rows": str,
    "single_positions": int,
    "dataset_path": str,
    "model_spec": (str, type(None)),
    "layer": (int, type(None)),
    "content_key": (str, type(None)),
    "source": dict,
}


@dataclass(frozen=True, eq=False)
class EmbeddingSet:
    """An embedding folder: the array and what it is."""

    root: Path
    manifest: dict[str, Any]
    array: np.ndarray

    @property
    def name(self) -> str:
        return str(self.manifest["name"])

    @property
    def modality(self) -> str:
        return str(self.manifest["modality"])

    @property
    def dim(self) -> int:
        return int(self.array.shape[1])

    @property
    def dataset_hash(self) -> str:
        return str(self.manifest["dataset_hash"])

    @property
    def rows(self) -> str:
        """``scenes`` (row i = scene i) or ``single_objects`` (row o = object id o alone)."""
        return str(self.manifest.get("rows", "scenes"))

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def summary(self) -> str:
        """A readable multi-line description."""
        m = self.manifest
        return "\n".join(
            [
                f"embeddings   {self.name}  ({self.root})",
                f"modality     {self.modality}",
                f"shape        {len(self):,} x {self.dim}  (float32, one row per {self.rows[:-1].replace('_', '-')})",
                f"dataset      {m.get('dataset_path', '?')}  (hash {self.dataset_hash[:12]})",
                f"model        {m.get('model_spec') or '-'}"
                + (f"  (layer {m['layer']})" if m.get("layer") is not None else ""),
                f"source       {m.get('source', {}).get('kind', '?')}",
                f"built with   bindscope {m.get('bindscope_version', '?')}, {m.get('created', '?')}",
            ]
        )


def check_embedding_array(array: Any, num_rows: int, what: str = "embedding array", unit: str = "scene") -> np.ndarray:
    """Validate a 2-D finite numeric array with ``num_rows`` rows (one per ``unit``) and return it as float32."""
    arr = np.asarray(array)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise BindscopeError(f"{what} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise BindscopeError(
            f"{what} must be 2-D [num_{unit}s, dim], got {arr.ndim}-D shape {arr.shape}; reshape it to one row per "
            f"{unit}"
        )
    if arr.shape[0] != num_rows:
        raise BindscopeError(
            f"{what} has {arr.shape[0]:,} rows but the dataset has {num_rows:,} scenes; "
            "give one row per scene, in the order of scenes.parquet"
        )
    if arr.shape[1] == 0:
        raise BindscopeError(f"{what} has zero columns; embeddings need dim >= 1")
    with np.errstate(over="ignore"):  # overflow becomes inf, reported just below
        out = arr.astype(np.float32, copy=False)  # float32 already: the array itself, not a second copy
    finite = np.isfinite(out)
    if not finite.all():
        bad_rows = np.flatnonzero(~finite.all(axis=1))
        kind = "NaN" if np.isnan(out).any() else "inf"
        overflow = " (values too large for float32)" if np.isfinite(arr).all() else ""
        raise BindscopeError(
            f"{what} contains {kind} values{overflow} in {len(bad_rows):,} row(s), first at row "
            f"{bad_rows[0]}; fix or drop them at the source and re-export every row"
        )
    return out


def check_embedding_values(array: np.ndarray, what: str, fix: str) -> None:
    """Refuse finite embeddings nothing can be read from, or that the analyses' arithmetic cannot hold.

    Every row the same (all zeros included) carries nothing about the scenes: the probes' whitening
    and the decomposition have nothing to fit. Values whose squares sum past float32's largest number
    (finite, e.g. ``3e38``) overflow the float32 arithmetic of the probes (centring, Adam's second
    moments, logits) and give silently wrong answers. ``fix`` ends the message (e.g. ``import it again``).
    """
    arr = np.asarray(array)
    if len(arr) == 0:
        return
    chunk = max(1, (1 << 19) // max(1, arr.shape[1]))  # rows per pass: 4 MiB of float64 at a time
    first, constant, squares = arr[0], len(arr) > 1, 0.0
    for start in range(0, len(arr), chunk):
        block = np.asarray(arr[start : start + chunk], dtype=np.float64)
        constant = constant and bool((block == first).all())
        squares += float(np.einsum("ij,ij->", block, block))
    if constant:
        zeros = ", all zeros" if not first.any() else ""
        raise BindscopeError(
            f"{what} is constant (every row the same{zeros}): nothing about the scenes can be read from it; "
            f"check that the array holds each scene's own embedding, then {fix}"
        )
    limit = float(np.finfo(np.float32).max)
    if squares > limit:
        peak = float(np.abs(arr).max())
        raise BindscopeError(
            f"{what} holds values up to {peak:.3g}, too large for the analyses' float32 arithmetic (the sum of "
            f"their squares, {squares:.3g}, overflows float32's {limit:.3g}); rescale the array (e.g. divide it by "
            f"its largest absolute value), then {fix}"
        )


def full_manifest(array: np.ndarray, manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as an embedding folder holding ``array`` records it: with format, dim, num_rows, dtype, version."""
    return {
        "format": EMBEDDING_FORMAT,
        **manifest,
        "dim": int(array.shape[1]),
        "num_rows": int(array.shape[0]),
        "dtype": "float32",
        **stamp(),
    }


@writes("out", what="embedding folder", kind="embeddings")
def write_embeddings(
    out: str | Path, array: np.ndarray, manifest: dict[str, Any], *, overwrite: bool = False
) -> EmbeddingSet:
    """Write an embedding folder atomically; ``manifest`` gains format, dim, num_rows, version."""
    out = Path(out)
    full = full_manifest(array, manifest)
    with staged_dir(out, kind="embeddings", overwrite=overwrite) as stage:
        save_npy(stage / EMBEDDINGS_FILE, np.ascontiguousarray(array, dtype=np.float32))
        write_json(stage / MANIFEST, full)
    return EmbeddingSet(out, full, array)


@writes("out", what="embedding folder", kind="embeddings", reads=("dataset", "array_path", "singles"))
def import_embeddings(
    dataset: str | Path | Dataset,
    array_path: str | Path,
    *,
    name: str,
    modality: Literal["image", "text"],
    out: str | Path,
    model_spec: str | None = None,
    overwrite: bool = False,
    singles: str | Path | None = None,
    singles_out: str | Path | None = None,
) -> EmbeddingSet:
    """Bring an ``.npy`` array computed elsewhere into an embedding folder for ``dataset``.

    Row i of the array must embed scene i of the dataset (its ``scene`` column). ``model_spec``
    records which model made it (e.g. ``hf:openai/clip-vit-base-patch32`` or the same with
    ``+rand``), so that analyses find a ``+rand`` control beside it. ``singles``: an ``.npy`` array of
    every object alone by the same model (:func:`check_single_objects`), written as a single-object
    folder (the interventions' ``single`` bank, the half-truths' short captions) to ``singles_out``
    (default: ``out`` with ``-singles`` appended, a sibling the analyses find).
    """
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    if not name or not name.strip():
        raise BindscopeError("give the embeddings a --name (e.g. the model that made them)")
    if modality not in MODALITIES:
        raise BindscopeError(f"modality must be 'image' or 'text', got {modality!r}")
    available = ds.manifest.get("modalities", list(MODALITIES))
    if modality not in available:
        raise BindscopeError(f"dataset {ds.name} has no {modality} modality (it has {', '.join(available)})")
    if model_spec is not None:
        check_recorded_spec(model_spec)
    array_path = Path(array_path)
    raw = load_npy(array_path, "embedding array")
    what = f"embedding array {array_path}"
    arr = check_embedding_array(raw, len(ds), what=what)
    check_embedding_values(arr, what, IMPORT_FIX)
    bank = read_single_objects(ds, singles, modality, arr.shape[1]) if singles is not None else None
    if bank is None and singles_out is not None:
        raise BindscopeError("--singles-out names where the --singles array goes; give --singles FILE too")
    bank_out = default_singles_out(Path(out), singles_out) if bank is not None else None
    if bank_out is not None:
        check_singles_out(bank_out, Path(out), overwrite, [ds.root, array_path, singles])
    manifest = {
        "name": name,
        "modality": modality,
        "rows": "scenes",
        "dataset_hash": ds.hash,
        "dataset_path": str(ds.root.resolve()),
        "dataset_preset": ds.name,
        "model_spec": model_spec,
        "source": {
            "kind": "import",
            "path": str(array_path.resolve()),
            "sha256": file_sha256(array_path),
            "dtype": str(raw.dtype),
        },
    }
    written = write_embeddings(out, arr, manifest, overwrite=overwrite)
    if bank is not None and bank_out is not None:
        write_embeddings(bank_out, bank.array, singles_manifest(manifest, bank), overwrite=overwrite)
    return written


#: Appended to ``--out`` for the single-object folder of an import, unless ``--singles-out`` names it.
SINGLES_SUFFIX = "-singles"


def default_singles_out(out: Path, singles_out: str | Path | None) -> Path:
    """Where an import writes its single-object folder: ``singles_out``, or ``out`` + ``-singles``."""
    return Path(singles_out) if singles_out is not None else out.with_name(out.name + SINGLES_SUFFIX)


def check_singles_out(bank_out: Path, out: Path, overwrite: bool, inputs: list[Any]) -> None:
    """Refuse a single-object folder that is the scenes' folder, inside it or around it, an input, or
    (without ``overwrite``) a non-empty folder: before either folder is written."""
    a, b = bank_out.resolve(), out.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise BindscopeError(
            f"--singles-out {bank_out} and --out {out} overlap; give the single-object folder a place of its own"
        )
    check_output(bank_out, "embeddings", overwrite=overwrite, inputs=input_paths(inputs), option="--singles-out")
    check_output_dir(bank_out, kind="embeddings", overwrite=overwrite, option="--singles-out")


class ImportedSingles(NamedTuple):
    """A checked single-object array: float32 rows, positions per object, the file and its dtype."""

    array: np.ndarray
    positions: int
    path: Path
    dtype: str


def read_single_objects(ds: Dataset, path: str | Path, modality: str, dim: int) -> ImportedSingles:
    """An imported single-object array, checked (:func:`check_single_objects`)."""
    path = Path(path)
    raw = load_npy(path, "single-object array")
    array, positions = check_single_objects(raw, ds, modality, dim, f"single-object array {path}")
    return ImportedSingles(array, positions, path, str(raw.dtype))


def check_single_objects(raw: Any, ds: Dataset, modality: str, dim: int, what: str) -> tuple[np.ndarray, int]:
    """Validate the embeddings of every object alone, as ``bindscope embed --single-objects`` writes them.

    Row o embeds object id o alone (object-id order, docs/method/01-concepts.md); image arrays may instead give
    one row per object and slot position, row ``o * S + s``. The width must be the scenes' (``dim``).
    Returns the float32 array and its positions per object (1 or S).
    """
    u, slots = ds.space.num_objects, ds.scenes.max_objects
    allowed = {u: 1, **({u * slots: slots} if modality == "image" else {})}
    arr = np.asarray(raw)
    if arr.ndim == 2 and arr.shape[0] not in allowed:
        per_slot = f", or {u * slots:,}, one per object and slot (row o * {slots} + s)" if modality == "image" else ""
        raise BindscopeError(
            f"{what} has {arr.shape[0]:,} rows but the dataset has {u:,} objects: give {u:,} rows, row o "
            f"embedding object id o alone{per_slot}"
        )
    out = check_embedding_array(raw, arr.shape[0] if arr.ndim == 2 else 0, what, unit="object")
    if out.shape[1] != dim:
        raise BindscopeError(
            f"{what} has width {out.shape[1]} but the scene embeddings {dim}; give the single objects "
            "embedded by the same model (and layer) as the scenes"
        )
    check_embedding_values(out, what, IMPORT_FIX)
    return out, allowed[len(out)]


def singles_manifest(scenes: dict[str, Any], bank: ImportedSingles) -> dict[str, Any]:
    """The manifest of an imported single-object folder: the scenes' name, model, modality and dataset."""
    source = {"kind": "import", "path": str(bank.path.resolve()), "sha256": file_sha256(bank.path), "dtype": bank.dtype}
    return {**scenes, "rows": "single_objects", "single_positions": bank.positions, "source": source}


def check_recorded_spec(model_spec: str) -> None:
    """Refuse a ``model_spec`` to record that ``embed --model`` would refuse: the same grammar.

    Only the grammar: a folder a spec names may be on the machine that made the embeddings.
    """
    from bindscope.embeddings.encoders.spec import GRAMMAR, parse_spec

    try:
        parse_spec(model_spec, check_folders=False)
    except BindscopeError as exc:
        grammar = "" if GRAMMAR in str(exc) else f"; a spec is one of: {GRAMMAR}"
        raise BindscopeError(
            f"--model-spec takes a spec as `bindscope embed --model` does (or leave it out): {exc}{grammar}"
        ) from None


def load_embeddings(
    root: str | Path, dataset: Dataset | None = None, *, mmap: bool = False, rows: str | None = "scenes"
) -> EmbeddingSet:
    """Load and validate an embedding folder (against ``dataset`` when given).

    ``rows``: what the rows must be, ``scenes`` (what the analyses take) or ``single_objects``
    (a bank of single-object embeddings); None accepts either.
    """
    root = Path(root)
    manifest, arr = read_whole_folder(root, mmap)
    fix = "import or embed the embeddings again"
    for key, allowed in (("modality", MODALITIES), ("rows", ROWS)):
        if manifest.get(key, allowed[0]) not in allowed:
            raise BindscopeError(
                f"{root / MANIFEST}: {key} {short_repr(manifest[key])} is not one of {', '.join(allowed)}; {fix}"
            )
    if manifest.get("single_positions", 1) < 1:
        raise BindscopeError(f"{root / MANIFEST}: 'single_positions' must be at least 1; {fix}")
    if arr.dtype != np.float32 or arr.ndim != 2:
        raise BindscopeError(f"{root / EMBEDDINGS_FILE} must be float32 [N, D], got {arr.dtype} with shape {arr.shape}")
    if arr.shape != (manifest["num_rows"], manifest["dim"]):
        raise BindscopeError(
            f"{root / EMBEDDINGS_FILE} has shape {arr.shape} but the manifest says "
            f"({manifest['num_rows']}, {manifest['dim']}); re-create the folder"
        )
    if not mmap and not np.isfinite(arr).all():
        raise BindscopeError(f"{root / EMBEDDINGS_FILE} contains NaN or inf values; re-create the folder")
    if not mmap:
        check_embedding_values(arr, f"embedding file {root / EMBEDDINGS_FILE}", LOAD_FIX)
    kind = manifest.get("rows", "scenes")
    if rows is not None and kind != rows:
        what = {"scenes": "scene embeddings", "single_objects": "single-object embeddings (embed --single-objects)"}
        raise BindscopeError(
            f"{root} holds {what.get(kind, kind)}, but {what.get(rows, rows)} are needed here; give the other folder"
        )
    if dataset is not None:
        if manifest["dataset_hash"] != dataset.hash:
            raise BindscopeError(
                f"embeddings in {root} were made for dataset hash {manifest['dataset_hash'][:12]}, "
                f"but {dataset.root} has hash {dataset.hash[:12]}; embed or import them for this dataset"
            )
        positions = int(manifest.get("single_positions", 1))
        expected, unit = (
            (len(dataset), "scenes")
            if kind == "scenes"
            else (dataset.space.num_objects * positions, f"objects x {positions} position(s)")
        )
        if arr.shape[0] != expected:
            raise BindscopeError(f"{root} has {arr.shape[0]} rows but {dataset.root} has {expected} {unit}")
    return EmbeddingSet(root, manifest, arr)


#: How often a folder replaced while it is read is read again before the loader gives up.
READ_ATTEMPTS = 5


def read_whole_folder(root: Path, mmap: bool) -> tuple[dict[str, Any], np.ndarray]:
    """The manifest and array of one embedding folder, both of the same folder: another process may replace the
    folder meanwhile (``embeddings import --overwrite``, ``embed --overwrite`` move a new folder into its place),
    and a manifest of the old folder with the array of the new one would be a result about neither. The folder is
    read again when it was replaced during the reading."""
    fix = "import or embed the embeddings again"
    for attempt in range(READ_ATTEMPTS):
        before = folder_identity(root)
        try:
            manifest = read_manifest(root, "embedding", REQUIRED_KEYS, EMBEDDING_FORMAT, fix, types=MANIFEST_TYPES)
            arr = load_npy(root / EMBEDDINGS_FILE, "embedding file", mmap=mmap, root=root)
        except BindscopeError:
            swapping = before is None and is_locked(root)  # its writer between its two renames
            if not swapping and (before is None or folder_identity(root) == before):
                raise  # not a replacement: the folder itself is missing or damaged
            time.sleep(0.05 * (attempt + 1))  # caught between moving the old folder away and the new one in
            continue
        if folder_identity(root) == before:
            return manifest, arr
    raise BindscopeError(
        f"embedding folder {root} was replaced by another process each time it was read ({READ_ATTEMPTS} times); "
        "wait until nothing writes it, then run again"
    )


def folder_identity(root: Path) -> tuple[int, int, int] | None:
    """The device, inode and change time of the folder ``root`` names now (None when there is none): a folder
    moved into its place has others (the time tells a new folder apart from an old one's reused inode)."""
    try:
        stat = os.stat(root)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_ctime_ns


def find_rand_control(emb: EmbeddingSet) -> Path | None:
    """The ``+rand`` counterpart of a model's embedding folder, if a sibling folder holds it.

    A counterpart has ``model_spec`` equal to this folder's spec plus ``+rand`` and the same
    dataset, modality and layer.
    """
    spec = emb.manifest.get("model_spec")
    if not spec or str(spec).endswith("+rand"):
        return None
    return find_sibling(emb, f"{spec}+rand", emb.rows)


def find_single_objects(emb: EmbeddingSet) -> Path | None:
    """A sibling folder holding the single-object bank of the same model, dataset, modality and layer.

    Imported embeddings without a model spec name their model by their ``name``: a sibling imported
    with the same name and no spec (``embeddings import --singles`` writes one).
    """
    spec = emb.manifest.get("model_spec")
    if spec:
        return find_sibling(emb, spec, "single_objects")
    if emb.manifest.get("source", {}).get("kind") == "import":
        return find_sibling(emb, None, "single_objects", name=emb.name)
    return None


def find_sibling(emb: EmbeddingSet, spec: str | None, rows: str, name: str | None = None) -> Path | None:
    """The first sibling folder (by name) of ``emb`` with model ``spec``, ``rows`` and the same
    dataset, modality and layer (and, when given, ``name``)."""
    if not emb.root.parent.is_dir():
        return None
    for candidate in sorted(emb.root.parent.iterdir()):
        path = candidate / MANIFEST
        if candidate == emb.root or not path.is_file():
            continue
        try:
            other = read_json(path, "embedding manifest")
        except BindscopeError:
            continue
        same = all(other.get(k) == emb.manifest.get(k) for k in ("dataset_hash", "modality", "layer"))
        same = same and other.get("rows", "scenes") == rows
        if same and other.get("model_spec") == spec and name in (None, other.get("name")):
            return candidate
    return None
