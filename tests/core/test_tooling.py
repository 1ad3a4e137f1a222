"""The static checks CI runs (import-linter, mypy, ruff) use the repo's config and can fail.

Each check runs in a subprocess on files under ``tmp_path``, once on a file or package that
breaks it (non-zero exit, the broken rule named) and once on one that keeps it (exit 0), so a
check that silently passes everything, or a config it does not read, fails here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
BIN = Path(sys.executable).parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The current environment with every cache and home a tool might write pointed into ``tmp_path``."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache"),
        "RUFF_CACHE_DIR": str(tmp_path / "ruff-cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _toml_value(value: Any) -> str:
    """A TOML value for the strings, booleans, integers and lists of them in the import-linter config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string of these characters is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _importlinter_pyproject(config: dict[str, Any]) -> str:
    lines = ["[tool.importlinter]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in config.items() if key != "contracts"]
    for contract in config["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in contract.items()]
    return "\n".join(lines) + "\n"


def _lint_imports(project: Path, tmp_path: Path, contract: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, PYTHONPATH=str(project / "src"))
    return _run([str(BIN / "lint-imports"), "--no-cache", "--no-logo", "--contract", contract], project, env)


def test_import_linter_rejects_an_upward_import_in_a_copy_of_the_package(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers" and "bindscope.cli" in c["layers"])
    project = tmp_path / "project"
    shutil.copytree(
        REPO / "src" / "bindscope", project / "src" / "bindscope", ignore=shutil.ignore_patterns("__pycache__")
    )
    (project / "pyproject.toml").write_text(_importlinter_pyproject(config))

    # only the layers contract: the others are checked on the real tree by CI (``.ci/run``)
    kept = _lint_imports(project, tmp_path, layers["id"])
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert f"{layers['name']} KEPT" in kept.stdout

    concepts = project / "src" / "bindscope" / "space" / "concepts.py"
    concepts.write_text(concepts.read_text() + "\nimport bindscope.cli  # noqa\n")
    broken = _lint_imports(project, tmp_path, layers["id"])
    assert broken.returncode != 0, broken.stdout + broken.stderr
    assert f"{layers['name']} BROKEN" in broken.stdout
    # the import added to the copy is the one reported: the copy, not the installed package, was analysed
    assert "bindscope.space.concepts -> bindscope.cli" in broken.stdout, broken.stdout


def test_mypy_with_the_repo_config_rejects_a_type_error(tmp_path: Path) -> None:
    module = tmp_path / "typed.py"
    mypy = [str(BIN / "mypy"), "--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path / "mypy-cache")]

    module.write_text('def f() -> int:\n    return "x"\n')
    bad = _run([*mypy, str(module)], tmp_path, _env(tmp_path))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "typed.py:2: error:" in bad.stdout and "[return-value]" in bad.stdout, bad.stdout

    module.write_text("def f() -> int:\n    return 1\n")
    good = _run([*mypy, str(module)], tmp_path, _env(tmp_path))
    assert good.returncode == 0, good.stdout + good.stderr


def test_ruff_with_the_repo_config_rejects_bad_formatting_and_long_lines(tmp_path: Path) -> None:
    ruff = [str(BIN / "ruff")]
    config = ["--config", str(PYPROJECT), "--no-cache"]
    module = tmp_path / "styled.py"
    env = _env(tmp_path)

    module.write_text("x = {  'a':1 }\n")
    bad = _run([*ruff, "format", "--check", *config, str(module)], tmp_path, env)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "styled.py" in bad.stdout + bad.stderr

    module.write_text('x = {"a": 1}\n')
    good = _run([*ruff, "format", "--check", *config, str(module)], tmp_path, env)
    assert good.returncode == 0, good.stdout + good.stderr

    # the repo's line length (120) is the one applied: 121 characters fail, 120 pass
    module.write_text(f'x = "{"a" * 115}"\n')
    long = _run([*ruff, "check", *config, str(module)], tmp_path, env)
    assert long.returncode == 1 and "E501" in long.stdout, long.stdout + long.stderr
    module.write_text(f'x = "{"a" * 114}"\n')
    fits = _run([*ruff, "check", *config, str(module)], tmp_path, env)
    assert fits.returncode == 0, fits.stdout + fits.stderr
