"""A cache of embedding arrays shared by every embedding folder of a machine, keyed by content.

An embedding job is named by its content key (:func:`bindscope.embeddings.embed.content_key`: the dataset's
content, scenes or single objects, the modality, the model's identity, layer, pooling, preprocessing, dtype,
the image bytes). When :func:`~bindscope.embeddings.embed.embed_dataset` writes a folder, the cache keeps an
entry under that key: the folder's ``embeddings.npy`` hard-linked (a second name of the same file on disk,
nothing copied) and a small ``entry.json``. A later job with the same key, into any other folder (another run,
another ``--out``, a copy of the dataset elsewhere), is materialised from the entry: the array hard-linked
again and a manifest written for that folder and dataset path. Two runs over one dataset and model embed it
once.

Where it lives: ``$BINDSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/bindscope/embeddings``
(``~/.cache/bindscope/embeddings`` where XDG_CACHE_HOME is unset). ``BINDSCOPE_CACHE=off`` (or ``0``, ``false``,
``no``) switches it off; :func:`cache_off` does the same for a block of code (``bindscope run --no-cache``).

Layout::

    <root>/.bindscope.json        the mark of a bindscope cache: no other folder is listed or emptied
    <root>/<key>/embeddings.npy   a hard link of an embedding folder's array (float32 [N, D])
    <root>/<key>/entry.json       the key, the folder's manifest less its dataset path, the array's shape,
                                  bytes and sha256, when it was created and last used

What keeps hard links safe:

- Nothing writes into an embedding array in place. Every bindscope writer makes a new file and renames it
  over the old name (``save_npy`` through :func:`~bindscope.core.io.atomic_file`, whole folders through
  :func:`~bindscope.core.io.staged_dir`; ``--overwrite`` moves a new folder in and deletes the old one), which
  leaves every other name of the old file as it was. Whoever writes into a folder's ``embeddings.npy`` in place
  (``numpy.save`` to that path) changes the cache's array too: the size, shape and sha256 checked at every hit
  find it, and the entry is replaced by the next fresh embedding.
- Removing an entry (``bindscope cache rm``) removes one name of the file: folders that link it keep the data.
- Entries appear whole: each is built in a hidden folder and renamed into place, so a killed process leaves no
  half entry, and of two processes storing one key the second finds it present. A damaged entry (a file
  missing, another size, shape or content) is a miss with a warning, and the fresh embedding replaces it.
- Hard links cannot cross file systems: an output on another file system than the cache (or on one without
  hard links) is not stored, which is said once at info level; a hit for such an output is copied from the
  verified entry, which still costs far less than embedding again.
- The cache never fails an embedding because it could not write (a full or read-only disk): it warns and the
  embedding goes on. A cache folder that is a file, or someone's folder without the mark, is refused before
  any work.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np

from bindscope.core.errors import BindscopeError, closest
from bindscope.core.faults import kill_point
from bindscope.core.io import (
    OUTPUT_KINDS,
    OUTPUT_MARK,
    is_empty_dir,
    load_npy,
    mark_output,
    read_json,
    save_npy,
    staged_dir,
    write_json,
    written_kind,
)
from bindscope.core.version import utc_now
from bindscope.embeddings.store import EMBEDDINGS_FILE, MANIFEST, EmbeddingSet, full_manifest

log = logging.getLogger(__name__)

#: The folder of the cache, where set (else the XDG cache folder's ``bindscope/embeddings``).
CACHE_DIR_VARIABLE = "BINDSCOPE_CACHE_DIR"
#: ``off`` (or one of :data:`OFF`) switches the cache off.
CACHE_VARIABLE = "BINDSCOPE_CACHE"
OFF = ("off", "0", "false", "no")
ON = ("", "on", "1", "true", "yes")
ENTRY_FILE = "entry.json"
ENTRY_FORMAT = "bindscope-embedding-cache-v1"
#: The default of ``embed_dataset(cache=...)``: the cache the environment chooses (:func:`active_cache`).
ACTIVE: Literal["active"] = "active"
#: Hidden folders of the cache root (a store's stage, a removed entry) older than this were left by a dead
#: process: a store takes milliseconds.
STALE_SECONDS = 3600
#: Why ``os.link`` cannot give a file a second name: another file system, one without hard links, a file of
#: another user (protected hard links), too many links.
NO_LINK = frozenset({errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EACCES})
_KEY = re.compile(r"[0-9a-f]{64}")
_ENTRY_FILES = frozenset({ENTRY_FILE, EMBEDDINGS_FILE})
_told: set[tuple[int, int]] = set()  # (output's device, cache's device) pairs said not to link


def cache_root() -> Path:
    """The cache folder: ``$BINDSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/bindscope/embeddings``, else
    ``~/.cache/bindscope/embeddings`` (a relative XDG_CACHE_HOME is ignored, as the XDG rules ask)."""
    given = os.environ.get(CACHE_DIR_VARIABLE, "").strip()
    if given:
        return Path(given).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "bindscope" / "embeddings"


def cache_enabled() -> bool:
    """Whether ``BINDSCOPE_CACHE`` leaves the cache on (unset, ``on``, ``1``, ``true``, ``yes``); an other value
    than these and :data:`OFF` is refused rather than guessed."""
    value = os.environ.get(CACHE_VARIABLE, "").strip().lower()
    if value not in OFF + ON:
        raise BindscopeError(
            f"{CACHE_VARIABLE}={value!r} is neither on nor off: set it to off (or 0, false, no) to switch the "
            "embedding cache off, or unset it to use the cache"
        )
    return value not in OFF


def active_cache() -> EmbeddingCache | None:
    """The cache the environment chooses (:func:`cache_root`), or None where ``BINDSCOPE_CACHE=off``."""
    return EmbeddingCache(cache_root()) if cache_enabled() else None


CacheChoice = Union["EmbeddingCache", None, Literal["active"]]


def resolve_cache(cache: CacheChoice) -> EmbeddingCache | None:
    """``cache`` as a cache or None: :data:`ACTIVE` is :func:`active_cache`, checked (:meth:`EmbeddingCache.check`)
    before any work."""
    if isinstance(cache, str):
        if cache != ACTIVE:
            raise BindscopeError(f"cache must be an EmbeddingCache, None or {ACTIVE!r}, got {cache!r}")
        cache = active_cache()
    if cache is not None:
        cache.check()
    return cache


def cache_folders(cache: CacheChoice) -> list[Path]:
    """The folder of ``cache`` (:data:`ACTIVE`: the environment's), as a list; empty where there is none. An
    embedding folder may not be, hold or lie inside it."""
    if isinstance(cache, str):
        cache = active_cache() if cache == ACTIVE else None
    return [cache.root] if cache is not None else []


@contextlib.contextmanager
def cache_off(off: bool = True) -> Iterator[None]:
    """Switch the cache off for the block (with ``off``; else change nothing), in this process and the worker
    processes it starts meanwhile (they inherit the environment): what ``--no-cache`` does."""
    if not off:
        yield
        return
    before = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = "off"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = before


def data_sha256(array: np.ndarray) -> str:
    """SHA-256 of an array's float32 values in row order (what an entry's ``embeddings.npy`` holds after its
    header)."""
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1).view(np.uint8)
    return hashlib.sha256(flat.data).hexdigest()


def link_file(source: Path, target: Path) -> bool:
    """Give ``source`` the second name ``target`` (a hard link); False where none can be made (:data:`NO_LINK`,
    or ``source`` gone)."""
    try:
        os.link(source, target)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in NO_LINK:
            return False
        raise
    return True


@dataclass(frozen=True)
class CacheEntry:
    """One entry: its key, folder and ``entry.json`` (``record``; empty where missing or unreadable)."""

    key: str
    folder: Path
    record: dict[str, Any]

    @classmethod
    def read(cls, folder: Path) -> CacheEntry:
        try:
            record = read_json(folder / ENTRY_FILE, "embedding cache entry")
        except (BindscopeError, OSError):
            record = {}
        return cls(folder.name, folder, record)

    @property
    def array_path(self) -> Path:
        return self.folder / EMBEDDINGS_FILE

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest of the folder the entry was stored from, less its dataset path."""
        found = self.record.get("manifest")
        return found if isinstance(found, dict) else {}

    @property
    def bytes(self) -> int:
        """The size of its array on disk (0 where it is missing)."""
        try:
            return self.array_path.stat().st_size
        except OSError:
            return 0

    @property
    def links(self) -> int:
        """How many other names its array has: embedding folders that hold the same file."""
        try:
            return max(self.array_path.stat().st_nlink - 1, 0)
        except OSError:
            return 0

    def last_used(self) -> float:
        """When a hit last used it (else when it was stored), in seconds since the epoch."""
        for field in ("last_used", "created"):
            try:
                return datetime.datetime.fromisoformat(str(self.record[field])).timestamp()
            except (KeyError, TypeError, ValueError):
                continue
        try:
            return self.folder.stat().st_mtime
        except OSError:
            return 0.0

    def describe(self) -> dict[str, Any]:
        """What ``bindscope cache ls --json`` lists of it."""
        m = self.manifest
        return {
            "key": self.key,
            "dataset_preset": m.get("dataset_preset"),
            "dataset_hash": m.get("dataset_hash"),
            "model_spec": m.get("model_spec"),
            "modality": m.get("modality"),
            "rows": m.get("rows"),
            "layer": m.get("layer"),
            "shape": self.record.get("shape"),
            "bytes": self.bytes,
            "links": self.links,
            "created": self.record.get("created"),
            "last_used": self.record.get("last_used"),
            "damaged": not self.record or not self.array_path.is_file(),
            "folder": str(self.folder),
        }

    def verified(self, shape: tuple[int, int]) -> tuple[np.ndarray | None, str | None]:
        """Its array, checked against ``shape`` and its record (size, shape, dtype, sha256), or None and what is
        wrong with it."""
        rec = self.record
        if rec.get("format") != ENTRY_FORMAT or rec.get("key") != self.key:
            return None, f"its {ENTRY_FILE} is missing, unreadable or of another key"
        if tuple(rec.get("shape") or ()) != shape:
            return None, f"it records shape {tuple(rec.get('shape') or ())}, not the {shape} these embeddings have"
        try:
            size = self.array_path.stat().st_size
        except FileNotFoundError:
            return None, f"its {EMBEDDINGS_FILE} is missing"
        if size != rec.get("bytes"):
            return None, f"its {EMBEDDINGS_FILE} has {size:,} bytes, not the {rec.get('bytes')} recorded"
        try:
            array = load_npy(self.array_path, "cached embedding array")
        except BindscopeError as exc:
            return None, str(exc)
        if array.dtype != np.float32 or array.shape != shape:
            return None, f"its {EMBEDDINGS_FILE} holds {array.dtype} {array.shape}, not float32 {shape}"
        if data_sha256(array) != rec.get("sha256"):
            return None, "its values changed since it was stored (an embeddings.npy linked to it written in place?)"
        return array, None


