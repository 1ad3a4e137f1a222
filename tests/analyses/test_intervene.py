"""Interventions on planted embeddings (DESIGN.md known answers), the batched scorer against a plain
loop, the target draw, and every bad input of the analysis."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from bindscope.analyses import AnalysisInputs, InterveneSettings, run_analysis
from bindscope.analyses.intervene import at_k, intervene_analysis, intervene_summary
from bindscope.analyses.intervene.edits import draw_targets, plan_edits, sample_plan
from bindscope.analyses.intervene.score import (
    MEMORY_BUDGET,
    TIE_TOL,
    Job,
    _Engine,
    block_size,
    job_ks,
    plan_layout,
    score_jobs,
)
from bindscope.analyses.intervene.variants import BAG, UNEDITED
from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.estimators.object_banks import group_means, obj_avg_bank, pos_avg_bank, single_bank
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

DIM = 64


@pytest.fixture(scope="module")
def clevr() -> SceneSet:
    return get_preset("clevr").build_scenes()


def positional_objects(scenes: SceneSet, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Object-additive scenes with per-position object vectors ``T_s[o] = v[o] + 0.5 w_s[o]``, and the
    single-object bank ``T_s[o]`` (rows object-major, one per slot)."""
    rng = np.random.default_rng(seed)
    u, k = scenes.space.num_objects, scenes.max_objects
    v = rng.normal(0, 1 / np.sqrt(DIM), (u, DIM))
    tables = [v + 0.5 * rng.normal(0, 1 / np.sqrt(DIM), (u, DIM)) for _ in range(k)]
    ids = scenes.object_ids()
    y = sum(tables[s][ids[:, s]] for s in range(k))
    singles = np.stack(tables, axis=1).reshape(u * k, DIM)
    return y.astype(np.float32), singles.astype(np.float32)


def lbfgs_probes(y: np.ndarray, scenes: SceneSet) -> ProbeSet:
    return ProbeSet("lbfgs").fit(y, soft_targets(scenes))


def run(y, scenes, singles=None, noun="shape", **settings):
    inputs = AnalysisInputs(y, scenes, probes=lbfgs_probes(y, scenes), singles=singles, noun=noun)
    settings = InterveneSettings(**{"cases": True, **settings})
    return intervene_analysis(inputs, settings), settings


def value(
    result, variant: str, group: str, metric: str = "retrieval", k: float = 1.0, edit: str = "attribute"
) -> float:
    t = result.table
    rows = t[(t.variant == variant) & (t.group == group) & (t.metric == metric) & (t.edit == edit)]
    rows = rows[rows.k == (0.0 if variant == UNEDITED else k)]
    assert len(rows), (variant, group, metric, k)
    return float(rows["value"].mean())


# -- known answers ------------------------------------------------------------------------------------------
def test_positional_objects_every_bank_edits(clevr) -> None:
    y, singles = positional_objects(clevr)
    result, settings = run(y, clevr, singles)
    for bank in ("obj-avg", "pos-avg", "single"):
        for group in ("shared", "different"):
            assert value(result, bank, group) > 0.97, (bank, group)
            assert value(result, bank, group, "probe") > 0.97, (bank, group)
        assert value(result, UNEDITED, "all") == 0.0  # x alone never is the edited scene
    assert intervene_summary(result, settings).banks["single"].model_dump(mode="json") == {"available": True}


def test_single_captions_bank_is_position_free(clevr) -> None:
    """One row per object (captions): the same vector serves both slots, and the edits still land."""
    y, _ = positional_objects(clevr)
    rng = np.random.default_rng(0)
    ids = clevr.object_ids()
    v = group_means(ids, y, clevr.space.num_objects)[0]  # any position-free object vector
    result, _ = run(y, clevr, v + 0.01 * rng.normal(size=v.shape).astype(np.float32))
    assert value(result, "single", "shared") > 0.97 and value(result, "single", "different") > 0.97


def test_independent_slot_tables_defeat_obj_avg(clevr) -> None:
    """Unrelated vectors per slot: pos-avg edits land; obj-avg averages the two slots' vectors, so
    its edit sits halfway between x and the edited scene (about half the cases)."""
    y = planted_embeddings(clevr, "object_additive", dim=DIM, seed=0)
    result, _ = run(y, clevr)
    assert value(result, "pos-avg", "shared") == 1.0 and value(result, "pos-avg", "different") == 1.0
    assert 0.3 < value(result, "obj-avg", "all") < 0.7


