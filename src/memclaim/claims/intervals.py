"""Intervals for rates and for the population FPR ([EM] App. C.4, D.1).

- :func:`clopper_pearson`: exact binomial interval on one rate (Fig. 3 bars, the member curve of
  Fig. 4(a)); vectorized with ``scipy.stats.beta`` (cross-checked against statsmodels' 'beta').
- :func:`wilson`: Wilson score interval (statsmodels).
- :func:`newcombe_independent`: Newcombe's hybrid-score interval for p1 - p2 from independent
  samples (Newcombe 1998b, method 10), via statsmodels ``confint_proportions_2indep(method=
  'newcomb')`` ([EM] D.1, Fig. 11(b), Fig. 20(b)).
- :func:`newcombe_paired`: Newcombe's interval for a difference of paired proportions
  (Newcombe 1998a, method 10) ([EM] D.1, D.4, Fig. 15(b)). Hand-written: neither scipy nor
  statsmodels implements the paired Newcombe interval (statsmodels only has the independent one).
- :func:`beta_fpr_law`: the Beta(K, N-K+1) law of the population FPR alpha* ([EM] Prop. 2,
  Lemma 3, Cor. C.4.3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import DomainError
from ..jsonutil import ResultMixin
from ..numeric import clopper_pearson_bounds
from ..validate import in_open_unit, integer


@dataclass(frozen=True)
class Interval(ResultMixin):
    """A two-sided interval at ``confidence``: ``lower <= estimate <= upper`` (pointwise)."""

    estimate: float
    lower: float
    upper: float
    confidence: float
    method: str

    def shifted(self, by: float, *, method_suffix: str = "") -> Interval:
        """The same interval translated by a constant ([EM] D.1: CP shifted by alpha_N)."""
        return Interval(
            self.estimate + by,
            self.lower + by,
            self.upper + by,
            self.confidence,
            self.method + method_suffix,
        )


def _check_counts(k, n, what="count"):
    k = integer(what, k, minimum=0)
    n = integer("n", n, minimum=0)
    if k > n:
        raise DomainError(f"{what} {k} exceeds the sample size {n}")
    return k, n


def clopper_pearson_arrays(
    k: int | np.ndarray, n: int | np.ndarray, *, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized Clopper-Pearson bounds for integer arrays ``k`` out of ``n`` (n may be 0:
    the interval is then [0, 1]); :func:`memclaim.numeric.clopper_pearson_bounds`.

    >>> lo, hi = clopper_pearson_arrays(np.array([0, 5]), np.array([0, 10]))
    >>> lo.tolist()[0], hi.tolist()[0], round(float(lo[1]), 4), round(float(hi[1]), 4)
    (0.0, 1.0, 0.1871, 0.8129)
    """
    return clopper_pearson_bounds(k, n, confidence=confidence)


