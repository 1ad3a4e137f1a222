"""Shared fixtures: isolated caches, the real CLI in a subprocess, small dataset folders."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import configuration as hypothesis_configuration
from hypothesis import settings

# Hypothesis caches into ./.hypothesis by default: keep it in a temp folder, and keep no database.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="bindscope-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
hypothesis_configuration.set_hypothesis_home_dir(_HYPOTHESIS_HOME)
settings.register_profile("bindscope", database=None, deadline=None)
settings.load_profile("bindscope")

BINDSCOPE = Path(sys.executable).with_name("bindscope")

# huggingface_hub reads these once, when it is first imported (possibly during collection), so they
# are set for the whole session here as well as per test below.
_HF_SESSION_HOME = tempfile.mkdtemp(prefix="bindscope-hf-")
atexit.register(shutil.rmtree, _HF_SESSION_HOME, ignore_errors=True)
os.environ["HF_HOME"] = _HF_SESSION_HOME
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


CACHE_VARS = [
    ("HOME", ""),
    ("XDG_CACHE_HOME", ".cache"),
    ("HF_HOME", ".cache/huggingface"),
    ("TORCH_HOME", ".cache/torch"),
    ("MPLCONFIGDIR", ".config/matplotlib"),
    ("TMPDIR", "tmp"),
]


def isolated_env(home: Path) -> dict[str, str]:
    """Every cache a library might write (HOME, XDG, HF, torch, TMPDIR), pointed into ``home``."""
    env = {}
    for var, sub in CACHE_VARS:
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    return {**env, "HF_HUB_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every cache a library might write into a temp folder."""
    home = tmp_path_factory.mktemp("home")
    for var, value in isolated_env(home).items():
        monkeypatch.setenv(var, value)
    return home


def _run_bindscope(env: dict[str, str], args: tuple, cwd: Path | None) -> subprocess.CompletedProcess:
    env = {**env, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    return subprocess.run(
        [str(BINDSCOPE), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


@pytest.fixture
def run_cli():
    """Run the installed ``bindscope`` command; returns the CompletedProcess."""

    def run(*args: str | os.PathLike, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return _run_bindscope(dict(os.environ), args, cwd)

    return run


@pytest.fixture(scope="module")
def run_cli_module(tmp_path_factory: pytest.TempPathFactory):
    """``run_cli`` for module-scoped fixtures, with its own isolated caches."""
    env = {**os.environ, **isolated_env(tmp_path_factory.mktemp("home"))}

    def run(*args: str | os.PathLike, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return _run_bindscope(env, args, cwd)

    return run


@pytest.fixture(scope="session")
def clevr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built clevr dataset folder, shared read-only by the tests."""
    from bindscope.data.datasets import build_dataset

    out = tmp_path_factory.mktemp("datasets") / "clevr"
    build_dataset("clevr", out, images=False)
    return out


def draw_scene_images(root: Path, size: int = 32) -> None:
    """Draw a small picture of every scene (and of every object alone at each slot) and attach them.

    Each object is its color, as a filled square, triangle-ish polygon or disc by shape, in its
    slot's half of the picture; enough for an encoder to see different pixels per scene.
    """
    from PIL import Image, ImageDraw

    from bindscope.data.datasets import attach_images, load_dataset

    ds = load_dataset(root)
    space = ds.space
    palette = [(40 + 70 * (v % 4), 60 + 90 * (v // 4), 200 - 20 * v) for v in range(len(space.values[0]))]

    k = ds.scenes.max_objects

    def draw(objects: list[tuple[int, int, int]], path: Path) -> None:
        img = Image.new("RGB", (size, size), (128, 128, 128))
        pen = ImageDraw.Draw(img)
        width = size // k
        for slot, color, shape in objects:
            box = (slot * width + 2, size // 4, slot * width + width - 2, size - size // 4)
            fill = palette[color]
            if shape % 3 == 0:
                pen.rectangle(box, fill=fill)
            elif shape % 3 == 1:
                pen.polygon([(box[0], box[3]), ((box[0] + box[2]) // 2, box[1]), (box[2], box[3])], fill=fill)
            else:
                pen.ellipse(box, fill=fill)
        img.save(path)

    scene_paths = []
    for i, scene in enumerate(ds.scenes.scenes):
        rel = f"images/{i:06d}.png"
        draw([(slot, int(o[0]), int(o[1])) for slot, o in enumerate(scene) if o[0] >= 0], root / rel)
        scene_paths.append(rel)
    single_paths = []
    for o, values in enumerate(space.all_objects()):
        row = []
        for slot in range(k):
            rel = f"images/single_{o:04d}_slot{slot + 1}.png"
            draw([(slot, int(values[0]), int(values[1]))], root / rel)
            row.append(rel)
        single_paths.append(row)
    attach_images(root, scene_paths, single_paths)


@pytest.fixture(scope="session")
def clevr_images_dir(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    """A clevr dataset folder with small drawn images of every scene and every object alone."""
    out = tmp_path_factory.mktemp("datasets") / "clevr-images"
    shutil.copytree(clevr_dir, out)
    draw_scene_images(out)
    return out


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: tiny models run faster so on a small shared machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
