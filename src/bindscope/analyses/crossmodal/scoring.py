"""One scoring (docs/method/07-crossmodal.md): the swap tests and retrieval of images against captions, per scene too,
and the references every scoring is read against (chance and a perfect bag of concepts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bindscope.analyses.crossmodal.retrieval import bag_strict_ceiling, retrieval_chance, retrieve
from bindscope.analyses.crossmodal.swaps import SwapCases, mean_and_count, swap_scores, swap_wins
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import result_row
from bindscope.space.concepts import SceneSet
from bindscope.space.families import family_of

#: The groups of the results table: every scored scene, or the test_only scenes of a bridge's split.
ALL, TEST_ONLY = "all", "test_only"
#: The metrics of one scoring, in the order tables and plots show them.
SWAP_METRICS = ("swap_attribute", "swap_noun", "order_sensitivity")
#: The family swap's metric of a relation or count space (:func:`~bindscope.space.captions.family_swap`).
FAMILY_METRICS = {"relation": "swap_relation", "count": "swap_count"}
DIRECTIONS = ("image_to_text", "text_to_image")
#: A metric's (value, cases): NaN and 0 for a metric without cases.
Metrics = dict[str, tuple[float, int]]


def scored_scenes(scenes: SceneSet, max_scenes: int | None, seed: int) -> np.ndarray:
    """The dataset rows scored: its 2-object scenes, or a seeded subsample of ``max_scenes`` of them."""
    rows = scenes.full() if scenes.max_objects == 2 else np.arange(0)
    if not len(rows):
        raise BindscopeError(
            "cross-modal tests need 2-object scenes (a dataset whose scenes hold two objects, e.g. clevr or text)"
        )
    if max_scenes is not None and max_scenes < len(rows):
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(rows, max_scenes, replace=False))
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

    def score(self, text: np.ndarray, part: np.ndarray) -> tuple[Metrics, pd.DataFrame]:
        """The scenes ``part`` (rows of ``scenes``) against the captions ``text`` (aligned with ``scenes``).

        Each image of ``part`` meets its caption and its swaps' captions wherever they are in ``scenes``;
        retrieval ranks the captions (images) of ``part`` only. Returns each metric's (value, cases; a
        metric without cases is NaN) and the per-scene scores, rows named by dataset rows.
        """
        position = np.full(len(self.scenes), -1, dtype=np.int64)
        position[part] = np.arange(len(part))
        cases = self.cases.restrict(position[self.cases.scene] >= 0)
        metrics, frame = self.swaps(text, part, cases, position[cases.scene])
        metrics |= self.retrieval(text, part, frame)
        return metrics, frame

    def swaps(
        self, text: np.ndarray, part: np.ndarray, cases: SwapCases, at: np.ndarray
    ) -> tuple[Metrics, pd.DataFrame]:
        """The swap tests of ``cases`` (at positions ``at`` of ``part``) and their per-scene cosines and captions."""
        scores = swap_scores(self.image, text, cases)
        metrics = {
            ("order_sensitivity" if name == "order_sensitivity" else f"swap_{name}"): mean_and_count(wins)
            for name, wins in swap_wins(scores).items()
        }
        frame = pd.DataFrame({"scene": self.rows[part].astype(np.int64)})
        frame["cos_correct"] = np.nan
        frame.loc[at, "cos_correct"] = scores["correct"]
        for name, negative in cases.negative.items():
            frame[f"cos_{name}"] = np.nan
            frame.loc[at, f"cos_{name}"] = scores[name]
            caption = np.full(len(part), -1, dtype=np.int64)
            caption[at] = np.where(negative >= 0, self.rows[np.maximum(negative, 0)], -1)
            frame[f"{name}_caption"] = caption
        return metrics, frame

    def retrieval(self, text: np.ndarray, part: np.ndarray, frame: pd.DataFrame) -> Metrics:
        """Retrieval within ``part`` both ways; each query's top-1 and credit go into ``frame`` (NaN: not asked)."""
        metrics: Metrics = {}
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
                column = np.full(len(part), np.nan)
                column[queries] = found.credit[f"{kind}@1"]
                frame[f"{direction}_{kind}"] = column
        return metrics


def swap_references(scenes: SceneSet) -> tuple[str, ...]:
    """The swaps with a true negative whose chance and bag are 0.5: attribute and noun, and a relation or count
    space's family swap."""
    family = family_of(scenes.space)
    return (*SWAP_METRICS[:2], *([FAMILY_METRICS[family]] if family in FAMILY_METRICS else []))


def reference_rows(scenes: SceneSet) -> list[dict[str, Any]]:
    """Chance and what a perfect bag of concepts scores: 0.5 on every swap (a swap keeps the bag: it ties, and a
    tie counts half); on top-1 retrieval, every concept-level hit and, strictly, the share of its bag's captions
    that name the scene's objects. Expectations, not counts: no ``n_cases``."""
    swaps = swap_references(scenes)
    out = [result_row("crossmodal", v, ALL, m, 0, 0.5) for v in ("chance", "bag_of_concepts") for m in swaps]
    chance = retrieval_chance(scenes)
    ceiling = {"strict@1": bag_strict_ceiling(scenes), "concept@1": 1.0}
    for direction in DIRECTIONS:
        for metric in ("strict@1", "concept@1"):
            name = f"{direction}_{metric}"
            out.append(result_row("crossmodal", "chance", ALL, name, 0, chance[metric]))
            out.append(result_row("crossmodal", "bag_of_concepts", ALL, name, 0, ceiling[metric]))
    return out


def case_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Per scene and scoring: swap cosines, swap captions and the top-1 retrieved in both directions."""
    out = pd.concat(frames, ignore_index=True)
    first = ["variant", "seed", "fraction", "scene"]
    out = out[first + [c for c in out.columns if c not in first]]
    return out.astype({"seed": np.int32})
