"""The long validation tier: known answers that hold only at ``text`` size, with each check's verdict and time.

The test suite checks every planted-structure verdict on small spaces (``tests/analyses/
test_complexity_known.py``: 10 x 10 values, the true family against the simplest alternative, a shortened
budget). What needs the paper's own scale lives here: planted binding functions on a text-like space (20 x 20
values, 400 objects, 160,000 ordered pairs) in 32 dimensions with 2% noise, probes fitted by L-BFGS on 6,000
scenes, every family, one seed, the default ``cpu`` budget (the exact protocol) untouched, and the verdict the
complexity sweep reaches for each (docs/method/06-complexity.md). These were the suite's known-answer tests until the
suite had to fit in 10 minutes: the assertions are theirs, unchanged.

Four checks train CLIPs in miniature (``clip-tiny`` on clevr2d images, seeds 0, 1 and 2; docs/method/09-scratch.md
§9.1): concepts are recognised, attribute hard negatives and natural batches bind, and a prototype's claim that
attribute hard negatives leave the noun swap behind.

The tier also runs the README's main job at its shipped quick size (``bindscope demo --quick``, twice: every
step computed, then every step reused), which the suite checks on a smaller copy of the same config.

Each check prints PASS or FAIL, its wall time and the numbers it read (f* and held-out object accuracy per
family, the verdict); the exit status is 1 when any check fails.

Run it from the repository root::

    .venv/bin/python benchmarks/known_answers.py [--only additive,sum_mult]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bindscope.analyses.complexity import ComplexitySettings, complexity_summary, complexity_sweep, resolve_budget
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

FAMILIES = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")


def text_scenes() -> SceneSet:
    """Every ordered pair of 400 objects (20 attributes x 20 nouns): the ``text`` preset's size."""
    space = ConceptSpace.from_dict({"attr": [f"a{i}" for i in range(20)], "noun": [f"n{i}" for i in range(20)]})
    return SceneSet.enumerate(space, 2)


def verdict(scenes: SceneSet, kind: str, fractions: tuple[float, ...]) -> dict:
    """The complexity summary of planted ``kind`` embeddings under the default ``cpu`` budget."""
    y = planted_embeddings(scenes, kind, dim=32, noise=0.02, seed=0)
    rows = np.random.default_rng(0).choice(len(scenes), 6000, replace=False)
    probes = ProbeSet("lbfgs").fit(y[rows], {k: v[rows] for k, v in soft_targets(scenes).items()})
    settings = ComplexitySettings(
        approximators=FAMILIES, fractions=fractions, seeds=(0,), description_length=False, budget=resolve_budget("cpu")
    )
    return complexity_summary(complexity_sweep(y, scenes, probes, settings), settings).numbers()


def additive(s: dict) -> None:
    fams = s["approximators"]
    assert fams["additive"]["f_star"] == 0.3 and fams["additive"]["r2"]["0.3"]["mean"] > 0.95
    assert s["verdict"]["simplest_generalising"] == "additive" and s["verdict"]["f_star"] == 0.3
    assert s["verdict"]["reliable"] is True
    assert all(v["converged"]["0.3"]["mean"] == 1.0 for v in fams.values())


def mult_within_object(s: dict) -> None:
    fams = s["approximators"]
    assert fams["mult_within_object"]["f_star"] == 0.7 and fams["mult_within_object"]["r2"]["0.7"]["mean"] > 0.99
    assert fams["additive"]["f_star"] is None and fams["additive"]["object_acc"]["0.7"]["mean"] < 0.02
    assert s["verdict"]["simplest_generalising"] == "mult_within_object" and s["verdict"]["reliable"] is True
    others = max(v["auc"]["mean"] for k, v in fams.items() if k != "mult_within_object")
    assert fams["mult_within_object"]["auc"]["mean"] > others


def object_lookup(s: dict) -> None:
    assert s["verdict"]["simplest_generalising"] is None
    # a product that keeps fitting the training objects is flagged: then no high-complexity claim
    assert s["verdict"]["reading"].endswith("a high-complexity binding function") == s["verdict"]["reliable"]
    for name, entry in s["approximators"].items():
        assert entry["f_star"] is None, name
        assert max(v["mean"] for v in entry["object_acc"].values()) < 0.02, name  # near chance; probes read 0.8+
    assert min(v["mean"] for v in s["in_distribution"].values()) > 0.5


def mult_all_slots(s: dict) -> None:
    fams = s["approximators"]
    assert s["verdict"]["simplest_generalising"] == "mult" and s["verdict"]["f_star"] == 0.3
    assert fams["mult"]["r2"]["0.6"]["mean"] > 0.99  # the true family fits unseen objects
    assert fams["mult"]["second_fit_disagreement"]["0.6"]["mean"] < 0.1  # and the data determine it
    assert "mult" not in s["verdict"]["undetermined"] and "reflects the optimiser" not in s["verdict"]["reading"]
    assert fams["additive"]["f_star"] is None and fams["mult_within_object"]["f_star"] is None
    assert max(v["r2"]["0.6"]["mean"] for k, v in fams.items() if k != "mult") < 0.99


