"""The tie rule of retrieval (docs/method/07-crossmodal.md), read off each query's candidates.

A query's keys are counted around its best hit: those that beat it, those tied with it (cosines within the swap
tests' tolerance, :func:`~bindscope.analyses.crossmodal.swaps.beats`) and the hits among those; a top-k list takes
the keys above first and draws the rest of its places among the tied ones at random (:func:`tie_credit`).

Counted on float32 candidates (:mod:`~bindscope.analyses.crossmodal.scan`) with the tolerance widened by
:data:`FLOAT32_SLACK`, a bound on float32's error; where a key other than a hit lies in that window the keys in
it are judged again on float64 cosines, the swap tests' precision (:func:`near_counts`), and where the tied keys
may run past the candidates every key is (:func:`deep_counts`). So the two tests judge one tie alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bindscope.analyses.crossmodal.scan import BLOCK_BYTES, Candidates, Rule, blocks
from bindscope.analyses.crossmodal.swaps import TIE_TOLERANCE, beats

TOP = (1, 5)
KINDS = ("strict", "concept")
#: Each kind's hit columns in :meth:`~bindscope.analyses.crossmodal.retrieval.HitKeys.columns`.
SPANS = {"strict": slice(0, 2), "concept": slice(2, None)}
#: Keys a query keeps while scanning: as many as a top-k list needs and one more, to see whether ties run past it.
CANDIDATES = max(TOP) + 1
#: A bound on how far a float32 cosine of unit rows lies from the float64 one: a key within this (plus the tie
#: tolerance) of a query's best hit in float32 is judged again on float64 cosines, so that the tie rule sees the
#: cosines the swap tests see.
FLOAT32_SLACK = 1e-4
#: The float32 window around a best hit: keys farther than this lie on the same side of it in float64.
WIDE = TIE_TOLERANCE + FLOAT32_SLACK
#: What the float32 pass keeps of each query (:class:`~bindscope.analyses.crossmodal.scan.Candidates`): its best
#: keys within :data:`WIDE` of its best hit and above.
RULE = Rule(CANDIDATES, tuple(SPANS.values()), WIDE, FLOAT32_SLACK)
#: Query-key pairs scored in float64 at a time.
PAIRS = 256
#: The smallest norm a row is divided by (as ``torch.nn.functional.normalize``): a zero row has cosine 0.
EPS = 1e-12
#: Per query row: the keys that beat its best hit, the keys tied with it (itself included), the hits among those.
Counts = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def tie_counts(scores: torch.Tensor, hit_scores: torch.Tensor, widen: float = 0.0) -> Counts:
    """Per query row, around its best hit (the largest of ``hit_scores``, -inf where no hit): the keys of
    ``scores`` that beat it, the keys tied with it (itself included) and the hits among those, by the swap tests'
    rule (:func:`~bindscope.analyses.crossmodal.swaps.beats`) with the tolerance widened by ``widen``. Rows run
    along the last axis but one (``hit_scores`` may have more leading axes, such as one per kind)."""
    best = hit_scores.amax(dim=-1, keepdim=True)
    tolerance = TIE_TOLERANCE + widen
    above = beats(scores, best, tolerance).count_nonzero(dim=-1)
    tied = (~beats(best, scores, tolerance)).count_nonzero(dim=-1) - above
    return above, tied, (~beats(best, hit_scores, tolerance)).count_nonzero(dim=-1)


def tie_credit(above: torch.Tensor, tied: torch.Tensor, hits: torch.Tensor, k: int) -> torch.Tensor:
    """Per query row, the chance that a top-``k`` list with ties broken uniformly at random holds a hit
    (:func:`tie_counts`: the keys above the best hit go first; it and the keys tied with it share the
    places left). Top-1: 1 when the best hit beats every other key; ``m / t`` when ``m`` hits tie with
    ``t - m`` other keys (0.5 for the correct caption tied with one swap, as the swap tests count it);
    0 when a key beats it.
    """
    return tie_credits(above, tied, hits, (k,))[k]


def tie_credits(
    above: torch.Tensor, tied: torch.Tensor, hits: torch.Tensor, tops: tuple[int, ...]
) -> dict[int, torch.Tensor]:
    """:func:`tie_credit` at every ``k`` of ``tops`` at once: a top-``k`` list gives ``k - above`` places to the
    tied keys, and misses when the keys drawn for them one after another are all misses (the running product of
    each draw's chance)."""
    i = torch.arange(max(tops), device=above.device)
    draws = (tied[..., None] - hits[..., None] - i).clamp(min=0).double() / (tied[..., None] - i).clamp(min=1)
    running = torch.cat([torch.ones_like(draws[..., :1]), draws.cumprod(dim=-1)], dim=-1)
    out = {}
    for k in tops:
        places = (k - above).clamp(min=0)
        out[k] = torch.where(places > 0, 1.0 - running.gather(-1, places[..., None])[..., 0], 0.0)
    return out


@dataclass(frozen=True)
class Exact:
    """float64 cosines of queries (raw rows) with keys (raw rows of ``tables``: the queries come in equal groups,
    one per table, each ranking its table's keys; a key's id counts on through the tables), within ``budget`` bytes
    at a time."""

    queries: torch.Tensor
    tables: tuple[torch.Tensor, ...]
    budget: int = BLOCK_BYTES

    @property
    def size(self) -> int:
        """Keys per table."""
        return len(self.tables[0])

    def key_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """The raw rows of the keys ``ids`` (sorted)."""
        firsts = self.size * torch.arange(1, len(self.tables), device=ids.device)
        bounds = [0, *torch.searchsorted(ids, firsts).tolist(), len(ids)]
        parts = [
            table.index_select(0, ids[start:stop] - i * self.size)
            for i, (table, start, stop) in enumerate(zip(self.tables, bounds, bounds[1:]))
        ]
        return torch.cat(parts)

    def pairs(self, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``cos(queries[rows[i]], key keys[i])`` for every i: each query and key asked scaled to unit norm once,
        then the products :data:`PAIRS` at a time (small temporaries stay in cache)."""
        asked, row_at = torch.unique(rows, return_inverse=True)
        used, key_at = torch.unique(keys, return_inverse=True)
        q = torch.nn.functional.normalize(self.queries.index_select(0, asked).double(), dim=1, eps=EPS)
        k = torch.nn.functional.normalize(self.key_rows(used).double(), dim=1, eps=EPS)
        out = torch.empty(len(rows), dtype=torch.float64, device=k.device)
        for part in blocks(len(rows), PAIRS):
            out[part] = torch.linalg.vecdot(q.index_select(0, row_at[part]), k.index_select(0, key_at[part]))
        return out

    def counts(self, rows: torch.Tensor, best: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Over every key of its table, per query ``rows`` and column of ``best`` ``[r, K]``: the keys that beat it
        and the keys it does not beat (float64 blocks of keys: their rows and cosines within the budget)."""
        above = torch.zeros(best.shape, dtype=torch.int64, device=best.device)
        kept = torch.zeros_like(above)
        group = rows // (len(self.queries) // len(self.tables))
        for i, table in enumerate(self.tables):
            mine = torch.nonzero(group == i).ravel()
            q = torch.nn.functional.normalize(self.queries[rows[mine]].double(), dim=1, eps=EPS)
            for part in blocks(len(table), max(1, self.budget // (8 * (len(mine) + table.shape[1])))):
                scores = q @ torch.nn.functional.normalize(table[part].double(), dim=1, eps=EPS).T
                for j in range(best.shape[1]):
                    level = best[mine, j : j + 1]
                    above[mine, j] += beats(scores, level).count_nonzero(dim=1)
                    kept[mine, j] += (~beats(level, scores)).count_nonzero(dim=1)
        return above, kept


def kind_hits(hits: torch.Tensor) -> torch.Tensor:
    """``hits`` ``[..., q, H]`` (in the columns of :data:`SPANS`) once per kind, ``[K, ..., q, H]``: -inf
    in the columns the kind does not count."""
    width = hits.shape[-1]
    column = torch.arange(width, device=hits.device)
    member = torch.stack([(column >= span.start) & (column < (span.stop or width)) for span in SPANS.values()])
    return torch.where(member.view(len(SPANS), *[1] * (hits.dim() - 1), width), hits, float("-inf"))


def judge(found: Candidates, cols: torch.Tensor, exact: Exact) -> Counts:
    """Per kind and query ``[K, q]``, the :data:`Counts` of the tie rule over every key: read off the query's
    float32 candidates (``found``; hit keys ``cols``) with the tolerance widened by :data:`FLOAT32_SLACK`; on
    float64 cosines of the keys in that window where a key other than a hit lies in it (:func:`near_counts`); over
    every key in float64 where the tied keys may run past the candidates (:func:`deep_counts`)."""
    hits = kind_hits(found.hits)
    counts = tie_counts(found.values, hits, FLOAT32_SLACK)
    level = hits.amax(dim=-1, keepdim=True)
    deep = torch.zeros(len(cols), dtype=torch.bool, device=cols.device)
    if found.values.shape[1] < exact.size:
        deep = (~beats(level[..., 0], found.values[:, -1], WIDE) & (counts[0] < max(TOP))).any(dim=0)
    near = (counts[1] > counts[2]) & ~deep
    if bool(near.any()):
        counts = near_counts(found, cols, (hits, level), near, exact, counts)
    if bool(deep.any()):
        counts = deep_counts(torch.nonzero(deep).ravel(), cols, exact, counts)
    return counts


def near_counts(
    found: Candidates,
    cols: torch.Tensor,
    kinds: tuple[torch.Tensor, torch.Tensor],
    near: torch.Tensor,
    exact: Exact,
    counts: Counts,
) -> Counts:
    """``counts`` with the queries ``near`` ``[K, q]`` counted again on float64 cosines: the candidates and hits
    within :data:`WIDE` of the best hit in float32 (``kinds``: the hits per kind and their best) are judged in
    float64; the keys above that window beat it."""
    hits, level = kinds
    inside = ~beats(found.values, level, WIDE) & ~beats(level, found.values, WIDE) & near[..., None]
    hit_inside = ~beats(level, hits, WIDE) & (cols >= 0) & near[..., None]
    rows, at = torch.nonzero(inside.any(dim=0), as_tuple=True)
    hit_rows, hit_at = torch.nonzero(hit_inside.any(dim=0), as_tuple=True)
    values = exact.pairs(torch.cat([rows, hit_rows]), torch.cat([found.keys[rows, at], cols[hit_rows, hit_at]]))
    cand = torch.full(found.values.shape, float("nan"), dtype=torch.float64, device=cols.device)
    cand[rows, at] = values[: len(rows)]
    exact_hits = torch.full(cols.shape, float("-inf"), dtype=torch.float64, device=cols.device)
    exact_hits[hit_rows, hit_at] = values[len(rows) :]
    exact_hits = torch.where(hit_inside, exact_hits, float("-inf"))
    best = exact_hits.amax(dim=-1, keepdim=True)
    up = (inside & beats(cand, best)).count_nonzero(dim=-1)
    above = beats(found.values, level, WIDE).count_nonzero(dim=-1) + up
    tied = (inside & ~beats(best, cand)).count_nonzero(dim=-1) - up
    hit = (hit_inside & ~beats(best, exact_hits)).count_nonzero(dim=-1)
    return tuple(torch.where(near, new, old) for new, old in zip((above, tied, hit), counts))  # type: ignore[return-value]


def deep_counts(rows: torch.Tensor, cols: torch.Tensor, exact: Exact, counts: Counts) -> Counts:
    """``counts`` with queries ``rows`` counted over every key on float64 cosines."""
    mine = cols[rows]
    hits = torch.full(mine.shape, float("-inf"), dtype=torch.float64, device=cols.device)
    pair, at = torch.nonzero(mine >= 0, as_tuple=True)
    hits[pair, at] = exact.pairs(rows[pair], mine[pair, at])
    hits = kind_hits(hits)
    best = hits.amax(dim=-1)
    above, kept = exact.counts(rows, best.T)
    out = tuple(c.clone() for c in counts)
    out[0][:, rows] = above.T
    out[1][:, rows] = (kept - above).T
    out[2][:, rows] = (~beats(best[..., None], hits)).count_nonzero(dim=-1)
    return out  # type: ignore[return-value]
