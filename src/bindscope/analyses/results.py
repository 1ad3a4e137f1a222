"""Analysis output folders: summary.json, tidy results (parquet + csv), manifest, extra files.

A folder appears only once complete, and a run never writes into a folder holding another one.
"""

from __future__ import annotations

import datetime as _dt
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope.core.io import staged_dir, write_json
from bindscope.core.version import __version__


def versions() -> dict[str, str]:
    """Versions of what produced a result."""
    import torch

    return {
        "bindscope": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "torch": torch.__version__,
    }


def write_run(
    out: Path,
    *,
    summary: dict[str, Any],
    results: pd.DataFrame,
    manifest: dict[str, Any],
    extra: Callable[[Path], None] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write an analysis folder atomically; ``extra(stage)`` may add files (probes, per-scene tables)."""
    with staged_dir(out, overwrite=overwrite) as stage:
        write_json(stage / "summary.json", summary)
        results.to_parquet(stage / "results.parquet", index=False)
        results.to_csv(stage / "results.csv", index=False)
        if extra is not None:
            extra(stage)
        full = {
            **manifest,
            "versions": versions(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        write_json(stage / "manifest.json", full)
    return out
