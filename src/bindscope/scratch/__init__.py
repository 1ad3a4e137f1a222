"""Controlled models trained from scratch (docs/method.md §9): sampler, model, training, sweeps, export."""

from bindscope.scratch.config import ScratchConfig, list_configs, load_config
from bindscope.scratch.train import TrainResult, load_model, train_model

__all__ = ["ScratchConfig", "TrainResult", "list_configs", "load_config", "load_model", "train_model"]
