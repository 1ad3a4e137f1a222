"""Probes (docs/method/03-probes.md): targets, set separation, chance, the optimisers, persistence.

The default ``regularised`` optimiser has its own tests (test_probe_regularised.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.estimators import lbfgs
from bindscope.estimators.probe_runs import ProbeSettings
from bindscope.estimators.probes import (
    ProbeFit,
    ProbeSet,
    _default_init,
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


def _loss(x: torch.Tensor, w: torch.Tensor, t: torch.Tensor, blocks: list[slice]) -> torch.Tensor:
    """The reference loss by autograd: soft-target cross-entropy summed over probes, mean over scenes."""
    return -torch.stack([(t[:, b] * torch.log_softmax(x @ w[b].T, dim=1)).sum(dim=1).mean() for b in blocks]).sum()


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


# -- lbfgs: the hand-written, batched L-BFGS against torch.optim.LBFGS by autograd -------------------------------------
def _torch_lbfgs(x: torch.Tensor, t: torch.Tensor, blocks: list[slice], max_iter: int = 500) -> torch.Tensor:
    """The reference: one fit with ``torch.optim.LBFGS`` and autograd on whitened inputs, from zero, checking
    separability every 25 iterations (bindscope 0.x's ``_lbfgs_whitened``; a chunk that ends because its evaluations
    ran out goes on)."""
    x64 = x.double()
    evals, evecs = torch.linalg.eigh(x64.T @ x64 / len(x))
    keep = evals > evals.max() * 1e-10
    proj = (evecs[:, keep] / evals[keep].sqrt()).to(x.dtype)
    xw = x @ proj
    w = torch.zeros(t.shape[1], xw.shape[1], requires_grad=True)
    opt = torch.optim.LBFGS(
        [w], max_iter=25, history_size=20, tolerance_grad=1e-6, tolerance_change=1e-9, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = _loss(xw, w, t, blocks)
        loss.backward()
        return loss

    done = 0
    while done < max_iter:
        evals_before = opt.state[w].get("func_evals", 0)
        opt.step(closure)
        ran = opt.state[w]["n_iter"] - done
        done += ran
        out_of_evals = ran > 0 and opt.state[w]["func_evals"] - evals_before >= 31
        if ran < 25 and not out_of_evals:
            break
        logits = (xw @ w.T).detach()
        if all(set_separation_correct(logits[:, b], t[:, b]).all() for b in blocks):
            break
    return (w.detach() @ proj.T).contiguous()


def _stacked_split(y: np.ndarray, scenes: SceneSet, seeds: tuple[int, ...]):
    names, blocks, t = stack_targets(soft_targets(scenes), len(y))
    splits = [scene_split(len(y), 0.4, s) for s in seeds]
    x = np.stack([y[sp.train] for sp in splits])
    return names, blocks, t, splits, x, np.stack([t[sp.train] for sp in splits])


def test_lbfgs_reaches_the_optimum_of_torch_lbfgs_where_not_separable(clevr) -> None:
    """Two seeds stacked, by the hand-written gradient on numpy arrays: each probe that does not separate its
    training scenes reaches torch.optim.LBFGS's fit (the unique optimum in logit space): the same probabilities on
    the training scenes to 5e-3, the same test accuracy to one scene in 346."""
    y = planted_embeddings(clevr, "object_additive", dim=16, noise=1.0, seed=1)
    names, blocks, t, splits, x, tt = _stacked_split(y, clevr, (0, 1))
    w, solver = fit_probe_weights(x, tt, blocks, [0, 1], optimizer="lbfgs")
    assert isinstance(w, np.ndarray) and w.shape == (2, 35, 16) and w.dtype == np.float32
    assert solver.tolist() == [["lbfgs"] * 3] * 2  # no probe separates: every optimum is unique
    for i, sp in enumerate(splits):
        ref = _torch_lbfgs(torch.from_numpy(x[i]), torch.from_numpy(tt[i]), blocks).numpy()
        for b in blocks:
            probs = [torch.softmax(torch.from_numpy(x[i] @ v[b].T), 1).numpy() for v in (w[i], ref)]
            np.testing.assert_allclose(probs[0], probs[1], atol=5e-3)
            acc = [set_separation_correct(y[sp.test] @ v[b].T, t[sp.test][:, b]).mean() for v in (w[i], ref)]
            assert abs(acc[0] - acc[1]) <= 1.01 / len(sp.test), (b, acc)


def test_lbfgs_separable_probes_stop_separated_and_fast_follows_the_reference(clevr) -> None:
    """A probe that separates its training scenes is labelled so and left separated;
    fast replaces exactly those probes by the reference trajectory and keeps the others' L-BFGS fit."""
    y = planted_embeddings(clevr, "object_additive", dim=32, noise=1.0, seed=1)  # the object probe separates
    names, blocks, t, splits, x, tt = _stacked_split(y, clevr, (0,))
    w, solver = fit_probe_weights(x, tt, blocks, [0], optimizer="lbfgs")
    assert solver[0].tolist() == ["lbfgs-separable", "lbfgs", "lbfgs"]  # as torch.optim.LBFGS's fit is labelled
    assert set_separation_correct(x[0] @ w[0][blocks[0]].T, tt[0][:, blocks[0]]).all()
    fast, fast_solver = fit_probe_weights(x, tt, blocks, [0], optimizer="fast", steps=50)
    reference, _ = fit_probe_weights(x, tt, blocks, [0], optimizer="reference", steps=50)
    assert fast_solver[0].tolist() == ["reference", "lbfgs", "lbfgs"]
    np.testing.assert_array_equal(fast[0][blocks[0]], reference[0][blocks[0]])
    np.testing.assert_array_equal(fast[0][blocks[1].start :], w[0][blocks[1].start :])


