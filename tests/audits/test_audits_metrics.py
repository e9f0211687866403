"""Metrics of memclaim.audits.metrics: DeLong AUC against slow references and statsmodels, the
certified-FPR threshold rule ([EM] Eq. 5-6) and its guarantee, Clopper-Pearson TPR intervals,
refusals, and the paired McNemar comparison."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.nonparametric import rank_compare_2indep
from statsmodels.stats.proportion import proportion_confint

from memclaim.audits import metrics as M
from memclaim.errors import DomainError, InputError


def _delong_slow(x, y):
    """O(m n) DeLong: placements from the definition psi(x, y) = 1, 1/2, 0 (DeLong et al. 1988)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])  # [m, n]
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    var = np.var(v10, ddof=1) / x.size + np.var(v01, ddof=1) / y.size
    return psi.mean(), v10, v01, var


scores = st.lists(
    st.one_of(
        st.integers(-3, 3).map(float),  # heavy ties
        st.floats(-5, 5, allow_nan=False),
        st.sampled_from([-math.inf, math.inf]),
    ),
    min_size=2,
    max_size=25,
)


@settings(derandomize=True, max_examples=100, deadline=None)
@given(scores, scores)
def test_fast_delong_equals_slow_reference(x, y):
    auc_s, v10_s, v01_s, var_s = _delong_slow(x, y)
    auc_f, v10_f, v01_f = M.delong_placements(np.array(x), np.array(y))
    assert auc_f == pytest.approx(auc_s, abs=1e-12)
    assert M.roc_auc_slow(x, y) == pytest.approx(auc_s, abs=1e-12)
    np.testing.assert_allclose(v10_f, v10_s, atol=1e-12)
    np.testing.assert_allclose(v01_f, v01_s, atol=1e-12)
    r = M.roc_auc(x, y)
    assert r.auc == pytest.approx(auc_s, abs=1e-12)
    assert r.se == pytest.approx(math.sqrt(var_s), abs=1e-12)
    assert 0.0 <= r.low <= r.auc <= r.high <= 1.0
    assert r.leak_signal == pytest.approx(2 * r.auc - 1)


def test_delong_matches_statsmodels_brunner_munzel_variance():
    rng = np.random.default_rng(5)
    for _ in range(20):
        x = np.round(rng.normal(0.5, 1, int(rng.integers(3, 60))), 1)
        y = np.round(rng.normal(0.0, 1, int(rng.integers(3, 60))), 1)
        sm = rank_compare_2indep(x, y, use_t=False)
        r = M.roc_auc(x, y)
        # statsmodels' prob1 is the relative effect of sample 1 over sample 2 (ties one half)
        assert r.auc == pytest.approx(sm.prob1, abs=1e-12)
        assert r.se**2 == pytest.approx(sm.var_prob, rel=1e-10)


def test_auc_hand_example_with_ties():
    # members {3, 2, 2}, non-members {2, 1}: pairs (3>2, 3>1, 2=2, 2>1, 2=2, 2>1) = 4 + 2*0.5 = 5 of 6
    r = M.roc_auc([3, 2, 2], [2, 1])
    assert r.auc == pytest.approx(5 / 6)


def test_degenerate_cases_fall_back_to_hoeffding():
    r = M.roc_auc([5, 6, 7, 8], [1, 2, 3])  # complete separation
    assert r.auc == 1.0 and r.se == 0.0 and r.interval_method == "hoeffding"
    h = math.sqrt(math.log(2 / 0.05) / (2 * 3))
    assert r.low == pytest.approx(1 - h) and r.high == 1.0
    t = M.roc_auc([1.0] * 48, [1.0] * 48)  # all tied: exactly 0.5, not certain
    assert t.auc == 0.5 and t.interval_method == "hoeffding" and t.low < 0.5 < t.high
    assert not t.excludes_chance


def test_auc_input_errors():
    with pytest.raises(InputError, match="at least 2"):
        M.roc_auc([1.0], [0.0, 1.0])
    with pytest.raises(InputError, match="at least 2"):
        M.roc_auc([1.0, 2.0], [])
    with pytest.raises(InputError, match="NaN"):
        M.roc_auc([1.0, float("nan")], [0.0, 1.0])
    with pytest.raises(InputError, match="one-dimensional"):
        M.roc_auc([[1.0, 2.0]], [0.0, 1.0])
    with pytest.raises(DomainError):
        M.roc_auc([1.0, 2.0], [0.0, 1.0], confidence=1.0)


