"""Benchmark ``bindscope crossmodal`` (docs/method/07-crossmodal.md) against a per-scene loop.

What is timed
-------------
ours
    :func:`bindscope.analyses.crossmodal.compute.crossmodal_analysis` with its default bridge
    splits (fractions x seeds) and ``bridge="ridge"``: swap tests and retrieval (image -> text and
    text -> image, top-1 and top-5, strict and concept-level) on every scene, then per object-level
    split a closed-form ridge bridge text -> image fitted on train_only and scored (raw and bridged)
    on test_only. No single-object bank is given, so no half-truths.
loop
    A per-scene loop, as one would write it scene by scene:

    swap tests
        a Python dict from (object id 1, object id 2) to row finds the attribute-swap, noun-swap
        and other-order captions of the scene; each cosine is computed with numpy.
    retrieval
        the cosines of one image against all pre-normalised captions (one matrix-vector product),
        ``np.argsort`` for the top 5, strict and concept-level hits; the same for one caption
        against all images.
    bridge
        per split, ridge text -> image solved with ``np.linalg.solve(XᵀX + a I, XᵀY)`` for each
        strength of :data:`bindscope.analyses.crossmodal.bridge.ALPHAS` (scaled as ``fit_bridge``
        does, by the mean squared singular value ``trace(XcᵀXc) / min(n, d)`` of the centred
        captions), the strength of least validation MSE kept; then the swap and retrieval loop on
        the test_only scenes, raw and bridged.

    The per-scene parts are timed on a random sample of scenes (``--sample``) and extrapolated
    linearly to all scenes; the set-up (dicts, normalisation, the ridge fits) is timed in full. The
    bridge is timed on the splits of the first seed and extrapolated to every seed.

The loop's swap cosines and top-1 retrieved caption / image are compared with ours on the sampled
scenes, and its chosen ridge strength with ours on the timed splits.

Half-truths (part ``half-truths``)
----------------------------------
ours
    :func:`bindscope.analyses.crossmodal.halftruth.half_truth_pairs` (the pairs, found block by block) and
    :func:`~bindscope.analyses.crossmodal.halftruth.half_truth_rates` (the rates, each block's cosines one matrix
    product per first object; memory linear in the scenes).
dense
    the algorithm before issue 57: the pairs from the images x objects x slots x concepts comparison, each
    pair's cosines one by one (``row_cosines``). Where it is far too slow (or its cube too large) it is timed on
    a seeded sample of the images and scaled linearly to all of them (its cost is linear in the images); the case
    says so. Checks: the same pairs (on the sampled images), and the same pooled rates where it ran in full.

Data: planted object-additive image embeddings with per-position object vectors (``T_s[o] = v[o] +
0.5 w_s[o]``, plus noise), width 512; the captions are the images under a fixed random rotation
plus a little noise, so raw cross-modal cosines are near chance and a linear bridge recovers the
binding; the single-object captions are a random vector per object. Sizes
(``--sizes``): ``clevr`` (576 scenes), ``10k`` (a 10 x 10 space: every ordered pair of its 100 objects,
10,000 scenes) and ``text`` (20 x 20: 160,000 2-object scenes, as the ``text`` preset; its analysis
estimates retrieval from ``--text-queries`` seeded queries per scoring, 2,048 by default, as
``--retrieval-queries`` does).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_crossmodal.py [--sizes clevr,10k,text] [--parts analysis,half-truths]
        [--sample N] [--noise X] [--max-scenes N] [--retrieval-queries N] [--text-queries N]

The figures go to ``benchmarks/results/bench_crossmodal.csv`` (or ``--csv PATH``): per size, ours against
the loop's total, and ours against the dense half-truth algorithm.

``--max-scenes`` scores a seeded subsample of the scenes (a quick try of the ``text`` path).
``--retrieval-queries N`` times ours with retrieval estimated from N seeded queries per scoring
(each ranked exactly against the whole gallery), and extrapolates the loop's retrieval to as many.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses import AnalysisInputs
from bindscope.analyses.crossmodal import CrossmodalSettings
from bindscope.analyses.crossmodal.compute import crossmodal_analysis
from bindscope.analyses.crossmodal.halftruth import half_truth_pairs, half_truth_rates
from bindscope.data.presets import get_preset
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.splits import ObjectSplit, object_splits

# the dense half-truth algorithm before issue 57: the tests' reference, timed here as the baseline
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from crossmodal_reference import dense_half_truth_pairs, dense_half_truth_rates

try:
    from bindscope.analyses.crossmodal.bridge import ALPHAS
except ImportError:  # the strengths fit_bridge tried when this benchmark was written
    ALPHAS = tuple(float(a) for a in np.logspace(-6, 2, 17))

DIM = 512
TEXT_NOISE = 0.05
TOP = 5
#: The swap cosines of one scene, in the loop's column order.
SWAP_KEYS = ("correct", "attribute", "noun", "order")
Lookup = dict[tuple[int, int], int]


# -- data ---------------------------------------------------------------------------------------
def planted(scenes: SceneSet, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images ``sum_s T_s[o_s] + noise`` and captions ``image @ R + small noise`` (R a random rotation).

    Parameters
    ----------
    scenes
        The 2-object scenes.
    noise
        Standard deviation of the image noise, relative to an object vector's norm.
    seed
        Seed of every draw.

    Returns
    -------
    tuple of numpy.ndarray
        Image and text embeddings ``[N, DIM]``, float32.
    """
    rng = np.random.default_rng(seed)
    u, k = scenes.space.num_objects, scenes.max_objects
    v = rng.normal(0, 1 / np.sqrt(DIM), (u, DIM))
    tables = [v + 0.5 * rng.normal(0, 1 / np.sqrt(DIM), (u, DIM)) for _ in range(k)]
    ids = scenes.object_ids()
    image = sum(tables[s][ids[:, s]] for s in range(k)) + rng.normal(0, noise / np.sqrt(DIM), (len(scenes), DIM))
    rotation = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0]
    text = image @ rotation + rng.normal(0, TEXT_NOISE / np.sqrt(DIM), image.shape)
    return image.astype(np.float32), text.astype(np.float32)