def test_lbfgs_stacked_fits_equal_fits_alone_on_numpy_and_torch(clevr) -> None:
    """Fits stacked (of different ranks, one all zero) equal each fit alone; torch inputs give torch weights, the
    numpy fit's to float32 rounding."""
    y = planted_embeddings(clevr, "object_additive", dim=12, noise=1.0, seed=3)
    names, blocks, t, splits, x, tt = _stacked_split(y, clevr, (0, 1, 2))
    x[1][:, 6:] = 0  # rank 6
    x[2] = 0  # nothing left: zero weights
    stacked = lbfgs.lbfgs_whitened(x, tt, blocks, 500)
    for i in range(3):
        alone = lbfgs.lbfgs_whitened(x[i : i + 1], tt[i : i + 1], blocks, 500)[0]
        np.testing.assert_allclose(stacked[i], alone, rtol=0, atol=1e-5 * max(1.0, np.abs(alone).max()))
    assert not stacked[2].any() and not stacked[1][:, 6:].any()
    on_torch = lbfgs.lbfgs_whitened(torch.from_numpy(x[:2]), torch.from_numpy(tt[:2]), blocks, 500)
    assert isinstance(on_torch, torch.Tensor) and on_torch.dtype == torch.float32
    np.testing.assert_allclose(on_torch.numpy(), stacked[:2], rtol=0, atol=2e-3 * np.abs(stacked[:2]).max())


def test_lbfgs_line_search_is_torch_strong_wolfe() -> None:
    """On a smooth convex function, one batched fit follows torch.optim.LBFGS step for step: the same iterates."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 5)).astype(np.float64)
    t = rng.dirichlet(np.ones(4), size=60)
    problem = lbfgs.Problem.of(x[None], t[None], [slice(0, 4)])
    ours = problem.solve([lbfgs._minimise(np.zeros(20), 7)])[0].reshape(4, 5)
    w = torch.zeros(4, 5, dtype=torch.float64, requires_grad=True)
    xt, tt = torch.from_numpy(x), torch.from_numpy(t)
    opt = torch.optim.LBFGS([w], max_iter=7, history_size=20, tolerance_grad=1e-6, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = _loss(xt, w, tt, [slice(0, 4)])
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(ours, w.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_lbfgs_stops_at_max_iter(clevr) -> None:
    y = planted_embeddings(clevr, "object_additive", dim=16, noise=1.0, seed=1)
    names, blocks, t, splits, x, tt = _stacked_split(y, clevr, (0,))
    seen: list[str] = []
    problem = lbfgs.Problem.of(x @ lbfgs.whitening(x), tt, blocks)
    original = problem.answer

    def counting(waiting: dict) -> dict:
        seen.extend(r.kind for r in waiting.values())
        return original(waiting)

    problem.answer = counting  # type: ignore[method-assign]
    problem.solve([lbfgs._minimise(np.zeros(35 * 16, dtype=np.float32), 3)])
    assert seen.count("check") == 0 and 3 < seen.count("eval") <= 1 + 3 * 25


# -- the CPU probe path without torch ---------------------------------------------------------------------------------
#: `bindscope probe ARGS` in this process, as the command line runs it; then whether torch was imported, as JSON.
PROBE_COMMAND = """
import json, sys
from bindscope.cli import main
try:
    main(["probe", *sys.argv[1:]])
