"""LiRA (memclaim.audits.lira): the logit statistic, hand-computed Gaussian fits and scores,
the global-variance fallback, refusals, and online LiRA beating the loss attack at a certified
low FPR by a paired test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from memclaim.audits import attacks as A
from memclaim.audits import lira as L
from memclaim.audits.metrics import compare_tprs, roc_auc
from memclaim.errors import DomainError, InputError


def test_statistic_hand_values():
    lp = [np.log([0.5]), np.log([0.8, 0.2])]
    seq = L.lira_statistic(lp, kind="sequence")
    # logit(0.5) = 0; geometric mean of 0.8 and 0.2 is 0.4 -> logit = log(0.4/0.6)
    np.testing.assert_allclose(seq, [0.0, math.log(0.4 / 0.6)], atol=1e-15)
    tok = L.lira_statistic(lp, kind="token")
    # mean(logit 0.8, logit 0.2) = mean(log 4, -log 4) = 0
    np.testing.assert_allclose(tok, [0.0, 0.0], atol=1e-12)


def test_statistic_is_accurate_near_one_and_clipped_at_the_ends():
    # p = 1 - 1e-12: logit = log((1 - 1e-12) / 1e-12) ~ 27.631; computed from log p, not from p
    lp = math.log1p(-1e-12)
    assert L.lira_statistic([np.array([lp])])[0] == pytest.approx(
        math.log((1 - 1e-12) / 1e-12), rel=1e-9
    )
    ends = L.lira_statistic([np.array([0.0]), np.array([-np.inf]), np.array([-1.0, -np.inf])])
    np.testing.assert_array_equal(ends, [L.LOGIT_CLIP, -L.LOGIT_CLIP, -L.LOGIT_CLIP])
    with pytest.raises(DomainError, match="statistic"):
        L.lira_statistic([np.array([-1.0])], kind="median")
    with pytest.raises(InputError, match="no scored tokens"):
        L.lira_statistic([np.array([])])


def test_sequence_statistic_is_monotone_in_loss():
    rng = np.random.default_rng(0)
    lp = [np.log(rng.uniform(0.01, 1, int(rng.integers(1, 20)))) for _ in range(200)]
    loss = A.loss_scores(lp)
    stat = L.lira_statistic(lp)
    order = np.argsort(loss)
    assert np.all(np.diff(stat[order]) >= 0)


def test_online_hand_example_per_example_variance():
    target = np.array([1.0])
    shadow = np.array([[2.0], [4.0], [0.0], [0.0], [3.0]])
    inm = np.array([[True], [True], [False], [False], [False]])
    r = L.lira_online(target, shadow, inm, variance="per_example", min_per_example=2)
    # IN: mean 3, sd sqrt(2); OUT: mean 1, sd sqrt(3).
    assert r.mu_in[0] == 3.0 and r.sd_in[0] == pytest.approx(math.sqrt(2))
    assert r.mu_out[0] == 1.0 and r.sd_out[0] == pytest.approx(math.sqrt(3))
    # log N(1; 3, 2) - log N(1; 1, 3) = -1/2 log(4 pi) - 1 + 1/2 log(6 pi) = 1/2 log 1.5 - 1
    assert r.scores[0] == pytest.approx(0.5 * math.log(1.5) - 1.0)
    assert r.variance == "per_example" and not r.used_global_in[0]


def test_offline_hand_example():
    r = L.lira_offline(
        np.array([4.0]),
        np.array([[0.0], [0.0], [3.0], [9.0]]),
        np.array([[False], [False], [False], [True]]),
        variance="per_example",
        min_per_example=2,
    )
    # OUT: mean 1, sd sqrt(3); the IN shadow is ignored. z = (4 - 1) / sqrt 3 = sqrt 3
    assert r.scores[0] == pytest.approx(math.sqrt(3))
    assert math.isnan(r.mu_in[0])


def test_global_variance_is_pooled_within_examples():
    # example 0: IN {2, 4} (dev^2 2), OUT {0, 2} (dev^2 2); example 1: IN {0, 1, 2} (dev^2 2), OUT {5}
    shadow = np.array([[2.0, 0.0], [4.0, 1.0], [0.0, 2.0], [2.0, 5.0]])
    inm = np.array([[True, True], [True, True], [False, True], [False, False]])
    r = L.lira_online(np.array([3.0, 1.0]), shadow, inm)  # auto -> global (few shadows)
    assert r.variance == "global"
    assert r.global_sd_in == pytest.approx(math.sqrt(4.0 / 3.0))  # (2 + 2) / (1 + 2)
    assert r.global_sd_out == pytest.approx(math.sqrt(2.0 / 1.0))  # example 1 has 1 OUT: 0 dof
    np.testing.assert_allclose(r.sd_in, math.sqrt(4 / 3))
    expected = stats.norm.logpdf([3.0, 1.0], [3.0, 1.0], math.sqrt(4 / 3)) - stats.norm.logpdf(
        [3.0, 1.0], [1.0, 5.0], math.sqrt(2.0)
    )
    np.testing.assert_allclose(r.scores, expected)


def test_per_example_falls_back_to_global_for_thin_or_flat_examples():
    shadow = np.array([[2.0, 7.0], [4.0, 7.0], [0.0, 1.0], [2.0, 3.0]])
    inm = np.array([[True, True], [True, True], [False, False], [False, False]])
    r = L.lira_online(np.array([3.0, 7.0]), shadow, inm, variance="per_example")
    # example 1's IN scores are identical (sd 0): it uses the pooled IN sd sqrt(2 / 2) = 1
    assert r.used_global_in.tolist() == [False, True]
    assert r.sd_in[1] == pytest.approx(1.0)


def test_refusals():
    shadow = np.array([[1.0, 2.0], [1.5, 2.5]])
    with pytest.raises(InputError, match="no IN shadow"):
        L.lira_online(np.array([1.0, 2.0]), shadow, np.array([[False, True], [False, False]]))
    with pytest.raises(InputError, match="no OUT shadow"):
        L.lira_offline(np.array([1.0, 2.0]), shadow, np.array([[True, True], [True, False]]))
    with pytest.raises(DomainError, match="pooled"):
        L.lira_online(
            np.array([1.0, 2.0]), np.ones((4, 2)), np.array([[1, 1], [1, 1], [0, 0], [0, 0]], bool)
        )
    with pytest.raises(InputError, match="shape"):
        L.lira_online(np.array([1.0]), shadow, np.ones((2, 2), bool))
    with pytest.raises(InputError, match="non-finite"):
        L.lira_online(np.array([np.inf, 1.0]), shadow, np.array([[1, 0], [0, 1]], bool))
    with pytest.raises(DomainError, match="variance"):
        L.lira_online(
            np.array([1.0, 1.0]), shadow, np.array([[1, 0], [0, 1]], bool), variance="pooled"
        )


def _difficulty_world(rng, n, members: bool, n_shadows=8, tokens=16):
    """Texts of widely varying difficulty (sd 2 in logit units) and a modest membership effect
    (+1): the raw loss is dominated by difficulty; per-example calibration removes it."""
    d = rng.normal(0.0, 2.0, size=n)
    u = d[:, None] + (1.0 if members else 0.0) + rng.normal(0.0, 1.0, size=(n, tokens))  # [n, T]
    lps = list(-np.logaddexp(0.0, -u))
    inm = np.argsort(rng.random((n_shadows, n)), axis=0) < n_shadows // 2  # [S, n]
    shadow = d[None, :] + 1.0 * inm + rng.normal(0.0, 1 / math.sqrt(tokens), (n_shadows, n))
    return A.ScoredTexts.build(
        lps,
        shadow_stats=shadow,
        shadow_in=inm,
        shadow_statistic="token",
        procedure="difficulty-world",
    )


def test_online_lira_beats_loss_at_certified_low_fpr_by_paired_test():
    """On members of varied difficulty with a handful of shadows (8), online LiRA's TPR at a
    certified FPR of 2.5% (399 non-members, K = 10) is at least the loss attack's: the paired
    bootstrap (one-sided, which carries threshold noise) and the exact McNemar test (conditional
    on the thresholds) both reject "LiRA <= loss" at level 0.01."""
    rng = np.random.default_rng(42)
    mem, non = _difficulty_world(rng, 100, True), _difficulty_world(rng, 399, False)
    lira = A.evaluate_attack("lira-online", mem, non, fpr=0.025)
    loss = A.evaluate_attack("loss", mem, non, fpr=0.025)
    assert lira.tpr.k == 10 and lira.tpr.certified_fpr == pytest.approx(0.025)
    c = compare_tprs(
        lira.member_scores,
        lira.nonmember_scores,
        loss.member_scores,
        loss.nonmember_scores,
        fpr=0.025,
        alternative="greater",
        n_bootstrap=2000,
        seed=0,
    )
    assert c.tpr_a.tpr >= c.tpr_b.tpr
    assert c.bootstrap_p < 0.01 and c.p_value < 0.01
    assert lira.auc.auc > loss.auc.auc


def test_lira_at_chance_when_the_target_never_saw_the_members():
    """A target model whose statistics do not depend on membership (the gated-release
    situation of [MX] §8.2, here stochastic): LiRA's AUC interval includes 0.5."""
    rng = np.random.default_rng(3)
    mem, non = _difficulty_world(rng, 80, False), _difficulty_world(rng, 80, False)
    for name in ("lira-online", "lira-offline"):
        r = A.evaluate_attack(name, mem, non).auc
        assert r.low <= 0.5 <= r.high, (name, r)


def test_lira_exactly_half_on_a_gated_release():
    """[MX] §8.2: on the gated release, reference scoring and LiRA "read exactly 0.500": members
    and non-members with identical statistics and identical shadow fits get identical scores."""
    stat = np.full(48, 0.3)
    shadow = np.tile(np.array([[0.1], [0.5], [0.2], [0.6]]), (1, 48))
    inm = np.tile(np.array([[True], [True], [False], [False]]), (1, 48))
    s = L.lira_online(stat, shadow, inm).scores
    r = roc_auc(s[:24], s[24:])
    assert r.auc == 0.5 and not r.excludes_chance


def test_auto_variance_uses_per_example_fits_with_many_shadows():
    rng = np.random.default_rng(5)
    n, S = 6, 64
    inm = np.argsort(rng.random((S, n)), axis=0) < S // 2
    shadow = rng.normal(0, 1, (S, n)) + inm * rng.uniform(0.5, 2.0, n)  # per-example spreads differ
    r = L.lira_online(rng.normal(0, 1, n), shadow, inm)
    assert r.variance == "per_example" and not r.used_global_in.any()
    r16 = L.lira_online(rng.normal(0, 1, n), shadow[:16], inm[:16])
    assert r16.variance == "global"
