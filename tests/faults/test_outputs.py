"""Nothing a user owns is ever destroyed: an ``--out`` that is, holds or lies inside an input is refused
before any work, ``--overwrite`` replaces only a folder bindscope wrote as the same kind of output, and
the current folder, the root, the home folder and an empty name are never outputs.

Every case checks the one-line message, the exit status and that each input and pre-existing folder
is byte for byte as it was.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bindscope.core.errors import BindscopeError
from cli_checks import assert_one_line_error
from folders import snapshot

#: Examples per property; raise BINDSCOPE_FUZZ_EXAMPLES to search longer.
EXAMPLES = int(os.environ.get("BINDSCOPE_FUZZ_EXAMPLES", "30"))
IMPORT = ("embeddings", "import", "data/clevr", "x.npy", "--name", "m", "--modality", "image")
NEVER = "bindscope never writes over or into what a command reads: choose an --out outside it"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: a dataset, an embedding folder and its +rand control, an array, two run folders,
    a preset YAML among notes, a folder of their own, and a link to the embedding folder."""
    from bindscope.data.datasets import build_dataset
    from bindscope.embeddings.store import import_embeddings

    root = tmp_path_factory.mktemp("project")
    ds = build_dataset("clevr", root / "data" / "clevr", images=False)
    rng = np.random.default_rng(0)
    np.save(root / "x.npy", rng.normal(size=(len(ds), 8)).astype(np.float32))
    np.save(root / "r.npy", rng.normal(size=(len(ds), 8)).astype(np.float32))
    import_embeddings(ds.root, root / "x.npy", name="m", modality="image", out=root / "emb" / "m")
    import_embeddings(ds.root, root / "r.npy", name="m+rand", modality="image", out=root / "emb" / "m+rand")
    for run in ("r1", "r2"):
        (root / "runs" / run).mkdir(parents=True)
        (root / "runs" / run / "config.yaml").write_text("name: r\n")
    (root / "presets").mkdir()
    (root / "presets" / "space.yaml").write_text(
        "name: space\nconcepts: {color: [red, blue, green], shape: [cube, ball]}\nobjects_per_scene: 2\n"
    )
    (root / "presets" / "notes.md").write_text("my notes")
    (root / "mine").mkdir()
    (root / "mine" / "thesis.tex").write_text("\\chapter{Binding}")
    (root / "link-to-emb").symlink_to(root / "emb" / "m")
    return root


def same_after(world: Path, command) -> object:
    """Run ``command``; the project must be byte for byte as it was (nothing added, nothing changed)."""
    before = snapshot(world)
    result = command()
    assert snapshot(world) == before, "the command changed the user's files"
    return result


