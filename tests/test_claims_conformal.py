"""The conformal population test ([EM] §3, §4, App. C): the paper's numbers, exact levels,
ties/atoms/greedy, bad input, and simulations of the stated guarantees."""
from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.claims.conformal import (alpha_sweep, certified_level, conformal_pvalues, find_atom,
                                       population_test, randomized_pvalues, rank_k)
from memclaim.claims.intervals import beta_fpr_law
from memclaim.claims.scores import as_scores, exact_level
from memclaim.errors import DomainError, InputError

LN10 = math.log(10)


# ------------------------------------------------------------------ the paper's own numbers
def test_wikipedia_operating_point_em_c1():
    """[EM] C.1 / C.4.3: N = 5000, alpha = 0.1%."""
    rng = np.random.default_rng(0)
    ctrl = -rng.exponential(30.0, 5000)  # continuous, distinct
    cand = -rng.exponential(20.0, 5000)
    t = population_test(cand, ctrl, alpha=0.001)
    assert t.k == 5
    assert t.alpha_n_exact == "5/5001"
    assert t.alpha_n == pytest.approx(0.0009998, abs=5e-8)  # 0.09998%
    assert t.in_sample_fpr == pytest.approx(0.0008)  # 4/5000 = 0.08%
    assert t.threshold == np.sort(ctrl)[::-1][4]
    law = t.beta_law
    assert (law.a, law.b) == (5, 4996)
    assert round(100 * law.central.lower, 3) == 0.032 and round(100 * law.central.upper, 3) == 0.205
    assert round(100 * law.prob_exceeds_alpha_n) == 44
    assert round(100 * law.conditional_bounds["0.9"], 2) == 0.16
    assert round(100 * law.conditional_bounds["0.95"], 2) == 0.18
    assert law.mean == pytest.approx(t.alpha_n)


def test_decontaminated_pool_em_d2():
    """[EM] D.2 / F.2: N = 4988 gives K = 4, alpha_N = 4/4989 ~ 0.0802%."""
    assert rank_k(alpha=0.001, n_controls=4988) == 4
    assert certified_level(alpha=0.001, n_controls=4988) == Fraction(4, 4989)
    assert round(100 * float(Fraction(4, 4989)), 4) == 0.0802


def test_k_in_exact_arithmetic():
    assert math.floor(0.29 * 100) == 28  # the float trap the exact path avoids
    for a in (0.29, "0.29", "29%", Fraction(29, 100), Decimal("0.29")):
        assert rank_k(alpha=a, n_controls=99) == 29
    assert rank_k(alpha="1/1000", n_controls=5000) == 5
    assert exact_level("alpha", 0.1) == Fraction(1, 10)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), float("inf"), "abc", True, "0%", "100%"])
def test_alpha_outside_unit_interval(bad):
    with pytest.raises(DomainError) as e:
        population_test([-1.0], [-2.0, -3.0], alpha=bad)
    assert repr(bad) in str(e.value) or str(bad) in str(e.value)


def test_k_zero_no_claim_possible():
    ctrl = -np.arange(1, 501, dtype=float)
    t = population_test([0.0, -0.5], ctrl, alpha=0.001)  # 0.001 * 501 < 1
    assert t.k == 0 and not t.claim_possible and t.n_claimed == 0
    assert t.threshold is None and t.alpha_n == 0
    assert "999" in t.no_claim_reason  # N >= 1/alpha - 1
    assert "not evidence of non-memorization" in t.no_claim_reason
    assert t.beta_law is None


def test_strict_threshold_and_ties_at_tau():
    ctrl = np.log([0.9, 0.5, 0.5, 0.5, 0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6])
    t = population_test(np.log([0.5, 0.50001, 0.6]), ctrl, alpha="0.2")  # K = floor(0.2 * 11) = 2
    assert t.k == 2 and t.threshold == math.log(0.5)
    assert t.claimed.tolist() == [False, True, True]  # equal to tau is not claimed
    assert t.controls_above_threshold == 1 and t.controls_tied_at_threshold == 3
    assert t.in_sample_fpr == 0.1 == (t.k - 1) / t.n_controls
    t3 = population_test([0.0], ctrl, alpha="0.3")  # K = 3: tau = 0.5 again, ties at tau
    assert t3.controls_above_threshold == 1 and t3.in_sample_fpr != (t3.k - 1) / t3.n_controls
    # the tied candidate's p-value counts the ties against it
    p = conformal_pvalues([math.log(0.5)], ctrl)
    assert p[0] == (1 + 4) / 11


