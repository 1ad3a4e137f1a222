"""Chance of each edit metric (docs/method/05-interventions.md): what random scores would score, per case.

With scores drawn at random (continuous: no ties), the best match of an edit is any of the ``N`` scenes
alike, and a probe's top labels any set of its labels alike. So, per case:

- ``retrieval`` (the expected scene is the best match): ``1 / N``;
- ``retrieval_binding`` (the expected scene or its reversed order scores above every other scene): ``|class| / N``
  with ``|class|`` 2 where the reversed scene is among the scenes, else 1;
- ``probe`` (the attribute and noun probes set-separate the expected scene's values): the product over the two
  concepts of ``1 / C(V_c, m_c)`` (``m_c``: the expected scene's distinct values of concept c);
- ``probe_binding`` (the object probe set-separates the expected scene's objects from the edit and from the
  embedding of every scene with the expected scene's concept values): the product of ``1 / C(U, m)`` over those
  readings, taken as independent.
"""

from __future__ import annotations

import numpy as np

from bindscope.estimators.probes import chance_per_scene
from bindscope.space.concepts import SceneSet


def case_chances(
    scenes: SceneSet, expected: np.ndarray, reversed_: np.ndarray, classes: np.ndarray, concepts: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Per case ``[m]``: the chance of each metric (keys: ``retrieval``, ``retrieval_binding``, ``probe``,
    ``probe_binding``) on the case whose expected scene is ``expected`` (rows of ``scenes``).

    Parameters
    ----------
    scenes
        The 2-object scenes: the retrieval candidates.
    expected, reversed_
        Per case: the expected scene and its order-reversed scene (-1: not among the scenes).
    classes
        Per scene: its bag class (:func:`bindscope.analyses.intervene.edits.bag_classes`).
    concepts
        The concepts the concept probes read (the edited and the kept one).
    """
    n = len(scenes)
    space = scenes.space
    counts = scenes.value_counts()
    probe = np.ones(len(expected))
    for name in concepts:
        c = space.concept_index(name)
        probe *= chance_per_scene(space.sizes[c], (counts[c][expected] > 0).sum(axis=1))
    read = chance_per_scene(space.num_objects, scenes.distinct_objects())  # the object probe reads one scene
    told = np.ones(int(classes.max(initial=-1)) + 1)
    np.multiply.at(told, classes, read)  # every scene of a class read right
    return {
        "retrieval": np.full(len(expected), 1.0 / n),
        "retrieval_binding": (1.0 + (reversed_ >= 0)) / n,
        "probe": probe,
        "probe_binding": read[expected] * told[classes[expected]],
    }
