"""The complexity sweep: plans that never leak test scenes, caps that keep coverage, the verdict's
arithmetic on hand-made curves, and bad settings refused with clear messages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses.complexity.curves import area, f_star
from bindscope.analyses.complexity.families import Family, Layout
from bindscope.analyses.complexity.fitters.adam import Schedule, unfinished_gain
from bindscope.analyses.complexity.plan import covering_sample, plan_sweep, stacks
from bindscope.analyses.complexity.present import reading
from bindscope.analyses.complexity.settings import BUDGETS, ComplexitySettings, resolve_budget
from bindscope.analyses.complexity.summarize import complexity_summary
from bindscope.analyses.complexity.summary import ComplexitySummary
from bindscope.analyses.complexity.sweep import EXTRA_COLUMNS, SweepResult, check_probes, complexity_sweep
from bindscope.analyses.complexity.verdict import Verdict, decide
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import KEY_COLUMNS, tidy
from bindscope.data.presets import get_preset
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SPACE = ConceptSpace.from_dict({"a": [f"a{i}" for i in range(6)], "b": [f"b{i}" for i in range(5)]})


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    return SceneSet.enumerate(SPACE, 2)


def _settings(**kw) -> ComplexitySettings:
    base = dict(
        fractions=(0.3, 0.6, 0.8), seeds=(0, 1), budget=resolve_budget("cpu", max_train_scenes=200, max_eval_scenes=150)
    )
    return ComplexitySettings(**{**base, **kw})


def test_plans_keep_test_objects_out_of_fitting_and_selection(scenes: SceneSet) -> None:
    plans = plan_sweep(scenes, _settings())
    ids = scenes.object_ids()
    assert len(plans) == 6
    for seed in (0, 1):
        mine = [p for p in plans if p.seed == seed]
        train_objects = [set(np.unique(ids[np.concatenate([p.train, p.groups["validation"]])])) for p in mine]
        assert train_objects[0] <= train_objects[1] <= train_objects[2]  # nested across fractions
        for p, seen in zip(mine, train_objects):
            assert len(p.train) <= 200 and all(len(v) <= 150 for v in p.groups.values())
            assert not set(p.train) & set(p.groups["validation"])
            assert not seen & set(np.unique(ids[p.groups["test_only"]]))  # test objects unseen
            mixed = ids[p.groups["mixed"]]
            assert (np.isin(mixed, list(seen)).any(1) & ~np.isin(mixed, list(seen)).all(1)).all()
            assert p.group_sizes["test_only"] >= len(p.groups["test_only"])
    last = [p for p in plans if p.seed == 0][-1]
    assert last.block_size + last.group_sizes["train_only"] + last.group_sizes["validation"] == len(scenes)


def test_the_probes_training_scenes_are_not_scored_unless_kept(scenes: SceneSet) -> None:
    probe_train = np.random.default_rng(0).permutation(len(scenes))[: int(0.4 * len(scenes))]
    settings = _settings(budget=resolve_budget("cpu", max_eval_scenes=0))
    plain = plan_sweep(scenes, settings)
    left_out = plan_sweep(scenes, settings, probe_train)
    for a, b in zip(plain, left_out):
        for group in ("test_only", "mixed", "train_only"):  # exactly the probe scenes go, nothing else
            assert np.array_equal(b.groups[group], np.setdiff1d(a.groups[group], probe_train))
        assert np.array_equal(a.groups["validation"], b.groups["validation"])  # fitting and selection untouched
        assert np.array_equal(a.train, b.train) and np.array_equal(a.groups["train_only"], a.train)


def test_a_sweep_leaves_out_the_probe_scenes_it_is_given(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=16, noise=0.02, seed=0)
    probe_train = np.arange(0, len(scenes), 3)
    probes = ProbeSet("lbfgs").fit(y[probe_train], {k: v[probe_train] for k, v in soft_targets(scenes).items()})
    settings = _settings(approximators=("additive",), description_length=False)
    out = complexity_sweep(y, scenes, probes, settings, probe_fitted=probe_train)
    kept = complexity_sweep(y, scenes, probes, settings.replace(probe_scenes="keep"), probe_fitted=probe_train)
    assert out.probe_scenes_unscored == len(probe_train) and kept.probe_scenes_unscored is None
    sizes = out.table[(out.table.metric == "group_scenes") & (out.table.group == "test_only")].value.sum()
    assert 0 < sizes < kept.table[(kept.table.metric == "group_scenes") & (kept.table.group == "test_only")].value.sum()
    assert ComplexitySettings(parity="paper").probe_scenes == "keep" and ComplexitySettings().probe_scenes == "exclude"


def test_a_capped_training_set_still_holds_every_train_object_in_every_slot(scenes: SceneSet) -> None:
    ids = scenes.object_ids()
    pool = np.flatnonzero((ids < 20).all(axis=1))  # 400 scenes over 20 objects
    rng = np.random.default_rng(0)
    got = covering_sample(pool, ids, 45, rng)
    assert len(got) == 45 and len(np.unique(got)) == 45 and np.isin(got, pool).all()
    for k in range(2):
        assert set(ids[got, k]) == set(range(20))
    assert np.array_equal(got, covering_sample(pool, ids, 45, np.random.default_rng(0)))
    assert np.array_equal(covering_sample(pool, ids, 1000, rng), pool)
    assert len(covering_sample(pool, ids, 10, rng)) == 10  # a cover larger than the cap: a part of it


def test_stacks_group_similar_sizes_within_the_memory_bound(scenes: SceneSet) -> None:
    plans = plan_sweep(scenes, _settings(fractions=(0.2, 0.5, 0.9), seeds=(0, 1, 2)))
    groups = stacks(plans, Family("mult"), 16, 8, Layout.of(scenes))
    assert sorted(i for g in groups for i in g) == list(range(len(plans)))
    for g in groups:
        sizes = [len(plans[i].train) for i in g]
        padded = len(sizes) * max(sizes) * 64  # widest activation: 4 slots x width 16
        assert padded <= 2**22 or padded <= 1.4 * sum(sizes) * 64


def test_area_and_f_star_on_hand_made_curves() -> None:
    curve = pd.DataFrame([[0.0, 0.5, 1.0], [0.2, 0.5, 0.8]], index=[0, 1], columns=[0.1, 0.5, 0.9])
    assert area(curve) == pytest.approx([0.5, 0.5])
    mean = curve.mean(axis=0)  # 0.1, 0.5, 0.9
    ceiling = pd.Series([1.0, 0.5, 1.0], index=[0.1, 0.5, 0.9])
    assert f_star(mean, ceiling) == 0.5  # 0.5 >= 0.9 * 0.5
    assert f_star(mean, ceiling * 2) is None
    assert area(curve[[0.5]]) == pytest.approx([0.5, 0.5])


def test_the_verdict_names_the_simplest_generalising_family() -> None:
    settings = ComplexitySettings(
        approximators=("mlp", "mult", "additive"), hidden=(32,), fractions=(0.2, 0.6), seeds=(0,)
    )
    rows = []
    acc = {
        "additive": [0.0, 0.1],
        "mult": [0.5, 0.95],
        "mlp(32)": [0.9, 0.95],
        "embeddings": [1.0, 1.0],
        "chance": [0.01, 0.01],
    }
    for name, values in acc.items():
        for f, v in zip((0.2, 0.6), values):
            ck = "" if name in ("embeddings", "chance") else "selected"
            key = ("complexity", name, "none", "test_only", "object_acc", 0, v)
            rows.append(
                {
                    **dict(zip(KEY_COLUMNS, key)),
                    "fraction": f,
                    "checkpoint": ck,
                    "budget": "cpu",
                    "selection": "validation",
                    "n_cases": 10,
                }
            )
    result = SweepResult(tidy(rows, EXTRA_COLUMNS), pd.DataFrame(), 0, {}, {})
    summary = complexity_summary(result, settings.replace(description_length=False))
    assert summary.approximators["mult"].f_star == 0.6 and summary.approximators["mlp(32)"].f_star == 0.2
    assert summary.verdict.simplest_generalising == "mult"  # simpler than mlp, though mlp needs less coverage
    assert summary.verdict.generalising == ["mult", "mlp(32)"]
    assert summary.approximators["additive"].f_star is None


def test_budgets_resolve_by_device_and_overrides() -> None:
    auto = resolve_budget("auto", "cpu")
    assert auto.replace(reason="") == BUDGETS["cpu"] and resolve_budget("cpu").reason == ""
    assert "device cpu" in auto.reason and "--budget full" in auto.reason and "512 training scenes" in auto.reason
    assert resolve_budget("auto", "cuda:0").name == "full" and "cuda:0" in resolve_budget("auto", "cuda:0").reason
    assert auto.probes == "lbfgs" and resolve_budget("full").probes == "regularised"
    assert resolve_budget("paper").probes == "fast"
    assert resolve_budget("paper", "cpu").epochs == 4000 and resolve_budget("paper").max_train_scenes is None
    assert auto.max_target_dims == 128 and "principal subspace" in auto.reason
    assert (
        resolve_budget("full").max_target_dims is None
        and resolve_budget("cpu", max_target_dims=0).max_target_dims is None
    )
    b = resolve_budget("cpu", epochs=7, patience=0, max_eval_scenes=0)
    assert (b.epochs, b.patience, b.max_eval_scenes, b.max_train_scenes) == (
        7,
        None,
        None,
        BUDGETS["cpu"].max_train_scenes,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(approximators=("linear",)), "unknown approximator 'linear'"),
        (dict(approximators=("mlp", "mlp(1024)")), "approximators repeat"),
        (dict(fractions=(0.5, 1.0)), "fraction"),
        (dict(fractions=()), "at least one fraction"),
        (dict(fractions=(0.3, 0.3)), "fractions repeat"),
        (dict(seeds=()), "at least one seed"),
        (dict(width=0), "table width must be at least 1"),
        (dict(device="cuda:0"), "no CUDA device is available"),
        (dict(device="gpu7"), "unknown device 'gpu7'"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    if kwargs.get("device", "").startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    with pytest.raises(BindscopeError, match=message):
        ComplexitySettings(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="fast"), "unknown budget 'fast'"),
        (dict(max_train_scenes=1), "at least 2"),
        (dict(epochs=-3), "at least 1"),
        (dict(max_target_dims=-1), "max_target_dims must be >= 0"),
    ],
)
def test_bad_budgets_are_refused(kwargs: dict, message: str) -> None:
    name = kwargs.pop("name", "cpu")
    with pytest.raises(BindscopeError, match=message):
        resolve_budget(name, **kwargs)


def test_a_fraction_with_too_few_train_scenes_is_refused(scenes: SceneSet) -> None:
    space = ConceptSpace.from_dict({"a": ["x", "y", "z"], "b": ["p", "q"]})
    tiny = SceneSet.enumerate(space, 2, allow_identical=False)
    with pytest.raises(BindscopeError, match=r"fraction 0.2 \(seed 0\) leaves 0 scene\(s\) made only of train objects"):
        plan_sweep(tiny, ComplexitySettings(fractions=(0.2, 0.6), seeds=(0,)))


def test_probes_that_do_not_fit_the_dataset_are_refused(scenes: SceneSet) -> None:
    y = planted_embeddings(scenes, "object_additive", dim=8)
    probes = ProbeSet("lbfgs", max_iter=5).fit(y, soft_targets(scenes))
    with pytest.raises(BindscopeError, match=r"probe 'object' is 30 x 8 but .* need 30 x 9"):
        check_probes(probes, scenes, 9)
    targets = soft_targets(scenes)
    del targets["b"]
    partial = ProbeSet("lbfgs", max_iter=5).fit(y, targets)
    with pytest.raises(BindscopeError, match="the probes have no b probe"):
        check_probes(partial, scenes, 8)


def test_single_object_scenes_are_dropped_and_counted() -> None:
    preset = get_preset("clevr")
    pairs = preset.build_scenes()
    singles = SceneSet.enumerate(pairs.space, 1)
    both = pairs.concat(singles)
    y = planted_embeddings(both, "object_additive", dim=16)
    probes = ProbeSet("lbfgs", max_iter=20).fit(y, soft_targets(both))
    settings = ComplexitySettings(
        approximators=("additive",),
        fractions=(0.5, 0.9),
        seeds=(0,),
        budget=resolve_budget("cpu", epochs=3, eval_every=1),
    )
    result = complexity_sweep(y, both, probes, settings)
    assert result.dropped_scenes == 24
    sizes = result.table[(result.table.variant == "scenes") & (result.table.metric == "group_scenes")]
    per_plan = sizes.groupby(["fraction", "seed"])["value"].sum()
    assert (per_plan == 576).all()  # every pair scene lands in exactly one group


def test_unfinished_gain_reads_the_fall_per_unit_of_learning_rate() -> None:
    schedule = Schedule(epochs=100, lr=1e-2, eval_every=10)
    epochs = np.arange(10, 101, 10)
    assert unfinished_gain(epochs, np.full(10, 0.5), schedule, variance=1.0) == 0.0  # flat: nothing left
    assert unfinished_gain(epochs, np.linspace(1.0, 0.9, 10)[::-1], schedule, variance=1.0) == 0.0  # rising
    falling = np.linspace(1.0, 0.5, 10)
    gain = unfinished_gain(epochs, falling, schedule, variance=1.0)
    lr_sum = sum(schedule.lr_at(s) for s in range(80, 100))  # the last 20% of the epochs
    expected = (falling[7] - falling[-1]) / lr_sum * 1e-2 * 0.1 * 100
    assert gain == pytest.approx(expected) and gain > 0.01
    assert unfinished_gain(epochs, falling, schedule, variance=10.0) == pytest.approx(expected / 10)


def _five_epoch_summary(scenes: SceneSet, protocol: str) -> ComplexitySummary:
    """additive and mult_within_object on planted products, fractions 0.5 and 0.8, 5 Adam epochs."""
    y = planted_embeddings(scenes, "mult_within_object", dim=8, seed=0)
    probes = ProbeSet("lbfgs", max_iter=50).fit(y, soft_targets(scenes))
    settings = _settings(
        approximators=("additive", "mult_within_object"),
        fractions=(0.5, 0.8),
        seeds=(0,),
        description_length=False,
        budget=resolve_budget("cpu", protocol=protocol, epochs=5, eval_every=1),
    )
    return complexity_summary(complexity_sweep(y, scenes, probes, settings), settings)


def test_unconverged_fits_are_flagged_and_never_read_as_high_complexity(scenes: SceneSet) -> None:
    summary = _five_epoch_summary(scenes, "paper")
    v = summary.verdict
    assert v.reliable is False and v.reading.startswith("unreliable: fits did not converge")
    assert "high-complexity" not in v.reading
    assert v.unconverged["additive"] == [0.5, 0.8]
    assert summary.approximators["additive"].converged["0.5"].mean == 0.0


def test_exact_fits_converge_where_five_adam_epochs_do_not(scenes: SceneSet) -> None:
    summary = _five_epoch_summary(scenes, "exact")
    assert summary.verdict.unconverged == {} and summary.verdict.reliable is True
    for entry in summary.approximators.values():
        assert all(v.mean == 1.0 for v in entry.converged.values())


def _verdict(f_stars: dict, settings: ComplexitySettings, unconverged: dict) -> Verdict:
    return decide(settings.families(), f_stars, max(settings.fractions), unconverged=unconverged)


def test_a_verdict_from_converged_fits_is_reliable() -> None:
    f_stars = {"additive": None, "mult": 0.6, "mlp(8)": 0.2}
    settings = ComplexitySettings(approximators=("additive", "mult", "mlp"), hidden=(8,), fractions=(0.2, 0.6))
    assert _verdict(f_stars, settings, {}).reliable is True
    # an unconverged fit of a family the verdict does not depend on leaves it reliable
    assert _verdict(f_stars, settings, {"mlp(8)": [0.2]}).reliable is True
    assert _verdict(f_stars, settings, {"mult": [0.6]}).reliable is True  # at f*, not below it
    shaky = _verdict(f_stars, settings, {"additive": [0.6], "mult": [0.2]})
    assert shaky.reliable is False and shaky.unconverged == {"additive": [0.6], "mult": [0.2]}
    assert shaky.simplest == "mult" and reading(shaky, settings.budget.protocol).startswith("unreliable")


def test_the_scenes_loaded_probes_were_fitted_on_are_rebuilt_from_their_record(scenes: SceneSet) -> None:
    from bindscope.estimators.probe_runs import recorded_training_scenes, used_scenes
    from bindscope.space.splits import scene_split

    mixed = scenes.concat(SceneSet.singles(SPACE))  # pairs, then single objects
    split = {"kind": "scene", "train_fraction": 0.4, "seed": 3, "scenes": "full", "source": "bindscope"}
    got = recorded_training_scenes({"split": split, "dataset_hash": "h"}, mixed)
    full = used_scenes(mixed, "full")  # the probes saw only the pairs, split among themselves
    assert np.array_equal(got, full[scene_split(len(full), 0.4, 3).train])
    every = recorded_training_scenes({"split": {**split, "scenes": "all"}, "dataset_hash": "h"}, mixed)
    assert np.array_equal(every, scene_split(len(mixed), 0.4, 3).train)
    assert recorded_training_scenes({"split": split}, mixed) is None  # no dataset to tie it to
    assert recorded_training_scenes({"dataset_hash": "h"}, mixed) is None


def test_probes_fitted_by_complexity_record_the_split_they_were_fitted_on(scenes: SceneSet) -> None:
    from bindscope.analyses.complexity.analysis import fitting_settings
    from bindscope.estimators.probe_runs import probe_variant, recorded_training_scenes, split_record

    mixed = scenes.concat(SceneSet.singles(SPACE))  # like `text`: pairs, then single objects
    y = planted_embeddings(mixed, "concept_additive", dim=8, seed=0)
    settings = fitting_settings(ComplexitySettings(probe_seed=2))
    run = probe_variant(y, mixed, settings)  # complexity fits its probes on every scene
    meta = {"split": split_record(settings, 2), "dataset_hash": "h"}
    assert np.array_equal(recorded_training_scenes(meta, mixed), run.train_scenes[2])


def test_reading_every_probe_at_once_is_reading_each(scenes: SceneSet, monkeypatch: pytest.MonkeyPatch) -> None:
    """probe_reads (every probe in one product, chunks of rows) reads what decision_function and set separation
    read probe by probe, and keeps the object logits of the rows asked for, across chunk boundaries."""
    from bindscope.analyses.complexity import reads
    from bindscope.estimators.probes import set_separation_correct

    y = planted_embeddings(scenes, "additive_concepts_objects", dim=16, noise=0.3, seed=0)
    targets = soft_targets(scenes)
    probes = ProbeSet("lbfgs").fit(y, targets)
    rows = np.random.default_rng(0).permutation(len(scenes))[:200]
    x = y[rows] + np.random.default_rng(1).normal(0, 0.2, (len(rows), y.shape[1])).astype(np.float32)
    keep = np.arange(len(rows)) % 3 == 0
    monkeypatch.setattr(reads, "READ_CHUNK", 64)  # 4 chunks, the last one short
    got = reads.probe_reads(probes, x, rows, targets, keep)
    logits = probes.decision_function(x)
    for name, t in targets.items():
        want = set_separation_correct(logits[name], t[rows])
        assert np.array_equal(got.correct[name], want) and 0 < want.mean() < 1, name
    assert np.allclose(got.logits, logits["object"][keep], rtol=1e-5, atol=1e-5)
    assert got.at(np.array([3, 0]))["object"].tolist() == got.correct["object"][[3, 0]].tolist()
    none = reads.probe_reads(probes, x, rows, {"object": targets["object"]})
    assert list(none.correct) == ["object"] and none.logits.shape == (0, SPACE.num_objects)
