"""Randomized response, BSC post-processing, the two-sided geometric mechanism and the Bernoulli
staircase ([MX] App. B.4, B.5, Lemma 4.4, Fig. 8), checked against closed forms written out here,
brute-force sums, the privacy module's formulas, and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.errors import DomainError
from memclaim.mechanisms import (
    BernoulliStaircase,
    RandomizedResponse,
    TwoSidedGeometric,
    binary_symmetric_channel,
    exact_tradeoff,
    max_privacy_loss,
    total_variation,
)
from memclaim.privacy.caps import eta_pure, eta_star_k, geometric_shift_tv
from memclaim.privacy.tradeoff import f_eps

EPS = st.floats(min_value=0.05, max_value=6.0, allow_nan=False)


def eta_star_closed_form(eps: float, k: int) -> float:
    """[MX] Lemma 4.4, written out independently of the library."""
    if k % 2 == 0:
        return 1.0 - math.exp(-k * eps / 2)
    return 1.0 - 2.0 * math.exp(-(k - 1) * eps / 2) / (math.exp(eps) + 1.0)


# ---------------------------------------------------------------- randomized response
@given(EPS)
def test_rr_advantage_and_privacy_loss_are_exact(eps):
    rr = RandomizedResponse(epsilon=eps)
    assert rr.advantage() == pytest.approx(math.tanh(eps / 2), rel=1e-12, abs=1e-15)
    assert rr.advantage() == pytest.approx(eta_pure(eps), rel=1e-12, abs=1e-15)
    assert rr.privacy_loss() == pytest.approx(eps, rel=1e-12)


@given(EPS, st.floats(min_value=0.0, max_value=0.5))
def test_bsc_post_processing_scales_the_advantage(eps, gamma):
    """[MX] Fig. 8: BSC(gamma) after RR gives (1 - 2 gamma) tanh(eps/2), and is never less private."""
    m = RandomizedResponse(epsilon=eps, crossover=gamma)
    assert m.advantage() == pytest.approx((1 - 2 * gamma) * math.tanh(eps / 2), abs=1e-12)
    assert m.privacy_loss() <= eps + 1e-12


@given(EPS)
def test_rr_tradeoff_is_f_eps(eps):
    """The RR pair attains f_eps exactly (it is the extremal eps-DP pair)."""
    a = np.linspace(0, 1, 101)
    np.testing.assert_allclose(
        RandomizedResponse(epsilon=eps).tradeoff(a), f_eps(a, epsilon=eps), atol=1e-12
    )


def test_rr_release_frequencies():
    """Simulation: P(B = 1 | bit) matches q and 1 - q. Two-sided binomial tests at 1e-4 each:
    false-alarm rate <= 2e-4 (and the seed is fixed, so CI is deterministic)."""
    rng = np.random.default_rng(11)
    rr = RandomizedResponse(epsilon=1.3)
    n = 50_000
    for bit in (0, 1):
        out = rr.release(np.full(n, bit), rng=rng)
        assert set(np.unique(out)) <= {0, 1}
        assert stats.binomtest(int(out.sum()), n, rr.prob_one(bit)).pvalue > 1e-4


def test_bsc_flip_rate():
    """Flip frequency of BSC(0.2) (binomial test at 1e-4: false-alarm rate 1e-4)."""
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, size=40_000)
    out = binary_symmetric_channel(bits, gamma=0.2, rng=rng)
    assert stats.binomtest(int((out != bits).sum()), bits.size, 0.2).pvalue > 1e-4
    np.testing.assert_array_equal(binary_symmetric_channel(bits, gamma=0.0, rng=rng), bits)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_rr_rejects_bad_epsilon(bad):
    with pytest.raises(DomainError, match="epsilon"):
        RandomizedResponse(epsilon=bad)


@pytest.mark.parametrize("gamma", [-0.1, 0.51, 2.0])
def test_bsc_rejects_bad_crossover(gamma):
    with pytest.raises(DomainError, match=repr(gamma)):
        binary_symmetric_channel([0, 1], gamma=gamma, rng=np.random.default_rng(0))
    with pytest.raises(DomainError):
        RandomizedResponse(epsilon=1.0, crossover=gamma)


def test_rr_rejects_non_bits():
    with pytest.raises(DomainError, match="0/1"):
        RandomizedResponse(epsilon=1.0).release([0, 2], rng=np.random.default_rng(0))


# ---------------------------------------------------------------- two-sided geometric
@settings(max_examples=30)
@given(EPS)
def test_geometric_pmf_is_the_two_sided_geometric_law(eps):
    g = TwoSidedGeometric(eps)
    y = np.arange(-60, 61)
    alpha = math.exp(-eps)
    np.testing.assert_allclose(
        g.pmf(y), (1 - alpha) / (1 + alpha) * alpha ** np.abs(y), rtol=1e-10, atol=1e-300
    )
    np.testing.assert_allclose(g.logpmf(y), np.log(g.pmf(y)), rtol=1e-10)
    assert g.logpmf(10_000) == pytest.approx(
        math.log(math.tanh(eps / 2)) - 10_000 * eps
    )  # no underflow


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("k", list(range(0, 13)))
def test_shift_tv_equals_direct_summation_and_eta_star(eps, k):
    """Reference: TV(G, G + k) = sum_y max(0, g(y) - g(y - k)) by direct summation over a window
    wide enough that the tails are below 1e-15. [MX] Lemma 4.4: it equals eta*_k for every k."""
    g = TwoSidedGeometric(eps)
    half = int(40 / eps) + k + 5
    y = np.arange(-half, half + 1)
    direct = np.maximum(g.pmf(y) - g.pmf(y - k), 0.0).sum()
    assert g.shift_total_variation(k) == pytest.approx(direct, abs=1e-13)
    if k >= 1:
        assert g.shift_total_variation(k) == pytest.approx(eta_star_closed_form(eps, k), abs=1e-13)
        assert g.shift_total_variation(k) == pytest.approx(
            eta_star_k(epsilon=eps, k=k).value, abs=1e-13
        )
        assert g.shift_total_variation(k) == pytest.approx(
            geometric_shift_tv(epsilon=eps, k=k), abs=1e-13
        )
        for t in g.optimal_thresholds(k):
            assert g.threshold_advantage(k, t) == pytest.approx(direct, abs=1e-13)
        # and no threshold does better (brute force over thresholds, vectorized)
        t = np.arange(-k - 10, 2 * k + 10)
        best = float(np.max(g.sf(t - k - 1) - g.sf(t - 1)))
        assert best == pytest.approx(direct, abs=1e-13)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_shift_tv_strictly_below_group_bound(k):
    """[MX] Lemma 4.4: eta*_k < tanh(k eps/2) for k >= 2 (e.g. 0.632 < 0.762 at k = 2, eps = 1)."""
    g = TwoSidedGeometric(1.0)
    assert g.shift_total_variation(k) < math.tanh(k / 2) - 1e-3
    if k == 2:
        assert round(g.shift_total_variation(2), 3) == 0.632 and round(math.tanh(1.0), 3) == 0.762


def test_geometric_sampling_matches_pmf():
    """Chi-square goodness of fit of 200k draws on |y| <= 6 plus the two tails; test at level
    1e-4 (false-alarm rate 1e-4)."""
    g = TwoSidedGeometric(0.8)
    x = g.sample(200_000, rng=np.random.default_rng(3))
    assert x.dtype == np.int64
    edges = np.arange(-6, 7)
    obs = np.array([np.sum(x < -6)] + [np.sum(x == e) for e in edges] + [np.sum(x > 6)])
    probs = np.concatenate([[g.cdf(-7)], g.pmf(edges), [g.sf(6)]])
    assert stats.chisquare(obs, probs / probs.sum() * x.size).pvalue > 1e-4


def test_geometric_release_adds_noise_to_counts():
    g = TwoSidedGeometric(1.0)
    rng = np.random.default_rng(0)
    out = g.release(np.array([0, 5, 10]), rng=rng)
    assert out.shape == (3,) and out.dtype == np.int64
    with pytest.raises(DomainError, match="integers"):
        g.release(np.array([0.5]), rng=rng)
    with pytest.raises(DomainError, match="k"):
        g.shift_total_variation(-1)


@pytest.mark.parametrize("bad", [0.0, -2, float("inf"), float("nan")])
def test_geometric_rejects_bad_epsilon(bad):
    with pytest.raises(DomainError, match="epsilon"):
        TwoSidedGeometric(bad)


# ---------------------------------------------------------------- Bernoulli staircase
def fbar(b, eps):
    """The cap map of [MX] Lemma 4.4, written out here."""
    return min(math.exp(eps) * b, 1 - math.exp(-eps) * (1 - b))


@settings(max_examples=40)
@given(EPS, st.integers(min_value=1, max_value=12))
def test_staircase_attains_eta_star_and_is_eps_dp(eps, k):
    s = BernoulliStaircase(eps, k)
    lv = s.levels()
    assert lv.shape == (k + 1,)
    assert np.all(np.diff(lv) > 0) and 0 < lv[0] and lv[-1] < 1
    assert s.advantage() == pytest.approx(eta_star_closed_form(eps, k), abs=1e-12)
    assert s.advantage() == pytest.approx(eta_star_k(epsilon=eps, k=k).value, abs=1e-12)
    # the orbit of the cap map: b_{i+1} = fbar(b_i)  ([MX] App. B.5 Step 3)
    for i in range(k):
        assert lv[i + 1] == pytest.approx(fbar(lv[i], eps), rel=1e-10, abs=1e-14)
    # eps-DP at every adjacent pair, in both orders, exactly ([MX] App. B.5 Step 3)
    assert s.privacy_loss() <= eps * (1 + 1e-10)
    a = np.linspace(0, 1, 51)
    for i in range(k):
        assert np.all(s.tradeoff(i, i + 1, a) >= f_eps(a, epsilon=eps) - 1e-10)
        assert np.all(s.tradeoff(i + 1, i, a) >= f_eps(a, epsilon=eps) - 1e-10)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_staircase_value_is_the_max_over_starting_points(k):
    """Slow reference: max_x fbar^k(x) - x on a fine grid is attained by the library's orbit."""
    eps = 1.0
    xs = np.linspace(0, 1, 20001)
    vals = []
    for x in xs:
        b = x
        for _ in range(k):
            b = fbar(b, eps)
        vals.append(b - x)
    assert max(vals) <= BernoulliStaircase(eps, k).advantage() + 1e-12
    assert max(vals) == pytest.approx(BernoulliStaircase(eps, k).advantage(), abs=2e-4)


