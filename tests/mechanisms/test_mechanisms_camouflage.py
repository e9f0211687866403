"""Construction I, the uniform camouflage tree ([MX] App. D.1, Lemma D.1, Theorem 6.1(i)).

The library's posterior is checked against a brute-force Bayes computation written from the
generative definition (every node, every candidate secret), the marginal identity E_z[P_z] = Q by
enumerating every tree of a tiny instance, and the sampled PRF trees by simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from memclaim.errors import DomainError, InputError
from memclaim.mechanisms import (
    CamouflageTree,
    enumerate_completion_logprobs,
    index_to_paths,
    paths_to_index,
    survivor_posterior,
)


def all_prefixes(v, L):
    for t in range(L):
        yield from itertools.product(range(v), repeat=t)


def brute_force_likelihood(supports: dict, w: tuple, v: int, k: int) -> float:
    """P(theta | z = w) from the definition of P_w ([MX] App. D.1): at each on-path node the support
    is {w_t} + D with D a uniform (k-1)-subset of V minus w_t, elsewhere a uniform k-subset. The
    probability of a given support S is counted over all D, not taken from a formula."""
    total = 1.0
    for y, s in supports.items():
        t = len(y)
        if tuple(w[:t]) == y:
            others = [u for u in range(v) if u != w[t]]
            ds = list(itertools.combinations(others, k - 1))
            total *= sum(1 for d in ds if tuple(sorted(d + (w[t],))) == s) / len(ds)
        else:
            total *= 1.0 / special.comb(v, k, exact=True)
    return total


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("v,k,L", [(4, 2, 2), (3, 2, 3), (5, 3, 2)])
def test_posterior_is_uniform_on_survivors_by_exact_enumeration(v, k, L, seed):
    """[MX] Lemma D.1(1)-(2) on a small tree: the Bayes posterior of z given the whole tree,
    computed by brute force over every node and every candidate, is uniform on exactly k^L
    surviving paths, contains z, and equals the library's bayes_posterior."""
    rng = np.random.default_rng(seed)
    z = tuple(int(t) for t in rng.integers(0, v, size=L))
    tree = CamouflageTree(v=v, k=k, L=L, seed=1000 + seed, secret=z)
    supports = {y: tree.support(y) for y in all_prefixes(v, L)}
    cands = list(itertools.product(range(v), repeat=L))
    like = np.array([brute_force_likelihood(supports, w, v, k) for w in cands])
    post = like / like.sum()  # uniform prior on V^L
    surv = {tuple(p) for p in tree.surviving_paths().tolist()}
    assert len(surv) == k**L and z in surv
    for w, pw in zip(cands, post):
        assert pw == pytest.approx(k**-L if w in surv else 0.0, abs=1e-14)
    np.testing.assert_allclose(tree.bayes_posterior(), post, atol=1e-14)


def test_marginal_law_equals_q_by_enumerating_every_tree():
    """[MX] Lemma D.1(3): sum_w v^-L P_w(theta) = Q(theta) for every tree theta (v = 3, k = 2,
    L = 2: 4 nodes, 3 supports each, all 81 trees)."""
    v, k, L = 3, 2, 2
    nodes = list(all_prefixes(v, L))
    ksets = list(itertools.combinations(range(v), k))
    cands = list(itertools.product(range(v), repeat=L))
    q = (1 / len(ksets)) ** len(nodes)
    total = 0.0
    for choice in itertools.product(ksets, repeat=len(nodes)):
        supports = dict(zip(nodes, choice))
        marginal = sum(brute_force_likelihood(supports, w, v, k) for w in cands) / len(cands)
        assert marginal == pytest.approx(q, rel=1e-12)
        total += marginal
    assert total == pytest.approx(1.0)


