"""Run configs and run folders refused before anything is written (issue 39), through the real CLI.

A name that becomes a folder (a model's, a dataset's, a scratch model's) follows one rule; every check a run
config allows without computing (model specs, local model folders, modalities, presets, ``max_scenes``) runs
before the run folder is made; ``bindscope compare`` takes only finished runs that hold results. Each refusal
is one line, exit status 1, with every input and any earlier run folder byte for byte as it was and nothing new
anywhere under the test's folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_checks import assert_one_line_error
from folders import snapshot

RULE = "use letters, digits, '_', '-', '+' and '.' only, starting with a letter or digit, at most 100 characters"
LONG = "m" * 200
BAD_NAMES = ["../../../x", "a/b", "..", "/abs", "x y", LONG]
MODEL = "st:all-MiniLM-L6-v2"
ANALYSES = (
    "analyses: {probe: {optimizer: lbfgs}, "
    + ", ".join(f"{n}: false" for n in ("decompose", "intervene", "complexity", "geometry"))
    + "}"
)


def config(datasets: str, models: str = "", scratch: str = "") -> str:
    """A tiny run config: the given YAML flow lists, the probe only, no report."""
    parts = ["name: tiny", "seeds: [0]", f"datasets: {datasets}"]
    parts += [f"models: {models}"] if models else []
    parts += [f"scratch: {scratch}"] if scratch else []
    return "\n".join([*parts, ANALYSES, "report: false", ""])


CLEVR = "[{name: clevr, preset: clevr, max_scenes: 24}]"


def shown(name: str) -> str:
    """A name as the one-line error shows it (a long one cut to 60 characters)."""
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


def refused_without_writing(run_cli, tmp_path: Path, text: str, message: str) -> None:
    """``bindscope run`` on ``text``, into a new OUT and into an earlier run's folder: refused in one line holding
    ``message``; no OUT appears, the earlier folder and the config are byte for byte intact, nothing else is new."""
    (tmp_path / "c.yaml").write_text(text)
    earlier = tmp_path / "earlier"  # an earlier run's folder (what a refused rerun must leave as it was)
    (earlier / "datasets" / "clevr").mkdir(parents=True)
    (earlier / "config.yaml").write_text(config(CLEVR, f'[{{spec: "{MODEL}", name: minilm}}]'))
    (earlier / "manifest.json").write_text(json.dumps({"format": {"name": "bindscope-run", "version": 1}}))
    (earlier / "datasets" / "clevr" / "manifest.json").write_text("{}")
    before = snapshot(tmp_path)
    for out in (tmp_path / "work" / "run", earlier):
        done = run_cli("run", tmp_path / "c.yaml", "--out", out, "-q", cwd=tmp_path)
        assert_one_line_error(done, message)
        assert snapshot(tmp_path) == before
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("bad", BAD_NAMES, ids=["up-and-out", "slash", "dotdot", "absolute", "space", "200-chars"])
@pytest.mark.parametrize("where", ["model", "dataset", "scratch"])
def test_names_that_would_leave_the_run_folder(run_cli, tmp_path: Path, where: str, bad: str) -> None:
    """A model, dataset or scratch model name that is not one safe folder name is refused, naming the rule."""
    quoted = json.dumps(bad)  # a YAML flow scalar
    if where == "model":
        text, what = config(CLEVR, f'[{{spec: "{MODEL}", name: {quoted}}}]'), "models.0.name: model name"
    elif where == "dataset":
        text = config(f"[{{name: {quoted}, preset: clevr, max_scenes: 24}}]", f'[{{spec: "{MODEL}"}}]')
        what = "datasets.0.name: dataset name"
    else:
        text, what = config("[]", scratch=f"[{{name: {quoted}, steps: 1}}]"), "scratch.0.name: scratch model name"
    refused_without_writing(run_cli, tmp_path, text, f"{what} {shown(bad)} names a folder: {RULE}")


def test_a_spec_with_no_usable_folder_name(run_cli, tmp_path: Path) -> None:
    """A model without ``name`` takes its folder name from its spec; ``st:..`` would give ``..``: refused."""
    text = config(CLEVR, '[{spec: "st:.."}]')
    refused_without_writing(run_cli, tmp_path, text, "model 'st:..' gives no usable folder name ('..'); give it one")


CHECKS = {
    "unknown-backend": (
        CLEVR,
        '[{spec: "nonsense:x"}]',
        "models.0.spec: unknown model spec 'nonsense:x'; a spec starts with hf:, openclip:, st: or scratch:",
    ),
    "missing-st-folder": (
        CLEVR,
        '[{spec: "st:{tmp}/no-such-model", name: m}]',
        "models.0.spec: model spec 'st:{tmp}/no-such-model': folder {tmp}/no-such-model does not exist",
    ),
    "missing-checkpoint": (
        CLEVR,
        '[{spec: "scratch:{tmp}/no-such-checkpoint", name: m}]',
        "models.0.spec: model spec 'scratch:{tmp}/no-such-checkpoint': checkpoint folder {tmp}/no-such-checkpoint "
        "does not exist",
    ),
    "modality-the-dataset-lacks": (
        "[{name: captions, preset: text}]",
        '[{spec: "hf:openai/clip-vit-base-patch32", name: clip, modalities: [image, text]}]',
        "model clip embeds image, which dataset captions (preset text) lacks (it has text); drop image from the "
        "model's modalities",
    ),
    "images-of-a-text-model": (
        CLEVR,
        f'[{{spec: "{MODEL}", name: minilm, modalities: [image]}}]',
        "models.0: model minilm ('st:all-MiniLM-L6-v2'): st models embed text only; drop image from its modalities",
    ),
    "unknown-preset": (
        "[{name: clevr, preset: no-such-preset}]",
        f'[{{spec: "{MODEL}"}}]',
        "datasets.0: unknown preset 'no-such-preset'; choose one of",
    ),
    "max-scenes-too-small": (
        "[{name: clevr, preset: clevr, max_scenes: 8}]",
        f'[{{spec: "{MODEL}"}}]',
        "dataset clevr: keeping every object in every slot needs at least 24 scenes",
    ),
}


@pytest.mark.parametrize("case", list(CHECKS))
def test_checks_before_anything_is_written(run_cli, tmp_path: Path, case: str) -> None:
    """A bad model spec, a missing local model folder, a modality the dataset or model lacks, an unknown preset, a
    subsample too small: refused before the datasets are built (no half-made run folder)."""
    datasets, models, message = (part.replace("{tmp}", str(tmp_path)) for part in CHECKS[case])
    refused_without_writing(run_cli, tmp_path, config(datasets, models), message)


# -- issue 54: colliding names, too many entries, control characters, layers the model lacks ------------------
CLASHES = {
    "datasets-differing-in-case": (
        "[{name: C2D, preset: clevr, max_scenes: 24}, {name: c2d, preset: clevr, max_scenes: 24}]",
        f'[{{spec: "{MODEL}"}}]',
        "",
        "dataset names ['C2D', 'c2d'] differ only in case: they would share one folder on a case-insensitive disk "
        "(macOS, Windows); give each dataset a name that differs in more than case",
    ),
    "models-differing-in-case": (
        CLEVR,
        f'[{{spec: "{MODEL}", name: MiniLM}}, {{spec: "{MODEL}+rand", name: minilm}}]',
        "",
        "model names ['MiniLM', 'minilm'] differ only in case: they would share one folder on a case-insensitive "
        "disk (macOS, Windows); give each model a name that differs in more than case",
    ),
    "scratch-models-differing-in-case": (
        "[]",
        "",
        "[{name: Tiny, steps: 1}, {name: tiny, steps: 1}]",
        "scratch model names repeat or clash with dataset names (ignoring case): ['Tiny', 'tiny']; give each a "
        "distinct name (its results go under results/scratch-<name>/)",
    ),
    "a-dataset-listed-twice": (
        CLEVR,
        f'[{{spec: "{MODEL}", datasets: [clevr, clevr]}}]',
        "",
        "models.0.datasets: dataset 'clevr' is listed more than once; give each dataset once",
    ),
}


@pytest.mark.parametrize("case", list(CLASHES))
def test_names_equal_ignoring_case_and_repeated_datasets(run_cli, tmp_path: Path, case: str) -> None:
    """Datasets, models or scratch models whose names differ only in case (one folder on a case-insensitive disk),
    and a model that lists a dataset twice: refused before anything is written."""
    datasets, models, scratch, message = CLASHES[case]
    refused_without_writing(run_cli, tmp_path, config(datasets, models, scratch), message)


def entries(key: str, count: int) -> str:
    """``count`` entries of ``key``, each one a run would refuse on its own (a bound must be checked first)."""
    entry = {
        "datasets": "{{name: d{}, preset: no-such-preset}}",
        "models": '{{spec: "nonsense:{}"}}',
        "scratch": "{{name: s{}, config: no-such-config}}",
    }[key]
    return "[" + ", ".join(entry.format(i) for i in range(count)) + "]"


@pytest.mark.parametrize(
    ("key", "what"), [("datasets", "datasets"), ("models", "models"), ("scratch", "scratch models")]
)
def test_more_entries_than_a_run_holds(run_cli, tmp_path: Path, key: str, what: str) -> None:
    """101 datasets, models or scratch models, each bad: refused by the bound at once, before any entry is validated."""
    parts = {"datasets": CLEVR, "models": f'[{{spec: "{MODEL}"}}]', "scratch": ""} | {key: entries(key, 101)}
    message = f"{key}: the number of {what} must be at most 100, got 101; split them across runs"
    refused_without_writing(run_cli, tmp_path, config(**parts), message)


PRINTABLE = "which is not printable; use printable text (no newline, tab, NUL or other control character)"


@pytest.mark.parametrize("where", ["preset", "scratch"])
def test_concept_values_with_control_characters(run_cli, tmp_path: Path, where: str) -> None:
    """A concept value holding a newline (a preset YAML of the run) or a NUL (a scratch model's concepts): refused,
    naming the value, before anything is written."""
    if where == "preset":
        (tmp_path / "lines.yaml").write_text(
            'name: lines\nconcepts: {color: ["re\\nd", blue], shape: [square, circle]}\nobjects_per_scene: 2\n'
        )
        text = config("[{name: lines, preset: lines.yaml}]", f'[{{spec: "{MODEL}"}}]')
        where = f"datasets.0: invalid preset file {tmp_path / 'lines.yaml'}"
        message = f"{where}: value of concept 'color' 're\\nd' holds '\\n', {PRINTABLE}"
    else:
        text = config("[]", scratch='[{name: m, steps: 1, overrides: {concepts: {a: ["x\\0y", z], b: [u, v]}}}]')
        where = "scratch model m: invalid concept space of scratch config cpu-small"
        message = f"{where}: value of concept 'a' 'x\\x00y' holds '\\x00', {PRINTABLE}"
    refused_without_writing(run_cli, tmp_path, text, message)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny CLIP saved like a hub model (2 text layers, 3 vision layers)."""
    from tiny_models import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("models") / "clip")


