"""Other processes and the machine (issue 54): a second writer of a run folder, readers of a run being written, an
output inside a run's folder, inputs replaced while they are read, unwritable caches, a working folder deleted
mid-command, the C locale with non-ASCII names.

Each is the cheap form of a scenario of ``benchmarks/trial_concurrency.py``, which runs the expensive races (real
runs of MiniLM paused mid-way, datasets rebuilt under an embed, Ray workers killed) and prints what each does.
Locks are held from this process (:func:`bindscope.core.locks.output_lock`), as a long command would hold them,
and the commands run in processes of their own (the fork server): a lock held here is another process's to them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.core.locks import output_lock
from bindscope.embeddings.encoders.base import Encoder
from bindscope.embeddings.encoders.spec import parse_spec
from cli_checks import assert_one_line_error
from folders import snapshot
from forked_cli import ForkServer

RUN_CONFIG = """\
name: busy
seeds: [0]
datasets:
  - {name: clevr, preset: clevr}
models:
  - {spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}
analyses:
  probe: {optimizer: lbfgs}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> dict[str, Path]:
    """Two planted arrays of clevr (a, b) and an embedding folder of a."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("concurrency")
    scenes = load_dataset(clevr_dir).scenes
    paths = {}
    for name, seed in (("a", 0), ("b", 1)):
        paths[name] = root / f"{name}.npy"
        np.save(paths[name], planted_embeddings(scenes, "object_additive", dim=8, noise=0.2, seed=seed))
    paths["emb"] = import_embeddings(clevr_dir, paths["a"], name="a", modality="text", out=root / "emb").root
    return paths


def finished_run(folder: Path) -> Path:
    """A finished run folder as compare reads it: its manifest and one result header."""
    (folder / "results" / "clevr" / "minilm-text" / "probe").mkdir(parents=True)
    manifest = {
        "format": {"name": "bindscope-run", "version": 1},
        "run": folder.name,
        "status": "complete",
        "seeds": [0],
        "datasets": {"clevr": {"path": "x", "hash": "a" * 64, "scenes": 576}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "config.yaml").write_text("name: r\n")
    return folder


# -- a. two runs, one --out -------------------------------------------------------------------------------------------
def test_a_second_run_on_a_busy_out_is_refused_naming_the_holder(cli_server: ForkServer, tmp_path: Path) -> None:
    """Refused before any model is loaded (the plain fork server: none is imported)."""
    (tmp_path / "run.yaml").write_text(RUN_CONFIG)
    out = tmp_path / "runs" / "r"
    with output_lock(out, what="run folder"):  # what a running `bindscope run run.yaml --out runs/r` holds
        done = cli_server.run(["run", str(tmp_path / "run.yaml"), "--out", str(out), "-q"], {**os.environ})
    assert_one_line_error(done, f"another bindscope process (pid {os.getpid()}, started ")
    assert f"is writing run folder {out}; wait for it to finish, rerun with --wait" in done.stderr
    assert not out.exists()


# -- b. readers of a run folder being written -------------------------------------------------------------------------
def test_compare_refuses_a_run_that_another_process_is_writing(run_cli, tmp_path: Path) -> None:
    """Until a run ends, its manifest is the last finished run's while its tables are partly the new one's."""
    a, b = finished_run(tmp_path / "a"), finished_run(tmp_path / "b")
    with output_lock(a, what="run folder"):
        done = run_cli("compare", a, b, "--out", tmp_path / "cmp")
    assert_one_line_error(done, f"{a} is being written by another bindscope process now (pid {os.getpid()}); wait")
    assert not (tmp_path / "cmp").exists()


def test_report_refuses_a_run_that_another_process_is_writing(run_cli, tmp_path: Path) -> None:
    a = finished_run(tmp_path / "a")
    before = snapshot(a)
    with output_lock(a, what="run folder"):
        done = run_cli("report", a)
    assert_one_line_error(done, f"another bindscope process (pid {os.getpid()}, started ")
    assert snapshot(a) == before


def test_a_run_rewriting_its_manifest_during_a_comparison_is_seen(tmp_path: Path) -> None:
    """What compare checks once it has read everything, before its folder is moved into place."""
    from bindscope.pipeline.combine.runs import check_unchanged, manifest_identity

    a, b = finished_run(tmp_path / "a"), finished_run(tmp_path / "b")
    before = {run: manifest_identity(run) for run in (a, b)}
    check_unchanged([a, b], before)
    moved = a / ".manifest.json.new"
    moved.write_bytes((a / "manifest.json").read_bytes())  # the same words, as a rerun that starts writes it
    os.replace(moved, a / "manifest.json")
    with pytest.raises(BindscopeError, match=f"{a} changed while it was being compared .*; run compare again"):
        check_unchanged([a, b], before)


def test_a_rerun_marks_a_finished_manifest_interrupted_before_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun killed -9 half-way leaves its folder partly new: its manifest then says so, not the old 'complete'."""
    from bindscope.pipeline import run as run_module
    from bindscope.pipeline.config import load_config

    (tmp_path / "run.yaml").write_text(RUN_CONFIG)
    out = finished_run(tmp_path / "r")
    seen = []

    def killed(state: Any) -> None:  # the first thing a run writes: a kill -9 here leaves the folder as it is now
        seen.append(json.loads((out / "manifest.json").read_text())["status"])
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "build_datasets", killed)
    with pytest.raises(KeyboardInterrupt):
        run_module.run_pipeline(load_config(str(tmp_path / "run.yaml")), out, say=lambda _: None)
    assert seen == ["interrupted"]


