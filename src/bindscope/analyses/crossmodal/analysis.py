"""The registered ``crossmodal`` analysis (docs/method.md §7): the bag-of-concepts failure across modalities.

Image embeddings (``embeddings``) against the captions' text embeddings of the same model (``other``):
swap tests, strict and concept-level retrieval, a linear bridge fitted on seen objects and scored on
unseen ones, and half-truths (with the single-object caption bank, ``singles``); beside them, the
uni-modal object probe accuracy of each modality (``unimodal``), the paper's contrast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.crossmodal.bridge import Bridge, fit_bridge, fit_contrastive_bridge
from bindscope.analyses.crossmodal.halftruth import half_truth_rates
from bindscope.analyses.crossmodal.plot import bridge_plot, half_truth_plot, swap_plot
from bindscope.analyses.crossmodal.retrieval import bag_strict_ceiling, chunks, retrieval_chance, retrieve
from bindscope.analyses.crossmodal.swaps import SwapCases, mean_and_count, swap_cases, swap_scores, swap_wins
from bindscope.analyses.inputs import AnalysisInputs, Inputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import result_row, spread, tidy
from bindscope.core.validation import MAX_SCENE_COUNT, MAX_STEPS, Device, Seed, Seeds, Settings
from bindscope.estimators.metrics import format_spread, nested
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import DEFAULT_SEEDS, ObjectSplit, check_fractions, object_splits

EXTRA_COLUMNS = ("fraction", "cases")
BRIDGE_FRACTIONS = (0.3, 0.5, 0.7, 0.9)
#: The metrics of one scoring, in the order tables and plots show them.
SWAP_METRICS = ("swap_attribute", "swap_noun", "order_sensitivity")
HEADLINE_METRICS = (
    *SWAP_METRICS,
    "image_to_text_strict@1",
    "image_to_text_concept@1",
    "text_to_image_strict@1",
    "text_to_image_concept@1",
)
ALL, TEST_ONLY = "all", "test_only"
#: The table's variant of each half-truth rate: pooled over pairs (cases: pairs), per scene (cases: images).
HALF_VARIANTS = {"pooled": "half_truth", "per_scene": "half_truth_per_scene"}


class CrossmodalSettings(Settings):
    """Which concepts play attribute and noun, the bridge and its object-level splits, a subsample.

    ``bridge``: ``ridge`` (closed form, default), ``contrastive`` (InfoNCE from the ridge map) or
    ``none``. ``fractions`` x ``seeds``: the object-level splits it is fitted on (train_only scenes,
    ``validation_fraction`` of them held out to choose the regularisation) and scored on (test_only).
    ``max_scenes``: score a seeded subsample of the 2-object scenes (``subsample_seed``).
    ``retrieval_queries``: estimate retrieval from this many seeded queries per scoring, each ranked
    exactly against every caption (image); default all. ``device``:
    where the retrieval products and the contrastive bridge run.
    """

    attribute: str | None = None
    noun: str | None = None
    bridge: Literal["ridge", "contrastive", "none"] = "ridge"
    fractions: tuple[float, ...] = BRIDGE_FRACTIONS
    seeds: Seeds = DEFAULT_SEEDS
    validation_fraction: float = Field(0.1, gt=0, lt=1)
    contrastive_steps: int = Field(300, ge=1, le=MAX_STEPS)
    max_scenes: int | None = Field(None, ge=2, le=MAX_SCENE_COUNT)
    retrieval_queries: int | None = Field(None, ge=1, le=MAX_SCENE_COUNT)
    subsample_seed: Seed = 0
    cases: bool = True
    device: Device = "cpu"

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(sorted(check_fractions(v)))


def metric_row(
    variant: str, group: str, metric: str, seed: int, value: float, cases: int, fraction: float | None = None
) -> dict[str, Any]:
    return result_row(
        "crossmodal",
        variant,
        group,
        metric,
        seed,
        value,
        fraction=np.nan if fraction is None else fraction,
        cases=cases,
    )


def scored_scenes(scenes: SceneSet, settings: CrossmodalSettings) -> np.ndarray:
    """The dataset rows scored: its 2-object scenes, or a seeded subsample of ``max_scenes`` of them."""
    rows = scenes.full() if scenes.max_objects == 2 else np.arange(0)
    if not len(rows):
        raise BindscopeError(
            "cross-modal tests need 2-object scenes (a dataset whose scenes hold two objects, e.g. clevr or text)"
        )
    if settings.max_scenes is not None and settings.max_scenes < len(rows):
        rng = np.random.default_rng(settings.subsample_seed)
        rows = np.sort(rng.choice(rows, settings.max_scenes, replace=False))
    return rows


@dataclass
class Scorer:
    """Swap tests and retrieval over the scored scenes, for any captions aligned with them.

    ``rows``: the dataset row of each scene. ``queries``: retrieval asks at most this many seeded
    queries per scoring (all when None). ``tick()`` after each retrieval chunk.
    """

    image: np.ndarray
    scenes: SceneSet
    cases: SwapCases
    rows: np.ndarray
    tick: Callable[[], object] | None = None
    device: str = "cpu"
    queries: int | None = None
    seed: int = 0

    def query_rows(self, count: int) -> np.ndarray | None:
        """Positions (within a part of ``count`` scenes) of the retrieval queries; None for all."""
        if self.queries is None or count <= self.queries:
            return None
        return np.sort(np.random.default_rng(self.seed).choice(count, self.queries, replace=False))

    def query_count(self, count: int) -> int:
        return count if self.queries is None else min(count, self.queries)

    def score(self, text: np.ndarray, part: np.ndarray) -> tuple[dict[str, tuple[float, int]], pd.DataFrame]:
        """The scenes ``part`` (rows of ``scenes``) against the captions ``text`` (aligned with ``scenes``).

        Each image of ``part`` meets its caption and its swaps' captions wherever they are in ``scenes``;
        retrieval ranks the captions (images) of ``part`` only. Returns each metric's (value, cases; a
        metric without cases is NaN) and the per-scene scores, rows named by dataset rows.
        """
        position = np.full(len(self.scenes), -1, dtype=np.int64)
        position[part] = np.arange(len(part))
        cases = self.cases.restrict(position[self.cases.scene] >= 0)
        scores = swap_scores(self.image, text, cases)
        metrics = {
            ("order_sensitivity" if name == "order_sensitivity" else f"swap_{name}"): mean_and_count(wins)
            for name, wins in swap_wins(scores).items()
        }
        at = position[cases.scene]
        frame = pd.DataFrame({"scene": self.rows[part].astype(np.int64)})
        frame["cos_correct"] = np.nan
        frame.loc[at, "cos_correct"] = scores["correct"]
        for name, negative in cases.negative.items():
            frame[f"cos_{name}"] = np.nan
            frame.loc[at, f"cos_{name}"] = scores[name]
            caption = np.full(len(part), -1, dtype=np.int64)
            caption[at] = np.where(negative >= 0, self.rows[np.maximum(negative, 0)], -1)
            frame[f"{name}_caption"] = caption
        asked = self.query_rows(len(part))
        queries = np.arange(len(part)) if asked is None else asked
        ranked = retrieve(self.image[part], text[part], self.scenes.subset(part), self.tick, self.device, asked)
        for direction, found in ranked.items():
            for metric, credit in found.credit.items():
                metrics[f"{direction}_{metric}"] = mean_and_count(credit)
            top1 = np.full(len(part), -1, dtype=np.int64)
            top1[queries] = self.rows[part[found.top]]
            frame[f"{direction}_top1"] = top1
            for kind in ("strict", "concept"):
                column = np.full(len(part), np.nan)  # NaN: not asked
                column[queries] = found.credit[f"{kind}@1"]
                frame[f"{direction}_{kind}"] = column
        return metrics, frame


def fit(
    settings: CrossmodalSettings, text: np.ndarray, image: np.ndarray, train: np.ndarray, val: np.ndarray, seed: int
) -> Bridge:
    if settings.bridge == "contrastive":
        return fit_contrastive_bridge(
            text, image, train, val, steps=settings.contrastive_steps, seed=seed, device=settings.device
        )
    return fit_bridge(text, image, train, val)


def reference_rows(scenes: SceneSet) -> list[dict[str, Any]]:
    """Chance and what a perfect bag of concepts scores: 0.5 on both swaps; on top-1 retrieval, every
    concept-level hit and, strictly, the share of its bag's captions that name the scene's objects."""
    out = [metric_row(v, ALL, m, 0, 0.5, 0) for v in ("chance", "bag_of_concepts") for m in SWAP_METRICS[:2]]
    chance = retrieval_chance(scenes)
    ceiling = {"strict@1": bag_strict_ceiling(scenes), "concept@1": 1.0}
    for direction in ("image_to_text", "text_to_image"):
        for metric in ("strict@1", "concept@1"):
            out.append(metric_row("chance", ALL, f"{direction}_{metric}", 0, chance[metric], len(scenes)))
            out.append(metric_row("bag_of_concepts", ALL, f"{direction}_{metric}", 0, ceiling[metric], len(scenes)))
    return out


def crossmodal_analysis(
    inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None
) -> Result:
    """Every test of the analysis on the 2-object scenes."""
    if inputs.other is None:
        raise BindscopeError("crossmodal needs the text embeddings of the same model (the second folder)")
    rows = scored_scenes(inputs.scenes, settings)
    scenes = inputs.scenes.subset(rows)
    image = np.asarray(inputs.embeddings, dtype=np.float32)[rows]
    text = np.asarray(inputs.other, dtype=np.float32)[rows]
    same_width = image.shape[1] == text.shape[1]
    if not same_width and settings.bridge == "none":
        raise BindscopeError(
            f"the image embeddings have width {image.shape[1]} and the text {text.shape[1]}; cosines need one "
            "width: fit a bridge (--bridge ridge) or give embeddings of one joint model"
        )
    roles = concept_roles(scenes, settings.attribute, settings.noun or inputs.noun)
    cases = swap_cases(scenes, roles["noun"])
    splits = bridge_splits(scenes, settings)
    per_split = len(variants_of(same_width))
    scorer = Scorer(
        image, scenes, cases, rows, None, settings.device, settings.retrieval_queries, settings.subsample_seed
    )
    work = chunks(scorer.query_count(len(scenes))) * int(same_width)
    work += sum(chunks(scorer.query_count(len(s.test_only))) * per_split for _, s in splits)
    steps = Steps(progress, work + len(splits))
    scorer.tick = steps.done
    table: list[dict[str, Any]] = []
    frames: list[pd.DataFrame] = []
    if same_width:
        metrics, frame = scorer.score(text, np.arange(len(scenes)))
        table += [metric_row("raw", ALL, m, 0, v, n) for m, (v, n) in metrics.items() if n]
        table += reference_rows(scenes)
        frames.append(frame.assign(variant="raw", seed=0, fraction=np.nan))
    bridges = []
    for seed, fitted in splits:
        test = fitted.test_only
        steps.done()
        if len(test) < 2 or len(fitted.validation) == 0 or len(fitted.train_only) < 2:
            bridges.append({"seed": seed, "fraction": fitted.fraction, "fitted": False, "test_only": len(test)})
            steps.skip(chunks(scorer.query_count(len(test))) * per_split)
            continue
        bridge = fit(settings, text, image, fitted.train_only, fitted.validation, seed)
        bridges.append(bridge_record(bridge, seed, fitted.fraction, len(fitted.train_only), len(test)))
        mapped_text = {"raw": text, "bridged": bridge.apply(text)}  # every caption: a swap's may name seen objects
        for variant in variants_of(same_width):
            metrics, frame = scorer.score(mapped_text[variant], test)
            table += [
                metric_row(variant, TEST_ONLY, m, seed, v, n, fitted.fraction) for m, (v, n) in metrics.items() if n
            ]
            frames.append(frame.assign(variant=variant, seed=seed, fraction=fitted.fraction))
    half_absent = None
    if inputs.singles is None:
        half_absent = (
            "no text single-object captions (embed them with --single-objects, or import them with "
            "`embeddings import --singles`)"
        )
    elif not same_width:
        half_absent = "the image and text widths differ (half-truths compare them by cosine)"
    else:
        half = half_truths(image, text, np.asarray(inputs.singles), scenes, roles)
        table += [
            metric_row(HALF_VARIANTS[way], ALL, kind, 0, v, n)
            for kind, rates in half.items()
            for way, (v, n) in rates.items()
            if n
        ]
    tables = {"bridge": pd.DataFrame(bridges)} if bridges else {}
    if settings.cases and frames:
        tables["cases"] = case_table(frames)
    parts = {
        "concepts": roles,
        "scenes": len(rows),
        "subsampled": len(rows) < len(inputs.scenes.full()),
        "skipped": cases.skipped,
        "widths": {"image": int(image.shape[1]), "text": int(text.shape[1])},
        "half_truths_absent": half_absent,
        "unimodal": inputs.unimodal,
    }
    return Result(tidy(table, EXTRA_COLUMNS), tables, [], parts)


def bridge_splits(scenes: SceneSet, settings: CrossmodalSettings) -> list[tuple[int, ObjectSplit]]:
    """(seed, split with its validation part) per seed and fraction; none without a bridge."""
    if settings.bridge == "none":
        return []
    return [
        (seed, s.with_validation(scenes, settings.validation_fraction))
        for seed in settings.seeds
        for s in object_splits(scenes, list(settings.fractions), seed, order="covering")
    ]


def variants_of(same_width: bool) -> tuple[str, ...]:
    """What a split scores: the captions as they are (one width only) and through the bridge."""
    return ("raw", "bridged") if same_width else ("bridged",)


class Steps:
    """Progress over a known number of steps."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.count = progress, total, 0

    def done(self) -> None:
        self.skip(1)

    def skip(self, count: int) -> None:
        self.count += count
        if self.progress is not None:
            self.progress(self.count, self.total)


