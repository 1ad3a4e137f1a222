"""One writer per output: the lock every writing command takes, tested with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from bindscope.cli import main
from bindscope.core.errors import BindscopeError
from bindscope.core.io import mark_output
from bindscope.core.locks import is_locked, lock_path, output_lock, remove_leftovers
from cli_checks import assert_one_line_error, command_in_process

HOLDER = """
import contextlib, sys
from bindscope.core.locks import output_lock
with contextlib.ExitStack() as stack:
    for target in sys.argv[1:]:
        stack.enter_context(output_lock(target))
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


@contextmanager
def held_by_another_process(tmp_path: Path, *targets: Path) -> Iterator[subprocess.Popen]:
    """A second Python process holding the locks of ``targets`` until the block ends (awaited through its pipes,
    not by polling)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, targets)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline() == "held\n", "the holder process did not take its locks"
        yield proc
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.stdout.close()


def test_a_second_writer_is_refused_naming_the_holder_then_waits_with_wait(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with held_by_another_process(tmp_path, out) as holder:
        done = run_cli("dataset", "build", "clevr", "--no-images", "--out", out)
        assert_one_line_error(done, f"another bindscope process (pid {holder.pid}, started ")
        assert f"is writing dataset {out.resolve()}; wait for it to finish, rerun with --wait" in done.stderr
        assert not out.exists()
        env = {**os.environ, "NO_COLOR": "1"}
        cmd = [str(Path(sys.executable).with_name("bindscope")), "dataset", "build", "clevr", "--no-images"]
        waiting = subprocess.Popen(
            [*cmd, "--out", str(out), "--wait"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert waiting.stderr is not None
        queued = waiting.stderr.readline()  # returns once the command says it waits: an event, not a sleep
        assert f"waiting for pid {holder.pid}" in queued, queued
        assert waiting.poll() is None and not out.exists()  # still queued behind the holder
    _, stderr = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, queued + stderr
    assert (out / "manifest.json").is_file() and not lock_path(out).exists()


def test_a_lock_left_by_a_killed_process_is_taken_over(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with held_by_another_process(tmp_path, out) as holder:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert lock_path(out).is_file() and str(holder.pid) in lock_path(out).read_text()  # the dead holder's file
        assert not is_locked(out)
        done = run_cli("dataset", "build", "clevr", "--no-images", "--out", out)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file() and not lock_path(out).exists()


def test_leftovers_of_dead_writers_are_removed_but_not_those_of_a_live_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    mark_output(out, "run")  # inside a folder bindscope wrote (never inside a user's: see the next test)
    dead = [
        tmp_path / ".out.k3j9x0q1.partial",
        tmp_path / ".out.old-12345",
        tmp_path / ".out.Ab3_xY7z.tmp",
        out / ".manifest.json.ab12cd34.tmp",
        out / "sub" / ".table.parquet.zz99yy88.tmp",
        out / "sub" / ".gone.12345678.partial",
        out / ".gone.lock",
    ]
    for path in dead:
        path.mkdir() if path.suffix == ".partial" or ".old-" in path.name else path.write_text("x")
    kept_dirs = [
        tmp_path / ".out.embedding-0123456789abcdef",  # an unfinished embedding job resumes from it
        tmp_path / ".other.k3j9x0q1.partial",  # another target's
    ]
    for path in kept_dirs:
        path.mkdir()
    (out / "sub" / "data.tmp").write_text("x")  # not a hidden atomic file
    (out / "busy").mkdir()
    live = [out / ".busy.a1b2c3d4.partial", out / "busy" / ".x.a1b2c3d4.tmp"]
    with held_by_another_process(tmp_path, out / "busy"):
        live[0].mkdir()  # made after the holder took its lock (taking it clears what dead writers left)
        live[1].write_text("x")
        with output_lock(out):
            pass
        assert [p for p in dead if p.exists()] == []
        assert all(p.exists() for p in [*kept_dirs, out / "sub" / "data.tmp", *live])
    assert set(remove_leftovers(out)) == set(live)  # once its writer is gone


def test_the_lock_is_reentrant_in_one_process_by_any_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    with output_lock(tmp_path / "real" / "out"), output_lock(tmp_path / "alias" / "out"):
        with output_lock(tmp_path / "real" / "out"):
            assert lock_path(tmp_path / "real" / "out").is_file()
        assert lock_path(tmp_path / "real" / "out").is_file()
    assert not lock_path(tmp_path / "real" / "out").exists()


def test_a_lock_where_nothing_can_be_written_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with (
        pytest.raises(BindscopeError, match="cannot create .*file for .*; choose another --out"),
        output_lock(tmp_path / "file" / "out"),
    ):
        pass


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> dict[str, Path]:
    """A planted image and text embedding folder of clevr, a small array file."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("lock-inputs")
    scenes = load_dataset(clevr_dir).scenes
    paths = {"dataset": clevr_dir, "array": root / "array.npy"}
    np.save(paths["array"], planted_embeddings(scenes, "object_additive", dim=8, seed=0))
    for modality, seed in (("image", 1), ("text", 2)):
        array = planted_embeddings(scenes, "object_additive", dim=8, seed=seed)
        paths[modality] = import_embeddings(
            clevr_dir, _saved(root / f"{modality}.npy", array), name=modality, modality=modality, out=root / modality
        ).root
    return paths