SIZES = ("clevr", "10k", "text")
PARTS = ("analysis", "half-truths")
#: The custom size: a 10 x 10 space, every ordered pair of its 100 objects.
CUSTOM = {"attribute": [f"a{i}" for i in range(10)], "noun": [f"n{i}" for i in range(10)]}


def all_scenes(size: str) -> tuple[SceneSet, str, str]:
    """The scenes of a size (a preset's, or :data:`CUSTOM`'s ordered pairs) and its attribute and noun."""
    if size == "10k":
        return SceneSet.enumerate(ConceptSpace.from_dict(CUSTOM), 2), "attribute", "noun"
    preset = get_preset(size)
    scenes = preset.build_scenes()
    return scenes, next(c for c in scenes.space.concepts if c != preset.noun), preset.noun


def scenes_for(size: str, max_scenes: int | None) -> SceneSet:
    """The size's full scenes, or a seeded subsample of ``max_scenes`` of them."""
    scenes = all_scenes(size)[0]
    rows = scenes.full()
    if max_scenes is not None and max_scenes < len(rows):
        rows = np.sort(np.random.default_rng(0).choice(rows, max_scenes, replace=False))
    return scenes.subset(rows)


# -- ours ---------------------------------------------------------------------------------------
def ours_settings(queries: int | None = None) -> CrossmodalSettings:
    """Default fractions and seeds, the ridge bridge, no per-case tables, and ``queries`` retrieval
    queries per scoring (None: every scene)."""
    return CrossmodalSettings(bridge="ridge", cases=False, retrieval_queries=queries)


# -- the per-scene loop -------------------------------------------------------------------------
def object_lookup(scenes: SceneSet) -> Lookup:
    """A dict from a scene's (object id 1, object id 2) to its row."""
    return {(int(a), int(b)): row for row, (a, b) in enumerate(scenes.object_ids())}


