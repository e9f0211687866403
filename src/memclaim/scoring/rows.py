"""Next-token log-probability rows of a model under a decoding policy, for searches over
continuations: the model side of the certified-baseline search (memclaim.privacy.baseline,
[MX] App. F.2), which itself is pure numpy.

A row is log q_phi(. | prefix + tokens) over the whole vocabulary, float64 (``policy_logprobs``
on the model's logits cast to float64, memclaim.decoding). Rows come back as numpy arrays,
sorted descending with ties in token-id order (a stable sort, so a recomputed row ranks its
children the same way every time). KV caches are reused: a node's row is computed by feeding
its last token to its parent's cache (``LanguageModel.select_cache``, which must return a new
cache); caches of recent batches are kept up to ``max_cache_rows`` rows (least recently used
dropped first), other nodes are recomputed from the prefix cache.

>>> from memclaim.models.base import SyntheticLM
>>> from memclaim.decoding import Policy
>>> rows = PolicyRows(SyntheticLM(vocab_size=5, seed=0), Policy(), [0], cache_depth=2)
>>> row, (values, ids) = rows.root()
>>> row.shape, bool(values[0] >= values[-1])
((5,), True)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import count

import numpy as np
import torch

from ..decoding import Policy, policy_logprobs

__all__ = ["PolicyRows", "PREFIX_HANDLE"]

PREFIX_HANDLE = ("prefix", 0)  # the cache of the prefix itself (the root of every computation)

SortedRow = tuple[np.ndarray, np.ndarray]  # (log-probs descending [V] float64, token ids [V] int64)


class PolicyRows:
    """Rows of ``lm`` (a :class:`memclaim.models.base.LanguageModel`) under ``policy`` after
    ``prefix_ids``. Caches are kept for nodes of at most ``cache_depth`` tokens (deeper nodes'
    children are complete sequences: nobody feeds them a token)."""

    prefix_handle = PREFIX_HANDLE

    def __init__(
        self,
        lm,
        policy: Policy,
        prefix_ids: Sequence[int],
        *,
        cache_depth: int,
        max_cache_rows: int = 4096,
    ):
        self.lm = lm
        self.policy = policy
        self.prefix = [int(t) for t in prefix_ids]
        self.cache_depth = int(cache_depth)
        self.max_cache_rows = int(max_cache_rows)
        self.vocab_size = int(lm.vocab_size)
        self.device = lm.device
        self.caches: OrderedDict[int, tuple[object, int]] = OrderedDict()
        self.cache_rows = 0
        self._batch_ids = count()
        self.prefix_past = None
        self._beam_past = None

    # ------------------------------------------------------------------ caches
    def _store_cache(self, past, nrows: int) -> int | None:
        """Keep a batch's cache (evicting the least recently used ones beyond ``max_cache_rows``);
        its handle id, or None when it did not fit (a handle never names an evicted cache)."""
        bid = next(self._batch_ids)
        self.caches[bid] = (past, nrows)
        self.cache_rows += nrows
        while self.cache_rows > self.max_cache_rows and self.caches:
            _, (_, r) = self.caches.popitem(last=False)  # least recently used batch
            self.cache_rows -= r
        return bid if bid in self.caches else None

    def _get_cache(self, handle):
        if handle is None:  # a node whose cache was not kept: recomputed from the prefix cache
            return None
        if handle[0] == "prefix":
            return self.prefix_past
        entry = self.caches.get(handle[0])
        if entry is None:
            return None
        self.caches.move_to_end(handle[0])
        return entry[0]

    # ------------------------------------------------------------------ model calls
    def _ids(self, rows: list[list[int]]):
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _logprob_rows(self, hidden):
        logits = self.lm.logits(hidden[:, -1, :])  # [B, V]
        return policy_logprobs(logits.to(torch.float64), self.policy)  # [B, V], float64

    @staticmethod
    def _sorted(lp):
        # stable descending sort: ties ordered by token id
        return torch.sort(lp, dim=-1, descending=True, stable=True)  # values, indices [B, V]

    @staticmethod
    def _numpy(t) -> np.ndarray:
        return t.detach().cpu().numpy()

    def root(self) -> tuple[np.ndarray, SortedRow]:
        """Run the prefix once (its cache roots every later row): its row, unsorted and sorted."""
        hidden, past = self.lm.forward_hidden(self._ids([self.prefix]), past=None, use_cache=True)
        self.prefix_past = past
        lp = self._logprob_rows(hidden)  # [1, V]
        sv, si = self._sorted(lp)
        return self._numpy(lp[0]), (self._numpy(sv[0]), self._numpy(si[0]))

    def expand(
        self, reqs: list[tuple[tuple[int, ...], tuple]]
    ) -> list[tuple[SortedRow, tuple | None]]:
        """Sorted rows for nodes given as (tokens after the prefix, parent handle), in request order,
        each with the handle of its own cache (None when not kept). Requests whose parent cache
        is alive feed one token to it; the others are recomputed from the prefix cache (grouped
        by depth: a cache holds no padding)."""
        out: list = [None] * len(reqs)
        groups: dict = {}
        for i, (toks, ph) in enumerate(reqs):
            past = self._get_cache(ph)
            if past is not None:
                groups.setdefault(("c", ph[0]), [past, []])[1].append(i)
            else:
                groups.setdefault(("r", len(toks)), [self.prefix_past, []])[1].append(i)
        # every source cache is held above, so storing new caches below may evict them safely
        for (kind, _), (src, idx) in groups.items():
            need_cache = any(len(reqs[i][0]) <= self.cache_depth for i in idx)
            if kind == "c":
                sel = torch.tensor(
                    [reqs[i][1][1] for i in idx], dtype=torch.long, device=self.device
                )
                inp = self._ids([[reqs[i][0][-1]] for i in idx])  # [B, 1]
            else:
                sel = torch.zeros(len(idx), dtype=torch.long, device=self.device)
                inp = self._ids([list(reqs[i][0]) for i in idx])  # [B, depth]
            past = self.lm.select_cache(src, sel)
            hidden, new_past = self.lm.forward_hidden(inp, past=past, use_cache=need_cache)
            sv, si = self._sorted(self._logprob_rows(hidden))  # [B, V] each
            sv, si = self._numpy(sv), self._numpy(si)
            bid = (
                self._store_cache(new_past, len(idx))
                if need_cache and new_past is not None
                else None
            )
            for j, i in enumerate(idx):
                out[i] = ((sv[j], si[j]), (bid, j) if bid is not None else None)
        return out

    def beam(self, parents: Sequence[int], tokens: Sequence[int], *, depth: int) -> np.ndarray:
        """One step of a beam over the prefix: the rows [k, V] (unsorted) after appending
        ``tokens[i]`` to beam entry ``parents[i]`` of the previous step (``depth`` 0: to the
        prefix). The beam's cache is kept for the next step while ``depth + 1 <= cache_depth``."""
        src = self.prefix_past if depth == 0 else self._beam_past
        sel = torch.tensor(
            list(parents) if depth > 0 else [0] * len(tokens), dtype=torch.long, device=self.device
        )
        p = self.lm.select_cache(src, sel)
        hidden, self._beam_past = self.lm.forward_hidden(
            self._ids([[int(t)] for t in tokens]), past=p, use_cache=depth + 1 <= self.cache_depth
        )
        return self._numpy(self._logprob_rows(hidden))

    @staticmethod
    def top_k(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` largest of a flat float64 array and their positions, with torch.topk's order
        among ties (the search's incumbents, and so its node counts, stay as they were)."""
        v, i = torch.topk(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)), int(k))
        return v.numpy(), i.numpy()