def test_slotted_bag_of_concepts_edits(clevr) -> None:
    """A sum of per-slot concept vectors is linear in the attribute: the edits land."""
    y = planted_embeddings(clevr, "concept_additive", dim=DIM, seed=0)
    result, _ = run(y, clevr)
    assert value(result, "pos-avg", "shared") > 0.97 and value(result, "pos-avg", "different") > 0.97
    assert value(result, BAG, "all") < 0.6  # an edit averaged over both slots lands about half the time


def test_unslotted_bag_of_concepts_fails_shared_attribute(clevr) -> None:
    """Without slots, the left and right edits of a shared-attribute scene are the same vector:
    at most one of the two can be right."""
    y = planted_embeddings(clevr, "bag_of_concepts", dim=DIM, seed=0)
    result, _ = run(y, clevr)
    cases = result.tables["cases"]
    for bank in ("obj-avg", "pos-avg", BAG):
        shared = cases[(cases.variant == bank) & cases.shared]
        pairs = shared.groupby("scene")
        assert (pairs["retrieved"].nunique() == 1).all(), bank  # the two edits coincide
        assert (pairs["hit"].sum() <= 1).all(), bank
        assert value(result, bank, "shared") <= 0.5


def test_random_scenes_do_not_edit(clevr) -> None:
    y = planted_embeddings(clevr, "random", dim=DIM, seed=0)
    result, _ = run(y, clevr)
    for bank in ("obj-avg", "pos-avg", BAG):
        assert value(result, bank, "all") < 0.05, bank


def test_k_zero_is_the_unedited_scene_exactly(clevr) -> None:
    y, singles = positional_objects(clevr)
    result, _ = run(y, clevr, singles, k=(0.0, 1.0))
    cases = result.tables["cases"]
    base = cases[cases.variant == UNEDITED].reset_index(drop=True)
    for bank in ("obj-avg", "pos-avg", "single", BAG):
        zero = cases[(cases.variant == bank) & (cases.k == 0)].reset_index(drop=True)
        for column in (
            *("scene", "side", "expected", "retrieved", "rank", "cos_expected", "cos_retrieved", "probe_hit"),
            *("binding", "bound_hit", "bound_probe_hit"),
        ):
            assert zero[column].equals(base[column]), (bank, column)


def test_noun_edits_and_both(clevr) -> None:
    y, singles = positional_objects(clevr)
    result, settings = run(y, clevr, singles, edit="both")
    assert set(result.table.edit) == {"attribute", "noun"}
    assert value(result, "pos-avg", "all", edit="noun") > 0.97
    cases = result.tables["cases"]
    noun_cases = cases[(cases.edit == "noun") & (cases.variant == "pos-avg")]
    assert set(noun_cases.source) <= {"cube", "cylinder", "sphere"}
    assert result.skipped["noun"][UNEDITED] == {"same color": 2 * 8 * 9}


def test_seeds_give_spread_and_summary(clevr, tmp_path) -> None:
    y, singles = positional_objects(clevr)
    inputs = AnalysisInputs(y, clevr, probes=lbfgs_probes(y, clevr), singles=singles, noun="shape")
    loaded = run_analysis("intervene", inputs, tmp_path / "r", InterveneSettings(k=(0.5, 1.0, 2.0), seeds=(42, 7)))
    s = loaded.typed
    part = at_k(s, "attribute", "pos-avg", "shared", 1.0)
    assert part.retrieval.n_seeds == 2 and part.cases > 0
    assert s.sampled is None and part.intervals is None and "sampled" not in loaded.summary  # every edit scored
    assert s.groups == ["shared", "different", "all"] and s.table_k == 1.0
    assert (tmp_path / "r" / "plots" / "k_curve.png").stat().st_size > 1000
    cases = loaded.read_table("cases")
    assert set(cases.seed) == {42, 7} and not (tmp_path / "r" / "cases.csv").exists()
    assert loaded.summary["seeds"] == [42, 7]


