"""Retrieval's float32 pass (docs/method/07-crossmodal.md): each query's best keys by cosine, in bounded blocks.

Queries and keys are unit rows. Their cosines are taken :data:`CHUNK` queries x :func:`key_block` keys at a
time into one reused buffer of at most :data:`BLOCK_BYTES`, never queries x keys whole. Of each block a query
keeps its ``count`` best keys (``torch.topk``) and the cosines of its hit keys that the block holds; the best are
merged block after block. When every scene asks (image -> text and text -> image over the same scenes), one
product serves both directions: the text -> image cosines of a block are the transpose of its image -> text ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

#: Queries per block (and per progress tick of a direction).
CHUNK = 2048
#: Keys per block at most: few enough that a query's hit keys lie in few of its blocks, and the others are skipped.
KEYS = 2048
#: Bytes of float32 cosines one block may hold: 64 MiB.
BLOCK_BYTES = 64 * 2**20
#: Keys per segment: a query ranks only the segments of a block whose best cosine reaches its floor ...
SEGMENT = 32
#: ... when they are at most this many (else it ranks the whole block).
SEGMENTS = 4


def key_block(rows: int, budget: int = BLOCK_BYTES) -> int:
    """Keys per block: :data:`KEYS`, or fewer (at least one segment) so that ``rows`` queries' float32 cosines
    take at most ``budget`` bytes."""
    return max(SEGMENT, min(KEYS, budget // (4 * max(rows, 1))) // SEGMENT * SEGMENT)


def padded(n: int) -> int:
    """``n`` rounded up to whole segments."""
    return -(-n // SEGMENT) * SEGMENT


@dataclass(frozen=True)
class Rule:
    """What the pass keeps of each query: its ``count`` best keys among those that reach ``window`` below its best
    hit in each of ``spans`` (its kinds of hit columns; a lower key is neither tied with that best hit nor above
    it), and where fewer reach it, -inf in their place. ``slack``: how far a seed (:meth:`Candidates.start`) may
    lie from a block's cosine of the same pair."""

    count: int
    spans: tuple[slice, ...]
    window: float
    slack: float


