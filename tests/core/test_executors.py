"""The executors without a cluster: units in order, in worker processes, kept between runs, and refused."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from bindscope.core.errors import BindscopeError
from bindscope.core.executors import (
    ExecutorChoice,
    LocalExecutor,
    Resources,
    Unit,
    UnitStore,
    check_fits,
    current_executor,
    using_executor,
)


def square(state: int, x: int) -> int:
    return state + x * x


def boom(state: object, x: int) -> int:
    raise ValueError(f"no square for {x}")


def units(n: int, fn=square) -> list[Unit]:
    return [Unit(f"k{i}", f"square of {i}", fn, (i,)) for i in range(n)]


def test_local_units_run_in_order_with_their_state() -> None:
    done = list(LocalExecutor().map(units(4), 10))
    assert [d.result for d in done] == [10, 11, 14, 19] and not any(d.reused for d in done)


def test_worker_processes_give_the_same_results() -> None:
    done = LocalExecutor(workers=2).map(units(5), 1)
    assert sorted(d.result for d in done) == [1, 2, 5, 10, 17]


def test_a_failing_unit_is_named_with_its_inputs() -> None:
    with pytest.raises(BindscopeError, match=r"unit square of 0 \(key k0\) failed: no square for 0"):
        list(LocalExecutor().map(units(2, boom), 0))


def full(state: object, x: int) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def gone(state: object, x: int) -> int:
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", "x")


def test_a_write_the_disk_refused_stays_itself() -> None:
    """The command line turns it into its one line (free some space, a writable disk); any other error is named
    with its unit."""
    with pytest.raises(OSError) as refused:
        list(LocalExecutor().map(units(2, full), 0))
    assert refused.value.errno == errno.ENOSPC
    with pytest.raises(BindscopeError, match=r"unit square of 0 \(key k0\) failed: .*No such file"):
        list(LocalExecutor().map(units(1, gone), 0))


def test_finished_units_are_kept_and_not_run_again(tmp_path: Path) -> None:
    store = UnitStore(tmp_path / "units")
    list(LocalExecutor().map(units(2), 0, store=store))
    assert len(store) == 2
    (tmp_path / "units" / "k1.json").write_text("{not json")  # a damaged result counts as missing
    done = list(LocalExecutor().map(units(3), 0, store=store))
    assert [(d.result, d.reused) for d in done] == [(0, True), (1, False), (4, False)]


def test_two_units_with_one_key_are_refused() -> None:
    twins = [Unit("same", "a", square, (1,)), Unit("same", "b", square, (2,))]
    with pytest.raises(BindscopeError, match="two units share a content key"):
        list(LocalExecutor().map(twins, 0))


def test_a_unit_larger_than_the_cluster_is_refused() -> None:
    gpu = Unit("g", "rows 0..9 of hf:x (image)", square, (1,), Resources(gpus=1))
    with pytest.raises(BindscopeError, match=r"asks for 1 GPUs but the Ray cluster has 0; .*--num-gpus 1"):
        check_fits([gpu], {"CPU": 2.0, "memory": 8e9})
    big = Unit("m", "m", square, (1,), Resources(memory_gb=64))
    with pytest.raises(BindscopeError, match=r"asks for 64 GB of memory but the Ray cluster has 7.45; lower --memory"):
        check_fits([big], {"CPU": 2.0, "memory": 8e9})
    check_fits([Unit("c", "c", square, (1,))], {"CPU": 2.0})


def test_the_choice_is_checked_and_scoped() -> None:
    with pytest.raises(BindscopeError, match="unknown executor 'dask'"):
        ExecutorChoice("dask").make()
    with pytest.raises(BindscopeError, match="--memory is for --executor ray"):
        ExecutorChoice("local", memory_gb=2).make()
    with pytest.raises(BindscopeError, match="--workers must be at least 1"):
        LocalExecutor(workers=0)
    with using_executor("local", workers=3) as executor:
        assert current_executor() is executor and executor.describe() == {"executor": "local", "workers": 3}
    assert current_executor().describe() == {"executor": "local", "workers": 1}