# -- the plan and the draw ---------------------------------------------------------------------------------
def test_targets_follow_one_seeded_stream_in_dataset_order(clevr) -> None:
    plan = plan_edits(clevr, "color", "shape", 42, "attribute")
    values = clevr.scenes
    rng = random.Random(42)
    expected = []
    for a, b in zip(values[:, 0], values[:, 1]):
        if a[1] == b[1]:
            continue
        candidates = [c for c in range(8) if c not in (a[0], b[0])]
        expected.append(rng.sample(candidates, 1)[0])
    assert plan.target_value[::2].tolist() == expected
    assert (plan.target_value != plan_edits(clevr, "color", "shape", 43, "attribute").target_value).any()
    assert plan.skipped == {"same shape": 2 * 8 * 8 * 3}
    left = plan.side == 0
    exp = clevr.scenes[plan.expected]
    assert (exp[left, 0, 0] == plan.target_value[left]).all() and (exp[~left, 1, 0] == plan.target_value[~left]).all()


def test_draw_skips_without_candidates() -> None:
    values = np.array([[0, 1], [0, 0], [1, 1]])
    out = draw_targets(values, np.array([True, True, False]), np.array([0, 1, 2]), 0)
    assert out.tolist() == [2, out[1], -1] and out[1] in (1, 2)


def test_missing_edited_scenes_are_counted() -> None:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b", "y"], "shape": ["s", "t"]})
    scenes = SceneSet.sample(space, 2, 30, seed=0)
    plan = plan_edits(scenes, "color", "shape", 42, "attribute")
    assert plan.skipped.get("edited scene not in the dataset", 0) > 0
    assert (plan.expected >= 0).all()


def test_banks_count_both_slots() -> None:
    ids = np.array([[0, 0], [0, 1]])
    y = np.array([[1.0, 0.0], [0.0, 1.0]])
    obj = obj_avg_bank(ids, y, 3)
    np.testing.assert_allclose(obj.vectors[0, 0], [2 / 3, 1 / 3])  # scene 0 counts twice
    assert obj.present.tolist() == [[True, True, False]] * 2
    pos = pos_avg_bank(ids, y, 3)
    np.testing.assert_allclose(pos.vectors[1, 0], [1.0, 0.0])
    assert pos.present.tolist() == [[True, False, False], [True, True, False]]
    assert obj.rows(np.array([1, 0]), np.array([2, 1])).tolist() == [-1, 1]


def test_single_bank_shapes() -> None:
    two = single_bank(np.arange(12, dtype=np.float32).reshape(6, 2), 3, 2)  # 3 objects x 2 positions
    np.testing.assert_array_equal(two.vectors[1, 2], [10, 11])
    one = single_bank(np.arange(6, dtype=np.float32).reshape(3, 2), 3, 2)
    np.testing.assert_array_equal(one.vectors[0, 1], one.vectors[1, 1])
    with pytest.raises(BindscopeError, match="not a whole number per each of the 3 objects"):
        single_bank(np.zeros((4, 2)), 3, 2)
    with pytest.raises(BindscopeError, match="3 positions per object but scenes have 2 slots"):
        single_bank(np.zeros((9, 2)), 3, 2)


# -- the batched scorer against a plain loop ---------------------------------------------------------------
def loop_reference(y: np.ndarray, plan, table: np.ndarray, src, tgt, k: float):
    """Per case: the best match, the rank (1 + the scenes scoring strictly higher, beyond the tie tolerance) and
    the bound hit (no scene but the expected one and its reversed order within the tolerance of the better)."""
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    retrieved, rank, bound = [], [], []
    for i in range(len(plan)):
        x = y[plan.scene[i]] - k * (table[src[i]] - table[tgt[i]])
        s = unit @ x
        tol = TIE_TOL * np.linalg.norm(x)
        retrieved.append(int(np.argmax(s)))
        rank.append(int((s > s[plan.expected[i]] + tol).sum()) + 1)
        own = [plan.expected[i], *([plan.reversed[i]] if plan.reversed[i] >= 0 else [])]
        rivals = np.delete(s, own)
        bound.append(bool((rivals < s[own].max() - tol).all()))
    return np.array(retrieved), np.array(rank), np.array(bound)


