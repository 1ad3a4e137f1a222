"""Factorization, orthogonality and rank of planted object vectors (known answers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.geometry.factorization import (
    concept_shares,
    factorization_scores,
    factorize,
    residual_norms,
    whitening,
)
from bindscope.analyses.geometry.structure import component_cosines, effective_rank, numerical_rank, principal_angles
from bindscope.space.concepts import ConceptSpace

DIM = 64


@pytest.fixture(scope="module")
def space() -> ConceptSpace:
    return ConceptSpace.from_dict({"color": [f"c{i}" for i in range(6)], "shape": [f"s{i}" for i in range(5)]})


def orthogonal_objects(space: ConceptSpace, noise: float = 0.01, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """Object vectors = mu + per-concept components in orthogonal subspaces + noise."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0]
    tables, start = [], 0
    for size in space.sizes:
        raw = rng.normal(size=(size, size - 1)) @ basis[:, start : start + size - 1].T
        tables.append(raw - raw.mean(axis=0))
        start += size - 1
    objects = space.all_objects()
    x = 0.5 * basis[:, -1] + sum(t[objects[:, c]] for c, t in enumerate(tables))
    return x + noise * rng.normal(size=x.shape), tables


def test_orthogonal_sums_factorize(space: ConceptSpace) -> None:
    x, tables = orthogonal_objects(space)
    fit = factorize(x, space)
    for got, want in zip(fit.components, tables):
        assert np.allclose(got, want, atol=0.02)
    rng = np.random.default_rng(1)
    order = rng.permutation(space.num_objects)
    train, test = np.sort(order[:20]), np.sort(order[20:])
    scores = factorization_scores(x, space, train, test)
    assert scores["r2_train"] > 0.99 and scores["r2_test"] > 0.99
    assert residual_norms(x, fit, space).max() < 0.05
    shares = concept_shares(x, fit, space)
    assert set(shares) == {"color", "shape"} and abs(sum(shares.values()) - scores["r2_train"]) < 0.01
    cos = component_cosines(fit.components)
    assert cos["across"] < 0.05 and cos["within"] > 0.1
    assert principal_angles(fit.components[0], fit.components[1]).min() > 80
    assert [numerical_rank(c, 1e-2) for c in fit.components] == [5, 4]
    assert 1 < effective_rank(fit.components[0]) <= 5


def test_random_objects_do_not_generalise(space: ConceptSpace) -> None:
    x = np.random.default_rng(0).normal(size=(space.num_objects, DIM))
    order = np.random.default_rng(1).permutation(space.num_objects)
    scores = factorization_scores(x, space, np.sort(order[:20]), np.sort(order[20:]))
    assert scores["r2_test"] < 0.05 and scores["r2_train"] < 0.6


def test_whitening_makes_the_covariance_the_identity(space: ConceptSpace) -> None:
    x = np.random.default_rng(0).normal(size=(500, 8)) @ np.diag([10, 5, 2, 1, 1, 1, 0.5, 0.1])
    w = whitening(x, ridge=0.0)
    assert np.allclose(np.cov(x @ w, rowvar=False), np.eye(8), atol=1e-6)


@pytest.mark.parametrize(("dim", "objects_seen"), [(DIM, 20), (8, 25)])
def test_whitened_scores_are_those_of_the_whitened_vectors_fitted_again(dim: int, objects_seen: int) -> None:
    """The whitened measures read from the raw fit and one Cholesky factor (split_scores, whitened_fit_scores) are
    those of today's algorithm, written out here: whiten every vector (``whitening``, an eigendecomposition of the
    seen objects' covariance), fit the factorization again, score it; with fewer and more objects than dimensions."""
    from bindscope.analyses.geometry.factorization import split_scores, whitened_fit_scores
    from bindscope.estimators.additive import r2_score

    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(6)], "shape": [f"s{i}" for i in range(5)]})
    x = orthogonal_objects(space, noise=0.3)[0][:, :dim] + 2.0
    order = np.random.default_rng(3).permutation(space.num_objects)
    train, test = np.sort(order[:objects_seen]), np.sort(order[objects_seen:])
    for ridge in (0.1, 1.0):
        white = x @ whitening(x[train], ridge)
        old = factorization_scores(white, space, train, test)
        new, scored = split_scores(torch.as_tensor(x), space, train, test, ridge)
        assert scored == old["determined"] > 0
        assert new["whitened"] == pytest.approx({k: old[k] for k in ("r2_train", "r2_test")}, abs=1e-9)
        assert new["raw"] == pytest.approx(
            {k: v for k, v in factorization_scores(x, space, train, test).items() if k.startswith("r2")}, abs=1e-12
        )
        every = np.arange(space.num_objects)
        white = x @ whitening(x, ridge)
        refit = factorize(white, space)
        r2, shares = whitened_fit_scores(x, factorize(x, space), space, every, ridge)
        assert r2 == pytest.approx(r2_score(white, refit.predict(space.all_objects())), abs=1e-9)
        assert shares == pytest.approx(concept_shares(white, refit, space), abs=1e-9)


