"""How many threads a piece of work gets: the one place that decides it, and the one thread pool that is reused.

Small tensor operations (a few hundred rows, a matmul of a few million multiply-adds) run faster on one torch
thread: with more, each operation waits for the other threads to wake and join, which costs more than they save.
:func:`threads_for` gives work below :data:`SMALL_WORK` one thread and larger work every thread the process has.
:func:`shared_pool` is the process's one pool of Python threads (for work that releases the GIL, such as numpy or
torch kernels on independent blocks): created on first use and reused, never one per call.

Neither imports torch until it is called, so a command that needs no tensors pays nothing for this module.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

#: Multiply-adds (or elements touched) below which one torch thread is faster than several.
SMALL_WORK = 50_000_000

_pool_lock = threading.Lock()
_pool: list[ThreadPoolExecutor] = []


def thread_count(work: int, small: int = SMALL_WORK) -> int:
    """The torch threads ``work`` (its multiply-adds, or elements touched) should run on: 1 when small, else all.

    Parameters
    ----------
    work
        The size of the work, in multiply-adds or elements.
    small
        The size below which one thread is faster (:data:`SMALL_WORK`).

    Examples
    --------
    >>> from bindscope.core.threads import thread_count
    >>> thread_count(1_000)
    1
    """
    import torch

    return 1 if work < small else max(1, torch.get_num_threads())


@contextmanager
def threads_for(work: int, small: int = SMALL_WORK) -> Iterator[int]:
    """Run the block on :func:`thread_count` torch threads; the process's setting is put back after it.

    Yields the number of threads the block runs on.

    Examples
    --------
    >>> import torch
    >>> from bindscope.core.threads import threads_for
    >>> with threads_for(10) as n:
    ...     n, torch.get_num_threads()
    (1, 1)
    """
    import torch

    before = torch.get_num_threads()
    threads = thread_count(work, small)
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextmanager
def blas_threads_for(work: int, small: int = SMALL_WORK) -> Iterator[None]:
    """numpy's (and scipy's) BLAS on one thread for ``work`` below ``small``, as :func:`threads_for` does torch's;
    larger work keeps the library's setting. Imports no torch (``threadpoolctl`` sets the BLAS library's threads)."""
    if work >= small:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def pool_size() -> int:
    """The threads of :func:`shared_pool`: one per CPU core this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores)


def shared_pool() -> ThreadPoolExecutor:
    """The process's one pool of worker threads (:func:`pool_size` of them), created on first use."""
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(pool_size(), thread_name_prefix="bindscope-worker"))
            atexit.register(_pool[0].shutdown, wait=False)
        return _pool[0]


__all__ = ["SMALL_WORK", "blas_threads_for", "pool_size", "shared_pool", "thread_count", "threads_for"]
