"""Approximator families and the stacked trainer: the folded forward passes equal the docs/method/06-complexity.md
formulas, a stack equals one-at-a-time fits, and the trainer is torch's Adam + cosine schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from approximator_formula import formula as _formula
from bindscope.analyses.complexity.families import (
    FAMILIES,
    Family,
    Layout,
    init_params,
    num_parameters,
    predict,
    prepare,
)
from bindscope.analyses.complexity.fitters.adam import Schedule, TargetScale, fit_stack
from bindscope.analyses.complexity.fitters.stack import SceneIndex, predict_stack
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet

SPACE = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["cube", "ball"], "size": ["s", "l"]})
ALL = [Family("additive"), Family("mult"), Family("mult_within_object"), Family("sum_mult"), Family("mlp", 7)]


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    return SceneSet.enumerate(SPACE, 2)


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.label)
def test_forward_equals_the_formula(family: Family, scenes: SceneSet) -> None:
    layout = Layout.of(scenes)
    params = init_params(family, layout, 5, 4, [0, 1])
    data = SceneIndex.of(scenes, np.zeros((len(scenes), 4), np.float32))
    idx = torch.arange(len(scenes)).expand(2, -1)
    for n_hint in (1, 10_000):  # mult_within_object: direct and via per-object tables
        out = predict(
            family, params, prepare(family, params, layout, n_hint), data.rows[idx], data.objects[idx], layout
        )
        for g in range(2):
            torch.testing.assert_close(out[g], _formula(family, params, scenes, g), rtol=1e-5, atol=1e-5)


def test_models_in_a_stack_are_initialised_by_their_own_seed(scenes: SceneSet) -> None:
    layout = Layout.of(scenes)
    a = init_params(Family("mult"), layout, 5, 4, [3, 7])
    b = init_params(Family("mult"), layout, 5, 4, [7])
    for k in a:
        torch.testing.assert_close(a[k][1], b[k][0])
    assert not torch.equal(a["table"][0], a["table"][1])


def test_parameter_counts(scenes: SceneSet) -> None:
    layout = Layout.of(scenes)  # R = 2 * (3 + 2 + 2) = 14 rows, S = 6 slots
    assert num_parameters(Family("additive"), layout, 5, 4) == 14 * 5 + 4 * 5 + 4
    assert num_parameters(Family("sum_mult"), layout, 5, 4) == 2 * 14 * 5 + 4 * 10 + 4
    assert num_parameters(Family("mlp", 7), layout, 5, 4) == 14 * 5 + 7 * 30 + 7 + 4 * 7 + 4
    assert [init_params(Family("mlp", 7), layout, 5, 4, [0])[f"w1.{s}"].shape for s in range(6)] == [(1, 7, 5)] * 6


@pytest.mark.parametrize(
    "text, expected",
    [
        ("additive", Family("additive")),
        ("mlp", Family("mlp", 1024)),
        ("mlp(64)", Family("mlp", 64)),
        (" mult_within_object ", Family("mult_within_object")),
    ],
)
def test_family_names_parse(text: str, expected: Family) -> None:
    assert Family.parse(text) == expected
    assert Family.parse(expected.label) == expected


@pytest.mark.parametrize(
    "text, message",
    [("linear", "unknown approximator 'linear'"), ("mlp(0)", "at least 1"), ("mlp(abc)", "unknown approximator")],
)
def test_bad_family_names_are_refused(text: str, message: str) -> None:
    with pytest.raises(BindscopeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Family.parse(text)


def test_every_family_has_a_simplicity_rank() -> None:
    assert sorted(FAMILIES) == sorted({f.name for f in ALL})
    ranks = [f.simplicity for f in ALL]
    assert len(set(ranks)) == len(ranks)
    assert min(ALL, key=lambda f: f.simplicity).name == "additive"


# -- the trainer -----------------------------------------------------------------------------------------
def _planted(scenes: SceneSet, dim: int = 6) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.normal(size=(len(scenes), dim)).astype(np.float32)


def test_a_stack_equals_one_at_a_time_fits(scenes: SceneSet) -> None:
    y = _planted(scenes)
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    rng = np.random.default_rng(1)
    train = [np.sort(rng.choice(len(scenes), size=n, replace=False)) for n in (40, 90, 60)]
    val = [np.setdiff1d(np.arange(len(scenes)), t)[:10] for t in train]
    schedule = Schedule(epochs=60, eval_every=10, patience=2)
    for family in (Family("mult_within_object"), Family("mlp", 8)):
        stack = fit_stack(family, layout, data, train, val, [0, 1, 2], schedule, width=5)
        for i in range(3):
            one = fit_stack(family, layout, data, [train[i]], [val[i]], [i], schedule, width=5)
            for k in stack.selected:
                torch.testing.assert_close(stack.selected[k][i], one.selected[k][0], rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(stack.final[k][i], one.final[k][0], rtol=1e-4, atol=1e-5)
            assert stack.epochs_run[i] == one.epochs_run[0] and stack.best_epoch[i] == one.best_epoch[0]


def test_the_trainer_is_torch_adam_with_a_cosine_schedule(scenes: SceneSet) -> None:
    """The paper's way (nn parameters, torch.optim.Adam, CosineAnnealingLR) gives the same weights."""
    y = _planted(scenes)
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    family, epochs = Family("sum_mult"), 25
    train = np.arange(0, len(scenes), 2)
    ours = fit_stack(
        family, layout, data, [train], [np.arange(1, 20, 2)], [4], Schedule(epochs=epochs, eval_every=epochs), width=5
    )
    params = {k: v.clone().requires_grad_(True) for k, v in init_params(family, layout, 5, 6, [4]).items()}
    opt = torch.optim.Adam(params.values(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs, eta_min=0.0)
    idx = torch.as_tensor(train)[None]
    for _ in range(epochs):
        opt.zero_grad()
        pred = _formula(family, params, scenes, 0)[idx[0]]
        ((pred - data.y[idx[0]]) ** 2).mean().backward()
        opt.step()
        sched.step()
    for k in params:
        torch.testing.assert_close(ours.final[k][0], params[k].detach()[0], rtol=1e-4, atol=1e-5)


def test_early_stopping_keeps_the_best_validation_checkpoint(scenes: SceneSet) -> None:
    y = _planted(scenes)  # noise: validation error rises as training fits the noise
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    train, val = np.arange(0, len(scenes), 2), np.arange(1, len(scenes), 2)
    fit = fit_stack(
        Family("mlp", 64), layout, data, [train], [val], [0], Schedule(epochs=3000, eval_every=10, patience=5), width=8
    )
    assert fit.epochs_run[0] < 3000
    assert fit.epochs_run[0] == fit.best_epoch[0] + 5 * 10
    curve = {e: v for _, e, _, v in fit.history}
    assert curve[fit.best_epoch[0]] == pytest.approx(fit.best_val_mse[0]) == pytest.approx(min(curve.values()))
    sel = predict_stack(Family("mlp", 64), fit.selected, layout, data, [val])[0]
    assert np.mean((sel - y[val]) ** 2) == pytest.approx(fit.best_val_mse[0], rel=1e-4)


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.label)
def test_a_standardised_fit_folds_its_scale_into_the_output_layer(family: Family, scenes: SceneSet) -> None:
    y = 5.0 + 0.01 * _planted(scenes)  # an offset and a small scale, as real embeddings have
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    train = [np.arange(0, len(scenes), 2), np.arange(1, len(scenes), 3)]
    params = init_params(family, layout, 5, y.shape[1], [0, 1], "cpu")
    scale = TargetScale.of(data.y, train)
    raw = scale.unfold(params)
    idx = [np.arange(len(scenes))] * 2
    z = predict_stack(family, params, layout, data, idx)
    direct = predict_stack(family, raw, layout, data, idx)
    for g in range(2):  # unfolded parameters predict s * z + centre: the same family, in raw units
        expected = z[g] * scale.scale[g].item() + scale.centre[g].numpy()
        np.testing.assert_allclose(direct[g], expected, rtol=1e-4, atol=1e-4)
    assert scale.centre[0].numpy() == pytest.approx(y[train[0]].mean(0), rel=1e-5)
    assert scale.scale[1].item() == pytest.approx(np.sqrt(y[train[1]].var(0).mean()), rel=1e-4)


def test_standardising_speeds_up_products_on_small_scales(scenes: SceneSet) -> None:
    y = 0.02 * _planted(scenes)
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    rng = np.random.default_rng(0)
    train = np.sort(rng.choice(len(scenes), 100, replace=False))
    val = np.setdiff1d(np.arange(len(scenes)), train)[:20]
    family = Family("mult_within_object")
    fits = {
        flag: fit_stack(
            family, layout, data, [train], [val], [0], Schedule(epochs=200, eval_every=10, standardize=flag), width=6
        )
        for flag in (False, True)
    }
    assert fits[True].best_val_mse[0] < fits[False].best_val_mse[0]  # both in raw units
    history = np.asarray(fits[True].history)
    assert history[:, 2].min() < float(y[train].var(0).mean())  # the history is reported in raw units
