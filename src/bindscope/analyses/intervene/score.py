"""Scoring edits in blocks (docs/method/05-interventions.md): cosine retrieval against every scene, and probes.

An edit is ``x' = x - k (T[src] - T[tgt])`` for a base scene ``x`` and two rows of a direction
table ``T`` (a bank's object vectors, or the bag-of-concepts value means); an edit of both objects (a relation
edit) adds a second pair, ``x' = x - k (T[src] - T[tgt] + T[src2] - T[tgt2])``. Its scores against the
unit-norm scenes ``Ŷ`` are ``Ŷ x' = Ŷ x - k (Ŷ T[src] - Ŷ T[tgt])`` (the cosine up to the factor
``1 / |x'|``, which changes neither the best match nor ranks). So every edit of every variant and
``k`` needs only a row of the scene Gram matrix ``Ŷ Ŷᵀ`` (scaled by ``|x|``) and two rows of
``P = T Ŷᵀ``: a gather and a subtraction instead of a matrix product.

Memory is bounded (``memory`` bytes, :data:`MEMORY_BUDGET` by default): no ``cases x scenes`` array is ever
held. The scenes are cut into blocks of :func:`block_size` scenes, and the cases are scored against one block
of candidates at a time, keeping a running best match (the research code's: on a tie the lowest row), a running
count of scenes scoring strictly above the expected one (its rank) and a running count of *rivals*: scenes
other than the expected one and its order-reversed scene that score as high as the better of the two, ties
included (a bound hit needs none). The work per block of candidates is linear in the cases. Two layouts
(:func:`plan_layout` picks the cheaper):

- *block pairs*, where most scenes are the base of a case (every edit scored): the Gram matrix one block pair
  ``(I, J ≥ I)`` at a time (half the products, by symmetry), each block serving the cases based in ``I``
  against the candidates in ``J`` and those based in ``J`` against ``I``; the projections ``P`` of as many
  blocks as the budget holds are kept, the others computed again when needed;
- *base rows*, where few scenes are bases (a sample of the cases): the Gram rows of the bases alone, against
  one block of candidates at a time (``bases x scenes`` products, not ``scenes²``).

Matrix products run on :func:`~bindscope.core.threads.threads_for` their size. On the CPU the element-wise work
of a block runs in numpy on sub-chunks of cases sized to stay in cache, split over
:func:`~bindscope.core.threads.shared_pool` where there is enough of it; on another device it runs in torch.

Two scores closer than :data:`TIE_TOL` in cosine are a tie: the expected scene's score is computed once,
directly, the candidates' from Gram blocks, and the two paths differ in the last float32 bits, so scenes
with the same embedding (which a bag of concepts gives a scene and its binding swap) never score exactly alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bindscope.analyses.intervene.edits import EditPlan
from bindscope.core.threads import shared_pool, thread_count, threads_for

#: Bytes the scoring's working arrays may take (Gram blocks, projections, score buffers, edited vectors), beside
#: the embeddings themselves and the per-case results.
MEMORY_BUDGET = 2 << 30
#: Most scenes per block (a row's counts within a block fit 16 bits).
MAX_BLOCK = 32_768
#: Elements of one score buffer of a sub-chunk of cases on the CPU: large enough to keep Python's overhead
#: per numpy call small, small enough to stay near a core's cache.
CACHE_ELEMENTS = 1 << 18
#: Element-wise work (cases x candidates x jobs) of one block below which it runs on the calling thread: handing
#: it to the pool costs more than it saves.
POOL_ELEMENTS = 1 << 22
#: Cosines closer than this are a tie (neither scores strictly higher). Above the float32 difference of the two
#: paths (measured up to 2.2e-6 on 384-wide MiniLM embeddings, 0 on a bag's small integer counts); a near tie
#: counts as a miss of a bound hit, so the tolerance can only lower a bound score, never raise it.
TIE_TOL = 1e-5
#: ``hits(x_edited [m, D], expected [m]) -> (paper probe hit, bound probe hit or None)``, bool ``[m]`` each.
ProbeHits = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]


@dataclass(frozen=True)
class Job:
    """One variant of one plan: rows ``src`` / ``tgt`` of table ``table`` (None: no edit, x itself), and for an
    edit of two objects (a relation edit) the second object's rows ``src2`` / ``tgt2``: ``x' = x - k (T[src] -
    T[tgt] + T[src2] - T[tgt2])``."""

    plan: EditPlan
    variant: str
    table: str | None
    src: np.ndarray | None = None
    tgt: np.ndarray | None = None
    src2: np.ndarray | None = None
    tgt2: np.ndarray | None = None

    @property
    def valid(self) -> np.ndarray:
        """Cases whose bank has every vector."""
        ok = np.ones(len(self.plan), dtype=bool)
        for rows in (self.src, self.tgt, self.src2, self.tgt2):
            if rows is not None:
                ok &= rows >= 0
        return ok

    @property
    def pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (source, target) row pairs of the edit: one, or two for an edit of both objects."""
        found = [(self.src, self.tgt), (self.src2, self.tgt2)]
        return [(s, t) for s, t in found if s is not None and t is not None]


