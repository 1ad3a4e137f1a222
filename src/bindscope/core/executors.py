"""Where units of work run: in this process, in local worker processes, or on a Ray cluster.

A unit of work is a pure function of its inputs, named by its content key::

    fn(state, *args) -> result         state = setup(shared), made once per worker process

``shared`` holds what every unit reads (embeddings, scenes, a model spec): it travels once per
worker (Ray: once into the object store), never once per unit. ``setup`` turns it into the
worker's state (e.g. a loaded model, so that a worker loads its model once) and is cached in the
worker process. Analyses hand units to :func:`current_executor` and never learn where they ran.

- ``local`` (the default): ``workers=1`` runs units here, in order; more runs them in that many
  spawned processes, splitting the CPU threads between them.
- ``ray``: units become Ray tasks with resource requests (CPUs, GPUs, memory) on the cluster at
  ``address`` (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``), or on a Ray instance started here
  without one. A unit that raises is retried (bounded) and then reported with its inputs; a unit
  whose worker died is rescheduled by Ray.

Units whose results are kept in a :class:`UnitStore` are not run again: an interrupted sweep
resumes with its unfinished units.
"""

from __future__ import annotations

import contextvars
import math
import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bindscope.core.errors import BindscopeError, disk_error_message
from bindscope.core.io import atomic_file, read_json

EXECUTORS = ("local", "ray")
#: How often Ray runs a unit that raised before reporting it (the first run included: 1 + retries).
DEFAULT_RETRIES = 2
MAX_RAY_BASE = 32  # + "/ray-XXXXXXXX/session_<date>_<time>_<us>_<pid>/sockets/plasma_store" <= 107 bytes
RAY_INSTALL = "Ray is not installed: pip install 'bindscope[ray]' (or pip install 'ray>=2.9'), then run again"


@dataclass(frozen=True)
class Resources:
    """What one unit asks the scheduler for (Ray honours all three; ``local`` only CPUs)."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_gb: float | None = None

    @classmethod
    def for_device(cls, device: str) -> Resources:
        """One CPU, and a GPU when the work runs on ``cuda``."""
        return cls(gpus=1.0 if device.startswith("cuda") else 0.0)


@dataclass(frozen=True)
class Unit:
    """One unit of work: ``fn(state, *args)`` under content key ``key``; ``label`` names its inputs;
    ``cost``: a relative estimate of its work (Ray starts the costliest first: a shorter sweep)."""

    key: str
    label: str
    fn: Callable[..., Any]
    args: tuple = ()
    resources: Resources = field(default_factory=Resources)
    cost: float = 0.0


@dataclass(frozen=True)
class Done:
    """A finished unit: its result, where it ran, and whether it came from the store."""

    unit: Unit
    result: Any
    reused: bool = False


def _identity(shared: Any) -> Any:
    return shared


# -- per-worker state ------------------------------------------------------------------------------------
_STATE: dict[tuple[str, str], Any] = {}


def _state(setup: Callable[[Any], Any], shared: Any, token: str) -> Any:
    """``setup(shared)``, made once per worker process for a given map (``token``)."""
    key = (f"{setup.__module__}.{setup.__qualname__}", token)
    if key not in _STATE:
        _STATE.clear()  # one map's state at a time: a worker holds one model, not all it ever loaded
        _STATE[key] = setup(shared)
    return _STATE[key]


def run_unit(setup: Callable[[Any], Any], shared: Any, token: str, fn: Callable[..., Any], args: tuple) -> Any:
    """What a worker runs for one unit (module level, so that process pools and Ray can ship it)."""
    from bindscope.core.faults import fail_point

    fail_point("unit")
    return fn(_state(setup, shared, token), *args)


# -- results kept between runs ------------------------------------------------------------------------------
class UnitStore:
    """Finished units' results as JSON files ``<key>.json`` in a folder: what a rerun does not redo."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` for a kept unit, else ``(False, None)`` (a damaged file counts as missing)."""
        path = self._path(key)
        if not path.is_file():
            return False, None
        try:
            return True, read_json(path, "unit result")["result"]
        except (BindscopeError, KeyError, TypeError):
            return False, None

    def put(self, key: str, result: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        import json

        with atomic_file(self._path(key), "w") as fh:
            json.dump({"key": key, "result": result}, fh, default=_jsonable)

    def __len__(self) -> int:
        return len(list(self.folder.glob("*.json"))) if self.folder.is_dir() else 0


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"a unit returned {type(value).__name__}, which a unit store cannot keep")


