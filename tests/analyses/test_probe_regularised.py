"""The ``regularised`` probe optimiser (docs/method/03-probes.md): a unique optimum whatever the solver, a penalty
chosen on training scenes only, agreement with converged solvers where the data decide, and the band."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.estimators.probe_runs import BAND_SIDES, ProbeSettings, band_variant, probe_variant, seed_splits
from bindscope.estimators.probes import ProbeSet, set_separation_correct, soft_targets, stack_targets
from bindscope.estimators.regularised import (
    GRAD_TOL,
    Basis,
    fit_regularised,
    fold_ids,
    soft_cross_entropy,
    solve_penalised,
)
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SPACE = ConceptSpace.from_dict({"color": ["red", "green", "blue", "gray"], "shape": ["cube", "ball", "cone"]})
QUICK: dict[str, Any] = {"strengths": (1e-3, 1e-2, 1e-1, 1.0), "shrinkage": (0.0, 0.01), "folds": 3, "seeds": (0,)}


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    return SceneSet.enumerate(SPACE, 2)  # 144 pairs: 57 training scenes at 0.4


@pytest.fixture(scope="module")
def wide(scenes: SceneSet) -> np.ndarray:
    """Fewer training scenes (57) than dimensions (96): the unpenalised loss has no minimiser."""
    return planted_embeddings(scenes, "object_additive", dim=96, noise=0.5, seed=3) + 1.0


def _training(y: np.ndarray, scenes: SceneSet):
    names, blocks, t = stack_targets(soft_targets(scenes), len(y))
    train = seed_splits(len(y), ProbeSettings(seeds=(0,)))[0].train
    return names, blocks, torch.from_numpy(y[train])[None].double(), torch.from_numpy(t[train])[None].double()


def _penalised_by_torch(x: torch.Tensor, t: torch.Tensor, blocks, lam: float, rho: float) -> torch.Tensor:
    """The same objective written out densely in the penalised coordinates ``V = W S^½`` (inputs ``x S^-½``,
    penalty ``lam ||V||²``), solved with torch's own L-BFGS: a second solver that must reach the same optimum."""
    scale = x.square().sum(-1).mean().sqrt()
    xs = x / scale
    second = (1 - rho) * xs.T @ xs / len(xs) + rho / xs.shape[1] * torch.eye(xs.shape[1], dtype=xs.dtype)
    e, v = torch.linalg.eigh(second)
    keep = e > e.max() * 1e-10
    inv_root = v[:, keep] / e[keep].sqrt()  # S^-½ on the span of S
    z = xs @ inv_root
    w = torch.zeros(t.shape[1], z.shape[1], dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w], max_iter=1000, tolerance_grad=1e-10, tolerance_change=0, history_size=50, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = soft_cross_entropy(z @ w.T, t, blocks).sum(-1).mean() + lam * w.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach() @ inv_root.T / scale


