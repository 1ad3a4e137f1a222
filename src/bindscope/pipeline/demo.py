"""The main job on the embedded default: the analyses on a real model that installs offline.

``bindscope demo`` builds the clevr and text datasets, embeds the clevr captions with
all-MiniLM-L6-v2 (and its ``+rand`` control), and runs the probes, the additive decomposition
and the binding-function complexity sweep on them. Every step whose folder is complete is
skipped, so running it again is a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bindscope.data.datasets import build_dataset
from bindscope.embeddings.encoders import DEFAULT_MODEL

Say = Callable[[str], None]


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs. ``quick`` shrinks the analyses (one seed, three fractions, short fits)."""

    model: str = DEFAULT_MODEL
    seeds: int = 3
    fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    approximators: tuple[str, ...] = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")
    epochs: int | None = None

    @classmethod
    def quick(cls) -> DemoPlan:
        return replace(
            cls(), seeds=1, fractions=(0.3, 0.6, 0.9), approximators=("additive", "mult_within_object"), epochs=60
        )


def run_demo(out: Path, plan: DemoPlan = DemoPlan(), *, say: Say = print, progress: bool = True) -> dict[str, Path]:
    """Run the demo into ``out``; returns the folders it wrote (or found complete)."""
    from bindscope.analyses.complexity.sweep import ComplexitySettings, resolve_budget
    from bindscope.analyses.run import run_complexity, run_decompose, run_probe
    from bindscope.analyses.suite import ProbeSettings
    from bindscope.embeddings.embed import embed_dataset

    folders: dict[str, Path] = {}
    for preset in ("clevr", "text"):
        ds = build_dataset(preset, out / "datasets" / preset, images=False)  # the demo embeds captions
        folders[f"dataset:{preset}"] = ds.root
        say(ds.summary() + "\n")
    clevr = out / "datasets" / "clevr"
    emb = out / "embeddings" / "clevr-text-minilm"
    for spec, folder in ((plan.model, emb), (f"{plan.model}+rand", emb.with_name(emb.name + "+rand"))):
        result = embed_dataset(clevr, spec, modality="text", out=folder, progress=progress)
        folders[f"embeddings:{spec}"] = folder
        say(
            f"embeddings   {spec} -> {folder} ({result.status}, {result.embeddings.array.shape[0]:,} x "
            f"{result.embeddings.dim})"
        )
    settings = ProbeSettings(seeds=tuple(range(plan.seeds)))
    results = out / "results"
    probe = _step(results / "probe", lambda p: run_probe(emb, p, settings))
    decompose = _step(results / "decompose", lambda p: run_decompose(emb, p, settings))
    budget = resolve_budget("cpu", epochs=plan.epochs)
    complexity_settings = ComplexitySettings(
        approximators=plan.approximators, fractions=plan.fractions, seeds=tuple(range(plan.seeds)), budget=budget
    )
    complexity = _step(
        results / "complexity",
        lambda p: run_complexity(emb, p, complexity_settings, probes=results / "probe", progress=progress),
    )
    folders.update(probe=results / "probe", decompose=results / "decompose", complexity=results / "complexity")
    say("")
    say(_reading(probe, decompose, complexity))
    say(f"\nresults in {results}")
    return folders


def _step(folder: Path, run: Callable[[Path], dict]) -> dict:
    """Run an analysis into ``folder`` unless a complete one is there; its summary either way."""
    summary = folder / "summary.json"
    if summary.is_file() and (folder / "manifest.json").is_file():
        return json.loads(summary.read_text())
    return run(folder)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _reading(probe: dict, decompose: dict, complexity: dict) -> str:
    """A few lines that answer the paper's questions for this model."""
    rand = (probe.get("controls") or {}).get("rand") or {}
    r2 = decompose["r2"]["test"]
    verdict = complexity["verdict"]["reading"]
    return "\n".join(
        [
            "all-MiniLM-L6-v2 on the clevr captions:",
            f"  objects recoverable?  object probe test accuracy {_pct(probe['test'].get('object_acc'))} "
            f"(random weights {_pct(rand.get('test', {}).get('object_acc'))}, chance {_pct(probe['chance']['object_acc'])})",
            "  additive?             R^2 test: " + ", ".join(f"{m} {v:.3f}" for m, v in r2.items()),
            f"  binding complexity:   {verdict}",
        ]
    )
