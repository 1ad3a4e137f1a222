"""The training config of a controlled model (docs/method/09-scratch.md): the schema its ``config.json`` records.

A config names the concept space (a preset, a preset YAML file or inline concepts), the
object-level split (train fraction of the objects, a validation slice carved from them, seed),
the two encoders' shape, the training schedule and the evaluation sets. The built-in configs and
reading them from YAML belong to training (the ``bindscope scratch`` commands).

Seven fields switch between bindscope's choices (their defaults) and the published research
code's (docs/method/10-differences.md): ``final_norm``, ``init``, ``queries`` (with ``max_object_queries``
and ``max_concept_queries``), ``batch_eval`` (with ``batch_eval_batches``), ``validation_fraction``,
``selection`` and ``heldout_negatives``. The built-in ``paper`` config takes the research code's
legitimate choices; ``parity: paper`` (``--parity paper``) takes all of them, its mistakes included,
and the run's summary says which numbers are then not comparable.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from bindscope.core.validation import MAX_BATCH, MAX_STEPS, Schema, Seed
from bindscope.data.presets import Preset, load_preset, preset_from_dict


class ScratchConfig(Schema):
    """Everything that defines one training run; every field is validated, unknown keys are errors."""

    model_config = ConfigDict(use_attribute_docstrings=True)  # frozen, extra="forbid": Schema

    parity: Literal["bindscope", "paper"] = "bindscope"
    """``paper``: the published research code's choice for every field of :data:`PAPER_CHOICES` not
    given (fields given explicitly win): its encoders and query sampling, its batch metric beside the
    strict one, no validation objects, selection on the test objects (optimistic) and held-out objects
    as swap negatives (a leak). Numbers from such a run are not comparable with bindscope's; its
    summary lists why (``not_comparable``)."""
    name: str = Field(
        default="custom",
        description="A label for the run, recorded in the model folder and its summary (e.g. `cpu-small`).",
    )
    # concept space: a preset name / preset YAML file, or inline concepts (exactly one)
    space: str | None = Field(
        default=None,
        description="The concept space: a preset name (e.g. `text`) or a preset YAML file; give this or `concepts`.",
    )
    concepts: dict[str, list[str]] | None = Field(
        default=None,
        description="The concept space inline, `{concept: [values]}` (objects are every combination); give this or "
        "`space`.",
    )
    # data
    max_objects: int = Field(
        default=3,
        ge=1,
        le=16,
        description="Kmax: a training scene holds 1 to this many objects (uniformly); 1-16, at least `eval_objects`.",
    )
    fraction: float = Field(
        default=0.8,
        gt=0.0,
        lt=1.0,
        description="Share of the objects trained on (the coverage): the first floor(fraction x objects) of the "
        "seed's object order; in (0, 1).",
    )
    validation_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Share of the held-out objects (never trained on) kept for checkpoint selection, at least one
    when positive; the rest are test objects. 0: no validation objects (the last step is kept, or the
    best on test with ``selection: test``)."""
    seed: Seed = Field(
        default=0,
        description="Seed of the object split, the initialisation, the training batches and the evaluation scenes; "
        "a whole number, 0 to 2^32 - 1.",
    )
    # model (both encoders); the upper bounds keep a typo from allocating a huge model
    d_model: int = Field(
        default=256, ge=8, le=16_384, description="Width of each transformer encoder; a multiple of `heads`; 8-16,384."
    )
    layers: int = Field(default=6, ge=1, le=256, description="Transformer blocks per encoder; 1-256.")
    heads: int = Field(default=4, ge=1, le=256, description="Attention heads per block; must divide `d_model`; 1-256.")
    ff: int = Field(default=2048, ge=8, le=65_536, description="Width of each block's feed-forward layer; 8-65,536.")
    d_out: int = Field(
        default=64,
        ge=2,
        le=16_384,
        description="Width of the embeddings: the linear head on the EOS state of both encoders; 2-16,384.",
    )
    embedding_std: float = Field(
        default=0.02,
        gt=0.0,
        description="Standard deviation of the token embeddings' N(0, std²) initialisation (`init: bindscope`); > 0.",
    )
    ff_activation: Literal["gelu", "swiglu"] = "gelu"
    """The feed-forward layers' activation: ``gelu`` (the paper's) or ``swiglu``, a gated layer
    ``W2 (silu(W_g x) * (W_v x))`` of width ``ff`` (its input projection is ``2 * ff`` wide). A search
    variant, off in every built-in config."""
    shared_encoder: bool = False
    """One encoder for scenes and queries (a siamese model; an object query is the one-object scene)
    instead of two of the same shape (docs/method/09-scratch.md, the paper's). A search variant, off in every
    built-in config."""
    # optimisation
    steps: int = Field(
        default=50_000, ge=1, le=MAX_STEPS, description="Training steps, a fresh batch each; 1-1,000,000."
    )
    batch_size: int = Field(default=512, ge=2, le=65_536, description="Scenes per training step; 2-65,536.")
    lr: float = Field(
        default=3e-5, gt=0.0, description="Peak AdamW learning rate, reached at the end of the warm-up; > 0."
    )
    weight_decay: float = Field(
        default=0.1, ge=0.0, description="AdamW weight decay, on every parameter but the temperature tau; >= 0."
    )
    warmup_fraction: float = Field(
        default=0.1,
        ge=0.0,
        lt=1.0,
        description="Share of the steps over which the learning rate rises linearly to `lr`; in [0, 1).",
    )
    schedule: Literal["linear", "constant"] = "linear"
    """The learning rate after the warm-up: ``linear`` decay to 0 at the last step (the paper's), or
    ``constant`` at ``lr``."""
    concept_weight: float = Field(default=1.0, ge=0.0)
    """Weight of the concept task's loss next to the object task's (weight 1): 1 is the paper's sum;
    0 trains on objects only (the concept queries are still evaluated)."""
    tau_init: float = Field(
        default=1.15,
        description="Initial value of the learnable temperature tau; scores are min(exp(tau), `max_logit_scale`) x "
        "cosine.",
    )
    max_logit_scale: float = Field(
        default=10.0, gt=0.0, description="Cap on the logit scale exp(tau) that multiplies the cosine scores; > 0."
    )
    # evaluation and checkpoints
    eval_every: int = Field(
        default=2_500,
        ge=1,
        le=MAX_STEPS,
        description="Steps between evaluations (and at the last step); selection picks among these steps.",
    )
    eval_scenes: int = Field(
        default=2_048,
        ge=1,
        le=1_000_000,
        description="At most this many fixed, seeded scenes in each evaluation set (test, validation, train).",
    )
    eval_objects: int = Field(
        default=2, ge=1, le=16, description="Objects per evaluation scene; 1-16, at most `max_objects`."
    )
    checkpoint_every: int = Field(
        default=2_500,
        ge=1,
        le=MAX_STEPS,
        description="Steps between checkpoints, from which an interrupted run resumes exactly.",
    )
    # research-code parity switches (docs/method/10-differences.md); each default is bindscope's choice
    final_norm: bool = True
    """A LayerNorm after the last transformer block of both encoders (the research code has none)."""
    init: Literal["bindscope", "xavier"] = "bindscope"
    """``bindscope``: token embeddings N(0, ``embedding_std``²), PyTorch defaults elsewhere.
    ``xavier``: the research code's ``xavier_uniform_`` on every parameter with two or more
    dimensions, token embeddings included (``embedding_std`` is then unused); 1-D parameters keep
    PyTorch's defaults."""
    queries: Literal["all", "sampled"] = "all"
    """Training queries per batch. ``all``: every concept value, and every present object plus the
    swaps. ``sampled`` (the research code): the concept values present in the batch (at most
    ``max_concept_queries``), a random subset of at most ``max_object_queries`` present objects
    plus the swaps, and each task's loss averaged over the scenes with at least one positive."""
    max_object_queries: int = Field(default=64, ge=1, le=MAX_BATCH)
    """Present objects kept as queries per batch with ``queries: sampled`` and in the batch-query evaluation."""
    max_concept_queries: int = Field(default=64, ge=1, le=MAX_BATCH)
    """Present concept values kept as queries per batch with ``queries: sampled`` and in the batch-query
    evaluation."""
    batch_eval: bool = False
    """Also report the research code's batch-query evaluation (``<split>_batch_object_acc`` ...): at
    every evaluation, ``batch_eval_batches`` fresh batches of ``batch_size`` scenes of 1..``max_objects``
    objects per split, each scene scored only against its batch's sampled queries. The strict
    evaluation (fixed scenes against all objects) is always reported and stays the one selected on."""
    batch_eval_batches: int = Field(default=10, ge=1, le=MAX_STEPS)
    """Batches per split in the batch-query evaluation."""
    selection: Literal["validation", "test"] = "validation"
    """Which weights a run keeps: those with the best object accuracy on the ``validation`` objects
    (bindscope's), or on the ``test`` objects (the research code's: the reported held-out numbers are
    then optimistic, and every output that uses them says so)."""
    heldout_negatives: bool = False
    """Let binding swaps produce any object, held-out (validation and test) ones included, so held-out
    objects can be trained on as negatives. This reproduces a leak of the research code (a mistake,
    not a choice): it is off in every built-in config, ``paper`` included; turn it on only to measure
    the leak's effect."""

    @model_validator(mode="before")
    @classmethod
    def _paper_choices(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("parity") == "paper":
            return {**PAPER_CHOICES, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ScratchConfig:
        if (self.space is None) == (self.concepts is None):
            raise ValueError("give exactly one of 'space' (a preset name or YAML file) and 'concepts'")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.eval_objects > self.max_objects:
            raise ValueError(f"eval_objects ({self.eval_objects}) cannot exceed max_objects ({self.max_objects})")
        return self

    def not_comparable(self) -> list[str]:
        """Why this run's held-out numbers are not comparable with bindscope's defaults (empty: they are)."""
        out = []
        if self.selection == "test":
            out.append("selection: test: the weights were kept for their held-out score, which is optimistic")
        if self.heldout_negatives:
            out.append("heldout_negatives: held-out objects were trained on as swap negatives, so they are not unseen")
        if self.batch_eval:
            out.append(
                "batch_eval: the batch metric scores each scene against its batch's sampled queries only; "
                "read it beside its bag-of-concepts floor"
            )
        return out

    def preset(self) -> Preset:
        """The concept space (and caption template) as a K = 2 preset of all ordered pairs."""
        if self.space is not None:
            base = load_preset(self.space).to_dict()
            data = {
                **base,
                "objects_per_scene": 2,
                "scenes": {},
                "modalities": ["text"],
                "renderer": None,
                "slot_layout": None,
                "source": {},
            }
        else:
            data = {"name": f"scratch-{self.name}", "concepts": self.concepts, "objects_per_scene": 2}
        data["description"] = f"all ordered object pairs of scratch config {self.name}"
        return preset_from_dict(data, origin=f"concept space of scratch config {self.name}")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


#: The research code's choices that ``parity: paper`` fills in (docs/method/10-differences.md): the legitimate ones of
#: the built-in ``paper`` config, and the ones bindscope corrects (selection on test, the held-out leak).
PAPER_CHOICES: dict[str, Any] = {
    "final_norm": False,
    "init": "xavier",
    "queries": "sampled",
    "batch_eval": True,
    "validation_fraction": 0.0,
    "selection": "test",
    "heldout_negatives": True,
}
