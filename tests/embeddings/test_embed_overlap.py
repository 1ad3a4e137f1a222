"""Image batches are decoded and preprocessed on the shared thread pool while the model runs, on a CPU too."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bindscope.core.threads import pool_size, shared_pool
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.embed import MAX_AHEAD, embed_dataset, load_image, run_chunks
from bindscope.embeddings.encoders import load_encoder
from tiny_models import save_tiny_clip

WAIT = 30.0  # seconds a step waits for another before the test fails (only reached when the overlap is missing)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


def _paths(ds_dir: Path, count: int) -> list[str]:
    ds = load_dataset(ds_dir)
    return [str(ds.root / p) for p in ds.images[:count]]


class Recorder:
    """A stand-in encoder: a row per image (its mean pixel), with where and how each step ran."""

    def __init__(self, hold_first_forward: bool = False) -> None:
        self.lock = threading.Lock()
        self.prepared: list[tuple[str, int]] = []  # thread name, torch threads
        self.forwards: list[tuple[str, int]] = []
        self.running = 0
        self.most = 0
        self.second_prepared = threading.Event()
        self.hold_first_forward = hold_first_forward

    def prepare(self, modality: str, images: list[Any]) -> np.ndarray:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.prepared.append((threading.current_thread().name, torch.get_num_threads()))
            if len(self.prepared) == 2:
                self.second_prepared.set()
        rows = np.array([np.asarray(image, dtype=np.float32).mean(axis=(0, 1)) for image in images])
        with self.lock:
            self.running -= 1
        return rows

    def forward(self, modality: str, inputs: np.ndarray) -> np.ndarray:
        if self.hold_first_forward and not self.forwards:  # the next batch must be prepared meanwhile
            assert self.second_prepared.wait(WAIT), "the next batch was not prepared while the model ran"
        self.forwards.append((threading.current_thread().name, torch.get_num_threads()))
        return inputs


def _run(encoder: Any, paths: list[str], batch: int) -> np.ndarray:
    saved: dict[int, np.ndarray] = {}
    run_chunks(encoder, "image", paths, [(0, len(paths))], batch, saved.__setitem__, int)
    return saved[0]


def test_image_batches_are_prepared_on_the_pool_while_the_model_runs(clevr_images_dir: Path) -> None:
    paths = _paths(clevr_images_dir, 12)
    recorder = Recorder(hold_first_forward=True)
    before = torch.get_num_threads()
    rows = _run(recorder, paths, 2)
    want = np.array([np.asarray(load_image(p), dtype=np.float32).mean(axis=(0, 1)) for p in paths])
    np.testing.assert_array_equal(rows, want)
    assert len(recorder.prepared) == 6 and len(recorder.forwards) == 6
    assert all(threads == 1 for _, threads in recorder.prepared), "an image batch is prepared on one torch thread"
    assert any(name.startswith("bindscope-worker") for name, _ in recorder.prepared[1:])
    assert all(name == threading.current_thread().name and threads == before for name, threads in recorder.forwards)
    assert 1 <= recorder.most <= min(pool_size(), MAX_AHEAD)
    assert torch.get_num_threads() == before


def test_a_busy_pool_does_not_hold_the_embedding_up(clevr_images_dir: Path) -> None:
    paths = _paths(clevr_images_dir, 8)
    pool = shared_pool()
    release, started = threading.Event(), threading.Semaphore(0)

    def busy() -> None:
        started.release()
        release.wait(WAIT)

    blockers = [pool.submit(busy) for _ in range(pool_size())]
    try:
        for _ in blockers:
            assert started.acquire(timeout=WAIT)
        recorder = Recorder()
        rows = _run(recorder, paths, 3)  # every batch prepared here: no pool thread is free
        assert rows.shape == (8, 3)
        assert {name for name, _ in recorder.prepared} == {threading.current_thread().name}
    finally:
        release.set()
        for blocker in blockers:
            blocker.result()


def test_a_failing_batch_stops_the_run_with_its_error(clevr_images_dir: Path, tmp_path: Path) -> None:
    paths = _paths(clevr_images_dir, 9)
    paths[4] = str(tmp_path / "gone.png")
    with pytest.raises(Exception, match="gone.png is missing"):
        _run(Recorder(), paths, 2)


def test_image_embeddings_equal_preparing_and_running_in_turn(
    clevr_images_dir: Path, tiny_clip: Path, tmp_path: Path
) -> None:
    spec = f"hf:{tiny_clip}"
    out = tmp_path / "single"
    emb = embed_dataset(
        clevr_images_dir, spec, modality="image", out=out, single_objects=True, batch_size=5, chunk_rows=12
    ).embeddings
    ds = load_dataset(clevr_images_dir)
    encoder = load_encoder(spec)
    images = [load_image(str(ds.root / p)) for p in ds.single_images.ravel()]
    batches = [(b, min(b + 5, c + 12)) for c in range(0, 48, 12) for b in range(c, c + 12, 5)]
    in_turn = np.concatenate([encoder.forward("image", encoder.prepare("image", images[b0:b1])) for b0, b1 in batches])
    np.testing.assert_array_equal(emb.array, in_turn)
