"""A frozen copy of the ``regularised`` probe solver as it was before issue 57 (commit 00ed103): torch tensors only,
gradients by ``torch.autograd``, every strength of the grid from zero. ``benchmarks/bench_probe_regularised.py``
times it as the baseline of ``bindscope.estimators.regularised``; nothing else imports it.

The ``regularised`` probe solver (docs/method/03-probes.md): an L2-penalised soft-target cross-entropy, solved
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
each probe's gradient norm (in the penalised coordinates ``W S^½``) is at most :data:`GRAD_TOL`.

Each probe's ``(rho, lam)`` is chosen on its training scenes only: k-fold cross-validation (folds drawn with the
fit's seed; each fold fit's ``S`` from its own training folds) over the shrinkages and a log grid of strengths,
scoring the held-out folds' mean soft cross-entropy. That score is smooth and proper, so its fold scores vary
little and rarely tie, where the set-separation accuracy of a fold of a few dozen scenes moves in steps. The
setting with the lowest mean wins. Every setting is fitted on all training scenes first (the fold fits start
from those fits: the same optimum, fewer iterations). The settings whose mean held-out loss is within one
standard error (over folds) of the best form the *one-standard-error band*: the training scenes cannot tell them
apart, so a caller scores the band's fits to see whether an answer changes within it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bindscope.core.errors import BindscopeError

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
#: Most float64 elements of one solve's stacked logits or L-BFGS history; larger solves run in parts.
LOGIT_BUDGET = 2**25
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
class RegularisedFit:
    """Stacked regularised fits: the weights at each probe's chosen setting, every setting's refit, the band."""

    weights: torch.Tensor  # [F, L, D] on the raw inputs
    path: torch.Tensor  # [F, P, G, L, D]: every (rho, lam) fitted on all training scenes
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
    """F fits' inputs in the eigenbasis of their training rows' second moment, at unit rms norm."""

    xe: torch.Tensor  # [F, n, r] scaled inputs (every row, held-out ones included) in eigen-coordinates
    e: torch.Tensor  # [F, r] eigenvalues of the training rows' scaled second moment (descending)
    v: torch.Tensor  # [F, D, r] eigenvectors
    scale: torch.Tensor  # [F] the training rows' root-mean-square norm c
    weight: torch.Tensor  # [F, n] each row's weight in the loss (training rows 1/n_train, others 0)

    @classmethod
    def of(cls, x: torch.Tensor, weight: torch.Tensor) -> Basis:
        """The basis of inputs ``x`` ``[F, n, D]`` whose training rows have weights ``weight`` ``[F, n]`` (sum 1)."""
        x, weight = x.double(), weight.double()
        scale = (x.square().sum(-1) * weight).sum(-1).sqrt()
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        xs = x / scale[:, None, None]
        e, v = torch.linalg.eigh(xs.transpose(1, 2) @ (xs * weight[..., None]))
        e, v = e.flip(-1), v.flip(-1)
        rank = int((e > e[:, :1] * RANK_TOL).sum(-1).max()) if bool(e[:, 0].gt(0).any()) else 0
        e, v = e[:, :rank].clamp_min(0), v[:, :, :rank]
        return cls(xs @ v, e, v, scale, weight)

    def __getitem__(self, i: slice) -> Basis:
        return Basis(self.xe[i], self.e[i], self.v[i], self.scale[i], self.weight[i])

    def penalty_weights(self, shrinkage: float) -> torch.Tensor:
        """``[F, r]``: the penalty's weight on each eigen-direction (``S``'s eigenvalues in this basis)."""
        return (1 - shrinkage) * self.e + shrinkage / self.v.shape[1]  # the scaled inputs' trace is 1

    def coords(self, w: torch.Tensor) -> torch.Tensor:
        """Weights ``[F, Q, L, D]`` on the raw inputs in eigen-coordinates ``[F, Q, L, r]`` (their part in the span)."""
        return (w.double() * self.scale[:, None, None, None]) @ self.v[:, None]

    def raw(self, w: torch.Tensor) -> torch.Tensor:
        """Weights ``[F, Q, L, r]`` in eigen-coordinates as weights ``[F, Q, L, D]`` on the raw inputs."""
        return (w @ self.v.transpose(1, 2)[:, None]) / self.scale[:, None, None, None]


def soft_cross_entropy(logits: torch.Tensor, t: torch.Tensor, blocks: list[slice]) -> torch.Tensor:
    """Per scene and probe ``[..., B]``: ``-sum_l t_l log softmax(logits)_l`` within each block."""
    return torch.stack([-(t[..., b] * torch.log_softmax(logits[..., b], dim=-1)).sum(-1) for b in blocks], dim=-1)


def stacked_logits(xe: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Logits ``[F, n, Q, L]`` of inputs ``[F, n, r]`` under Q weight sets ``[F, Q, L, r]`` (one matmul)."""
    f, q, labels, r = w.shape
    return torch.bmm(xe, w.reshape(f, q * labels, r).transpose(1, 2)).view(f, -1, q, labels)


