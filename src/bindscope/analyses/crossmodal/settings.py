"""The settings of ``crossmodal``: the concepts playing attribute and noun, the bridge and its splits, a subsample."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bindscope.core.validation import MAX_SCENE_COUNT, MAX_STEPS, Device, Seed, Seeds, Settings
from bindscope.space.splits import DEFAULT_SEEDS, check_fractions

BRIDGE_FRACTIONS = (0.3, 0.5, 0.7, 0.9)


class CrossmodalSettings(Settings):
    """Which concepts play attribute and noun, the bridge and its object-level splits, a subsample.

    The bridge is fitted per fraction and seed on the train_only scenes of an object-level split
    (``validation_fraction`` of them held out to choose its regularisation) and scored on test_only.
    """

    attribute: str | None = Field(
        None, description="The attribute concept (default: the concept that is not the noun, in a 2-concept space)."
    )
    noun: str | None = Field(None, description="The noun concept (default: the dataset's noun).")
    bridge: Literal["ridge", "contrastive", "none"] = Field(
        "ridge",
        description="The linear bridge text -> image fitted on seen objects: ridge (closed form, default), "
        "contrastive (InfoNCE, started from the ridge map) or none.",
    )
    fractions: tuple[float, ...] = Field(
        BRIDGE_FRACTIONS,
        description="Fractions of objects the bridge is fitted on, comma-separated (0.3,0.5,0.7,0.9).",
    )
    seeds: Seeds = Field(
        DEFAULT_SEEDS, description="Seed ids, comma-separated (splits and initialisations); default 0,1,2."
    )
    validation_fraction: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="Share of the bridge's training scenes held out to choose its regularisation (0.1).",
    )
    contrastive_steps: int = Field(300, ge=1, le=MAX_STEPS, description="Adam steps of the contrastive bridge (300).")
    max_scenes: int | None = Field(
        None,
        ge=2,
        le=MAX_SCENE_COUNT,
        description="Score a seeded subsample of this many 2-object scenes (default: all of them).",
    )
    retrieval_queries: int | None = Field(
        None,
        ge=1,
        le=MAX_SCENE_COUNT,
        description="Estimate retrieval from this many seeded queries per scoring, each ranked exactly against every "
        "caption / image (default: every scene asks; for very large sets).",
    )
    subsample_seed: Seed = Field(
        0, description="The seed of --max-scenes' subsample and --retrieval-queries' sample (0)."
    )
    cases: bool = Field(True, description="Write per-scene scores to cases.parquet (on by default).")
    device: Device = Field("cpu", description="Torch device: cpu, cuda, cuda:1 ...")

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(sorted(check_fractions(v)))