# -- executors ------------------------------------------------------------------------------------------------
class Executor(ABC):
    """Runs units and yields them as they finish (in any order)."""

    name: str
    distributed: bool = False  # whether units leave this machine (then work is cut finer, sent by spec)

    def map(
        self,
        units: Sequence[Unit],
        shared: Any = None,
        *,
        setup: Callable[[Any], Any] = _identity,
        store: UnitStore | None = None,
    ) -> Iterator[Done]:
        """Run ``units`` (those kept in ``store`` are yielded from it, first); each new result is
        put in ``store`` before it is yielded, so that an interruption loses only running units."""
        keys = [u.key for u in units]
        if len(set(keys)) != len(keys):
            raise BindscopeError("two units share a content key; each unit must be named by its own inputs")
        todo = []
        for unit in units:
            kept, result = store.get(unit.key) if store is not None else (False, None)
            if kept:
                yield Done(unit, result, reused=True)
            else:
                todo.append(unit)
        if not todo:
            return
        token = f"{os.getpid()}-{time.monotonic_ns()}"
        for done in self._run(todo, shared, setup, token):
            if store is not None:
                store.put(done.unit.key, done.result)
            yield done

    @abstractmethod
    def _run(self, units: list[Unit], shared: Any, setup: Callable[[Any], Any], token: str) -> Iterator[Done]: ...

    def describe(self) -> dict[str, Any]:
        """What the results record about where they ran."""
        return {"executor": self.name}

    def close(self) -> None:  # noqa: B027 (an optional hook)
        """Release workers (nothing by default)."""


def failed_unit(unit: Unit, error: BaseException, attempts: int) -> BindscopeError:
    """The error for a unit that kept failing: what it was given, and what it raised."""
    detail = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return BindscopeError(f"unit {unit.label} (key {unit.key[:12]}) failed{tries}: {detail}")


class LocalExecutor(Executor):
    """Units in this process (``workers=1``, in order) or in ``workers`` spawned processes."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise BindscopeError(f"--workers must be at least 1, got {workers}")
        self.workers = workers

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}

    def _run(self, units: list[Unit], shared: Any, setup: Callable[[Any], Any], token: str) -> Iterator[Done]:
        if self.workers == 1 or len(units) == 1:
            try:
                for unit in units:
                    yield Done(unit, _reported(unit, run_unit, setup, shared, token, unit.fn, unit.args))
            finally:
                _STATE.clear()
            return
        yield from self._pool(units, shared, setup, token)

    def _pool(self, units: list[Unit], shared: Any, setup: Callable[[Any], Any], token: str) -> Iterator[Done]:
        from concurrent.futures import as_completed

        from bindscope.core.processes import spawn_pool, submit_all

        threads = max(1, (os.cpu_count() or 1) // self.workers)
        pool = spawn_pool(min(self.workers, len(units)), _set_threads, (threads,))
        try:
            submitted = submit_all(pool, ((run_unit, (setup, shared, token, u.fn, u.args)) for u in units))
            futures = dict(zip(submitted, units))
            for future in as_completed(futures):
                yield Done(futures[future], _reported(futures[future], _pool_result, future))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _reported(unit: Unit, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an error that is not already a one-line :class:`BindscopeError` names the unit, except a
    write the disk refused (full, read-only), which stays itself: the command line says what to do about it."""
    try:
        return fn(*args)
    except BindscopeError:
        raise
    except OSError as exc:
        if disk_error_message(exc) is None:
            raise failed_unit(unit, exc, 1) from exc
        raise
    except Exception as exc:
        raise failed_unit(unit, exc, 1) from exc


def _pool_result(future: Any) -> Any:
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:
        raise BindscopeError(
            "a worker process died (killed, or out of memory); finished units are kept: run the same "
            "command again to continue, with fewer --workers if memory is short"
        ) from None


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