def test_pvalues_match_brute_force_and_rule():
    rng = np.random.default_rng(3)
    ctrl = np.round(rng.normal(-10, 3, 300))  # many ties
    cand = np.round(rng.normal(-8, 3, 100))
    ctrl = np.minimum(ctrl, 0)
    cand = np.minimum(cand, 0)
    p = conformal_pvalues(cand, ctrl)
    brute = np.array([(1 + sum(z >= s for z in ctrl)) / (len(ctrl) + 1) for s in cand])
    np.testing.assert_array_equal(p, brute)
    for a in ("0.01", "0.05", "0.2"):
        t = population_test(cand, ctrl, alpha=a)
        np.testing.assert_array_equal(t.claimed, t.pvalues <= float(Fraction(a)))  # [EM] C.2


@settings(max_examples=40)
@given(st.lists(st.integers(-6, 0), min_size=1, max_size=40), st.lists(st.integers(-6, 0), min_size=1, max_size=20),
       st.integers(1, 99))
def test_rule_equivalence_property(ctrl, cand, pct):
    """p <= alpha  <=>  score > tau, with heavy ties and -inf atoms ([EM] C.2)."""
    c = np.where(np.array(ctrl) == -6, -np.inf, np.array(ctrl, dtype=float))
    s = np.where(np.array(cand) == -6, -np.inf, np.array(cand, dtype=float))
    if np.all(np.isneginf(c)):
        c[0] = -1.0
    alpha = Fraction(pct, 100)
    t = population_test(s, c, alpha=alpha, binary=False)
    np.testing.assert_array_equal(t.claimed, t.pvalue_numerators <= t.k)
    if t.k:
        assert t.threshold == np.sort(c)[::-1][t.k - 1]
        assert t.controls_above_threshold <= t.k - 1


def test_randomized_pvalues_bracket_and_reduce():
    rng = np.random.default_rng(1)
    ctrl = np.concatenate([np.full(80, -np.inf), np.round(rng.normal(-10, 2, 120))])
    cand = np.concatenate([np.full(30, -np.inf), np.round(rng.normal(-9, 2, 70))])
    n = ctrl.size
    pr = randomized_pvalues(cand, ctrl, seed=7)
    pc = conformal_pvalues(cand, ctrl)
    lower = np.array([(1 + np.sum(ctrl > s)) / (n + 1) for s in cand])
    assert np.all(pr <= pc + 1e-15) and np.all(pr >= lower - 1e-15)
    np.testing.assert_array_equal(pr, randomized_pvalues(cand, ctrl, seed=7))  # seeded
    distinct = rng.normal(-10, 2, 50)
    np.testing.assert_array_equal(randomized_pvalues(distinct[:10] + 0.123, distinct, seed=1),
                                  conformal_pvalues(distinct[:10] + 0.123, distinct))


def test_randomized_pvalue_reference_eq18():
    """The tie-group implementation equals Eq. 18 computed literally with the same uniforms."""
    ctrl = np.array([-1.0, -2.0, -2.0, -2.0, -np.inf, -np.inf, -3.0])
    cand = np.array([-2.0, -np.inf, -1.5, -2.0])
    rng = np.random.default_rng(11)
    u_ctrl, u_cand = rng.random(ctrl.size), rng.random(cand.size)
    ref = [(1 + np.sum(ctrl > s) + np.sum((ctrl == s) & (u_ctrl > u))) / (ctrl.size + 1)
           for s, u in zip(cand, u_cand)]
    np.testing.assert_allclose(randomized_pvalues(cand, ctrl, seed=11), ref)


# ------------------------------------------------------------------ bad input
def test_bad_inputs():
    with pytest.raises(InputError, match="empty"):
        population_test([-1.0], [], alpha=0.1)
    with pytest.raises(InputError, match="empty"):
        population_test([], [-1.0], alpha=0.1)
    with pytest.raises(InputError, match=r"all 3 control scores are -inf"):
        population_test([-1.0], [-np.inf] * 3, alpha=0.5)
    with pytest.raises(InputError, match=r"\[1\] is NaN"):
        population_test([-1.0, float("nan")], [-1.0], alpha=0.5)
    with pytest.raises(InputError, match="not a log-probability"):
        population_test([0.5], [-1.0], alpha=0.5)
    with pytest.raises(InputError, match="not a probability"):
        as_scores([1.2], kind="prob")
    with pytest.raises(DomainError, match="unknown score kind"):
        population_test([-1.0], [-1.0], alpha=0.5, kind="logits")
    # arbitrary scores may be positive
    t = population_test([5.0, 1.0], [0.5, 2.0, 3.0, 4.0], alpha=0.4, kind="score")  # K = 2
    assert t.threshold == 3.0 and t.claimed.tolist() == [True, False] and t.threshold_log10_prob is None


