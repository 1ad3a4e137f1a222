"""The memory floor of a command: one that loads no model imports no model library, one that computes no tensor does
not import torch, and ``probe`` on imported arrays stays under a peak memory bound.

Each command runs as a fresh ``python`` process (not the CLI tests' fork server, which has imported torch already)
under an import hook that keeps, for every heavy library, the bindscope frames that first asked for it; a library
left in ``sys.modules`` at the end is reported with them. The process's peak memory is its own high-water mark
(``VmHWM``): its ``ru_maxrss`` would start from the test process's, which it inherits at fork.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bindscope.data.datasets import build_dataset
from bindscope.embeddings.store import import_embeddings
from bindscope.space.planted import planted_embeddings

#: The model libraries: a command that loads no model imports none of them.
MODEL_LIBRARIES = ("transformers", "sentence_transformers", "open_clip", "torchvision", "huggingface_hub")
#: What a command that computes no tensor imports neither.
NO_TENSORS = ("torch", *MODEL_LIBRARIES)
#: The peak memory of ``bindscope probe`` on 2,000 x 384 imported arrays, in MB (2^20 bytes).
PROBE_PEAK_MB = 400

#: Runs ``bindscope.cli.main(argv[2:])`` and writes to ``argv[1]`` the exit status, each of the ``HEAVY``
#: libraries left imported with the bindscope frames that first asked for it, and the peak memory in MB.
RUNNER = r"""
import importlib.abc, json, re, sys, traceback

HEAVY = set(json.loads(sys.argv[2]))
blame = {}


class Blame(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HEAVY and top not in blame:
            stack = traceback.extract_stack()
            if not any(f.name == "_find_and_load" for f in stack):
                return None  # a look-up that imports nothing (importlib.util.find_spec)
            frames = [f for f in stack if "/bindscope/" in f.filename.replace("\\", "/")]
            where = [f"{f.filename.replace(chr(92), '/').rsplit('/bindscope/', 1)[-1]}:{f.lineno}" for f in frames]
            blame[top] = " <- ".join(reversed(where[-6:])) or "outside bindscope"
        return None


sys.meta_path.insert(0, Blame())
from bindscope.cli import main

status = 0
try:
    main(sys.argv[3:])
except SystemExit as stop:
    status = stop.code if isinstance(stop.code, int) else 1
with open("/proc/self/status") as f:
    peak = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) / 1024
loaded = {m: blame.get(m, "?") for m in sorted(HEAVY) if m in sys.modules}
with open(sys.argv[1], "w") as f:
    json.dump({"status": status, "loaded": loaded, "peak_mb": peak}, f)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


