"""The complexity sweep's settings: what it fits (:class:`ComplexitySettings`) and how, at what cost
(:class:`Budget`, the named :data:`BUDGETS`, :func:`resolve_budget`); every knob is declared and validated here
once, for the sweep and for the one-model :class:`~bindscope.analyses.complexity.approximator.Approximator`."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from bindscope.analyses.complexity.families import DEFAULT_HIDDEN, Family
from bindscope.analyses.complexity.fitters.adam import Schedule
from bindscope.analyses.complexity.fitters.als import Solver
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import (
    MAX_ITEMS,
    MAX_SCENE_COUNT,
    MAX_STEPS,
    MAX_WIDTH,
    Device,
    ParitySettings,
    Seed,
    Seeds,
    Settings,
    short_repr,
)
from bindscope.space.concepts import ConceptSpace
from bindscope.space.families import family_of
from bindscope.space.splits import DEFAULT_FRACTIONS, DEFAULT_SEEDS, ObjectOrder, check_fraction, check_fractions

#: ``exact``: ALS for the table families, Adam on standardised targets for the MLP; ``paper``: Adam for every family.
PROTOCOLS = ("exact", "paper")
DEFAULT_APPROXIMATORS = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")
#: The ``selection`` column of the results: how the scored checkpoints were chosen.
SELECTION_MARKS = {"validation": "validation", "test": "test (optimistic)"}


class Budget(Settings):
    """How a sweep fits its models, and what it may spend per fit; every result records it.

    ``full`` (the exact protocol on every scene), ``cpu`` (the exact protocol, capped) or ``paper``
    (the Adam of docs/method/06-complexity.md for every family, on every scene); :func:`resolve_budget` picks one by
    name and applies the command line's overrides (:attr:`OVERRIDES`).
    """

    OPTION_NAMES: ClassVar[dict[str, str]] = {"name": "budget", "decay": "lr-decay"}
    #: The fields a command line may override on a named budget (the others come with the name).
    OVERRIDES: ClassVar[tuple[str, ...]] = (
        "protocol",
        "sweeps",
        "epochs",
        "eval_every",
        "patience",
        "max_train_scenes",
        "max_eval_scenes",
        "max_target_dims",
        "standardize",
        "decay",
    )

    name: str = Field(
        "full",
        description="cpu: the exact protocol, capped to finish in minutes on 2 cores (512 training scenes per fit, "
        "the embeddings' leading principal subspace, 4 starts of 5 ALS sweeps, 600 MLP epochs, L-BFGS probes; "
        "see README). full: the exact protocol on every scene. paper: the paper's Adam, 4,000 epochs on every scene "
        "(docs/method/06-complexity.md; for a GPU). auto: full on CUDA, cpu otherwise; the output says which and why.",
    )
    protocol: Literal["exact", "paper"] = Field(
        "exact",
        description="exact: alternating exact least squares for the table families, Adam on standardised targets "
        "for the MLP (the budgets' default). paper: full-batch Adam for every family (docs/method/06-complexity.md).",
    )
    sweeps: int = Field(800, ge=1, le=MAX_STEPS, description="Override: ALS sweeps at most per fit (exact protocol).")
    epochs: int = Field(
        4000, ge=1, le=MAX_STEPS, description="Override: full-batch Adam epochs at most (the MLP; all under paper)."
    )
    eval_every: int = Field(50, ge=1, le=MAX_STEPS, description="Override: epochs between validation checks.")
    patience: int | None = Field(
        10,
        ge=1,
        le=MAX_STEPS,
        description="Override: checks without validation improvement before a model stops (0: never).",
    )
    max_train_scenes: int | None = Field(
        None, ge=2, le=MAX_SCENE_COUNT, description="Override: cap on training scenes per fit (0: no cap)."
    )
    max_eval_scenes: int | None = Field(
        None, ge=2, le=MAX_SCENE_COUNT, description="Override: cap on scored scenes per group (0: no cap)."
    )
    max_target_dims: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="Override: fit in the embeddings' leading principal subspace of at most this many dimensions "
        "(the cpu budget: 128; 0: the embeddings as they are).",
    )
    target_variance: float = Field(
        0.999,
        gt=0,
        le=1,
        description="The principal subspace holds the fewest components that keep this share of the variance (at "
        "most max_target_dims); predictions are restored to the embedding space before they are scored.",
    )
    standardize: bool = Field(
        True,
        description="Adam fits each model to its standardised training targets (mean 0, variance 1), folded back "
        "into its output layer (on in the exact protocol, off under paper).",
    )
    decay: Literal["cosine", "constant"] = Field(
        "cosine",
        description="Adam's learning rate: cosine to 0 (the exact protocol's MLP) or constant (the paper protocol, "
        "as the research code runs it).",
    )
    starts: int = Field(
        8, ge=1, le=MAX_ITEMS, description="Random initialisations of an exact product fit (the best one continues)."
    )
    start_sweeps: int = Field(
        10, ge=1, le=MAX_STEPS, description="ALS sweeps each start runs before the best one is continued."
    )
    probes: Literal["regularised", "fast", "lbfgs"] = Field(
        "regularised",
        description="The optimiser of the probes a run fits itself when none are given: regularised (the probes' "
        "default: a penalised fit with a unique optimum, its penalty cross-validated), fast (the paper's: L-BFGS, "
        "and the reference Adam trajectory on separable training sets) or lbfgs (L-BFGS alone).",
    )
    reason: str = Field("", description="Why this budget was chosen (--budget auto), said in every output.")

    @model_validator(mode="after")
    def _schedule(self) -> Budget:
        Schedule(self.epochs, 1e-2, self.eval_every, self.patience)  # validates the rest
        return self


BUDGETS = {
    "full": Budget(),
    "cpu": Budget(
        name="cpu",
        sweeps=800,
        epochs=600,
        eval_every=10,
        patience=3,
        max_train_scenes=512,
        max_eval_scenes=2000,
        max_target_dims=128,
        starts=4,
        start_sweeps=5,
        probes="lbfgs",
    ),
    "paper": Budget(
        name="paper",
        protocol="paper",
        epochs=4000,
        eval_every=50,
        patience=None,
        standardize=False,
        decay="constant",
        probes="fast",
    ),
}


def resolve_budget(
    name: str = "auto",
    device: str = "cpu",
    *,
    standardize: bool | None = None,
    protocol: str | None = None,
    **overrides: int | None,
) -> Budget:
    """A named budget (``auto``: ``full`` on CUDA, ``cpu`` otherwise, with the reason recorded) with
    explicit overrides.

    Overrides whose value is None are ignored; ``patience=0`` or a cap of 0 switches early
    stopping or the cap off. ``protocol`` switches the fitting protocol and keeps the caps.
    """
    reason = ""
    if name == "auto":
        name, reason = auto_budget(str(device))
    if name not in BUDGETS:
        raise BindscopeError(f"unknown budget {name!r}; choose auto, {', '.join(BUDGETS)}")
    if protocol is not None and protocol not in PROTOCOLS:
        raise BindscopeError(f"unknown protocol {protocol!r}; choose {' or '.join(PROTOCOLS)}")
    changes = _overrides(overrides)
    if protocol is not None and protocol != BUDGETS[name].protocol:
        changes = {**_protocol_defaults(protocol), **changes}
    if standardize is not None:
        changes["standardize"] = standardize
    return BUDGETS[name].replace(reason=reason, **changes)


def _overrides(overrides: dict[str, int | None]) -> dict[str, Any]:
    """The given overrides, checked; a 0 for early stopping or a cap switches it off."""
    changes: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    for key in ("epochs", "eval_every", "sweeps"):
        value = overrides.get(key)
        if value is not None and value < 1:
            raise BindscopeError(f"{key} must be at least 1, got {value}")
    for key in ("patience", "max_train_scenes", "max_eval_scenes", "max_target_dims"):
        value = overrides.get(key)
        if value is not None and value < 0:
            raise BindscopeError(f"{key} must be >= 0 (0 switches it off), got {value}")
        if value == 0:
            changes[key] = None
    return changes


def _protocol_defaults(protocol: str) -> dict[str, Any]:
    """What switching a budget to ``protocol`` changes (the caps stay): the schedule of its own budget."""
    own = BUDGETS["paper" if protocol == "paper" else "full"]
    return {
        "protocol": protocol,
        "epochs": own.epochs,
        "patience": own.patience,
        "standardize": protocol != "paper",
        "decay": own.decay,
    }


def auto_budget(device: str) -> tuple[str, str]:
    """``--budget auto``: the budget for ``device`` and why, in words (recorded as the budget's ``reason``)."""
    if device.startswith("cuda"):
        return "full", f"auto: device {device}, so every scene, uncapped"
    cpu = BUDGETS["cpu"]
    return "cpu", (
        f"auto: device {device}, so capped to finish in minutes on 2 cores: at most {cpu.max_train_scenes:,} "
        f"training scenes per fit, fits in the embeddings' leading principal subspace (the fewest components "
        f"holding {cpu.target_variance:.1%} of the variance, at most {cpu.max_target_dims}), {cpu.starts} starts of "
        f"{cpu.start_sweeps} ALS sweeps and {cpu.sweeps} sweeps per product fit, {cpu.epochs} MLP epochs (stopping "
        f"after {cpu.patience} checks of {cpu.eval_every} without improvement), L-BFGS probes; --budget full fits "
        "every scene uncapped in the full embedding space (minutes on a GPU, hours on a CPU)"
    )


class ComplexitySettings(ParitySettings):
    """A complexity sweep (docs/method/06-complexity.md defaults).

    Without frozen probes among the inputs, the probes are fitted first on a scene-level split
    (``probe_seed``, train fraction 0.4, the budget's probe optimiser: ``regularised`` under ``full``) and
    written with the result.
    ``parity="paper"``: the paper budget (Adam at a constant 1e-2 for 4,000 epochs on raw targets),
    R² around all scenes and the random object order and scored probe-training scenes, where not given.
    """

    OPTION_NAMES: ClassVar[dict[str, str]] = {"validation_fraction": "validation"}
    PAPER: ClassVar[dict[str, Any]] = {
        "budget": BUDGETS["paper"],
        "r2_centre": "scenes",
        "object_order": "random",
        "probe_scenes": "keep",
    }

    parity: Literal["bindscope", "paper"] = Field(
        "bindscope",
        description="paper: the research code's choices where not given: the paper budget (Adam at a constant lr "
        "1e-2, 4,000 epochs, raw targets, every scene; for a GPU), R² around the mean of all scenes, the random "
        "object order and scored probe-training scenes. Checkpoints are still selected on validation (see "
        "--selection).",
    )
    approximators: tuple[str, ...] = Field(
        DEFAULT_APPROXIMATORS,
        description="Families to fit, comma-separated: additive, mult, mult_within_object, sum_mult, mlp, mlp(H). "
        "Default: all five.",
    )
    hidden: tuple[int, ...] = Field(
        (DEFAULT_HIDDEN,), description="MLP hidden widths for `mlp`, comma-separated (1024)."
    )
    fractions: tuple[float, ...] = Field(
        DEFAULT_FRACTIONS, description="Fractions of objects seen in training, comma-separated (0.1,0.2,...,0.9)."
    )
    seeds: Seeds = Field(
        DEFAULT_SEEDS, description="Seed ids, comma-separated (splits and initialisations); default 0,1,2."
    )
    lr: float = Field(1e-2, gt=0, description="Peak Adam learning rate (1e-2; cosine decay to 0).")
    width: int | None = Field(None, description="Width of the concept tables (default: the embedding width).")
    validation_fraction: float = Field(
        0.1, description="Share of the train_only scenes held out for selection and early stopping (0.1)."
    )
    budget: Budget = Field(
        default_factory=Budget,
        description="cpu: the exact protocol, capped to finish in minutes on 2 cores (512 training scenes per fit, "
        "the embeddings' leading principal subspace, 4 starts of 5 ALS sweeps, 600 MLP epochs, L-BFGS probes; "
        "see README). full: the exact protocol on every scene. paper: the paper's Adam, 4,000 epochs on every scene "
        "(docs/method/06-complexity.md; for a GPU). auto: full on CUDA, cpu otherwise; the output says which and why.",
    )
    r2_centre: Literal["scenes", "group"] = Field(
        "scenes",
        description="R²'s SST around the mean of all the sweep's scenes (scenes, default, as the research code) "
        "or around the scored group's own mean (group).",
    )
    object_order: Literal["auto", "random", "covering", "closed"] = Field(
        "auto",
        description="Which objects are seen first: a seeded order that covers every concept value first (covering: "
        "every test scene is then a new combination of seen values), a plain permutation (random, the research "
        "code: at low fractions some test scenes hold values never fitted), or units of an object at every place "
        "(count) of a relation (count) space (closed: a held-out scene's relation or count swap is held out too). "
        "auto (default): closed on a relation or count space, covering elsewhere.",
    )
    probe_scenes: Literal["exclude", "keep"] = Field(
        "exclude",
        description="The scenes the probes were fitted on (known when they are fitted here or recorded in their "
        "probe.json): left out of the scored test_only and mixed groups (exclude, default: probes read their own "
        "training scenes' noise, which no prediction can) or scored (keep, the research code).",
    )
    selection: Literal["validation", "test"] = Field(
        "validation",
        description="Checkpoints of the lowest validation MSE (validation, default) or, only to reproduce the "
        "research code's numbers, of the highest test_only object accuracy (test: optimistic, marked so in every "
        "output; needs --protocol paper).",
    )
    description_length: bool = Field(
        True, description="Also compute the prequential description length of each family (on by default)."
    )
    second_fit: bool = Field(
        True,
        description="Refit the exact product families from other initialisations and measure how far the two "
        "disagree on unseen objects: the verdict discounts families the data do not determine (on by default).",
    )
    probe_seed: Seed = Field(0, description="Which seed's probes to use (or to fit); 0.")
    device: Device = Field("cpu", description="Torch device: cpu, cuda, cuda:1 ...")

    @field_validator("approximators")
    @classmethod
    def _approximators(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} approximators, got {len(v)}")
        return v

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return check_fractions(v)

    @field_validator("validation_fraction")
    @classmethod
    def _validation(cls, v: float) -> float:
        return check_fraction(v, "validation fraction")

    @field_validator("width")
    @classmethod
    def _width(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"table width must be at least 1, got {v}")
        if v is not None and v > MAX_WIDTH:
            raise ValueError(f"table width must be at most {MAX_WIDTH}, got {v}")
        return v

    @field_validator("hidden")
    @classmethod
    def _hidden(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or min(v) < 1:
            raise ValueError(f"give MLP hidden widths of at least 1, got {short_repr(list(v))}")
        if max(v) > MAX_WIDTH:
            raise ValueError(f"MLP hidden widths must be at most {MAX_WIDTH}, got {short_repr(list(v))}")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} MLP hidden widths, got {len(v)}")
        return v

    @model_validator(mode="after")
    def _selection(self) -> ComplexitySettings:
        if self.selection == "test" and self.budget.protocol != "paper":
            raise ValueError(
                "selection on test accuracy reproduces the research code's (optimistic) checkpoints and runs "
                "under the paper protocol only; add --protocol paper (or --parity paper)"
            )
        return self

    @model_validator(mode="after")
    def _families(self) -> ComplexitySettings:
        try:
            self.families()  # unknown names fail here, not after an hour of fitting
        except BindscopeError as exc:
            raise ValueError(str(exc)) from None
        return self

    def families(self) -> list[Family]:
        """The families to fit, ``mlp`` expanded to one per hidden width."""
        out: list[Family] = []
        for name in self.approximators:
            out += [Family("mlp", h) for h in self.hidden] if name.strip() == "mlp" else [Family.parse(name)]
        if not out:
            raise BindscopeError("give at least one approximator")
        labels = [f.label for f in out]
        if len(set(labels)) != len(labels):
            raise BindscopeError(f"approximators repeat: {labels}")
        return out

    def order_for(self, space: ConceptSpace) -> ObjectOrder:
        """The object order the splits of ``space`` take: ``auto`` is ``closed`` on a relation or count space (its
        held-out (object, place) and (object, count) combinations closed under the swaps the column scores),
        ``covering`` elsewhere."""
        if self.object_order != "auto":
            return self.object_order
        return "covering" if family_of(space) == "attribution" else "closed"

    def schedule(self) -> Schedule:
        """Adam's schedule (every family under the paper protocol, the MLP under the exact one)."""
        b = self.budget
        return Schedule(b.epochs, self.lr, b.eval_every, b.patience, standardize=b.standardize, decay=b.decay)

    def solver(self) -> Solver:
        """The exact protocol's block solver."""
        b = self.budget
        return Solver(sweeps=b.sweeps, starts=b.starts, start_sweeps=b.start_sweeps)

    def exact(self, family: Family) -> bool:
        """Whether ``family`` is fitted by exact block solves (else by Adam)."""
        return self.budget.protocol == "exact" and family.name != "mlp"