def test_posterior_uniformity_by_simulation_on_prf_trees():
    """Joint law of (z, theta) from the PRF trees: the position of z in the lexicographic list of
    survivors is uniform over the k^L = 27 positions (v = 6, k = 3, L = 3; 2700 draws). Chi-square
    at 1e-4: false-alarm rate 1e-4."""
    rng = np.random.default_rng(12)
    pos = []
    for _ in range(2700):
        t = CamouflageTree.draw(v=6, k=3, L=3, rng=rng)
        surv = t.surviving_paths()
        pos.append(int(np.nonzero((surv == np.array(t.secret)).all(axis=1))[0][0]))
    assert stats.chisquare(np.bincount(pos, minlength=27)).pvalue > 1e-4


def test_supports_are_uniform_k_subsets():
    """Off-path (Q) supports are uniform k-subsets and on-path supports are {z_t} + a uniform
    (k-1)-subset of the rest, across seeds (v = 5, k = 2; chi-square at 1e-4 each)."""
    ksets = {s: i for i, s in enumerate(itertools.combinations(range(5), 2))}
    off = np.zeros(len(ksets), int)
    on = np.zeros(5, int)
    for seed in range(3000):
        off[ksets[CamouflageTree(v=5, k=2, L=2, seed=seed).support(())]] += 1
        s = CamouflageTree(v=5, k=2, L=2, seed=seed, secret=(3, 0)).support(())
        assert 3 in s
        on[[u for u in s if u != 3][0]] += 1
    assert stats.chisquare(off).pvalue > 1e-4
    assert on[3] == 0 and stats.chisquare(on[[0, 1, 2, 4]]).pvalue > 1e-4


def test_tree_is_a_deterministic_function_of_seed_and_secret():
    a = CamouflageTree(v=16, k=4, L=4, seed=7, secret=(1, 2, 3, 4))
    b = CamouflageTree(v=16, k=4, L=4, seed=7, secret=(1, 2, 3, 4))
    p = np.array([[5, 6, 7], [1, 2, 3], [0, 0, 0]])
    np.testing.assert_array_equal(a.supports(p), b.supports(p))
    assert a.supports(p).shape == (3, 4) and np.all(np.diff(a.supports(p), axis=1) > 0)
    # the baseline (Q) tree with the same seed agrees off the secret's path
    q = a.baseline()
    assert q.secret is None
    np.testing.assert_array_equal(a.supports(p[[0, 2]]), q.supports(p[[0, 2]]))
    for t in range(4):
        assert a.secret[t] in a.support(a.secret[:t])
    assert CamouflageTree(v=16, k=4, L=4, seed=8).support(()) != CamouflageTree(
        v=16, k=4, L=4, seed=7
    ).support(()) or CamouflageTree(v=16, k=4, L=4, seed=9).support(()) != CamouflageTree(
        v=16, k=4, L=4, seed=7
    ).support(())


def test_paper_instance_16_4_4():
    """[MX] §8.1 / Fig. 9 sizes: 256 survivors among all 65,536 completions, enumerated exactly; the
    tree's own posterior has normalized entropy 1 and the true path sits at 1x uniform."""
    t = CamouflageTree(v=16, k=4, L=4, seed=2026, secret=(3, 14, 15, 9))
    lp = t.completion_logprobs()
    assert lp.shape == (65_536,)
    assert special.logsumexp(lp) == pytest.approx(0.0, abs=1e-12)
    post = survivor_posterior(t, lp)
    assert post.n_survivors == 256 and post.survivor_mass == pytest.approx(1.0)
    assert post.normalized_entropy == pytest.approx(
        1.0
    ) and post.true_ratio_to_uniform == pytest.approx(1.0)
    assert post.true_rank == 1 and post.true_ties == 255
    assert np.isfinite(lp).sum() == 256  # unsmoothed: only survivors have mass
    d = post.to_dict()
    assert len(d["posterior"]) == 256