def test_delong_interval_coverage_under_alternative():
    """Coverage of the 95% DeLong interval at a known AUC (Gaussians shifted by 1: AUC =
    Phi(1/sqrt 2) = 0.7602). Over 300 seeds at 60 + 60 the miss count is Binomial(300, ~0.05);
    we require <= binom.ppf(0.999, 300, 0.065): false-alarm rate < 0.1% if the true miss rate
    is at most 6.5%."""
    true = stats.norm.cdf(1 / math.sqrt(2))
    miss = 0
    for s in range(300):
        rng = np.random.default_rng(s)
        r = M.roc_auc(rng.normal(1, 1, 60), rng.normal(0, 1, 60))
        miss += not (r.low <= true <= r.high)
    assert miss <= stats.binom.ppf(0.999, 300, 0.065)


def test_compare_aucs_paired():
    rng = np.random.default_rng(0)
    n = 80
    base_m, base_n = rng.normal(1.5, 1, n), rng.normal(0, 1, n)
    noisy_m, noisy_n = base_m + rng.normal(0, 2, n), base_n + rng.normal(0, 2, n)
    c = M.compare_aucs(base_m, base_n, noisy_m, noisy_n, alternative="greater")
    assert c.difference > 0 and c.p_value < 0.01 and c.low < c.difference < c.high
    same = M.compare_aucs(base_m, base_n, base_m, base_n)
    assert same.difference == 0 and same.p_value == 1.0
    # the paired variance equals the slow O(mn) covariance computation
    _, a10, a01, _ = _delong_slow(base_m, base_n)
    _, b10, b01, _ = _delong_slow(noisy_m, noisy_n)
    var = np.var(a10 - b10, ddof=1) / n + np.var(a01 - b01, ddof=1) / n
    assert c.se == pytest.approx(math.sqrt(var))
    with pytest.raises(InputError, match="same texts"):
        M.compare_aucs(base_m, base_n, noisy_m[:-1], noisy_n)


# ------------------------------------------------------------------------ certified FPR / TPR
def test_conformal_rank_exact_and_paper_example():
    # [EM] §C: N = 5000, alpha = 0.1% -> K = floor(5.001) = 5, alpha_N = 5/5001.
    assert M.conformal_rank(0.001, 5000) == 5
    tau, k, a_n = M.certified_threshold(np.arange(5000.0), fpr=0.001)
    assert k == 5 and a_n == Fraction(5, 5001) and tau == 4995.0
    # exact arithmetic: 0.3 * 10 = 3 (binary 0.3 would give floor(2.9999...) = 2)
    assert M.conformal_rank(0.3, 9) == 3
    assert M.conformal_rank("1/20", 19) == 1
    assert M.conformal_rank(Fraction(1, 20), 18) == 0


def test_min_nonmembers():
    assert M.min_nonmembers(0.05) == 19
    assert M.min_nonmembers(0.01) == 99
    assert M.min_nonmembers(0.001) == 999
    assert M.min_nonmembers(0.3) == 3  # 1/0.3 - 1 = 2.33 -> 3; floor(0.3 * 4) = 1
    for a in (0.05, 0.01, 0.3, 0.07, "1/7"):
        n = M.min_nonmembers(a)
        assert M.conformal_rank(a, n) >= 1 and M.conformal_rank(a, n - 1) == 0


def test_tpr_refuses_uncertifiable_fpr_and_says_how_many():
    with pytest.raises(DomainError, match="at least 19 non-members") as e:
        M.tpr_at_fpr(np.ones(10), np.zeros(18), fpr=0.05)
    assert "K = floor" in str(e.value)
    r = M.tpr_at_fpr(np.ones(10), np.zeros(19), fpr=0.05)
    assert r.k == 1 and r.certified_fpr == pytest.approx(0.05)


def test_tpr_strict_threshold_and_ties():
    # N = 19, alpha = 0.05 -> K = 1: tau = the largest non-member score; flag iff score > tau.
    non = np.array([0.0] * 18 + [5.0])
    mem = np.array([5.0, 5.0, 6.0, 7.0, -np.inf])
    r = M.tpr_at_fpr(mem, non, fpr=0.05)
    assert r.threshold == 5.0 and r.true_positives == 2 and r.tpr == pytest.approx(0.4)
    assert r.in_sample_fpr == 0.0
    lo, hi = proportion_confint(2, 5, alpha=0.05, method="beta")
    assert (r.low, r.high) == pytest.approx((lo, hi))
    # K = 3 at N = 59: tau = third-largest
    non = np.arange(59.0)
    r = M.tpr_at_fpr(np.array([55.5, 56.0, 57.0, 58.5, 1.0]), non, fpr=0.05)
    assert r.k == 3 and r.threshold == 56.0 and r.true_positives == 2
    assert r.in_sample_fpr == pytest.approx(2 / 59)


