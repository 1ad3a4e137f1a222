"""File helpers that never leave a half-written file or folder behind."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import tokenize
from collections.abc import Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.core import places
from bindscope.core.errors import BindscopeError, naming
from bindscope.core.faults import kill_point
from bindscope.core.validation import check_fields, one_line, short_repr

log = logging.getLogger(__name__)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _default_mode(path: str | Path, base: int) -> None:
    """Give a mkstemp/mkdtemp path the permissions a plain open/mkdir would have given it."""
    os.chmod(path, base & ~_umask())


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator:
    """Open a temporary file beside ``path``; it replaces ``path`` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # a read-only disk: name the file asked for, not the hidden temporary one
        raise naming(exc, path) from exc
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        _default_mode(tmp, 0o666)
        kill_point("atomic-replace")
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (None, "", tmp):  # a short write names no file
            raise naming(exc, path) from exc
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_file(path) as fh:
        fh.write(text)


def write_json(path: Path, data: dict) -> None:
    """Pretty JSON, written atomically."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def check_inside(root: Path, path: Path, fix: str = "rebuild the folder") -> Path:
    """``path`` itself, refused when it leads out of ``root`` (a link, ``..``, an absolute path).

    A folder's files never point outside it: a link out is refused, not followed.
    """
    try:
        real_root, real = Path(root).resolve(), Path(path).resolve()
    except (OSError, RuntimeError) as exc:  # a link loop
        raise BindscopeError(f"{path} cannot be resolved ({exc}); {fix}") from None
    if real != real_root and real_root not in real.parents:
        raise BindscopeError(f"{path} leads outside {root} (to {real}); bindscope does not follow it there; {fix}")
    return path


def read_text(path: Path, what: str, root: Path | None = None, kind: str = "text") -> str:
    """A UTF-8 text file's content; a folder, a missing, unreadable or binary file is a clear error.

    ``kind`` names the format in messages ("JSON", "YAML"). With ``root``, a file that leads out of
    ``root`` is refused (see :func:`check_inside`).
    """
    if root is not None:
        check_inside(root, path)
    if path.is_dir():
        raise BindscopeError(f"{what} {path} is a folder; give the path of the {kind} file")
    if not path.is_file():
        raise BindscopeError(f"{what} {path} is missing")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BindscopeError(f"{what} {path} is not valid {kind} (not UTF-8: a binary or damaged file)") from None
    except OSError as exc:
        raise BindscopeError(f"{what} {path} cannot be read ({exc.strerror})") from None


def read_json(path: Path, what: str, root: Path | None = None) -> dict:
    """Read a JSON object, with errors that name ``what`` the file is (``root``: see :func:`read_text`)."""
    text = read_text(path, what, root, "JSON")
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or a number too long to convert
        raise BindscopeError(f"{what} {path} is not valid JSON ({one_line(exc)}); rebuild it") from None
    except RecursionError:
        raise BindscopeError(f"{what} {path} nests too deeply to be a bindscope file; rebuild it") from None
    if not isinstance(data, dict):
        raise BindscopeError(f"{what} {path} must hold a JSON object")
    return data


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file safely (plain data only); a malformed or binary file is a one-line error."""
    import yaml

    text = read_text(path, what, kind="YAML")
    try:
        return yaml.load(text, Loader=_unique_key_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = one_line(getattr(exc, "problem", None) or exc)
        raise BindscopeError(f"malformed YAML in {path}{where}: {problem}") from None
    except ValueError as exc:  # e.g. a number too long to convert
        raise BindscopeError(f"{what} {path} holds a value YAML cannot read ({one_line(exc)})") from None
    except RecursionError:
        raise BindscopeError(f"{what} {path} nests too deeply; write a flat mapping of settings") from None


@functools.cache
def _unique_key_loader() -> type:
    """YAML's safe loader, refusing a key written twice in one mapping (YAML would keep the last silently)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            keys = [k for k, _ in node.value]
            if isinstance(node, yaml.MappingNode) and not any(k.tag == "tag:yaml.org,2002:merge" for k in keys):
                seen: set[Any] = set()
                for key_node in keys:
                    key = self.construct_object(key_node, deep=True)
                    if isinstance(key, Hashable) and key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"the key {key!r} is written twice; keep one", key_node.start_mark
                        )
                    if isinstance(key, Hashable):
                        seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def read_manifest(
    root: Path,
    what: str,
    required: tuple[str, ...],
    fmt: str,
    fix: str,
    types: Mapping[str, type | tuple[type, ...]] | None = None,
) -> dict:
    """Read ``root/manifest.json`` and check its required keys, their ``types`` and the format.

    ``what`` names the folder kind in messages ("dataset", "embedding"); ``fix`` says what to do.
    """
    if not root.is_dir():
        raise BindscopeError(f"{what} folder {root} does not exist; {fix}")
    path = root / "manifest.json"
    manifest = read_json(path, f"{what} manifest", root)
    missing = [k for k in required if k not in manifest]
    if missing:
        raise BindscopeError(f"{what} manifest {path} lacks {', '.join(missing)}; {fix}")
    if manifest["format"] != fmt:
        raise BindscopeError(f"{root} has format {short_repr(manifest['format'])}; this bindscope reads {fmt!r}; {fix}")
    check_fields(manifest, types or {}, f"{what} manifest {path}", fix)
    return manifest


def save_npy(path: Path, array: np.ndarray) -> None:
    """``numpy.save`` without pickling, into a file that appears only when complete."""
    with atomic_file(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def load_npy(path: Path, what: str, mmap: bool = False, root: Path | None = None) -> np.ndarray:
    """``numpy.load`` without pickles; a corrupt or missing file is a clear error.

    The header is checked first: an array of Python objects, or one declaring more data than
    the file holds, is refused before anything is allocated. With ``root``, a file that leads out
    of ``root`` is refused (see :func:`check_inside`).
    """
    if root is not None:
        check_inside(root, path)
    if not path.is_file():
        raise BindscopeError(f"{what} {path} is missing")
    try:
        _check_npy_header(path, what)
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (ValueError, OSError, EOFError, TypeError, SyntaxError, tokenize.TokenError) as exc:  # a garbled header
        if isinstance(exc, BindscopeError):
            raise
        raise BindscopeError(f"{what} {path} is not a readable .npy array ({one_line(exc)})") from None


def _check_npy_header(path: Path, what: str) -> None:
    """Refuse a ``.npy`` file of Python objects, or one whose header declares more bytes than it holds."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
        data_start = fh.tell()
    if dtype.hasobject:
        raise BindscopeError(
            f"{what} {path} is not a readable .npy array (it holds Python objects, a pickle; bindscope never unpickles)"
        )
    declared = math.prod(shape) * dtype.itemsize
    held = path.stat().st_size - data_start
    if declared > held:
        raise BindscopeError(
            f"{what} {path} is not a readable .npy array (it declares shape {shape}, {declared:,} bytes, but holds "
            f"{held:,}: truncated or damaged); write it again"
        )


def read_parquet(path: Path, what: str, fix: str, root: Path | None = None) -> Any:
    """A parquet file as a ``pyarrow.Table``; a missing, damaged or non-parquet file is a clear error.

    With ``root``, a file that leads out of ``root`` is refused (see :func:`check_inside`).
    Turn the table into a DataFrame with :func:`to_frame`.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if root is not None:
        check_inside(root, path, fix)
    if not path.is_file():
        raise BindscopeError(f"{what} {path} is missing; {fix}")
    try:
        with path.open("rb") as fh:  # a handle: pyarrow cannot take a path that is not UTF-8
            table = pq.read_table(fh)
        table.schema.names  # noqa: B018 (decode every column name now: a garbled one fails here, not later)
        table.validate(full=True)  # and every text cell is UTF-8
        return table
    except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: UnicodeDecodeError too
        raise BindscopeError(f"{what} {path} is not a readable parquet file ({one_line(exc)}); {fix}") from None


def write_parquet(frame: Any, path: Path) -> None:
    """Write a DataFrame to ``path`` as parquet through a handle (pyarrow cannot take a path that is not UTF-8)."""
    with path.open("wb") as fh:
        frame.to_parquet(fh, index=False)


def to_frame(table: Any, path: Path, what: str, fix: str) -> Any:
    """``table.to_pandas()``; damaged pandas metadata in the file is a clear error naming ``path``."""
    import pyarrow as pa

    try:
        return table.to_pandas()
    except (pa.ArrowException, ValueError, KeyError, TypeError, IndexError) as exc:
        raise BindscopeError(f"{what} {path} has damaged metadata ({one_line(exc)}); {fix}") from None


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


# -- what an output may be ------------------------------------------------------------------------
#: The hidden file in every folder bindscope writes: the kind of folder it is. ``--overwrite`` replaces
#: only a folder that carries it, with the same kind.
OUTPUT_MARK = ".bindscope.json"
#: The kinds of output folder, as messages name them.
OUTPUT_KINDS = {
    "dataset": "a dataset",
    "embeddings": "an embedding folder",
    "result": "an analysis result",
    "table": "a table folder",
    "comparison": "a comparison of runs",
    "model": "a scratch model",
    "export": "a scratch model's export",
    "openclip": "an open_clip model folder",
    "run": "a run folder",
    "cache": "an embedding cache",
}


def mark_output(folder: Path, kind: str) -> None:
    """Record in ``folder`` that bindscope wrote it, as an output of ``kind`` (see :data:`OUTPUT_KINDS`)."""
    if kind not in OUTPUT_KINDS:
        raise BindscopeError(f"internal: unknown output kind {kind!r}")
    write_json(folder / OUTPUT_MARK, {"written_by": "bindscope", "kind": kind})


#: The format tags of a manifest or summary (what folders from before the mark carry), by kind.
FORMAT_KINDS = {
    "bindscope-dataset": "dataset",
    "bindscope-embeddings": "embeddings",
    "bindscope-scratch": "model",
    "bindscope-run": "run",
    "bindscope-result": "result",
}


def written_kind(folder: Path) -> str | None:
    """The kind of output bindscope wrote ``folder`` as, or None (not written by bindscope, or damaged).

    Read from its mark (:data:`OUTPUT_MARK`) or, for a folder written before marks, from the format tag
    of its ``manifest.json`` or ``summary.json``, and only where the folder holds nothing else than such an
    output writes (:func:`bindscope.core.places.holds_only_its_own`): a copied manifest does not make a folder
    bindscope's.
    """
    mark = None if (folder / OUTPUT_MARK).is_symlink() else _json_object(folder / OUTPUT_MARK)
    if mark is not None:
        kind = mark.get("kind") if mark.get("written_by") == "bindscope" else None
        return kind if kind in OUTPUT_KINDS else None
    for name in ("manifest.json", "summary.json"):
        tag = (_json_object(folder / name) or {}).get("format")
        tag = tag.get("name") if isinstance(tag, dict) else tag
        for prefix, kind in FORMAT_KINDS.items():
            if isinstance(tag, str) and (tag == prefix or tag.startswith(f"{prefix}-v")):
                return kind if places.holds_only_its_own(folder, kind) else None  # not a copied manifest
    return None


def _json_object(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def check_output_place(out: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output that is the current folder, the file system's root, the home folder
    or has no name: bindscope writes a folder (or file) of its own, below such a place. A dangling link or a
    link loop is refused too, and a name too long for the hidden files bindscope keeps beside it
    (:mod:`bindscope.core.places`). ``option`` names the output in the messages."""
    out = Path(out).expanduser()
    places.check_name_length(out, option)
    real = places.check_resolvable(out, option)
    homes = {Path.cwd().resolve(): "the current folder", Path(real.anchor): "the root folder"}
    with contextlib.suppress(RuntimeError, KeyError):  # no home folder known
        homes.setdefault(Path.home().resolve(), "your home folder")
    if out.name == "..":
        raise BindscopeError(
            f"{option} {out} ends in '..'; give the output its own name, e.g. {option} {real / 'result'}"
        )
    same = [w for h, w in homes.items() if real == h or _same_place(real, h)]
    if str(out) in ("", ".") or same:
        what = same[0] if same else "the current folder"
        raise BindscopeError(
            f"{option} {str(out) or repr('')} is {what}; bindscope writes an output of its own and never replaces "
            f"such a folder: give a new folder below it, e.g. {option} {out / 'result' if str(out) else 'result'}"
        )


def _same_place(a: Path, b: Path) -> bool:
    """Whether two existing paths are one folder (by identity; a path that does not exist is no place)."""
    found = places.identity(a)
    return found is not None and found == places.identity(b)


def check_not_an_input(out: Path, inputs: Iterable[str | os.PathLike], option: str = "--out") -> None:
    """Refuse an output that is, holds or lies inside one of the ``inputs`` the command reads, so that no writer,
    ``--overwrite`` or not, can replace or write into what it reads. Paths are compared with links resolved,
    and by identity (device and inode, :func:`bindscope.core.places.relation`) for every existing ancestor: a
    folder reached through a bind mount or another name is the same folder."""
    real_out = Path(out).expanduser().resolve()
    for given in inputs:
        real = Path(given).expanduser().resolve()
        if real == real_out:
            relation: str | None = "is"
        elif real_out in real.parents:
            relation = "holds"
        elif real in real_out.parents:
            relation = "lies inside"
        else:
            relation = places.relation(real_out, real)
        if relation is None:
            continue
        raise BindscopeError(
            f"{option} {out} {relation} the input {given}; bindscope never writes over or into what a command "
            f"reads: choose an {option} outside it"
        )


def check_output_dir(out: Path, *, kind: str, overwrite: bool = False, option: str = "--out") -> None:
    """Refuse an output folder that is a file, or a non-empty folder unless ``overwrite``; with ``overwrite``,
    one that bindscope did not write as an output of the same ``kind`` (:func:`check_replaceable`).

    Call it before long work too, so that a bad ``--out`` fails at once, not at the end.
    """
    if out.exists() and not out.is_dir():
        raise BindscopeError(f"{out} exists and is not a folder; choose another {option}")
    places.check_not_a_mount_point(out, option)
    if out.is_dir() and not is_empty_dir(out) and not overwrite:
        raise BindscopeError(f"{out} already exists and is not empty; choose another {option} or pass --overwrite")
    check_replaceable(out, kind, option)


def check_replaceable(out: Path, kind: str, option: str = "--out") -> None:
    """Refuse to replace ``out`` unless it is missing, empty, or a folder bindscope wrote as ``kind``."""
    if not out.is_dir() or is_empty_dir(out):
        return
    found = written_kind(out)
    if found != kind:
        holds = OUTPUT_KINDS[found] if found else "files bindscope did not write"
        raise BindscopeError(
            f"{out} holds {holds}; --overwrite replaces only {OUTPUT_KINDS[kind]} that bindscope wrote: "
            f"choose another {option} (or delete the folder yourself if you no longer need it)"
        )


def check_output(
    out: Path,
    kind: str | None,
    *,
    overwrite: bool = False,
    inputs: Iterable[str | os.PathLike] = (),
    option: str = "--out",
) -> None:
    """Every check an output gets before any work: its place (:func:`check_output_place`), that it is none of
    the ``inputs`` (:func:`check_not_an_input`), that it lies below folders only, that a folder of ``kind`` is
    not a mount point and, with ``overwrite``, that it may be replaced (:func:`check_replaceable`). Without
    ``overwrite`` the writer decides about a non-empty ``out`` (the same content again is a no-op, a resumed
    one continues, anything else is refused). ``option`` names the output in the messages."""
    check_output_place(out, option)
    check_not_an_input(out, inputs, option)
    places.check_parents_are_folders(Path(out), option)
    if kind is not None:
        places.check_not_a_mount_point(out, option)
    if kind is not None and overwrite:
        check_output_dir(out, kind=kind, overwrite=True, option=option)


@contextlib.contextmanager
def staged_dir(out: Path, *, kind: str, overwrite: bool = False) -> Iterator[Path]:
    """Build a folder of ``kind`` in a hidden sibling and move it to ``out`` only once complete.

    ``out`` must not exist, be an empty folder, or (with ``overwrite``) be a folder of the same kind
    that bindscope wrote (see :func:`check_output_dir`), which is replaced. The folder carries the
    mark of its kind (:data:`OUTPUT_MARK`). On any error the staging folder is removed and ``out``
    is left as it was.
    """
    check_output_dir(out, kind=kind, overwrite=overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:  # a read-only or full disk: name the output, not the staging folder it tried
        raise naming(exc, out) from exc
    _default_mode(stage, 0o777)
    try:
        yield stage
        mark_output(stage, kind)
        kill_point("stage-move")
        if out.exists():
            _swap(stage, out)
        else:
            os.replace(stage, out)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, OSError) and _in_stage(exc, stage):  # name the output, not its hidden staging folder
            raise naming(exc, out / os.path.relpath(exc.filename, stage)) from exc
        if isinstance(exc, OSError) and not exc.filename:  # pyarrow's and numpy's write errors name no file
            raise naming(exc, out) from exc
        raise


def _in_stage(exc: OSError, stage: Path) -> bool:
    return isinstance(exc.filename, str) and Path(exc.filename).is_relative_to(stage)


def _swap(stage: Path, out: Path) -> None:
    """Put ``stage`` in the place of the folder ``out``; the previous folder is put back if the move fails,
    and only a warning is left where it cannot be deleted once the new one is in place."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.replace(out, old)
    kill_point("stage-swap")
    try:
        os.replace(stage, out)
    except BaseException:
        os.replace(old, out)
        raise
    try:
        shutil.rmtree(old)
    except OSError as exc:
        log.warning(
            "warning: the new result is in place in %s, but the previous one, moved to %s, could not be deleted "
            "(%s); delete it yourself (the next bindscope command writing %s tries again)",
            out,
            old,
            exc.strerror or exc,
            out.name,
        )


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_image(path: str | Path):
    """An RGB PIL image, or a clear error naming the file."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except FileNotFoundError:
        raise BindscopeError(f"image file {path} is missing; render or attach the dataset's images again") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise BindscopeError(f"image file {path} is not a readable image ({exc}); render it again") from None
