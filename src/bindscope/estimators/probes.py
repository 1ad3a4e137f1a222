"""Uni-modal probes (docs/method/03-probes.md): is object information recoverable from an embedding?

Bias-free linear probes, one per concept and one over objects, trained with soft set targets
(``t[v] = #objects with value v / n``) and a soft-target cross-entropy. A scene counts as
correct under **set separation** when its smallest present-label logit exceeds its largest
absent-label logit.

Optimisers:

``regularised`` (default)
    The cross-entropy plus an L2 penalty whose optimum is unique, solved to convergence, with the penalty's
    strength (and shrinkage) chosen by cross-validation inside the training scenes
    (:mod:`bindscope.estimators.regularised`): the same answer from any converged solver.
``reference``
    The paper's: full-batch Adam, lr 1e-2, 10,000 steps, cosine decay to 0, from PyTorch's
    default ``nn.Linear`` initialisation (seeded). Many fits share each batched matmul; the
    arithmetic is ``torch.optim.Adam``'s.
``fast`` (the paper's trajectory, ``--parity paper``)
    L-BFGS on whitened inputs, from zero, to convergence: where a probe's training set is not
    separable, the soft cross-entropy has a unique minimiser in logit space, which the reference
    schedule also reaches. Where it *is* separable (always when there are fewer training scenes
    than dimensions), there is no minimiser, the test accuracy depends on the optimiser's
    implicit bias, and no shortcut reproduces the reference's (shorter Adam schedules differ by
    2.0-2.6 points on average, up to 10, on planted data), so those probes follow the reference trajectory exactly.
``lbfgs``
    L-BFGS alone (:mod:`bindscope.estimators.lbfgs`): fastest, but on separable training sets its numbers are its
    path's, neither the paper's nor a unique optimum's.

``regularised`` and ``lbfgs`` run on numpy arrays without importing torch (the cpu path of every analysis);
``reference`` and ``fast``'s reference stage are torch's, imported when they run.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from array_api_compat import array_namespace, is_torch_array
from pydantic import Field, field_validator

from bindscope.core.errors import BindscopeError
from bindscope.core.io import load_npy, read_json, save_npy, write_json
from bindscope.core.threads import blas_threads_for, threads_for
from bindscope.core.validation import MAX_ITEMS, MAX_STEPS, Device, Settings, check_fields
from bindscope.estimators.lbfgs import lbfgs_whitened, separates
from bindscope.estimators.regularised import (
    DEFAULT_FOLDS,
    DEFAULT_SHRINKAGE,
    DEFAULT_STRENGTHS,
    RegularisedFit,
    StrengthChoice,
    check_shrinkage,
    check_strengths,
    fit_regularised,
    to_numpy,
)
from bindscope.space.concepts import PAD, SceneSet

if TYPE_CHECKING:
    import torch

    Array = np.ndarray | torch.Tensor
else:
    Array = Any

Optimizer = Literal["regularised", "fast", "reference", "lbfgs"]
OPTIMIZERS = ("regularised", "fast", "reference", "lbfgs")
OBJECT = "object"
DEFAULT_EXACT_BUDGET_S = 900.0
log = logging.getLogger(__name__)


# -- targets, accuracy, chance ------------------------------------------------------------------
def soft_targets(scenes: SceneSet) -> dict[str, np.ndarray]:
    """Soft set targets: ``{"object": [N, U], concept: [N, V_c], ...}`` (float32, rows sum to 1)."""
    n = scenes.num_objects().astype(np.float32)[:, None]
    ids = scenes.object_ids()
    rows = np.broadcast_to(np.arange(len(scenes))[:, None], ids.shape)
    present = ids != PAD
    u = scenes.space.num_objects
    flat = rows[present].astype(np.int64) * u + ids[present]
    objects = np.bincount(flat, minlength=len(scenes) * u).reshape(len(scenes), u)
    out = {OBJECT: objects.astype(np.float32) / n}
    for concept, counts in zip(scenes.space.concepts, scenes.value_counts()):
        out[concept] = counts.astype(np.float32) / n
    return out


def set_separation_correct(logits: Array, targets: Array) -> np.ndarray:
    """Per scene: is the smallest present-label logit larger than the largest absent one?

    Parameters
    ----------
    logits, targets
        ``[N, L]`` numpy arrays or torch tensors; a label is present where its target is positive.
    """
    if is_torch_array(logits) or is_torch_array(targets):
        import torch

        scores: Array = torch.as_tensor(logits)
        present: Array = torch.as_tensor(targets, device=scores.device) > 0
    else:
        scores, present = np.asarray(logits), np.asarray(targets) > 0
    if scores.shape != present.shape:
        raise BindscopeError(f"logits {tuple(scores.shape)} and targets {tuple(present.shape)} differ in shape")
    return to_numpy(separates(scores, present))


def like(a: np.ndarray, other: Array) -> Array:
    """Numpy array ``a`` as the kind of ``other``: itself beside a numpy array, a torch tensor on ``other``'s device."""
    if not is_torch_array(other):
        return a
    import torch

    return torch.from_numpy(np.ascontiguousarray(a)).to(other.device)


