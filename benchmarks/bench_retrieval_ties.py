"""Benchmark cross-modal retrieval with the swap tests' tie rule against plain ``torch.topk`` retrieval.

What is timed
-------------
ours
    :func:`bindscope.analyses.crossmodal.retrieval.retrieve`: image -> text and text -> image, each
    query ranked against every caption (image); a query whose best correct item is within
    ``TIE_TOLERANCE`` of others counts the chance that a random order puts a correct one first (the
    swap tests' rule, docs/method/07-crossmodal.md), near ties judged on float64 cosines.
baseline
    the previous rule: float32 cosines in chunks of 1,024 queries, ``torch.topk`` of 5, a hit when
    the top item is the query's own scene or the same objects named in the other order (ties broken
    by index order).

Data: ``--scenes`` seeded 2-object scenes of the ``text`` space (20 x 20), ``--dim`` wide, two kinds:
images that are object vectors summed over the slots plus noise, with captions a noisy copy of them
(few ties); and an ideal bag of concepts (captions a sum of concept vectors, images the same plus
noise): a binding swap's caption equals the correct one, so the baseline's index order decides what
the tie rule counts as half. Printed per
kind: seconds (best of ``--repeats``), the ratio ours / baseline, and the two strict top-1 image ->
text accuracies.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_retrieval_ties.py [--scenes 6400] [--dim 512] [--repeats 3] [--csv PATH]

The figures go to ``benchmarks/results/bench_retrieval_ties.csv`` (or ``--csv``). Ours does more work than
the baseline (both directions, float64 near ties), so a speed-up below 1 is expected.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

from bindscope.analyses.crossmodal.retrieval import retrieve, same_objects
from bindscope.data.presets import get_preset
from bindscope.space.concepts import SceneSet


def sampled_scenes(num: int) -> SceneSet:
    """``num`` seeded 2-object scenes of the ``text`` space."""
    scenes = get_preset("text").build_scenes()
    rows = scenes.full()
    return scenes.subset(np.sort(np.random.default_rng(0).choice(rows, min(num, len(rows)), replace=False)))


def embeddings(scenes: SceneSet, dim: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, images and captions ``[N, dim]``: object vectors and a noisy copy of them; or a bag of
    concepts (a sum of concept vectors) plus noise and the bag itself, whose binding swaps tie."""
    rng = np.random.default_rng(1)
    objects = rng.normal(size=(scenes.space.num_objects, dim))
    values = [rng.normal(size=(size, dim)) for size in scenes.space.sizes]
    image = objects[scenes.object_ids()].sum(1) + 0.1 * rng.normal(size=(len(scenes), dim))
    bag = sum(values[c][scenes.scenes[:, :, c]].sum(1) for c in range(scenes.space.num_concepts))
    return {
        "noisy copy": (image, image + 0.3 * rng.normal(size=image.shape)),
        "bag of concepts": (bag + 0.1 * rng.normal(size=bag.shape), bag),
    }


def topk_top1(image: np.ndarray, text: np.ndarray, other: np.ndarray) -> float:
    """The previous rule: the share of images whose top caption (index order on ties) is their own or
    names the same objects in the other order (``other``)."""
    x = torch.nn.functional.normalize(torch.from_numpy(image.astype(np.float32)), dim=1)
    y = torch.nn.functional.normalize(torch.from_numpy(text.astype(np.float32)), dim=1)
    hits = 0
    for start in range(0, len(x), 1024):
        top = torch.topk(x[start : start + 1024] @ y.T, 5, dim=1).indices[:, 0].numpy()
        rows = np.arange(start, start + len(top))
        hits += int(((top == rows) | (top == other[rows])).sum())
    return hits / len(x)


def best_of(repeats: int, run: Callable[[], object]) -> tuple[float, object]:
    """The fastest of ``repeats`` runs (seconds) and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenes", type=int, default=6400)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    scenes = sampled_scenes(args.scenes)
    data = embeddings(scenes, args.dim)
    other = same_objects(scenes)
    print(f"{len(scenes):,} scenes x {args.dim}, {torch.get_num_threads()} threads, best of {args.repeats}")
    print(f"{'captions':<18}{'ours s':>9}{'topk s':>9}{'ratio':>8}{'ours top-1':>12}{'topk top-1':>12}")
    measured = []
    for kind, (image, text) in data.items():
        ours_s, ranked = best_of(args.repeats, lambda image=image, text=text: retrieve(image, text, scenes))
        base_s, base = best_of(args.repeats, lambda image=image, text=text: topk_top1(image, text, other))
        ours = float(np.nanmean(ranked["image_to_text"].credit["strict@1"]))  # type: ignore[attr-defined]
        print(f"{kind:<18}{ours_s:>9.2f}{base_s:>9.2f}{ours_s / base_s:>7.2f}x{ours:>12.3f}{base:>12.3f}")
        measured.append(
            Measurement(
                f"{kind} captions, {len(scenes):,} scenes x {args.dim}",
                f"crossmodal.retrieval.retrieve (tie rule, both directions), best of {args.repeats}",
                f"torch.topk image -> text in chunks of 1,024, index order on ties, best of {args.repeats}",
                "s",
                ours_s,
                base_s,
                checks=f"strict top-1 image -> text: ours {ours:.3f} (ties counted by chance), topk {base:.3f}",
            )
        )
    print(f"wrote {write_results(__file__, measured, args.csv)}")


if __name__ == "__main__":
    main()