# ------------------------------------------------------------------ atoms and greedy
def test_topk_atom_beta_law_below_alpha_dagger():
    """[EM] C.4.2/C.4.4: 89.6% of controls at probability 0; Beta law shown (K <= controls above)."""
    rng = np.random.default_rng(5)
    n = 5000
    ctrl = np.where(rng.random(n) < 0.896, -np.inf, -rng.exponential(20, n))
    t = population_test(-rng.exponential(15, 100), ctrl, alpha=0.001)
    assert t.atom.atom_value == -np.inf
    assert t.atom.alpha_dagger == pytest.approx(np.mean(ctrl > -np.inf))
    assert t.beta_law is not None and "Lemma 3" in t.beta_law_note
    assert t.beta_law.holds_below == t.atom.alpha_dagger and t.beta_law.holds_below_is_estimate
    sw = alpha_sweep(-rng.exponential(15, 100), ctrl)
    assert sw.max_k == t.atom.n_above_atom and sw.k.max() == sw.max_k  # the ceiling alpha-dagger


def test_threshold_on_atom_hides_beta_law():
    ctrl = np.concatenate([np.full(97, -np.inf), [-5.0, -6.0, -7.0]])
    t = population_test([-1.0, -5.5, -8.0, -np.inf], ctrl, alpha=0.05)  # K = 5 > 3 above the atom
    assert t.k == 5 and t.threshold == -np.inf and t.threshold_on_atom
    assert t.claimed.tolist() == [True, True, True, False]
    assert t.beta_law is None and "fewer than K = 5" in t.beta_law_note
    assert t.margins_log10 is None


def test_ties_above_the_atom_are_atoms_too():
    ctrl = np.array([-1.0, -2.0, -3.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0])
    a = find_atom(ctrl)
    assert a.atom_value == -3.0 and a.n_above_atom == 2 and a.alpha_dagger == 0.2
    t = population_test([-0.5], ctrl, alpha=0.3)  # K = 3 lands on the tie
    assert t.beta_law is None


def test_greedy_binary_em_s4():
    """[EM] §4, D.3: binary scores, alpha_N = (m+1)/(N+1), CP bars, no Beta law, no sweep."""
    n, m = 5000, 92  # e.g. 1.84% of controls reproduced
    ctrl = np.where(np.arange(n) < m, 0.0, -np.inf)
    cand = np.where(np.arange(5000) < 377, 0.0, -np.inf)  # 7.54% of members
    t = population_test(cand, ctrl, alpha=0.001)
    assert t.binary and "detected" in t.binary_reason
    b = t.binary_rates
    assert b.m == m and b.alpha_n == pytest.approx((m + 1) / (n + 1)) and b.alpha_n_exact == "93/5001"
    assert b.member_rate.estimate == pytest.approx(0.0754)
    assert round(b.floor_share_of_member_rate, 2) == round(93 / 5001 / 0.0754, 2)
    lo, hi = stats.binomtest(377, 5000).proportion_ci(method="exact")
    assert (b.member_rate.lower, b.member_rate.upper) == pytest.approx((lo, hi))
    assert not t.claim_possible and "(m+1)/(N+1)" in t.no_claim_reason
    assert t.beta_law is None and "binary" in t.beta_law_note
    assert alpha_sweep(cand, ctrl) is None
    t2 = population_test(cand, ctrl, alpha=Fraction(m + 1, n + 1))  # exactly the floor
    assert t2.claim_possible and t2.n_claimed == 377
    assert t2.pvalues[0] == pytest.approx((m + 1) / (n + 1))
    with pytest.raises(InputError, match="binary scores must be probability 1 or 0"):
        population_test([-0.5], ctrl, alpha=0.1, binary=True)
    tb = population_test(cand, np.full(100, -np.inf), alpha=0.05)  # m = 0 is legitimate for greedy
    assert tb.binary and tb.n_claimed == 377 and tb.binary_rates.alpha_n == 1 / 101


def test_sweep_matches_single_tests():
    rng = np.random.default_rng(2)
    ctrl = np.where(rng.random(400) < 0.5, -np.inf, -rng.exponential(10, 400))
    cand = -rng.exponential(6, 150)
    sw = alpha_sweep(cand, ctrl, max_points=30)
    for i in range(0, sw.k.size, 5):
        k = int(sw.k[i])
        t = population_test(cand, ctrl, alpha=Fraction(k, ctrl.size + 1))
        assert t.k == k and t.threshold == sw.threshold[i]
        assert t.generation_rate.estimate == sw.member_rate[i]
        assert t.calibrated_rate.lower == pytest.approx(sw.calibrated_lower[i])
        assert t.in_sample_fpr == sw.control_rate[i]


