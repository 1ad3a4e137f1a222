"""bindscope: measure how embedding models bind concepts.

The package is layered in the order of the data flow; a layer imports only the ones below it:
``core`` <- ``space`` <- ``data`` <- ``embeddings`` <- ``estimators`` <- ``analyses`` <- ``scratch``
<- ``pipeline`` <- ``cli``. The most used names are re-exported here.
"""

from bindscope.core.errors import BindscopeError
from bindscope.core.version import __version__
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
]
