"""bindscope: measure how embedding models bind concepts."""

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
