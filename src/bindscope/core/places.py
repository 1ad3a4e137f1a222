"""What the file system may hold where bindscope writes: links, mount points, name lengths, the identity of a
folder reached by two paths, and the entries each kind of output folder consists of.

Pure checks with one-line errors; :mod:`bindscope.core.io` and :mod:`bindscope.core.locks` call them before
any work.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import stat
from pathlib import Path

from bindscope.core.errors import BindscopeError

#: The most bytes bindscope adds to an output's name for the hidden files beside it
#: (``.NAME.embedding-<16 hex>``, ``.NAME.<8>.partial``, ``.NAME.old-<pid>``, ``.NAME.lock``).
SIBLING_EXTRA = 28
#: Room kept below the system's path limit for the files bindscope writes inside an output.
INNER_ROOM = 256

Identity = tuple[int, int]


def identity(path: str | os.PathLike) -> Identity | None:
    """``(st_dev, st_ino)`` of ``path`` (links followed), or None where it does not exist.

    Two paths with one identity are one file or folder, whatever their names: a link, a bind mount, ``//``,
    ``/proc/self/cwd``.
    """
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino)


def chain(path: Path) -> list[Identity]:
    """The identities of ``path`` and of each of its existing ancestors, innermost first."""
    found = (identity(p) for p in [path, *path.parents])
    return [i for i in found if i is not None]


def relation(out: Path, given: Path) -> str | None:
    """How the output ``out`` relates to the input ``given`` by identity: "is", "holds", "lies inside" or None.

    Both are compared with every existing ancestor, so a folder reached through a bind mount or another name
    is found too.
    """
    out_id, given_id = identity(out), identity(given)
    if given_id is None:
        return None
    if out_id == given_id:
        return "is"
    if given_id in chain(out)[1 if out_id else 0 :]:
        return "lies inside"
    if out_id is not None and out_id in chain(given)[1:]:
        return "holds"
    return None


def check_resolvable(out: Path, option: str) -> Path:
    """``out`` with its links resolved; a link loop, a dangling link or a link through a file is refused."""
    try:
        real = Path(os.path.realpath(out, strict=False))
        out.exists()
    except (OSError, RuntimeError) as exc:
        raise BindscopeError(f"{option} {out} cannot be resolved ({_reason(exc)}); choose another {option}") from None
    if out.is_symlink() and not out.exists():
        if _loops(out):
            raise BindscopeError(f"{option} {out} is a link loop; remove the loop or choose another {option}")
        raise BindscopeError(
            f"{option} {out} is a link to {os.readlink(out)}, which does not exist; bindscope does not create an "
            f"output through a link: give the place itself ({option} {real}) or make that folder first"
        )
    return real


def check_parents_are_folders(out: Path, option: str) -> None:
    """Refuse an output below a file (``notes.txt/result``): no folder can be made there."""
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise BindscopeError(
                f"{option} {out} lies below {parent}, which is a file, not a folder; choose another {option}"
            )


def _loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or ("a link loop" if isinstance(exc, RuntimeError) else str(exc))


def check_name_length(out: Path, option: str) -> None:
    """Refuse an output whose name leaves no room for the hidden files bindscope writes beside it, or whose
    path leaves no room for the files it writes inside."""
    parent = _existing(out.parent)
    name_max = _limit(parent, "PC_NAME_MAX", 255)
    path_max = _limit(parent, "PC_PATH_MAX", 4096)
    size = len(os.fsencode(out.name))
    if size + SIBLING_EXTRA > name_max:
        raise BindscopeError(
            f"{option} name is {size} bytes long; bindscope keeps hidden files beside an output, named after it, "
            f"so the name may be at most {name_max - SIBLING_EXTRA} bytes here: choose a shorter {option}"
        )
    length = len(os.fsencode(os.path.abspath(out)))
    if length + INNER_ROOM > path_max:
        raise BindscopeError(
            f"{option} path is {length} bytes long; it may be at most {path_max - INNER_ROOM} bytes here (the "
            f"system's limit is {path_max}, and bindscope writes files inside it): choose a shorter {option}"
        )


def _existing(folder: Path) -> Path:
    for candidate in [folder, *folder.parents]:
        with contextlib.suppress(OSError):  # a path longer than the system allows
            if candidate.is_dir():
                return candidate
    return Path("/")


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def check_not_a_mount_point(out: Path, option: str) -> None:
    """Refuse an output that is a mount point: a finished output is moved into place, which a mount point
    cannot take."""
    if out.is_dir() and is_mount_point(out):
        raise BindscopeError(
            f"{option} {out} is a mount point; bindscope moves a finished output into place, which a mount point "
            f"cannot take: give a folder below it, e.g. {option} {out / 'result'}"
        )


def is_mount_point(folder: Path) -> bool:
    """Whether ``folder`` is where a file system (or a bind mount, which ``os.path.ismount`` misses) is mounted."""
    if os.path.ismount(folder):
        return True
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:  # not Linux
        return False
    real = os.path.realpath(folder)
    points = (line.split(" ")[4] for line in table.splitlines() if line.count(" ") >= 4)
    return any(_unescape(point) == real for point in points)


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def check_plain_file(fd: int, path: Path, what: str) -> None:
    """Refuse an opened ``path`` that is not a plain file of its own (a FIFO, a device, a hard link to another
    file): bindscope writes such files only as it made them."""
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_nlink <= 1:
        return
    kind = "a hard link to another file" if stat.S_ISREG(info.st_mode) else "not a plain file"
    raise BindscopeError(
        f"{what} {path} is {kind}, not made by bindscope, which never writes into it: remove it "
        "(or choose another --out)"
    )


def check_state_folder(path: Path) -> Path:
    """``path``, a hidden folder of resumable state beside an output, refused when it is a link or not a folder
    (someone else's: bindscope writes and deletes its state folders, and never follows a link there)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        kind = "a link" if path.is_symlink() else "not a folder"
        raise BindscopeError(
            f"{path} is {kind}; bindscope keeps an output's resumable state there and did not make it: "
            "remove it (or choose another --out)"
        )
    return path


# -- what each kind of output folder holds ------------------------------------------------------------------
#: The entries of a folder of each kind that bindscope wrote before marks existed (a name pattern; ``/`` at
#: the end for a folder). A marker-less folder counts as bindscope's only when it holds nothing else.
KIND_ENTRIES: dict[str, tuple[str, ...]] = {
    "dataset": ("manifest.json", "scenes.parquet", "singles.parquet", "*.csv", "images/", "splits/"),
    "embeddings": ("manifest.json", "embeddings.npy"),
    "model": ("manifest.json", "config.json", "summary.json", "*.csv", "*.safetensors"),
    "run": (
        "manifest.json",
        "config.yaml",
        "datasets/",
        "embeddings/",
        "results/",
        "scratch/",
        "report/",
        "report.html",
        "card.csv",
    ),
    "result": ("summary.json", "*.parquet", "*.csv", "*.png", "*.html", "probes/", "fits/", "plots/"),
}


def holds_only_its_own(folder: Path, kind: str) -> bool:
    """Whether every entry of ``folder`` is one a bindscope output of ``kind`` writes (hidden leftovers of an
    interrupted write included)."""
    patterns = KIND_ENTRIES.get(kind, ())
    for entry in os.scandir(folder):
        is_dir = entry.is_dir(follow_symlinks=False)
        if entry.is_symlink() or not (is_dir or entry.is_file(follow_symlinks=False)):
            return False
        if entry.name.startswith(".") and _is_own_hidden(entry.name):
            continue
        wanted = [p.rstrip("/") for p in patterns if p.endswith("/") == is_dir]
        if not any(fnmatch.fnmatchcase(entry.name, p) for p in wanted):
            return False
    return True


def _is_own_hidden(name: str) -> bool:
    return name == ".bindscope.json" or name.endswith((".lock", ".partial", ".tmp")) or ".old-" in name
