"""What a complexity result's ``summary.json`` holds after the common header, typed (:class:`ComplexitySummary`):
per approximator its AUC, f* and curves over the fractions, the references, coverage, the verdict, the budget.

Some keys are written only sometimes (description lengths, second fits, the generalising families): a model
lists them in ``SOMETIMES`` and writes them only when they were given (:class:`Sparse`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import SerializerFunctionWrapHandler, model_serializer

from bindscope.analyses.complexity.settings import Budget
from bindscope.analyses.results import Summary
from bindscope.core.validation import Schema
from bindscope.estimators.metrics import Spread


class Sparse(Schema):
    """A model whose :attr:`SOMETIMES` keys are written only when they were given (made or read with them)."""

    SOMETIMES: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if k not in self.SOMETIMES or k in self.model_fields_set}


#: A curve over the fractions of objects seen: its spread over seeds at each fraction (keyed ``f"{f:g}"``).
Curve = dict[str, Spread]


class ApproximatorNumbers(Sparse):
    """One family's numbers: AUC and f* of test_only object accuracy, its curves and its fits."""

    SOMETIMES: ClassVar[frozenset[str]] = frozenset(
        {"description_length_bits", "second_fit_disagreement", "second_fit_val_gap", "undetermined_share"}
    )

    auc: Spread
    f_star: float | None
    f_star_any: float | None = None  # where accuracy first crosses the line, evidence or not
    object_acc: Curve
    train_object_acc: Curve = {}  # on the scenes it was fitted on (those the probes were not, where known)
    train_r2: Curve = {}
    fits_training: Curve = {}  # 1 per seed where train_object_acc reaches 90% of the line on the same scenes
    swap_acc: Curve = {}  # test_only scenes needing binding told apart from their binding swaps of unseen objects
    swap_exchanged: Curve = {}  # the same with each scene's and its swap's predictions exchanged (the control)
    concept_acc: Curve
    mixed_object_acc: Curve
    validation_object_acc: Curve
    final_object_acc: Curve
    r2: Curve
    converged: Curve
    parameters: int | None
    seconds: float | None
    description_length_bits: float | None = None  # with description lengths
    second_fit_disagreement: Curve = {}  # with second fits (exact product families)
    second_fit_val_gap: Curve = {}
    undetermined_share: Curve = {}


class VerdictNumbers(Sparse):
    """The verdict as written: :class:`~bindscope.analyses.complexity.verdict.Verdict` and its reading."""

    SOMETIMES: ClassVar[frozenset[str]] = frozenset({"generalising"})

    simplest_generalising: str | None
    f_star: float | None
    generalising: list[str] = []  # when a family generalises
    reliable: bool
    unconverged: dict[str, list[float]]
    decisive_fractions: list[float] | None
    undetermined: dict[str, str]  # family -> why the data leave its unseen-object predictions open
    reading: str
    fitting: list[str] | None = None  # families fitting their training scenes at the largest fraction (None: older)


class FittedIn(Schema):
    """The principal subspace the models were fitted in, and how the probes read the embeddings' part in it."""

    dims: int
    of: int
    variance_kept: float
    object_acc: float
    object_acc_embeddings: float


class ProbeNumbers(Schema):
    """The frozen probes: fitted by the run (and where they were written) or given, and their scored scenes."""

    fitted_here: bool
    folder: str | None
    seed: int
    scored_scenes: str


class FitCounts(Schema):
    """Models fitted by the run, and fits reused from an earlier run into the same folder."""

    fitted: int
    reused: int


class Generalisation(Schema):
    """What the card's column read (:mod:`~bindscope.analyses.complexity.card`): the fraction and the family whose
    test_only scenes needing binding it scored, the scored scenes per seed there, and the families that fit their
    training scenes at that fraction (none: the column's verdict is ``undetermined``, ``no_fit``). Where no
    fraction has enough such scenes, ``fraction`` and ``family`` are None and ``scenes`` is the most any fraction
    scored per seed."""

    fraction: float | None
    family: str | None
    scenes: float | None
    fitting: list[str]


class ComplexitySummary(Summary, Sparse):
    """The main numbers of a complexity result (``summary.json`` after the header)."""

    SOMETIMES: ClassVar[frozenset[str]] = frozenset({"description_length_baseline_bits"})

    approximators: dict[str, ApproximatorNumbers]
    in_distribution: Curve  # the frozen probes on the true embeddings of the test_only scenes
    chance: Curve
    train_in_distribution: Curve = {}  # ... of the scenes each model was fitted on
    swap_in_distribution: Curve = {}  # the true embeddings' share of test_only binding scenes told from their swaps
    swap_chance: Curve = {}
    binding_scenes: Curve = {}  # the scored test_only scenes needing binding, per seed
    generalisation: Generalisation | None = None  # what the card's column read
    description_length_baseline_bits: float | None = None  # with description lengths
    coverage: Curve  # share of the test_only scenes whose every value was fitted
    capacity: dict[str, str]  # family -> why it can memorise
    verdict: VerdictNumbers
    budget: Budget
    fitted_in: FittedIn | None = None
    selection: str
    dropped_scenes: int
    probe_scenes_unscored: int | None
    probes: ProbeNumbers | None = None  # None: a sweep summarised outside an analysis run
    fits: FitCounts | None = None
