"""Query budgets and extractable memorization ([EM] §6, App. F).

For a sequence generated with per-query probability p (a natural-log score log p):

    P[at least once in n] = 1 - (1 - p)^n                          ([EM] Eq. 10)
    n_delta = ceil(log delta / log(1 - p))                         ([EM] Eq. 34)

both computed from log p with log1p/expm1, so that p = 1e-300 (and smaller) is exact to double
precision: 1 - p rounds to 1 in floating point long before that. n_delta is returned as a float
and as log10: near p = 1e-27 it is about 3e27, beyond every fixed-width integer type, and below
p = 1e-308 it overflows a double (n = inf) while log10 n stays exact. Budgets may therefore be
given as log n (``log_n=``) wherever a budget goes in, and the budget grids of the views are
log10-spaced (``log10_budgets``), so nothing is computed from an overflowed n.

Refined claim ([EM] §6): a sequence is *extractably memorized* under budget n at confidence
1 - delta when (1) its score clears the matched-comparison threshold tau and (2) the procedure
generates it at least once in n queries with probability >= 1 - delta, i.e.
p >= p_min(n) = 1 - delta^(1/n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..numeric import log1mexp
from ..validate import in_open_unit
from .intervals import Interval, clopper_pearson, clopper_pearson_arrays, newcombe_independent
from .scores import LN10

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .census import HeatSegments

LN2 = math.log(2.0)


def _log_neg_log1m(log_p: np.ndarray) -> np.ndarray:
    """log(-log(1 - p)) from log p, accurate for every p in (0, 1].

    -log(1-p) = p + p^2/2 + ...; for p < 1e-8 it is p (1 + p/2) to double precision, so the
    result is log p + log1p(p/2) without ever forming 1 - p.
    """
    lp = np.asarray(log_p, dtype=np.float64)
    out = np.empty_like(lp)
    small = lp < math.log(1e-8)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        p_small = np.exp(lp[small])
        out[small] = lp[small] + np.log1p(p_small / 2)
        p = np.exp(lp[~small])
        out[~small] = np.log(-np.log1p(-p))  # p = 1 -> log(inf) = inf
    return out


def _check_log_p(log_p, name="log p") -> np.ndarray:
    lp = np.asarray(log_p, dtype=np.float64)
    if np.any(np.isnan(lp)) or np.any(lp > 1e-6):
        bad = lp[np.isnan(lp) | (lp > 1e-6)].ravel()[0]
        raise DomainError(
            f"{name} must be a natural-log probability <= 0, got {bad!r}",
            hint="pass log(p) with 0 < p <= 1, or -inf for p = 0",
        )
    return np.minimum(lp, 0.0)


def _check_n(n) -> np.ndarray:
    arr = np.asarray(n, dtype=np.float64)
    if np.any(~np.isfinite(arr)) or np.any(arr < 1):
        bad = arr[~np.isfinite(arr) | (arr < 1)].ravel()[0]
        raise DomainError(
            f"the budget n must be a finite number of queries >= 1, got {bad!r}",
            hint="e.g. n = 1e5 samples; give log n (log_n=, or --log10-n) for budgets beyond 1e308",
        )
    return arr


def _check_log_n(log_n) -> np.ndarray:
    arr = np.asarray(log_n, dtype=np.float64)
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        bad = arr[~np.isfinite(arr) | (arr < 0)].ravel()[0]
        raise DomainError(
            f"the budget's log n must be finite and >= 0 (n >= 1 query), got {bad!r}",
            hint="e.g. log_n = log(1e5)",
        )
    return arr


def _log_budget(n, log_n) -> np.ndarray:
    """Natural log of the budget, from exactly one of n and log n."""
    if (n is None) == (log_n is None):
        raise DomainError(
            "give exactly one of the budget n and its log n",
            hint="n for budgets up to 1e308, log n beyond",
        )
    return np.log(_check_n(n)) if log_n is None else _check_log_n(log_n)


def log_prob_at_least_once(
    *,
    log_p: float | np.ndarray,
    n: float | np.ndarray | None = None,
    log_n: float | np.ndarray | None = None,
) -> float | np.ndarray:
    """Natural log of P[at least once in n] = 1 - (1-p)^n ([EM] Eq. 10), from log p and the
    budget n (or its natural log ``log_n``, for budgets beyond the double range).

    Vectorized over log_p and n. Uses y = -n log(1-p) = exp(log n + log(-log(1-p))) and
    log(1 - e^{-y}); when y underflows the answer is log y = log n + log p (+ O(p)).

    >>> round(float(np.exp(log_prob_at_least_once(log_p=math.log(2.5e-5), n=1e5))), 4)
    0.9179
    >>> log_prob_at_least_once(log_p=-1000.0, log_n=900.0)  # p = e^-1000, n = e^900: log(n p) = -100
    -100.0
    """
    lp = _check_log_p(log_p)
    ly = _log_budget(n, log_n) + _log_neg_log1m(lp)  # log y
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp(ly)
        out = np.where(
            ly < -30, ly + np.log1p(-np.exp(ly) / 2), log1mexp(-np.asarray(y, dtype=np.float64))
        )
    out = np.where(np.isneginf(lp), -np.inf, out)
    return out if out.ndim else float(out)


def prob_at_least_once(
    *,
    log_p: float | np.ndarray,
    n: float | np.ndarray | None = None,
    log_n: float | np.ndarray | None = None,
) -> float | np.ndarray:
    """P[at least once in n] as a float (may underflow to 0; use the log version for tiny p).

    >>> round(float(prob_at_least_once(log_p=math.log(0.5), n=2)), 6)  # 1 - (1/2)^2
    0.75
    """
    return np.exp(log_prob_at_least_once(log_p=log_p, n=n, log_n=log_n))


def min_log_prob_for_budget(
    *, n: float | np.ndarray | None = None, delta: float, log_n: float | np.ndarray | None = None
) -> float | np.ndarray:
    """log p_min(n) with p_min = 1 - delta^(1/n): the smallest per-query probability that the
    procedure generates at least once in n queries with probability >= 1 - delta.

    From log n: with x = log(delta) / n, p_min = -expm1(x); where |x| < 1e-13 (n beyond ~1e13,
    and n beyond the double range) p_min = -x (1 + x/2 + ...) in log space, so that
    log p_min = log(-log delta) - log n + log1p(x/2) never forms n itself.

    >>> round(math.exp(min_log_prob_for_budget(n=1, delta=0.05)), 6)  # one query: p >= 0.95
    0.95
    """
    d = in_open_unit("delta", float(delta))
    ln = _log_budget(n, log_n)
    lx = math.log(-math.log(d)) - ln  # log |x|
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ax = np.exp(lx)  # |x|; underflows to 0 only where the series branch is taken
        out = np.where(lx < -30, lx + np.log1p(-ax / 2), log1mexp(-ax))
    return out if np.ndim(out) else float(out)


@dataclass(frozen=True)
class QueryBudget(ResultMixin):
    """n_delta = ceil(log delta / log(1 - p)) ([EM] Eq. 34), as float and log10."""

    log10_p: float
    delta: float
    n: float  # the ceiling, as a float (inf for p = 0, and where n overflows a double); exact integer only below 2**53
    log10_n: float  # exact where n overflows
    n_int: int | None  # the exact integer when n < 2**53, else None
    prob_at_least_once_at_n: (
        float  # check: >= 1 - delta (up to rounding where n is the real ratio); from log n
    )


def queries_needed(*, log_p: float, delta: float = 0.05) -> QueryBudget:
    """Queries needed to generate a sequence of probability p at least once w.p. >= 1 - delta:
    n_delta = ceil(log delta / log(1 - p)) ([EM] §6, App. F.1 Eq. 34), the smallest n whose
    P[at least once in n] (:func:`log_prob_at_least_once`, [EM] Eq. 10) reaches 1 - delta. The one
    home of this budget: the near-verbatim recovery's n_c = n_{1-c} calls it
    (memclaim.audits.recovery).

    >>> queries_needed(log_p=math.log(0.1)).n_int   # 1 - 0.9**29 >= 0.95 > 1 - 0.9**28
    29
    """
    d = in_open_unit("delta", float(delta))
    lp = float(_check_log_p(log_p))
    if lp == -math.inf:
        return QueryBudget(-math.inf, d, math.inf, math.inf, None, 0.0)
    # log delta / log(1-p) = (-log delta) / (-log(1-p)) = exp(log(-log delta) - log(-log(1-p)))
    log_ratio = math.log(-math.log(d)) - float(_log_neg_log1m(np.asarray(lp)))
    if log_ratio < math.log(2.0**53):
        n_int = max(1, math.ceil(math.exp(log_ratio)))
        # guard the float ceiling: the smallest n with P[>=1 in n] >= 1 - delta
        while n_int > 1 and log_prob_at_least_once(log_p=lp, n=n_int - 1) >= math.log1p(-d):
            n_int -= 1
        while log_prob_at_least_once(log_p=lp, n=n_int) < math.log1p(-d):
            n_int += 1
        n_f, log10_n = float(n_int), math.log10(n_int)
    else:
        n_int, n_f, log10_n = (
            None,
            math.exp(log_ratio) if log_ratio < 709 else math.inf,
            log_ratio / LN10,
        )
    # [EM] Eq. 10 at n_delta, from log n: n itself may have overflowed (p < ~1e-308)
    log_n = math.log(n_int) if n_int is not None else log_ratio
    check = math.exp(log_prob_at_least_once(log_p=lp, log_n=log_n))
    return QueryBudget(lp / LN10, d, n_f, log10_n, n_int, check)


def parse_probability(
    *,
    p: float | str | None = None,
    log10_p: float | str | None = None,
    log_p: float | str | None = None,
) -> float:
    """Exactly one of p, log10 p, ln p -> natural log p (validated; p = 0 is -inf).

    >>> parse_probability(log10_p=-400) == -400 * LN10, parse_probability(p=0)
    (True, -inf)
    """
    given = [x is not None for x in (p, log10_p, log_p)]
    if sum(given) != 1:
        raise DomainError(
            "give exactly one of p, log10 p or log p", hint="e.g. --p 1e-27 or --log10-p -27"
        )
    if p is not None:
        v = float(p)
        if not 0 <= v <= 1 or math.isnan(v):
            raise DomainError(
                f"p must be a probability in [0, 1], got {p!r}",
                hint="use --log10-p for p below 1e-308",
            )
        return math.log(v) if v > 0 else -math.inf
    if log10_p is not None:
        v = float(log10_p)
        if math.isnan(v) or v > 0:
            raise DomainError(
                f"log10 p must be <= 0, got {log10_p!r}", hint="e.g. --log10-p -27 for p = 1e-27"
            )
        return v * LN10
    assert log_p is not None  # exactly one of the three was given, and it was not p or log10 p
    v = float(log_p)
    if math.isnan(v) or v > 0:
        raise DomainError(f"log p must be <= 0, got {log_p!r}")
    return v


# ------------------------------------------------------------------ refined claims
@dataclass(frozen=True)
class ExtractableClaim(ResultMixin):
    """Counts for the refined claim of [EM] §6 at one budget."""

    n: float
    delta: float
    log10_p_min: float  # the smallest probability extractable within n at 1 - delta
    log10_tau: float | None
    n_items: int
    n_memorized: int  # score > tau
    n_extractable: int  # P[>=1 in n] >= 1 - delta
    n_extractable_memorized: int  # both ([EM] §6, items 1 and 2)
    memorized: np.ndarray = field(repr=False)
    extractable: np.ndarray = field(repr=False)


def extractable_memorization(
    log_scores: Sequence[float] | np.ndarray,
    *,
    log_tau: float | None,
    n: float,
    delta: float = 0.05,
) -> ExtractableClaim:
    """Per item: memorized (log score > log tau), extractable within n queries at confidence
    1 - delta, and both ([EM] §6). ``log_tau=None``: no threshold (nothing is memorized).

    >>> c = extractable_memorization([math.log(1e-3), math.log(1e-9)], log_tau=math.log(1e-6), n=1e5)
    >>> c.n_memorized, c.n_extractable, c.n_extractable_memorized
    (1, 1, 1)
    """
    lp = _check_log_p(np.asarray(log_scores, dtype=np.float64).ravel(), "log score")
    d = in_open_unit("delta", float(delta))
    lmin = cast(float, min_log_prob_for_budget(n=n, delta=d))  # a scalar n gives a scalar
    extractable = lp >= lmin
    memorized = lp > log_tau if log_tau is not None else np.zeros(lp.size, dtype=bool)
    return ExtractableClaim(
        float(n),
        d,
        lmin / LN10,
        None if log_tau is None else log_tau / LN10,
        lp.size,
        int(memorized.sum()),
        int(extractable.sum()),
        int((memorized & extractable).sum()),
        memorized,
        extractable,
    )


def log10_budget_grid(*, max_log10_n: float, points: int = 121) -> np.ndarray:
    """log10 of budgets 1 .. 10**max_log10_n, evenly spaced (budgets reach 1e27, and beyond the
    double range for thresholds below 1e-308).

    >>> log10_budget_grid(max_log10_n=2, points=3).tolist()
    [0.0, 1.0, 2.0]
    """
    if not math.isfinite(max_log10_n) or max_log10_n < 0:
        max_log10_n = 0.0
    return np.unique(np.concatenate([[0.0], np.linspace(0.0, max_log10_n, points)]))


def budget_grid(*, max_log10_n: float, points: int = 121) -> np.ndarray:
    """Budgets 1 .. 10**max_log10_n, log-spaced, as floats (inf beyond 1.8e308: use
    :func:`log10_budget_grid` there).

    >>> budget_grid(max_log10_n=2, points=3).tolist()
    [1.0, 10.0, 100.0]
    """
    with np.errstate(over="ignore"):
        return 10.0 ** log10_budget_grid(max_log10_n=max_log10_n, points=points)


def _budget_axis(budgets, log10_budgets, top: float) -> tuple[np.ndarray, np.ndarray]:
    """(budgets, log10 budgets) from at most one of them, or the default grid up to 10**top."""
    if budgets is not None and log10_budgets is not None:
        raise DomainError("give budgets or log10_budgets, not both")
    if budgets is not None:
        b = _check_n(budgets)
        return b, np.log10(b)
    lb = (
        log10_budget_grid(max_log10_n=top)
        if log10_budgets is None
        else _check_log_n(np.asarray(log10_budgets, dtype=np.float64) * LN10) / LN10
    )
    with np.errstate(over="ignore"):
        return 10.0**lb, lb


@dataclass(frozen=True)
class PopulationBudgetView(ResultMixin):
    """Rates against budget for the population test ([EM] F.2, Fig. 20)."""

    delta: float
    budgets: np.ndarray
    member_rate: np.ndarray  # members extractable within n (raw generation view, Fig. 20(a))
    member_lower: np.ndarray
    member_upper: np.ndarray
    control_rate: np.ndarray  # non-members extractable within n (their rate is an FPR)
    member_memorized_rate: np.ndarray  # members above tau and extractable (Fig. 20(b))
    control_memorized_rate: np.ndarray
    n_tau: QueryBudget | None  # the budget of the threshold itself (hollow dot of Fig. 20)
    at_n_tau: Interval | None  # G - alpha_N at n_tau: CP shifted by alpha_N
    realistic_n: float
    at_realistic_n: (
        Interval | None
    )  # memorized+extractable members - controls, Newcombe (Fig. 20(b))
    log10_budgets: (
        np.ndarray
    )  # log10 of ``budgets``, exact where a budget overflows a double (inf there)


def population_budget_view(
    candidate_log_scores: ArrayLike,
    control_log_scores: ArrayLike,
    *,
    log_tau: float | None,
    alpha_n: float,
    delta: float = 0.05,
    realistic_n: float = 1e5,
    budgets: ArrayLike | None = None,
    log10_budgets: ArrayLike | None = None,
    confidence: float = 0.95,
) -> PopulationBudgetView:
    """Rates of candidates and controls extractable within each query budget n ([EM] F.2, Fig. 20).

    A sequence of log probability p counts as extractable within n when 1 - (1 - p)^n >= 1 - delta
    ([EM] §6). ``log_tau`` (the population test's threshold, None for none) adds the memorized and
    extractable rates, the budget n_tau of the threshold itself with the claim's rate there
    (Clopper-Pearson shifted by -``alpha_n``), and the members-minus-controls difference at
    ``realistic_n`` (Newcombe). The budget axis is ``budgets`` or ``log10_budgets`` (default: a
    log-spaced grid reaching past both n_tau and ``realistic_n``).

    >>> import math
    >>> from memclaim.claims.budget import population_budget_view
    >>> v = population_budget_view([math.log(0.5), math.log(1e-4)], [math.log(1e-3), math.log(1e-6)],
    ...                            log_tau=math.log(1e-5), alpha_n=0.0, log10_budgets=[0.0, 3.0, 6.0])
    >>> v.member_rate.tolist(), v.control_rate.tolist(), v.n_tau.n_int
    ([0.0, 0.5, 1.0], [0.0, 0.0, 0.5], 299572)
    """
    cand = _check_log_p(
        np.asarray(candidate_log_scores, dtype=np.float64).ravel(), "candidate log score"
    )
    ctrl = _check_log_p(
        np.asarray(control_log_scores, dtype=np.float64).ravel(), "control log score"
    )
    if cand.size == 0 or ctrl.size == 0:
        raise InputError("the budget view needs candidates and controls")
    d = in_open_unit("delta", float(delta))
    nt = (
        queries_needed(log_p=log_tau, delta=d)
        if log_tau is not None and log_tau > -np.inf
        else None
    )
    top = max(
        math.log10(realistic_n) + 1,
        (nt.log10_n + 1) if nt is not None and math.isfinite(nt.log10_n) else 0,
    )
    budgets, log10_budgets = _budget_axis(
        budgets, log10_budgets, top
    )  # the grid reaches n_tau, even beyond 1e308
    lmin = min_log_prob_for_budget(log_n=log10_budgets * LN10, delta=d)
    cs, ks = np.sort(cand), np.sort(ctrl)
    j, m = cand.size, ctrl.size
    g = j - np.searchsorted(cs, lmin, side="left")  # #{p >= p_min(n)}
    c = m - np.searchsorted(ks, lmin, side="left")
    lo, hi = clopper_pearson_arrays(g, j, confidence=confidence)
    if log_tau is not None:
        cm = cand[cand > log_tau]
        km = ctrl[ctrl > log_tau]
        gm = np.searchsorted(np.sort(cm), lmin, side="left")
        gm = cm.size - gm
        kmm = km.size - np.searchsorted(np.sort(km), lmin, side="left")
    else:
        gm = np.zeros_like(g)
        kmm = np.zeros_like(c)
    at_tau = None
    if nt is not None and log_tau is not None:
        g_tau = int(np.count_nonzero(cand > log_tau))
        at_tau = clopper_pearson(g_tau, j, confidence=confidence).shifted(
            -alpha_n, method_suffix=", shifted by -alpha_N"
        )
    at_real = None
    if log_tau is not None:
        lr = min_log_prob_for_budget(n=realistic_n, delta=d)
        a1 = int(np.count_nonzero((cand > log_tau) & (cand >= lr)))
        a2 = int(np.count_nonzero((ctrl > log_tau) & (ctrl >= lr)))
        at_real = newcombe_independent(a1, j, a2, m, confidence=confidence)
    return PopulationBudgetView(
        d,
        budgets,
        g / j,
        lo,
        hi,
        c / m,
        gm / j,
        kmm / m,
        nt,
        at_tau,
        float(realistic_n),
        at_real,
        log10_budgets,
    )


@dataclass(frozen=True)
class CensusBudgetView(ResultMixin):
    """Coverage of a document against budget ([EM] §6, Fig. 7, F.3)."""

    delta: float
    budgets: np.ndarray
    coverage_extractable: np.ndarray  # characters covered by a window extractable within n
    coverage_extractable_memorized: np.ndarray  # ... that also clears tau_doc (the refined claim)
    coverage_memorized: float  # coverage(tau_doc): all memorization the matched comparison reveals
    n_tau: QueryBudget  # budget at which everything above tau_doc is extractable
    realistic_n: float
    at_realistic_n: float  # extractable memorization coverage within the realistic budget
    log10_budgets: (
        np.ndarray
    )  # log10 of ``budgets``, exact where a budget overflows a double (inf there)


def census_budget_view(
    heat_log10: ArrayLike | None = None,
    *,
    log10_tau: float,
    delta: float = 0.05,
    realistic_n: float = 1e5,
    budgets: ArrayLike | None = None,
    log10_budgets: ArrayLike | None = None,
    heat: HeatSegments | None = None,
) -> CensusBudgetView:
    """``heat_log10``: per-character largest log10 window score (census ``heat_log10``); or
    ``heat``: the census's :class:`~memclaim.claims.census.HeatSegments` (the same numbers from
    the heat's segments weighted by their lengths: a book is never one number per character).

    >>> from memclaim.claims.budget import census_budget_view
    >>> v = census_budget_view([-1.0, -1.0, -4.0, -9.0], log10_tau=-8.0, log10_budgets=[0.0, 2.0, 5.0])
    >>> v.coverage_extractable.tolist(), v.coverage_memorized
    ([0.0, 0.5, 0.75], 0.75)
    """
    if heat is not None:
        h, wts = heat.weighted()
        return _census_budget_view_weighted(
            np.asarray(h, np.float64),
            np.asarray(wts, np.int64),
            log10_tau=log10_tau,
            delta=delta,
            realistic_n=realistic_n,
            budgets=budgets,
            log10_budgets=log10_budgets,
        )
    h = np.asarray(heat_log10, dtype=np.float64).ravel()
    if h.size == 0:
        raise InputError("empty heat array")
    d = in_open_unit("delta", float(delta))
    nt = queries_needed(log_p=float(log10_tau) * LN10, delta=d)
    top = max(math.log10(realistic_n) + 1, nt.log10_n + 1 if math.isfinite(nt.log10_n) else 0)
    budgets, log10_budgets = _budget_axis(
        budgets, log10_budgets, top
    )  # the grid reaches n_tau, even beyond 1e308
    lmin10 = np.asarray(min_log_prob_for_budget(log_n=log10_budgets * LN10, delta=d)) / LN10
    hs = np.sort(h)
    ext = (hs.size - np.searchsorted(hs, lmin10, side="left")) / hs.size
    above = np.sort(h[h > log10_tau])
    ext_mem = (above.size - np.searchsorted(above, lmin10, side="left")) / hs.size
    lr = min_log_prob_for_budget(n=realistic_n, delta=d) / LN10
    at_real = float(np.count_nonzero((h > log10_tau) & (h >= lr)) / hs.size)
    return CensusBudgetView(
        d,
        budgets,
        ext,
        ext_mem,
        float(above.size / hs.size),
        nt,
        float(realistic_n),
        at_real,
        log10_budgets,
    )


def _census_budget_view_weighted(
    h, wts, *, log10_tau, delta, realistic_n, budgets, log10_budgets
) -> CensusBudgetView:
    """:func:`census_budget_view` for heat values ``h`` held by ``wts`` characters each."""
    L = int(wts.sum())
    if L == 0:
        raise InputError("empty heat array")
    d = in_open_unit("delta", float(delta))
    nt = queries_needed(log_p=float(log10_tau) * LN10, delta=d)
    top = max(math.log10(realistic_n) + 1, nt.log10_n + 1 if math.isfinite(nt.log10_n) else 0)
    budgets, log10_budgets = _budget_axis(budgets, log10_budgets, top)
    lmin10 = np.asarray(min_log_prob_for_budget(log_n=log10_budgets * LN10, delta=d)) / LN10
    order = np.argsort(h, kind="stable")
    hs, ws = h[order], wts[order]
    tail = np.concatenate([np.cumsum(ws[::-1])[::-1], [0]])  # tail[i]: characters of hs[i:]
    ext = tail[np.searchsorted(hs, lmin10, side="left")] / L
    up = hs > log10_tau
    ha, wa = hs[up], ws[up]
    tail_a = np.concatenate([np.cumsum(wa[::-1])[::-1], [0]])
    ext_mem = tail_a[np.searchsorted(ha, lmin10, side="left")] / L
    lr = min_log_prob_for_budget(n=realistic_n, delta=d) / LN10
    at_real = float(ws[up & (hs >= lr)].sum() / L)
    return CensusBudgetView(
        d,
        budgets,
        ext,
        ext_mem,
        float(wa.sum() / L),
        nt,
        float(realistic_n),
        at_real,
        log10_budgets,
    )