# ------------------------------------------------------------------ simulated guarantees
def _fpr_trials(rng, n, k, draw, trials, check=40):
    """Number of trials in which a fresh exchangeable non-member clears the K-th largest of N
    controls (vectorized); the first ``check`` trials are re-decided by population_test itself,
    so the simulation tests the library's rule, not a copy of it."""
    ctrl = draw(rng, (trials, n))  # [trials, N]
    cand = draw(rng, (trials,))  # [trials]
    tau = -np.partition(-ctrl, k - 1, axis=1)[:, k - 1]  # K-th largest per row
    hit = cand > tau
    for i in range(min(check, trials)):
        if np.all(np.isneginf(ctrl[i])):
            continue
        t = population_test([cand[i]], ctrl[i], alpha=Fraction(k, n + 1), binary=False)
        assert t.k == k and bool(t.claimed[0]) == bool(hit[i])
    return int(np.count_nonzero(hit))


def _continuous(rng, shape):
    return -rng.exponential(5.0, shape)


def _ties_and_atom(rng, shape):
    # 60% exact zeros (an atom at -inf in log space), the rest on 4 tied levels
    x = -rng.integers(1, 5, shape).astype(float)
    return np.where(rng.random(shape) < 0.6, -np.inf, x)


@settings(max_examples=8)
@given(st.integers(20, 300), st.integers(1, 30), st.sampled_from(["continuous", "ties"]), st.integers(0, 2**31))
def test_fpr_at_most_alpha_n_by_simulation(n, pct10, which, seed):
    """Prop. 1: P[fresh non-member claimed] <= alpha_N, with and without ties and atoms.

    For continuous scores it equals alpha_N exactly, so the test is one-sided ("not above"):
    we reject only if the number of false claims in 4000 trials exceeds the 1 - 1e-4 quantile of
    Binomial(4000, alpha_N). False-alarm rate <= 1e-4 per example, <= 8e-4 over the 8 examples.
    """
    alpha = Fraction(pct10, 1000)
    k = rank_k(alpha=alpha, n_controls=n)
    if k == 0:
        return
    an = k / (n + 1)
    rng = np.random.default_rng(seed)
    draw = _continuous if which == "continuous" else _ties_and_atom
    trials = 4000
    hits = _fpr_trials(rng, n, k, draw, trials)
    assert hits <= stats.binom.ppf(1 - 1e-4, trials, an), (hits, trials * an)


def test_fpr_equals_alpha_n_for_continuous_scores():
    """For continuous scores the FPR is exactly alpha_N: a two-sided check that the simulation is
    not vacuous. 20000 trials, N = 99, alpha = 5% (K = 5, alpha_N = 0.05). False alarm 1e-4."""
    rng = np.random.default_rng(12345)
    hits = _fpr_trials(rng, 99, 5, _continuous, 20000)
    assert stats.binomtest(hits, 20000, 0.05).pvalue > 1e-4
    # and the test with atoms is strictly conservative here (ties count against candidates)
    hits_ties = _fpr_trials(rng, 99, 5, _ties_and_atom, 20000)
    assert hits_ties < 0.05 * 20000


@settings(max_examples=5)
@given(st.sampled_from([0.1, 0.3, 1.0]), st.integers(1, 8), st.integers(0, 2**31))
def test_alpha_star_follows_beta_below_alpha_dagger(alpha_dagger, k, seed):
    """[EM] Prop. 2 / Lemma 3: across control draws alpha* ~ Beta(K, N-K+1) below alpha-dagger.

    Non-member scores: probability 0 (an atom) w.p. 1 - alpha_dagger, else Uniform(0, 1) on a
    log scale, so FPR(tau) = alpha_dagger (1 - u) is known in closed form. For 3000 control draws
    of N = 200 we count alpha* <= v at the Beta quantiles 0.1, 0.5, 0.9 that lie below
    alpha_dagger; each count is Binomial(3000, H(v)) under the law, checked two-sided at 1e-4
    (false alarm <= 3e-4 per example, <= 1.5e-3 over the 5 examples).
    """
    n, draws = 200, 3000
    rng = np.random.default_rng(seed)
    u = rng.random((draws, n))
    gen = rng.random((draws, n)) < alpha_dagger
    z = np.where(gen, u, -1.0)  # -1 stands for the atom (probability 0) below every u
    tau = -np.partition(-z, k - 1, axis=1)[:, k - 1]
    alpha_star = np.where(tau >= 0, alpha_dagger * (1 - tau), alpha_dagger)
    law = beta_fpr_law(k=k, n=n, conditional_levels=(0.1, 0.5, 0.9))  # the library's law
    assert (law.a, law.b) == (k, n - k + 1)
    for q, v in law.conditional_bounds.items():  # v = v_q: alpha* <= v for a share q of draws
        if v >= alpha_dagger:
            continue
        count = int(np.count_nonzero(alpha_star <= v))
        assert stats.binomtest(count, draws, float(q)).pvalue > 1e-4, (q, count / draws)
    # and the mean is alpha_N when the law holds everywhere ([EM] Eq. 16)
    if alpha_dagger == 1.0:
        se = np.std(alpha_star) / math.sqrt(draws)
        assert abs(alpha_star.mean() - k / (n + 1)) < 4.5 * se
