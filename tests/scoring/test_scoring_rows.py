"""memclaim.scoring.rows.PolicyRows: the model side of the certified-baseline search. Rows equal
policy_logprobs of a direct forward pass, sorted with ties in token order; cached and
recomputed rows agree; beam steps continue the prefix."""

from __future__ import annotations

import numpy as np
import torch

from memclaim.decoding import Policy, policy_logprobs
from memclaim.models.base import SyntheticLM
from memclaim.scoring.rows import PREFIX_HANDLE, PolicyRows

PREFIX = [0, 3]


def _direct(lm, ctx, policy):
    hidden, _ = lm.forward_hidden(torch.tensor([ctx]), past=None, use_cache=False)
    return policy_logprobs(lm.logits(hidden[:, -1, :]).to(torch.float64), policy)[0].numpy()


def test_root_expand_and_cache_reuse():
    for tie_levels in (0, 2):
        lm = SyntheticLM(vocab_size=9, seed=4, tie_levels=tie_levels)
        pol = Policy(temperature=0.8)
        rows = PolicyRows(lm, pol, PREFIX, cache_depth=3)
        root, (vals, ids) = rows.root()
        np.testing.assert_allclose(root, _direct(lm, PREFIX, pol), rtol=0, atol=1e-12)
        assert np.all(np.diff(vals) <= 0) and np.array_equal(vals, root[ids])
        tied = [(i, j) for i, j in zip(ids, ids[1:]) if root[i] == root[j]]
        assert all(i < j for i, j in tied)  # ties in token-id order
        ((r1, h1),) = rows.expand([((5,), PREFIX_HANDLE)])
        np.testing.assert_allclose(r1[0], np.sort(_direct(lm, PREFIX + [5], pol))[::-1], atol=1e-12)
        ((r2, _),) = rows.expand([((5, 2), h1)])  # fed one token to the cached parent
        cold = PolicyRows(lm, pol, PREFIX, cache_depth=3, max_cache_rows=0)
        cold.root()
        ((r3, h3),) = cold.expand([((5, 2), ("gone", 0))])  # recomputed from the prefix cache
        assert h3 is None
        np.testing.assert_allclose(r2[0], r3[0], atol=1e-12)
        assert np.array_equal(r2[1], r3[1]) or tie_levels


def test_beam_and_top_k():
    lm = SyntheticLM(vocab_size=6, seed=1)
    rows = PolicyRows(lm, Policy(), PREFIX, cache_depth=2)
    root, _ = rows.root()
    vals, flat = rows.top_k(root, 2)
    assert list(vals) == sorted(root, reverse=True)[:2]
    step = rows.beam([0, 0], [int(flat[0]), int(flat[1])], depth=0)
    np.testing.assert_allclose(step[1], _direct(lm, PREFIX + [int(flat[1])], Policy()), atol=1e-12)
    nxt = rows.beam([1], [2], depth=1)
    np.testing.assert_allclose(
        nxt[0], _direct(lm, PREFIX + [int(flat[1]), 2], Policy()), atol=1e-12
    )
