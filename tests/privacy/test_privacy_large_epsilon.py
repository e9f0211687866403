"""Every DP quantity stays finite and correct from epsilon = 1e-6 to 1e4 (issue 12, C12).

The reference values are computed independently with mpmath at 60 significant digits from
the papers' formulas, never from memclaim's own code. Numbers that underflow float64
(alpha*(tau) = e^-800 tau, say) are compared in log space.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from click.testing import CliRunner

from memclaim.cli.main import cli, main
from memclaim.errors import DomainError
from memclaim.privacy import caps as C
from memclaim.privacy import extraction as X
from memclaim.privacy import tradeoff as T
from memclaim.privacy.summary import bounds_summary

mp.mp.dps = 60
EPSILONS = (1e-6, 50.0, 800.0, 1e4)
RTOL = 1e-12


def _close(got, want, rtol=RTOL):
    """float result vs an mpmath value: relative error <= rtol, or both below the float range."""
    w = float(want)
    if w == 0.0:
        return abs(got) <= 1e-300
    return abs(got - w) <= rtol * abs(w)


# --------------------------------------------------------------------------- curves
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("alpha", [0.0, 1e-300, 1e-10, 0.3, 1.0])
def test_pure_curve_and_power(eps, alpha):
    e, a = mp.mpf(eps), mp.mpf(alpha)
    f_ref = max(mp.mpf(0), 1 - mp.e**e * a, mp.e**-e * (1 - a))
    p_ref = min(mp.mpf(1), mp.e**e * a, 1 - mp.e**-e * (1 - a))
    f = T.pure(eps, neighbors="add-remove")
    assert (
        _close(f(alpha), f_ref, 1e-9 if eps == 1e-6 else RTOL)
        or abs(f(alpha) - float(f_ref)) < 1e-15
    )
    assert _close(f.power(alpha), p_ref)
    assert (
        _close(T.f_eps(alpha, epsilon=eps), f_ref, 1e-9)
        or abs(T.f_eps(alpha, epsilon=eps) - float(f_ref)) < 1e-15
    )
    g = T.approx(eps, 1e-7, neighbors="replace")
    p2 = min(mp.mpf(1), mp.mpf("1e-7") + mp.e**e * a, 1 - mp.e**-e * (1 - mp.mpf("1e-7") - a))
    assert _close(g.power(alpha), p2)


# --------------------------------------------------------------------------- caps
@pytest.mark.parametrize("eps", EPSILONS)
def test_eta_and_its_maximizer(eps):
    e = mp.mpf(eps)
    r = C.eta(T.pure(eps, neighbors="replace"))
    assert _close(r.value, mp.tanh(e / 2))
    assert _close(r.log_alpha, -mp.log(mp.e**e + 1))
    d = mp.mpf("1e-9")
    r2 = C.eta(T.approx(eps, 1e-9, neighbors="replace"))
    assert _close(r2.value, d + (1 - d) * mp.tanh(e / 2))
    assert _close(r2.log_alpha, mp.log(1 - d) - mp.log(mp.e**e + 1))


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("k", [1, 2, 3, 6, 7])
def test_staircase(eps, k):
    e = mp.mpf(eps)
    st = C.eta_star_k(epsilon=eps, k=k)
    if k % 2 == 0:
        ref = 1 - mp.e ** (-k * e / 2)
        log_x = -mp.log(mp.e**e + 1) - k * e / 2
    else:
        ref = 1 - 2 * mp.e ** (-(k - 1) * e / 2) / (mp.e**e + 1)
        log_x = -mp.log(mp.e**e + 1) - (k - 1) * e / 2
    assert _close(st.value, ref)
    assert _close(st.log_x_star, log_x)
    assert _close(st.naive, mp.tanh(k * e / 2))
    # the geometric mechanism's shift-k TV, summed independently: p(n) = c r^|n|
    r = mp.e**-e
    c = (1 - r) / (1 + r)
    tv = 0.5 * (
        2 * c * (1 - r**k) / (1 - r) + mp.fsum(c * abs(r**n - r ** (k - n)) for n in range(1, k))
    )
    assert _close(st.geometric_tv, tv, 1e-10)
    assert all(0.0 <= b <= 1.0 for b in st.orbit)


@pytest.mark.parametrize("eps", EPSILONS)
def test_memorization_caps_and_group_conversion(eps):
    e = mp.mpf(eps)
    ar = T.pure(eps, neighbors="add-remove")
    assert _close(C.memorization_cap(ar, functional="LOO").value, mp.tanh(e / 2))
    assert _close(C.memorization_cap(ar, functional="RO").value, 1 - mp.e**-e)  # eta*_2 via f^(2)
    assert _close(
        C.memorization_cap(ar, functional="LOO", copies=3).value, 1 - 2 * mp.e**-e / (mp.e**e + 1)
    )
    d = mp.mpf("1e-300")
    ke, dk = T.group_conversion(epsilon=eps, delta=1e-300, k=3)
    ref = d * (mp.e ** (3 * e) - 1) / (mp.e**e - 1)
    assert ke == pytest.approx(3 * eps, rel=1e-15)
    if ref > mp.mpf("1e300"):
        assert dk == math.inf
    else:
        assert _close(dk, ref, 1e-10)
    assert np.isfinite(C.truncation_price(ar, M=10).value)


# --------------------------------------------------------------------------- extraction
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("tau", [1e-3, 0.1, 0.5, 0.9])
def test_alpha_star_and_entropy_threshold(eps, tau):
    e, t = mp.mpf(eps), mp.mpf(tau)
    tau_c = mp.e**e / (mp.e**e + 1)
    ref = mp.e**-e * t if t <= tau_c else 1 - mp.e**e * (1 - t)
    f = T.pure(eps, neighbors="add-remove")
    a = X.alpha_star(tau, f)
    assert _close(a.value, ref, 1e-9 if t > tau_c else RTOL)
    assert _close(a.log_value, mp.log(ref), 1e-9 if t > tau_c else RTOL)
    assert _close(X.alpha_star_pure(tau, epsilon=eps), ref, 1e-9 if t > tau_c else RTOL)
    bits = X.entropy_threshold(f, m=4, tau=tau)
    assert math.isfinite(bits) and _close(bits, mp.log(4 / ref, 2), 1e-9)
    hs = X.h_star(epsilon=eps, m=4, tau=tau, neighbors="replace")
    assert _close(hs.bits, e / mp.log(2) + mp.log(4 / t, 2))
    assert _close(hs.exact_uniform_bits, mp.log(4 / ref, 2), 1e-9)
    half = (
        mp.e ** (-e / 2) * t
        if t <= mp.e ** (e / 2) / (mp.e ** (e / 2) + 1)
        else 1 - mp.e ** (e / 2) * (1 - t)
    )
    assert _close(hs.replace_necessary_bits, mp.log(4 / half, 2), 1e-9)
    # a baseline far below float range is still compared correctly (log space)
    assert X.prior_is_safe(0.0, f, tau=tau)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("kappa", [0.0, 1e-300, 1e-5, 0.355])
def test_extraction_bound(eps, kappa):
    e, k = mp.mpf(eps), mp.mpf(kappa)
    b = X.extraction_bound(kappa, T.pure(eps, neighbors="add-remove"))
    assert _close(b.value, min(mp.mpf(1), mp.e**e * k, 1 - mp.e**-e * (1 - k)))
    relaxed = mp.e**e * k
    assert b.relaxed == math.inf if relaxed > mp.mpf("1e308") else _close(b.relaxed, relaxed)


@pytest.mark.parametrize("eps", EPSILONS)
def test_group_square_root_and_exact_composition(eps):
    g = X.group_square_root(T.approx(eps, 1e-6, neighbors="replace"))
    e = mp.mpf(eps)
    # delta' = delta/(1 + e^(eps/2)) underflows at eps = 1e4: the square root is then pure f_(eps/2)
    assert _close(g.delta or 0.0, mp.mpf("1e-6") / (1 + mp.e ** (e / 2)))
    c = T.compose(*[T.pure(eps, neighbors="replace")] * 3, exact=True)
    p = mp.e**e / (1 + mp.e**e)  # three RR steps: eta = TV(Bin(3, p), Bin(3, 1 - p))
    tv = (
        mp.fsum(
            abs(mp.binomial(3, j) * (p**j * (1 - p) ** (3 - j) - p ** (3 - j) * (1 - p) ** j))
            for j in range(4)
        )
        / 2
    )
    assert _close(C.eta(c).value, tv, 1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("neighbors", ["replace", "add-remove"])
def test_summary_never_overflows(eps, neighbors):
    for f, k in (
        (T.pure(eps, neighbors=neighbors), 3),
        (T.pure(eps, neighbors=neighbors), 1),
        (T.approx(eps, 1e-9, neighbors=neighbors), 1),
    ):
        s = bounds_summary(
            f, copies=k, m=4, tau=0.1, kappa=1e-5, truncation=10, n=100, frequency=1e-3
        )
        json.dumps(s.to_dict())  # JSON-ready, every value finite or a named infinity
        assert s.value("eta(f)") == pytest.approx(
            float(mp.tanh(mp.mpf(eps) / 2))
            if f.kind == "pure"
            else float(mp.mpf("1e-9") + (1 - mp.mpf("1e-9")) * mp.tanh(mp.mpf(eps) / 2)),
            rel=1e-12,
        )
    if eps >= 50:
        # with 3 copies, delta_3 ~ 1e-9 e^(2 eps) >= 1: no risk level is certified (the math has no answer)
        with pytest.raises(DomainError, match="3 copies the floor"):
            bounds_summary(T.approx(eps, 1e-9, neighbors=neighbors), copies=3, tau=0.1)


@pytest.mark.parametrize("eps", ["800", "1e4", "1e-6", "50"])
def test_cli_bounds_large_epsilon_exits_0(eps):
    res = CliRunner().invoke(
        cli,
        [
            "dp",
            "bounds",
            "--epsilon",
            eps,
            "--neighbors",
            "add-remove",
            "--copies",
            "3",
            "--list-size",
            "4",
            "--risk",
            "0.1",
            "--baseline",
            "1e-5",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rows = {r["name"]: r for r in out["rows"]}
    assert rows["eta(f)"]["value"] == pytest.approx(math.tanh(float(eps) / 2), rel=1e-12)


def test_cli_bounds_epsilon_inf_is_refused_clearly(capsys):
    rc = main(["dp", "bounds", "--epsilon", "inf", "--neighbors", "add-remove"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and "fix:" in err and "inf" in err


@pytest.mark.parametrize("mu", [1e-6, 50.0, 800.0, 1e4])
def test_gdp_large_mu(mu):
    f = T.gdp(mu, neighbors="add-remove")
    m = mp.mpf(mu)
    assert _close(C.eta(f).value, 2 * mp.ncdf(m / 2) - 1)
    a = X.alpha_star(0.1, f)
    assert _close(
        a.log_value, mp.log(mp.ncdf(mp.sqrt(2) * mp.erfinv(2 * mp.mpf("0.1") - 1) - m)), 1e-9
    )
    assert math.isfinite(X.entropy_threshold(f, m=1, tau=0.1))
    assert T.gdp_delta(mu=mu, epsilon=800.0) >= 0.0


def test_plots_at_large_epsilon(tmp_path):
    from memclaim.report.privacy import plot_all

    paths = plot_all(
        tmp_path, epsilon=800.0, copies=3, boundary_epsilons=(1.0, 800.0), neighbors="add-remove"
    )
    assert all(p.stat().st_size > 10_000 for p in paths)


@pytest.mark.parametrize("eps", EPSILONS)
def test_bernoulli_staircase_mechanism_at_any_epsilon(eps):
    from memclaim.mechanisms.staircase import BernoulliStaircase

    m = BernoulliStaircase(eps, 3)
    lv = m.levels()
    assert np.all((lv >= 0) & (lv <= 1)) and lv[0] <= lv[-1]
    assert m.advantage() == pytest.approx(C.eta_star_k(epsilon=eps, k=3).value, rel=1e-9)
