"""Disk trouble: a full disk (a file-size limit, always; a small tmpfs where mounting is allowed) and a
read-only folder. Each is a one-line error, and the previous result is intact, byte for byte."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.io import OUTPUT_MARK
from cli_checks import assert_one_line_error
from forked_cli import ForkServer


def files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def hidden(folder: Path) -> list[str]:
    """Hidden leftovers under ``folder`` (not the mark every output folder carries)."""
    return sorted(p.name for p in folder.rglob(".*") if p.name != OUTPUT_MARK)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("disk-inputs")
    np.save(root / "a.npy", planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=8, seed=0))
    return import_embeddings(clevr_dir, root / "a.npy", name="planted", modality="text", out=root / "emb").root


def bindscope(server: ForkServer, *args: object, limit: int | None = None) -> subprocess.CompletedProcess:
    """The real command, a process of its own forked by ``server`` (the session's ``cli_server``: no start-up
    imports to pay); with ``limit``, no file it writes may grow past that many bytes (EFBIG: a full disk;
    see :meth:`ForkServer.run_with_file_limit`).
    """
    env = {**os.environ, "NO_COLOR": "1"}
    if limit is None:
        return server.run([str(a) for a in args], env, timeout=300)
    return server.run_with_file_limit([str(a) for a in args], env, limit)


PROBE = ("--optimizer", "lbfgs", "-q")
#: A command, then the same output again with other settings and --overwrite.
REWRITES = {
    "probe": (("probe", "{planted}", "--seeds", "0", *PROBE), ("probe", "{planted}", "--seeds", "0,1", *PROBE)),
    "dataset-build": (
        ("dataset", "build", "clevr2d", "--image-size", "24", "--workers", "1", "-q"),
        ("dataset", "build", "clevr", "--image-size", "24", "--workers", "1", "-q"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REWRITES))
def test_a_full_disk_is_one_line_and_the_previous_result_is_intact(
    cli_server: ForkServer, name: str, planted: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first, second = ([a.format(planted=planted) for a in args] + ["--out", out] for args in REWRITES[name])
    done = bindscope(cli_server, *first)
    assert done.returncode == 0, done.stderr
    before = files(out)
    done = bindscope(cli_server, *second, "--overwrite", limit=3000)
    assert_one_line_error(done, "the disk refused the write")
    assert "File too large" in done.stderr and "the previous result is intact" in done.stderr
    assert f"the disk refused the write to {out}" in done.stderr  # the output, never a hidden staging folder
    assert files(out) == before and hidden(tmp_path) == []


def test_a_report_the_disk_refused_leaves_the_page_and_its_card(cli_server: ForkServer, tmp_path: Path) -> None:
    """The card (report/card.csv) and the page are both written in full before either replaces its old self."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: empty\n")
    (run / OUTPUT_MARK).write_text(json.dumps({"written_by": "bindscope", "kind": "run"}))
    done = bindscope(cli_server, "report", run)
    assert done.returncode == 0, done.stderr
    before = files(run)
    assert min((run / "report" / "card.csv").stat().st_size, (run / "report.html").stat().st_size) > 150
    done = bindscope(cli_server, "report", run, limit=150)
    assert_one_line_error(done, "the disk refused the write")
    assert files(run) == before and hidden(tmp_path) == []


def test_a_write_error_that_is_not_the_disk_is_not_disguised() -> None:
    from bindscope.core.errors import disk_error_message

    assert disk_error_message(FileNotFoundError(2, "No such file or directory", "x")) is None
    assert "Read-only file system" in str(disk_error_message(OSError(30, "Read-only file system", "/ro/x")))
    assert "cannot write /ro/x (Read-only" in str(disk_error_message(OSError(30, "Read-only file system", "/ro/x")))
    assert "No space left" in str(disk_error_message(OSError("[Errno 28] No space left on device")))  # pyarrow's


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., None]]:
    """A tiny tmpfs at ``tmp_path/disk``, where the machine lets tests mount one (root in a container)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root; the file-size limit test above covers a full disk everywhere")
    tried = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True)
    if tried.returncode != 0:
        pytest.skip(f"this machine does not allow mounting a tmpfs ({tried.stderr.decode().strip()})")

    def remount(options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(disk)], check=True, capture_output=True)

    try:
        yield remount
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_really_full_disk_and_a_read_only_one(
    cli_server: ForkServer, tmpfs: Callable[[str], None], planted: Path, tmp_path: Path
) -> None:
    out = tmp_path / "disk" / "probe"
    done = bindscope(cli_server, "probe", planted, "--out", out, "--seeds", "0", *PROBE)
    assert done.returncode == 0, done.stderr
    before = files(out)
    filler = tmp_path / "disk" / f"filler-{uuid.uuid4().hex}"
    with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):  # fill the disk to the last block
        while True:
            fh.write(b"\0" * 4096)
    done = bindscope(cli_server, "probe", planted, "--out", out, "--seeds", "0,1", "--overwrite", *PROBE)
    assert_one_line_error(done, "No space left on device")
    assert files(out) == before and hidden(tmp_path / "disk") == []
    filler.unlink()
    tmpfs("ro")
    done = bindscope(cli_server, "probe", planted, "--out", out, "--seeds", "0,1", "--overwrite", *PROBE)
    assert_one_line_error(done, "Read-only file system")
    assert "choose an --out on a writable disk" in done.stderr and files(out) == before


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["decompose", "report"])
def test_a_read_only_disk_under_a_staged_and_an_in_place_writer(
    cli_server: ForkServer, tmpfs: Callable[[str], None], planted: Path, tmp_path: Path, writer: str
) -> None:
    """An analysis builds its folder in a staging sibling; a report writes its files into the run folder: on a
    read-only disk each is one line, with nothing changed and no lock or temporary file left."""
    disk = tmp_path / "disk"
    out = disk / "out"
    out.mkdir()
    kind = "run" if writer == "report" else "result"
    (out / OUTPUT_MARK).write_text(json.dumps({"written_by": "bindscope", "kind": kind}))
    if writer == "report":
        (out / "config.yaml").write_text("name: empty\n")
        args: tuple[object, ...] = ("report", out)
    else:
        (out / "summary.json").write_text("{}\n")  # an earlier result, as --overwrite finds it
        args = ("decompose", planted, "--out", out, "--overwrite", "--seeds", "0", *PROBE)
    before = files(out)
    tmpfs("ro")
    done = bindscope(cli_server, *args)
    assert_one_line_error(done, "Read-only file system")
    assert "choose an --out on a writable disk" in done.stderr and files(out) == before and hidden(disk) == []
