"""Every test of ``crossmodal`` on the 2-object scenes (docs/method/07-crossmodal.md), as one typed result.

The raw captions are scored on every scene (one width only); per seed and fraction a bridge is fitted
on the train_only scenes of an object-level split and the captions, raw and bridged, are scored on its
test_only scenes; half-truths need the single-object captions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.base import Progress, Result
from bindscope.analyses.crossmodal.bridge import bridge_splits, fit_bridge_kind
from bindscope.analyses.crossmodal.halftruth import HALF_VARIANTS, half_truths
from bindscope.analyses.crossmodal.retrieval import chunks
from bindscope.analyses.crossmodal.scoring import ALL, TEST_ONLY, Scorer, case_table, reference_rows, scored_scenes
from bindscope.analyses.crossmodal.settings import CrossmodalSettings
from bindscope.analyses.crossmodal.swaps import swap_cases
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import KEY_COLUMNS, result_row, tidy
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import ObjectSplit

#: The results table's own columns: the bridge's object fraction (NaN off the splits), and the cases per seed a
#: rate is a share of (image-caption pairs, queries, images; NaN on the references, which are expectations).
EXTRA_COLUMNS = ("fraction", "n_cases")
NO_SINGLES = (
    "no text single-object captions (embed them with --single-objects, or import them with "
    "`embeddings import --singles`)"
)
WIDTHS_DIFFER = "the image and text widths differ (half-truths compare them by cosine)"


@dataclass
class CrossmodalResult(Result):
    """What ``crossmodal`` computed: the tidy table (and ``bridge`` / ``cases`` tables), and what the summary
    says of the run: the concepts' roles, the scenes scored, the swaps skipped, the widths, why half-truths
    are absent (None when present) and the uni-modal probe accuracies given."""

    roles: dict[str, str] = field(kw_only=True)
    scenes: int = field(kw_only=True)
    subsampled: bool = field(kw_only=True)
    skipped: dict[str, dict[str, int]] = field(kw_only=True)
    widths: dict[str, int] = field(kw_only=True)
    half_truths_absent: str | None = field(kw_only=True)
    unimodal: dict[str, dict[str, Any]] | None = field(kw_only=True)


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


def variants_of(same_width: bool) -> tuple[str, ...]:
    """What a split scores: the captions as they are (one width only) and through the bridge."""
    return ("raw", "bridged") if same_width else ("bridged",)


def crossmodal_analysis(
    inputs: AnalysisInputs, settings: CrossmodalSettings, progress: Progress | None = None
) -> CrossmodalResult:
    """Every test of the analysis on the 2-object scenes."""
    rows, image, text = scored_arrays(inputs, settings)
    scenes = inputs.scenes.subset(rows)
    same_width = image.shape[1] == text.shape[1]
    roles = concept_roles(scenes, settings.attribute, settings.noun or inputs.noun)
    cases = swap_cases(scenes, roles["noun"])
    splits = [] if settings.bridge == "none" else bridge_splits(scenes, *split_plan(settings))
    scorer = Scorer(
        image, scenes, cases, rows, None, settings.device, settings.retrieval_queries, settings.subsample_seed
    )
    steps = Steps(progress, work(scorer, len(scenes), splits, same_width))
    scorer.tick = steps.done
    raw, raw_frames = raw_scoring(scorer, text) if same_width else ([], [])
    bridged, bridged_frames, bridges = bridge_scorings(settings, scorer, text, splits, steps)
    absent = half_truths_absent(inputs.singles is not None, same_width)
    half = [] if absent else half_truth_rows(image, text, np.asarray(inputs.singles), scenes, roles)
    frames = raw_frames + bridged_frames
    tables = {"bridge": pd.DataFrame(bridges)} if bridges else {}
    if settings.cases and frames:
        tables["cases"] = case_table(frames)
    return CrossmodalResult(
        results_table(raw + bridged + half),
        tables,
        [],
        roles=roles,
        scenes=len(rows),
        subsampled=len(rows) < len(inputs.scenes.full()),
        skipped=cases.skipped,
        widths={"image": int(image.shape[1]), "text": int(text.shape[1])},
        half_truths_absent=absent,
        unimodal=inputs.unimodal,
    )


def scored_arrays(inputs: AnalysisInputs, settings: CrossmodalSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The dataset rows scored (:func:`scored_scenes`) and their image and text embeddings (float32)."""
    if inputs.other is None:
        raise BindscopeError("crossmodal needs the text embeddings of the same model (the second folder)")
    rows = scored_scenes(inputs.scenes, settings.max_scenes, settings.subsample_seed)
    image = np.asarray(inputs.embeddings, dtype=np.float32)[rows]
    text = np.asarray(inputs.other, dtype=np.float32)[rows]
    if image.shape[1] != text.shape[1] and settings.bridge == "none":
        raise BindscopeError(
            f"the image embeddings have width {image.shape[1]} and the text {text.shape[1]}; cosines need one "
            "width: fit a bridge (--bridge ridge) or give embeddings of one joint model"
        )
    return rows, image, text


