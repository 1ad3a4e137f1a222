"""load_inputs: what an analysis needs and uses decides what is read from folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import load_inputs
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.store import import_embeddings


@pytest.fixture()
def folders(clevr_dir: Path, tmp_path: Path) -> Path:
    ds = load_dataset(clevr_dir)
    rng = np.random.default_rng(0)
    for name, modality, spec in (("img", "image", "hf:m"), ("txt", "text", "hf:m"), ("img+rand", "image", "hf:m+rand")):
        np.save(tmp_path / f"{name}.npy", rng.normal(size=(len(ds), 8)).astype(np.float32))
        import_embeddings(
            ds, tmp_path / f"{name}.npy", name=name, modality=modality, out=tmp_path / "emb" / name, model_spec=spec
        )
    return tmp_path / "emb"


def test_the_control_is_found_only_for_analyses_that_use_it(folders: Path) -> None:
    assert load_inputs("probe", folders / "img").control is not None  # a sibling +rand folder
    assert load_inputs("probe", folders / "img", find_siblings=False).control is None
    assert load_inputs("complexity", folders / "img").control is None  # complexity does not use one


def test_a_folder_the_analysis_does_not_take_is_refused(folders: Path) -> None:
    with pytest.raises(BindscopeError, match="decompose does not take probes; it takes control"):
        load_inputs("decompose", folders / "img", probes=folders / "img")
    with pytest.raises(BindscopeError, match="complexity does not take control, singles; it takes probes"):
        load_inputs("complexity", folders / "img", control=folders / "img+rand", singles=folders / "img")


def test_crossmodal_needs_the_text_folder_second(folders: Path) -> None:
    with pytest.raises(BindscopeError, match="crossmodal needs other, which was not given"):
        load_inputs("crossmodal", folders / "img")
    with pytest.raises(BindscopeError, match="give the image folder first, then the text one"):
        load_inputs("crossmodal", folders / "txt", other=folders / "img")
    inputs = load_inputs("crossmodal", folders / "img", other=folders / "txt")
    assert inputs.other is not None and inputs.control is None


def test_unknown_analysis_is_refused(folders: Path) -> None:
    with pytest.raises(BindscopeError, match="unknown analysis 'probes'; choose one of"):
        load_inputs("probes", folders / "img")


def test_inputs_are_described_once(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bindscope.analyses.inputs as inputs_module

    described: list[str] = []
    real = inputs_module.describe_embeddings
    monkeypatch.setattr(inputs_module, "describe_embeddings", lambda e: described.append(e.name) or real(e))
    inputs = load_inputs("probe", folders / "img")
    first = inputs.describe()
    assert inputs.describe() is first and inputs.describe()["control"]["name"] == "img+rand"
    assert sorted(described) == ["img", "img+rand"]  # each folder once, however often a step asks
