"""The vectorised, seeded scene/query sampler of docs/method/09-scratch.md, and fixed evaluation scenes.

The token layout (:class:`~bindscope.embeddings.encoders.scratch.vocabulary.Vocabulary`) is the model's.

A training batch draws, per scene, 1..Kmax objects uniformly (with replacement) from the allowed
objects, and one binding-swap query per multi-object scene: an object of the scene with one
concept value copied from another object of the scene. Swaps that would make a disallowed
(held-out) object are never drawn, so held-out objects appear nowhere in training, neither as
positives nor as negatives (``swap_allowed`` widens this, for the research code's leak and its
evaluation). On a relation space (docs/method/11-relations-counts.md) a scene is a relation: the second
object is drawn among the allowed objects whose place is the converse of the first's ("A left of B": A's
place ``left of``, B's ``right of``), so a place swap query asks which object holds which side; a count
space needs nothing more (any object may come in any count). Labels are set membership, so a swap
that coincides with an object of its scene is a positive. The queries are every concept value and
every present object plus the swaps (``queries="all"``), or, as in the research code, the present
concept values and a random subset of the present objects plus the swaps (``queries="sampled"``).
Every batch is a pure function of ``(seed, step)``: resuming needs no sampler state, and the same
batch comes out on every device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.scratch.vocabulary import value_offsets
from bindscope.space.concepts import PAD as NO_OBJECT
from bindscope.space.concepts import ConceptSpace
from bindscope.space.families import CONVERSE, PLACE

ENUMERATE_UP_TO = 200_000  # tuples; more are sampled
MAX_DRAWS = 1_000_000


@dataclass(frozen=True)
class Batch:
    """One training batch (CPU tensors).

    scenes : ``[B, Kmax, C]`` values (-1 rows after the present objects)
    scene_ids : ``[B, Kmax]`` object ids (-1 where absent)
    query_ids : ``[Q]`` the object queries: the present objects (all, or a sampled subset) plus the
        swaps, unique, sorted
    object_labels : ``[B, Q]`` 1 where the query object is in the scene
    concept_labels : ``[B, Qc]`` 1 where the query's concept value is in the scene
    swap_ids : ``[B]`` the binding-swap object of each scene (-1: none)
    concept_ids : ``[Qc]`` the concept-value queries as value tokens, sorted: every value
        (``queries="all"``) or the sampled present ones
    """

    scenes: torch.Tensor
    scene_ids: torch.Tensor
    query_ids: torch.Tensor
    object_labels: torch.Tensor
    concept_labels: torch.Tensor
    swap_ids: torch.Tensor
    concept_ids: torch.Tensor


def step_generator(seed: int, step: int, *stream: int) -> torch.Generator:
    """The generator of batch ``step`` of run ``seed`` (independent streams, no carried state).

    ``stream`` names another family of batches (e.g. evaluation batches); none: the training batches.
    """
    entropy = [int(seed), 0x5C7A7C, int(step), *(int(s) for s in stream)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


class SceneSampler:
    """Seeded batches of scenes drawn from ``allowed`` objects (docs/method/09-scratch.md).

    Parameters
    ----------
    space : ConceptSpace
    allowed : array of object ids
        The only objects that may appear in scenes (and, by default, as swap queries).
    max_objects : int
        Scenes hold 1..max_objects objects, uniformly.
    swap_allowed : array of object ids, optional
        The objects a binding swap may produce; default ``allowed``. All objects reproduce the
        research code's held-out negatives (a leak in training; its evaluation batches do the same).
    queries : "all" or "sampled"
        Every concept value and every present object plus the swaps, or the research code's
        per-batch sample (:meth:`sampled_queries`).
    max_object_queries, max_concept_queries : int
        The sample's caps on present objects and present concept values (``queries="sampled"``).
    """

    def __init__(
        self,
        space: ConceptSpace,
        allowed: np.ndarray,
        max_objects: int,
        *,
        swap_allowed: np.ndarray | None = None,
        queries: str = "all",
        max_object_queries: int = 64,
        max_concept_queries: int = 64,
    ) -> None:
        if queries not in ("all", "sampled"):
            raise BindscopeError(f"queries must be 'all' or 'sampled', got {queries!r}")
        if min(max_object_queries, max_concept_queries) < 1:
            raise BindscopeError("max_object_queries and max_concept_queries must be at least 1")
        self.space = space
        self.max_objects = int(max_objects)
        self.pool = torch.from_numpy(_object_ids(space, allowed, "allowed"))
        swaps = self.pool.numpy() if swap_allowed is None else _object_ids(space, swap_allowed, "swap_allowed")
        self.is_allowed = torch.zeros(space.num_objects, dtype=torch.bool)  # objects a swap may produce
        self.is_allowed[torch.from_numpy(swaps)] = True
        self.queries = queries
        self.max_object_queries = int(max_object_queries)
        self.max_concept_queries = int(max_concept_queries)
        self.values = torch.from_numpy(space.all_objects().astype(np.int64))  # [U, C]
        self.partners = partner_table(space, self.pool.numpy(), self.max_objects)
        self.offsets = value_offsets(space.sizes)
        sizes = np.asarray(space.sizes, dtype=np.int64)
        self.strides = torch.from_numpy(np.concatenate([[1], np.cumprod(sizes)[:-1]]))
        lex = np.concatenate([np.cumprod(sizes[::-1])[::-1][1:], [1]])  # first concept most significant
        self.lex_order = torch.from_numpy(self.values.numpy() @ lex)  # rank of each object by its value tuple
        k, c = self.max_objects, space.num_concepts
        i, j, cc = torch.meshgrid(torch.arange(k), torch.arange(k), torch.arange(c), indexing="ij")
        keep = (i != j).reshape(-1)
        self._cand = (i.reshape(-1)[keep], j.reshape(-1)[keep], cc.reshape(-1)[keep])  # swap candidates

    def sample(self, batch_size: int, seed: int, step: int, *stream: int) -> Batch:
        """Batch ``step`` of the run seeded ``seed`` (of the batch family ``stream``, default training)."""
        return self.draw(batch_size, step_generator(seed, step, *stream))

    def draw(self, batch_size: int, g: torch.Generator) -> Batch:
        """A batch drawn with the generator ``g``."""
        b, k = int(batch_size), self.max_objects
        n = torch.randint(1, k + 1, (b,), generator=g)
        ids = self.pool[torch.randint(len(self.pool), (b, k), generator=g)]
        if self.partners is not None and k == 2:  # a relation: the second object holds the converse place
            ids[:, 1] = self._partner(ids[:, 0], g)
            n = torch.where(ids[:, 1] < 0, n.clamp(max=1), n)
        ids = torch.where(torch.arange(k)[None] < n[:, None], ids, torch.full_like(ids, NO_OBJECT))
        swap = self._swaps(ids, n, g)
        values = torch.where(ids[..., None] >= 0, self.values[ids.clamp(min=0)], torch.full((1,), NO_OBJECT))
        concept_labels = self.concept_labels(values)
        if self.queries == "all":
            concept_ids = torch.arange(concept_labels.shape[1])
            queries = torch.unique(torch.cat([ids[ids >= 0], swap[swap >= 0]]))
        else:
            concept_ids, queries = self.sampled_queries(ids, swap, g)
        object_labels = membership(ids, queries, self.space.num_objects)
        return Batch(
            scenes=values,
            scene_ids=ids,
            query_ids=queries,
            object_labels=object_labels,
            concept_labels=concept_labels[:, concept_ids],
            swap_ids=swap,
            concept_ids=concept_ids,
        )

    def sampled_queries(
        self, ids: torch.Tensor, swaps: torch.Tensor, g: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The research code's per-batch queries: ``(concept value tokens, object ids)``, both sorted.

        Concept values: a random ``max_concept_queries`` of the values present in the batch (all of
        them when fewer). Objects: the present objects (a random ``max_object_queries`` of them when
        more) plus the swaps. The draws follow the research code's order (a permutation of the present
        values in token order, then, only when over the cap, one of the present objects in
        value-tuple order), so under one generator state both pick the same queries.
        """
        present = ids[ids >= 0]
        values = self.values[present] + self.offsets
        tokens = torch.unique(values)
        tokens = tokens[torch.randperm(len(tokens), generator=g)[: self.max_concept_queries]]
        objects = torch.unique(present)
        objects = objects[torch.argsort(self.lex_order[objects])]
        if len(objects) > self.max_object_queries:
            objects = objects[torch.randperm(len(objects), generator=g)[: self.max_object_queries]]
        return torch.sort(tokens).values, torch.unique(torch.cat([objects, swaps[swaps >= 0]]))

    def _partner(self, first: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """Per first object, a uniformly drawn allowed object of the converse place (-1 where there is none)."""
        assert self.partners is not None
        table, counts, place = self.partners
        row = self.values[first, place]
        pick = (torch.rand(len(first), generator=g) * counts[row]).long()
        return table[row, pick.clamp(max=table.shape[1] - 1)]

    def _swaps(self, ids: torch.Tensor, n: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """One allowed binding swap per multi-object scene (-1 where none exists)."""
        i, j, c = self._cand
        if len(i) == 0:
            return torch.full((len(ids),), NO_OBJECT, dtype=torch.long)
        vals = self.values[ids.clamp(min=0)]  # [B, K, C]
        vi, vj = vals[:, i, c], vals[:, j, c]  # [B, cand]
        new = ids.clamp(min=0)[:, i] + (vj - vi) * self.strides[c]
        valid = (i[None] < n[:, None]) & (j[None] < n[:, None]) & (vi != vj) & self.is_allowed[new]
        score = torch.rand(valid.shape, generator=g).masked_fill_(~valid, -1.0)
        pick = score.argmax(1)
        chosen = new.gather(1, pick[:, None])[:, 0]
        return torch.where(valid.any(1), chosen, torch.full_like(chosen, NO_OBJECT))

    def concept_labels(self, values: torch.Tensor) -> torch.Tensor:
        """``[B, K, C]`` values -> ``[B, sum V]`` presence of every concept value."""
        b = len(values)
        tokens = values + self.offsets
        out = torch.zeros(b, int(sum(self.space.sizes)) + 1)
        flat = torch.where(values >= 0, tokens, torch.full_like(tokens, out.shape[1] - 1)).reshape(b, -1)
        out.scatter_(1, flat, 1.0)
        return out[:, :-1]


def converse_places(space: ConceptSpace) -> np.ndarray | None:
    """Per place value of a relation space, the index of its converse; None for any other space."""
    if PLACE not in space.concepts:
        return None
    names = list(space.values[space.concept_index(PLACE)])
    return np.array([names.index(CONVERSE[v]) for v in names], dtype=np.int64)


def partner_table(
    space: ConceptSpace, pool: np.ndarray, max_objects: int
) -> tuple[torch.Tensor, torch.Tensor, int] | None:
    """A relation space's partners: per place value, the ``pool`` objects holding its converse (a ``[P, M]`` table
    padded with -1), their numbers ``[P]`` and the place concept's index; None for any other space."""
    converse = converse_places(space)
    if converse is None:
        return None
    if max_objects > 2:
        raise BindscopeError(
            f"a relation relates two objects: a relation space's scenes hold at most 2, not max_objects {max_objects}"
        )
    place = space.concept_index(PLACE)
    held = space.all_objects()[pool, place]
    members = [pool[held == converse[p]] for p in range(len(converse))]
    table = np.full((len(members), max(1, *(len(m) for m in members))), NO_OBJECT, dtype=np.int64)
    for p, m in enumerate(members):
        table[p, : len(m)] = m
    counts = torch.tensor([len(m) for m in members], dtype=torch.long)
    return torch.from_numpy(table), counts, place


def membership(ids: torch.Tensor, queries: torch.Tensor, num_objects: int) -> torch.Tensor:
    """``[B, Q]``: 1 where query object ``queries[q]`` is among scene ``b``'s objects ``ids[b]`` (-1: none)."""
    column = torch.full((num_objects,), len(queries), dtype=torch.long)  # objects that are no query: a spare column
    column[queries] = torch.arange(len(queries))
    labels = torch.zeros(len(ids), len(queries) + 1)
    slots = torch.where(ids >= 0, column[ids.clamp(min=0)], torch.full_like(ids, len(queries)))
    labels.scatter_(1, slots, 1.0)
    return labels[:, :-1]


def _object_ids(space: ConceptSpace, ids: np.ndarray, name: str) -> np.ndarray:
    """Sorted unique object ids, checked to be non-empty and in range."""
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    if len(ids) == 0:
        raise BindscopeError(f"the sampler needs at least one {name} object; raise the train fraction")
    if ids[0] < 0 or ids[-1] >= space.num_objects:
        raise BindscopeError(f"{name} object ids must lie in [0, {space.num_objects})")
    return ids


def fixed_scenes(
    space: ConceptSpace, objects: np.ndarray, num_objects: int, cap: int, seed: int, require: np.ndarray | None = None
) -> np.ndarray:
    """Evaluation scenes ``[N, num_objects, C]`` from ``objects``: every ordered tuple, or ``cap`` of them.

    With ``require``, only tuples holding at least one of those objects. The tuples are drawn
    uniformly without replacement (seeded), so N = min(cap, number of qualifying tuples).
    """
    objects = np.unique(np.asarray(objects, dtype=np.int64))
    needed = np.unique(np.asarray(require, dtype=np.int64)) if require is not None else objects
    n, k = len(objects), num_objects
    if converse_places(space) is not None and k == 2:
        return _cap(space, relation_pairs(space, objects, needed), cap, np.random.default_rng(seed))
    qualifying = n**k - (n - int(np.isin(objects, needed).sum())) ** k
    rng = np.random.default_rng(seed)
    if n**k <= max(4 * cap, ENUMERATE_UP_TO):
        grid = np.stack(np.meshgrid(*[objects] * k, indexing="ij"), -1).reshape(-1, k)
        grid = grid[np.isin(grid, needed).any(1)]
    else:  # rejection sampling: uniform over the qualifying tuples
        grid = np.empty((0, k), dtype=np.int64)
        draws = min(MAX_DRAWS, int(np.ceil(4 * cap * n**k / qualifying)))
        while len(grid) < min(cap, qualifying):
            tuples = objects[rng.integers(n, size=(draws, k))]
            grid = np.unique(np.concatenate([grid, tuples[np.isin(tuples, needed).any(1)]]), axis=0)
    return _cap(space, grid, cap, rng)


def _cap(space: ConceptSpace, grid: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """The scenes ``[N, K, C]`` of the object tuples ``grid``, or of a seeded ``cap`` of them."""
    if len(grid) > cap:
        grid = grid[np.sort(rng.choice(len(grid), cap, replace=False))]
    return space.object_values(grid.reshape(-1)).reshape(len(grid), grid.shape[1], space.num_concepts)


def relation_pairs(space: ConceptSpace, objects: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """Every ordered pair ``[N, 2]`` of ``objects`` whose places are converse (a relation), holding at least one of
    ``needed``; an error where there is none."""
    converse = converse_places(space)
    assert converse is not None
    held = space.all_objects()[objects, space.concept_index(PLACE)]
    pairs = [
        np.stack(np.meshgrid(objects[held == p], objects[held == q], indexing="ij"), -1).reshape(-1, 2)
        for p, q in enumerate(converse)
    ]
    grid = np.concatenate(pairs)
    grid = grid[np.isin(grid, needed).any(1)]
    if not len(grid):
        raise BindscopeError(
            f"no two of these {len(objects)} objects hold converse places, so no relation scene can be made of them; "
            "choose another fraction or seed, or a space with more objects"
        )
    return grid