class RayExecutor(Executor):
    """Units as Ray tasks on the cluster at ``address`` (or a Ray instance started here)."""

    name = "ray"
    distributed = True

    def __init__(
        self,
        address: str | None = None,
        *,
        retries: int = DEFAULT_RETRIES,
        num_cpus: int | None = None,
        temp_dir: str | None = None,
        memory_gb: float | None = None,
    ) -> None:
        if retries < 0:
            raise BindscopeError(f"retries must be at least 0, got {retries}")
        if memory_gb is not None and memory_gb <= 0:
            raise BindscopeError(f"--memory must be positive (GB per unit of work), got {memory_gb:g}")
        self.address, self.retries, self.memory_gb = address, retries, memory_gb
        if address is None:  # a Ray started here uses the loopback address (read when ray is imported)
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        self.ray = _import_ray()
        self._started_here = False
        self._own_temp: str | None = None
        if not self.ray.is_initialized():
            self._connect(num_cpus, temp_dir)

    def _connect(self, num_cpus: int | None, temp_dir: str | None) -> None:
        options: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False, "include_dashboard": False}
        if self.address is None:
            self._own_temp = None if temp_dir else ray_temp_dir()
            options |= {"num_cpus": num_cpus, "_temp_dir": temp_dir or self._own_temp}
            self._started_here = True
        try:
            self.ray.init(address=self.address, **options)
        except ConnectionError as exc:
            raise BindscopeError(
                f"could not reach a Ray cluster at {self.address}: {exc}. Start one with `ray start --head` "
                "(see the README), or drop --address to start a Ray instance on this machine"
            ) from None
        except Exception as exc:  # ray raises RuntimeError/ValueError for bad addresses or a stale session
            where = self.address or "none: a local instance"
            raise BindscopeError(f"could not start or join Ray (address {where}): {exc}") from None

    def describe(self) -> dict[str, Any]:
        resources = self.ray.cluster_resources()
        return {
            "executor": self.name,
            "address": self.address or "local",
            "cpus": resources.get("CPU", 0),
            "gpus": resources.get("GPU", 0),
            "nodes": len([n for n in self.ray.nodes() if n.get("Alive")]),
        }

    def _run(self, units: list[Unit], shared: Any, setup: Callable[[Any], Any], token: str) -> Iterator[Done]:
        ray = self.ray
        if self.memory_gb is not None:  # --memory: what a unit reserves unless it asks for more
            units = [
                replace(u, resources=replace(u.resources, memory_gb=max(u.resources.memory_gb or 0, self.memory_gb)))
                for u in units
            ]
        check_fits(units, ray.cluster_resources())
        shared_ref = ray.put(shared)
        remote = ray.remote(run_unit)
        pending = {}
        for unit in sorted(units, key=lambda u: -u.cost):  # longest first: the last unit to finish is short
            r = unit.resources
            options: dict[str, Any] = {
                "num_cpus": r.cpus,
                "num_gpus": r.gpus,
                "max_retries": self.retries,  # worker deaths and, with retry_exceptions, errors
                "retry_exceptions": [Exception],
            }
            if r.memory_gb:
                options["memory"] = int(r.memory_gb * 2**30)
            ref = remote.options(**options).remote(setup, shared_ref, token, unit.fn, unit.args)
            pending[ref] = unit
        failures: list[BindscopeError] = []
        try:
            while pending:  # after a failure the other units still finish and are kept: a rerun redoes less
                ready, _ = ray.wait(list(pending), num_returns=1)
                unit = pending.pop(ready[0])
                try:
                    result = self._result(ready[0], unit)
                except BindscopeError as exc:
                    failures.append(exc)
                    continue
                yield Done(unit, result)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
        if failures:
            more = f" ({len(failures) - 1} other unit(s) failed too)" if len(failures) > 1 else ""
            raise BindscopeError(f"{failures[0]}{more}")

    @staticmethod
    def _with_memory(unit: Unit, memory_gb: float) -> Unit:
        return replace(unit, resources=replace(unit.resources, memory_gb=max(unit.resources.memory_gb or 0, memory_gb)))

    def _result(self, ref: Any, unit: Unit) -> Any:
        from ray import exceptions as rex

        try:
            return self.ray.get(ref)
        except rex.RayTaskError as exc:
            cause = exc.as_instanceof_cause()
            if isinstance(cause, BindscopeError):
                raise BindscopeError(f"unit {unit.label}: {_cause_text(exc)}") from None
            raise failed_unit(unit, RuntimeError(_cause_text(exc)), 1 + self.retries) from None
        except (rex.WorkerCrashedError, rex.NodeDiedError, rex.OutOfMemoryError) as exc:
            raise BindscopeError(
                f"unit {unit.label} (key {unit.key[:12]}) lost its worker {1 + self.retries} times "
                f"({type(exc).__name__}); finished units are kept: run the same command again to continue, "
                "or give it more memory"
            ) from None

    def close(self) -> None:
        """Stop a Ray instance started here and remove its session files."""
        if self._started_here and self.ray.is_initialized():
            self.ray.shutdown()
        if self._own_temp is not None:
            shutil.rmtree(self._own_temp, ignore_errors=True)


def _cause_text(exc: Any) -> str:
    cause = getattr(exc, "cause", None)
    text = str(cause) if cause is not None else str(exc)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def check_fits(units: Iterable[Unit], cluster: dict[str, float]) -> None:
    """Refuse units that ask for more than the whole cluster has (Ray would wait for ever)."""
    for unit in units:
        r = unit.resources
        for need, have, what, fix in (
            (r.cpus, cluster.get("CPU", 0), "CPUs", "add worker nodes"),
            (
                r.gpus,
                cluster.get("GPU", 0),
                "GPUs",
                "add GPU workers (`ray start --address ... --num-gpus 1`), or run on --device cpu",
            ),
            (
                (r.memory_gb or 0),
                cluster.get("memory", math.inf) / 2**30,
                "GB of memory",
                "lower --memory, or add larger nodes",
            ),
        ):
            if need > have:
                raise BindscopeError(
                    f"unit {unit.label} asks for {need:g} {what} but the Ray cluster has {have:.3g}; {fix}"
                )


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BindscopeError(RAY_INSTALL) from None
    return ray


