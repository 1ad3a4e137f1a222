"""`bindscope run --model SPEC` without a YAML file, and embedding folders made elsewhere in a run
(`embeddings:` in a config, `--embeddings DIR` on the command line), through the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from bindscope.core.errors import BindscopeError
from bindscope.pipeline.config import load_config, parse_config
from bindscope.pipeline.oneline import one_line_config
from cli_checks import assert_one_line_error
from tiny_models import save_tiny_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tinyclip")


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path, run_cli_module) -> Path:
    """Stand-in image and caption embeddings of clevr imported as a model no backend loads: the image binds
    (a vector per object), the captions are bags of words; with the captions' single-object bank."""
    from bindscope.data.datasets import load_dataset

    root = tmp_path_factory.mktemp("standins")
    shutil.copytree(clevr_dir, root / "data" / "clevr")
    ds = load_dataset(root / "data" / "clevr")
    values = ds.scenes.scenes
    rng = np.random.default_rng(0)
    colour, shape = rng.normal(size=(8, 32)), rng.normal(size=(3, 32))
    bound = rng.normal(size=(8, 3, 32))
    words = colour[values[..., 0]] + shape[values[..., 1]]
    objects = ds.space.all_objects()
    arrays = {
        "image": (words + bound[values[..., 0], values[..., 1]]).sum(axis=1),
        "text": words.sum(axis=1),
        "objects": colour[objects[:, 0]] + shape[objects[:, 1]],
    }
    for name, array in arrays.items():
        np.save(root / f"{name}.npy", (array + 0.05 * rng.normal(size=array.shape)).astype("float32"))
    for modality in ("image", "text"):
        singles = ["--singles", root / "objects.npy"] if modality == "text" else []
        done = run_cli_module(
            "embeddings", "import", root / "data" / "clevr", root / f"{modality}.npy", "--name", "standin",
            "--modality", modality, "--out", root / "emb" / f"standin-{modality}", *singles,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return root


# -- the config the one-liner builds -----------------------------------------------------------------------
def test_a_text_model_gets_the_caption_presets_every_text_analysis_and_its_control() -> None:
    config = one_line_config(["st:all-MiniLM-L6-v2"])
    assert [(d.name, d.preset, d.max_scenes) for d in config.datasets] == [
        ("text", "text", 5000),
        ("clevr", "clevr", None),
    ]
    (model,) = config.models
    assert model.modalities == ("text",) and model.control and model.single_objects and model.datasets is None
    assert config.enabled_analyses() == ["probe", "decompose", "intervene", "complexity", "geometry"]
    assert config.seeds == (0, 1, 2) and config.name == "all-MiniLM-L6-v2"


def test_quick_is_one_seed_a_small_subsample_and_the_fast_solvers() -> None:
    config = one_line_config(["st:all-MiniLM-L6-v2"], quick=True)
    assert config.seeds == (0,) and config.datasets[0].max_scenes == 1000
    assert config.analysis_settings("probe").optimizer == "lbfgs"
    assert config.analysis_settings("complexity").approximators == ("additive",)
    every = one_line_config(["st:all-MiniLM-L6-v2"], quick=True, max_scenes=None)
    assert every.datasets[0].max_scenes is None


@pytest.mark.duration_limit(30, reason="the first user of the module's tiny CLIP: imports transformers, saves it")
def test_an_image_text_model_gets_images_and_captions_and_the_crossmodal_tests(tiny_clip: Path) -> None:
    config = one_line_config([f"clip=hf:{tiny_clip}", "st:all-MiniLM-L6-v2"])
    assert [d.name for d in config.datasets] == ["clevr", "text"]
    clip, minilm = config.models
    assert clip.name == "clip" and clip.spec == f"hf:{tiny_clip}" and clip.modalities == ("image", "text")
    assert clip.datasets == ("clevr",) and minilm.datasets is None  # the text preset has no images
    assert "crossmodal" in config.enabled_analyses()
    captions = one_line_config([f"hf:{tiny_clip}"], datasets=["text"], modality="text")
    assert captions.models[0].modalities == ("text",) and "crossmodal" not in captions.enabled_analyses()


def test_the_one_liner_refuses_what_a_config_would_refuse(tiny_clip: Path) -> None:
    with pytest.raises(BindscopeError, match=r"preset 'clevr3'.*did you mean clevr"):
        one_line_config(["st:all-MiniLM-L6-v2"], datasets=["clevr3"])
    with pytest.raises(BindscopeError, match=r"unknown analyses \['probes'\] \(did you mean probe\?\)"):
        one_line_config(["st:all-MiniLM-L6-v2"], analyses=["probes"])
    with pytest.raises(BindscopeError, match="no model of the run can embed dataset text .* add --modality text"):
        one_line_config([f"hf:{tiny_clip}"], datasets=["text"])
    with pytest.raises(BindscopeError, match="give at least one --model SPEC"):
        one_line_config([])


# -- through the CLI ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory, tiny_clip: Path, run_cli_module) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("oneline") / "run"
    done = run_cli_module(
        "run", "--model", f"tinyclip=hf:{tiny_clip}", "--modality", "text", "--dataset", "clevr", "--analyses",
        "probe,decompose", "--quick", "--out", out, "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_the_one_liner_runs_and_writes_the_config_it_ran(text_run: tuple[Path, str], tiny_clip: Path) -> None:
    out, stdout = text_run
    written = yaml.safe_load((out / "config.yaml").read_text())
    assert written["models"][0]["spec"] == f"hf:{tiny_clip}" and written["models"][0]["name"] == "tinyclip"
    assert written["models"][0]["modalities"] == ["text"]
    assert list(written["analyses"]) == ["probe", "decompose"] and written["seeds"] == [0]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and set(manifest["models"]) == {"tinyclip"}
    for name in ("probe", "decompose"):
        assert (out / "results" / "clevr" / "tinyclip-text" / name / "summary.json").is_file()
    assert (out / "embeddings" / "clevr" / "tinyclip-text+rand" / "manifest.json").is_file()
    assert "clevr / tinyclip-text:" in stdout and (out / "report.html").is_file()


def test_the_written_config_repeats_the_run_as_a_no_op(text_run: tuple[Path, str], run_cli) -> None:
    out, _ = text_run
    again = run_cli("run", out / "config.yaml", "--out", out, "-q")
    assert again.returncode == 0, again.stderr
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    assert {s["status"] for s in steps if s["kind"] != "report"} == {"reused"}


def test_print_config_prints_what_the_run_would_write(run_cli, tiny_clip: Path, tmp_path: Path) -> None:
    printed = run_cli("run", "--model", f"clip=hf:{tiny_clip}", "--dataset", "clevr", "--quick", "--print-config")
    assert printed.returncode == 0, printed.stderr
    config = parse_config(yaml.safe_load(printed.stdout))
    assert config == one_line_config([f"clip=hf:{tiny_clip}"], datasets=["clevr"], quick=True)
    assert not list(tmp_path.iterdir())  # nothing was run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a run config (bindscope run CONFIG.yaml --out DIR) or a model (bindscope run --model SPEC"),
        (("demo-quick", "--model", "st:all-MiniLM-L6-v2"), "--model describe a run without a config, and demo-quick"),
        (("--model", "st:all-MiniLM-L6-v2", "--max-scenes", "many"), "--max-scenes takes a number of scenes or all"),
        (("--embeddings", "e", "--dataset", "clevr"), "--dataset chooses what the --model runs embed; give --model"),
        (("--model", "st:all-MiniLM-L6-v2", "--analyses", "probe,"), "--analyses takes comma-separated values"),
        (("--model", "st:all-MiniLM-L6-v2", "--dataset", "clevr2"), "(did you mean clevr2d?)"),
        (("--model", "st:all-MiniLM-L6-v2", "--dataset", "clevr"), "--out is missing: name the run folder"),
        (("--model", "hf:/nowhere/model", "--out", "o"), "/nowhere/model"),
        (("--embeddings", "/nowhere/emb", "--out", "o"), "embeddings /nowhere/emb is not a folder"),
    ],
)
def test_a_bad_one_liner_is_one_line(run_cli, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    assert_one_line_error(run_cli("run", *args, cwd=tmp_path), message)
    assert not (tmp_path / "o").exists()


# -- embedding folders made elsewhere ---------------------------------------------------------------------
CONFIG = """name: imported
seeds: [0]
embeddings:
  - {path: emb/standin-image}
  - {path: emb/standin-text}
analyses:
  probe: {optimizer: lbfgs}
  crossmodal: true
"""


@pytest.fixture(scope="module")
def imported_run(standins: Path, run_cli_module) -> tuple[Path, str]:
    (standins / "run.yaml").write_text(CONFIG)
    done = run_cli_module("run", standins / "run.yaml", "--out", standins / "runs" / "imported", "-q")
    assert done.returncode == 0, done.stderr
    return standins / "runs" / "imported", done.stdout


def test_imported_embeddings_get_every_analysis_and_the_report(imported_run: tuple[Path, str]) -> None:
    out, stdout = imported_run
    results = out / "results" / "clevr"
    for folder in ("standin-image/probe", "standin-text/probe", "standin/crossmodal"):
        assert (results / folder / "summary.json").is_file(), folder
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    model = manifest["models"]["standin"]
    assert model["modalities"] == ["image", "text"] and model["source"]["kind"] == "import"
    assert not (out / "embeddings").exists()  # read where they are, not copied
    crossmodal = json.loads((results / "standin" / "crossmodal" / "summary.json").read_text())
    assert crossmodal["inputs"]["singles"] is not None  # the captions' bank, for the half-truths
    assert "clevr / standin-image:" in stdout and "standin" in (out / "report.html").read_text()


def test_the_command_line_takes_the_same_folders(standins: Path, run_cli, tmp_path: Path) -> None:
    done = run_cli(
        "run", "--embeddings", standins / "emb" / "standin-image", "--embeddings", standins / "emb" / "standin-text",
        "--analyses", "probe", "--quick", "--out", tmp_path / "cli", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cli" / "results" / "clevr" / "standin-text" / "probe" / "summary.json").is_file()


def test_a_relative_path_is_read_from_the_config_folder(standins: Path) -> None:
    (standins / "relative.yaml").write_text(CONFIG)
    config = load_config(standins / "relative.yaml")
    assert [Path(e.path) for e in config.embeddings] == [
        (standins / "emb" / f"standin-{m}").resolve() for m in ("image", "text")
    ]


def _entry_error(standins: Path, **entry: object) -> str:
    data = {"name": "bad", "embeddings": [{"path": str(standins / "emb" / "standin-text"), **entry}]}
    with pytest.raises(BindscopeError) as caught:
        parse_config(data)
    return str(caught.value)


def test_bad_embedding_entries_are_refused_before_anything_runs(standins: Path) -> None:
    image = str(standins / "emb" / "standin-image")
    assert "its control folder" in _entry_error(standins, control=image) and "another modality" in _entry_error(
        standins, control=image
    )
    assert "name dataset text; the run has none" in _entry_error(standins, dataset="text")
    assert "is not a folder" in _entry_error(standins, path=str(standins / "nowhere"))
    twice = {"name": "bad", "embeddings": [{"path": image}, {"path": image}]}
    with pytest.raises(BindscopeError, match="both standin's image embeddings of clevr; give them distinct names"):
        parse_config(twice)


def test_embeddings_of_another_dataset_stop_the_run(standins: Path, run_cli, tmp_path: Path) -> None:
    config = {
        "name": "other",
        "seeds": [0],
        "datasets": [{"name": "small", "preset": "clevr", "max_scenes": 264}],
        "embeddings": [{"path": str(standins / "emb" / "standin-text"), "dataset": "small"}],
        "analyses": {"probe": {"optimizer": "lbfgs"}},
        "report": False,
    }
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(config))
    done = run_cli("run", tmp_path / "other.yaml", "--out", tmp_path / "run", "-q")
    assert_one_line_error(done, "were made of another dataset")


def test_a_second_run_links_the_cached_embeddings_unless_told_not_to(
    text_run: tuple[Path, str], tiny_clip: Path, run_cli_module, tmp_path: Path
) -> None:
    first, _ = text_run
    args = ("run", "--model", f"tinyclip=hf:{tiny_clip}", "--modality", "text", "--dataset", "clevr", "--analyses",
            "probe", "--quick", "-q", "--out")  # fmt: skip
    for out, flags, status in ((tmp_path / "off", ("--no-cache",), "embedded"), (tmp_path / "on", (), "cached")):
        done = run_cli_module(*args, out, *flags)
        assert done.returncode == 0, done.stderr
        steps = json.loads((out / "manifest.json").read_text())["steps"]
        assert {s["status"] for s in steps if s["kind"] == "embed"} == {status}, out
    linked = tmp_path / "on" / "embeddings" / "clevr" / "tinyclip-text" / "embeddings.npy"
    made = first / "embeddings" / "clevr" / "tinyclip-text" / "embeddings.npy"
    assert linked.stat().st_ino == made.stat().st_ino  # one file on the disk: nothing was copied
