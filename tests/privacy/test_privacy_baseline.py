"""Certified baseline kappa_pi(m) against brute-force enumeration on synthetic models ([MX] App. F.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from memclaim.decoding import Policy, policy_logprobs
from memclaim.errors import DomainError
from memclaim.models.base import SyntheticLM
from memclaim.privacy.baseline import certify_baseline

PREFIX = [3, 1]
REL = 1e-12  # "exact" = exact up to float64 rounding of the path sums


def _row(lm: SyntheticLM, ctx, policy: Policy) -> np.ndarray:
    """Reference next-token log-probs straight from the model's exact logits (no cache, no batching)."""
    z = torch.tensor(lm.next_logits(ctx), dtype=torch.float64).unsqueeze(0)
    return policy_logprobs(z, policy)[0].numpy()


_BRUTE: dict = {}


def brute_force(lm: SyntheticLM, prefix, L: int, m: int, policy: Policy):
    """Enumerate all V^L continuations; return (log top-m mass, sorted top-m log-probs)."""
    key = (lm.fingerprint(), tuple(prefix), L, m, policy)
    if key not in _BRUTE:
        _BRUTE[key] = _brute_force(lm, prefix, L, m, policy)
    return _BRUTE[key]


def _brute_force(lm: SyntheticLM, prefix, L: int, m: int, policy: Policy):
    V = lm.vocab_size
    logps = []

    def rec(ctx, depth, lp):
        row = _row(lm, ctx, policy)
        if depth == L - 1:
            logps.extend((lp + row).tolist())
            return
        for t in range(V):
            if row[t] > -math.inf:
                rec(ctx + [t], depth + 1, lp + row[t])

    rec(list(prefix), 0, 0.0)
    top = np.sort(np.asarray(logps))[::-1][:m]
    return float(logsumexp(top)), top


CASES = [  # (vocab, depth, m, temperature, seed, tie_levels)
    (7, 2, 1, 1.0, 0, 0),
    (7, 3, 4, 1.0, 1, 0),
    (7, 4, 16, 0.7, 2, 0),
    (12, 3, 16, 1.3, 3, 0),
    (9, 3, 4, 1.0, 4, 2),  # exact ties in the logits
    (30, 2, 4, 2.0, 5, 0),
    (120, 2, 16, 1.0, 6, 0),
    (120, 2, 1, 0.5, 7, 0),
]


@pytest.mark.parametrize("V,L,m,T,seed,ties", CASES)
def test_exact_when_the_search_finishes(V, L, m, T, seed, ties):
    lm = SyntheticLM(vocab_size=V, seed=seed, tie_levels=ties)
    pol = Policy(temperature=T)
    ref_log, ref_top = brute_force(lm, PREFIX, L, m, pol)
    res = certify_baseline(lm, PREFIX, secret_length=L, m=m, temperature=T, batch_size=8, chunk=5)
    assert res.closed and res.stop_reason == "closed"
    assert res.kappa_lo == res.kappa_hi
    assert res.log_kappa_lo == pytest.approx(ref_log, rel=REL, abs=1e-13)
    assert res.kappa_lo == pytest.approx(math.exp(ref_log), rel=1e-11)
    np.testing.assert_allclose([lp for _, lp in res.top], ref_top, rtol=REL, atol=1e-13)
    for toks, lp in res.top:  # every reported continuation really has that probability
        ctx, acc = list(PREFIX), 0.0
        for t in toks:
            acc += _row(lm, ctx, pol)[t]
            ctx.append(t)
        assert acc == pytest.approx(lp, rel=REL, abs=1e-13)
    assert res.m == m and res.secret_length == L and res.policy == pol.spec
    if m == 1:
        lo, hi = res.min_entropy_bits
        assert lo == pytest.approx(hi) == pytest.approx(-ref_log / math.log(2))


@pytest.mark.parametrize("V,L,m,T,seed,ties", CASES[1:6])
@pytest.mark.parametrize("budget", [1, 2, 4, 9, 25])
def test_brackets_when_cut_short(V, L, m, T, seed, ties, budget):
    lm = SyntheticLM(vocab_size=V, seed=seed, tie_levels=ties)
    ref_log, _ = brute_force(lm, PREFIX, L, m, Policy(temperature=T))
    ref = math.exp(ref_log)
    res = certify_baseline(
        lm, PREFIX, secret_length=L, m=m, temperature=T, max_nodes=budget, batch_size=3, chunk=3
    )
    assert res.kappa_lo <= ref * (1 + REL)
    assert res.kappa_hi >= ref * (1 - REL)
    assert res.nodes_expanded <= budget
    if not res.closed:
        assert res.stop_reason == "max-nodes"


def test_time_limit_brackets():
    lm = SyntheticLM(vocab_size=12, seed=3)
    ref = math.exp(brute_force(lm, PREFIX, 3, 4, Policy())[0])
    res = certify_baseline(lm, PREFIX, secret_length=3, m=4, time_limit=1e-9)
    assert res.stop_reason == "time-limit" and not res.closed
    assert res.kappa_lo <= ref * (1 + REL) and res.kappa_hi >= ref * (1 - REL)