def on_device(a: np.ndarray, device: str) -> Array:
    """``a`` as the solvers take it on ``device``: the numpy array itself on ``cpu`` (torch is not imported),
    else a torch tensor there."""
    if device == "cpu":
        return a
    import torch

    return torch.from_numpy(np.ascontiguousarray(a)).to(device)


def chance_accuracy(targets: np.ndarray) -> float:
    """Expected set-separation accuracy of random scores: mean over scenes of ``1 / C(L, m)``.

    m is the number of present labels (2 distinct objects of CLEVR's 24: 1/276).
    """
    present = (np.asarray(targets) > 0).sum(axis=1)
    return float(chance_per_scene(targets.shape[1], present).mean()) if len(present) else float("nan")


def chance_per_scene(num_labels: int, present: np.ndarray) -> np.ndarray:
    """``1 / C(L, m)`` per scene: the chance that random scores put its m present labels above the
    other ``L - m`` (exact; one binomial per distinct m)."""
    counts, at = np.unique(np.asarray(present, dtype=np.int64), return_inverse=True)
    return np.array([1.0 / math.comb(num_labels, int(m)) for m in counts])[at.reshape(-1)]


# -- preprocessing --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preprocessing:
    """Optional input transforms, fitted on training rows: L2-normalise rows, then centre."""

    center: bool = False
    normalize: bool = False

    def fit(self, x: np.ndarray) -> np.ndarray | None:
        """The centring mean (None unless ``center``)."""
        return self._normalize(x).mean(axis=0) if self.center else None

    def apply(self, x: np.ndarray, mean: np.ndarray | None) -> np.ndarray:
        x = self._normalize(x)
        return x - mean if mean is not None else x

    def _normalize(self, x: np.ndarray) -> np.ndarray:
        if not self.normalize:
            return x
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        if (norms == 0).any():
            raise BindscopeError("cannot L2-normalise an all-zero embedding row; drop normalisation")
        return x / norms


