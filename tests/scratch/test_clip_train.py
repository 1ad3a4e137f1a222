"""Training an image-text model from scratch (a CLIP in miniature, docs/method/09-scratch.md): the model folder,
seeded and resumable training, a finished model found again, its dataset checked, the caption vocabulary, the
contrastive loss and the evaluation on hand-made embeddings with known answers, and each training-data error."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bindscope.analyses.crossmodal.retrieval import bag_strict_ceiling, retrieval_chance
from bindscope.analyses.crossmodal.swaps import swap_cases
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import build_dataset, load_dataset
from bindscope.embeddings.encoders import load_encoder
from bindscope.embeddings.encoders.scratch.clip_model import Words, build_clip
from bindscope.scratch.clip_data import clip_split, hard_negative_rows
from bindscope.scratch.clip_train import (
    ClipTrainer,
    clip_metrics,
    contrastive_loss,
    part_floors,
    training_dataset,
)
from bindscope.scratch.config import load_config
from bindscope.scratch.train import train_model
from clip_data import SCENES, build_tiny, tiny_clip, tiny_preset

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: A short run: evaluations and checkpoints every 10 steps.
SHORT = {"steps": 20, "eval_every": 10, "checkpoint_every": 10}
METRICS = ("concept_at_1", "strict_at_1", "swap_attribute", "swap_noun", "order_sensitivity")
NOUN = "shape"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("clip-data") / "tiny")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Path:
    """An uninterrupted short run."""
    out = tmp_path_factory.mktemp("clip-reference") / "model"
    assert train_model(tiny_clip(dataset, **SHORT), out).status == "trained"
    return out


def same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


# -- the model folder ---------------------------------------------------------------------------------------
def test_a_short_run_writes_a_model_folder(reference: Path, dataset: Path) -> None:
    ds = load_dataset(dataset)
    assert {p.name for p in reference.iterdir()} == {
        ".bindscope.json",
        "config.json",
        "model.safetensors",
        "summary.json",
        "manifest.json",
        "metrics.csv",
        "evaluation.csv",
    }
    record = json.loads((reference / "config.json").read_text())
    assert record["format"] == "bindscope-clip-v1" and record["selected_step"] == 20
    assert record["config"] == tiny_clip(dataset, **SHORT).to_dict() and record["config"]["kind"] == "image-text"
    assert record["dataset_hash"] == ds.hash
    assert record["words"] == {
        "words": ["<pad>", "a", "and", "blue", "circle", "green", "red", "square", "triangle"],
        "max_length": 7,  # "a red square and a green circle"
    }
    split = clip_split(tiny_clip(dataset), ds.scenes)
    assert record["split"] == split.to_dict()
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["kind"] == "image-text" and summary["dataset"] == str(dataset)
    assert (summary["towers"], summary["batches"], summary["hard_negatives"], summary["split"]) == (
        "pooled",
        "swap-free",
        "none",
        "combinations",
    )
    assert summary["scenes"] == {"train": len(split.train), "heldout": len(split.heldout)}
    assert summary["coverage"] == split.coverage and summary["hard_negatives_available"] == {}
    assert summary["steps"] == 20 and summary["selected_step"] == 20 and summary["seconds"] > 0
    keys = {f"{part}_{m}" for part in ("train", "heldout") for m in METRICS}
    assert set(summary["selected"]) == set(summary["floors"]) == set(summary["cases"]) == keys
    for part, rows in (("train", split.train), ("heldout", split.heldout)):
        chance = retrieval_chance(ds.scenes.subset(rows))
        assert summary["floors"][f"{part}_concept_at_1"] == {"bag": 1.0, "chance": chance["concept@1"]}
        assert summary["floors"][f"{part}_strict_at_1"] == {
            "bag": bag_strict_ceiling(ds.scenes.subset(rows)),
            "chance": chance["strict@1"],
        }
        for m in ("swap_attribute", "swap_noun", "order_sensitivity"):
            assert summary["floors"][f"{part}_{m}"] == {"bag": 0.5, "chance": 0.5}
        assert summary["cases"][f"{part}_concept_at_1"] == len(rows)
    # the swap tests count the scenes of a part whose swap names other objects: those a hard negative needs
    clean = hard_negative_rows(ds.scenes, NOUN, split.train)["attribute"]
    assert summary["cases"]["train_swap_attribute"] == int((clean[split.train] >= 0).sum()) == 28
    evaluation = pd.read_csv(reference / "evaluation.csv")
    assert set(evaluation.columns) == {"step", "split", "metric", "value", "cases", "bag", "chance"}
    assert sorted(set(evaluation.step)) == [10, 20] and len(evaluation) == 2 * len(keys)
    assert evaluation[["bag", "chance", "value"]].notna().all().all()
    last = evaluation[evaluation.step == 20]
    assert {f"{r.split}_{r.metric}": r.value for r in last.itertuples()} == summary["selected"]
    assert list(pd.read_csv(reference / "metrics.csv").step) == [10, 20]
    manifest = json.loads((reference / "manifest.json").read_text())
    assert manifest["command"] == "scratch train" and manifest["device"] == "cpu"


def test_the_kept_weights_score_what_was_logged(reference: Path, dataset: Path) -> None:
    """The folder's weights, loaded as ``scratch:MODEL``, give back the summary's numbers."""
    ds = load_dataset(dataset)
    encoder = load_encoder(f"scratch:{reference}")
    image = encoder.forward("image", encoder.prepare("image", [ds.root / p for p in ds.images]))
    text = encoder.forward("text", encoder.prepare("text", list(ds.captions)))
    assert image.shape == text.shape == (SCENES, 16)
    np.testing.assert_allclose(np.linalg.norm(image, axis=1), 1.0, rtol=1e-5)
    split = clip_split(tiny_clip(dataset), ds.scenes)
    metrics = clip_metrics(image, text, ds.scenes, split, swap_cases(ds.scenes, NOUN))
    summary = json.loads((reference / "summary.json").read_text())
    for key, (value, cases) in metrics.items():
        assert value == pytest.approx(summary["selected"][key], abs=1e-9), key
        assert cases == summary["cases"][key], key
    control = load_encoder(f"scratch:{reference}+rand")
    assert not np.allclose(control.forward("text", control.prepare("text", ["a red square"])), text[:1])


# -- seeded and resumable -----------------------------------------------------------------------------------
class Stop(KeyboardInterrupt):
    pass


def interrupt_at(step: int):
    def on_step(s: int) -> None:
        if s == step:
            raise Stop

    return on_step


def test_a_resumed_run_equals_an_uninterrupted_one(reference: Path, dataset: Path, tmp_path: Path) -> None:
    config = tiny_clip(dataset, **SHORT)
    out, work = tmp_path / "model", tmp_path / ".model.training"
    with pytest.raises(KeyboardInterrupt):
        train_model(config, out, on_step=interrupt_at(15))
    assert not out.exists() and sorted(p.name for p in work.glob("step-*")) == ["step-00000010"]
    with pytest.raises(BindscopeError, match=r"holds an unfinished run of another config \(differs in lr\)"):
        train_model(tiny_clip(dataset, **SHORT, lr=1e-3), out)
    resumed = train_model(config, out)
    assert resumed.status == "resumed" and not work.exists()
    assert same_bytes(reference / "model.safetensors", out / "model.safetensors")
    for name in ("metrics.csv", "evaluation.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(reference / name), pd.read_csv(out / name))
    ref_summary = json.loads((reference / "summary.json").read_text())
    for key in ("selected", "floors", "cases", "scenes", "coverage"):
        assert resumed.summary[key] == ref_summary[key], key


def test_another_seed_trains_another_model(reference: Path, dataset: Path, tmp_path: Path) -> None:
    other = train_model(tiny_clip(dataset, **SHORT, seed=1), tmp_path / "other")
    assert other.summary["seed"] == 1
    assert not same_bytes(reference / "model.safetensors", tmp_path / "other" / "model.safetensors")


def test_a_finished_model_is_found_again(reference: Path, dataset: Path) -> None:
    stamp = (reference / "model.safetensors").stat().st_mtime_ns
    again = train_model(tiny_clip(dataset, **SHORT), reference)
    assert again.status == "existing"
    assert again.summary == json.loads((reference / "summary.json").read_text())
    assert (reference / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(BindscopeError, match="holds a model trained with another config"):
        train_model(tiny_clip(dataset, **SHORT, towers="slot"), reference)


def test_a_finished_model_of_another_dataset_content_is_refused(tmp_path: Path) -> None:
    from bindscope.scratch.export import export_model

    data = build_tiny(tmp_path / "data")
    config = tiny_clip(data, steps=2, eval_every=2)
    assert train_model(config, tmp_path / "model").status == "trained"
    build_dataset(tiny_preset(image={"width": 40, "height": 40}), data, overwrite=True, workers=1)
    message = f"the model was trained on another content of {data} (hash"
    with pytest.raises(BindscopeError, match=message.replace("(", r"\(")):
        train_model(config, tmp_path / "model")
    with pytest.raises(BindscopeError, match="pass --overwrite to train it again"):
        export_model(tmp_path / "model", tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_an_interrupted_run_does_not_resume_on_another_dataset_content(reference: Path, tmp_path: Path) -> None:
    """The run's first steps read one content of the dataset folder: continuing on another would mix them."""
    data = build_tiny(tmp_path / "data")
    config = tiny_clip(data, **SHORT)
    with pytest.raises(KeyboardInterrupt):
        train_model(config, tmp_path / "model", on_step=interrupt_at(15))
    build_dataset(tiny_preset(image={"width": 40, "height": 40}), data, overwrite=True, workers=1)
    with pytest.raises(BindscopeError, match=r"holds an unfinished run .*other data"):
        train_model(config, tmp_path / "model")
    assert not (tmp_path / "model").exists() and (tmp_path / ".model.training").is_dir()
    build_dataset(tiny_preset(), data, overwrite=True, workers=1)  # the content it started on: it resumes
    assert train_model(config, tmp_path / "model").status == "resumed"
    assert same_bytes(reference / "model.safetensors", tmp_path / "model" / "model.safetensors")


