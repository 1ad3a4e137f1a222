"""Progress of long work: a tqdm bar in a terminal, a plain line every half minute in a log.

A bar redrawn with carriage returns is what a terminal wants and what a log file (``bindscope run ... | tee
run.log``, a batch job, a notebook's captured stderr) cannot show. :func:`progress_bar` draws tqdm's bar when
stderr is a terminal and otherwise writes one line every :data:`LINE_SECONDS` seconds (the environment variable
``BINDSCOPE_PROGRESS_SECONDS`` changes it): what is done, of how much, the time so far and the time left.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: Seconds between two progress lines where stderr is not a terminal.
LINE_SECONDS = 30.0
LINE_SECONDS_VARIABLE = "BINDSCOPE_PROGRESS_SECONDS"


def minutes(seconds: float) -> str:
    """``42 s``, ``3 min 05 s`` or ``2 h 07 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


class LineProgress:
    """tqdm's interface (``update``, ``set_postfix``, ``n``, ``total``, a context manager) writing a line now and
    then instead of redrawing a bar."""

    def __init__(
        self, total: int | None, *, desc: str, unit: str, initial: int = 0, every: float, file: TextIO
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.every, self.file = every, file
        self.start = self.last = time.monotonic()
        self.initial = initial
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; write a line when the last one is ``every`` seconds old."""
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.file.write(self.line(now) + "\n")
            self.file.flush()

    def line(self, now: float) -> str:
        """``desc: 120/400 steps (30%), 1 min 02 s, about 2 min 25 s left[, postfix]``."""
        elapsed = now - self.start
        done = f"{self.n:,}/{self.total:,} {self.unit}s" if self.total else f"{self.n:,} {self.unit}s"
        parts = [done + (f" ({100 * self.n / self.total:.0f}%)" if self.total else ""), minutes(elapsed)]
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        if self.total and rate > 0 and self.n < self.total:
            parts.append(f"about {minutes((self.total - self.n) / rate)} left")
        return f"{self.desc}: {', '.join(parts)}" + (f", {self.postfix}" if self.postfix else "")

    def set_postfix(self, **values: Any) -> None:
        """Values shown at the end of the next line (as tqdm's postfix)."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        """Nothing to clear: each line stands on its own."""

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoProgress(LineProgress):
    """Counts, and shows nothing (``--quiet``)."""

    def __init__(self, total: int | None, *, desc: str, unit: str, initial: int = 0) -> None:
        super().__init__(total, desc=desc, unit=unit, initial=initial, every=float("inf"), file=sys.stderr)


def line_seconds() -> float:
    """Seconds between progress lines in a log: :data:`LINE_SECONDS` or ``$BINDSCOPE_PROGRESS_SECONDS``."""
    text = os.environ.get(LINE_SECONDS_VARIABLE, "")
    try:
        return max(0.0, float(text)) if text else LINE_SECONDS
    except ValueError:
        return LINE_SECONDS


def progress_bar(
    total: int | None, *, desc: str, unit: str, enabled: bool = True, initial: int = 0, file: TextIO | None = None
) -> Any:
    """A progress display for ``total`` units of work: tqdm where ``file`` (default stderr) is a terminal, a
    :class:`LineProgress` elsewhere, a :class:`NoProgress` when not ``enabled``."""
    stream = sys.stderr if file is None else file
    if not enabled:
        return NoProgress(total, desc=desc, unit=unit, initial=initial)
    if getattr(stream, "isatty", lambda: False)():
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, file=stream)
    return LineProgress(total, desc=desc, unit=unit, initial=initial, every=line_seconds(), file=stream)


@contextmanager
def progress_callback(desc: str, unit: str, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback (what analyses and runs report through) showing a
    :func:`progress_bar` on stderr; nothing when not ``enabled``."""
    with progress_bar(None, desc=desc, unit=unit, enabled=enabled) as bar:

        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        yield advance
