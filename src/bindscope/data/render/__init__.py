"""Renderers: pure functions from scene arrays to RGB images, found by name.

``flat2d`` draws flat shapes on a light gray canvas; ``raycast3d`` ray-casts CLEVR-like cubes,
cylinders and spheres on a floor. Each module provides ``SHAPES``, ``DRAWN_PLACES``, ``render``,
``slot_centers``, ``identify`` and ``read_back`` (see :mod:`bindscope.data.render.base`).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from bindscope.core.errors import BindscopeError
from bindscope.data.render.base import PALETTE, SceneBatch

RENDERERS = {"flat2d": "bindscope.data.render.flat2d", "raycast3d": "bindscope.data.render.raycast3d"}


def get_renderer(name: str | None) -> ModuleType:
    """The renderer module registered under ``name`` (None, no renderer, is refused like an unknown name)."""
    if name not in RENDERERS:
        raise BindscopeError(f"unknown renderer {name!r}; choose one of {', '.join(RENDERERS)}")
    if importlib.util.find_spec(RENDERERS[name]) is None:
        raise BindscopeError(f"renderer {name!r} is not in this version of bindscope; build with --no-images")
    return importlib.import_module(RENDERERS[name])


__all__ = ["PALETTE", "RENDERERS", "SceneBatch", "get_renderer"]
