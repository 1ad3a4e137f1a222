"""Known answers on a small space: planted binding functions reach the right complexity verdict.

An 8 x 8 space (64 objects, 4,096 ordered pairs) in 16 dimensions with 2% noise, the additive family against
an MLP of width 64, one seed, the ``cpu`` budget shortened (200 ALS sweeps, 400 epochs): the verdicts that hold
at this size. The same checks at the paper's
scale (20 x 20 values, 160,000 pairs, every family, the budget untouched), and the three that hold only
there (products within objects, a product over every slot, a product plus concept vectors: at 8 x 8 and
10 x 10 their true family does not reach held-out objects), are the long validation tier,
``benchmarks/known_answers.py``.
"""

from __future__ import annotations

import pytest

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings


@pytest.fixture(scope="module")
def scenes() -> SceneSet:
    space = ConceptSpace.from_dict({"attr": [f"a{i}" for i in range(8)], "noun": [f"n{i}" for i in range(8)]})
    return SceneSet.enumerate(space, 2)


def _verdict(scenes: SceneSet, kind: str, families: tuple[str, ...], fractions: tuple[float, ...]) -> dict:
    y = planted_embeddings(scenes, kind, dim=16, noise=0.02, seed=0)
    probes = ProbeSet("lbfgs").fit(y, soft_targets(scenes))
    settings = ComplexitySettings(
        approximators=families,
        hidden=(64,),
        fractions=fractions,
        seeds=(0,),
        description_length=False,
        budget=resolve_budget("cpu", sweeps=200, epochs=400),
    )
    return complexity_summary(complexity_sweep(y, scenes, probes, settings), settings).numbers()


def test_sum_of_concept_vectors_is_fitted_by_the_additive_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "additive_concepts_objects", ("additive", "mlp"), (0.3, 0.6))
    fams = s["approximators"]
    assert fams["additive"]["f_star"] == 0.3 and fams["additive"]["r2"]["0.3"]["mean"] > 0.95
    assert s["verdict"]["simplest_generalising"] == "additive" and s["verdict"]["f_star"] == 0.3
    assert s["verdict"]["reliable"] is True
    assert all(v["converged"]["0.3"]["mean"] == 1.0 for v in fams.values())
    # the evidence first: the family that generalises fits the scenes it was fitted on
    assert fams["additive"]["fits_training"]["0.6"]["mean"] == 1.0 and "additive" in s["verdict"]["fitting"]
    assert fams["additive"]["train_r2"]["0.6"]["mean"] > 0.95


def test_a_lookup_table_per_object_generalises_under_no_family(scenes: SceneSet) -> None:
    s = _verdict(scenes, "object_lookup", ("additive", "mlp"), (0.2, 0.6))
    assert s["verdict"]["simplest_generalising"] is None
    # a product that keeps fitting the training objects is flagged: then no high-complexity claim; nor without a
    # family that fits its training scenes
    high = s["verdict"]["reading"].endswith("a high-complexity binding function")
    assert high == (s["verdict"]["reliable"] and bool(s["verdict"]["fitting"]))
    for name, entry in s["approximators"].items():
        assert entry["f_star"] is None, name
        assert max(v["mean"] for v in entry["object_acc"].values()) < 0.02, name  # near chance
    assert min(v["mean"] for v in s["in_distribution"].values()) > 0.5
