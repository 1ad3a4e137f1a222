"""Benchmark cross-modal retrieval with the swap tests' tie rule against plain ``torch.topk`` retrieval at equal work.

What is timed
-------------
ours
    :func:`bindscope.analyses.crossmodal.retrieval.retrieve`: image -> text and text -> image, each query ranked
    against every caption (image) in float32 blocks of bounded memory, top-1 and top-5, strict and concept-level
    hits, ties counted by the swap tests' rule (near ties judged on float64 cosines; docs/method/07-crossmodal.md).
    Threads: ``bindscope.core.threads``.
baseline
    the same work written plainly: per direction, the queries' float32 cosines with every key in chunks of 1,024
    queries, ``torch.topk`` of 5, and a strict (concept-level) top-1 / top-5 hit where the first (any of the five)
    keys is the query's own scene or its other order (has the query's bag of concepts); index order breaks ties.
    Both sides build the hit tables (``bag_keys``, ``same_objects``) inside the timing.
the tie rule written plainly
    where plain top-k is faster than ours (small tie-heavy cases: the tie rule must score the near-tied queries
    again in float64, and top-k with index order scores nothing again), the case is also timed against the same
    rule written plainly, bindscope's before issue 57: ``torch.topk`` of 6 on float32 rows of 1,024 queries, the
    near-tied queries scored again over every key in float64. It is the baseline of equal output: its mean credits
    must equal ours, every bit.

Sizes (``--sizes``): ``clevr`` (its 576 scenes), ``10k`` (a 10 x 10 space: every ordered pair of its 100 objects,
10,000 scenes) and ``text`` (20 x 20: its 160,000 2-object scenes). All pairs is N^2 work: at ``text`` size both
sides rank ``--queries`` seeded queries (default 2,048) per direction against all 160,000 keys, as
``crossmodal --retrieval-queries`` does; smaller sizes rank every scene.

Data, ``--dim`` wide (512), two kinds per size: ``noisy copy``, images the sum of the scene's object vectors plus
noise and captions a noisy copy of them (few ties); ``bag of concepts``, captions the sum of the scene's concept
value vectors and images the same plus noise: a binding swap's caption equals the correct one, so every strict
hit ties with the swap captions (the tie rule counts the share; index order picks one).

Run it from the repository root::

    .venv/bin/python benchmarks/bench_retrieval_ties.py [--sizes clevr,10k,text] [--queries 2048] [--dim 512]
        [--repeats 3] [--csv PATH]

The figures go to ``benchmarks/results/bench_retrieval_ties.csv`` (or ``--csv``): per size and kind, ours
against the baseline (best of ``--repeats``), speed-up = baseline / ours.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.crossmodal.retrieval import HitKeys, bag_keys, retrieve, same_objects
from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE
from bindscope.analyses.crossmodal.ties import SPANS, WIDE, tie_credit
from bindscope.data.presets import get_preset
from bindscope.space.concepts import ConceptSpace, SceneSet

SIZES = ("clevr", "10k", "text")
DIRECTIONS = ("image_to_text", "text_to_image")
#: Queries per chunk of the baseline.
BASELINE_CHUNK = 1024


def scenes_for(size: str) -> SceneSet:
    """The 2-object scenes of a size: a preset's, or every ordered pair of a 10 x 10 space's objects."""
    if size == "10k":
        values = {"attribute": [f"a{i}" for i in range(10)], "noun": [f"n{i}" for i in range(10)]}
        space = ConceptSpace.from_dict(values)
        scenes = SceneSet.enumerate(space, 2)
    else:
        scenes = get_preset(size).build_scenes()
    return scenes.subset(scenes.full())


def embeddings(scenes: SceneSet, dim: int) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Per kind, its name, images and captions ``[N, dim]`` float32 (one kind in memory at a time)."""
    rng = np.random.default_rng(1)
    objects = rng.normal(size=(scenes.space.num_objects, dim)).astype(np.float32)
    image = objects[scenes.object_ids()].sum(1) + 0.1 * rng.standard_normal((len(scenes), dim), dtype=np.float32)
    yield "noisy copy", image, image + 0.3 * rng.standard_normal(image.shape, dtype=np.float32)
    del image
    values = [rng.normal(size=(size, dim)).astype(np.float32) for size in scenes.space.sizes]
    bag = sum(values[c][scenes.scenes[:, :, c]].sum(1) for c in range(scenes.space.num_concepts))
    yield "bag of concepts", bag + 0.1 * rng.standard_normal(bag.shape, dtype=np.float32), bag