# -- what the model reads -----------------------------------------------------------------------------------
def test_words() -> None:
    words = Words.of(["a red square", "a blue circle and a red square"])
    assert words.words == ("<pad>", "a", "and", "blue", "circle", "red", "square") and words.max_length == 7
    assert words.tokens(["a red square", "red"]).tolist() == [[1, 5, 6, 0, 0, 0, 0], [5, 0, 0, 0, 0, 0, 0]]
    assert Words.from_dict(json.loads(json.dumps(words.to_dict()))) == words
    with pytest.raises(BindscopeError) as err:
        words.tokens(["a red cube", "a green cube"])
    assert str(err.value) == (
        "caption 'a red cube' has word(s) cube that the model never read; an image-text scratch model embeds "
        "captions of its training dataset's words only"
    )
    too_long = "a red square and a red square red"
    with pytest.raises(BindscopeError, match=f"caption '{too_long}' has 8 words; this model reads 1 to 7 words"):
        words.tokens([too_long])
    with pytest.raises(BindscopeError, match="caption '' has 0 words; this model reads 1 to 7 words"):
        words.tokens([""])
    with pytest.raises(BindscopeError, match="the dataset has no captions to learn words from"):
        Words.of(["", " "])


def test_the_logit_scale_is_capped() -> None:
    words = Words.of(["a red square"])
    model = build_clip(load_config("clip-tiny", tau_init=math.log(20.0), max_logit_scale=10.0, d_model=16), words)
    assert model.logit_scale().item() == pytest.approx(10.0)
    free = build_clip(load_config("clip-tiny", tau_init=math.log(20.0), d_model=16), words)
    assert free.logit_scale().item() == pytest.approx(20.0)


