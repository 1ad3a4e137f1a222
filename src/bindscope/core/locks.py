"""One writer per output: an exclusive lock on the folder (or file) a command writes.

The lock is ``flock`` on a hidden file beside the target (``.NAME.lock``), so it is released by the
kernel when its process dies however it dies (SIGKILL, power loss): a lock left behind by a dead
process is simply taken over. While it is held, the file names the holder (pid, host, start time,
command) for the error a second writer gets. Whoever takes the lock first removes what dead writers
of the same target left behind: staging folders (``.NAME.*.partial``), replaced folders waiting to
be deleted (``.NAME.old-PID``) and unfinished atomic files (``.NAME.*.tmp``), beside the target
and inside it, except below a sub-folder that another live process holds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import inspect
import json
import logging
import os
import re
import shutil
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from bindscope.core import places
from bindscope.core.errors import BindscopeError
from bindscope.core.io import check_output, written_kind

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

POLL_SECONDS = 0.2
_held: dict[Path, int] = {}  # target -> depth, for a process that takes the same lock again
_wait = False
_STALE_TMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # atomic_file's mkstemp names
_STAGE = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.partial$")  # staged_dir's mkdtemp names
_REPLACED = re.compile(r"^\..+\.old-[0-9]+$")  # staged_dir's replaced folders


def wait_for_locks(wait: bool) -> None:
    """Make every lock taken afterwards in this process wait for its holder (``--wait``) or fail at once."""
    global _wait
    _wait = bool(wait)


def lock_path(target: Path) -> Path:
    """The lock file of ``target``: ``.NAME.lock`` in the same folder."""
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def output_lock(target: str | Path, *, wait: bool | None = None, what: str = "output") -> Iterator[None]:
    """Hold the exclusive lock on ``target`` for the block.

    Parameters
    ----------
    target : path
        The folder or file the block writes (it need not exist yet).
    wait : bool, optional
        Wait for another process that holds it; default: the process-wide choice of
        :func:`wait_for_locks` (off: a second writer is an error naming the holder).
    what : str
        What the target is, for the error ("dataset", "embedding folder", "run folder").
    """
    target = Path(target).expanduser().resolve()
    if not target.name:
        raise BindscopeError(f"{target} cannot be an output; choose a folder or file below it")
    if _held.get(target):
        _held[target] += 1
        try:
            yield
        finally:
            _held[target] -= 1
        return
    _check_no_writer_above(target, _wait if wait is None else wait, what)
    fd = _acquire(target, _wait if wait is None else wait, what)
    _held[target] = 1
    try:
        if fd is not None:
            remove_leftovers(target)
        yield
    finally:
        del _held[target]
        if fd is not None:
            _release(target, fd)


Reads = Sequence[str] | Callable[[dict[str, Any]], Iterable[Any]]


def writes(
    param: str, what: str, *, kind: str | None = None, reads: Reads = (), in_place: bool = False
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function that writes the path given as its argument ``param``: before it runs, the output
    is checked (:func:`bindscope.core.io.check_output`); it runs holding the output's lock.

    Parameters
    ----------
    param
        The argument that names the output (a path, or a loaded dataset for ``in_place`` writers).
    what
        What the output is, for messages ("dataset", "result folder").
    kind
        The kind of folder it writes (:data:`bindscope.core.io.OUTPUT_KINDS`); with the function's
        ``overwrite`` argument, a non-empty output must be a folder bindscope wrote as this kind.
        None for a file, or a folder the function checks itself.
    reads
        The arguments naming what the function reads (paths, folders, loaded datasets, inputs: see
        :func:`input_paths`), or a function of the bound arguments returning them: the output may
        not be, hold or lie inside any of them.
    in_place
        The function adds to an existing output of its own (a report into its run folder): only the
        lock is taken.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            target = bound.arguments[param]
            path = target if isinstance(target, (str, os.PathLike)) else target.root  # a path or a loaded Dataset
            if not in_place:
                given = reads(bound.arguments) if callable(reads) else [bound.arguments.get(r) for r in reads]
                overwrite = bool(bound.arguments.get("overwrite", False))
                check_output(Path(path), kind, overwrite=overwrite, inputs=input_paths(given))
                if path is target and (".." in Path(path).parts or Path(path).is_symlink()):
                    # what the OS reaches, so that names agree with it: a link to a folder is written as that folder
                    bound.arguments[param] = path = Path(os.path.realpath(path))
            new = first_missing(Path(path))
            try:
                with output_lock(os.fspath(path), what=what):
                    return fn(*bound.args, **bound.kwargs)
            except BaseException:
                remove_empty_below(new, Path(path))  # a refused or failed write leaves no folder behind
                raise

        return locked

    return decorate


def first_missing(target: Path) -> Path | None:
    """The outermost folder on the way to ``target`` (``target`` included) that does not exist yet."""
    missing = None
    for folder in [target, *target.parents]:
        if folder.exists() or folder.is_symlink():
            break
        missing = folder
    return missing


def remove_empty_below(top: Path | None, target: Path) -> None:
    """Remove the empty folders from ``target`` up to ``top`` (both included): what a call created and left."""
    if top is None:
        return
    for folder in [target, *target.parents]:
        try:
            folder.rmdir()
        except FileNotFoundError:  # never made
            pass
        except OSError:  # not empty, or not a folder
            return
        if folder == top:
            return


def input_paths(value: Any) -> list[Path]:
    """The paths a writer's input argument names: a path, an object's ``input_paths()`` or ``root`` (a loaded
    dataset or embedding set), the items of a list or tuple; nothing for None or in-memory data."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [Path(value)] if os.fspath(value) else []
    if callable(getattr(value, "input_paths", None)):
        return [Path(p) for p in value.input_paths()]
    if isinstance(getattr(value, "root", None), (str, os.PathLike)):
        return [Path(value.root)]
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in input_paths(item)]
    return []


