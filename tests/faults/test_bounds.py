"""Sizes and seeds out of bounds (issue 39, defects 7 and 10), through the real ``bindscope`` command.

Every size a command takes (hidden units, widths, epochs, steps, batch sizes, workers, image sizes,
grid rows, seeds and fractions counted) has an upper bound in its settings class or option check: a
value far beyond it is one line, ``error: ...``, exit status 1, before anything is loaded, allocated or
written. A run config's ``max_scenes`` above its dataset's scenes is refused the same way, and a seed
is a whole number everywhere (``true`` and ``1.5`` are not taken as 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from cli_checks import assert_one_line_error
from folders import snapshot

HUGE = "10000000000"


@pytest.fixture(scope="module")
def emb(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    """Planted embeddings of the clevr scenes (an embedding folder every analysis command takes)."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("bounds-emb")
    y = planted_embeddings(load_dataset(clevr_dir).scenes, "additive_concepts_objects", dim=8, noise=0.05, seed=0)
    np.save(root / "y.npy", y)
    import_embeddings(clevr_dir, root / "y.npy", name="planted", modality="image", out=root / "emb")
    return root / "emb"


def tree(folder: Path) -> list[str]:
    """Every entry under ``folder``, folders and hidden files (a lock, a staging folder) included."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def refused_leaving_all_as_it_was(run, args: list, message: str, status: int, work: Path, *inputs: Path) -> None:
    """``bindscope ARGS`` fails with one line holding ``message``; ``work`` (where the output would go) gains
    nothing, and it and every input hold the same bytes as before."""
    before, entries = snapshot(work, *inputs), tree(work)
    assert_one_line_error(run(*args), message, status)
    assert tree(work) == entries, "the refused command wrote something"
    assert snapshot(work, *inputs) == before, "the refused command changed its inputs"


# (command and options with {emb} {data} {out} placeholders, the message's exact part)
SIZES = {
    "complexity-hidden": (
        ["complexity", "{emb}", "--out", "{out}", "--hidden", HUGE],
        f"invalid ComplexitySettings: hidden: MLP hidden widths must be at most 65536, got [{HUGE}]",
    ),
    "complexity-width": (
        ["complexity", "{emb}", "--out", "{out}", "--width", HUGE],
        f"invalid ComplexitySettings: width: table width must be at most 65536, got {HUGE}",
    ),
    "complexity-mlp(H)": (
        ["complexity", "{emb}", "--out", "{out}", "--approximators", f"additive,mlp({HUGE})"],
        f"mlp hidden width must be at most 65536, got {HUGE}",
    ),
    "complexity-epochs": (
        ["complexity", "{emb}", "--out", "{out}", "--epochs", HUGE],
        f"invalid Budget: epochs: must be at most 1000000, got {HUGE}",
    ),
    "complexity-sweeps": (
        ["complexity", "{emb}", "--out", "{out}", "--sweeps", HUGE],
        f"invalid Budget: sweeps: must be at most 1000000, got {HUGE}",
    ),
    "complexity-seeds-count": (
        ["complexity", "{emb}", "--out", "{out}", "--seeds", ",".join(map(str, range(1001)))],
        "seeds: give at most 1000 seeds, got 1001",
    ),
    "probe-steps": (
        ["probe", "{emb}", "--out", "{out}", "--steps", HUGE],
        f"invalid ProbeSettings: steps: must be at most 1000000, got {HUGE}",
    ),
    "decompose-max-iter": (
        ["decompose", "{emb}", "--out", "{out}", "--max-iter", HUGE],
        f"invalid DecomposeSettings: max_iter: must be at most 1000000, got {HUGE}",
    ),
    "crossmodal-steps": (
        ["crossmodal", "{emb}", "{emb}", "--out", "{out}", "--contrastive-steps", HUGE],
        f"invalid CrossmodalSettings: contrastive_steps: must be at most 1000000, got {HUGE}",
    ),
    "geometry-labelled": (
        ["geometry", "{emb}", "--out", "{out}", "--labelled", f"2,{HUGE}"],
        f"labelled: labelled counts must be at most 50000000, got [2, {HUGE}]",
    ),
    "intervene-k-count": (
        ["intervene", "{emb}", "--out", "{out}", "--k", ",".join(str(k / 10) for k in range(1001))],
        "k: give at most 1000 edit strengths k, got 1001",
    ),
    "embed-batch-size": (
        ["embed", "{data}", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--out", "{out}"]
        + ["--batch-size", HUGE],
        f"--batch-size must be at most 1048576, got {HUGE}",
    ),
    "embed-chunk-rows": (
        ["embed", "{data}", "--model", "st:all-MiniLM-L6-v2", "--modality", "text", "--out", "{out}"]
        + ["--chunk-rows", HUGE],
        f"chunk rows must be at most 1048576, got {HUGE}",
    ),
    "dataset-build-workers": (
        ["dataset", "build", "clevr", "--out", "{out}", "--workers", "100000"],
        "--workers must be at most 1024, got 100000",
    ),
    "dataset-build-image-size": (
        ["dataset", "build", "clevr", "--out", "{out}", "--image-size", "100000x64"],
        "image.width: must be at most 4096, got 100000",
    ),
    "dataset-preview-rows": (
        ["dataset", "preview", "{data}", "--out", "{out}", "--rows", "1000"],
        "--rows and --cols must be at most 32, got 1000 x 4",
    ),
    "dataset-check-scenes": (
        ["dataset", "check", "{data}", "--scenes", HUGE],
        f"--scenes must be at most 50000000, got {HUGE}",
    ),
    "scratch-train-steps": (
        ["scratch", "train", "--out", "{out}", "--steps", HUGE],
        f"invalid scratch config cpu-small: steps: must be at most 1000000, got {HUGE}",
    ),
    "scratch-sweep-workers": (
        ["scratch", "sweep", "--out", "{out}", "--workers", "100000"],
        "--workers must be at most 1024, got 100000",
    ),
}


@pytest.mark.parametrize("case", list(SIZES))
def test_a_size_beyond_its_bound_is_refused_before_anything_is_allocated_or_written(
    run_cli, emb: Path, clevr_dir: Path, tmp_path: Path, case: str
) -> None:
    template, message = SIZES[case]
    places = {"{emb}": str(emb), "{data}": str(clevr_dir), "{out}": str(tmp_path / "out")}
    args = [places.get(a, a) for a in template]
    refused_leaving_all_as_it_was(run_cli, args, message, 1, tmp_path, emb, clevr_dir)
    assert not (tmp_path / "out").exists()


def test_the_settings_bounds_hold_in_python_too_and_leave_room_for_research() -> None:
    from bindscope.analyses import ComplexitySettings, ProbeSettings, resolve_budget
    from bindscope.scratch.config import load_config

    with pytest.raises(BindscopeError, match=r"MLP hidden widths must be at most 65536, got \[10000000000\]"):
        ComplexitySettings(hidden=(10**10,))
    with pytest.raises(BindscopeError, match="table width must be at most 65536, got 65537"):
        ComplexitySettings(width=65_537)
    with pytest.raises(BindscopeError, match="epochs: must be at most 1000000, got 1000001"):
        resolve_budget("cpu", epochs=1_000_001)
    with pytest.raises(BindscopeError, match="steps: must be at most 1000000"):
        ProbeSettings(steps=10**10)
    with pytest.raises(BindscopeError, match="steps: must be at most 1000000"):
        load_config("cpu-small", steps=10**10)
    # the bounds themselves are accepted: wide models and long fits remain possible
    assert ComplexitySettings(hidden=(65_536,), width=65_536).hidden == (65_536,)
    assert resolve_budget("full", epochs=1_000_000, sweeps=1_000_000).epochs == 1_000_000
    assert ProbeSettings(steps=1_000_000, max_iter=1_000_000).steps == 1_000_000


RUN_CONFIG = """name: bounds
seeds: {seeds}
datasets:
  - {{name: clevr, preset: clevr{dataset}}}
