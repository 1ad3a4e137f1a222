"""Old module names (bindscope 0.1's flat layout) as deprecated aliases of the layered package.

``import bindscope.suite`` and the like keep working for one release with a DeprecationWarning
naming the new module; they will be removed in bindscope 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

#: old module -> new module (a prefix match: ``bindscope.render.flat2d`` -> ``bindscope.data.render.flat2d``).
MOVED = {
    "bindscope.errors": "bindscope.core.errors",
    "bindscope.io": "bindscope.core.io",
    "bindscope.devices": "bindscope.core.devices",
    "bindscope.version": "bindscope.core.version",
    "bindscope.concepts": "bindscope.space.concepts",
    "bindscope.captions": "bindscope.space.captions",
    "bindscope.splits": "bindscope.space.splits",
    "bindscope.planted": "bindscope.space.planted",
    "bindscope.presets": "bindscope.data.presets",
    "bindscope.datasets": "bindscope.data.datasets",
    "bindscope.pug": "bindscope.data.pug",
    "bindscope.render.check": "bindscope.data.check",
    "bindscope.render.preview": "bindscope.data.preview",
    "bindscope.render": "bindscope.data.render",
    "bindscope.encoders.scratch": "bindscope.scratch.encoder",
    "bindscope.encoders": "bindscope.embeddings.encoders",
    "bindscope.embed": "bindscope.embeddings.embed",
    "bindscope.store": "bindscope.embeddings.store",
    "bindscope.probes": "bindscope.analyses.probes",
    "bindscope.decomposition": "bindscope.analyses.decomposition",
    "bindscope.approximators": "bindscope.analyses.complexity.approximators",
    "bindscope.complexity": "bindscope.analyses.complexity.sweep",
    "bindscope.runs": "bindscope.analyses.results",
    "bindscope.demo": "bindscope.pipeline.demo",
}
#: old modules whose contents now live in several modules: one alias module holds them all.
MERGED = {
    "bindscope.suite": ("bindscope.analyses.probe", "bindscope.analyses.decompose", "bindscope.analyses.metrics"),
    "bindscope.approxfit": ("bindscope.analyses.complexity.approxfit", "bindscope.analyses.complexity.estimator"),
    "bindscope.plots": ("bindscope.analyses.complexity.plot", "bindscope.scratch.plot", "bindscope.core.figures"),
}


def new_name(old: str) -> str | None:
    """The module an old name moved to, if it is an old name."""
    for prefix in sorted(MOVED, key=len, reverse=True):
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str) -> None:
        self.old = old

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.old in MERGED:
            targets = MERGED[self.old]
            merged = types.ModuleType(self.old, f"Deprecated: see {', '.join(targets)}.")
            for target in targets:
                module = importlib.import_module(target)
                merged.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
            new = " / ".join(targets)
            module = merged
        else:
            new = new_name(self.old) or self.old
            module = importlib.import_module(new)
        warnings.warn(
            f"{self.old} is deprecated and will be removed in bindscope 0.3; import {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """The aliased module is already executed."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MERGED or new_name(fullname) is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname))
        return None


def install() -> None:
    """Let the old module names resolve (once per interpreter)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
