"""The registered ``crossmodal`` analysis (docs/method.md §7): the bag-of-concepts failure across modalities.

Image embeddings (``embeddings``) against the captions' text embeddings of the same model (``other``):
swap tests, strict and concept-level retrieval, a linear bridge fitted on seen objects and scored on
unseen ones, and half-truths (with the single-object caption bank, ``singles``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from bindscope.analyses.base import Analysis, AnalysisInputs, Progress, Result, Rows
from bindscope.analyses.crossmodal.bridge import fit_bridge
from bindscope.analyses.crossmodal.halftruth import half_truth_rates
from bindscope.analyses.crossmodal.retrieval import retrieval
from bindscope.analyses.crossmodal.swaps import swap_accuracy, swap_cases, swap_scores
from bindscope.analyses.metrics import format_spread, nested
from bindscope.analyses.results import NO_CONTROL, tidy
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import Seeds, Settings
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import DEFAULT_SEEDS, object_splits

EXTRA_COLUMNS = ("fraction",)
BRIDGE_FRACTIONS = (0.3, 0.5, 0.7, 0.9)


class CrossmodalSettings(Settings):
    """Which tests, the bridge's object-level split (fractions x seeds) and an optional subsample."""

    noun: str | None = None
    bridge: Literal["ridge", "none"] = "ridge"
    fractions: tuple[float, ...] = BRIDGE_FRACTIONS
    seeds: Seeds = DEFAULT_SEEDS
    validation_fraction: float = Field(0.1, gt=0, lt=1)
    max_scenes: int | None = Field(None, ge=2)
    subsample_seed: int = Field(0, ge=0)


def _row(variant: str, group: str, metric: str, seed: int, value: float, fraction: float | None = None) -> dict:
    return {
        "analysis": "crossmodal",
        "variant": variant,
        "control": NO_CONTROL,
        "group": group,
        "metric": metric,
        "seed": seed,
        "value": value,
        "fraction": np.nan if fraction is None else fraction,
    }


def binding_metrics(image: np.ndarray, text: np.ndarray, scenes: SceneSet, noun: str) -> dict[str, float]:
    """Swap accuracies and retrieval accuracies, flat."""
    out = {f"swap_{k}": v for k, v in swap_accuracy(swap_scores(image, text, swap_cases(scenes, noun))).items()}
    for direction, metrics in retrieval(image, text, scenes).items():
        out.update({f"{direction}_{m}": v for m, v in metrics.items()})
    return out


def crossmodal_analysis(
    inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None
) -> Result:
    """Every test of the analysis on the 2-object scenes."""
    if inputs.other is None:
        raise BindscopeError("crossmodal needs the text embeddings of the same model (the second folder)")
    scenes_all = inputs.scenes
    rows = scenes_all.full() if scenes_all.max_objects == 2 else np.arange(0)
    if not len(rows):
        raise BindscopeError("cross-modal swap tests need 2-object scenes")
    if settings.max_scenes is not None and settings.max_scenes < len(rows):
        rng = np.random.default_rng(settings.subsample_seed)
        rows = np.sort(rng.choice(rows, settings.max_scenes, replace=False))
    scenes = scenes_all.subset(rows)
    image = np.asarray(inputs.embeddings, dtype=np.float32)[rows]
    text = np.asarray(inputs.other, dtype=np.float32)[rows]
    if image.shape[1] != text.shape[1] and settings.bridge == "none":
        raise BindscopeError(
            f"image embeddings have width {image.shape[1]} and text {text.shape[1]}; fit a bridge to compare them"
        )
    noun = settings.noun or inputs.noun or scenes.space.concepts[-1]
    attribute = next((c for c in scenes.space.concepts if c != noun), noun)
    table = []
    if image.shape[1] == text.shape[1]:
        for metric, value in binding_metrics(image, text, scenes, noun).items():
            table.append(_row("raw", "all", metric, 0, value))
        table += [_row("chance", "all", m, 0, 0.5) for m in ("swap_attribute", "swap_noun")]
        table += [_row("bag_of_concepts", "all", m, 0, 0.5) for m in ("swap_attribute", "swap_noun")]
    if settings.bridge == "ridge":
        total, done = len(settings.fractions) * len(settings.seeds), 0
        for seed in settings.seeds:
            splits = object_splits(scenes, list(settings.fractions), seed, order="covering")
            for split in splits:
                split = split.with_validation(scenes, settings.validation_fraction)
                test = split.test_only
                if len(test) < 2 or len(split.validation) == 0:
                    continue
                bridge = fit_bridge(text, image, split.train_only, split.validation)
                sub = scenes.subset(test)
                if image.shape[1] == text.shape[1]:
                    for metric, value in binding_metrics(image[test], text[test], sub, noun).items():
                        table.append(_row("raw", "test_only", metric, seed, value, split.fraction))
                for metric, value in binding_metrics(image[test], bridge.apply(text[test]), sub, noun).items():
                    table.append(_row("bridged", "test_only", metric, seed, value, split.fraction))
                done += 1
                if progress is not None:
                    progress(done, total)
    if inputs.singles is not None:
        for kind, value in half_truth_rates(image, text, np.asarray(inputs.singles), scenes, attribute, noun).items():
            table.append(_row("half_truth", "all", kind, 0, value))
    return Result(tidy(table, EXTRA_COLUMNS), parts={"noun": noun, "scenes": len(rows)})


class CrossmodalAnalysis(Analysis):
    """``crossmodal``: swap tests, retrieval, the linear bridge and half-truths across modalities."""

    name = "crossmodal"
    title = "Does cross-modal similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths."
    Settings = CrossmodalSettings
    needs = frozenset({"embeddings", "other"})
    uses = frozenset({"singles", "probes"})
    extra_columns = EXTRA_COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None) -> Result:
        return crossmodal_analysis(inputs, settings, progress)

    def summarize(self, result: Result, settings: CrossmodalSettings) -> dict[str, Any]:
        t = result.table
        raw = nested(t[(t.variant == "raw") & (t.group == "all")], ["metric"])
        bridged = t[t.variant.isin(["raw", "bridged"]) & (t.group == "test_only")]
        by_fraction = nested(bridged, ["variant", "fraction", "metric"]) if len(bridged) else {}
        half = nested(t[t.variant == "half_truth"], ["metric"]) if (t.variant == "half_truth").any() else None
        return {
            "noun": result.parts["noun"],
            "scenes": result.parts["scenes"],
            "raw": raw,
            "bridge": by_fraction,
            "half_truths": half,
        }

    def headline(self, summary: dict[str, Any]) -> Rows:
        rows: Rows = [("test", "accuracy %", "chance / bag of concepts %")]
        for metric in ("swap_attribute", "swap_noun", "image_to_text_strict@1", "image_to_text_concept@1"):
            value = summary["raw"].get(metric)
            rows.append((metric, format_spread(value, 1, 100), "50.0" if metric.startswith("swap") else "-"))
        for kind, value in (summary["half_truths"] or {}).items():
            rows.append((f"half-truth {kind}", format_spread(value, 1, 100), "-"))
        return rows
