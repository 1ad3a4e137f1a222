"""Corrupt and hostile inputs (issue 21, part 4): every loader of a folder or file bindscope reads
refuses damage with one line, ``error: ...`` and exit status 1, never a traceback; a refused command
leaves no output, staging folder or temp file behind; and nothing is ever unpickled.

One clean folder of each kind is built once (tiny); each hypothesis example damages a fresh copy of it
(a truncated or garbled file, a dropped or retyped column, NaN, a manifest of another format, a
declared size far beyond the file, a link out of the folder, a folder or empty file in place of a
file, YAML of the wrong shape) and runs the command that consumes it, in process. The property: the
command succeeds (the damage was harmless; where it cannot change the content, the result equals the
clean one) or fails with one line, and a link out of the folder is always refused.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import shutil
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindscope.cli import main
from bindscope.core.errors import BindscopeError
from bindscope.core.io import OUTPUT_MARK
from bindscope.data.datasets import build_dataset
from bindscope.embeddings.store import import_embeddings
from bindscope.space.planted import planted_embeddings
from bindscope.space.splits import load_split, save_split, scene_split, split_to_dict
from cli_checks import assert_one_line_error, command_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SRC = Path(__file__).resolve().parents[2] / "src" / "bindscope"
SPACE_YAML = "name: tiny\nconcepts:\n  color: [red, blue, green]\n  shape: [cube, ball, cone]\nobjects_per_scene: 2\n"
SCRATCH = {
    "name": "tiny",
    "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "ball", "cone"]},
    "max_objects": 2,
    "d_model": 8,
    "ff": 8,
    "d_out": 4,
    "layers": 1,
    "heads": 2,
    "batch_size": 8,
    "steps": 3,
    "eval_every": 1,
    "checkpoint_every": 1,
    "eval_scenes": 8,
}
RUN_CONFIG = {
    "name": "r",
    "datasets": [{"name": "tiny", "preset": "space.yaml", "max_scenes": 20}],
    "models": [{"spec": "st:all-MiniLM-L6-v2"}],
    "seeds": [0],
    "analyses": {"probe": {"optimizer": "lbfgs"}},
}
PROBE = ("--seeds", "0", "--optimizer", "lbfgs", "--max-iter", "30", "-q")
#: Examples per property; raise BINDSCOPE_FUZZ_EXAMPLES to search longer (e.g. 500 before a release).
EXAMPLES = int(os.environ.get("BINDSCOPE_FUZZ_EXAMPLES", "20"))
FAST = settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow])


# -- running the command in process ----------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What one in-process ``bindscope`` call did: exit status, output, or an escaped exception."""

    code: int | None
    out: str
    err: str
    exc: BaseException | None = None

    def describe(self) -> str:
        if self.exc is not None:
            return "".join(traceback.format_exception(self.exc))
        return f"exit {self.code}\nstdout: {self.out[-2000:]}\nstderr: {self.err[-2000:]}"


@pytest.fixture(scope="module", autouse=True)
def command_built_once() -> Iterator[None]:
    """Typer builds the click command of the whole app (some 30 commands, their signatures read again) on
    every ``app(...)`` call: 0.3 s, most of an in-process call here. Build it once for the module; the
    command object is the same each time, so what each call parses and runs is unchanged."""
    import typer.main

    build = typer.main.get_command
    built: dict[int, tuple[Any, Any]] = {}

    def get_command(typer_instance: Any) -> Any:
        key = id(typer_instance)
        if key not in built or built[key][0] is not typer_instance:
            built[key] = (typer_instance, build(typer_instance))
        return built[key][1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.main, "get_command", get_command)
        yield