@pytest.mark.parametrize(
    "kw",
    [
        dict(max_cache_rows=0),  # every row recomputed from the prefix cache
        dict(chunk=1),  # rows refetched for every child
        dict(batch_size=1, seed=False),
        dict(batch_size=64, chunk=1000, max_cache_rows=2),
    ],
)
def test_search_variants_agree(kw):
    lm = SyntheticLM(vocab_size=9, seed=4, tie_levels=2)
    ref_log, _ = brute_force(lm, PREFIX, 4, 16, Policy())
    res = certify_baseline(lm, PREFIX, secret_length=4, m=16, **kw)
    assert res.closed
    assert res.log_kappa_lo == pytest.approx(ref_log, rel=REL, abs=1e-13)


def test_kv_cache_is_reused():
    """Expanding a node feeds one token to its parent's cache; without caches every row re-reads its path."""
    kwargs = dict(secret_length=4, m=4, seed=False, batch_size=4)
    a = SyntheticLM(vocab_size=7, seed=11)
    ra = certify_baseline(a, PREFIX, **kwargs)
    b = SyntheticLM(vocab_size=7, seed=11)
    rb = certify_baseline(b, PREFIX, max_cache_rows=0, **kwargs)
    assert ra.log_kappa_lo == rb.log_kappa_lo and ra.nodes_expanded == rb.nodes_expanded
    assert a.calls < b.calls  # token positions run through the model


def test_progress_is_monotone():
    lm = SyntheticLM(vocab_size=12, seed=3)
    events = []
    res = certify_baseline(lm, PREFIX, secret_length=3, m=4, batch_size=2, progress=events.append)
    assert events[0].done == 0 and events[-1].finished and events[-1].done == res.nodes_expanded
    assert all(e.stage == "baseline" and e.unit == "rows" and e.total == 100_000 for e in events)
    seen = [
        (e.done, e.extra["kappa_lo"], e.extra["kappa_hi"]) for e in events if "kappa_lo" in e.extra
    ]
    assert [n for n, _, _ in seen] == sorted(n for n, _, _ in seen)
    assert len(seen) >= 2
    los = [s[1] for s in seen]
    his = [s[2] for s in seen]
    assert all(b >= a - 1e-15 for a, b in zip(los, los[1:]))
    assert all(b <= a + 1e-15 for a, b in zip(his, his[1:]))
    assert his[-1] >= res.kappa_hi - 1e-15


def test_truncating_policies_and_zero_probability_tokens():
    lm = SyntheticLM(vocab_size=10, seed=8)
    pol = Policy.parse("top-k:3")
    ref_log, _ = brute_force(lm, PREFIX, 3, 4, pol)
    res = certify_baseline(lm, PREFIX, secret_length=3, m=4, policy=pol)
    assert res.closed and res.log_kappa_lo == pytest.approx(ref_log, rel=REL, abs=1e-13)
    g = certify_baseline(lm, PREFIX, secret_length=3, m=4, policy="greedy")
    assert (
        g.closed and g.kappa_lo == 1.0 and len(g.top) == 1
    )  # one continuation carries all the mass
    assert g.top[0][1] == 0.0


def test_single_token_secret():
    lm = SyntheticLM(vocab_size=50, seed=9)
    row = _row(lm, PREFIX, Policy())
    res = certify_baseline(lm, PREFIX, secret_length=1, m=3)
    assert res.closed and res.nodes_expanded == 1
    assert res.log_kappa_lo == pytest.approx(float(logsumexp(np.sort(row)[::-1][:3])), rel=REL)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(secret_length=2, m=49), "support size"),  # V^L = 49
        (dict(secret_length=2, m=100), "support size"),
        (dict(secret_length=0, m=1), "secret_length"),
        (dict(secret_length=2, m=0), "list size"),
        (dict(secret_length=2, m=1, temperature=0.0), "temperature"),
        (dict(secret_length=2, m=1, temperature=1.0, policy="greedy"), "either"),
        (dict(secret_length=2, m=1, max_nodes=0), "max_nodes"),
    ],
)
def test_bad_input(kw, match):
    lm = SyntheticLM(vocab_size=7, seed=0)
    with pytest.raises(DomainError, match=match):
        certify_baseline(lm, PREFIX, **kw)


def test_bad_prefix():
    lm = SyntheticLM(vocab_size=7, seed=0)
    with pytest.raises(DomainError, match="empty"):
        certify_baseline(lm, [], secret_length=2, m=1)
    with pytest.raises(DomainError, match="outside the vocabulary"):
        certify_baseline(lm, [7], secret_length=2, m=1)


def test_result_serializes():
    lm = SyntheticLM(vocab_size=7, seed=1)
    d = certify_baseline(lm, PREFIX, secret_length=2, m=4).to_dict()
    assert d["closed"] is True and d["model_fingerprint"].startswith("synthetic:")
    assert isinstance(d["top"][0][0], list)


@pytest.mark.slow
@pytest.mark.parametrize("V,L,m", [(120, 3, 16), (40, 4, 4)])
def test_exact_on_larger_models(V, L, m):
    lm = SyntheticLM(vocab_size=V, seed=12)
    ref_log, _ = brute_force(lm, PREFIX, L, m, Policy())
    res = certify_baseline(lm, PREFIX, secret_length=L, m=m, max_nodes=10**7)
    assert res.closed and res.log_kappa_lo == pytest.approx(ref_log, rel=REL, abs=1e-13)
    cut = certify_baseline(
        lm, PREFIX, secret_length=L, m=m, max_nodes=max(2, res.nodes_expanded // 3)
    )
    assert cut.kappa_lo <= math.exp(ref_log) * (1 + REL) <= cut.kappa_hi * (1 + 2 * REL)