def plain_topk(image: np.ndarray, text: np.ndarray, scenes: SceneSet, rows: np.ndarray) -> dict[str, float]:
    """The baseline: per direction, ``torch.topk`` of 5 over float32 cosines in chunks; strict and concept-level
    top-1 / top-5 accuracy with index order on ties."""
    other, bags = same_objects(scenes), bag_keys(scenes)
    out = {}
    for direction, queries, keys in zip(DIRECTIONS, (image, text), (text, image)):
        x = torch.nn.functional.normalize(torch.from_numpy(queries[rows]), dim=1)
        y = torch.nn.functional.normalize(torch.from_numpy(keys), dim=1)
        hits = np.zeros(4)
        for start in range(0, len(x), BASELINE_CHUNK):
            top = torch.topk(x[start : start + BASELINE_CHUNK] @ y.T, 5, dim=1).indices.numpy()
            asked = rows[start : start + len(top)]
            strict = (top == asked[:, None]) | (top == other[asked][:, None])
            concept = bags[top] == bags[asked][:, None]
            hits += [strict[:, 0].sum(), strict.any(1).sum(), concept[:, 0].sum(), concept.any(1).sum()]
        for name, value in zip(("strict@1", "strict@5", "concept@1", "concept@5"), hits / len(rows)):
            out[f"{direction}_{name}"] = float(value)
    return out


def around_best(
    scores: torch.Tensor, hits: torch.Tensor, top: torch.Tensor, tolerance: float
) -> tuple[torch.Tensor, ...]:
    """Per row, around its best hit: the keys above it, the keys tied with it and the hits among those; on the top
    scores ``top``, or the whole row where the tied keys run past them."""
    best = hits.amax(dim=1, keepdim=True)
    above = (top - best > tolerance).sum(1)
    tied = (best - top <= tolerance).sum(1) - above
    deeper = torch.nonzero((best[:, 0] - top[:, -1] <= tolerance) & (above < 5)).ravel()
    above[deeper] = (scores[deeper] - best[deeper] > tolerance).sum(1)
    tied[deeper] = (best[deeper] - scores[deeper] <= tolerance).sum(1) - above[deeper]
    return above, tied, (best - hits <= tolerance).sum(1)


def plain_tie_rule(image: np.ndarray, text: np.ndarray, scenes: SceneSet, rows: np.ndarray) -> dict[str, float]:
    """The tie rule written plainly (bindscope before issue 57): per direction, the float32 cosines of 1,024 queries
    with every key, ``torch.topk`` of 6, the keys around each best hit counted within the tolerance widened by the
    float32 slack; a query with another key that near its best hit scored again over every key in float64."""
    other, bags = same_objects(scenes), bag_keys(scenes)
    near_other = np.where(other[rows] == rows, -1, other[rows])
    table = HitKeys.of(np.stack([rows, near_other], axis=1), bags[rows], bags)
    cols = table.columns()
    out = {}
    for direction, queries, keys in zip(DIRECTIONS, (image, text), (text, image)):
        x, y = (torch.nn.functional.normalize(torch.from_numpy(a), dim=1) for a in (queries[rows], keys))
        y64 = torch.nn.functional.normalize(torch.from_numpy(keys).double(), dim=1)
        credit: dict[str, list[torch.Tensor]] = {}
        for start in range(0, len(x), BASELINE_CHUNK):
            c = cols[start : start + BASELINE_CHUNK]
            scores = x[start : start + BASELINE_CHUNK] @ y.T
            found = {}
            for kind, span in SPANS.items():
                hits = scores.gather(1, c[:, span].clamp(min=0)).masked_fill(c[:, span] < 0, float("-inf"))
                found[kind] = around_best(scores, hits, scores.topk(6, dim=1).values, WIDE)
            near = torch.nonzero(sum(tied > hit for _, tied, hit in found.values())).ravel()
            if len(near):
                exact = (
                    torch.nn.functional.normalize(torch.from_numpy(queries[rows][start + near.numpy()]).double(), dim=1)
                    @ y64.T
                )
                for kind, span in SPANS.items():
                    hits = exact.gather(1, c[near][:, span].clamp(min=0)).masked_fill(
                        c[near][:, span] < 0, float("-inf")
                    )
                    again = around_best(exact, hits, exact.topk(6, dim=1).values, TIE_TOLERANCE)
                    for whole, part in zip(found[kind], again):
                        whole[near] = part
            for kind, (above, tied, hit) in found.items():
                for k in (1, 5):
                    credit.setdefault(f"{direction}_{kind}@{k}", []).append(tie_credit(above, tied, hit, k))
        out |= {m: float(torch.cat(v).mean()) for m, v in credit.items()}
    return out