def cli(*args: object) -> Outcome:
    """``bindscope ARGS`` through :func:`bindscope.cli.main`, in this process (subprocesses are too slow here)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with command_in_process(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(a) for a in args])
    except SystemExit as stop:
        return Outcome(stop.code if isinstance(stop.code, int) else 1, out.getvalue(), err.getvalue())
    except Exception as exc:  # a traceback the user would see: reported by the assertions
        return Outcome(None, out.getvalue(), err.getvalue(), exc)
    return Outcome(0, out.getvalue(), err.getvalue())


def assert_refused(outcome: Outcome) -> None:
    """Exit 1 with exactly one stderr line, ``error: ...``, and no traceback."""
    assert outcome.exc is None, outcome.describe()
    lines = outcome.err.strip().splitlines()
    assert outcome.code == 1 and len(lines) == 1 and lines[0].startswith("error: "), outcome.describe()
    assert "Traceback" not in outcome.err


def assert_ok_or_refused(outcome: Outcome, *, must_fail: bool = False) -> bool:
    """The property: success (unless ``must_fail``) or a one-line refusal; True on success."""
    if outcome.code == 0 and outcome.exc is None and not must_fail:
        return True
    assert_refused(outcome)
    return False


@contextlib.contextmanager
def output_watch(out: Path) -> Iterator[Callable[[bool], None]]:
    """Check, once the command ran, that a refused command left nothing beside ``out`` (no output,
    staging folder, temp or lock file) and that a successful one added only ``out``."""
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    before = set(os.listdir(parent))

    def check(succeeded: bool) -> None:
        added = set(os.listdir(parent)) - before
        assert added == ({out.name} if succeeded else set()), sorted(added)

    yield check


# -- damage ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Damage:
    """One change to one file of a folder."""

    kind: str
    file: str
    at: float = 0.0
    flips: tuple[tuple[float, int], ...] = ()


#: Damages that leave the file's content clean but must still be refused where the file is read.
REFUSED_WHERE_READ = {"symlink-out", "folder", "delete"}


def damages(files: list[str]) -> st.SearchStrategy[Damage]:
    """Byte-level damage to one of ``files``: truncation, flipped bytes, empty, a folder, deletion or a
    link to a clean copy outside the folder."""
    name = st.sampled_from(files)
    flips = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=4)
    return st.one_of(
        st.builds(Damage, st.just("truncate"), name, st.floats(0, 1, exclude_max=True)),
        st.builds(Damage, st.just("flip"), name, flips=flips.map(tuple)),
        st.builds(Damage, st.sampled_from(["empty", "folder", "delete", "symlink-out"]), name),
    )


def apply_damage(root: Path, damage: Damage, outside: Path) -> None:
    """Damage ``root / damage.file``; ``outside`` is a scratch folder beyond ``root`` for link targets."""
    path = root / damage.file
    data = path.read_bytes()
    if damage.kind == "truncate":
        path.write_bytes(data[: int(damage.at * len(data))])
    elif damage.kind == "flip":
        raw = bytearray(data)
        for at, xor in damage.flips:
            if raw:
                raw[int(at * len(raw))] ^= xor
        path.write_bytes(bytes(raw))
    elif damage.kind == "empty":
        path.write_bytes(b"")
    elif damage.kind == "delete":
        path.unlink()
    elif damage.kind == "folder":
        path.unlink()
        path.mkdir()
    elif damage.kind == "symlink-out":
        outside.mkdir(parents=True, exist_ok=True)
        target = outside / path.name
        target.write_bytes(data)  # the same, clean content: only the link itself is wrong
        path.unlink()
        path.symlink_to(target)


def fresh(clean: Path, work: Path) -> Path:
    """A copy of ``clean`` at ``work`` (the same path every example, so outputs compare equal)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(clean, work, symlinks=True)
    return work


