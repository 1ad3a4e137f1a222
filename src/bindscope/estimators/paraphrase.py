"""The text-side swap test of a relation or count space: does a caption's paraphrase sit nearer the caption than
the caption's binding swap? (docs/method/11-relations-counts.md, "A text-side swap test").

A scene "A to the left of B" has a paraphrase among the scenes, its other mention order "B to the right of A"
(the same scene), and a relation swap "B to the left of A" (another scene). For each scene that has both, the
test scores 1 where the paraphrase's embedding is nearer (cosine) the scene's than the swap's, 0.5 on a tie
and 0 otherwise. All three hold the same concept values, so an ideal bag of concepts ties on every case: its
score, and chance, is 0.5. A count scene's paraphrase is "one blue sphere and two red cubes" for "two red
cubes and one blue sphere", its swap "one red cube and two blue spheres".
"""

from __future__ import annotations

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.captions import family_swap, reverse_order
from bindscope.space.concepts import SceneSet

#: Cosines closer than this are a tie (half a win), as in the cross-modal swap tests.
TIE = 1e-9


def paraphrase_cases(scenes: SceneSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``(scene, paraphrase, swap)`` of every 2-object scene whose paraphrase and family swap are both
    other scenes of the set, the swap naming other objects than the scene (a count swap of one object at two
    counts is its paraphrase, not a negative)."""
    found = family_swap(scenes)
    if found is None:
        raise BindscopeError("the paraphrase swap test needs a relation or count space (relations: or counts:)")
    swapped, valid = found[1]
    u = scenes.space.num_objects
    lookup = scene_lookup(scenes)
    rows = np.arange(len(scenes))

    def row_of(other: SceneSet) -> np.ndarray:
        ids = other.object_ids().astype(np.int64)
        return find_scenes(lookup, ids[:, 0] * u + ids[:, 1])

    two = scenes.num_objects() == 2
    other = (np.sort(swapped.object_ids(), axis=1) != np.sort(scenes.object_ids(), axis=1)).any(axis=1)
    paraphrase, swap = row_of(reverse_order(scenes)), row_of(swapped)
    keep = two & valid & other & (paraphrase >= 0) & (swap >= 0) & (paraphrase != rows)
    return rows[keep], paraphrase[keep], swap[keep]


def paraphrase_wins(embeddings: np.ndarray, scenes: SceneSet) -> np.ndarray:
    """Per case of :func:`paraphrase_cases`: 1, 0.5 or 0 as the paraphrase is nearer the scene than the swap,
    ties, or is farther.

    Parameters
    ----------
    embeddings
        ``[N, D]``, a row per scene of ``scenes`` (the captions' embeddings).
    scenes
        A relation or count scene set.
    """
    if len(embeddings) != len(scenes):
        raise BindscopeError(f"got {len(embeddings)} embeddings for {len(scenes)} scenes; give one row per scene")
    scene, paraphrase, swap = paraphrase_cases(scenes)
    x = np.asarray(embeddings, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
    near = np.einsum("ij,ij->i", x[paraphrase], x[scene])
    far = np.einsum("ij,ij->i", x[paraphrase], x[swap])
    return np.where(np.abs(near - far) <= TIE, 0.5, (near > far).astype(np.float64))
