"""``probe`` in words: the readings (objects recoverable, each accuracy beside its floors, binding beyond a bag
of concepts) and the headline table, for the terminal and the report."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.probe.compute import BAG, FLOOR_METRICS
from bindscope.analyses.probe.summary import ProbeSummary
from bindscope.estimators.floors import clearance_text
from bindscope.estimators.intervals import Rate, rate_text
from bindscope.estimators.metrics import pct, percent, spread_mean

#: How far above random weights and chance the object probe must be to read "objects recoverable".
RECOVERABLE_MARGIN = 0.1


def object_numbers(summary: ProbeSummary) -> tuple[float | None, float | None, float | None]:
    """The test object accuracy, its ``+rand`` control's and chance (None where missing)."""
    rand = summary.controls.rand.test if summary.controls.rand is not None else None
    acc = spread_mean(summary.test.get("object_acc"))
    return acc, spread_mean((rand or {}).get("object_acc")), summary.chance.get("object_acc")


def recoverable_reading(summary: ProbeSummary, tested: Rate | None = None) -> str:
    """``objects recoverable: yes|no``: the test object accuracy against ``+rand`` and chance (``tested``: the
    accuracy as a :class:`~bindscope.estimators.intervals.Rate` of the test scenes, to show its interval and n)."""
    acc, rand, chance = object_numbers(summary)
    floor = max(v for v in (rand, chance, 0.0) if v is not None)
    verdict = "yes" if acc is not None and acc > floor + RECOVERABLE_MARGIN else "no"
    shown = rate_text(tested) if tested is not None else percent(acc)
    return f"objects recoverable: {verdict}, {shown} vs {percent(rand)} for random weights (chance {percent(chance)})"


def floor_reading(summary: ProbeSummary, metric: str) -> str:
    """One test accuracy with its floors beside it: chance, ``+rand`` and the bag (ideal, fitted)."""
    f = (summary.floors or {}).get(metric)
    chance, rand, bag, fitted = (None,) * 4 if f is None else (f.chance, f.rand, f.bag, f.bag_fitted)
    shown = "not given" if rand is None else percent(rand)
    return (
        f"{metric} {percent(spread_mean(summary.test.get(metric)))}: chance {percent(chance)}, "
        f"+rand {shown}, bag of concepts {percent(bag)} ideal / {percent(fitted)} fitted"
    )


def binding_reading(summary: ProbeSummary) -> str:
    """The binding verdict in words: "binds beyond a bag of concepts" only when every seed clears it."""
    b = summary.binding
    if b is None:
        return "beyond a bag of concepts: not measured (these probe results predate the bag control; run probe again)"
    if b.reading == "undetermined":
        return "beyond a bag of concepts: undetermined (no seed has both an object accuracy and a bag floor)"
    acc = spread_mean(summary.test.get(b.metric))
    return (
        f"{b.reading}; object probe {percent(acc)} vs {percent(b.floor_mean)} for a bag of concepts, "
        f"{clearance_text(b.model_dump())}"
    )


def readings(summary: ProbeSummary) -> list[str]:
    """Every reading: objects recoverable, each accuracy beside its floors, binding beyond a bag."""
    floors = [floor_reading(summary, m) for m in FLOOR_METRICS if m in summary.test]
    return [fit_reading(summary), recoverable_reading(summary), *floors, binding_reading(summary)]


def fit_reading(summary: ProbeSummary) -> str:
    """How the probes were fitted: the solver of each probe (over seeds) and the scenes per seed."""
    solvers = sorted({label for per_seed in summary.solver.values() for label in per_seed.values()})
    scenes = summary.scenes or {}
    where = (
        f" on {scenes['train']:,} training scenes, read on {scenes['test']:,} test scenes per seed"
        if {"train", "test"} <= set(scenes)
        else ""
    )
    return f"probes: {', '.join(solvers) or 'solver not recorded'}{where} ({len(summary.solver)} seed(s))"


def headline_rows(summary: ProbeSummary) -> Rows:
    """The terminal's table: test and train accuracies of the base probes and each control, the ideal bag,
    and chance."""
    rows: Rows = [("variant", "object_acc test %", "concept_acc test %", "object_acc train %")]
    labels = {BAG: "bag (fitted)"}
    controls = {k: v for k, v in summary.controls if v is not None and v.model_dump()}
    parts = {"base": (summary.test, summary.train), **{k: (v.test, v.train) for k, v in controls.items()}}
    for label, (test, train) in parts.items():
        rows.append(
            (labels.get(label, label), pct(test, "object_acc"), pct(test, "concept_acc"), pct(train, "object_acc"))
        )
    ideal = {m: f.bag if (f := (summary.floors or {}).get(m)) is not None else None for m in FLOOR_METRICS}
    if ideal["object_acc"] is not None:
        rows.append(("bag (ideal)", *(f"{100 * v:.1f}" if v is not None else "-" for v in ideal.values()), ""))
    concept = summary.chance.get("concept_acc")
    rows.append(
        ("chance", f"{100 * summary.chance['object_acc']:.2f}", "-" if concept is None else f"{100 * concept:.1f}", "")
    )
    return rows
