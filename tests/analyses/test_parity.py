"""Paper parity: each switch reproduces the research code's computation, written out literally
here as the research code does it, and the default path stays as documented."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from approximator_formula import formula as _formula
from bindscope.analyses.complexity import ComplexitySettings, complexity_sweep, resolve_budget
from bindscope.analyses.complexity.families import Family, Layout, init_params
from bindscope.analyses.complexity.fitters.adam import Schedule, fit_stack
from bindscope.analyses.complexity.fitters.stack import SceneIndex
from bindscope.analyses.complexity.plan import plan_sweep
from bindscope.analyses.decompose import DecomposeSettings, decompose_analysis
from bindscope.analyses.probe import probe_analysis
from bindscope.core.errors import BindscopeError
from bindscope.estimators.additive import permutations_for, subtract
from bindscope.estimators.probe_runs import ProbeSettings, used_scenes
from bindscope.estimators.probes import ProbeSet, soft_targets
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


# -- complexity --------------------------------------------------------------------------------------------
CX_SPACE = ConceptSpace.from_dict({"a": [f"a{i}" for i in range(6)], "b": [f"b{i}" for i in range(5)]})


@pytest.fixture(scope="module")
def cx() -> tuple[SceneSet, np.ndarray, ProbeSet]:
    scenes = SceneSet.enumerate(CX_SPACE, 2)
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=8, noise=0.05, seed=0) + 1.0
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    return scenes, y, probes


def test_the_paper_learning_rate_is_constant_as_in_the_research_code(cx) -> None:
    """approximate_complexity_scenes.py: Adam(lr) and a CosineAnnealingLR that is built but never stepped."""
    scenes, y, _ = cx
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    family, epochs, train = Family("mult"), 30, np.arange(0, len(scenes), 2)
    schedule = resolve_budget("paper").replace(epochs=epochs, eval_every=epochs)
    assert schedule.decay == "constant" and resolve_budget("cpu", protocol="paper").decay == "constant"
    ours = fit_stack(
        family,
        layout,
        data,
        [train],
        [np.arange(1, 30, 2)],
        [3],
        Schedule(epochs, 1e-2, epochs, decay="constant"),
        width=4,
    )
    params = {k: v.clone().requires_grad_(True) for k, v in init_params(family, layout, 4, 8, [3]).items()}
    optim = torch.optim.Adam(params.values(), lr=1e-2)
    num_epochs = epochs
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optim, T_max=num_epochs)  # noqa: F841 (never stepped)
    for _ in range(num_epochs):
        optim.zero_grad()
        pred = _formula(family, params, scenes, 0)[torch.as_tensor(train)]
        loss = torch.nn.MSELoss()(pred, data.y[torch.as_tensor(train)])
        loss.backward()
        optim.step()
    for k in params:
        torch.testing.assert_close(ours.final[k][0], params[k].detach()[0], rtol=1e-4, atol=1e-5)
    cosine = fit_stack(
        family, layout, data, [train], [np.arange(1, 30, 2)], [3], Schedule(epochs, 1e-2, epochs), width=4
    )
    assert not torch.allclose(cosine.final["w"], ours.final["w"])


def test_r2_around_all_scenes_is_the_research_codes(cx) -> None:
    """summarize_mse_r2: SSE of the scored scenes over their squares around the mean of *all* scenes."""
    scenes, y, probes = cx
    base = dict(approximators=("additive",), fractions=(0.5,), seeds=(0,), description_length=False)
    settings = ComplexitySettings(**base, budget=resolve_budget("full"))
    assert settings.r2_centre == "scenes"  # the research code's choice is the default
    ours = complexity_sweep(y, scenes, probes, settings).table
    group = complexity_sweep(y, scenes, probes, settings.replace(r2_centre="group")).table
    plan = plan_sweep(scenes, settings)[0]

    def value(table, metric: str) -> float:
        sel = table[(table.variant == "additive") & (table.group == "test_only") & (table.checkpoint == "selected")]
        return float(sel[sel.metric == metric].value.iloc[0])

    y_true = torch.as_tensor(y[plan.groups["test_only"]], dtype=torch.float64)
    sse = value(ours, "mse") * y_true.numel()  # the same fit, so the same errors
    y_true_centered = y_true - torch.as_tensor(y, dtype=torch.float64).mean(0)
    sst = torch.sum(y_true_centered**2)
    assert value(ours, "r2") == pytest.approx((1 - sse / sst).item(), rel=1e-6)
    assert value(group, "r2") == pytest.approx(1 - sse / ((y_true - y_true.mean(0)) ** 2).sum().item(), rel=1e-6)
    assert value(group, "r2") != pytest.approx(value(ours, "r2"))


def test_a_selector_keeps_the_checkpoint_of_the_lowest_loss(cx) -> None:
    scenes, y, _ = cx
    layout, data = Layout.of(scenes), SceneIndex.of(scenes, y)
    losses = iter([0.5, 0.3, 0.3, 0.4, 0.2, 0.25])  # per check: the best is the fifth (epoch 50)
    seen: list[dict] = []

    def select(params, models):
        seen.append({k: v.clone() for k, v in params.items()})
        return np.array([next(losses)])

    schedule = Schedule(60, 1e-2, 10, decay="constant", min_delta=0.0)
    fit = fit_stack(
        Family("additive"), layout, data, [np.arange(40)], [np.arange(40, 60)], [0], schedule, width=4, select=select
    )
    assert fit.best_epoch[0] == 50 and fit.best_val_mse[0] == 0.2
    for k in fit.selected:
        torch.testing.assert_close(fit.selected[k], seen[4][k])


def test_selection_on_test_is_marked_optimistic_and_beats_the_final_checkpoint(cx) -> None:
    scenes, y, probes = cx
    settings = ComplexitySettings(
        approximators=("mult",),
        fractions=(0.4, 0.7),
        seeds=(0,),
        description_length=False,
        budget=resolve_budget("paper", epochs=200, eval_every=10),
        selection="test",
    )
    table = complexity_sweep(y, scenes, probes, settings).table
    assert set(table.selection) == {"test (optimistic)"}
    acc = table[(table.variant == "mult") & (table.group == "test_only") & (table.metric == "object_acc")]
    per = acc.pivot_table(index="fraction", columns="checkpoint", values="value")
    assert (per["selected"] >= per["final"]).all()
    assert "best_test_error" in set(table.metric) and "best_val_mse" not in set(table.metric)
    validation = table[table.group == "validation"]  # every train_only scene was fitted on, as there
    assert not len(validation[validation.variant == "mult"]) and (validation.value == 0).all()
    with pytest.raises(BindscopeError, match="runs under the paper protocol only; add --protocol paper"):
        settings.replace(budget=resolve_budget("cpu"))


def test_the_complexity_parity_preset_is_the_paper_budget() -> None:
    paper = ComplexitySettings(parity="paper")
    assert paper.budget.name == "paper" and paper.budget.decay == "constant" and not paper.budget.standardize
    assert paper.selection == "validation"  # test selection is never switched on by the preset
    assert ComplexitySettings(parity="paper", budget=resolve_budget("cpu")).budget.name == "cpu"