def test_tpr_with_minus_inf_threshold():
    non = np.full(19, -np.inf)
    r = M.tpr_at_fpr(np.array([-np.inf, -1.0, 0.0]), non, fpr=0.05)
    assert r.threshold == -np.inf and r.true_positives == 2


def test_certified_fpr_guarantee_by_simulation():
    """The conformal guarantee ([EM] Prop. 1): a fresh non-member exchangeable with the N
    calibration non-members is flagged with probability <= K/(N+1) (exactly K/(N+1) for
    continuous scores, less with ties). 6000 independent draws at N = 39, alpha = 0.05
    (K = 2, alpha_N = 0.05), continuous and tied scores; we require the flag count <=
    binom.ppf(0.999, 6000, alpha_N): false-alarm rate <= 0.1% per case."""
    rng = np.random.default_rng(0)
    trials, n = 6000, 39
    for tied in (False, True):
        draws = rng.normal(size=(trials, n + 1))
        if tied:
            draws = np.round(draws)  # heavy ties
        flagged = 0
        for row in draws:
            tau, k, a_n = M.certified_threshold(row[:n], fpr=0.05)
            flagged += row[n] > tau
        assert k == 2 and a_n == Fraction(2, 40)
        assert flagged <= stats.binom.ppf(0.999, trials, float(a_n))
        if not tied:  # and it is not vacuous: the rate is close to alpha_N
            assert flagged >= stats.binom.ppf(0.001, trials, float(a_n))


def test_compare_tprs_mcnemar():
    rng = np.random.default_rng(1)
    non = rng.normal(0, 1, 199)
    strong = rng.normal(3, 1, 100)
    weak = strong - rng.uniform(0, 3, 100)  # same members, a weaker attack
    c = M.compare_tprs(strong, non, weak, non, fpr=0.05, n_bootstrap=0)
    assert math.isnan(c.bootstrap_p)
    assert c.tpr_a.k == 10 and c.tpr_a.certified_fpr == pytest.approx(0.05)
    assert c.only_b == 0 and c.only_a > 10
    assert c.p_value == pytest.approx(0.5**c.only_a)
    assert c.both + c.only_a + c.only_b + c.neither == 100
    same = M.compare_tprs(strong, non, strong, non, fpr=0.05)
    assert same.only_a == same.only_b == 0 and same.p_value == 1.0
    # two-sided and the exact binomial
    c2 = M.compare_tprs(weak, non, strong, non, fpr=0.05, alternative="two-sided")
    assert c2.p_value == pytest.approx(stats.binomtest(c2.only_a, c2.only_a + c2.only_b).pvalue)
    with pytest.raises(InputError, match="same members"):
        M.compare_tprs(strong, non, weak[:-1], non)
    with pytest.raises(DomainError, match="at least 19"):
        M.compare_tprs(strong, non[:10], weak, non[:10])


def test_compare_tprs_bootstrap_counts_tied_replicates_against_the_alternative():
    """Issue 24 item 4: the bootstrap p-value is (1 + #{d* <= 0}) / (B + 1) for 'greater' (a tie is
    no evidence for TPR_a > TPR_b). Two identical attacks tie in every replicate: p = 1 for every
    alternative (counting only d* < 0 gave 1/2001 = 0.0005, a false 'significant')."""
    rng = np.random.default_rng(3)
    non, sig = rng.normal(0, 1, 99), rng.normal(2, 1, 60)
    for alt in ("greater", "less", "two-sided"):
        c = M.compare_tprs(sig, non, sig, non, fpr=0.05, n_bootstrap=2000, alternative=alt)
        assert c.difference == 0.0 and c.diff_low == c.diff_high == 0.0
        assert c.bootstrap_p == 1.0, alt
    # b loses one member a flags: d* >= 0 in every replicate, > 0 only where that member was drawn
    weak = sig.copy()
    i = int(np.argmax(sig))
    weak[i] = -10.0
    c = M.compare_tprs(sig, non, weak, non, fpr=0.05, n_bootstrap=2000, seed=1)
    assert (
        c.diff_low >= 0.0 and c.bootstrap_p > 0.2
    )  # about P(member i never drawn) = (59/60)^60 = 0.36
    assert (
        M.compare_tprs(
            sig, non, weak, non, fpr=0.05, n_bootstrap=2000, seed=1, alternative="less"
        ).bootstrap_p
        == 1.0
    )


