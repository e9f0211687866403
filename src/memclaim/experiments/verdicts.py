"""The statistics behind the reproductions' verdicts on the papers' sentences (issue 24 item 2).

A reproduction judges each of the paper's sentences by a rule fixed before the run, on the run's
numbers with their intervals (:class:`memclaim.experiments.common.PaperClaim`). The rules share
the few statistics below; each is a library call or a thin use of :mod:`memclaim.claims.intervals`
(nothing here re-implements an interval):

- :func:`rate`: k of n with its two-sided Clopper-Pearson interval ([EM] D.1);
- :func:`upper_bound` / :func:`fewest_for_upper_bound`: the one-sided Clopper-Pearson upper bound
  on a rate, and the fewest trials that can bring it to a given level (with no success at all): a
  sentence like "close to zero (0.04%)" is tested by an upper confidence bound at a stated level,
  and is *not testable here* when the run has too few trials to reach that level;
- :func:`ratio`: the ratio of two rates with Katz's log interval (statsmodels; 0.5 added to each
  count where one is zero), for "a share of the member rate" and "far higher";
- :func:`level_reachable`: whether N controls can certify the paper's level alpha at all
  (K = floor(alpha (N+1)) >= 1, [EM] Eq. 5), and how many controls it takes.

Verdicts are three-way: ``"held"``, ``"not held"``, ``"not testable here"`` (:data:`VERDICTS`).
"""

from __future__ import annotations

import math
from typing import Any

from ..numeric import clopper_pearson_bounds

HELD, NOT_HELD, NOT_TESTABLE = "held", "not held", "not testable here"
VERDICTS = (HELD, NOT_HELD, NOT_TESTABLE)
CONFIDENCE = 0.95


def verdict_of(held: bool | None) -> str:
    """The verdict's words: True -> "held", False -> "not held", None -> "not testable here".

    >>> from memclaim.experiments.verdicts import verdict_of
    >>> verdict_of(True), verdict_of(False), verdict_of(None)
    ('held', 'not held', 'not testable here')
    """
    return NOT_TESTABLE if held is None else (HELD if held else NOT_HELD)


