"""Certified oblivious baselines kappa_pi(m) by admissible best-first search ([MX] App. F.2).

kappa_pi(m) is the top-m prior mass of the secret: the largest total probability that a list of
m length-L continuations of the prefix c can carry under the *prior* model (the base model before
any canary was planted, at the temperature the canaries were drawn at). It is the null of the
extraction bound Ext <= 1 - f(kappa_pi(m)) ([MX] Thm. 5.1). Run it on the audited model instead
and kappa absorbs the very leak the audit is looking for.

The search ([MX] App. F.2): sequences have the fixed length L (EOS is an ordinary token), so the
space is V^L. A prefix's probability upper-bounds every completion below it, so expanding
prefixes in decreasing probability is admissible. The search keeps the m best complete sequences
found (the incumbents) and a frontier of unexpanded prefixes; with beta the largest frontier
probability, every member of the true top-m is either found or lies under the frontier (so has
probability <= beta). Hence at any time

    kappa_lo = sum of the found top-m              <= kappa_pi(m)
    kappa_hi = sum of the m largest of (found  U  m copies of beta)  >= kappa_pi(m)

and the interval closes (the top-m is exact) when the frontier empties or beta <= the m-th
incumbent. Children are thresholded against the m-th incumbent over the *whole* vocabulary row,
never a top-k slice (a truncation could drop a member of the true top-m and void the
certificate).

Implementation notes:
- Frontier rows are lazy: an expanded node keeps its children sorted in chunks of ``chunk``;
  the frontier holds one entry per row, keyed by its best child not yet taken, and a row whose
  chunk is exhausted is recomputed for the next chunk (its key, the best remaining child, still
  bounds everything below it). Memory stays O(expanded rows x chunk) even for 50k-token vocabs.
- Expansions are batched (``batch_size`` rows per forward) and reuse the KV cache
  (memclaim.scoring.rows): a node's row is computed by feeding its last token to its parent's
  cache (``LanguageModel.select_cache``); caches of recent batches are kept up to
  ``max_cache_rows`` rows, older nodes are recomputed from the prefix cache. The search
  requires ``select_cache`` to return a new cache (it reuses the prefix cache many times).
- Log-probabilities are float64 sums along the path of ``policy_logprobs`` on the model's
  logits cast to float64, so "exact" means exact for those logits up to float64 rounding of
  the sums. A float32 model computes slightly different logits for the same context through
  different cache paths and batch shapes (about 1e-7 relative), which moves kappa in the
  6th-7th significant digit; the interval is a certificate for the logits as computed.

The search itself is numpy; the model side (rows, sorting, KV caches) is
:class:`memclaim.scoring.rows.PolicyRows`, imported (with torch) only when a search runs.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .. import validate
from ..decoding import Policy
from ..errors import DomainError, PolicyError
from ..jsonutil import ResultMixin
from ..numeric import logsumexp
from ..progress import ProgressCallback, Reporter

if TYPE_CHECKING:
    from ..models.base import LanguageModel

__all__ = ["BaselineResult", "certify_baseline"]

LOG2E = 1.0 / math.log(2.0)


@dataclass(frozen=True)
class BaselineResult(ResultMixin):
    """A certified interval [kappa_lo, kappa_hi] for kappa_pi(m) ([MX] App. F.2).

    ``closed`` is True when the interval has closed (kappa_lo == kappa_hi: the top-m is exact,
    up to float64 rounding of path sums). ``top`` lists the found top-m continuations as
    (token ids, natural-log probability), best first. ``min_entropy_bits`` brackets the
    conditional min-entropy H_inf = -log2 max_z p(z | c) when m = 1 (None otherwise).
    The prior is the model *before* the canary was planted, at the sampling temperature.
    """

    kappa_lo: float
    kappa_hi: float
    log_kappa_lo: float
    log_kappa_hi: float
    closed: bool
    stop_reason: str  # 'closed' | 'max-nodes' | 'time-limit'
    m: int
    secret_length: int
    policy: str
    prefix_ids: tuple[int, ...]
    model: str
    model_fingerprint: str
    vocab_size: int
    nodes_expanded: int
    frontier_log_beta: float
    top: tuple[tuple[tuple[int, ...], float], ...]
    min_entropy_bits: tuple[float, float] | None
    seconds: float
    reference: str = "[MX] App. F.2 (certified baseline by admissible best-first search)"

    @property
    def interval(self) -> tuple[float, float]:
        return (self.kappa_lo, self.kappa_hi)


@dataclass
class _Row:
    """An expanded internal node: its children, sorted, one chunk at a time."""

    tokens: tuple[int, ...]
    logp: float
    # cache covering prefix + tokens[:-1] ('prefix', 0) for the root; None when the parent's cache
    # was not kept (rows.expand then recomputes from the prefix cache)
    parent_handle: tuple | None
    own_handle: tuple | None  # cache covering prefix + tokens
    child_tok: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    child_lp: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pos: int = 0
    taken: np.ndarray | None = None  # tokens already loaded into chunks (None before the first)
    rest_bound: float = -math.inf  # log-prob of the best child not loaded yet (bounds the rest)

    def key(self) -> float:
        if self.pos < len(self.child_lp):
            return float(self.child_lp[self.pos])
        return self.rest_bound


class _Search:
    def __init__(self, rows, L, m, *, batch_size, chunk, max_nodes, time_limit, progress):
        self.rows = rows  # memclaim.scoring.rows.PolicyRows: the model side
        self.L = L
        self.m = m
        self.V = int(rows.vocab_size)
        self.batch_size = batch_size
        self.chunk = chunk
        self.max_nodes = max_nodes
        self.deadline = None if time_limit is None else time.monotonic() + time_limit
        self.report = Reporter(
            progress,
            stage="baseline",
            label="certified baseline search",
            total=max_nodes,
            unit="rows",
        )
        self.nodes = 0
        self.counter = itertools.count()
        self.frontier: list[tuple[float, int, _Row]] = []
        self.top: list[tuple[float, tuple[int, ...]]] = []  # min-heap of the found top-m
        self.in_top: set[tuple[int, ...]] = set()

    # ------------------------------------------------------------------ incumbents
    def theta(self) -> float:
        """log-prob of the m-th incumbent (-inf while fewer than m are found)."""
        return self.top[0][0] if len(self.top) >= self.m else -math.inf

    def offer(self, logp: float, seq: tuple[int, ...]) -> None:
        if logp == -math.inf or seq in self.in_top:
            return
        if len(self.top) < self.m:
            heapq.heappush(self.top, (logp, seq))
            self.in_top.add(seq)
        elif logp > self.top[0][0]:
            _, old = heapq.heapreplace(self.top, (logp, seq))
            self.in_top.discard(old)
            self.in_top.add(seq)

    def beta(self) -> float:
        return -self.frontier[0][0] if self.frontier else -math.inf

    def bounds(self) -> tuple[float, float]:
        found = sorted((lp for lp, _ in self.top), reverse=True)
        lo = logsumexp(found)
        b = self.beta()
        # the m largest of (found U m copies of beta), [MX] App. F.2
        merged = sorted(found + [b] * self.m, reverse=True)[: self.m]
        hi = logsumexp(merged)
        return lo, max(hi, lo)

    def closed(self) -> bool:
        if not self.frontier:
            return True
        return len(self.top) >= self.m and self.beta() <= self.theta()

    # ------------------------------------------------------------------ model calls
    def start(self):
        """Run the prefix once; its cache is the root of every later computation."""
        self.nodes += 1
        return self.rows.root()

    def compute_rows(self, reqs: list[tuple[tuple[int, ...], tuple | None]]):
        """Sorted next-token rows for nodes given as (tokens, parent_handle) (scoring.rows)."""
        out = self.rows.expand(reqs)
        self.nodes += len(reqs)
        return out

    # ------------------------------------------------------------------ rows -> frontier
    def absorb_leaf_row(self, tokens, logp, srow):
        """Children of a depth L-1 node are complete sequences: only the row's top m can matter."""
        vals, toks = srow
        k = min(self.m, self.V)
        for v, t in zip(vals[:k].tolist(), toks[:k].tolist()):
            self.offer(logp + v, tokens + (int(t),))

    def fill_chunk(self, r: _Row, srow, *, full: bool = False) -> None:
        """Load the next ``chunk`` children of the sorted row into r (all of them if ``full``).

        The first chunk is ranks [0, chunk). A refetched row continues with the best children
        whose tokens were not loaded before: tokens, not ranks, so a recomputed row whose
        floating-point values differ in the last bits (another batch shape, another kernel)
        can repeat a child (harmless) but never skip one. Children at or below the m-th
        incumbent are dropped (theta only grows, so they can never matter again);
        ``rest_bound`` is the log-prob of the best child not loaded.
        """
        vals, toks = srow
        if r.taken is None:
            hi = self.V if full else min(self.chunk + 1, self.V)  # one extra to bound the rest
            v = vals[:hi].astype(np.float64)
            t = toks[:hi].astype(np.int64)
            taken = np.zeros(0, dtype=np.int64)
        else:
            v = vals.astype(np.float64)
            t = toks.astype(np.int64)
            keep = ~np.isin(t, r.taken)
            v, t, taken = v[keep], t[keep], r.taken
        n_in = len(v) if full else min(self.chunk, len(v))
        lp = r.logp + v[:n_in]
        tk = t[:n_in]
        rest = (r.logp + float(v[n_in])) if n_in < len(v) else -math.inf
        r.taken = np.concatenate([taken, tk])
        th = self.theta()
        keep = lp > th
        if not np.all(keep):
            n = int(np.argmin(keep))  # sorted: everything from here on is <= theta
            lp, tk, rest = lp[:n], tk[:n], -math.inf
        r.child_lp, r.child_tok, r.pos = lp, tk, 0
        r.rest_bound = rest if rest > th else -math.inf

    def push(self, r: _Row) -> None:
        k = r.key()
        if k > -math.inf and k > self.theta():
            heapq.heappush(self.frontier, (-k, next(self.counter), r))

    # ------------------------------------------------------------------ seeding
    def seed_beam(self, root_row) -> None:
        """Beam search of width m to find m complete sequences early (incumbents for pruning).

        Only the incumbents are kept: the best-first search re-expands these nodes itself, so the
        certificate does not depend on the seed.
        """
        W = self.m
        beam_tokens = [()]
        beam_lp = np.zeros(1, dtype=np.float64)
        rows = root_row[None, :]  # [1, V]
        for depth in range(self.L):
            cand = (beam_lp[:, None] + rows).reshape(-1)  # [B*V]
            k = min(W, int(np.isfinite(cand).sum()))
            if k == 0:
                return
            vals, flat = self.rows.top_k(cand, k)
            parents = (flat // self.V).tolist()
            toks = (flat % self.V).tolist()
            new_tokens = [beam_tokens[p] + (int(t),) for p, t in zip(parents, toks)]
            if depth == self.L - 1:
                for v, s in zip(vals.tolist(), new_tokens):
                    self.offer(v, s)
                return
            if self.max_nodes - self.nodes < k or self._out_of_time():
                return
            rows = self.rows.beam(parents, toks, depth=depth)  # [k, V]
            self.nodes += k
            beam_tokens, beam_lp = new_tokens, vals.astype(np.float64)

    def _out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    # ------------------------------------------------------------------ main loop
    def run(self, *, seed: bool) -> str:
        root_lp, root_sorted = self.start()
        if self.L == 1:
            self.absorb_leaf_row((), 0.0, root_sorted)
            return "closed"
        if seed:
            self.seed_beam(root_lp)
        # the root row cannot be recomputed by feeding a token, so it is kept whole
        root = _Row((), 0.0, self.rows.prefix_handle, self.rows.prefix_handle)
        self.fill_chunk(root, root_sorted, full=True)
        self.push(root)
        while True:
            if self.closed():
                return "closed"
            if self.nodes >= self.max_nodes:
                return "max-nodes"
            if self._out_of_time():
                return "time-limit"
            budget = min(self.batch_size, self.max_nodes - self.nodes)
            reqs: list[tuple[tuple[int, ...], tuple | None]] = []
            meta: list[tuple[_Row | None, float]] = []
            while self.frontier and len(reqs) < budget:
                negk, _, r = self.frontier[0]
                if -negk <= self.theta():
                    break
                heapq.heappop(self.frontier)
                if r.pos < len(r.child_lp):
                    child = r.tokens + (int(r.child_tok[r.pos]),)
                    lp = float(r.child_lp[r.pos])
                    r.pos += 1
                    self.push(r)
                    reqs.append((child, r.own_handle))
                    meta.append((None, lp))
                else:
                    # chunk exhausted: recompute this row for its next chunk
                    reqs.append((r.tokens, r.parent_handle))
                    meta.append((r, r.logp))
            if not reqs:
                continue  # nothing above theta: closed() decides on the next turn
            rows = self.compute_rows(reqs)
            for (toks, parent_handle), (refetched, lp), (srow, own) in zip(reqs, meta, rows):
                if refetched is not None:  # refetched row
                    if own is not None:
                        refetched.own_handle = own
                    self.fill_chunk(refetched, srow)
                    self.push(refetched)
                elif len(toks) == self.L - 1:
                    self.absorb_leaf_row(toks, lp, srow)
                else:
                    new_row = _Row(toks, lp, parent_handle, own)
                    self.fill_chunk(new_row, srow)
                    self.push(new_row)
            if self.report.progress is not None:
                lo, hi = self.bounds()
                self.report.update(self.nodes, kappa_lo=math.exp(lo), kappa_hi=math.exp(hi))


def certify_baseline(
    lm: LanguageModel,
    prefix_ids: Sequence[int],
    *,
    secret_length: int,
    m: int,
    temperature: float | None = None,
    policy: Policy | str | None = None,
    max_nodes: int = 100_000,
    time_limit: float | None = None,
    batch_size: int = 64,
    chunk: int = 256,
    max_cache_rows: int = 4096,
    seed: bool = True,
    progress: ProgressCallback | None = None,
) -> BaselineResult:
    """Certify kappa_pi(m), the top-m mass of length-L continuations of a prefix under a prior model.

    lm: a :class:`memclaim.models.base.LanguageModel` (the *prior*: base model before planting).
    prefix_ids: token ids of the prefix c, start-of-text ids included (non-empty).
    secret_length: L, the secret's length in tokens; m: list size of the extraction protocol.
    temperature (or a full decoding ``policy``): the distribution the canaries were drawn from.
    max_nodes: budget of vocabulary rows computed; time_limit: seconds. When either runs out the
    interval [kappa_lo, kappa_hi] is still certified, just not closed.
    progress: receives :class:`memclaim.progress.ProgressEvent` values after each batch of
    expansions (stage ``"baseline"``, ``done`` = rows computed of ``total`` = max_nodes, unit
    rows, ``extra`` = the current ``kappa_lo`` and ``kappa_hi``: monotone, lo up and hi down).

    >>> from memclaim.models.base import SyntheticLM
    >>> r = certify_baseline(SyntheticLM(vocab_size=6, seed=0), [0], secret_length=2, m=3)
    >>> r.closed, r.kappa_lo == r.kappa_hi
    (True, True)
    """
    for attr in ("forward_hidden", "logits", "select_cache", "vocab_size"):
        if not hasattr(lm, attr):
            raise DomainError(
                f"the model must implement memclaim.models.base.LanguageModel (missing {attr!r})"
            )
    V = validate.integer("vocab_size", lm.vocab_size, minimum=1)
    L = validate.integer("secret_length", secret_length, minimum=1)
    m = validate.integer("m (list size)", m, minimum=1)
    try:
        prefix = [int(t) for t in prefix_ids]
    except (TypeError, ValueError):
        raise DomainError(f"prefix_ids must be token ids, got {prefix_ids!r}") from None
    if not prefix:
        raise DomainError(
            "the prefix is empty: the model needs at least one token to predict the secret",
            hint="prepend the model's start-of-text ids (LoadedModel.sot_ids)",
        )
    bad = [t for t in prefix if not 0 <= t < V]
    if bad:
        raise DomainError(f"prefix token id {bad[0]} is outside the vocabulary [0, {V})")
    support = V**L
    if m >= support:
        raise DomainError(
            f"list size m = {m} >= support size V^L = {support}: the list covers every continuation and kappa = 1",
            hint="use m < vocab_size ** secret_length; no audit can use a canary whose whole support fits in the list",
        )
    if policy is not None and temperature is not None:
        raise DomainError("pass either temperature or policy, not both")
    if policy is None:
        t = 1.0 if temperature is None else validate.positive("temperature", temperature)
        pol = Policy(temperature=t)
    elif isinstance(policy, Policy):
        pol = policy
    elif isinstance(policy, str):
        pol = Policy.parse(policy)
    else:
        raise PolicyError(f"policy must be a Policy or a policy string, got {policy!r}")
    max_nodes = validate.integer("max_nodes", max_nodes, minimum=1)
    if time_limit is not None:
        time_limit = validate.positive("time_limit (seconds)", time_limit)
    batch_size = validate.integer("batch_size", batch_size, minimum=1)
    chunk = validate.integer("chunk", chunk, minimum=1)
    max_cache_rows = validate.integer("max_cache_rows", max_cache_rows, minimum=0)

    from ..scoring.rows import PolicyRows  # the model side, with torch

    t0 = time.monotonic()
    rows = PolicyRows(lm, pol, prefix, cache_depth=L - 2, max_cache_rows=max_cache_rows)
    s = _Search(
        rows,
        L,
        m,
        batch_size=batch_size,
        chunk=chunk,
        max_nodes=max_nodes,
        time_limit=time_limit,
        progress=progress,
    )
    reason = s.run(seed=bool(seed))
    s.report.update(s.nodes)
    s.report.close()
    lo, hi = s.bounds()
    closed = reason == "closed" or s.closed()
    if closed:
        reason, hi = "closed", lo
    top = tuple((seq, float(lp)) for lp, seq in sorted(s.top, key=lambda x: (-x[0], x[1])))
    h_bounds = None
    if m == 1:
        h_bounds = (-hi * LOG2E, -lo * LOG2E if lo > -math.inf else math.inf)
    name = getattr(lm, "name", type(lm).__name__)
    fp = lm.fingerprint() if hasattr(lm, "fingerprint") else "unfingerprinted"
    return BaselineResult(
        kappa_lo=math.exp(lo),
        kappa_hi=min(1.0, math.exp(hi)),
        log_kappa_lo=lo,
        log_kappa_hi=min(hi, 0.0),
        closed=closed,
        stop_reason=reason,
        m=m,
        secret_length=L,
        policy=pol.spec,
        prefix_ids=tuple(prefix),
        model=str(name),
        model_fingerprint=str(fp),
        vocab_size=V,
        nodes_expanded=s.nodes,
        frontier_log_beta=s.beta(),
        top=top,
        min_entropy_bits=h_bounds,
        seconds=time.monotonic() - t0,
    )
