"""Compositional generalisation with linear heads (docs/method/08-geometry.md).

Per concept, a linear classifier (multinomial logistic regression, scikit-learn) is fitted on the
object vectors of seen objects and scored on the objects never seen, whose value combinations are
new: a factorised geometry lets each concept's head read its value whatever the other values are.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

from bindscope.space.concepts import ConceptSpace


def head_accuracy(
    vectors: np.ndarray, space: ConceptSpace, train: np.ndarray, test: np.ndarray, c: float = 10.0
) -> dict[str, float]:
    """Per concept, test accuracy of its head; ``object``: all concepts right at once. A concept whose
    training objects hold a single value is predicted as that value. ``c``: the inverse L2 strength on
    standardised vectors (few training objects per value need a light penalty)."""
    objects = space.all_objects()
    x = np.asarray(vectors, dtype=np.float64)
    mean, scale = x[train].mean(axis=0), x[train].std(axis=0).mean() or 1.0
    xs = (x - mean) / scale
    correct = np.ones(len(test), dtype=bool)
    out = {}
    for k, name in enumerate(space.concepts):
        labels = objects[:, k]
        seen = np.unique(labels[train])
        if len(seen) == 1:
            predicted = np.full(len(test), seen[0])
        else:
            model = LogisticRegression(C=c, max_iter=2000).fit(xs[train], labels[train])
            predicted = model.predict(xs[test])
        hit = predicted == labels[test]
        out[name] = float(hit.mean()) if len(test) else float("nan")
        correct &= hit
    out["object"] = float(correct.mean()) if len(test) else float("nan")
    return out


def chance(space: ConceptSpace) -> dict[str, float]:
    """Accuracy of a uniform guess per concept and for the whole object."""
    out = {name: 1.0 / size for name, size in zip(space.concepts, space.sizes)}
    out["object"] = 1.0 / space.num_objects
    return out