@dataclass
class Scores:
    """Per-case outcomes of one job at one ``k`` (invalid cases: retrieved -1, rank 0, NaN cosines, no hits).

    ``rank``: 1 + the scenes scoring strictly higher than the expected one (a tie ranks 1); ``bound_hit``: no
    scene but the expected one and its reversed order scores as high as the better of the two (a tie is a
    miss); ``probe_hit``: the paper's probe hit; ``bound_probe_hit``: the object probe reads the expected scene
    and tells it from its bag class (None: no object probe).
    """

    valid: np.ndarray
    expected: np.ndarray
    retrieved: np.ndarray
    rank: np.ndarray
    cos_expected: np.ndarray
    cos_retrieved: np.ndarray
    probe_hit: np.ndarray
    bound_hit: np.ndarray
    bound_probe_hit: np.ndarray | None = None

    @property
    def hit(self) -> np.ndarray:
        """Per case: the best match is the expected scene (the research code's hit: a tie goes to the lowest
        row, so a tie with a scene of a lower row is a miss and one with a higher row a hit)."""
        return self.retrieved == self.expected


def unit_rows(y: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit norm (all-zero rows stay zero)."""
    return y / y.norm(dim=1, keepdim=True).clamp_min(1e-12)


def block_size(num_scenes: int, memory: int = MEMORY_BUDGET) -> int:
    """Scenes per block: a Gram block and its transposed copy (float32 ``[B, B]`` each) take at most a quarter of
    ``memory`` bytes (at most :data:`MAX_BLOCK`)."""
    return int(max(1, min(num_scenes, MAX_BLOCK, math.isqrt(max(1, memory // 32)))))


@dataclass(frozen=True)
class Layout:
    """How the scenes are cut for a memory budget (:func:`plan_layout`).

    ``block``: scenes per block of candidates. ``bases``: the scenes the cases are based in, scored by their own
    Gram rows (``rows`` of them per product), or None: by block pairs. ``cached``: the blocks (the first ones)
    whose projections are kept; the others' are computed again when needed.
    """

    block: int
    bases: np.ndarray | None
    rows: int
    cached: int


def plan_layout(num_scenes: int, bases: np.ndarray, table_rows: int, memory: int = MEMORY_BUDGET) -> Layout:
    """The cheaper of block pairs and base rows for scenes ``num_scenes``, the base scenes ``bases`` (unique) and
    direction tables of ``table_rows`` rows in all, within ``memory`` bytes: a quarter for Gram blocks, half for
    projections.

    Examples
    --------
    >>> import numpy as np
    >>> from bindscope.analyses.intervene.score import plan_layout
    >>> plan_layout(10_000, np.arange(10_000), 300).bases is None  # every scene a base: block pairs
    True
    >>> len(plan_layout(10_000, np.arange(0, 10_000, 50), 300).bases)  # 200 bases: their own rows
    200
    """
    block = block_size(num_scenes, memory)
    nb = -(-num_scenes // block)
    cached = int(min(nb, (memory // 2) // max(1, 4 * table_rows * block)))
    # projections computed again under block pairs: a row's own block once, then each later block not kept
    again = sum(int(bi >= cached) + max(0, nb - max(bi + 1, cached)) for bi in range(nb))
    pairs = num_scenes * (num_scenes + block) / 2 + table_rows * block * (min(cached, nb) + again)
    rows = len(bases) * num_scenes + table_rows * num_scenes
    if rows >= pairs:
        return Layout(block, None, block, cached)
    per_product = max(1, min(len(bases), (memory // 4) // (4 * block)))
    return Layout(block, np.asarray(bases, dtype=np.int64), per_product, 0)


def row_counts(hits: np.ndarray) -> np.ndarray:
    """The true entries per row of a boolean ``[m, width]`` (width below 2^16), as int64."""
    return hits.view(np.uint8).sum(axis=1, dtype=np.uint16).astype(np.int64)


def count_over(
    scores: np.ndarray,
    rowmax: np.ndarray,
    threshold: np.ndarray,
    strict: bool,
    own: Sequence[np.ndarray],
    flags: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The rows with a score over ``threshold`` (``>`` when ``strict``, else ``>=``) and how many each has,
    less the row's own entries: ``own`` holds per row a column never counted (one outside ``[0, width)``: none).

    Parameters
    ----------
    scores
        ``[m, width]`` scores of ``m`` cases against ``width`` candidates; ``rowmax`` their row maxima.
    threshold
        ``[m]`` per case.
    flags
        A boolean buffer of at least ``scores``' shape to compare into (None: one is made).
    """
    over = np.greater if strict else np.greater_equal
    need = np.nonzero(over(rowmax, threshold))[0]
    if not len(need):
        return need, need.astype(np.int64)
    if 2 * len(need) > len(scores):  # most rows: compare in place rather than copy them out
        out = None if flags is None else flags[: len(scores), : scores.shape[1]]
        counts = row_counts(over(scores, threshold[:, None], out=out))[need]
    else:
        counts = row_counts(over(scores[need], threshold[need, None]))
    width = scores.shape[1]
    for column in own:
        col = column[need]
        inside = np.nonzero((col >= 0) & (col < width))[0]
        if len(inside):
            rows = need[inside]
            counts[inside] -= over(scores[rows, col[inside]], threshold[rows])
    return need, counts


def job_ks(job: Job, ks: Sequence[float]) -> list[float]:
    """The strengths a job is scored at: every ``k``, or only 0 for the unedited scene."""
    return [0.0] if job.table is None else [float(k) for k in ks]


@dataclass
class _Running:
    """The running reductions of one job at one k (numpy arrays on the CPU, tensors on another device): the best
    match, the count of scenes strictly above the expected one (beyond the tie tolerance, ``above_at``) and the
    rivals at or above the better of the expected and the reversed scene (within it, ``tie_at``; counted until
    the first block that has one: only none or some matters); and,
    from the edited vectors' one pass, their expected score, norm and probe hits (numpy)."""

    best: Any
    arg: Any
    above: Any
    rivals: Any
    above_at: Any
    tie_at: Any
    at_expected: np.ndarray
    norm: np.ndarray
    probe_hit: np.ndarray
    bound_probe_hit: np.ndarray | None

    def update(
        self, s: np.ndarray, cases: slice, offset: int, own: tuple[np.ndarray, np.ndarray], flags: np.ndarray
    ) -> None:
        """Fold in the scores ``s`` ``[cases, width]`` of the candidates from ``offset`` on (numpy); ``own``: the
        expected and the reversed scene's column per case (outside the block: not in it)."""
        m, width = s.shape
        arg = s.argmax(axis=1)
        rowmax = s.ravel()[arg + np.arange(0, m * width, width)]
        best = self.best[cases]
        np.copyto(self.arg[cases], arg + offset, where=rowmax > best)  # strictly better: a tie keeps the lower row
        np.maximum(best, rowmax, out=best)
        above_at = self.above_at[cases]
        if (rowmax > above_at).any():
            need, counts = count_over(s, rowmax, above_at, True, own[:1], flags)  # the expected: not above itself
            self.above[cases][need] += counts
        # rivals: only whether there is one counts (a bound hit needs none), so a case with one is not counted again
        rivals, tie_at = self.rivals[cases], self.tie_at[cases]
        open_ = (rowmax >= tie_at) & (rivals == 0)
        if open_.any():
            need, counts = count_over(s, np.where(open_, rowmax, -np.inf), tie_at, False, own, flags)
            rivals[need] += counts

    def update_torch(self, s: torch.Tensor, cases: slice, offset: int, own: tuple[torch.Tensor, torch.Tensor]) -> None:
        """:meth:`update` in torch, on the scores' device."""
        arg = s.argmax(dim=1)  # the first of equal maxima
        rowmax = s.gather(1, arg[:, None])[:, 0]
        better = rowmax > self.best[cases]
        self.best[cases] = torch.where(better, rowmax, self.best[cases])
        self.arg[cases] = torch.where(better, arg + offset, self.arg[cases])
        width = s.shape[1]
        rows = torch.arange(len(s), device=s.device)
        for total, threshold, strict, columns in (
            (self.above, self.above_at[cases], True, own[:1]),
            (self.rivals, self.tie_at[cases], False, own),
        ):
            over = torch.gt if strict else torch.ge
            counts = over(s, threshold[:, None]).sum(dim=1)
            for col in columns:
                inside = (col >= 0) & (col < width)
                mine = over(s[rows, col.clamp(0, width - 1)], threshold)
                counts -= (inside & mine).to(counts.dtype)
            total[cases] += counts


@dataclass(frozen=True)
class _Item:
    """A sub-chunk of one plan's cases: plan ``plan``, cases ``start:stop``, and their bases' Gram rows."""

    plan: int
    start: int
    stop: int
    rows: np.ndarray


class _Engine:
    """The block loop of :func:`score_jobs` (one instance per call).

    Jobs of one plan share their cases, so the Gram rows of a sub-chunk of cases are gathered once for all of
    them. ``in_numpy``: run the element-wise work in numpy (default: on the CPU; ``False`` there tests the torch
    path another device takes).
    """

    def __init__(
        self,
        y: np.ndarray,
        jobs: Sequence[Job],
        tables: dict[str, np.ndarray],
        ks: Sequence[float],
        dev: torch.device,
        memory: int = MEMORY_BUDGET,
        probe_hits: ProbeHits | None = None,
        in_numpy: bool | None = None,
    ) -> None:
        self.jobs, self.ks, self.dev, self.memory = jobs, ks, dev, memory
        self.numpy = dev.type == "cpu" if in_numpy is None else in_numpy  # the element-wise work in numpy
        self.y = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).to(dev)
        n, width = self.y.shape
        with threads_for(n * width):
            self.unit = unit_rows(self.y)
            self.norms = self.y.norm(dim=1)
        self.tables = {name: self._tensor(t, torch.float32) for name, t in tables.items()}
        self.plans: list[EditPlan] = []
        self.plan_jobs: list[list[int]] = []
        for j, job in enumerate(jobs):
            pi = next((i for i, p in enumerate(self.plans) if p is job.plan), None)
            if pi is None:
                self.plans.append(job.plan)
                self.plan_jobs.append([])
                pi = len(self.plans) - 1
            self.plan_jobs[pi].append(j)
        bases = np.unique(np.concatenate([p.scene for p in self.plans])) if self.plans else np.zeros(0, np.int64)
        self.layout = plan_layout(n, bases, sum(len(t) for t in tables.values()), memory)
        self.block = self.layout.block
        self.starts = list(range(0, n, self.block))
        self.kept: dict[int, dict[str, torch.Tensor]] = {}
        # bank rows with the missing (-1) ones pointed at row 0: computed, then reported invalid
        self.pairs = [[(np.maximum(s, 0), np.maximum(t, 0)) for s, t in job.pairs] for job in jobs]
        # edited vectors at once: a quarter of the budget for the few float32 [rows, D] arrays of one chunk
        self.rows_per_chunk = max(1, (memory // 4) // (4 * 8 * max(1, width)))
        self.state = {(j, k): self._initial(j, k, probe_hits) for j, job in enumerate(jobs) for k in job_ks(job, ks)}

    def _tensor(self, a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device=self.dev, dtype=dtype)

    def _on(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.dev)

    def _span(self, b: int) -> slice:
        return slice(self.starts[b], min(len(self.y), self.starts[b] + self.block))

    def edited(self, j: int, cases: slice, k: float) -> torch.Tensor:
        """The edited vectors ``x'`` of job ``j``'s ``cases``."""
        job = self.jobs[j]
        x = self.y.index_select(0, self._on(job.plan.scene[cases]))
        if job.table is None:
            return x
        t = self.tables[job.table]
        diff = sum(
            t.index_select(0, self._on(s[cases])) - t.index_select(0, self._on(g[cases])) for s, g in self.pairs[j]
        )
        return torch.add(x, diff, alpha=-k)

    def _initial(self, j: int, k: float, probe_hits: ProbeHits | None) -> _Running:
        """Empty running state; and, from one pass over the edited vectors, the exact scores of the
        expected and the reversed scene, the vectors' norms and their probe hits."""
        plan = self.jobs[j].plan
        m = len(plan)
        at_expected, at_reversed, norm = (np.empty(m, np.float32) for _ in range(3))
        hit, bound = np.zeros(m, bool), np.zeros(m, bool)
        has_bound = False
        rev = np.maximum(plan.reversed, 0)
        for a in range(0, m, self.rows_per_chunk):
            cases = slice(a, min(m, a + self.rows_per_chunk))
            with threads_for((cases.stop - a) * self.y.shape[1] * 4):
                x = self.edited(j, cases, k)
                at_expected[cases] = (
                    (x * self.unit.index_select(0, self._on(plan.expected[cases]))).sum(dim=1).cpu().numpy()
                )
                at_reversed[cases] = (x * self.unit.index_select(0, self._on(rev[cases]))).sum(dim=1).cpu().numpy()
                norm[cases] = x.norm(dim=1).clamp_min(1e-12).cpu().numpy()
                if probe_hits is not None:
                    hit[cases], found = probe_hits(x.cpu().numpy(), plan.expected[cases])
                    if found is not None:
                        bound[cases], has_bound = found, True
        at_reversed[plan.reversed < 0] = -np.inf
        tol = np.float32(TIE_TOL) * norm
        running: dict[str, np.ndarray | torch.Tensor] = {
            "best": np.full(m, -np.inf, np.float32),
            "arg": np.full(m, -1, np.int64),
            "above": np.zeros(m, np.int64),
            "rivals": np.zeros(m, np.int64),
            "above_at": at_expected + tol,
            "tie_at": np.maximum(at_expected, at_reversed) - tol,
        }
        if not self.numpy:
            running = {name: self._on(np.asarray(a)) for name, a in running.items()}
        return _Running(
            **running,
            at_expected=at_expected,
            norm=norm,
            probe_hit=hit,
            bound_probe_hit=bound if has_bound else None,
        )

    def _projections(self, b: int) -> dict[str, torch.Tensor]:
        """``P = T Ŷᵀ`` of every table against block ``b``'s scenes (kept for the first ``layout.cached`` blocks)."""
        if b in self.kept:
            return self.kept[b]
        unit = self.unit[self._span(b)]
        with threads_for(sum(len(t) for t in self.tables.values()) * unit.shape[0] * unit.shape[1]):
            proj = {name: t @ unit.T for name, t in self.tables.items()}
        if b < self.layout.cached:
            self.kept[b] = proj
        return proj

    def run(self, progress: Callable[[int, int], object] | None) -> None:
        """Every block of candidates against every case."""
        if self.layout.bases is None:
            self._run_pairs(progress)
        else:
            self._run_rows(self.layout.bases, progress)

    def _run_pairs(self, progress: Callable[[int, int], object] | None) -> None:
        nb = len(self.starts)
        total, done = nb * (nb + 1) // 2, 0
        width = self.y.shape[1]
        for bi in range(nb):
            rows_i, proj_i = self._span(bi), self._projections(bi)
            for bj in range(bi, nb):
                rows_j = self._span(bj)
                proj_j = proj_i if bj == bi else self._projections(bj)
                ni, nj = rows_i.stop - rows_i.start, rows_j.stop - rows_j.start
                with threads_for(ni * nj * width):
                    g = self.unit[rows_i] @ self.unit[rows_j].T
                with threads_for(ni * nj):
                    # the transposed block serves the cases based in J (rows scaled by |x|)
                    gt = None if bj == bi else g.t().contiguous().mul_(self.norms[rows_j][:, None])
                    g.mul_(self.norms[rows_i][:, None])
                if gt is not None:
                    self._update(gt, rows_j.start, rows_j.stop, None, rows_i.start, proj_i)
                self._update(g, rows_i.start, rows_i.stop, None, rows_j.start, proj_j)
                done += 1
                if progress is not None:
                    progress(done, total)

    def _run_rows(self, bases: np.ndarray, progress: Callable[[int, int], object] | None) -> None:
        chunks = [bases[a : a + self.layout.rows] for a in range(0, len(bases), self.layout.rows)]
        total, done = len(self.starts) * len(chunks), 0
        position = np.full(len(self.y), -1, np.int64)
        width = self.y.shape[1]
        picked = [self._on(chunk) for chunk in chunks]
        unit, norms = [self.unit[p] for p in picked], [self.norms[p][:, None] for p in picked]
        for bj in range(len(self.starts)):
            cols, proj = self._span(bj), self._projections(bj)
            for c, chunk in enumerate(chunks):
                with threads_for(len(chunk) * (cols.stop - cols.start) * width):
                    g = unit[c] @ self.unit[cols].T
                with threads_for(g.numel()):
                    g.mul_(norms[c])
                position[chunk] = np.arange(len(chunk))
                self._update(g, int(chunk[0]), int(chunk[-1]) + 1, position, cols.start, proj)
                done += 1
                if progress is not None:
                    progress(done, total)

    def _items(self, lo: int, hi: int, position: np.ndarray | None, sub: int) -> list[_Item]:
        """The sub-chunks of ``sub`` cases of every plan based in scenes ``lo:hi``, with their Gram rows (the scene
        less ``lo``, or its ``position``)."""
        items = []
        for pi, plan in enumerate(self.plans):
            a, b = (int(i) for i in np.searchsorted(plan.scene, [lo, hi]))
            rows = plan.scene[a:b] - lo if position is None else position[plan.scene[a:b]]
            items += [_Item(pi, s, min(b, s + sub), rows[s - a : s - a + sub]) for s in range(a, b, sub)]
        return items

    def _update(
        self,
        gram: torch.Tensor,
        lo: int,
        hi: int,
        position: np.ndarray | None,
        offset: int,
        proj: dict[str, torch.Tensor],
    ) -> None:
        """Score the cases based in scenes ``lo:hi`` (Gram rows ``gram``: the scene less ``lo``, or its
        ``position``) against the candidates from ``offset`` on.

        On the CPU the element-wise work runs in numpy, its sub-chunks of cases (disjoint rows of the running
        state) split over the shared pool where there is enough of it; elsewhere in torch on the device.
        """
        width = gram.shape[1]
        if not self.numpy:
            sub = max(1, self.memory // (64 * width))  # four float32 buffers of a sixteenth of the budget
            for item in self._items(lo, hi, position, sub):
                self._score_torch(item, gram, offset, proj)
            return
        items = self._items(lo, hi, position, max(1, CACHE_ELEMENTS // width))
        gram_np = gram.numpy()
        proj_np = {name: p.numpy() for name, p in proj.items()}
        work = sum(item.stop - item.start for item in items) * width * len(self.jobs) // max(1, len(self.plans))
        workers = min(len(items), thread_count(work, POOL_ELEMENTS))
        if workers < 2:
            self._score_numpy(items, gram_np, offset, proj_np)
            return
        shares = [items[w::workers] for w in range(workers)]  # one task per worker
        list(shared_pool().map(lambda share: self._score_numpy(share, gram_np, offset, proj_np), shares))

    def _score_numpy(self, items: list[_Item], gram: np.ndarray, offset: int, proj: dict[str, np.ndarray]) -> None:
        """Every job of each item's plan on its sub-chunk of cases, at every k (numpy, on the CPU)."""
        rows = max((item.stop - item.start for item in items), default=0)
        buffers = [np.empty((rows, gram.shape[1]), np.float32) for _ in range(4)]
        flags = np.empty((rows, gram.shape[1]), bool)
        for item in items:
            self._score_item(item, gram, offset, proj, buffers, flags)

    def _score_item(
        self,
        item: _Item,
        gram: np.ndarray,
        offset: int,
        proj: dict[str, np.ndarray],
        buffers: list[np.ndarray],
        flags: np.ndarray,
    ) -> None:
        """Every job of the item's plan on its sub-chunk of cases against the candidates of ``gram``'s columns (from
        ``offset`` on), in the buffers given."""
        cases, m = slice(item.start, item.stop), item.stop - item.start
        near_buf, s_buf, t_buf, d_buf = (b[:m] for b in buffers)
        plan = self.plans[item.plan]
        own = (plan.expected[cases] - offset, plan.reversed[cases] - offset)  # -1 (none): outside every block
        near = np.take(gram, item.rows, axis=0, out=near_buf, mode="clip")
        for j in self.plan_jobs[item.plan]:
            job = self.jobs[j]
            ks = job_ks(job, self.ks)
            if job.table is None:
                self.state[(j, ks[0])].update(near, cases, offset, own, flags)
                continue
            pn = proj[job.table]
            (src, tgt), *more = [(s[cases], t[cases]) for s, t in self.pairs[j]]
            if ks == [1.0] and not more:  # the common case in place: near - P[src] + P[tgt]
                s = np.take(pn, src, axis=0, out=s_buf, mode="clip")
                np.subtract(near, s, out=s)
                s += np.take(pn, tgt, axis=0, out=t_buf, mode="clip")
                self.state[(j, 1.0)].update(s, cases, offset, own, flags)
                continue
            d = np.take(pn, src, axis=0, out=d_buf, mode="clip")
            d -= np.take(pn, tgt, axis=0, out=t_buf, mode="clip")
            for src2, tgt2 in more:  # the second object of a relation edit
                d += np.take(pn, src2, axis=0, out=t_buf, mode="clip")
                d -= np.take(pn, tgt2, axis=0, out=t_buf, mode="clip")
            for k in ks:
                s = np.multiply(d, -k, out=s_buf)
                s += near
                self.state[(j, k)].update(s, cases, offset, own, flags)

    def _score_torch(self, item: _Item, gram: torch.Tensor, offset: int, proj: dict[str, torch.Tensor]) -> None:
        """Every job of the item's plan on its sub-chunk of cases, at every k (torch, on the device)."""
        cases = slice(item.start, item.stop)
        plan = self.plans[item.plan]
        own = (self._on(plan.expected[cases] - offset), self._on(plan.reversed[cases] - offset))
        near = gram.index_select(0, self._on(item.rows))
        for j in self.plan_jobs[item.plan]:
            job = self.jobs[j]
            ks = job_ks(job, self.ks)
            if job.table is None:
                self.state[(j, ks[0])].update_torch(near, cases, offset, own)
                continue
            p = proj[job.table]
            diff = torch.zeros_like(near)
            for src, tgt in self.pairs[j]:
                diff.add_(p.index_select(0, self._on(src[cases]))).sub_(p.index_select(0, self._on(tgt[cases])))
            for k in ks:
                self.state[(j, k)].update_torch(torch.add(near, diff, alpha=-k), cases, offset, own)

    def scores(self, j: int, k: float) -> Scores:
        """The outcome of job ``j`` at ``k`` once every block is done."""
        job, st = self.jobs[j], self.state[(j, k)]
        best, arg, above, rivals = (
            a.cpu().numpy() if isinstance(a, torch.Tensor) else a for a in (st.best, st.arg, st.above, st.rivals)
        )
        out = Scores(
            job.valid,
            job.plan.expected,
            arg.copy(),
            above + 1,
            st.at_expected / st.norm,
            best / st.norm,
            st.probe_hit.copy(),
            rivals == 0,
            None if st.bound_probe_hit is None else st.bound_probe_hit.copy(),
        )
        invalid = ~job.valid
        out.retrieved[invalid], out.rank[invalid], out.probe_hit[invalid], out.bound_hit[invalid] = -1, 0, False, False
        if out.bound_probe_hit is not None:
            out.bound_probe_hit[invalid] = False
        out.cos_expected[invalid] = out.cos_retrieved[invalid] = np.nan
        return out


def score_jobs(
    y: np.ndarray,
    jobs: Sequence[Job],
    tables: dict[str, np.ndarray],
    ks: Sequence[float],
    probe_hits: ProbeHits | None,
    *,
    memory: int = MEMORY_BUDGET,
    device: str = "cpu",
    progress: Callable[[int, int], object] | None = None,
) -> dict[tuple[int, float], Scores]:
    """Score every job at every ``k`` (a job without a table only at k = 0).

    Parameters
    ----------
    y
        Scene embeddings ``[N, D]``: the bases of the edits and the retrieval candidates.
    jobs
        The variants of the plans; each plan's cases are sorted by scene.
    tables
        Direction tables ``{name: [R, D]}`` the jobs' rows index.
    ks
        Edit strengths.
    probe_hits
        :data:`ProbeHits`: the paper's and the bound probe hit of edited vectors (None: no probe metric).
    memory
        Bytes the working arrays may take (:data:`MEMORY_BUDGET`): it sets the block size.
    device
        Torch device of the products (and, off the CPU, of the element-wise work).
    progress
        Called as ``progress(done, total)`` over the blocks.

    Returns
    -------
    dict
        ``{(job index, k): Scores}``.
    """
    with torch.no_grad():
        engine = _Engine(y, jobs, tables, ks, torch.device(device), memory, probe_hits)
        engine.run(progress)
        return {key: engine.scores(*key) for key in engine.state}
