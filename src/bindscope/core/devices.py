"""Torch devices named on the command line."""

from __future__ import annotations

from bindscope.core.errors import BindscopeError


def check_device(device: str) -> None:
    """A torch device string that exists here, or a clear error (``cpu``, the default everywhere, is checked
    without importing torch: a command that computes on numpy arrays never imports it)."""
    if device == "cpu":
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise BindscopeError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BindscopeError(f"device {device!r}: no CUDA device is available on this machine; use --device cpu")
