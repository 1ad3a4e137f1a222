"""Whatever the file system holds where an output goes, no byte of a file bindscope did not write changes:
a lock file that is a link, a hard link, a FIFO or a folder; an input reached through a bind mount; a copied
manifest; an ``--out`` that is a link (to an output, dangling, a loop), a mount point, a name too long for the
hidden files beside it; a replaced folder that cannot be deleted; a state folder that is a link.

Each case checks the one-line message, the exit status and the user's files byte for byte; a property test
draws the shapes an ``--out`` can take and checks the same oracle.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindscope.core import places
from bindscope.core.errors import BindscopeError, os_error_message
from cli_checks import assert_one_line_error
from folders import snapshot

#: Examples per property; raise BINDSCOPE_FUZZ_EXAMPLES to search longer.
EXAMPLES = int(os.environ.get("BINDSCOPE_FUZZ_EXAMPLES", "30"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    """A user's project: an array for the shared clevr dataset, an embedding folder, a probe result."""
    from bindscope.embeddings.store import import_embeddings

    root = tmp_path_factory.mktemp("places")
    rows = len(__import__("bindscope.data.datasets", fromlist=["x"]).load_dataset(clevr_dir).scenes)
    np.save(root / "x.npy", np.random.default_rng(0).normal(size=(rows, 8)).astype(np.float32))
    import_embeddings(clevr_dir, root / "x.npy", name="m", modality="image", out=root / "emb")
    return root


def importing(project: Path, clevr_dir: Path, out: Path, *more: str) -> tuple[str, ...]:
    return ("embeddings", "import", str(clevr_dir), str(project / "x.npy"), "--name", "m", "--modality", "image",
            "--out", str(out), *more)  # fmt: skip


@contextlib.contextmanager
def mounted(source: Path, target: Path) -> Iterator[None]:
    """``mount --bind source target`` where the machine allows it (root in a container), else skip."""
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a bind mount needs root; the identity check is simulated below for every machine")
    tried = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if tried.returncode != 0:
        pytest.skip(f"this machine does not allow mounts ({tried.stderr.decode().strip()})")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


# -- 1. the lock file beside an output ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["symlink", "hardlink", "fifo", "folder"])
def test_a_lock_file_that_bindscope_did_not_make_is_never_written_through(
    run_cli, project: Path, clevr_dir: Path, tmp_path: Path, shape: str
) -> None:
    precious = tmp_path / "prec.txt"
    precious.write_text("precious\n")
    lock = tmp_path / ".out.lock"
    {
        "symlink": lambda: lock.symlink_to(precious.name),
        "hardlink": lambda: os.link(precious, lock),
        "fifo": lambda: os.mkfifo(lock),
        "folder": lambda: lock.mkdir(),
    }[shape]()
    before = snapshot(tmp_path)
    result = run_cli(*importing(project, clevr_dir, tmp_path / "out"))
    kind = {"symlink": "a link", "hardlink": "a hard link to another file", "fifo": "not a plain file"}
    assert_one_line_error(
        result, f"the lock file {lock} is {kind.get(shape, 'a folder')}, not made by bindscope, which never"
    )
    assert snapshot(tmp_path) == before
    assert (lock.is_symlink() or lock.exists()) and not (tmp_path / "out").exists()


# -- 2. an input reached by another path ----------------------------------------------------------------------
def test_an_input_behind_a_bind_mount_is_found_by_its_identity(run_cli, project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "emb", tmp_path / "res" / "emb")
    before = snapshot(tmp_path / "res")
    with mounted(tmp_path / "res", tmp_path / "o" / "bm"):
        result = run_cli("probe", tmp_path / "res" / "emb", "--out", tmp_path / "o" / "bm" / "emb", "--overwrite")
    assert_one_line_error(result, "is the input")
    assert "bindscope never writes over or into what a command reads" in result.stderr
    assert snapshot(tmp_path / "res") == before