def test_mcnemar_false_alarm_rate_under_its_conditional_null():
    """McNemar's null is conditional on the thresholds. With the same calibration non-member
    scores for both attacks (identical thresholds) and exchangeable member scores, the two flag
    members equally often, and the one-sided exact test at level 0.05 rejects with probability
    <= 5% (exact test, conservative). Over 200 seeds we require <= binom.ppf(0.999, 200, 0.05)
    rejections: false-alarm rate of this check < 0.1%."""
    rej = 0
    for s in range(200):
        rng = np.random.default_rng(10_000 + s)
        sig = rng.normal(1.0, 1, 60)
        a, b = sig + rng.normal(0, 1, 60), sig + rng.normal(0, 1, 60)
        non = rng.normal(0, 1.4, 39)
        rej += M.compare_tprs(a, non, b, non, fpr=0.05, n_bootstrap=0).p_value <= 0.05
    assert rej <= stats.binom.ppf(0.999, 200, 0.05)


def test_bootstrap_false_alarm_rate_with_random_thresholds():
    """Unconditional null: two exchangeable attacks, each calibrated on its own noisy scores of
    the same 39 non-members, have equal population TPRs at 5% FPR, but their thresholds differ
    by chance. The paired bootstrap (which resamples the calibration too) should reject at
    level 0.05 in at most ~5% of seeds (we measured ~2%). Over 150 seeds we require <=
    binom.ppf(0.999, 150, 0.05) rejections: false-alarm rate of this check < 0.1% if the true
    rate is <= 5%."""
    rej = 0
    for s in range(150):
        rng = np.random.default_rng(20_000 + s)
        sig, yn = rng.normal(1.0, 1, 60), rng.normal(0, 1, 39)
        a, b = sig + rng.normal(0, 1, 60), sig + rng.normal(0, 1, 60)
        na, nb = yn + rng.normal(0, 1, 39), yn + rng.normal(0, 1, 39)
        c = M.compare_tprs(a, na, b, nb, fpr=0.05, n_bootstrap=500, seed=s)
        rej += c.bootstrap_p <= 0.05
    assert rej <= stats.binom.ppf(0.999, 150, 0.05)


def test_compare_tprs_bootstrap_detects_a_real_difference_and_is_reproducible():
    rng = np.random.default_rng(2)
    non = rng.normal(0, 1, 199)
    sig = rng.normal(2.5, 1, 100)
    c = M.compare_tprs(sig, non, sig - 1.5, non - 0.0, fpr=0.05, n_bootstrap=1000, seed=7)
    assert c.bootstrap_p < 0.01 and c.diff_low > 0 and c.diff_low <= c.difference <= c.diff_high
    c2 = M.compare_tprs(sig, non, sig - 1.5, non, fpr=0.05, n_bootstrap=1000, seed=7)
    assert c2.bootstrap_p == c.bootstrap_p and c2.diff_low == c.diff_low
    with pytest.raises(InputError, match="paired_nonmembers"):
        M.compare_tprs(sig, non, sig, non[:-1], fpr=0.05)
    c3 = M.compare_tprs(sig, non, sig, non[:-1], fpr=0.05, paired_nonmembers=False, n_bootstrap=200)
    assert c3.n_bootstrap == 200 and not c3.paired_nonmembers


def test_clopper_pearson_matches_statsmodels():
    for k, n in [(0, 5), (5, 5), (3, 10), (17, 48), (1, 400)]:
        lo, hi = M.clopper_pearson(k, n, confidence=0.9)
        slo, shi = proportion_confint(k, n, alpha=0.1, method="beta")
        assert (lo, hi) == pytest.approx((slo, shi), abs=1e-10)


def test_level_parsing():
    assert M.exact_level("fpr", 0.29) == Fraction(29, 100)
    assert M.exact_level("fpr", "1/1000") == Fraction(1, 1000)
    for bad in (0, 1, 1.5, -0.1, float("inf"), "abc", True):
        with pytest.raises(DomainError):
            M.exact_level("fpr", bad)


def test_results_serialize():
    import json

    from memclaim.jsonutil import dumps

    r = M.tpr_at_fpr(np.ones(3), np.full(19, -np.inf), fpr=0.05)
    d = json.loads(dumps(r))
    assert d["threshold"] == "-inf" and d["k"] == 1
    a = json.loads(dumps(M.roc_auc([1, 2], [0, 3])))
    assert a["interval_method"] == "delong"


def test_compare_aucs_zero_variance_uses_hoeffding():
    perfect_m, perfect_n = np.arange(10.0, 20.0), np.arange(0.0, 10.0)
    flat = np.zeros(10)
    c = M.compare_aucs(perfect_m, perfect_n, flat, flat, alternative="greater")
    assert c.difference == 0.5 and c.se == 0.0 and c.interval_method == "hoeffding"
    # P(D - ED >= 0.5) <= exp(-k t^2 / 2) with k = 10, t = 0.5
    assert c.p_value == pytest.approx(math.exp(-10 * 0.25 / 2))
    both = M.compare_aucs(perfect_m, perfect_n, perfect_m, perfect_n)
    assert both.difference == 0.0 and both.p_value == 1.0