except SystemExit as exc:
    print(json.dumps({"status": exc.code, "torch": "torch" in sys.modules}))
"""


@pytest.fixture(scope="module")
def imported_planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An imported embedding folder of clevr captions, each scene the sum of its objects' vectors (64-d)."""
    from bindscope.data.datasets import build_dataset, load_dataset
    from bindscope.embeddings.store import import_embeddings

    folder = tmp_path_factory.mktemp("imported")
    build_dataset("clevr", folder / "ds", images=False)
    y = planted_embeddings(load_dataset(folder / "ds").scenes, "object_additive", dim=64, noise=0.5, seed=0)
    np.save(folder / "y.npy", y)
    import_embeddings(folder / "ds", folder / "y.npy", name="planted", modality="text", out=folder / "emb")
    return folder / "emb"


@pytest.mark.parametrize("optimizer", ["regularised", "lbfgs"])
def test_cpu_probe_command_never_imports_torch(imported_planted: Path, tmp_path: Path, optimizer: str) -> None:
    """`bindscope probe` on an imported embedding folder on the cpu, in a fresh process, with the default regularised
    and with the lbfgs optimiser: it reads every test object (object-additive embeddings) and never imports torch,
    whose import alone costs about 520 MB. (The regularised case needs estimators/regularised.py torch-free on numpy
    arrays too.)"""
    args = [str(imported_planted), "--out", str(tmp_path / "out"), "--optimizer", optimizer, "--seeds", "0", "-q"]
    args += ["--strengths", "0.001,0.01", "--folds", "3"] if optimizer == "regularised" else []  # a short grid
    done = subprocess.run(
        [sys.executable, "-c", PROBE_COMMAND, *args], cwd=tmp_path, capture_output=True, text=True, timeout=170
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["test"]["object_acc"]["mean"] == 1.0, summary["test"]
    assert got["torch"] is False, "the cpu probe path imported torch"


def test_band_ends_read_numpy_and_torch_paths_alike() -> None:
    """The band's ends from a regularised fit's path on numpy (the cpu) or torch (a GPU's) are the same numbers."""
    from types import SimpleNamespace

    from bindscope.estimators.probe_runs import band_ends

    rng = np.random.default_rng(0)
    path = rng.normal(size=(1, 2, 3, 5, 4)).astype(np.float32)  # [F, P, G, L, D]
    band = rng.random((1, 2, 2, 3)) > 0.3  # [F, B, P, G]
    x = rng.normal(size=(40, 4)).astype(np.float32)
    targets = {"a": np.eye(3)[rng.integers(0, 3, 40)], "b": np.eye(2)[rng.integers(0, 2, 40)]}
    args = (0, targets, ("a", "b"), [slice(0, 3), slice(3, 5)], {"a": 0.5, "b": 0.5})
    on_numpy = band_ends(x, SimpleNamespace(path=path, band=band), *args)  # type: ignore[arg-type]
    on_torch = band_ends(x, SimpleNamespace(path=torch.from_numpy(path), band=band), *args)  # type: ignore[arg-type]
    assert on_numpy == on_torch
    assert on_numpy["low"]["a"] <= 0.5 <= on_numpy["high"]["a"] and on_numpy["low"]["b"] < on_numpy["high"]["b"]
