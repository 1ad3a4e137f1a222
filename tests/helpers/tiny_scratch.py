"""A tiny scratch training config (YAML), shared by the tests that train through the real command."""

from __future__ import annotations


def tiny_scratch_yaml(steps: int = 40, every: int = 20) -> str:
    """A 16-wide one-layer model over a 4 x 5 space, evaluated and checkpointed every ``every`` steps."""
    return f"""\
name: tiny
concepts:
  color: [red, blue, green, yellow]
  shape: [cube, ball, cone, star, ring]
max_objects: 2
d_model: 16
ff: 32
d_out: 8
layers: 1
heads: 2
batch_size: 64
steps: {steps}
eval_every: {every}
checkpoint_every: {every}
eval_scenes: 64
lr: 0.003
"""
