"""Membership-inference metrics with honest uncertainty ([MX] §8.2, App. F; [EM] §3, Eq. 5-6).

Every function takes member scores and non-member scores oriented "higher = more likely a
member" (the orientation of :mod:`memclaim.audits.attacks`). Scores are float64; ``+-inf`` are
ordinary (extreme) values, NaN is refused.

- :func:`roc_auc`: the ROC AUC  A = P(X > Y) + 1/2 P(X = Y)  (X a member score, Y a non-member
  score; exact ties count one half), with a DeLong confidence interval, and the leak signal
  2A - 1 of [MX] Fig. 12 with its interval.
- :func:`compare_aucs`: DeLong's paired test of two attacks' AUCs on the same texts.
- :func:`tpr_at_fpr`: TPR at a *certified* FPR: the threshold is the K-th largest non-member
  score with K = floor(alpha (N + 1)) and a member is flagged iff its score is strictly greater
  ([EM] Eq. 5-6), so a fresh exchangeable non-member is flagged with probability at most
  alpha_N = K / (N + 1) <= alpha. Clopper-Pearson interval on the TPR. K = 0 is refused.
- :func:`compare_tprs`: two attacks' TPRs at the same certified FPR on the same members: the
  exact McNemar test (via ``scipy.stats.binomtest``), conditional on the thresholds, and a
  paired bootstrap that also carries the thresholds' sampling noise.

Why DeLong is written here rather than imported: scikit-learn is not a dependency and its
``roc_auc_score`` has no interval; scipy has no DeLong; statsmodels'
``rank_compare_2indep`` computes the same placement variance (Brunner-Munzel) but exposes
neither the per-sample placements that the paired comparison of two AUCs needs nor a handling
of the degenerate zero-variance case. The fast O((m + n) log(m + n)) algorithm via midranks is
Sun & Xu (2014), "Fast implementation of DeLong's algorithm", IEEE SPL 21(11); the tests check
it against the O(m n) definition and against statsmodels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
from scipy import stats

from ..claims.conformal import controls_needed_for_level, rank_k
from ..claims.scores import exact_level  # noqa: F401  (re-exported: the one level parser)
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..numeric import clopper_pearson_bounds
from ..validate import in_open_unit

__all__ = [
    "AUCResult",
    "AUCComparison",
    "TPRResult",
    "TPRComparison",
    "as_score_array",
    "exact_level",
    "conformal_rank",
    "min_nonmembers",
    "certified_threshold",
    "roc_auc",
    "roc_auc_slow",
    "delong_placements",
    "compare_aucs",
    "tpr_at_fpr",
    "compare_tprs",
    "clopper_pearson",
]


# ------------------------------------------------------------------------------- input checks
def as_score_array(
    name: str, values: Sequence[float] | np.ndarray, *, minimum: int = 2
) -> np.ndarray:
    """A 1-D float64 copy of ``values``; NaN refused; at least ``minimum`` entries.

    >>> as_score_array("member_scores", [1, -np.inf]).tolist()
    [1.0, -inf]
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a sequence of numbers, got {values!r:.200}") from None
    if arr.ndim != 1:
        raise InputError(
            f"{name} must be one-dimensional, got shape {arr.shape}", hint="pass one score per text"
        )
    if arr.size < minimum:
        raise InputError(
            f"{name} has {arr.size} score(s); at least {minimum} are needed",
            hint=f"score at least {minimum} {name.split('_')[0]} texts",
        )
    bad = np.flatnonzero(np.isnan(arr))
    if bad.size:
        raise InputError(
            f"{name} contains NaN at index {int(bad[0])} (of {bad.size} NaN values)",
            hint="a NaN score means the attack was undefined for that text; fix the input "
            "(e.g. an empty text) instead of passing NaN",
        )
    return arr.copy()


def _confidence(confidence) -> float:
    return in_open_unit("confidence", confidence)


