"""`embeddings import --singles`: single-object rows written as `embed --single-objects` writes them,
found by the analyses beside the scenes, and every bad single-object array refused before anything is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses.inputs import read_inputs
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.store import find_single_objects, import_embeddings, load_embeddings
from cli_checks import assert_one_line_error

OBJECTS, SLOTS, SCENES, DIM = 24, 2, 576, 16  # the clevr preset


def save(folder: Path, array: np.ndarray, name: str) -> Path:
    path = folder / name
    np.save(path, array)
    return path


@pytest.fixture
def arrays(tmp_path: Path) -> tuple[Path, Path]:
    """Scene embeddings and one row per object, random (not constant)."""
    rng = np.random.default_rng(0)
    return (
        save(tmp_path, rng.normal(size=(SCENES, DIM)), "scenes.npy"),
        save(tmp_path, rng.normal(size=(OBJECTS, DIM)), "singles.npy"),
    )


def test_singles_are_written_beside_the_scenes_and_found(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path]
) -> None:
    scenes, singles = arrays
    out = tmp_path / "emb" / "model-text"
    import_embeddings(clevr_dir, scenes, name="model", modality="text", out=out, singles=singles)
    bank_dir = tmp_path / "emb" / "model-text-singles"
    bank = load_embeddings(bank_dir, load_dataset(clevr_dir), rows="single_objects")
    np.testing.assert_array_equal(bank.array, np.load(singles).astype(np.float32))
    manifest = json.loads((bank_dir / "manifest.json").read_text())
    assert manifest["rows"] == "single_objects" and manifest["single_positions"] == 1
    assert manifest["name"] == "model" and manifest["modality"] == "text" and manifest["model_spec"] is None
    assert manifest["source"]["path"] == str(singles.resolve()) and manifest["source"]["dtype"] == "float64"
    assert find_single_objects(load_embeddings(out)) == bank_dir  # no spec: the same name, imported
    inputs = read_inputs(out, find_control=False, find_singles=True)
    assert inputs.singles is not None and inputs.singles.root == bank_dir


def test_image_singles_per_slot_and_a_named_folder_with_a_spec(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path]
) -> None:
    scenes, _ = arrays
    per_slot = save(tmp_path, np.random.default_rng(1).normal(size=(OBJECTS * SLOTS, DIM)), "slots.npy")
    out, bank_dir = tmp_path / "emb" / "clip", tmp_path / "emb" / "clip-alone"
    spec = "hf:openai/clip-vit-base-patch32"
    import_embeddings(
        clevr_dir, scenes, name="clip", modality="image", out=out, model_spec=spec, singles=per_slot,
        singles_out=bank_dir,
    )  # fmt: skip
    assert load_embeddings(bank_dir, rows="single_objects").manifest["single_positions"] == SLOTS
    assert find_single_objects(load_embeddings(out)) == bank_dir


def test_an_unnamed_import_finds_no_singles_of_another_name(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path]
) -> None:
    scenes, singles = arrays
    import_embeddings(clevr_dir, scenes, name="a", modality="text", out=tmp_path / "a", singles=singles)
    import_embeddings(clevr_dir, scenes, name="b", modality="text", out=tmp_path / "b")
    assert find_single_objects(load_embeddings(tmp_path / "b")) is None


@pytest.mark.parametrize(
    ("modality", "array", "message"),
    [
        ("text", np.ones((OBJECTS - 1, DIM)), "has 23 rows but the dataset has 24 objects: give 24 rows, row o"),
        ("image", np.ones((OBJECTS + 1, DIM)), "or 48, one per object and slot (row o * 2 + s)"),
        ("text", np.ones((OBJECTS * SLOTS, DIM)), "has 48 rows but the dataset has 24 objects: give 24 rows, row o "),
        ("text", np.ones((OBJECTS, DIM + 1)), "has width 17 but the scene embeddings 16; give the single objects"),
        (
            "text",
            np.ones(OBJECTS),
            "must be 2-D [num_objects, dim], got 1-D shape (24,); reshape it to one row per object",
        ),
        ("text", np.array([["a"] * DIM] * OBJECTS), "must hold real numbers"),
        ("text", np.where(np.eye(OBJECTS, DIM) > 0, np.nan, 1.0), "contains NaN values in 16 row"),
        ("text", np.full((OBJECTS, DIM), np.inf), "contains inf values"),
        ("text", np.ones((OBJECTS, DIM)), "is constant (every row the same)"),
    ],
)
def test_bad_single_object_arrays_are_refused_before_anything_is_written(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path], modality: str, array: np.ndarray, message: str
) -> None:
    scenes, _ = arrays
    bad = save(tmp_path, array, "bad.npy")
    with pytest.raises(BindscopeError, match=re.escape(message)):
        import_embeddings(clevr_dir, scenes, name="m", modality=modality, out=tmp_path / "e", singles=bad)
    assert not (tmp_path / "e").exists() and not (tmp_path / "e-singles").exists()


def test_refusals_of_the_singles_folder(clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path]) -> None:
    scenes, singles = arrays
    out = tmp_path / "e"

    def refused(message: str, **kwargs: object) -> None:
        with pytest.raises(BindscopeError, match=message):
            import_embeddings(clevr_dir, scenes, name="m", modality="text", out=out, **kwargs)  # type: ignore[arg-type]
        assert not out.exists()

    refused("single-object array .*absent.npy is missing", singles=tmp_path / "absent.npy")
    refused("--singles-out names where the --singles array goes; give --singles FILE too", singles_out=tmp_path / "s")
    refused("--singles-out .* and --out .* overlap", singles=singles, singles_out=out)
    refused("--singles-out .* and --out .* overlap", singles=singles, singles_out=out / "inside")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    refused("taken already exists and is not empty; choose another --singles-out", singles=singles, singles_out=taken)
    refused("taken holds files bindscope did not write", singles=singles, singles_out=taken, overwrite=True)
    assert (taken / "notes.txt").read_text() == "mine"
    refused(f"--singles-out {clevr_dir} .*input .*choose an --singles-out", singles=singles, singles_out=clevr_dir)


def test_cli_import_with_singles_then_intervene_single_bank(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path], run_cli
) -> None:
    """Scenes and single objects through `embeddings import`, then `intervene --banks single` on the
    imported folder: the bank is found beside it, with no manifest written by hand."""
    scenes, singles = arrays
    out = tmp_path / "emb" / "imported"
    done = run_cli(
        "embeddings", "import", clevr_dir, scenes, "--name", "elsewhere", "--modality", "text", "--out", out,
        "--singles", singles,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "one row per single-object" in done.stdout and "576 x 16" in done.stdout
    result = tmp_path / "iv"
    done = run_cli("intervene", out, "--banks", "single", "--k", "1", "--out", result, "-q")
    assert done.returncode == 0, done.stderr
    summary = json.loads((result / "summary.json").read_text())
    assert summary["banks"]["single"] == {"available": True}
    assert summary["inputs"]["singles"]["path"].endswith("imported-singles")
    assert summary["inputs"]["singles"]["positions"] == 1


def test_cli_refuses_bad_singles_in_one_line(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path], run_cli
) -> None:
    scenes, _ = arrays
    bad = save(tmp_path, np.ones((5, DIM)), "bad.npy")
    done = run_cli(
        "embeddings", "import", clevr_dir, scenes, "--name", "m", "--modality", "text", "--out", tmp_path / "e",
        "--singles", bad,
    )  # fmt: skip
    assert_one_line_error(done, "has 5 rows but the dataset has 24 objects")
    assert not (tmp_path / "e").exists()


def test_imported_text_singles_give_crossmodal_half_truths(
    clevr_dir: Path, tmp_path: Path, arrays: tuple[Path, Path]
) -> None:
    """Image and text imported without a model spec (one name), the text with its single objects:
    crossmodal finds them beside the text folder and scores half-truths."""
    from bindscope.analyses import CrossmodalSettings, load_inputs, run_analysis

    scenes, singles = arrays
    image = save(tmp_path, np.random.default_rng(2).normal(size=(SCENES, DIM)), "image.npy")
    emb = tmp_path / "emb"
    import_embeddings(clevr_dir, image, name="joint", modality="image", out=emb / "image")
    import_embeddings(clevr_dir, scenes, name="joint", modality="text", out=emb / "text", singles=singles)
    settings = CrossmodalSettings(bridge="none", cases=False)
    inputs = load_inputs("crossmodal", emb / "image", other=emb / "text")
    summary = run_analysis("crossmodal", inputs, tmp_path / "cm", settings).summary
    assert summary["half_truths_absent"] is None and set(summary["half_truths"]) >= {"wrong_noun", "full_beats_short"}
    assert summary["inputs"]["singles"]["path"].endswith("text-singles")
