"""The ``lbfgs`` probe solver, the first stage of ``fast`` (docs/method/03-probes.md): L-BFGS from zero on
PCA-whitened inputs, many fits at once.

Each fit minimises the soft-target cross-entropy (summed over probes, mean over scenes) of bias-free probes on its
inputs whitened by the eigen-decomposition of their second moment (directions above :data:`RANK_TOL` of the largest
eigenvalue), from zero, with the algorithm of ``torch.optim.LBFGS``: strong-Wolfe line search, :data:`HISTORY`
curvature pairs, at most :data:`CHUNK` * 5 / 4 loss evaluations per :data:`CHUNK` iterations. It stops at a
gradient of at most :data:`TOLERANCE_GRAD`, at a step or loss change below :data:`TOLERANCE_CHANGE`, at
``max_iter`` iterations, or, checked every :data:`CHUNK` iterations, once every probe of the fit separates its
training scenes: the unpenalised loss has no minimiser then.

The algorithm is written out, with the loss's gradient by hand (blockwise softmax minus targets), so that it runs on
numpy arrays without torch, or on torch tensors on any device (through ``array_api_compat``), and so that one
batched matmul evaluates the loss of every fit at once: each fit is a generator that yields the point it needs
evaluated (:func:`_minimise`), and :func:`lbfgs_whitened` answers all of them together.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from array_api_compat import array_namespace, is_torch_array
from array_api_compat import device as device_of

if TYPE_CHECKING:
    import torch

    Array = np.ndarray | torch.Tensor
else:
    Array = Any

#: Curvature pairs kept (``torch.optim.LBFGS``'s ``history_size``).
HISTORY = 20
#: Converged: the largest gradient component at most this.
TOLERANCE_GRAD = 1e-6
#: No progress: a step, or a change of the loss, below this.
TOLERANCE_CHANGE = 1e-9
#: Iterations between separability checks (and the span of one evaluation budget, 5/4 of it).
CHUNK = 25
#: Whitened directions kept: eigenvalue above this share of the largest.
RANK_TOL = 1e-10
#: The strong-Wolfe conditions: sufficient decrease and curvature.
C1, C2 = 1e-4, 0.9


@dataclass(frozen=True)
class Request:
    """What a fit asks for: its loss and gradient at ``w`` (``"eval"``), or whether ``w`` separates every probe's
    training scenes (``"check"``)."""

    kind: Literal["eval", "check"]
    w: Array  # flat [L * r]


Fit = Generator[Request, Any, Array]


def lbfgs_whitened(x: Array, t: Array, blocks: list[slice], max_iter: int) -> Array:
    """Weights ``[F, L, D]`` on the raw inputs ``x`` ``[F, n, D]`` of F stacked fits to targets ``t`` ``[F, n, L]``
    (probe b owns columns ``blocks[b]``): L-BFGS from zero on each fit's whitened inputs, all fits evaluated
    together. The weights are of the inputs' kind (numpy or torch) and dtype."""
    xp = array_namespace(x, t)
    f, _, d = x.shape
    labels = t.shape[2]
    proj = whitening(x)  # [F, D, r]
    if proj.shape[2] == 0:  # all-zero inputs (a residual nothing is left in): zero logits, nothing separated
        return xp.zeros((f, labels, d), dtype=x.dtype, device=device_of(x))
    problem = Problem.of(x @ proj, t, blocks)
    size = labels * proj.shape[2]
    start = xp.zeros(size, dtype=x.dtype, device=device_of(x))
    w = problem.solve([_minimise(start, max_iter) for _ in range(f)])
    return xp.reshape(xp.stack(w), (f, labels, -1)) @ proj.mT


def whitening(x: Array) -> Array:
    """``[F, D, r]`` (the inputs' dtype): maps each fit's inputs to identity second moment on its directions above
    :data:`RANK_TOL` of its largest eigenvalue; r is the largest such rank, a fit of lower rank has zero columns."""
    xp = array_namespace(x)
    x64 = xp.astype(x, xp.float64)
    evals, evecs = xp.linalg.eigh(x64.mT @ x64 / x.shape[1])  # ascending
    keep = evals > xp.max(evals, axis=-1, keepdims=True) * RANK_TOL
    rank = int(xp.max(xp.sum(xp.astype(keep, xp.int64), axis=-1)))
    evals, evecs, keep = (
        evals[:, evals.shape[1] - rank :],
        evecs[..., evecs.shape[2] - rank :],
        keep[:, keep.shape[1] - rank :],
    )
    scale = xp.where(keep, 1.0 / xp.sqrt(xp.where(keep, evals, 1.0)), 0.0)
    return xp.astype(evecs * scale[:, None, :], x.dtype)


