"""Numbers shared by the analyses: accuracy metrics per probe, and summaries of tidy tables."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from bindscope.core.tidy import spread
from bindscope.estimators.probes import OBJECT


def accuracy_metrics(acc: Mapping[str, float]) -> dict[str, float]:
    """Per-probe accuracies as object_acc, concept_acc (mean over concepts) and concept_acc.<name>."""
    concepts = [k for k in acc if k != OBJECT]
    out = {"object_acc": float(acc[OBJECT])}
    if concepts:
        out["concept_acc"] = float(np.mean([acc[c] for c in concepts]))
    out.update({f"concept_acc.{c}": float(acc[c]) for c in concepts})
    return out


def nested(table: pd.DataFrame, keys: list[str], aggregate: Callable[[np.ndarray], Any] = spread) -> dict[Any, Any]:
    """``{key values...: aggregate(values)}`` nested in the order of ``keys``.

    The default aggregate is :func:`spread` over what the keys leave out (e.g. the seeds);
    :func:`mean` gives plain means (for references such as chance).
    """
    out: dict[Any, Any] = {}
    for values, group in table.groupby(keys, sort=False):
        values = values if isinstance(values, tuple) else (values,)
        node = out
        for v in values[:-1]:
            node = node.setdefault(v, {})
        node[values[-1]] = aggregate(group["value"].to_numpy())
    return out


def format_spread(value: Mapping[str, Any] | None, digits: int = 3, scale: float = 1.0) -> str:
    """A spread for the terminal: ``mean ± std`` (``mean`` alone for one seed), ``-`` where missing."""
    if not value:
        return "-"
    std = value.get("std")
    text = f"{scale * value['mean']:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if std is not None else "")


def mean(values: np.ndarray) -> float:
    """The mean as a float."""
    return float(np.mean(values))
