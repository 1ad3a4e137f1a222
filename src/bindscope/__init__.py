"""bindscope: measure how embedding models bind concepts.

``import bindscope as bs`` gives the Python API: ``bs.build_dataset``, ``bs.embed``, ``bs.analyze``,
``bs.load_result``, ``bs.run`` and ``bs.load_run`` (:mod:`bindscope.api`), and the most used data types
(datasets, scenes, splits, embedding folders). Each name is imported on first use, so ``import bindscope``
loads no numerical or model library.

The package is layered in the order of the data flow; a layer imports only the ones below it:
``core`` <- ``space`` <- ``data`` <- ``embeddings`` <- ``estimators`` <- ``analyses`` <- ``scratch``
<- ``pipeline`` <- ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bindscope.core.errors import BindscopeError
from bindscope.core.lazy import lazy_attributes
from bindscope.core.version import __version__

#: Where each top-level name is defined: imported on first use (PEP 562).
_LAZY: dict[str, str] = {
    "ConceptSpace": "bindscope.space.concepts",
    "SceneSet": "bindscope.space.concepts",
    "Preset": "bindscope.data.presets",
    "get_preset": "bindscope.data.presets",
    "list_presets": "bindscope.data.presets",
    "load_preset": "bindscope.data.presets",
    "SceneSplit": "bindscope.space.splits",
    "ObjectSplit": "bindscope.space.splits",
    "scene_split": "bindscope.space.splits",
    "object_split": "bindscope.space.splits",
    "object_splits": "bindscope.space.splits",
    "save_split": "bindscope.space.splits",
    "load_split": "bindscope.space.splits",
    "Dataset": "bindscope.data.datasets",
    "build_dataset": "bindscope.data.datasets",
    "load_dataset": "bindscope.data.datasets",
    "EmbeddingSet": "bindscope.embeddings.store",
    "import_embeddings": "bindscope.embeddings.store",
    "load_embeddings": "bindscope.embeddings.store",
    "embed": "bindscope.api",
    "analyze": "bindscope.api",
    "LoadedResult": "bindscope.analyses.results",
    "load_result": "bindscope.analyses.results",
    "run": "bindscope.api",
    "Run": "bindscope.api",
    "load_run": "bindscope.api",
}

if TYPE_CHECKING:  # what type checkers and editors read; at run time __getattr__ imports each name when first used
    from bindscope.analyses.results import LoadedResult, load_result
    from bindscope.api import Run, analyze, embed, load_run, run
    from bindscope.data.datasets import Dataset, build_dataset, load_dataset
    from bindscope.data.presets import Preset, get_preset, list_presets, load_preset
    from bindscope.embeddings.store import EmbeddingSet, import_embeddings, load_embeddings
    from bindscope.space.concepts import ConceptSpace, SceneSet
    from bindscope.space.splits import (
        ObjectSplit,
        SceneSplit,
        load_split,
        object_split,
        object_splits,
        save_split,
        scene_split,
    )
else:  # hidden from type checkers, which would otherwise take any misspelt name for one of these
    __getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "__version__",
    "BindscopeError",
    "ConceptSpace",
    "SceneSet",
    "Preset",
    "get_preset",
    "list_presets",
    "load_preset",
    "SceneSplit",
    "ObjectSplit",
    "scene_split",
    "object_split",
    "object_splits",
    "save_split",
    "load_split",
    "Dataset",
    "build_dataset",
    "load_dataset",
    "EmbeddingSet",
    "import_embeddings",
    "load_embeddings",
    "embed",
    "analyze",
    "LoadedResult",
    "load_result",
    "run",
    "Run",
    "load_run",
]