# -- c. an output inside a run's folder -------------------------------------------------------------------------------
def test_a_folder_the_run_is_writing_is_refused_to_another_writer(run_cli, tmp_path: Path, planted, clevr_dir) -> None:
    run = tmp_path / "r"
    own = run / "embeddings" / "clevr" / "minilm-text"
    args = ("embeddings", "import", clevr_dir, planted["a"], "--name", "x", "--modality", "text", "--out", own)
    with output_lock(run, what="run folder"), output_lock(own, what="embedding folder"):
        done = run_cli(*args)
    assert_one_line_error(done, f"another bindscope process (pid {os.getpid()}, started ")
    assert not own.exists()


def test_an_output_inside_a_run_folder_being_written_is_refused(run_cli, tmp_path: Path, planted, clevr_dir) -> None:
    run = tmp_path / "r"
    inside = run / "embeddings" / "clevr" / "mine"
    args = ("embeddings", "import", clevr_dir, planted["a"], "--name", "x", "--modality", "text", "--out", inside)
    with output_lock(run, what="run folder"):
        done = run_cli(*args)
    assert_one_line_error(done, f"pid {os.getpid()}")
    assert not inside.exists()


class Constant(Encoder):
    """A text encoder whose every caption is the same vector plus its row number: what ``resolved`` names it."""

    modalities = ("text", "image")

    def __init__(self, resolved: str, on_prepare: Any = None) -> None:
        super().__init__(parse_spec(f"scratch:/nowhere/{resolved}", check_folders=False))
        self.resolved, self.on_prepare, self.prepared = resolved, on_prepare, 0

    def prepare(self, modality: str, items: Any) -> Any:
        self.prepared += 1
        if self.on_prepare is not None:
            self.on_prepare(self.prepared)
        if modality == "image":
            return np.stack([np.asarray(image, dtype=np.float32).mean(axis=(0, 1)) for image in items])
        return np.asarray([[len(text), 1.0, 2.0] for text in items], dtype=np.float32)

    def forward(self, modality: str, inputs: Any) -> np.ndarray:
        return inputs + np.arange(len(inputs), dtype=np.float32)[:, None] * (2 if self.resolved == "b" else 1)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "test",
            "model_class": "Constant",
            "resolved": self.resolved,
            "dim": {"text": 3, "image": 3},
            "pooling": {"text": "none", "image": "none"},
            "preprocessing": {"text": {}, "image": {}},
        }


def test_a_run_replaces_embeddings_written_over_its_own_and_reuses_its_own(clevr_dir: Path, tmp_path: Path) -> None:
    """``embed_dataset(replace=True)``, as a run embeds: other embeddings in its folder (someone's ``embed
    --overwrite`` into the run) are replaced instead of refused with advice a run cannot take (it has no
    --overwrite); its own are reused; a folder bindscope did not write is still refused."""
    from bindscope.embeddings.embed import embed_dataset

    out = tmp_path / "run" / "embeddings" / "clevr" / "m-text"
    embed_dataset(clevr_dir, Constant("b"), modality="text", out=out)
    with pytest.raises(BindscopeError, match="holds other embeddings"):
        embed_dataset(clevr_dir, Constant("a"), modality="text", out=out)
    replaced = embed_dataset(clevr_dir, Constant("a"), modality="text", out=out, replace=True)
    assert replaced.status == "embedded" and replaced.embeddings.manifest["model"]["resolved"] == "a"
    again = embed_dataset(clevr_dir, Constant("a"), modality="text", out=out, replace=True)
    assert again.status == "existing"
    (out / "embeddings.npy").write_bytes(b"damaged")
    assert embed_dataset(clevr_dir, Constant("a"), modality="text", out=out, replace=True).status == "embedded"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="mine holds files bindscope did not write"):
        embed_dataset(clevr_dir, Constant("a"), modality="text", out=mine, replace=True)
    assert (mine / "notes.txt").read_text() == "mine"


