"""The last bad embeddings that crashed (issue 39): a short write on a full disk, constant or all-zero
embeddings, finite values too large for the analyses' float32 arithmetic, and a --model-spec that
`embed` would refuse. Each is one line through the real command, exit status 1, with every input and
earlier folder byte for byte as it was and nothing half-written left behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError, disk_error_message
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.encoders.spec import GRAMMAR
from bindscope.embeddings.store import import_embeddings, write_embeddings
from bindscope.space.planted import planted_embeddings
from cli_checks import assert_one_line_error
from folders import snapshot
from forked_cli import ForkServer

IMPORT = ("embeddings", "import")
PROBE = ("--seeds", "0", "--optimizer", "lbfgs", "--max-iter", "30", "-q")
CONSTANT = "is constant (every row the same{zeros}): nothing about the scenes can be read from it; "
CONSTANT_FIX = "check that the array holds each scene's own embedding, then {fix}"
HUGE = (
    "holds values up to 3e+38, too large for the analyses' float32 arithmetic (the sum of their squares, "
    "{squares}, overflows float32's 3.4e+38); rescale the array (e.g. divide it by its largest absolute value), "
    "then {fix}"
)


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> dict[str, Path]:
    """One .npy of each kind, for the clevr dataset's 576 scenes (dim 8)."""
    root = tmp_path_factory.mktemp("bad-arrays")
    good = planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=8, seed=0)
    out = {
        "good": good,
        "other": planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=8, seed=1),
        "constant": np.full((576, 8), 0.5, np.float32),
        "zeros": np.zeros((576, 8), np.float32),
        "huge": (good / np.abs(good).max() * 3e38).astype(np.float32),
    }
    for name, array in out.items():
        np.save(root / f"{name}.npy", array)
    return {name: root / f"{name}.npy" for name in out}


def hidden(folder: Path) -> list[str]:
    """Leftovers beside the outputs: staging folders (``.OUT.*.partial``), replaced folders, locks (what is
    inside an earlier output, :func:`snapshot` compares)."""
    return sorted(p.name for p in folder.glob(".*"))


def squares(path: Path) -> str:
    array = np.load(path).astype(np.float64)
    return f"{float((array * array).sum()):.3g}"


# -- 4: a short write (numpy's, an OSError without errno) on a full disk ---------------------------------
def run_with_file_limit(server: ForkServer, limit: int, *args: object) -> subprocess.CompletedProcess:
    """The real command, forked by ``server`` with no file it writes allowed past ``limit`` bytes (a full disk;
    :meth:`ForkServer.run_with_file_limit`). ``server`` is the one ``run_cli`` forks from (the model server,
    under the session's hub settings), so this module waits for one server to start, not two.
    """
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return server.run_with_file_limit([str(a) for a in args], env, limit, timeout=120)