@pytest.mark.parametrize("rho", [0.0, 0.01])
def test_the_penalised_optimum_is_unique(scenes: SceneSet, wide: np.ndarray, rho: float) -> None:
    _, blocks, x, t = _training(wide, scenes)
    n = x.shape[1]
    basis = Basis.of(x, torch.full((1, n), 1.0 / n, dtype=torch.float64))
    lam = torch.full((1, 1, t.shape[2]), 0.01, dtype=torch.float64)
    pi = basis.penalty_weights(rho)[:, None]
    zero, norm = solve_penalised(basis, t, blocks, lam, pi, max_iter=2000)
    assert norm.max() <= GRAD_TOL
    start = torch.randn(zero.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
    other, _ = solve_penalised(basis, t, blocks, lam, pi, max_iter=2000, init=start)
    # stacked with other strengths: each fit is its own problem (own history, line search and stop)
    lams = torch.tensor([1e-3, 0.01, 1.0], dtype=torch.float64)[None, :, None].expand(1, 3, t.shape[2])
    stacked, _ = solve_penalised(basis, t, blocks, lams, pi.expand(1, 3, -1), max_iter=2000)
    ours = basis.raw(zero)[0, 0]
    scale = float(ours.abs().max())
    torch.testing.assert_close(basis.raw(other)[0, 0], ours, rtol=0, atol=1e-4 * scale)
    torch.testing.assert_close(basis.raw(stacked)[0, 1], ours, rtol=0, atol=1e-4 * scale)
    torch.testing.assert_close(_penalised_by_torch(x[0], t[0], blocks, 0.01, rho), ours, rtol=0, atol=1e-4 * scale)
    assert (basis.raw(stacked)[0, 0] - ours).abs().max() > 1e-2 * scale  # another strength: another optimum


def test_the_penalty_is_chosen_on_training_scenes_only(scenes: SceneSet, wide: np.ndarray) -> None:
    settings = ProbeSettings(**QUICK)
    run = probe_variant(wide, scenes, settings)
    test = seed_splits(len(wide), settings)[0].test
    changed = wide.copy()
    changed[test] = np.random.default_rng(7).normal(size=(len(test), wide.shape[1])) * 5
    other = probe_variant(changed, scenes, settings)
    for name, choice in run.strengths[0].items():
        assert other.strengths[0][name] == choice
        np.testing.assert_array_equal(other.weights[0][name], run.weights[0][name])
    # the choice reads the scores: changing the training scenes changes them
    train = seed_splits(len(wide), settings)[0].train
    shuffled = wide.copy()
    shuffled[train] = wide[np.random.default_rng(3).permutation(train)]
    assert (
        probe_variant(shuffled, scenes, settings).strengths[0]["object"].cv_loss != run.strengths[0]["object"].cv_loss
    )


def _test_object_acc(rows: list[dict]) -> float:
    """The base probes' test object accuracy, mean over seeds."""
    picked = [r["value"] for r in rows if (r["variant"], r["group"], r["metric"]) == ("base", "test", "object_acc")]
    return float(np.mean(picked))


def _unpenalised_lbfgs_test_acc(y: np.ndarray, scenes: SceneSet, seed: int) -> float:
    """Test object accuracy of L-BFGS on the unpenalised loss (whitened inputs, from zero) run until its steps
    stall: on separable scenes its direction converges (to the maximum-margin one), its norm does not."""
    names, blocks, t = stack_targets(soft_targets(scenes), len(y))
    split = seed_splits(len(y), ProbeSettings(seeds=(seed,)))[seed]
    x = torch.from_numpy(y[split.train]).double()
    e, v = torch.linalg.eigh(x.T @ x / len(x))
    proj = v[:, e > e.max() * 1e-10] / e[e > e.max() * 1e-10].sqrt()
    w = torch.zeros(t.shape[1], proj.shape[1], dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=1000, tolerance_grad=0, tolerance_change=0, line_search_fn="strong_wolfe")
    tt = torch.from_numpy(t[split.train]).double()

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = soft_cross_entropy(x @ proj @ w.T, tt, blocks).sum(-1).mean()
        loss.backward()
        return loss

    opt.step(closure)
    b = blocks[names.index("object")]
    logits = torch.from_numpy(y[split.test]).double() @ (w.detach() @ proj.T)[b].T
    return float(set_separation_correct(logits, t[split.test][:, b]).mean())


def test_a_separable_case_agrees_with_converged_solvers(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=96, noise=0.3, seed=3) + 1.0
    acc = {}
    for optimizer in ("regularised", "lbfgs", "reference"):
        run = probe_variant(y, scenes, ProbeSettings(optimizer=optimizer, seeds=(0, 1)))
        acc[optimizer] = _test_object_acc(run.rows)
        if optimizer == "lbfgs":
            assert set(run.solver[0].values()) == {"lbfgs-separable"}  # fewer scenes than dimensions
    acc["converged"] = float(np.mean([_unpenalised_lbfgs_test_acc(y, scenes, s) for s in (0, 1)]))
    # measured: regularised 1.000, reference 1.000, unpenalised L-BFGS to its limit 0.994, lbfgs (stopped at
    # separation) 0.966; chance 1/66
    assert acc["regularised"] > 0.9, acc
    assert abs(acc["regularised"] - acc["reference"]) <= 0.02, acc
    assert abs(acc["regularised"] - acc["converged"]) <= 0.02, acc
    assert abs(acc["regularised"] - acc["lbfgs"]) <= 0.05, acc


def test_the_band_is_recorded(scenes: SceneSet, wide: np.ndarray) -> None:
    settings = ProbeSettings(**{**QUICK, "seeds": (0, 1)})
    run = probe_variant(wide, scenes, settings)
    rows = {(r["variant"], r["group"], r["metric"], r["seed"]): r["value"] for r in run.rows}
    for seed in settings.seeds:
        choice = run.strengths[seed]["object"]
        assert choice.n_train == run.scene_counts[seed]["train"] == 57 and run.scene_counts[seed]["test"] == 87
        assert choice.converged and choice.folds == 3 and len(choice.cv_loss) == 2 and len(choice.cv_loss[0]) == 4
        assert (choice.shrinkage, choice.strength) in choice.band
        best = min(min(r) for r in choice.cv_loss)
        assert choice.cv_loss[choice.shrinkages.index(choice.shrinkage)][choice.grid.index(choice.strength)] == best
        assert run.solver[seed]["object"] == "regularised"
        for metric, chosen in ((m, rows[("base", "test", m, seed)]) for m in ("object_acc", "concept_acc")):
            low, high = (run.band[seed][side][metric] for side in BAND_SIDES)
            assert low <= chosen <= high
            assert rows[(band_variant("base", "low"), "test", metric, seed)] == low
            assert rows[(band_variant("base", "high"), "test", metric, seed)] == high


def test_probe_set_records_its_choice(scenes: SceneSet, wide: np.ndarray, tmp_path) -> None:
    probes = ProbeSet(strengths=QUICK["strengths"], shrinkage=QUICK["shrinkage"], folds=3)
    probes.fit(wide, soft_targets(scenes))
    assert probes.optimizer == "regularised" and set(probes.solver_.values()) == {"regularised"}
    probes.save(tmp_path / "p")
    back = ProbeSet.load(tmp_path / "p")
    assert back.meta_["strengths"]["object"]["strength"] == probes.choices_["object"].strength


def test_paper_parity_selects_the_paper_trajectory() -> None:
    assert ProbeSettings().optimizer == "regularised"
    assert ProbeSettings(parity="paper").optimizer == "fast"
    assert ProbeSettings(parity="paper", optimizer="regularised").optimizer == "regularised"


def test_folds_are_balanced_and_seeded() -> None:
    folds = fold_ids(23, 5, seed=4)
    assert sorted(np.bincount(folds).tolist()) == [4, 4, 5, 5, 5]
    np.testing.assert_array_equal(folds, fold_ids(23, 5, seed=4))
    assert not np.array_equal(folds, fold_ids(23, 5, seed=5))


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"strengths": ()}, "strengths: give at least one L2 strength"),
        ({"strengths": (0.1, -1.0)}, r"strengths: L2 strengths must be finite and positive .*got \[-1.0\]"),
        ({"strengths": (0.1, 0.1)}, "strengths: L2 strengths repeat"),
        ({"shrinkage": (0.0, 1.5)}, r"shrinkage: shrinkages must lie in \[0, 1\]"),
        ({"shrinkage": ()}, "shrinkage: give at least one shrinkage"),
        ({"folds": 1}, "folds: must be at least 2, got 1"),
    ],
)
def test_bad_settings_say_what_to_do(knobs: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match=message):
        ProbeSettings(**knobs)


def test_too_few_training_scenes_say_what_to_do() -> None:
    x, t = torch.ones(1, 1, 4), torch.ones(1, 1, 2) / 2
    with pytest.raises(BindscopeError, match="needs at least 2 training scenes, got 1; .*--optimizer lbfgs"):
        fit_regularised(x, t, [slice(0, 2)], [0])


def test_all_zero_inputs_give_zero_probes() -> None:
    t = torch.eye(3).repeat(4, 1)[None]
    fit = fit_regularised(torch.zeros(1, 12, 5), t, [slice(0, 3)], [0], strengths=(0.1, 1.0), folds=2)
    assert torch.count_nonzero(fit.weights) == 0 and fit.solver[0, 0] == "regularised"