def test_identity_is_compared_for_every_ancestor(tmp_path: Path) -> None:
    """A mount simulated: every path below ``mnt`` has the identity of the same path below ``data``."""
    from bindscope.core.io import check_not_an_input

    (tmp_path / "data" / "ds" / "sub").mkdir(parents=True)
    (tmp_path / "mnt" / "ds" / "sub").mkdir(parents=True)
    real = places.identity

    def as_mounted(path: str | os.PathLike) -> places.Identity | None:
        text = os.fspath(path).replace(str(tmp_path / "mnt"), str(tmp_path / "data"))
        return real(text)

    data = tmp_path / "data" / "ds"
    with mock.patch.object(places, "identity", as_mounted):
        for out, relation in [("mnt/ds", "is"), ("mnt/ds/sub/x", "lies inside"), ("mnt", "holds")]:
            with pytest.raises(BindscopeError, match=f"--out {tmp_path / out} {relation} the input {data};"):
                check_not_an_input(tmp_path / out, [data])
        check_not_an_input(tmp_path / "elsewhere", [data])  # nothing in common: no error


# -- 3. a copied manifest ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("copied", ["manifest.json", "summary.json"])
def test_a_copied_manifest_does_not_make_a_folder_bindscopes(
    run_cli, project: Path, clevr_dir: Path, tmp_path: Path, copied: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "thesis.tex").write_text("thesis")
    if copied == "manifest.json":
        shutil.copy(clevr_dir / "manifest.json", notes / copied)
    else:  # the format tag a probe's summary carries
        (notes / copied).write_text('{"format": {"name": "bindscope-result", "version": 1}, "analysis": "probe"}')
    before = snapshot(notes)
    if copied == "manifest.json":
        result = run_cli("dataset", "build", "clevr2d", "--no-images", "--out", notes, "--overwrite", "-q")
        kind = "a dataset"
    else:
        result = run_cli("probe", project / "emb", "--out", notes, "--overwrite", "--seeds", "0")
        kind = "an analysis result"
    assert_one_line_error(result, f"{notes} holds files bindscope did not write; --overwrite replaces only {kind}")
    assert snapshot(notes) == before


def test_a_marker_less_folder_of_its_own_entries_still_counts(tmp_path: Path) -> None:
    """Folders from before marks: only what such an output writes, hidden leftovers of a killed write included."""
    from bindscope.core.io import written_kind

    folder = tmp_path / "emb"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"format": "bindscope-embeddings-v1"}')
    (folder / "embeddings.npy").write_bytes(b"")
    (folder / ".embeddings.npy.abcd1234.tmp").write_bytes(b"")
    assert written_kind(folder) == "embeddings"
    (folder / "link").symlink_to(tmp_path)
    assert written_kind(folder) is None


# -- 4. a replaced folder that cannot be deleted -------------------------------------------------------------
def test_a_failed_removal_after_the_swap_says_the_new_result_is_in_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from bindscope.core import io

    out = tmp_path / "out"
    for content in ("old", "new"):
        refuse = mock.patch.object(shutil, "rmtree", side_effect=PermissionError(errno.EACCES, "Permission denied"))
        with refuse, io.staged_dir(out, kind="result", overwrite=True) as stage:
            (stage / "summary.json").write_text(content)
    assert (out / "summary.json").read_text() == "new"
    message = caplog.records[-1].getMessage()
    assert message.startswith(f"warning: the new result is in place in {out}, but the previous one, moved to ")
    assert "(Permission denied); delete it yourself" in message and "nothing was replaced" not in message
    assert [p.name for p in tmp_path.iterdir() if ".old-" in p.name] == [f".out.old-{os.getpid()}"]


