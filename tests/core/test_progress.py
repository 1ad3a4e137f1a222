"""Progress displays: tqdm in a terminal, plain lines in a log, nothing when quiet."""

from __future__ import annotations

import io

import pytest

from bindscope.core.progress import LineProgress, NoProgress, minutes, progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar() -> None:
    from tqdm.auto import tqdm

    screen = Terminal()
    with progress_bar(10, desc="train", unit="step", file=screen) as bar:
        assert isinstance(bar, tqdm)
        bar.update(10)
    assert "train: 100%" in screen.getvalue() and "\r" in screen.getvalue()


def test_a_log_gets_a_line_now_and_then_with_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    monkeypatch.setenv("BINDSCOPE_PROGRESS_SECONDS", "0")
    with progress_bar(400, desc="probe", unit="unit", file=log) as bar:
        assert isinstance(bar, LineProgress)
        bar.start -= 60  # a minute in
        bar.update(100)
        bar.set_postfix(loss="0.512")
        bar.update(20)
    first, second = log.getvalue().splitlines()
    assert first.startswith("probe: 100/400 units (25%), 1 min 00 s, about 3 min 0") and "\r" not in first
    assert second.startswith("probe: 120/400 units (30%), 1 min 00 s") and second.endswith(", loss=0.512")


def test_lines_wait_for_their_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    monkeypatch.delenv("BINDSCOPE_PROGRESS_SECONDS", raising=False)
    with progress_bar(5, desc="embed", unit="text", file=log) as bar:
        bar.update(5)  # a short step: done before the first line is due (30 s)
    assert log.getvalue() == "" and bar.n == 5
    monkeypatch.setenv("BINDSCOPE_PROGRESS_SECONDS", "not a number")  # falls back to the default
    with progress_bar(None, desc="probe", unit="unit", file=log) as bar:
        bar.update(3)
    assert log.getvalue() == ""


def test_quiet_shows_nothing_even_in_a_terminal() -> None:
    screen = Terminal()
    bar = progress_bar(10, desc="train", unit="step", enabled=False, file=screen)
    assert isinstance(bar, NoProgress)
    bar.update(10)
    assert screen.getvalue() == "" and bar.n == 10


@pytest.mark.parametrize(("seconds", "text"), [(4.2, "4 s"), (185, "3 min 05 s"), (7620, "2 h 07 min"), (-1, "0 s")])
def test_minutes(seconds: float, text: str) -> None:
    assert minutes(seconds) == text
