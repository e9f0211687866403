"""Query budgets ([EM] §6, App. F): stability down to p = 1e-300 against 700-digit decimal
arithmetic, n_delta beyond integer types, the refined claim."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaim.claims.budget import (
    census_budget_view,
    extractable_memorization,
    log_prob_at_least_once,
    min_log_prob_for_budget,
    parse_probability,
    population_budget_view,
    queries_needed,
)
from memclaim.errors import DomainError


def _ref_log_at_least_once(log10_p: float, n: int) -> float:
    """1 - (1-p)^n in 700-digit decimals (obviously correct, slow): enough digits that 1 - p
    keeps p = 1e-300 and the result keeps 300+ significant digits."""
    with localcontext() as ctx:
        ctx.prec = 700
        p = Decimal(10) ** Decimal(repr(log10_p))
        v = 1 - (1 - p) ** n
        return float(v.ln())


@st.composite
def p_and_n(draw, regime):
    """(log10 p, n) in one regime of 1 - (1 - p)^n: n p << 1 (the answer is about n p; p down to
    1e-300), n p of order 1 (neither approximation holds; p >= 1e-11 so that n <= 1e12 reaches
    it) or n p >> 1 (the answer is about 1: log1p/expm1 territory)."""
    if regime == "n p << 1":
        log10_p = draw(st.floats(-300, -1e-3))
        return log10_p, draw(st.integers(1, max(1, min(10**12, int(10 ** (-3 - log10_p))))))
    log10_p = draw(st.floats(-11, -1e-3))
    log10_np = draw(st.floats(-2.0, 1.5) if regime == "n p ~ 1" else st.floats(1.5, 3.0))
    return log10_p, max(1, min(10**12, round(10 ** (log10_np - log10_p))))


REGIMES = ["n p << 1", "n p ~ 1", "n p >> 1"]


@pytest.mark.parametrize("regime", REGIMES)
@settings(max_examples=20)
@given(data=st.data())
def test_prob_at_least_once_against_decimal(regime, data):
    """Exact (against 700-digit decimals; false-alarm rate 0), 20 examples in each regime of n p."""
    log10_p, n = data.draw(p_and_n(regime), label="(log10 p, n)")
    got = log_prob_at_least_once(log_p=log10_p * math.log(10), n=n)
    ref = _ref_log_at_least_once(log10_p, n)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_naive_formula_fails_where_we_do_not():
    p = 1e-300
    assert 1 - (1 - p) ** 1e5 == 0.0  # the float trap
    got = log_prob_at_least_once(log_p=math.log(p), n=1e5)
    assert got / math.log(10) == pytest.approx(-295.0, abs=1e-9)


def test_edge_probabilities():
    assert log_prob_at_least_once(log_p=0.0, n=1) == 0.0  # p = 1
    assert log_prob_at_least_once(log_p=-np.inf, n=10) == -np.inf  # p = 0
    v = log_prob_at_least_once(log_p=np.array([-1.0, -np.inf, 0.0]), n=np.array([5.0, 5.0, 5.0]))
    assert v[1] == -np.inf and v[2] == 0.0
    with pytest.raises(DomainError):
        log_prob_at_least_once(log_p=0.5, n=3)
    with pytest.raises(DomainError):
        log_prob_at_least_once(log_p=-1.0, n=0)


def test_queries_needed_small_exact():
    q = queries_needed(log_p=math.log(0.5), delta=0.05)
    assert q.n_int == 5 == math.ceil(math.log(0.05) / math.log(0.5))
    assert queries_needed(log_p=0.0, delta=0.05).n_int == 1
    z = queries_needed(log_p=-np.inf, delta=0.05)
    assert z.n == math.inf and z.n_int is None


@settings(max_examples=60)
@given(st.floats(-15, -1e-4), st.sampled_from([0.5, 0.1, 0.05, 0.01]))
def test_queries_needed_is_the_smallest_budget(log10_p, delta):
    lp = log10_p * math.log(10)
    q = queries_needed(log_p=lp, delta=delta)
    assert q.n_int is not None and q.n == q.n_int
    target = math.log1p(-delta)
    assert log_prob_at_least_once(log_p=lp, n=q.n_int) >= target
    if q.n_int > 1:
        assert log_prob_at_least_once(log_p=lp, n=q.n_int - 1) < target


def test_queries_needed_beyond_integer_types_em_s5():
    """p = 1e-27 (the census thresholds of [EM] §5): n_0.05 = ln(20)/1e-27 ~ 3.0e27 > 2**63."""
    q = queries_needed(log_p=-27 * math.log(10), delta=0.05)
    assert q.n_int is None and q.n > 2**63
    assert q.log10_n == pytest.approx(math.log10(-math.log(0.05)) + 27, abs=1e-9)
    q300 = queries_needed(log_p=-300 * math.log(10), delta=0.05)
    assert q300.log10_n == pytest.approx(math.log10(-math.log(0.05)) + 300, abs=1e-9)
    assert q300.n == pytest.approx(10**q300.log10_n, rel=1e-9)
    q_deep = queries_needed(log_p=-400 * math.log(10), delta=0.05)  # p below the double range
    assert q_deep.n == math.inf and q_deep.log10_n == pytest.approx(
        math.log10(-math.log(0.05)) + 400, abs=1e-9
    )


def test_parse_probability():
    assert parse_probability(p=0.5) == math.log(0.5)
    assert parse_probability(log10_p=-27) == -27 * math.log(10)
    assert parse_probability(p=0) == -math.inf
    for kw in ({"p": 1.5}, {"log10_p": 2}, {"p": 0.1, "log10_p": -1}, {}):
        with pytest.raises(DomainError):
            parse_probability(**kw)


def test_refined_claim_em_s6():
    lp = np.log(np.array([0.5, 1e-4, 1e-8, 1e-20, 0.0 + 1e-300]))
    c = extractable_memorization(lp, log_tau=math.log(1e-10), n=1e5, delta=0.05)
    # p_min(1e5) = 1 - 0.05**(1e-5) ~ 3.0e-5
    assert c.log10_p_min == pytest.approx(math.log10(-math.expm1(math.log(0.05) / 1e5)))
    assert c.memorized.tolist() == [True, True, True, False, False]
    assert c.extractable.tolist() == [True, True, False, False, False]  # 1e-4 >= 3.0e-5 > 1e-8
    assert c.n_extractable_memorized == 2 and c.n_memorized == 3
    lmin = min_log_prob_for_budget(n=1e5, delta=0.05)
    assert log_prob_at_least_once(log_p=lmin, n=1e5) == pytest.approx(math.log(0.95), abs=1e-9)


def test_budget_views():
    rng = np.random.default_rng(0)
    cand = -rng.exponential(10, 400)
    ctrl = -rng.exponential(4, 400) - 5
    tau = float(np.sort(ctrl)[::-1][3])
    v = population_budget_view(cand, ctrl, log_tau=tau, alpha_n=4 / 401)
    assert np.all(np.diff(v.member_rate) >= 0) and np.all(
        np.diff(v.control_rate) >= 0
    )  # more queries, more extracted
    assert np.all(v.member_memorized_rate <= v.member_rate + 1e-15)
    assert v.at_n_tau.estimate == pytest.approx(np.mean(cand > tau) - 4 / 401)
    heat = np.concatenate([np.full(10, -np.inf), rng.uniform(-40, -1, 990)])
    cv = census_budget_view(heat, log10_tau=-20)
    assert np.all(np.diff(cv.coverage_extractable) >= 0)
    assert cv.coverage_extractable_memorized[-1] <= cv.coverage_memorized + 1e-15
    assert cv.coverage_memorized == pytest.approx(np.mean(heat > -20))
    assert cv.n_tau.log10_n == pytest.approx(math.log10(-math.log(0.05)) + 20, abs=1e-6)


def test_population_budget_view_hand_values_at_tau_and_at_the_realistic_budget():
    """Issue 24 item 4, by hand ([EM] §6, F.2): tau is the K = 2nd largest control (0.2). A control
    counts as memorized only strictly above tau (the K-th itself is not), and the members - controls
    difference at the realistic budget counts only controls both above tau and extractable
    (the control at 1e-3 is extractable within 1e5 queries but below tau)."""
    ln = math.log
    ctrl = [ln(0.5), ln(0.2), ln(1e-3), ln(1e-9), ln(1e-12)]
    cand = [ln(0.9), ln(0.3), ln(0.25), ln(1e-2), ln(1e-8), ln(1e-20)]
    v = population_budget_view(
        cand,
        ctrl,
        log_tau=ln(0.2),
        alpha_n=2 / 6,
        realistic_n=1e5,
        log10_budgets=[0.0, 1.0, 3.0, 6.0],
    )
    # p_min(n) = 1 - 0.05^(1/n): n = 10 -> 0.259, n = 1e3 -> 3.0e-3, n = 1e6 -> 3.0e-6
    assert v.member_rate.tolist() == [0.0, 2 / 6, 4 / 6, 4 / 6]
    assert v.control_rate.tolist() == [0.0, 1 / 5, 2 / 5, 3 / 5]
    assert v.member_memorized_rate.tolist() == [0.0, 2 / 6, 3 / 6, 3 / 6]
    assert v.control_memorized_rate.tolist() == [
        0.0,
        1 / 5,
        1 / 5,
        1 / 5,
    ]  # 0.2 = tau is not above tau
    assert v.at_realistic_n.estimate == pytest.approx(
        3 / 6 - 1 / 5, abs=1e-15
    )  # 0.30, not 3/6 - 3/5
    assert np.all(v.member_memorized_rate <= v.member_rate) and np.all(
        v.control_memorized_rate <= v.control_rate
    )


@pytest.mark.parametrize("segments", [False, True])
def test_census_budget_view_hand_values_and_coverage_at_the_realistic_budget_is_at_most_memorized(
    segments,
):
    """Issue 24 item 4: coverage memorized and extractable within n counts only characters above
    tau_doc; a character extractable within n = 1e5 but below tau_doc (heat 1e-4 < tau = 1e-2)
    does not count, so it can never exceed coverage(tau_doc). Both the per-character array and the
    census's heat segments (what `memclaim census` uses)."""
    from memclaim.claims.census import HeatSegments, WindowScores

    heat10 = np.array([-1.0, -1.0, -4.0, -9.0, -np.inf])  # 5 characters; tau_doc = 1e-2
    if segments:
        w = WindowScores.from_arrays(
            heat10[:4] * math.log(10), [0, 1, 2, 3], [1, 2, 3, 4], doc_length=5, name="doc"
        )
        v = census_budget_view(
            heat=HeatSegments.of(w), log10_tau=-2, realistic_n=1e5, log10_budgets=[0.0, 5.0, 12.0]
        )
    else:
        v = census_budget_view(
            heat10, log10_tau=-2, realistic_n=1e5, log10_budgets=[0.0, 5.0, 12.0]
        )
    assert v.coverage_memorized == 2 / 5
    assert v.at_realistic_n == 2 / 5  # not 3/5: the 1e-4 character is below tau_doc
    assert v.coverage_extractable.tolist() == [0.0, 3 / 5, 4 / 5]
    assert v.coverage_extractable_memorized.tolist() == [0.0, 2 / 5, 2 / 5]
    assert v.at_realistic_n <= v.coverage_memorized and np.all(
        v.coverage_extractable_memorized <= v.coverage_memorized
    )