# -- 1. an --out that is, holds or lies inside an input -------------------------------------------------
OVERLAPS = {
    "probe: --out is the embedding folder": (("probe", "emb/m", "--out", "emb/m", "--overwrite"), "is", "emb/m"),
    "probe: --out holds it (its parent)": (("probe", "emb/m", "--out", "emb", "--overwrite"), "holds", "emb/m"),
    "probe: --out inside it": (("probe", "emb/m", "--out", "emb/m/probe"), "lies inside", "emb/m"),
    "probe: --out is the --dataset": (
        ("probe", "emb/m", "--dataset", "data/clevr", "--out", "data/clevr", "--overwrite"),
        "is",
        "data/clevr",
    ),
    "decompose: --out is the --control": (
        ("decompose", "emb/m", "--control", "emb/m+rand", "--out", "emb/m+rand", "--overwrite"),
        "is",
        "emb/m+rand",
    ),
    "complexity: --out is a link to the input": (
        ("complexity", "emb/m", "--out", "link-to-emb", "--overwrite"),
        "is",
        "emb/m",
    ),
    "geometry: --out holds the second folder": (
        ("geometry", "emb/m", "emb/m+rand", "--out", "emb", "--overwrite"),
        "holds",
        "emb/m",
    ),
    "embeddings import: --out is the dataset": (
        (*IMPORT, "--out", "data/clevr", "--overwrite"),
        "is",
        "data/clevr",
    ),
    "embeddings import: --out is the array": (
        (*IMPORT, "--out", "x.npy"),
        "is",
        "x.npy",
    ),
    "embed: --out inside the dataset": (
        ("embed", "data/clevr", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--out", "data/clevr/emb"),
        "lies inside",
        "data/clevr",
    ),
    "compare: --out is a run": (("compare", "runs/r1", "runs/r2", "--out", "runs/r1", "--overwrite"), "is", "runs/r1"),
    "compare: --out holds the runs": (
        ("compare", "runs/r1", "runs/r2", "--out", "runs", "--overwrite"),
        "holds",
        "runs/r1",
    ),
    "dataset build: --out holds the preset file": (
        ("dataset", "build", "presets/space.yaml", "--out", "presets", "--overwrite"),
        "holds",
        "presets/space.yaml",
    ),
    "dataset preview: --out inside the dataset": (
        ("dataset", "preview", "data/clevr", "--out", "data/clevr/grid.png"),
        "lies inside",
        "data/clevr",
    ),
    "scratch export: --out is the model": (("scratch", "export", "mine", "--out", "mine", "--overwrite"), "is", "mine"),
    "scratch complexity: --out inside the sweep": (
        ("scratch", "complexity", "mine", "--out", "mine/c"),
        "lies inside",
        "mine",
    ),
}


@pytest.mark.parametrize(("args", "relation", "given_input"), OVERLAPS.values(), ids=OVERLAPS.keys())
def test_an_out_that_is_holds_or_lies_inside_an_input_is_refused(
    run_cli, world: Path, args: tuple[str, ...], relation: str, given_input: str
) -> None:
    result = same_after(world, lambda: run_cli(*args, cwd=world))
    out = args[args.index("--out") + 1]
    assert_one_line_error(result, f"--out {out} {relation} the input {given_input}; {NEVER}")


def test_the_python_api_refuses_the_same(world: Path) -> None:
    from bindscope.analyses import load_inputs, run_analysis
    from bindscope.embeddings.store import import_embeddings

    inputs = load_inputs("probe", world / "emb" / "m")
    for out in (world / "emb" / "m", world / "emb", world / "data"):
        with pytest.raises(BindscopeError, match=NEVER):
            same_after(world, lambda out=out: run_analysis("probe", inputs, out, overwrite=True))
    with pytest.raises(BindscopeError, match=f"--out {world / 'data'} holds the input {world / 'data' / 'clevr'}"):
        same_after(
            world,
            lambda: import_embeddings(
                world / "data" / "clevr",
                world / "x.npy",
                name="m",
                modality="image",
                out=world / "data",
                overwrite=True,
            ),
        )


# -- 2. --overwrite replaces only a folder bindscope wrote, of the same kind ---------------------------------
FOREIGN = {
    "dataset build": (("dataset", "build", "clevr", "--out", "mine", "--overwrite"), "a dataset"),
    "embeddings import": (
        (*IMPORT, "--out", "mine", "--overwrite"),
        "an embedding folder",
    ),
    "probe": (("probe", "emb/m", "--out", "mine", "--overwrite"), "an analysis result"),
    "compare": (("compare", "runs/r1", "runs/r2", "--out", "mine", "--overwrite"), "a comparison of runs"),
}


@pytest.mark.parametrize(("args", "kind"), FOREIGN.values(), ids=FOREIGN.keys())
def test_overwrite_never_replaces_a_folder_bindscope_did_not_write(
    run_cli, world: Path, args: tuple[str, ...], kind: str
) -> None:
    result = same_after(world, lambda: run_cli(*args, cwd=world))
    assert_one_line_error(
        result,
        f"mine holds files bindscope did not write; --overwrite replaces only {kind} that bindscope wrote: "
        "choose another --out (or delete the folder yourself if you no longer need it)",
    )


def test_overwrite_never_replaces_another_kind_of_output(run_cli, world: Path, tmp_path: Path) -> None:
    """An embedding folder is not replaced by a result, nor a dataset by embeddings."""
    shutil.copytree(world / "emb" / "m+rand", tmp_path / "other-emb")
    shutil.copytree(world / "data" / "clevr", tmp_path / "other-ds")
    before = snapshot(world, tmp_path)
    probe = run_cli("probe", world / "emb" / "m", "--out", tmp_path / "other-emb", "--overwrite")
    assert_one_line_error(probe, "other-emb holds an embedding folder; --overwrite replaces only an analysis result")
    imported = run_cli(
        "embeddings", "import", world / "data" / "clevr", world / "x.npy", "--name", "m", "--modality", "image",
        "--out", tmp_path / "other-ds", "--overwrite",
    )  # fmt: skip
    assert_one_line_error(imported, "other-ds holds a dataset; --overwrite replaces only an embedding folder")
    assert snapshot(world, tmp_path) == before


def test_overwrite_replaces_an_output_of_its_own_kind(run_cli, world: Path, tmp_path: Path) -> None:
    """The refusals above are not over-refusals: the same command replaces what it wrote before."""
    args = ("embeddings", "import", world / "data" / "clevr", world / "x.npy", "--name", "m", "--modality", "image")
    assert run_cli(*args, "--out", tmp_path / "e").returncode == 0
    again = run_cli(*args[:-1], "text", "--out", tmp_path / "e", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert '"modality": "text"' in (tmp_path / "e" / "manifest.json").read_text()


PLACES = {
    "the current folder": (".", "the current folder"),
    "an empty name": ("", "the current folder"),
    "the root folder": ("/", "the root folder"),
    "the current folder, absolute": ("{cwd}", "the current folder"),
    "the home folder": ("{home}", "your home folder"),
}


@pytest.mark.parametrize(("out", "place"), PLACES.values(), ids=PLACES.keys())
def test_the_current_root_and_home_folders_are_never_outputs(run_cli, world: Path, out: str, place: str) -> None:
    """Refused up front (`--out .` once crashed after all the work was done), even with --overwrite."""
    out = out.format(cwd=world / "mine", home=os.environ["HOME"])
    (Path(os.environ["HOME"]) / "dotfile").write_text("mine")
    before = snapshot(world, os.environ["HOME"])
    result = run_cli("probe", world / "emb" / "m", "--out", out, "--overwrite", cwd=world / "mine")
    assert_one_line_error(result, f"is {place}; bindscope writes an output of its own and never replaces such a folder")
    assert snapshot(world, os.environ["HOME"]) == before


# -- property: wherever --out points, the inputs survive, and it is refused exactly when it overlaps them --------
SEGMENTS = st.sampled_from(["data", "clevr", "link-ds", "link-data", "x.npy", "..", ".", "new", "emb"])


def overlaps(out: Path, inputs: list[Path]) -> bool:
    """The oracle, by another route than bindscope's: real paths and their common path."""
    o = os.path.realpath(out)
    return any(os.path.commonpath([o, i]) in (o, i) for i in (os.path.realpath(p) for p in inputs))


@pytest.fixture(scope="module")
def sandboxes(world: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Fresh folders, one per example: the dataset and the array, and links to the dataset and to its parent."""

    def fresh() -> Iterator[Path]:
        for i in itertools.count():
            box = tmp_path_factory.mktemp(f"box{i}")
            shutil.copytree(world / "data", box / "data")
            shutil.copy(world / "x.npy", box / "x.npy")
            (box / "link-ds").symlink_to(box / "data" / "clevr")
            (box / "link-data").symlink_to(box / "data")
            yield box

    return fresh()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=5))
def test_wherever_out_points_the_inputs_survive(sandboxes: Iterator[Path], parts: list[str]) -> None:
    """``--out`` nested in, equal to, a parent of, linked to an input, or reached through ``..``."""
    from bindscope.embeddings.store import import_embeddings

    box = next(sandboxes)
    out = box.joinpath(*parts)
    real = Path(os.path.realpath(out))
    assume(real != box and box in real.parents)  # stay in the sandbox: nothing else is ours to write
    inputs = [box / "data" / "clevr", box / "x.npy"]
    before = snapshot(*inputs)
    try:
        import_embeddings(inputs[0], inputs[1], name="m", modality="image", out=out, overwrite=True)
        refused = None
    except BindscopeError as exc:
        refused = str(exc)
    assert snapshot(*inputs) == before
    if out.name == "..":
        assert refused is not None and "ends in '..'; give the output its own name" in refused, refused
    elif overlaps(out, inputs):
        assert refused is not None and NEVER in refused, refused
    else:
        assert refused is None, refused
        assert (real / "manifest.json").is_file()


def test_a_refused_write_leaves_no_folder_behind(run_cli, world: Path, tmp_path: Path) -> None:
    """The output's missing parents, made for its lock, go again when the command refuses its inputs."""
    (tmp_path / "not-a-run").mkdir()
    result = run_cli("compare", world / "runs" / "r1", tmp_path / "not-a-run", "--out", tmp_path / "new" / "a" / "cmp")
    assert_one_line_error(result, "is not a finished run folder (no manifest.json)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-run"]


@pytest.mark.parametrize("mark", ["{not json", '{"written_by": "bindscope", "kind": "nonsense"}', "[]", ""])
def test_a_damaged_mark_is_a_folder_bindscope_did_not_write(tmp_path: Path, mark: str) -> None:
    """A garbled or foreign mark never lets --overwrite replace a folder; where the mark is unreadable, a
    manifest's format tag still tells (reading a folder never needs its mark)."""
    from bindscope.core.io import OUTPUT_MARK, check_replaceable, mark_output, written_kind

    table = tmp_path / "table"
    table.mkdir()
    (table / "table.md").write_text("| a |")
    mark_output(table, "table")
    check_replaceable(table, "table")  # its own kind: replaceable
    (table / OUTPUT_MARK).write_text(mark)
    assert written_kind(table) is None
    with pytest.raises(BindscopeError, match="table holds files bindscope did not write; --overwrite replaces only"):
        check_replaceable(table, "table")
    (table / "manifest.json").write_text('{"format": "bindscope-embeddings-v1"}')
    assert written_kind(table) is None  # table.md: not what an embedding folder holds, whatever its manifest says
    (table / "table.md").rename(table / "embeddings.npy")
    expected = None if "kind" in mark else "embeddings"  # a readable mark decides; an unreadable one does not
    assert written_kind(table) == expected
