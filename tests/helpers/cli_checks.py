"""Assertions shared by the tests that run the real ``bindscope`` command."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess


def assert_one_line_error(result: subprocess.CompletedProcess, message: str, status: int = 1) -> None:
    """The command failed with ``status`` and printed one line, ``error: ...``, holding ``message``."""
    assert result.returncode == status, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0], lines[0]


def run_in_process(*args: object) -> tuple[int, str, str]:
    """``bindscope ARGS`` through :func:`bindscope.cli.main`, in this process: exit status, stdout, stderr
    (``main`` installs a SIGTERM handler; the test's is restored)."""
    from bindscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    sigterm = signal.getsignal(signal.SIGTERM)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    return code, out.getvalue(), err.getvalue()
