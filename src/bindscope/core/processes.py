"""Worker process pools that never run the user's script again.

Worker processes are spawned (a fresh interpreter: forking a process that holds torch's threads can
deadlock). Python's spawn start method imports the parent's main module in every worker, which runs a
script saved without an ``if __name__ == "__main__":`` guard a second time: the worker would then build
the dataset the script builds, meet the parent's lock on its output, and die. bindscope's workers only
run bindscope functions, so the pools here start their workers with the main script hidden, and a plain
script (or a notebook) works as it is. A function defined in the main script cannot be sent to such a
worker; define it in a module.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

#: The attributes by which spawned workers find (and import) the main module.
_MAIN_MARKS = ("__file__", "__spec__")


@contextlib.contextmanager
def main_script_hidden() -> Iterator[None]:
    """While workers start inside this block, they do not import the parent's main module."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in _MAIN_MARKS if main is not None and hasattr(main, k)}
    try:
        if main is not None:
            main.__spec__ = None
            if "__file__" in saved:
                del main.__file__
        yield
    finally:
        for key, value in saved.items():
            setattr(main, key, value)


def spawn_pool(
    workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple[Any, ...] = ()
) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes; start work on it with :func:`submit_all`."""
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=initializer, initargs=initargs)


def submit_all(pool: ProcessPoolExecutor, calls: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Future]:
    """Submit every ``(fn, args)``; the pool starts its workers meanwhile, with the main script hidden."""
    with main_script_hidden():
        return [pool.submit(fn, *args) for fn, args in calls]
