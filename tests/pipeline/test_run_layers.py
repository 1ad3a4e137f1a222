"""A layer sweep in a run: `layers: all` embeds every layer (the model loaded once to count them, however many
datasets), the per-layer analyses run, and the report draws the headline metrics against depth."""

from __future__ import annotations

from pathlib import Path

import pytest

from bindscope.analyses import load_result
from bindscope.pipeline import run as run_module
from bindscope.pipeline.card import report_card
from bindscope.pipeline.config import parse_config

# An in-process MiniLM run: on the worker of test_run.py's in-process runs, which imports sentence-transformers once.


def test_all_layers_of_minilm_on_two_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    counted = run_module.layer_counts

    def counting(spec: str, device: str) -> dict[str, int]:
        calls.append(spec)
        return counted(spec, device)

    monkeypatch.setattr(run_module, "layer_counts", counting)
    config = parse_config(
        {
            "name": "layers",
            "seeds": [0],
            # seeded subsamples that keep every object in both slots: seven layers' worth of captions, embedded quickly
            "datasets": [
                {"name": "clevr", "preset": "clevr", "max_scenes": 72},
                {"name": "again", "preset": "clevr", "max_scenes": 72, "subsample_seed": 1},
            ],
            "models": [{"spec": "st:all-MiniLM-L6-v2", "name": "m", "layers": "all", "control": False}],
            "analyses": {"probe": {"optimizer": "lbfgs"}},
        }
    )
    run_module.run_pipeline(config, tmp_path / "run", say=lambda _: None)
    assert calls == ["st:all-MiniLM-L6-v2"]  # loaded once to count its layers, not per dataset
    for dataset in ("clevr", "again"):
        folders = sorted(p.name for p in (tmp_path / "run" / "embeddings" / dataset).iterdir())
        layers = [f"m-text-L{i}" for i in range(7)] + [f"m-text-L{i}-single" for i in range(7)]
        assert folders == sorted([*layers, "m-text", "m-text-single"])  # the final embedding is kept beside them
    rows = {(r.dataset, r.label): r for r in report_card(tmp_path / "run")}
    assert all(("clevr", f"m-text-L{i}") in rows for i in range(7)) and ("clevr", "m-text") in rows
    top, bottom = rows[("clevr", "m-text-L6")].verdict("objects recoverable"), rows[("clevr", "m-text-L0")]
    table = load_result(tmp_path / "run" / "results" / "again" / "m-text-L3" / "probe", "probe").table
    assert set(table.layer) == {3} and set(table.dataset) == {"again"}  # each row says which layer it read
    assert top is not None and top.value > bottom.verdict("objects recoverable").floor_value("chance")
    assert sorted(p.name for p in (tmp_path / "run" / "report").iterdir()) == [
        "card.csv",
        "depth-again-m-text.png",
        "depth-clevr-m-text.png",
    ]
    assert "Layer sweep: clevr / m-text" in (tmp_path / "run" / "report.html").read_text()


def test_a_layer_sweep_keeps_the_final_embedding() -> None:
    from bindscope.pipeline.config import ModelConfig

    sweep = ModelConfig(spec="st:all-MiniLM-L6-v2", layers=(2, 4))
    assert run_module.layers_of(sweep, "text", {}, "cpu") == [None, 2, 4]  # None: the model's output
    assert run_module.layers_of(ModelConfig(spec="st:all-MiniLM-L6-v2"), "text", {}, "cpu") == [None]
