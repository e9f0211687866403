"""Counterfactual memorization (memclaim.audits.counterfactual): hand-computed estimates, the
functional each design estimates, bounded scores, the cap comparison and its refusals, the
paper's DP-SGD calibration numbers, and the standard error's coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from memclaim.audits import counterfactual as C
from memclaim.errors import DomainError, InputError, ProcedureMismatchError


def test_hand_example_single_target():
    h = [0.9, 0.8, 0.2, 0.1]
    est = C.counterfactual_memorization(h, [True, True, False, False], score="tf-prob")
    assert est.functional == "COND" and est.design == "random_halves" and est.score == "tf-prob"
    assert est.mem[0] == pytest.approx(0.7)
    # s_in^2 = s_out^2 = 0.005; se = sqrt(0.005/2 + 0.005/2)
    assert est.se[0] == pytest.approx(math.sqrt(0.005))
    assert est.mean_mem == pytest.approx(0.7) and math.isnan(est.mean_se)
    z = stats.norm.ppf(0.975)
    assert (est.low, est.high) == pytest.approx(
        (0.7 - z * math.sqrt(0.005), 0.7 + z * math.sqrt(0.005))
    )


def test_design_names_the_functional():
    h, m = [0.5, 0.6, 0.4, 0.3], [1, 1, 0, 0]
    assert C.counterfactual_memorization(h, m, design="random_halves").functional == "COND"
    assert C.counterfactual_memorization(h, m, design="leave_one_out").functional == "LOO"
    assert C.counterfactual_memorization(h, m, design="replace_one").functional == "RO"
    with pytest.raises(DomainError, match="COND"):
        C.counterfactual_memorization(h, m, design="halves")


def test_many_targets_and_across_target_se():
    h = np.array([[0.9, 0.5], [0.7, 0.5], [0.1, 0.5], [0.3, 0.5]])  # [models, targets]
    m = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], bool)
    est = C.counterfactual_memorization(h, m)
    np.testing.assert_allclose(est.mem, [0.6, 0.0])
    assert est.mean_mem == pytest.approx(0.3)
    assert est.mean_se == pytest.approx(np.std([0.6, 0.0], ddof=1) / math.sqrt(2))
    assert est.mean_se_within == pytest.approx(math.sqrt(float((est.se**2).sum())) / 2)
    assert est.to_dict()["functional"] == "COND"


def test_bounded_scores_and_refusals():
    with pytest.raises(DomainError, match=r"\[0, 1\]"):
        C.counterfactual_memorization([0.5, 1.5, 0.2, 0.1], [1, 1, 0, 0])
    with pytest.raises(DomainError, match="truncated_logloss"):
        C.counterfactual_memorization([3.0, 2.0, 5.0, 4.0], [1, 1, 0, 0])
    with pytest.raises(InputError, match="at least two of each"):
        C.counterfactual_memorization([0.5, 0.6, 0.2, 0.1], [1, 0, 0, 0])
    with pytest.raises(InputError, match="shape"):
        C.counterfactual_memorization([0.5, 0.6, 0.2], [1, 0, 0, 0])


def test_score_helpers():
    lp = [np.log([0.5, 0.5]), np.array([-3.0, -4.0, -5.0]), np.array([-0.0])]
    np.testing.assert_allclose(C.teacher_forcing_probability(lp), [0.25, math.exp(-12), 1.0])
    # truncated at M = 10, divided by M: NLL 2 ln 2 -> 0.1386; 12 -> 1.0; 0 -> 0
    np.testing.assert_allclose(
        C.truncated_logloss(lp, level=10.0), [2 * math.log(2) / 10, 1.0, 0.0]
    )
    np.testing.assert_allclose(
        C.truncated_logloss(lp, level=2.0, reduce="mean"), [math.log(2) / 2, 1.0, 0.0]
    )
    with pytest.raises(DomainError):
        C.truncated_logloss(lp, level=0)


def _estimate(mem_values, functional="RO"):
    mem = np.asarray(mem_values, float)
    design = {v: k for k, v in C.DESIGNS.items()}[functional]
    T = mem.size
    return C.CounterfactualEstimate(
        functional=functional,
        design=design,
        score="tf-prob",
        mem=mem,
        se=np.full(T, 0.01),
        n_in=np.full(T, 8),
        n_out=np.full(T, 8),
        mean_mem=float(mem.mean()),
        mean_se=float(mem.std(ddof=1) / math.sqrt(T)),
        mean_se_within=0.01 / math.sqrt(T),
        confidence=0.95,
        low=math.nan,
        high=math.nan,
    )


def test_paper_dp_sgd_calibration_cell():
    """[MX] §8.2: at eps = 0.05, k = 1 the bound 0.0250 (= tanh(0.025)) "sits about eight
    standard errors above the measured -0.0058 +- 0.0030" (32 canaries, SE across canaries).
    The estimate comes from the library's counterfactual_memorization on scores built so that the
    32 per-canary gaps have mean -0.0058 and across-canary SE 0.0030 (replace-one design, 2 models
    with each canary IN and 2 without)."""
    z = np.random.default_rng(0).normal(size=32)
    z = (z - z.mean()) / z.std(ddof=1)
    gaps = -0.0058 + 0.0030 * math.sqrt(32) * z
    base = np.linspace(0.3, 0.6, 32)
    h = np.stack(
        [base + gaps + 0.01, base + gaps - 0.01, base + 0.02, base - 0.02]
    )  # [models, canaries]
    member = np.array([[True] * 32, [True] * 32, [False] * 32, [False] * 32])
    est = C.counterfactual_memorization(h, member, design="replace_one")
    assert est.functional == "RO"
    np.testing.assert_allclose(est.mem, gaps, atol=1e-12)
    assert est.mean_mem == pytest.approx(-0.0058) and est.mean_se == pytest.approx(0.0030)
    cap = math.tanh(0.05 / 2)
    assert cap == pytest.approx(0.0250, abs=5e-5)
    cmp = C.compare_to_cap(est, cap=cap, cap_functional="RO", cap_relation="replace-one")
    assert cmp.within and cmp.informative
    assert cmp.cap_in_se == pytest.approx(8.33, abs=0.01)  # "about eight standard errors"
    assert cmp.violation_p > 0.5
    # the usual privacy range is vacuous: tanh(1/2) = 0.46 at eps = 1 is far above, but a cap of 1
    # (eps = infinity) constrains nothing
    vac = C.compare_to_cap(est, cap=1.0, cap_functional="RO", cap_relation="replace-one")
    assert not vac.informative and "not informative" in vac.note


def test_cap_violation_is_flagged():
    est = _estimate(np.full(16, 0.3) + np.linspace(-0.01, 0.01, 16))
    cmp = C.compare_to_cap(est, cap=0.1, cap_functional="RO", cap_relation="replace-one")
    assert not cmp.within and cmp.violation_p < 1e-6 and cmp.targets_over_cap == 16


def test_mismatched_functionals_are_refused_not_silently_compared():
    cond = _estimate([0.01, 0.02, 0.0, 0.01], functional="COND")
    with pytest.raises(ProcedureMismatchError, match="COND"):
        C.compare_to_cap(cond, cap=0.05, cap_functional="RO", cap_relation="replace-one")
    ok = C.compare_to_cap(
        cond,
        cap=0.05,
        cap_functional="RO",
        cap_relation="replace-one",
        conversion_slack=0.004,
        conversion_note="[MX] Prop. A.2: 4np with np = 0.001",
    )
    assert ok.effective_cap == pytest.approx(0.054) and ok.conversion_slack == pytest.approx(0.004)
    loo = _estimate([0.01, 0.02], functional="LOO")
    with pytest.raises(ProcedureMismatchError, match="replace-one f-DP guarantee does not cap"):
        C.compare_to_cap(loo, cap=0.05, cap_functional="LOO", cap_relation="replace-one")
    assert C.compare_to_cap(loo, cap=0.05, cap_functional="LOO", cap_relation="add/remove").within
    ro = _estimate([0.01, 0.02], functional="RO")
    with pytest.raises(ProcedureMismatchError, match="f\\^\\(2\\)"):
        C.compare_to_cap(ro, cap=0.05, cap_functional="RO", cap_relation="add/remove")
    assert C.compare_to_cap(
        ro, cap=0.09, cap_functional="RO", cap_relation="add/remove", via_group_privacy=True
    ).within
    with pytest.raises(DomainError, match="COND has no direct"):
        C.compare_to_cap(cond, cap=0.05, cap_functional="COND", cap_relation="replace-one")
    with pytest.raises(DomainError):
        C.compare_to_cap(ro, cap=0.05, cap_functional="RO", cap_relation="swap")


def test_se_coverage_by_simulation():
    """The Welch standard error: with 16 models per side and Bernoulli-ish scores, the normal
    95% interval mem +- 1.96 se should cover the true gap in about 95% of repetitions (Welch
    with 16 + 16 is slightly liberal, ~94%). Over 400 repetitions we require at most
    binom.ppf(0.999, 400, 0.07) misses: false-alarm rate < 0.1% if the true miss rate <= 7%."""
    rng = np.random.default_rng(1)
    true = 0.25 - 0.1
    miss = 0
    for _ in range(400):
        h = np.concatenate([rng.beta(2.5, 7.5, 16), rng.beta(1, 9, 16)])  # means 0.25 and 0.1
        m = np.r_[np.ones(16, bool), np.zeros(16, bool)]
        est = C.counterfactual_memorization(h, m)
        miss += not (est.low <= true <= est.high)
    assert miss <= stats.binom.ppf(0.999, 400, 0.07)
