"""Paper parity: each switch reproduces the research code's computation, written out literally
here as the research code does it, and the default path stays as documented."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bindscope.analyses.decompose import DecomposeSettings, decompose_analysis
from bindscope.analyses.decomposition import permutations_for, subtract
from bindscope.analyses.probe import ProbeSettings, probe_analysis, used_scenes
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SPACE = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["cube", "ball", "cone"]})


@pytest.fixture(scope="module")
def pairs_and_singles() -> SceneSet:
    """Like `text`: every ordered pair, then every object alone (the singles come last)."""
    return SceneSet.enumerate(SPACE, 2).concat(SceneSet.singles(SPACE, 2))


def _research_subtraction(y: np.ndarray, scenes: SceneSet, model: str, permuted: bool) -> np.ndarray:
    """run_probe_suite.make_subtractions: centre Y, fit per-slot tables without a bias (the optimum
    of its MSE, least squares), subtract the reconstruction from the *uncentred* embeddings."""
    Y = torch.as_tensor(y, dtype=torch.float64)
    Y = Y - Y.mean(dim=0, keepdim=True)
    perm = permutations_for(scenes, model, 0) if permuted else None
    design = _one_hots(scenes, model, None)
    coef = torch.linalg.lstsq(design, Y, driver="gelsd").solution
    recon = _one_hots(scenes, model, perm) @ coef
    out_arr = y.copy()
    out_arr[: recon.shape[0]] = out_arr[: recon.shape[0]] - recon.numpy()
    return out_arr


def _one_hots(scenes: SceneSet, model: str, perm: list[np.ndarray] | None) -> torch.Tensor:
    """The research model's inputs as a dense design: one table per slot (objects) or per slot and concept."""
    blocks = []
    if model == "object_additive":
        ids = scenes.object_ids()
        ids = ids if perm is None else perm[0][ids]
        blocks = [np.eye(SPACE.num_objects)[ids[:, k]] for k in range(2)]
    else:
        for k in range(2):
            for c in range(SPACE.num_concepts):
                v = scenes.scenes[:, k, c]
                blocks.append(np.eye(SPACE.sizes[c])[v if perm is None else perm[c][v]])
    return torch.as_tensor(np.concatenate(blocks, axis=1), dtype=torch.float64)


@pytest.mark.parametrize("model", ["object_additive", "concept_additive"])
@pytest.mark.parametrize("permuted", [False, True], ids=["fitted", "permuted"])
def test_a_residual_that_keeps_the_mean_is_the_research_codes(model: str, permuted: bool) -> None:
    scenes = SceneSet.enumerate(SPACE, 2)
    y = (planted_embeddings(scenes, "object_additive", dim=6, noise=0.3, seed=0) + 2.0).astype(np.float32)
    ours = subtract(scenes, y, model, permuted=permuted, keep_mean=True)
    np.testing.assert_allclose(ours, _research_subtraction(y, scenes, model, permuted), atol=1e-4)
    assert np.abs(ours.mean(0) - y.mean(0)).max() < 1e-4 or permuted  # the residual keeps ȳ