def out_of_range(model: str, spec: str, layer: int, count: int) -> str:
    """What a run says of a listed layer its model's text tower of ``count`` layers lacks."""
    return (
        f"model {model} ({shown(spec)}): layers [{layer}] are out of range: its text tower has {count} layers; list "
        f"layers from 0 (the embedding layer) to {count} (the last block), or -1 (the last block) to -{count + 1} "
        "counting back, or give layers: all"
    )


@pytest.mark.parametrize("backend", ["hf", "st"])
def test_a_layer_the_model_lacks(run_cli, tmp_path: Path, tiny_clip: Path, backend: str) -> None:
    """``layers: [99999]`` (counted from an hf model's config.json alone) or ``[2, -8]`` of MiniLM's 6 layers
    (counted on the loaded model): refused before any dataset is built, with no run folder."""
    if backend == "hf":
        spec, entry = f"hf:{tiny_clip}", f'{{spec: "hf:{tiny_clip}", name: clip, layers: [99999]}}'
        message = out_of_range("clip", spec, 99999, 2)
    else:
        entry, message = f'{{spec: "{MODEL}", name: minilm, layers: [2, -8]}}', out_of_range("minilm", MODEL, -8, 6)
    refused_without_writing(run_cli, tmp_path, config(CLEVR, f"[{entry}]"), message)


