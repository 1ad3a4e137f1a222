"""Relation and count edits (docs/method/05-interventions.md, 11-relations-counts.md): a relation edit changes both
objects' places together (the subject's to a target relation, the object's to its converse), a count edit one
object's count; ``intervene`` makes the dataset's own edit by default; planted role binding retrieves the edited
scene, a bag of roles (and an ideal bag of concepts) cannot tell it from its swap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bindscope.analyses import AnalysisInputs, InterveneSettings, run_analysis
from bindscope.analyses.card import bag_counts
from bindscope.analyses.intervene import intervene_analysis
from bindscope.analyses.intervene.edits import BOTH, plan_edits, plan_relation_edits
from bindscope.analyses.intervene.score import score_jobs
from bindscope.analyses.intervene.variants import BAG, build_banks, make_jobs
from bindscope.core.errors import BindscopeError
from bindscope.data.presets import preset_from_dict
from bindscope.estimators.floors import role_view
from bindscope.estimators.object_banks import concept_value_means
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.families import CONVERSE, COUNT, PLACE
from bindscope.space.planted import planted_embeddings
from family_spaces import COUNTS, RELATION

SETTINGS = {"probe_optimizer": "lbfgs", "banks": ("obj-avg", "pos-avg")}


@pytest.fixture(scope="module")
def relation() -> SceneSet:
    return preset_from_dict(RELATION).build_scenes()


@pytest.fixture(scope="module")
def counts() -> SceneSet:
    return preset_from_dict(COUNTS).build_scenes()


def names(scenes: SceneSet, concept: str, values: np.ndarray) -> np.ndarray:
    return np.asarray(scenes.space.values[scenes.space.concept_index(concept)], dtype=object)[values]


# -- the plans ---------------------------------------------------------------------------------------------------
def test_a_relation_edit_moves_both_places_to_a_new_relation_and_its_converse(relation) -> None:
    plan = plan_relation_edits(relation, 42)
    assert len(plan) == len(relation) and not plan.skipped  # every scene: 4 relations leave 2 targets each
    assert (plan.side == BOTH).all() and not plan.shared.any() and plan.second is not None
    before, after = relation.scenes[plan.scene], relation.scenes[plan.expected]
    np.testing.assert_array_equal(before[..., :2], after[..., :2])  # the same two objects, in the same slots
    source, target = names(relation, PLACE, before[:, 0, 2]), names(relation, PLACE, after[:, 0, 2])
    assert all(t not in (s, CONVERSE[s]) for s, t in zip(source, target))  # a new relation
    assert all(CONVERSE[t] == o for t, o in zip(target, names(relation, PLACE, after[:, 1, 2])))
    ids = relation.object_ids()
    np.testing.assert_array_equal(plan.source_object, ids[plan.scene, 0])
    np.testing.assert_array_equal(plan.target_object, ids[plan.expected, 0])
    np.testing.assert_array_equal(plan.second[:2], np.stack([ids[plan.scene, 1], ids[plan.expected, 1]]))
    # needs binding exactly where the relation swap holds other objects (A is not B)
    np.testing.assert_array_equal(plan.binding, (before[:, 0, :2] != before[:, 1, :2]).any(axis=1))
    assert (plan.target_value != plan_relation_edits(relation, 43).target_value).any()  # seeded


def test_a_relation_edit_draws_from_the_relations_the_subjects_hold() -> None:
    preset = preset_from_dict({**RELATION, "relations": ["left of", "above"], "scenes": {"allow_identical": False}})
    scenes = preset.build_scenes()
    plan = plan_relation_edits(scenes, 0)
    got = set(zip(names(scenes, PLACE, scenes.scenes[plan.scene, 0, 2]), names(scenes, PLACE, plan.target_value)))
    assert got == {("left of", "above"), ("above", "left of")}  # "right of" is no subject's place here
    with pytest.raises(BindscopeError, match="a relation edit needs a relation space"):
        plan_relation_edits(SceneSet.enumerate(ConceptSpace.from_dict({"a": ["x", "y"], "b": ["u"]}), 2), 0)


def test_a_count_edit_changes_one_count_to_one_outside_the_scenes_two(counts) -> None:
    plan = plan_edits(counts, COUNT, None, 42, "count")
    assert not plan.skipped and len(plan) == 2 * len(counts) and plan.second is None
    c = counts.space.concept_index(COUNT)
    before, after = counts.scenes[plan.scene], counts.scenes[plan.expected]
    rows = np.arange(len(plan))
    assert (after[rows, plan.side, c] == plan.target_value).all()
    assert ((plan.target_value != before[:, 0, c]) & (plan.target_value != before[:, 1, c])).all()
    kept = before.copy()
    kept[rows, plan.side, c] = plan.target_value
    np.testing.assert_array_equal(kept, after)  # nothing else changes
    np.testing.assert_array_equal(plan.shared, before[:, 0, c] == before[:, 1, c])
    # the edited scene's two counts differ: its count swap holds other objects unless both are one object
    np.testing.assert_array_equal(plan.binding, (before[:, 0, :c] != before[:, 1, :c]).any(axis=1))


# -- settings: the dataset's own edit by default -----------------------------------------------------------------
def test_intervene_edits_the_family_by_default_and_refuses_a_family_the_space_lacks() -> None:
    auto = InterveneSettings()
    assert auto.edits("relation") == ("relation",) and auto.edits("count") == ("count",)
    assert auto.edits("attribution") == ("attribute",)
    assert InterveneSettings(edit="both").edits("relation") == ("attribute", "noun")
    with pytest.raises(BindscopeError, match="edit relation needs a relation dataset .relations: in its YAML.; this"):
        InterveneSettings(edit="relation").edits("attribution")
    with pytest.raises(BindscopeError, match="edit count needs a count dataset.*: edit relation, attribute, noun"):
        InterveneSettings(edit="count").edits("relation")


def test_a_family_space_needs_no_attribute_named(counts) -> None:
    assert concept_roles(counts, None, None) == {"attribute": "color", "noun": "shape"}
    y = planted_embeddings(counts, "role_bound", dim=16, seed=0)
    result = intervene_analysis(AnalysisInputs(y, counts), InterveneSettings(**SETTINGS, edit="both"))
    assert set(result.table.edit) == {"attribute", "noun"} and result.concepts == concept_roles(counts, None, None)


# -- the arithmetic: two differences per bank ----------------------------------------------------------------------
@pytest.mark.parametrize("ks", [(1.0,), (0.5, 2.0)])
def test_the_relation_edit_subtracts_both_objects_and_adds_both_targets(relation, ks) -> None:
    """``x' = x - k (e(A, p) - e(A, r') + e(B, conv p) - e(B, conv r'))`` per bank (and the place means for the bag
    edit), scored as a plain loop over every scene would."""
    y = np.random.default_rng(3).normal(size=(len(relation), 16)).astype(np.float32)
    plan = plan_relation_edits(relation, 42)
    banks, _ = build_banks(y, relation, ("obj-avg", "pos-avg"), None)
    c = relation.space.concept_index(PLACE)
    bag, present = concept_value_means(relation.scenes[:, :, c], y, relation.space.sizes[c])
    jobs, tables = make_jobs(plan, banks, bag, present)
    tables |= {name: bank.table for name, bank in banks.items()}
    scored = score_jobs(y, jobs, tables, ks, None)
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    first, second = (plan.source_object, plan.target_object), (plan.second[0], plan.second[1])
    for j, job in enumerate(jobs):
        if job.table is None:
            continue
        if job.variant == BAG:
            means = tables[job.table]
            direction = means[plan.source_value] - means[plan.target_value]
            direction += means[plan.second[2]] - means[plan.second[3]]
        else:  # the subject's vectors at the first position, the object's at the second
            v = banks[job.variant].vectors
            direction = v[0, first[0]] - v[0, first[1]] + v[1, second[0]] - v[1, second[1]]
        for k in ks:
            edited = y[plan.scene].astype(np.float64) - k * direction
            scores = edited @ unit.T
            np.testing.assert_array_equal(scored[(j, k)].retrieved, scores.argmax(axis=1))
            expected = scores[np.arange(len(plan)), plan.expected]
            tol = 1e-5 * np.linalg.norm(edited, axis=1)
            np.testing.assert_array_equal(scored[(j, k)].rank, 1 + (scores > (expected + tol)[:, None]).sum(axis=1))


# -- known answers -----------------------------------------------------------------------------------------------
def card(scenes: SceneSet, y: np.ndarray, folder: Path) -> dict[str, tuple[str, float | None]]:
    result = run_analysis("intervene", AnalysisInputs(y, scenes), folder, InterveneSettings(**SETTINGS))
    assert result.typed.edits == ["relation" if PLACE in scenes.space.concepts else "count"]  # the family's own
    return {column: (v.answer, v.value) for column, v in result.typed.verdicts.items()}


def test_role_binding_edits_the_relation_and_a_bag_of_roles_cannot(relation, tmp_path) -> None:
    bound = card(relation, planted_embeddings(relation, "role_bound", dim=32, seed=1), tmp_path / "bound")
    bag = card(relation, planted_embeddings(relation, "role_bag", dim=32, seed=1), tmp_path / "bag")
    assert bound["edit different"][0] == "binds" and bound["edit different"][1] > 0.95
    assert bound["edit probe"][0] == "binds"
    assert bag["edit different"] == ("no_binding", 0.0) and bag["edit probe"] == ("no_binding", 0.0)
    # no relation edit has a shared place: that column is not measured
    assert bound["edit shared"] == ("undetermined", None) and bag["edit shared"] == ("undetermined", None)


def test_role_binding_edits_a_count_and_a_bag_of_roles_cannot(counts, tmp_path) -> None:
    bound = card(counts, planted_embeddings(counts, "role_bound", dim=32, seed=1), tmp_path / "bound")
    bag = card(counts, planted_embeddings(counts, "role_bag", dim=32, seed=1), tmp_path / "bag")
    for column in ("edit shared", "edit different", "edit probe"):
        assert bound[column][0] == "binds", column
        assert bag[column] == ("no_binding", 0.0), column
    assert bound["edit different"][1] > 0.95


@pytest.mark.parametrize("bag", ["concepts", "roles"])
def test_an_ideal_bag_ties_a_relation_edit_with_its_swap(relation, bag) -> None:
    y = bag_counts(relation if bag == "concepts" else role_view(relation))
    result = intervene_analysis(AnalysisInputs(y, relation), InterveneSettings(**SETTINGS))
    cases = result.tables["cases"]
    edits = cases[(cases.variant == "pos-avg") & cases.binding]
    assert len(edits) and not edits.bound_hit.any() and (edits["rank"] == 1).all()  # lands on the tie, never alone
    assert set(cases.side) == {"both"} and set(result.table.edit) == {"relation"}
