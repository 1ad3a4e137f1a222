"""Held-out scores over object-level splits (docs/method.md §8): factorization R² and linear heads.

Objects are split at each fraction and seed (covering order, §2: every value is seen from the
lowest fractions on); the factorization and the heads are fitted on the seen objects and scored on
the unseen ones, raw and, for the factorization, after whitening with the seen objects' covariance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bindscope.analyses.geometry.factorization import factorization_scores, object_scenes, whitening
from bindscope.analyses.geometry.heads import head_accuracy
from bindscope.space.concepts import ConceptSpace
from bindscope.space.splits import object_splits


def held_out_rows(
    vectors: np.ndarray, space: ConceptSpace, fractions: tuple[float, ...], seeds: tuple[int, ...]
) -> list[dict[str, Any]]:
    """One record per (seed, fraction, metric): factorization R² (raw / whitened, train / test) and head
    accuracy per concept and per object on the unseen objects."""
    scenes = object_scenes(space)
    out: list[dict[str, Any]] = []
    for seed in seeds:
        for split in object_splits(scenes, list(fractions), seed, order="covering"):
            train, test = split.train_only, split.test_only
            if len(train) < 2 or not len(test):
                continue
            w = whitening(vectors[train])
            scores = {f"raw_{k}": v for k, v in factorization_scores(vectors, space, train, test).items()}
            scores |= {f"whitened_{k}": v for k, v in factorization_scores(vectors @ w, space, train, test).items()}
            scores |= {f"head_{k}": v for k, v in head_accuracy(vectors, space, train, test).items()}
            out += [
                {
                    "seed": seed,
                    "fraction": split.fraction,
                    "metric": m,
                    "value": v,
                    "train": len(train),
                    "test": len(test),
                }
                for m, v in scores.items()
            ]
    return out
