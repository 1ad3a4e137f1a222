"""Named kill points, for the tests that SIGKILL a command mid-write (``BINDSCOPE_KILL_AT``).

A long command passes :func:`kill_point` at the moments a crash is most likely to hurt: before a
file or folder is moved into place, after each chunk of embeddings or images, after each training
step. With ``BINDSCOPE_KILL_AT=NAME`` (or ``NAME:N``, the N-th pass) in the environment, the process
kills itself with SIGKILL there: no handler, no cleanup, as in a power loss. Unset, it costs a
dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "BINDSCOPE_KILL_AT"

_passes: Counter[str] = Counter()


def kill_point(name: str) -> None:
    """SIGKILL this process here if ``BINDSCOPE_KILL_AT`` names this point (and pass)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _passes[name] += 1
    if _passes[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