@pytest.mark.parametrize(("memory", "noise"), [(MEMORY_BUDGET, 0.3), (32 * 17**2, 0.3), (32 * 17**2, 1.0)])
def test_batched_scores_equal_a_plain_loop(clevr, memory, noise) -> None:
    """Best match, rank and bound hit of every case as a loop over cases gives them. The obj-avg edit of this
    position-free model lands between the expected scene and its reversed order: the paper's hit and rank 1
    about half the time, the bound hit (either order) every time; with more noise some edits miss both."""
    y = planted_embeddings(clevr, "mult_within_object", dim=DIM, noise=noise, seed=1)
    plan = plan_edits(clevr, "color", "shape", 42, "attribute")
    bank = obj_avg_bank(clevr.object_ids(), y, clevr.space.num_objects)
    src, tgt = bank.rows(plan.side, plan.source_object), bank.rows(plan.side, plan.target_object)
    out = score_jobs(y, [Job(plan, "obj-avg", "t", src, tgt)], {"t": bank.table}, [0.7], None, memory=memory)
    scores = out[(0, 0.7)]
    retrieved, rank, bound = loop_reference(y, plan, bank.table, src, tgt, 0.7)
    assert (scores.retrieved == retrieved).mean() > 0.999
    assert (scores.rank == rank).mean() > 0.999
    assert (scores.bound_hit == bound).mean() > 0.999
    assert 0 < scores.hit.mean() < 1 and bound.mean() > 0 and (bound.mean() < 1) == (noise > 0.5)


def float32_loop(y: np.ndarray, job: Job, table: np.ndarray, k: float) -> dict[str, np.ndarray]:
    """Per case, one at a time in float32: the edited vector's cosines against every scene, its best match (the
    lowest row on a tie), rank and bound hit, with the expected scene's score computed directly."""
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    plan, out = job.plan, {name: [] for name in ("retrieved", "rank", "bound_hit", "cos_expected", "cos_retrieved")}
    for i in range(len(plan)):
        x = y[plan.scene[i]] - np.float32(k) * sum(table[s[i]] - table[t[i]] for s, t in job.pairs)
        s, norm = unit @ x, np.linalg.norm(x)
        at = float(x @ unit[plan.expected[i]])
        rev = float(x @ unit[plan.reversed[i]]) if plan.reversed[i] >= 0 else -np.inf
        tol = TIE_TOL * norm
        rivals = np.delete(s, [plan.expected[i], *([plan.reversed[i]] if plan.reversed[i] >= 0 else [])])
        out["retrieved"].append(int(np.argmax(s)))
        out["rank"].append(int(np.delete(s > at + tol, plan.expected[i]).sum()) + 1)
        out["bound_hit"].append(not (rivals >= max(at, rev) - tol).any())
        out["cos_expected"].append(at / norm)
        out["cos_retrieved"].append(s.max() / norm)
    return {name: np.array(values) for name, values in out.items()}


def two_pair_jobs(clevr: SceneSet, y: np.ndarray, plan) -> tuple[list[Job], dict[str, np.ndarray]]:
    """The unedited scene, a pos-avg edit and a made-up edit of two pairs of rows (as a relation edit's)."""
    bank = pos_avg_bank(clevr.object_ids(), y, clevr.space.num_objects)
    src, tgt = bank.rows(plan.side, plan.source_object), bank.rows(plan.side, plan.target_object)
    src2, tgt2 = bank.rows(1 - plan.side, plan.target_object), bank.rows(1 - plan.side, plan.source_object)
    jobs = [Job(plan, UNEDITED, None), Job(plan, "pos-avg", "t", src, tgt), Job(plan, "two", "t", src, tgt, src2, tgt2)]
    return jobs, {"t": bank.table}


@pytest.mark.parametrize(
    ("memory", "pairs", "sample"),
    [(MEMORY_BUDGET, False, None), (32 * 100**2, True, None), (32 * 50**2, False, 60), (MEMORY_BUDGET, False, 60)],
)
def test_scores_are_those_of_a_float32_loop_case_by_case(clevr, memory, pairs, sample) -> None:
    """Every case's best match, rank and bound hit exactly as a float32 loop over cases gives them (cosines to
    float32 precision): under block pairs (every scene a base, small blocks), under base rows (a sample of the
    cases), for one and two pairs of rows, at several k."""
    y = planted_embeddings(clevr, "mult_within_object", dim=DIM, noise=0.6, seed=3)
    plan = sample_plan(plan_edits(clevr, "color", "shape", 42, "attribute"), sample)
    jobs, tables = two_pair_jobs(clevr, y, plan)
    ks = [0.5, 1.0]
    engine = _Engine(y, jobs, tables, ks, torch.device("cpu"), memory)
    assert (engine.layout.bases is None) == pairs and (len(engine.starts) > 1) == (memory < MEMORY_BUDGET)
    engine.run(None)
    seen = []
    for j, job in enumerate(jobs):
        for k in job_ks(job, ks):
            got, want = engine.scores(j, k), float32_loop(y, job, tables.get(job.table or "", y), k)
            for name in ("retrieved", "rank", "bound_hit"):
                np.testing.assert_array_equal(getattr(got, name), want[name], err_msg=f"{job.variant} {k} {name}")
            for name in ("cos_expected", "cos_retrieved"):
                np.testing.assert_allclose(getattr(got, name), want[name], atol=1e-5, err_msg=name)
            seen.append((got.hit, got.rank > 1, got.bound_hit))
    for outcome in zip(*seen):  # edits land and miss: the outcomes are not all alike
        assert 0 < np.concatenate(outcome).mean() < 1


