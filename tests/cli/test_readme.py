"""The README's two commands stay the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_readme_names_setup_and_test_commands_and_ci_runs_the_test_command() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up and the two commands", 1)[1]  # the one-liners come first, above it
    blocks = _bash_blocks(section)
    setup, tests = blocks[0], blocks[1]
    assert setup == "bash scripts/setup && .venv/bin/bindscope demo --out runs/demo"
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == tests
    assert "bash scripts/setup" in ci_lines