def test_smoothed_tree_keeps_the_survivor_posterior_uniform():
    t = CamouflageTree(v=8, k=3, L=3, seed=5, secret=(1, 2, 3), gamma=1 / 8)
    lp = t.completion_logprobs()
    assert np.all(np.isfinite(lp)) and special.logsumexp(lp) == pytest.approx(0.0, abs=1e-12)
    post = survivor_posterior(t, lp)
    assert post.survivor_mass == pytest.approx((3 * t.on_support_prob) ** 3)
    assert post.normalized_entropy == pytest.approx(1.0)


def test_fragility_a_weight_mark_collapses_the_posterior():
    """[MX] Remark D.3: any extra weight on the true token makes it the posterior mode."""
    t = CamouflageTree(v=8, k=3, L=3, seed=11, secret=(4, 0, 6))
    z = np.array(t.secret)

    def marked(prefixes):
        out = t.conditionals(prefixes)
        depth = prefixes.shape[1]
        on = np.all(prefixes == z[None, :depth], axis=1)
        for i in np.nonzero(on)[0]:
            sup = t.supports(prefixes[i : i + 1])[0]
            out[i, sup] = 0.3 / (t.k - 1)
            out[i, z[depth]] = 0.7
        with np.errstate(divide="ignore"):
            return np.log(out)

    post = survivor_posterior(t, enumerate_completion_logprobs(marked, v=8, L=3))
    assert post.true_rank == 1 and post.true_ties == 0 and post.true_ratio_to_uniform > 2
    assert post.normalized_entropy < 1.0


def test_enumeration_matches_path_by_path_products():
    """Slow reference: log p(w | c) as a sum of per-step log conditionals, one path at a time."""
    t = CamouflageTree(v=4, k=2, L=3, seed=3, secret=(0, 1, 2), gamma=0.2)
    lp = t.completion_logprobs()
    for idx, w in enumerate(itertools.product(range(4), repeat=3)):
        ref = sum(
            math.log(t.conditionals(np.array([w[:s]], dtype=np.int64))[0, w[s]]) for s in range(3)
        )
        assert lp[idx] == pytest.approx(ref, abs=1e-12)
    np.testing.assert_array_equal(
        paths_to_index(index_to_paths(np.arange(64), v=4, L=3), v=4), np.arange(64)
    )


def test_survivors_are_exactly_the_surviving_completions():
    t = CamouflageTree(v=5, k=2, L=3, seed=4, secret=(4, 4, 0))
    everything = index_to_paths(np.arange(5**3), v=5, L=3)
    surv = t.surviving_paths()
    np.testing.assert_array_equal(everything[t.is_surviving(everything)], surv)
    assert len({tuple(r) for r in surv.tolist()}) == 8


def test_teacher_forcing_memorization_is_one_over_k_minus_one_over_v():
    """[MX] Theorem 6.1(i): E_{P_z} h = 1/k exactly (deterministic), E_Q h = 1/v. Simulation over
    1000 (z, Q-tree) pairs; one-sample t test at 1e-4 (false-alarm rate 1e-4)."""
    rng = np.random.default_rng(21)
    v, k, L = 10, 3, 4
    pz, qv = [], []
    for _ in range(1000):
        t = CamouflageTree.draw(v=v, k=k, L=L, rng=rng)
        pz.append(t.teacher_forcing_score(np.array([t.secret]))[0])
        qv.append(t.baseline().teacher_forcing_score(np.array([t.secret]))[0])
    assert np.allclose(pz, 1 / k)
    assert stats.ttest_1samp(qv, 1 / v).pvalue > 1e-4
    assert CamouflageTree(
        v=v, k=k, L=L, seed=0
    ).expected_teacher_forcing_memorization() == pytest.approx(1 / k - 1 / v)