def split_plan(settings: CrossmodalSettings) -> tuple[tuple[float, ...], tuple[int, ...], float]:
    """The bridge's fractions, seeds and validation fraction."""
    return settings.fractions, tuple(settings.seeds), settings.validation_fraction


def raw_scoring(scorer: Scorer, text: np.ndarray) -> tuple[list[dict[str, Any]], list[pd.DataFrame]]:
    """The captions as they are on every scored scene, and the references: results rows and per-scene frame."""
    metrics, frame = scorer.score(text, np.arange(len(scorer.scenes)))
    rows = [result_row("crossmodal", "raw", ALL, m, 0, v, n_cases=n) for m, (v, n) in metrics.items() if n]
    return rows + reference_rows(scorer.scenes), [frame.assign(variant="raw", seed=0, fraction=np.nan)]


def half_truth_rows(
    image: np.ndarray, text: np.ndarray, singles: np.ndarray, scenes: SceneSet, roles: dict[str, str]
) -> list[dict[str, Any]]:
    """The half-truth rates as results rows: pooled over pairs and per scene."""
    return [
        result_row("crossmodal", HALF_VARIANTS[way], ALL, kind, 0, v, n_cases=n)
        for kind, rates in half_truths(image, text, singles, scenes, roles).items()
        for way, (v, n) in rates.items()
        if n
    ]


def work(scorer: Scorer, scenes: int, splits: list[tuple[int, ObjectSplit]], same_width: bool) -> int:
    """The steps of a run: every retrieval chunk of every scoring, and one per bridge fit."""
    total = chunks(scorer.query_count(scenes)) * int(same_width)
    total += sum(chunks(scorer.query_count(len(s.test_only))) * len(variants_of(same_width)) for _, s in splits)
    return total + len(splits)


def bridge_scorings(
    settings: CrossmodalSettings,
    scorer: Scorer,
    text: np.ndarray,
    splits: list[tuple[int, ObjectSplit]],
    steps: Steps,
) -> tuple[list[dict[str, Any]], list[pd.DataFrame], list[dict[str, Any]]]:
    """Per split: the bridge fitted on its train_only scenes and the captions (raw and bridged) scored on its
    test_only ones. Returns the results rows, the per-scene frames and the bridge table's rows."""
    same_width = scorer.image.shape[1] == text.shape[1]
    table: list[dict[str, Any]] = []
    frames: list[pd.DataFrame] = []
    bridges: list[dict[str, Any]] = []
    for seed, fitted in splits:
        test = fitted.test_only
        steps.done()
        if len(test) < 2 or len(fitted.validation) == 0 or len(fitted.train_only) < 2:
            bridges.append({"seed": seed, "fraction": fitted.fraction, "fitted": False, "test_only": len(test)})
            steps.skip(chunks(scorer.query_count(len(test))) * len(variants_of(same_width)))
            continue
        bridge = fit_bridge_kind(
            settings.bridge,
            text,
            scorer.image,
            fitted.train_only,
            fitted.validation,
            steps=settings.contrastive_steps,
            seed=seed,
            device=settings.device,
        )
        bridges.append(bridge.record(seed, fitted.fraction, len(fitted.train_only), len(test)))
        mapped = {"raw": text, "bridged": bridge.apply(text)}  # every caption: a swap's may name seen objects
        for variant in variants_of(same_width):
            metrics, frame = scorer.score(mapped[variant], test)
            table += [
                result_row("crossmodal", variant, TEST_ONLY, m, seed, v, fraction=fitted.fraction, n_cases=n)
                for m, (v, n) in metrics.items()
                if n
            ]
            frames.append(frame.assign(variant=variant, seed=seed, fraction=fitted.fraction))
    return table, frames, bridges


def half_truths_absent(singles: bool, same_width: bool) -> str | None:
    """Why half-truths cannot be scored (None when they can)."""
    if not singles:
        return NO_SINGLES
    return None if same_width else WIDTHS_DIFFER


def results_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The tidy table; ``fraction`` is NaN on the rows off the bridge's splits."""
    table = tidy(pd.DataFrame(rows).reindex(columns=[*KEY_COLUMNS, *EXTRA_COLUMNS]), EXTRA_COLUMNS)
    table["n_cases"] = table["n_cases"].astype("Int64")
    return table
