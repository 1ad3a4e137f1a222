"""Benchmark ``bindscope embed``'s overhead against the bare model forward pass (issue 5).

What is timed
-------------
ours
    ``bindscope.embeddings.embed.embed_dataset`` end to end with the encoder already loaded: reading and
    validating the dataset folder, hashing the image files (content key), loading and
    preprocessing every batch, the forward pass, saving each chunk atomically, assembling and
    writing the embedding folder.
bare (the target's baseline)
    The library's own model called directly on the same batches, already loaded and
    preprocessed before the clock starts: ``CLIPModel.get_image_features(pixel_values=...)`` for
    images and the ``SentenceTransformer`` module stack (``model(features)``) for texts, under
    ``torch.inference_mode()``. Nothing but the forward pass is timed.
loop (a second baseline: what a user writes by hand)
    Images: for each batch, open the PNGs with PIL, the model's image processor, the forward
    pass. Texts: ``SentenceTransformer.encode`` (which also sorts the texts by length).

Throughput is rows per second; ours / bare is the share of the bare speed the whole pipeline
keeps (target >= 0.9), ours / loop the same against the hand-written loop. Each side runs
``--repeats`` times after a warm-up and the best time counts.

Models and data
---------------
* images: a tiny CLIP built from a config with random weights (``tests/tiny_models.py``; width
  32, 3 vision layers, 32 px input) on clevr scenes drawn at ``--image-size`` pixels, and a small
  CLIP (width 256, 4 layers, patch 32, 224 px input) on scenes drawn at 224 px, where the forward
  pass is a more realistic share of the work;
* texts: the real all-MiniLM-L6-v2 (the embedded default) on ``--texts`` captions sampled from
  the text preset's space.

Run: ``.venv/bin/python benchmarks/bench_embed.py [--texts 20000] [--repeats 2] [--parts tiny,small,text] [--csv PATH]``

The figures go to ``benchmarks/results/bench_embed.csv`` (or ``--csv``): per part, ours against the bare
forward pass (the target: a speed-up of at least 0.9, i.e. at most 10% overhead) and against the loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from record import Measurement, add_csv_argument, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "helpers")]  # conftest's image drawer, the tiny models

from conftest import draw_scene_images  # noqa: E402

from bindscope.data.datasets import build_dataset, load_dataset  # noqa: E402
from bindscope.embeddings.embed import embed_dataset, load_image  # noqa: E402
from bindscope.embeddings.encoders import load_encoder  # noqa: E402
from tiny_models import save_tiny_clip  # noqa: E402


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_images(work: Path, model_dir: Path, label: str, image_size: int, batch: int, repeats: int) -> dict:
    from transformers import AutoImageProcessor, CLIPModel

    ds_dir = work / f"clevr-{image_size}"
    if not ds_dir.exists():
        build_dataset("clevr", ds_dir)
        draw_scene_images(ds_dir, size=image_size)
    ds = load_dataset(ds_dir)
    encoder = load_encoder(f"hf:{model_dir}")
    model = CLIPModel.from_pretrained(model_dir).eval()
    processor = AutoImageProcessor.from_pretrained(model_dir)
    images = [load_image(str(ds.root / p)) for p in ds.images]
    batches = [
        processor(images=images[i : i + batch], return_tensors="pt")["pixel_values"]
        for i in range(0, len(images), batch)
    ]

    paths = [str(ds.root / p) for p in ds.images]

    def bare() -> None:
        with torch.inference_mode():
            for pixels in batches:
                model.get_image_features(pixel_values=pixels)

    def loop() -> None:
        with torch.inference_mode():
            for i in range(0, len(paths), batch):
                pixels = processor(images=[load_image(p) for p in paths[i : i + batch]], return_tensors="pt")
                model.get_image_features(pixel_values=pixels["pixel_values"])

    def ours() -> None:
        out = work / "emb-images"
        shutil.rmtree(out, ignore_errors=True)
        embed_dataset(ds, encoder, modality="image", out=out, batch_size=batch)

    for warm in (bare, loop, ours):
        warm()
    return _row(label, len(images), best_of(repeats, ours), best_of(repeats, bare), best_of(repeats, loop))


def bench_texts(work: Path, n: int, batch: int, repeats: int) -> dict:
    preset = work / "texts.yaml"
    preset.write_text(
        "name: bench-text\nconcepts:\n"
        "  attribute: [red, blue, green, yellow, purple, orange, pink, brown, gray, black, small, large, tiny, round, "
        "sharp, rough, bumpy, smooth, matte, glossy]\n"
        "  noun: [circle, square, triangle, star, heart, spiral, sphere, cylinder, cone, pyramid, car, cat, dog, man, "
        "woman, tree, flower, rock, bird, fish]\n"
        f"objects_per_scene: 2\nscenes:\n  mode: sample\n  num_scenes: {n}\n  seed: 0\nnoun: noun\nmodalities: [text]\n"
    )
    ds = build_dataset(preset, work / "texts", overwrite=True)
    encoder = load_encoder("st:all-MiniLM-L6-v2")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(encoder.describe()["resolved"]), device="cpu").eval()
    captions = list(ds.captions)
    features = [model.preprocess(captions[i : i + batch]) for i in range(0, len(captions), batch)]

    def bare() -> None:
        with torch.inference_mode():
            for f in features:
                model(dict(f))["sentence_embedding"]

    def loop() -> None:
        model.encode(captions, batch_size=batch)

    def ours() -> None:
        out = work / "emb-texts"
        shutil.rmtree(out, ignore_errors=True)
        embed_dataset(ds, encoder, modality="text", out=out, batch_size=batch)

    for warm in (bare, loop, ours):
        warm()
    return _row(
        "all-MiniLM-L6-v2, texts", len(captions), best_of(repeats, ours), best_of(repeats, bare), best_of(repeats, loop)
    )


def _row(label: str, rows: int, ours_s: float, bare_s: float, loop_s: float) -> dict:
    return {
        "what": label,
        "rows": rows,
        "ours_s": ours_s,
        "bare_s": bare_s,
        "loop_s": loop_s,
        "ours": rows / ours_s,
        "bare": rows / bare_s,
        "loop": rows / loop_s,
        "ratio": bare_s / ours_s,
        "loop_ratio": loop_s / ours_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=20_000, help="captions to embed with MiniLM")
    parser.add_argument("--image-size", type=int, default=64, help="pixels of the drawn clevr images (tiny CLIP)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--parts", default="tiny,small,text", help="comma list of tiny, small, text")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cpus")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bindscope-bench-embed-") as tmp:
        work = Path(tmp)
        if "tiny" in parts:
            tiny = save_tiny_clip(work / "tiny-clip", image_size=32)
            rows.append(
                bench_images(
                    work, tiny, "tiny CLIP (width 32, 3 layers, 32 px), images", args.image_size, 32, args.repeats
                )
            )
        if "small" in parts:
            small = save_small_clip(work / "small-clip")
            rows.append(
                bench_images(work, small, "small CLIP (width 256, 4 layers, 224 px), images", 224, 32, args.repeats)
            )
        if "text" in parts:
            rows.append(bench_texts(work, args.texts, 256, args.repeats))
    print(
        f"\n{'what':52s} {'rows':>7s} {'ours/s':>9s} {'bare/s':>9s} {'loop/s':>9s} "
        f"{'ours/bare':>10s} {'ours/loop':>10s}"
    )
    for r in rows:
        print(
            f"{r['what']:52s} {r['rows']:7,d} {r['ours']:9,.0f} {r['bare']:9,.0f} {r['loop']:9,.0f} "
            f"{r['ratio']:10.2f} {r['loop_ratio']:10.2f}"
        )
    worst = min(r["ratio"] for r in rows)
    print(f"\nworst ratio {worst:.2f} (target >= 0.9): {'met' if worst >= 0.9 else 'NOT met'}")
    measured = []
    for r in rows:
        case, ours = f"{r['what']}, {r['rows']:,} rows", f"embed_dataset end to end, best of {args.repeats}"
        bare = "the bare forward pass on preloaded, preprocessed batches (torch.inference_mode)"
        loop = (
            "PIL + image processor + forward, batch by batch" if "images" in r["what"] else "SentenceTransformer.encode"
        )
        measured.append(Measurement(case, ours, bare, "rows/s", r["ours"], r["bare"], "0.9x"))
        measured.append(Measurement(case, ours, f"hand-written loop: {loop}", "rows/s", r["ours"], r["loop"]))
    print(f"wrote {write_results(__file__, measured, args.csv)}")


def save_small_clip(path: Path) -> Path:
    """A CLIP with a ViT-B/32-like layout at a third of the width, random weights, saved locally."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    from tiny_models import _text_config, bert_tokenizer

    tokenizer = bert_tokenizer()
    width = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4}
    config = CLIPConfig(
        text_config={**_text_config(tokenizer), **width},
        vision_config={**width, "image_size": 224, "patch_size": 32},
        projection_dim=256,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        CLIPModel(config).save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
