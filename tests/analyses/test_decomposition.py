"""Additive decomposition (docs/method/04-decomposition.md): exact least squares, R^2, subtraction residuals."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.estimators.additive import MODELS, design_columns, fit_additive, permutations_for, r2_score, subtract
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings


@pytest.fixture(scope="module")
def clevr():
    return get_preset("clevr").build_scenes()


def _dense(columns: np.ndarray, width: int) -> np.ndarray:
    a = np.zeros((len(columns), width))
    for j in range(columns.shape[1]):
        ok = columns[:, j] >= 0
        np.add.at(a, (np.flatnonzero(ok), columns[ok, j]), 1)
    return a


@pytest.mark.parametrize("model", MODELS)
def test_matches_dense_lstsq(model: str) -> None:
    space = ConceptSpace.from_dict({"a": ["x", "y", "z"], "b": ["p", "q"]})
    scenes = SceneSet.enumerate(space, 2).concat(SceneSet.singles(space, 2))  # with padding
    y = np.random.default_rng(0).normal(size=(len(scenes), 5))
    cols, width = design_columns(scenes, model)
    fit = fit_additive(cols, width, y, model)
    a = _dense(cols, width)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    np.testing.assert_allclose(fit.predict(cols), a @ coef, atol=1e-9)


def test_design_widths(clevr) -> None:
    assert design_columns(clevr, "object_additive")[1] == 1 + 2 * 24
    assert design_columns(clevr, "concept_additive")[1] == 1 + 2 * 11
    assert design_columns(clevr, "object_bag")[1] == 1 + 24
    assert design_columns(clevr, "concept_bag")[1] == 1 + 11
    cols, _ = design_columns(clevr, "object_additive")
    red_cube_blue_sphere = np.flatnonzero((clevr.object_ids() == [6, 16]).all(1))[0]
    assert cols[red_cube_blue_sphere].tolist() == [0, 1 + 6, 1 + 24 + 16]


@pytest.mark.parametrize(
    ("kind", "best", "exact"),
    [
        ("object_additive", "object_additive", ["object_additive"]),
        ("concept_additive", "concept_additive", ["object_additive", "concept_additive"]),
        ("bag_of_concepts", "concept_bag", MODELS),
    ],
)
def test_planted_structure_is_recovered_exactly(clevr, kind: str, best: str, exact) -> None:
    y = planted_embeddings(clevr, kind, dim=16, seed=0)
    train = np.random.default_rng(0).permutation(len(clevr))[:400]  # every slot sees every object
    r2 = {}
    for model in MODELS:
        cols, width = design_columns(clevr, model)
        r2[model] = r2_score(y, fit_additive(cols[train], width, y[train]).predict(cols))
    for model in exact:
        assert r2[model] == pytest.approx(1.0, abs=1e-9), (model, r2)
    assert r2[best] == pytest.approx(1.0, abs=1e-9)


def test_r2_known_answers() -> None:
    y = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert r2_score(y, y) == 1.0
    assert r2_score(y, np.tile(y.mean(0), (2, 1))) == 0.0
    assert r2_score(y, y + 1) == pytest.approx(1 - 4 / 4)
    assert np.isnan(r2_score(np.ones((3, 2)), np.ones((3, 2))))


def test_subtraction_removes_exactly_the_fitted_part(clevr) -> None:
    y = planted_embeddings(clevr, "object_additive", dim=16, seed=0)
    np.testing.assert_allclose(subtract(clevr, y, "object_additive"), 0, atol=1e-5)
    permuted = subtract(clevr, y, "object_additive", permuted=True)
    assert np.abs(permuted).mean() > 0.1  # the wrong objects' vectors were removed
    perms = permutations_for(clevr, "concept_additive", 0)
    assert [len(p) for p in perms] == [8, 3]
    assert all((p != np.arange(len(p))).all() for p in perms)  # every label moves


def test_errors(clevr) -> None:
    with pytest.raises(BindscopeError, match="unknown decomposition model 'objects'; choose one of"):
        design_columns(clevr, "objects")
    cols, width = design_columns(clevr, "object_bag")
    with pytest.raises(BindscopeError, match="design has 576 rows but the embeddings 5"):
        fit_additive(cols, width, np.zeros((5, 3)))
