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
#: After them, in every results table as written: the cases a rate is a share of (per seed; null on a number that
#: is not a share of counted cases) and its 95% Wilson interval (null where ``n_cases`` is).
CASE_COLUMNS = ("n_cases", "ci_low", "ci_high")
#: Then what the number was measured on: the dataset (its name and content hash) and the embeddings (the model spec,
#: the modality, the layer: null for the model's output); null for arrays given in memory.
IDENTITY_COLUMNS = ("dataset", "dataset_hash", "model", "modality", "layer")
#: The columns every results table as written starts with, in this order; the analysis's own columns follow.
COMMON_COLUMNS = (*KEY_COLUMNS, *CASE_COLUMNS, *IDENTITY_COLUMNS)
NO_CONTROL = "none"
#: Every value of the ``control`` column: what the embeddings were replaced by to read a number against (the
#: documentation lists exactly these; :func:`tidy` refuses any other).
CONTROLS = {
    NO_CONTROL: "the embeddings themselves",
    "permuted_labels": "the same fit on labels permuted across scenes",
    "rand": "the same model with random weights (the `+rand` embeddings)",
    "bag": "the ideal bag of concepts of the same scenes (each scene as the counts of its concept values)",
}


def spread(values: Iterable[float] | pd.Series | np.ndarray) -> dict[str, float | int | None]:
    """Mean, standard deviation (ddof 1; None for a single value) and the number of seeds (values) it is over:
    ``{"mean", "std", "n_seeds"}``, the one way spread over seeds is named."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray | pd.Series) else values, dtype=float)
    if v.size == 0:
        raise BindscopeError("no values to summarise")
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else None, "n_seeds": int(v.size)}


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
        unknown = sorted(set(table["control"].astype(str)) - set(CONTROLS))
        if unknown:
            raise BindscopeError(f"internal: results rows with unknown controls {unknown}; add them to CONTROLS")
    return table
