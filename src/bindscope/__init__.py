"""bindscope: measure how embedding models bind concepts."""

from bindscope.version import __version__
from bindscope.errors import BindscopeError
from bindscope.concepts import ConceptSpace, SceneSet
from bindscope.presets import Preset, get_preset, list_presets, load_preset
from bindscope.splits import (
    ObjectSplit,
    SceneSplit,
    load_split,
    object_split,
    object_splits,
    save_split,
    scene_split,
)
from bindscope.datasets import Dataset, build_dataset, load_dataset
from bindscope.store import EmbeddingSet, import_embeddings, load_embeddings

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
