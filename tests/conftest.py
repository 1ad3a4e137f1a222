"""Shared fixtures: isolated caches, the real CLI in a subprocess, small dataset folders."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import configuration as hypothesis_configuration
from hypothesis import settings

from duration_guard import (  # the suite's time budget (a test over 20 s, the suite over 10 min fail in CI)
    pytest_addoption,
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
)
from forked_cli import HUB_SETTINGS, MODEL_LIBRARIES, ForkServer, same_hub_settings

# Hypothesis caches into ./.hypothesis by default: keep it in a temp folder, and keep no database.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="bindscope-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
hypothesis_configuration.set_hypothesis_home_dir(_HYPOTHESIS_HOME)
settings.register_profile("bindscope", database=None, deadline=None)
settings.load_profile("bindscope")


# huggingface_hub reads these once, when it is first imported (possibly during collection), so they
# are set for the whole session here as well as per test below.
_HF_SESSION_HOME = tempfile.mkdtemp(prefix="bindscope-hf-")
atexit.register(shutil.rmtree, _HF_SESSION_HOME, ignore_errors=True)
os.environ["HF_HOME"] = _HF_SESSION_HOME
# The XDG cache (the embedding cache in it) of module- and session-scoped fixtures, which run before a test's own
# isolated folders are set (isolated_home): a session temp folder, never the user's ~/.cache.
_XDG_SESSION_CACHE = tempfile.mkdtemp(prefix="bindscope-xdg-cache-")
atexit.register(shutil.rmtree, _XDG_SESSION_CACHE, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = _XDG_SESSION_CACHE
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# One thread per process: pytest-xdist runs a worker per core, and the commands the tests start in
# subprocesses inherit this, so the workers do not fight over the cores. Set before torch is imported.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_threads] = "1"

__all__ = [
    "pytest_addoption",
    "pytest_runtest_makereport",
    "pytest_configure",
    "pytest_unconfigure",
    "pytest_runtest_logreport",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
]


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
def environment_put_back() -> Iterator[None]:
    """Each test's changes to the environment undone after it: a command run in the test's own process sets
    variables for the processes it starts, and a later test's subprocesses must not inherit them."""
    environ = dict(os.environ)
    yield
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)


@pytest.fixture(autouse=True)
def isolated_home(
    environment_put_back: None, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point every cache a library might write into a temp folder (after the environment's snapshot is taken)."""
    home = tmp_path_factory.mktemp("home")
    for var, value in isolated_env(home).items():
        monkeypatch.setenv(var, value)
    return home


_SERVERS: dict[str, ForkServer] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Start the fork servers before collection, in each process that runs tests (not in an xdist controller):
    they import while the tests are collected, so no test waits for them."""
    controller = not hasattr(config, "workerinput") and config.getoption("numprocesses", None) not in (None, 0)
    if controller or config.getoption("collectonly"):
        return
    scratch = Path(tempfile.mkdtemp(prefix="bindscope-forks-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    env = dict(os.environ)
    _SERVERS["plain"] = ForkServer(env, scratch / "plain")
    _SERVERS["models"] = ForkServer(env, scratch / "models", preload=MODEL_LIBRARIES)


def pytest_unconfigure(config: pytest.Config) -> None:
    for server in _SERVERS.values():
        server.close()


@pytest.fixture(scope="session")
def cli_server() -> ForkServer:
    """The fork server the CLI tests start ``bindscope`` from: real processes, start-up imports paid once."""
    return _SERVERS["plain"]


@pytest.fixture(scope="session")
def model_cli_server() -> ForkServer:
    """A fork server that has imported the model libraries too (sentence-transformers, transformers, open_clip):
    for commands under the session's hub settings (``uses_model_server``), which load models from local folders."""
    return _SERVERS["models"]


_SESSION_HUB = {k: os.environ.get(k) for k in HUB_SETTINGS}


def uses_model_server(env: dict[str, str]) -> bool:
    """Whether a command under ``env`` may run in the model server: its hub settings are the session's (a test
    of a hub, which sets ``HF_ENDPOINT``, gets the plain server and so imports huggingface_hub under its own).
    The hub cache stays the session's (``HF_HOME`` is a session temp folder): no test command downloads."""
    return same_hub_settings(env, _SESSION_HUB)


def _run_bindscope(request: pytest.FixtureRequest, env: dict[str, str], args: tuple, cwd: Path | None):
    # no progress lines on a slow machine unless a test asks for them (BINDSCOPE_PROGRESS_SECONDS=0)
    env = {"BINDSCOPE_PROGRESS_SECONDS": "86400", **env, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    server = request.getfixturevalue("model_cli_server" if uses_model_server(env) else "cli_server")
    return server.run([str(a) for a in args], env, cwd=cwd, timeout=300)


@pytest.fixture
def run_cli(request: pytest.FixtureRequest):
    """Run ``bindscope`` in a process of its own (forked by a fork server); returns the CompletedProcess."""

    def run(*args: str | os.PathLike, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return _run_bindscope(request, dict(os.environ), args, cwd)

    return run


@pytest.fixture(scope="module")
def run_cli_module(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """``run_cli`` for module-scoped fixtures, with its own isolated caches."""
    env = {**os.environ, **isolated_env(tmp_path_factory.mktemp("home"))}

    def run(*args: str | os.PathLike, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return _run_bindscope(request, env, args, cwd)

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