# -- solvers on stacked fits: x [F, n, D], targets [F, n, L], weights [F, L, D] -------------------
def fit_probe_weights(
    x: Array,
    t: Array,
    blocks: list[slice],
    seeds: list[int],
    *,
    optimizer: Optimizer = "regularised",
    steps: int = 10_000,
    lr: float = 1e-2,
    max_iter: int = 500,
    exact_budget_s: float = DEFAULT_EXACT_BUDGET_S,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    shrinkage: Sequence[float] = DEFAULT_SHRINKAGE,
    folds: int = DEFAULT_FOLDS,
) -> tuple[Array, np.ndarray]:
    """Fit F independent sets of bias-free probes at once.

    Parameters
    ----------
    x, t
        Inputs ``[F, n, D]`` and stacked soft targets ``[F, n, L]`` (probe b owns columns ``blocks[b]``): numpy
        arrays (``regularised`` and ``lbfgs`` then run without torch) or torch tensors on any device.
    seeds
        Initialisation seed of each fit (the reference's ``nn.Linear`` init), and the seed of its folds
        (``regularised``).
    optimizer
        ``"regularised"``, ``"fast"``, ``"reference"`` or ``"lbfgs"``.
    exact_budget_s
        ``fast`` only: the most seconds to spend following the reference trajectory for
        separable probes (timed on the first steps). Beyond it those probes keep their L-BFGS
        fit and are marked ``lbfgs-separable``: their test accuracy may differ from the paper
        optimiser's.
    strengths, shrinkage, folds
        ``regularised`` only: the grids cross-validated and the folds (:func:`fit_regularised_probes`).

    Returns
    -------
    weights
        ``[F, L, D]``, of the inputs' kind.
    solver
        str ``[F, len(blocks)]``: ``regularised`` (the penalised optimum, converged) or
        ``regularised-unconverged``; ``reference`` (followed the reference Adam trajectory), ``lbfgs`` (not
        separable: the unique optimum the reference also reaches) or ``lbfgs-separable`` (separable, reference
        over budget or not asked for).
    """
    if optimizer == "regularised":
        fit = fit_regularised_probes(
            x, t, blocks, seeds, strengths=strengths, shrinkage=shrinkage, folds=folds, max_iter=max_iter
        )
        return fit.weights, fit.solver
    f, n, d = x.shape
    with _threads(x, f * n * d * t.shape[2]):
        if optimizer == "reference":
            return _reference(x, t, blocks, seeds, steps, lr), np.full((f, len(blocks)), "reference", dtype=object)
        return _fit(x, t, blocks, seeds, optimizer, steps, lr, max_iter, exact_budget_s)


def fit_regularised_probes(
    x: Array,
    t: Array,
    blocks: list[slice],
    seeds: Sequence[int],
    *,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    shrinkage: Sequence[float] = DEFAULT_SHRINKAGE,
    folds: int = DEFAULT_FOLDS,
    max_iter: int = 500,
) -> RegularisedFit:
    """The ``regularised`` optimiser on F stacked fits (:func:`bindscope.estimators.regularised.fit_regularised`):
    the weights at each probe's cross-validated penalty, every grid setting's refit, the band and each choice."""
    _, n, d = x.shape
    with _threads(x, n * d * t.shape[2]):  # many small fits: threads only pay for large ones
        return fit_regularised(
            x, t, blocks, seeds, strengths=strengths, shrinkage=shrinkage, folds=folds, max_iter=max_iter
        )


def _threads(x: Array, work: int) -> contextlib.AbstractContextManager[Any]:
    """The threads ``work`` runs on (:mod:`bindscope.core.threads`): torch's for torch inputs, the BLAS library's
    for numpy ones (torch is not imported)."""
    return threads_for(work) if is_torch_array(x) else blas_threads_for(work)


def _fit(x, t, blocks, seeds, optimizer, steps, lr, max_iter, budget) -> tuple[Array, np.ndarray]:
    xp = array_namespace(x, t)
    w = lbfgs_whitened(x, t, blocks, max_iter)
    logits = x @ w.mT
    present = t > 0
    separable = np.stack([to_numpy(xp.all(separates(logits[..., b], present[..., b]), axis=-1)) for b in blocks], 1)
    solver = np.where(separable, "lbfgs-separable", "lbfgs").astype(object)
    redo = np.flatnonzero(separable.any(axis=1))
    if optimizer == "lbfgs" or not len(redo):
        return w, solver
    xt, tt = _as_torch(x[redo]), _as_torch(t[redo])
    init = _inits(t.shape[2], x.shape[2], [seeds[i] for i in redo]).to(xt.device, xt.dtype)
    seconds = _time_reference(xt, tt, blocks, init, steps, lr)
    if seconds > budget:
        log.warning(
            "%d probe fit(s) have separable training sets; following the reference Adam trajectory "
            "would take about %.0f s (budget %.0f s), so they keep their L-BFGS fit: their test "
            "accuracy may differ from the paper optimiser's. Use --optimizer reference (on a GPU) "
            "or raise --exact-budget for paper parity.",
            len(redo),
            seconds,
            budget,
        )
        return w, solver
    adam = _like(adam_reference(xt, tt, blocks, init, steps, lr), w)
    for k, i in enumerate(redo):  # separable: the answer is the reference trajectory's, follow it
        for j, b in enumerate(blocks):
            if separable[i, j]:
                w[i, b] = adam[k, b]
                solver[i, j] = "reference"
    return w, solver