# ------------------------------------------------------------------ budgets beyond the double range (issue 12 A4)
LN10_ = math.log(10.0)


@pytest.mark.parametrize("log10_p", [-27.0, -300.0, -400.0, -5000.0])
def test_prob_at_least_once_at_n_delta_is_one_minus_delta_even_when_n_overflows(log10_p):
    """At n = n_delta the probability of at least one success is 1 - delta (the defining
    equation, [EM] Eq. 34), not 1.0: for p = 1e-400, n_delta ~ 3e400 overflows a double, and the
    check is computed from log n."""
    q = queries_needed(log_p=log10_p * LN10_, delta=0.05)
    assert q.prob_at_least_once_at_n == pytest.approx(0.95, abs=1e-9)
    assert q.log10_n == pytest.approx(math.log10(-math.log(0.05)) - log10_p, abs=1e-9)


def test_log_prob_at_least_once_takes_log_n_beyond_the_double_range():
    """P[>= 1 in n] for n = 1e400 (given as log n) and p = 1e-400: 1 - exp(-n p) = 1 - e^-1."""
    lp = -400 * LN10_
    v = log_prob_at_least_once(log_p=lp, log_n=400 * LN10_)
    assert v == pytest.approx(math.log(-math.expm1(-1.0)), rel=1e-12)
    # tiny n p: log P ~ log n + log p
    v2 = log_prob_at_least_once(log_p=-900 * LN10_, log_n=400 * LN10_)
    assert v2 == pytest.approx(-500 * LN10_, rel=1e-12)
    # the same value from n and from log n where n is a double
    assert log_prob_at_least_once(log_p=-30 * LN10_, log_n=math.log(1e25)) == pytest.approx(
        log_prob_at_least_once(log_p=-30 * LN10_, n=1e25), rel=1e-12
    )
    with pytest.raises(DomainError, match="exactly one"):
        log_prob_at_least_once(log_p=-1.0, n=10, log_n=math.log(10))
    with pytest.raises(DomainError, match="log n"):
        log_prob_at_least_once(log_p=-1.0, log_n=-1.0)  # n < 1