def ours(image: np.ndarray, text: np.ndarray, scenes: SceneSet, rows: np.ndarray | None) -> dict[str, float]:
    """:func:`retrieve`'s mean credits."""
    ranked = retrieve(image, text, scenes, queries=rows)
    return {f"{d}_{m}": float(np.mean(c)) for d, r in ranked.items() for m, c in r.credit.items()}


def best_of(repeats: int, run: Callable[[], dict[str, float]]) -> tuple[float, dict[str, float]]:
    """The fastest of ``repeats`` runs (seconds) and the last result."""
    times, out = [], {}
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


def bench(size: str, dim: int, queries: int, repeats: int) -> list[Measurement]:
    """Ours against the baseline on both kinds of one size."""
    scenes = scenes_for(size)
    n = len(scenes)
    sampled = size == "text" and queries < n
    rows = np.sort(np.random.default_rng(0).choice(n, queries, replace=False)) if sampled else np.arange(n)
    work = f"{len(rows):,} sampled queries per direction x {n:,} keys" if sampled else f"all {n:,} x {n:,} pairs"
    print(f"\n{size}: {n:,} scenes x {dim}, {work}, {torch.get_num_threads()} threads, best of {repeats}")
    print(f"{'captions':<18}{'ours s':>9}{'topk s':>9}{'speed-up':>10}{'ours strict@1':>15}{'topk strict@1':>15}")
    measured = []
    asked = rows if sampled else None
    for kind, image, text in embeddings(scenes, dim):
        ours_s, mine = best_of(repeats, partial(ours, image, text, scenes, asked))
        base_s, base = best_of(repeats, partial(plain_topk, image, text, scenes, rows))
        a, b = mine["image_to_text_strict@1"], base["image_to_text_strict@1"]
        concept = max(abs(mine[f"{d}_concept@5"] - base[f"{d}_concept@5"]) for d in DIRECTIONS)
        print(f"{kind:<18}{ours_s:>9.3f}{base_s:>9.3f}{base_s / ours_s:>9.2f}x{a:>15.3f}{b:>15.3f}")
        measured.append(
            Measurement(
                f"{size}: {kind} captions, {n:,} scenes x {dim}, {work}",
                f"crossmodal.retrieval.retrieve (tie rule, both directions, top-1 and top-5), best of {repeats}",
                f"torch.topk of 5 in chunks of {BASELINE_CHUNK:,}, both directions, index order on ties, "
                f"best of {repeats}",
                "s",
                ours_s,
                base_s,
                checks=f"image -> text strict@1: ours {a:.3f} (ties counted by chance), topk {b:.3f}; "
                f"concept@5 differs by at most {concept:.3f}",
            )
        )
        if base_s < ours_s:
            measured.append(
                tie_rule_case(
                    f"{size}: {kind} captions, {n:,} scenes x {dim}, {work}",
                    mine,
                    repeats,
                    partial(plain_tie_rule, image, text, scenes, rows),
                    ours_s,
                )
            )
    return measured


def tie_rule_case(
    case: str, mine: dict[str, float], repeats: int, run: Callable[[], dict[str, float]], ours_s: float
) -> Measurement:
    """Where plain top-k beats ours: ours against the tie rule written plainly, the baseline of equal output."""
    base_s, base = best_of(repeats, run)
    same = all(mine[m] == base[m] for m in base)
    print(f"{'  tie rule, plain':<18}{ours_s:>9.3f}{base_s:>9.3f}{base_s / ours_s:>9.2f}x   the same credits: {same}")
    return Measurement(
        f"{case}, against the tie rule written plainly",
        "crossmodal.retrieval.retrieve (tie rule, both directions, top-1 and top-5)",
        "the tie rule written plainly: torch.topk of 6 on float32 rows of 1,024 queries, near-tied queries scored "
        f"again over every key in float64 (bindscope before issue 57), best of {repeats}",
        "s",
        ours_s,
        base_s,
        checks=f"the same mean credits, every bit: {same}; plain torch.topk is faster here because it breaks ties by "
        "index and scores nothing again in float64, which the tie rule must on these tied captions",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--queries", type=int, default=2048, help="queries per direction at the text size")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown or not sizes:
        parser.error(f"--sizes: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(SIZES)}")
    measured = [m for size in sizes for m in bench(size, args.dim, args.queries, args.repeats)]
    print(f"\nwrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