def _reference(x: Array, t: Array, blocks: list[slice], seeds: list[int], steps: int, lr: float) -> Array:
    """The ``reference`` optimiser (in torch, whatever the inputs' kind): the weights, of the inputs' kind."""
    xt, tt = _as_torch(x), _as_torch(t)
    init = _inits(t.shape[2], x.shape[2], seeds).to(xt.device, xt.dtype)
    return _like(adam_reference(xt, tt, blocks, init, steps, lr), x)


def _as_torch(a: Array) -> torch.Tensor:
    """A torch tensor of ``a`` (numpy arrays share their memory)."""
    import torch

    return a if is_torch_array(a) else torch.from_numpy(np.ascontiguousarray(a))


def _like(a: torch.Tensor, kind: Array) -> Array:
    """Torch tensor ``a`` as the kind of ``kind``: itself for a tensor, a numpy array for an array."""
    return a if is_torch_array(kind) else a.numpy()


def _time_reference(x, t, blocks, init, steps: int, lr: float) -> float:
    """Seconds the reference schedule would take, from timing a few of its steps."""
    probe_steps = min(steps, 5)
    adam_reference(x, t, blocks, init, 1, lr)  # warm up
    start = time.perf_counter()
    adam_reference(x, t, blocks, init, probe_steps, lr)
    return (time.perf_counter() - start) / probe_steps * steps


