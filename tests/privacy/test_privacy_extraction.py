"""The extraction boundary, alpha*, H* and audit soundness ([MX] §5, App. C)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from memclaim.errors import DomainError
from memclaim.privacy import extraction as X
from memclaim.privacy import tradeoff as T


# --------------------------------------------------------------------------- paper numbers
def test_zipf_canary_bound_paper_number():
    """[MX] §8.1: kappa = 0.355 at eps = 1 gives 1 - f_eps(kappa) = 0.76."""
    v = X.extraction_bound_pure(0.355, epsilon=1.0)
    assert round(v, 2) == 0.76
    assert v == pytest.approx(1 - math.exp(-1) * (1 - 0.355))
    b = X.extraction_bound(0.355, T.pure(1.0, neighbors="add-remove"))
    assert b.value == pytest.approx(v) and b.relaxed == pytest.approx(math.e * 0.355)
    assert b.neighbors == "add-remove" and b.theorem == "[MX] Thm. 5.1(i)"
    assert "Prop. C.2(a)" in X.extraction_bound(0.355, T.pure(1.0, neighbors="replace")).theorem


def test_h_star_paper_numbers():
    h1 = X.h_star(epsilon=1.0, m=4, tau=0.1)
    assert round(h1.bits, 4) == 6.7646 and round(h1.bits, 2) == 6.76  # the paper rounds to 6.77
    assert h1.regime == "first" and h1.exact_on_uniform and h1.sufficient_for_every_prior
    h4 = X.h_star(epsilon=4.0, m=1, tau=0.1)
    assert round(h4.bits, 4) == 9.0927
    assert h4.bits == pytest.approx(4 / math.log(2) + math.log2(10))


def test_remark_c4_counterexample():
    """eps = 1, tau = 0.9, m = 1: a uniform prior on 3 candidates is below H* yet safe."""
    f = T.pure(1.0, neighbors="add-remove")
    hs = X.h_star(epsilon=1.0, m=1, tau=0.9)
    assert hs.bits == pytest.approx(1.595, abs=5e-4)
    assert hs.regime == "second" and not hs.exact_on_uniform
    h_uniform = math.log2(3)
    assert h_uniform < hs.bits
    kappa = X.uniform_prior_kappa(support_size=3, m=1)
    assert kappa == pytest.approx(1 / 3)
    a = X.alpha_star(0.9, f)
    assert a.value == pytest.approx(1 - 0.1 * math.e, abs=1e-15) and "second" in a.regime
    assert X.prior_is_safe(kappa, f, tau=0.9)
    assert X.extraction_bound(kappa, f).value <= 0.9
    assert hs.exact_uniform_bits == pytest.approx(math.log2(1 / (1 - 0.1 * math.e)))
    assert h_uniform >= hs.exact_uniform_bits


# --------------------------------------------------------------------------- alpha*
@pytest.mark.parametrize("regime", ["first", "second"])
@settings(derandomize=True, max_examples=15, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=6.0),
    delta=st.floats(min_value=0.0, max_value=0.3),
    mu=st.floats(min_value=0.05, max_value=5.0),
    u=st.one_of(st.floats(min_value=0.01, max_value=0.99), st.sampled_from([1e-4, 0.9999])),
)
def test_alpha_star_is_the_sup_of_the_safe_set(regime, eps, delta, mu, u):
    """Exact (false-alarm rate 0). alpha* = sup{a : 1 - f(a) <= tau}: the power at alpha* is <= tau
    and exceeds tau just above it. For f_eps and f_{eps,delta} tau is placed in the regime under
    test, a fraction u of the way through it: (delta, tau_c] or (tau_c, 1) with
    tau_c = (e^eps + delta)/(e^eps + 1) ([MX] Thm. 5.1(iii), App. C.4), some examples within 1e-4
    of the regime's ends (where a misplaced tau_c shows); for G_mu tau = u."""

    def in_regime(d):
        tc = (math.exp(eps) + d) / (math.exp(eps) + 1)
        return d + (tc - d) * u if regime == "first" else tc + (1 - tc) * u

    for f, tau in (
        (T.pure(eps, neighbors="add-remove"), in_regime(0.0)),
        (T.TradeOff("approx", "add-remove", epsilon=eps, delta=delta), in_regime(delta)),
        (T.gdp(mu, neighbors="add-remove"), u),
    ):
        r = X.alpha_star(tau, f)
        a = r.value
        if f.kind != "gdp":
            assert r.regime.startswith(regime), (r.regime, tau)
        assert f.power(a) <= tau + 1e-12
        step = 1e-9 + 1e-9 * a
        if a + step <= 1:
            assert f.power(a + step) > tau
        # the generic (numeric) route agrees with the closed form
        pts = T.TradeOff("group", f.neighbors, base=f, k=1)
        assert X._alpha_star_value(tau, pts)[0] == pytest.approx(a, abs=1e-12)


