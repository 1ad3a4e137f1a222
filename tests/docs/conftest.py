"""Run a documentation page's code blocks: bash through real ``bindscope`` processes, python in-process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from doc_examples import Block, commands, page_blocks, page_prerequisite, plain_bindscope

#: The workspace each page left behind, per test process (a page that starts from it gets a copy).
_WORKSPACES: dict[str, Path] = {}
VENV_BIN = str(Path(sys.executable).parent)


def _fail(block: Block, what: str, result: subprocess.CompletedProcess) -> None:
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    pytest.fail(f"{block.where}: `{what}` exited {result.returncode}\n{tail}", pytrace=False)


def _run_bash(block: Block, workspace: Path, run_cli: Callable[..., subprocess.CompletedProcess]) -> None:
    lines = commands(block.code)
    plain = [plain_bindscope(line) for line in lines]
    if all(args is not None for args in plain):  # real processes, forked after the imports
        for line, args in zip(lines, plain):
            result = run_cli(*(args or []), cwd=workspace)
            if result.returncode != 0:
                _fail(block, line, result)
        return
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code], cwd=workspace, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        _fail(block, block.code.strip().splitlines()[0] + " ...", result)


def _run_python(blocks: list[Block], workspace: Path, scripts: Path) -> None:
    """Consecutive python blocks saved as one script (no main guard, as a user saves one) and run as
    ``python SCRIPT`` in the workspace, in a fresh interpreter."""
    first = blocks[0]
    script = scripts / f"{first.page.replace('/', '-').replace('..', 'up')}-{first.line}.py"
    script.write_text("\n".join(f"# {b.where}\n{b.code}" for b in blocks))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=dict(os.environ), capture_output=True, text=True
    )
    if result.returncode != 0:
        _fail(first, f"python {script.name} (the python blocks from line {first.line})", result)


def run_page(page: str, workspace: Path, run_cli: Callable[..., subprocess.CompletedProcess]) -> Path:
    """Run every block of ``page`` in order in ``workspace`` (after its prerequisite page's, copied in)."""
    before = page_prerequisite(page)
    if before is not None:
        shutil.copytree(page_workspace(before, workspace.parent, run_cli), workspace, symlinks=True, dirs_exist_ok=True)
    scripts = workspace.parent / f"{workspace.name}-scripts"
    scripts.mkdir(exist_ok=True)
    python: list[Block] = []  # python blocks since the last bash block: one script
    for block in page_blocks(page):
        if block.file is not None:
            target = workspace / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
        if block.skip_reason is not None or block.language not in ("bash", "python"):
            continue
        if block.language == "python":
            python.append(block)
            continue
        if python:
            _run_python(python, workspace, scripts)
            python = []
        _run_bash(block, workspace, run_cli)
    if python:
        _run_python(python, workspace, scripts)
    return workspace


def page_workspace(page: str, scratch: Path, run_cli: Callable[..., subprocess.CompletedProcess]) -> Path:
    """The folder ``page`` leaves behind, made once per test process."""
    if page not in _WORKSPACES:
        folder = scratch / f"base-{page.replace('/', '-')}"
        folder.mkdir()
        _WORKSPACES[page] = run_page(page, folder, run_cli)
    return _WORKSPACES[page]


@pytest.fixture
def doc_page(tmp_path: Path, run_cli) -> Callable[[str], Path]:
    """Run one page's blocks in a fresh workspace; returns the workspace."""

    def run(page: str) -> Path:
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        return run_page(page, workspace, run_cli)

    return run