def adam_reference(
    x: torch.Tensor, t: torch.Tensor, blocks: list[slice], init: torch.Tensor, steps: int, lr: float
) -> torch.Tensor:
    """The paper's schedule on stacked fits: full-batch Adam (0.9, 0.999, eps 1e-8), cosine to 0.

    The same arithmetic as ``torch.optim.Adam`` with ``CosineAnnealingLR`` and autograd on the
    soft-target cross-entropy, written out so that many fits share each batched matmul.
    """
    import torch

    beta1, beta2, eps = 0.9, 0.999, 1e-8
    n = x.shape[1]
    w = init.clone()
    m = torch.zeros_like(w)
    v = torch.zeros_like(w)
    for step in range(1, steps + 1):
        grad = torch.bmm(_softmax_minus_targets(torch.bmm(x, w.transpose(1, 2)), t, blocks).transpose(1, 2), x)
        grad.div_(n)
        m.mul_(beta1).add_(grad, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_lr = lr * (1 + math.cos(math.pi * (step - 1) / steps)) / 2
        denom = (v.sqrt() / math.sqrt(1 - beta2**step)).add_(eps)
        w.addcdiv_(m, denom, value=-step_lr / (1 - beta1**step))
    return w


def _softmax_minus_targets(logits: torch.Tensor, t: torch.Tensor, blocks: list[slice]) -> torch.Tensor:
    """d(soft cross-entropy)/d(logits) per scene: blockwise softmax minus the targets (in place)."""
    import torch

    for b in blocks:
        logits[..., b] = torch.softmax(logits[..., b], dim=-1)
    return logits.sub_(t)


# -- how probes are fitted -------------------------------------------------------------------------
class ProbeFit(Settings):
    """How one set of probes is fitted: the optimiser and its schedule, the preprocessing, the device.

    The one declaration (and validation) of these knobs: :class:`ProbeSet` takes it, and the analyses'
    probe settings (:class:`bindscope.estimators.probe_runs.ProbeSettings`) extend it.
    """

    OPTION_NAMES: ClassVar[dict[str, str]] = {"exact_budget_s": "exact-budget"}

    optimizer: Optimizer = Field(
        "regularised",
        description="regularised (default): the loss plus an L2 penalty, whose optimum is unique, solved to "
        "convergence, its strength and shrinkage chosen by cross-validation on the training scenes; fast (the "
        "paper's trajectory, as --parity paper): L-BFGS, following the reference Adam trajectory where the "
        "training set is separable; reference: the paper's Adam (lr 1e-2, cosine, --steps); lbfgs: L-BFGS only.",
    )
    center: bool = Field(False, description="Centre on the training mean.")
    normalize: bool = Field(False, description="L2-normalise each embedding (before centring).")
    steps: int = Field(10_000, ge=1, le=MAX_STEPS, description="Adam steps of the reference schedule (10,000).")
    lr: float = Field(1e-2, gt=0, description="Peak Adam learning rate of the reference schedule (1e-2; cosine to 0).")
    max_iter: int = Field(500, ge=1, le=MAX_STEPS, description="L-BFGS iterations at most (500).")
    exact_budget_s: float = Field(
        DEFAULT_EXACT_BUDGET_S,
        ge=0,
        description="fast: most seconds to spend following the reference trajectory for probes whose training "
        "set is separable (900; beyond it they keep L-BFGS and a warning).",
    )
    strengths: tuple[float, ...] = Field(
        DEFAULT_STRENGTHS,
        description="regularised: the L2 strengths cross-validated, comma-separated (10 from 3e-4 to 10, half "
        "decades; unit-free: times the mean squared training logit).",
    )
    shrinkage: tuple[float, ...] = Field(
        DEFAULT_SHRINKAGE,
        description="regularised: the penalty's shares of isotropic variance cross-validated, comma-separated, "
        "each in [0, 1] (0,0.01; 0: whitened, 1: isotropic).",
    )
    folds: int = Field(
        DEFAULT_FOLDS,
        ge=2,
        le=MAX_ITEMS,
        description="regularised: cross-validation folds inside the training scenes (5; fewer with fewer scenes).",
    )
    device: Device = Field("cpu", description="Torch device: cpu, cuda, cuda:1 ...")

    @field_validator("strengths")
    @classmethod
    def _strengths(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} L2 strengths, got {len(v)}")
        return check_strengths(v)

    @field_validator("shrinkage")
    @classmethod
    def _shrinkage(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} shrinkages, got {len(v)}")
        return check_shrinkage(v)

    @property
    def preprocessing(self) -> Preprocessing:
        """The input transforms these settings ask for."""
        return Preprocessing(center=self.center, normalize=self.normalize)

    def solver_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`fit_probe_weights` these settings ask for."""
        return {
            "optimizer": self.optimizer,
            "steps": self.steps,
            "lr": self.lr,
            "max_iter": self.max_iter,
            "exact_budget_s": self.exact_budget_s,
            **self.regularised_options(),
        }

    def regularised_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`fit_regularised_probes` these settings ask for."""
        keys = ("strengths", "shrinkage", "folds", "max_iter")
        return {k: getattr(self, k) for k in keys}


def as_probe_fit(settings: ProbeFit | Optimizer | None = None, **knobs: Any) -> ProbeFit:
    """Fit settings from a :class:`ProbeFit` (or an optimizer name, or None: the defaults) and knobs overriding it."""
    if settings is None or isinstance(settings, str):
        optimizer = {} if settings is None else {"optimizer": settings}
        return ProbeFit(**optimizer, **knobs)
    if not isinstance(settings, ProbeFit):
        raise BindscopeError(
            f"probe fit settings must be a ProbeFit or an optimizer name, got {type(settings).__name__}"
        )
    return ProbeFit(**{**{k: getattr(settings, k) for k in ProbeFit.model_fields}, **knobs}) if knobs else settings


# -- the estimator ----------------------------------------------------------------------------------
class ProbeSet:
    """Bias-free linear probes for several label sets, fitted together (sklearn style).

    Parameters
    ----------
    settings
        How to fit them (:class:`ProbeFit`; default its defaults). An optimizer name is shorthand for
        ``ProbeFit(optimizer=name)``.
    seed
        Seed of the initialisation.
    **knobs
        :class:`ProbeFit` fields overriding ``settings``, e.g. ``ProbeSet("lbfgs", max_iter=50)``.
    """

    def __init__(self, settings: ProbeFit | Optimizer | None = None, *, seed: int = 0, **knobs: Any) -> None:
        self.settings = as_probe_fit(settings, **knobs)
        self.seed = seed
        self.meta_: dict[str, Any] = {}  # what a loaded probe folder records (probe.json)

    @property
    def optimizer(self) -> Optimizer:
        return self.settings.optimizer

    @property
    def center(self) -> bool:
        return self.settings.center

    @property
    def normalize(self) -> bool:
        return self.settings.normalize

    @property
    def preprocessing(self) -> Preprocessing:
        return self.settings.preprocessing

    def fit(self, x: np.ndarray, targets: Mapping[str, np.ndarray]) -> ProbeSet:
        """Fit one probe per entry of ``targets`` (each ``[N, L]``) on inputs ``x`` ``[N, D]``."""
        x = np.asarray(x, dtype=np.float32)
        names, blocks, t = stack_targets(targets, len(x))
        self.mean_ = self.preprocessing.fit(x)
        device = self.settings.device
        xt = on_device(self.preprocessing.apply(x, self.mean_)[None], device)
        tt = on_device(t[None], device)
        self.choices_: dict[str, StrengthChoice] = {}
        if self.optimizer == "regularised":
            fit = fit_regularised_probes(xt, tt, blocks, [self.seed], **self.settings.regularised_options())
            w, solver = fit.weights, fit.solver
            self.choices_ = dict(zip(names, fit.choices[0]))
        else:
            w, solver = fit_probe_weights(xt, tt, blocks, [self.seed], **self.settings.solver_options())
        self.names_ = names
        self.coef_ = {n: to_numpy(w[0][b]) for n, b in zip(names, blocks)}
        self.solver_ = dict(zip(names, solver[0]))
        return self

    def decision_function(self, x: np.ndarray, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Logits ``{name: [N, L]}`` of every probe, or of ``names`` only."""
        xp = self.preprocessing.apply(np.asarray(x, dtype=np.float32), self.mean_)
        return {n: xp @ w.T for n, w in self.coef_.items() if names is None or n in names}

    def correct(self, x: np.ndarray, targets: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-scene set-separation correctness ``{name: bool [N]}``."""
        logits = self.decision_function(x)
        return {n: set_separation_correct(logits[n], targets[n]) for n in self.coef_}

    def save(self, folder: str | Path, extra: Mapping | None = None) -> None:
        """Write the probes as a probe folder (see :func:`save_probes`)."""
        meta = {"optimizer": self.optimizer, "solver": self.solver_, "seed": self.seed}
        if self.choices_:
            meta["strengths"] = {n: c.to_dict() for n, c in self.choices_.items()}
        meta.update(extra or {})
        save_probes(folder, self.coef_, self.mean_, center=self.center, normalize=self.normalize, meta=meta)

    @classmethod
    def from_weights(
        cls,
        weights: Mapping[str, np.ndarray],
        mean: np.ndarray | None,
        settings: ProbeFit | Optimizer | None = None,
        *,
        seed: int = 0,
        **knobs: Any,
    ) -> ProbeSet:
        """Fitted probes from their weights ``{name: [L, D]}`` and centring mean (``center`` and ``normalize``
        among ``settings`` or ``knobs``: the preprocessing they were fitted with)."""
        probe = cls(settings, seed=seed, **knobs)
        probe.names_, probe.coef_, probe.mean_ = tuple(weights), dict(weights), mean
        probe.solver_, probe.choices_ = {}, {}
        return probe

    @classmethod
    def load(cls, folder: str | Path) -> ProbeSet:
        """Read a probe folder written by :func:`save_probes`."""
        coef, mean, meta = load_probes(folder)
        try:
            fit = ProbeFit(center=meta["center"], normalize=meta["normalize"], optimizer=meta.get("optimizer", "fast"))
        except BindscopeError as exc:
            raise BindscopeError(f"{Path(folder) / 'probe.json'} is damaged ({exc}); {REFIT}") from None
        probe = cls.from_weights(coef, mean, fit, seed=meta.get("seed", 0))
        probe.solver_ = meta.get("solver", {})
        probe.meta_ = meta
        return probe


PROBE_FORMAT = "bindscope-probe-v1"
REFIT = "fit the probes again with bindscope probe"
#: Types of ``probe.json``'s keys (checked when present).
PROBE_TYPES: dict[str, type | tuple[type, ...]] = {
    "optimizer": str,
    "seed": int,
    "solver": dict,
    "strengths": dict,
    "split": (dict, type(None)),
    "labels": dict,
    "dataset_hash": (str, type(None)),
    "embeddings": (str, type(None)),
}


def save_probes(
    folder: str | Path,
    weights: Mapping[str, np.ndarray],
    mean: np.ndarray | None,
    *,
    center: bool,
    normalize: bool,
    meta: Mapping | None = None,
) -> None:
    """A probe folder: ``{name}.npy`` per probe (``[L, D]``), ``mean.npy`` if centred, ``probe.json``."""
    folder = Path(folder)
    for name, w in weights.items():
        save_npy(folder / f"{name}.npy", np.asarray(w, dtype=np.float32))
    if mean is not None:
        save_npy(folder / "mean.npy", np.asarray(mean, dtype=np.float32))
    write_json(
        folder / "probe.json",
        {
            "format": PROBE_FORMAT,
            "names": list(weights),
            "center": center,
            "normalize": normalize,
            **(meta or {}),
        },
    )


def load_probes(folder: str | Path) -> tuple[dict[str, np.ndarray], np.ndarray | None, dict]:
    """Weights ``{name: [L, D]}``, the centring mean (or None) and the metadata of a probe folder."""
    folder = Path(folder)
    meta = read_json(folder / "probe.json", "probe file", folder)
    if meta.get("format") != PROBE_FORMAT:
        raise BindscopeError(f"{folder / 'probe.json'} is not a bindscope probe file")
    check_fields(meta, PROBE_TYPES, f"probe file {folder / 'probe.json'}", REFIT)
    names = meta.get("names")
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) for n in names)
        or not isinstance(meta.get("center"), bool)
        or not isinstance(meta.get("normalize"), bool)
    ):
        raise BindscopeError(
            f"{folder / 'probe.json'} is damaged: it needs 'names' (a list of probe names), "
            "'center' and 'normalize' (true/false); write the probes again with bindscope probe"
        )
    weights = {n: load_npy(folder / f"{n}.npy", "probe weights", root=folder) for n in names}
    dims = {w.shape[1] if w.ndim == 2 and _real(w) else -1 for w in weights.values()}
    if len(dims) != 1 or -1 in dims:
        raise BindscopeError(f"the probe weights in {folder} must be 2-D [labels, dim] float arrays of one width")
    mean = load_npy(folder / "mean.npy", "probe mean", root=folder) if meta["center"] else None
    if mean is not None and not _real(mean):
        raise BindscopeError(f"{folder / 'mean.npy'} must hold floating-point numbers, got {mean.dtype}")
    if mean is not None and mean.shape != (dims.pop(),):
        raise BindscopeError(f"{folder / 'mean.npy'} does not match the probe width")
    bad = [n for n, w in weights.items() if not np.isfinite(w).all()]
    if bad or (mean is not None and not np.isfinite(mean).all()):
        raise BindscopeError(
            f"the probes in {folder} hold NaN or infinite values ({', '.join(bad) or 'mean'}); fit them again"
        )
    return weights, mean, meta