@dataclass(frozen=True)
class CachedArray:
    """A hit: the entry and its array, verified."""

    entry: CacheEntry
    array: np.ndarray


@dataclass(frozen=True)
class EmbeddingCache:
    """The embedding cache in folder ``root`` (see the module's description)."""

    root: Path

    # -- the folder ------------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse a cache folder that is a file, or a non-empty folder bindscope did not mark as a cache."""
        root = self.root
        fix = f"point {CACHE_DIR_VARIABLE} at a new or empty folder, or switch the cache off with {CACHE_VARIABLE}=off"
        if root.exists() and not root.is_dir():
            raise BindscopeError(f"the embedding cache {root} is a file, not a folder; {fix}")
        if not root.is_dir() or is_empty_dir(root):
            return
        kind = written_kind(root)
        if kind != "cache":
            holds = f"holds {OUTPUT_KINDS[kind]}" if kind else f"holds files and no {OUTPUT_MARK} mark of one"
            raise BindscopeError(
                f"{root} is not a bindscope embedding cache (it {holds}); bindscope never writes or removes "
                f"anything there: {fix}"
            )

    def _prepare(self) -> None:
        """Make the folder and mark it as a cache (refused as :meth:`check` says)."""
        self.check()
        self.root.mkdir(parents=True, exist_ok=True)
        if written_kind(self.root) != "cache":
            mark_output(self.root, "cache")

    def _sweep(self) -> None:
        """Remove what dead processes left in the folder: stages of stores, entries being removed."""
        limit = time.time() - STALE_SECONDS
        for path in self.root.iterdir():
            name = path.name
            if name.startswith(".") and name.endswith((".partial", ".removed")) and not path.is_symlink():
                with contextlib.suppress(OSError):
                    if path.stat().st_mtime < limit:
                        shutil.rmtree(path)

    # -- entries -----------------------------------------------------------------------------------------------------
    def entry(self, key: str) -> CacheEntry | None:
        """The entry of ``key``, whole or damaged, or None."""
        folder = self.root / key
        return CacheEntry.read(folder) if _KEY.fullmatch(key) and _is_entry(folder) else None

    def entries(self) -> list[CacheEntry]:
        """Every entry, oldest use first (the folder checked: :meth:`check`)."""
        self.check()
        if not self.root.is_dir():
            return []
        found = [CacheEntry.read(p) for p in self.root.iterdir() if _KEY.fullmatch(p.name) and _is_entry(p)]
        return sorted(found, key=lambda e: (e.last_used(), e.key))

    def lookup(self, key: str, shape: tuple[int, int]) -> CachedArray | None:
        """The verified array stored under ``key``, or None: absent, or damaged (said in a warning)."""
        entry = self.entry(key)
        if entry is None:
            return None
        array, problem = entry.verified(shape)
        if array is None:
            log.warning(
                "warning: the embedding cache entry %s (%s) is damaged: %s; the embeddings are computed again and "
                "replace it",
                key[:12],
                entry.folder,
                problem,
            )
            return None
        return CachedArray(entry, array)

    def store(self, emb: EmbeddingSet, *, replace: bool = False) -> CacheEntry | None:
        """Keep the folder ``emb`` just written under its content key: its array hard-linked, never copied.

        Returns the entry (the one another process stored first, where it did), or None where nothing was
        stored: no content key, an output on another file system, a disk that refused (a warning). ``replace``:
        the entry found under the key is damaged (:meth:`lookup` said so): it is replaced.
        """
        key = str(emb.manifest.get("content_key") or "")
        if not _KEY.fullmatch(key):
            return None
        try:
            return self._store(key, emb, replace)
        except (OSError, BindscopeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning(
                "warning: the embeddings in %s were not stored in the embedding cache %s (%s); they are complete "
                "all the same",
                emb.root,
                self.root,
                why,
            )
            return None

    def _store(self, key: str, emb: EmbeddingSet, replace: bool) -> CacheEntry | None:
        try:
            self._prepare()
        except OSError as exc:  # no home folder, a read-only one (a service account): no cache, as with no config
            log.info("no embedding cache: %s cannot be made (%s)", self.root, exc.strerror or exc)
            return None
        self._sweep()
        final = self.root / key
        if final.exists() or final.is_symlink():
            if not replace and _is_entry(final):
                return CacheEntry.read(final)
            self._discard(final)
        source = Path(emb.root) / EMBEDDINGS_FILE
        stage = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", suffix=".partial", dir=self.root))
        try:
            if not link_file(source, stage / EMBEDDINGS_FILE):
                self._tell_no_link(source)
                return None
            now = utc_now()
            record = {
                "format": ENTRY_FORMAT,
                "key": key,
                "shape": [len(emb.array), int(emb.array.shape[1])],
                "bytes": (stage / EMBEDDINGS_FILE).stat().st_size,
                "sha256": data_sha256(emb.array),
                "created": now,
                "last_used": now,
                "manifest": {k: v for k, v in emb.manifest.items() if k != "dataset_path"},
            }
            write_json(stage / ENTRY_FILE, record)
            kill_point("cache-store")
            try:
                os.rename(stage, final)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                log.info("another process stored %s in the embedding cache first", key[:12])
        finally:
            shutil.rmtree(stage, ignore_errors=True)  # gone after the rename
        return CacheEntry.read(final)

    def _tell_no_link(self, source: Path) -> None:
        """Say once per pair of file systems that an output there cannot be linked into the cache."""
        try:
            pair = (source.stat().st_dev, self.root.stat().st_dev)
        except OSError:
            return
        if pair not in _told:
            _told.add(pair)
            log.info(
                "the embedding cache %s cannot hard-link %s (another file system, or one without hard links): "
                "embeddings written there are not stored in it; set %s to a folder on the same file system to "
                "share them",
                self.root,
                source.parent,
                CACHE_DIR_VARIABLE,
            )

    def materialise(self, hit: CachedArray, out: Path, manifest: dict[str, Any]) -> EmbeddingSet:
        """Write the embedding folder ``out`` from a hit: its array hard-linked from the entry (copied from the
        verified array where no link can be made), ``manifest`` (this folder's, whose ``source`` gains
        ``cache``: the key, ``hit`` and whether the array is linked) written beside it; atomically."""
        with staged_dir(out, kind="embeddings", overwrite=True) as stage:
            linked = link_file(hit.entry.array_path, stage / EMBEDDINGS_FILE)
            if not linked:
                save_npy(stage / EMBEDDINGS_FILE, hit.array)
            source = {**manifest.get("source", {}), "cache": {"key": hit.entry.key, "hit": True, "linked": linked}}
            full = full_manifest(hit.array, {**manifest, "source": source})
            write_json(stage / MANIFEST, full)
        self._touch(hit.entry)
        return EmbeddingSet(out, full, hit.array)

    def _touch(self, entry: CacheEntry) -> None:
        """Record that ``entry`` was used now (where the cache can be written), unless another process replaced it
        meanwhile (its record then stays its own)."""
        current = CacheEntry.read(entry.folder).record
        if current.get("sha256") != entry.record.get("sha256"):
            return
        with contextlib.suppress(OSError):
            write_json(entry.folder / ENTRY_FILE, {**current, "last_used": utc_now()})

    # -- removing ----------------------------------------------------------------------------------------------------
    def select(self, prefixes: Sequence[str]) -> list[CacheEntry]:
        """The entries the key ``prefixes`` name, one each; an unknown, ambiguous or malformed prefix is refused."""
        entries = self.entries()
        chosen: dict[str, CacheEntry] = {}
        for given in prefixes:
            prefix = given.strip().lower()
            if not re.fullmatch(r"[0-9a-f]{1,64}", prefix):
                raise BindscopeError(
                    f"{given!r} is not a key prefix: keys are hexadecimal (0-9, a-f), as `bindscope cache ls` "
                    "shows them"
                )
            found = [e for e in entries if e.key.startswith(prefix)]
            if not found:
                raise BindscopeError(
                    f"no entry of the embedding cache {self.root} has a key starting with {given}"
                    f"{_did_you_mean(prefix, entries)}; `bindscope cache ls` lists the keys"
                )
            if len(found) > 1:
                keys = ", ".join(e.key[:12] for e in found[:5]) + (", ..." if len(found) > 5 else "")
                raise BindscopeError(
                    f"key prefix {given} is ambiguous: {len(found)} entries start with it ({keys}); give more of "
                    "the key"
                )
            chosen[found[0].key] = found[0]
        return list(chosen.values())

    def unused_for(self, days: float) -> list[CacheEntry]:
        """The entries no hit used for more than ``days`` days."""
        if not days >= 0:
            raise BindscopeError(f"--older-than takes a number of days, 0 or more, got {days}")
        limit = time.time() - days * 86400
        return [e for e in self.entries() if e.last_used() < limit]

    def remove(self, entries: Iterable[CacheEntry]) -> list[CacheEntry]:
        """Remove ``entries`` (each moved out of sight first, then deleted); the embedding folders linked to them
        keep their arrays. Returns the entries removed (one another process removed meanwhile is not)."""
        removed = []
        for entry in entries:
            if entry.folder.parent != self.root or not _is_entry(entry.folder):
                raise BindscopeError(f"internal: {entry.folder} is not an entry of the embedding cache {self.root}")
            trash = self.root / f".{entry.key[:16]}.{secrets.token_hex(4)}.removed"
            try:
                os.rename(entry.folder, trash)
            except FileNotFoundError:
                continue
            shutil.rmtree(trash, ignore_errors=True)
            removed.append(entry)
        with contextlib.suppress(OSError):
            self._sweep()
        return removed

    def _discard(self, folder: Path) -> None:
        """Move a damaged entry out of the way of its replacement (only an entry: anything else is refused)."""
        if not _is_entry(folder):
            raise BindscopeError(f"{folder} is not an entry of the embedding cache; remove it yourself")
        self.remove([CacheEntry.read(folder)])


def _is_entry(folder: Path) -> bool:
    """Whether ``folder`` is a cache entry: a real folder holding only an entry's files (an update of
    ``entry.json`` in progress included), so that nothing else is ever listed or removed."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    names = [p.name for p in folder.iterdir()]
    return all(n in _ENTRY_FILES or (n.startswith(f".{ENTRY_FILE}.") and n.endswith(".tmp")) for n in names)


def _did_you_mean(prefix: str, entries: Sequence[CacheEntry]) -> str:
    """`` (did you mean KEY?)`` for the key that starts most like ``prefix``, or ``""``."""
    starts = {e.key[: len(prefix)]: e.key for e in entries}
    close = closest(prefix, starts)
    return f" (did you mean {starts[close][: max(12, len(prefix))]}?)" if close else ""
