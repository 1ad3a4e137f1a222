"""The ``regularised`` solver itself (docs/method/03-probes.md): its hand-written gradient against autograd, its
optimum against scipy's L-BFGS-B, its cross-validation against a reference written out here, the same fit from
numpy and torch inputs, and no torch import for numpy inputs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.optimize
import torch

import bindscope.estimators.regularised as regularised
from bindscope.estimators.regularised import (
    GRAD_TOL,
    Basis,
    Penalised,
    fit_regularised,
    fold_ids,
    newton_start,
    solve_penalised,
)

BLOCKS = [slice(0, 4), slice(4, 7)]  # a soft 4-label probe (two labels of each scene) and a one-hot 3-label one


def _problem(n: int = 60, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``[1, n, d]`` (float64) whose labels are linear in them plus noise, and soft targets ``[1, n, 7]``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) + 0.3
    scores = x @ rng.normal(size=(d, 7)) + rng.normal(size=(n, 7))
    t = np.zeros((n, 7))
    pair = np.argsort(-scores[:, :4], axis=1)[:, :2]
    t[np.arange(n)[:, None], pair] = 0.5
    t[np.arange(n), 4 + scores[:, 4:].argmax(1)] = 1.0
    return x[None], t[None]


def _whitened(x: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """The inputs in the penalised coordinates ``x S^-½`` and the map ``S^-½`` (``S`` of the module docstring)."""
    second = x.T @ x / len(x)
    s = (1 - rho) * second + rho * np.trace(second) / x.shape[1] * np.eye(x.shape[1])
    e, v = np.linalg.eigh(s)
    inv_root = v / np.sqrt(e)
    return x @ inv_root, inv_root


def _torch_loss(z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Mean over scenes of the summed soft cross-entropies, by torch's own log_softmax."""
    return sum(-(t[:, b] * torch.log_softmax(z[:, b], -1)).sum(-1) for b in BLOCKS).mean()


