"""A pytest plugin that keeps the suite fast: it reads pytest's own per-test durations and fails the run
when one test, or the whole suite, is over its budget.

A test's time is the sum of its setup, call and teardown phases (what ``--durations`` lists one by one),
so the first user of a slow shared fixture is charged for building it. The limits are ini options
(``duration_limit_test``, ``duration_limit_suite``, in seconds); a test may carry a higher limit of its own
only with a reason, ``@pytest.mark.duration_limit(SECONDS, reason="...")``, and the report lists each such
test with its reason and time. The guard judges only where the run asks
for it (``CI=true`` in the environment, or ``--duration-guard``); elsewhere it just reports, because a
developer's run of one folder beside other work is no measure of the suite. Under pytest-xdist the
controller receives every worker's reports, so the guard runs there, once.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest

_TEST_SECONDS: defaultdict[str, float] = defaultdict(float)
_OWN_LIMITS: dict[str, tuple[float, str]] = {}
_STARTED: list[float] = []
MARK = "duration_limit"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("duration guard")
    group.addoption(
        "--duration-guard",
        action="store_true",
        help="fail the run when a test or the whole suite is over its budget (on by default where CI=true)",
    )
    parser.addini("duration_limit_test", "most seconds one test may take (setup + call + teardown)", default="20")
    parser.addini("duration_limit_suite", "most seconds the whole run may take", default="600")
    parser.addini("duration_ci_factor", "where CI=true, every limit is multiplied by this", default="1")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """Carry a test's own limit on its reports (the xdist controller sees reports, not items)."""
    report = yield
    mark = item.get_closest_marker(MARK)
    if mark is not None and call.when == "setup":
        reason = mark.kwargs.get("reason", "")
        if not mark.args or not reason:
            raise pytest.UsageError(f"{item.nodeid}: {MARK} needs seconds and a reason")
        report.user_properties.append((MARK, (float(mark.args[0]), reason)))
    return report


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _judging(config: pytest.Config) -> bool:
    return bool(config.getoption("--duration-guard")) or _in_ci()


def _scale(config: pytest.Config) -> float:
    """How much more time CI's machine is given than the development machine (1 outside CI)."""
    return float(config.getini("duration_ci_factor")) if _in_ci() else 1.0


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    _STARTED.append(time.perf_counter())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TEST_SECONDS[report.nodeid] += report.duration
    for name, value in report.user_properties:
        if name == MARK:
            _OWN_LIMITS[report.nodeid] = (float(value[0]), str(value[1]))
    log = os.environ.get("BINDSCOPE_DURATION_LOG")  # each phase as it ends, for a run watched while it goes
    if log and not os.environ.get("PYTEST_XDIST_WORKER"):  # written once, by the controller
        with open(log, "a") as fh:
            fh.write(f"{report.duration:.2f}\t{report.when}\t{report.outcome}\t{report.nodeid}\n")


def _limit_of(nodeid: str, test_limit: float, scale: float) -> float:
    own = _OWN_LIMITS.get(nodeid)
    return own[0] * scale if own else test_limit


def over_budget(config: pytest.Config) -> tuple[list[tuple[str, float]], float, float, float]:
    """The tests over their limit (slowest first), the suite's wall time and both limits."""
    scale = _scale(config)
    test_limit = float(config.getini("duration_limit_test")) * scale
    suite_limit = float(config.getini("duration_limit_suite")) * scale
    slow = sorted(
        ((n, s) for n, s in _TEST_SECONDS.items() if s > _limit_of(n, test_limit, scale)), key=lambda t: -t[1]
    )
    wall = time.perf_counter() - _STARTED[0] if _STARTED else 0.0
    return slow, wall, test_limit, suite_limit


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config) or not _judging(config) or not _TEST_SECONDS:
        return
    slow, wall, _, suite_limit = over_budget(config)
    if (slow or wall > suite_limit) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    if _is_worker(config) or not _TEST_SECONDS:
        return
    slow, wall, test_limit, suite_limit = over_budget(config)
    slowest = max(_TEST_SECONDS.items(), key=lambda t: t[1])
    verdict = "judged" if _judging(config) else "reported only (set CI=true or --duration-guard to judge)"
    tr = terminalreporter
    tr.section("duration guard")
    tr.write_line(
        f"{len(_TEST_SECONDS)} tests in {wall:.0f} s (budget {suite_limit:.0f} s); slowest {slowest[1]:.1f} s "
        f"({slowest[0]}; limit {test_limit:.0f} s per test); {verdict}"
    )
    scale = _scale(config)
    if scale != 1.0:
        tr.write_line(f"CI=true: every limit is the development machine's times {scale:g} (duration_ci_factor)")
    for nodeid, (limit, reason) in sorted(_OWN_LIMITS.items()):
        seconds = _TEST_SECONDS.get(nodeid, 0.0)
        tr.write_line(f"limit {limit * scale:.0f} s ({reason}): {seconds:.1f} s {nodeid}")
    for nodeid, seconds in slow:
        limit = _limit_of(nodeid, test_limit, scale)
        tr.write_line(f"over {limit:.0f} s: {seconds:.1f} s {nodeid}", red=True)
    if wall > suite_limit:
        tr.write_line(f"the suite took {wall:.0f} s, over its budget of {suite_limit:.0f} s", red=True)
