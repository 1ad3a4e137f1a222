"""The ``regularised`` probe solver (docs/method/03-probes.md): an L2-penalised soft-target cross-entropy, solved
to convergence, with its penalty chosen by cross-validation inside the training scenes.

One fit's objective, for bias-free probes ``W`` (all probes stacked, ``[L, D]``) on training scenes ``x_i``::

    sum over probes p of mean over scenes of -t_p · log softmax(W_p x_i)   +   lam · ||W S^½||²_F

    S = (1 - rho) · mean_i x_i x_iᵀ  +  rho · (mean_i ||x_i||² / D) · I

``S`` comes from the fit's own training scenes. With ``rho = 0`` (*whitened*) the penalty is ``lam`` times the mean
squared training logit: it is unchanged by any invertible linear map of the embedding, as linear recoverability
is, so a model's anisotropy (a few dominant directions, as in most text and image encoders) does not decide the
answer. With fewer training scenes than dimensions that fit is the minimum-norm interpolation of the training
logits, which is unstable when the scenes are about as many as the dimensions; the *shrinkage* ``rho`` mixes in
isotropic variance (``rho = 1``: the squared weight norm on inputs of unit root-mean-square norm), which shrinks the
directions of small variance there. ``lam`` and ``rho`` are unit-free (embeddings 100 times larger get the same
fit), so one grid means the same for every model.

The cross-entropy is convex. For ``rho > 0`` the penalty is strictly convex, so for every ``lam > 0`` the objective
has exactly one minimiser, whatever solver reaches it and wherever it starts (the unpenalised loss has none when a
probe separates its training scenes); it lies in the span of the training scenes (a component orthogonal to all of
them changes no training logit and only adds penalty). For ``rho = 0`` the penalty does not see those components
either: the fit takes the minimiser without them, the limit of ``rho -> 0``, again unique. The fits run in the
eigenbasis of the training scenes' second moment (directions above :data:`RANK_TOL` of the largest eigenvalue),
preconditioned per direction, with a batched L-BFGS that gives every fit its own history and line search, until
each probe's gradient norm (in the penalised coordinates ``W S^½``) is at most :data:`GRAD_TOL`. The gradient is
written out (per probe, each scene's softmax minus its targets, summed against its inputs; plus the penalty's),
so no autograd is needed. The settings are solved along a path (:func:`_solve_grid`): the strengths from the
largest down, and at each strength the shrinkages in order, each fit from where its solved neighbours point (the
largest strength from one Newton step from zero, :func:`newton_start`): where a fit starts changes only its
iterations.

The inputs may be numpy arrays or torch tensors (on any device): the same code runs on either through the array
API (``array_api_compat``), and the fit's arrays are of the inputs' kind. With numpy inputs torch is never
imported. Large inputs are read a block of rows at a time (:data:`CHUNK`, :data:`KEPT`), so no float64 copy of
all of them is made, and the fold fits run a few at a time.

Each probe's ``(rho, lam)`` is chosen on its training scenes only: k-fold cross-validation (folds drawn with the
fit's seed; each fold fit's ``S`` from its own training folds) over the shrinkages and a log grid of strengths,
scoring the held-out folds' mean soft cross-entropy. That score is smooth and proper, so its fold scores vary
little and rarely tie, where the set-separation accuracy of a fold of a few dozen scenes moves in steps. The
setting with the lowest mean wins. Every setting is fitted on all training scenes first; a fold fit starts from
that fit at its strength, shifted by the fold's own offset from it at the strength above (the same optimum, fewer
iterations), and runs on its training rows only. The settings whose mean held-out loss is within one
standard error (over folds) of the best form the *one-standard-error band*: the training scenes cannot tell them
apart, so a caller scores the band's fits to see whether an answer changes within it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
from array_api_compat import array_namespace, is_torch_array
from array_api_compat import device as device_of

from bindscope.core.errors import BindscopeError

if TYPE_CHECKING:
    import torch

    Array = np.ndarray | torch.Tensor
else:
    Array = Any
#: The kind of array a fit was given and returns: a numpy array or a torch tensor.
ArrayT = TypeVar("ArrayT", "np.ndarray", "torch.Tensor")

#: The default grids: strengths (half-decades) and shrinkages cross-validated.
DEFAULT_STRENGTHS = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)
DEFAULT_SHRINKAGE = (0.0, 0.01)
DEFAULT_FOLDS = 5
#: Converged: each probe's gradient norm (penalised coordinates) at most this; the loss is a mean over scenes.
GRAD_TOL = 1e-6
#: Eigen-directions of the training scenes kept: eigenvalue above this share of the largest.
RANK_TOL = 1e-10
#: L-BFGS curvature pairs kept per fit.
HISTORY = 10
#: Most halvings of one line search.
MAX_HALVINGS = 30
#: Most float64 elements of one block of logits (scenes x fits x labels); more scenes are taken a block at a time.
CHUNK = 2**21
#: Most float64 elements of the eigen-coordinates kept per solve; beyond it the fits read the inputs as given.
KEPT = 2**22
#: Most float64 elements of the inputs gathered per fit (one batched matmul for many small fits).
STACKED = 2**20
#: Most float64 elements of one solve's L-BFGS state (its curvature pairs); larger solves run in parts.
STATE_BUDGET = 2**24
#: Separates the fold draw's random stream from the scene split's (both seeded by the split seed).
FOLD_STREAM = 52


@dataclass(frozen=True)
class StrengthChoice:
    """How one probe's penalty was chosen on its training scenes, and how its fits converged.

    Attributes
    ----------
    shrinkages, grid
        The shrinkages ``rho`` and strengths ``lam`` cross-validated (each ascending).
    cv_loss, cv_se
        ``[rho][lam]``: the held-out soft cross-entropy's mean over folds, and its standard error.
    shrinkage, strength
        The chosen setting: the lowest ``cv_loss``.
    band
        The settings ``(rho, lam)`` whose ``cv_loss`` is within one standard error of the best.
    folds, n_train
        Cross-validation folds, and the training scenes they split.
    grad_norm
        The largest final gradient norm over the fits of the chosen setting and the band (folds and refits).
    cv_grad_norm
        The largest over every fit of this probe (a setting far from the best may stop short of the tolerance).
    """

    shrinkages: tuple[float, ...]
    grid: tuple[float, ...]
    cv_loss: tuple[tuple[float, ...], ...]
    cv_se: tuple[tuple[float, ...], ...]
    shrinkage: float
    strength: float
    band: tuple[tuple[float, float], ...]
    folds: int
    n_train: int
    grad_norm: float
    cv_grad_norm: float

    @property
    def converged(self) -> bool:
        """Whether the fits of the chosen setting and of the band reached :data:`GRAD_TOL`."""
        return self.grad_norm <= GRAD_TOL

    @property
    def at_edge(self) -> bool:
        """Whether the chosen strength is the grid's smallest or largest (a wider grid might choose beyond it)."""
        return len(self.grid) > 1 and self.strength in (self.grid[0], self.grid[-1])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values, ``converged`` and ``at_edge`` included."""
        return {
            "shrinkage": self.shrinkage,
            "strength": self.strength,
            "band": [list(s) for s in self.band],
            "shrinkages": list(self.shrinkages),
            "grid": list(self.grid),
            "cv_loss": [list(r) for r in self.cv_loss],
            "cv_se": [list(r) for r in self.cv_se],
            "folds": self.folds,
            "n_train": self.n_train,
            "grad_norm": self.grad_norm,
            "cv_grad_norm": self.cv_grad_norm,
            "converged": self.converged,
            "at_edge": self.at_edge,
        }


@dataclass
class RegularisedFit(Generic[ArrayT]):
    """Stacked regularised fits: the weights at each probe's chosen setting, every setting's refit, the band.

    ``weights`` and ``path`` are of the inputs' kind (numpy arrays or torch tensors, on the inputs' device) and dtype.
    """

    weights: ArrayT  # [F, L, D] on the raw inputs
    path: ArrayT  # [F, P, G, L, D]: every (rho, lam) fitted on all training scenes
    band: np.ndarray  # bool [F, B, P, G]: the settings within one standard error of each probe's best
    choices: list[list[StrengthChoice]]  # [F][B]

    @property
    def solver(self) -> np.ndarray:
        """Solver labels ``[F, B]``: ``regularised``, or ``regularised-unconverged`` (raise max_iter)."""
        labels = [["regularised" if c.converged else "regularised-unconverged" for c in row] for row in self.choices]
        return np.array(labels, dtype=object).reshape(len(self.choices), -1)


# -- checks -------------------------------------------------------------------------------------------------
def check_strengths(values: Sequence[float]) -> tuple[float, ...]:
    """The strength grid, ascending: at least one, each finite and positive, none repeated."""
    if not len(values):
        raise BindscopeError("give at least one L2 strength (e.g. --strengths 1e-3,1e-2,1e-1)")
    out = tuple(float(v) for v in values)
    bad = [v for v in out if not np.isfinite(v) or v <= 0]
    if bad:
        raise BindscopeError(f"L2 strengths must be finite and positive (for a unique optimum), got {bad}")
    if len(set(out)) != len(out):
        raise BindscopeError(f"L2 strengths repeat: {list(out)}")
    return tuple(sorted(out))


def check_shrinkage(values: Sequence[float]) -> tuple[float, ...]:
    """The shrinkage grid, ascending: at least one, each in [0, 1] (0 whitened, 1 isotropic), none repeated."""
    if not len(values):
        raise BindscopeError("give at least one shrinkage in [0, 1] (e.g. --shrinkage 0,0.01)")
    out = tuple(float(v) for v in values)
    bad = [v for v in out if not 0.0 <= v <= 1.0]
    if bad:
        raise BindscopeError(f"shrinkages must lie in [0, 1] (0: whitened, 1: isotropic), got {bad}")
    if len(set(out)) != len(out):
        raise BindscopeError(f"shrinkages repeat: {list(out)}")
    return tuple(sorted(out))


def fold_count(n: int, folds: int) -> int:
    """The folds used for ``n`` training scenes: ``folds``, or ``n`` when fewer (at least 2)."""
    if folds < 2:
        raise BindscopeError(f"cross-validation needs at least 2 folds, got {folds}")
    if n < 2:
        raise BindscopeError(
            f"the regularised probe chooses its penalty by cross-validation and needs at least 2 training "
            f"scenes, got {n}; use more scenes, a larger train fraction, or --optimizer lbfgs"
        )
    return min(folds, n)


def fold_ids(n: int, folds: int, seed: int) -> np.ndarray:
    """Fold of each of ``n`` training scenes (``[n]``, balanced), drawn with ``seed``."""
    perm = np.random.default_rng([seed, FOLD_STREAM]).permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[perm] = np.arange(n) % folds
    return out


# -- the eigenbasis -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Basis:
    """F fits' inputs in the eigenbasis of their training rows' second moment, at unit rms norm.

    The eigen-coordinates ``xe`` are kept when they are small (:data:`KEPT` elements); otherwise the fits read the
    inputs as given, a block of rows at a time, so that a large input is never copied whole in float64.
    """

    x: Array  # [F, n, D] the inputs as given (every row, held-out ones included)
    e: Array  # [F, r] eigenvalues of the training rows' scaled second moment (descending)
    v: Array  # [F, D, r] eigenvectors
    scale: Array  # [F] the training rows' root-mean-square norm c
    weight: Array  # [F, n] each row's weight in the loss (training rows 1/n_train, others 0)
    xe: Array | None  # [F, n, r] the scaled inputs in eigen-coordinates, or None (mapped per block)

    @classmethod
    def of(cls, x: Array, weight: Array) -> Basis:
        """The basis of inputs ``x`` ``[F, n, D]`` whose training rows have weights ``weight`` ``[F, n]`` (sum 1)."""
        xp = array_namespace(x, weight)
        weight = xp.astype(weight, xp.float64)
        second = _second_moment(x, weight)
        scale = xp.sqrt(xp.sum(xp.linalg.diagonal(second), axis=-1))
        scale = xp.where(scale > 0, scale, xp.ones_like(scale))
        second /= (scale * scale)[:, None, None]
        e, v = xp.linalg.eigh(second)
        del second
        e, v = xp.flip(e, axis=-1), xp.flip(v, axis=-1)
        top = e[:, :1]
        rank = int(xp.max(xp.sum(xp.astype(e > top * RANK_TOL, xp.int64), axis=-1))) if bool(xp.any(top > 0)) else 0
        e, v = xp.clip(e[:, :rank], min=0.0), xp.asarray(v[:, :, :rank], copy=True)
        f, n = weight.shape
        kept = None if f * n * rank > KEPT else _blocked(x, v / scale[:, None, None], rank)
        return cls(x, e, v, scale, weight, kept)

    def __getitem__(self, i: slice) -> Basis:
        kept = None if self.xe is None else self.xe[i]
        return Basis(self.x[i], self.e[i], self.v[i], self.scale[i], self.weight[i], kept)

    def rows(self, f: int, rows: slice) -> Array:
        """Rows ``rows`` of basis ``f`` in eigen-coordinates ``[m, r]`` (float64)."""
        if self.xe is not None:
            return self.xe[f, rows, :]
        xp = array_namespace(self.x)
        return (xp.astype(self.x[f, rows, :], xp.float64) @ self.v[f]) / self.scale[f]

    def as_given(self, f: int, rows: slice) -> Array:
        """Rows ``rows`` of basis ``f``'s inputs as given ``[m, D]`` (float64)."""
        xp = array_namespace(self.x)
        return xp.astype(self.x[f, rows, :], xp.float64)

    def penalty_weights(self, shrinkage: float) -> Array:
        """``[F, r]``: the penalty's weight on each eigen-direction (``S``'s eigenvalues in this basis)."""
        return (1 - shrinkage) * self.e + shrinkage / self.v.shape[1]  # the scaled inputs' trace is 1

    def coords(self, w: Array) -> Array:
        """Weights ``[F, Q, L, D]`` on the raw inputs in eigen-coordinates ``[F, Q, L, r]`` (their part in the span)."""
        xp = array_namespace(w)
        return (xp.astype(w, xp.float64) @ self.v[:, None]) * self.scale[:, None, None, None]

    def raw(self, w: Array) -> Array:
        """Weights ``[F, Q, L, r]`` in eigen-coordinates as weights ``[F, Q, L, D]`` on the raw inputs."""
        return (w @ self.v.mT[:, None]) / self.scale[:, None, None, None]


