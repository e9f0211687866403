"""Intervals ([EM] D.1) and comparisons ([EM] D.4): published values, library cross-checks,
obviously-correct references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from memclaim.claims.compare import independent_difference, match_by_text, paired_difference
from memclaim.claims.intervals import (
    beta_fpr_law,
    clopper_pearson,
    clopper_pearson_arrays,
    newcombe_independent,
    newcombe_paired,
    wilson,
)
from memclaim.errors import DomainError, InputError, ProcedureMismatchError
from memclaim.procedure import procedure_differences, require_same_procedure


def test_clopper_pearson_matches_statsmodels_beta():
    for k, n in [(0, 10), (1, 10), (5, 10), (10, 10), (377, 5000), (0, 1), (2, 5000)]:
        iv = clopper_pearson(k, n)
        lo, hi = proportion_confint(k, n, alpha=0.05, method="beta")
        assert (iv.lower, iv.upper) == pytest.approx((lo, hi), abs=1e-12)
    lo, hi = clopper_pearson_arrays(np.array([0, 3, 7]), 7, confidence=0.9)
    assert lo[0] == 0 and hi[2] == 1
    with pytest.raises(DomainError, match="exceeds"):
        clopper_pearson(6, 5)
    with pytest.raises(DomainError):
        clopper_pearson(0, 0)


def test_wilson_published():
    """Newcombe (1998) Table I example: 81/263 -> [0.2553, 0.3662]."""
    iv = wilson(81, 263)
    assert (round(iv.lower, 4), round(iv.upper, 4)) == (0.2553, 0.3662)


def test_newcombe_independent_published_and_statsmodels():
    """Newcombe (1998b): 56/70 - 48/80 = 0.2000 [0.0524, 0.3339]."""
    iv = newcombe_independent(56, 70, 48, 80)
    assert round(iv.estimate, 4) == 0.2 and (round(iv.lower, 4), round(iv.upper, 4)) == (
        0.0524,
        0.3339,
    )


def _square_and_add(k1, n1, k2, n2, conf=0.95):
    # hand-written Newcombe 1998b method 10 (independent), from Wilson intervals
    z = stats.norm.ppf(1 - (1 - conf) / 2)

    def w(k, n):
        p = k / n
        c = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return c - h, c + h

    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = w(k1, n1)
    l2, u2 = w(k2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt(
        (u1 - p1) ** 2 + (p2 - l2) ** 2
    )


@settings(max_examples=40)
@given(st.integers(1, 300), st.integers(1, 300), st.data())
def test_newcombe_independent_equals_hand_formula(n1, n2, data):
    k1 = data.draw(st.integers(0, n1))
    k2 = data.draw(st.integers(0, n2))
    iv = newcombe_independent(k1, n1, k2, n2)
    lo, hi = _square_and_add(k1, n1, k2, n2)
    assert iv.lower == pytest.approx(max(-1, lo), abs=1e-9) and iv.upper == pytest.approx(
        min(1, hi), abs=1e-9
    )


def test_newcombe_paired_published():
    """Newcombe (1998a) worked example: (a, b, c, d) = (20, 12, 2, 16) -> 0.2 [0.0562, 0.3292]."""
    iv = newcombe_paired(20, 12, 2, 16)
    assert iv.estimate == pytest.approx(0.2)
    assert (round(iv.lower, 4), round(iv.upper, 4)) == (0.0562, 0.3292)
    assert "hand-written" in iv.method


@settings(max_examples=60)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_newcombe_paired_properties(a, b, c, d):
    if a + b + c + d == 0:
        with pytest.raises(DomainError):
            newcombe_paired(a, b, c, d)
        return
    iv = newcombe_paired(a, b, c, d)
    assert -1 <= iv.lower <= iv.estimate <= iv.upper <= 1
    sw = newcombe_paired(a, c, b, d)  # swapping the two procedures negates the interval
    assert sw.lower == pytest.approx(-iv.upper, abs=1e-12) and sw.upper == pytest.approx(
        -iv.lower, abs=1e-12
    )


def test_newcombe_paired_coverage_simulation():
    """Approximate ~95% coverage of the paired interval (Newcombe 1998a reports ~95% mean coverage).
    2000 tables with n = 200 and a correlated pair; we require coverage >= 0.93: at true coverage
    0.95 the count falls below 0.93 x 2000 with probability < 1e-4 (binomial)."""
    rng = np.random.default_rng(0)
    n, reps = 200, 2000
    probs = np.array([0.1, 0.08, 0.04, 0.78])  # a, b, c, d cell probabilities
    true = probs[1] - probs[2]
    tables = rng.multinomial(n, probs, size=reps)
    cover = sum(newcombe_paired(*t).lower <= true <= newcombe_paired(*t).upper for t in tables)
    assert cover >= 0.93 * reps


def test_beta_law_validation():
    with pytest.raises(DomainError):
        beta_fpr_law(k=0, n=10)
    with pytest.raises(DomainError):
        beta_fpr_law(k=11, n=10)
    law = beta_fpr_law(k=4, n=4988)
    assert law.mean == pytest.approx(4 / 4989)


# ------------------------------------------------------------------ comparisons
def test_paired_difference_eq29():
    x = np.array([1, 1, 1, 0, 0, 1, 0, 0, 0, 0] * 5, dtype=bool)
    y = np.array([1, 0, 0, 0, 1, 1, 0, 0, 0, 0] * 5, dtype=bool)
    r = paired_difference(x, y, alpha_n_first=0.001, alpha_n_second=0.001, names=("13B", "7B"))
    assert (r.both, r.only_first, r.only_second, r.neither) == (10, 10, 5, 25)
    ref = newcombe_paired(10, 10, 5, 25)
    assert r.difference.estimate == pytest.approx(ref.estimate) and r.difference.lower == ref.lower
    shifted = paired_difference(x, y, alpha_n_first=0.001, alpha_n_second=0.002)
    assert shifted.difference.estimate == pytest.approx(
        ref.estimate + 0.001
    )  # (G - aN) - (G' - aN')
    assert "13B minus 7B" in r.statement
    with pytest.raises(InputError, match="same candidates"):
        paired_difference(x, y[:-1])


def test_independent_difference_is_statsmodels():
    iv = independent_difference(40, 1000, 12, 900)
    lo, hi = confint_proportions_2indep(40, 1000, 12, 900, method="newcomb", compare="diff")
    assert (iv.lower, iv.upper) == pytest.approx((lo, hi))


def test_match_by_text():
    m = match_by_text(
        ["a", "b", "c"], ["one", "two", "three"], ["x", "y", "z"], ["three", "one", "two"]
    )
    assert m.n_matched == 3
    assert [("one", "two", "three")[i] for i in m.index_first] == [
        ("three", "one", "two")[j] for j in m.index_second
    ]
    with pytest.raises(InputError, match=r"1 texts of first are missing from second \(ids 'c'\)"):
        match_by_text(["a", "b", "c"], ["one", "two", "three"], ["x", "y"], ["one", "two"])
    with pytest.raises(InputError, match="more than once"):
        match_by_text(["a", "b"], ["one", "one"], ["x", "y"], ["one", "two"])
    with pytest.raises(InputError, match="no text"):
        match_by_text(["a"], [""], ["x"], ["one"])
    part = match_by_text(
        ["a", "b", "c"], ["one", "two", "three"], ["x", "y"], ["one", "two"], allow_partial=True
    )
    assert part.n_matched == 2 and part.dropped_first == ("c",)
    # NFC normalization: composed and decomposed é match
    assert match_by_text(["a"], ["caf\u00e9"], ["b"], ["cafe\u0301"]).n_matched == 1


def test_require_same_procedure_names_every_field():
    """One implementation, memclaim.procedure (one floor below claims and scoring)."""
    import memclaim.procedure as sp

    assert (
        require_same_procedure is sp.require_same_procedure
        and procedure_differences is sp.procedure_differences
    )
    a = {
        "model": {"fingerprint": "abc", "name": "m"},
        "policy": "top-k:40",
        "prefix_tokens": 50,
        "version": "0.1",
    }
    b = {
        "model": {"fingerprint": "abd", "name": "m"},
        "policy": "greedy",
        "prefix_tokens": 50,
        "extra": 1,
        "version": "0.2",
    }
    with pytest.raises(ProcedureMismatchError) as e:
        require_same_procedure(a, b, ignore=("version",))
    msg = str(e.value)
    for f in ("model.fingerprint", "'abc'", "'abd'", "policy", "extra", "'top-k:40'", "'greedy'"):
        assert f in msg
    assert "version" not in msg.split("differ):")[1].split("fix")[0] and "(3 fields differ)" in msg
    assert "extra: <absent> != 1" in msg
    require_same_procedure(a, dict(a), ignore=())
    assert procedure_differences({"x": 1}, {"x": 1.0}) == []
    assert procedure_differences({"m": {"x": 1}}, {"m": {"x": 2}}) == ["m.x: 1 != 2"]
    assert procedure_differences({"x": True}, {"x": 1}) == ["x: True != 1"]
    assert procedure_differences({"x": None}, {}) == ["x: None != <absent>"]
    with pytest.raises(ProcedureMismatchError, match="expected a procedure record"):
        procedure_differences("nope", {})
    require_same_procedure(a, b, ignore=("model", "policy", "extra", "version"))


def test_compare_population_claims_matched_by_text():
    rng = np.random.default_rng(4)
    texts = [f"passage {i}" for i in range(80)]
    s_big = -rng.exponential(4, 80)
    s_small = s_big - rng.exponential(3, 80)  # the smaller model scores every passage lower
    ctrl1, ctrl2 = -rng.exponential(30, 499), -rng.exponential(30, 499)
    order = rng.permutation(80)  # the second table lists the candidates in another order, other ids
    from memclaim.claims.compare import compare_population_claims

    pa = {"model": {"fingerprint": "32b"}, "policy": "full", "suffix_tokens": 50}
    pb = {"model": {"fingerprint": "7b"}, "policy": "full", "suffix_tokens": 50}
    r = compare_population_claims(
        s_big,
        ctrl1,
        [f"a{i}" for i in range(80)],
        texts,
        s_small[order],
        ctrl2,
        [f"b{i}" for i in order],
        [texts[i] for i in order],
        alphas=("0.01", "0.1"),
        procedure_first=pa,
        procedure_second=pb,
        names=("32B", "7B"),
    )
    assert r.n_matched == 80 and r.procedure_differences == ("model.fingerprint: '32b' != '7b'",)
    for row, a in zip(r.rows, (0.01, 0.1)):
        k = int(a * 500)
        t1 = s_big > np.sort(ctrl1)[::-1][k - 1]
        t2 = s_small > np.sort(ctrl2)[::-1][k - 1]
        assert (row.both, row.only_first, row.only_second) == (
            int(np.sum(t1 & t2)),
            int(np.sum(t1 & ~t2)),
            int(np.sum(~t1 & t2)),
        )
    with pytest.raises(ProcedureMismatchError, match="policy"):
        compare_population_claims(
            s_big,
            ctrl1,
            list(map(str, range(80))),
            texts,
            s_small,
            ctrl2,
            list(map(str, range(80))),
            texts,
            procedure_first=pa,
            procedure_second=dict(pb, policy="greedy"),
        )