def test_a_sample_scores_its_cases_as_the_full_run_does(clevr) -> None:
    """A sampled plan's cases (their Gram rows alone) score exactly as the same cases of the full plan do."""
    y = planted_embeddings(clevr, "mult_within_object", dim=DIM, noise=0.6, seed=3)
    plan = plan_edits(clevr, "color", "shape", 42, "attribute")
    sample = sample_plan(plan, 100)
    rows = {(s, side): i for i, (s, side) in enumerate(zip(plan.scene, plan.side))}
    picked = np.array([rows[(s, side)] for s, side in zip(sample.scene, sample.side)])
    full_jobs, tables = two_pair_jobs(clevr, y, plan)
    sample_jobs, _ = two_pair_jobs(clevr, y, sample)
    full = score_jobs(y, full_jobs, tables, [1.0], None)
    part = score_jobs(y, sample_jobs, tables, [1.0], None)
    for key, scores in part.items():
        for name in ("retrieved", "rank", "bound_hit", "cos_expected", "cos_retrieved"):
            np.testing.assert_array_equal(getattr(scores, name), getattr(full[key], name)[picked], err_msg=name)


def test_the_torch_path_and_the_pool_give_the_numpy_results(clevr, monkeypatch) -> None:
    """Off the CPU the element-wise work stays in torch on the device (here forced on the CPU); on the CPU it runs
    in numpy, on the calling thread or split over the shared pool: the same per-case results."""
    from bindscope.analyses.intervene import score

    y = planted_embeddings(clevr, "mult_within_object", dim=DIM, noise=0.3, seed=1)
    plan = plan_edits(clevr, "color", "shape", 42, "attribute")
    jobs, tables = two_pair_jobs(clevr, y, plan)
    results = []
    for in_numpy, workers in ((True, 1), (True, 2), (False, 1)):
        monkeypatch.setattr(score, "thread_count", lambda work, small=0, n=workers: n)
        engine = _Engine(y, jobs, tables, [0.5, 1.0], torch.device("cpu"), 32 * 100**2, in_numpy=in_numpy)
        engine.run(None)
        results.append({key: engine.scores(*key) for key in engine.state})
    for key, numpy_scores in results[0].items():
        for other in results[1:]:
            for name in ("retrieved", "rank", "bound_hit"):
                np.testing.assert_array_equal(getattr(numpy_scores, name), getattr(other[key], name), err_msg=name)
            np.testing.assert_allclose(numpy_scores.cos_retrieved, other[key].cos_retrieved, atol=1e-6)


def test_the_layout_keeps_to_the_memory_budget() -> None:
    """Blocks shrink with the budget; block pairs where every scene is a base, the bases' own rows where few are;
    the projections of as many blocks as half the budget holds are kept."""
    assert block_size(160_400) == 8192 and block_size(160_400, 32 * 1000**2) == 1000 and block_size(5) == 5
    full = plan_layout(160_400, np.arange(160_400), 2020)
    assert full.bases is None and full.block == 8192 and full.cached == (1 << 30) // (4 * 2020 * 8192)
    few = plan_layout(160_400, np.arange(0, 160_400, 40), 2020, 1 << 28)
    assert few.bases is not None and len(few.bases) == 4010 and few.rows * few.block * 4 <= (1 << 28) // 4


