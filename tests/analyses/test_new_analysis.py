"""A new analysis gets its command line, its run-config section and its result loading for free.

``toyspread`` (how far apart the scene embeddings are) is registered here, in the test module, and nothing else
is edited: ``bindscope toyspread`` exists with an option per settings field (their descriptions as help), runs
on an embedding folder, takes ``--set`` and ``--settings``; a run config's ``analyses: {toyspread: {...}}``
validates into its settings; ``load_result`` reads its folder back into its typed summary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import Field

from bindscope.analyses import load_result, register, unregister
from bindscope.analyses.base import Analysis, Result
from bindscope.analyses.results import Summary
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import result_row, spread, tidy
from bindscope.core.validation import Seeds, Settings
from cli_checks import run_in_process as cli

NAME = "toyspread"


class SpreadSettings(Settings):
    metric: Literal["cosine", "euclidean"] = Field("cosine", description="Distance between scene embeddings.")
    seeds: Seeds = Field((0, 1), description="Seeds of the scene subsample, comma-separated.")
    centre: bool = Field(False, description="Centre the embeddings on their mean first.")
    max_scenes: int = Field(40, ge=2, le=10_000, description="Scenes drawn per seed (at most).")


class SpreadSummary(Summary):
    metric: str
    distance: dict[str, float | int | None]
    scenes: int


def mean_distance(y: np.ndarray, metric: str) -> float:
    """The mean distance between distinct rows of ``y``."""
    if metric == "cosine":
        unit = y / np.linalg.norm(y, axis=1, keepdims=True)
        d = 1.0 - unit @ unit.T
    else:
        d = np.linalg.norm(y[:, None, :] - y[None, :, :], axis=-1)
    return float(d[~np.eye(len(y), dtype=bool)].mean())


@dataclass
class SpreadResult(Result):
    scenes: int = field(kw_only=True)  # drawn per seed


def subsample(n: int, settings: SpreadSettings, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).choice(n, size=min(settings.max_scenes, n), replace=False)


class SpreadAnalysis(Analysis):
    name = NAME
    title = "How far apart are the scene embeddings? (a toy registered by a test)"
    Settings = SpreadSettings
    Summary = SpreadSummary

    def compute(self, inputs: Any, settings: Any, progress: Any = None) -> SpreadResult:
        y = np.asarray(inputs.embeddings, dtype=np.float64)
        y = y - y.mean(axis=0) if settings.centre else y
        distances = {s: mean_distance(y[subsample(len(y), settings, s)], settings.metric) for s in settings.seeds}
        rows = [result_row(NAME, "base", "all", "distance", s, d) for s, d in distances.items()]
        return SpreadResult(tidy(rows), scenes=min(settings.max_scenes, len(y)))

    def summarize(self, result: SpreadResult, settings: Any) -> SpreadSummary:
        return SpreadSummary(metric=settings.metric, distance=spread(result.table.value), scenes=result.scenes)

    def headline(self, summary: Any) -> list[tuple[str, ...]]:
        return [("metric", "mean distance"), (summary.metric, f"{summary.distance['mean']:.4f}")]


@pytest.fixture(scope="module")
def registered() -> Iterator[None]:
    """``toyspread`` in the registry for this module's tests only."""

    register(SpreadAnalysis)
    try:
        yield
    finally:
        unregister(NAME)