# -- bindscope compare ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, run_cli_module) -> Path:
    """A finished run folder with results: the probe of all-MiniLM-L6-v2 on 24 clevr captions."""
    root = tmp_path_factory.mktemp("finished")
    text = config(CLEVR, f'[{{spec: "{MODEL}", name: minilm, control: false, single_objects: false}}]')
    (root / "c.yaml").write_text(text)
    done = run_cli_module("run", root / "c.yaml", "--out", root / "run", "-q")
    assert done.returncode == 0, done.stderr
    return root / "run"


def not_a_run(kind: str, finished: Path, tmp_path: Path) -> Path:
    """A folder ``bindscope compare`` must refuse, made in ``tmp_path`` (or in the finished run: its dataset)."""
    folder = tmp_path / kind
    if kind == "dataset":
        return finished / "datasets" / "clevr"
    if kind == "empty":
        folder.mkdir()
    elif kind == "file":
        folder.write_text("not a run\n")
    elif kind == "no-results":  # the run's config and manifest, no results/
        folder.mkdir()
        for name in ("config.yaml", "manifest.json"):
            shutil.copy(finished / name, folder / name)
    elif kind == "interrupted":  # a whole run whose manifest says it stopped
        shutil.copytree(finished, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    return folder


COMPARE = {
    "missing": "is not a finished run folder (it does not exist); give --out folders of bindscope run",
    "empty": "is not a finished run folder (no manifest.json); give --out folders of bindscope run",
    "file": "is not a finished run folder (it is a file); give --out folders of bindscope run",
    "dataset": "is not a finished run folder (its manifest.json is a dataset's); give --out folders of bindscope run",
    "no-results": "is a run folder without results (nothing under results/); give --out folders of bindscope run",
    "interrupted": "is not a finished run folder (status 'interrupted': its tables lack what it did not reach); "
    "finish it with `bindscope run CONFIG --out",
}


@pytest.mark.parametrize("kind", list(COMPARE))
def test_compare_takes_finished_runs_only(run_cli, finished: Path, tmp_path: Path, kind: str) -> None:
    """``bindscope compare`` of a finished run and something else: refused in one line naming the folder, in
    either order, with no output folder and both inputs intact."""
    other = not_a_run(kind, finished, tmp_path)
    before = snapshot(tmp_path, finished)
    for runs in ((finished, other), (other, finished)):
        done = run_cli("compare", *runs, "--out", tmp_path / "cmp")
        assert_one_line_error(done, f"{other} {COMPARE[kind]}")
        assert snapshot(tmp_path, finished) == before
    assert not (tmp_path / "cmp").exists()
