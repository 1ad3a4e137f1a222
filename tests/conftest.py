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


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every cache a library might write (HOME, XDG, HF, torch, TMPDIR) into a temp folder."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in [
        ("HOME", ""),
        ("XDG_CACHE_HOME", ".cache"),
        ("HF_HOME", ".cache/huggingface"),
        ("TORCH_HOME", ".cache/torch"),
        ("MPLCONFIGDIR", ".config/matplotlib"),
        ("TMPDIR", "tmp"),
    ]:
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture
def run_cli():
    """Run the installed ``bindscope`` command; returns the CompletedProcess."""

    def run(*args: str | os.PathLike, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
        return subprocess.run(
            [str(BINDSCOPE), *map(str, args)],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=300,
        )

    return run


@pytest.fixture(scope="session")
def clevr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built clevr dataset folder, shared read-only by the tests."""
    from bindscope.datasets import build_dataset

    out = tmp_path_factory.mktemp("datasets") / "clevr"
    build_dataset("clevr", out)
    return out
