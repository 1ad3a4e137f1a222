"""The main job on the embedded default: ``bindscope demo`` is ``bindscope run`` on a shipped config.

``demo`` (``configs/demo.yaml`` inside the package): all-MiniLM-L6-v2, which installs offline, on a
subsample of the ``text`` captions that keeps every object in every slot and on the clevr captions,
with its ``+rand`` control and single-object captions, and a small controlled model trained from
scratch; every analysis that applies; the report. ``demo-quick``: the same, small.
"""

from __future__ import annotations

from pathlib import Path

from bindscope.pipeline.config import RunConfig, config_path, load_config


def demo_name(quick: bool = False) -> str:
    return "demo-quick" if quick else "demo"


def demo_config_path(quick: bool = False) -> Path:
    """The shipped demo config (or its quick version)."""
    return config_path(demo_name(quick))


def demo_config(quick: bool = False) -> RunConfig:
    """The demo's run config."""
    return load_config(demo_name(quick))