def edit_json(path: Path, change: Callable[[dict], Any]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_table(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    pq.write_table(change(pq.read_table(path)), path)


def save_npy(path: Path, array: np.ndarray) -> None:
    with path.open("wb") as fh:
        np.save(fh, array, allow_pickle=True)


def declare_shape(path: Path, shape: tuple[int, ...]) -> None:
    """Rewrite a .npy header to declare ``shape`` over the same (much smaller) data."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        _, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        body = fh.read()
    assert version == (1, 0)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype.str, "fortran_order": fortran, "shape": shape})
    path.write_bytes(header.getvalue() + body)


# -- JSON and YAML values a hostile file may hold -------------------------------------------------------
INTS = st.integers(-3, 3) | st.integers(10**6, 2**70) | st.sampled_from([10**12, -(2**63), 2**64, 10**30])
SCALARS = st.none() | st.booleans() | INTS | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
HOSTILE_NAMES = st.sampled_from(["../../../etc/passwd", "/etc/passwd", "../object", "a/../../x", ".", ""])


def json_damages(keys: list[str]) -> st.SearchStrategy[tuple[str, str, Any]]:
    """(op, key, value): drop a key, set one to a hostile value, or add an unknown one (harmless)."""
    return st.one_of(
        st.tuples(st.just("drop"), st.sampled_from(keys), st.none()),
        st.tuples(st.just("set"), st.sampled_from(keys), VALUES),
        st.tuples(st.just("add"), st.just("zz_unknown_key"), VALUES),
    )


def apply_json_damage(path: Path, op: str, key: str, value: Any) -> None:
    def change(data: dict) -> None:
        if op == "drop":
            data.pop(key, None)
        else:
            data[key] = value

    edit_json(path, change)


# -- the clean folders ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Folders:
    """One clean folder of each kind, and where examples work."""

    root: Path
    dataset: Path
    array: Path
    embeddings: Path
    probe: Path
    intervene: Path
    split: Path
    model: Path
    space_yaml: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def out(self) -> Path:
        return self.root / "outputs" / "out"


def _must_succeed(outcome: Outcome) -> Outcome:
    assert outcome.code == 0 and outcome.exc is None, outcome.describe()
    return outcome


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Folders:
    """Build every clean folder once: a 9-object, 81-scene dataset, planted embeddings (8 dims), a probe
    result with its probe folders, an intervene result, a scene split, a 3-step scratch model."""
    from bindscope.scratch.config import config_from_dict
    from bindscope.scratch.train import train_model

    root = tmp_path_factory.mktemp("corrupt")
    clean = root / "clean"
    clean.mkdir()
    (clean / "space.yaml").write_text(SPACE_YAML)
    ds = build_dataset(clean / "space.yaml", clean / "dataset", images=False)
    np.save(clean / "planted.npy", planted_embeddings(ds.scenes, "object_additive", dim=8, noise=0.1, seed=0))
    import_embeddings(ds, clean / "planted.npy", name="planted", modality="text", out=clean / "emb")
    _must_succeed(cli("probe", clean / "emb", "--out", clean / "probe", *PROBE))
    _must_succeed(
        cli("intervene", clean / "emb", "--out", clean / "iv", "--probes", clean / "probe", "--no-cases", "-q")
    )
    save_split(scene_split(len(ds), 0.5, 0, dataset_hash=ds.hash), clean / "split.json")
    train_model(config_from_dict(SCRATCH), clean / "model")
    return Folders(
        root,
        clean / "dataset",
        clean / "planted.npy",
        clean / "emb",
        clean / "probe" / "probes" / "seed0",
        clean / "iv",
        clean / "split.json",
        clean / "model",
        clean / "space.yaml",
    )


def files_of(folder: Path) -> list[str]:
    """The files a reader of ``folder`` reads (not the output mark, which only --overwrite reads: see
    tests/faults/test_outputs.py for a damaged one)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != OUTPUT_MARK)


# -- dataset folders ----------------------------------------------------------------------------------
def run_dataset(f: Folders, ds: Path) -> tuple[Outcome, Outcome]:
    """``dataset info DS`` and ``embeddings import DS ARRAY --out OUT`` (which must leave nothing on refusal)."""
    info = cli("dataset", "info", ds)
    with output_watch(f.out) as check:
        made = cli("embeddings", "import", ds, f.array, "--name", "x", "--modality", "text", "--out", f.out)
        check(made.code == 0 and made.exc is None)
    return info, made


@pytest.fixture(scope="module")
def clean_dataset_info(folders: Folders) -> str:
    info, made = run_dataset(folders, fresh(folders.dataset, folders.work / "dataset"))
    assert made.code == 0, made.describe()
    return _must_succeed(info).out


def check_dataset(f: Folders, ds: Path, clean_info: str, *, must_fail: bool = False, same: bool = False) -> None:
    info, made = run_dataset(f, ds)
    ok_info = assert_ok_or_refused(info, must_fail=must_fail)
    ok_made = assert_ok_or_refused(made, must_fail=must_fail)
    assert ok_info == ok_made, (info.describe(), made.describe())
    if same:
        assert ok_info and info.out == clean_info


@FAST
@given(damage=st.data())
def test_damaged_dataset_files(folders: Folders, clean_dataset_info: str, damage: st.DataObject) -> None:
    d = damage.draw(damages(files_of(folders.dataset)))
    ds = fresh(folders.dataset, folders.work / "dataset")
    apply_damage(ds, d, folders.outside)
    check_dataset(folders, ds, clean_dataset_info, must_fail=d.kind in REFUSED_WHERE_READ)


@FAST
@given(
    change=json_damages(["format", "preset", "num_scenes", "objects_per_scene", "concepts", "hash", "spec", "images"])
)
def test_damaged_dataset_manifest(folders: Folders, clean_dataset_info: str, change: tuple[str, str, Any]) -> None:
    ds = fresh(folders.dataset, folders.work / "dataset")
    apply_json_damage(ds / "manifest.json", *change)
    check_dataset(folders, ds, clean_dataset_info, same=change[0] == "add")


def retype(column: str, to: pa.DataType) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        i = table.column_names.index(column)
        return table.set_column(i, column, table[column].cast(to))

    return change


TABLE_CHANGES = st.one_of(
    st.tuples(
        st.just("drop"), st.sampled_from(["scene", "num_objects", "object1_color", "object2_shape_idx", "caption"])
    ),
    st.tuples(st.just("add"), st.sampled_from(["extra", "object3_color"])),
    st.tuples(
        st.just("to-string"), st.sampled_from(["scene", "num_objects", "object1_color_idx", "object2_shape_idx"])
    ),
    st.tuples(st.just("to-float"), st.sampled_from(["scene", "object1_color_idx"])),
    st.tuples(st.just("nan"), st.sampled_from(["object1_color_idx", "num_objects"])),
    st.tuples(st.just("large-string"), st.sampled_from(["caption", "object1_color"])),
)


def change_table(op: str, column: str) -> Callable[[pa.Table], pa.Table]:
    """A column dropped, added, or of another type; NaN written into a whole-number column."""
    if op == "drop":
        return lambda t: t.drop_columns([column])
    if op == "add":
        return lambda t: t.append_column(column, pa.array(["x"] * t.num_rows))
    if op == "large-string":
        return retype(column, pa.large_string())
    if op == "to-string":
        return retype(column, pa.string())
    if op == "to-float":
        return retype(column, pa.float64())

    def nan(t: pa.Table) -> pa.Table:
        values = t[column].to_numpy().astype(float)
        values[0] = np.nan
        return t.set_column(t.column_names.index(column), column, pa.array(values))

    return nan


@FAST
@given(change=TABLE_CHANGES)
def test_dataset_table_with_other_columns_or_types(
    folders: Folders, clean_dataset_info: str, change: tuple[str, str]
) -> None:
    ds = fresh(folders.dataset, folders.work / "dataset")
    edit_table(ds / "scenes.parquet", change_table(*change))
    harmless = change[0] == "large-string"  # the same text in a wider type
    check_dataset(folders, ds, clean_dataset_info, must_fail=not harmless, same=harmless)


@pytest.mark.parametrize("path", ["../planted.npy", "/etc/hostname", "images/../../planted.npy"])
def test_dataset_image_paths_never_leave_the_folder(folders: Folders, path: str) -> None:
    ds = fresh(folders.dataset, folders.work / "dataset")
    edit_table(
        ds / "scenes.parquet",
        lambda t: t.set_column(t.column_names.index("image"), "image", pa.array([path] * t.num_rows)),
    )
    info, made = run_dataset(folders, ds)
    for outcome in (info, made):
        assert_refused(outcome)
        assert "must be relative to the folder" in outcome.err or "leads outside" in outcome.err


# -- embedding folders ------------------------------------------------------------------------------
def run_embeddings(f: Folders, emb: Path) -> tuple[Outcome, Outcome]:
    """``embeddings info EMB`` and ``probe EMB --out OUT``."""
    info = cli("embeddings", "info", emb)
    with output_watch(f.out) as check:
        probed = cli("probe", emb, "--out", f.out, *PROBE)
        check(probed.code == 0 and probed.exc is None)
    return info, probed


@pytest.fixture(scope="module")
def clean_embeddings(folders: Folders) -> tuple[str, pd.DataFrame]:
    info, probed = run_embeddings(folders, fresh(folders.embeddings, folders.work / "emb"))
    _must_succeed(probed)
    return _must_succeed(info).out, pd.read_parquet(folders.out / "results.parquet")


def check_embeddings(
    f: Folders, emb: Path, clean: tuple[str, pd.DataFrame], *, must_fail: bool = False, same: bool = False
) -> None:
    info, probed = run_embeddings(f, emb)
    ok_info = assert_ok_or_refused(info, must_fail=must_fail)  # info does not check against the dataset
    ok_probe = assert_ok_or_refused(probed, must_fail=must_fail)
    assert ok_probe <= ok_info, (info.describe(), probed.describe())
    if same:
        assert ok_info and info.out == clean[0]
        pd.testing.assert_frame_equal(pd.read_parquet(f.out / "results.parquet"), clean[1])


@FAST
@given(damage=damages(["manifest.json", "embeddings.npy"]))
def test_damaged_embedding_files(folders: Folders, clean_embeddings: tuple[str, pd.DataFrame], damage: Damage) -> None:
    emb = fresh(folders.embeddings, folders.work / "emb")
    apply_damage(emb, damage, folders.outside)
    check_embeddings(folders, emb, clean_embeddings, must_fail=damage.kind in REFUSED_WHERE_READ)


@FAST
@given(change=json_damages(["format", "name", "modality", "dim", "num_rows", "dataset_hash", "dataset_path", "rows"]))
def test_damaged_embedding_manifest(
    folders: Folders, clean_embeddings: tuple[str, pd.DataFrame], change: tuple[str, str, Any]
) -> None:
    emb = fresh(folders.embeddings, folders.work / "emb")
    apply_json_damage(emb / "manifest.json", *change)
    check_embeddings(folders, emb, clean_embeddings, same=change[0] == "add")


ARRAY_CHANGES = st.one_of(
    st.tuples(st.sampled_from(["nan", "inf", "-inf"]), st.integers(0, 81 * 8 - 1)),
    st.tuples(st.sampled_from(["float64", "float16", "int32", "complex64", "<U3", "bool"]), st.just(0)),
    st.tuples(st.sampled_from(["transpose", "drop-row", "add-row", "flatten", "3-d"]), st.just(0)),
    st.tuples(st.just("huge-shape"), st.sampled_from([10**12, 10**6, 82])),
)


def change_array(path: Path, op: str, arg: int) -> None:
    """NaN or inf in one cell, another dtype or shape, or a header declaring far more rows than the file holds."""
    x = np.load(path)
    if op in ("nan", "inf", "-inf"):
        x.flat[arg] = float(op)
    elif op == "transpose":
        x = x.T
    elif op == "drop-row":
        x = x[:-1]
    elif op == "add-row":
        x = np.concatenate([x, x[:1]])
    elif op == "flatten":
        x = x.ravel()
    elif op == "3-d":
        x = x[:, :, None]
    elif op == "huge-shape":
        return declare_shape(path, (arg, x.shape[1]))
    else:
        x = x.astype(op)
    save_npy(path, x)


@FAST
@given(change=ARRAY_CHANGES)
def test_embedding_arrays_of_another_kind(
    folders: Folders, clean_embeddings: tuple[str, pd.DataFrame], change: tuple[str, int]
) -> None:
    emb = fresh(folders.embeddings, folders.work / "emb")
    change_array(emb / "embeddings.npy", *change)
    check_embeddings(folders, emb, clean_embeddings, must_fail=True)


def test_a_huge_declared_array_is_not_allocated(folders: Folders) -> None:
    emb = fresh(folders.embeddings, folders.work / "emb")
    declare_shape(emb / "embeddings.npy", (10**12, 8))  # 32 TB: numpy would try to allocate it
    info, probed = run_embeddings(folders, emb)
    for outcome in (info, probed):
        assert_refused(outcome)
        assert "declares shape (1000000000000, 8)" in outcome.err


# -- probe folders ----------------------------------------------------------------------------------
def run_probes(f: Folders, probes: Path) -> Outcome:
    """``intervene EMB --probes PROBES --out OUT`` (frozen probes score the edits)."""
    with output_watch(f.out) as check:
        outcome = cli("intervene", f.embeddings, "--probes", probes, "--out", f.out, "--no-cases", "-q")
        check(outcome.code == 0 and outcome.exc is None)
    return outcome


@pytest.fixture(scope="module")
def clean_probe_result(folders: Folders) -> pd.DataFrame:
    _must_succeed(run_probes(folders, fresh(folders.probe, folders.work / "probes")))
    return pd.read_parquet(folders.out / "results.parquet")


def check_probes(f: Folders, probes: Path, clean: pd.DataFrame, *, must_fail: bool = False, same: bool = False) -> None:
    ok = assert_ok_or_refused(run_probes(f, probes), must_fail=must_fail)
    if same:
        assert ok
        pd.testing.assert_frame_equal(pd.read_parquet(f.out / "results.parquet"), clean)


@FAST
@given(damage=damages(["probe.json", "object.npy", "color.npy", "shape.npy"]))
def test_damaged_probe_files(folders: Folders, clean_probe_result: pd.DataFrame, damage: Damage) -> None:
    probes = fresh(folders.probe, folders.work / "probes")
    apply_damage(probes, damage, folders.outside)
    check_probes(folders, probes, clean_probe_result, must_fail=damage.kind in REFUSED_WHERE_READ)


@FAST
@given(
    change=json_damages(["format", "names", "center", "normalize", "seed", "split", "solver", "dataset_hash"])
    | st.tuples(st.just("set"), st.just("names"), st.lists(HOSTILE_NAMES, min_size=1, max_size=2))
)
def test_damaged_probe_json(folders: Folders, clean_probe_result: pd.DataFrame, change: tuple[str, str, Any]) -> None:
    probes = fresh(folders.probe, folders.work / "probes")
    apply_json_damage(probes / "probe.json", *change)
    check_probes(folders, probes, clean_probe_result, same=change[0] == "add")


@FAST
@given(name=st.sampled_from(["object", "color", "shape"]), change=ARRAY_CHANGES)
def test_probe_weights_of_another_kind(
    folders: Folders, clean_probe_result: pd.DataFrame, name: str, change: tuple[str, int]
) -> None:
    probes = fresh(folders.probe, folders.work / "probes")
    path = probes / f"{name}.npy"
    op, arg = change
    shape = np.load(path).shape
    if op in ("nan", "inf", "-inf"):
        arg %= shape[0] * shape[1]
    harmless = op in ("float64", "float16")  # the same weights as other floats
    change_array(path, op, arg)
    check_probes(folders, probes, clean_probe_result, must_fail=not harmless)


def test_probe_names_never_leave_the_folder(folders: Folders) -> None:
    probes = fresh(folders.probe, folders.work / "probes")
    shutil.copy(probes / "object.npy", folders.work / "stolen.npy")  # a valid array one level up
    edit_json(probes / "probe.json", lambda d: d.update(names=["../stolen"]))
    outcome = run_probes(folders, probes)
    assert_refused(outcome)
    assert "leads outside" in outcome.err


# -- result folders ----------------------------------------------------------------------------------
def run_table(f: Folders, result: Path) -> Outcome:
    """``intervene RESULT --table --out OUT`` reads an intervene result folder back."""
    with output_watch(f.out) as check:
        outcome = cli("intervene", result, "--table", "--out", f.out)
        check(outcome.code == 0 and outcome.exc is None)
    return outcome


@pytest.fixture(scope="module")
def clean_table(folders: Folders) -> str:
    _must_succeed(run_table(folders, fresh(folders.intervene, folders.work / "iv")))
    return (folders.out / "table.md").read_text()


def check_table(f: Folders, result: Path, clean: str, *, must_fail: bool = False, same: bool = False) -> None:
    ok = assert_ok_or_refused(run_table(f, result), must_fail=must_fail)
    if same:
        assert ok and (f.out / "table.md").read_text() == clean


@FAST
@given(damage=damages(["summary.json", "results.parquet"]))
def test_damaged_result_files(folders: Folders, clean_table: str, damage: Damage) -> None:
    result = fresh(folders.intervene, folders.work / "iv")
    apply_damage(result, damage, folders.outside)
    check_table(folders, result, clean_table, must_fail=damage.kind in REFUSED_WHERE_READ)


SUMMARY_KEYS = ["format", "analysis", "created", "inputs", "settings", "seeds", "seconds", "warnings"]
NUMBER_KEYS = ["edits", "k", "groups", "results", "banks", "concepts"]


@FAST
@given(
    change=json_damages(SUMMARY_KEYS + NUMBER_KEYS)
    | st.tuples(
        st.just("set"), st.just("format"), st.fixed_dictionaries({"name": st.just("bindscope-result"), "version": INTS})
    )
)
def test_damaged_result_summary(folders: Folders, clean_table: str, change: tuple[str, str, Any]) -> None:
    result = fresh(folders.intervene, folders.work / "iv")
    apply_json_damage(result / "summary.json", *change)
    check_table(folders, result, clean_table, same=change[0] == "add")


RESULT_TABLE_CHANGES = st.one_of(
    st.tuples(st.just("drop"), st.sampled_from(["analysis", "group", "metric", "seed", "value"])),
    st.tuples(st.just("add"), st.just("extra")),
    st.tuples(st.just("to-string"), st.sampled_from(["seed", "value"])),
    st.tuples(st.just("to-float"), st.sampled_from(["seed", "metric"])),
)


@FAST
@given(change=RESULT_TABLE_CHANGES)
def test_result_tables_with_other_columns_or_types(folders: Folders, clean_table: str, change: tuple[str, str]) -> None:
    result = fresh(folders.intervene, folders.work / "iv")
    op, column = change
    if op == "to-float" and column == "metric":  # text that is not a number cannot be a float: use numbers
        edit_table(
            result / "results.parquet",
            lambda t: t.set_column(t.column_names.index(column), column, pa.array(np.zeros(t.num_rows))),
        )
    else:
        edit_table(result / "results.parquet", change_table(op, column))
    check_table(folders, result, clean_table, must_fail=op != "add", same=op == "add")


# -- split files -------------------------------------------------------------------------------------
SPLIT_KEYS = ["format", "kind", "seed", "train_fraction", "train", "test", "validation", "dataset_hash", "source"]


@FAST
@given(change=json_damages(SPLIT_KEYS), damage=st.none() | damages(["split.json"]))
def test_damaged_split_files(folders: Folders, change: tuple[str, str, Any], damage: Damage | None) -> None:
    """Split files have no command of their own: ``load_split`` (the public API) refuses damage with a
    :class:`BindscopeError` whose message is one line."""
    work = folders.work / "split"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "split.json"
    shutil.copy(folders.split, path)
    apply_json_damage(path, *change)
    if damage is not None:
        apply_damage(work, damage, folders.outside)
    try:
        split = load_split(path, dataset_hash=json.loads(folders.split.read_text())["dataset_hash"])
    except BindscopeError as exc:
        assert "\n" not in str(exc)
        return
    if change[0] == "add" and damage is None:
        pytest.fail("a split with an unknown field was accepted")
    assert split_to_dict(split)["format"] == "bindscope-split-v1"


# -- YAML configs -------------------------------------------------------------------------------------
class Validated(Exception):
    """Raised in place of the work a command does after its config validated (kept out of the loops)."""


#: Whole documents that are no mapping of settings: plain values (dumped as YAML) or raw bytes.
YAML_DOCS = st.one_of(
    st.lists(SCALARS, max_size=3),
    SCALARS,
    st.sampled_from([b"key: [unclosed\n", b"a: " + b"[" * 2000 + b"]" * 2000, b"a: " + b"9" * 5000]),
    st.binary(max_size=40).map(lambda b: b"\xff\xfe" + b),
)


def yaml_damages(keys: list[str]) -> st.SearchStrategy[tuple[str, str, Any]]:
    """A key dropped or set to a hostile value, an unknown key, a huge number, or a whole document that is
    not a mapping (a list, a scalar, malformed, deeply nested, a 5,000-digit number, binary)."""
    return st.one_of(
        json_damages(keys),
        st.tuples(st.just("set"), st.sampled_from(keys), st.integers(10**6, 10**40)),
        st.tuples(st.just("document"), st.just(""), YAML_DOCS),
    )


def write_yaml(path: Path, base: dict, change: tuple[str, str, Any]) -> None:
    op, key, value = change
    if op == "document":
        path.write_bytes(value if isinstance(value, bytes) else yaml.safe_dump(value).encode())
        return
    data = json.loads(json.dumps(base))
    if op == "drop":
        data.pop(key, None)
    else:
        data[key] = value
    path.write_text(yaml.safe_dump(data))


PRESET = yaml.safe_load(SPACE_YAML)


@FAST
@given(change=yaml_damages(["name", "concepts", "objects_per_scene", "scenes", "caption", "noun", "image", "ordinal"]))
def test_damaged_preset_yaml(folders: Folders, change: tuple[str, str, Any]) -> None:
    path = folders.work / "space.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_yaml(path, PRESET, change)
    with output_watch(folders.out) as check:
        outcome = cli("dataset", "build", path, "--out", folders.out, "--no-images", "-q")
        check(assert_ok_or_refused(outcome, must_fail=change[0] == "add"))


def _validated(*args: Any, **kwargs: Any) -> None:
    raise Validated()


@FAST
@given(change=yaml_damages(["name", "datasets", "models", "seeds", "analyses", "device"]))
def test_damaged_run_config(folders: Folders, change: tuple[str, str, Any]) -> None:
    """``bindscope run CONFIG``: the config is validated; a valid one reaches the pipeline (stubbed here)."""
    path = folders.work / "run.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(folders.space_yaml, folders.work / "space.yaml")
    write_yaml(path, RUN_CONFIG, change)
    with pytest.MonkeyPatch.context() as mp, output_watch(folders.out) as check:
        mp.setattr("bindscope.pipeline.run.run_pipeline", _validated)
        outcome = cli("run", path, "--out", folders.out, "-q")
        check(False)
    if not isinstance(outcome.exc, Validated):
        assert_ok_or_refused(outcome, must_fail=True)
    else:
        assert change[0] != "add", "an unknown key was accepted"


@FAST
@given(change=yaml_damages(["concepts", "max_objects", "d_model", "heads", "steps", "batch_size", "seed", "fraction"]))
def test_damaged_scratch_config(folders: Folders, change: tuple[str, str, Any]) -> None:
    """``bindscope scratch train --config YAML``: the config is validated; training itself is stubbed."""
    path = folders.work / "scratch.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_yaml(path, SCRATCH, change)
    with pytest.MonkeyPatch.context() as mp, output_watch(folders.out) as check:
        mp.setattr("bindscope.scratch.train.train_model", _validated)
        outcome = cli("scratch", "train", "--config", path, "--out", folders.out, "-q")
        check(False)
    if not isinstance(outcome.exc, Validated):
        assert_ok_or_refused(outcome, must_fail=True)
    else:
        assert change[0] != "add", "an unknown key was accepted"


# -- scratch models and checkpoints ------------------------------------------------------------------
def run_export(f: Folders, model: Path) -> Outcome:
    with output_watch(f.out) as check:
        outcome = cli("scratch", "export", model, "--out", f.out, "--no-control", "-q")
        check(outcome.code == 0 and outcome.exc is None)
    return outcome


@settings(max_examples=max(EXAMPLES // 2, 1), suppress_health_check=[HealthCheck.too_slow])
@given(
    damage=damages(["config.json", "model.safetensors"])
    | json_damages(["format", "config", "preset", "vocabulary", "objects", "selected_step"])
)
def test_damaged_scratch_model(folders: Folders, damage: Damage | tuple[str, str, Any]) -> None:
    """``bindscope scratch export MODEL``: the model folder (config.json, safetensors weights) is checked."""
    model = fresh(folders.model, folders.work / "model")
    if isinstance(damage, Damage):
        apply_damage(model, damage, folders.outside)
        must_fail = damage.kind in REFUSED_WHERE_READ
    else:
        apply_json_damage(model / "config.json", *damage)
        must_fail = False
    assert_ok_or_refused(run_export(folders, model), must_fail=must_fail)


def nan_weights(path: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = float("nan")
    save_file(tensors, str(path))


def test_scratch_weights_with_nan_are_refused(folders: Folders) -> None:
    model = fresh(folders.model, folders.work / "model")
    nan_weights(model / "model.safetensors")
    outcome = run_export(folders, model)
    assert_refused(outcome)
    assert "NaN or infinite values" in outcome.err


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def interrupted(folders: Folders) -> Path:
    """An unfinished training of the scratch config: ``.model.training/`` holding its step-2 checkpoint."""
    from bindscope.scratch.config import config_from_dict
    from bindscope.scratch.train import train_model

    out = folders.root / "clean" / "unfinished" / "model"

    def stop(step: int) -> None:
        if step == 2:
            raise _Stop()

    with pytest.raises(_Stop):
        train_model(config_from_dict(SCRATCH), out, on_step=stop)
    return out.with_name(".model.training")


CHECKPOINT_DAMAGE = [
    ("state.json", lambda p: p.write_text("{")),
    ("state.json", lambda p: edit_json(p, lambda d: d.pop("param_groups"))),
    ("state.json", lambda p: edit_json(p, lambda d: d.update(step="two"))),
    ("state.json", lambda p: edit_json(p, lambda d: d.update(param_groups=[{"lr": 1}]))),
    ("state.json", lambda p: edit_json(p, lambda d: d.update(window=[[1, 2], "x"]))),
    ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:50])),
    ("model.safetensors", nan_weights),
    ("optimizer.safetensors", lambda p: p.write_bytes(b"")),
]


@pytest.mark.parametrize(("name", "damage"), CHECKPOINT_DAMAGE)
def test_damaged_training_checkpoints(folders: Folders, interrupted: Path, name: str, damage: Callable) -> None:
    """``bindscope scratch train`` resumes from the newest checkpoint: a damaged one is one line that
    says to start over (--overwrite), never a traceback."""
    out = folders.work / "resume" / "model"
    work = fresh(interrupted, out.with_name(".model.training"))
    config = folders.work / "resume" / "scratch.yaml"
    config.write_text(yaml.safe_dump(SCRATCH))
    (step,) = sorted(work.glob("step-*"))
    damage(step / name)
    outcome = cli("scratch", "train", "--config", config, "--out", out, "-q")
    assert_ok_or_refused(outcome)


# -- nothing is unpickled -------------------------------------------------------------------------------
#: Modules that exist to unpickle: importing one is a finding. ``pickle`` itself may be imported for its
#: exception types (to refuse a pickled file); calling its loaders is a finding.
UNPICKLING_MODULES = {"dill", "joblib", "shelve", "cloudpickle", "cPickle"}
PICKLE_MODULES = {"pickle", "_pickle", "cPickle"}
PICKLE_LOADERS = {"load", "loads", "Unpickler"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _import_sites(node: ast.Import | ast.ImportFrom) -> list[str]:
    """``import dill`` and the like; ``from pickle import loads`` and the like."""
    if isinstance(node, ast.Import):
        return [f"import {a.name}" for a in node.names if a.name.split(".")[0] in UNPICKLING_MODULES]
    module = (node.module or "").split(".")[0]
    if module in UNPICKLING_MODULES:
        return [f"from {node.module} import ..."]
    loaders = [a.name for a in node.names if a.name in PICKLE_LOADERS]
    return [f"from {module} import {name}" for name in loaders] if module in PICKLE_MODULES else []


def _call_sites(node: ast.Call) -> list[str]:
    """``pickle.loads(...)``, ``read_pickle(...)``, ``allow_pickle`` not False, ``torch.load`` without
    ``weights_only=True``."""
    name = _dotted(node.func)
    keywords = {k.arg: k.value for k in node.keywords}
    module, _, attr = name.rpartition(".")
    loads = module in PICKLE_MODULES | UNPICKLING_MODULES and attr in PICKLE_LOADERS
    found = [name] if loads or attr == "read_pickle" else []
    allow = keywords.get("allow_pickle")
    if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
        found.append(f"{name}(allow_pickle=...)")
    weights_only = keywords.get("weights_only")
    if name == "torch.load" and not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
        found.append("torch.load without weights_only=True")
    return found


def unpickling_sites(tree: ast.AST) -> list[str]:
    """Every place in one module's syntax tree that could unpickle (see the two helpers above)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += _import_sites(node)
        elif isinstance(node, ast.Call):
            found += _call_sites(node)
    return found


def test_no_code_unpickles() -> None:
    """A static check over the package: no unpickling module (dill, joblib, ...), no pickle loader,
    ``read_pickle`` or ``allow_pickle=True``, and every ``torch.load`` passes ``weights_only=True``."""
    sites = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if (found := unpickling_sites(ast.parse(path.read_text(), str(path))))
    }
    assert not sites, sites


def test_the_static_check_finds_what_it_looks_for() -> None:
    code = (
        "import dill\nfrom pickle import loads\nimport numpy as np\nnp.load(p, allow_pickle=True)\n"
        "torch.load(p)\npd.read_pickle(p)\npickle.load(f)\njoblib.load(p)\n"
    )
    assert len(unpickling_sites(ast.parse(code))) == 7
    fine = "import pickle\nexcept_types = (pickle.UnpicklingError,)\ntorch.load(p, weights_only=True)\n"
    assert not unpickling_sites(ast.parse(fine + "np.load(p, allow_pickle=False)\n"))


class Trap:
    """Unpickling this creates the file ``marker``: proof that a loader ran pickled code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (str(self.marker), "w"))


def trap_array(marker: Path) -> np.ndarray:
    arr = np.empty((81, 8), dtype=object)
    arr[0, 0] = Trap(marker)
    return arr


def test_a_pickled_embedding_array_is_never_unpickled(folders: Folders) -> None:
    marker = folders.work / "pwned-embeddings"
    emb = fresh(folders.embeddings, folders.work / "emb")
    save_npy(emb / "embeddings.npy", trap_array(marker))
    info, probed = run_embeddings(folders, emb)
    for outcome in (info, probed):
        assert_refused(outcome)
        assert "holds Python objects, a pickle" in outcome.err
    assert not marker.exists()


def test_pickled_probe_weights_are_never_unpickled(folders: Folders) -> None:
    marker = folders.work / "pwned-probes"
    probes = fresh(folders.probe, folders.work / "probes")
    save_npy(probes / "object.npy", trap_array(marker)[:9])
    assert_refused(run_probes(folders, probes))
    assert not marker.exists()


def test_pickled_scratch_weights_are_never_unpickled(folders: Folders) -> None:
    import torch

    marker = folders.work / "pwned-weights"
    model = fresh(folders.model, folders.work / "model")
    torch.save({"weights": Trap(marker)}, model / "model.safetensors")  # a torch pickle in place of safetensors
    assert_refused(run_export(folders, model))
    assert not marker.exists()


@pytest.mark.slow
def test_pickled_hf_weights_are_never_unpickled(folders: Folders, tmp_path: Path) -> None:
    """A local transformers folder whose weights are a pickle (``pytorch_model.bin``): one line, no code run."""
    import torch

    from tiny_models import save_tiny_clip

    marker = tmp_path / "pwned-hf"
    model = save_tiny_clip(tmp_path / "clip")
    (model / "model.safetensors").unlink()
    torch.save({"weights": Trap(marker)}, model / "pytorch_model.bin")
    with output_watch(folders.out) as check:
        outcome = cli("embed", folders.dataset, "--model", f"hf:{model}", "--modality", "text", "--out", folders.out)
        check(False)
    assert_refused(outcome)
    assert "could not be loaded" in outcome.err
    assert not marker.exists()


def test_torch_load_refuses_pickled_code_by_default(tmp_path: Path) -> None:
    """Model libraries (transformers, open_clip) call ``torch.load`` on ``.bin``/``.pt`` files; the
    installed torch defaults to ``weights_only=True``, so a trap in such a file never runs either."""
    import pickle

    import torch

    marker = tmp_path / "pwned"
    torch.save({"weights": Trap(marker)}, tmp_path / "model.bin")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "model.bin")
    assert not marker.exists()