def command(tmp_path: Path, *args: object, check: bool = True) -> dict:
    """``bindscope ARGS`` in a fresh process: its exit status (with ``check``: 0), the libraries of
    :data:`NO_TENSORS` it left imported (with who asked for each) and its peak memory in MB."""
    report = tmp_path / f"import-floor-{len(list(tmp_path.glob('import-floor-*')))}.json"
    argv = [sys.executable, "-c", RUNNER, str(report), json.dumps(NO_TENSORS), *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert report.is_file(), f"bindscope {' '.join(map(str, args))} did not finish:\n{done.stderr}"
    result = json.loads(report.read_text())
    assert result["status"] == 0 or not check, f"bindscope {' '.join(map(str, args))} failed:\n{done.stderr}"
    return result


def assert_not_imported(result: dict, what: str) -> None:
    pulled = [f"{module} (first asked for by {who})" for module, who in result["loaded"].items()]
    assert not pulled, f"`bindscope {what}` imported " + "; ".join(pulled)


SPACE = """\
name: floor
description: every ordered pair of 4 x 3 objects
concepts:
  attribute: [a0, a1, a2, a3]
  noun: [n0, n1, n2]
objects_per_scene: 2
scenes: {mode: enumerate, allow_identical: false, include_single_objects: true}
caption: {object: "a {attribute} {noun}", joiner: " and "}
noun: noun
modalities: [image, text]
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small custom space without images, planted text embeddings imported, and a run of probe on them."""
    root = tmp_path_factory.mktemp("floor")
    (root / "space.yaml").write_text(SPACE)
    dataset = build_dataset(root / "space.yaml", root / "data", images=False)
    np.save(root / "x.npy", planted_embeddings(dataset.scenes, "object_additive", dim=32, noise=0.1))
    import_embeddings(root / "data", root / "x.npy", name="planted", modality="text", out=root / "emb")
    run = "name: floor\nseeds: [0]\nembeddings: [{path: emb}]\nanalyses: {probe: {optimizer: lbfgs}}\nreport: true\n"
    (root / "run.yaml").write_text(run)
    return root


def test_presets_imports_nothing_heavy(tmp_path: Path) -> None:
    assert_not_imported(command(tmp_path, "presets"), "presets")


@pytest.mark.parametrize("space", ["custom", "clevr2d"])
def test_dataset_build_without_images_imports_no_torch(folders: Path, tmp_path: Path, space: str) -> None:
    source = folders / "space.yaml" if space == "custom" else space
    result = command(tmp_path, "dataset", "build", source, "--out", tmp_path / "data", "--no-images", "-q")
    assert_not_imported(result, f"dataset build {space} --no-images")
    assert (tmp_path / "data" / "manifest.json").is_file()


def test_embeddings_import_imports_no_torch(folders: Path, tmp_path: Path) -> None:
    out = tmp_path / "emb"
    args = ("embeddings", "import", folders / "data", folders / "x.npy", "--name", "x", "--modality", "text")
    assert_not_imported(command(tmp_path, *args, "--out", out), "embeddings import")
    assert (out / "embeddings.npy").is_file()


def test_probe_on_imported_arrays_imports_no_torch(folders: Path, tmp_path: Path) -> None:
    result = command(tmp_path, "probe", folders / "emb", "--out", tmp_path / "probe", "--seeds", "0", "-q")
    assert_not_imported(result, "probe")
    assert (tmp_path / "probe" / "summary.json").is_file()


def test_the_hook_names_who_imported_a_library(folders: Path, tmp_path: Path) -> None:
    """A device other than the CPU is checked with torch: the report names torch and the module that asked."""
    out = tmp_path / "probe"
    result = command(tmp_path, "probe", folders / "emb", "--out", out, "--device", "cuda:0", "-q", check=False)
    assert "core/devices.py" in result["loaded"].get("torch", ""), result
    with pytest.raises(AssertionError, match=r"imported torch \(first asked for by .*core/devices\.py"):
        assert_not_imported(result, "probe --device cuda:0")


@pytest.fixture(scope="module")
def run_folder(folders: Path) -> Path:
    """The probe-only run of the imported embeddings, its report written: `bindscope run` imports no torch."""
    out = folders / "run"
    result = command(folders, "run", folders / "run.yaml", "--out", out, "-q")
    assert_not_imported(result, "run (imported embeddings, probe only)")
    return out


@pytest.mark.parametrize(
    "args",
    [
        ("report", "{run}"),
        ("compare", "{run}", "{copy}", "--out", "{tmp}/cmp"),
        ("export", "{run}", "--out", "{tmp}/b"),
    ],
    ids=["report", "compare", "export"],
)
def test_commands_on_a_run_import_no_torch(run_folder: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    copy = tmp_path / "copy"
    if "{copy}" in args:
        shutil.copytree(run_folder, copy)
    filled = [a.format(run=run_folder, copy=copy, tmp=tmp_path) for a in args]
    assert_not_imported(command(tmp_path, *filled), args[0])


@pytest.fixture(scope="module")
def probe_scale(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 sampled scenes of 10 x 10 objects with planted object-additive embeddings 384 wide, imported."""
    root = tmp_path_factory.mktemp("probe-scale")
    space = SPACE.replace("[a0, a1, a2, a3]", f"[{', '.join(f'a{i}' for i in range(10))}]")
    space = space.replace("[n0, n1, n2]", f"[{', '.join(f'n{i}' for i in range(10))}]")
    space = space.replace("{mode: enumerate,", "{mode: sample, num_scenes: 2000, seed: 0,")
    space = space.replace("include_single_objects: true", "include_single_objects: false")
    (root / "space.yaml").write_text(space)
    dataset = build_dataset(root / "space.yaml", root / "data", images=False)
    assert len(dataset.scenes) == 2000
    np.save(root / "x.npy", planted_embeddings(dataset.scenes, "object_additive", dim=384, noise=0.1))
    import_embeddings(root / "data", root / "x.npy", name="planted", modality="text", out=root / "emb")
    return root


def test_probe_peak_memory_on_2000_imported_scenes(probe_scale: Path, tmp_path: Path) -> None:
    """The bound on the quickest solver: the default's cross-validation takes minutes at this size on 2 cores."""
    args = ("--seeds", "0", "--optimizer", "lbfgs", "-q")
    result = command(tmp_path, "probe", probe_scale / "emb", "--out", tmp_path / "probe", *args)
    assert_not_imported(result, "probe on 2,000 x 384")
    assert result["peak_mb"] < PROBE_PEAK_MB, (
        f"`bindscope probe` on 2,000 x 384 imported scenes peaked at {result['peak_mb']:.0f} MB "
        f"(bound {PROBE_PEAK_MB} MB)"
    )


SHIPPED = ("complexity", "crossmodal", "decompose", "geometry", "intervene", "probe")


def test_the_registry_imports_an_analysis_when_it_is_first_asked_for(folders: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    assert command(tmp_path, "probe", folders / "emb", "--out", probe, "--seeds", "0", "-q")["status"] == 0
    code = (
        "import sys\n"
        "from bindscope.analyses import list_analyses, get_analysis, load_result\n"
        "loaded = lambda: [a for a in list_analyses() if f'bindscope.analyses.{a}' in sys.modules]\n"
        f"assert list_analyses() == {list(SHIPPED)!r} and loaded() == [], loaded()\n"
        f"assert load_result({str(probe)!r}).typed is not None and loaded() == ['probe'], loaded()\n"
        "assert get_analysis('geometry').name == 'geometry' and loaded() == ['geometry', 'probe'], loaded()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