def rate(k: int, n: int, *, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """``k`` of ``n`` with its two-sided Clopper-Pearson interval, as a JSON-ready dict ([EM] D.1).

    >>> from memclaim.experiments.verdicts import rate
    >>> {key: (round(v, 4) if isinstance(v, float) else v) for key, v in rate(3, 10).items()}
    {'count': 3, 'n': 10, 'rate': 0.3, 'lower': 0.0667, 'upper': 0.6525, 'confidence': 0.95, 'method': 'clopper-pearson'}
    """
    from ..claims.intervals import clopper_pearson  # scipy: kept out of every reproduction's import

    iv = clopper_pearson(int(k), int(n), confidence=confidence)
    return {
        "count": int(k),
        "n": int(n),
        "rate": iv.estimate,
        "lower": iv.lower,
        "upper": iv.upper,
        "confidence": confidence,
        "method": iv.method,
    }


def upper_bound(k: int, n: int, *, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound on a rate at ``confidence`` (the upper end of the
    two-sided interval at 2 confidence - 1; 1 when k = n).

    >>> from memclaim.experiments.verdicts import upper_bound
    >>> round(upper_bound(0, 100), 5), round(upper_bound(1, 5000), 6)  # 1 - 0.05^(1/100); [EM] §4's 1 of 5000
    (0.02951, 0.000948)
    """
    _, hi = clopper_pearson_bounds(int(k), int(n), confidence=2 * confidence - 1)
    return float(hi)


def fewest_for_upper_bound(bound: float, *, confidence: float = CONFIDENCE) -> int:
    """The fewest trials whose one-sided upper bound reaches ``bound`` with no success at all:
    1 - (1 - confidence)^(1/n) <= bound, i.e. n >= log(1 - confidence) / log(1 - bound).

    >>> from memclaim.experiments.verdicts import fewest_for_upper_bound, upper_bound
    >>> n = fewest_for_upper_bound(0.001)
    >>> n, upper_bound(0, n) <= 0.001 < upper_bound(0, n - 1)
    (2995, True)
    """
    return int(math.ceil(math.log1p(-confidence) / math.log1p(-bound) - 1e-12))


def ratio(k1: int, n1: int, k2: int, n2: int, *, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """(k1/n1) / (k2/n2) with Katz's log interval (statsmodels ``confint_proportions_2indep``,
    ``compare="ratio"``; ``method="log"``, or ``"log-adjusted"``, 0.5 added to each count, where a
    count is 0 and the plain interval does not exist). The estimate is ``inf`` when only the
    denominator's count is 0 and ``nan`` when both are. For two rates of the same items (paired)
    the interval ignores their positive correlation, which only widens it.

    >>> from memclaim.experiments.verdicts import ratio
    >>> r = ratio(92, 5001, 377, 5000)  # [EM] §4: the floor 1.84% against 7.54% on members
    >>> round(r["estimate"], 3), round(r["lower"], 3), round(r["upper"], 3), r["method"]
    (0.244, 0.195, 0.305, 'katz log (statsmodels)')
    >>> ratio(3, 120, 0, 180)["estimate"], ratio(3, 120, 0, 180)["method"]
    (inf, 'katz log, 0.5 added to each count (statsmodels)')
    """
    from statsmodels.stats.proportion import confint_proportions_2indep

    k1, n1, k2, n2 = int(k1), int(n1), int(k2), int(n2)
    zero = k1 == 0 or k2 == 0
    lo, hi = confint_proportions_2indep(
        k1,
        n1,
        k2,
        n2,
        compare="ratio",
        method="log-adjusted" if zero else "log",
        alpha=1 - confidence,
    )
    if k2 == 0:
        est = math.nan if k1 == 0 else math.inf
    else:
        est = (k1 / n1) / (k2 / n2)
    return {
        "estimate": est,
        "lower": float(lo),
        "upper": float(hi),
        "confidence": confidence,
        "method": "katz log, 0.5 added to each count (statsmodels)"
        if zero
        else "katz log (statsmodels)",
        "numerator": {"count": k1, "n": n1},
        "denominator": {"count": k2, "n": n2},
    }


def level_reachable(alpha: str | float, n_controls: int) -> dict[str, Any]:
    """Whether ``n_controls`` controls can certify the level ``alpha`` ([EM] Eq. 5: K = floor(alpha
    (N+1)) >= 1), the K and alpha_N they give, and the fewest controls that can.

    >>> from memclaim.experiments.verdicts import level_reachable
    >>> level_reachable("0.1%", 180)
    {'alpha': '0.1%', 'n_controls': 180, 'k': 0, 'alpha_n': 0.0, 'reachable': False, 'controls_needed': 999, 'smallest_level': 0.0055248618784530384}
    """
    from ..claims.conformal import controls_needed_for_level, rank_k  # scipy, as above

    k = rank_k(alpha=alpha, n_controls=int(n_controls))
    return {
        "alpha": alpha,
        "n_controls": int(n_controls),
        "k": k,
        "alpha_n": k / (n_controls + 1),
        "reachable": k >= 1,
        "controls_needed": controls_needed_for_level(alpha=alpha),
        "smallest_level": 1 / (n_controls + 1),
    }


def fmt_interval(iv: dict[str, Any], *, pct: bool = True, digits: int = 1) -> str:
    """An estimate and its interval in words: ``'0.8% [0.0%, 4.6%]'`` (``pct``) or ``'3.31 [0.39, 28.0]'``.

    >>> from memclaim.experiments.verdicts import fmt_interval, rate
    >>> fmt_interval(rate(1, 120)), fmt_interval({"estimate": 3.3149, "lower": 0.392, "upper": 28.02}, pct=False)
    ('0.8% [0.0%, 4.6%]', '3.31 [0.392, 28]')
    """
    est = iv.get("rate", iv.get("estimate"))
    if pct:
        f = lambda v: f"{v:.{digits}%}"  # noqa: E731
    else:
        f = lambda v: f"{v:.3g}"  # noqa: E731
    return f"{f(est)} [{f(iv['lower'])}, {f(iv['upper'])}]"


__all__ = [
    "HELD",
    "NOT_HELD",
    "NOT_TESTABLE",
    "VERDICTS",
    "CONFIDENCE",
    "verdict_of",
    "rate",
    "upper_bound",
    "fewest_for_upper_bound",
    "ratio",
    "level_reachable",
    "fmt_interval",
]