def cosine(x: np.ndarray, y: np.ndarray) -> float:
    """The cosine of two vectors, in float64."""
    y = y.astype(np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def swapped_ids(values: np.ndarray, concepts: list[int], scenes: SceneSet) -> tuple[int, int]:
    """The object ids of a scene ``[2, C]`` with ``concepts`` exchanged between its two objects."""
    swapped = values.copy()
    swapped[:, concepts] = values[::-1][:, concepts]
    a, b = scenes.space.object_ids(swapped)
    return int(a), int(b)


def loop_swap(i: int, scenes: SceneSet, lookup: Lookup, image: np.ndarray, text: np.ndarray, noun: int) -> np.ndarray:
    """The cosines of image ``i`` with its caption and its swapped captions (:data:`SWAP_KEYS`).

    NaN where the scene has one object twice, the swap names the same objects, or its caption is
    not among the rows.
    """
    out = np.full(len(SWAP_KEYS), np.nan)
    values = scenes.scenes[i]
    o1, o2 = (int(o) for o in scenes.space.object_ids(values))
    if o1 == o2:
        return out
    x = image[i].astype(np.float64)
    out[0] = cosine(x, text[i])
    attributes = [c for c in range(scenes.space.num_concepts) if c != noun]
    for k, concepts in enumerate((attributes, [noun]), start=1):
        ids = swapped_ids(values, concepts, scenes)
        row = lookup.get(ids) if sorted(ids) != sorted((o1, o2)) else None
        if row is not None:
            out[k] = cosine(x, text[row])
    row = lookup.get((o2, o1))
    if row is not None:
        out[3] = cosine(x, text[row])
    return out


def loop_retrieve(
    i: int, scenes: SceneSet, ids: np.ndarray, lookup: Lookup, queries: np.ndarray, keys: np.ndarray
) -> tuple[int, bool, bool, bool, bool]:
    """Top-5 keys of unit query ``i``: the best one, strict@1, strict@5, concept@1 and concept@5 hits."""
    top = np.argsort(-(keys @ queries[i]))[:TOP]
    same = {i, lookup.get((int(ids[i, 1]), int(ids[i, 0])), i)}
    strict = [int(t) in same for t in top]
    bag = np.sort(scenes.scenes[i], axis=0)
    concept = [np.array_equal(np.sort(scenes.scenes[t], axis=0), bag) for t in top]
    return int(top[0]), strict[0], any(strict), concept[0], any(concept)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm."""
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@dataclass(frozen=True)
class LoopRun:
    """Seconds of the loop's parts extrapolated to every scene, and its results on the sample.

    ``cosines``: ``[n, 4]`` swap cosines; ``top1``: ``[n, 2]`` best caption of each sampled image and
    best image of each sampled caption; ``strict1``: its strict top-1 image -> text hits.
    """

    swaps: float
    retrieval: float
    cosines: np.ndarray
    top1: np.ndarray
    strict1: np.ndarray


def run_loop(
    scenes: SceneSet, image: np.ndarray, text: np.ndarray, noun: int, sample: np.ndarray, queries: int | None = None
) -> LoopRun:
    """Swap tests and retrieval scene by scene on ``sample``, extrapolated to all of ``scenes`` (retrieval:
    to ``queries`` queries when given)."""
    scale = len(scenes) / len(sample)
    asked = len(scenes) if queries is None else min(queries, len(scenes))
    start = time.perf_counter()
    lookup = object_lookup(scenes)
    setup = time.perf_counter() - start
    start = time.perf_counter()
    cosines = np.array([loop_swap(int(i), scenes, lookup, image, text, noun) for i in sample])
    swaps = setup + (time.perf_counter() - start) * scale
    start = time.perf_counter()
    ids, unit_image, unit_text = scenes.object_ids(), unit(image), unit(text)
    setup = time.perf_counter() - start
    start = time.perf_counter()
    to_text = [loop_retrieve(int(i), scenes, ids, lookup, unit_image, unit_text) for i in sample]
    to_image = [loop_retrieve(int(i), scenes, ids, lookup, unit_text, unit_image) for i in sample]
    retrieval = setup + (time.perf_counter() - start) * asked / len(sample)
    top1 = np.array([[a[0], b[0]] for a, b in zip(to_text, to_image)], dtype=np.int64)
    return LoopRun(swaps, retrieval, cosines, top1, np.array([a[1] for a in to_text]))


def loop_ridge(
    text: np.ndarray, image: np.ndarray, fit: np.ndarray, val: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Ridge text -> image on ``fit`` by ``np.linalg.solve`` per strength; the one of least MSE on ``val``.

    Returns
    -------
    tuple
        Weight ``[d, d]``, bias ``[d]`` and the chosen (relative) strength.
    """
    x, y = text[fit].astype(np.float64), image[fit].astype(np.float64)
    mx, my = x.mean(axis=0), y.mean(axis=0)
    gram, xty = (x - mx).T @ (x - mx), (x - mx).T @ (y - my)
    scale = float(np.trace(gram)) / min(x.shape)
    xv, yv = text[val].astype(np.float64) - mx, image[val].astype(np.float64)
    best: tuple[float, np.ndarray, float] | None = None
    for a in ALPHAS:
        w = np.linalg.solve(gram + a * scale * np.eye(len(gram)), xty)
        mse = float(np.mean((xv @ w + my - yv) ** 2))
        if best is None or mse < best[0]:
            best = (mse, w, a)
    assert best is not None
    _, w, a = best
    return w, my - mx @ w, a


def usable(split: ObjectSplit) -> bool:
    """Whether a split has scenes to fit, choose the strength and score on (as ours requires)."""
    return len(split.test_only) >= 2 and len(split.validation) > 0 and len(split.train_only) >= 2


def loop_bridge_split(
    scenes: SceneSet,
    image: np.ndarray,
    text: np.ndarray,
    noun: int,
    split: ObjectSplit,
    sample: int,
    queries: int | None = None,
) -> tuple[float, float]:
    """One split by the loop: the ridge fit, then swaps and retrieval on test_only, raw and bridged.

    Returns the seconds (extrapolated to every test_only scene) and the chosen strength.
    """
    test = split.test_only
    start = time.perf_counter()
    w, b, alpha = loop_ridge(text, image, split.train_only, split.validation)
    bridged = (text[test].astype(np.float64) @ w + b).astype(np.float32)
    seconds = time.perf_counter() - start
    rows = np.random.default_rng(split.seed).choice(len(test), min(sample, len(test)), replace=False)
    variants = [text[test], bridged] if image.shape[1] == text.shape[1] else [bridged]
    for mapped in variants:
        run = run_loop(scenes.subset(test), image[test], mapped, noun, rows, queries)
        seconds += run.swaps + run.retrieval
    return seconds, alpha


def loop_bridge(
    scenes: SceneSet, image: np.ndarray, text: np.ndarray, noun: int, settings: CrossmodalSettings, sample: int
) -> tuple[float, dict[float, float]]:
    """Every split of the first seed by the loop, extrapolated to all seeds; the strength per fraction."""
    seeds = tuple(settings.seeds)
    validation = getattr(settings, "validation_fraction", 0.1)
    seconds, alphas = 0.0, {}
    for split in object_splits(scenes, list(settings.fractions), seeds[0], order="covering"):
        split = split.with_validation(scenes, validation)
        if usable(split):
            spent, alphas[split.fraction] = loop_bridge_split(
                scenes, image, text, noun, split, sample, settings.retrieval_queries
            )
            seconds += spent
    return seconds * len(seeds), alphas


# -- agreement ----------------------------------------------------------------------------------
def ours_cosines(
    result: Any, image: np.ndarray, text: np.ndarray, scenes: SceneSet, noun: str, rows: np.ndarray
) -> np.ndarray | None:
    """Ours' swap cosines of ``rows`` (:data:`SWAP_KEYS`): from its case table if it made one, else
    recomputed with ``swap_cases`` / ``swap_scores``; None (and a note) where neither is available."""
    cases = result.tables.get("cases") if hasattr(result, "tables") else None
    if isinstance(cases, pd.DataFrame) and {"scene", *(f"cos_{k}" for k in SWAP_KEYS)} <= set(cases.columns):
        raw = cases[cases["variant"] == "raw"] if "variant" in cases.columns else cases
        raw = raw[raw["fraction"].isna()] if "fraction" in raw.columns else raw
        return raw.set_index("scene").loc[rows, [f"cos_{k}" for k in SWAP_KEYS]].to_numpy(np.float64)
    try:
        from bindscope.analyses.crossmodal.swaps import swap_cases, swap_scores

        found = swap_cases(scenes, noun)
        scores = swap_scores(image, text, found)
    except (ImportError, TypeError, AttributeError) as exc:
        print(f"  note: ours' swap cosines are not available ({exc}); swap agreement not checked")
        return None
    out = np.full((len(rows), len(SWAP_KEYS)), np.nan)
    pos = np.minimum(np.searchsorted(found.scene, rows), len(found.scene) - 1)
    hit = found.scene[pos] == rows
    out[hit] = np.stack([scores[k][pos[hit]] for k in SWAP_KEYS], axis=1)
    return out


def ours_top1(image: np.ndarray, text: np.ndarray, scenes: SceneSet, rows: np.ndarray) -> np.ndarray | None:
    """Ours' best caption of each image and best image of each caption in ``rows`` (``retrieve``), ``[n, 2]``."""
    try:
        from bindscope.analyses.crossmodal.retrieval import retrieve

        ranked = retrieve(image, text, scenes, queries=rows)
    except (ImportError, TypeError, AttributeError) as exc:
        print(f"  note: ours' retrieval is not available ({exc}); retrieval agreement not checked")
        return None
    return np.stack([ranked[d].top for d in ("image_to_text", "text_to_image")], axis=1).astype(np.int64)


def ours_alphas(
    result: Any, scenes: SceneSet, image: np.ndarray, text: np.ndarray, settings: CrossmodalSettings
) -> dict[float, float] | None:
    """Ours' ridge strength per fraction on the first seed: from its bridge table if it made one, else
    refitted with ``fit_bridge``; None (and a note) where neither is available."""
    seed = tuple(settings.seeds)[0]
    table = result.tables.get("bridge") if hasattr(result, "tables") else None
    if isinstance(table, pd.DataFrame) and {"seed", "fraction", "alpha"} <= set(table.columns):
        mine = table[(table["seed"] == seed) & table["alpha"].notna()]
        return {float(f): float(a) for f, a in zip(mine["fraction"], mine["alpha"])}
    try:
        from bindscope.analyses.crossmodal.bridge import fit_bridge

        out = {}
        for split in object_splits(scenes, list(settings.fractions), seed, order="covering"):
            split = split.with_validation(scenes, getattr(settings, "validation_fraction", 0.1))
            if usable(split):
                out[split.fraction] = float(fit_bridge(text, image, split.train_only, split.validation).alpha)
    except (ImportError, TypeError, AttributeError) as exc:
        print(f"  note: ours' bridge strengths are not available ({exc}); bridge agreement not checked")
        return None
    return out


def agreement_line(
    loop: LoopRun, cosines: np.ndarray | None, top1: np.ndarray | None, alphas: tuple[dict, dict | None]
) -> str:
    """``agreement on ...``: swap cosines (scenes with two distinct objects), top-1 both ways, strengths."""
    n, parts = len(loop.top1), []
    if cosines is not None:
        tested = ~np.isnan(loop.cosines[:, 0])
        same = np.isclose(loop.cosines, cosines, rtol=0, atol=1e-9, equal_nan=True).all(axis=1)
        parts.append(f"swap cosines {int(same[tested].sum())}/{int(tested.sum())}")
    if top1 is not None:
        hits = (loop.top1 == top1).sum(axis=0)
        parts.append(f"top-1 image->text {int(hits[0])}/{n}, text->image {int(hits[1])}/{n}")
    mine, ours = alphas
    if ours is not None:
        same_alpha = sum(np.isclose(a, ours.get(f, np.nan)) for f, a in mine.items())
        parts.append(f"ridge strength {same_alpha}/{len(mine)} splits (first seed)")
    return f"  agreement on {n:,} sampled scenes: " + ("; ".join(parts) or "nothing to compare")


def ours_line(result: Any) -> str:
    """Ours' main numbers: raw on all scenes, bridged on test_only (mean over splits)."""
    t = result.table
    parts = []
    for variant, group in (("raw", "all"), ("bridged", "test_only")):
        rows = t[(t["variant"] == variant) & (t["group"] == group)]
        means = rows.groupby("metric")["value"].mean()
        metrics = [m for m in ("swap_attribute", "swap_noun", "image_to_text_strict@1") if m in means.index]
        parts.append(f"{variant} ({group}): " + ", ".join(f"{m} {100 * means[m]:.1f}%" for m in metrics))
    return "  ours: " + "; ".join(parts)


# -- half-truths: the dense algorithm ---------------------------------------------------------------
def eligible_images(scenes: SceneSet) -> np.ndarray:
    """The rows of the scenes of two different objects: the images half-truths score."""
    ids = scenes.object_ids()
    return np.flatnonzero((scenes.num_objects() == 2) & (ids[:, 0] != ids[:, 1]))


def timed(run: Any, repeats: int = 1) -> tuple[float, Any]:
    """Seconds of the fastest of ``repeats`` runs, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def sampled(rows: np.ndarray, share: float) -> np.ndarray:
    """A seeded sample of ``share`` of ``rows`` (all of them for a share of 1)."""
    if share >= 1:
        return rows
    return np.sort(np.random.default_rng(0).choice(rows, max(1, int(len(rows) * share)), replace=False))


def bench_half_truths(size: str, noise: float, cube_limit: int, pair_limit: int) -> list[Measurement]:
    """Ours against the dense algorithm on one size: the pairs, then the rates."""
    scenes, attribute, noun = all_scenes(size)
    scenes = scenes.subset(scenes.full())
    image, text = planted(scenes, noise)
    singles = np.random.default_rng(5).normal(size=(scenes.space.num_objects, DIM)).astype(np.float32)
    images = eligible_images(scenes)
    u = scenes.space.num_objects
    print(f"\nhalf-truths, {size}: {len(images):,} images x {u:,} objects, width {DIM}")

    repeats = 1 if len(images) * u > cube_limit else 3  # best of 3 where a run is short
    t_ours, pairs = timed(lambda: half_truth_pairs(scenes, attribute, noun), repeats)
    rows = sampled(images, min(1.0, cube_limit / (len(images) * u)))
    t_dense, dense = timed(lambda: dense_half_truth_pairs(scenes, attribute, noun, rows), repeats)
    t_dense *= len(images) / len(rows)
    mine = {k: (np.isin(img, rows), img, longer) for k, (img, longer) in pairs.items()}
    same = all(
        np.array_equal(img[keep], dense[k][0]) and np.array_equal(longer[keep], dense[k][1])
        for k, (keep, img, longer) in mine.items()
    )
    total = sum(len(img) for img, _ in pairs.values())
    note = "" if len(rows) == len(images) else f", timed on {len(rows):,} of the {len(images):,} images and scaled"
    print(f"  pairs: ours {t_ours:8.2f} s, dense {t_dense:8.2f} s{note}; {total:,} pairs; same pairs: {same}")
    out = [
        Measurement(
            f"half-truth pairs, {size}: {len(images):,} images x {u:,} objects ({total:,} pairs)",
            f"crossmodal.halftruth.half_truth_pairs (blocks, memory linear in the scenes), best of {repeats}",
            f"the dense images x objects x slots x concepts comparison (before issue 57){note}, best of {repeats}",
            "s",
            t_ours,
            t_dense,
            checks=f"the same pairs, in the same order, on {'the sampled' if note else 'every'} image: {same}",
        )
    ]
    t_ours, rates = timed(lambda: half_truth_rates(image, text, singles, scenes, attribute, noun), repeats)
    rows = sampled(images, min(1.0, pair_limit / max(total, 1)))
    t_dense, dense_rate = timed(
        lambda: dense_half_truth_rates(image, text, singles, scenes, attribute, noun, rows), repeats
    )
    t_dense *= len(images) / len(rows)
    whole = len(rows) == len(images)
    agree = all(rates[k]["pooled"] == dense_rate[k] for k in dense_rate) if whole else None
    note = "" if whole else f", timed on {len(rows):,} of the {len(images):,} images and scaled"
    print(f"  rates: ours {t_ours:8.2f} s, dense {t_dense:8.2f} s{note}; same pooled rates: {agree}")
    out.append(
        Measurement(
            f"half-truth rates, {size}: {len(images):,} images x {u:,} objects ({total:,} pairs) x {DIM}",
            f"crossmodal.halftruth.half_truth_rates (blocks; one matrix product per first object), best of {repeats}",
            f"the dense pairs, each pair's cosines one by one (row_cosines; before issue 57){note}, best of {repeats}",
            "s",
            t_ours,
            t_dense,
            checks="the same pooled rates and pair counts: "
            + (str(agree) if whole else "not compared (the dense algorithm ran on a sample)"),
        )
    )
    return out


# -- the benchmark ------------------------------------------------------------------------------
def bench(size: str, sample: int, noise: float, max_scenes: int | None, queries: int | None) -> Measurement:
    """Time ours and the loop on one scene set, print the table and the agreement; the measurement."""
    scenes = scenes_for(size, max_scenes)
    noun = all_scenes(size)[2]
    image, text = planted(scenes, noise)
    settings = ours_settings(queries)
    splits = len(settings.fractions) * len(settings.seeds)
    print(
        f"\n{size}: {len(scenes):,} scenes, width {DIM}, {splits} bridge splits "
        f"({len(settings.fractions)} fractions x {len(settings.seeds)} seeds)"
        + ("" if queries is None else f"; retrieval from {queries:,} queries per scoring (both sides)")
    )

    start = time.perf_counter()
    result = crossmodal_analysis(AnalysisInputs(image, scenes, other=text, noun=noun), settings)
    t_ours = time.perf_counter() - start
    print(f"  ours              {t_ours:9.1f} s")

    n = min(sample, len(scenes))
    rows = np.sort(np.random.default_rng(0).choice(len(scenes), n, replace=False))
    noun_index = scenes.space.concept_index(noun)
    loop = run_loop(scenes, image, text, noun_index, rows, queries)
    t_bridge, alphas = loop_bridge(scenes, image, text, noun_index, settings, sample)
    total = loop.swaps + loop.retrieval + t_bridge
    note = "" if n == len(scenes) else f", timed on {n:,} scenes and extrapolated"
    print(f"  per-scene loop{note}:")
    print(f"    swap tests      {loop.swaps:9.1f} s")
    print(f"    retrieval       {loop.retrieval:9.1f} s")
    print(
        f"    bridge          {t_bridge:9.1f} s   ({len(ALPHAS)} ridge strengths + swaps and retrieval on "
        f"test_only; the first seed's splits timed, x{len(settings.seeds)})"
    )
    print(f"    total           {total:9.1f} s   ratio loop / ours = {total / t_ours:6.1f}x")
    cosines = ours_cosines(result, image, text, scenes, noun, rows)
    top1 = ours_top1(image, text, scenes, rows)
    agreement = agreement_line(loop, cosines, top1, (alphas, ours_alphas(result, scenes, image, text, settings)))
    print(agreement)
    print(f"  loop on the sample: image_to_text_strict@1 {100 * loop.strict1.mean():.1f}%")
    print(ours_line(result))
    retrieval = "" if queries is None else f", retrieval from {queries:,} queries per scoring"
    return Measurement(
        f"{size}: {len(scenes):,} scenes x {DIM}, {splits} bridge splits{retrieval}",
        "crossmodal_analysis (swaps, retrieval, ridge bridge)",
        f"per-scene loop (swaps, retrieval, ridge bridge){note}; "
        f"bridge timed on the first seed, x{len(settings.seeds)}",
        "s",
        t_ours,
        total,
        checks=agreement.strip(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--sample", type=int, default=200, help="scenes (per split) timed in the loop")
    parser.add_argument("--noise", type=float, default=0.6, help="image noise, relative to an object vector")
    parser.add_argument("--max-scenes", type=int, default=None, help="score a seeded subsample of the scenes")
    parser.add_argument(
        "--retrieval-queries",
        type=int,
        default=None,
        help="retrieval from this many queries per scoring (ours and loop)",
    )
    parser.add_argument(
        "--text-queries", type=int, default=2048, help="retrieval queries per scoring at the text size (2,048)"
    )
    parser.add_argument(
        "--cube-limit", type=int, default=20_000_000, help="images x objects the dense pairs run on at most"
    )
    parser.add_argument("--pair-limit", type=int, default=200_000, help="pairs the dense rates score at most")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not sizes or set(sizes) - set(SIZES) or not parts or set(parts) - set(PARTS):
        parser.error(f"--sizes: of {', '.join(SIZES)}; --parts: of {', '.join(PARTS)}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    measured = []
    for size in sizes:
        if "analysis" in parts:
            queries = args.retrieval_queries or (args.text_queries if size == "text" else None)
            measured.append(bench(size, args.sample, args.noise, args.max_scenes, queries))
        if "half-truths" in parts:
            measured += bench_half_truths(size, args.noise, args.cube_limit, args.pair_limit)
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
