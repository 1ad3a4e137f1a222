"""Benchmark ``bindscope embed``'s overhead against the bare model forward pass (issue 5).

What is timed
-------------
ours
    ``bindscope.embeddings.embed.embed_dataset`` end to end with the encoder already loaded: reading and
    validating the dataset folder, hashing the image files (content key), loading and
    preprocessing every batch, the forward pass, saving each chunk atomically, assembling and
    writing the embedding folder. The embedding cache is off (``cache=None``): every run embeds, where a
    cache hit would only link the rows (timed by ``bench_embedding_cache.py``).
bare (the target's baseline)
    The library's own model called directly on the same batches, already loaded and
    preprocessed before the clock starts: ``CLIPModel.get_image_features(pixel_values=...)`` for
    images and the ``SentenceTransformer`` module stack (``model(features)``) for texts, under
    ``torch.inference_mode()``. Nothing but the forward pass is timed.
loop (a second baseline: what a user writes by hand)
    Images: for each batch, open the PNGs with PIL, the model's image processor, the forward
    pass, in turn. Texts: ``SentenceTransformer.encode`` (which also sorts the texts by length).

Throughput is rows per second; ours / bare is the share of the bare speed the whole pipeline
keeps (the bare forward pass is a lower bound on the time: it decodes nothing, so this share
stays below 1; target >= 0.8 for the ViT-B/32-sized CLIP, where the forward pass is most of the
work, and >= 0.9 for texts), ours / loop the same against the hand-written loop (target >= 1).
Image embedding decodes and preprocesses the next batches on the shared thread pool, one torch
thread each, while the model runs on the process's torch threads, on a CPU as on a GPU. Each side
runs ``--repeats`` times after a warm-up (the ViT-B/32 case: ``--vit-repeats`` times after a
warm-up of one batch) and the best time counts.

Models and data
---------------
* images: a tiny CLIP built from a config with random weights (``tests/tiny_models.py``; width
  32, 3 vision layers, 32 px input) on clevr scenes drawn at ``--image-size`` pixels, where
  decoding is nearly all the work; a small CLIP (width 256, 4 layers, patch 32, 224 px input) and
  a ViT-B/32-sized CLIP (``CLIPModel(CLIPConfig())``: transformers' defaults are ViT-B/32, random
  weights) on the 576 clevr scenes drawn at 224 px, where the forward pass is a realistic share;
* texts: the real all-MiniLM-L6-v2 (the embedded default) on ``--texts`` captions sampled from
  the text preset's space.

Run: ``.venv/bin/python benchmarks/bench_embed.py [--texts 20000] [--repeats 2] [--parts tiny,small,vitb32,text]
[--csv PATH]``

The figures go to ``benchmarks/results/bench_embed.csv`` (or ``--csv``): per part, ours against the bare
forward pass (the share kept) and against the loop.
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

#: The share of the bare forward pass's speed each image model should keep (None: no target, decoding-bound).
BARE_TARGETS = {"tiny": None, "small": None, "vitb32": 0.8}


CLEVR_SCENES = 576


def image_dataset(work: Path, image_size: int, scenes: int = CLEVR_SCENES):
    """The clevr scenes (or a sample of ``scenes`` of them) with pictures drawn at ``image_size`` px."""
    root = work / f"clevr-{image_size}-{scenes}"
    if not root.exists():
        preset: str | Path = "clevr"
        if scenes != CLEVR_SCENES:
            preset = work / f"clevr-sample-{scenes}.yaml"
            preset.write_text(
                "name: clevr-sample\nconcepts:\n  color: [blue, brown, cyan, gray, green, purple, red, yellow]\n"
                "  shape: [cube, cylinder, sphere]\nobjects_per_scene: 2\n"
                f"scenes:\n  mode: sample\n  num_scenes: {scenes}\n  seed: 0\nnoun: shape\nmodalities: [image, text]\n"
            )
        build_dataset(preset, root, images=False)
        draw_scene_images(root, size=image_size)
    return load_dataset(root)


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_images(
    work: Path,
    model_dir: Path,
    label: str,
    image_size: int,
    batch: int,
    repeats: int,
    warm_rows: int | None = None,
    scenes: int = CLEVR_SCENES,
) -> dict:
    """Time ours, bare and loop on ``scenes`` clevr scenes drawn at ``image_size`` px, after a warm-up on
    ``warm_rows`` images (None: a whole run of each)."""
    from transformers import AutoImageProcessor, CLIPModel

    ds = image_dataset(work, image_size, scenes)
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
        embed_dataset(ds, encoder, modality="image", out=out, batch_size=batch, cache=None)

    if warm_rows is None:
        for warm in (bare, loop, ours):
            warm()
    else:  # a slow model: one batch warms torch and the processor
        with torch.inference_mode():
            model.get_image_features(pixel_values=batches[0][:warm_rows])
        encoder.forward("image", encoder.prepare("image", images[:warm_rows]))
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
        embed_dataset(ds, encoder, modality="text", out=out, batch_size=batch, cache=None)

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
    parser.add_argument("--vit-repeats", type=int, default=1, help="timed runs of the ViT-B/32-sized case")
    parser.add_argument(
        "--vit-images", type=int, default=CLEVR_SCENES, help="clevr scenes of the ViT-B/32-sized case (a sample)"
    )
    parser.add_argument("--parts", default="tiny,small,vitb32,text", help="comma list of tiny, small, vitb32, text")
    add_csv_argument(parser, __file__)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    unknown = parts - {"tiny", "small", "vitb32", "text"}
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))}; choose from tiny, small, vitb32, text")
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
        if "vitb32" in parts:
            vit = save_vit_b32(work / "vit-b32")
            label = "ViT-B/32-sized CLIP (CLIPConfig defaults, random weights, 224 px), images"
            if args.vit_images != CLEVR_SCENES:
                label += f" (a sample of {args.vit_images:,} of the {CLEVR_SCENES} clevr scenes)"
            rows.append(bench_images(work, vit, label, 224, 32, args.vit_repeats, warm_rows=32, scenes=args.vit_images))
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
    measured = []
    for r in rows:
        target = _bare_target(r["what"])
        met = "no target" if target is None else ("met" if r["ratio"] >= target else "NOT met")
        print(f"{r['what']}: {r['ratio']:.2f} of the bare forward ({met}), {r['loop_ratio']:.2f}x the loop")
        repeats = args.vit_repeats if "ViT-B/32" in r["what"] else args.repeats
        case, ours = f"{r['what']}, {r['rows']:,} rows", f"embed_dataset end to end, best of {repeats}"
        bare = "the bare forward pass on preloaded, preprocessed batches (torch.inference_mode)"
        loop = (
            "PIL + image processor + forward, batch by batch" if "images" in r["what"] else "SentenceTransformer.encode"
        )
        why = "the bare forward pass reads and preprocesses nothing: a lower bound on the time (share kept < 1)"
        measured.append(
            Measurement(case, ours, bare, "rows/s", r["ours"], r["bare"], "" if target is None else f"{target}x", why)
        )
        loop_target = "1x" if "images" in r["what"] else ""
        measured.append(
            Measurement(case, ours, f"hand-written loop: {loop}", "rows/s", r["ours"], r["loop"], loop_target)
        )
    print(f"wrote {write_results(__file__, measured, args.csv)}")


def _bare_target(what: str) -> float | None:
    """The share of the bare forward pass a case should keep: 0.9 for texts, per model for images."""
    if "images" not in what:
        return 0.9
    return BARE_TARGETS["tiny" if what.startswith("tiny") else "small" if what.startswith("small") else "vitb32"]


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


def save_vit_b32(path: Path) -> Path:
    """A CLIP of ViT-B/32's size (``CLIPConfig()``'s defaults), random weights, saved with its image processor."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        CLIPModel(CLIPConfig()).save_pretrained(path)
    CLIPImageProcessor().save_pretrained(path)
    return path


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