def loss_and_gradient(xw: Array, tn: Array, tsum: Array, blocks: list[slice], w: Array) -> tuple[Array, Array]:
    """The soft-target cross-entropy (summed over probes, mean over scenes) ``[...]`` and its gradient ``[..., L, r]``.

    Parameters
    ----------
    xw
        Inputs ``[..., n, r]``.
    tn, tsum
        The targets, labels first, ``[..., L, n]`` (``t.mT / n``), and their sum per probe ``[..., B, n]``: with
        labels first, each probe's block of logits is contiguous.
    w
        Weights ``[..., L, r]``.
    """
    xp = array_namespace(xw, tn, w)
    z = w @ xw.mT  # [..., L, n]: the logits, made d(loss)/d(logits) in place, probe by probe
    loss = xp.zeros(z.shape[:-2], dtype=z.dtype, device=device_of(z))
    for k, b in enumerate(blocks):
        zb, tb, ts = z[..., b, :], tn[..., b, :], tsum[..., k : k + 1, :]
        zb -= xp.max(zb, axis=-2, keepdims=True)
        loss = loss - xp.sum(tb * zb, axis=(-2, -1))
        _exp_(zb)
        total = xp.sum(zb, axis=-2, keepdims=True)
        loss = loss + xp.sum(ts * xp.log(total), axis=(-2, -1))
        zb *= ts / total
        zb -= tb
    return loss, z @ xw


def _exp_(a: Array) -> Array:
    """``exp`` in place (numpy or torch)."""
    return a.exp_() if is_torch_array(a) else np.exp(a, out=a)


def separates(logits: Array, present: Array, axis: int = -1) -> Array:
    """Set separation along ``axis`` (the labels): is the smallest present-label logit above the largest absent one?"""
    xp = array_namespace(logits, present)
    low = xp.min(xp.where(present, logits, math.inf), axis=axis)
    return low > xp.max(xp.where(present, -math.inf, logits), axis=axis)


@dataclass
class Problem:
    """F fits' whitened inputs ``xw`` ``[F, n, r]`` and targets, labels first (:func:`loss_and_gradient`); answers
    their requests."""

    xw: Array
    tn: Array  # [F, L, n]
    tsum: Array  # [F, B, n]
    blocks: list[slice]

    @classmethod
    def of(cls, xw: Array, t: Array, blocks: list[slice]) -> Problem:
        """The problem of whitened inputs ``xw`` ``[F, n, r]`` and targets ``t`` ``[F, n, L]``."""
        xp = array_namespace(xw, t)
        tn = xp.asarray(t.mT / t.shape[1], copy=True)
        tsum = xp.stack([xp.sum(tn[..., b, :], axis=-2) for b in blocks], axis=-2)
        return cls(xw, tn, tsum, blocks)

    def solve(self, fits: list[Fit]) -> list[Array]:
        """Run every fit to its end, answering all waiting requests together; each fit's final flat weights."""
        waiting = {i: next(fit) for i, fit in enumerate(fits)}
        done: dict[int, Array] = {}
        while waiting:
            for i, answer in self.answer(waiting).items():
                try:
                    waiting[i] = fits[i].send(answer)
                except StopIteration as stop:
                    done[i] = stop.value
                    del waiting[i]
        return [done[i] for i in range(len(fits))]

    def answer(self, waiting: dict[int, Request]) -> dict[int, Any]:
        """Loss and gradient for each ``"eval"`` (one batched matmul when every fit waits), separation for each
        ``"check"``."""
        xp = array_namespace(self.xw)
        f, _, r = self.xw.shape
        labels = self.tn.shape[1]
        evals = [i for i, req in waiting.items() if req.kind == "eval"]
        out: dict[int, Any] = {}
        if len(evals) == f:
            w = xp.stack([xp.reshape(waiting[i].w, (labels, r)) for i in evals])
            loss, grad = loss_and_gradient(self.xw, self.tn, self.tsum, self.blocks, w)
            out = {i: (float(loss[i]), xp.reshape(grad[i], (-1,))) for i in evals}
        else:
            for i in evals:
                w = xp.reshape(waiting[i].w, (labels, r))
                loss, grad = loss_and_gradient(self.xw[i], self.tn[i], self.tsum[i], self.blocks, w)
                out[i] = (float(loss), xp.reshape(grad, (-1,)))
        for i in set(waiting) - set(evals):
            logits = xp.reshape(waiting[i].w, (labels, r)) @ self.xw[i].mT  # [L, n]
            present = self.tn[i] > 0
            out[i] = all(bool(xp.all(separates(logits[b], present[b], axis=0))) for b in self.blocks)
        return out


