"""The main job on the embedded default: ``bindscope demo`` is ``bindscope run`` on a shipped config.

``configs/demo.yaml`` (inside the package): all-MiniLM-L6-v2, which installs offline, on a
subsample of the ``text`` captions that keeps every object in every slot and on the clevr captions,
with its ``+rand`` control and single-object captions, and a small controlled model trained from
scratch; every analysis that applies; the report. ``configs/demo-quick.yaml``: the same, small.
"""

from __future__ import annotations

from pathlib import Path

from bindscope.pipeline.config import RunConfig, load_config

CONFIGS = Path(__file__).parent / "configs"


def demo_config_path(quick: bool = False) -> Path:
    """The shipped demo config (or its quick version)."""
    return CONFIGS / ("demo-quick.yaml" if quick else "demo.yaml")


def demo_config(quick: bool = False) -> RunConfig:
    """The demo's run config."""
    return load_config(demo_config_path(quick))