def test_a_sample_is_seeded_stratified_and_sorted(clevr) -> None:
    plan = plan_edits(clevr, "color", "shape", 42, "attribute")
    sample = sample_plan(plan, 100)
    assert len(sample) == 100 and sample.population == len(plan) == 768
    assert (np.diff(sample.scene) >= 0).all() and sample_plan(plan, 100).scene.tolist() == sample.scene.tolist()
    strata = [(plan.shared == s) & (plan.binding == b) for s in (False, True) for b in (False, True)]
    picked = [int(((sample.shared == s) & (sample.binding == b)).sum()) for s in (False, True) for b in (False, True)]
    assert picked == [round(100 * m.sum() / len(plan)) for m in strata] == [0, 88, 0, 12]
    other = sample_plan(plan_edits(clevr, "color", "shape", 7, "attribute"), 100)
    assert other.scene.tolist() != sample.scene.tolist()
    assert sample_plan(plan, 768) is plan and sample_plan(plan, 10_000) is plan and sample_plan(plan, None) is plan
    assert set(sample.chance) == set(plan.chance) and all(len(v) == 100 for v in sample.chance.values())


def test_sampled_run_reports_its_sample_and_intervals(clevr, tmp_path) -> None:
    y, singles = positional_objects(clevr)
    inputs = AnalysisInputs(y, clevr, probes=lbfgs_probes(y, clevr), singles=singles, noun="shape")
    settings = InterveneSettings(sample_cases=200, seeds=(42, 7), banks=("pos-avg",))
    loaded = run_analysis("intervene", inputs, tmp_path / "r", settings)
    s = loaded.typed
    assert s.sampled is not None and s.sampled["attribute"].model_dump() == {"cases": 400, "of": 1536}
    part = at_k(s, "attribute", "pos-avg", "all", 1.0)
    assert part is not None and part.cases == 400 and part.intervals is not None
    low, high = part.intervals["retrieval"]
    assert low <= part.retrieval.mean <= high and part.retrieval.mean > 0.9 and high - low < 0.1
    assert set(part.intervals) == {"retrieval", "probe", "retrieval_binding", "probe_binding"}
    assert len(loaded.read_table("cases")) == 400 * 3  # unedited, pos-avg, bag
    verdicts = loaded.summary["verdicts"]
    assert "a seeded sample of 400 of 1,536 edits" in verdicts["edit different"]["scored_on"]
    different = at_k(s, "attribute", "pos-avg", "different", 1.0)
    assert different is not None and different.binding_cases is not None
    assert verdicts["edit different"]["n_cases"] == round(different.binding_cases / 2)  # per seed: the sample's


# -- bad input ---------------------------------------------------------------------------------------------
def test_error_not_two_object_scenes() -> None:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["s", "t"]})
    scenes = SceneSet.enumerate(space, 3)
    y = np.zeros((len(scenes), 4), np.float32)
    with pytest.raises(BindscopeError, match="interventions edit 2-object scenes"):
        intervene_analysis(AnalysisInputs(y, scenes), InterveneSettings())


def test_error_duplicate_scenes(clevr) -> None:
    scenes = SceneSet(clevr.space, np.concatenate([clevr.scenes, clevr.scenes[:1]]))
    y = planted_embeddings(scenes, "random", dim=8)
    with pytest.raises(BindscopeError, match="scenes 0 and 576 hold the same two objects"):
        run(y, scenes)


def test_error_concepts(clevr) -> None:
    y = planted_embeddings(clevr, "random", dim=8)
    with pytest.raises(BindscopeError, match="--attribute 'size' is not a concept of this space"):
        run(y, clevr, attribute="size")
    with pytest.raises(BindscopeError, match="must be different concepts, both are 'shape'"):
        run(y, clevr, attribute="shape")
    space = ConceptSpace.from_dict({"color": ["r", "g", "b"], "size": ["s", "l"], "shape": ["c", "d"]})
    scenes = SceneSet.enumerate(space, 2)
    y3 = planted_embeddings(scenes, "random", dim=8)
    with pytest.raises(BindscopeError, match="name the attribute with --attribute"):
        intervene_analysis(AnalysisInputs(y3, scenes, probes=lbfgs_probes(y3, scenes)), InterveneSettings())


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"k": ()}, "give at least one edit strength k"),
        ({"k": (1.0, float("nan"))}, "edit strengths must be finite numbers"),
        ({"k": (1.0, 1.0)}, "edit strengths repeat"),
        ({"banks": ()}, "give at least one bank"),
        ({"banks": ("obj-avg", "mean")}, "banks.1"),
        ({"seeds": (-1,)}, "seeds are non-negative"),
        ({"edit": "color"}, "edit: Input should be 'auto', 'attribute', 'noun', 'both', 'relation' or 'count'"),
        ({"sample_cases": 0}, "sample_cases: must be at least 1, got 0"),
        ({"sample_cases": -5}, "sample_cases: must be at least 1, got -5"),
    ],
)
def test_error_settings(settings, message) -> None:
    with pytest.raises(BindscopeError, match=message.replace("(", r"\(")):
        InterveneSettings(**settings)


