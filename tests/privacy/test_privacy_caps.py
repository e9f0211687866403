"""Memorization caps: eta(f), the k-copy staircase, relations and functionals ([MX] §4, App. A, B)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.errors import DomainError
from memclaim.privacy import caps as C
from memclaim.privacy import tradeoff as T


# --------------------------------------------------------------------------- paper numbers
def test_paper_numbers_k2_at_eps1():
    st2 = C.eta_star_k(epsilon=1.0, k=2)
    assert round(st2.value, 3) == 0.632
    assert round(st2.naive, 3) == 0.762
    assert st2.value == pytest.approx(1 - math.exp(-1), abs=1e-15)
    assert st2.neighbors == "replace" and st2.functional == "RO"
    assert C.eta_star_k(epsilon=1.0, k=1).value == pytest.approx(math.tanh(0.5), abs=1e-15)


def _geometric_tv_by_summation(eps: float, k: int) -> float:
    """TV(Geo, Geo + k) of the two-sided geometric law p(n) = c r^|n|, summed term by term."""
    r = math.exp(-eps)
    c = (1 - r) / (1 + r)
    n_max = int(math.ceil(60 / eps)) + k + 5  # r^n_max < e^-60: the truncated tails are below 1e-26
    p = lambda n: c * r ** abs(n)  # noqa: E731
    return 0.5 * math.fsum(abs(p(n) - p(n - k)) for n in range(-n_max, n_max + k + 1))


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.3])
@pytest.mark.parametrize("k", range(1, 9))
def test_staircase_equals_geometric_mechanism_tv(eps, k):
    """[MX] Lemma 4.4: the geometric mechanism on the count attains eta*_k for every k (odd too)."""
    tv = _geometric_tv_by_summation(eps, k)
    s = C.eta_star_k(epsilon=eps, k=k)
    assert s.value == pytest.approx(tv, abs=1e-12)
    assert s.geometric_tv == pytest.approx(tv, abs=1e-12)
    laplace_tv = 1 - math.exp(-k * eps / 2)  # continuous Laplace: matches only even k
    if k % 2 == 0:
        assert s.value == pytest.approx(laplace_tv, abs=1e-14)
    else:
        assert s.value > laplace_tv + 1e-6  # the discrete mechanism beats Laplace at odd k


def _numeric_staircase(eps: float, k: int) -> float:
    """max_x f-bar^{o k}(x) - x by brute force: dense grid, then a fine grid around the best point."""
    E = math.exp(eps)
    fbar = lambda b: np.minimum(E * b, 1 - (1 - b) / E)  # noqa: E731
    x = np.linspace(0, 1, 200_001)
    y = x.copy()
    for _ in range(k):
        y = fbar(y)
    i = int(np.argmax(y - x))
    lo, hi = x[max(i - 1, 0)], x[min(i + 1, len(x) - 1)]
    x2 = np.linspace(lo, hi, 200_001)
    y2 = x2.copy()
    for _ in range(k):
        y2 = fbar(y2)
    return float(np.max(y2 - x2))


@pytest.mark.parametrize("eps,k", [(1.0, 2), (1.0, 3), (0.3, 5), (2.0, 4), (0.7, 7), (1.5, 8)])
def test_staircase_against_direct_numeric_maximization(eps, k):
    s = C.eta_star_k(epsilon=eps, k=k)
    assert s.value == pytest.approx(_numeric_staircase(eps, k), abs=1e-9)
    # the reported orbit attains the value and follows the cap map
    orbit = np.array(s.orbit)
    assert len(orbit) == k + 1 and orbit[0] == pytest.approx(s.x_star)
    np.testing.assert_allclose(orbit[1:], C.cap_map(orbit[:-1], epsilon=eps), atol=1e-15)
    assert orbit[-1] - orbit[0] == pytest.approx(s.value, abs=1e-12)
    # and it is the eta of the exact group curve f^(k) ([MX] Cor. 4.3)
    g = T.group(T.pure(eps, neighbors="replace"), k)
    assert C.eta(g, method="numeric").value == pytest.approx(s.value, abs=1e-10)


@settings(derandomize=True, max_examples=80, deadline=None)
@given(eps=st.floats(min_value=0.01, max_value=6.0), k=st.integers(min_value=2, max_value=12))
def test_staircase_strictly_below_naive_group_bound(eps, k):
    s = C.eta_star_k(epsilon=eps, k=k)
    assert s.value < s.naive
    assert s.gap == pytest.approx(s.naive - s.value)
    assert 0 < s.value < 1


# --------------------------------------------------------------------------- eta(f)
@settings(derandomize=True, max_examples=30, deadline=None)
@given(
    eps=st.floats(min_value=0.01, max_value=10.0),
    delta=st.floats(min_value=0.0, max_value=0.9),
    mu=st.floats(min_value=0.01, max_value=8.0),
)
def test_eta_numeric_matches_closed_forms(eps, delta, mu):
    for f, closed, amax in [
        (T.pure(eps, neighbors="replace"), C.eta_pure(eps), 1 / (math.exp(eps) + 1)),
        (
            T.TradeOff("approx", "replace", epsilon=eps, delta=delta),
            C.eta_approx(eps, delta),
            (1 - delta) / (math.exp(eps) + 1),
        ),
        (T.gdp(mu, neighbors="replace"), C.eta_gdp(mu), stats.norm.cdf(-mu / 2)),
    ]:
        num = C.eta(f, method="numeric")
        assert num.value == pytest.approx(closed, abs=1e-12)
        auto = C.eta(f)
        assert auto.value == pytest.approx(closed, abs=1e-15) and auto.method.startswith(
            "closed-form"
        )
        assert auto.alpha == pytest.approx(amax, abs=1e-12)


def test_eta_closed_forms_spot_values():
    assert C.eta_pure(1.0) == pytest.approx(0.46211715726001)
    assert C.eta_approx(1.0, 0.1) == pytest.approx(0.1 + 0.9 * math.tanh(0.5))
    assert C.eta_gdp(1.0) == pytest.approx(2 * stats.norm.cdf(0.5) - 1, abs=1e-15)
    assert C.eta_gdp(1e-9) == pytest.approx(
        1e-9 * 2 * stats.norm.pdf(0) / 2, rel=1e-6
    )  # no cancellation


def test_eta_of_a_discrete_pair_is_total_variation():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.1, 0.2, 0.3, 0.4])
    x, y = T._np_curve(p, q)
    f = T.from_points(x, y, neighbors="replace")
    assert C.eta(f).value == pytest.approx(0.5 * np.abs(p - q).sum(), abs=1e-14)
    assert C.eta(f).method == "vertices"


# --------------------------------------------------------------------------- relations and functionals
def test_replace_one_guarantee_caps_ro_not_loo():
    f = T.pure(1.0, neighbors="replace")
    ro = C.memorization_cap(f, functional="RO")
    assert ro.value == pytest.approx(math.tanh(0.5)) and ro.tight and ro.theorem == "[MX] Thm. 4.1"
    loo = C.memorization_cap(f, functional="LOO")
    assert loo.value is None and not loo.implied and "differ in size" in loo.reason
    ro2 = C.memorization_cap(f, functional="RO", copies=2)
    assert ro2.value == pytest.approx(1 - math.exp(-1)) and ro2.naive == pytest.approx(
        math.tanh(1.0)
    )
    assert ro2.hops == 2


def test_add_remove_guarantee_caps_loo_directly_and_ro_through_f2():
    f = T.pure(1.0, neighbors="add-remove")
    loo = C.memorization_cap(f, functional="LOO")
    assert loo.value == pytest.approx(math.tanh(0.5)) and loo.theorem == "[MX] Prop. A.1"
    ro = C.memorization_cap(f, functional="RO")
    assert ro.value == pytest.approx(C.eta_star_k(epsilon=1.0, k=2).value) and ro.hops == 2
    assert "f^(2)" in ro.theorem
    ro3 = C.memorization_cap(f, functional="RO", copies=3)
    assert ro3.value == pytest.approx(C.eta_star_k(epsilon=1.0, k=6).value) and ro3.hops == 6
    g = T.gdp(1.0, neighbors="add-remove")
    assert C.memorization_cap(g, functional="RO").value == pytest.approx(
        2 * stats.norm.cdf(1.0) - 1
    )
    caps = C.memorization_caps(f)
    assert [c.functional for c in caps] == ["RO", "LOO", "COND"]


def test_cond_conversion():
    f = T.pure(0.5, neighbors="replace")
    c = C.memorization_cap(f, functional="COND", n=1000, frequency=1e-5)
    assert c.value == pytest.approx(math.tanh(0.25) + 4 * 1000 * 1e-5)
    assert C.memorization_cap(f, functional="COND").value is None
    big = C.memorization_cap(f, functional="COND", n=1000, frequency=1e-3)
    assert big.value is None and "1/2" in big.reason
    with pytest.raises(DomainError, match="functional"):
        C.memorization_cap(f, functional="XYZ")


# --------------------------------------------------------------------------- truncation, damping
@pytest.mark.parametrize("eps,M", [(0.5, 10.0), (2.0, 3.0)])
def test_truncation_price_is_attained_by_randomized_response(eps, M):
    """[MX] App. B.4: RR canary with p(1|c) in {1, e^-M}; the log-loss truncated at M has |mem| = M tanh(eps/2)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    loss_t, loss_s = 0.0, min(M, -math.log(math.exp(-M)))  # -log 1 and -log e^-M, truncated at M
    mem = (q * loss_t + (1 - q) * loss_s) - ((1 - q) * loss_t + q * loss_s)
    tp = C.truncation_price(epsilon=eps, M=M)
    assert abs(mem) == pytest.approx(tp.value, rel=1e-12)
    assert (
        tp.value == pytest.approx(M * math.tanh(eps / 2))
        and tp.neighbors == "replace"
        and tp.functional == "RO"
    )
    assert C.truncation_price(T.pure(eps, neighbors="add-remove"), M=M).functional == "LOO"
    with pytest.raises(DomainError):
        C.truncation_price(M=M)


def test_in_support_damping():
    f = T.pure(1.0, neighbors="replace")
    d = C.in_support_damping(f, omega=0.001, n=1000)
    assert d.attained == pytest.approx((0.999**1000) * math.tanh(0.5), rel=1e-12)
    assert d.bound == pytest.approx(0.999 * math.tanh(0.5)) and d.attained <= d.bound
    assert C.in_support_damping(f, omega=0.0, n=5).attained == pytest.approx(math.tanh(0.5))
    with pytest.raises(DomainError, match="omega"):
        C.in_support_damping(f, omega=1.0, n=5)
    with pytest.raises(DomainError, match="replace-one"):
        C.in_support_damping(T.pure(1.0, neighbors="add-remove"), omega=0.1, n=5)


@pytest.mark.parametrize(
    "kw",
    [
        dict(epsilon=0.0, k=2),
        dict(epsilon=1.0, k=0),
        dict(epsilon=math.inf, k=2),
        dict(epsilon=1.0, k=1.5),
    ],
)
def test_staircase_bad_input(kw):
    with pytest.raises(DomainError):
        C.eta_star_k(**kw)
