"""The embedding cache: a second folder of the same embeddings is linked, not embedded; what misses; off; damaged
entries; ``bindscope cache ls / rm / path``; bad inputs. Each test has its own XDG_CACHE_HOME (conftest), so its
cache starts empty."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bindscope.embeddings.cache as cache_module
from bindscope.core.io import OUTPUT_MARK
from bindscope.embeddings.cache import (
    CACHE_DIR_VARIABLE,
    CACHE_VARIABLE,
    ENTRY_FILE,
    EmbeddingCache,
    active_cache,
    cache_off,
    cache_root,
)
from bindscope.embeddings.embed import embed_dataset
from bindscope.embeddings.encoders import Encoder, load_encoder
from bindscope.embeddings.store import load_embeddings, write_embeddings
from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


@pytest.fixture(scope="module")
def clip(tiny_clip: Path) -> Encoder:
    return load_encoder(f"hf:{tiny_clip}")


def embed_cli(run_cli, dataset: Path, model: Path, out: Path, *extra: str) -> Any:
    done = run_cli("embed", dataset, "--model", f"hf:{model}", "--modality", "text", "--out", out, "-q", *extra)
    assert done.returncode == 0, done.stderr
    return done


def manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def inode(folder: Path) -> int:
    return os.stat(folder / "embeddings.npy").st_ino


def the_cache() -> EmbeddingCache:
    cache = active_cache()
    assert cache is not None
    return cache


# -- reuse ----------------------------------------------------------------------------------------------------------
def test_the_cache_lies_in_the_tests_own_xdg_folder(isolated_home: Path) -> None:
    assert cache_root() == isolated_home / ".cache" / "bindscope" / "embeddings"


def test_a_second_folder_of_a_copied_dataset_is_linked_from_the_cache(
    run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path
) -> None:
    first = embed_cli(run_cli, clevr_dir, tiny_clip, tmp_path / "a")
    assert "embedded 576 rows" in first.stdout
    copy = tmp_path / "elsewhere" / "clevr-copy"
    shutil.copytree(clevr_dir, copy)  # the same content (hash), another path
    second = embed_cli(run_cli, copy, tiny_clip, tmp_path / "b")
    key = manifest(tmp_path / "a")["content_key"]
    assert f"reused from the cache ({key[:12]}): 576 rows linked, nothing embedded" in second.stdout
    a, b = tmp_path / "a", tmp_path / "b"
    assert (b / "embeddings.npy").read_bytes() == (a / "embeddings.npy").read_bytes()
    assert inode(b) == inode(a) == inode(the_cache().root / key)
    mb = manifest(b)
    assert mb["dataset_path"] == str(copy.resolve()) and manifest(a)["dataset_path"] == str(clevr_dir.resolve())
    assert mb["content_key"] == key and mb["source"]["kind"] == "embed"
    assert mb["source"]["cache"] == {"key": key, "hit": True, "linked": True}
    assert "cache" not in manifest(a)["source"]
    info = run_cli("embeddings", "info", b)
    assert info.returncode == 0 and f"dataset      {copy.resolve()}" in info.stdout


def test_other_settings_miss_and_the_same_again_hits(
    clevr_images_dir: Path, tiny_clip: Path, clip: Encoder, tmp_path: Path
) -> None:
    """Another layer, modality, model, +rand or rows each embed anew (a key of their own); then each hits."""
    other_model = save_tiny_clip(tmp_path / "other-clip", seed=99)
    spec = f"hf:{tiny_clip}"
    variants: dict[str, dict[str, Any]] = {
        "base": {"model": clip, "modality": "text"},
        "image": {"model": clip, "modality": "image"},
        "layer": {"model": load_encoder(spec, layer=1), "modality": "text"},
        "rand": {"model": load_encoder(f"{spec}+rand"), "modality": "text"},
        "model": {"model": load_encoder(f"hf:{other_model}"), "modality": "text"},
        "singles": {"model": clip, "modality": "text", "single_objects": True},
    }
    keys = set()
    for name, kw in variants.items():
        done = embed_dataset(clevr_images_dir, out=tmp_path / name, **kw)
        assert done.status == "embedded", name
        keys.add(done.embeddings.manifest["content_key"])
    assert len(keys) == len(variants) == len(the_cache().entries())
    for name, kw in variants.items():
        again = embed_dataset(clevr_images_dir, out=tmp_path / f"{name}-again", **kw)
        assert again.status == "cached" and again.rows_computed == 0, name
        assert inode(tmp_path / f"{name}-again") == inode(tmp_path / name)
        np.testing.assert_array_equal(again.embeddings.array, load_embeddings(tmp_path / name, rows=None).array)


def test_a_second_run_links_its_embeddings_from_the_cache(clevr_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    """Two runs of one config into two folders: the second's embedding steps are ``cached``, its folders linked."""
    from bindscope.pipeline.config import parse_config
    from bindscope.pipeline.run import run_pipeline

    config = parse_config(
        {
            "name": "twice",
            "seeds": [0],
            "datasets": [{"name": "clevr", "preset": "clevr", "max_scenes": 48}],
            "models": [{"spec": f"hf:{tiny_clip}", "name": "m", "modalities": ["text"]}],
            "analyses": {},
        }
    )
    said: dict[str, list[str]] = {"one": [], "two": []}
    for run in said:
        run_pipeline(config, tmp_path / run, say=said[run].append)
    steps = {run: {s["name"]: s["status"] for s in manifest(tmp_path / run)["steps"]} for run in said}
    folders = ("clevr/m-text", "clevr/m-text-single", "clevr/m-text+rand")
    assert [steps["one"][f] for f in folders] == ["embedded"] * 3
    assert [steps["two"][f] for f in folders] == ["cached"] * 3
    assert any(line.startswith("embeddings   clevr/m-text (cached, ") for line in said["two"])
    for folder in ("m-text", "m-text-single", "m-text+rand"):
        one, two = (tmp_path / run / "embeddings" / "clevr" / folder for run in said)
        assert inode(one) == inode(two) and manifest(two)["source"]["cache"]["hit"] is True