class Planted(torch.nn.Module):
    """A stand-in model: its inputs are its embeddings (normalised), with a fixed logit scale."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def logit_scale(self) -> torch.Tensor:
        return torch.tensor(self.scale, dtype=torch.float64)

    def embed_images(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, dim=-1)

    def embed_texts(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, dim=-1)


def test_the_contrastive_loss_known_answers() -> None:
    """Two orthogonal image-caption pairs at logit scale s: each direction's loss is log(1 + e^-s). A hard negative
    at cosine 0.6 to image 1 is an extra column of the images only: image 1 pays log(e^s + 1 + e^0.6s) - s, image 2
    log(e^s + 2) - s, and the captions' direction (over the batch's images) is unchanged."""
    s = 2.0
    e1, e2, e3 = torch.eye(3, dtype=torch.float64)
    images = torch.stack([e1, e2])
    plain = contrastive_loss(Planted(s), images, torch.stack([e1, e2]))
    assert plain.item() == pytest.approx(math.log1p(math.exp(-s)), rel=1e-12)
    hard = 0.6 * e1 + 0.8 * e3
    loss = contrastive_loss(Planted(s), images, torch.stack([e1, e2, hard]))
    image_to_text = ((math.log(math.exp(s) + 1 + math.exp(0.6 * s)) - s) + (math.log(math.exp(s) + 2) - s)) / 2
    assert loss.item() == pytest.approx((image_to_text + math.log1p(math.exp(-s))) / 2, rel=1e-12)
    perfect = contrastive_loss(Planted(50.0), images, torch.stack([e1, e2, e3]))  # a far negative costs nothing
    assert perfect.item() == pytest.approx(0.0, abs=1e-12)
    # captions at cosines [[1, 0.6], [0, 0.8]] to the images: each direction ranks its own row of that matrix
    leaning = contrastive_loss(Planted(s), images, torch.stack([e1, 0.6 * e1 + 0.8 * e2]))

    def lse(*cosines: float) -> float:
        return math.log(sum(math.exp(s * c) for c in cosines))

    image_to_text = ((lse(1, 0.6) - s) + (lse(0, 0.8) - 0.8 * s)) / 2
    text_to_image = ((lse(1, 0) - s) + (lse(0.6, 0.8) - 0.8 * s)) / 2
    assert leaning.item() == pytest.approx((image_to_text + text_to_image) / 2, rel=1e-12)


# -- the evaluation on planted embeddings -------------------------------------------------------------------
def one_hot(values: np.ndarray, size: int) -> np.ndarray:
    return np.eye(size)[values]


def planted(scenes, code: str) -> np.ndarray:
    """Embeddings of every scene whose binding is known (the image and the caption embedding alike).

    ``bag``: the sum of one-hot concept values (binds nothing); ``objects``: the sum of one-hot objects (binds,
    ignores the order); ``slots``: one-hot color and shape of each slot, concatenated (binds through the order).
    """
    if code == "bag":
        return np.concatenate(scenes.value_counts(), axis=1).astype(np.float64)
    if code == "objects":
        return one_hot(scenes.object_ids(), scenes.space.num_objects).sum(1)
    values = scenes.scenes  # [N, 2 slots, 2 concepts]
    return np.concatenate([one_hot(values[:, k, c], 3) for k in range(2) for c in range(2)], axis=1)


#: Per code: attribute swap, noun swap, order sensitivity, strict top-1 (None: the bag's ceiling); concept@1 is 1.
KNOWN = {"bag": (0.5, 0.5, 0.5, None), "objects": (1.0, 1.0, 0.0, 1.0), "slots": (1.0, 1.0, 1.0, 1.0)}


@pytest.mark.parametrize("split_kind", ["combinations", "objects"])
@pytest.mark.parametrize("code", list(KNOWN))
def test_clip_metrics_known_answers(code: str, split_kind: str) -> None:
    scenes = tiny_preset().build_scenes()
    split = clip_split(load_config("clip-tiny", split=split_kind), scenes)
    x = planted(scenes, code)
    metrics = clip_metrics(x, x.copy(), scenes, split, swap_cases(scenes, NOUN))
    floors = part_floors(scenes, split)
    attribute, noun, order, strict = KNOWN[code]
    for part, rows in (("train", split.train), ("heldout", split.heldout)):
        sub = scenes.subset(rows)
        assert metrics[f"{part}_concept_at_1"] == (1.0, len(rows))
        want = bag_strict_ceiling(sub) if strict is None else strict
        assert metrics[f"{part}_strict_at_1"][0] == pytest.approx(want, abs=1e-12)
        if code == "bag":  # the floors are what a bag of concepts scores
            assert metrics[f"{part}_strict_at_1"][0] == pytest.approx(floors[part]["strict_at_1"]["bag"], abs=1e-12)
        clean = ((sub.scenes[:, 0] != sub.scenes[:, 1]).all(1)).sum()  # both colors and both shapes differ
        for key, value in (("swap_attribute", attribute), ("swap_noun", noun), ("order_sensitivity", order)):
            got, cases = metrics[f"{part}_{key}"]
            assert cases == clean, (part, key)
            if cases:
                assert got == value, (part, key)
            else:
                assert math.isnan(got), (part, key)


# -- what a run learns --------------------------------------------------------------------------------------
def test_slot_towers_on_natural_batches_learn_to_bind(dataset: Path, tmp_path: Path) -> None:
    """Slot towers (each position its own weights) pass the swap tests on the trained-on scenes within 300 steps, by
    the positional shortcut: a caption in the other mention order loses to the attribute swap."""
    config = tiny_clip(dataset, towers="slot", batches="natural", steps=300, eval_every=100, checkpoint_every=1000)
    summary = train_model(config, tmp_path / "model").summary
    selected = summary["selected"]
    assert selected["train_concept_at_1"] >= 0.9
    assert selected["train_swap_attribute"] >= 0.9 and selected["train_swap_noun"] >= 0.9
    assert selected["train_order_sensitivity"] >= 0.9
    first = pd.read_csv(tmp_path / "model" / "metrics.csv")
    assert first.loss.iloc[0] > first.loss.iloc[-1] + 0.5


def test_hard_negatives_are_added_to_the_batches(dataset: Path, tmp_path: Path) -> None:
    config = tiny_clip(dataset, hard_negatives="both", batches="natural", steps=10, eval_every=10)
    summary = train_model(config, tmp_path / "model").summary
    assert summary["hard_negatives_available"] == {"attribute": 28, "noun": 28}
    log = pd.read_csv(tmp_path / "model" / "metrics.csv")
    assert log.hard_negatives.iloc[-1] > 0  # mean hard negatives per step
    train_model(tiny_clip(dataset, steps=10, eval_every=10), tmp_path / "plain")
    assert (pd.read_csv(tmp_path / "plain" / "metrics.csv").hard_negatives == 0).all()


# -- training-data errors -----------------------------------------------------------------------------------
def test_a_config_without_a_dataset_is_refused() -> None:
    with pytest.raises(BindscopeError) as err:
        training_dataset(load_config("clip-tiny"))
    assert str(err.value).startswith(
        "image-text config clip-tiny names no dataset; give --dataset DATASET (a folder with rendered images"
    )


def test_a_dataset_without_images_is_refused(tmp_path: Path) -> None:
    data = build_tiny(tmp_path / "captions", images=False)
    with pytest.raises(BindscopeError) as err:
        training_dataset(tiny_clip(data))
    assert str(err.value).startswith(f"dataset {data} has no rendered images; build it with images")


def test_scenes_of_three_objects_are_refused(tmp_path: Path) -> None:
    data = build_tiny(tmp_path / "three", images=False, objects_per_scene=3, slot_layout=None)
    with pytest.raises(BindscopeError) as err:
        training_dataset(tiny_clip(data))
    assert str(err.value).startswith(f"dataset {data} has up to 3 objects per scene; an image-text model is trained")


def test_a_dataset_without_a_noun_is_refused(tmp_path: Path) -> None:
    data = build_tiny(tmp_path / "nonoun", images=False, noun=None)
    with pytest.raises(BindscopeError, match="names no noun concept besides its attributes; its swaps are undefined"):
        training_dataset(tiny_clip(data))


def test_a_batch_larger_than_the_groups_is_refused(dataset: Path) -> None:
    with pytest.raises(BindscopeError) as err:
        ClipTrainer(tiny_clip(dataset, batch_size=64))
    assert str(err.value) == (
        "batch size 64 exceeds the 28 swap-free scene groups of the training split; lower the batch size to at most "
        "28 or use natural batches"
    )


def test_a_refused_config_leaves_nothing_behind(dataset: Path, tmp_path: Path) -> None:
    """The error says to lower the batch size; doing so trains (no unfinished run of 'another config' is left)."""
    out = tmp_path / "model"
    with pytest.raises(BindscopeError, match="lower the batch size to at most 28"):
        train_model(tiny_clip(dataset, batch_size=64, steps=2, eval_every=2), out)
    assert not out.exists()
    assert train_model(tiny_clip(dataset, batch_size=28, steps=2, eval_every=2), out).status == "trained"
    assert not (tmp_path / ".model.training").exists()


def test_the_dataset_copied_elsewhere_trains_the_same_model(reference: Path, dataset: Path, tmp_path: Path) -> None:
    """Only the dataset's content matters, not its folder: a copy trains the same weights."""
    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    out = train_model(tiny_clip(copy, **SHORT), tmp_path / "model").out
    assert same_bytes(reference / "model.safetensors", out / "model.safetensors")
