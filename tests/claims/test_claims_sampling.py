"""Sampling-based extraction estimates, the pure part (memclaim.claims.sampling; [EM] App. F.1):
the token edit distance and the verbatim / near-verbatim match counts with their exact
Clopper-Pearson intervals, property-tested against their definitions (hypothesis; scipy's
binomial tails for the interval's endpoints)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.claims.sampling import set_estimate, token_edit_distance, window_estimate
from memclaim.errors import InputError

toks = st.lists(st.integers(0, 5), max_size=8)


@given(toks, toks, toks)
@settings(max_examples=200, deadline=None)
def test_edit_distance_is_a_metric_bounded_by_the_longer_length(a, b, c):
    d = token_edit_distance
    assert d(a, b) == d(b, a)
    assert (d(a, b) == 0) == (a == b)
    assert d(a, c) <= d(a, b) + d(b, c)
    assert abs(len(a) - len(b)) <= d(a, b) <= max(len(a), len(b))


def _slow_edit(a, b):
    """The recursive definition, memoized: the obviously-correct reference."""
    import functools

    @functools.lru_cache(None)
    def r(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(r(i - 1, j) + 1, r(i, j - 1) + 1, r(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return r(len(a), len(b))


@given(toks, toks)
@settings(max_examples=200, deadline=None)
def test_edit_distance_equals_the_recursive_definition(a, b):
    assert token_edit_distance(a, b) == _slow_edit(tuple(a), tuple(b))


@given(
    st.integers(1, 60),
    st.data(),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
@settings(max_examples=150, deadline=None)
def test_the_interval_is_clopper_pearsons_binomial_tail_inversion(n, data, conf):
    k = data.draw(st.integers(0, n))
    target = [1, 2, 3]
    gens = [target] * k + [[9]] * (n - k)
    e = window_estimate("w", target, gens, confidence=conf)
    iv = e.interval
    a = 1 - conf
    assert e.verbatim == k and e.n == n and iv.estimate == k / n
    assert 0.0 <= iv.lower <= k / n <= iv.upper <= 1.0
    # each endpoint is the p at which the observed count sits at the alpha/2 tail
    if k > 0:
        assert stats.binom.sf(k - 1, n, iv.lower) == pytest.approx(a / 2, rel=1e-6, abs=1e-12)
    else:
        assert iv.lower == 0.0
    if k < n:
        assert stats.binom.cdf(k, n, iv.upper) == pytest.approx(a / 2, rel=1e-6, abs=1e-12)
    else:
        assert iv.upper == 1.0


@given(st.lists(toks, min_size=1, max_size=12), toks, st.lists(st.integers(0, 4), max_size=3))
@settings(max_examples=150, deadline=None)
def test_near_verbatim_counts_grow_with_epsilon_and_include_the_verbatim_ones(gens, target, eps):
    e = window_estimate("w", target, gens, epsilons=eps)
    for x, k in zip(e.epsilons, e.near):
        assert k == sum(token_edit_distance(target, g) <= x for g in gens)
        assert k >= e.verbatim
    order = np.argsort(e.epsilons, kind="stable")
    assert all(np.diff(np.asarray(e.near)[order]) >= 0)


def test_the_interval_covers_the_true_rate_at_its_confidence():
    """Coverage by simulation: 400 draws of k ~ Binomial(20, 0.3); the 90% interval must cover
    0.3 in at least 90% of them less the Monte Carlo slack (CP is conservative)."""
    rng = np.random.default_rng(7)
    hits = 0
    for k in rng.binomial(20, 0.3, size=400):
        iv = window_estimate("w", [1], [[1]] * k + [[2]] * (20 - k), confidence=0.9).interval
        hits += iv.lower <= 0.3 <= iv.upper
    assert hits / 400 >= 0.87


def test_the_set_rate_counts_windows_reproduced_at_least_once_and_no_generation_is_refused():
    a = window_estimate("a", [1, 2], [[1, 2], [3]])
    b = window_estimate("b", [1, 2], [[3], [3]])
    c = window_estimate("c", [1, 2], [[1, 2], [1, 2]])
    iv = set_estimate([a, b, c])
    assert iv.estimate == pytest.approx(2 / 3) and iv.lower < 2 / 3 < iv.upper
    with pytest.raises(InputError, match="no generations"):
        window_estimate("w", [1], [])
