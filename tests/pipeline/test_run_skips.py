"""Nothing skipped in silence: a skipped analysis is recorded with its reason and fix, the manifest says the run
completed with skips, the terminal counts them; splits that cannot be made on a ``max_scenes`` subsample refuse the
run before anything is embedded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bindscope.core.errors import BindscopeError
from bindscope.pipeline.config import parse_config
from bindscope.pipeline.preflight import complexity_problem, split_problems, subsample
from bindscope.pipeline.steps import UNRECORDED_FIX, Skip, skipped_steps
from cli_checks import assert_one_line_error

# MiniLM on 48 clevr captions (every object in both slots), no control and no single-object bank: one probe.
TINY = """name: {name}
seeds: [0]
datasets:
  - {{name: clevr, preset: clevr, max_scenes: 48}}
models:
  - {{spec: "st:all-MiniLM-L6-v2", name: minilm, control: false, single_objects: false}}
analyses:
  probe: {{optimizer: lbfgs, max_iter: 30}}
{more}"""


def write_config(folder: Path, name: str, more: str = "") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(TINY.format(name=name, more=more))
    return path


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_a_run_with_a_skip_records_its_reason_and_fix(run_cli, tmp_path: Path) -> None:
    # cross-modal tests need an image-text model; MiniLM has no image tower (clevr has images)
    config = write_config(tmp_path, "skips", "  crossmodal: true\n")
    done = run_cli("run", config, "--out", tmp_path / "run", "-q")
    assert done.returncode == 0, done.stderr
    found = manifest(tmp_path / "run")
    assert found["status"] == "complete_with_skips"
    want = {
        "analysis": "crossmodal",
        "dataset": "clevr",
        "label": "minilm",
        "reason": "model minilm is a text model (st: no image tower); the cross-modal tests need an image-text model",
        "fix": "nothing to change for this model; to drop the line, switch crossmodal off "
        "(analyses: {crossmodal: false})",
    }
    assert found["skipped"] == [want]
    (step,) = [s for s in found["steps"] if s["status"] == "skipped"]
    assert step["name"] == "clevr/minilm/crossmodal" and {k: step[k] for k in want} == want
    assert skipped_steps(found["steps"]) == [Skip(**want)]
    lines = done.stdout.rstrip().splitlines()  # the run ends with the count, then each skip with reason and fix
    assert lines[-2:] == [
        "skipped: 1 analysis (status complete_with_skips)",
        f"  crossmodal clevr/minilm: {want['reason']}; fix: {want['fix']}",
    ]
    assert f"crossmodal   clevr/minilm/crossmodal: skipped, {want['reason']}; fix: {want['fix']}" in done.stdout


def test_a_run_without_skips_is_complete(run_cli, tmp_path: Path) -> None:
    done = run_cli("run", write_config(tmp_path, "whole"), "--out", tmp_path / "run", "-q")
    assert done.returncode == 0, done.stderr
    found = manifest(tmp_path / "run")
    assert found["status"] == "complete" and found["skipped"] == [] and skipped_steps(found["steps"]) == []
    assert done.stdout.rstrip().splitlines()[-1] == "skipped: none (every analysis ran)"


# complexity's default fractions on 240 of clevr's 576 scenes: fraction 0.1 leaves a single scene made only of
# seen objects for seed 0 (the sweep needs two: one to fit, one to validate); 367 scenes are the fewest that serve
# every seed, and 0.2 upwards work on 240.
TOO_FEW = "  complexity: {seeds: [0, 1, 2]}\n"


def test_fractions_that_cannot_split_the_subsample_refuse_the_run_before_embedding(run_cli, tmp_path: Path) -> None:
    config = write_config(tmp_path, "few", TOO_FEW).read_text().replace("max_scenes: 48", "max_scenes: 240")
    (tmp_path / "few.yaml").write_text(config)
    done = run_cli("run", tmp_path / "few.yaml", "--out", tmp_path / "run", "-q")
    assert_one_line_error(
        done,
        "dataset clevr (max_scenes 240): complexity cannot run: fraction 0.1 (seed 0) leaves 1 scene(s) made only "
        "of train objects",
    )
    assert (
        "raise datasets.clevr.max_scenes to at least 367 (or drop it), or set analyses.complexity.fractions to "
        "[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], or switch complexity off" in done.stderr
    )
    assert not (tmp_path / "run").exists()  # nothing written, nothing embedded


def test_the_smallest_max_scenes_named_is_the_smallest_that_works() -> None:
    data = {
        "name": "t",
        "datasets": [{"name": "clevr", "preset": "clevr", "max_scenes": 240}],
        "models": [{"spec": "st:all-MiniLM-L6-v2"}],
        "analyses": {"complexity": True},
    }
    config = parse_config(data)
    entry, settings = config.datasets[0], config.analysis_settings("complexity")
    assert complexity_problem(subsample(entry, 366), settings) is not None
    assert complexity_problem(subsample(entry, 367), settings) is None
    fixed = parse_config({**data, "datasets": [{**data["datasets"][0], "max_scenes": 367}]})
    assert split_problems(fixed) == []
    fewer = parse_config({**data, "analyses": {"complexity": {"fractions": [0.2, 0.5, 0.9]}}})
    assert split_problems(fewer) == []


@pytest.mark.parametrize(
    ("analyses", "message"),
    [
        (
            {"geometry": {"fractions": [0.01]}},
            "dataset clevr (576 scenes): geometry cannot run: no fraction of 0.01 splits 24 objects into seen and "
            "unseen ones; choose fractions in [0.0417, 0.958]; set analyses.geometry.fractions to [0.1, 0.2",
        ),
        (
            {"probe": {"train_fraction": 0.001}},
            "dataset clevr (576 scenes): probe cannot run: train_fraction on 576 scenes, seed 0: ",
        ),
        (
            {"complexity": {"fractions": [0.05]}},
            "complexity cannot run: fraction 0.05 (seed 0) leaves 1 scene(s) made only of train objects; at least 2 "
            "are needed (one to fit, one to validate): drop that fraction or start the sweep higher; set "
            "analyses.complexity.fractions to [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] (those of the default "
            "grid that work), or switch complexity off (analyses: {complexity: false})",
        ),
    ],
)
def test_each_split_is_checked_from_the_config(analyses: dict, message: str, tmp_path: Path) -> None:
    from bindscope.pipeline.run import preflight

    config = parse_config(
        {
            "name": "t",
            "datasets": [{"name": "clevr", "preset": "clevr"}],
            "models": [{"spec": "st:all-MiniLM-L6-v2"}],
            "analyses": analyses,
        }
    )
    with pytest.raises(BindscopeError, match=re.escape(message)):
        preflight(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_analysis_that_refuses_its_data_is_skipped_with_its_message_and_a_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindscope.pipeline import run as run_module
    from bindscope.pipeline.config import load_config

    real = run_module.step

    def refusing(name: str, *args, **kwargs):
        if name == "decompose":
            raise BindscopeError("no held-out scene has a value pair seen in training; raise test_fraction")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(run_module, "step", refusing)
    config = load_config(write_config(tmp_path, "refused", "  decompose: {optimizer: lbfgs, max_iter: 30}\n"))
    lines: list[str] = []
    state = run_module.run_pipeline(config, tmp_path / "run", say=lines.append)
    (skip,) = state.log.skips()
    assert skip == Skip(
        "decompose",
        "clevr",
        "minilm-text",
        "no held-out scene has a value pair seen in training; raise test_fraction",  # the whole message
        "raise test_fraction (analyses.decompose or the dataset in the run config), or switch decompose off "
        "(analyses: {decompose: false})",
    )
    found = manifest(tmp_path / "run")
    assert found["status"] == "complete_with_skips" and skipped_steps(found["steps"]) == [skip]
    assert any(line.startswith("decompose    clevr/minilm-text/decompose (skipped, ") for line in lines)
    assert (tmp_path / "run" / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").is_file()


def test_skips_of_an_older_manifest_are_read_from_their_names() -> None:
    old = [
        {"kind": "analysis", "name": "clevr/minilm/crossmodal", "folder": None, "status": "skipped", "seconds": 0.0,
         "reason": "the model is embedded in one modality only"},
        {"kind": "analysis", "name": "clevr/minilm-text/probe", "folder": "x", "status": "computed", "seconds": 1.0},
        {"kind": "embed", "name": "clevr/minilm-text", "folder": "y", "status": "skipped", "seconds": 0.0},
    ]  # fmt: skip
    assert skipped_steps(old) == [
        Skip("crossmodal", "clevr", "minilm", "the model is embedded in one modality only", UNRECORDED_FIX)
    ]
