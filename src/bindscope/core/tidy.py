"""Tidy results tables: one row per number, the key columns first; spread over seeds.

>>> result_row("probe", "base", "test", "object_acc", 0, 0.5)["control"]
'none'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from bindscope.core.errors import BindscopeError

#: The columns every results table starts with (one row per number).
KEY_COLUMNS = ("analysis", "variant", "control", "group", "metric", "seed", "value")
NO_CONTROL = "none"


def spread(values: Iterable[float] | pd.Series | np.ndarray) -> dict[str, float | int | None]:
    """Mean, standard deviation (ddof 1; None for a single value) and count, the one way spread is named."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray | pd.Series) else values, dtype=float)
    if v.size == 0:
        raise BindscopeError("no values to summarise")
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else None, "n": int(v.size)}


def result_row(
    analysis: str, variant: str, group: str, metric: str, seed: int, value: float, **extra: Any
) -> dict[str, Any]:
    """One row of a results table: the key columns (``control`` none unless given in ``extra``), then ``extra``.

    The one row builder: every analysis makes its rows here (``seed`` as int, ``value`` as float).
    """
    return {
        "analysis": analysis,
        "variant": variant,
        "control": extra.pop("control", NO_CONTROL),
        "group": group,
        "metric": metric,
        "seed": int(seed),
        "value": float(value),
        **extra,
    }


def tidy(rows: list[dict[str, Any]] | pd.DataFrame, extra_columns: Iterable[str] = ()) -> pd.DataFrame:
    """A results table with the key columns first (in order), then ``extra_columns``."""
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    columns = [*KEY_COLUMNS, *extra_columns]
    missing = [c for c in columns if c not in table.columns]
    if missing and len(table):
        raise BindscopeError(f"internal: results rows lack the columns {missing}")
    table = table.reindex(columns=columns)
    if len(table):
        table["seed"] = table["seed"].astype("int64")
        table["value"] = table["value"].astype("float64")
    return table