def _scipy_fit(x: np.ndarray, t: np.ndarray, lam: float, rho: float) -> tuple[np.ndarray, float]:
    """One fit by scipy's L-BFGS-B on ``V = W S^½`` (gradient by autograd): raw weights ``[L, D]`` and the final
    gradient norm in ``V``."""
    z, inv_root = _whitened(x, rho)
    zt, tt = torch.from_numpy(z), torch.from_numpy(t)

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        v = torch.tensor(flat.reshape(t.shape[1], -1), requires_grad=True)
        loss = _torch_loss(zt @ v.T, tt) + lam * v.square().sum()
        loss.backward()
        assert v.grad is not None
        return float(loss.detach()), v.grad.numpy().ravel()

    start = np.zeros(t.shape[1] * x.shape[1])
    out = scipy.optimize.minimize(
        objective, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 0, "maxiter": 20_000}
    )
    v = out.x.reshape(t.shape[1], -1)
    return v @ inv_root.T, float(np.linalg.norm(objective(out.x)[1]))


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("rho", [0.0, 0.3])
def test_the_hand_gradient_is_autograds(rho: float, mapped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if mapped:  # inputs mapped to eigen-coordinates a few rows at a time, as for large inputs
        monkeypatch.setattr(regularised, "KEPT", 0)
        monkeypatch.setattr(regularised, "CHUNK", 50)
    x, t = _problem(n=30)
    n, labels = x.shape[1], t.shape[2]
    basis = Basis.of(x, np.full((1, n), 1.0 / n))
    assert (basis.xe is None) == mapped
    strength = np.array([0.01, 1.0])[None, :, None].repeat(labels, 2)  # two settings of one basis
    pi = np.stack([basis.penalty_weights(rho)] * 2, axis=1)
    problems = Penalised(basis, t, BLOCKS, strength, pi)
    u = np.random.default_rng(1).normal(size=(2, labels * basis.e.shape[1]))
    value, grad = problems.value_and_grad(u)

    ut = torch.tensor(u, requires_grad=True)
    w = ut.view(2, labels, -1) * torch.from_numpy(problems.precond)
    xe = torch.from_numpy(x[0] / basis.scale[0] @ basis.v[0])
    data = torch.stack([_torch_loss(xe @ w[i].T, torch.from_numpy(t[0])) for i in range(2)])
    ref = data + (torch.from_numpy(problems.pen) * w.square()).sum((-1, -2))
    ref.sum().backward()
    assert ut.grad is not None
    np.testing.assert_allclose(value, ref.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(grad, ut.grad.numpy(), rtol=1e-9, atol=1e-13 * float(np.abs(grad).max()))


def test_newton_start_is_one_newton_step_from_zero() -> None:
    x, t = _problem(n=25, d=4)
    n, labels = x.shape[1], t.shape[2]
    basis = Basis.of(x, np.full((1, n), 1.0 / n))
    strength, pi = np.full((1, 1, labels), 0.05), basis.penalty_weights(0.2)[:, None]
    xe, tt, pen = (torch.from_numpy(a) for a in (basis.xe[0], t[0], strength[0, 0, :, None] * pi[0]))

    def objective(w: torch.Tensor) -> torch.Tensor:
        return _torch_loss(xe @ w.view(labels, -1).T, tt) + (pen * w.view(labels, -1).square()).sum()

    zero = torch.zeros(labels * basis.e.shape[1], dtype=torch.float64)
    hessian = torch.autograd.functional.hessian(objective, zero)
    gradient = torch.autograd.functional.jacobian(objective, zero)
    step = -torch.linalg.solve(hessian, gradient).view(labels, -1)
    np.testing.assert_allclose(newton_start(basis, t, BLOCKS, strength, pi)[0, 0], step.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("lam", "rho"), [(0.01, 0.1), (0.003, 0.0)])
def test_one_fit_reaches_scipys_optimum(lam: float, rho: float) -> None:
    x, t = _problem()
    n, labels = x.shape[1], t.shape[2]
    basis = Basis.of(x, np.full((1, n), 1.0 / n))
    w, norm = solve_penalised(
        basis, t, BLOCKS, np.full((1, 1, labels), lam), basis.penalty_weights(rho)[:, None], max_iter=2000
    )
    assert norm.max() <= GRAD_TOL
    ours = basis.raw(w)[0, 0]
    theirs, their_norm = _scipy_fit(x[0], t[0], lam, rho)
    # both are within their gradient norms of the optimum of a 2 lam-strongly convex objective (in V = W S^½)
    _, inv_root = _whitened(x[0], rho)
    gap = np.linalg.norm((ours - theirs) @ np.linalg.inv(inv_root).T)
    assert gap <= (np.linalg.norm(norm) + their_norm) / (2 * lam)
    assert gap <= 1e-4 * np.linalg.norm(ours @ np.linalg.inv(inv_root).T)


def test_cross_validation_matches_a_reference() -> None:
    """Every fold fit and refit by scipy, scored on its held-out fold: the same losses, choices and refits."""
    x, t = _problem()
    grid, rhos, k, seed = (0.003, 0.03, 0.3), (0.0, 0.5), 3, 4
    fit = fit_regularised(x, t, BLOCKS, [seed], strengths=grid, shrinkage=rhos, folds=k)
    folds = fold_ids(x.shape[1], k, seed)
    loss = np.zeros((len(rhos), len(grid), k, len(BLOCKS)))
    for (p, rho), (g, lam) in ((a, b) for a in enumerate(rhos) for b in enumerate(grid)):
        for j in range(k):
            train, held = folds != j, folds == j
            w, _ = _scipy_fit(x[0, train], t[0, train], lam, rho)
            z = torch.from_numpy(x[0, held] @ w.T)
            loss[p, g, j] = [
                float(-(torch.from_numpy(t[0, held][:, b]) * torch.log_softmax(z[:, b], -1)).sum(-1).mean())
                for b in BLOCKS
            ]
        refit, _ = _scipy_fit(x[0], t[0], lam, rho)
        np.testing.assert_allclose(fit.path[0, p, g], refit, rtol=0, atol=1e-4 * np.abs(refit).max())
    for b, choice in enumerate(fit.choices[0]):
        np.testing.assert_allclose(choice.cv_loss, loss[..., b].mean(-1), rtol=1e-5)
        best = np.unravel_index(loss[..., b].mean(-1).argmin(), loss.shape[:2])
        assert (choice.shrinkage, choice.strength) == (rhos[best[0]], grid[best[1]])
        np.testing.assert_array_equal(fit.weights[0, BLOCKS[b]], fit.path[0, best[0], best[1], BLOCKS[b]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_and_torch_inputs_give_the_same_fit(dtype: str) -> None:
    x, t = _problem(n=45)
    knobs = {"strengths": (0.01, 0.1, 1.0), "shrinkage": (0.0, 0.1), "folds": 3}
    x2, t2 = np.concatenate([x, x[:, ::-1]]).astype(dtype), np.concatenate([t, t[:, ::-1]]).astype(dtype)
    ours = fit_regularised(x2, t2, BLOCKS, [0, 1], **knobs)
    theirs = fit_regularised(torch.from_numpy(x2), torch.from_numpy(t2), BLOCKS, [0, 1], **knobs)
    assert isinstance(ours.weights, np.ndarray) and isinstance(ours.path, np.ndarray)
    assert ours.weights.dtype == ours.path.dtype == np.dtype(dtype)
    assert isinstance(theirs.weights, torch.Tensor) and theirs.path.dtype == getattr(torch, dtype)
    scale = float(np.abs(ours.path).max())
    np.testing.assert_allclose(theirs.path.numpy(), ours.path, rtol=0, atol=1e-5 * scale)
    np.testing.assert_array_equal(theirs.band, ours.band)
    assert [[c.strength for c in row] for row in theirs.choices] == [[c.strength for c in row] for row in ours.choices]
    assert (ours.solver == "regularised").all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_give_the_numpy_fit() -> None:
    x, t = _problem(n=45)
    knobs = {"strengths": (0.01, 0.1), "shrinkage": (0.0, 0.1), "folds": 3}
    ours = fit_regularised(x, t, BLOCKS, [0], **knobs)
    theirs = fit_regularised(torch.from_numpy(x).cuda(), torch.from_numpy(t).cuda(), BLOCKS, [0], **knobs)
    assert theirs.path.is_cuda and theirs.weights.is_cuda
    np.testing.assert_allclose(theirs.path.cpu().numpy(), ours.path, rtol=0, atol=1e-5 * np.abs(ours.path).max())
    assert [c.strength for c in theirs.choices[0]] == [c.strength for c in ours.choices[0]]


def test_large_inputs_run_in_blocks_to_the_same_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs mapped per block of rows, logits a few rows at a time, fits solved in parts: the same optimum."""
    x, t = _problem(n=45)
    knobs = {"strengths": (0.01, 0.1), "shrinkage": (0.0, 0.1), "folds": 3}
    whole = fit_regularised(x, t, BLOCKS, [0], **knobs)
    for name, value in (("KEPT", 0), ("CHUNK", 64), ("STATE_BUDGET", 1)):
        monkeypatch.setattr(regularised, name, value)
    blocked = fit_regularised(x, t, BLOCKS, [0], **knobs)
    np.testing.assert_allclose(blocked.path, whole.path, rtol=0, atol=1e-6 * np.abs(whole.path).max())
    np.testing.assert_allclose(
        [c.cv_loss for c in blocked.choices[0]], [c.cv_loss for c in whole.choices[0]], rtol=1e-9
    )


def test_numpy_inputs_never_import_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from bindscope.estimators.regularised import fit_regularised
        rng = np.random.default_rng(0)
        x, t = rng.normal(size=(2, 30, 6)), np.eye(3)[rng.integers(0, 3, size=(2, 30))]
        fit = fit_regularised(x.astype(np.float32), t.astype(np.float32), [slice(0, 3)], [0, 1], folds=3)
        assert isinstance(fit.weights, np.ndarray) and fit.weights.shape == (2, 3, 6), fit.weights
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