def test_held_out_sweep_separates_factorised_from_random(space: ConceptSpace) -> None:
    from bindscope.analyses.geometry.sweeps import held_out_rows

    x, _ = orthogonal_objects(space)
    every = np.arange(space.num_objects)
    rows = held_out_rows(x, space, every, (0.5, 0.7), (0, 1))

    def values(table: list[dict], variant: str, group: str, metric: str) -> list[float]:
        return [r["value"] for r in table if (r["variant"], r["group"], r["metric"]) == (variant, group, metric)]

    assert len(values(rows, "raw", "all", "r2_test")) == 4 and min(values(rows, "raw", "all", "r2_test")) > 0.99
    assert min(values(rows, "whitened", "all", "r2_test")) > 0.9  # noise dimensions regularised
    assert min(values(rows, "heads", "object", "accuracy")) > 0.95 and values(rows, "heads", "color", "accuracy")
    assert {r["fraction"] for r in rows} == {0.5, 0.7} and all(r["analysis"] == "geometry" for r in rows)
    noise = np.random.default_rng(0).normal(size=x.shape)
    bad = held_out_rows(noise, space, every, (0.5,), (0,))
    # worse than predicting the training mean: reported as is, negative (docs/method/08-geometry.md)
    assert max(values(bad, "raw", "all", "r2_test")) < 0.0
    assert max(values(bad, "heads", "object", "accuracy")) < 0.2
    # absent objects take no part: the test objects are the present ones only
    some = every[every % 3 != 0]
    part = held_out_rows(x, space, some, (0.5,), (0,))
    assert all(r["objects"] <= len(some) for r in part) and min(values(part, "raw", "all", "r2_test")) > 0.99


def test_held_out_r2_is_the_same_after_a_shift_or_a_rotation_of_the_embeddings() -> None:
    """The same planted vectors shifted by a constant (or rotated) give the same held-out R² at every
    fraction; at low fractions the unseen objects with a value no seen object holds are left out and
    counted, not scored with a component the fit never saw (which moved with the origin: -1651 for 0.161)."""
    from bindscope.analyses.geometry.sweeps import held_out_rows

    space = ConceptSpace.from_dict({"color": [f"c{i}" for i in range(8)], "shape": ["cube", "ball", "cone"]})
    x = orthogonal_objects(space, noise=0.05)[0]
    rotation = np.linalg.qr(np.random.default_rng(1).normal(size=(x.shape[1], x.shape[1])))[0]
    every = np.arange(space.num_objects)
    fractions = (0.1, 0.2, 0.3, 0.5, 0.8)

    def table(y: np.ndarray) -> dict[tuple, float]:
        rows = held_out_rows(y, space, every, fractions, (0, 1))
        return {(r["variant"], r["metric"], r["fraction"], r["seed"], r["objects"]): r["value"] for r in rows}

    base = table(x)
    for moved in (x + 5.0, x - 1e3, x @ rotation, x @ rotation + 7.0):
        other = table(moved)
        assert other.keys() == base.keys()
        for key, value in base.items():
            if key[0] in ("raw", "heads") or key[1] == "undetermined":  # whitening is only shift-invariant
                assert other[key] == pytest.approx(value, abs=1e-6), key
    left_out = {k[2]: v for k, v in base.items() if k[:2] == ("raw", "undetermined")}
    assert left_out[0.1] == 22 and left_out[0.8] == 0  # 2 seen objects link 8 colours to 3 shapes for no one
    scored = {k[2] for k in base if k[:2] == ("raw", "r2_test")}
    assert scored == {0.5, 0.8}  # below 10 seen objects (8 + 3 - 1 links) nothing unseen is determined
    assert min(v for k, v in base.items() if k[:2] == ("raw", "r2_test")) > 0.5


def test_a_correlation_drops_undetermined_points_and_says_how_many() -> None:
    from bindscope.analyses.geometry.compare import correlation

    x = np.array([0.1, 0.4, np.nan, 0.7, 0.9])
    y = np.array([0.2, 0.5, 0.6, np.nan, 1.0])
    got = correlation(x, y)
    assert got["n"] == 3 and got["left_out"] == 2 and got["pearson"] == pytest.approx(1.0, abs=0.05)
    assert correlation(np.array([0.1, np.nan, 0.3]), np.array([0.1, 0.2, 0.3]))["pearson"] is None  # 2 left
    assert "left_out" not in correlation(np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.1, 0.2]))
