"""A secret planted k times: every extraction quantity uses the k-fold group curve (issue 12, A1).

[MX] Cor. 4.3: f^(k) = 1 - (1 - f)^(o k); the remark after Thm. 5.1: H_inf >~ k eps log2 e +
log2(m/tau). The datasets with and without all k copies are k neighbour steps apart under either
relation, and the paper proves no converse for k copies, so these rows are sufficient only.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from memclaim.cli.main import cli
from memclaim.cli.privacy_demo import privacy_section
from memclaim.errors import DomainError
from memclaim.privacy import extraction as X
from memclaim.privacy import tradeoff as T
from memclaim.privacy.summary import bounds_summary

LOG2E = 1 / math.log(2)


def _bisect_alpha_star(g, tau):
    """sup{a : 1 - g(a) <= tau} by plain bisection on the group curve's power (slow, obvious)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if g.power(mid) <= tau:
            lo = mid
        else:
            hi = mid
    return lo


def _ext_rows(out: dict) -> list[dict]:
    return [r for r in out["rows"] if r["functional"] == "Ext"]


# --------------------------------------------------------------------------- the reported defect
def test_a_duplicated_canary_is_not_reported_safe():
    """eps = 1, m = 4, tau = 0.1, kappa = 0.01: safe for one copy, not for three ([MX] Cor. 4.3)."""
    f = T.pure(1.0, neighbors="add-remove")
    one = bounds_summary(f, m=4, tau=0.1, kappa=0.01)
    assert one.value("baseline certified safe (kappa <= alpha*)") == "yes"
    three = bounds_summary(f, copies=3, m=4, tau=0.1, kappa=0.01)
    rows = {r.name: r for r in three.rows}
    assert rows["baseline certified safe (kappa <= alpha*), 3 copies"].value == "no"
    # 0.01 -> 0.0272 -> 0.0739 -> 0.2009: every step on the e^eps branch of fbar (all below c* = 0.269)
    assert rows["Ext bound 1 - f^(3)(kappa), 3 copies, kappa = 0.01"].value == pytest.approx(
        math.exp(3) * 0.01, rel=1e-12
    )
    assert rows["alpha*(tau), 3 copies, tau = 0.1"].value == pytest.approx(
        math.exp(-3) * 0.1, rel=1e-12
    )
    hk = rows["H* = k eps log2 e + log2(m/tau) (bits), 3 copies, m = 4"].value
    assert hk == pytest.approx(3 * LOG2E + math.log2(40), rel=1e-12)
    ext = [r for r in three.rows if r.functional == "Ext"]
    assert len(ext) == 6
    for r in ext:  # say so, and never claim exactness
        assert r.copies == 3 and r.exact is False and "3 copies" in r.name
        assert "Cor. 4.3" in (r.reference + r.note)
    # no single-copy extraction row survives beside them
    assert not any(r.functional == "Ext" and r.copies == 1 for r in three.rows)


def test_cli_copies_reach_the_extraction_rows_and_the_audit():
    base = [
        "dp",
        "bounds",
        "--epsilon",
        "1",
        "--neighbors",
        "add-remove",
        "--list-size",
        "4",
        "--risk",
        "0.1",
        "--baseline",
        "0.01",
        "--successes",
        "3",
        "--trials",
        "10",
        "--json",
    ]
    one = json.loads(CliRunner().invoke(cli, base, catch_exceptions=False).output)
    assert (
        one["audit"]["refuted"] is True and one["audit"]["copies"] == 1
    )  # 0.087 > 1 - f(0.01) = 0.027
    res = CliRunner().invoke(cli, base + ["--copies", "3"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["copies"] == 3
    assert (
        out["audit"]["copies"] == 3 and out["audit"]["refuted"] is False
    )  # 0.087 < 1 - f^(3)(0.01) = 0.20
    assert out["audit"]["bound"] == pytest.approx(math.exp(3) * 0.01, rel=1e-12)
    assert "Cor. 4.3" in out["audit"]["reference"]
    assert all(r["exact"] is False and r["copies"] == 3 for r in _ext_rows(out))
    table = CliRunner().invoke(cli, base[:-1] + ["--copies", "3"], catch_exceptions=False).output
    assert "3-fold group curve" in table and "sufficient" in table


# --------------------------------------------------------------------------- the API, against brute force
@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=5.0),
    delta=st.sampled_from([0.0, 1e-6, 1e-3]),
    k=st.integers(min_value=2, max_value=6),
    tau=st.floats(min_value=0.05, max_value=0.95),
    rel=st.sampled_from(["replace", "add-remove"]),
)
def test_alpha_star_and_ext_bound_use_the_group_curve(eps, delta, k, tau, rel):
    f = T.approx(eps, delta, neighbors=rel)
    g = T.group(f, k)
    if tau < g.power(0.0):
        with pytest.raises(DomainError, match=f"{k} copies the floor"):
            X.alpha_star(tau, f, copies=k)
        return
    a = X.alpha_star(tau, f, copies=k)
    assert a.value == pytest.approx(_bisect_alpha_star(g, tau), rel=1e-9, abs=1e-15)
    assert (
        not a.exact
        and a.replace_violation_above is None
        and a.copies == k
        and "Cor. 4.3" in a.note + a.theorem
    )
    assert a.value <= X.alpha_star(tau, f).value + 1e-15  # k copies can only shrink the safe set
    for kappa in (0.0, 1e-9, 1e-3, 0.2, 0.9):
        b = X.extraction_bound(kappa, f, copies=k)
        assert b.value == pytest.approx(float(g.power(kappa)), rel=1e-12, abs=1e-300)
        assert not b.tight and b.copies == k
        assert b.value <= b.relaxed * (1 + 1e-12) + 1e-300  # e^{k eps} kappa (+ delta_k) is looser
    assert X.prior_is_safe(a.value * (1 - 1e-9), f, tau=tau, copies=k)
    assert not X.prior_is_safe(min(1.0, a.value * 1.01 + 1e-12), f, tau=tau, copies=k)


