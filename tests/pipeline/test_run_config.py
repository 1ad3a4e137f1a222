"""The run config: defaults, each analysis's settings validated by its class, and one-line errors naming
what is allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import load_preset
from bindscope.pipeline.config import RUN_ANALYSES, load_config, parse_config, shipped_configs

BASE = {
    "name": "t",
    "datasets": [{"name": "clevr", "preset": "clevr"}],
    "models": [{"spec": "st:all-MiniLM-L6-v2"}],
}


def test_defaults_and_settings() -> None:
    config = parse_config({**BASE, "seeds": [0, 1], "analyses": {"probe": {"optimizer": "lbfgs"}, "geometry": True}})
    assert config.enabled_analyses() == ["probe", "geometry"]
    probe = config.analysis_settings("probe")
    assert probe.seeds == (0, 1) and probe.optimizer == "lbfgs"  # the run's seeds, the analysis's own option
    assert parse_config(BASE).enabled_analyses() == list(RUN_ANALYSES)
    assert config.models[0].label == "all-MiniLM-L6-v2" and config.models[0].modalities == ("text",)
    assert config.models_for("clevr") == list(config.models)
    assert config.analysis_settings("complexity").budget.name == "cpu"  # auto on a CPU
    paper = parse_config({**BASE, "analyses": {"complexity": {"budget": "paper"}}}).analysis_settings("complexity")
    assert paper.budget.name == "paper" and paper.budget.protocol == "paper"
    capped = parse_config({**BASE, "analyses": {"complexity": {"budget": {"name": "cpu", "epochs": 7}}}})
    assert capped.analysis_settings("complexity").budget.epochs == 7


def test_every_error_of_a_config_comes_in_one_pass() -> None:
    """An unknown key and a bad value elsewhere are both named: the user fixes the file once, not twice."""
    bad = {**BASE, "seeds": [1, 1], "modles": []}
    with pytest.raises(BindscopeError) as raised:
        parse_config(bad)
    assert "modles: unknown key (did you mean models?)" in str(raised.value)
    assert "seeds: seeds repeat: [1, 1]" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"modles": []}, "modles: unknown key (did you mean models?); allowed: analyses, datasets, description"),
        (
            {"datasets": [{"name": "clevr", "preset": "clevr", "imags": True}]},
            "datasets.0.imags: unknown key (did you mean images?); allowed: image_size, images, max_scenes, name",
        ),
        ({"analyses": {"probe": {"stpes": 3}}}, "analyses.probe: unknown keys ['stpes'] (did you mean steps?)"),
        ({"analyses": {"probe": {"steps": 0}}}, "analyses.probe: steps: must be at least 1, got 0"),
        ({"analyses": {"probes": True}}, "unknown analyses ['probes'] (did you mean probe?); a run holds probe"),
        ({"models": [{"spec": "st:a", "datasets": ["x"]}]}, "model a names datasets ['x']; the run has clevr"),
        ({"models": [{"spec": "st:a"}, {"spec": "hf:b/a"}]}, "model names repeat: ['a', 'a']"),
        ({"datasets": [{"name": "a/b", "preset": "clevr"}]}, "dataset name 'a/b' names a folder"),
        ({"models": [{"spec": "st:a", "modalities": ["text", "text"]}]}, "give each modality once"),
        ({"seeds": [1, 1]}, "seeds: seeds repeat: [1, 1]"),
        ({"analyses": {"complexity": {"budget": "huge"}}}, "analyses.complexity: unknown budget 'huge'"),
        ({"datasets": []}, "the models have no dataset to embed; add datasets"),
    ],
)
def test_bad_configs(change: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match=r"invalid run config: .*" + re.escape(message)):
        parse_config({**BASE, **change})


def test_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text("name: s\nconcepts: {a: [x, y], b: [u, v]}\nobjects_per_scene: 2\n")
    (tmp_path / "run.yaml").write_text(
        "name: r\ndatasets:\n  - {name: s, preset: space.yaml, max_scenes: 4}\nmodels:\n  - {spec: 'st:m'}\n"
    )
    config = load_config(tmp_path / "run.yaml")
    assert config.datasets[0].preset == str(tmp_path / "space.yaml")  # relative to the config file
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(BindscopeError, match=r"malformed YAML in .*bad.yaml at line \d+"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(BindscopeError, match="is empty; `bindscope demo --print-config` prints an example"):
        load_config(tmp_path / "empty.yaml")
    with pytest.raises(BindscopeError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_scratch_entries(tmp_path: Path) -> None:
    config = parse_config({"name": "s", "scratch": [{"name": "m", "fraction": 0.5, "steps": 10}]})
    assert config.scratch[0].training_config().steps == 10 and config.models == ()
    entry = {"name": "m", "seed": 0, "overrides": {"d_model": 64, "ff": 128, "seed": 5, "steps": 7}}
    trained = parse_config({"name": "s", "scratch": [entry]}).scratch[0].training_config()
    assert (trained.d_model, trained.ff, trained.seed, trained.steps) == (64, 128, 0, 7)  # the named fields win
    (tmp_path / "mine.yaml").write_text("name: mine\nconcepts: {a: [x, y, z], b: [u, v, w]}\nsteps: 3\n")
    (tmp_path / "run.yaml").write_text("name: r\nscratch:\n  - {name: m, config: mine.yaml}\n")
    assert load_config(tmp_path / "run.yaml").scratch[0].training_config().name == "mine"  # relative to the file
    for change, message in (
        ({"scratch": [{"name": "m", "config": "huge"}]}, "scratch model m: unknown scratch config 'huge'"),
        ({"scratch": [{"name": "m"}, {"name": "m"}]}, "scratch model names repeat"),
        ({"scratch": []}, "give datasets and models to embed them with, scratch models, or embedding folders"),
        ({"scratch": [{"name": "m", "fraction": 0}]}, "scratch.0.fraction: must be greater than 0"),
        ({"scratch": [{"name": "m", "overrides": {"d_modle": 8}}]}, "scratch model m: .*d_modle"),
    ):
        with pytest.raises(BindscopeError, match=message):
            parse_config({"name": "s", **change})


@pytest.mark.parametrize("recipe", ["clevr", "clevr2d", "text", "pug_spare"])
def test_the_paper_recipes_are_valid(recipe: str) -> None:
    path = Path(__file__).parents[2] / "configs" / "paper" / f"{recipe}.yaml"
    config = load_config(path, device="cpu")  # they ask for cuda; validated here on a CPU
    assert config.device == "cpu" and config.seeds == (0, 1, 2)
    assert config.analysis_settings("complexity").budget.name == "full"
    assert {m.spec for m in config.models} >= {"hf:openai/clip-vit-base-patch32", "hf:google/siglip-base-patch16-224"}


def test_the_demo_config_is_valid() -> None:
    from bindscope.pipeline.demo import demo_config_path

    config = load_config(demo_config_path())
    assert load_config(demo_config_path(quick=True)).seeds == (0,)
    assert config.models[0].spec == "st:all-MiniLM-L6-v2" and config.device == "cpu"
    assert load_config("demo") == config and shipped_configs() == ["demo", "demo-quick"]  # shipped, by name
    with pytest.raises(BindscopeError, match=r"give a YAML file or a shipped config \(demo, demo-quick\)"):
        load_config("demo-fast")


@pytest.mark.parametrize("name", ["demo", "demo-quick"])
def test_the_demo_text_subsample_keeps_every_object_in_every_slot(name: str) -> None:
    from bindscope.pipeline.run import dataset_preset

    entry = next(d for d in load_config(name).datasets if d.preset == "text")
    full, sub = load_preset("text").build_scenes(), dataset_preset(entry).build_scenes()
    ids, all_ids = sub.object_ids(), full.object_ids()
    pairs = (ids >= 0).all(axis=1)  # the subsample is of the 2-object scenes; the single objects all stay
    assert pairs.sum() == entry.max_scenes < len(full) and (~pairs).sum() == 400
    for slot in range(ids.shape[1]):
        assert set(ids[:, slot]) == set(all_ids[:, slot]), f"slot {slot} lost objects"