@dataclass
class _History:
    """One fit's L-BFGS memory across chunks (``torch.optim.LBFGS``'s state)."""

    n_iter: int = 0
    d: Any = None  # the last direction and step
    t: float = 1.0
    steps: list[Any] = field(default_factory=list)  # curvature pairs: steps s and gradient changes y
    changes: list[Any] = field(default_factory=list)
    rho: list[float] = field(default_factory=list)
    h_diag: float = 1.0
    prev_g: Any = None

    def direction(self, g: Array) -> Array:
        """The next search direction from gradient ``g``: its negative at first, then the two-loop recursion."""
        if self.n_iter == 1:
            self.steps, self.changes, self.rho, self.h_diag = [], [], [], 1.0
            return -g
        y = g - self.prev_g
        s = self.d * self.t
        ys = _dot(y, s)
        if ys > 1e-10:
            if len(self.changes) == HISTORY:
                del self.changes[0], self.steps[0], self.rho[0]
            self.changes.append(y)
            self.steps.append(s)
            self.rho.append(1.0 / ys)
            self.h_diag = ys / _dot(y, y)
        q = -g
        alpha = [0.0] * len(self.changes)
        for i in range(len(self.changes) - 1, -1, -1):
            alpha[i] = _dot(self.steps[i], q) * self.rho[i]
            q = q - alpha[i] * self.changes[i]
        r = q * self.h_diag
        for i in range(len(self.changes)):
            beta = _dot(self.changes[i], r) * self.rho[i]
            r = r + (alpha[i] - beta) * self.steps[i]
        return r


def _minimise(w: Array, max_iter: int) -> Fit:
    """One fit from ``w``: chunks of :data:`CHUNK` iterations until a stopping rule fires, ``max_iter`` iterations
    have run, or (checked after each full chunk) every probe separates its training scenes."""
    loss, g = yield Request("eval", w)
    history = _History()
    done = 0
    while done < max_iter:
        chunk = min(CHUNK, max_iter - done)
        ran, stopped, w, loss, g = yield from _chunk(history, w, loss, g, chunk)
        done += ran
        if stopped or done >= max_iter or (ran == chunk and (yield Request("check", w))):
            break
    return w


def _chunk(
    history: _History, w: Array, loss: float, g: Array, chunk: int
) -> Generator[Request, Any, tuple[int, bool, Array, float, Array]]:
    """One ``torch.optim.LBFGS.step`` of at most ``chunk`` iterations and ``chunk * 5 // 4`` evaluations: the
    iterations run, whether a stopping rule fired (else the chunk's iterations or evaluations ran out), and the
    weights, loss and gradient it ends at."""
    max_eval = chunk * 5 // 4
    evals = 1  # torch's opening evaluation, at the point the last chunk ended on (its values are those)
    if _amax(g) <= TOLERANCE_GRAD:
        return 0, True, w, loss, g
    ran = 0
    while ran < chunk:
        ran += 1
        history.n_iter += 1
        d = history.direction(g)
        history.prev_g, prev_loss = g, loss
        t = min(1.0, 1.0 / _asum(g)) if history.n_iter == 1 else 1.0
        gtd = _dot(g, d)
        if gtd > -TOLERANCE_CHANGE:
            history.d, history.t = d, t
            return ran, True, w, loss, g
        loss, g, t, used = yield from _strong_wolfe(w, t, d, loss, g, gtd, max_eval - evals)
        w = w + t * d
        history.d, history.t = d, t
        evals += used
        if (
            _amax(g) <= TOLERANCE_GRAD
            or abs(t) * _amax(d) <= TOLERANCE_CHANGE
            or abs(loss - prev_loss) < TOLERANCE_CHANGE
        ):
            return ran, True, w, loss, g
        if evals >= max_eval:
            break
    return ran, False, w, loss, g


def _strong_wolfe(
    w: Array, t: float, d: Array, f: float, g: Array, gtd: float, max_ls: int
) -> Generator[Request, Any, tuple[float, Array, float, int]]:
    """``torch.optim.lbfgs._strong_wolfe``: a step ``t`` along ``d`` from ``w`` meeting the strong Wolfe
    conditions (bracketing by cubic interpolation, then zooming); its loss, gradient, ``t`` and evaluations."""
    d_norm = _amax(d)
    f_new, g_new = yield Request("eval", w + t * d)
    used, ls_iter = 1, 0
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    bracket, bracket_f, bracket_g, bracket_gtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]
    while ls_iter < max_ls:
        wolfe = abs(gtd_new) <= -C2 * gtd
        if f_new > f + C1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) or (gtd_new >= 0 and not wolfe):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if wolfe:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        t_prev, t = (
            t,
            _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, (t + 0.01 * (t - t_prev), t * 10)),
        )
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = yield Request("eval", w + t * d)
        used += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    insufficient = False
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < TOLERANCE_CHANGE:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # close to an end of the bracket
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = yield Request("eval", w + t * d)
        used += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > f + C1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
            continue
        if abs(gtd_new) <= -C2 * gtd:
            done = True
        elif gtd_new * (bracket[high] - bracket[low]) >= 0:  # the old high becomes the new low
            bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
            bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
        bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], used


def _cubic_interpolate(
    x1: float, f1: float, g1: float, x2: float, f2: float, g2: float, bounds: tuple[float, float] | None = None
) -> float:
    """The minimiser of the cubic through two points' values and slopes, within ``bounds`` (default: between them)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    square = d1 * d1 - g1 * g2
    if square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _dot(a: Array, b: Array) -> float:
    return float(a @ b)


def _amax(a: Array) -> float:
    xp = array_namespace(a)
    return float(xp.max(xp.abs(a)))


def _asum(a: Array) -> float:
    xp = array_namespace(a)
    return float(xp.sum(xp.abs(a)))