def ray_temp_dir() -> str:
    """A folder for a Ray instance started here: under ``BINDSCOPE_RAY_TMPDIR``, else the temp folder,
    else ``/tmp`` when that is too long (Ray's socket paths below it must stay under 108 bytes)."""
    base = os.environ.get("BINDSCOPE_RAY_TMPDIR") or tempfile.gettempdir()
    if len(base) > MAX_RAY_BASE:
        base = "/tmp"
    Path(base).mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix="ray-", dir=base)


# -- the executor a command uses ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExecutorChoice:
    """Which executor to make: ``local`` with ``workers``, or ``ray`` at ``address``."""

    name: str = "local"
    address: str | None = None
    workers: int = 1
    retries: int = DEFAULT_RETRIES
    memory_gb: float | None = None

    def check(self) -> None:
        if self.name not in EXECUTORS:
            raise BindscopeError(f"unknown executor {self.name!r}; choose one of {', '.join(EXECUTORS)}")
        if self.address is not None and self.name != "ray":
            raise BindscopeError("--address is for --executor ray; add --executor ray, or drop --address")
        if self.workers < 1:
            raise BindscopeError(f"--workers must be at least 1, got {self.workers}")
        if self.memory_gb is not None and self.name != "ray":
            raise BindscopeError("--memory is for --executor ray (what each unit reserves); add --executor ray")

    def make(self) -> Executor:
        self.check()
        if self.name == "ray":
            return RayExecutor(self.address, retries=self.retries, memory_gb=self.memory_gb)
        return LocalExecutor(self.workers)


_CHOICE: contextvars.ContextVar[ExecutorChoice | None] = contextvars.ContextVar("bindscope_executor", default=None)
_INSTANCE: contextvars.ContextVar[Executor | None] = contextvars.ContextVar("bindscope_executor_instance", default=None)
_MADE: dict[ExecutorChoice, Executor] = {}


def choose_executor(
    name: str | None = None, address: str | None = None, retries: int | None = None, memory_gb: float | None = None
) -> None:
    """Set fields of this process's executor choice (the CLI's ``--executor``, ``--address``; an empty
    address clears it)."""
    current = _CHOICE.get() or ExecutorChoice()
    _CHOICE.set(
        ExecutorChoice(
            current.name if name is None else name,
            current.address if address is None else (address or None),
            current.workers,
            current.retries if retries is None else retries,
            current.memory_gb if memory_gb is None else (memory_gb or None),
        )
    )


def chosen_executor() -> ExecutorChoice:
    """The executor choice in force (checked)."""
    choice = _CHOICE.get() or ExecutorChoice()
    choice.check()
    return choice


@contextmanager
def using_executor(name: str = "local", address: str | None = None, *, workers: int = 1) -> Iterator[Executor]:
    """Run the block's units on this executor, e.g. ``with using_executor("ray", "auto"): ...``."""
    token = _CHOICE.set(ExecutorChoice(name, address, workers))
    try:
        yield current_executor()
    finally:
        _CHOICE.reset(token)


@contextmanager
def executing_on(executor: Executor) -> Iterator[Executor]:
    """Run the block's units on an executor made by the caller (e.g. a Ray executor of given size)."""
    token = _INSTANCE.set(executor)
    try:
        yield executor
    finally:
        _INSTANCE.reset(token)


def current_executor(workers: int | None = None) -> Executor:
    """The executor chosen for this context (made once, then reused); ``workers`` overrides a local
    executor's worker count (commands with their own ``--workers``)."""
    instance = _INSTANCE.get()
    if instance is not None:
        return instance
    choice = chosen_executor()
    if workers is not None and choice.name == "local":
        choice = replace(choice, workers=workers)
    if choice not in _MADE:
        _MADE[choice] = choice.make()
    return _MADE[choice]


_STORE: contextvars.ContextVar[UnitStore | None] = contextvars.ContextVar("bindscope_unit_store", default=None)


@contextmanager
def keeping_units(folder: str | Path) -> Iterator[UnitStore]:
    """Keep the block's finished units in ``folder`` (read by :func:`current_store`)."""
    store = UnitStore(folder)
    token = _STORE.set(store)
    try:
        yield store
    finally:
        _STORE.reset(token)


def current_store() -> UnitStore | None:
    """Where this run keeps finished units (None: nowhere, every unit runs)."""
    return _STORE.get()


def close_executors() -> None:
    """Shut down the executors made by this process (a Ray instance started here stops)."""
    while _MADE:
        _MADE.popitem()[1].close()
