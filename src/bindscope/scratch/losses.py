"""The training losses of docs/method/09-scratch.md: soft cross-entropy of each scene's scores against its labels."""

from __future__ import annotations

import torch


def soft_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over scenes of the cross-entropy against ``labels / labels.sum(1)``."""
    target = labels / labels.sum(1, keepdim=True)
    return -(target * torch.log_softmax(logits, dim=1)).sum(1).mean()


def active_soft_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """:func:`soft_cross_entropy` over the scenes with at least one positive label only (0 if none has one):
    with sampled queries a scene may have none, and the research code leaves such scenes out."""
    active = labels.sum(1) > 0
    if not bool(active.any()):
        return logits.new_zeros(())
    return soft_cross_entropy(logits[active], labels[active])
