"""The second modality as an input: checked against the first."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses import read_inputs
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.store import import_embeddings


def test_other_modality_is_checked(clevr_dir, tmp_path) -> None:
    ds = load_dataset(clevr_dir)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(len(ds), 8)).astype(np.float32))
    for name, modality, spec in (("img", "image", "hf:m"), ("txt", "text", "hf:m"), ("txt2", "text", "hf:n")):
        import_embeddings(ds, tmp_path / "x.npy", name=name, modality=modality, out=tmp_path / name, model_spec=spec)
    inputs = read_inputs(tmp_path / "img", find_control=False, other=tmp_path / "txt")
    assert inputs.other is not None and inputs.arrays().other.shape == (576, 8)
    assert inputs.describe()["other"]["modality"] == "text"
    with pytest.raises(BindscopeError, match="give one image and one text folder"):
        read_inputs(tmp_path / "txt", find_control=False, other=tmp_path / "txt2")
    with pytest.raises(BindscopeError, match="cross-modal tests need one joint model"):
        read_inputs(tmp_path / "img", find_control=False, other=tmp_path / "txt2")
    assert read_inputs(tmp_path / "img", find_control=False, other=tmp_path / "txt2", allow_different_models=True).other