def test_alpha_star_regimes_and_continuity():
    e = 1.0
    tc = math.exp(e) / (math.exp(e) + 1)
    lo = X.alpha_star_pure(tc - 1e-12, epsilon=e)
    hi = X.alpha_star_pure(tc + 1e-12, epsilon=e)
    assert lo == pytest.approx(hi, abs=1e-10)
    assert X.alpha_star_pure(0.1, epsilon=e) == pytest.approx(0.1 / math.e)
    a = X.alpha_star(0.1, T.pure(e, neighbors="add-remove"))
    assert a.regime_threshold == pytest.approx(tc) and a.exact and a.replace_violation_above is None
    # approximate DP: the regime switch moves to (e^eps + delta)/(e^eps + 1)
    ad = X.alpha_star(0.5, T.approx(e, 0.05, neighbors="add-remove"))
    assert ad.regime_threshold == pytest.approx((math.e + 0.05) / (math.e + 1))
    assert ad.value == pytest.approx((0.5 - 0.05) / math.e)


def test_replace_bracket():
    e, tau, m = 2.0, 0.1, 4
    a = X.alpha_star(tau, T.pure(e, neighbors="replace"))
    assert not a.exact
    assert a.value == pytest.approx(math.exp(-e) * tau)
    assert a.replace_violation_above == pytest.approx(math.exp(-e / 2) * tau)
    hs = X.h_star(epsilon=e, m=m, tau=tau, neighbors="replace")
    assert not hs.exact_on_uniform
    assert hs.replace_necessary_bits == pytest.approx(e / 2 / math.log(2) + math.log2(m / tau))
    g = X.alpha_star(tau, T.gdp(1.0, neighbors="replace"))
    assert g.replace_violation_above == pytest.approx(stats.norm.cdf(stats.norm.ppf(tau) - 0.5))
    # (eps, delta): the square root used is valid: its 2-group curve dominates f
    f = T.approx(1.0, 1e-3, neighbors="replace")
    r = X.group_square_root(f)
    grid = np.linspace(0, 1, 2001)
    assert np.all(np.asarray(r(grid)) >= np.asarray(f(grid)) - 1e-12)
    assert np.all(np.asarray(T.group(r, 2)(grid)) >= np.asarray(f(grid)) - 1e-12)


def test_tau_below_delta_no_entropy_condition_helps():
    f = T.approx(1.0, 0.2, neighbors="add-remove")
    with pytest.raises(DomainError, match="no entropy condition helps") as ei:
        X.alpha_star(0.1, f)
    assert "0.1" in str(ei.value) and "0.2" in str(ei.value)
    with pytest.raises(DomainError, match="no entropy condition helps"):
        X.entropy_threshold(f, m=1, tau=0.1)


@pytest.mark.parametrize("bad", [-0.1, 1.2, math.nan])
def test_bad_kappa(bad):
    with pytest.raises(DomainError, match="kappa"):
        X.extraction_bound(bad, T.pure(1.0, neighbors="add-remove"))
    with pytest.raises(DomainError, match="kappa"):
        X.extraction_bound_pure(bad, epsilon=1.0)


def test_m_at_least_support_size():
    with pytest.raises(DomainError, match="support size") as ei:
        X.uniform_prior_kappa(support_size=4, m=4)
    assert "m = 4" in str(ei.value)


# --------------------------------------------------------------------------- special forms
@settings(derandomize=True, max_examples=50, deadline=None)
@given(
    eps=st.floats(min_value=0.01, max_value=8.0),
    delta=st.floats(min_value=0.0, max_value=0.5),
    mu=st.floats(min_value=0.01, max_value=5.0),
    kappa=st.floats(min_value=0.0, max_value=1.0),
)
def test_special_forms_match_one_minus_f(eps, delta, mu, kappa):
    assert X.extraction_bound_pure(kappa, epsilon=eps) == pytest.approx(
        1 - T.f_eps(kappa, epsilon=eps), abs=1e-12
    )
    assert X.extraction_bound_pure(kappa, epsilon=eps) <= math.exp(eps) * kappa + 1e-15
    ab = X.extraction_bound_approx(kappa, epsilon=eps, delta=delta)
    assert ab == pytest.approx(1 - T.f_eps_delta(kappa, epsilon=eps, delta=delta), abs=1e-12)
    assert ab <= delta + math.exp(eps) * kappa + 1e-15
    assert X.extraction_bound_gdp(kappa, mu=mu) == pytest.approx(
        1 - T.f_gdp(kappa, mu=mu), abs=1e-12
    )
    assert X.extraction_bound_pure(kappa, epsilon=eps) >= kappa - 1e-15  # never below the baseline


