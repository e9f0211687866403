"""The subset-release gadget ([MX] Lemma 5.2) and the noisy-count release with its Bayes top-m list
adversary ([MX] §8.1, Fig. 6 right), against brute-force enumeration, the privacy module's
formulas, the paper's numbers, and simulation."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

from memclaim.errors import DomainError
from memclaim.mechanisms import (
    NoisyHistogramRelease,
    SubsetReleaseGadget,
    TwoSidedGeometric,
    bayes_top_m,
    bayes_top_m_hits,
    exact_tradeoff,
    min_entropy_bits,
    simulate_top_m_success,
    simulate_top_m_success_uniform,
    top_m_mass,
    top_m_success_exact,
    uniform_subsets,
    zipf_prior,
)
from memclaim.privacy.extraction import extraction_bound_pure
from memclaim.privacy.tradeoff import f_eps, f_gdp, gdp, pure


# ---------------------------------------------------------------- the gadget
@settings(max_examples=60)
@given(st.floats(0.05, 5.0), st.integers(2, 4000), st.data())
def test_gadget_attains_the_bound_and_is_f_dp(eps, n, data):
    """[MX] Lemma 5.2 / App. C.3: success = 1 - f(m/N), and both orders of the only non-trivial
    neighbour pair (P_z, Q) dominate f."""
    m = data.draw(st.integers(1, n - 1))
    f = pure(eps, neighbors="add-remove")
    g = SubsetReleaseGadget(n, m, f)
    assert 0 <= g.mixing_weight() <= 1
    assert g.success_probability() == pytest.approx(
        extraction_bound_pure(m / n, epsilon=eps), rel=1e-9, abs=1e-15
    )
    a = np.linspace(0, 1, 201)
    t1, t2 = g.pair_tradeoffs(a)
    fa = f_eps(a, epsilon=eps)
    assert np.all(t1 >= fa - 1e-9) and np.all(t2 >= fa - 1e-9)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("n,m", [(10, 1), (50, 4), (1000, 16)])
def test_gadget_with_gdp(mu, n, m):
    """Any symmetric f: Gaussian DP. Plain callables work too (no .power)."""
    f = functools.partial(f_gdp, mu=mu)
    g = SubsetReleaseGadget(n, m, f)
    assert g.success_probability() == pytest.approx(1 - f_gdp(m / n, mu=mu), abs=1e-12)
    g2 = SubsetReleaseGadget(n, m, gdp(mu, neighbors="add-remove"))
    assert g2.success_probability() == pytest.approx(g.success_probability(), abs=1e-12)
    a = np.linspace(0, 1, 201)
    t1, t2 = g.pair_tradeoffs(a)
    assert np.all(t1 >= f_gdp(a, mu=mu) - 1e-9) and np.all(t2 >= f_gdp(a, mu=mu) - 1e-9)


@pytest.mark.parametrize("n,m,eps", [(6, 2, 1.0), (7, 3, 0.3), (5, 1, 2.5)])
def test_gadget_two_class_reduction_matches_full_enumeration(n, m, eps):
    """Slow reference: the law of C over all C(N, m) subsets, written from the definition, has the
    same trade-off curves as the two likelihood-ratio classes the library uses."""
    g = SubsetReleaseGadget(n, m, pure(eps, neighbors="add-remove"))
    a = g.mixing_weight()
    z = 0
    subsets = list(itertools.combinations(range(n), m))
    p = np.array(
        [
            a * (z in c) / special.comb(n - 1, m - 1, exact=True) + (1 - a) / len(subsets)
            for c in subsets
        ]
    )
    q = np.full(len(subsets), 1.0 / len(subsets))
    al = np.linspace(0, 1, 101)
    t1, t2 = g.pair_tradeoffs(al)
    np.testing.assert_allclose(exact_tradeoff(p, q, al), t1, atol=1e-12)
    np.testing.assert_allclose(exact_tradeoff(q, p, al), t2, atol=1e-12)
    assert sum(pi for pi, c in zip(p, subsets) if z in c) == pytest.approx(g.success_probability())


def test_gadget_release_laws_by_simulation():
    """Chi-square of subset frequencies against the exact laws P_z and Q on N = 5, m = 2 (10
    subsets), 40k draws each; tests at 1e-4 (false-alarm rate <= 2e-4)."""
    n, m, z = 5, 2, 3
    g = SubsetReleaseGadget(n, m, pure(1.0, neighbors="add-remove"))
    rng = np.random.default_rng(8)
    subsets = list(itertools.combinations(range(n), m))
    a = g.mixing_weight()
    pz = np.array([a * (z in c) / (n - 1) + (1 - a) / len(subsets) for c in subsets])
    for law, rows in (
        (pz, g.release_many(np.full(40_000, z), rng=rng)),
        (np.full(len(subsets), 1 / len(subsets)), g.release_many(None, rng=rng, n=40_000)),
    ):
        assert rows.shape == (40_000, m)
        idx = {c: i for i, c in enumerate(subsets)}
        obs = np.bincount([idx[tuple(r)] for r in rows.tolist()], minlength=len(subsets))
        assert stats.chisquare(obs, law * rows.shape[0]).pvalue > 1e-4
    one = g.release(z, rng=rng)
    assert one.shape == (m,) and len(set(one.tolist())) == m


def test_uniform_subsets_are_uniform_and_distinct():
    """Floyd sampling: rows sorted, distinct, in range; subset frequencies uniform (chi-square at 1e-4)."""
    rng = np.random.default_rng(1)
    rows = uniform_subsets(6, 3, 30_000, rng=rng)
    assert np.all(np.diff(rows, axis=1) > 0) and rows.min() >= 0 and rows.max() < 6
    subsets = {c: i for i, c in enumerate(itertools.combinations(range(6), 3))}
    obs = np.bincount([subsets[tuple(r)] for r in rows.tolist()], minlength=len(subsets))
    assert stats.chisquare(obs).pvalue > 1e-4
    assert uniform_subsets(5, 0, 3, rng=rng).shape == (3, 0)
    assert np.array_equal(uniform_subsets(4, 4, 2, rng=rng), np.tile(np.arange(4), (2, 1)))


def test_gadget_bad_input():
    f = pure(1.0, neighbors="add-remove")
    with pytest.raises(DomainError, match="m = 5, N = 5"):
        SubsetReleaseGadget(5, 5, f)
    with pytest.raises(DomainError, match="not a trade-off value"):
        SubsetReleaseGadget(10, 2, lambda a: 1.0)  # f(kappa) > 1 - kappa
    with pytest.raises(DomainError, match="not symmetric"):
        # a convex trade-off curve that is not symmetric: f(f(0.1)) = f(0.8) = 0.133 > 0.1
        SubsetReleaseGadget(10, 1, lambda a: 1 - 2 * a if a <= 0.25 else (2 / 3) * (1 - a))
    with pytest.raises(DomainError, match="callable"):
        SubsetReleaseGadget(10, 2, 0.5)
    g = SubsetReleaseGadget(10, 2, f)
    with pytest.raises(DomainError, match=r"\[0, 10\)"):
        g.release_many(np.array([10]), rng=np.random.default_rng(0))


# ---------------------------------------------------------------- noisy counts: exact value
def brute_force_success(prior, eps, m):
    """Obviously-correct reference for tiny N: enumerate every sign vector (the posterior depends on
    the release only through 1{Y_w >= 1}) and every tie-breaking order (all N! permutations, each
    equally likely), and list the top m by (posterior score, tie order)."""
    p = np.asarray(prior, dtype=float)
    n = p.size
    q = 1 / (1 + math.exp(-eps))  # P(Y >= 1 | count 1) = P(G >= 0)
    r = 1 / (1 + math.exp(eps))  # P(Y >= 1 | count 0) = P(G >= 1)
    perms = list(itertools.permutations(range(n)))
    total = 0.0
    for z in range(n):
        for signs in itertools.product((0, 1), repeat=n):
            pr = np.prod(
                [
                    (q if signs[w] else 1 - q) if w == z else (r if signs[w] else 1 - r)
                    for w in range(n)
                ]
            )
            score = [round(math.log(p[w]) + (eps if signs[w] else -eps), 12) for w in range(n)]
            hits = 0
            for perm in perms:
                order = sorted(range(n), key=lambda w: (-score[w], perm[w]))
                hits += z in order[:m]
            total += p[z] * pr * hits / len(perms)
    return total


@pytest.mark.parametrize(
    "prior,m",
    [
        ([0.2] * 5, 1),
        ([0.2] * 5, 2),
        ([0.4, 0.2, 0.2, 0.1, 0.1], 2),
        ([0.5, 0.3, 0.1, 0.1], 1),
        (list(zipf_prior(5, exponent=1.0)), 3),
        ([0.25] * 4, 3),
    ],
)
@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_top_m_success_exact_matches_brute_force(prior, m, eps):
    assert top_m_success_exact(prior, epsilon=eps, m=m) == pytest.approx(
        brute_force_success(prior, eps, m), abs=1e-12
    )


def test_sign_scores_are_the_exact_posterior_order():
    """The Bayes list ranks by pi(w) e^{+-eps}: check against the posterior computed directly from the
    geometric pmf, P(z = w | Y) proportional to pi(w) prod_u g(Y_u - 1{u = w})."""
    rng = np.random.default_rng(4)
    prior = zipf_prior(30, exponent=1.2)
    eps = 0.7
    g = TwoSidedGeometric(eps)
    rel = NoisyHistogramRelease(30, eps)
    for y in rel.release(rng.choice(30, size=20, p=prior), rng=rng):
        lp = np.log(prior) + np.array([g.logpmf(y - (np.arange(30) == w)).sum() for w in range(30)])
        post = np.exp(lp - special.logsumexp(lp))
        signs = y >= 1
        score = prior * np.exp(np.where(signs, eps, -eps))
        np.testing.assert_allclose(post, score / score.sum(), rtol=1e-9)


# ---------------------------------------------------------------- noisy counts: simulation
def test_full_simulation_matches_exact_zipf():
    """20k trials of the full pipeline (every noisy count drawn), Zipf prior on 50 candidates;
    binomial test at 1e-4 (false-alarm rate 1e-4)."""
    prior = zipf_prior(50, exponent=1.1)
    hits = simulate_top_m_success(
        prior, epsilon=1.0, m=4, n_trials=20_000, rng=np.random.default_rng(6), batch=3000
    )
    assert hits.shape == (20_000,)
    assert (
        stats.binomtest(
            int(hits.sum()), hits.size, top_m_success_exact(prior, epsilon=1.0, m=4)
        ).pvalue
        > 1e-4
    )


@pytest.mark.parametrize("n", [8, 100, 512])
def test_sufficient_statistic_sampler_matches_exact_and_full_simulation(n):
    """The O(1) uniform-prior sampler against the exact value (binomial test, 200k trials) and against
    the full simulation (two-proportion z test, 10k full trials); each at 1e-4 (false-alarm rate
    <= 6e-4 over the three sizes, times two)."""
    exact = top_m_success_exact(np.full(n, 1 / n), epsilon=1.0, m=4)
    fast = simulate_top_m_success_uniform(
        n, epsilon=1.0, m=4, n_trials=200_000, rng=np.random.default_rng(n)
    )
    assert stats.binomtest(int(fast.sum()), fast.size, exact).pvalue > 1e-4
    full = simulate_top_m_success(
        np.full(n, 1 / n), epsilon=1.0, m=4, n_trials=10_000, rng=np.random.default_rng(n + 1)
    )
    p1, p2 = fast.mean(), full.mean()
    pool = (fast.sum() + full.sum()) / (fast.size + full.size)
    z = (p1 - p2) / math.sqrt(pool * (1 - pool) * (1 / fast.size + 1 / full.size))
    assert 2 * stats.norm.sf(abs(z)) > 1e-4


def test_lists_and_hits_agree():
    """bayes_top_m_hits is 'secret in bayes_top_m(...)' under the same random tie-breaking."""
    prior = np.full(40, 1 / 40)  # all ties: the tie-breaking matters everywhere
    rel = NoisyHistogramRelease(40, 1.0)
    z = np.random.default_rng(0).integers(0, 40, size=500)
    y = rel.release(z, rng=np.random.default_rng(1))
    lists = bayes_top_m(y, prior, epsilon=1.0, m=4, rng=np.random.default_rng(2))
    hits = bayes_top_m_hits(y, z, prior, epsilon=1.0, m=4, rng=np.random.default_rng(2))
    assert lists.shape == (500, 4)
    assert all(len(set(row)) == 4 for row in lists.tolist())
    np.testing.assert_array_equal(hits, (lists == z[:, None]).any(axis=1))
    # signed candidates are listed before unsigned ones
    signed = y >= 1
    for row, s in zip(lists, signed):
        flags = s[row]
        assert list(flags) == sorted(flags, reverse=True)


def test_top_m_list_never_beats_the_frontier():
    """Theorem 5.1(i) on the release itself: exact success <= 1 - f_eps(kappa) across priors."""
    rng = np.random.default_rng(9)
    for _ in range(25):
        n = int(rng.integers(5, 200))
        prior = rng.dirichlet(np.full(n, float(rng.choice([0.2, 1.0, 5.0]))))
        prior = np.maximum(prior, 1e-12)
        prior /= prior.sum()
        eps = float(rng.uniform(0.1, 3))
        m = int(rng.integers(1, min(n, 8)))
        assert (
            top_m_success_exact(prior, epsilon=eps, m=m)
            <= extraction_bound_pure(top_m_mass(prior, m=m), epsilon=eps) + 1e-12
        )


def test_release_is_one_hot_plus_noise_and_eps_dp():
    rel = NoisyHistogramRelease(6, 2.0)
    y = rel.release(np.array([2, -1]), rng=np.random.default_rng(0))
    assert y.shape == (2, 6) and y.dtype == np.int64
    g = rel.noise
    ys = np.arange(-50, 51)
    assert np.max(np.abs(g.logpmf(ys - 1) - g.logpmf(ys))) == pytest.approx(
        2.0
    )  # add/remove: one count moves
    q, r = rel.sign_probabilities()
    assert q == pytest.approx(1 / (1 + math.exp(-2))) and r == pytest.approx(1 / (1 + math.exp(2)))
    with pytest.raises(DomainError, match="secrets"):
        rel.release(np.array([6]), rng=np.random.default_rng(0))


# ---------------------------------------------------------------- the paper's numbers ([MX] §8.1)
def test_paper_canary_numbers():
    """[MX] §8.1: a Zipf canary at H_inf = 2.5 bits with kappa = 0.355 (envelope 0.707, bound 0.76)
    is extracted about 41% of the time; a 10-bit uniform canary about 1%."""
    n = 600
    a = optimize.brentq(
        lambda s: min_entropy_bits(zipf_prior(n, exponent=s)) - 2.5, 0.1, 5, xtol=1e-14
    )
    prior = zipf_prior(n, exponent=a)
    assert min_entropy_bits(prior) == pytest.approx(2.5, abs=1e-10)
    kappa = top_m_mass(prior, m=4)
    assert round(kappa, 3) == 0.355
    assert round(4 * 2**-2.5, 3) == 0.707
    assert round(extraction_bound_pure(kappa, epsilon=1.0), 2) == 0.76
    assert round(top_m_success_exact(prior, epsilon=1.0, m=4), 2) == 0.41
    assert round(top_m_success_exact(np.full(1024, 2.0**-10), epsilon=1.0, m=4), 2) == 0.01


def test_uniform_list_adversary_sits_on_the_frontier():
    """For N >> m the list's success is e^eps kappa (1 - (1 - r)^N) up to exponentially small terms."""
    for n in (64, 256, 4096):
        exact = top_m_success_exact(np.full(n, 1 / n), epsilon=1.0, m=4)
        assert exact == pytest.approx(extraction_bound_pure(4 / n, epsilon=1.0), rel=1e-5)
        assert exact <= extraction_bound_pure(4 / n, epsilon=1.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: top_m_success_exact([0.5, 0.5], epsilon=1.0, m=2),
        lambda: top_m_success_exact([0.5, 0.6], epsilon=1.0, m=1),
        lambda: top_m_success_exact([0.5, 0.5, 0.0], epsilon=1.0, m=1),
        lambda: top_m_success_exact([0.5, 0.5], epsilon=0.0, m=1),
        lambda: simulate_top_m_success_uniform(
            10, epsilon=-1.0, m=1, n_trials=5, rng=np.random.default_rng(0)
        ),
        lambda: zipf_prior(1, exponent=1.0),
    ],
)
def test_noisy_counts_bad_input(call):
    with pytest.raises(DomainError):
        call()