@dataclass
class Candidates:
    """Per query: its best keys by float32 cosine (``values``, best first, and ``keys``; -inf and -1 where fewer
    reach its floor), the float32 cosine of each of its hit keys (``hits``, in the order of its hit columns; -inf
    where padded or not yet seen) and the lowest cosine a key must reach to be kept (``floor``; None where every
    block is ranked whole, as when a query sees one block)."""

    values: torch.Tensor
    keys: torch.Tensor
    hits: torch.Tensor
    floor: torch.Tensor | None
    rule: Rule

    @classmethod
    def start(cls, like: torch.Tensor, keys: int, hit_width: int, rule: Rule, seeds: torch.Tensor | None) -> Candidates:
        """No key seen yet, for the queries ``like`` (their count, dtype and device). ``seeds``: per query, the
        float32 cosine of one of its hit keys (-inf where none); its best hit is no lower, so a key more than the
        window below it is never needed (None: keep every block's best)."""
        rows, dtype, device = len(like), like.dtype, like.device
        values = torch.full((rows, min(rule.count, keys)), float("-inf"), dtype=dtype, device=device)
        ids = torch.full(values.shape, -1, dtype=torch.int64, device=device)
        hits = torch.full((rows, hit_width), float("-inf"), dtype=dtype, device=device)
        floor = None if seeds is None else seeds - rule.window - rule.slack
        return cls(values, ids, hits, floor, rule)

    def add(self, scores: torch.Tensor, start: int, n: int, hit_cols: torch.Tensor, first: int, fresh: bool) -> None:
        """Merge into queries ``first ..`` the block ``scores`` ``[rows, padded(n)]`` (any strides; -inf past
        ``n``) of keys ``start .. start + n``; ``hit_cols``: those queries' hit keys (-1 where padded); ``fresh``:
        the first block those queries see."""
        rows = slice(first, first + len(scores))
        local = hit_cols - start
        inside = (local >= 0) & (local < n)
        hits = torch.where(inside, scores.gather(1, local.clamp(0, n - 1)), self.hits[rows])
        self.hits[rows] = hits
        if self.floor is None:
            value, key = scores.contiguous().topk(min(self.values.shape[1], scores.shape[1]), dim=1)
            self.merge(rows, value, key + start, fresh)
            return
        seen = torch.stack([hits[:, s].amax(dim=1) for s in self.rule.spans], dim=1).amin(dim=1) - self.rule.window
        floor = torch.maximum(self.floor[rows], seen)
        self.floor[rows] = floor
        high = segment_highs(scores)
        reach = (high >= floor[:, None]) & (high > self.values[rows, -1:])
        count = reach.count_nonzero(dim=1)
        few = torch.nonzero((count > 0) & (count <= SEGMENTS)).ravel()
        if len(few):
            self.merge(few + first, *best_segments(scores, few, reach[few], self.values.shape[1], start), fresh)
        many = torch.nonzero(count > SEGMENTS).ravel()
        if len(many):
            value, key = scores[many].topk(min(self.values.shape[1], scores.shape[1]), dim=1)
            self.merge(many + first, value, key + start, fresh)

    def merge(self, at: torch.Tensor | slice, value: torch.Tensor, key: torch.Tensor, fresh: bool = False) -> None:
        """Keep the best of queries ``at``'s candidates and the new ``value`` / ``key`` ``[len(at), m]`` (``fresh``:
        they have none yet)."""
        if not fresh or value.shape[1] < self.values.shape[1]:
            value, key = torch.cat([self.values[at], value], dim=1), torch.cat([self.keys[at], key], dim=1)
            value, where = value.topk(self.values.shape[1], dim=1)
            key = key.gather(1, where)
        self.values[at], self.keys[at] = value, key

    @classmethod
    def stacked(cls, parts: list[Candidates], keys: int) -> Candidates:
        """The candidates of ``parts`` one after another, the keys of part ``i`` counted on by ``i * keys``."""
        ids = [torch.where(p.keys >= 0, p.keys + i * keys, -1) for i, p in enumerate(parts)]
        values, hits = torch.cat([p.values for p in parts]), torch.cat([p.hits for p in parts])
        return cls(values, torch.cat(ids), hits, None, parts[0].rule)

    def top(self) -> torch.Tensor:
        """Per query, its lowest key of the highest float32 cosine among the candidates."""
        first = self.values == self.values[:, :1]
        return torch.where(first, self.keys, torch.iinfo(torch.int64).max).amin(dim=1)

    def rows(self, at: slice) -> Candidates:
        """The candidates of queries ``at``."""
        floor = None if self.floor is None else self.floor[at]
        return Candidates(self.values[at], self.keys[at], self.hits[at], floor, self.rule)


def segment_highs(scores: torch.Tensor) -> torch.Tensor:
    """The best cosine of each segment of each row of ``scores`` ``[q, padded(n)]``, ``[q, S]``, reduced along
    whichever axis the block is laid out on (a row-major block or its transpose)."""
    if scores.stride(1) == 1:
        return scores.unflatten(1, (-1, SEGMENT)).amax(dim=2)
    return scores.T.unflatten(0, (-1, SEGMENT)).amax(dim=1).T