def sum_mult(s: dict) -> None:
    fams = s["approximators"]
    assert s["verdict"]["simplest_generalising"] == "sum_mult" and s["verdict"]["f_star"] == 0.4
    assert s["verdict"]["reliable"] is True
    assert fams["sum_mult"]["r2"]["0.7"]["mean"] > 0.95
    for name in ("additive", "mult", "mult_within_object"):
        assert fams[name]["f_star"] is None, name


def complexity_check(kind: str, fractions: tuple[float, ...], check: Callable[[dict], None]) -> Callable[[], str]:
    """A check of the verdict on planted ``kind`` at text size; it returns the numbers it read."""

    def run() -> str:
        summary = verdict(text_scenes(), kind, fractions)
        try:
            check(summary)
        except AssertionError as exc:
            raise AssertionError(f"{exc or 'an assertion'}; read {reading(summary)}") from None
        return reading(summary)

    return run


def demo_quick() -> str:
    """The README's main job at its shipped quick size, run twice: every step, then every step reused."""
    bindscope = str(Path(sys.executable).with_name("bindscope"))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cmd = [bindscope, "demo", "--out", str(run), "--quick", "--quiet"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "dataset      clevr: 576 scenes (computed, " in out.stdout and "dataset      text" in out.stdout
        assert "embeddings   clevr/minilm-text+rand (embedded, " in out.stdout
        results = run / "results" / "clevr" / "minilm-text"
        for step in ("probe", "decompose", "intervene", "complexity", "geometry"):
            assert (results / step / "summary.json").is_file(), step
        assert json.loads((results / "probe" / "summary.json").read_text())["controls"]["rand"]
        assert "clevr / minilm-text:\n  objects recoverable beyond a bag of concepts: " in out.stdout
        assert (run / "scratch" / "small-f0.8" / "model").is_dir()
        for name in ("clip-swapfree", "clip-hardneg"):
            assert (run / "results" / "clevr2d" / name / "crossmodal" / "summary.json").is_file(), name
        assert (run / "report.html").is_file() and "report: " in out.stdout
        stamp = (results / "complexity" / "summary.json").stat().st_mtime_ns
        again = subprocess.run(cmd, capture_output=True, text=True)  # finished steps are no-ops
        assert again.returncode == 0, again.stderr
        assert "(computed, " not in again.stdout.split("report")[0] and "(embedded, " not in again.stdout
        assert (results / "complexity" / "summary.json").stat().st_mtime_ns == stamp
        answers = out.stdout[out.stdout.index("clevr / minilm-text:") :].splitlines()[:3]
    return " | ".join(line.strip() for line in answers)


SEEDS = (0, 1, 2)
#: The CLIPs in miniature of the image-text checks: condition -> overrides of the built-in clip-tiny config.
CLIP_CONDITIONS = {
    "pooled, swap-free": {},
    "pooled, swap-free, attribute hard negatives": {"hard_negatives": "attribute"},
    "pooled, natural batches": {"batches": "natural"},
    "slot, natural batches": {"towers": "slot", "batches": "natural"},
}
_CLIP_RUNS: dict[str, list[dict]] = {}


def clip_runs(condition: str) -> list[dict]:
    """The last-step numbers of clip-tiny under ``condition`` on clevr2d (64 px, read at 32), seeds 0, 1, 2 (trained
    once per process)."""
    if condition not in _CLIP_RUNS:
        from bindscope.data.datasets import build_dataset
        from bindscope.data.presets import load_preset, with_image_settings
        from bindscope.scratch.config import load_config
        from bindscope.scratch.train import train_model

        with tempfile.TemporaryDirectory() as tmp:
            data = build_dataset(with_image_settings(load_preset("clevr2d"), size="64"), Path(tmp) / "clevr2d")
            _CLIP_RUNS[condition] = [
                train_model(
                    load_config("clip-tiny", dataset=str(data.root), seed=seed, **CLIP_CONDITIONS[condition]),
                    Path(tmp) / f"model-{seed}",
                ).summary["selected"]
                for seed in SEEDS
            ]
    return _CLIP_RUNS[condition]


def clip_reading(condition: str, keys: tuple[str, ...]) -> str:
    runs = clip_runs(condition)
    return f"{condition}: " + "; ".join(f"{k} {[round(r[k], 3) for r in runs]}" for k in keys)


def clip_concepts() -> str:
    """Every trained CLIP in miniature recognises the concepts: concept@1 >= 95% on trained-on and held-out scenes."""
    for condition in CLIP_CONDITIONS:
        for run in clip_runs(condition):
            for part in ("train", "heldout"):
                assert run[f"{part}_concept_at_1"] >= 0.95, (
                    f"{condition}: {part} concept@1 {run[f'{part}_concept_at_1']}"
                )
    return "; ".join(clip_reading(c, ("heldout_concept_at_1",)) for c in CLIP_CONDITIONS)


def clip_hard_negatives() -> str:
    """Attribute hard negatives make the pooled swap-free model bind: attribute swap >= 95% on trained-on and held-out
    combinations, every seed."""
    condition = "pooled, swap-free, attribute hard negatives"
    keys = ("train_swap_attribute", "heldout_swap_attribute", "heldout_swap_noun", "heldout_order_sensitivity")
    read = clip_reading(condition, keys)
    for run in clip_runs(condition):
        assert min(run["train_swap_attribute"], run["heldout_swap_attribute"]) >= 0.95, read
    return read


def clip_noun_gap() -> str:
    """The prototype's claim: with attribute hard negatives only, the noun swap stays at least 15 points below the
    attribute swap (held out, every seed)."""
    condition = "pooled, swap-free, attribute hard negatives"
    read = clip_reading(condition, ("heldout_swap_attribute", "heldout_swap_noun", "heldout_order_sensitivity"))
    for run in clip_runs(condition):
        assert run["heldout_swap_attribute"] - run["heldout_swap_noun"] >= 0.15, read
    return read


def clip_natural() -> str:
    """Natural batches (a swap can be an in-batch negative) make the pooled model bind: attribute swap >= 95%; slot
    towers bind every swap (>= 99%), their order sensitivity shown (a positional shortcut)."""
    keys = ("heldout_swap_attribute", "heldout_swap_noun", "heldout_order_sensitivity")
    for run in clip_runs("pooled, natural batches"):
        assert run["heldout_swap_attribute"] >= 0.95, clip_reading("pooled, natural batches", keys)
    for run in clip_runs("slot, natural batches"):
        for part in ("train", "heldout"):
            for swap in ("swap_attribute", "swap_noun"):
                assert run[f"{part}_{swap}"] >= 0.99, clip_reading("slot, natural batches", keys)
    return clip_reading("pooled, natural batches", keys) + " | " + clip_reading("slot, natural batches", keys)


#: name -> (what the check claims, the check: it returns what it read, or raises AssertionError).
CHECKS: dict[str, tuple[str, Callable[[], str]]] = {
    "additive": (
        "a sum of concept vectors is fitted by the additive family",
        complexity_check("additive_concepts_objects", (0.3, 0.6), additive),
    ),
    "mult_within_object": (
        "products within objects need the multiplicative family",
        complexity_check("mult_within_object", (0.2, 0.7), mult_within_object),
    ),
    "object_lookup": (
        "a lookup table per object generalises under no family",
        complexity_check("object_lookup", (0.2, 0.6), object_lookup),
    ),
    "mult_all_slots": (
        "a product over every slot needs mult",
        complexity_check("mult_all_slots", (0.3, 0.6), mult_all_slots),
    ),
    "sum_mult": (
        "a product plus concept vectors needs sum_mult",
        complexity_check("sum_mult", (0.4, 0.7), sum_mult),
    ),
    "demo": ("the README's main job (bindscope demo --quick) runs every step, then reuses them", demo_quick),
    "clip_concepts": ("every CLIP in miniature recognises the concepts (concept@1 >= 95%, 3 seeds)", clip_concepts),
    "clip_hard_negatives": (
        "attribute hard negatives: attribute swap >= 95% trained-on and held out (3 seeds)",
        clip_hard_negatives,
    ),
    "clip_noun_gap": (
        "attribute hard negatives leave the noun swap >= 15 points lower (a prototype's claim, 3 seeds)",
        clip_noun_gap,
    ),
    "clip_natural": ("natural batches bind (pooled >= 95%, slot >= 99% every swap; 3 seeds)", clip_natural),
}


def reading(s: dict) -> str:
    """The numbers a check read: f* and held-out object accuracy per family, and the verdict."""
    fams = {
        name: (entry["f_star"], {f: round(v["mean"], 3) for f, v in entry["object_acc"].items()})
        for name, entry in s["approximators"].items()
    }
    v = s["verdict"]
    return f"{fams}; verdict {v['simplest_generalising']} at f*={v['f_star']}, reliable={v['reliable']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(CHECKS), help=f"checks to run, of {', '.join(CHECKS)}")
    names = [n for n in parser.parse_args(argv).only.split(",") if n]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    failed = 0
    total = time.perf_counter()
    for name in names:
        claim, check = CHECKS[name]
        started = time.perf_counter()
        try:
            outcome, read = "PASS", check()
        except AssertionError as exc:
            outcome, read, failed = "FAIL", str(exc), failed + 1
        seconds = time.perf_counter() - started
        print(f"{outcome}  {name:<20} {seconds:7.1f} s  {claim}", flush=True)
        print(f"      {read}", flush=True)
    print(f"{len(names) - failed} passed, {failed} failed in {time.perf_counter() - total:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
