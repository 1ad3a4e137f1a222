"""Scoring edits in batches (docs/method/05-interventions.md): cosine retrieval against every scene, and probes.

An edit is ``x' = x - k (T[src] - T[tgt])`` for a base scene ``x`` and two rows of a direction
table ``T`` (a bank's object vectors, or the bag-of-concepts value means); an edit of both objects (a relation
edit) adds a second pair, ``x' = x - k (T[src] - T[tgt] + T[src2] - T[tgt2])``. Its scores against the
unit-norm scenes ``Ŷ`` are ``Ŷ x' = Ŷ x - k (Ŷ T[src] - Ŷ T[tgt])`` (the cosine up to the factor
``1 / |x'|``, which changes neither the best match nor ranks). So every edit of every variant and
``k`` needs only a row of the scene Gram matrix ``Ŷ Ŷᵀ`` (scaled by ``|x|``) and two rows of
``P = T Ŷᵀ``, computed once per table: a gather and a subtraction instead of a matrix product.

The Gram matrix is never held whole: it is computed one block pair ``(I, J ≥ I)`` at a time (half
the products, by symmetry) and each block serves the cases based in ``I`` against the candidates in
``J`` and those based in ``J`` against ``I``, keeping a running best match (the research code's: on a tie
the lowest row), a running count of scenes scoring strictly above the expected one (its rank) and a running
count of *rivals*: scenes other than the expected one and its order-reversed scene that score as high as the
better of the two, ties included (a bound hit needs none).

Two scores closer than :data:`TIE_TOL` in cosine are a tie: the expected scene's score is computed once,
directly, the candidates' from Gram blocks, and the two paths differ in the last float32 bits, so scenes
with the same embedding (which a bag of concepts gives a scene and its binding swap) never score exactly alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from bindscope.analyses.intervene.edits import EditPlan

#: Largest Gram block held at once (float32 elements): 64 MB.
CHUNK_ELEMENTS = 1 << 24
#: Elements of one score buffer of a sub-chunk of cases: large enough to keep Python's overhead
#: per numpy call small, small enough to stay near a core's cache (measured best at 2^18-2^19).
CACHE_ELEMENTS = 1 << 18
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


def block_size(num_scenes: int, chunk_elements: int = CHUNK_ELEMENTS) -> int:
    """Scenes per Gram block: a ``[B, B]`` block holds ``chunk_elements`` at most."""
    return int(max(1, min(num_scenes, int(np.sqrt(chunk_elements)))))


def count_over(
    scores: np.ndarray,
    rowmax: np.ndarray,
    threshold: np.ndarray,
    strict: bool,
    own: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """The rows with a score over ``threshold`` (``>`` when ``strict``, else ``>=``) and how many each has,
    less the row's own entries ``own``: ``(rows inside, their column)`` pairs of scenes never counted.

    Parameters
    ----------
    scores
        ``[m, width]`` scores of ``m`` cases against ``width`` candidates; ``rowmax`` their row maxima.
    threshold
        ``[m]`` per case.
    """
    over = np.greater if strict else np.greater_equal
    need = np.flatnonzero(over(rowmax, threshold))
    if not len(need):
        return need, need
    if 2 * len(need) > len(scores):  # most rows: compare in place rather than copy them out
        counts = np.count_nonzero(over(scores, threshold[:, None]), axis=1)[need]
    else:
        counts = np.count_nonzero(over(scores[need], threshold[need, None]), axis=1)
    for inside, column in own:
        mine = np.intersect1d(need, inside, assume_unique=True)
        if len(mine):
            counts[np.searchsorted(need, mine)] -= over(scores[mine, column[mine]], threshold[mine])
    return need, counts


def job_ks(job: Job, ks: Sequence[float]) -> list[float]:
    """The strengths a job is scored at: every ``k``, or only 0 for the unedited scene."""
    return [0.0] if job.table is None else [float(k) for k in ks]


@dataclass
class _Running:
    """The running reductions of one job at one k (numpy arrays: they run in numpy on the CPU, which is faster
    than torch's): the best match, the count of scenes strictly above the expected one (beyond the tie
    tolerance, ``above_at``) and the count of rivals at or above the better of the expected and the reversed
    scene (within it, ``tie_at``); and, from the edited vectors' one pass, their expected score, norm and probe
    hits."""

    best: np.ndarray
    arg: np.ndarray
    above: np.ndarray
    rivals: np.ndarray
    at_expected: np.ndarray
    above_at: np.ndarray
    tie_at: np.ndarray
    norm: np.ndarray
    probe_hit: np.ndarray
    bound_probe_hit: np.ndarray | None

    def update(self, s: torch.Tensor | np.ndarray, cases: slice, offset: int, own: _Own) -> None:
        """Fold in the scores ``s`` ``[cases, width]`` of the candidates from ``offset`` on."""
        sn = s if isinstance(s, np.ndarray) else s.cpu().numpy()
        rowmax = sn.max(axis=1)
        best = self.best[cases]
        better = np.flatnonzero(rowmax > best)
        if len(better):
            best[better] = rowmax[better]
            self.arg[cases][better] = sn[better].argmax(axis=1) + offset
        need, counts = count_over(sn, rowmax, self.above_at[cases], True, [own.expected])  # the expected: not itself
        if len(need):
            self.above[cases][need] += counts
        need, counts = count_over(sn, rowmax, self.tie_at[cases], False, [own.expected, own.reversed])
        if len(need):
            self.rivals[cases][need] += counts


@dataclass(frozen=True)
class _Own:
    """Where a sub-chunk's expected and reversed scenes fall among a block's candidates: ``(cases inside the
    block, their column)`` each."""

    expected: tuple[np.ndarray, np.ndarray]
    reversed: tuple[np.ndarray, np.ndarray]


class _Engine:
    """The block-pair loop of :func:`score_jobs` (one instance per call).

    Jobs of one plan share their cases, so the Gram rows of a sub-chunk of cases are gathered once
    for all of them; sub-chunks are sized to stay in cache (``CACHE_ELEMENTS`` per buffer).
    """

    def __init__(
        self,
        y: np.ndarray,
        jobs: Sequence[Job],
        tables: dict[str, np.ndarray],
        ks: Sequence[float],
        dev: torch.device,
        block: int,
        probe_hits: ProbeHits | None = None,
    ) -> None:
        self.jobs, self.ks, self.dev, self.block = jobs, ks, dev, block
        self.y = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).to(dev)
        self.unit = unit_rows(self.y)
        self.norms = self.y.norm(dim=1)
        self.tables = {n: self._tensor(t, torch.float32) for n, t in tables.items()}
        self.starts = list(range(0, len(y), block))
        # P = T Ŷᵀ, stored per scene block so that a block's columns are contiguous
        self.proj = {
            n: [t @ self.unit[self._span(b)].T for b in range(len(self.starts))] for n, t in self.tables.items()
        }
        self.plans: list[EditPlan] = []
        self.plan_jobs: list[list[int]] = []
        for j, job in enumerate(jobs):
            pi = next((i for i, p in enumerate(self.plans) if p is job.plan), None)
            if pi is None:
                self.plans.append(job.plan)
                self.plan_jobs.append([])
                pi = len(self.plans) - 1
            self.plan_jobs[pi].append(j)
        self.bounds = [np.searchsorted(p.scene, [*self.starts, len(y)]) for p in self.plans]
        # bank rows with the missing (-1) ones pointed at row 0: computed, then reported invalid
        self.pairs = [[(np.maximum(s, 0), np.maximum(t, 0)) for s, t in job.pairs] for job in jobs]
        self.rows_per_chunk = max(1, CHUNK_ELEMENTS // max(1, self.y.shape[1]))  # edited vectors at once
        self.workers = max(1, torch.get_num_threads())
        self.pool = ThreadPoolExecutor(self.workers) if dev.type == "cpu" else None
        self.state = {(j, k): self._initial(j, k, probe_hits) for j, job in enumerate(jobs) for k in job_ks(job, ks)}

    def _tensor(self, a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device=self.dev, dtype=dtype)

    def _on(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(self.dev)

    def _span(self, b: int) -> slice:
        return slice(self.starts[b], min(len(self.y), self.starts[b] + self.block))

    def edited(self, j: int, cases: slice, k: float) -> torch.Tensor:
        """The edited vectors ``x'`` of job ``j``'s ``cases``."""
        job = self.jobs[j]
        x = self.y[self._on(job.plan.scene[cases])]
        if job.table is None:
            return x
        t = self.tables[job.table]
        diff = sum(t[self._on(s[cases])] - t[self._on(g[cases])] for s, g in self.pairs[j])
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
            x = self.edited(j, cases, k)
            at_expected[cases] = (x * self.unit[self._on(plan.expected[cases])]).sum(dim=1).cpu().numpy()
            at_reversed[cases] = (x * self.unit[self._on(rev[cases])]).sum(dim=1).cpu().numpy()
            norm[cases] = x.norm(dim=1).clamp_min(1e-12).cpu().numpy()
            if probe_hits is not None:
                hit[cases], found = probe_hits(x.cpu().numpy(), plan.expected[cases])
                if found is not None:
                    bound[cases], has_bound = found, True
        at_reversed[plan.reversed < 0] = -np.inf
        tol = np.float32(TIE_TOL) * norm
        return _Running(
            best=np.full(m, -np.inf, np.float32),
            arg=np.full(m, -1, np.int64),
            above=np.zeros(m, np.int64),
            rivals=np.zeros(m, np.int64),
            at_expected=at_expected,
            above_at=at_expected + tol,
            tie_at=np.maximum(at_expected, at_reversed) - tol,
            norm=norm,
            probe_hit=hit,
            bound_probe_hit=bound if has_bound else None,
        )

    def run(self, progress: Callable[[int, int], object] | None) -> None:
        nb = len(self.starts)
        total, done = nb * (nb + 1) // 2, 0
        for bi in range(nb):
            for bj in range(bi, nb):
                g = self.unit[self._span(bi)] @ self.unit[self._span(bj)].T
                if bj != bi:  # the transposed block serves the cases based in J (rows scaled by |x|)
                    self._update(bj, bi, self._scaled_transpose(g, self.norms[self._span(bj)]))
                self._update(bi, bj, g.mul_(self.norms[self._span(bi)][:, None]))
                done += 1
                if progress is not None:
                    progress(done, total)

    def _scaled_transpose(self, g: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
        """``g.T * norms[:, None]``, contiguous (torch's blocked transpose, then an in-place scale)."""
        return g.t().contiguous().mul_(norms[:, None])

    def _update(self, base_block: int, cand_block: int, gram: torch.Tensor) -> None:
        """Score the cases based in ``base_block`` against the scenes of ``cand_block``.

        On the CPU the element-wise work runs in numpy, split over a thread pool by sub-chunks of
        cases (disjoint rows of the running state); elsewhere in torch on the device.
        """
        sub = max(1, CACHE_ELEMENTS // gram.shape[1])
        items = [
            (pi, a, min(hi, a + sub))
            for pi, (lo, hi) in enumerate((int(b[base_block]), int(b[base_block + 1])) for b in self.bounds)
            for a in range(lo, hi, sub)
        ]
        if self.pool is None:
            for item in items:
                self._score_range_torch(item, base_block, cand_block, gram)
            return
        gram_np = gram.numpy()

        def work(share: list[tuple[int, int, int]]) -> None:
            for item in share:
                self._score_range_numpy(item, base_block, cand_block, gram_np)

        shares = [items[w :: self.workers] for w in range(self.workers)]  # one task per worker
        list(self.pool.map(work, shares))

    def _prelude(
        self, item: tuple[int, int, int], base_block: int, cand_block: int, width: int
    ) -> tuple[slice, np.ndarray, int, _Own]:
        """A sub-chunk's case slice, Gram rows, candidate offset and where its expected and reversed scenes
        fall."""
        pi, a, b = item
        cases = slice(a, b)
        offset = self.starts[cand_block]
        plan = self.plans[pi]
        local_base = plan.scene[cases] - self.starts[base_block]

        def inside(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            local = rows - offset
            return np.flatnonzero((rows >= 0) & (local >= 0) & (local < width)), local  # -1: no such scene

        return cases, local_base, offset, _Own(inside(plan.expected[cases]), inside(plan.reversed[cases]))

    def _score_range_numpy(
        self, item: tuple[int, int, int], base_block: int, cand_block: int, gram: np.ndarray
    ) -> None:
        """Every job of one plan on a sub-chunk of cases, at every k (numpy, on the CPU)."""
        cases, local_base, offset, own = self._prelude(item, base_block, cand_block, gram.shape[1])
        near = gram.take(local_base, axis=0)
        for j in self.plan_jobs[item[0]]:
            job = self.jobs[j]
            ks = job_ks(job, self.ks)
            if job.table is None:
                self.state[(j, ks[0])].update(near, cases, offset, own)
                continue
            pn = self.proj[job.table][cand_block].numpy()
            (src, tgt), *more = [(s[cases], t[cases]) for s, t in self.pairs[j]]
            if ks == [1.0] and not more:  # the common case in place: near - P[src] + P[tgt]
                s = pn.take(src, axis=0)
                np.subtract(near, s, out=s)
                s += pn.take(tgt, axis=0)
                self.state[(j, 1.0)].update(s, cases, offset, own)
                continue
            d = pn.take(src, axis=0)
            d -= pn.take(tgt, axis=0)
            for src2, tgt2 in more:  # the second object of a relation edit
                d += pn.take(src2, axis=0)
                d -= pn.take(tgt2, axis=0)
            for k in ks:
                s = np.multiply(d, -k)
                s += near
                self.state[(j, k)].update(s, cases, offset, own)

    def _score_range_torch(
        self, item: tuple[int, int, int], base_block: int, cand_block: int, gram: torch.Tensor
    ) -> None:
        """Every job of one plan on a sub-chunk of cases, at every k (torch, on the device)."""
        cases, local_base, offset, own = self._prelude(item, base_block, cand_block, gram.shape[1])
        near = gram.index_select(0, self._on(local_base))
        for j in self.plan_jobs[item[0]]:
            job = self.jobs[j]
            ks = job_ks(job, self.ks)
            if job.table is None:
                self.state[(j, ks[0])].update(near, cases, offset, own)
                continue
            p = self.proj[job.table][cand_block]
            diff = torch.zeros_like(near)
            for src, tgt in self.pairs[j]:
                diff.add_(p.index_select(0, self._on(src[cases]))).sub_(p.index_select(0, self._on(tgt[cases])))
            for k in ks:
                self.state[(j, k)].update(torch.add(near, diff, alpha=-k), cases, offset, own)

    def scores(self, j: int, k: float) -> Scores:
        """The outcome of job ``j`` at ``k`` once every block pair is done."""
        job, st = self.jobs[j], self.state[(j, k)]
        out = Scores(
            job.valid,
            job.plan.expected,
            st.arg.copy(),
            st.above + 1,
            st.at_expected / st.norm,
            st.best / st.norm,
            st.probe_hit.copy(),
            st.rivals == 0,
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
    chunk_elements: int = CHUNK_ELEMENTS,
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
    chunk_elements
        Bound on the float32 elements of one score block (memory).
    progress
        Called as ``progress(done, total)`` over the Gram block pairs.

    Returns
    -------
    dict
        ``{(job index, k): Scores}``.
    """
    block = block_size(len(y), chunk_elements)
    with torch.no_grad():
        engine = _Engine(y, jobs, tables, ks, torch.device(device), block, probe_hits)
        try:
            engine.run(progress)
        finally:
            if engine.pool is not None:
                engine.pool.shutdown()
        return {key: engine.scores(*key) for key in engine.state}