def _acquire(target: Path, wait: bool, what: str) -> int | None:
    path = lock_path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BindscopeError(
            f"cannot create {path.parent} for {target} ({exc.strerror}); choose another --out"
        ) from None
    told = False
    while True:
        fd = _open(path)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path)
            os.close(fd)
            if not wait:
                raise BindscopeError(
                    f"another bindscope process ({holder}) is writing {what} {target}; wait for it to finish, "
                    "rerun with --wait to queue behind it, or choose another --out"
                ) from None
            if not told:
                print(f"waiting for {holder}, which is writing {target} ...", file=sys.stderr, flush=True)
                told = True
            time.sleep(POLL_SECONDS)
            continue
        if _same_file(fd, path):  # not unlinked by a holder that released it meanwhile
            _describe_holder(fd, path)
            return fd
        os.close(fd)


#: How a lock file is opened: never through a link, never blocking on a FIFO, not inherited by children.
_LOCK_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _check_no_writer_above(target: Path, wait: bool, what: str) -> None:
    """Refuse (or, with ``wait``, wait) while another process writes a folder that holds ``target`` (a run
    folder): its writer may replace or remove what is written inside it. A folder this process, or one of
    its parents (a run's worker processes), holds is fine."""
    told = False
    for folder in target.parents:
        if folder in _held:
            return
        while is_locked(folder) and not _held_by_this_writer(lock_path(folder)):
            holder = _holder(lock_path(folder))
            if not wait:
                raise BindscopeError(
                    f"another bindscope process ({holder}) is writing {folder}, which holds {what} {target}; wait "
                    "for it to finish, rerun with --wait to queue behind it, or choose an --out outside that folder"
                )
            if not told:
                print(f"waiting for {holder}, which is writing {folder} ...", file=sys.stderr, flush=True)
                told = True
            time.sleep(POLL_SECONDS)


def _held_by_this_writer(path: Path) -> bool:
    """Whether the lock file names this process's writer (:func:`writer`) as its holder: this command, or the
    command whose worker process this is."""
    return _read_holder(path).get("writer") == writer()


#: The environment variable naming the command a process writes for; worker processes inherit it.
WRITER_VARIABLE = "BINDSCOPE_WRITER"


def writer() -> str:
    """This command's writer id: set once per command (:func:`new_writer`, or at the first lock taken), and
    inherited by the worker processes it starts."""
    return os.environ.setdefault(WRITER_VARIABLE, f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}")


def new_writer() -> str:
    """Start a new writer id for this process (each ``bindscope`` command is a writer of its own, even when
    started by another)."""
    os.environ.pop(WRITER_VARIABLE, None)
    return writer()