# --------------------------------------------------------------------------- the gadget attains the bound
def _gadget_pair(f, m: int, N: int):
    """[MX] Lemma 5.2 reduced to the event {z in C}: law under P_z and under Q."""
    kappa = m / N
    fk = float(f(kappa))
    a = (1 - fk - kappa) / (1 - kappa)
    p_in = a + (1 - a) * kappa
    return np.array([p_in, 1 - p_in]), np.array([kappa, 1 - kappa]), a


@pytest.mark.parametrize(
    "f",
    [
        T.pure(1.0, neighbors="add-remove"),
        T.approx(0.5, 0.01, neighbors="add-remove"),
        T.gdp(1.0, neighbors="add-remove"),
    ],
)
@pytest.mark.parametrize("m,N", [(1, 3), (4, 64), (16, 1000)])
def test_subset_release_gadget_is_f_dp_and_attains_the_bound(f, m, N):
    """Lemma 5.2: the gadget is f-DP both ways and its top-m protocol reaches Ext = 1 - f(m/N) exactly."""
    P, Q, a = _gadget_pair(f, m, N)
    assert 0 <= a <= 1
    assert P[0] == pytest.approx(X.extraction_bound(m / N, f).value, abs=1e-14)
    grid = np.linspace(0, 1, 4001)
    for null, alt in ((Q, P), (P, Q)):
        x, y = T._np_curve(null, alt)
        curve = np.interp(grid, x, y)
        assert np.all(curve >= np.asarray(f(grid)) - 1e-12)


# --------------------------------------------------------------------------- audit soundness
def test_clopper_pearson_matches_statsmodels():
    for k, n in [(0, 10), (3, 10), (10, 10), (37, 200)]:
        lo = X.clopper_pearson_lower(k, n, confidence=0.95)
        ref = proportion_confint(k, n, alpha=0.10, method="beta")[
            0
        ]  # two-sided 90% = one-sided 95%
        assert lo == pytest.approx(ref if k > 0 else 0.0, abs=1e-12)


@settings(derandomize=True, max_examples=20, deadline=None)
@given(
    n=st.integers(min_value=5, max_value=120),
    eps=st.floats(min_value=0.05, max_value=5.0),
    conf=st.sampled_from([0.9, 0.95, 0.99]),
    data=st.data(),
)
def test_audit_false_alarm_rate_is_at_most_one_minus_confidence(n, eps, conf, data):
    """False alarm <= 1 - confidence, computed exactly (this test's own false-alarm rate is 0): a
    mechanism sitting on the boundary (success rate exactly p0 = 1 - f(kappa), as the gadget of
    Lemma 5.2 does) is 'refuted' with probability sum_k Binom(k; n, p0) 1{refuted(k)}, which must
    not exceed 1 - confidence.

    Every example is a tight one: p0 sits just above the exact one-sided lower confidence bound
    at some count j < n, where P[successes >= j] = 1 - confidence + O(1e-6). A valid audit does
    not refute at j (its false alarm is then below the level) and refutes higher counts (so the
    false alarm is positive); an audit whose bound is anti-conservative by more than that 1e-6
    (relative) refutes at j too, and its false alarm exceeds the level."""
    j = data.draw(st.integers(1, n - 1), label="j")
    p0 = float(stats.beta.ppf(1 - conf, j, n - j + 1)) * (
        1 + 1e-6
    )  # the exact bound at j, from above
    f = T.pure(eps, neighbors="add-remove")
    kappa = max(p0 * math.exp(-eps), 1 - (1 - p0) * math.exp(eps))  # 1 - f_eps(kappa) = p0, by hand
    p0 = float(f.power(kappa))
    ks = np.arange(n + 1)
    refuted = np.array(
        [
            X.audit_soundness(
                f, successes=int(k), trials=n, m=1, kappa=kappa, confidence=conf
            ).refuted
            for k in ks
        ]
    )
    false_alarm = float(stats.binom.pmf(ks, n, p0)[refuted].sum())
    assert 0 < false_alarm <= (1 - conf) + 1e-12


