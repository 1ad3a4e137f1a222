"""The one-model estimator under both protocols: known answers, convergence, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.complexity import Approximator, Budget, ComplexitySettings, resolve_budget
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet

SPACE = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["cube", "ball"], "size": ["s", "l"]})


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    return SceneSet.enumerate(SPACE, 2)


def _tables(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(2, SPACE.num_concepts, 3, 4))


def _additive(scenes: SceneSet) -> np.ndarray:
    t = _tables()
    return sum(t[k, c][scenes.scenes[:, k, c]] for k in range(2) for c in range(SPACE.num_concepts)).astype(np.float32)


def _paper(**overrides: int) -> ComplexitySettings:
    """The paper protocol (full-batch Adam on raw targets at a constant rate) with overrides."""
    return ComplexitySettings(budget=resolve_budget("paper", **overrides))


def _unseen_r2(model: Approximator, scenes: SceneSet, y: np.ndarray, held: np.ndarray) -> float:
    pred, truth = model.predict(scenes.subset(np.flatnonzero(held))), y[held]
    return float(1 - ((pred - truth) ** 2).sum() / ((truth - truth.mean(0)) ** 2).sum())


def _held(scenes: SceneSet) -> np.ndarray:
    return (scenes.object_ids() == 11).any(axis=1)  # object 11 (b, ball, l) never seen; its values are


def test_the_paper_protocol_fits_an_additive_function_and_predicts_unseen_combinations(scenes: SceneSet) -> None:
    y, held = _additive(scenes), _held(scenes)
    model = Approximator("additive", _paper(epochs=1500, eval_every=50), seed=0)
    model.fit(scenes.subset(np.flatnonzero(~held)), y[~held])
    assert _unseen_r2(model, scenes, y, held) > 0.995
    assert model.best_epoch_ <= model.epochs_run_ == 1500
    short = Approximator("additive", _paper(epochs=5)).fit(scenes, y)
    assert not np.allclose(model.predict(scenes, final=True), short.predict(scenes))
    assert not short.converged_  # one check at epoch 5: no measured fall, not converged


def test_the_exact_protocol_solves_additive_once_and_is_the_default(scenes: SceneSet) -> None:
    y, held = _additive(scenes), _held(scenes)
    model = Approximator("additive").fit(scenes.subset(np.flatnonzero(~held)), y[~held])
    assert model.settings.budget.protocol == "exact"
    assert model.epochs_run_ == 1 and model.converged_
    assert _unseen_r2(model, scenes, y, held) > 0.999


def test_the_exact_protocol_recovers_products_within_objects_on_unseen_objects() -> None:
    scenes = SceneSet.enumerate(ConceptSpace.from_dict({"color": list("abcdef"), "shape": list("uvwxyz")}), 2)
    t = 1 + 0.5 * np.random.default_rng(1).normal(size=(2, 2, 6, 4))  # per slot and concept, near one
    y = sum(t[k, 0][scenes.scenes[:, k, 0]] * t[k, 1][scenes.scenes[:, k, 1]] for k in range(2)).astype(np.float32)
    held = (scenes.object_ids() == 7).any(axis=1)  # object 7 (b, v) never seen
    seen = scenes.subset(np.flatnonzero(~held))
    exact = Approximator("mult_within_object", seed=0).fit(seen, y[~held])
    assert exact.converged_ and 1 < exact.epochs_run_ <= 400
    assert _unseen_r2(exact, scenes, y, held) > 0.99
    assert _unseen_r2(Approximator("additive").fit(seen, y[~held]), scenes, y, held) < 0.95  # the wrong family cannot


def test_the_mlp_under_the_exact_protocol_fits_standardised_targets_and_predicts_raw_ones(scenes: SceneSet) -> None:
    y = 5.0 + 0.01 * _additive(scenes)  # an offset and a small scale, as real embeddings have
    model = Approximator("mlp(32)", ComplexitySettings(budget=Budget(epochs=600, eval_every=20, patience=10))).fit(
        scenes, y
    )
    pred = model.predict(scenes)
    assert abs(pred.mean() - y.mean()) < 0.01
    assert np.mean((pred - y) ** 2) < 0.2 * y.var(0).mean()


def test_the_estimator_refuses_bad_input(scenes: SceneSet) -> None:
    with pytest.raises(BindscopeError, match=r"y must be \[144, D\]"):
        Approximator().fit(scenes, np.zeros((3, 4)))
    model = Approximator(settings=_paper(epochs=2)).fit(scenes, _additive(scenes))
    other = SceneSet.enumerate(ConceptSpace.from_dict({"color": ["r", "g"], "shape": ["cube", "ball"]}), 2)
    with pytest.raises(BindscopeError, match="different concept space"):
        model.predict(other)
    with pytest.raises(BindscopeError, match="unknown approximator"):
        Approximator("quadratic").fit(scenes, _additive(scenes))
    with pytest.raises(BindscopeError, match="unknown protocol 'adam'; choose exact or paper"):
        Approximator(settings=ComplexitySettings(budget=resolve_budget("full", protocol="adam")))
    with pytest.raises(BindscopeError, match="table width must be at least 1"):
        Approximator(settings=ComplexitySettings(width=0))