def test_staircase_release_frequencies():
    """Simulation at eps = 1, k = 3: P(B = 1) at counts 0..5 matches b_min(c, k); binomial tests at
    1e-4 each (false-alarm rate <= 6e-4)."""
    s = BernoulliStaircase(1.0, 3)
    rng = np.random.default_rng(2)
    lv = s.levels()
    for c in range(6):
        out = s.release(np.full(30_000, c), rng=rng)
        assert stats.binomtest(int(out.sum()), out.size, lv[min(c, 3)]).pvalue > 1e-4


def test_staircase_large_k_keeps_precision():
    s = BernoulliStaircase(2.0, 60)
    assert s.advantage() == pytest.approx(-math.expm1(-60.0), abs=1e-15)
    assert s.levels()[0] > 0


@pytest.mark.parametrize(
    "kw",
    [dict(epsilon=0, k=2), dict(epsilon=1, k=0), dict(epsilon=1, k=1.5), dict(epsilon=-1, k=3)],
)
def test_staircase_rejects_bad_input(kw):
    with pytest.raises(DomainError):
        BernoulliStaircase(**kw)
    with pytest.raises(DomainError, match="counts"):
        BernoulliStaircase(1.0, 2).release(np.array([-1]), rng=np.random.default_rng(0))


# ---------------------------------------------------------------- finite trade-off helper
def test_exact_tradeoff_edge_cases():
    # identical laws: T = 1 - alpha
    a = np.linspace(0, 1, 11)
    np.testing.assert_allclose(exact_tradeoff([0.3, 0.7], [0.3, 0.7], a), 1 - a, atol=1e-12)
    # disjoint supports: T = 0 everywhere (perfectly distinguishable)
    np.testing.assert_allclose(exact_tradeoff([1, 0], [0, 1], a), 0, atol=1e-12)
    # partly disjoint: Q-mass where P = 0 is free power at alpha = 0
    assert exact_tradeoff([0.5, 0.5, 0.0], [0.2, 0.3, 0.5], 0.0) == pytest.approx(0.5)
    assert max_privacy_loss([1, 0], [0.5, 0.5]) == math.inf
    assert total_variation([0.2, 0.8], [0.5, 0.5]) == pytest.approx(0.3)
    with pytest.raises(DomainError, match="sum to 1"):
        exact_tradeoff([0.2, 0.2], [0.5, 0.5], 0.1)
    with pytest.raises(DomainError, match="alpha"):
        exact_tradeoff([0.5, 0.5], [0.5, 0.5], 1.5)