def clopper_pearson(k: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Exact (Clopper-Pearson) interval for a binomial rate k/n ([EM] D.1).

    >>> iv = clopper_pearson(5, 10)
    >>> iv.estimate, round(iv.lower, 4), round(iv.upper, 4), iv.method
    (0.5, 0.1871, 0.8129, 'clopper-pearson')
    """
    k, n = _check_counts(k, n)
    confidence = in_open_unit("confidence", confidence)
    if n == 0:
        raise DomainError(
            "a rate needs at least one trial, got n = 0", hint="pass a non-empty sample"
        )
    lo, hi = clopper_pearson_arrays(k, n, confidence=confidence)
    return Interval(k / n, float(lo), float(hi), confidence, "clopper-pearson")


def wilson(k: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Wilson (1927) score interval for a binomial rate k/n, via statsmodels.

    >>> iv = wilson(5, 10)
    >>> round(iv.lower, 4), round(iv.upper, 4)
    (0.2366, 0.7634)
    """
    from statsmodels.stats.proportion import proportion_confint

    k, n = _check_counts(k, n)
    confidence = in_open_unit("confidence", confidence)
    if n == 0:
        raise DomainError(
            "a rate needs at least one trial, got n = 0", hint="pass a non-empty sample"
        )
    lo, hi = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
    return Interval(k / n, float(lo), float(hi), confidence, "wilson")


def newcombe_independent(
    k1: int, n1: int, k2: int, n2: int, *, confidence: float = 0.95
) -> Interval:
    """Interval for k1/n1 - k2/n2 from independent samples: Newcombe (1998b) method 10
    (Wilson score interval for each rate, combined), via statsmodels.

    >>> iv = newcombe_independent(8, 10, 2, 10)
    >>> round(iv.estimate, 4), iv.lower > 0
    (0.6, True)
    """
    from statsmodels.stats.proportion import confint_proportions_2indep

    k1, n1 = _check_counts(k1, n1, "k1")
    k2, n2 = _check_counts(k2, n2, "k2")
    confidence = in_open_unit("confidence", confidence)
    if n1 == 0 or n2 == 0:
        raise DomainError(f"both samples must be non-empty, got n1 = {n1}, n2 = {n2}")
    lo, hi = confint_proportions_2indep(
        k1, n1, k2, n2, method="newcomb", compare="diff", alpha=1 - confidence
    )
    return Interval(
        k1 / n1 - k2 / n2,
        float(max(-1.0, lo)),
        float(min(1.0, hi)),
        confidence,
        "newcombe-independent (1998b method 10, statsmodels)",
    )


def _wilson_bounds(k: int, n: int, z: float) -> tuple[float, float]:
    # Wilson (1927) score interval, closed form; used inside the paired interval below.
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_paired(a: int, b: int, c: int, d: int, *, confidence: float = 0.95) -> Interval:
    """Interval for p1 - p2 = (b - c)/n from a paired 2x2 table (Newcombe 1998a, method 10).

    a: both claimed, b: claimed only under the first, c: only under the second, d: neither.
    Wilson intervals (l1, u1), (l2, u2) for p1 = (a+b)/n and p2 = (a+c)/n are combined with the
    correlation phi between the two indicators, where phi's numerator ad - bc is shrunk by n/2
    towards 0 when positive (Newcombe's continuity correction) and phi = 0 when a margin is empty:

        lower = D - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2)
        upper = D + sqrt((p2-l2)^2 - 2 phi (p2-l2)(u1-p1) + (u1-p1)^2)

    Hand-written: no scipy/statsmodels routine implements the paired Newcombe interval.
    Reproduces Newcombe's worked example (a, b, c, d) = (20, 12, 2, 16): 0.2000 [0.0562, 0.3292].

    >>> from memclaim.claims.intervals import newcombe_paired
    >>> iv = newcombe_paired(20, 12, 2, 16)  # Newcombe's worked example
    >>> round(iv.estimate, 4), round(iv.lower, 4), round(iv.upper, 4)
    (0.2, 0.0562, 0.3292)
    """
    a = integer("a", a, minimum=0)
    b = integer("b", b, minimum=0)
    c = integer("c", c, minimum=0)
    d = integer("d", d, minimum=0)
    confidence = in_open_unit("confidence", confidence)
    n = a + b + c + d
    if n == 0:
        raise DomainError(
            "the paired table is empty (a + b + c + d = 0)", hint="pass at least one pair"
        )
    z = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson_bounds(a + b, n, z)
    l2, u2 = _wilson_bounds(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        phi = 0.0
    else:
        num: float = a * d - b * c
        if num > n / 2:
            num = num - n / 2
        elif num >= 0:
            num = 0.0
        phi = num / math.sqrt(margins)
    diff = p1 - p2
    lower = diff - math.sqrt(
        max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    )
    upper = diff + math.sqrt(
        max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    )
    return Interval(
        diff,
        max(-1.0, lower),
        min(1.0, upper),
        confidence,
        "newcombe-paired (1998a method 10, hand-written)",
    )


# ------------------------------------------------------------------ the law of alpha*
@dataclass(frozen=True)
class BetaLaw(ResultMixin):
    """alpha* ~ Beta(K, N-K+1) ([EM] Prop. 2; Lemma 3 below alpha-dagger).

    Not a confidence interval: fixed by (K, N) before any control is drawn ([EM] C.1). It
    describes where the population FPR of the realized threshold falls across control draws.
    """

    k: int
    n: int
    a: int  # Beta shape parameters
    b: int
    mean: float  # = alpha_N  ([EM] Eq. 16)
    central: Interval  # central interval at `confidence`; endpoints v_{(1-c)/2}, v_{(1+c)/2}
    prob_exceeds_alpha_n: float  # P(alpha* > alpha_N)   ([EM] Eq. 24 at v = alpha_N)
    conditional_bounds: (
        dict  # {"0.9": v_0.9, "0.95": v_0.95}: alpha* <= v for that share of draws ([EM] Eq. 25)
    )
    holds_below: float  # the law is exact for values below this (alpha-dagger; 1.0 when continuous)
    holds_below_is_estimate: bool


def beta_fpr_law(
    *,
    k: int,
    n: int,
    confidence: float = 0.95,
    conditional_levels: Sequence[float] = (0.9, 0.95),
    holds_below: float = 1.0,
    holds_below_is_estimate: bool = False,
) -> BetaLaw:
    """The Beta(K, N-K+1) law of alpha* ([EM] C.4.1 Eq. 23; C.4.3 Eqs. 24-25).

    >>> from memclaim.claims.intervals import beta_fpr_law
    >>> b = beta_fpr_law(k=1, n=999)
    >>> round(b.mean, 6)  # K/(N+1)
    0.001
    """
    n = integer("N", n, minimum=1)
    k = integer("K", k, minimum=1, maximum=n)
    confidence = in_open_unit("confidence", confidence)
    law = stats.beta(k, n - k + 1)  # [EM] Prop. 2: alpha* ~ Beta(K, N-K+1)
    alpha_n = k / (n + 1)
    lo, hi = (float(x) for x in law.ppf([(1 - confidence) / 2, (1 + confidence) / 2]))
    bounds = {}
    for lvl in conditional_levels:
        lvl = in_open_unit("conditional level", lvl)
        bounds[f"{lvl:g}"] = float(law.ppf(lvl))  # [EM] Eq. 25: v_{1-delta}
    return BetaLaw(
        k,
        n,
        k,
        n - k + 1,
        alpha_n,
        Interval(alpha_n, lo, hi, confidence, "beta-law (fixed by K, N; not a CI)"),
        float(law.sf(alpha_n)),
        bounds,
        float(holds_below),
        bool(holds_below_is_estimate),
    )