def test_a_hit_records_when_the_entry_was_last_used(clevr_dir: Path, clip: Encoder, tmp_path: Path) -> None:
    key = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "a").embeddings.manifest["content_key"]
    path = the_cache().root / key / ENTRY_FILE
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "last_used": "2020-01-01T00:00:00+00:00"}))
    assert [e.key for e in the_cache().unused_for(365)] == [key]
    assert embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "b").status == "cached"
    used = json.loads(path.read_text())
    assert used == {**stored, "last_used": used["last_used"]} and used["last_used"] >= stored["last_used"]
    assert the_cache().unused_for(365) == []


# -- switched off -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["env off", "env FALSE", "flag"])
def test_switched_off_nothing_is_reused_or_stored(
    how: str, run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = ("--no-cache",) if how == "flag" else ()
    if how.startswith("env"):
        monkeypatch.setenv(CACHE_VARIABLE, how.split()[1])
    for out in ("a", "b"):
        done = embed_cli(run_cli, clevr_dir, tiny_clip, tmp_path / out, *extra)
        assert "embedded 576 rows" in done.stdout
    assert inode(tmp_path / "a") != inode(tmp_path / "b")
    assert not cache_root().exists()


@pytest.mark.parametrize(("value", "on"), [("off", False), ("0", False), (" No ", False), ("", True), ("on", True)])
def test_the_switch(value: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, value)
    assert (active_cache() is not None) is on


def test_cache_off_switches_it_off_for_a_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    with cache_off():
        assert active_cache() is None and os.environ[CACHE_VARIABLE] == "off"
    assert active_cache() is not None and CACHE_VARIABLE not in os.environ
    with cache_off(False):
        assert active_cache() is not None


def test_where_the_cache_lies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache_root() == tmp_path / "home" / ".cache" / "bindscope" / "embeddings"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "bindscope" / "embeddings"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    done = run_cli("cache", "path")
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "mine") and done.stderr == ""
    monkeypatch.setenv(CACHE_VARIABLE, "no")
    done = run_cli("cache", "path")
    assert done.stdout.strip() == str(tmp_path / "mine") and "the cache is off" in done.stderr


