"""The settings of ``intervene``: what to edit, with which banks, at which strengths and target seeds."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_ITEMS, MAX_SCENE_COUNT, Device, Seed, Seeds, Settings
from bindscope.estimators.object_banks import BANKS, BankName
from bindscope.estimators.probes import Optimizer

#: The strength the paper's table and the terminal report.
TABLE_K = 1.0


class InterveneSettings(Settings):
    """What to edit, with which banks, at which strengths and target seeds.

    ``edit``: what to edit (``auto``: the dataset's relation or count, else the attribute). ``attribute`` /
    ``noun``: the concepts edited and kept (default: the dataset's noun, and the other concept of a 2-concept
    space, the place and count aside). ``k``: edit strengths (the paper: 1). ``seeds``: seeds of the target draw
    (the paper: 42). ``probe_seed``: the split seed of probes fitted here when none are given. ``sample_cases``: score
    a seeded, stratified sample of this many edits per plan (edit kind x target seed) instead of every edit.
    """

    edit: Literal["auto", "attribute", "noun", "both", "relation", "count"] = Field(
        "auto",
        description="What to edit: auto (default: the relation on a relation dataset, the count on a count dataset, "
        "else the attribute, as the paper), attribute, noun, both (attribute and noun), relation (both objects' "
        "places) or count (one object's count).",
    )
    banks: tuple[BankName, ...] = Field(
        BANKS, description="Object-vector banks, comma-separated: obj-avg, pos-avg, single (default: all three)."
    )
    k: tuple[float, ...] = Field(
        (TABLE_K,),
        description="Edit strengths, comma-separated (default 1, as the paper); e.g. 0,0.5,1,1.5,2 sweeps them and "
        "plots the curve.",
    )
    seeds: Seeds = Field((42,), description="Seeds of the target draw, comma-separated (default 42, as the paper).")
    attribute: str | None = Field(
        None, description="The attribute concept (default: the concept that is not the noun, in a 2-concept space)."
    )
    noun: str | None = Field(None, description="The noun concept (default: the dataset's noun).")
    probe_seed: Seed = Field(0, description="Which seed's probes to use (or to fit); 0.")
    probe_optimizer: Optimizer = Field(
        "fast",
        description="The solver of probes fitted here: fast (default: the paper's trajectory, on which the "
        "interventions agree case for case with the research code), regularised, reference or lbfgs.",
    )
    sample_cases: int | None = Field(
        None,
        ge=1,
        le=MAX_SCENE_COUNT,
        description="Score a seeded sample of this many edits per edit kind and target seed, stratified by shared "
        "value and binding (default: every edit; for very large sets, where rates then carry their 95% interval).",
    )
    cases: bool = Field(True, description="Write every edit's outcome to cases.parquet (on by default).")
    device: Device = Field("cpu", description="Torch device: cpu, cuda, cuda:1 ...")

    @field_validator("k")
    @classmethod
    def _k(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v:
            raise ValueError("give at least one edit strength k")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} edit strengths k, got {len(v)}")
        if not all(math.isfinite(k) for k in v):
            raise ValueError(f"edit strengths must be finite numbers, got {list(v)}")
        if len(set(v)) != len(v):
            raise ValueError(f"edit strengths repeat: {list(v)}")
        return tuple(sorted(float(k) for k in v))

    @field_validator("banks")
    @classmethod
    def _banks(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError(f"give at least one bank of {', '.join(BANKS)}")
        if len(set(v)) != len(v):
            raise ValueError(f"banks repeat: {list(v)}")
        return v

    def edits(self, family: str = "attribution") -> tuple[str, ...]:
        """The edit kinds asked for on a space of ``family`` (``attribution``, ``relation`` or ``count``):
        ``both`` is attribute, then noun; ``auto`` the family's own edit (``attribute`` on an attribution space).
        A relation or count edit on a space without relations or counts is refused."""
        if self.edit == "auto":
            return ("attribute",) if family == "attribution" else (family,)
        if self.edit in ("relation", "count") and family != self.edit:
            yaml = "relations:" if self.edit == "relation" else "counts:"
            choices = "attribute, noun or both" if family == "attribution" else f"{family}, attribute, noun or both"
            raise BindscopeError(
                f"edit {self.edit} needs a {self.edit} dataset ({yaml} in its YAML); this is a {family} dataset: "
                f"edit {choices}"
            )
        return ("attribute", "noun") if self.edit == "both" else (self.edit,)