# -- d. a dataset rewritten while it is read ---------------------------------------------------------------------------
def test_images_rewritten_while_they_are_embedded_are_refused_not_mixed(clevr_images_dir: Path, tmp_path: Path) -> None:
    """A dataset rebuilt over its folder mid-embed: the rows read after it would be of other pictures, under the
    content key of the first ones. Nothing is written, and the chunks made so far are dropped."""
    from PIL import Image

    from bindscope.embeddings.embed import embed_dataset

    ds = tmp_path / "ds"
    shutil.copytree(clevr_images_dir, ds)
    last = sorted((ds / "images").glob("0*.png"))[-1]

    def rebuild(prepared: int) -> None:
        if prepared == 1:  # the first batch is read; the last image is drawn again, as a rebuild would
            redrawn = last.with_name("redrawn.png")
            Image.new("RGB", (32, 32), (255, 0, 0)).save(redrawn)
            os.replace(redrawn, last)

    encoder = Constant("a", on_prepare=rebuild)
    with pytest.raises(BindscopeError, match=f"the images of {ds} changed while they were being embedded"):
        embed_dataset(ds, encoder, modality="image", out=tmp_path / "e", chunk_rows=96, batch_size=96)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no output, no chunks of the mixed rows


# -- e. embeddings replaced while they are read ------------------------------------------------------------------------
def test_a_folder_replaced_while_it_is_read_is_read_whole(
    planted: dict[str, Path], clevr_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``embeddings import --overwrite`` moves a new folder into place between the loader's reading of the manifest
    and of the array: the loader reads the new folder again, never the old manifest with the new array."""
    from bindscope.embeddings import store

    emb = tmp_path / "emb"
    shutil.copytree(planted["emb"], emb)
    store.import_embeddings(clevr_dir, planted["b"], name="b", modality="text", out=tmp_path / "new")
    real_load = store.load_npy
    swaps: list[Path] = []

    def swapped(path: Path, *args: Any, **kwargs: Any) -> np.ndarray:
        if not swaps:  # after the manifest was read: the writer's two renames
            os.replace(emb, tmp_path / ".emb.old")
            os.replace(tmp_path / "new", emb)
            swaps.append(path)
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(store, "load_npy", swapped)
    loaded = store.load_embeddings(emb)
    assert swaps and loaded.name == "b"
    np.testing.assert_array_equal(loaded.array, np.load(planted["b"]).astype(np.float32))


def test_a_folder_caught_between_the_two_renames_is_waited_for(
    planted: dict[str, Path], clevr_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader starts while the writer has moved the old folder away and not yet the new one in: the folder
    is missing, its writer's lock held; the loader waits and reads the new folder, not 'does not exist'."""
    from bindscope.core.locks import output_lock
    from bindscope.embeddings import store

    emb = tmp_path / "emb"
    store.import_embeddings(clevr_dir, planted["b"], name="b", modality="text", out=tmp_path / "new")
    waits: list[float] = []

    def second_rename(seconds: float) -> None:
        waits.append(seconds)
        os.replace(tmp_path / "new", emb)

    monkeypatch.setattr(store.time, "sleep", second_rename)
    with output_lock(emb):  # the writer's lock, held across its two renames
        shutil.copytree(planted["emb"], tmp_path / ".emb.old-123")  # the old folder, moved aside
        loaded = store.load_embeddings(emb)
    assert waits and loaded.name == "b"
    shutil.rmtree(tmp_path / ".emb.old-123")
    shutil.rmtree(emb)
    with pytest.raises(BindscopeError, match="does not exist"):  # no writer at work: missing at once
        store.load_embeddings(emb)
    assert len(waits) == 1


def test_a_folder_replaced_at_every_read_is_one_line(
    planted: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindscope.embeddings import store

    emb = tmp_path / "emb"
    shutil.copytree(planted["emb"], emb)
    real_load = store.load_npy

    def always_swapped(path: Path, *args: Any, **kwargs: Any) -> np.ndarray:
        os.replace(emb, tmp_path / "moving")
        shutil.copytree(tmp_path / "moving", emb)  # a new folder of the same content: another inode
        shutil.rmtree(tmp_path / "moving")
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(store, "load_npy", always_swapped)
    monkeypatch.setattr(store.time, "sleep", lambda _: None)
    with pytest.raises(BindscopeError, match="was replaced by another process each time it was read .*; wait until"):
        store.load_embeddings(emb)


# -- h. the machine ----------------------------------------------------------------------------------------------------
def cache_env(where: Path) -> dict[str, str]:
    return {
        "HOME": str(where),
        "XDG_CACHE_HOME": str(where / "cache"),
        "HF_HOME": str(where / "hf"),
        "TORCH_HOME": str(where / "torch"),
        "MPLCONFIGDIR": str(where / "matplotlib"),
    }


def test_caches_that_cannot_be_created_do_not_stop_a_command(
    run_cli, clevr_images_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME a file, and every cache folder below it (where nothing can be created): a figure is drawn as usual, and
    matplotlib's warnings about its config folder (it takes a temporary one) are not printed."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for var, value in cache_env(blocker).items():
        monkeypatch.setenv(var, value)
    done = run_cli("dataset", "preview", clevr_images_dir, "--rows", "1", "--cols", "2", "--out", tmp_path / "p.png")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    assert blocker.read_text() == "not a folder"


def test_a_home_folder_that_does_not_exist_does_not_refuse_new_outputs(
    run_cli, planted: dict[str, Path], clevr_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var, value in cache_env(tmp_path / "nonexistent").items():  # HOME=/nonexistent, as for a service account
        monkeypatch.setenv(var, value)
    done = run_cli("embeddings", "import", clevr_dir, planted["a"], "--name", "x", "--modality", "text",
                   "--out", tmp_path / "new")  # fmt: skip
    assert done.returncode == 0, done.stderr


def wait_stopped(pid: int, timeout: float = 60) -> None:
    """Until the process stopped itself (SIGSTOP at its pause point)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = ""
        if state == "T":
            return
        assert state not in ("", "Z"), "the command ended before its pause point"
        time.sleep(0.02)
    raise AssertionError("the command did not reach its pause point")


def test_the_working_folder_deleted_under_a_command_is_one_line(
    cli_server: ForkServer, planted: dict[str, Path], clevr_dir: Path, tmp_path: Path
) -> None:
    """cd into a folder, write a relative --out, and the folder is removed while the command runs."""
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "NO_COLOR": "1", "BINDSCOPE_KILL_AT": "stage-move:1:SIGSTOP"}
    args = ["embeddings", "import", str(clevr_dir), str(planted["a"]), "--name", "x", "--modality", "text"]
    command = cli_server.start([*args, "--out", "rel"], env, cwd=work)
    try:
        wait_stopped(command.pid)  # the folder is staged and about to be moved into place
        shutil.rmtree(work)
    finally:
        os.kill(command.pid, signal.SIGCONT)
    status = command.wait(timeout=60)
    done = subprocess.CompletedProcess(args, status, command.stdout, command.stderr)
    assert_one_line_error(done, "No such file or directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


SPACE = """\
name: epreuve
concepts:
  farbe: [rot, grün, weiß]
  form: [würfel, kugel]
objects_per_scene: 2
caption: {object: "ein {farbe} {form}"}
"""


def test_the_c_locale_with_non_ascii_names_and_paths(tmp_path: Path) -> None:
    """LANG=C and LC_ALL=C (a bare container, a cron job): a fresh interpreter, since the locale decides its
    encodings at start-up (the fork server's children inherit the server's)."""
    from bindscope.data.datasets import build_dataset

    root = tmp_path / "données-ü"
    root.mkdir()
    (root / "räume.yaml").write_text(SPACE, encoding="utf-8")
    build_dataset(str(root / "räume.yaml"), root / "jeu-é", images=False)
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "NO_COLOR": "1"}
    env.pop("PYTHONUTF8", None)
    env.pop("PYTHONIOENCODING", None)
    bindscope = Path(sys.executable).with_name("bindscope")
    done = subprocess.run(
        [bindscope, "dataset", "info", root / "jeu-é"], env=env, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    out = done.stdout.decode("utf-8")
    assert f"({root / 'jeu-é'})" in out and "würfel" in out and "grün" in out, out