# -- damaged entries --------------------------------------------------------------------------------------------------
def _damage(how: str, entry: Path, linked_folder: Path) -> None:
    array = entry / "embeddings.npy"
    if how == "missing":
        array.unlink()
    elif how == "truncated":
        data = array.read_bytes()
        array.unlink()  # a new file: the folder linked to it keeps its bytes
        array.write_bytes(data[:-8])
    elif how == "reshaped":
        values = np.load(array)
        array.unlink()
        np.save(array, values.reshape(-1, values.shape[1] // 2))  # the same bytes, another shape
    elif how == "written in place":  # np.save to a folder's path writes into the file the cache links: same size
        values = np.load(linked_folder / "embeddings.npy")
        np.save(linked_folder / "embeddings.npy", values[::-1])
    elif how == "record":
        (entry / ENTRY_FILE).write_text("{not json")


@pytest.mark.parametrize("how", ["missing", "truncated", "reshaped", "written in place", "record"])
def test_a_damaged_entry_is_ignored_then_replaced(
    how: str, clevr_dir: Path, clip: Encoder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "a").embeddings
    truth = first.array.copy()
    key = first.manifest["content_key"]
    _damage(how, the_cache().root / key, tmp_path / "a")
    with caplog.at_level(logging.WARNING, logger="bindscope.embeddings.cache"):
        again = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "b")
    assert again.status == "embedded"
    assert f"the embedding cache entry {key[:12]}" in caplog.text and "is damaged" in caplog.text
    np.testing.assert_array_equal(load_embeddings(tmp_path / "b").array, truth)  # never the damaged bytes
    assert inode(the_cache().root / key) == inode(tmp_path / "b")  # the fresh embedding replaced the entry
    third = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "c")
    assert third.status == "cached" and inode(tmp_path / "c") == inode(tmp_path / "b")
    assert [p.name for p in the_cache().root.iterdir() if p.name.startswith(".")] == [OUTPUT_MARK]


