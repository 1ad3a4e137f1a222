"""The suite's duration guard and fault points: each can fail, and says why.

The guard (tests/helpers/duration_guard.py) runs here on a tiny suite of its own, in a pytest subprocess
with limits small enough that a test of a few milliseconds is over them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
SUITE = {
    "conftest.py": "from duration_guard import pytest_addoption, pytest_runtest_logreport, pytest_sessionfinish, "
    "pytest_sessionstart, pytest_terminal_summary, pytest_runtest_makereport  # noqa: F401\n",
    "test_work.py": "def test_busy():\n    sum(range(3_000_000))\n\ndef test_quick():\n    pass\n",
}
ALLOWED = (
    "import pytest\n\n@pytest.mark.duration_limit(600, reason='it needs the time')\n"
    "def test_allowed():\n    sum(range(3_000_000))\n"
)


def _guarded(
    tmp_path: Path, limit_test: str, limit_suite: str, *, ci: str, factor: str = "1", guard: bool = False
) -> subprocess.CompletedProcess:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\nduration_limit_test = {limit_test}\nduration_limit_suite = {limit_suite}\n"
        f"duration_ci_factor = {factor}\n"
        "markers = duration_limit(seconds, reason): a higher limit\n"
    )
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(HELPERS)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", str(tmp_path)]
    args += ["--duration-guard"] if guard else []
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_in_ci_a_test_over_its_limit_fails_the_run_naming_it(tmp_path: Path) -> None:
    done = _guarded(tmp_path, "0.001", "600", ci="true")
    assert done.returncode == 1, done.stdout
    assert "2 passed" in done.stdout and "test_work.py::test_busy" in done.stdout
    assert "over 0 s:" in done.stdout and "judged" in done.stdout


def test_in_ci_a_suite_over_its_budget_fails_the_run(tmp_path: Path) -> None:
    done = _guarded(tmp_path, "600", "0.001", ci="true")
    assert done.returncode == 1, done.stdout
    assert "over its budget of 0 s" in done.stdout


def test_within_limits_or_outside_ci_the_guard_only_reports(tmp_path: Path) -> None:
    within = _guarded(tmp_path, "600", "600", ci="true")
    assert within.returncode == 0, within.stdout
    assert "2 tests in" in within.stdout and "judged" in within.stdout
    outside = _guarded(tmp_path, "0.001", "0.001", ci="")
    assert outside.returncode == 0, outside.stdout
    assert "reported only (set CI=true or --duration-guard to judge)" in outside.stdout


def test_a_test_may_carry_a_higher_limit_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "test_allowed.py").write_text(ALLOWED)
    done = _guarded(tmp_path, "0.001", "600", ci="true")
    assert done.returncode == 1, done.stdout  # test_busy is still over the limit
    assert "limit 600 s (it needs the time):" in done.stdout and "test_allowed.py::test_allowed" in done.stdout
    assert "over 0 s:" in done.stdout and "over 600 s" not in done.stdout
    (tmp_path / "test_allowed.py").write_text(ALLOWED.replace(", reason='it needs the time'", ""))
    refused = _guarded(tmp_path, "0.001", "600", ci="true")
    assert refused.returncode != 0 and "duration_limit needs seconds and a reason" in refused.stdout + refused.stderr


def test_in_ci_every_limit_is_scaled_by_the_ci_factor(tmp_path: Path) -> None:
    (tmp_path / "test_allowed.py").write_text(ALLOWED.replace("600", "0.0005"))
    scaled = _guarded(tmp_path, "0.0005", "0.0005", ci="true", factor="1000000")  # 500 s a test, the suite
    assert scaled.returncode == 0, scaled.stdout
    assert "every limit is the development machine's times 1e+06" in scaled.stdout
    assert "limit 500 s (it needs the time):" in scaled.stdout
    here = _guarded(tmp_path, "0.0005", "600", ci="", factor="1000000", guard=True)  # the development limits
    assert here.returncode == 1 and "over 0 s:" in here.stdout and "times" not in here.stdout, here.stdout


@pytest.mark.parametrize(("wanted", "status"), [("here:2", -signal.SIGKILL), ("here:2:SIGINT", 130)])
def test_a_kill_point_sends_its_signal_at_the_named_pass(tmp_path: Path, wanted: str, status: int) -> None:
    code = (
        "import sys\n"
        "from bindscope.core.faults import kill_point\n"
        "try:\n"
        "    for i in range(5):\n"
        "        kill_point('here')\n"
        "        print(i, flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    env = {**os.environ, "BINDSCOPE_KILL_AT": wanted}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == status, done.stderr
    assert done.stdout.split() == ["0"]  # the first pass went through, the second was hit
