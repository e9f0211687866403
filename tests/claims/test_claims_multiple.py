"""Multiple testing ([EM] C.5): Bonferroni capacity, BH against a reference, FDR/FWER by simulation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.claims.multiple import (
    benjamini_hochberg,
    bonferroni_capacity,
    controls_needed,
    fdr_claims,
    fwer_claims,
    has_atoms,
)
from memclaim.errors import DomainError, InputError


def test_bonferroni_numbers_em_c5():
    assert bonferroni_capacity(n_controls=5000, delta=0.05) == 250  # 0.05 x 5001
    assert bonferroni_capacity(n_controls=5000, delta=0.001) == 5
    assert controls_needed(n_candidates=5000, delta=0.001) == 4_999_999  # "about five million"
    assert controls_needed(n_candidates=250, delta=0.05) == 4999
    assert (
        bonferroni_capacity(n_controls=controls_needed(n_candidates=250, delta=0.05), delta=0.05)
        >= 250
    )
    with pytest.raises(DomainError):
        bonferroni_capacity(n_controls=100, delta=1.2)
    with pytest.raises(InputError):
        controls_needed(n_candidates=0, delta=0.05)


def _bh_reference(nums, denominator, delta):
    """BH in exact rational arithmetic: p = num / denominator, r = max{r : p_(r) <= r delta / J}."""
    d = Fraction(delta)
    p = [Fraction(n, denominator) for n in nums]
    j = len(p)
    ps = sorted(p)
    r = max([i + 1 for i in range(j) if ps[i] <= (i + 1) * d / j], default=0)
    return np.array([r > 0 and x <= ps[r - 1] for x in p], dtype=bool)


@st.composite
def bh_cases(draw):
    """Conformal-grid p-values num / (N + 1) with N + 1 = 1000 J (ties; the BH line i delta / J
    falls on the grid) such that BH rejects: r0 >= 1 values at or below the line at rank r0,
    either each exactly on its own line, or each on or just under it, or all between the lines
    at ranks r0 - 1 and r0 (the ranks below r0 are then above their lines: only the step-up
    rejects them); the rest above every line (so that r0 decides: exactly on the line in the
    first layout) or anywhere. p_(r0) <= r0 delta / J, hence at least r0 rejections."""
    delta = draw(st.sampled_from(["0.01", "0.05", "0.2"]))
    j = draw(st.integers(1, 60))
    grid = 1000 * j
    step = int(Fraction(delta) * 1000)  # the BH line at rank i is i * step grid units
    r0 = draw(st.integers(1, j))
    layout = draw(st.sampled_from(["on the lines", "clustered", "under the lines"]))
    if layout == "on the lines":
        low = [i * step for i in range(1, r0 + 1)]
    elif layout == "clustered":
        low = [draw(st.integers((r0 - 1) * step + 1, r0 * step)) for _ in range(r0)]
    else:
        low = [draw(st.integers(max(1, i * step - 2), i * step)) for i in range(1, r0 + 1)]
    if draw(st.sampled_from(["above every line", "anywhere"])) == "above every line":
        rest = draw(st.lists(st.integers(j * step + 1, grid), min_size=j - r0, max_size=j - r0))
    else:
        rest = draw(
            st.lists(
                st.one_of(st.integers(1, (j + 1) * step), st.integers(1, grid)),
                min_size=j - r0,
                max_size=j - r0,
            )
        )
    nums = draw(st.permutations(low + rest))
    return nums, grid, delta


@settings(max_examples=50)
@given(bh_cases())
def test_bh_matches_reference(case):
    """Exact (false-alarm rate 0): the library's BH equals the rational-arithmetic reference on
    conformal-grid p-values with ties, values exactly on the BH line and step-up rejections;
    every example rejects (bh_cases guarantees it)."""
    nums, grid, delta = case
    ref = _bh_reference(nums, grid, delta)
    assert ref.any()
    np.testing.assert_array_equal(benjamini_hochberg(np.array(nums) / grid, delta=delta), ref)


def test_fwer_feasibility_and_rule():
    rng = np.random.default_rng(0)
    ctrl = -rng.exponential(10, 999)
    cand = np.concatenate([[0.0, -0.001], -rng.exponential(10, 8)])
    r = fwer_claims(
        cand, ctrl, delta=0.05
    )  # J = 10, capacity 50, K_J = floor(0.05 * 1000 / 10) = 5
    assert r.feasible and r.per_candidate_k == 5 and r.capacity == 50
    np.testing.assert_array_equal(r.claimed, cand > np.sort(ctrl)[::-1][4])
    r2 = fwer_claims(-rng.exponential(10, 60), ctrl, delta=0.05)  # J = 60 > 50
    assert not r2.feasible and r2.n_claimed == 0 and "1199" in r2.statement


def test_fdr_uses_randomized_pvalues_only_with_atoms():
    rng = np.random.default_rng(1)
    ctrl = -rng.exponential(10, 300)
    cand = -rng.exponential(3, 50)
    r = fdr_claims(cand, ctrl, delta=0.1)
    assert not r.randomized and r.seed is None and "no tied scores" in r.reason
    ctrl2 = np.where(rng.random(300) < 0.7, -np.inf, ctrl)
    cand2 = np.where(rng.random(50) < 0.3, -np.inf, cand)
    assert has_atoms(cand2, ctrl2)
    r2 = fdr_claims(cand2, ctrl2, delta=0.1, seed=42)
    assert (
        r2.randomized and r2.seed == 42 and "Eq. 18" in r2.reason and "default_rng(42)" in r2.reason
    )
    r3 = fdr_claims(cand2, ctrl2, delta=0.1, seed=42)
    np.testing.assert_array_equal(r2.claimed, r3.claimed)


@pytest.mark.parametrize("which,seed", [("continuous", 3), ("atoms", 4)])
def test_fdr_under_the_global_null(which, seed):
    """Under the complete null (every candidate a fresh non-member), FDR = P[at least one claim].
    Bates et al. (2021): BH on conformal p-values (randomized ties with atoms) keeps it <= delta.
    1000 repetitions of J = 10 candidates, N = 200 controls, delta = 0.1; we reject if the count
    of repetitions with a claim exceeds the 1 - 1e-4 quantile of Binomial(1000, 0.1).
    False alarm <= 1e-4 per case."""
    rng = np.random.default_rng(seed)
    reps, j, n, delta = 1000, 10, 200, 0.1

    def draw(shape):
        x = -rng.exponential(5.0, shape)
        if which == "atoms":
            x = np.where(rng.random(shape) < 0.5, -np.inf, np.round(x))
        return x

    any_claim = 0
    for r in range(reps):
        res = fdr_claims(draw(j), draw(n), delta=delta, seed=r)
        any_claim += res.n_claimed > 0
    assert any_claim <= stats.binom.ppf(1 - 1e-4, reps, delta)


def test_fwer_under_the_global_null():
    """Bonferroni: P[at least one false claim among J = 10 null candidates] <= delta = 0.1.
    3000 repetitions, N = 499 controls; one-sided binomial check at false alarm 1e-4."""
    rng = np.random.default_rng(7)
    reps = 3000
    hits = 0
    for _ in range(reps):
        res = fwer_claims(-rng.exponential(1.0, 10), -rng.exponential(1.0, 499), delta=0.1)
        hits += res.n_claimed > 0
    assert hits <= stats.binom.ppf(1 - 1e-4, reps, 0.1)