# -- the real command, in a subprocess ------------------------------------------------------------------
@pytest.mark.slow
def test_spot_checks_through_the_installed_command(run_cli, folders: Folders, tmp_path: Path) -> None:
    """A few of the refusals above through the real ``bindscope`` executable: one line, exit 1, no output."""
    ds = fresh(folders.dataset, tmp_path / "dataset")
    edit_table(ds / "scenes.parquet", change_table("to-string", "object1_color_idx"))
    emb = fresh(folders.embeddings, tmp_path / "emb")
    declare_shape(emb / "embeddings.npy", (10**12, 8))
    probes = fresh(folders.probe, tmp_path / "probes")
    (probes / "probe.json").unlink()
    (probes / "probe.json").symlink_to(folders.probe / "probe.json")  # a clean file, but outside the folder
    result = fresh(folders.intervene, tmp_path / "iv")
    (result / "results.parquet").write_bytes((result / "results.parquet").read_bytes()[:200])
    bad_yaml = tmp_path / "space.yaml"
    bad_yaml.write_text(SPACE_YAML.replace("objects_per_scene: 2", "objects_per_scene: 1000000000"))
    out = tmp_path / "out"
    cases = [
        (
            ("embeddings", "import", ds, folders.array, "--name", "x", "--modality", "text", "--out", out),
            "holds string",
        ),
        (("probe", emb, "--out", out, *PROBE), "declares shape (1000000000000, 8)"),
        (("intervene", folders.embeddings, "--probes", probes, "--out", out, "-q"), "leads outside"),
        (("intervene", result, "--table", "--out", out), "is not a readable parquet file"),
        (("dataset", "build", bad_yaml, "--out", out, "--no-images", "-q"), "objects_per_scene: must be at most 64"),
    ]
    for args, message in cases:
        assert_one_line_error(run_cli(*args), message)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "emb", "iv", "probes", "space.yaml"]
