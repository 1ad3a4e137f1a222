"""Probes (docs/method/03-probes.md): targets, set separation, chance, the optimisers, persistence.

The default ``regularised`` optimiser has its own tests (test_probe_regularised.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.estimators.probe_runs import ProbeSettings
from bindscope.estimators.probes import (
    ProbeFit,
    ProbeSet,
    _default_init,
    _loss,
    adam_reference,
    chance_accuracy,
    fit_probe_weights,
    set_separation_correct,
    soft_targets,
    stack_targets,
    threads_for,
)
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings
from bindscope.space.splits import scene_split


@pytest.fixture(scope="module")
def clevr():
    return get_preset("clevr").build_scenes()


def test_soft_targets_known_answers(clevr) -> None:
    space = clevr.space
    scenes = SceneSet(space, np.array([[[6, 0], [0, 2]], [[6, 0], [6, 0]], [[1, 1], [-1, -1]]]))
    t = soft_targets(scenes)
    red_cube, blue_sphere, brown_cylinder = 6, 0 + 8 * 2, 1 + 8 * 1
    assert t["object"][0, red_cube] == 0.5 and t["object"][0, blue_sphere] == 0.5 and t["object"][0].sum() == 1
    assert t["object"][1, red_cube] == 1.0  # the same object twice: one label, weight 1
    assert t["object"][2, brown_cylinder] == 1.0  # a single object
    np.testing.assert_array_equal(t["color"][0], np.eye(8)[[6, 0]].sum(0) / 2)
    np.testing.assert_array_equal(t["shape"][0], [0.5, 0, 0.5])
    np.testing.assert_array_equal(t["shape"][1], [1, 0, 0])


def test_set_separation_hand_made() -> None:
    targets = np.array([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [1, 0, 0, 0], [0.5, 0.5, 0, 0]])
    logits = np.array(
        [
            [3.0, 2.0, 1.0, 0.0],  # both present above every absent: correct
            [3.0, 0.5, 1.0, 0.0],  # a present label below an absent one: wrong
            [1.0, 1.0, 0.0, 0.0],  # tie between the present and an absent label: wrong
            [2.0, 2.0, 1.9, -5.0],  # ties among present labels are fine
        ]
    )
    assert set_separation_correct(logits, targets).tolist() == [True, False, False, True]
    with pytest.raises(BindscopeError, match="differ in shape"):
        set_separation_correct(logits[:, :3], targets)


def test_chance_known_answers(clevr) -> None:
    t = soft_targets(clevr)["object"]
    two_distinct = (t > 0).sum(1) == 2
    assert chance_accuracy(t[two_distinct]) == pytest.approx(1 / 276)
    assert chance_accuracy(t[~two_distinct]) == pytest.approx(1 / 24)
    assert chance_accuracy(t) == pytest.approx((552 / 276 + 24 / 24) / 576)


def test_adam_reference_is_torch_adam_with_cosine() -> None:
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(40, 6)).astype(np.float32))
    t = torch.from_numpy(rng.dirichlet(np.ones(5), size=40).astype(np.float32))
    blocks = [slice(0, 3), slice(3, 5)]
    t[:, :3] /= t[:, :3].sum(1, keepdim=True)
    t[:, 3:] /= t[:, 3:].sum(1, keepdim=True)
    init = _default_init(5, 6, seed=4)
    w = init.clone().requires_grad_(True)
    opt = torch.optim.Adam([w], lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=60)
    with threads_for(0):
        for _ in range(60):
            opt.zero_grad()
            _loss(x, w, t, blocks).backward()
            opt.step()
            sched.step()
    ours = adam_reference(x[None], t[None], blocks, init[None], 60, 1e-2)[0]
    torch.testing.assert_close(ours, w.detach(), rtol=1e-5, atol=1e-6)


def _fit_both(y: np.ndarray, scenes: SceneSet, steps: int = 10_000):
    names, blocks, t = stack_targets(soft_targets(scenes), len(y))
    sp = scene_split(len(y), 0.4, 0)
    x = torch.from_numpy(y[sp.train])[None]
    tt = torch.from_numpy(t[sp.train])[None]
    fast, solver = fit_probe_weights(x, tt, blocks, [0], optimizer="fast", steps=steps)
    ref, _ = fit_probe_weights(x, tt, blocks, [0], optimizer="reference", steps=steps)
    xte, tte = y[sp.test], t[sp.test]
    acc = lambda w: [set_separation_correct(xte @ w[0][b].numpy().T, tte[:, b]).mean() for b in blocks]  # noqa: E731
    return names, solver[0], acc(fast), acc(ref), fast, ref


def test_fast_matches_reference_where_not_separable(clevr) -> None:
    y = planted_embeddings(clevr, "object_additive", dim=8, noise=0.5, seed=1)  # 230 scenes in 8 dims
    names, solver, fast_acc, ref_acc, _, _ = _fit_both(y, clevr)
    assert list(solver) == ["lbfgs"] * 3  # not separable: the unique optimum
    for name, a, b in zip(names, fast_acc, ref_acc):
        assert abs(a - b) <= 0.01, (name, a, b)


def test_fast_follows_the_reference_where_separable(clevr) -> None:
    y = planted_embeddings(clevr, "bag_of_concepts", dim=64, noise=0.5, seed=1)
    names, solver, fast_acc, ref_acc, fast, ref = _fit_both(y, clevr, steps=500)
    assert solver[names.index("object")] == "reference"  # 230 scenes in 64 dims: separable
    b = slice(0, 24)
    torch.testing.assert_close(fast[0][b], ref[0][b])
    assert fast_acc[0] == ref_acc[0]


def test_probe_set_normalize_is_scale_invariant(clevr, tmp_path: Path) -> None:
    y = planted_embeddings(clevr, "object_additive", dim=8, noise=0.5, seed=2)
    t = soft_targets(clevr)
    scale = np.random.default_rng(0).uniform(0.1, 10, size=(len(y), 1)).astype(np.float32)
    a = ProbeSet(normalize=True, center=True).fit(y, t)
    b = ProbeSet(normalize=True, center=True).fit(y * scale, t)
    for name in t:
        np.testing.assert_array_equal(a.correct(y, t)[name], b.correct(y * scale, t)[name])
    a.save(tmp_path / "p")
    back = ProbeSet.load(tmp_path / "p")
    np.testing.assert_allclose(back.decision_function(y)["object"], a.decision_function(y)["object"], rtol=1e-5)
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "color.npy",
        "mean.npy",
        "object.npy",
        "probe.json",
        "shape.npy",
    ]


def test_probe_errors(clevr, tmp_path: Path) -> None:
    with pytest.raises(
        BindscopeError, match="optimizer: Input should be 'regularised', 'fast', 'reference' or 'lbfgs'"
    ):
        ProbeSet("sgd")
    with pytest.raises(BindscopeError, match="invalid ProbeFit: steps: must be at least 1, got 0"):
        ProbeSet(steps=0)
    with pytest.raises(BindscopeError, match=r"targets 'object' must be \[10, L\]"):
        ProbeSet().fit(np.zeros((10, 3)), {"object": np.zeros((9, 2))})
    with pytest.raises(BindscopeError, match="all-zero embedding row"):
        ProbeSet(normalize=True).fit(np.zeros((4, 3)), {"object": np.eye(4)[:, :2]})
    with pytest.raises(BindscopeError, match="is not a bindscope probe file"):
        (tmp_path / "probe.json").write_text('{"format": "x"}')
        ProbeSet.load(tmp_path)


def test_chance_formula_for_sets_of_size_m() -> None:
    t = np.zeros((3, 10))
    t[0, :3] = 1 / 3
    t[1, :1] = 1
    t[2, :2] = 0.5
    assert chance_accuracy(t) == pytest.approx((1 / math.comb(10, 3) + 1 / 10 + 1 / 45) / 3)


def test_tiny_space_probe_recovers_objects() -> None:
    space = ConceptSpace.from_dict({"color": ["red", "blue", "green"], "shape": ["cube", "ball"]})
    scenes = SceneSet.enumerate(space, 2)
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    probe = ProbeSet(optimizer="lbfgs").fit(y, soft_targets(scenes))
    assert probe.correct(y, soft_targets(scenes))["object"].all()


def test_separable_probes_over_budget_keep_lbfgs_and_say_so(clevr, caplog) -> None:
    y = planted_embeddings(clevr, "bag_of_concepts", dim=64, noise=0.5, seed=1)
    names, blocks, t = stack_targets(soft_targets(clevr), len(y))
    x, tt = torch.from_numpy(y[:230])[None], torch.from_numpy(t[:230])[None]
    with caplog.at_level("WARNING", logger="bindscope.estimators.probes"):
        _, solver = fit_probe_weights(x, tt, blocks, [0], optimizer="fast", exact_budget_s=0.0)
    assert solver[0][names.index("object")] == "lbfgs-separable"
    assert "would take about" in caplog.text and "--optimizer reference" in caplog.text
    _, solver = fit_probe_weights(x, tt, blocks, [0], optimizer="lbfgs")
    assert "reference" not in set(solver[0])


def test_one_declaration_of_the_fit_knobs() -> None:
    """ProbeSet and the analyses' ProbeSettings take the same knobs, declared and checked once (ProbeFit)."""
    assert set(ProbeFit.model_fields) <= set(ProbeSettings.model_fields)
    settings = ProbeSettings(optimizer="lbfgs", max_iter=7, center=True, seeds=(3,))
    probes = ProbeSet(settings, seed=3)
    assert probes.settings is settings and probes.optimizer == "lbfgs" and probes.center and probes.seed == 3
    assert ProbeSet("lbfgs", max_iter=7).settings == ProbeFit(optimizer="lbfgs", max_iter=7)
    assert ProbeSet(settings, normalize=True).settings == ProbeFit(
        **{**settings.solver_options(), "center": True, "normalize": True}
    )
