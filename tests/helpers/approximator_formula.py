"""The approximator families of docs/method/06-complexity.md written out literally, for tests to compare against."""

from __future__ import annotations

import math

import numpy as np
import torch

from bindscope.analyses.complexity.families import Family
from bindscope.space.concepts import SceneSet


def formula(family: Family, p: dict[str, torch.Tensor], scenes: SceneSet, g: int) -> torch.Tensor:
    """docs/method/06-complexity.md written out literally for model g: per-slot tables, concat / products / sums."""
    k, c = scenes.max_objects, scenes.space.num_concepts
    per_object = sum(scenes.space.sizes)
    offsets = np.cumsum([0, *scenes.space.sizes[:-1]])

    def e(table: torch.Tensor, slot_k: int, concept: int) -> torch.Tensor:
        rows = slot_k * per_object + offsets[concept] + torch.tensor(scenes.scenes[:, slot_k, concept])
        return table[g][rows]

    es = [e(p["table"], a, b) for a in range(k) for b in range(c)]
    if family.name == "mlp":
        w1 = torch.cat([p[f"w1.{s}"][g] for s in range(k * c)], dim=1)  # [h, S * d]
        hidden = torch.relu(torch.cat(es, dim=1) @ w1.T + p["b1"][g])
        return hidden @ p["w"][g].T + p["b"][g]
    if family.name == "additive":
        z = sum(es)
    elif family.name == "mult":
        z = math.prod(es)
    elif family.name == "mult_within_object":
        z = sum(math.prod(es[a * c : (a + 1) * c]) for a in range(k))
    else:  # sum_mult
        fs = [e(p["table_add"], a, b) for a in range(k) for b in range(c)]
        z = torch.cat([math.prod(es), sum(fs)], dim=1)
    return z @ p["w"][g].T + p["b"][g]
