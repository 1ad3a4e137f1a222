"""Object vectors: from the single bank, else position-averaged scenes."""

from __future__ import annotations

import numpy as np
import pytest

from bindscope.analyses.geometry.vectors import object_vectors
from bindscope.core.errors import BindscopeError
from bindscope.data.presets import get_preset
from bindscope.space.concepts import SceneSet


def test_single_captions_and_images_and_pos_avg() -> None:
    scenes = get_preset("clevr").build_scenes()
    u = scenes.space.num_objects
    y = np.random.default_rng(0).normal(size=(len(scenes), 8)).astype(np.float32)
    captions = np.arange(u * 8, dtype=np.float32).reshape(u, 8)
    got = object_vectors(y, scenes, captions)
    assert got.source == "single" and got.positions == 1 and np.allclose(got.vectors[0], captions)
    images = np.arange(2 * u * 8, dtype=np.float32).reshape(2 * u, 8)
    got = object_vectors(y, scenes, images)
    assert got.positions == 2 and np.allclose(got.vectors[1, 3], images[3 * 2 + 1])
    got = object_vectors(y, scenes, None)
    ids = scenes.object_ids()
    assert got.source == "pos-avg" and got.positions == 2 and got.present.all()
    assert np.allclose(got.vectors[0, 5], y[ids[:, 0] == 5].mean(axis=0), atol=1e-5)


def test_no_object_vectors_is_refused() -> None:
    one = SceneSet.enumerate(get_preset("clevr").build_scenes().space, 1)
    with pytest.raises(BindscopeError, match="geometry needs object vectors"):
        object_vectors(np.ones((len(one), 4)), one, None)
