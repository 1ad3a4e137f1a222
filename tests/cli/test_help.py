"""The help as a newcomer meets it: value names, workflow-ordered groups, shell completion, and a fast answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_reference import walk

from bindscope.cli.group import PANELS
from bindscope.cli.helptext import value_name

BINDSCOPE = str(Path(sys.executable).parent / "bindscope")
PYTHON_TYPES = re.compile(r"<(path|int|str|float|bool|list\[[a-z]+\])>")
HELP_ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _help(*args: str) -> str:
    done = subprocess.run([BINDSCOPE, *args, "--help"], capture_output=True, text=True, env=HELP_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_value_is_named_not_typed() -> None:
    unnamed = []
    for command in walk():
        for param in command.command.params:
            if value_name(param) is None:  # a choice: its values are its name
                continue
            if param.metavar is None or not re.fullmatch(r"[A-Z][A-Z0-9_=\[\]]*(\.[a-z]+)?|\[SHELL\]|", param.metavar):
                unnamed.append(f"{' '.join(command.path)} {param.name}: {param.metavar!r}")
    assert not unnamed, unnamed


@pytest.mark.parametrize("command", [(), ("embed",), ("complexity",), ("intervene",), ("scratch", "train")])
def test_the_rendered_help_shows_no_python_types(command: tuple[str, ...]) -> None:
    text = _help(*command)
    assert not PYTHON_TYPES.search(text), PYTHON_TYPES.search(text)
    if command == ("embed",):
        assert re.search(r"--out\s+-o\s+FOLDER", text) and re.search(r"--layer\s+N\b", text)
        assert "Usage: bindscope embed [OPTIONS] {DATASET}" in text and re.search(r"DATASET\s+FOLDER", text)


def test_commands_are_grouped_in_the_order_of_the_workflow() -> None:
    text = _help()
    panels = [p for p in PANELS if f"─ {p} " in text]
    assert panels == list(PANELS), panels
    order = ["demo", "run", "compare", "dataset", "models", "embed", "probe", "decompose", "intervene", "complexity"]
    order += ["crossmodal", "geometry", "analyses", "scratch"]
    at = [re.search(rf"^│ {name} ", text, re.M) for name in order]
    assert all(at), [n for n, m in zip(order, at) if m is None]
    assert [m.start() for m in at if m] == sorted(m.start() for m in at if m)
    assert "│ demo        The main job on the embedded default model (all-MiniLM-L6-v2, offline): every" in text


def test_shell_completion_completes_commands_and_generated_options() -> None:
    def complete(words: str) -> list[str]:
        env = {**HELP_ENV, "_BINDSCOPE_COMPLETE": "complete_bash", "COMP_WORDS": words}
        env["COMP_CWORD"] = str(len(words.split()) - 1)
        done = subprocess.run([BINDSCOPE], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("bindscope mo") == ["models"]
    assert complete("bindscope probe --opt") == ["--optimizer"]
    assert "check" in complete("bindscope models ch")
    script = subprocess.run([BINDSCOPE, "--show-completion", "bash"], capture_output=True, text=True, env=HELP_ENV)
    assert script.returncode == 0 and "_BINDSCOPE_COMPLETE=complete_bash" in script.stdout


def test_the_root_help_imports_no_model_library() -> None:
    """What keeps ``bindscope --help`` quick, checked without timing it (a wall-time assertion fails on a busy
    machine, not on slow code): the root help imports none of the heavy libraries."""
    code = (
        "import sys; from bindscope.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'matplotlib', 'sklearn') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=HELP_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", "the root help imported a heavy library"