# -- the solver -----------------------------------------------------------------------------------------------
def solve_penalised(
    basis: Basis,
    t: torch.Tensor,
    blocks: list[slice],
    strength: torch.Tensor,
    pi: torch.Tensor,
    *,
    max_iter: int,
    init: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
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
    f, q, labels = strength.shape
    r = basis.xe.shape[2]
    if f * q > 1 and f * q * max(basis.xe.shape[1], HISTORY * r) * labels > LOGIT_BUDGET:
        return _in_parts(basis, t, blocks, strength, pi, max_iter=max_iter, init=init)
    if r == 0:  # all-zero inputs: the optimum is zero
        return basis.xe.new_zeros(f, q, labels, 0), basis.xe.new_zeros(f, q, len(blocks))
    problems = Penalised(basis, t, blocks, strength, pi)
    u0 = basis.xe.new_zeros(f * q, labels * r) if init is None else problems.to_u(init)
    u, norm = batched_lbfgs(problems, u0, max_iter=max_iter)
    return problems.to_w(u).view(f, q, labels, r), norm.view(f, q, -1)


class Penalised:
    """N = F x Q independent penalised fits (basis f, setting q), evaluated on a selected subset of them.

    The parameters of fit i are ``u_i`` ``[L * r]``, its weights in eigen-coordinates ``u_i * precond_i``:
    ``precond = (e + 4 strength pi)^-½`` per label row and direction, about the Hessian's diagonal^-½ (the
    softmax's curvature is at most ½), so that every fit is about equally well conditioned.
    """

    def __init__(
        self, basis: Basis, t: torch.Tensor, blocks: list[slice], strength: torch.Tensor, pi: torch.Tensor
    ) -> None:
        f, q, labels = strength.shape
        r = basis.xe.shape[2]
        pi = pi.double()[:, :, None, :]
        self.basis, self.t, self.blocks, self.shape = basis, t.double(), blocks, (f * q, labels, r)
        self.of_basis = torch.arange(f, device=t.device).repeat_interleave(q)
        self.pen = (strength.double()[..., None] * pi).reshape(self.shape)
        self.precond = (basis.e[:, None, None, :] + 4 * strength.double()[..., None] * pi).rsqrt().reshape(self.shape)
        self.natural = self.precond * pi.expand(f, q, labels, r).reshape(self.shape).sqrt()  # d/du -> d/d(W √pi)
        self.select(torch.arange(f * q, device=t.device))

    def to_u(self, w: torch.Tensor) -> torch.Tensor:
        """Parameters ``[N, L * r]`` of weights ``[..., L, r]`` in eigen-coordinates."""
        return (w.double().reshape(self.shape) / self.precond).flatten(1)

    def to_w(self, u: torch.Tensor) -> torch.Tensor:
        """Weights ``[N, L, r]`` in eigen-coordinates of parameters ``[N, L * r]``."""
        return u.view(self.shape) * self.precond

    def select(self, idx: torch.Tensor) -> None:
        """Evaluate the fits ``idx`` from now on (their inputs gathered once)."""
        b = self.of_basis[idx]
        self.idx, self.xe, self.tt, self.rows = idx, self.basis.xe[b], self.t[b], self.basis.weight[b]

    def value_and_grad(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective values ``[M]`` and gradients ``[M, L * r]`` of the selected fits at parameters ``u``."""
        u = u.detach().requires_grad_(True)
        w = u.view(-1, *self.shape[1:]) * self.precond[self.idx]
        logits = torch.bmm(self.xe, w.transpose(1, 2))
        data = (soft_cross_entropy(logits, self.tt, self.blocks).sum(-1) * self.rows).sum(-1)
        value = data + (self.pen[self.idx] * w * w).sum((-1, -2))
        (grad,) = torch.autograd.grad(value.sum(), u)
        return value.detach(), grad

    def norm(self, grad: torch.Tensor) -> torch.Tensor:
        """Each selected fit's probe gradient norms ``[M, B]`` in the penalised coordinates."""
        g = grad.view(-1, *self.shape[1:]) / self.natural[self.idx]
        return torch.stack([g[:, b].square().sum((-1, -2)).sqrt() for b in self.blocks], dim=-1)


def _in_parts(
    basis: Basis,
    t: torch.Tensor,
    blocks: list[slice],
    strength: torch.Tensor,
    pi: torch.Tensor,
    *,
    max_iter: int,
    init: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`solve_penalised` over the bases one at a time, or over halves of one basis's settings."""
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
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    halves = [
        solve_penalised(
            basis, t, blocks, strength[:, h], pi[:, h], max_iter=max_iter, init=None if init is None else init[:, h]
        )
        for h in (slice(0, q // 2), slice(q // 2, q))
    ]
    return torch.cat([p[0] for p in halves], 1), torch.cat([p[1] for p in halves], 1)


def batched_lbfgs(
    problems: Penalised, u: torch.Tensor, *, max_iter: int, tol: float = GRAD_TOL, history: int = HISTORY
) -> tuple[torch.Tensor, torch.Tensor]:
    """L-BFGS on N independent problems at once: each its own curvature pairs, line search and stopping rule.

    Only the problems still running are evaluated: when a quarter of the evaluated ones have stopped, the
    rest are gathered afresh (:meth:`Penalised.select`).

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
    n = u.shape[0]
    u = u.clone()
    s_hist, y_hist, rho = u.new_zeros(history, *u.shape), u.new_zeros(history, *u.shape), u.new_zeros(history, n)
    group = torch.arange(n, device=u.device)
    problems.select(group)
    value, grad = problems.value_and_grad(u)
    norms = problems.norm(grad)
    for it in range(max_iter):
        running = norms[group].amax(-1) > tol
        if not bool(running.any()):
            break
        if int(running.sum()) <= 0.75 * len(group):
            group, running = group[running], running[running]
            problems.select(group)
        g = grad[group]
        direction = -_two_loop(g, s_hist[:, group], y_hist[:, group], rho[:, group], it)
        slope = (g * direction).sum(-1)
        bad = slope >= 0  # not a descent direction (never for a convex objective, up to rounding): use -grad
        direction[bad], slope[bad] = -g[bad], -(g[bad] ** 2).sum(-1)
        direction[~running], slope[~running] = 0, 0
        step = (1 / g.abs().sum(-1).clamp_min(1e-300)).clamp_max(1) if it == 0 else torch.ones_like(slope)
        new_value, new_grad, step = _armijo(problems, u[group], value[group], direction, slope, step)
        s, y = step[:, None] * direction, new_grad - g
        sy = (s * y).sum(-1)
        slot = it % history
        s_hist[slot, group], y_hist[slot, group] = s, y
        rho[slot, group] = torch.where(sy > 1e-12 * (y * y).sum(-1), 1 / sy.clamp_min(1e-300), 0.0)
        u[group] += s
        value[group], grad[group], norms[group] = new_value, new_grad, problems.norm(new_grad)
    return u, norms


def _two_loop(
    grad: torch.Tensor, s_hist: torch.Tensor, y_hist: torch.Tensor, rho: torch.Tensor, it: int
) -> torch.Tensor:
    """The L-BFGS product ``H grad`` per problem (pairs with ``rho == 0`` are skipped)."""
    order = [(it - 1 - j) % len(rho) for j in range(min(it, len(rho)))]  # newest first
    q = grad.clone()
    alphas = []
    for j in order:
        a = rho[j] * (s_hist[j] * q).sum(-1)
        q -= a[:, None] * y_hist[j]
        alphas.append(a)
    gamma = torch.ones_like(grad[:, 0])
    if order:  # scale by the newest pair: s·y / y·y
        newest = order[0]
        yy = (y_hist[newest] ** 2).sum(-1)
        gamma = torch.where(rho[newest] > 0, 1 / (rho[newest] * yy).clamp_min(1e-300), gamma)
    r = gamma[:, None] * q
    for j, a in zip(reversed(order), reversed(alphas)):
        b = rho[j] * (y_hist[j] * r).sum(-1)
        r += (a - b)[:, None] * s_hist[j]
    return r


def _armijo(
    problems: Penalised,
    u: torch.Tensor,
    value: torch.Tensor,
    direction: torch.Tensor,
    slope: torch.Tensor,
    step: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backtracking per problem to sufficient decrease, up to rounding (a problem that finds none stays put)."""
    noise = 1e-14 * value.abs().clamp_min(1.0)
    for _ in range(MAX_HALVINGS):
        new_value, new_grad = problems.value_and_grad(u + step[:, None] * direction)
        ok = new_value <= value + 1e-4 * step * slope + noise
        if bool(ok.all()):
            return new_value, new_grad, step
        step = torch.where(ok, step, step / 2)
    step = torch.where(ok, step, torch.zeros_like(step))
    new_value, new_grad = problems.value_and_grad(u + step[:, None] * direction)
    return new_value, new_grad, step


# -- cross-validation, refits, choice -------------------------------------------------------------------------
def fit_regularised(
    x: torch.Tensor,
    t: torch.Tensor,
    blocks: list[slice],
    seeds: Sequence[int],
    *,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    shrinkage: Sequence[float] = DEFAULT_SHRINKAGE,
    folds: int = DEFAULT_FOLDS,
    max_iter: int = 500,
) -> RegularisedFit:
    """Fit F sets of probes, each probe's penalty chosen by k-fold cross-validation on its own training scenes.

    Parameters
    ----------
    x, t
        Training inputs ``[F, n, D]`` and stacked soft targets ``[F, n, L]`` (probe b owns columns ``blocks[b]``).
    seeds
        Per fit, the seed of its fold draw.
    strengths, shrinkage
        The grids of L2 strengths ``lam`` and shrinkages ``rho`` cross-validated.
    folds
        Cross-validation folds (fewer when there are fewer training scenes).
    max_iter
        L-BFGS iterations at most per fit.
    """
    f, n, d = x.shape
    grid, rhos = check_strengths(strengths), check_shrinkage(shrinkage)
    k = fold_count(n, folds)
    if f > 1 and f * (k + 1) * n * len(rhos) * len(grid) * t.shape[2] > LOGIT_BUDGET:  # a seed at a time
        parts = [
            fit_regularised(
                x[i : i + 1], t[i : i + 1], blocks, [s], strengths=grid, shrinkage=rhos, folds=k, max_iter=max_iter
            )
            for i, s in enumerate(seeds)
        ]
        return RegularisedFit(
            torch.cat([p.weights for p in parts]),
            torch.cat([p.path for p in parts]),
            np.concatenate([p.band for p in parts]),
            [c for p in parts for c in p.choices],
        )
    weight = _fold_weights(n, k, seeds).to(x.device)  # [F, k+1, n]: the folds' training rows, then all rows
    settings = (rhos, grid)
    full = Basis.of(x, weight[:, k])
    w_full, norm_full = _solve_grid(full, t, blocks, settings, max_iter)  # [F, Q, L, r]
    path = full.raw(w_full)  # [F, Q, L, D]
    folded = Basis.of(x[:, None].expand(f, k, n, d).flatten(0, 1), weight[:, :k].flatten(0, 1))
    start = folded.coords(path.repeat_interleave(k, 0))
    tt = t[:, None].expand(f, k, *t.shape[1:]).flatten(0, 1)
    w_fold, norm_fold = _solve_grid(folded, tt, blocks, settings, max_iter, start)  # [F*k, Q, L, r]
    with torch.no_grad():
        ce = soft_cross_entropy(stacked_logits(folded.xe, w_fold), tt.double()[:, :, None, :], blocks)  # [Fk,n,Q,B]
    held = (weight[:, :k] == 0).double().flatten(0, 1)  # [F*k, n]
    scores = torch.einsum("inqb,in->iqb", ce, held) / held.sum(-1)[:, None, None]
    shape = (f, k, len(rhos), len(grid), len(blocks))
    norms = torch.cat([norm_fold.view(f, k, -1, len(blocks)), norm_full[:, None]], 1)  # [F, k+1, Q, B]
    return _choose(
        scores.view(shape).cpu().numpy(),
        path.view(f, len(rhos), len(grid), *path.shape[2:]).to(x.dtype),
        norms.amax(1).view(f, len(rhos), len(grid), -1).cpu().numpy(),
        blocks,
        settings,
        n,
    )


def _solve_grid(
    basis: Basis,
    t: torch.Tensor,
    blocks: list[slice],
    settings: tuple[tuple[float, ...], tuple[float, ...]],
    max_iter: int,
    init: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every ``(rho, lam)`` of the grids (rho-major) fitted on each basis: weights ``[F, Q, L, r]`` and gradient
    norms ``[F, Q, B]``."""
    rhos, grid = settings
    f, labels = basis.xe.shape[0], t.shape[2]
    pi = torch.stack([basis.penalty_weights(rho) for rho in rhos], 1).repeat_interleave(len(grid), 1)
    lam = torch.tensor(grid, dtype=torch.float64, device=t.device).repeat(len(rhos))
    return solve_penalised(
        basis, t, blocks, lam[None, :, None].expand(f, len(lam), labels), pi, max_iter=max_iter, init=init
    )


def _fold_weights(n: int, k: int, seeds: Sequence[int]) -> torch.Tensor:
    """Row weights ``[F, k+1, n]``: fold j's fit weighs the rows outside fold j, the last fit every row."""
    fold = torch.from_numpy(np.stack([fold_ids(n, k, s) for s in seeds]))
    every = torch.ones(len(seeds), 1, n, dtype=torch.bool)
    train = torch.cat([fold[:, None, :] != torch.arange(k)[None, :, None], every], 1)
    return train.double() / train.sum(-1, keepdim=True)


def _choose(
    scores: np.ndarray,
    path: torch.Tensor,
    norms: np.ndarray,
    blocks: list[slice],
    settings: tuple[tuple[float, ...], tuple[float, ...]],
    n: int,
) -> RegularisedFit:
    """Each probe's setting (lowest mean held-out loss) and band, from the fold scores ``[F, k, P, G, B]``, the
    refits ``[F, P, G, L, D]`` and the largest gradient norm of each setting's fits ``[F, P, G, B]``."""
    rhos, grid = settings
    f, k = scores.shape[:2]
    mean = scores.mean(1)  # [F, P, G, B]
    se = scores.std(1, ddof=1) / np.sqrt(k)
    weights = torch.empty_like(path[:, 0, 0])
    band = np.zeros((f, len(blocks), len(rhos), len(grid)), dtype=bool)
    choices = []
    for i in range(f):
        row = []
        for j, b in enumerate(blocks):
            m, s = mean[i, ..., j], se[i, ..., j]
            p, g = np.unravel_index(int(m.argmin()), m.shape)
            band[i, j] = m <= m[p, g] + s[p, g]
            weights[i, b] = path[i, p, g, b]
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
