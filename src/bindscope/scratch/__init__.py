"""Controlled models trained from scratch (docs/method/09-scratch.md): sampler, training, sweeps, export.

The model itself (its config schema, vocabulary, architecture and model folders) is
:mod:`bindscope.embeddings.encoders.scratch`, which the ``scratch:`` backend loads.
"""

from bindscope.embeddings.encoders.scratch.config import ScratchConfig
from bindscope.embeddings.encoders.scratch.folder import load_model
from bindscope.scratch.config import list_configs, load_config
from bindscope.scratch.train import TrainResult, train_model

__all__ = ["ScratchConfig", "TrainResult", "list_configs", "load_config", "load_model", "train_model"]