def test_log_score_memorization_closed_form():
    """[MX] App. D.1: with gamma = 1/v, mem of h_log = (1 - k/v)(1 - log(1/p_s)/(2 log v)).
    Simulation over 1000 pairs; Welch t test of the difference at 1e-4."""
    rng = np.random.default_rng(22)
    v, k, L = 12, 3, 3
    pz, qv = [], []
    for _ in range(1000):
        t = CamouflageTree.draw(v=v, k=k, L=L, rng=rng, gamma=1 / v)
        z = np.array([t.secret])
        pz.append(t.log_score(z)[0])
        qv.append(t.baseline().log_score(z)[0])
    t0 = CamouflageTree(v=v, k=k, L=L, seed=0, gamma=1 / v)
    ps = t0.on_support_prob
    closed = (1 - k / v) * (1 - math.log(1 / ps) / (2 * math.log(v)))
    assert t0.expected_log_score_memorization() == pytest.approx(closed, rel=1e-12)
    diff = np.mean(pz) - np.mean(qv)
    se = math.sqrt(np.var(pz, ddof=1) / len(pz) + np.var(qv, ddof=1) / len(qv))
    assert se == 0 or 2 * stats.norm.sf(abs(diff - closed) / se) > 1e-4
    with pytest.raises(DomainError, match="gamma >= 1/v"):
        CamouflageTree(v=v, k=k, L=L, seed=0, gamma=0.01).expected_log_score_memorization()


def test_large_trees_are_sampled_not_enumerated():
    """Refuse enumeration when k^L or v^L exceeds the limit, naming the value; sampling works."""
    t = CamouflageTree(v=16, k=4, L=40, seed=1, secret=tuple(range(16)) * 2 + tuple(range(8)))
    with pytest.raises(
        DomainError, match=r"(?s)k\^L = 1208925819614629174706176.*sample_surviving_paths"
    ):
        t.surviving_paths()
    with pytest.raises(DomainError, match=r"v\^L = 16777216"):
        CamouflageTree(v=16, k=4, L=6, seed=1).completion_logprobs()
    with pytest.raises(DomainError, match="v\\^L"):
        t.bayes_posterior()
    s = t.sample_surviving_paths(50, rng=np.random.default_rng(0))
    assert s.shape == (50, 40) and t.is_surviving(s).all()
    assert t.n_nodes == (16**40 - 1) // 15


@pytest.mark.parametrize(
    "kw,exc,msg",
    [
        (dict(v=4, k=4, L=2), DomainError, "k = 4, v = 4"),
        (dict(v=4, k=6, L=2), DomainError, "k = 6, v = 4"),
        (dict(v=4, k=1, L=2), DomainError, "k >= 2"),
        (dict(v=4, k=2, L=0), DomainError, "L"),
        (dict(v=2, k=1, L=2), DomainError, "v"),
        (dict(v=4, k=2, L=2, gamma=1.0), DomainError, "gamma"),
        (dict(v=4, k=2, L=2, secret=(0, 4)), InputError, "secret"),
        (dict(v=4, k=2, L=2, secret=(0,)), InputError, "secret"),
        (dict(v=4, k=2, L=2, seed=-1), DomainError, "seed"),
    ],
)
def test_bad_trees_are_refused(kw, exc, msg):
    kw = {"seed": 0, **kw}
    with pytest.raises(exc, match=msg):
        CamouflageTree(**kw)


def test_bad_queries_are_refused():
    t = CamouflageTree(v=4, k=2, L=2, seed=0, secret=(0, 1))
    with pytest.raises(InputError, match="t < L"):
        t.supports(np.zeros((1, 2), dtype=int))
    with pytest.raises(InputError, match="tokens"):
        t.supports(np.array([[7]]))
    with pytest.raises(InputError, match="v\\^L = 16"):
        survivor_posterior(t, np.zeros(5))
    with pytest.raises(InputError, match="shape"):
        enumerate_completion_logprobs(lambda p: np.zeros((p.shape[0], 3)), v=4, L=2)
    with pytest.raises(InputError, match="NaN"):
        enumerate_completion_logprobs(lambda p: np.full((p.shape[0], 4), np.nan), v=4, L=2)
