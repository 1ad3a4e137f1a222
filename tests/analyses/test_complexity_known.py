"""Known answers: planted binding functions whose complexity is known reach the right verdict.

A text-like space (20 x 20 values, 400 objects, 160,000 ordered pairs) in 32 dimensions with 2%
noise, the default ``cpu`` budget (the exact protocol) untouched, every family, one seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.complexity.sweep import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.analyses.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAMILIES = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")

pytestmark = pytest.mark.slow  # 15-30 s per planted kind on 2 cores


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"attr": [f"a{i}" for i in range(20)], "noun": [f"n{i}" for i in range(20)]})
    return SceneSet.enumerate(space, 2)


def _verdict(scenes: SceneSet, kind: str, fractions: tuple[float, ...]) -> dict:
    y = planted_embeddings(scenes, kind, dim=32, noise=0.02, seed=0)
    rows = np.random.default_rng(0).choice(len(scenes), 6000, replace=False)
    probes = ProbeSet("lbfgs").fit(y[rows], {k: v[rows] for k, v in soft_targets(scenes).items()})
    settings = ComplexitySettings(
        approximators=FAMILIES,
        fractions=fractions,
        seeds=(0,),
        description_length=False,
        budget=resolve_budget("cpu"),
    )
    summary = complexity_summary(complexity_sweep(y, scenes, probes, settings), settings)
    print(
        kind,
        {k: (v["f_star"], v["object_acc"]) for k, v in summary["approximators"].items()},
        summary["in_distribution"],
        summary["verdict"],
    )
    return summary


def test_sum_of_concept_vectors_is_fitted_by_the_additive_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "additive_concepts_objects", (0.3, 0.6))
    fams = s["approximators"]
    assert fams["additive"]["f_star"] == 0.3 and fams["additive"]["r2"]["0.3"]["mean"] > 0.95
    assert s["verdict"]["simplest_generalising"] == "additive" and s["verdict"]["f_star"] == 0.3
    assert s["verdict"]["reliable"] is True
    assert all(v["converged"]["0.3"]["mean"] == 1.0 for v in fams.values())


def test_products_within_objects_need_the_multiplicative_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "mult_within_object", (0.2, 0.7))
    fams = s["approximators"]
    assert fams["mult_within_object"]["f_star"] == 0.7 and fams["mult_within_object"]["r2"]["0.7"]["mean"] > 0.99
    assert fams["additive"]["f_star"] is None and fams["additive"]["object_acc"]["0.7"]["mean"] < 0.02
    assert s["verdict"]["simplest_generalising"] == "mult_within_object" and s["verdict"]["reliable"] is True
    others = max(v["auc"]["mean"] for k, v in fams.items() if k != "mult_within_object")
    assert fams["mult_within_object"]["auc"]["mean"] > others


def test_a_lookup_table_per_object_generalises_under_no_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "object_lookup", (0.2, 0.6))
    assert s["verdict"]["simplest_generalising"] is None
    # a product that keeps fitting the training objects is flagged: then no high-complexity claim
    assert s["verdict"]["reading"].endswith("a high-complexity binding function") == s["verdict"]["reliable"]
    for name, entry in s["approximators"].items():
        assert entry["f_star"] is None, name
        assert max(v["mean"] for v in entry["object_acc"].values()) < 0.02, name  # near chance; the probes read 0.8+
    assert min(v["mean"] for v in s["in_distribution"].values()) > 0.5


def test_a_product_over_every_slot_needs_the_mult_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "mult_all_slots", (0.3, 0.6))
    fams = s["approximators"]
    assert s["verdict"]["simplest_generalising"] == "mult" and s["verdict"]["f_star"] == 0.3
    assert fams["mult"]["r2"]["0.6"]["mean"] > 0.99  # the true family fits unseen objects
    assert fams["mult"]["second_fit_disagreement"]["0.6"]["mean"] < 0.1  # and the data determine it
    assert "mult" not in s["verdict"]["undetermined"] and "reflects the optimiser" not in s["verdict"]["reading"]
    assert fams["additive"]["f_star"] is None and fams["mult_within_object"]["f_star"] is None
    assert max(v["r2"]["0.6"]["mean"] for k, v in fams.items() if k != "mult") < 0.99


def test_a_product_plus_concept_vectors_needs_the_sum_mult_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "sum_mult", (0.4, 0.7))
    fams = s["approximators"]
    assert s["verdict"]["simplest_generalising"] == "sum_mult" and s["verdict"]["f_star"] == 0.4
    assert s["verdict"]["reliable"] is True
    assert fams["sum_mult"]["r2"]["0.7"]["mean"] > 0.95
    for name in ("additive", "mult", "mult_within_object"):
        assert fams[name]["f_star"] is None, name
