"""Trade-off functions, group curves, composition and accounting ([MX] §3.1, Cor. 4.3, §8.2)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.errors import DomainError
from memclaim.privacy import tradeoff as T
from memclaim.privacy.caps import eta

EPS = st.floats(min_value=0.01, max_value=8.0)
DELTA = st.floats(min_value=0.0, max_value=0.5)
MU = st.floats(min_value=0.01, max_value=6.0)
GRID = np.linspace(0.0, 1.0, 2001)


def _tv(p, q) -> float:
    return 0.5 * math.fsum(abs(a - b) for a, b in zip(p, q))


# --------------------------------------------------------------------------- canonical curves
def test_pure_curve_values_and_vectorization():
    e = 1.0
    assert T.f_eps(0.0, epsilon=e) == 1.0
    assert T.f_eps(1.0, epsilon=e) == 0.0
    kink = 1.0 / (math.e + 1.0)
    assert T.f_eps(kink, epsilon=e) == pytest.approx(
        kink, abs=1e-15
    )  # both branches meet at (a, a)
    out = T.f_eps(np.array([[0.0, 0.5], [0.25, 1.0]]), epsilon=e)
    assert out.shape == (2, 2)
    assert isinstance(T.f_eps(0.3, epsilon=e), float)
    assert T.f_eps(0.5, epsilon=e) == pytest.approx(math.exp(-1) * 0.5)


def test_approx_and_gdp_values():
    assert T.f_eps_delta(0.0, epsilon=1.0, delta=0.1) == pytest.approx(0.9)
    np.testing.assert_allclose(
        T.f_eps_delta(GRID, epsilon=0.7, delta=0.0), T.f_eps(GRID, epsilon=0.7), atol=0
    )
    # G_mu = T(N(0,1), N(mu,1)): reject when X > z_{1-a}; type II is P(N(mu,1) <= z_{1-a})
    a = np.array([0.01, 0.2, 0.5, 0.9])
    expected = stats.norm(loc=1.3).cdf(stats.norm.ppf(1 - a))
    np.testing.assert_allclose(T.f_gdp(a, mu=1.3), expected, rtol=1e-12)
    assert T.f_gdp(0.0, mu=1.0) == 1.0 and T.f_gdp(1.0, mu=1.0) == 0.0


@settings(derandomize=True, max_examples=60, deadline=None)
@given(eps=EPS, delta=DELTA, mu=MU)
def test_canonical_curves_are_trade_off_functions(eps, delta, mu):
    for f in (
        T.pure(eps, neighbors="replace"),
        T.approx(eps, delta, neighbors="replace"),
        T.gdp(mu, neighbors="replace"),
    ):
        y = np.asarray(f(GRID))
        assert np.all(np.diff(y) <= 1e-12)  # nonincreasing
        assert np.all(y <= 1.0 - GRID + 1e-12)  # f(a) <= 1 - a
        assert np.all(y[:-2] - 2 * y[1:-1] + y[2:] >= -1e-9)  # convex
        assert abs(y[-1]) <= 1e-12
        np.testing.assert_allclose(np.asarray(f.power(GRID)) + y, 1.0, atol=1e-12)


def test_power_is_accurate_at_tiny_levels():
    kappa = np.array([1e-300, 1e-40, 1e-12])
    np.testing.assert_allclose(
        T.pure(2.0, neighbors="add-remove").power(kappa), math.exp(2.0) * kappa, rtol=1e-14
    )
    g = T.gdp(1.0, neighbors="add-remove").power(1e-20)
    assert g == pytest.approx(stats.norm.cdf(stats.norm.ppf(1e-20) + 1.0), rel=1e-12)
    assert g > 1e-20


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, "1", True])
def test_bad_epsilon(bad):
    with pytest.raises(DomainError, match="epsilon"):
        T.f_eps(0.5, epsilon=bad)
    with pytest.raises(DomainError, match="epsilon"):
        T.pure(bad, neighbors="replace")


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, math.nan])
def test_bad_delta_names_the_value(bad):
    with pytest.raises(DomainError, match="delta") as ei:
        T.approx(1.0, bad, neighbors="replace")
    assert repr(bad) in str(ei.value) or str(bad) in str(ei.value)


def test_bad_alpha_and_neighbors():
    with pytest.raises(DomainError, match="1.5"):
        T.f_eps([0.2, 1.5], epsilon=1.0)
    with pytest.raises(DomainError, match="neighbouring relation"):
        T.pure(1.0, neighbors="swap")
    with pytest.raises(TypeError):
        T.pure(1.0)  # the relation is never defaulted
    assert T.normalize_neighbors("add/remove") == "add-remove"
    assert T.normalize_neighbors("replace-one") == "replace"


# --------------------------------------------------------------------------- points curves
def test_points_curve_reproduces_a_piecewise_linear_family():
    e = 1.3
    kink = 1.0 / (math.exp(e) + 1.0)
    f = T.from_points(
        [0.0, kink, 1.0], [1.0, float(T.f_eps(kink, epsilon=e)), 0.0], neighbors="replace"
    )
    np.testing.assert_allclose(f(GRID), T.f_eps(GRID, epsilon=e), atol=1e-14)
    assert eta(f).value == pytest.approx(math.tanh(e / 2), abs=1e-14)


def test_points_validation():
    with pytest.raises(DomainError, match="convex"):
        T.from_points([0, 0.3, 0.6, 1], [1, 0.4, 0.35, 0], neighbors="replace")
    f = T.from_points([0, 0.3, 0.6, 1], [1, 0.4, 0.35, 0], neighbors="replace", convexify=True)
    assert f(0.6) <= 0.35 + 1e-15
    with pytest.raises(DomainError, match="1 - alpha"):
        T.from_points([0, 0.5, 1], [1, 0.8, 0], neighbors="replace")
    with pytest.raises(DomainError, match=r"\[0, 1\]"):
        T.from_points([0.1, 1], [0.5, 0], neighbors="replace")
    with pytest.raises(DomainError, match="f\\(1\\) = 0"):
        T.from_points([0, 1], [1, 0.2], neighbors="replace")
    with pytest.raises(DomainError, match="nonincreasing"):
        T.from_points([0, 0.2, 1], [0.5, 0.6, 0], neighbors="replace")


def _asymmetric_curve():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.1, 0.2, 0.3, 0.4])
    x, y = T._np_curve(p, q)
    return T.from_points(x, y, neighbors="add-remove"), p, q


def test_symmetry_check_and_symmetrization():
    for f in (
        T.pure(1.0, neighbors="replace"),
        T.approx(0.5, 0.05, neighbors="replace"),
        T.gdp(2.0, neighbors="replace"),
        T.group(T.pure(1.0, neighbors="replace"), 3),
    ):
        assert T.is_symmetric(f).symmetric
    f, p, q = _asymmetric_curve()
    chk = T.is_symmetric(f)
    assert not chk.symmetric and chk.max_gap > 0.01
    # the generalized inverse of T(P, Q) is T(Q, P) ([6] Lemma A.2)
    xr, yr = T._np_curve(q, p)
    g = T.from_points(xr, yr, neighbors="add-remove")
    np.testing.assert_allclose(T.generalized_inverse(f, GRID[1:]), g(GRID[1:]), atol=1e-9)
    s = T.symmetrized(f)
    assert T.is_symmetric(s, tol=1e-8).symmetric
    ys = np.asarray(s(GRID))
    assert np.all(ys >= np.asarray(f(GRID)) - 1e-12) and np.all(ys >= np.asarray(g(GRID)) - 1e-12)
    assert np.all(ys <= np.maximum(f(GRID), g(GRID)) + 1e-12)  # exactly the max, never above it


# --------------------------------------------------------------------------- group curves
def test_group_of_gdp_is_gdp_k_mu():
    g = T.group(T.gdp(0.7, neighbors="replace"), 3)
    assert g.kind == "gdp" and g.mu == pytest.approx(2.1)
    # independent: iterate 1 - G_mu three times
    x = GRID.copy()
    for _ in range(3):
        x = 1 - T.f_gdp(x, mu=0.7)
    np.testing.assert_allclose(1 - x, g(GRID), atol=1e-12)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(eps=EPS, k=st.integers(min_value=2, max_value=6))
def test_pure_group_curve_is_above_the_naive_k_eps_curve(eps, k):
    f = T.pure(eps, neighbors="replace")
    g = T.group(f, k)
    x = GRID.copy()
    for _ in range(k):
        x = np.minimum(math.exp(eps) * x, 1 - math.exp(-eps) * (1 - x))  # f-bar by hand
    np.testing.assert_allclose(g(GRID), 1 - x, atol=1e-12)
    assert np.all(np.asarray(g(GRID)) >= T.f_eps(GRID, epsilon=k * eps) - 1e-12)
    assert T.group(g, 2).k == 2 * k


def test_group_conversion_delta_k_and_that_it_is_lossy():
    e, d, k = 0.5, 1e-3, 4
    ke, dk = T.group_conversion(epsilon=e, delta=d, k=k)
    assert ke == pytest.approx(2.0)
    assert dk == pytest.approx(d * math.fsum(math.exp(j * e) for j in range(k)), rel=1e-12)
    exact = T.group(T.approx(e, d, neighbors="replace"), k)
    conv = T.group_conversion_curve(T.approx(e, d, neighbors="replace"), k)
    assert not conv.exact
    assert np.all(
        np.asarray(conv(GRID)) <= np.asarray(exact(GRID)) + 1e-12
    )  # valid: below the exact curve
    assert eta(conv).value >= eta(exact, method="numeric").value - 1e-12
    with pytest.raises(DomainError, match="delta_k"):
        T.group_conversion_curve(T.approx(3.0, 0.2, neighbors="replace"), 5)


# --------------------------------------------------------------------------- composition
def test_gdp_composition_adds_in_quadrature():
    c = T.compose(T.gdp(1.0, neighbors="add-remove"), T.gdp(2.0, neighbors="add-remove"))
    assert c.kind == "gdp" and c.exact and c.mu == pytest.approx(math.sqrt(5.0))


@pytest.mark.parametrize("eps,r", [(1.0, 2), (0.3, 5), (2.0, 3)])
def test_exact_pure_composition_against_binomial_tv(eps, r):
    """eta(f_eps^{(x) r}) = TV(Bin(r, p), Bin(r, 1-p)), p = e^eps/(1+e^eps) (eta(T(P,Q)) = TV(P,Q))."""
    fs = [T.pure(eps, neighbors="replace")] * r
    exact = T.compose(*fs, exact=True)
    p = math.exp(eps) / (1 + math.exp(eps))
    j = np.arange(r + 1)
    tv = _tv(stats.binom.pmf(j, r, p), stats.binom.pmf(j, r, 1 - p))
    assert eta(exact).value == pytest.approx(tv, abs=1e-12)
    loose = T.compose(*fs)
    assert not loose.exact and loose.epsilon == pytest.approx(r * eps)
    assert np.all(np.asarray(loose(GRID)) <= np.asarray(exact(GRID)) + 1e-12)


def test_exact_pure_composition_with_distinct_epsilons_against_product_enumeration():
    eps = [0.4, 1.1, 0.7]
    exact = T.compose(*[T.pure(e, neighbors="replace") for e in eps], exact=True)
    P, Q = [], []
    for bits in itertools.product([0, 1], repeat=3):
        pp = qq = 1.0
        for b, e in zip(bits, eps):
            hi = math.exp(e) / (1 + math.exp(e))
            pp *= hi if b else 1 - hi
            qq *= 1 - hi if b else hi
        P.append(pp)
        Q.append(qq)
    assert eta(exact).value == pytest.approx(_tv(P, Q), abs=1e-12)


def test_composition_errors_and_basic_composition():
    with pytest.raises(DomainError, match="different neighbouring relations"):
        T.compose(T.pure(1, neighbors="replace"), T.pure(1, neighbors="add-remove"))
    with pytest.raises(DomainError, match="dp_accounting"):
        T.compose(T.gdp(1, neighbors="replace"), T.pure(1, neighbors="replace"))
    b = T.compose(T.approx(1, 1e-5, neighbors="replace"), T.pure(0.5, neighbors="replace"))
    assert b.epsilon == pytest.approx(1.5) and b.delta == pytest.approx(1e-5) and not b.exact


# --------------------------------------------------------------------------- GDP duality, DP-SGD
@pytest.mark.parametrize("mu,e", [(0.5, 0.3), (1.0, 1.0), (2.0, 3.0)])
def test_gdp_delta_against_conjugate(mu, e):
    # delta(eps) = sup_a (1 - e^eps a - G_mu(a)) ([6] Prop. 2.12), maximized on a fine log grid
    a = np.concatenate([np.logspace(-14, -1, 20001), np.linspace(0.1, 1, 20001)])
    d = float(np.max(1 - math.exp(e) * a - T.f_gdp(a, mu=mu)))
    assert T.gdp_delta(mu=mu, epsilon=e) == pytest.approx(d, rel=1e-5, abs=1e-12)


def test_dpsgd_single_full_batch_step_matches_gaussian_dp():
    """q = 1, one step: the Gaussian mechanism is exactly (1/sigma)-GDP; PLD's eps must sit on its delta curve."""
    sigma, delta = 2.0, 1e-5
    res = T.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=1.0, steps=1, delta=delta)
    assert res.neighbors == "add-remove" and res.accountant == "pld"
    d_at = T.gdp_delta(mu=1 / sigma, epsilon=res.epsilon)
    assert (
        0.95 * delta <= d_at <= delta * (1 + 1e-6)
    )  # PLD is pessimistic by its discretization only
    assert res.guarantee().kind == "approx"


def test_dpsgd_accountants_and_relations():
    kw = dict(
        noise_multiplier=1.0, sampling_rate=0.05, steps=10, delta=1e-5, pld_discretization=1e-2
    )
    pld = T.dpsgd_epsilon(**kw).epsilon
    rdp = T.dpsgd_epsilon(**kw, accountant="rdp").epsilon
    fine = T.dpsgd_epsilon(**{**kw, "pld_discretization": 1e-3}).epsilon
    assert 0 < fine <= pld + 1e-9  # a coarser grid is pessimistic, never optimistic
    assert pld <= rdp + 0.05  # RDP is the looser accountant (up to the coarse grid)
    assert T.dpsgd_epsilon(**{**kw, "noise_multiplier": 2.0}).epsilon < pld
    rep = T.dpsgd_epsilon(**kw, neighbors="replace")
    assert rep.neighbors == "replace" and rep.epsilon >= pld - 1e-6
    with pytest.raises(DomainError, match="add/remove"):
        T.dpsgd_epsilon(**kw, accountant="rdp", neighbors="replace")
    with pytest.raises(DomainError, match="sampling_rate"):
        T.dpsgd_epsilon(**{**kw, "sampling_rate": 0.0})