def _real(array: np.ndarray) -> bool:
    """Whether ``array`` holds real floating-point numbers (what :func:`save_probes` writes)."""
    return bool(np.issubdtype(array.dtype, np.floating))


def stack_targets(targets: Mapping[str, np.ndarray], n: int) -> tuple[tuple[str, ...], list[slice], np.ndarray]:
    names = tuple(targets)
    if not names:
        raise BindscopeError("give at least one target set to probe")
    mats = [np.asarray(targets[k], dtype=np.float32) for k in names]
    for k, m in zip(names, mats):
        if m.ndim != 2 or m.shape[0] != n:
            raise BindscopeError(f"targets {k!r} must be [{n}, L], got {m.shape}")
    return names, _blocks([m.shape[1] for m in mats]), np.concatenate(mats, axis=1)


def _blocks(widths: list[int]) -> list[slice]:
    edges = np.cumsum([0, *widths])
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _default_init(num_labels: int, dim: int, seed: int) -> torch.Tensor:
    """``nn.Linear``'s default weight initialisation, U(-1/sqrt(D), 1/sqrt(D)), seeded."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(num_labels, dim, generator=gen) * 2 - 1) / math.sqrt(dim)


def _inits(num_labels: int, dim: int, seeds: Sequence[int]) -> torch.Tensor:
    """``[F, L, D]``: :func:`_default_init` of each seed."""
    import torch

    return torch.stack([_default_init(num_labels, dim, s) for s in seeds])