models:
  - {{spec: "st:all-MiniLM-L6-v2"}}
{scratch}analyses: {{probe: {{optimizer: lbfgs}}}}
"""


def write_run_config(folder: Path, seeds: str = "[0]", dataset: str = "", scratch: str = "") -> Path:
    path = folder / "run.yaml"
    path.write_text(RUN_CONFIG.format(seeds=seeds, dataset=dataset, scratch=scratch))
    return path


def test_a_run_subsample_larger_than_its_dataset_is_refused_before_the_run_folder_exists(
    run_cli, tmp_path: Path
) -> None:
    """``max_scenes`` above the 576 two-object scenes of clevr used to keep them all, silently."""
    config = write_run_config(tmp_path, dataset=", max_scenes: 10000")
    out = tmp_path / "out"
    message = "max_scenes 10000 is more than the 576 scenes of preset clevr; give at most 576 or drop max_scenes"
    refused_leaving_all_as_it_was(run_cli, ["run", config, "--out", out], message, 1, tmp_path)
    assert not out.exists()
    assert "dataset clevr" in run_cli("run", config, "--out", out).stderr  # the line names the run's dataset


def test_a_subsample_of_every_scene_is_still_a_subsample() -> None:
    """The bound is the dataset itself: max_scenes equal to its scenes keeps them all, one more is refused."""
    from bindscope.data.presets import load_preset, preset_from_dict

    data = load_preset("clevr").to_dict()
    at = preset_from_dict({**data, "scenes": {**data["scenes"], "max_scenes": 576}})
    assert len(at.build_scenes()) == 576
    over = preset_from_dict({**data, "scenes": {**data["scenes"], "max_scenes": 577}})
    with pytest.raises(BindscopeError, match="max_scenes 577 is more than the 576 scenes of preset clevr"):
        over.build_scenes()


SEED_MESSAGE = "a seed must be a whole number such as 0 or 42, got"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"seeds": "[true]"}, f"seeds.0: {SEED_MESSAGE} True"),
        ({"seeds": "[0, false]"}, f"seeds.1: {SEED_MESSAGE} False"),
        ({"seeds": "[1.5]"}, f"seeds.0: {SEED_MESSAGE} 1.5"),
        ({"dataset": ", max_scenes: 100, subsample_seed: true"}, f"datasets.0.subsample_seed: {SEED_MESSAGE} True"),
        ({"scratch": "scratch:\n  - {name: s, seed: true}\n"}, f"scratch.0.seed: {SEED_MESSAGE} True"),
        ({"seeds": "[0]", "analyses_seeds": "[true]"}, f"analyses.probe: seeds.0: {SEED_MESSAGE} True"),
    ],
    ids=["seeds-true", "seeds-false", "seeds-1.5", "subsample-seed", "scratch-seed", "analysis-seeds"],
)
def test_a_boolean_or_fractional_seed_in_a_run_config_is_refused(
    run_cli, tmp_path: Path, config: dict[str, str], message: str
) -> None:
    """``seeds: [true]`` used to run as seed 1."""
    extra = config.get("analyses_seeds")
    path = write_run_config(tmp_path, **{k: v for k, v in config.items() if k != "analyses_seeds"})
    if extra is not None:
        path.write_text(path.read_text().replace("{optimizer: lbfgs}", f"{{optimizer: lbfgs, seeds: {extra}}}"))
    out = tmp_path / "out"
    refused_leaving_all_as_it_was(run_cli, ["run", path, "--out", out], message, 1, tmp_path)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["complexity", "{emb}", "--seeds", "true"], "--seeds takes comma-separated values, e.g. 0,1,2; got 'true'", 1),
        (["probe", "{emb}", "--seeds", "0,1.5"], "--seeds takes comma-separated values, e.g. 0,1,2; got '0,1.5'", 1),
        (["scratch", "train", "--config", "{yaml}"], f"invalid scratch config {{yaml}}: seed: {SEED_MESSAGE} True", 1),
        (["scratch", "train", "--seed", "true"], "Invalid value for '--seed'", 2),
        (["scratch", "sweep", "--seeds", "true"], "--seeds takes comma-separated values, e.g. 0,1,2; got 'true'", 1),
        (["dataset", "preview", "{data}", "--seed", "-1"], "--seed must be at least 0, got -1", 1),
        (
            ["dataset", "split", "{data}", "--seed", "4294967296"],
            "--seed must be at most 4294967295, got 4294967296",
            1,
        ),
    ],
    ids=["complexity", "probe", "scratch-yaml", "scratch-train", "scratch-sweep", "preview", "split"],
)
def test_a_seed_that_is_not_a_whole_number_in_range_is_refused_on_the_command_line(
    run_cli, emb: Path, clevr_dir: Path, tmp_path: Path, args: list[str], message: str, status: int
) -> None:
    scratch_yaml = tmp_path / "scratch.yaml"
    scratch_yaml.write_text("name: s\nconcepts: {color: [red, blue], shape: [cube, ball]}\nseed: true\n")
    places = {"{emb}": str(emb), "{data}": str(clevr_dir), "{yaml}": str(scratch_yaml)}
    args = [places.get(a, a) for a in args] + ["--out", str(tmp_path / "out")]
    message = message.replace("{yaml}", str(scratch_yaml))
    refused_leaving_all_as_it_was(run_cli, args, message, status, tmp_path, emb, clevr_dir)
    assert not (tmp_path / "out").exists()