def test_error_probes_and_singles_that_do_not_fit(clevr) -> None:
    y = planted_embeddings(clevr, "random", dim=8)
    other = planted_embeddings(clevr, "random", dim=6)
    with pytest.raises(BindscopeError, match="the color probe is \\[8, 6\\] but"):
        intervene_analysis(
            AnalysisInputs(y, clevr, probes=lbfgs_probes(other, clevr), noun="shape"), InterveneSettings()
        )
    probes = ProbeSet("lbfgs").fit(y, {"object": soft_targets(clevr)["object"]})
    with pytest.raises(BindscopeError, match="the probes have no probe for color, shape"):
        intervene_analysis(AnalysisInputs(y, clevr, probes=probes, noun="shape"), InterveneSettings())
    with pytest.raises(BindscopeError, match="the single-object embeddings have width 6, the scenes 8"):
        run(y, clevr, np.zeros((48, 6), np.float32))


def test_distinct_values_report_overall_only() -> None:
    space = ConceptSpace.from_dict({"animal": ["a", "b", "c", "d"], "texture": ["r", "g", "b", "y"]})
    scenes = SceneSet.enumerate(space, 2, distinct_values=True)
    y = planted_embeddings(scenes, "object_additive", dim=DIM, seed=0)
    result, settings = run(y, scenes, noun="animal")
    assert set(result.table.group) == {"all"} and result.concepts == {"attribute": "texture", "noun": "animal"}
    assert result.split is False


# -- folders: the single bank beside the scene embeddings ---------------------------------------------------
def single_folder(out, ds, spec: str, width: int = 8):
    from bindscope.embeddings.store import write_embeddings

    manifest = {
        "name": "singles",
        "modality": "text",
        "rows": "single_objects",
        "single_positions": 1,
        "single_captions": "bare",
        "dataset_hash": ds.hash,
        "model_spec": spec,
        "layer": None,
    }
    bank = np.random.default_rng(0).normal(size=(ds.space.num_objects, width)).astype(np.float32)  # not constant
    return write_embeddings(out, bank, manifest)


def test_single_bank_found_beside_and_checked(clevr_dir, tmp_path) -> None:
    from bindscope.analyses import read_inputs
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings

    ds = load_dataset(clevr_dir)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(len(ds), 8)).astype(np.float32))
    import_embeddings(ds, tmp_path / "x.npy", name="m", modality="text", out=tmp_path / "emb" / "m", model_spec="st:m")
    assert read_inputs(tmp_path / "emb" / "m", find_singles=True).singles is None
    single_folder(tmp_path / "emb" / "m-single", ds, "st:m")
    inputs = read_inputs(tmp_path / "emb" / "m", find_singles=True)
    assert inputs.singles is not None and inputs.singles.root.name == "m-single"
    described = inputs.describe()["singles"]
    assert described["captions"] == "bare" and described["positions"] == 1
    assert inputs.arrays().noun == "shape" and inputs.arrays().singles.shape == (24, 8)
    single_folder(tmp_path / "other", ds, "st:other")
    with pytest.raises(BindscopeError, match="are of model 'st:other', the scene embeddings of 'st:m'"):
        read_inputs(tmp_path / "emb" / "m", singles=tmp_path / "other")
    single_folder(tmp_path / "wide", ds, "st:m", width=6)
    with pytest.raises(BindscopeError, match="have width 6, the scenes 8"):
        read_inputs(tmp_path / "emb" / "m", singles=tmp_path / "wide")


def test_latex_escapes_specials() -> None:
    from bindscope.pipeline.combine.intervene import latex_escape

    assert latex_escape(r"hf:a_b\c {x} 5% 1.0 ± 0.2 –") == r"hf:a\_b\textbackslash{}c \{x\} 5\% 1.0 $\pm$ 0.2 --"
