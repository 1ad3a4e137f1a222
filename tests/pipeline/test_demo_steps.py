"""The demo's steps: reused only when the content key matches, replaced when settings change."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import ProbeSettings, read_inputs
from bindscope.core.errors import BindscopeError
from bindscope.pipeline.steps import step

QUICK = ProbeSettings(optimizer="lbfgs", seeds=(0,), max_iter=30)


@pytest.fixture
def inputs(tmp_path: Path, clevr_dir: Path):
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    y = planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=8, noise=0.2, seed=0)
    np.save(tmp_path / "y.npy", y)
    import_embeddings(clevr_dir, tmp_path / "y.npy", name="planted", modality="text", out=tmp_path / "emb")
    return read_inputs(tmp_path / "emb")


def test_a_step_is_reused_only_for_the_same_content_key(inputs, tmp_path: Path) -> None:
    folder = tmp_path / "results" / "probe"
    first, status = step("probe", inputs, folder, QUICK, None)
    assert status == "computed" and first["analysis"] == "probe"
    stamp = (folder / "summary.json").stat().st_mtime_ns
    again, status = step("probe", inputs, folder, QUICK, None)
    assert status == "reused" and again["content_key"] == first["content_key"]
    assert (folder / "summary.json").stat().st_mtime_ns == stamp
    other, status = step("probe", inputs, folder, QUICK.replace(seeds=(0, 1)), None)
    assert status == "replaced" and other["seeds"] == [0, 1] and other["content_key"] != first["content_key"]


def test_an_older_result_is_replaced_and_foreign_files_are_refused(inputs, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps({"format": {"name": "bindscope-result", "version": 1}}))
    summary, status = step("probe", inputs, old, QUICK, None)
    assert status == "replaced" and summary["format"]["version"] == 3
    untagged = tmp_path / "untagged"
    untagged.mkdir()
    (untagged / "summary.json").write_text(json.dumps({"test": {"object_acc": 0.5}}))  # no tag: anybody's file
    with pytest.raises(BindscopeError, match="holds files bindscope did not write; --overwrite replaces only an"):
        step("probe", inputs, untagged, QUICK, None)
    assert json.loads((untagged / "summary.json").read_text()) == {"test": {"object_acc": 0.5}}
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="holds files that are not a bindscope result"):
        step("probe", inputs, foreign, QUICK, None)
    assert (foreign / "notes.txt").read_text() == "mine"
