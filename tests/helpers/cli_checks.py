"""Assertions shared by the tests that run the real ``bindscope`` command."""

from __future__ import annotations

import subprocess


def assert_one_line_error(result: subprocess.CompletedProcess, message: str, status: int = 1) -> None:
    """The command failed with ``status`` and printed one line, ``error: ...``, holding ``message``."""
    assert result.returncode == status, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0], lines[0]