def test_removing_the_mean_is_the_residual_of_the_fit_with_its_intercept() -> None:
    scenes = SceneSet.enumerate(SPACE, 2)
    y = planted_embeddings(scenes, "object_additive", dim=6, noise=0.3, seed=0) + 2.0
    removed = subtract(scenes, y, "object_additive")  # the function's default is unchanged
    np.testing.assert_allclose(removed.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(
        subtract(scenes, y, "object_additive", keep_mean=True) - removed, y.mean(0)[None].repeat(len(y), 0), atol=1e-4
    )
    assert DecomposeSettings().residual_mean == "keep"  # the research code's choice is the default


def test_full_scenes_are_the_research_codes_pairs(pairs_and_singles: SceneSet) -> None:
    scenes = pairs_and_singles
    kept = [i for i, n in enumerate(scenes.num_objects()) if n == 2]  # `len(scene) == 2`, as written there
    assert used_scenes(scenes, "full").tolist() == kept
    assert used_scenes(scenes, "all").tolist() == list(range(len(scenes)))
    assert ProbeSettings().scenes == "full"
    with pytest.raises(BindscopeError, match="no scene holds all 2 objects; use every scene with --scenes all"):
        used_scenes(SceneSet.singles(SPACE, 2), "full")


def _research_probe_split(num_scenes: int, train_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """train_embeddings.train_embeddings_simple's split (seed fixed at 0), after its 2-object filter."""
    g = torch.Generator(device="cpu")
    g.manual_seed(0)
    perm = torch.randperm(int(num_scenes), generator=g, device="cpu")
    n_train = max(1, min(int(num_scenes) - 1, int(float(train_ratio) * int(num_scenes))))
    return perm[:n_train].numpy(), perm[n_train:].numpy()


@pytest.mark.parametrize("parity", [{"parity": "paper"}, {"split_source": "paper"}], ids=["preset", "option"])
def test_the_paper_probe_split_trains_on_the_research_codes_scenes(pairs_and_singles: SceneSet, parity: dict) -> None:
    scenes = pairs_and_singles
    y = planted_embeddings(scenes, "object_additive", dim=8, noise=0.1, seed=0)
    settings = ProbeSettings(optimizer="lbfgs", seeds=(0,), max_iter=20, **parity)
    _, _, per_scene = probe_analysis(y, scenes, settings)
    train, test = _research_probe_split(81, 0.4)  # the 81 pairs come first
    got = per_scene[per_scene.probe == "object"]
    assert sorted(got[got.group == "train"].scene) == sorted(train.tolist())
    assert sorted(got[got.group == "test"].scene) == sorted(test.tolist())
    _, _, default = probe_analysis(y, scenes, ProbeSettings(optimizer="lbfgs", seeds=(0,), max_iter=20))
    default_train = default[(default.probe == "object") & (default.group == "train")].scene
    assert sorted(default_train) != sorted(train.tolist()) and default_train.max() < 81  # numpy's split, pairs only
    _, _, every = probe_analysis(y, scenes, ProbeSettings(optimizer="lbfgs", seeds=(0,), max_iter=20, scenes="all"))
    assert every.scene.max() >= 81 and every[every.probe == "object"].scene.nunique() == len(scenes)


def test_the_parity_preset_fills_only_what_was_not_given() -> None:
    paper = DecomposeSettings(parity="paper")
    assert (paper.split_source, paper.scenes, paper.residual_mean, paper.test_fraction) == (
        "paper",
        "full",
        "keep",
        0.01,
    )
    assert DecomposeSettings(parity="paper", test_fraction=0.2, split_source="bindscope").split_source == "bindscope"
    assert DecomposeSettings(parity="paper", test_fraction=0.2).test_fraction == 0.2
    assert (DecomposeSettings().split_source, DecomposeSettings().test_fraction) == ("bindscope", 0.2)
    with pytest.raises(BindscopeError, match="parity: Input should be 'bindscope' or 'paper'"):
        ProbeSettings(parity="research")


def test_decompose_on_full_scenes_fits_and_scores_the_pairs_only(pairs_and_singles: SceneSet) -> None:
    scenes = pairs_and_singles
    y = planted_embeddings(scenes, "object_additive", dim=8, noise=0.1, seed=0)
    settings = DecomposeSettings(optimizer="lbfgs", seeds=(0,), max_iter=20)
    pairs_only, _ = decompose_analysis(y[:81], scenes.subset(np.arange(81)), settings)
    full, _ = decompose_analysis(y, scenes, settings)
    assert np.allclose(full.value.to_numpy(), pairs_only.value.to_numpy())
    every, _ = decompose_analysis(y, scenes, settings.replace(scenes="all"))
    assert not np.allclose(every.value.to_numpy(), full.value.to_numpy())