def half_truths(
    image: np.ndarray, text: np.ndarray, singles: np.ndarray, scenes: SceneSet, roles: dict[str, str]
) -> dict[str, dict[str, tuple[float, int]]]:
    """Half-truth rates, checked against the single-object caption bank's shape."""
    u = scenes.space.num_objects
    if singles.shape[0] != u:
        raise BindscopeError(
            f"the single-object bank has {singles.shape[0]} rows, this space {u} objects; give the text "
            "single-object captions of this dataset (`bindscope embed --single-objects` on the text modality)"
        )
    if singles.shape[1] != text.shape[1] or image.shape[1] != text.shape[1]:
        raise BindscopeError(
            f"half-truths compare images ({image.shape[1]}) with captions ({text.shape[1]}) and single-object "
            f"captions ({singles.shape[1]}) by cosine: they need one width (one joint model)"
        )
    return half_truth_rates(image, text, singles, scenes, roles["attribute"], roles["noun"])


def bridge_record(bridge: Bridge, seed: int, fraction: float, train: int, test: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "fraction": fraction,
        "fitted": True,
        "kind": bridge.kind,
        "alpha": bridge.alpha,
        "validation_loss": bridge.validation_loss,
        "train_only": train,
        "test_only": test,
    }


def case_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Per scene and scoring: swap cosines, swap captions and the top-1 retrieved in both directions."""
    out = pd.concat(frames, ignore_index=True)
    first = ["variant", "seed", "fraction", "scene"]
    out = out[first + [c for c in out.columns if c not in first]]
    return out.astype({"seed": np.int32})


def headline_fraction(fractions: list[float]) -> float | None:
    """The fraction the terminal shows the bridge at: the one nearest 0.5."""
    return min(fractions, key=lambda f: (abs(f - 0.5), f)) if fractions else None


def crossmodal_summary(result: Result, settings: CrossmodalSettings) -> dict[str, Any]:
    """The main numbers of ``bindscope crossmodal``."""
    t, parts = result.table, result.parts
    raw = nested(t[(t.variant == "raw") & (t.group == ALL)], ["metric"])
    refs = t[t.variant.isin(["chance", "bag_of_concepts"])]
    tested = t[t.group == TEST_ONLY]
    bridge = {
        f"{fraction:g}": nested(rows, ["variant", "metric"]) for fraction, rows in tested.groupby("fraction", sort=True)
    }
    half = {way: t[t.variant == variant] for way, variant in HALF_VARIANTS.items()}
    return {
        "concepts": parts["concepts"],
        "scenes": parts["scenes"],
        "subsampled": parts["subsampled"],
        "widths": parts["widths"],
        "raw": raw,
        "references": {v: dict(zip(r.metric, r.value)) for v, r in refs.groupby("variant", sort=False)},
        "bridge": {"kind": settings.bridge, "fractions": bridge},
        "headline_fraction": headline_fraction([float(f) for f in bridge]),
        "half_truths": half_rates(half["pooled"]),
        "half_truths_per_scene": half_rates(half["per_scene"]),
        "half_truths_differ": differing(half["pooled"], half["per_scene"]),
        "half_truths_absent": parts["half_truths_absent"],
        "unimodal": parts["unimodal"],
        "skipped": parts["skipped"],
    }


def percent(value: Any) -> str:
    return format_spread(value, 1, 100)


class CrossmodalAnalysis(Analysis):
    """``crossmodal``: swap tests, retrieval, the linear bridge and half-truths across modalities."""

    name = "crossmodal"
    title = "Does image-text similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths."
    Settings = CrossmodalSettings
    needs = frozenset({"embeddings", "other"})
    uses = frozenset({"singles", "unimodal"})

    def check_folders(self, inputs: Inputs) -> None:
        """The image folder comes first, the text one second (``other``)."""
        if inputs.embeddings.modality != "image":
            raise BindscopeError(
                f"{inputs.embeddings.root} holds {inputs.embeddings.modality} embeddings; give the image folder "
                "first, then the text one"
            )

    extra_columns = EXTRA_COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None) -> Result:
        return crossmodal_analysis(inputs, settings, progress)

    def summarize(self, result: Result, settings: CrossmodalSettings) -> dict[str, Any]:
        return crossmodal_summary(result, settings)

    def headline(self, summary: dict[str, Any]) -> Rows:
        f = summary["headline_fraction"]
        at = summary["bridge"]["fractions"].get(f"{f:g}", {}) if f is not None else {}
        refs = summary["references"]
        rows: Rows = [
            (
                "test",
                "raw %",
                f"test_only raw % (f={f:g})" if f is not None else "test_only raw %",
                "bridged %",
                "chance %",
                "bag of concepts %",
            )
        ]
        for metric in HEADLINE_METRICS:
            rows.append(
                (
                    metric,
                    percent(summary["raw"].get(metric)),
                    percent(at.get("raw", {}).get(metric)),
                    percent(at.get("bridged", {}).get(metric)),
                    reference(refs, "chance", metric),
                    reference(refs, "bag_of_concepts", metric),
                )
            )
        rows += half_truth_rows(summary)
        for modality, acc in (summary["unimodal"] or {}).items():
            chance = acc.get("chance")
            rows.append(
                (
                    f"{modality} object probe (uni-modal)",
                    percent(acc.get("object_acc")),
                    "",
                    "",
                    "-" if chance is None else f"{100 * chance:.1f}",
                    "",
                )
            )
        return rows

    def notes(self, summary: dict[str, Any]) -> list[str]:
        c = summary["concepts"]
        scope = "a seeded subsample of " if summary["subsampled"] else ""
        lines = [f"attribute = {c['attribute']}, noun = {c['noun']}; {scope}{summary['scenes']:,} 2-object scenes"]
        for swap, reasons in summary["skipped"].items():
            if reasons:
                lines.append(f"{swap} swap skipped: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items()))
        if summary["bridge"]["kind"] != "none":
            lines.append(
                f"bridge: {summary['bridge']['kind']} text -> image, fitted on train_only scenes and scored on "
                "test_only (objects unseen by the bridge)"
            )
        if summary["half_truths"] is None:
            lines.append(f"half-truths: absent, {summary['half_truths_absent']}")
        elif summary.get("half_truths_differ"):
            lines.append(
                "half-truth rates pooled over pairs and per scene (the mean of each image's rate) differ for "
                + ", ".join(summary["half_truths_differ"])
            )
        else:
            lines.append("half-truth rates: pooled over pairs and per scene (the mean of each image's rate) are equal")
        lines += contrast_lines(summary)
        return lines

    def files(self, result: Result, settings: CrossmodalSettings, context: RunContext) -> ResultFiles:
        table = result.table

        def extra(stage: Path) -> None:
            plots = stage / "plots"
            swap_plot(table, plots / "swaps.png", title=context.title)
            if (table.group == TEST_ONLY).any():
                bridge_plot(table, plots / "bridge.png", title=f"{context.title}: {settings.bridge} bridge")
            if (table.variant == "half_truth").any():
                half_truth_plot(table, plots / "half_truths.png", title=context.title)

        return ResultFiles(table, dict(result.tables), extra, parquet_only=frozenset({"cases"}))


def half_rates(rows: pd.DataFrame) -> dict[str, Any] | None:
    """``{kind: spread}`` of one way of averaging the half-truth rates; None without any."""
    return {m: spread([v]) for m, v in zip(rows.metric, rows.value)} if len(rows) else None


#: Rates closer than this read as equal: the same mean summed in another order.
SAME_RATE = 1e-12


def differing(pooled: pd.DataFrame, per_scene: pd.DataFrame) -> list[str]:
    """The half-truth kinds whose pooled and per-scene rates differ."""
    a, b = pooled.set_index("metric").value, per_scene.set_index("metric").value
    return [m for m in a.index if m in b.index and abs(float(a[m]) - float(b[m])) > SAME_RATE]


def half_truth_rows(summary: dict[str, Any]) -> Rows:
    """Terminal rows of the half-truth rates: pooled, and per scene where it differs."""
    rows: Rows = []
    differ = summary.get("half_truths_differ") or []
    per_scene = summary.get("half_truths_per_scene") or {}
    for kind, value in (summary["half_truths"] or {}).items():
        chance = "50.0" if kind != "full_beats_short" else "-"
        both = kind in differ
        rows.append((f"half-truth {kind}" + (" pooled" if both else ""), percent(value), "", "", chance, ""))
        if both:
            rows.append((f"half-truth {kind} per scene", percent(per_scene.get(kind)), "", "", chance, ""))
    return rows


def reference(refs: dict[str, dict[str, float]], variant: str, metric: str) -> str:
    value = refs.get(variant, {}).get(metric)
    return "-" if value is None else f"{100 * value:.1f}"


def contrast_lines(summary: dict[str, Any]) -> list[str]:
    """The paper's contrast in words: object information per modality against the cross-modal swap test."""
    unimodal = summary["unimodal"]
    swap = summary["raw"].get("swap_attribute")
    if not unimodal:
        return ["uni-modal probes: not given (--probes-image / --probes-text: `bindscope probe` result folders)"]
    parts = [f"{m} object probe {percent(a.get('object_acc'))}%" for m, a in unimodal.items()]
    return [f"uni-modal vs cross-modal: {', '.join(parts)}; cross-modal attribute-swap accuracy {percent(swap)}%"]