def _saved(path: Path, array: np.ndarray) -> Path:
    np.save(path, array)
    return path


# every command that writes: its arguments (the output last) and the path it locks
WRITERS = {
    "dataset build": (["dataset", "build", "clevr", "--no-images", "--out", "{out}"], "{out}"),
    "dataset preview": (["dataset", "preview", "{dataset}", "--out", "{out}.png"], "{out}.png"),
    "dataset split": (
        ["dataset", "split", "{dataset}", "--level", "scene", "--fractions", "0.4", "--out", "{out}"],
        "{out}/scene_seed0_f0.4.json",
    ),
    "embed": (["embed", "{dataset}", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "-o", "{out}"], "{out}"),
    "embeddings import": (
        ["embeddings", "import", "{dataset}", "{array}", "--name", "a", "--modality", "text", "--out", "{out}"],
        "{out}",
    ),
    "probe": (["probe", "{text}", "--out", "{out}"], "{out}"),
    "decompose": (["decompose", "{text}", "--out", "{out}"], "{out}"),
    "complexity": (["complexity", "{text}", "--out", "{out}"], "{out}"),
    "intervene": (["intervene", "{text}", "--out", "{out}"], "{out}"),
    "crossmodal": (["crossmodal", "{image}", "{text}", "--out", "{out}"], "{out}"),
    "geometry": (["geometry", "{text}", "--out", "{out}"], "{out}"),
    "scratch train": (["scratch", "train", "--config", "cpu-small", "--out", "{out}"], "{out}"),
    "scratch sweep": (["scratch", "sweep", "--config", "cpu-small", "--out", "{out}"], "{out}"),
    "run": (["run", "demo-quick", "--out", "{out}"], "{out}"),
    "report": (["report", "{out}"], "{out}"),
    "compare": (["compare", "{text}", "--out", "{out}"], "{out}"),
}


def test_every_writing_command_takes_the_lock_on_its_output(
    inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    jobs = {}
    for name, (args, locked) in WRITERS.items():
        values = {**{k: str(v) for k, v in inputs.items()}, "out": str(tmp_path / name.replace(" ", "-"))}
        jobs[name] = ([a.format(**values) for a in args], Path(locked.format(**values)))
    with held_by_another_process(tmp_path, *(target for _, target in jobs.values())) as holder:
        for name, (argv, target) in jobs.items():
            capsys.readouterr()
            with command_in_process(), pytest.raises(SystemExit) as stop:
                main(argv)
            err = capsys.readouterr().err
            assert stop.value.code == 1, (name, err)
            assert err.startswith(f"error: another bindscope process (pid {holder.pid}") and err.count("\n") == 1, (
                name,
                err,
            )
            assert str(target.resolve()) in err, (name, err)