def test_gdp_copies_are_g_k_mu():
    f = T.gdp(0.5, neighbors="add-remove")
    a = X.alpha_star(0.1, f, copies=4)
    assert a.value == pytest.approx(
        X.alpha_star(0.1, T.gdp(2.0, neighbors="add-remove")).value, rel=1e-12
    )
    assert not a.exact


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=5.0),
    k=st.integers(min_value=2, max_value=8),
    tau=st.floats(min_value=0.01, max_value=0.95),
    m=st.integers(min_value=1, max_value=64),
)
def test_h_star_for_k_copies_is_sufficient_and_never_exact(eps, k, tau, m):
    f = T.pure(eps, neighbors="add-remove")
    hs = X.h_star(epsilon=eps, m=m, tau=tau, copies=k)
    assert hs.bits == pytest.approx(k * eps * LOG2E + math.log2(m / tau), rel=1e-12)
    assert not hs.exact_on_uniform and hs.exact_uniform_bits is None and hs.copies == k
    assert hs.group_curve_bits <= hs.bits + 1e-9  # the exact group curve needs no more
    assert hs.group_curve_bits == pytest.approx(
        math.log2(m / _bisect_alpha_star(T.group(f, k), tau)), rel=1e-9
    )
    # sufficiency: a uniform prior at exactly H* bits keeps the k-copy bound at or below tau
    kappa = min(1.0, m * 2.0**-hs.bits)
    assert X.extraction_bound(kappa, f, copies=k).value <= tau * (1 + 1e-9)
    v = X.entropy_verdict(min_entropy_bits=hs.bits + 1e-9, f=f, m=m, tau=tau, copies=k)
    assert v.above and v.copies == k and v.ext_bound <= tau * (1 + 1e-9) and "Cor. 4.3" in v.meaning


def test_h_star_one_copy_unchanged():
    assert X.h_star(epsilon=1.0, m=4, tau=0.1).bits == pytest.approx(6.764623, abs=1e-6)


def test_group_curve_bits_below_naive_k_eps_in_the_second_regime():
    """tau above c*: the exact group curve certifies with fewer bits than k eps log2 e + log2(m/tau)."""
    hs = X.h_star(epsilon=1.0, m=1, tau=0.9, copies=2)
    assert hs.group_curve_bits < hs.bits - 0.5


def test_audit_soundness_with_copies():
    f = T.pure(1.0, neighbors="add-remove")
    one = X.audit_soundness(f, successes=3, trials=10, m=4, kappa=0.01)
    three = X.audit_soundness(f, successes=3, trials=10, m=4, kappa=0.01, copies=3)
    assert one.refuted and not three.refuted
    assert three.bound == pytest.approx(float(T.group(f, 3).power(0.01)), rel=1e-12)
    assert three.copies == 3 and "planted 3 times" in three.claimed


def test_extraction_audit_soundness_check_passes_copies():
    from memclaim.audits.extraction import extraction_from_arrays, soundness_check

    ext = extraction_from_arrays(
        greedy_match=np.array([True] * 3 + [False] * 7), record_ids=[f"r{i}" for i in range(10)]
    )
    assert soundness_check(ext, epsilon=1.0, kappa=0.01).refuted
    s3 = soundness_check(ext, epsilon=1.0, kappa=0.01, copies=3)
    assert not s3.refuted and s3.copies == 3


def test_k_copy_floor_is_refused_with_a_fix():
    """(eps, delta) = (1, 0.05), 3 copies: 1 - f^(3)(0) = delta_3 ~ 0.24 > tau = 0.1: no answer exists."""
    f = T.approx(1.0, 0.05, neighbors="add-remove")
    assert X.alpha_star(0.1, f).value > 0
    with pytest.raises(DomainError, match="3 copies the floor") as ei:
        X.alpha_star(0.1, f, copies=3)
    assert "fix:" in str(ei.value)


def test_demo_section_uses_copies():
    buf = io.StringIO()
    out = privacy_section(
        canaries=[
            {"name": "c1", "min_entropy_bits": 8.0, "m": 1, "tau": 0.1},
            {"name": "c4", "min_entropy_bits": 8.0, "m": 1, "tau": 0.1, "copies": 4},
        ],
        console=Console(file=buf, width=200),
        epsilons=(1.0,),
    )
    c1, c4 = (c["by_epsilon"][0] for c in out["canaries"])
    assert c1["above_h_star"] and c1["certified_safe"]
    assert (
        not c4["above_h_star"]
        and not c4["certified_safe"]
        and c4["copies"] == 4
        and not c4["exact"]
    )
    assert c4["h_star_bits"] == pytest.approx(4 * LOG2E + math.log2(10))
    assert "planted 4 times" in buf.getvalue()