def _second_moment(x: Array, weight: Array) -> Array:
    """``[F, D, D]``: the weighted second moment ``sum_i weight_fi x_fi x_fiᵀ`` (float64, a block of rows at a time)."""
    xp = array_namespace(x)
    f, n, d = x.shape
    out = xp.zeros((f, d, d), dtype=xp.float64, device=device_of(x))
    step = max(1, CHUNK // max(1, d))
    for i in range(f):
        for lo in range(0, n, step):
            xc = xp.astype(x[i, lo : lo + step, :], xp.float64)
            out[i] += xc.mT @ (xc * weight[i, lo : lo + step, None])
    return out


def _blocked(x: Array, proj: Array, rank: int) -> Array:
    """``x @ proj`` ``[F, n, r]`` in float64, a block of rows at a time (no float64 copy of all of ``x``)."""
    xp = array_namespace(x)
    f, n, d = x.shape
    out = xp.empty((f, n, rank), dtype=xp.float64, device=device_of(x))
    step = max(1, CHUNK // max(1, f * d))
    for lo in range(0, n, step):
        out[:, lo : lo + step, :] = xp.astype(x[:, lo : lo + step, :], xp.float64) @ proj
    return out


def soft_cross_entropy(logits: Array, t: Array, blocks: list[slice]) -> Array:
    """Per scene and probe ``[..., B]``: ``-sum_l t_l log softmax(logits)_l`` within each block."""
    xp = array_namespace(logits, t)
    out = []
    for b in blocks:
        z = logits[..., b]
        top = xp.max(z, axis=-1, keepdims=True)
        lse = top + xp.log(xp.sum(xp.exp(z - top), axis=-1, keepdims=True))
        out.append(xp.sum(t[..., b] * (lse - z), axis=-1))
    return xp.stack(out, axis=-1)


def _loss_and_residual(z: Array, t: Array, rows: Array, blocks: list[slice], axis: int) -> Array:
    """The soft cross-entropy of logits ``z`` (labels last) against targets ``t`` (broadcast to ``z``), weighted by
    ``rows`` (``z``'s shape without its labels) and summed over ``axis``; ``z`` is overwritten with the gradient
    ``rows * (softmax * sum t - t)`` per block."""
    xp = array_namespace(z, t)
    values = []
    for b in blocks:
        zb, tb = z[..., b], t[..., b]
        top = xp.max(zb, axis=-1, keepdims=True)
        ez = xp.exp(zb - top)
        total = xp.sum(ez, axis=-1, keepdims=True)
        mass = xp.sum(tb, axis=-1, keepdims=True)
        values.append(xp.sum(rows * xp.sum(tb * (top + xp.log(total) - zb), axis=-1), axis=axis))
        z[..., b] = (ez * (mass / total) - tb) * rows[..., None]
    return xp.sum(xp.stack(values), axis=0)


# -- the solver -----------------------------------------------------------------------------------------------
def solve_penalised(
    basis: Basis,
    t: Array,
    blocks: list[slice],
    strength: Array,
    pi: Array,
    *,
    max_iter: int,
    init: Array | None = None,
) -> tuple[Array, Array]:
    """Minimise, for each basis f and setting q, ``sum_i weight_fi CE_i + sum_l strength_fql sum_k pi_fqk W_lk²``.

    Parameters
    ----------
    basis
        F fits' inputs and row weights (:class:`Basis`).
    t
        Targets ``[F, n, L]``.
    strength, pi
        L2 strength per label row ``[F, Q, L]``, and penalty weight per eigen-direction ``[F, Q, r]``.
    init
        Starting weights ``[F, Q, L, r]`` in eigen-coordinates (default zero): the optimum does not depend on it.

    Returns
    -------
    weights
        ``[F, Q, L, r]`` in eigen-coordinates.
    grad_norm
        ``[F, Q, B]``: each probe's final gradient norm in the penalised coordinates ``W_k sqrt(pi_k)``.
    """
    xp = array_namespace(basis.e, t)
    f, q, labels = strength.shape
    r = basis.e.shape[1]
    if f * q > 1 and 2 * HISTORY * f * q * labels * r > STATE_BUDGET:
        return _in_parts(basis, t, blocks, strength, pi, max_iter=max_iter, init=init)
    if r == 0:  # all-zero inputs: the optimum is zero
        zeros = xp.zeros((f, q, labels, 0), dtype=xp.float64, device=device_of(t))
        return zeros, xp.zeros((f, q, len(blocks)), dtype=xp.float64, device=device_of(t))
    problems = Penalised(basis, t, blocks, strength, pi)
    start = xp.zeros((f, q, labels, r), dtype=xp.float64, device=device_of(t)) if init is None else init
    u, norm = batched_lbfgs(problems, problems.to_u(start), max_iter=max_iter)
    return xp.reshape(problems.to_w(u), (f, q, labels, r)), xp.reshape(norm, (f, q, len(blocks)))


def newton_start(basis: Basis, t: Array, blocks: list[slice], strength: Array, pi: Array) -> Array:
    """``[F, Q, L, r]``: one Newton step from zero weights, in closed form.

    At zero logits a block of ``L_b`` labels has the loss Hessian ``(I - 11ᵀ/L_b) / L_b`` per scene (targets that
    sum to one), and the gradient ``-(t - 1/L_b)``, whose rows sum to zero. So in the eigenbasis, where the
    inputs' second moment is ``diag(e)``, the step is ``W_lk = c_lk / (e_k / L_b + 2 lam_l pi_k)`` with
    ``c = (t - 1/L_b)ᵀ diag(weight) x_e``: a penalised least-squares fit of the centred targets. Close to the
    optimum for large strengths (whose logits stay near zero), it starts the largest strength of the grid.
    """
    xp = array_namespace(basis.e, t)
    f, n, labels = t.shape
    r = basis.e.shape[1]
    width = xp.asarray(
        np.concatenate([np.full(b.stop - b.start, b.stop - b.start, dtype=np.float64) for b in blocks]),
        device=device_of(t),
    )
    c = xp.zeros((f, labels, r), dtype=xp.float64, device=device_of(t))
    step = max(1, CHUNK // max(1, labels + r))
    for i in range(f):
        for lo in range(0, n, step):
            rows = slice(lo, lo + step)
            tc = xp.astype(t[i, rows, :], xp.float64)
            centred = xp.concat([tc[:, b] - xp.mean(tc[:, b], axis=-1, keepdims=True) for b in blocks], axis=-1)
            c[i] += (centred * basis.weight[i, rows, None]).mT @ basis.rows(i, rows)
    curvature = basis.e[:, None, None, :] / width[:, None]  # [F, 1, L, r]
    return c[:, None] / (curvature + 2 * strength[..., None] * pi[:, :, None, :])


class Penalised:
    """N = F x Q independent penalised fits (basis f, setting q), evaluated on a selected subset of them.

    The parameters of fit i are ``u_i`` ``[L * r]``, its weights in eigen-coordinates ``u_i * precond_i``:
    ``precond = (e + 4 strength pi)^-½`` per label row and direction, about the Hessian's diagonal^-½ (the
    softmax's curvature is at most ½), so that every fit is about equally well conditioned. The gradient is
    written out: per block of labels, ``softmax - targets`` of each scene, summed against its inputs (one matmul
    per basis for all its selected fits), plus the penalty's ``2 strength pi W``.
    """

    def __init__(self, basis: Basis, t: Array, blocks: list[slice], strength: Array, pi: Array) -> None:
        xp = array_namespace(basis.e, t)
        f, q, labels = strength.shape
        r = basis.e.shape[1]
        self.xp, self.basis, self.t, self.blocks, self.shape = xp, basis, t, blocks, (f * q, labels, r)
        pi = xp.astype(pi, xp.float64)[:, :, None, :]
        strength = xp.astype(strength, xp.float64)[..., None]
        self.of_basis = np.repeat(np.arange(f), q)
        self.pen = xp.reshape(strength * pi, self.shape)
        precond = 1 / xp.sqrt(basis.e[:, None, None, :] + 4 * strength * pi)  # [F, Q, L, r]
        self.precond = xp.reshape(precond, self.shape)
        self.natural = xp.reshape(precond * xp.sqrt(pi), self.shape)  # d/du -> d/d(W √pi)
        self.select(xp.arange(f * q, device=device_of(t)))

    def to_u(self, w: Array) -> Array:
        """Parameters ``[N, L * r]`` of weights ``[..., L, r]`` in eigen-coordinates."""
        xp = self.xp
        return xp.reshape(xp.reshape(xp.astype(w, xp.float64), self.shape) / self.precond, (self.shape[0], -1))

    def to_w(self, u: Array) -> Array:
        """Weights ``[N, L, r]`` in eigen-coordinates of parameters ``[N, L * r]``."""
        return self.xp.reshape(u, self.shape) * self.precond

    def select(self, idx: Array) -> None:
        """Evaluate the fits ``idx`` from now on (their settings gathered once, grouped by basis; where the inputs
        of all of them fit in :data:`STACKED` elements, gathered per fit for one batched matmul)."""
        xp = self.xp
        self.idx = idx
        self.sel_precond, self.sel_pen, self.sel_natural = self.precond[idx], self.pen[idx], self.natural[idx]
        owner = self.of_basis[to_numpy(idx)]
        basis, dev = self.basis, device_of(idx)
        self.groups = [(int(b), xp.asarray(np.flatnonzero(owner == b), device=dev)) for b in np.unique(owner)]
        self.stacked: tuple[Array, Array, Array] | None = None
        if len(self.groups) > 1 and basis.xe is not None and owner.size * math.prod(basis.xe.shape[1:]) <= STACKED:
            of = xp.asarray(owner, device=dev)
            self.stacked = (basis.xe[of], xp.astype(self.t[of], xp.float64), basis.weight[of])

    def value_and_grad(self, u: Array) -> tuple[Array, Array]:
        """Objective values ``[M]`` and gradients ``[M, L * r]`` of the selected fits at parameters ``u``."""
        xp = self.xp
        w = xp.reshape(u, (-1, *self.shape[1:])) * self.sel_precond
        if self.stacked is not None:
            xe, t, rows = self.stacked
            z = xe @ w.mT  # [M, n, L]
            value = _loss_and_residual(z, t, rows, self.blocks, axis=1)
            grad = z.mT @ xe
        elif len(self.groups) == 1:
            value, grad = self._data(self.groups[0][0], w)
        else:
            value = xp.zeros(w.shape[0], dtype=w.dtype, device=device_of(w))
            grad = xp.zeros_like(w)
            for b, pos in self.groups:
                value[pos], grad[pos] = self._data(b, w[pos])
        value = value + xp.sum(self.sel_pen * w * w, axis=(-1, -2))
        grad = (grad + 2 * self.sel_pen * w) * self.sel_precond
        return value, xp.reshape(grad, (w.shape[0], -1))

    def _data(self, b: int, w: Array) -> tuple[Array, Array]:
        """The data term of basis ``b``'s fits with weights ``w`` ``[q, L, r]``: values ``[q]``, gradients
        ``[q, L, r]``, a block of rows at a time (each one matmul for the logits and one for the gradient). Without
        kept eigen-coordinates the weights are mapped to the inputs as given instead (``W V^T / c``, and the
        gradient back), which costs the same matmuls when ``r`` is ``D``."""
        xp, basis = self.xp, self.basis
        q, labels, r = w.shape
        flat = xp.reshape(w, (q * labels, r))
        proj = None if basis.xe is not None else basis.v[b] / basis.scale[b]  # [D, r]
        if proj is not None:
            flat = flat @ proj.mT  # [qL, D]
        value = xp.zeros(q, dtype=w.dtype, device=device_of(w))
        grad = xp.zeros(flat.shape, dtype=w.dtype, device=device_of(w))
        n = self.t.shape[1]
        step = max(1, CHUNK // (q * labels))
        for lo in range(0, n, step):
            rows = slice(lo, lo + step)
            xc = basis.rows(b, rows) if proj is None else basis.as_given(b, rows)
            z = xp.reshape(xc @ flat.mT, (xc.shape[0], q, labels))
            tc = xp.astype(self.t[b, rows, None, :], xp.float64)
            value += _loss_and_residual(z, tc, basis.weight[b, rows, None], self.blocks, axis=0)
            grad += xp.reshape(z, (xc.shape[0], q * labels)).mT @ xc
        if proj is not None:
            grad = grad @ proj  # [qL, r]
        return value, xp.reshape(grad, (q, labels, r))

    def norm(self, grad: Array) -> Array:
        """Each selected fit's probe gradient norms ``[M, B]`` in the penalised coordinates."""
        xp = self.xp
        g = xp.reshape(grad, (-1, *self.shape[1:])) / self.sel_natural
        return xp.stack([xp.sqrt(xp.sum(g[:, b] * g[:, b], axis=(-1, -2))) for b in self.blocks], axis=-1)


def _in_parts(
    basis: Basis,
    t: Array,
    blocks: list[slice],
    strength: Array,
    pi: Array,
    *,
    max_iter: int,
    init: Array | None,
) -> tuple[Array, Array]:
    """:func:`solve_penalised` over the bases one at a time, or over halves of one basis's settings."""
    xp = array_namespace(basis.e, t)
    f, q = strength.shape[:2]
    if f > 1:
        parts = [
            solve_penalised(
                basis[i : i + 1],
                t[i : i + 1],
                blocks,
                strength[i : i + 1],
                pi[i : i + 1],
                max_iter=max_iter,
                init=None if init is None else init[i : i + 1],
            )
            for i in range(f)
        ]
        return xp.concat([p[0] for p in parts]), xp.concat([p[1] for p in parts])
    halves = [
        solve_penalised(
            basis, t, blocks, strength[:, h], pi[:, h], max_iter=max_iter, init=None if init is None else init[:, h]
        )
        for h in (slice(0, q // 2), slice(q // 2, q))
    ]
    return xp.concat([p[0] for p in halves], axis=1), xp.concat([p[1] for p in halves], axis=1)


def batched_lbfgs(
    problems: Penalised, u: Array, *, max_iter: int, tol: float = GRAD_TOL, history: int = HISTORY
) -> tuple[Array, Array]:
    """L-BFGS on N independent problems at once: each its own curvature pairs, line search and stopping rule.

    Only the problems still running are evaluated: as soon as one stops, the state of the others (parameters,
    gradients, curvature pairs) is gathered afresh (:meth:`Penalised.select`), so no step reads a stopped one.

    Parameters
    ----------
    problems
        The N problems (:class:`Penalised`, or anything with its ``select``, ``value_and_grad`` and ``norm``).
    u
        Starting parameters ``[N, P]``.

    Returns
    -------
    The parameters ``[N, P]`` and the final gradient norms ``[N, B]`` (a problem stops when all its norms are at
    most ``tol``, or after ``max_iter`` iterations).
    """
    xp = array_namespace(u)
    n = u.shape[0]
    active = xp.arange(n, device=device_of(u))
    problems.select(active)
    out = xp.asarray(u, copy=True)
    value, grad = problems.value_and_grad(out)
    norms = problems.norm(grad)
    out_norms = xp.asarray(norms, copy=True)
    u = xp.asarray(out, copy=True)
    s_hist = xp.zeros((history, *u.shape), dtype=u.dtype, device=device_of(u))
    y_hist, rho = xp.zeros_like(s_hist), xp.zeros((history, n), dtype=u.dtype, device=device_of(u))
    for it in range(max_iter):
        running = xp.max(norms, axis=-1) > tol
        if not bool(xp.all(running)):
            out[active[~running]], out_norms[active[~running]] = u[~running], norms[~running]
            active, u, value, grad, norms = active[running], u[running], value[running], grad[running], norms[running]
            s_hist, y_hist, rho = s_hist[:, running], y_hist[:, running], rho[:, running]
            if not active.shape[0]:
                return out, out_norms
            problems.select(active)
        direction = -_two_loop(grad, s_hist, y_hist, rho, it)
        slope = xp.vecdot(grad, direction)
        bad = slope >= 0  # not a descent direction (never for a convex objective, up to rounding): use -grad
        direction = xp.where(bad[:, None], -grad, direction)
        slope = xp.where(bad, -xp.vecdot(grad, grad), slope)
        step = xp.ones_like(slope)
        if it == 0:
            step = xp.minimum(1 / xp.clip(xp.sum(xp.abs(grad), axis=-1), min=1e-300), step)
        new_value, new_grad, step = _armijo(problems, u, value, direction, slope, step)
        s, y = step[:, None] * direction, new_grad - grad
        sy = xp.vecdot(s, y)
        slot = it % history
        s_hist[slot], y_hist[slot] = s, y
        rho[slot] = xp.where(sy > 1e-12 * xp.vecdot(y, y), 1 / xp.clip(sy, min=1e-300), xp.zeros_like(sy))
        u, value, grad, norms = u + s, new_value, new_grad, problems.norm(new_grad)
    out[active], out_norms[active] = u, norms
    return out, out_norms


def _two_loop(grad: Array, s_hist: Array, y_hist: Array, rho: Array, it: int) -> Array:
    """The L-BFGS product ``H grad`` per problem (pairs with ``rho == 0`` are skipped)."""
    xp = array_namespace(grad)
    order = [(it - 1 - j) % rho.shape[0] for j in range(min(it, rho.shape[0]))]  # newest first
    q = xp.asarray(grad, copy=True)
    alphas = []
    for j in order:
        a = rho[j] * xp.vecdot(s_hist[j], q)
        q -= a[:, None] * y_hist[j]
        alphas.append(a)
    gamma = xp.ones_like(grad[:, 0])
    if order:  # scale by the newest pair: s·y / y·y
        newest = order[0]
        yy = xp.vecdot(y_hist[newest], y_hist[newest])
        gamma = xp.where(rho[newest] > 0, 1 / xp.clip(rho[newest] * yy, min=1e-300), gamma)
    r = gamma[:, None] * q
    for j, a in zip(reversed(order), reversed(alphas)):
        b = rho[j] * xp.vecdot(y_hist[j], r)
        r += (a - b)[:, None] * s_hist[j]
    return r


def _armijo(
    problems: Penalised, u: Array, value: Array, direction: Array, slope: Array, step: Array
) -> tuple[Array, Array, Array]:
    """Backtracking per problem to sufficient decrease, up to rounding (a problem that finds none stays put)."""
    xp = array_namespace(u)
    noise = 1e-14 * xp.clip(xp.abs(value), min=1.0)
    for _ in range(MAX_HALVINGS):
        new_value, new_grad = problems.value_and_grad(u + step[:, None] * direction)
        ok = new_value <= value + 1e-4 * step * slope + noise
        if bool(xp.all(ok)):
            return new_value, new_grad, step
        step = xp.where(ok, step, step / 2)
    step = xp.where(ok, step, xp.zeros_like(step))
    new_value, new_grad = problems.value_and_grad(u + step[:, None] * direction)
    return new_value, new_grad, step


# -- cross-validation, refits, choice -------------------------------------------------------------------------
def fit_regularised(
    x: ArrayT,
    t: ArrayT,
    blocks: list[slice],
    seeds: Sequence[int],
    *,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    shrinkage: Sequence[float] = DEFAULT_SHRINKAGE,
    folds: int = DEFAULT_FOLDS,
    max_iter: int = 500,
) -> RegularisedFit[ArrayT]:
    """Fit F sets of probes, each probe's penalty chosen by k-fold cross-validation on its own training scenes.

    Parameters
    ----------
    x, t
        Training inputs ``[F, n, D]`` and stacked soft targets ``[F, n, L]`` (probe b owns columns ``blocks[b]``):
        numpy arrays or torch tensors (any device); the fit's arrays are of the same kind, in ``x``'s dtype.
    seeds
        Per fit, the seed of its fold draw.
    strengths, shrinkage
        The grids of L2 strengths ``lam`` and shrinkages ``rho`` cross-validated.
    folds
        Cross-validation folds (fewer when there are fewer training scenes).
    max_iter
        L-BFGS iterations at most per fit.
    """
    xp = array_namespace(x, t)
    f, n, d = x.shape
    grid, rhos = check_strengths(strengths), check_shrinkage(shrinkage)
    k = fold_count(n, folds)
    settings = (rhos, grid)
    full = Basis.of(x, xp.full((f, n), 1.0 / n, dtype=xp.float64, device=device_of(x)))
    w_full, norm_full = _solve_grid(full, t, blocks, settings, max_iter)  # [F, Q, L, r]
    path: Array = full.raw(w_full)  # [F, Q, L, D]
    del full, w_full
    fold = np.stack([fold_ids(n, k, s) for s in seeds])  # [F, n]
    scores = np.empty((f, k, len(rhos) * len(grid), len(blocks)))
    norms = np.empty((f, k + 1, len(rhos) * len(grid), len(blocks)))
    norms[:, k] = to_numpy(xp.reshape(norm_full, norms[:, k].shape))
    pairs = [(i, j) for i in range(f) for j in range(k)]
    train = max(int(np.sum(fold[i] != j)) for i, j in pairs)
    per_part = max(1, KEPT // (train * d))
    for lo in range(0, len(pairs), per_part):
        part = pairs[lo : lo + per_part]
        part_scores, part_norms = _fit_folds(x, t, blocks, fold, part, path, settings, max_iter)
        for (i, j), s, g in zip(part, part_scores, part_norms):
            scores[i, j], norms[i, j] = s, g
    shape: tuple[int, ...] = (f, len(rhos), len(grid))
    return _choose(
        scores.reshape(f, k, *shape[1:], len(blocks)),
        xp.astype(xp.reshape(path, (*shape, *path.shape[2:])), x.dtype),
        norms.max(axis=1).reshape(*shape, len(blocks)),
        blocks,
        settings,
        n,
    )


def _fit_folds(
    x: Array,
    t: Array,
    blocks: list[slice],
    fold: np.ndarray,
    pairs: list[tuple[int, int]],
    path: Array,
    settings: tuple[tuple[float, ...], tuple[float, ...]],
    max_iter: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The fold fits ``pairs`` (seed i, fold j), each from seed i's fits on all training scenes ``path``
    ``[F, Q, L, D]``, on their training rows only: held-out scores ``[len(pairs), Q, B]`` (mean soft
    cross-entropy) and gradient norms ``[len(pairs), Q, B]``."""
    xp = array_namespace(x, t)
    dev = device_of(x)
    train = [np.flatnonzero(fold[i] != j) for i, j in pairs]
    width = max(len(r) for r in train)
    rows = np.stack([np.pad(r, (0, width - len(r))) for r in train])  # padded rows repeat row 0, with weight 0
    weight = np.stack([np.arange(width) < len(r) for r in train]) / np.array([[len(r)] for r in train])
    gather = xp.asarray(rows, device=dev)
    xs = xp.stack([x[i][gather[a]] for a, (i, _) in enumerate(pairs)])
    ts = xp.stack([t[i][gather[a]] for a, (i, _) in enumerate(pairs)])
    basis = Basis.of(xs, xp.asarray(weight, device=dev))
    guide = xp.concat([basis[a : a + 1].coords(path[i : i + 1]) for a, (i, _) in enumerate(pairs)])
    w, norm = _solve_grid(basis, ts, blocks, settings, max_iter, guide=guide)
    scores = []
    for a, (i, j) in enumerate(pairs):
        held = xp.asarray(np.flatnonzero(fold[i] == j), device=dev)
        raw = basis[a : a + 1].raw(w[a : a + 1])[0]  # [Q, L, D]
        scores.append(_held_out_loss(x[i][held], t[i][held], raw, blocks))
    return np.stack(scores), to_numpy(norm)


def _held_out_loss(x: Array, t: Array, w: Array, blocks: list[slice]) -> np.ndarray:
    """``[Q, B]``: the mean soft cross-entropy of weights ``w`` ``[Q, L, D]`` on rows ``x`` ``[m, D]``."""
    xp = array_namespace(x, w)
    q, labels, _ = w.shape
    flat = xp.reshape(w, (q * labels, -1)).mT
    total = xp.zeros((q, len(blocks)), dtype=xp.float64, device=device_of(w))
    step = max(1, CHUNK // (q * labels))
    for lo in range(0, x.shape[0], step):
        z = xp.reshape(xp.astype(x[lo : lo + step], xp.float64) @ flat, (-1, q, labels))
        total += xp.sum(soft_cross_entropy(z, xp.astype(t[lo : lo + step, None, :], xp.float64), blocks), axis=0)
    return to_numpy(total) / x.shape[0]


def to_numpy(a: Array) -> np.ndarray:
    """A numpy array or a torch tensor (any device) as a numpy array."""
    return a.detach().cpu().numpy() if is_torch_array(a) else np.asarray(a)


def _solve_grid(
    basis: Basis,
    t: Array,
    blocks: list[slice],
    settings: tuple[tuple[float, ...], tuple[float, ...]],
    max_iter: int,
    guide: Array | None = None,
) -> tuple[Array, Array]:
    """Every ``(rho, lam)`` of the grids (rho-major) fitted on each basis: weights ``[F, Q, L, r]`` and gradient
    norms ``[F, Q, B]``.

    The settings are solved along a path, every basis at once: the strengths from the largest down, and at each
    strength the shrinkages in order. Each fit starts where its solved neighbours point (where it starts changes
    only the iterations, not the optimum): ``(rho, lam)`` from the fit at ``(rho, lam')`` (``lam'`` the strength
    above) moved by the step from ``(rho', lam')`` to ``(rho', lam)`` (``rho'`` the shrinkage before); the first
    shrinkage from ``(rho, lam')``; the largest strength from :func:`newton_start`. With ``guide`` (``[F, Q, L,
    r]``: fits of nearby problems, e.g. on all training scenes, in this basis), the first shrinkage starts from the
    guide's fit at its setting plus this basis's offset from the guide at ``lam'``, and the largest strength from
    the guide's fits.
    """
    xp = array_namespace(basis.e, t)
    rhos, grid = settings
    f, labels, g = basis.e.shape[0], t.shape[2], len(grid)
    fits: dict[tuple[int, int], tuple[Array, Array]] = {}
    for j in reversed(range(g)):
        for p, rho in enumerate(rhos):
            strength = xp.full((f, 1, labels), grid[j], dtype=xp.float64, device=device_of(t))
            pi = basis.penalty_weights(rho)[:, None]
            q, above = p * g + j, p * g + j + 1
            if j == g - 1:
                start = newton_start(basis, t, blocks, strength, pi) if guide is None else guide[:, q : q + 1]
            elif p > 0:
                start = fits[p - 1, j][0] + fits[p, j + 1][0] - fits[p - 1, j + 1][0]
            elif guide is None:
                start = fits[p, j + 1][0]
            else:
                start = guide[:, q : q + 1] + fits[p, j + 1][0] - guide[:, above : above + 1]
            fits[p, j] = solve_penalised(basis, t, blocks, strength, pi, max_iter=max_iter, init=start)
    order = [fits[p, j] for p in range(len(rhos)) for j in range(g)]  # rho-major
    return xp.concat([w for w, _ in order], axis=1), xp.concat([n for _, n in order], axis=1)


def _choose(
    scores: np.ndarray,
    path: Array,
    norms: np.ndarray,
    blocks: list[slice],
    settings: tuple[tuple[float, ...], tuple[float, ...]],
    n: int,
) -> RegularisedFit[Any]:
    """Each probe's setting (lowest mean held-out loss) and band, from the fold scores ``[F, k, P, G, B]``, the
    refits ``[F, P, G, L, D]`` and the largest gradient norm of each setting's fits ``[F, P, G, B]``."""
    xp = array_namespace(path)
    rhos, grid = settings
    f, k = scores.shape[:2]
    mean = scores.mean(1)  # [F, P, G, B]
    se = scores.std(1, ddof=1) / np.sqrt(k)
    weights = xp.zeros_like(path[:, 0, 0])
    band = np.zeros((f, len(blocks), len(rhos), len(grid)), dtype=bool)
    choices = []
    for i in range(f):
        row = []
        for j, b in enumerate(blocks):
            m, s = mean[i, ..., j], se[i, ..., j]
            p, g = np.unravel_index(int(m.argmin()), m.shape)
            band[i, j] = m <= m[p, g] + s[p, g]
            weights[i, b] = path[i, int(p), int(g), b]
            row.append(
                StrengthChoice(
                    shrinkages=rhos,
                    grid=grid,
                    cv_loss=tuple(tuple(float(v) for v in r) for r in m),
                    cv_se=tuple(tuple(float(v) for v in r) for r in s),
                    shrinkage=rhos[p],
                    strength=grid[g],
                    band=tuple((rhos[a], grid[c]) for a, c in zip(*np.nonzero(band[i, j]))),
                    folds=k,
                    n_train=n,
                    grad_norm=float(norms[i, ..., j][band[i, j]].max()),
                    cv_grad_norm=float(norms[i, ..., j].max()),
                )
            )
        choices.append(row)
    return RegularisedFit(weights, path, band, choices)