def test_audit_simulated_on_the_gadget():
    """End to end with sampled audits. False-alarm rate of the audit is <= 5% (95% confidence);
    over 400 simulated audits the observed rate must stay below 5% + 3 standard errors (0.083);
    the seed is fixed, so the test is deterministic. With a mechanism leaking at eps' = 3 against a
    claimed eps = 1, the audit must refute (power)."""
    rng = np.random.default_rng(20240601)
    m, N, n_trials = 1, 200, 60
    claim = T.pure(1.0, neighbors="add-remove")
    P, _, _ = _gadget_pair(claim, m, N)  # success probability exactly 1 - f(kappa)
    successes = rng.binomial(n_trials, P[0], size=400)
    rate = np.mean(
        [
            X.audit_soundness(claim, successes=int(s), trials=n_trials, m=m, kappa=m / N).refuted
            for s in successes
        ]
    )
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
    leaky, _, _ = _gadget_pair(T.pure(3.0, neighbors="add-remove"), m, N)
    s = int(rng.binomial(n_trials, leaky[0]))
    res = X.audit_soundness(claim, successes=s, trials=n_trials, m=m, kappa=m / N)
    assert res.refuted and res.informative and res.p_value < 0.05


def test_audit_uses_kappa_hi_and_the_same_list_size():
    f = T.pure(1.0, neighbors="add-remove")
    r = X.audit_soundness(f, successes=5, trials=20, m=4, kappa_interval=(0.001, 0.2))
    assert r.bound == pytest.approx(X.extraction_bound_pure(0.2, epsilon=1.0))
    assert r.kappa_hi == 0.2 and not r.refuted
    base = SimpleNamespace(kappa_lo=0.001, kappa_hi=0.002, m=1)
    with pytest.raises(DomainError, match="same list size"):
        X.audit_soundness(f, successes=5, trials=20, m=4, baseline=base)
    ok = X.audit_soundness(f, successes=5, trials=20, m=1, baseline=base)
    assert ok.refuted and ok.informative and ok.min_trials_to_refute == 1
    # a guessable canary: its baseline explains the successes
    g = X.audit_soundness(f, successes=30, trials=40, m=1, kappa=0.5)
    assert not g.refuted and not g.informative and "consistent" in g.verdict
    # the smallest all-success audit that refutes, and one trial fewer that cannot
    n_min = X.audit_soundness(f, successes=1, trials=1, m=1, kappa=0.95).min_trials_to_refute
    assert n_min is not None and n_min > 1
    assert X.audit_soundness(f, successes=n_min, trials=n_min, m=1, kappa=0.95).refuted
    assert not X.audit_soundness(f, successes=n_min - 1, trials=n_min - 1, m=1, kappa=0.95).refuted
    vac = X.audit_soundness(f, successes=40, trials=40, m=1, kappa=1.0)
    assert vac.bound == 1.0 and vac.min_trials_to_refute is None and "cannot refute" in vac.verdict
    one = X.audit_soundness(f, successes=5, trials=20, m=1, kappa=0.001, independence="one-run")
    assert "[35]" in one.assumption


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(successes=21, trials=20, kappa=0.1), "successes"),
        (dict(successes=1, trials=20, kappa=1.5), "kappa"),
        (dict(successes=1, trials=20, kappa_interval=(0.3, 0.1)), "reversed"),
        (dict(successes=1, trials=20), "exactly one"),
        (dict(successes=1, trials=20, kappa=0.1, independence="iid"), "independence"),
    ],
)
def test_audit_bad_input(kw, match):
    with pytest.raises(DomainError, match=match):
        X.audit_soundness(T.pure(1.0, neighbors="add-remove"), m=1, **kw)


def test_entropy_verdict():
    f = T.pure(4.0, neighbors="add-remove")
    below = X.entropy_verdict(min_entropy_bits=9.0, f=f, m=1, tau=0.1)
    above = X.entropy_verdict(min_entropy_bits=9.1, f=f, m=1, tau=0.1)
    assert not below.above and above.above
    assert above.ext_bound <= 0.1 < below.ext_bound + 1e-3
    assert below.threshold_bits == pytest.approx(9.0927, abs=1e-4)