def test_min_log_prob_for_budget_beyond_the_double_range():
    """p_min(n) = 1 - delta^(1/n) ~ -log(delta) / n for huge n: log p_min = log(-log delta) - log n."""
    for log10_n in (5.0, 300.0, 400.0, 2000.0):
        got = min_log_prob_for_budget(log_n=log10_n * LN10_, delta=0.05)
        ref = (
            math.log(-math.expm1(math.log(0.05) / 10**log10_n))
            if log10_n < 300
            else math.log(-math.log(0.05)) - log10_n * LN10_
        )
        assert got == pytest.approx(ref, rel=1e-12)
    assert min_log_prob_for_budget(log_n=math.log(1e5), delta=0.05) == pytest.approx(
        min_log_prob_for_budget(n=1e5, delta=0.05), rel=1e-12
    )


def test_budget_views_reach_a_threshold_beyond_1e300():
    """A census threshold tau = 1e-400: the budget grid reaches n_tau ~ 3e400 (in log10), so at
    the grid's end everything above tau is extractable, as the view claims ([EM] §6, Fig. 7)."""
    rng = np.random.default_rng(1)
    heat = np.concatenate([rng.uniform(-390, -310, 500), rng.uniform(-600, -450, 500)])
    cv = census_budget_view(heat, log10_tau=-400)
    assert cv.log10_budgets[-1] >= cv.n_tau.log10_n
    assert cv.coverage_extractable_memorized[-1] == pytest.approx(cv.coverage_memorized)
    assert cv.coverage_memorized == pytest.approx(0.5)
    cand = np.concatenate([rng.uniform(-390, -310, 50), rng.uniform(-600, -450, 50)]) * LN10_
    ctrl = rng.uniform(-600, -450, 100) * LN10_
    pv = population_budget_view(cand, ctrl, log_tau=-400 * LN10_, alpha_n=0.01)
    assert pv.log10_budgets[-1] >= pv.n_tau.log10_n
    assert pv.member_memorized_rate[-1] == pytest.approx(0.5)
