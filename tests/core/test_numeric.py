"""memclaim.numeric: the one home of logsumexp, log1mexp and Clopper-Pearson, and the shared
statistics that used to be written twice (issue 13 item 4) now agreeing across layers."""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from memclaim.audits import metrics as M
from memclaim.claims import conformal as C
from memclaim.claims.intervals import clopper_pearson, clopper_pearson_arrays
from memclaim.claims.scores import exact_level
from memclaim.errors import DomainError
from memclaim.numeric import clopper_pearson_bounds, log1mexp, logsumexp
from memclaim.privacy.extraction import clopper_pearson_lower


def test_logsumexp_exact_sum_and_edges():
    mpmath.mp.dps = 50
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.normal(-40, 15, size=int(rng.integers(1, 300)))
        ref = float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(v))) for v in x)))
        assert logsumexp(x) == pytest.approx(ref, rel=0, abs=4e-15 * max(1.0, abs(ref)))
        assert logsumexp(x) >= x.max()
    assert logsumexp([]) == -math.inf and logsumexp([-math.inf, -math.inf]) == -math.inf
    assert logsumexp([0.0, -math.inf]) == 0.0
    assert logsumexp(np.array([[0.0], [0.0]])) == math.log(2.0)


def test_log1mexp_both_branches_scalar_and_array():
    mpmath.mp.dps = 50
    for a in (-1e-300, -1e-10, -0.5, -math.log(2.0), -0.7, -5.0, -745.0):
        ref = float(mpmath.log(-mpmath.expm1(mpmath.mpf(a))))
        assert log1mexp(a) == pytest.approx(ref, rel=1e-15)
        assert isinstance(log1mexp(a), float)
    arr = np.array([-1e-10, -0.5, -5.0, 0.0, -math.inf])
    out = log1mexp(arr)
    assert out.shape == (5,) and out[3] == -math.inf and out[4] == 0.0
    assert out[0] == pytest.approx(math.log(1e-10), rel=1e-9)
    assert log1mexp(0.0) == -math.inf


def test_clopper_pearson_one_home():
    for k, n in [(0, 5), (5, 5), (3, 10), (17, 48), (1, 400)]:
        lo, hi = clopper_pearson_bounds(k, n, confidence=0.9)
        assert (float(lo), float(hi)) == pytest.approx(
            proportion_confint(k, n, alpha=0.1, method="beta"), abs=1e-10
        )
        # every former copy is this one
        assert M.clopper_pearson(k, n, confidence=0.9) == (float(lo), float(hi))
        iv = clopper_pearson(k, n, confidence=0.9)
        assert (iv.lower, iv.upper) == (float(lo), float(hi))
        one = clopper_pearson_lower(k, n, confidence=0.95)
        assert one == float(clopper_pearson_bounds(k, n, confidence=0.95, side="lower")[0])
        assert one == pytest.approx(
            float(clopper_pearson_bounds(k, n, confidence=0.9)[0]), abs=1e-12
        )
    lo, hi = clopper_pearson_arrays([0, 2], [0, 4])
    assert lo[0] == 0.0 and hi[0] == 1.0 and 0 < lo[1] < 0.5 < hi[1] < 1
    with pytest.raises(DomainError, match="side"):
        clopper_pearson_bounds(1, 2, side="upper")


def test_one_level_parser_for_claims_and_audits():
    """audits/metrics refused "0.1%" while claims/scores accepted it; now both are one parser."""
    assert M.exact_level is exact_level
    assert M.exact_level("fpr", "0.1%") == Fraction(1, 1000) == exact_level("alpha", 0.001)
    assert M.conformal_rank("0.1%", 5000) == 5 == C.rank_k(alpha="0.1%", n_controls=5000)
    with pytest.raises(DomainError, match="fpr"):
        M.conformal_rank(1.5, 10)


def test_one_conformal_rank_and_minimum():
    for a in (0.05, 0.01, 0.3, 0.07, "1/7", Fraction(1, 20)):
        for n in (1, 5, 18, 19, 99, 1000):
            assert M.conformal_rank(a, n) == C.rank_k(alpha=a, n_controls=n)
        assert M.min_nonmembers(a) == C.controls_needed_for_level(alpha=a)
    assert M.conformal_rank(0.05, 0) == 0
