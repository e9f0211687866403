"""Numeric helpers shared by every layer: log-space sums and Clopper-Pearson bounds (one home
each; issue 13). numpy only at import; scipy is imported when a Clopper-Pearson bound is asked.

>>> logsumexp([math.log(0.25), math.log(0.25)]) == math.log(0.5)
True
>>> logsumexp([]), logsumexp([-math.inf])
(-inf, -inf)
>>> round(math.exp(log1mexp(math.log(0.75))), 12)
0.25
>>> lo, hi = clopper_pearson_bounds(3, 10)
>>> round(float(lo), 4), round(float(hi), 4)
(0.0667, 0.6525)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import overload

import numpy as np

from .errors import DomainError

__all__ = ["LN2", "logsumexp", "log1mexp", "clopper_pearson_bounds"]

LN2 = math.log(2.0)


def logsumexp(x: Sequence[float] | np.ndarray) -> float:
    """log sum exp(x) in float64 for a sequence or array of natural logs: max-shifted, each
    shifted exponential by ``math.exp`` (correctly rounded in practice, unlike a vectorized exp)
    and summed exactly (``math.fsum``). ``-inf`` for an empty or all ``-inf`` input. The result
    is >= max(x) exactly (the sum includes exp(0) = 1 and is correctly rounded). Hand-written:
    scipy.special.logsumexp rounds its exponentials and its sum, and warns on all ``-inf``.

    >>> logsumexp([math.log(0.25), math.log(0.5)]) == math.log(0.75)
    True
    >>> logsumexp([]), logsumexp([-math.inf])
    (-inf, -inf)
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        return -math.inf
    m = float(np.max(a))
    if m == -math.inf:
        return -math.inf
    return m + math.log(math.fsum(math.exp(v - m) for v in a.tolist()))


# a float gives a float, an array an array (the type checker needs both said)
@overload
def log1mexp(a: float) -> float: ...
@overload
def log1mexp(a: np.ndarray) -> np.ndarray: ...
def log1mexp(a: float | np.ndarray) -> float | np.ndarray:
    """log(1 - exp(a)) for a <= 0, accurate on both sides of a = -log 2 (Maechler 2012,
    "Accurately computing log(1 - exp(-|a|))"): ``log(-expm1(a))`` near 0, ``log1p(-exp(a))``
    below. A Python float gives a float (computed with ``math``), an array an array; a = 0
    gives -inf.

    >>> log1mexp(math.log(0.25)) == math.log(0.75), log1mexp(0.0)
    (True, -inf)
    >>> log1mexp(-1e-20)  # log(1e-20): 1 - exp(a) computed directly would round to 0
    -46.051701859880914
    """
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        a = float(a)
        if a == 0.0:
            return -math.inf
        return math.log(-math.expm1(a)) if a > -LN2 else math.log1p(-math.exp(a))
    x = np.asarray(a, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = np.where(x > -LN2, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))
    return out if out.ndim else float(out)


def clopper_pearson_bounds(
    k: int | np.ndarray, n: int | np.ndarray, *, confidence: float = 0.95, side: str = "two"
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper & Pearson 1934) confidence bounds for a binomial rate, from the beta
    quantiles (scipy.stats.beta), for integers or integer arrays ``k`` successes out of ``n``.

    ``side="two"``: the two-sided interval at ``confidence`` (tails (1 - confidence)/2 each);
    ``side="lower"``: the one-sided lower bound at ``confidence`` (upper end 1). k = 0 gives a
    lower end 0, k = n an upper end 1, n = 0 the interval [0, 1]. Returns (lo, hi) as float64
    arrays (0-d for scalars). The caller checks its inputs (memclaim.validate).

    >>> lo, hi = clopper_pearson_bounds(0, 10)
    >>> float(lo), round(float(hi), 4)
    (0.0, 0.3085)
    >>> round(float(clopper_pearson_bounds(10, 10, side="lower")[0]), 4)  # one-sided 95%: 0.05 ** (1/10)
    0.7411
    """
    from scipy import stats

    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if side == "two":
        a = 1.0 - confidence
        lo_tail, hi_tail = a / 2, 1 - a / 2
    elif side == "lower":
        lo_tail, hi_tail = 1.0 - confidence, None
    else:
        raise DomainError(
            f"side must be 'two' or 'lower', got {side!r}", hint="side='two' for an interval"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(lo_tail, k, n - k + 1), 0.0)
        hi = (
            np.where(k < n, stats.beta.ppf(hi_tail, k + 1, n - k), 1.0)
            if hi_tail is not None
            else np.ones_like(lo)
        )
    lo = np.where(n > 0, lo, 0.0)
    hi = np.where(n > 0, hi, 1.0)
    return lo, hi