def clopper_pearson(k: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson 1934) two-sided interval for k successes out of n
    (:func:`memclaim.numeric.clopper_pearson_bounds`; cross-checked against statsmodels 'beta'
    in tests). n = 0 gives [0, 1].

    >>> lo, hi = clopper_pearson(0, 10)
    >>> lo, round(hi, 4)
    (0.0, 0.3085)
    """
    lo, hi = clopper_pearson_bounds(int(k), int(n), confidence=confidence)
    return float(lo), float(hi)


# ------------------------------------------------------------------------------------- AUC
@dataclass(frozen=True)
class AUCResult(ResultMixin):
    """ROC AUC with its interval and the leak signal 2 AUC - 1 ([MX] Fig. 12 caption).

    ``interval_method`` is ``"delong"`` (Wald interval with DeLong's variance, clipped to
    [0, 1]) or ``"hoeffding"`` when DeLong's variance estimate is exactly zero (complete
    separation, or all scores tied): a zero-width interval would claim certainty the sample
    cannot give, so the distribution-free Hoeffding bound for a two-sample U-statistic,
    A +- sqrt(log(2/a) / (2 min(m, n))) (Hoeffding 1963, §5), is reported instead.
    """

    auc: float
    low: float
    high: float
    se: float
    confidence: float
    interval_method: str
    n_members: int
    n_nonmembers: int
    leak_signal: float
    leak_low: float
    leak_high: float

    @property
    def excludes_chance(self) -> bool:
        return self.low > 0.5 or self.high < 0.5


def delong_placements(
    members: np.ndarray, nonmembers: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """(AUC, V10, V01) by midranks (Sun & Xu 2014, Alg. 1), O((m + n) log(m + n)).

    V10[i] = (1/n) sum_j psi(X_i, Y_j) is member i's placement among non-members and
    V01[j] = (1/m) sum_i psi(X_i, Y_j) non-member j's, with psi(x, y) = 1 if x > y,
    1/2 if x == y, 0 otherwise (DeLong et al. 1988, Biometrics 44, Eq. 1-3). The AUC is the
    mean of either. Ties (including equal infinities) get midranks, so they count one half.

    >>> auc, v10, v01 = delong_placements(np.array([3.0, 2.0, 0.5]), np.array([1.0, 0.5, -1.0]))
    >>> round(auc, 4), v10.tolist(), v01.round(4).tolist()  # 0.5 ties 0.5: one half
    (0.8333, [1.0, 1.0, 0.5], [0.6667, 0.8333, 1.0])
    """
    m, n = members.size, nonmembers.size
    both = np.concatenate([members, nonmembers])
    r_all = stats.rankdata(both, method="average")  # midranks over the pooled sample
    r_x = stats.rankdata(members, method="average")  # midranks within members
    r_y = stats.rankdata(nonmembers, method="average")  # midranks within non-members
    # Number of non-members below member i (ties one half) = pooled rank - within rank.
    v10 = (r_all[:m] - r_x) / n
    # Number of members above non-member j (ties one half) = m - (pooled - within).
    v01 = 1.0 - (r_all[m:] - r_y) / m
    auc = float((r_all[:m].sum() - m * (m + 1) / 2.0) / (m * n))
    return auc, v10, v01


def _hoeffding_halfwidth(m: int, n: int, confidence: float) -> float:
    # Two-sample U-statistic with a [0,1] kernel: P(|U - EU| >= t) <= 2 exp(-2 min(m,n) t^2)
    # (Hoeffding 1963, JASA 58, §5: U is an average of min(m,n)-term i.i.d. means).
    return math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * min(m, n)))


def roc_auc(
    member_scores: Sequence[float] | np.ndarray,
    nonmember_scores: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
) -> AUCResult:
    """ROC AUC of member vs non-member scores with a DeLong interval and the leak signal.

    Exact ties count one half. Needs at least two of each (DeLong's variance uses ddof = 1).

    >>> r = roc_auc([3.0, 2.0, 0.5], [1.0, 0.5, -1.0])
    >>> round(r.auc, 6)  # 7 of 9 pairs ordered, plus one tie counted one half: 7.5/9
    0.833333
    """
    x = as_score_array("member_scores", member_scores)
    y = as_score_array("nonmember_scores", nonmember_scores)
    conf = _confidence(confidence)
    m, n = x.size, y.size
    auc, v10, v01 = delong_placements(x, y)
    # DeLong et al. (1988) Eq. 4-5: Var(A) = S10/m + S01/n with S the sample variances (ddof 1).
    var = float(np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n)
    se = math.sqrt(max(var, 0.0))
    if se > 0.0:
        z = float(stats.norm.ppf(0.5 + conf / 2.0))
        lo, hi, method = auc - z * se, auc + z * se, "delong"
    else:
        h = _hoeffding_halfwidth(m, n, conf)
        lo, hi, method = auc - h, auc + h, "hoeffding"
    lo, hi = max(0.0, lo), min(1.0, hi)
    return AUCResult(
        auc=auc,
        low=lo,
        high=hi,
        se=se,
        confidence=conf,
        interval_method=method,
        n_members=m,
        n_nonmembers=n,
        # [MX] Fig. 12 caption: "AUCs as 2 AUC - 1"; 0 = chance, 1 = full detection.
        leak_signal=2.0 * auc - 1.0,
        leak_low=2.0 * lo - 1.0,
        leak_high=2.0 * hi - 1.0,
    )


def roc_auc_slow(
    member_scores: Sequence[float] | np.ndarray, nonmember_scores: Sequence[float] | np.ndarray
) -> float:
    """The O(m n) definition sum_ij psi(X_i, Y_j) / (m n); a reference for tests.

    >>> roc_auc_slow([3.0, 2.0, 0.5], [1.0, 0.5, -1.0]) == roc_auc([3.0, 2.0, 0.5], [1.0, 0.5, -1.0]).auc
    True
    """
    x = as_score_array("member_scores", member_scores, minimum=1)
    y = as_score_array("nonmember_scores", nonmember_scores, minimum=1)
    total = 0.0
    for a in x:
        for b in y:
            total += 1.0 if a > b else (0.5 if a == b else 0.0)
    return total / (x.size * y.size)


@dataclass(frozen=True)
class AUCComparison(ResultMixin):
    """DeLong's paired test of AUC_a - AUC_b on the same members and non-members."""

    auc_a: float
    auc_b: float
    difference: float
    low: float
    high: float
    se: float
    z: float
    p_value: float
    alternative: str
    confidence: float
    interval_method: str


def compare_aucs(
    members_a: Sequence[float] | np.ndarray,
    nonmembers_a: Sequence[float] | np.ndarray,
    members_b: Sequence[float] | np.ndarray,
    nonmembers_b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> AUCComparison:
    """DeLong et al. (1988) §2 test of two correlated AUCs (two attacks, the same texts).

    Entry i of ``members_a`` and ``members_b`` must be the same member text (likewise for
    non-members). ``alternative``: "two-sided", "greater" (AUC_a > AUC_b) or "less".

    >>> c = compare_aucs([3.0, 2.0, 0.5, 1.5], [1.0, 0.5, -1.0, 0.0], [0.2, 2.0, 0.1, 1.0], [1.0, 0.5, -1.0, 0.3])
    >>> c.auc_a, c.auc_b, round(c.se, 4), round(c.p_value, 4)
    (0.90625, 0.59375, 0.1976, 0.1138)
    """
    xa = as_score_array("members_a", members_a)
    ya = as_score_array("nonmembers_a", nonmembers_a)
    xb = as_score_array("members_b", members_b)
    yb = as_score_array("nonmembers_b", nonmembers_b)
    if xa.size != xb.size or ya.size != yb.size:
        raise InputError(
            f"paired comparison needs the same texts under both attacks: members {xa.size} vs "
            f"{xb.size}, non-members {ya.size} vs {yb.size}",
            hint="score the same member and non-member texts with both attacks, in the same order",
        )
    if alternative not in ("two-sided", "greater", "less"):
        raise DomainError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    conf = _confidence(confidence)
    m, n = xa.size, ya.size
    auc_a, v10a, v01a = delong_placements(xa, ya)
    auc_b, v10b, v01b = delong_placements(xb, yb)
    s10 = np.cov(np.vstack([v10a, v10b]), ddof=1)  # [2, 2]
    s01 = np.cov(np.vstack([v01a, v01b]), ddof=1)  # [2, 2]
    cov = s10 / m + s01 / n
    var = float(cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1])
    se = math.sqrt(max(var, 0.0))
    diff = auc_a - auc_b
    zc = float(stats.norm.ppf(0.5 + conf / 2.0))
    if se > 0.0:
        z = diff / se
        p = {
            "two-sided": 2.0 * stats.norm.sf(abs(z)),
            "greater": stats.norm.sf(z),
            "less": stats.norm.cdf(z),
        }[alternative]
        half, method = zc * se, "delong"
    else:
        # DeLong's variance is exactly zero (e.g. both attacks separate perfectly, or one is
        # constant): fall back to Hoeffding's bound for the difference of the two U-statistics,
        # whose kernel psi_a - psi_b lies in [-1, 1]: P(D - ED >= t) <= exp(-k t^2 / 2),
        # k = min(m, n) (Hoeffding 1963, §5). Conservative, never a zero-width claim.
        k = min(m, n)
        z = 0.0
        one = lambda t: min(1.0, math.exp(-k * t * t / 2.0)) if t > 0 else 1.0  # noqa: E731
        p = {"two-sided": min(1.0, 2.0 * one(abs(diff))), "greater": one(diff), "less": one(-diff)}[
            alternative
        ]
        half, method = math.sqrt(2.0 * math.log(2.0 / (1.0 - conf)) / k), "hoeffding"
    return AUCComparison(
        auc_a=auc_a,
        auc_b=auc_b,
        difference=diff,
        low=max(-1.0, diff - half),
        high=min(1.0, diff + half),
        se=se,
        z=float(z),
        p_value=float(p),
        alternative=alternative,
        confidence=conf,
        interval_method=method,
    )


# ------------------------------------------------------------------ TPR at a certified FPR
def conformal_rank(alpha: str | float | Fraction, n_nonmembers: int) -> int:
    """K = floor(alpha (N + 1)) in exact arithmetic ([EM] Eq. 5): :func:`memclaim.claims.conformal.rank_k`
    (N = 0 gives K = 0).

    >>> conformal_rank(0.001, 5000), conformal_rank("0.1%", 5000)
    (5, 5)
    """
    n = int(n_nonmembers)
    if n == 0:
        exact_level("fpr", alpha)
        return 0
    return rank_k(alpha=alpha, n_controls=n, name="fpr")


def min_nonmembers(alpha: str | float | Fraction) -> int:
    """The smallest N with K = floor(alpha (N + 1)) >= 1, i.e. N >= 1/alpha - 1 (exact):
    :func:`memclaim.claims.conformal.controls_needed_for_level`.

    >>> min_nonmembers("1%"), min_nonmembers(0.05)
    (99, 19)
    """
    return controls_needed_for_level(alpha=alpha, name="fpr")


def certified_threshold(
    nonmember_scores: Sequence[float] | np.ndarray, *, fpr: str | float | Fraction
) -> tuple[float, int, Fraction]:
    """(threshold, K, alpha_N): the K-th largest non-member score, K = floor(alpha (N + 1)),
    and the certified FPR alpha_N = K / (N + 1) <= alpha ([EM] Eq. 5-6).

    Refuses (DomainError) when K = 0: no threshold from N non-members certifies alpha.

    >>> certified_threshold([float(i) for i in range(19)], fpr="10%")  # K = floor(0.1 * 20) = 2
    (17.0, 2, Fraction(1, 10))
    """
    y = as_score_array("nonmember_scores", nonmember_scores)
    a = exact_level("fpr", fpr)
    n = y.size
    k = conformal_rank(a, n)
    if k == 0:
        need = min_nonmembers(a)
        raise DomainError(
            f"cannot certify an FPR of {_fmt_frac(a)} with {n} non-members: "
            f"K = floor(alpha (N + 1)) = floor({_fmt_frac(a)} x {n + 1}) = 0",
            hint=f"use at least {need} non-members (N >= 1/alpha - 1 = {_fmt_frac(1 / a - 1)}), "
            f"or ask for an FPR of at least 1/(N + 1) = 1/{n + 1}",
        )
    # [EM] Eq. 6: tau is the K-th largest control score; flag iff score > tau (strict).
    tau = float(np.sort(y)[::-1][k - 1])
    return tau, k, Fraction(k, n + 1)


def _fmt_frac(f: Fraction) -> str:
    if f.denominator == 1:
        return str(f.numerator)
    d = f.numerator / f.denominator
    return f"{d:g}" if Fraction(Decimal(repr(d))) == f else f"{f.numerator}/{f.denominator}"


@dataclass(frozen=True)
class TPRResult(ResultMixin):
    """TPR at a certified FPR ([EM] Eq. 5-6) with a Clopper-Pearson interval.

    ``certified_fpr`` = K / (N + 1) bounds the probability that a fresh non-member exchangeable
    with the N calibration non-members is flagged; ``in_sample_fpr`` is the rate among the
    calibration non-members themselves (at most (K - 1)/N, no guarantee attached).
    """

    fpr_target: float
    certified_fpr: float
    k: int
    n_nonmembers: int
    threshold: float
    tpr: float
    true_positives: int
    n_members: int
    low: float
    high: float
    confidence: float
    in_sample_fpr: float


def tpr_at_fpr(
    member_scores: Sequence[float] | np.ndarray,
    nonmember_scores: Sequence[float] | np.ndarray,
    *,
    fpr: str | float | Fraction = 0.05,
    confidence: float = 0.95,
) -> TPRResult:
    """TPR of "score > tau" on the members, tau from the non-members by the conformal rank rule.

    Refuses (DomainError) when the non-member count cannot certify ``fpr`` and says how many
    are needed. Needs at least two members and two non-members.

    >>> t = tpr_at_fpr([20.0, 18.0, 5.0, 30.0], [float(i) for i in range(19)], fpr="10%")
    >>> t.threshold, t.tpr, t.certified_fpr  # scores strictly above the 2nd largest non-member
    (17.0, 0.75, 0.1)
    """
    x = as_score_array("member_scores", member_scores)
    y = as_score_array("nonmember_scores", nonmember_scores)
    conf = _confidence(confidence)
    tau, k, a_n = certified_threshold(y, fpr=fpr)
    tp = int(np.count_nonzero(x > tau))
    lo, hi = clopper_pearson(tp, x.size, confidence=conf)
    return TPRResult(
        fpr_target=float(exact_level("fpr", fpr)),
        certified_fpr=float(a_n),
        k=k,
        n_nonmembers=y.size,
        threshold=tau,
        tpr=tp / x.size,
        true_positives=tp,
        n_members=x.size,
        low=lo,
        high=hi,
        confidence=conf,
        in_sample_fpr=float(np.count_nonzero(y > tau)) / y.size,
    )


@dataclass(frozen=True)
class TPRComparison(ResultMixin):
    """Paired comparison of TPR_a vs TPR_b at the same certified FPR on the same members.

    Two tests, for two different questions:

    - ``p_value``: exact McNemar test (McNemar 1947, exact binomial form) *conditional on the
      calibration non-members*, i.e. on the two deployed thresholds. ``only_a`` members are
      flagged by a and not b, ``only_b`` the reverse; if at these thresholds the two flag
      members equally often, only_a ~ Binomial(only_a + only_b, 1/2). It does not account for
      the randomness of the thresholds themselves: as a test of the *population* TPRs at level
      alpha it is liberal when N is small (in our simulation with exchangeable attacks, 15%
      rejections at nominal 5% with N = 39, 8% with N = 199).
    - ``bootstrap_p`` and ``[diff_low, diff_high]``: a paired bootstrap over members and
      non-members (thresholds recomputed by the rank rule in every replicate), which carries the
      threshold noise; ``bootstrap_p`` = (1 + #{d* <= 0}) / (B + 1) for "greater" (mirrored for
      "less", doubled minimum for "two-sided"). Approximate (bootstrap of an order statistic),
      conservative in our simulations (2-3% at nominal 5%). Quote this one for a claim about
      the attacks rather than about these thresholds. NaN when ``n_bootstrap`` = 0.
    """

    tpr_a: TPRResult
    tpr_b: TPRResult
    both: int
    only_a: int
    only_b: int
    neither: int
    p_value: float
    alternative: str
    difference: float
    diff_low: float
    diff_high: float
    bootstrap_p: float
    n_bootstrap: int
    paired_nonmembers: bool
    seed: int


def compare_tprs(
    members_a: Sequence[float] | np.ndarray,
    nonmembers_a: Sequence[float] | np.ndarray,
    members_b: Sequence[float] | np.ndarray,
    nonmembers_b: Sequence[float] | np.ndarray,
    *,
    fpr: str | float | Fraction = 0.05,
    alternative: str = "greater",
    confidence: float = 0.95,
    n_bootstrap: int = 2000,
    paired_nonmembers: bool = True,
    seed: int = 0,
) -> TPRComparison:
    """Paired comparison of two attacks at the same certified FPR on the same members.

    Entry i of ``members_a`` and ``members_b`` must be the same member text. Each attack's
    threshold comes from its own non-member scores by the same rank rule, so both are certified
    at the same alpha_N. ``paired_nonmembers`` (default True) says entry j of the two non-member
    arrays is the same text (resampled jointly in the bootstrap). ``alternative="greater"``
    tests H1: TPR_a > TPR_b (e.g. online LiRA beats the loss attack); "less" and "two-sided" as
    in ``scipy.stats.binomtest``. With no discordant member the McNemar p-value is 1. The
    bootstrap is seeded (``seed``) so a result reproduces exactly.

    >>> nonmembers = [0.9, 0.8, 0.7, 0.6, 0.4, 0.2, 0.0]
    >>> c = compare_tprs([3.0, 2.5, 2.0, 1.5, 1.0, 0.5], nonmembers, [3.0, 0.1, 2.0, 0.2, 1.0, 0.3], nonmembers,
    ...                  fpr=0.25, n_bootstrap=200)
    >>> round(c.tpr_a.tpr, 4), c.tpr_b.tpr, c.only_a, c.only_b, c.p_value  # McNemar on 2 discordant members
    (0.8333, 0.5, 2, 0, 0.25)
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise DomainError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    b_count = int(n_bootstrap)
    if b_count < 0 or b_count != n_bootstrap:
        raise DomainError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    xa = as_score_array("members_a", members_a)
    xb = as_score_array("members_b", members_b)
    ya = as_score_array("nonmembers_a", nonmembers_a)
    yb = as_score_array("nonmembers_b", nonmembers_b)
    if xa.size != xb.size:
        raise InputError(
            f"paired comparison needs the same members under both attacks: {xa.size} vs {xb.size}",
            hint="score the same member texts with both attacks, in the same order",
        )
    if paired_nonmembers and ya.size != yb.size:
        raise InputError(
            f"paired_nonmembers=True but the non-member sets differ in size: {ya.size} vs {yb.size}",
            hint="pass paired_nonmembers=False if the two attacks were calibrated on different texts",
        )
    ta = tpr_at_fpr(xa, ya, fpr=fpr, confidence=confidence)
    tb = tpr_at_fpr(xb, yb, fpr=fpr, confidence=confidence)
    fa, fb = xa > ta.threshold, xb > tb.threshold
    only_a = int(np.count_nonzero(fa & ~fb))
    only_b = int(np.count_nonzero(~fa & fb))
    disc = only_a + only_b
    p = (
        1.0
        if disc == 0
        else float(stats.binomtest(only_a, disc, 0.5, alternative=alternative).pvalue)
    )
    diff = ta.tpr - tb.tpr
    lo = hi = bp = math.nan
    if b_count:
        rng = np.random.default_rng(seed)
        m = xa.size
        ii = rng.integers(0, m, size=(b_count, m))  # [B, m] member resamples
        ja = rng.integers(0, ya.size, size=(b_count, ya.size))  # [B, Na]
        jb = ja if paired_nonmembers else rng.integers(0, yb.size, size=(b_count, yb.size))
        ka, kb = ta.k, tb.k  # N is fixed across replicates, so K is too
        tha = -np.partition(-ya[ja], ka - 1, axis=1)[:, ka - 1]  # [B] K-th largest
        thb = -np.partition(-yb[jb], kb - 1, axis=1)[:, kb - 1]  # [B]
        d = (xa[ii] > tha[:, None]).mean(axis=1) - (xb[ii] > thb[:, None]).mean(axis=1)  # [B]
        a = 1.0 - float(_confidence(confidence))
        lo, hi = (float(v) for v in np.quantile(d, [a / 2, 1 - a / 2]))
        pg = (1 + np.count_nonzero(d <= 0)) / (b_count + 1)
        pl = (1 + np.count_nonzero(d >= 0)) / (b_count + 1)
        bp = {"greater": pg, "less": pl, "two-sided": min(1.0, 2 * min(pg, pl))}[alternative]
    return TPRComparison(
        tpr_a=ta,
        tpr_b=tb,
        both=int(np.count_nonzero(fa & fb)),
        only_a=only_a,
        only_b=only_b,
        neither=int(np.count_nonzero(~fa & ~fb)),
        p_value=p,
        alternative=alternative,
        difference=diff,
        diff_low=lo,
        diff_high=hi,
        bootstrap_p=float(bp),
        n_bootstrap=b_count,
        paired_nonmembers=bool(paired_nonmembers),
        seed=int(seed),
    )
