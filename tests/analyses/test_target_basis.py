"""The principal subspace a capped complexity budget fits in (``TargetBasis``): known answers."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.analyses.complexity.fitters.basis import TargetBasis
from bindscope.analyses.complexity.subspace import READ_WITHIN, target_basis
from bindscope.estimators.probes import ProbeSet, set_separation_correct, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"attr": [f"a{i}" for i in range(5)], "noun": [f"n{i}" for i in range(5)]})
    return SceneSet.enumerate(space, 2)


def test_data_of_low_rank_is_kept_whole(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=40, width=6, seed=1)
    basis = TargetBasis.of(y, 0.999, 128)
    assert basis is not None and basis.dims == 6 and basis.describe() == {"dims": 6, "of": 40, "variance_kept": 1.0}
    np.testing.assert_allclose(basis.restore(basis.project(y)), y, atol=1e-5)


def test_a_mean_squared_error_in_the_subspace_is_the_full_spaces(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "mult_within_object", dim=30, width=8, seed=2)
    basis = TargetBasis.of(y, 0.999, 128)
    assert basis is not None
    error = np.random.default_rng(0).normal(size=(len(y), basis.dims)) @ basis.components  # inside the subspace
    inside = ((basis.project(y + error) - basis.project(y)) ** 2).mean()
    assert inside == pytest.approx((error**2).mean(), rel=1e-4)


def test_the_cap_keeps_the_leading_components_and_says_what_they_hold() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=(500, 12)) * np.linspace(3, 0.1, 12)
    basis = TargetBasis.of(y, 0.999, 3)
    assert basis is not None and basis.dims == 3
    s = np.linalg.svd(y - y.mean(0), compute_uv=False) ** 2
    assert basis.variance_kept == pytest.approx(s[:3].sum() / s.sum())
    assert TargetBasis.of(y, 0.5, 128).dims == int(np.searchsorted(np.cumsum(s) / s.sum(), 0.5)) + 1


def test_no_subspace_where_it_would_be_every_dimension_or_there_is_no_variance() -> None:
    rng = np.random.default_rng(4)
    assert TargetBasis.of(rng.normal(size=(200, 6)), 0.999, 128) is None
    assert TargetBasis.of(np.ones((50, 6)), 0.999, 128) is None


def test_fitting_in_a_subspace_that_holds_every_scene_changes_no_score(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=48, width=8, seed=5)
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    summaries, tables = [], []
    for cap in (128, 0):
        settings = ComplexitySettings(
            approximators=("additive",),
            fractions=(0.4, 0.8),
            seeds=(0,),
            description_length=False,
            budget=resolve_budget("cpu", max_target_dims=cap),
        )
        result = complexity_sweep(y, scenes, probes, settings)
        summaries.append(complexity_summary(result, settings))
        tables.append(result.table.query("variant == 'additive' and checkpoint == 'selected'"))
    fitted_in = summaries[0].fitted_in
    assert fitted_in is not None and (fitted_in.dims, fitted_in.of) == (8, 48)
    assert fitted_in.variance_kept == pytest.approx(1.0)
    assert fitted_in.object_acc == pytest.approx(fitted_in.object_acc_embeddings, abs=1e-3)
    assert summaries[1].fitted_in is None
    np.testing.assert_allclose(tables[0]["value"].to_numpy(), tables[1]["value"].to_numpy(), rtol=1e-4, atol=1e-5)
    assert summaries[0].verdict == summaries[1].verdict


def test_a_planted_function_of_smaller_width_is_an_orthonormal_image_of_it(scenes: SceneSet) -> None:
    small = planted_embeddings(scenes, "mult_within_object", dim=8, seed=6).astype(np.float64)
    wide = planted_embeddings(scenes, "mult_within_object", dim=40, width=8, seed=6).astype(np.float64)
    np.testing.assert_allclose(wide @ wide.T, small @ small.T, atol=1e-5)
    assert np.linalg.matrix_rank(wide, tol=1e-4) == 8


@pytest.mark.parametrize("width", [0, 41])
def test_a_planted_width_outside_the_embedding_is_refused(scenes: SceneSet, width: int) -> None:
    from bindscope.core.errors import BindscopeError

    with pytest.raises(BindscopeError, match=r"width must be between 1 and dim \(40\)"):
        planted_embeddings(scenes, "mult_within_object", dim=40, width=width)


def test_the_subspace_widens_until_the_probes_read_it_as_they_read_the_embeddings(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "object_lookup", dim=60, noise=0.02, seed=7)  # 25 objects: rank 25
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    objects = soft_targets(scenes)["object"]
    basis, kept = target_basis(y, resolve_budget("cpu", max_target_dims=4), probes, objects)
    assert basis is not None and kept is not None and basis.dims > 4  # 4 components lose most objects
    assert kept["object_acc_embeddings"] - kept["object_acc"] <= READ_WITHIN
    narrower = TargetBasis.of(y, 0.999, basis.dims // 2)
    assert narrower is not None
    read = probes.decision_function(narrower.within(y), ["object"])["object"]
    assert kept["object_acc_embeddings"] - set_separation_correct(read, objects).mean() > READ_WITHIN
    assert target_basis(y, resolve_budget("cpu", max_target_dims=0), probes, objects) == (None, None)


class _MemorisedTheirTrainingScenes:
    """Probes that read exactly the embeddings of their training scenes (noise included) and nothing else;
    ``truth``: the soft targets of the scenes they will be asked about, in order."""

    def __init__(self, fitted: np.ndarray, truth: np.ndarray) -> None:
        self.fitted, self.truth = {row.tobytes() for row in fitted}, truth

    def decision_function(self, z: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
        known = np.array([row.tobytes() in self.fitted for row in z])
        return {"object": np.where(known[:, None], 1.0, -1.0) * self.truth}


def test_the_probes_read_the_subspace_on_scenes_they_were_not_fitted_on(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=40, width=6, noise=0.01, seed=8)
    objects = soft_targets(scenes)["object"]
    train = np.arange(0, len(y), 2)
    held_out = np.setdiff1d(np.arange(len(y)), train)
    probes = _MemorisedTheirTrainingScenes(y[train], objects[held_out])
    basis, kept = target_basis(y, resolve_budget("cpu"), probes, objects, held_out)  # type: ignore[arg-type]
    assert basis is not None and kept is not None and basis.dims == 6  # the noise they memorised is not kept
    # read on every scene, the memorised noise looks like signal: widened to every dimension
    everywhere = _MemorisedTheirTrainingScenes(y[train], objects)
    assert target_basis(y, resolve_budget("cpu"), everywhere, objects) == (None, None)  # type: ignore[arg-type]