def best_segments(
    scores: torch.Tensor, rows: torch.Tensor, reach: torch.Tensor, count: int, start: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query of ``rows``, the ``count`` best cosines (and keys) of its segments that ``reach`` (at most
    :data:`SEGMENTS` of them) in ``scores`` ``[q, padded(n)]`` (keys ``start ..``); -inf where fewer."""
    total = reach.shape[1]
    order = torch.where(reach, torch.arange(total, device=reach.device), total)
    chosen = order.topk(min(SEGMENTS, total), dim=1, largest=False).values  # [r, m]: its reaching segments first
    valid = chosen < total
    keys = (chosen.clamp(max=total - 1)[:, :, None] * SEGMENT + torch.arange(SEGMENT, device=rows.device)).flatten(1)
    picked = scores[rows[:, None], keys].masked_fill(~valid.repeat_interleave(SEGMENT, dim=1), float("-inf"))
    value, where = picked.topk(min(count, picked.shape[1]), dim=1)
    return value, keys.gather(1, where) + start


def blocks(total: int, size: int) -> Iterator[slice]:
    """Consecutive slices of ``size`` covering ``range(total)``."""
    for start in range(0, total, size):
        yield slice(start, min(start + size, total))


def products(queries: torch.Tensor, keys: torch.Tensor, block: int) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(start, n, scores)``: ``queries @ keys[start:start + n].T`` block after block (``n <= block`` keys), in
    one reused buffer ``[padded(queries), padded(n)]`` whose padding is -inf."""
    rows = padded(len(queries))
    buffer = torch.empty(rows * padded(min(block, len(keys))), dtype=queries.dtype, device=queries.device)
    for part in blocks(len(keys), block):
        n = part.stop - part.start
        out = buffer[: rows * padded(n)].view(rows, padded(n))
        torch.mm(queries, keys[part].T, out=out[: len(queries), :n])
        out[: len(queries), n:] = float("-inf")
        out[len(queries) :] = float("-inf")
        yield part.start, n, out


def seeds(queries: torch.Tensor, keys: torch.Tensor, hit_cols: torch.Tensor, spans: tuple[slice, ...]) -> torch.Tensor:
    """Per query, its float32 cosine with its first hit key where every kind of hit (``spans``) counts that key,
    else -inf, :data:`CHUNK` queries at a time: every kind's best hit is no lower."""
    own = hit_cols[:, 0]
    shared = own >= 0
    for span in spans:
        shared &= (hit_cols[:, span] == own[:, None]).any(dim=1)
    out = torch.empty(len(queries), dtype=queries.dtype, device=queries.device)
    for rows in blocks(len(queries), CHUNK):
        out[rows] = torch.linalg.vecdot(queries[rows], keys.index_select(0, own[rows].clamp(min=0)))
    return out.masked_fill(~shared, float("-inf"))


def scan(
    queries: torch.Tensor,
    keys: torch.Tensor,
    hit_cols: torch.Tensor,
    rule: Rule,
    tick: Callable[[], object] | None = None,
    budget: int = BLOCK_BYTES,
) -> Candidates:
    """Each query's best keys (unit rows, float32) and its hits' cosines (``hit_cols`` ``[Q, H]``; where a query
    sees several blocks, :func:`seeds` its floor), :data:`CHUNK` queries at a time (``tick()`` after each)."""
    block = key_block(min(CHUNK, len(queries)), budget)
    seed = seeds(queries, keys, hit_cols, rule.spans) if len(keys) > block else None
    found = Candidates.start(queries, len(keys), hit_cols.shape[1], rule, seed)
    for rows in blocks(len(queries), CHUNK):
        for start, n, scores in products(queries[rows], keys, block):
            found.add(scores[: rows.stop - rows.start], start, n, hit_cols[rows], rows.start, start == 0)
        if tick is not None:
            tick()
    return found


def scan_both(
    image: torch.Tensor,
    text: torch.Tensor,
    hit_cols: torch.Tensor,
    rule: Rule,
    tick: Callable[[], object] | None = None,
    budget: int = BLOCK_BYTES,
) -> tuple[Candidates, Candidates]:
    """:func:`scan` image -> text and text -> image over the same scenes (row ``i`` of both is scene ``i``; its
    hit columns serve both) with one product per block: the text -> image block is its transpose (``tick()`` twice
    per :data:`CHUNK`)."""
    n = len(image)
    block = key_block(min(CHUNK, n), budget)
    seed = seeds(image, text, hit_cols, rule.spans) if n > min(block, CHUNK) else None  # a cosine serves both ways
    to_text = Candidates.start(image, n, hit_cols.shape[1], rule, seed if n > block else None)
    to_image = Candidates.start(text, n, hit_cols.shape[1], rule, seed if n > CHUNK else None)
    for rows in blocks(n, CHUNK):
        for start, size, scores in products(image[rows], text, block):
            to_text.add(scores[: rows.stop - rows.start], start, size, hit_cols[rows], rows.start, start == 0)
            keys = hit_cols[start : start + size]
            to_image.add(scores.T[:size], rows.start, rows.stop - rows.start, keys, start, rows.start == 0)
        if tick is not None:
            tick()
            tick()
    return to_text, to_image