def test_a_short_write_on_import_is_the_disk_line_and_the_earlier_import_is_intact(
    model_cli_server: ForkServer, clevr_dir: Path, arrays: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "emb"
    import_embeddings(clevr_dir, arrays["good"], name="first", modality="image", out=out)
    before = snapshot(out, clevr_dir, arrays["other"])
    # the manifest fits under 3000 bytes; embeddings.npy (18,560 bytes) does not: numpy's write comes up short
    done = run_with_file_limit(
        model_cli_server, 3000, *IMPORT, clevr_dir, arrays["other"], "--name", "second", "--modality", "image",
        "--out", out, "--overwrite",
    )  # fmt: skip
    assert_one_line_error(done, f"the disk refused the write to {out / 'embeddings.npy'} (a short write: ")
    assert "bytes written); nothing was replaced and the previous result is intact: free some space" in done.stderr
    assert snapshot(out, clevr_dir, arrays["other"]) == before
    assert hidden(tmp_path) == []


def test_numpys_short_write_is_a_full_disk_and_other_errors_are_not() -> None:
    message = disk_error_message(OSError("18432 requested and 2872 written"))
    assert message is not None
    assert message.startswith(
        "the disk refused the write (a short write: 2872 of 18432 bytes written); nothing was replaced and the "
        "previous result is intact: free some space (or raise the file-size limit) and run the same command again"
    )
    assert disk_error_message(OSError("requested and written")) is None
    assert disk_error_message(OSError(5, "18432 requested and 2872 written")) is None  # it has an errno: not numpy's


# -- 5: constant or all-zero embeddings --------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "zeros"), [("constant", ""), ("zeros", ", all zeros")])
def test_constant_embeddings_are_refused_on_import(
    run_cli, clevr_dir: Path, arrays: dict[str, Path], tmp_path: Path, kind: str, zeros: str
) -> None:
    out = tmp_path / "emb"
    before = snapshot(clevr_dir, arrays[kind])
    done = run_cli(*IMPORT, clevr_dir, arrays[kind], "--name", "x", "--modality", "image", "--out", out)
    expected = (
        f"embedding array {arrays[kind]} " + CONSTANT.format(zeros=zeros) + CONSTANT_FIX.format(fix="import it again")
    )
    assert_one_line_error(done, expected)
    assert done.stderr.strip() == f"error: {expected}"
    assert snapshot(clevr_dir, arrays[kind]) == before
    assert not out.exists() and hidden(tmp_path) == []
    with pytest.raises(BindscopeError, match=r"is constant \(every row the same"):  # the Python API
        import_embeddings(clevr_dir, arrays[kind], name="x", modality="image", out=out)
    assert not out.exists()


@pytest.mark.parametrize("command", ["probe", "decompose"])
def test_a_constant_embedding_folder_is_refused_by_the_analyses(
    run_cli, clevr_dir: Path, tmp_path: Path, command: str
) -> None:
    emb = tmp_path / "emb"  # written past the import check, as an older bindscope or another tool might have
    manifest = {"name": "zeros", "modality": "image", "dataset_hash": load_dataset(clevr_dir).hash}
    write_embeddings(emb, np.zeros((576, 8), np.float32), {**manifest, "dataset_path": str(clevr_dir)})
    out = tmp_path / "out"
    before = snapshot(emb, clevr_dir)
    done = run_cli(command, emb, "--out", out, *PROBE)
    expected = f"embedding file {emb / 'embeddings.npy'} " + CONSTANT.format(zeros=", all zeros")
    assert_one_line_error(done, expected + CONSTANT_FIX.format(fix="embed or import the embeddings again"))
    assert snapshot(emb, clevr_dir) == before
    assert not out.exists() and hidden(tmp_path) == []


# -- 6: finite values too large for float32 arithmetic -----------------------------------------------------
def test_values_near_the_float32_maximum_are_refused_on_import(
    run_cli, clevr_dir: Path, arrays: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "emb"
    before = snapshot(clevr_dir, arrays["huge"])
    done = run_cli(*IMPORT, clevr_dir, arrays["huge"], "--name", "x", "--modality", "image", "--out", out)
    expected = f"embedding array {arrays['huge']} " + HUGE.format(
        squares=squares(arrays["huge"]), fix="import it again"
    )
    assert_one_line_error(done, expected)
    assert done.stderr.strip() == f"error: {expected}"
    assert snapshot(clevr_dir, arrays["huge"]) == before
    assert not out.exists() and hidden(tmp_path) == []
    with pytest.raises(BindscopeError, match=r"too large for the analyses' float32 arithmetic"):  # the Python API
        import_embeddings(clevr_dir, arrays["huge"], name="x", modality="image", out=out)
    big = tmp_path / "big.npy"  # large but within reach: imported as it is
    np.save(big, np.load(arrays["good"]) * np.float32(1e15))
    assert import_embeddings(clevr_dir, big, name="big", modality="image", out=out).dim == 8


def test_a_folder_of_values_near_the_float32_maximum_is_refused_by_probe(
    run_cli, clevr_dir: Path, arrays: dict[str, Path], tmp_path: Path
) -> None:
    emb = tmp_path / "emb"  # written past the import check: probe used to answer below chance here
    manifest = {"name": "huge", "modality": "image", "dataset_hash": load_dataset(clevr_dir).hash}
    write_embeddings(emb, np.load(arrays["huge"]), {**manifest, "dataset_path": str(clevr_dir)})
    out = tmp_path / "out"
    before = snapshot(emb, clevr_dir)
    done = run_cli("probe", emb, "--out", out, *PROBE)
    fix = "embed or import the embeddings again"
    assert_one_line_error(
        done, f"embedding file {emb / 'embeddings.npy'} " + HUGE.format(squares=squares(arrays["huge"]), fix=fix)
    )
    assert snapshot(emb, clevr_dir) == before
    assert not out.exists() and hidden(tmp_path) == []


# -- 11: a --model-spec embed would refuse ------------------------------------------------------------------
def test_a_model_spec_embed_would_refuse_is_refused_on_import(
    run_cli, clevr_dir: Path, arrays: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "emb"
    before = snapshot(clevr_dir, arrays["good"])
    done = run_cli(
        *IMPORT, clevr_dir, arrays["good"], "--name", "x", "--modality", "image", "--out", out, "--model-spec", "clip"
    )
    assert_one_line_error(
        done,
        "--model-spec takes a spec as `bindscope embed --model` does (or leave it out): unknown model spec 'clip'; "
        f"a spec starts with hf:, openclip:, st: or scratch: ({GRAMMAR})",
    )
    assert snapshot(clevr_dir, arrays["good"]) == before
    assert not out.exists() and hidden(tmp_path) == []
    for bad in ("hf:", "hf:openai/clip+random", "hf:a b", "openclip:ViT-B-32/"):  # the Python API
        with pytest.raises(BindscopeError, match=rf"^--model-spec takes a spec .*{re.escape(GRAMMAR)}$"):
            import_embeddings(clevr_dir, arrays["good"], name="x", modality="image", out=out, model_spec=bad)
    assert not out.exists()
    # only the grammar: the folder of a spec may be on the machine that made the embeddings
    for good in ("hf:openai/clip-vit-base-patch32+rand", "scratch:/elsewhere/checkpoint", "st:./models/minilm"):
        emb = import_embeddings(
            clevr_dir, arrays["good"], name="x", modality="image", out=tmp_path / "ok", model_spec=good, overwrite=True
        )
        assert emb.manifest["model_spec"] == good
