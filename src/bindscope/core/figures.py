"""Writing matplotlib figures: PNG files written atomically, no display needed."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from bindscope.core.io import atomic_file

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: it is slow to import).

    Where its config folder cannot be made (``MPLCONFIGDIR`` or HOME read-only, or below a file), matplotlib uses a
    temporary one, as it should, but says so in two warnings at import: a command that works prints nothing of it.
    """
    import logging

    said = logging.getLogger("matplotlib")
    level = said.level
    said.setLevel(logging.ERROR)
    try:
        import matplotlib
    finally:
        said.setLevel(level)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write a figure as PNG atomically and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    pyplot().close(fig)
    return path
