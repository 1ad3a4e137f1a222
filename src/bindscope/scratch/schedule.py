"""The learning-rate schedule of every model trained from scratch: linear warm-up, then linear decay (or constant)."""

from __future__ import annotations


def scheduled_lr(lr: float, step: int, steps: int, warm: int, *, constant: bool = False) -> float:
    """The rate of step ``step`` (0-based) of ``steps``: rising linearly over ``warm`` steps to ``lr``, then
    decaying linearly to 0 at the last step (``constant``: staying at ``lr``)."""
    if step < warm:
        return lr * (step + 1) / warm
    if constant:
        return lr
    return lr * max(0.0, (steps - step) / max(1, steps - warm))
