"""Benchmark a second run's embeddings from the shared cache against embedding them again (issue 55).

What is timed
-------------
ours
    :func:`bindscope.embeddings.embed.embed_dataset` into a new folder whose embeddings the cache holds:
    the model is loaded (the content key needs its identity), the key computed, the cached array checked
    (size, shape, sha256 of its values) and hard-linked into the new folder with a fresh manifest.
baseline
    the same call with the cache off (``cache=None``): the model is loaded and every row embedded again,
    what a second run folder did before the cache.

Both write a folder ``bindscope.embeddings.load_embeddings`` reads back; the script checks that the two
arrays are equal to the bit and that the cached folder's array shares the first folder's inode (nothing
copied). Data: the real all-MiniLM-L6-v2 (the embedded default) on ``--texts`` captions of the text preset
(a covering subsample) and on the clevr captions (576). Each side runs ``--repeats`` times (new folders
each time) and the best time counts.

Run it from the repository root::

    .venv/bin/python benchmarks/bench_embedding_cache.py [--texts 20000] [--repeats 2] [--csv PATH]

The figures go to ``benchmarks/results/bench_embedding_cache.csv`` (or ``--csv``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from record import Measurement, add_csv_argument, write_results

from bindscope.data.datasets import build_dataset
from bindscope.data.presets import load_preset, preset_from_dict
from bindscope.embeddings.cache import EmbeddingCache
from bindscope.embeddings.embed import embed_dataset
from bindscope.embeddings.store import load_embeddings

MODEL = "st:all-MiniLM-L6-v2"


def timed(repeats: int, run) -> tuple[float, object]:
    best, last = float("inf"), None
    for i in range(repeats):
        start = time.perf_counter()
        last = run(i)
        best = min(best, time.perf_counter() - start)
    return best, last


def dataset(work: Path, preset: str, texts: int | None) -> Path:
    chosen = load_preset(preset)
    if texts is not None:
        data = chosen.to_dict()
        data["scenes"] = {**data["scenes"], "max_scenes": texts, "subsample_seed": 0}
        chosen = preset_from_dict(data, origin="benchmark")
    folder = work / f"data-{preset}"
    build_dataset(chosen, folder, images=False)
    return folder


def bench(work: Path, data: Path, label: str, repeats: int) -> Measurement:
    cache = EmbeddingCache(work / f"cache-{label}")
    first = embed_dataset(data, MODEL, modality="text", out=work / f"{label}-first", cache=cache)
    ours, hit = timed(
        repeats, lambda i: embed_dataset(data, MODEL, modality="text", out=work / f"{label}-hit{i}", cache=cache)
    )
    base, again = timed(
        repeats, lambda i: embed_dataset(data, MODEL, modality="text", out=work / f"{label}-again{i}", cache=None)
    )
    same = np.array_equal(load_embeddings(hit.embeddings.root).array, load_embeddings(again.embeddings.root).array)
    linked = (
        os.stat(hit.embeddings.root / "embeddings.npy").st_ino
        == os.stat(first.embeddings.root / "embeddings.npy").st_ino
    )
    if hit.status != "cached" or not same or not linked:
        raise SystemExit(f"{label}: status {hit.status}, equal {same}, linked {linked}")
    rows = hit.embeddings.array.shape[0]
    print(f"{label}: {rows} rows, cached {ours:.2f} s, embedded again {base:.2f} s, {base / ours:.1f}x")
    return Measurement(
        case=f"{label} captions ({rows} x 384), {MODEL}",
        ours="embed_dataset, a cache hit (model loaded, array checked and hard-linked)",
        baseline="embed_dataset with the cache off (every row embedded again)",
        unit="s",
        ours_value=ours,
        baseline_value=base,
        checks="arrays equal to the bit; the hit shares the first folder's inode",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=20000, help="captions of the text preset (a covering subsample)")
    parser.add_argument("--repeats", type=int, default=2)
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        work = Path(tmp)
        rows = [
            bench(work, dataset(work, "clevr", None), "clevr", args.repeats),
            bench(work, dataset(work, "text", args.texts), "text", args.repeats),
        ]
    write_results(__file__, rows, args.csv)


if __name__ == "__main__":
    main()
