"""Atomic files and folders: a failure leaves the old content and no partial file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_file, read_json, save_npy, staged_dir


def test_failed_atomic_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(path) as fh:
        fh.write("new, half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_save_npy_round_trip_and_no_pickles(tmp_path: Path) -> None:
    save_npy(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.load(tmp_path / "x.npy").shape == (2, 3)
    with pytest.raises(ValueError):
        save_npy(tmp_path / "y.npy", np.array([{"a": 1}], dtype=object))
    assert not (tmp_path / "y.npy").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_staged_dir_appears_only_when_complete(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), staged_dir(tmp_path / "out", kind="result") as stage:
        (stage / "part.txt").write_text("x")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with staged_dir(tmp_path / "out", kind="result") as stage:
        (stage / "done.txt").write_text("x")
    assert (tmp_path / "out" / "done.txt").is_file()
    (tmp_path / "file").write_text("x")
    with (
        pytest.raises(BindscopeError, match="exists and is not a folder"),
        staged_dir(tmp_path / "file", kind="result"),
    ):
        pass


def test_read_json_messages(tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="thing .* is missing"):
        read_json(tmp_path / "nope.json", "thing")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(BindscopeError, match="must hold a JSON object"):
        read_json(tmp_path / "list.json", "thing")
