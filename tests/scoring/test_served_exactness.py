"""Served models' exactness, policy by policy (memclaim.scoring.served.exactness) against the
exact full-softmax computation of memclaim.decoding on random logits (distinct logits at least
1e-9 apart: closer ones round to one log-prob, a tie the server's own arithmetic makes).

A "server" here is the float64 log-softmax of random logits, cut to its top K entries (sorted,
ties in any order): what vLLM's ``prompt_logprobs`` returns. Every value the module calls exact
must equal memclaim.decoding.policy_target_logprob on the full logits (to float64 rounding), and
every certified interval must contain it. Integer logits make ties at every boundary on purpose.

The properties are deterministic guarantees (no randomness in what is checked): their false-alarm
rate is 0; hypothesis searches for a counterexample (derandomized in CI).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memclaim.decoding import Policy, policy_target_logprob
from memclaim.scoring.served.exactness import (
    BOUNDS,
    EXACT,
    EXACT_IF_OBSERVED,
    REFUSED,
    PolicyScores,
    TopK,
    greedy_flags,
    min_margin,
    policy_class,
    policy_scores,
    statistic_class,
    tokens_needed,
)

TOL = 1e-9  # float64 reassociation: the reference sums in another order


def server_view(
    x: np.ndarray,
    targets: np.ndarray,
    K: int,
    *,
    rng: np.random.Generator | None = None,
    include_target: bool = True,
) -> TopK:
    """What a server returns for logits x [S, V]: the top-K of log_softmax (ties broken at random
    among equal values, as a server's top-k may), the target's own log-prob, vLLM's rank."""
    rng = rng or np.random.default_rng(0)
    S, V = x.shape
    lp = torch.log_softmax(torch.tensor(x, dtype=torch.float64), dim=-1).numpy()
    top_lp, top_ids, ranks = [], [], []
    for s in range(S):
        # random order among ties, then descending by value (a stable sort keeps the random order)
        perm = rng.permutation(V)
        order = perm[np.argsort(-lp[s, perm], kind="stable")][:K]
        ids = [int(i) for i in order]
        vals = [float(lp[s, i]) for i in order]
        top_lp.append(vals)
        top_ids.append(ids)
        ranks.append(int((lp[s] >= lp[s, targets[s]]).sum()))
    return TopK.from_lists(
        targets, lp[np.arange(S), targets], top_lp, top_ids, vocab_size=V, server_rank=ranks
    )


def reference(x: np.ndarray, targets: np.ndarray, policy: Policy) -> np.ndarray:
    return policy_target_logprob(
        torch.tensor(x, dtype=torch.float64), torch.tensor(targets), policy
    ).numpy()


def check(
    policy: Policy, x: np.ndarray, targets: np.ndarray, K: int, seed: int = 0
) -> PolicyScores:
    v = server_view(x, targets, K, rng=np.random.default_rng(seed))
    got = policy_scores(policy, v)
    ref = reference(x, targets, policy)
    for s in range(len(targets)):
        if got.exact[s]:
            if ref[s] == -math.inf or got.value[s] == -math.inf:
                assert ref[s] == got.value[s], (policy.spec, s, ref[s], got.value[s])
            else:
                assert abs(got.value[s] - ref[s]) <= TOL * max(1.0, abs(ref[s])), (
                    policy.spec,
                    s,
                    ref[s],
                    got.value[s],
                )
        else:
            assert math.isnan(got.value[s])
        slack = TOL * max(1.0, abs(ref[s])) if math.isfinite(ref[s]) else 0.0
        assert got.lower[s] <= ref[s] + slack, (policy.spec, s, got.lower[s], ref[s])
        assert ref[s] <= got.upper[s] + slack, (policy.spec, s, ref[s], got.upper[s])
    return got


logits_float = st.integers(2, 40).flatmap(
    lambda V: st.tuples(
        st.just(V),
        st.lists(
            st.lists(st.floats(-8, 8, allow_nan=False), min_size=V, max_size=V),
            min_size=1,
            max_size=4,
        ),
    )
)
# small integers: many exact ties, at the top-k boundary, at the maximum, inside the nucleus
logits_tied = st.integers(2, 12).flatmap(
    lambda V: st.tuples(
        st.just(V),
        st.lists(st.lists(st.integers(-3, 3), min_size=V, max_size=V), min_size=1, max_size=4),
    )
)


def _arrays(data, targets_seed):
    V, rows = data
    x = np.array(rows, dtype=np.float64)
    # two logits closer than the log-softmax's rounding become one value in what a server returns:
    # a tie the server's arithmetic makes is the server's (module docstring), not a case to check
    for row in x:
        d = np.abs(row[:, None] - row[None, :])
        assume(np.all((d == 0) | (d > 1e-9)))
    rng = np.random.default_rng(targets_seed)
    targets = rng.integers(0, V, size=len(rows))
    return V, x, targets


@settings(max_examples=300)
@given(
    data=st.one_of(logits_float, logits_tied),
    k=st.integers(1, 12),
    extra=st.integers(0, 6),
    T=st.sampled_from([1.0, 0.5, 0.7, 1.5, 3.0]),
    seed=st.integers(0, 10**6),
)
def test_top_k_any_temperature_exact_with_k_plus_one(data, k, extra, T, seed):
    """top-k:k at any T is exact from K >= k + 1 returned values, or bounded while ties run past K."""
    V, x, targets = _arrays(data, seed)
    pol = Policy(temperature=T, top_k=k)
    K = min(V, k + 1 + extra)
    got = check(pol, x, targets, K, seed)
    if k >= V or K >= V:
        assert got.exact.all()
    # without ties at the end of the returned list, every position is exact
    lp = torch.log_softmax(torch.tensor(x), -1).numpy()
    for s in range(len(targets)):
        srt = np.sort(lp[s])[::-1]
        if K < V and k < V and srt[K - 1] < srt[k - 1]:
            assert got.exact[s]


@settings(max_examples=200)
@given(
    data=st.one_of(logits_float, logits_tied),
    k=st.integers(1, 8),
    p=st.floats(0.05, 0.99),
    T=st.sampled_from([1.0, 0.6, 2.0]),
    seed=st.integers(0, 10**6),
)
def test_top_k_then_top_p_exact_from_the_top_k(data, k, p, T, seed):
    """top-k then top-p (HF order) is fixed by the top-k support's values at any T."""
    V, x, targets = _arrays(data, seed)
    # a nucleus boundary within float64 rounding of p is decided by the reference's own cumsum order
    lp = torch.log_softmax(torch.tensor(x) / T, -1).numpy()
    for s in range(len(targets)):
        srt = np.sort(lp[s])[::-1]
        kth = srt[min(k, V) - 1]
        sup = srt[srt >= kth]
        q = np.exp(sup - np.log(np.sum(np.exp(sup))))
        assume(np.min(np.abs(np.cumsum(q) - p)) > 1e-9)
    check(Policy(temperature=T, top_k=k, top_p=p), x, targets, min(V, k + 1), seed)


@settings(max_examples=300)
@given(
    data=st.one_of(logits_float, logits_tied),
    K=st.integers(1, 40),
    p=st.floats(0.05, 0.999),
    seed=st.integers(0, 10**6),
)
def test_top_p_at_t1_exact_once_the_nucleus_is_observed(data, K, p, seed):
    """top-p:p at T = 1: exact where the returned mass reaches p (up to ties straddling the
    boundary), certified bounds elsewhere."""
    V, x, targets = _arrays(data, seed)
    K = min(K, V)
    lp = torch.log_softmax(torch.tensor(x), -1).numpy()
    for s in range(len(targets)):
        srt = np.sort(lp[s])[::-1]
        assume(np.min(np.abs(np.cumsum(np.exp(srt)) - p)) > 1e-9)
    got = check(Policy(top_p=p), x, targets, K, seed)
    for s in range(len(targets)):
        srt = np.sort(lp[s])[::-1]
        tied_at_target = np.sum(lp[s] == lp[s, targets[s]]) > 1
        if not tied_at_target and (
            K >= V or (np.sum(np.exp(srt[:K])) >= p and srt[K - 1] < lp[s, targets[s]])
        ):
            assert got.exact[s], (s, K, p)


@settings(max_examples=300)
@given(
    data=st.one_of(logits_float, logits_tied),
    K=st.integers(1, 40),
    T=st.floats(0.2, 5.0),
    seed=st.integers(0, 10**6),
)
def test_temperature_bounds_contain_the_exact_value(data, K, T, seed):
    """temperature:T != 1 without truncation: certified bounds from the returned mass (exact only
    with the whole vocabulary); the interval shrinks to the value as K reaches V."""
    assume(abs(T - 1.0) > 1e-3)
    V, x, targets = _arrays(data, seed)
    K = min(K, V)
    got = check(Policy(temperature=T), x, targets, K, seed)
    assert got.exact.all() == (K >= V)
    assert np.all(got.lower <= got.upper + 1e-12)


@settings(max_examples=300)
@given(data=st.one_of(logits_float, logits_tied), K=st.integers(2, 12), seed=st.integers(0, 10**6))
def test_greedy_and_margin_match_the_engine(data, K, seed):
    """greedy is torch.argmax's first index; decided unless the whole returned list ties with the
    maximum; the margin is the top-1 - top-2 logit gap."""
    V, x, targets = _arrays(data, seed)
    K = min(K, V)
    got = check(Policy(greedy=True), x, targets, K, seed)
    v = server_view(x, targets, K, rng=np.random.default_rng(seed))
    hit, decided = greedy_flags(v)
    xt = torch.tensor(x)
    amax = xt.argmax(-1).numpy()
    for s in range(len(targets)):
        lp_sorted = np.sort(v.top_lp[s])[::-1]
        if K >= V or lp_sorted[K - 1] < lp_sorted[0]:
            assert decided[s] and got.exact[s]
        if decided[s]:
            assert hit[s] == (amax[s] == targets[s])
    if V >= 2:
        top2 = torch.topk(torch.log_softmax(xt, -1), 2, -1).values.numpy()
        assert min_margin(v) == pytest.approx(float(np.min(top2[:, 0] - top2[:, 1])), abs=1e-12)


@given(data=st.one_of(logits_float, logits_tied), K=st.integers(0, 5), seed=st.integers(0, 10**6))
def test_full_is_the_target_log_prob_whatever_k(data, K, seed):
    V, x, targets = _arrays(data, seed)
    got = check(Policy(), x, targets, min(K, V), seed)
    assert got.exact.all()


def test_window_sum_and_impossible_target():
    """A window's log q is the sum of its positions' ([EM] Eq. 1); a target outside the support
    makes it exactly -inf even where other positions are only bounded."""
    x = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = server_view(x, np.array([3, 1]), 2)
    w = policy_scores(Policy(top_k=1), v).window()
    assert w[0] == -math.inf and w[1]
    v2 = server_view(np.array([[3.0, 2.0, 1.0, 0.0], [1.0, 0.5, 0.0, -1.0]]), np.array([0, 1]), 3)
    logq, exact, lo, hi = policy_scores(Policy(top_k=2), v2).window()
    ref = reference(
        np.array([[3.0, 2.0, 1.0, 0.0], [1.0, 0.5, 0.0, -1.0]]), np.array([0, 1]), Policy(top_k=2)
    )
    assert exact and logq == pytest.approx(float(ref.sum()), abs=1e-12) and lo == hi == logq
    # a tie running past the returned list: bounds, not a value
    v3 = server_view(np.zeros((1, 6)), np.array([2]), 3)
    logq, exact, lo, hi = policy_scores(Policy(top_k=2), v3).window()
    assert math.isnan(logq) and not exact and lo <= -math.log(6) <= hi


def test_lost_entries_are_never_exact():
    """llama-cpp-python keys alternatives by token string: a position whose list is known to
    have lost entries is not exact for any policy that reads the list (full still is)."""
    v = TopK.from_lists([0], [-0.5], [[-0.5, -1.0]], [[0, 1]], vocab_size=10, complete=[False])
    assert policy_scores(Policy(), v).exact.all()
    for spec in ("greedy", "top-k:1", "top-p:0.5", "temperature:0.5"):
        assert not policy_scores(Policy.parse(spec), v).exact.any(), spec
    assert min_margin(v) == 0.0
    # a returned token above the target settles greedy and top-k:1 whatever was lost
    below = TopK.from_lists([1], [-1.0], [[-0.5, -1.0]], [[0, 1]], vocab_size=10, complete=[False])
    for spec in ("greedy", "top-k:1"):
        assert policy_scores(Policy.parse(spec), below).value.tolist() == [-math.inf], spec


def test_classes_before_any_request():
    V = 49152
    assert policy_class(Policy.parse("full"), 0, V) == (EXACT, None)
    assert policy_class(Policy.parse("greedy"), 1, V)[0] == REFUSED
    assert policy_class(Policy.parse("top-k:40,temperature:0.7"), 41, V) == (EXACT, None)
    cls, why = policy_class(Policy.parse("top-k:40"), 20, V)
    assert cls == REFUSED and "41" in why and "20" in why
    assert policy_class(Policy.parse("top-p:0.9"), 64, V)[0] == EXACT_IF_OBSERVED
    assert policy_class(Policy.parse("top-p:0.9,temperature:0.7"), 64, V)[0] == BOUNDS
    assert policy_class(Policy.parse("temperature:0.7"), V, V) == (EXACT, None)
    assert statistic_class("token_moments", 64, V)[0] == REFUSED
    assert statistic_class("token_moments", V, V)[0] == EXACT
    assert statistic_class("margin", 1, V)[0] == REFUSED
    assert tokens_needed(Policy.parse("top-k:40,temperature:0.5")) == 41
