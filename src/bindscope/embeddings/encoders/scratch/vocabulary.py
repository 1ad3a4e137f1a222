"""The token layout of a controlled model (docs/method/09-scratch.md): scenes and queries as token sequences.

Tokens: the value ``v`` of concept ``c`` is ``offset[c] + v`` (``c*V + v`` when every concept has
V values), then SOO, EOO, EOS and PAD. A scene of n objects is ``[SOO v_0 .. v_{C-1} EOO]`` per
object, then EOS, padded to ``(C+2)*Kmax + 1``. A concept query is ``[value, EOS]``, an object
query ``[SOO v_0 .. v_{C-1} EOO EOS]``; queries are padded to ``C+3``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace


def value_offsets(sizes: tuple[int, ...]) -> torch.Tensor:
    """Token of value 0 of each concept: ``[0, V_0, V_0 + V_1, ...]``."""
    return torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=torch.long)


@dataclass(frozen=True)
class Vocabulary:
    """Token layout for a concept space with at most ``max_objects`` objects per scene."""

    sizes: tuple[int, ...]
    max_objects: int

    @classmethod
    def for_space(cls, space: ConceptSpace, max_objects: int) -> Vocabulary:
        return cls(tuple(space.sizes), int(max_objects))

    @property
    def num_concepts(self) -> int:
        return len(self.sizes)

    @property
    def num_values(self) -> int:
        return int(sum(self.sizes))

    @property
    def offsets(self) -> torch.Tensor:
        return value_offsets(self.sizes)

    @property
    def soo(self) -> int:
        return self.num_values

    @property
    def eoo(self) -> int:
        return self.num_values + 1

    @property
    def eos(self) -> int:
        return self.num_values + 2

    @property
    def pad(self) -> int:
        return self.num_values + 3

    @property
    def size(self) -> int:
        return self.num_values + 4

    @property
    def scene_length(self) -> int:
        return (self.num_concepts + 2) * self.max_objects + 1

    @property
    def query_length(self) -> int:
        return self.num_concepts + 3

    def object_blocks(self, values: torch.Tensor) -> torch.Tensor:
        """``[..., C]`` value indices -> ``[..., C+2]`` blocks ``SOO tokens EOO``."""
        tokens = values + self.offsets.to(values.device)
        soo = torch.full_like(tokens[..., :1], self.soo)
        return torch.cat([soo, tokens, torch.full_like(soo, self.eoo)], dim=-1)

    def scene_tokens(self, values: torch.Tensor) -> torch.Tensor:
        """``[B, K, C]`` values (-1 rows for absent objects, after the present ones) -> ``[B, L]``."""
        b, k, c = values.shape
        if k > self.max_objects or c != self.num_concepts:
            raise BindscopeError(
                f"scenes of shape [*, {k}, {c}] do not fit this model "
                f"(at most {self.max_objects} objects of {self.num_concepts} concepts)"
            )
        present = values[..., 0] >= 0
        blocks = self.object_blocks(values.clamp(min=0))
        blocks = torch.where(present[..., None], blocks, torch.full_like(blocks, self.pad)).reshape(b, -1)
        out = torch.full((b, self.scene_length), self.pad, dtype=torch.long, device=values.device)
        out[:, : blocks.shape[1]] = blocks
        eos_at = present.sum(1) * (c + 2)
        out[torch.arange(b, device=values.device), eos_at] = self.eos
        return out

    def object_queries(self, values: torch.Tensor) -> torch.Tensor:
        """``[Q, C]`` object values -> ``[Q, C+3]`` object query tokens."""
        return torch.cat([self.object_blocks(values), torch.full_like(values[:, :1], self.eos)], dim=1)

    def concept_queries(self) -> torch.Tensor:
        """``[sum V, C+3]``: one query ``[value, EOS, PAD..]`` per concept value, in token order."""
        out = torch.full((self.num_values, self.query_length), self.pad, dtype=torch.long)
        out[:, 0] = torch.arange(self.num_values)
        out[:, 1] = self.eos
        return out
