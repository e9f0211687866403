"""kappa-bar of [MX] Prop. C.2(b) (memclaim.privacy.baseline_corpus): a certified interval from draws
of the conditional prior, tested against a corpus model where kappa-bar is known in closed form.

The closed-form case ("leaked bits"): the secret z is b uniform bits; the corpus remainder S^-
quotes each bit independently with probability p (documents that repeat part of the secret, the
corpus material [MX] Def. 3.3 charges to pi). Given S^-, the r bits not quoted are uniform, so
pi(. | S^-) is uniform on 2^r values and its top-m mass is min(1, m 2^-r), with
r ~ Binomial(b, 1 - p):

    kappa-bar = sum_r C(b, r) (1 - p)^r p^(b - r) min(1, m 2^-r).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.errors import DomainError, InputError
from memclaim.privacy.baseline_corpus import (
    ASSUMPTIONS,
    METHODS,
    corpus_baseline,
    corpus_baseline_from_priors,
    mean_upper_bound,
    sample_corpus_baseline,
    top_m_mass,
)


def leaked_bits_kappa_bar(bits: int, quote_prob: float, m: int) -> float:
    """The closed form above (independent of the implementation)."""
    return math.fsum(
        math.comb(bits, r) * (1 - quote_prob) ** r * quote_prob ** (bits - r) * min(1.0, m / 2**r)
        for r in range(bits + 1)
    )


def leaked_bits_prior(bits: int, quote_prob: float):
    """draw_prior(rng): one S^- -> the log-probabilities of pi(. | S^-) over all 2^bits secrets."""

    def draw(rng):
        secret = rng.integers(0, 2, size=bits)
        quoted = rng.random(bits) < quote_prob
        values = (
            np.arange(2**bits)[:, None] >> np.arange(bits)[None, :]
        ) & 1  # [2^b, b] every secret
        ok = np.all((values == secret) | ~quoted, axis=1)  # consistent with the quoted bits
        lp = np.full(2**bits, -np.inf)
        lp[ok] = -math.log(int(ok.sum()))
        return lp

    return draw


# ------------------------------------------------------------------ the top-m mass of one prior
def test_top_m_mass_of_finite_priors():
    u = np.full(16, -math.log(16))
    assert top_m_mass(u, m=1) == pytest.approx(1 / 16, rel=1e-12)
    assert top_m_mass(u, m=5) == pytest.approx(5 / 16, rel=1e-12)
    assert top_m_mass(u, m=16) == 1.0 and top_m_mass(u, m=40) == 1.0  # the list covers the support
    p = np.array([0.5, 0.25, 0.125, 0.125, 0.0])
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    assert top_m_mass(lp, m=2) == pytest.approx(0.75, rel=1e-12)
    assert top_m_mass(lp[::-1], m=3) == pytest.approx(0.875, rel=1e-12)  # order does not matter
    # tiny masses stay exact in log space (no underflow before the sum)
    tiny = np.concatenate([[math.log(1 - 2e-300)], np.full(2, math.log(1e-300))])
    assert top_m_mass(tiny, m=1) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "bad, match",
    [
        ([], "no support"),
        ([math.log(0.5), math.log(0.4)], "sum to"),
        ([0.1, -1.0], "<= 0"),
        ([float("nan")], "<= 0"),
        ([-np.inf, -np.inf], "no mass"),
    ],
)
def test_top_m_mass_refuses_what_is_not_a_prior(bad, match):
    with pytest.raises((DomainError, InputError), match=match):
        top_m_mass(bad, m=1)


# ------------------------------------------------------------------ the closed-form case
@pytest.mark.parametrize("method", METHODS)
def test_interval_covers_the_closed_form_kappa_bar(method):
    """One run per method at a fixed seed: the exact kappa-bar lies in the two-sided interval, below the
    one-sided upper bound, and the per-draw values computed from the priors equal min(1, m 2^-r)."""
    bits, p, m = 8, 0.5, 4
    exact = leaked_bits_kappa_bar(bits, p, m)
    r = sample_corpus_baseline(leaked_bits_prior(bits, p), n=400, m=m, seed=1, method=method)
    assert r.exact_samples and r.n_samples == 400 and r.method == method
    assert r.lower <= exact <= r.upper_two_sided and exact <= r.upper
    assert r.lower <= r.mean_lo == r.mean_hi <= r.upper <= r.upper_two_sided <= 1.0
    assert r.reference == "[MX] Prop. C.2(b)" and r.assumptions[:3] == ASSUMPTIONS


def _coverage_draws(method, reps, n, bits, p, m, confidence, seed):
    """Per-draw top-m masses of the leaked-bits model sampled directly (r ~ Binomial), reps times."""
    rng = np.random.default_rng(seed)
    hits_up = hits_two = 0
    exact = leaked_bits_kappa_bar(bits, p, m)
    for _ in range(reps):
        r = rng.binomial(bits, 1 - p, size=n)
        kap = np.minimum(1.0, m / 2.0**r)
        res = corpus_baseline(kap, m=m, confidence=confidence, method=method)
        hits_up += exact <= res.upper
        hits_two += res.lower <= exact <= res.upper_two_sided
    return hits_up, hits_two


@pytest.mark.parametrize("method", METHODS)
def test_coverage_by_simulation(method):
    """The guarantee, simulated: over 300 independent experiments of n = 60 draws, the 90% bounds cover the
    closed-form kappa-bar at least 90% of the time. The check fails when the coverage count is below the
    1e-3 quantile of Binomial(300, 0.9) (a false alarm probability <= 1e-3 per bound when the guarantee holds)."""
    reps, conf = 300, 0.9
    floor = int(stats.binom.ppf(1e-3, reps, conf))
    up, two = _coverage_draws(method, reps, 60, 10, 0.7, 2, conf, seed=7)
    assert up >= floor and two >= floor, (up, two, floor)


def test_betting_is_tighter_than_hoeffding_on_small_masses():
    """High-entropy secrets give per-draw masses near 0; the variance-adaptive bounds see it."""
    rng = np.random.default_rng(3)
    kap = np.minimum(1.0, 2 / 2.0 ** rng.binomial(16, 0.9, size=500))
    b = corpus_baseline(kap, m=2, method="betting")
    h = corpus_baseline(kap, m=2, method="hoeffding")
    e = corpus_baseline(kap, m=2, method="bernstein")
    assert b.upper < e.upper < h.upper
    assert h.upper == pytest.approx(
        np.mean(kap) + math.sqrt(math.log(1 / 0.05) / (2 * 500)), rel=1e-12
    )
    assert b.upper >= leaked_bits_kappa_bar(16, 0.1, 2)


# ------------------------------------------------------------------ the betting bound, by a slow reference
def _betting_reference(x, delta):
    """Grid search over candidate means with the capital recomputed from scratch at every candidate and the
    rejection set never assumed to be an interval: the smallest u with all grid points >= u rejected."""
    n = len(x)
    lam, s, mu_sum, sig_sum = [], 0.25, 0.0, 0.0
    for t in range(1, n + 1):
        lam.append(min(0.75, math.sqrt(2 * math.log(1 / delta) / (n * s))))
        mu_sum += x[t - 1]
        mu = (0.5 + mu_sum) / (t + 1)
        sig_sum += (x[t - 1] - mu) ** 2
        s = (0.25 + sig_sum) / (t + 1)
    grid = np.linspace(0, 1, 4001)
    rejected = []
    for u in grid:
        w, best = 1.0, 1.0
        for lt, xt in zip(lam, x):
            w *= 1 + lt * (u - xt)
            best = max(best, w)
        rejected.append(best >= 1 / delta)
    rejected = np.array(rejected)
    ok = [i for i in range(len(grid)) if rejected[i:].all()]
    return grid[ok[0]] if ok else 1.0, grid[1] - grid[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_betting_bound_matches_a_slow_reference(seed):
    rng = np.random.default_rng(seed)
    x = rng.beta(0.5, 4.0, size=80)
    ref, step = _betting_reference(list(x), 0.05)
    assert mean_upper_bound(x, confidence=0.95, method="betting") == pytest.approx(ref, abs=step)


# ------------------------------------------------------------------ degenerate inputs
def test_fixed_prior_reduces_to_kappa_pi():
    """A prior that does not depend on S^- has kappa-bar = kappa_pi(m) (Thm. 5.1): every draw gives it."""
    r = corpus_baseline(np.full(50, 0.125), m=1)
    assert r.mean_lo == r.mean_hi == 0.125 and r.lower <= 0.125 <= r.upper
    assert r.upper - 0.125 < 0.15  # the variance-adaptive bound sees zero spread


def test_extreme_values_and_one_sample():
    zeros, ones = corpus_baseline(np.zeros(30), m=1), corpus_baseline(np.ones(30), m=1)
    assert zeros.lower == 0.0 and 0.0 < zeros.upper < 0.2
    assert ones.upper == 1.0 and ones.upper_two_sided == 1.0 and 0.8 < ones.lower < 1.0
    one = corpus_baseline([0.3], m=1, method="hoeffding")
    assert 0.0 <= one.lower <= 0.3 <= one.upper <= 1.0
    with pytest.raises(DomainError, match="at least 2 samples"):
        corpus_baseline([0.3], m=1, method="bernstein")


def test_certified_brackets_and_baseline_results():
    lo = np.array([0.01, 0.02, 0.00, 0.05])
    hi = lo + np.array([0.0, 0.01, 0.02, 0.0])
    r = corpus_baseline(kappa_lo=lo, kappa_hi=hi, m=3, method="hoeffding")
    assert not r.exact_samples and r.bracket_gap == pytest.approx(0.02)
    assert r.mean_lo == pytest.approx(lo.mean()) and r.mean_hi == pytest.approx(hi.mean())
    exact_hi = corpus_baseline(hi, m=3, method="hoeffding")
    assert r.upper == exact_hi.upper  # the upper bound uses the upper ends only

    class B:  # the fields of memclaim.privacy.baseline.BaselineResult that are read
        def __init__(self, a, b, m):
            self.kappa_lo, self.kappa_hi, self.m = a, b, m

    same = corpus_baseline(baselines=[B(a, b, 3) for a, b in zip(lo, hi)], m=3, method="hoeffding")
    assert (same.lower, same.upper) == (r.lower, r.upper)
    with pytest.raises(DomainError, match="list size m = 2"):
        corpus_baseline(baselines=[B(0.1, 0.2, 2)], m=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kappa": []}, "no samples"),
        ({"kappa": [0.2, 1.5]}, r"kappa\[1\] = 1.5"),
        ({"kappa": [0.2, float("nan")]}, "not in"),
        ({"kappa_lo": [0.3], "kappa_hi": [0.2]}, "reversed"),
        ({"kappa_lo": [0.1, 0.2], "kappa_hi": [0.2]}, "1 values|2 values"),
        ({"kappa_lo": [0.1]}, "both"),
        ({"kappa": [0.1], "kappa_lo": [0.1], "kappa_hi": [0.1]}, "exactly one"),
        ({}, "exactly one"),
        ({"kappa": [0.1], "method": "chernoff"}, "unknown bound method"),
        ({"kappa": [0.1], "confidence": 1.0}, "between 0 and 1"),
    ],
)
def test_bad_input_is_refused_with_the_value(kwargs, match):
    with pytest.raises((DomainError, InputError), match=match):
        corpus_baseline(m=1, **kwargs)


def test_priors_are_checked_and_m_is_the_protocols():
    u = np.full(8, -math.log(8))
    r = corpus_baseline_from_priors([u, u, np.full(4, -math.log(4))], m=2, method="hoeffding")
    assert r.mean_hi == pytest.approx((0.25 + 0.25 + 0.5) / 3)
    with pytest.raises(InputError, match="no conditional priors"):
        corpus_baseline_from_priors([], m=1)
    with pytest.raises(DomainError, match="m \\(list size\\)"):
        corpus_baseline([0.1], m=0)


# ------------------------------------------------------------------ properties
@settings(max_examples=60)
@given(
    st.lists(st.floats(0, 1), min_size=2, max_size=40),
    st.sampled_from(METHODS),
    st.floats(0.5, 0.999),
)
def test_bounds_bracket_the_sample_means(xs, method, conf):
    r = corpus_baseline(xs, m=1, confidence=conf, method=method)
    assert (
        0.0 <= r.lower <= r.mean_lo + 1e-12
        and r.mean_hi - 1e-12 <= r.upper <= r.upper_two_sided <= 1.0
    )
    wider = corpus_baseline(xs, m=1, confidence=min(0.9999, conf + (1 - conf) / 2), method=method)
    assert wider.upper >= r.upper - 1e-12 and wider.lower <= r.lower + 1e-12


def test_betting_upper_bound_is_never_below_the_sample_mean():
    """A run of small values first makes the wealth peak early and rejects candidates below the sample
    mean (hypothesis found [0, 0, 0, 1, 1] at 50%: 0.347 < 0.4); the bound returns the mean then."""
    x = [0.0, 0.0, 0.0, 1.0, 1.0]
    assert mean_upper_bound(x, confidence=0.5, method="betting") == pytest.approx(0.4, abs=1e-15)
    r = corpus_baseline(x, m=1, confidence=0.5)
    assert r.mean_hi <= r.upper <= r.upper_two_sided and r.lower <= r.mean_lo


# ------------------------------------------------------------------ `memclaim dp baseline --corpus-samples`
def test_cli_corpus_samples(tmp_path, capsys):
    import json

    from memclaim.cli.main import main

    rng = np.random.default_rng(5)
    kap = np.minimum(1.0, 2 / 2.0 ** rng.binomial(10, 0.7, size=120))
    f = tmp_path / "draws.jsonl"
    lines = [json.dumps({"kappa": float(k)}) for k in kap[:100]]
    lines += [
        json.dumps({"kappa_lo": float(k) * 0.9, "kappa_hi": float(k), "m": 2}) for k in kap[100:]
    ]
    f.write_text("\n".join(lines) + "\n\n")
    capsys.readouterr()
    assert main(["dp", "baseline", "--corpus-samples", str(f), "--list-size", "2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    lo = np.concatenate([kap[:100], kap[100:] * 0.9])
    want = corpus_baseline(kappa_lo=lo, kappa_hi=kap, m=2)
    assert got["upper"] == want.upper and got["lower"] == want.lower and got["n_samples"] == 120
    assert got["reference"] == "[MX] Prop. C.2(b)"
    assert main(["dp", "baseline", "--corpus-samples", str(f), "--list-size", "2"]) == 0
    assert "kappa-bar upper (one-sided, 95%)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, args, match",
    [
        (None, [], "does not exist"),
        ('{"kappa": 0.1}\nnot json\n', [], "line 2 is not JSON"),
        ('{"p": 0.1}\n', [], "neither 'kappa'"),
        ('{"kappa": 0.1, "m": 3}\n', [], "m = 3, not --list-size 1"),
        ('{"kappa": "0.1"}\n', [], "must be numbers"),
        ('{"kappa": 0.1}\n{"kappa": 1.5}\n', [], "line 2: kappa = 1.5 is not in"),
        ('{"kappa": NaN}\n', [], "kappa = nan is not in"),
        ('{"kappa_lo": 0.2, "kappa_hi": 0.1}\n', [], "line 1: the bracket is reversed"),
        ("", [], "holds no draws"),
        ("\n\n", [], "holds no draws"),
        ('{"kappa": 0.1}\n', ["smollm2"], "replaces MODEL"),
    ],
)
def test_cli_corpus_samples_bad_input(tmp_path, capsys, content, args, match):
    from memclaim.cli.main import main

    f = tmp_path / "draws.jsonl"
    if content is not None:
        f.write_text(content)
    capsys.readouterr()
    assert main(["dp", "baseline", *args, "--corpus-samples", str(f), "--list-size", "1"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "fix:" in err and re.search(match, err), err


def test_cli_model_branch_still_needs_its_options(capsys):
    from memclaim.cli.main import main

    assert main(["dp", "baseline", "--list-size", "1"]) == 2
    assert "MODEL, --prefix and --secret-length are required" in capsys.readouterr().err
