"""File helpers that never leave a half-written file or folder behind."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bindscope.core.errors import BindscopeError


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        _default_mode(tmp, 0o666)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_file(path) as fh:
        fh.write(text)


def write_json(path: Path, data: dict) -> None:
    """Pretty JSON, written atomically."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def read_json(path: Path, what: str) -> dict:
    """Read a JSON object, with errors that name ``what`` the file is."""
    if path.is_dir():
        raise BindscopeError(f"{what} {path} is a folder; give the path of the JSON file")
    if not path.is_file():
        raise BindscopeError(f"{what} {path} is missing")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BindscopeError(f"{what} {path} is not valid JSON ({exc}); rebuild it") from None
    if not isinstance(data, dict):
        raise BindscopeError(f"{what} {path} must hold a JSON object")
    return data


def read_manifest(root: Path, what: str, required: tuple[str, ...], fmt: str, fix: str) -> dict:
    """Read ``root/manifest.json`` and check its required keys and format.

    ``what`` names the folder kind in messages ("dataset", "embedding"); ``fix`` says what to do.
    """
    if not root.is_dir():
        raise BindscopeError(f"{what} folder {root} does not exist; {fix}")
    manifest = read_json(root / "manifest.json", f"{what} manifest")
    missing = [k for k in required if k not in manifest]
    if missing:
        raise BindscopeError(f"{what} manifest {root / 'manifest.json'} lacks {', '.join(missing)}; {fix}")
    if manifest["format"] != fmt:
        raise BindscopeError(f"{root} has format {manifest['format']!r}; this bindscope reads {fmt!r}")
    return manifest


def save_npy(path: Path, array: np.ndarray) -> None:
    """``numpy.save`` without pickling, into a file that appears only when complete."""
    with atomic_file(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def load_npy(path: Path, what: str, mmap: bool = False) -> np.ndarray:
    """``numpy.load`` without pickles; a corrupt or missing file is a clear error."""
    if not path.is_file():
        raise BindscopeError(f"{what} {path} is missing")
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (ValueError, OSError, EOFError) as exc:
        raise BindscopeError(f"{what} {path} is not a readable .npy array ({exc})") from None


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def check_output_dir(out: Path, *, overwrite: bool = False) -> None:
    """Refuse an output folder that is a file, or a non-empty folder unless ``overwrite``.

    Call it before long work too, so that a bad ``--out`` fails at once, not at the end.
    """
    if out.exists() and not out.is_dir():
        raise BindscopeError(f"{out} exists and is not a folder; choose another --out")
    if out.is_dir() and not is_empty_dir(out) and not overwrite:
        raise BindscopeError(f"{out} already exists and is not empty; choose another --out or pass --overwrite")


@contextlib.contextmanager
def staged_dir(out: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Build a folder in a hidden sibling and move it to ``out`` only once complete.

    ``out`` must not exist, be an empty folder, or (with ``overwrite``) be replaced.
    On any error the staging folder is removed and ``out`` is left as it was.
    """
    check_output_dir(out, overwrite=overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    _default_mode(stage, 0o777)
    try:
        yield stage
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(stage, out)
            shutil.rmtree(old)
        else:
            os.replace(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


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
