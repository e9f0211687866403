"""The corpus-conditional baseline kappa-bar of [MX] Prop. C.2(b), with a certified interval.

Theorem 5.1(i) bounds extraction by Ext <= 1 - f(kappa_pi(m)) when the secret z is independent
of the rest of the training set S^- given the public prefix c ([MX] (A1)). When the corpus can
carry information about z (a paraphrase of the secret, documents that quote parts of it), the
conditional prior pi(. | S^-) moves with S^-, and Prop. C.2(b) replaces kappa by

    kappa-bar = E_{S^-} [ sup_{|Lambda| <= m} pi(Lambda | S^-) ]        ([MX] Prop. C.2(b))

so that Ext <= 1 - f(kappa-bar) holds without any independence assumption. The inner supremum
is the top-m mass of one conditional prior, kappa(S^-) in [0, 1]; kappa-bar is its mean over
the law of the corpus remainder. Here kappa-bar is estimated from n independent draws
S^-_1 .. S^-_n, each reduced to kappa(S^-_j) or to a certified bracket
lo_j <= kappa(S^-_j) <= hi_j:

- exactly, when pi(. | S^-_j) has a finite support given in full (:func:`top_m_mass`);
- as the certified interval of the best-first search over a prior model trained on (or
  conditioned on) S^-_j ([MX] App. F.2, :func:`memclaim.privacy.baseline.certify_baseline`).

The confidence interval for the mean of these bounded values is distribution-free (the values
lie in [0, 1]; nothing else is assumed about their law): kappa-bar <= E[hi_j] and E[lo_j] <=
kappa-bar, so an upper confidence bound on the mean of the hi_j and a lower one on the mean of
the lo_j bracket kappa-bar. Three bounds on the mean of [0, 1]-valued i.i.d. variables:

- ``"betting"`` (default): the betting confidence bound of Waudby-Smith & Ramdas (2024, JRSS-B,
  "Estimating means of bounded random variables by betting"), predictable plug-in bets; valid
  by Ville's inequality, and much tighter than Hoeffding when the values have small variance
  (top-m masses of high-entropy secrets are all near 0);
- ``"bernstein"``: the empirical Bernstein bound of Maurer & Pontil (2009, Thm. 4), n >= 2;
- ``"hoeffding"``: Hoeffding's inequality, the simplest and loosest.

No maintained library on the project's numpy/scipy stack provides these bounds (``confseq``
needs a C++ build and is not a dependency here), so they are written out below, each with its
formula at the line.

Assumptions (recorded in every result, :data:`ASSUMPTIONS`):

1. the draws S^-_1 .. S^-_n are independent and each has the law of the remainder of the
   training set (the D^{n-1} of [MX] (A1)); pi(. | S^-_j) is the law of the secret given the
   adversary's entire side information under that draw ([MX] Def. 3.3);
2. each bracket holds with certainty: lo_j <= kappa(S^-_j) <= hi_j, for the same list size m
   as the extraction protocol;
3. ``"betting"`` reads the values in the order given, which must be fixed before the values are
   seen (the order of drawing); reordering after looking at them voids the bound.

Under these, P(kappa-bar <= upper) >= confidence (one-sided), and the two-sided interval
[lower, upper2] holds with probability >= confidence (each side at (1 - confidence)/2). The
confidence is over the draws of S^-; a bound Ext <= 1 - f(upper) inherits it.

Pure numpy/scipy: no torch, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import validate
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "ASSUMPTIONS",
    "METHODS",
    "CorpusBaseline",
    "corpus_baseline",
    "corpus_baseline_from_priors",
    "mean_upper_bound",
    "sample_corpus_baseline",
    "top_m_mass",
]

METHODS = ("betting", "bernstein", "hoeffding")

ASSUMPTIONS = (
    "the draws of the corpus remainder S^- are independent, each with the law of the remainder of the training set "
    "([MX] (A1)), and pi(.|S^-) is the law of the secret given the adversary's entire side information under that "
    "draw ([MX] Def. 3.3)",
    "each per-draw value brackets the top-m mass of its conditional prior with certainty (lo <= kappa(S^-) <= hi), "
    "for the extraction protocol's list size m",
    "the confidence is over the draws of S^-: Ext <= 1 - f(upper) holds with that confidence ([MX] Prop. C.2(b)); no "
    "independence between the secret and S^- is assumed",
)
BETTING_ORDER = (
    "betting bound: the values are read in the order given, which must be the order they were drawn "
    "(fixed before they were seen)"
)

#: largest bet of the betting bound: each capital factor 1 + lambda (m - x) stays >= 1 - C > 0
BET_CAP = 0.75


def top_m_mass(logp: ArrayLike, *, m: int, normalization_tol: float = 1e-6) -> float:
    """kappa = sup_{|Lambda| <= m} pi(Lambda) for a prior on a finite support given in full, as natural-log
    probabilities (``-inf`` for an impossible value): the sum of the m largest probabilities ([MX] Thm. 5.1).

    The probabilities must sum to 1 within ``normalization_tol`` (a truncated list would make the top-m
    mass a lower bound only: certify it with the search instead). ``m`` at or above the support size gives
    kappa = 1 (a corpus that pins the secret to at most m candidates).

    >>> import numpy as np
    >>> from memclaim.privacy.baseline_corpus import top_m_mass
    >>> round(top_m_mass(np.log([0.5, 0.3, 0.2]), m=2), 6)
    0.8
    """
    m = validate.integer("m (list size)", m, minimum=1)
    tol = validate.positive("normalization_tol", normalization_tol)
    lp = np.asarray(logp, dtype=np.float64).ravel()
    if lp.size == 0:
        raise InputError(
            "the prior has no support (an empty list of log-probabilities)",
            hint="give the log-probability of every value the secret can take",
        )
    if np.isnan(lp).any() or np.isposinf(lp).any() or (lp > 1e-12).any():
        bad = float(lp[np.isnan(lp) | (lp > 1e-12)][0])
        raise DomainError(
            f"prior log-probabilities must be <= 0 (probabilities in [0, 1]), got {bad!r}",
            hint="pass natural-log probabilities, -inf for an impossible value",
        )
    top = np.max(lp)
    if top == -np.inf:
        raise DomainError(
            "every prior log-probability is -inf: the prior has no mass",
            hint="give a normalized prior",
        )
    total = top + math.log(
        math.fsum(np.exp(lp - top))
    )  # log-sum-exp, log space ([EM]/[MX] conventions)
    if abs(total) > tol:
        raise DomainError(
            f"the prior's probabilities sum to {math.exp(total)!r}, not 1 (tolerance {tol:g})",
            hint="normalize the prior; a partial support gives only a lower bound on the top-m mass "
            "(certify it with memclaim.privacy.baseline.certify_baseline)",
        )
    if m >= lp.size:
        return 1.0
    best = np.partition(lp, lp.size - m)[lp.size - m :]
    mx = float(np.max(best))
    return min(1.0, math.exp(mx + math.log(math.fsum(np.exp(best - mx))) - total))


# ----------------------------------------------------------------------- bounds on a bounded mean
def _hoeffding_upper(x: np.ndarray, delta: float) -> float:
    # Hoeffding (1963): P(mean(X) - mu <= -t) <= exp(-2 n t^2) for X_i in [0, 1]
    return float(np.mean(x) + math.sqrt(math.log(1.0 / delta) / (2.0 * x.size)))


def _bernstein_upper(x: np.ndarray, delta: float) -> float:
    n = x.size
    if n < 2:
        raise DomainError(
            f"the empirical Bernstein bound needs at least 2 samples, got {n}",
            hint="use method='betting' or 'hoeffding', or draw more corpora",
        )
    v = float(np.var(x, ddof=1))
    lg = math.log(2.0 / delta)
    # Maurer & Pontil (2009), Thm. 4: mu <= mean + sqrt(2 V_n ln(2/delta) / n) + 7 ln(2/delta) / (3 (n - 1))
    return float(np.mean(x) + math.sqrt(2.0 * v * lg / n) + 7.0 * lg / (3.0 * (n - 1)))


def _betting_bets(x: np.ndarray, delta: float) -> np.ndarray:
    """Predictable plug-in bets of Waudby-Smith & Ramdas (2024), fixed-n form: lambda_t =
    min(C, sqrt(2 ln(1/delta) / (n sigma^2_{t-1}))), sigma^2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1),
    mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1). lambda_t uses x_1 .. x_{t-1} only and not the candidate mean,
    so each capital below is increasing in the candidate."""
    n = x.size
    t = np.arange(1, n + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1.0)
    sig2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1.0)
    prev = np.concatenate([[0.25], sig2[:-1]])
    return np.minimum(BET_CAP, np.sqrt(2.0 * math.log(1.0 / delta) / (n * prev)))


def _betting_upper(x: np.ndarray, delta: float) -> float:
    """Smallest u with sup_t K_t(u) >= 1/delta, K_t(u) = prod_{i<=t} (1 + lambda_i (u - x_i)).

    Under mean mu, K_t(mu) is a nonnegative martingale (E[1 + lambda (mu - X)] = 1), so by Ville's
    inequality P(sup_t K_t(mu) >= 1/delta) <= delta: the candidates u that reach 1/delta are
    rejected, and since K_t(u) is increasing in u they form an interval [u*, 1]. P(mu >= u*) <= delta."""
    lam = _betting_bets(x, delta)
    target = math.log(1.0 / delta)
    mean = float(np.mean(x))

    def log_wealth(u: float) -> float:
        return float(np.max(np.cumsum(np.log1p(lam * (u - x)))))  # factors >= 1 - BET_CAP > 0

    if log_wealth(1.0) < target:
        return 1.0
    if log_wealth(mean) >= target:
        # An early peak of the wealth (e.g. a run of small values first) rejects candidates below the
        # sample mean: u* < mean(x) is still a valid bound (Ville), but an upper bound below its own
        # point estimate reads as a contradiction, so the sample mean is returned instead (a larger
        # upper bound loses nothing of the guarantee). Found by the property test of the brackets.
        return mean
    lo, hi = mean, 1.0  # lo stays an accepted candidate, hi a rejected one
    for _ in range(200):  # bisection on the monotone log-wealth; hi stays a rejected candidate
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if log_wealth(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


_UPPER = {"betting": _betting_upper, "bernstein": _bernstein_upper, "hoeffding": _hoeffding_upper}


def _values(x, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DomainError(f"{name} must be numbers in [0, 1], got {x!r}") from None
    if a.size == 0:
        raise InputError(
            f"no samples in {name}: kappa-bar needs at least one draw of the corpus remainder",
            hint="draw corpora S^- and compute the top-m mass of the secret's prior under each",
        )
    bad = np.flatnonzero(~((a >= 0.0) & (a <= 1.0)))  # catches NaN too
    if bad.size:
        raise DomainError(
            f"{name}[{int(bad[0])}] = {float(a[bad[0]])!r} is not in [0, 1]",
            hint="each sample is a top-m prior mass, a probability",
        )
    return a


def mean_upper_bound(x: ArrayLike, *, confidence: float = 0.95, method: str = "betting") -> float:
    """An upper confidence bound U on the mean mu of i.i.d. [0, 1]-valued samples ``x``:
    P(mu <= U) >= ``confidence`` whatever their law (see the module docstring for the methods).

    >>> from memclaim.privacy.baseline_corpus import mean_upper_bound
    >>> round(mean_upper_bound([0.2, 0.3] * 10, method="hoeffding"), 4)
    0.5237
    """
    a = _values(x, "samples")
    c = validate.in_open_unit("confidence", confidence)
    meth = _method(method)
    return float(min(1.0, _UPPER[meth](a, 1.0 - c)))


def _method(method) -> str:
    meth = str(method).strip().lower()
    if meth not in METHODS:
        raise DomainError(f"unknown bound method {method!r}", hint=f"one of {', '.join(METHODS)}")
    return meth


# ----------------------------------------------------------------------- kappa-bar
@dataclass(frozen=True)
class CorpusBaseline(ResultMixin):
    """A certified confidence interval for kappa-bar = E_{S^-}[sup_{|Lambda|<=m} pi(Lambda | S^-)]
    ([MX] Prop. C.2(b)).

    ``upper`` is the one-sided bound, P(kappa-bar <= upper) >= confidence: the number to put into
    Ext <= 1 - f(kappa-bar) (1 - f is nondecreasing). ``lower`` and ``upper_two_sided`` form the
    two-sided interval, P(lower <= kappa-bar <= upper_two_sided) >= confidence. ``mean_lo`` and
    ``mean_hi`` are the sample means of the per-draw brackets (equal when every draw is exact);
    ``bracket_gap`` the largest per-draw hi - lo (uncertainty of the searches, not of sampling)."""

    m: int
    n_samples: int
    confidence: float
    method: str
    exact_samples: bool
    mean_lo: float
    mean_hi: float
    lower: float
    upper: float
    upper_two_sided: float
    sample_min: float
    sample_max: float
    bracket_gap: float
    assumptions: tuple[str, ...]
    quantity: str = "kappa-bar = E_{S^-}[sup_{|Lambda|<=m} pi(Lambda | S^-)]"
    reference: str = "[MX] Prop. C.2(b)"

    @property
    def interval(self) -> tuple[float, float]:
        """The two-sided interval (lower, upper_two_sided)."""
        return (self.lower, self.upper_two_sided)


def corpus_baseline(
    kappa: ArrayLike | None = None,
    *,
    kappa_lo: ArrayLike | None = None,
    kappa_hi: ArrayLike | None = None,
    baselines: Sequence | None = None,
    m: int,
    confidence: float = 0.95,
    method: str = "betting",
) -> CorpusBaseline:
    """kappa-bar of [MX] Prop. C.2(b) from n independent draws of the corpus remainder S^-.

    Give the per-draw top-m masses one of three ways: ``kappa`` (exact values, e.g. from
    :func:`top_m_mass`), ``kappa_lo`` and ``kappa_hi`` (certified brackets), or ``baselines``
    (results of :func:`memclaim.privacy.baseline.certify_baseline`, one per draw, each certified for
    list size ``m``). ``confidence`` is over the draws; ``method`` is the bound on a bounded mean
    (``"betting"``, ``"bernstein"``, ``"hoeffding"``). See the module docstring for the assumptions.

    >>> from memclaim.privacy.baseline_corpus import corpus_baseline
    >>> b = corpus_baseline([0.1, 0.2, 0.3, 0.2] * 10, m=1)
    >>> b.mean_hi, round(b.upper, 4)
    (0.2, 0.3054)
    """
    m = validate.integer("m (list size)", m, minimum=1)
    c = validate.in_open_unit("confidence", confidence)
    meth = _method(method)
    given = sum(v is not None for v in (kappa, baselines)) + (
        kappa_lo is not None or kappa_hi is not None
    )
    if given != 1:
        raise DomainError(
            "pass exactly one of kappa=, kappa_lo= with kappa_hi=, or baselines=",
            hint="exact per-draw values: kappa=[...]; certified brackets: kappa_lo=[...], kappa_hi=[...]",
        )
    if baselines is not None:
        rows = list(baselines)
        for i, b in enumerate(rows):
            if not all(hasattr(b, a) for a in ("kappa_lo", "kappa_hi", "m")):
                raise DomainError(
                    f"baselines[{i}] must carry kappa_lo, kappa_hi and m (a BaselineResult), got {b!r}"
                )
            if int(b.m) != m:
                raise DomainError(
                    f"baselines[{i}] was certified for list size m = {b.m}, not m = {m}",
                    hint="certify every draw with the extraction protocol's list size",
                )
        lo = _values([b.kappa_lo for b in rows], "kappa_lo")
        hi = _values([b.kappa_hi for b in rows], "kappa_hi")
    elif kappa is not None:
        lo = hi = _values(kappa, "kappa")
    else:
        if kappa_lo is None or kappa_hi is None:
            raise DomainError(
                "certified brackets need both kappa_lo= and kappa_hi=",
                hint="pass kappa= instead when every per-draw value is exact",
            )
        lo, hi = _values(kappa_lo, "kappa_lo"), _values(kappa_hi, "kappa_hi")
    if lo.size != hi.size:
        raise InputError(
            f"kappa_lo has {lo.size} values and kappa_hi {hi.size}",
            hint="give one bracket per draw",
        )
    rev = np.flatnonzero(lo > hi)
    if rev.size:
        j = int(rev[0])
        raise DomainError(
            f"bracket {j} is reversed: kappa_lo = {float(lo[j])!r} > kappa_hi = {float(hi[j])!r}",
            hint="each draw needs lo <= kappa(S^-) <= hi",
        )
    delta = 1.0 - c
    up = _UPPER[meth]
    upper = min(1.0, up(hi, delta))  # one-sided: kappa-bar <= E[hi] <= upper w.p. >= 1 - delta
    upper2 = min(1.0, up(hi, delta / 2.0))  # two-sided: delta/2 per side, union bound
    lower = max(0.0, 1.0 - up(1.0 - lo, delta / 2.0))  # the same bound on 1 - lo: E[lo] >= lower
    assumptions = ASSUMPTIONS + ((BETTING_ORDER,) if meth == "betting" else ())
    return CorpusBaseline(
        m=m,
        n_samples=int(lo.size),
        confidence=c,
        method=meth,
        exact_samples=bool(np.array_equal(lo, hi)),
        mean_lo=float(np.mean(lo)),
        mean_hi=float(np.mean(hi)),
        lower=float(lower),
        upper=float(upper),
        upper_two_sided=float(upper2),
        sample_min=float(np.min(lo)),
        sample_max=float(np.max(hi)),
        bracket_gap=float(np.max(hi - lo)),
        assumptions=assumptions,
    )


def corpus_baseline_from_priors(
    priors: Sequence[ArrayLike],
    *,
    m: int,
    confidence: float = 0.95,
    method: str = "betting",
    normalization_tol: float = 1e-6,
) -> CorpusBaseline:
    """kappa-bar from the conditional priors pi(. | S^-_j) themselves, one finite prior per draw, each as
    natural-log probabilities over its whole support: kappa_j = :func:`top_m_mass` exactly.

    >>> import numpy as np
    >>> from memclaim.privacy.baseline_corpus import corpus_baseline_from_priors
    >>> b = corpus_baseline_from_priors([np.log([0.5, 0.5]), np.log([0.9, 0.1])] * 10, m=1)
    >>> round(b.mean_hi, 4), round(b.upper, 4)
    (0.7, 0.9283)
    """
    rows = list(priors)
    if not rows:
        raise InputError(
            "no conditional priors given", hint="one prior (log-probabilities) per draw of S^-"
        )
    kap = [top_m_mass(p, m=m, normalization_tol=normalization_tol) for p in rows]
    return corpus_baseline(kap, m=m, confidence=confidence, method=method)


def sample_corpus_baseline(
    draw_prior: Callable[[np.random.Generator], np.ndarray],
    *,
    n: int,
    m: int,
    seed: int,
    confidence: float = 0.95,
    method: str = "betting",
) -> CorpusBaseline:
    """Draw n corpus remainders through ``draw_prior(rng)`` (which returns the log-probabilities of
    pi(. | S^-) for one fresh S^-), all from ``numpy.random.default_rng(seed)``, and certify kappa-bar.

    >>> import numpy as np
    >>> from memclaim.privacy.baseline_corpus import sample_corpus_baseline
    >>> b = sample_corpus_baseline(lambda rng: np.log(rng.dirichlet(np.ones(4))), n=20, m=1, seed=0)
    >>> b.n_samples, round(b.mean_hi, 2)
    (20, 0.51)
    """
    n = validate.integer("n (draws of S^-)", n, minimum=1)
    seed = validate.seed("seed", seed)
    rng = np.random.default_rng(seed)
    return corpus_baseline_from_priors(
        [draw_prior(rng) for _ in range(n)], m=m, confidence=confidence, method=method
    )