# -- writing: atomic, concurrent, across file systems ---------------------------------------------------------------
def test_killed_while_storing_leaves_no_half_entry(
    run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINDSCOPE_KILL_AT", "cache-store")
    args = ("embed", clevr_dir, "--model", f"hf:{tiny_clip}", "--modality", "text", "-q")
    killed = run_cli(*args, "--out", tmp_path / "a")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    monkeypatch.delenv("BINDSCOPE_KILL_AT")
    assert len(load_embeddings(tmp_path / "a")) == 576  # the folder was whole before the cache was written
    assert the_cache().entries() == []
    (stage,) = [p for p in the_cache().root.iterdir() if p.name.endswith(".partial")]
    old = time.time() - 2 * cache_module.STALE_SECONDS
    os.utime(stage, (old, old))  # left by a process long dead
    again = run_cli(*args, "--out", tmp_path / "b")
    assert again.returncode == 0 and "embedded 576 rows" in again.stdout
    assert len(the_cache().entries()) == 1 and not stage.exists()


def test_two_stores_of_one_key_both_succeed(
    clevr_dir: Path, clip: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second process to store a key finds it present when it renames its entry into place: no error."""
    a = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "a", cache=None).embeddings
    b = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "b", cache=None).embeddings
    cache = the_cache()
    real = cache_module.kill_point
    raced = []

    def other_process_first(name: str) -> None:  # another store of the key lands just before this one's rename
        if name == "cache-store" and not raced:
            raced.append("racing")
            raced.append(cache.store(b))
        real(name)

    monkeypatch.setattr(cache_module, "kill_point", other_process_first)
    entry = cache.store(a)
    assert entry is not None and raced[1] is not None and entry.key == a.manifest["content_key"]
    assert inode(cache.root / entry.key) == inode(tmp_path / "b")  # the first to rename it in keeps it
    assert sorted(p.name for p in cache.root.iterdir()) == sorted([OUTPUT_MARK, entry.key])


def test_across_file_systems_nothing_is_stored_and_a_hit_is_copied(
    clevr_dir: Path, clip: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_link(source: Any, target: Any) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link", str(source))

    monkeypatch.setattr(cache_module.os, "link", no_link)
    with caplog.at_level(logging.INFO, logger="bindscope.embeddings.cache"):
        done = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "a")
    assert done.status == "embedded" and the_cache().entries() == []
    assert "cannot hard-link" in caplog.text and CACHE_DIR_VARIABLE in caplog.text
    monkeypatch.undo()
    embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "b")  # stored, linked
    monkeypatch.setattr(cache_module.os, "link", no_link)
    hit = embed_dataset(clevr_dir, clip, modality="text", out=tmp_path / "c")
    assert hit.status == "cached" and hit.embeddings.manifest["source"]["cache"]["linked"] is False
    assert inode(tmp_path / "c") != inode(tmp_path / "b")
    assert (tmp_path / "c" / "embeddings.npy").read_bytes() == (tmp_path / "b" / "embeddings.npy").read_bytes()


# -- bindscope cache ls / rm -----------------------------------------------------------------------------------------
def test_ls_then_rm_and_the_folders_still_load(run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path) -> None:
    embed_cli(run_cli, clevr_dir, tiny_clip, tmp_path / "a")
    embed_cli(run_cli, clevr_dir, tiny_clip, tmp_path / "b")
    key = manifest(tmp_path / "a")["content_key"]
    listing = run_cli("cache", "ls")
    assert listing.returncode == 0, listing.stderr
    row = next(line for line in listing.stdout.splitlines() if line.startswith(key[:12]))
    dataset_hash = manifest(tmp_path / "a")["dataset_hash"]
    assert row.split()[:7] == [key[:12], "clevr", dataset_hash[:8], f"hf:{tiny_clip}", "text", "576", "scenes"]
    assert row.split()[7:11] == ["-", "54.1", "KiB", "2"]  # layer, size, two folders link it
    assert f"1 entry, 54.1 KiB, in {cache_root()}" in listing.stdout
    listed = json.loads(run_cli("cache", "ls", "--json").stdout)
    assert listed["folder"] == str(cache_root()) and listed["enabled"] is True
    (entry,) = listed["entries"]
    assert entry["key"] == key and entry["shape"] == [576, 24] and entry["links"] == 2 and not entry["damaged"]
    before = {name: np.load(tmp_path / name / "embeddings.npy") for name in ("a", "b")}
    removed = run_cli("cache", "rm", key[:8])
    assert removed.returncode == 0, removed.stderr
    assert f"removed {key[:12]}" in removed.stdout
    assert "removed 1 entry" in removed.stdout and "54.1 KiB stays on disk in the embedding folders" in removed.stdout
    assert not (cache_root() / key).exists()
    for name in ("a", "b"):
        assert run_cli("embeddings", "info", tmp_path / name).returncode == 0
        np.testing.assert_array_equal(load_embeddings(tmp_path / name).array, before[name])
    assert "0 entries, 0 B" in run_cli("cache", "ls").stdout
    third = embed_cli(run_cli, clevr_dir, tiny_clip, tmp_path / "c")
    assert "embedded 576 rows" in third.stdout  # a miss now, stored again


def _planted_entry(cache: EmbeddingCache, folder: Path, key: str, seed: int) -> Path:
    """An entry stored from a folder of random rows under a given key (no model needed)."""
    array = np.random.default_rng(seed).normal(size=(10, 4)).astype(np.float32)
    m = {"name": "x", "modality": "text", "rows": "scenes", "dataset_hash": "d" * 64, "dataset_preset": "clevr"}
    emb = write_embeddings(folder, array, {**m, "model_spec": "hf:x", "layer": None, "content_key": key})
    assert cache.store(emb) is not None
    return cache.root / key


def test_rm_older_than_and_all_remove_entries_and_nothing_else(run_cli, tmp_path: Path) -> None:
    cache = the_cache()
    old = _planted_entry(cache, tmp_path / "old", "a" * 64, 0)
    _planted_entry(cache, tmp_path / "new", "b" * 64, 1)
    record = json.loads((old / ENTRY_FILE).read_text())
    (old / ENTRY_FILE).write_text(json.dumps({**record, "last_used": "2020-01-01T00:00:00+00:00"}))
    (_planted_entry(cache, tmp_path / "damaged", "d" * 64, 2) / ENTRY_FILE).unlink()
    (cache.root / "notes.txt").write_text("mine")
    lookalike = cache.root / ("c" * 64)  # named like an entry, but holding a file no entry has
    lookalike.mkdir()
    (lookalike / "mine.txt").write_text("mine")
    listing = run_cli("cache", "ls").stdout
    assert "dddddddddddd  -" in listing and "damaged: `bindscope cache rm` removes it" in listing
    assert "3 entries" in listing and "cccccccccccc" not in listing
    done = run_cli("cache", "rm", "--older-than", "30")
    assert done.returncode == 0 and "removed 1 entry" in done.stdout, done.stderr
    assert not old.exists() and (cache.root / ("b" * 64)).is_dir()
    done = run_cli("cache", "rm", "--all")
    assert done.returncode == 0 and "removed 2 entries" in done.stdout and "freeing 0 B" in done.stdout
    assert sorted(p.name for p in cache.root.iterdir()) == sorted([OUTPUT_MARK, "notes.txt", "c" * 64])
    assert (lookalike / "mine.txt").read_text() == "mine"
    assert len(load_embeddings(tmp_path / "new")) == 10


# -- bad input: one line each -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cache", "rm", "a"), "key prefix a is ambiguous: 2 entries start with it (aaaaaaaaaaaa, aaaabbbbbbbb)"),
        (("cache", "rm", "aaaac"), "has a key starting with aaaac (did you mean aaaabbbbbbbb?); `bindscope cache ls`"),
        (("cache", "rm", "f00"), "no entry of the embedding cache"),
        (("cache", "rm", "xyz"), "'xyz' is not a key prefix: keys are hexadecimal"),
        (("cache", "rm"), "name the entries to remove: KEY_PREFIX ... (as `bindscope cache ls` shows them), --all or"),
        (("cache", "rm", "aaaa", "--all"), "give key prefixes, --all or --older-than DAYS, one of them, not several"),
        (("cache", "rm", "--older-than", "-1"), "--older-than takes a number of days, 0 or more, got -1.0"),
    ],
    ids=["ambiguous", "unknown-close", "unknown", "not-hex", "nothing-named", "several", "negative-days"],
)
def test_rm_refuses_bad_prefixes(args: tuple[str, ...], message: str, run_cli, tmp_path: Path) -> None:
    cache = the_cache()
    _planted_entry(cache, tmp_path / "one", "a" * 64, 0)
    _planted_entry(cache, tmp_path / "two", "aaaa" + "b" * 60, 1)
    assert_one_line_error(run_cli(*args), message)
    assert len(cache.entries()) == 2  # nothing removed


def test_a_cache_folder_that_is_a_file_is_refused(
    run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocker))
    message = f"the embedding cache {blocker} is a file, not a folder; point {CACHE_DIR_VARIABLE} at a new or empty"
    for args in (("cache", "ls"), ("cache", "rm", "--all")):
        assert_one_line_error(run_cli(*args), message)
    embed = run_cli("embed", clevr_dir, "-m", f"hf:{tiny_clip}", "--modality", "text", "--out", tmp_path / "e")
    assert_one_line_error(embed, f"{message} folder, or switch the cache off with {CACHE_VARIABLE}=off")
    assert blocker.read_text() == "not a folder" and not (tmp_path / "e").exists()


def test_a_users_folder_is_not_a_cache(
    run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / ("a" * 64)).mkdir()  # even a folder named like an entry
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(mine))
    message = f"{mine} is not a bindscope embedding cache (it holds files and no {OUTPUT_MARK} mark of one)"
    for args in (("cache", "ls"), ("cache", "rm", "--all"), ("cache", "rm", "aa")):
        assert_one_line_error(run_cli(*args), message)
    embed = run_cli("embed", clevr_dir, "-m", f"hf:{tiny_clip}", "--modality", "text", "--out", tmp_path / "e")
    assert_one_line_error(embed, message)
    assert sorted(p.name for p in mine.iterdir()) == sorted(["notes.txt", "a" * 64])


def test_an_unknown_switch_value_is_refused(
    run_cli, clevr_dir: Path, tiny_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, "maybe")
    embed = run_cli("embed", clevr_dir, "-m", f"hf:{tiny_clip}", "--modality", "text", "--out", tmp_path / "e")
    assert_one_line_error(embed, f"{CACHE_VARIABLE}='maybe' is neither on nor off: set it to off (or 0, false, no)")


def test_an_output_inside_the_cache_is_refused(run_cli, clevr_dir: Path, tiny_clip: Path) -> None:
    out = cache_root() / "mine"
    embed = run_cli("embed", clevr_dir, "-m", f"hf:{tiny_clip}", "--modality", "text", "--out", out)
    assert_one_line_error(embed, f"--out {out} lies inside the input {cache_root()}")
    assert not out.exists()
