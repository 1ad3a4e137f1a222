"""Numbers shared by the analyses: accuracy metrics per probe, summaries of tidy tables, and their words.

A number over seeds is a :class:`Spread` (``{mean, std, n_seeds}``, see :func:`bindscope.core.tidy.spread`);
:class:`Splits` holds spreads per scene group (``train``, ``test``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from pydantic import AliasChoices, Field

from bindscope.core.tidy import spread
from bindscope.core.validation import Schema
from bindscope.estimators.probes import OBJECT


def is_absent(value: Any) -> bool:
    """Whether a summary part is absent (None): such a part is left out of ``summary.json``."""
    return value is None


class Spread(Schema):
    """A number over seeds: mean, standard deviation (None for one seed) and the number of seeds (:func:`spread`).

    Results of format version 2 named the count ``n``: it is read as ``n_seeds``.
    """

    mean: float
    std: float | None
    n_seeds: int = Field(validation_alias=AliasChoices("n_seeds", "n"))


class Splits(Schema):
    """Spreads per scene group, ``{name: Spread}`` each; a group without rows is absent."""

    train: dict[str, Spread] | None = Field(None, exclude_if=is_absent)
    test: dict[str, Spread] | None = Field(None, exclude_if=is_absent)


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


def mean(values: np.ndarray) -> float:
    """The mean as a float."""
    return float(np.mean(values))


# -- words ------------------------------------------------------------------------------------------
def spread_mean(node: Spread | Mapping[str, Any] | None) -> float | None:
    """The mean of a spread (a :class:`Spread` or its ``{mean, std, n}``), None where missing."""
    if isinstance(node, Spread):
        return node.mean
    return node.get("mean") if isinstance(node, Mapping) else None


def format_spread(value: Spread | Mapping[str, Any] | None, digits: int = 3, scale: float = 1.0) -> str:
    """A spread for the terminal: ``mean ± std`` (``mean`` alone for one seed), ``-`` where missing."""
    if isinstance(value, Spread):
        value = value.model_dump()
    if not value:
        return "-"
    std = value.get("std")
    text = f"{scale * value['mean']:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if std is not None else "")


def pct(part: Mapping[str, Spread] | None, metric: str) -> str:
    """``mean ± std`` of one metric's spread in percent, ``-`` where missing."""
    return format_spread((part or {}).get(metric), digits=1, scale=100)


def percent(value: float | None) -> str:
    """A share as a percentage: one decimal, or two significant digits below 0.1% so that a small one is told from
    zero (chance among 160,000: ``0.00063%``; among billions: ``4.2e-08%``)."""
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if value == 0 or abs(value) >= 0.001 else f"{100 * value:.2g}%"
