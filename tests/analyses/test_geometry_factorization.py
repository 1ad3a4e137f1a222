"""Factorization, orthogonality and rank of planted object vectors (known answers)."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.geometry.factorization import (
    concept_shares,
    factorization_scores,
    factorize,
    residual_norms,
    whitening,
)
from bindscope.analyses.geometry.structure import (
    component_cosines,
    effective_rank,
    numerical_rank,
    principal_angles,
)
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


def test_held_out_sweep_separates_factorised_from_random(space: ConceptSpace) -> None:
    from bindscope.analyses.geometry.sweeps import held_out_rows

    x, _ = orthogonal_objects(space)
    rows = held_out_rows(x, space, (0.5, 0.7), (0, 1))
    got = {(r["seed"], r["fraction"], r["metric"]): r["value"] for r in rows}
    assert {m for _, _, m in got} >= {"raw_r2_test", "whitened_r2_test", "head_object", "head_color"}
    assert min(v for (_, _, m), v in got.items() if m == "raw_r2_test") > 0.99
    assert min(v for (_, _, m), v in got.items() if m == "whitened_r2_test") > 0.9  # noise dims regularised
    noise = np.random.default_rng(0).normal(size=x.shape)
    bad = held_out_rows(noise, space, (0.5,), (0,))
    assert max(r["value"] for r in bad if r["metric"] == "raw_r2_test") < 0.1
