"""Assertions shared by the tests that run the real ``bindscope`` command."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
from collections.abc import Iterator


def assert_one_line_error(result: subprocess.CompletedProcess, message: str, status: int = 1) -> None:
    """The command failed with ``status`` and printed one line, ``error: ...``, holding ``message``."""
    assert result.returncode == status, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0], lines[0]


@contextlib.contextmanager
def command_in_process() -> Iterator[None]:
    """The process-wide state a ``bindscope`` command sets, put back after the block: the environment (a command
    sets ``HF_HUB_DISABLE_PROGRESS_BARS`` for the processes it starts; left set, it leaked into every later
    test's subprocesses) and the SIGTERM handler ``main`` installs."""
    environ = dict(os.environ)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, sigterm)
        os.environ.clear()
        os.environ.update(environ)


def run_in_process(*args: object) -> tuple[int, str, str]:
    """``bindscope ARGS`` through :func:`bindscope.cli.main`, in this process: exit status, stdout, stderr
    (:func:`command_in_process` puts the process's state back)."""
    from bindscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with command_in_process(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    return code, out.getvalue(), err.getvalue()
