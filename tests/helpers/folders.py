"""What a folder holds, byte for byte: to prove a refused command left its inputs as they were."""

from __future__ import annotations

from pathlib import Path


def read_folder(folder: str | Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its posix path relative to it (hidden files too)."""
    root = Path(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def snapshot(*paths: str | Path) -> dict[str, dict[str, bytes] | bytes | None]:
    """Each path's content: a folder's files (:func:`read_folder`), a file's bytes, or None when absent."""
    out: dict[str, dict[str, bytes] | bytes | None] = {}
    for path in map(Path, paths):
        out[str(path)] = read_folder(path) if path.is_dir() else path.read_bytes() if path.is_file() else None
    return out
