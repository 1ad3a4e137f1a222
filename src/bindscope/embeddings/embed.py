"""Dataset folder -> embedding folder: batched, overlapped, resumable and content-addressed.

Rows are embedded in fixed chunks. Each finished chunk is saved atomically in a hidden folder
beside the output (``.<out>.embedding-<key>``), so an interrupted run continues at the first
missing chunk and the final array equals an uninterrupted run's. The output folder appears only
when every row is done. A content key (dataset, model identity, layer, pooling, preprocessing,
image bytes, a single-object caption wording other than the template's) makes asking again for
the same embeddings a no-op.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.core.devices import check_device
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import Resources, Unit, current_executor
from bindscope.core.faults import kill_point
from bindscope.core.io import check_output_dir, load_image, load_npy, read_json, save_npy, write_json
from bindscope.core.locks import writes
from bindscope.core.places import check_state_folder
from bindscope.core.progress import progress_bar
from bindscope.core.threads import pool_size, shared_pool, threads_for
from bindscope.core.validation import MAX_BATCH, check_size
from bindscope.data.datasets import SINGLE_CAPTION_FORMS, Dataset, load_dataset, single_object_captions
from bindscope.embeddings.cache import ACTIVE, CacheChoice, cache_folders, resolve_cache
from bindscope.embeddings.encoders import Encoder, ModelSpec, load_encoder, parse_spec
from bindscope.embeddings.encoders.base import DTYPES, Items
from bindscope.embeddings.encoders.spec import model_paths
from bindscope.embeddings.store import (
    EMBEDDING_FORMAT,
    MANIFEST,
    EmbeddingSet,
    check_embedding_array,
    load_embeddings,
    write_embeddings,
)

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = {"image": 32, "text": 256}
DEFAULT_CHUNK_ROWS = 2048
STATE_FILE = "state.json"
#: Most image batches prepared ahead of the model at once (a pool thread each): what they hold stays bounded.
MAX_AHEAD = 4


def check_embed_sizes(batch_size: int | None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
    """Refuse a batch size (None: the default) or chunk size outside [1, :data:`MAX_BATCH`] rows, before
    anything is loaded or written."""
    check_size(chunk_rows, "chunk rows", 1, MAX_BATCH)
    if batch_size is not None:
        check_size(batch_size, "--batch-size", 1, MAX_BATCH)


@dataclass(frozen=True)
class EmbedResult:
    """What :func:`embed_dataset` did.

    ``status`` is ``embedded`` (all rows computed now), ``resumed`` (some rows came from an
    interrupted run), ``cached`` (every row came from the embedding cache, :mod:`bindscope.embeddings.cache`:
    ``rows_reused`` is all of them) or ``existing`` (the folder already held these embeddings: nothing done).
    """

    embeddings: EmbeddingSet
    status: str
    rows_computed: int
    rows_reused: int
    seconds: float


def embed_inputs(args: dict[str, Any]) -> list[Any]:
    """What an embedding run reads: its dataset, a model folder on this machine and the embedding cache."""
    return [args["dataset"], *model_paths(args["model"]), *cache_folders(args.get("cache", ACTIVE))]


@writes("out", what="embedding folder", kind="embeddings", reads=embed_inputs)
def embed_dataset(
    dataset: str | Path | Dataset,
    model: str | ModelSpec | Encoder,
    *,
    modality: str,
    out: str | Path,
    layer: int | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    batch_size: int | None = None,
    single_objects: bool = False,
    single_captions: str = "template",
    name: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    replace: bool = False,
    progress: bool = False,
    cache: CacheChoice = ACTIVE,
) -> EmbedResult:
    """Embed a dataset's images or captions into an embedding folder.

    Parameters
    ----------
    dataset : path or Dataset
        The dataset folder.
    model : str, ModelSpec or Encoder
        A model spec (``hf:...``, ``openclip:...``, ``st:...``, with ``+rand`` for random
        weights) or an encoder already loaded (then ``layer``, ``device`` and ``dtype`` are its own).
    modality : {"image", "text"}
        Embed the rendered images or the captions.
    out : path
        The embedding folder to write (``embeddings.npy`` + ``manifest.json``).
    layer : int, optional
        Pooled hidden state of this layer instead of the final embedding.
    device : str
        The torch device the model runs on: ``cpu``, ``cuda`` or ``cuda:N``.
    dtype : {"float32", "float16", "bfloat16"}
        The precision of the model's weights and forward pass; the saved rows are float32 either way.
    batch_size : int, optional
        Rows per forward pass (default 32 images or 256 texts).
    single_objects : bool
        Embed every object alone: its caption (row o = object id o) or its image at each of
        the S slot positions (row o * S + s): the interventions' ``single`` bank.
    single_captions : {"template", "bare"}
        Wording of a text single-object bank: the dataset's caption template ("a red cube") or
        bare, without the article ("red cube"). ``bare`` applies to captions only.
    name : str, optional
        A short name for the embeddings, kept in the manifest (default: the model's last path part, with
        ``+rand`` and the layer when given).
    chunk_rows : int
        Rows per saved chunk: the most work an interruption can lose.
    overwrite : bool
        Replace an output folder that holds other embeddings.
    replace : bool
        Reuse an output folder that holds these embeddings, and replace one (that bindscope wrote) holding other
        or damaged ones instead of refusing it: a run's own folders, which it keeps in step with its config.
    cache : EmbeddingCache, None or "active"
        The embedding cache (:mod:`bindscope.embeddings.cache`) to reuse these embeddings from and store them in:
        ``"active"`` (the default) is the one the environment chooses (``BINDSCOPE_CACHE_DIR``, off with
        ``BINDSCOPE_CACHE=off``), None none. A hit links the cached array into ``out`` (status ``cached``);
        a folder written here is linked into the cache.
    progress : bool
        Show a progress bar of the rows embedded, and the model libraries' own bars while the model loads (off:
        neither; :func:`~bindscope.embeddings.encoders.load_encoder`).
    """
    start = time.perf_counter()
    check_embed_sizes(batch_size, chunk_rows)
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    out = Path(out)
    batch_size = DEFAULT_BATCH_SIZE.get(modality, 1) if batch_size is None else batch_size
    if name is not None and not name.strip():
        raise BindscopeError("--name must not be empty")
    if dtype not in DTYPES:
        raise BindscopeError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    rows = "single_objects" if single_objects else "scenes"
    items: Items = embed_items(ds, modality, single_objects, single_captions)
    spec = model.spec if isinstance(model, Encoder) else parse_spec(model)
    wording = single_captions if modality == "text" and single_objects else None
    _refuse_other_contents(
        out,
        ds,
        spec,
        modality,
        rows,
        layer if not isinstance(model, Encoder) else model.layer,
        overwrite or replace,
        wording,
    )
    store = resolve_cache(cache)  # a cache folder that is a file or someone's is refused before the model loads
    executor = None if isinstance(model, Encoder) else current_executor()
    remote = executor is not None and executor.distributed
    if isinstance(model, Encoder):
        encoder = model
    else:  # on a cluster the workers embed: here the model is loaded on the CPU, to name it
        if not remote:
            check_device(device)
        encoder = load_encoder(spec, layer=layer, device="cpu" if remote else device, dtype=dtype, progress=progress)
    encoder.check_modality(modality)
    own_items = encoder.dataset_items(ds, modality, single_objects)
    if own_items is not None:
        if single_captions != "template":
            raise BindscopeError(
                f"{spec} embeds the dataset's scenes in its own form (e.g. value indices), not captions, "
                f"so --single-captions {single_captions} does not apply to it; drop --single-captions"
            )
        items, wording = own_items, None
    info = encoder.describe()
    images_seen = _files_identity(items) if modality == "image" else None  # before hashing: what was hashed
    images_sha256 = _files_sha256(items) if modality == "image" else None
    key = content_key(ds.hash, modality, rows, info, images_sha256, single_captions)
    existing = _existing(out, key, ds, rows, overwrite, replace)
    if existing is not None:
        shutil.rmtree(PartialEmbedding.folder(out, key), ignore_errors=True)  # left by a crash after the write
        return EmbedResult(existing, "existing", 0, 0, time.perf_counter() - start)
    dim = int(info["dim"][modality])
    hit = store.lookup(key, (len(items), dim)) if store is not None else None
    if hit is not None and store is not None:
        run = {k: v for k, v in hit.entry.manifest.get("source", {}).items() if k not in ("kind", "images_sha256")}
        manifest = _manifest(ds, spec, encoder, info, modality, rows, key, name, images_sha256, wording, run)
        emb = store.materialise(hit, out, manifest)
        shutil.rmtree(PartialEmbedding.folder(out, key), ignore_errors=True)  # chunks of an interrupted try
        return EmbedResult(emb, "cached", 0, len(items), time.perf_counter() - start)
    damaged = store is not None and store.entry(key) is not None  # present, yet no hit: replaced below
    partial = PartialEmbedding.open(out, key, len(items), chunk_rows, dim)
    todo = partial.missing_chunks()
    reused = len(items) - sum(e - s for s, e in todo)
    bar = _progress(len(items), reused, modality, progress)
    try:
        if remote:
            job = ChunkJob(str(spec), layer, device, dtype, modality, items, batch_size)
            for done in executor.map(chunk_units(job, todo, key), job, setup=load_chunk_encoder):  # type: ignore[union-attr]
                start, stop = done.unit.args
                partial.save_chunk(start, done.result)
                bar.update(stop - start)
        else:
            run_chunks(
                encoder,
                modality,
                items,
                todo,
                batch_size,
                partial.save_chunk,
                bar.update,
                overlap=not str(encoder.device).startswith("cpu"),
            )
    finally:
        bar.close()
    if images_seen is not None and _files_identity(items) != images_seen:
        partial.remove()  # its chunks may hold rows of both the old and the new pictures
        raise BindscopeError(
            f"the images of {ds.root} changed while they were being embedded (rebuilt or edited by another "
            "process); nothing was written: run the same command again"
        )
    array = check_embedding_array(partial.assemble(), len(items), what=f"embeddings of {spec}")
    manifest = _manifest(
        ds,
        spec,
        encoder,
        info,
        modality,
        rows,
        key,
        name,
        images_sha256,
        wording,
        {
            "device": device if remote else str(encoder.device),
            **(executor.describe() if remote else {}),  # type: ignore[union-attr]
            "batch_size": batch_size,
            "chunk_rows": partial.chunk_rows,
            "rows_reused": reused,
            "seconds": round(time.perf_counter() - start, 3),
        },
    )
    emb = write_embeddings(out, array, manifest, overwrite=True)
    partial.remove()
    if store is not None:
        store.store(emb, replace=damaged)
    status = "resumed" if reused else "embedded"
    return EmbedResult(emb, status, len(items) - reused, reused, time.perf_counter() - start)


def embed_items(
    ds: Dataset, modality: str, single_objects: bool = False, single_captions: str = "template"
) -> list[str]:
    """What to embed, in row order: captions, or absolute image paths.

    ``single_captions`` (``template`` or ``bare``) words the captions of a text single-object
    bank (see :func:`~bindscope.data.datasets.single_object_captions`); ``bare`` anywhere else
    is refused.
    """
    available = ds.manifest.get("modalities", ["image", "text"])
    if modality not in ("image", "text"):
        raise BindscopeError(f"--modality must be image or text, got {modality!r}")
    check_single_captions(single_captions, modality, single_objects)
    if modality not in available:
        raise BindscopeError(
            f"dataset {ds.name} ({ds.root}) has no {modality} modality (it has "
            f"{', '.join(available)}); use --modality {available[0]}"
        )
    if modality == "text":
        return list(single_object_captions(ds, single_captions) if single_objects else ds.captions)
    paths = (ds.single_images.ravel() if ds.single_images is not None else None) if single_objects else ds.images
    what = "single-object images" if single_objects else "images"
    if paths is None or not all(paths):
        missing = ds.space.num_objects if paths is None else int(sum(1 for p in paths if not p))
        raise BindscopeError(
            f"dataset {ds.root} has no {what} for {missing:,} row(s); render them with `bindscope dataset build` "
            "(or attach your own with bindscope.data.datasets.attach_images), or embed --modality text"
        )
    return [str(ds.root / p) for p in paths]


def check_single_captions(form: str, modality: str, single_objects: bool) -> None:
    """Refuse an unknown single-object caption wording, or ``bare`` where no such captions are embedded."""
    if form not in SINGLE_CAPTION_FORMS:
        raise BindscopeError(f"--single-captions must be one of {', '.join(SINGLE_CAPTION_FORMS)}, got {form!r}")
    if form != "template" and not (modality == "text" and single_objects):
        what = "images" if modality == "image" else "scene captions"
        raise BindscopeError(
            f"--single-captions {form} applies to text single-object banks (--modality text --single-objects), "
            f"not to {what}; drop --single-captions"
        )


def single_positions(ds: Dataset, modality: str) -> int:
    """Rows per object in a single-object bank: its slot positions (images) or 1 (captions)."""
    return int(ds.single_images.shape[1]) if modality == "image" and ds.single_images is not None else 1


def content_key(
    dataset_hash: str,
    modality: str,
    rows: str,
    info: dict[str, Any],
    images_sha256: str | None,
    single_captions: str = "template",
) -> str:
    """The hash that names one embedding job's result.

    It covers the dataset, what is embedded, the model's identity (weights hash or hub id and
    revision, random-init seed), layer, pooling, preprocessing, dtype, the image bytes and a
    single-object caption wording other than the template's; not the device, batch size or paths.
    The wording enters the hash only when it is not ``template``, so that keys made before it
    existed still name the same embeddings.
    """
    identity = {
        k: info.get(k)
        for k in ("backend", "model_class", "revision", "weights_sha256", "parameters", "layer", "random_init", "dtype")
    }
    if not info.get("weights_sha256"):
        identity["resolved"] = info.get("resolved")
    payload = {
        "format": EMBEDDING_FORMAT,
        "dataset_hash": dataset_hash,
        "rows": rows,
        "modality": modality,
        "model": identity,
        "dim": info["dim"][modality],
        "pooling": info["pooling"][modality],
        "preprocessing": info["preprocessing"][modality],
        "images_sha256": images_sha256,
    }
    if single_captions != "template":
        payload["single_captions"] = single_captions
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def run_chunks(
    encoder: Encoder,
    modality: str,
    items: Items,
    chunks: Sequence[tuple[int, int]],
    batch_size: int,
    save: Callable[[int, np.ndarray], None],
    advance: Callable[[int], Any],
    *,
    overlap: bool = False,
) -> None:
    """Embed the rows of each ``(start, stop)`` chunk and ``save(start, rows)`` it.

    The model runs on this thread, batch after batch in row order, while the next batches are loaded and
    preprocessed on the process's shared thread pool (:func:`~bindscope.core.threads.shared_pool`). Images always
    are: as many batches ahead as the pool has threads (at most :data:`MAX_AHEAD`), a batch per thread, its image
    processor on one torch thread (:func:`~bindscope.core.threads.threads_for`: small images' tensors gain nothing
    from more, and the forward pass keeps the process's torch threads), so decoding overlaps the forward pass on
    a CPU as on a GPU. Texts are prepared one batch ahead with ``overlap`` (worth it when the model runs on a
    GPU), else in turn with the forward pass. The rows are the same either way.
    """
    batches = [(c0, c1, b, min(b + batch_size, c1)) for c0, c1 in chunks for b in range(c0, c1, batch_size)]
    ahead = min(pool_size(), MAX_AHEAD) if modality == "image" else int(overlap)

    def prepare(batch: tuple[int, int, int, int]) -> Any:
        part = items[batch[2] : batch[3]]
        if modality != "image":
            return encoder.prepare(modality, part)
        images = [load_image(p) for p in part]
        with threads_for(sum(3 * image.width * image.height for image in images)):
            return encoder.prepare(modality, images)

    def queue(count: int) -> None:
        for batch in itertools.islice(todo, count):
            pending.append((shared_pool().submit(prepare, batch) if ahead else _run_now(prepare, batch), batch))

    todo = iter(batches)
    pending: deque[tuple[Future, tuple[int, int, int, int]]] = deque()
    parts: list[np.ndarray] = []
    try:
        for c0, c1, b0, b1 in batches:
            queue(0 if pending else 1)
            inputs = _prepared(*pending.popleft(), prepare)
            queue(ahead - len(pending))
            parts.append(_checked(encoder.forward(modality, inputs), b0, b1))
            if b1 == c1:
                save(c0, np.concatenate(parts))
                parts = []
            advance(b1 - b0)
    finally:
        for task, _ in pending:  # after a failure: what no thread has started is dropped
            task.cancel()


def _prepared(task: Future, batch: tuple[int, int, int, int], prepare: Callable[[Any], Any]) -> Any:
    """The inputs of a queued batch: its result, or, when no pool thread has started it (a pool busy with other
    work, which may be waiting on this thread), prepared here."""
    return prepare(batch) if task.cancel() else task.result()


@dataclass(frozen=True)
class ChunkJob:
    """What every worker of a sharded embedding job reads: the model to load and the rows."""

    spec: str
    layer: int | None
    device: str
    dtype: str
    modality: str
    items: Items
    batch_size: int


def chunk_units(job: ChunkJob, chunks: Sequence[tuple[int, int]], key: str) -> list[Unit]:
    """One unit per missing chunk (a GPU each when the job runs on CUDA)."""
    need = Resources.for_device(job.device)
    what = f"of {job.spec} ({job.modality})"
    return [Unit(f"{key}-{s}", f"rows {s}..{e - 1} {what}", embed_chunk, (s, e), need) for s, e in chunks]


def load_chunk_encoder(job: ChunkJob) -> tuple[Encoder, ChunkJob]:
    """A worker's state: the model, loaded once per worker."""
    return load_encoder(job.spec, layer=job.layer, device=job.device, dtype=job.dtype), job


def embed_chunk(state: tuple[Encoder, ChunkJob], start: int, stop: int) -> np.ndarray:
    """The embeddings of rows ``start..stop-1``."""
    encoder, job = state
    rows: list[np.ndarray] = []
    run_chunks(encoder, job.modality, job.items, [(start, stop)], job.batch_size, lambda _, r: rows.append(r), int)
    return rows[0]


def _run_now(fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` now, as a finished future (the no-overlap path of :func:`run_chunks`)."""
    future: Future = Future()
    try:
        future.set_result(fn(*args))
    except BaseException as exc:  # re-raised by .result(), as from a thread
        future.set_exception(exc)
    return future


def _checked(rows: np.ndarray, b0: int, b1: int) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim != 2 or rows.shape[0] != b1 - b0:
        raise BindscopeError(f"the model returned shape {rows.shape} for rows {b0}..{b1 - 1}; expected {b1 - b0} rows")
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        raise BindscopeError(
            f"the model returned NaN or inf for row {b0 + int(np.flatnonzero(bad)[0])}; "
            "try --dtype float32, or check the input"
        )
    return rows


@dataclass
class PartialEmbedding:
    """The chunks of an unfinished embedding job, in a hidden folder beside the output."""

    root: Path
    num_rows: int
    chunk_rows: int
    dim: int

    @staticmethod
    def folder(out: Path, key: str) -> Path:
        """The hidden folder beside ``out`` holding the chunks of job ``key``."""
        return check_state_folder(out.parent / f".{out.name}.embedding-{key[:16]}")

    @classmethod
    def open(cls, out: Path, key: str, num_rows: int, chunk_rows: int, dim: int) -> PartialEmbedding:
        """Continue the job named ``key`` if it was interrupted, else start it."""
        root = cls.folder(out, key)
        state = {"key": key, "num_rows": num_rows, "dim": dim}
        if (root / STATE_FILE).is_file():
            saved = read_json(root / STATE_FILE, "embedding state")
            if {k: saved.get(k) for k in state} == state and int(saved.get("chunk_rows", 0)) >= 1:
                log.info("resuming the unfinished embedding in %s", root)
                return cls(root, num_rows, int(saved["chunk_rows"]), dim)
        if root.exists():  # another job's state, or none (killed, or the disk full, before it was written)
            shutil.rmtree(root)
        for other in out.parent.glob(f".{out.name}.embedding-*"):
            if other != root:
                log.warning(
                    "%s holds an unfinished embedding with other settings; delete it if you do not need it", other
                )
        root.mkdir(parents=True)
        write_json(root / STATE_FILE, {**state, "chunk_rows": chunk_rows})
        return cls(root, num_rows, chunk_rows, dim)

    def chunks(self) -> list[tuple[int, int]]:
        return [(s, min(s + self.chunk_rows, self.num_rows)) for s in range(0, self.num_rows, self.chunk_rows)]

    def _path(self, start: int) -> Path:
        return self.root / f"rows-{start:010d}.npy"

    def _valid(self, start: int, stop: int) -> bool:
        path = self._path(start)
        if not path.is_file():
            return False
        try:
            rows = load_npy(path, "embedding chunk")
        except BindscopeError:
            rows = None
        ok = rows is not None and rows.dtype == np.float32 and rows.shape == (stop - start, self.dim)
        if not ok:
            log.warning("discarding damaged chunk %s; its rows are embedded again", path)
            path.unlink()
        return ok

    def missing_chunks(self) -> list[tuple[int, int]]:
        return [(s, e) for s, e in self.chunks() if not self._valid(s, e)]

    def save_chunk(self, start: int, rows: np.ndarray) -> None:
        save_npy(self._path(start), rows)
        kill_point("embed-chunk")

    def assemble(self) -> np.ndarray:
        out = np.empty((self.num_rows, self.dim), dtype=np.float32)
        for s, e in self.chunks():
            out[s:e] = load_npy(self._path(s), "embedding chunk")
        return out

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _refuse_other_contents(
    out: Path,
    ds: Dataset,
    spec: ModelSpec,
    modality: str,
    rows: str,
    layer: int | None,
    overwrite: bool,
    single_captions: str | None = None,
) -> None:
    """Fail before loading a model when ``out`` plainly holds something else.

    ``single_captions`` is the wording asked for a text single-object bank (None otherwise); a
    folder without the field was embedded before it existed, with the template's wording.
    """
    if overwrite or not (out / MANIFEST).is_file():
        check_output_dir(out, kind="embeddings", overwrite=overwrite)
        return
    m = read_json(out / MANIFEST, "embedding manifest")
    if m.get("dataset_hash") != ds.hash:
        raise BindscopeError(
            f"{out} holds embeddings of another dataset (hash {str(m.get('dataset_hash'))[:12]}, "
            f"this one {ds.hash[:12]}); choose another --out or pass --overwrite"
        )
    asked: dict[str, Any] = {"model_spec": str(spec), "modality": modality, "rows": rows, "layer": layer}
    defaults: dict[str, Any] = {"rows": "scenes"}
    if single_captions is not None and (m.get("rows"), m.get("modality")) == (rows, modality):
        asked["single_captions"], defaults["single_captions"] = single_captions, "template"
    differs = [
        f"{k} {m.get(k, defaults.get(k))!r} (asked {v!r})" for k, v in asked.items() if m.get(k, defaults.get(k)) != v
    ]
    if differs:
        raise BindscopeError(
            f"{out} holds other embeddings: {', '.join(differs)}; choose another --out or pass --overwrite"
        )


def _existing(out: Path, key: str, ds: Dataset, rows: str, overwrite: bool, replace: bool) -> EmbeddingSet | None:
    if overwrite or not (out / MANIFEST).is_file():
        return None
    if replace:  # these embeddings, whole, or None: anything else is replaced
        try:
            found = read_json(out / MANIFEST, "embedding manifest").get("content_key") == key
            return load_embeddings(out, ds, rows=rows) if found else None
        except BindscopeError:
            return None
    m = read_json(out / MANIFEST, "embedding manifest")
    if m.get("content_key") != key:
        raise BindscopeError(
            f"{out} holds embeddings of the same spec made differently (other weights, preprocessing, "
            "images or single-object caption wording: content key differs); choose another --out or pass --overwrite"
        )
    try:
        return load_embeddings(out, ds, rows=rows)
    except BindscopeError as exc:
        raise BindscopeError(f"{exc} (pass --overwrite to embed again)") from None


def _files_identity(paths: Iterable[str]) -> list[tuple[int, int, int]]:
    """Each file's inode, size and modification time: what changes when a file is rewritten or replaced (a
    dataset rebuilt over its folder), so that an embedding never mixes rows of old and new images."""
    seen = []
    for p in paths:
        try:
            stat = os.stat(p)
        except FileNotFoundError:
            raise BindscopeError(f"image file {p} is missing; render or attach the dataset's images again") from None
        seen.append((stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return seen


def _files_sha256(paths: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except FileNotFoundError:
            raise BindscopeError(f"image file {p} is missing; render or attach the dataset's images again") from None
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def default_name(spec: ModelSpec, layer: int | None) -> str:
    """A short name for the embeddings: the model's last path part, +rand, layer."""
    base = Path(spec.target).name or spec.target
    if spec.pretrained:
        base = f"{base}-{spec.pretrained}"
    rand = "" if spec.rand_seed is None else ("+rand" if spec.rand_seed == 0 else f"+rand:{spec.rand_seed}")
    return f"{base}{rand}" + ("" if layer is None else f"-layer{layer}")


def _manifest(
    ds: Dataset,
    spec: ModelSpec,
    encoder: Encoder,
    info: dict,
    modality: str,
    rows: str,
    key: str,
    name: str | None,
    images_sha256: str | None,
    single_captions: str | None,
    run: dict,
) -> dict[str, Any]:
    return {
        "name": name or default_name(spec, encoder.layer),
        "modality": modality,
        "rows": rows,
        "dataset_hash": ds.hash,
        "dataset_path": str(ds.root.resolve()),
        "dataset_preset": ds.name,
        "model_spec": str(spec),
        "layer": encoder.layer,
        **({"single_positions": single_positions(ds, modality)} if rows == "single_objects" else {}),
        **({"single_captions": single_captions} if single_captions is not None else {}),
        "content_key": key,
        "model": info,
        "source": {"kind": "embed", "images_sha256": images_sha256, **run},
    }


def _progress(total: int, done: int, modality: str, enabled: bool) -> Any:
    unit = "image" if modality == "image" else "text"
    return progress_bar(total, initial=done, desc="embed", unit=unit, enabled=enabled)