def test_a_failed_move_into_place_puts_the_previous_result_back(tmp_path: Path) -> None:
    from bindscope.core import io

    out = tmp_path / "out"
    with io.staged_dir(out, kind="result") as stage:
        (stage / "summary.json").write_text("old")
    real_replace = os.replace

    def refuse_the_new(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        if str(src).endswith(".partial"):
            raise OSError(errno.EBUSY, "Device or resource busy", str(dst))
        real_replace(src, dst)

    replace = mock.patch.object(os, "replace", refuse_the_new)
    with replace, pytest.raises(OSError), io.staged_dir(out, kind="result", overwrite=True) as stage:
        (stage / "summary.json").write_text("new")
    assert (out / "summary.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# -- 5 and 6. odd --out places -----------------------------------------------------------------------------------
def test_an_out_that_links_to_an_output_replaces_that_output_and_keeps_the_link(
    run_cli, project: Path, clevr_dir: Path, tmp_path: Path
) -> None:
    shutil.copytree(project / "emb", tmp_path / "real")
    (tmp_path / "link").symlink_to("real")
    result = run_cli(*importing(project, clevr_dir, tmp_path / "link", "--overwrite"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == "real"
    assert (tmp_path / "real" / "embeddings.npy").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


ODD = {
    "dangling link": (lambda t: (t / "out").symlink_to("nowhere/x"), "is a link to nowhere/x, which does not exist"),
    "link loop": (lambda t: ((t / "out").symlink_to("loop"), (t / "loop").symlink_to("out")), "is a link loop"),
    "below a file": (lambda t: (t / "f").write_text("x"), "which is a file, not a folder"),
}


@pytest.mark.parametrize("shape", list(ODD))
def test_odd_out_places_are_one_line_before_any_work(
    run_cli, project: Path, clevr_dir: Path, tmp_path: Path, shape: str
) -> None:
    make, message = ODD[shape]
    make(tmp_path)
    out = tmp_path / ("f/out" if shape == "below a file" else "out")
    before = snapshot(tmp_path)
    assert_one_line_error(run_cli(*importing(project, clevr_dir, out)), message)
    assert snapshot(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_a_mount_point_is_refused_as_an_output(run_cli, project: Path, clevr_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with mounted(tmp_path / "src", tmp_path / "mp"):
        result = run_cli(*importing(project, clevr_dir, tmp_path / "mp", "--overwrite"))
    assert_one_line_error(result, f"--out {tmp_path / 'mp'} is a mount point; bindscope moves a finished output")


@pytest.mark.parametrize("size", [228, 255, 5000])
def test_a_name_or_path_too_long_for_the_files_beside_it(
    run_cli, project: Path, clevr_dir: Path, tmp_path: Path, size: int
) -> None:
    out = tmp_path / ("a" * size) if size <= 255 else tmp_path.joinpath(*["b" * 200] * (size // 200))
    result = run_cli(*importing(project, clevr_dir, out))
    what = "name is" if size <= 255 else "path is"
    assert_one_line_error(result, f"--out {what} {len(os.fsencode(out.name if size <= 255 else out))} bytes long")
    assert sorted(tmp_path.iterdir()) == []


def test_a_name_that_leaves_room_is_written(run_cli, project: Path, clevr_dir: Path, tmp_path: Path) -> None:
    result = run_cli(*importing(project, clevr_dir, tmp_path / ("a" * 227)))
    assert result.returncode == 0, result.stderr


# -- state folders, leftovers, any OS error ----------------------------------------------------------------------
def test_a_state_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (tmp_path / ".out.units").symlink_to(mine)
    from bindscope.analyses.registry import units_folder

    with pytest.raises(BindscopeError, match=r"\.out\.units is a link; bindscope keeps an output's resumable state"):
        units_folder(tmp_path / "out", "0123456789abcdef0123")
    (tmp_path / ".out.training").write_text("x")
    with pytest.raises(BindscopeError, match=r"\.out\.training is not a folder"):
        places.check_state_folder(tmp_path / ".out.training")


def test_leftover_names_inside_a_users_folder_are_never_removed(tmp_path: Path) -> None:
    from bindscope.core.locks import output_lock

    mine = tmp_path / "mine"
    mine.mkdir()
    names = [".x.12345678.tmp", ".y.lock", ".z.abcdefgh.partial", ".mine.old-notes"]
    for name in names:
        (mine / name).write_text("mine")
    (tmp_path / ".mine.old-backup").mkdir()
    before = snapshot(tmp_path)
    with output_lock(mine):
        pass
    assert snapshot(tmp_path) == before


def test_a_duplicate_yaml_key_is_refused_naming_its_line(tmp_path: Path) -> None:
    from bindscope.core.io import read_yaml

    (tmp_path / "c.yaml").write_text("name: a\nseeds: [0]\nname: b\n")
    with pytest.raises(BindscopeError, match=r"at line 3, column 1: the key 'name' is written twice; keep one"):
        read_yaml(tmp_path / "c.yaml", "run config")
    (tmp_path / "m.yaml").write_text("base: &b {x: 1}\nmodel: {<<: *b, y: 2}\n")  # YAML merge keys still work
    assert read_yaml(tmp_path / "m.yaml", "run config")["model"] == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("code", "fix"),
    [(errno.ENAMETOOLONG, "choose a shorter --out"), (errno.ELOOP, "a link loop"), (errno.EBUSY, "mount point"),
     (errno.ENOENT, "disappeared while the command ran"), (errno.EIO, "check the path and its permissions")],
)  # fmt: skip
def test_any_os_error_is_one_line_naming_the_path_and_the_fix(code: int, fix: str) -> None:
    message = os_error_message(OSError(code, os.strerror(code), "/some/where"))
    assert message.startswith(f"the system refused an operation at /some/where ({os.strerror(code)}); ")
    assert fix in message and "\n" not in message


# -- property: wherever --out points, no byte bindscope did not write changes --------------------------------
SHAPES = st.sampled_from(
    [
        "missing",
        "empty",
        "user folder",
        "user folder + copied manifest",
        "user folder + copied summary",
        "output of another kind",
        "output of its kind",
        "damaged mark",
        "a file",
        "link to output",
        "link to user folder",
        "dangling link",
        "link loop",
        "long name",
        "inside a simulated mount of the dataset",
    ]
)
BESIDE = st.sampled_from(["nothing", "lock link", "lock hardlink", "old link", "partial link", "units link"])


@pytest.fixture(scope="module")
def boxes(project: Path, clevr_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh sandbox per example: a user folder, a bindscope output of each kind."""

    def fresh() -> Iterator[Path]:
        while True:
            box = tmp_path_factory.mktemp(f"box-{uuid.uuid4().hex[:6]}")
            (box / "mine").mkdir()
            (box / "mine" / "thesis.tex").write_text("thesis")
            shutil.copytree(project / "emb", box / "ours")
            yield box

    return fresh()


def shape_out(box: Path, clevr_dir: Path, shape: str) -> Path:
    """Make ``shape`` at the output's place; returns the ``--out`` to give."""
    out = box / ("o" * 240 if shape == "long name" else "out")
    user = {"user folder", "user folder + copied manifest", "user folder + copied summary", "damaged mark"}
    if shape in user or shape == "empty" or shape == "output of another kind":
        out.mkdir()
    if shape in user:
        (out / "notes.md").write_text("notes")
    if shape == "user folder + copied manifest":
        shutil.copy(box / "ours" / "manifest.json", out / "manifest.json")
    if shape == "user folder + copied summary":
        (out / "summary.json").write_text('{"format": {"name": "bindscope-result", "version": 1}}')
    if shape == "damaged mark":
        (out / ".bindscope.json").write_text("{garbled")
    if shape == "output of another kind":
        (out / ".bindscope.json").write_text('{"written_by": "bindscope", "kind": "dataset"}')
    if shape == "output of its kind":
        shutil.copytree(box / "ours", out)
    if shape == "a file":
        out.write_text("a file of mine")
    if shape == "link to output":
        out.symlink_to(box / "ours")
    if shape == "link to user folder":
        out.symlink_to(box / "mine")
    if shape == "dangling link":
        out.symlink_to(box / "nowhere")
    if shape == "link loop":
        out.symlink_to(box / "loop")
        (box / "loop").symlink_to(out)
    if shape == "inside a simulated mount of the dataset":
        out = box / "mnt" / "result"
    return out


def shape_beside(box: Path, out: Path, beside: str) -> None:
    target = box / "mine" / "thesis.tex"
    name = out.name
    if beside == "lock link":
        (box / f".{name}.lock").symlink_to(target)
    if beside == "lock hardlink":
        os.link(target, box / f".{name}.lock")
    if beside == "old link":
        (box / f".{name}.old-1").symlink_to(box / "mine")
    if beside == "partial link":
        (box / f".{name}.abcd1234.partial").symlink_to(box / "mine")
    if beside == "units link":
        (box / f".{name}.units").symlink_to(box / "mine")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=SHAPES, beside=BESIDE, overwrite=st.booleans())
def test_no_byte_of_a_file_bindscope_did_not_write_changes(
    boxes: Iterator[Path], project: Path, clevr_dir: Path, shape: str, beside: str, overwrite: bool
) -> None:
    from bindscope.embeddings.store import import_embeddings

    box = next(boxes)
    out = shape_out(box, clevr_dir, shape)
    if shape != "long name":  # (no room for a name beside it: that is the point)
        shape_beside(box, out, beside)
    ours = {"missing", "empty", "output of its kind", "link to output", "long name"}
    theirs = [box / "mine", clevr_dir, project / "x.npy"] + ([out] if shape not in ours else [])
    before = snapshot(*theirs)
    real = places.identity

    def mounted_dataset(path: str | os.PathLike) -> places.Identity | None:
        return real(os.fspath(path).replace(str(box / "mnt"), str(clevr_dir)))

    simulated = shape == "inside a simulated mount of the dataset"
    with mock.patch.object(places, "identity", mounted_dataset) if simulated else contextlib.nullcontext():
        try:
            import_embeddings(clevr_dir, project / "x.npy", name="m", modality="image", out=out, overwrite=overwrite)
            refused = None
        except BindscopeError as exc:
            refused = str(exc)
    assert snapshot(*theirs) == before, (shape, beside, overwrite, refused)
    assert (box / "mine").is_dir() and not (box / "mine").is_symlink()
    if refused is None:
        assert (Path(os.path.realpath(out)) / "manifest.json").is_file()
        assert shape in ours - {"long name"}
        assert not beside.startswith("lock") or shape == "link to output"  # (whose lock is beside its target)
    if simulated:
        assert refused is not None and "lies inside the input" in refused


def test_a_folder_name_that_is_not_utf8_is_read(clevr_dir: Path, tmp_path: Path) -> None:
    """Linux names are bytes: a dataset below ``caf\\xe9`` (Latin-1) loads like any other."""
    from bindscope.data.datasets import load_dataset

    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    shutil.copytree(clevr_dir, folder / "clevr")
    assert len(load_dataset(folder / "clevr").scenes) == len(load_dataset(clevr_dir).scenes)


def test_a_folder_name_that_is_not_utf8_is_written(clevr_dir: Path, tmp_path: Path, run_cli) -> None:
    """A probe below ``caf\\xe9`` writes its parquet tables there (pyarrow alone cannot take such a path)."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    n = len(pd.read_parquet(clevr_dir / "scenes.parquet"))
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((n, 8)).astype(np.float32))
    assert run_cli(*importing(tmp_path, clevr_dir, folder / "emb")).returncode == 0
    probed = run_cli("probe", folder / "emb", "--seeds", "0", "--out", folder / "p", "-q")
    assert probed.returncode == 0, probed.stderr
    assert len(pd.read_parquet((folder / "p" / "results.parquet").open("rb"))) > 0


def test_a_run_folder_that_is_not_utf8_is_refused_before_any_work(tmp_path: Path, run_cli) -> None:
    """A run records its paths as text (its scratch models' specs): a run folder that is not UTF-8 is refused."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    result = run_cli("demo", "--quick", "-q", "--out", folder / "demo")
    assert_one_line_error(result, "holds a name that is not UTF-8 text; a run records its paths as text: choose an")
    assert list(folder.iterdir()) == []


def test_scratch_weights_below_a_folder_that_is_not_utf8_load(tmp_path: Path) -> None:
    """A scratch model's weights below ``caf\\xe9`` load (safetensors alone cannot open such a path)."""
    import torch
    from safetensors.torch import save

    from bindscope.embeddings.encoders.scratch.folder import load_weights

    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(save({"w": torch.arange(6.0).view(2, 3)}))
    assert torch.equal(load_weights(folder / "model.safetensors")["w"], torch.arange(6.0).view(2, 3))


def test_a_write_error_without_a_file_names_the_output(tmp_path: Path) -> None:
    """numpy's short write and pyarrow's write errors carry no file name: the output's is given to them."""
    from bindscope.core import io

    out = tmp_path / "out"
    with pytest.raises(OSError) as raised, io.staged_dir(out, kind="result") as stage:
        (stage / "summary.json").write_text("{}")
        raise OSError("4096 requested and 100 written")  # what numpy.save raises on a full disk
    assert "the disk refused the write to " + str(out) + " (a short write: 100 of 4096" in os_error_message(
        raised.value
    )
    with pytest.raises(OSError) as raised, io.atomic_file(tmp_path / "a.json") as fh:
        fh.write("{")
        raise OSError(errno.EFBIG, "File too large")
    assert os_error_message(raised.value).startswith(f"the disk refused the write to {tmp_path / 'a.json'} (File")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_read_only_disk_names_the_file_not_its_hidden_temporary(tmp_path: Path) -> None:
    """A refused temporary file beside ``card.csv`` is reported as ``card.csv`` (the name the user knows)."""
    from bindscope.core import io

    target = tmp_path / "card.csv"
    hidden = str(tmp_path / ".card.csv.x1y2.tmp")
    refused = OSError(errno.EROFS, "Read-only file system", hidden)
    with (
        mock.patch.object(io.tempfile, "mkstemp", side_effect=refused),
        pytest.raises(OSError) as raised,
        io.atomic_file(target),
    ):
        pass
    assert os_error_message(raised.value).startswith(f"cannot write {target} (Read-only file system)")