@pytest.fixture(scope="module")
def emb(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    """Random embeddings of the clevr scenes, imported as an embedding folder."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings

    root = tmp_path_factory.mktemp("toyspread")
    y = np.random.default_rng(0).normal(size=(len(load_dataset(clevr_dir).scenes), 8)).astype(np.float32)
    np.save(root / "y.npy", y)
    import_embeddings(clevr_dir, root / "y.npy", name="random", modality="image", out=root / "emb")
    return root / "emb"


def test_its_command_has_an_option_per_setting_with_its_help(registered: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TERM", "dumb")
    code, out, _ = cli(NAME, "--help")
    assert code == 0
    for text in (
        "How far apart are the scene embeddings?",
        "--metric",
        "<cosine|euclidean>",
        "Distance between scene embeddings.",
        "--seeds",
        "[default: 0,1]",
        "--centre",
        "--no-centre",
        "--max-scenes",
        "[default: 40]",
        "--set",
        "--settings",
        "--out",
    ):
        assert text in out, text
    assert "--control" not in out and "--probes" not in out  # it takes the embeddings only
    code, out, _ = cli("--help")
    assert code == 0 and NAME in out
    code, out, _ = cli("analyses")
    assert code == 0 and NAME in out


def test_it_runs_on_an_embedding_folder_into_a_typed_result(registered: None, emb: Path, tmp_path: Path) -> None:
    out = tmp_path / "spread"
    code, stdout, err = cli(NAME, emb, "--out", out, "--metric", "euclidean", "--seeds", "0,1,2", "--centre", "-q")
    assert code == 0, err
    assert "mean distance" in stdout and f"wrote {out}" in stdout
    result = load_result(out, NAME)
    assert isinstance(result.typed, SpreadSummary) and result.view is result.typed
    assert result.typed.metric == "euclidean" and result.typed.distance["n_seeds"] == 3 and result.typed.scenes == 40
    y = np.load(emb / "embeddings.npy").astype(np.float64)
    y = y - y.mean(axis=0)
    settings = SpreadSettings(metric="euclidean", seeds=(0, 1, 2), centre=True)
    expected = np.mean([mean_distance(y[subsample(len(y), settings, s)], "euclidean") for s in (0, 1, 2)])
    assert result.typed.distance["mean"] == pytest.approx(expected, rel=1e-6)
    assert result.header.seeds == [0, 1, 2] and set(result.table.metric) == {"distance"}
    code, _, err = cli(NAME, emb, "--out", tmp_path / "bad", "--metric", "manhattan")
    assert code == 2 and "Invalid value for '--metric'" in err
    code, _, err = cli(NAME, emb, "--out", tmp_path / "bad", "--max-scenes", "1")
    assert code == 1 and "invalid SpreadSettings: max_scenes: must be at least 2, got 1" in err
    assert not (tmp_path / "bad").exists()


def test_set_and_settings_file(registered: None, emb: Path, tmp_path: Path) -> None:
    (tmp_path / "spread.yaml").write_text("metric: euclidean\nmax_scenes: 10\nseeds: [3]\ncentre: true\n")
    out = tmp_path / "s"
    args = ["--settings", tmp_path / "spread.yaml", "--set", "max_scenes=12", "--set", "centre=false", "--seeds", "4"]
    code, _, err = cli(NAME, emb, "--out", out, *args, "-q")
    assert code == 0, err
    settings = load_result(out, NAME).summary["settings"]
    assert settings == {"metric": "euclidean", "seeds": [4], "centre": False, "max_scenes": 12}
    code, _, err = cli(NAME, emb, "--out", tmp_path / "x", "--set", "metrc=cosine")
    assert code == 1 and f"--set metrc: {NAME} has no setting 'metrc'; choose one of centre, max_scenes" in err


def test_a_run_config_section_validates_into_its_settings(registered: None, tmp_path: Path) -> None:
    from bindscope.pipeline.config import load_config, parse_config

    base = {"name": "t", "seeds": [5, 6], "datasets": [{"name": "clevr", "preset": "clevr"}]}
    base["models"] = [{"spec": "st:all-MiniLM-L6-v2"}]
    config = parse_config({**base, "analyses": {NAME: {"metric": "euclidean"}, "probe": True}})
    assert config.enabled_analyses() == ["probe", NAME]
    assert config.analysis_settings(NAME) == SpreadSettings(metric="euclidean", seeds=(5, 6))  # the run's seeds
    (tmp_path / "run.yaml").write_text(
        "name: t\ndatasets: [{name: clevr, preset: clevr}]\nmodels: [{spec: 'st:all-MiniLM-L6-v2'}]\n"
        f"analyses:\n  {NAME}: {{max_scenes: 7, centre: true}}\n"
    )
    assert load_config(tmp_path / "run.yaml").analysis_settings(NAME).max_scenes == 7
    with pytest.raises(
        BindscopeError, match=rf"analyses.{NAME}: unknown keys \['metrc'\] \(did you mean metric\?\); allowed: centre"
    ):
        parse_config({**base, "analyses": {NAME: {"metrc": "cosine"}}})
    with pytest.raises(BindscopeError, match=rf"analyses.{NAME}: max_scenes: must be at least 2, got 1"):
        parse_config({**base, "analyses": {NAME: {"max_scenes": 1}}})
