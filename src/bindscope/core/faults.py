"""Named kill points (``BINDSCOPE_KILL_AT``) and fail points (``BINDSCOPE_FAIL_AT``), for fault tests.

A long command passes :func:`kill_point` at the moments a crash is most likely to hurt: before a
file or folder is moved into place, after each chunk of embeddings or images, after each training
step. With ``BINDSCOPE_KILL_AT=NAME`` (or ``NAME:N``, the N-th pass) in the environment, the process
kills itself with SIGKILL there: no handler, no cleanup, as in a power loss. ``NAME:N:SIGINT`` (or any
other signal's name) sends that signal instead, so Ctrl-C or SIGTERM arrives at a known moment. Unset, it
costs a dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "BINDSCOPE_KILL_AT"

_passes: Counter[str] = Counter()


def kill_point(name: str) -> None:
    """SIGKILL this process here (or send it the named signal) if ``BINDSCOPE_KILL_AT`` names this point and pass."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, rest = wanted.partition(":")
    if point != name:
        return
    nth, _, signame = rest.partition(":")
    _passes[name] += 1
    if _passes[name] == int(nth or 1) or (_passes[name] > int(nth or 1) and not signame):
        os.kill(os.getpid(), getattr(signal, signame or "SIGKILL"))


FAIL_ENV = "BINDSCOPE_FAIL_AT"
FAIL_DIR_ENV = "BINDSCOPE_FAIL_DIR"
_FAIL_MODES = ("raise", "kill")


class InjectedFault(RuntimeError):
    """The error a ``raise`` fail point throws."""


def fail_point(name: str) -> None:
    """Fail here on some passes over all processes: ``BINDSCOPE_FAIL_AT=NAME:MODE:N[:SKIP]`` makes passes
    SKIP+1 .. SKIP+N fail, MODE ``raise`` (an exception, as from a bug or a flaky node) or ``kill``
    (SIGKILL, as from a lost worker). Passes are counted by files made in ``BINDSCOPE_FAIL_DIR``, so a
    retry in another process sees the count; the plan may also be written to ``BINDSCOPE_FAIL_DIR/plan``
    (read at every pass: for workers started before the test armed it). Unset, it costs a lookup."""
    folder = os.environ.get(FAIL_DIR_ENV)
    wanted = os.environ.get(FAIL_ENV) or _planned(folder)
    if not wanted:
        return
    parts = wanted.strip().split(":")
    point, mode, times, skip = parts + ["", "raise", "1", "0"][len(parts) :]
    if point != name or mode not in _FAIL_MODES:
        return
    if not folder:
        raise RuntimeError(f"{FAIL_ENV} needs {FAIL_DIR_ENV}: a folder that counts the passes")
    n = _claim_pass(folder, name)
    if not int(skip) < n <= int(skip) + int(times):
        return
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"injected fault at {name} (pass {n})")


def _planned(folder: str | None) -> str | None:
    if not folder:
        return None
    try:
        with open(os.path.join(folder, "plan")) as fh:
            return fh.read()
    except OSError:
        return None


def _claim_pass(folder: str, name: str) -> int:
    """The number of this pass: the first ``name.K`` file this process manages to create."""
    os.makedirs(folder, exist_ok=True)
    n = 1
    while True:
        try:
            os.close(os.open(os.path.join(folder, f"{name}.{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1