def _open(path: Path) -> int | None:
    """The lock file, opened without following a link and checked to be a plain file of its own; None where
    nothing can be created (a read-only disk: nobody can write there, so a command that only finds its result
    already made still runs, and one that writes fails at its first write)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _LOCK_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            log.info("cannot create %s (%s); going on without a lock", path, exc.strerror)
            return None
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            kind = {errno.ELOOP: "a link", errno.EISDIR: "a folder"}.get(exc.errno, "not a plain file")
            raise BindscopeError(
                f"the lock file {path} is {kind}, not made by bindscope, which never writes through it: remove it "
                "(or choose another --out)"
            ) from None
        raise
    try:
        places.check_plain_file(fd, path, "the lock file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not unlinked, nor replaced by anything, a link included)."""
    try:
        opened, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _describe_holder(fd: int, path: Path) -> None:
    previous = _read_holder(path)
    if previous.get("pid") and previous.get("pid") != os.getpid():
        log.info("taking over %s from process %s, which is gone", path, previous.get("pid"))
    record = {
        "writer": writer(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:500] if sys.argv else "",
    }
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)


def _read_holder(path: Path) -> dict:
    try:
        fd = os.open(path, os.O_RDONLY | _LOCK_FLAGS)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        data = json.loads(os.read(fd, 1 << 16) or b"{}")
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else {}


def _holder(path: Path) -> str:
    """``pid N on HOST since T: COMMAND``, read from the lock file (its holder may be mid-write)."""
    for _ in range(10):
        data = _read_holder(path)
        if data.get("pid"):
            where = f" on {data['host']}" if data.get("host") and data["host"] != socket.gethostname() else ""
            command = f", `{data['command']}`" if data.get("command") else ""
            return f"pid {data['pid']}{where}, started {data.get('started', '?')}{command}"
        time.sleep(0.05)
    return "pid unknown"


def _release(target: Path, fd: int) -> None:
    path = lock_path(target)
    with contextlib.suppress(OSError):
        if _same_file(fd, path):  # only the file this process locked, never what took its name since
            os.unlink(path)  # before unlocking: a waiter then re-opens and finds a fresh file
    os.close(fd)


def is_locked(target: Path) -> bool:
    """Whether another process holds ``target``'s lock now."""
    path = lock_path(target)
    try:
        fd = os.open(path, os.O_RDONLY | _LOCK_FLAGS)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _is_leftover(name: str, of: str | None = None) -> bool:
    """Whether ``name`` is one of the hidden names bindscope's writers use (of the output ``of``), exactly."""
    prefix = "." if of is None else f".{of}."
    if not name.startswith(prefix):
        return False
    return any(p.match(name) for p in (_STAGE, _REPLACED, _STALE_TMP))


def remove_leftovers(target: Path) -> list[Path]:
    """Delete what dead writers of ``target`` left: beside it (its own staging names) and inside it.

    Called with the lock held, so nothing found belongs to a live writer of ``target``; a sub-folder
    whose own lock is held by another process is left alone. Returns what was removed.
    """
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        siblings = [e for e in target.parent.iterdir() if _is_leftover(e.name, target.name)]
        replaced = sorted((e for e in siblings if _REPLACED.match(e.name)), key=lambda e: e.stat().st_mtime)
        if replaced and not target.exists() and _restorable(replaced[-1]):  # killed mid-replacement
            os.replace(replaced[-1], target)
            log.warning("restored %s from %s, left by an interrupted replacement", target, replaced[-1])
            siblings.remove(replaced[-1])
        for entry in siblings:
            _remove(entry, removed)
    if target.is_dir() and not target.is_symlink() and written_kind(target) is not None:  # never in a user's folder
        _remove_inside(target, removed)
    if removed:
        log.info("removed %d leftover(s) of an interrupted write: %s", len(removed), ", ".join(map(str, removed)))
    return removed


def _restorable(folder: Path) -> bool:
    """Whether ``folder`` is an output bindscope moved away (a real folder with its mark, not a link)."""
    return folder.is_dir() and not folder.is_symlink() and written_kind(folder) is not None


def _remove_inside(folder: Path, removed: list[Path]) -> None:
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        busy = {d for d in dirs if is_locked(here / d)}
        for name in [*dirs, *files]:
            if name in busy or any(name.startswith(f".{b}.") for b in busy):
                continue
            stale_lock = name.startswith(".") and name.endswith(".lock") and not is_locked(here / name[1:-5])
            if stale_lock or _is_leftover(name):
                _remove(here / name, removed)
        dirs[:] = [d for d in dirs if d not in busy and (here / d).is_dir() and not (here / d).is_symlink()]


def _remove(path: Path, removed: list[Path]) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        log.warning("could not remove leftover %s (%s)", path, exc.strerror)
        return
    removed.append(path)
