"""The main job on the embedded default: the analyses on a real model that installs offline.

``bindscope demo`` builds the clevr and text datasets, embeds the clevr captions with
all-MiniLM-L6-v2 (and its ``+rand`` control), and runs the probes, the additive decomposition
and the binding-function complexity sweep on them through the analysis registry. A step whose
folder holds a result with the same content key (inputs + settings + bindscope version) is
reused; a folder from other settings is replaced. Running it again is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bindscope.analyses import (
    ComplexitySettings,
    DecomposeSettings,
    ProbeSettings,
    load_inputs,
    resolve_budget,
)
from bindscope.analyses.complexity.sweep import DEFAULT_APPROXIMATORS
from bindscope.core.validation import Settings
from bindscope.data.datasets import build_dataset
from bindscope.embeddings.encoders import DEFAULT_MODEL
from bindscope.pipeline.steps import step
from bindscope.space.splits import DEFAULT_FRACTIONS, DEFAULT_SEEDS

Say = Callable[[str], None]
Progress = Callable[[int, int], object]


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs. ``quick`` shrinks the analyses (one seed, three fractions, short fits)."""

    model: str = DEFAULT_MODEL
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    approximators: tuple[str, ...] = DEFAULT_APPROXIMATORS
    epochs: int | None = None

    @classmethod
    def quick(cls) -> DemoPlan:
        return replace(
            cls(), seeds=(0,), fractions=(0.3, 0.6, 0.9), approximators=("additive", "mult_within_object"), epochs=60
        )

    def settings(self) -> dict[str, Settings]:
        """The settings of each analysis step."""
        probe = ProbeSettings(seeds=self.seeds)
        return {
            "probe": probe,
            "decompose": DecomposeSettings(seeds=self.seeds),
            "complexity": ComplexitySettings(
                approximators=self.approximators,
                fractions=self.fractions,
                seeds=self.seeds,
                budget=resolve_budget("cpu", epochs=self.epochs),
            ),
        }


def run_demo(
    out: Path,
    plan: DemoPlan = DemoPlan(),
    *,
    say: Say = print,
    progress: Callable[[str], Any] | None = None,
    embed_progress: bool = True,
) -> dict[str, Path]:
    """Run the demo into ``out``; returns the folders it wrote (or found complete).

    ``progress(name)`` gives a context manager yielding a ``progress(done, total)`` callback for
    an analysis step (the CLI draws bars with it).
    """
    from bindscope.embeddings.embed import embed_dataset

    folders: dict[str, Path] = {}
    for preset in ("clevr", "text"):
        ds = build_dataset(preset, out / "datasets" / preset, images=False)  # the demo embeds captions
        folders[f"dataset:{preset}"] = ds.root
        say(ds.summary() + "\n")
    clevr = out / "datasets" / "clevr"
    emb = out / "embeddings" / "clevr-text-minilm"
    for spec, folder in ((plan.model, emb), (f"{plan.model}+rand", emb.with_name(emb.name + "+rand"))):
        result = embed_dataset(clevr, spec, modality="text", out=folder, progress=embed_progress)
        folders[f"embeddings:{spec}"] = folder
        say(
            f"embeddings   {spec} -> {folder} ({result.status}, {result.embeddings.array.shape[0]:,} x "
            f"{result.embeddings.dim})"
        )
    results = out / "results"
    settings = plan.settings()
    summaries: dict[str, dict[str, Any]] = {}
    for name in ("probe", "decompose", "complexity"):
        probes = results / "probe" if name == "complexity" else None
        inputs = load_inputs(emb, find_control=name != "complexity", probes=probes)
        summaries[name], status = step(name, inputs, results / name, settings[name], progress)
        folders[name] = results / name
        say(f"{name:<12} -> {results / name} ({status})")
    say("")
    say(reading(summaries["probe"], summaries["decompose"], summaries["complexity"]))
    say(f"\nresults in {results}")
    return folders


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _mean(part: dict[str, Any] | None, metric: str) -> float | None:
    value = (part or {}).get(metric)
    return None if value is None else value["mean"]


def reading(probe: dict, decompose: dict, complexity: dict) -> str:
    """A few lines that answer the paper's questions for this model."""
    rand = (probe.get("controls") or {}).get("rand") or {}
    r2 = decompose["r2"]["test"]
    verdict = complexity["verdict"]["reading"]
    return "\n".join(
        [
            "all-MiniLM-L6-v2 on the clevr captions:",
            f"  objects recoverable?  object probe test accuracy {_pct(_mean(probe['test'], 'object_acc'))} "
            f"(random weights {_pct(_mean(rand.get('test'), 'object_acc'))}, "
            f"chance {_pct(probe['chance']['object_acc'])})",
            "  additive?             R^2 test: " + ", ".join(f"{m} {v['mean']:.3f}" for m, v in r2.items()),
            f"  binding complexity:   {verdict}",
        ]
    )
