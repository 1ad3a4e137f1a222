"""The exact protocol: alternating least squares reaches each table family's own functions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.complexity.families import Family, Layout, init_params, scene_rows
from bindscope.analyses.complexity.fitters import als
from bindscope.analyses.complexity.fitters.als_design import one_hot_rows
from bindscope.analyses.complexity.fitters.als_tables import TableModels, _solve_sym
from bindscope.analyses.complexity.fitters.stack import SceneIndex, StackFit, pick_fits, predict_stack
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet

TABLE_FAMILIES = ("additive", "mult", "mult_within_object", "sum_mult")


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"a": [f"a{i}" for i in range(6)], "n": [f"n{i}" for i in range(5)]})
    every = SceneSet.enumerate(space, 2)
    return every.subset(np.flatnonzero(every.num_objects() == 2))


def _planted(scenes: SceneSet, family: str, noise: float = 1e-3) -> tuple[torch.Tensor, torch.Tensor, Layout]:
    """Targets made by a random member of ``family`` (width 8) plus a little noise."""
    layout = Layout.of(scenes)
    rows = torch.as_tensor(scene_rows(scenes))
    truth = init_params(Family(family), layout, 8, 8, [123])
    y = TableModels(Family(family), layout, truth, 8).predict(rows[None])[0].float()
    return rows, y + noise * torch.randn(y.shape, generator=torch.Generator().manual_seed(1)), layout


@pytest.mark.parametrize("family", TABLE_FAMILIES)
def test_each_table_family_is_fitted_to_the_noise_floor(scenes: SceneSet, family: str) -> None:
    rows, y, layout = _planted(scenes, family)
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))
    fit_idx, val_idx = order[:700], order[700:]
    fit = als.fit_one(
        Family(family), layout, (rows[fit_idx], y[fit_idx]), (rows[val_idx], y[val_idx]), 0, als.Solver(), 8
    )
    variance = float(y.var(0).mean())
    assert fit.converged and fit.best_val_mse < 5e-3 * variance  # R² above 0.995 on held-out scenes (ridge-biased)
    assert fit.sweeps_run <= als.Solver().sweeps


def test_the_additive_fit_is_ordinary_least_squares(scenes: SceneSet) -> None:
    rows, y, layout = _planted(scenes, "mult_within_object")  # not additive: the residual is large
    fit = als.fit_one(Family("additive"), layout, (rows, y), (rows, y), 0, als.Solver(ridge=0.0), 8)
    onehot = one_hot_rows(rows, layout.num_rows).numpy()
    design = np.hstack([onehot, np.ones((len(rows), 1))])
    coef = np.linalg.lstsq(design, y.numpy().astype(np.float64), rcond=None)[0]
    best = float(np.mean((design @ coef - y.numpy()) ** 2))
    assert fit.history[0][1] == pytest.approx(best, rel=1e-6) and fit.sweeps_run == 1 and fit.converged


@pytest.mark.parametrize(("family", "width"), [(f, 8) for f in TABLE_FAMILIES] + [("sum_mult", 24)])
def test_fitted_parameters_are_the_family_as_defined(scenes: SceneSet, family: str, width: int) -> None:
    """The stacked parameters predict through the approximators' own forward pass (also with tables
    wider than their 22 rows)."""
    rows, y, layout = _planted(scenes, family, noise=0.05)
    data = SceneIndex.of(scenes, y.numpy())
    train, val = [np.arange(0, 600), np.arange(100, 700)], [np.arange(700, 800), np.arange(800, 900)]
    fit = als.fit_stack_exact(Family(family), layout, data, train, val, [0, 1], als.Solver(sweeps=5), width=width)
    preds = predict_stack(Family(family), fit.selected, layout, data, val)
    for g in range(2):
        one = {k: v[g : g + 1] for k, v in fit.selected.items()}
        mine = TableModels(Family(family), layout, one, width).predict(rows[val[g]][None])[0]
        np.testing.assert_allclose(preds[g], mine.numpy(), rtol=1e-4, atol=1e-4)
        assert fit.best_val_mse[g] == pytest.approx(float(((mine - y[val[g]].double()) ** 2).mean()), rel=1e-4)
    assert fit.converged.shape == fit.unfinished_r2.shape == fit.stopped_early.shape == (2,)
    assert {h[0] for h in fit.history} == {0, 1}


def _stack_of_three(scenes: SceneSet, family: str) -> tuple[Layout, SceneIndex, list[np.ndarray], list[np.ndarray]]:
    """Three models: 400 scenes, 60 scenes, and scenes that never hold a0 in object 0."""
    rows, y, layout = _planted(scenes, family, noise=0.05)
    order = np.random.default_rng(0).permutation(len(rows))
    never_a0 = np.flatnonzero(rows[:, 0].numpy() != 0)
    train = [order[:400], order[:60], np.intersect1d(never_a0, order[:500])]
    return layout, SceneIndex.of(scenes, y.numpy()), train, [order[700:800], order[800:900], order[600:700]]


@pytest.mark.parametrize("family", TABLE_FAMILIES)
def test_a_stack_fits_every_model_as_it_would_alone(scenes: SceneSet, family: str) -> None:
    layout, data, train, val = _stack_of_three(scenes, family)
    solver, seeds = als.Solver(sweeps=30, patience=2, starts=3, start_sweeps=2), [3, 4, 5]
    stack = als.fit_stack_exact(Family(family), layout, data, train, val, seeds, solver, width=8)
    for g, (part, held, seed) in enumerate(zip(train, val, seeds)):
        alone = als.fit_stack_exact(Family(family), layout, data, [part], [held], [seed], solver, width=8)
        for which in ("selected", "final"):
            for key, value in getattr(alone, which).items():
                torch.testing.assert_close(getattr(stack, which)[key][g], value[0], rtol=1e-7, atol=1e-9)
        for name in ("best_epoch", "epochs_run", "converged", "stopped_early"):
            assert getattr(stack, name)[g] == getattr(alone, name)[0]
        assert stack.best_val_mse[g] == pytest.approx(alone.best_val_mse[0], rel=1e-9)
        mine = np.array([h[1:] for h in stack.history if h[0] == g])
        np.testing.assert_allclose(mine, np.array([h[1:] for h in alone.history]), rtol=1e-9)
    assert [h[0] for h in stack.history] == sorted(h[0] for h in stack.history)  # model by model
    if family != "additive":  # one exact solve
        stopped = stack.stopped_early & (stack.epochs_run < stack.epochs_run.max())
        assert stopped.any()  # frozen while another model ran on


def test_rows_a_model_never_sees_keep_their_initial_values(scenes: SceneSet) -> None:
    layout, data, train, val = _stack_of_three(scenes, "additive")
    fit = als.fit_stack_exact(Family("additive"), layout, data, train, val, [3, 4, 5], als.Solver(), width=8)
    init = init_params(Family("additive"), layout, 8, data.y.shape[1], [5])
    folded = fit.selected["table"][2] @ fit.selected["w"][2].T
    torch.testing.assert_close(folded[0], init["table"][0, 0] @ init["w"][0].T, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(folded[1], init["table"][0, 1] @ init["w"][0].T, atol=1e-2)


def test_a_system_cholesky_cannot_solve_falls_back_to_least_squares_alone() -> None:
    a = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    gram, rhs = a @ a.transpose(-1, -2), a[..., :2]
    gram[1, 0, 2, :] = gram[1, 0, :, 2] = 0.0  # singular: Cholesky fails on this system only
    out = _solve_sym(gram.clone(), rhs)
    torch.testing.assert_close(out[1, 0], torch.linalg.lstsq(gram[1, 0], rhs[1, 0]).solution)
    torch.testing.assert_close(out[0, 1], torch.linalg.solve(gram[0, 1], rhs[0, 1]))
    keep = torch.tensor([[True] * 5, [True] * 4 + [False]])  # per model, its columns; the others solve to 0
    gram, rhs = gram[1].clone(), rhs[1]
    gram[:, 4, :] = gram[:, :, 4] = 0.0
    gram[:, 4, 4] = 1.0
    out = _solve_sym(gram.clone(), rhs, keep)
    torch.testing.assert_close(out[0], torch.linalg.lstsq(gram[0], rhs[0]).solution)
    torch.testing.assert_close(out[1, :4], torch.linalg.solve(gram[1, :4, :4], rhs[1, :4]))
    gram[1, 2, :] = gram[1, :, 2] = 0.0
    out = _solve_sym(gram.clone(), rhs, keep)
    torch.testing.assert_close(out[1, :4], torch.linalg.lstsq(gram[1, :4, :4], rhs[1, :4]).solution)
    assert out[1, 4].abs().max() == 0


def test_a_product_family_keeps_the_best_of_its_starts(scenes: SceneSet) -> None:
    rows, y, layout = _planted(scenes, "mult")
    one = als.fit_one(Family("mult"), layout, (rows, y), (rows, y), 0, als.Solver(starts=1, patience=None), 8)
    many = als.fit_one(Family("mult"), layout, (rows, y), (rows, y), 0, als.Solver(starts=8, patience=None), 8)
    assert many.history[-1][1] <= one.history[-1][1] * (1 + 1e-6)
    assert als.start_seed(7, 0) == 7 and len({als.start_seed(7, k) for k in range(8)}) == 8


def test_a_fit_cut_short_is_not_converged(scenes: SceneSet) -> None:
    rows, y, layout = _planted(scenes, "mult_within_object")
    fit = als.fit_one(Family("mult_within_object"), layout, (rows, y), (rows, y), 0, als.Solver(sweeps=1, starts=1), 8)
    assert fit.sweeps_run == 1 and not fit.converged


def test_unfinished_r2_projects_the_recent_fall() -> None:
    flat = [1.0] * 20
    assert als.unfinished_r2(flat, 100, 1.0) == 0.0
    falling = list(np.linspace(1.0, 0.8, 21))  # 0.01 per sweep
    assert als.unfinished_r2(falling, 100, 1.0) == pytest.approx(0.01 * als.HORIZON * 100)
    assert als.unfinished_r2(falling, 100, 2.0) == pytest.approx(0.01 * als.HORIZON * 100 / 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sweeps": 0}, "sweeps must be at least 1"),
        ({"ridge": -1.0}, "ridge must be non-negative"),
        ({"patience": 0}, "patience must be at least 1"),
        ({"starts": 0}, "starts and start_sweeps must be >= 1"),
    ],
)
def test_bad_solver_settings_say_what_to_do(kwargs: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match=message):
        als.Solver(**kwargs)


def test_the_mlp_is_not_a_table_family(scenes: SceneSet) -> None:
    layout = Layout.of(scenes)
    params = init_params(Family("mlp", 4), layout, 8, 8, [0])
    with pytest.raises(BindscopeError, match="MLP is fitted by Adam"):
        TableModels(Family("mlp", 4), layout, params, 8)


def test_a_model_without_validation_scenes_is_refused(scenes: SceneSet) -> None:
    rows, y, layout = _planted(scenes, "mult")
    data = SceneIndex.of(scenes, y.numpy())
    with pytest.raises(BindscopeError, match="at least one scene to fit and one to validate on"):
        als.fit_stack_exact(Family("mult"), layout, data, [np.arange(10)], [np.arange(0)], [0], als.Solver(), width=8)


def test_pick_fits_takes_each_model_from_the_fit_asked_for() -> None:
    def stack(value: float, epochs: list[int]) -> StackFit:
        params = {"table": torch.full((3, 2, 4), value), "W": torch.full((3, 4), value)}
        g = len(epochs)
        return StackFit(
            params,
            {k: v + 1 for k, v in params.items()},
            np.array(epochs),
            np.array(epochs),
            np.full(g, value),
            [(m, 1, value, value) for m in range(g)],
            np.full(g, value > 0),
            np.zeros(g),
            np.zeros(g, bool),
        )

    a, b = stack(0.0, [1, 2, 3]), stack(5.0, [7, 8, 9])
    mixed = pick_fits(a, b, np.array([False, True, False]))
    assert mixed.selected["table"][:, 0, 0].tolist() == [0.0, 5.0, 0.0]
    assert mixed.final["W"][:, 0].tolist() == [1.0, 6.0, 1.0]
    assert mixed.epochs_run.tolist() == [1, 8, 3] and mixed.best_val_mse.tolist() == [0.0, 5.0, 0.0]
    assert mixed.converged.tolist() == [False, True, False]
    assert sorted(mixed.history) == [(0, 1, 0.0, 0.0), (1, 1, 5.0, 5.0), (2, 1, 0.0, 0.0)]
