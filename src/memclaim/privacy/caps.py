"""Caps on counterfactual memorization from f-DP ([MX] §4, App. A, B).

For a bounded score h in [0, 1], f-DP caps the counterfactual memorization |mem_h| by the
advantage functional eta(f) = sup_alpha (1 - alpha - f(alpha)) ([MX] Thm. 4.1). Which
counterfactual functional is capped depends on the neighbouring relation ([MX] App. A):

  replace-one guarantee f   -> RO  (plug-in replace-one, Def. 3.2): eta(f)        [Thm. 4.1]
  add/remove guarantee f    -> LOO (leave-one-out):                  eta(f)        [Prop. A.1]
                            -> RO  via one group step (a replacement is a removal plus an
                               addition):                             eta(f^(2))   [Cor. 4.3]
  k copies                  -> the group curve f^(k) (f^(2k) for RO under add/remove); for
                               pure DP the exact constant is the staircase eta*_k  [Lemma 4.4]
  COND (population-conditional) -> RO cap + 4np when n p <= 1/2 and training is
                               permutation-invariant                              [Prop. A.2]

A replace-one guarantee says nothing about LOO (the two datasets differ in size).

Pure math: numpy/scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .. import validate
from ..errors import DomainError
from ..jsonutil import ResultMixin
from .tradeoff import (
    TradeOff,
    _delta,
    _epsilon,
    _mu,
    exp_times,
    expit_neg,
    group,
    log_expit_neg,
    pure,
)

__all__ = [
    "Eta",
    "eta",
    "eta_pure",
    "eta_approx",
    "eta_gdp",
    "Staircase",
    "eta_star_k",
    "cap_map",
    "geometric_shift_tv",
    "MemorizationCap",
    "memorization_cap",
    "memorization_caps",
    "TruncationPrice",
    "truncation_price",
    "InSupportDamping",
    "in_support_damping",
    "FUNCTIONALS",
]

FUNCTIONALS = ("RO", "LOO", "COND")


# --------------------------------------------------------------------------- closed forms
def eta_pure(epsilon: float) -> float:
    """eta(f_eps) = tanh(eps/2), attained at alpha = 1/(e^eps + 1) ([MX] Lemma B.1).

    >>> round(eta_pure(1.0), 6)
    0.462117
    """
    return math.tanh(_epsilon(epsilon) / 2.0)


def eta_approx(epsilon: float, delta: float) -> float:
    """eta(f_{eps,delta}) = delta + (1 - delta) tanh(eps/2), at alpha = (1-delta)/(e^eps+1) ([MX] Lemma B.2).

    >>> eta_approx(1.0, 0.0) == eta_pure(1.0), round(eta_approx(1.0, 0.1), 6)
    (True, 0.515905)
    """
    e, d = _epsilon(epsilon), _delta(delta)
    return d + (1.0 - d) * math.tanh(e / 2.0)


def eta_gdp(mu: float) -> float:
    """eta(G_mu) = 2 Phi(mu/2) - 1 = TV(N(0,1), N(mu,1)), at alpha = Phi(-mu/2) ([MX] Lemma B.3).

    >>> round(eta_gdp(1.0), 6)
    0.382925
    """
    m = _mu(mu)
    # 2 Phi(mu/2) - 1 = Phi(mu/2) - Phi(-mu/2); erf avoids the cancellation at small mu.
    return math.erf(m / (2.0 * math.sqrt(2.0)))


def _closed_form(f: TradeOff):
    """(eta, maximizer alpha, log alpha, lemma): alpha = 1/(e^eps + 1) underflows past eps ~ 745,
    so its log is carried too."""
    if f.kind == "pure":
        e = f._known_epsilon
        return eta_pure(e), expit_neg(e), log_expit_neg(e), "Lemma B.1"
    if f.kind == "approx":
        e, d = f._known_epsilon, f._known_delta
        return (
            eta_approx(e, d),
            (1.0 - d) * expit_neg(e),
            math.log1p(-d) + log_expit_neg(e),
            "Lemma B.2",
        )
    if f.kind == "gdp":
        mu = f._known_mu
        return (
            eta_gdp(mu),
            float(stats.norm.cdf(-mu / 2.0)),
            float(stats.norm.logcdf(-mu / 2.0)),
            "Lemma B.3",
        )
    if f.kind == "group" and f._known_base.kind == "pure":
        st = eta_star_k(epsilon=f._known_base._known_epsilon, k=f.k)
        return st.value, st.x_star, st.log_x_star, "Lemma 4.4"
    return None


# --------------------------------------------------------------------------- eta(f)
@dataclass(frozen=True)
class Eta(ResultMixin):
    """eta(f) = sup_alpha (1 - alpha - f(alpha)) and a maximizing alpha ([MX] §3.1, Thm. 4.1)."""

    value: float
    alpha: float
    method: str  # 'closed-form (Lemma B.x)' | 'numeric' | 'vertices'
    curve: str
    neighbors: str
    log_alpha: float | None = None  # natural log of alpha (alpha underflows for large epsilon)


def _advantage(f: TradeOff, a):
    # 1 - alpha - f(alpha) = power(alpha) - alpha, with power computed without cancellation
    return np.asarray(f.power(a)) - np.asarray(a)


def eta(f: TradeOff, *, method: str = "auto", grid: int = 4097) -> Eta:
    """eta(f) with its maximizer.

    method='auto' uses the closed form where one exists (pure, approximate, GDP, pure group
    curves) and numeric maximization otherwise; 'numeric' forces the numeric route (used by
    the tests to check every closed form). Numeric: g(alpha) = 1 - alpha - f(alpha) is concave
    ([MX] App. B.2), so a grid argmax brackets the maximum and bounded Brent refines it;
    piecewise-linear curves are maximized exactly at their vertices.

    >>> from memclaim.privacy.caps import eta
    >>> from memclaim.privacy.tradeoff import pure
    >>> e = eta(pure(1.0, neighbors="replace-one"))
    >>> round(e.value, 4), round(e.alpha, 4)  # tanh(1/2) at 1/(e + 1), [MX] Lemma B.1
    (0.4621, 0.2689)
    """
    if not isinstance(f, TradeOff):
        raise DomainError(
            f"eta() takes a TradeOff, got {type(f).__name__}",
            hint="build one with memclaim.privacy.tradeoff.pure/approx/gdp/from_points",
        )
    if method not in ("auto", "numeric"):
        raise DomainError(f"unknown method {method!r}", hint="use 'auto' or 'numeric'")
    if method == "auto":
        cf = _closed_form(f)
        if cf is not None:
            v, a, la, ref = cf
            return Eta(
                float(v), float(a), f"closed-form ({ref})", f.describe(), f.neighbors, float(la)
            )
    if f.kind == "points":
        xs, _ = f._xy()
        g = _advantage(f, xs)
        i = int(np.argmax(g))
        return Eta(
            float(g[i]), float(xs[i]), "vertices", f.describe(), f.neighbors, _log(float(xs[i]))
        )
    grid = validate.integer("grid", grid, minimum=5)
    xs = np.linspace(0.0, 1.0, grid)
    g = _advantage(f, xs)
    i = int(np.argmax(g))
    lo, hi = float(xs[max(i - 1, 0)]), float(xs[min(i + 1, grid - 1)])
    best_a, best_v = float(xs[i]), float(g[i])
    a, v = _golden_max(lambda t: float(_advantage(f, t)), lo, hi)
    if v > best_v:
        best_a, best_v = a, v
    return Eta(max(best_v, 0.0), best_a, "numeric", f.describe(), f.neighbors, _log(best_a))


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _golden_max(fun, lo: float, hi: float, *, xtol: float = 1e-15, maxiter: int = 200):
    """Golden-section maximization of a concave function on [lo, hi].

    Hand-written because scipy's bounded Brent stops at a relative tolerance of sqrt(machine
    eps) ~ 1.5e-8, which leaves ~1e-9 error at the kink of a piecewise-linear g; golden section
    on a concave g (plateaus included) keeps shrinking the bracket to float resolution.
    """
    invphi = (math.sqrt(5.0) - 1.0) / 2.0
    c = hi - invphi * (hi - lo)
    d = lo + invphi * (hi - lo)
    fc, fd = fun(c), fun(d)
    for _ in range(maxiter):
        if hi - lo <= xtol:
            break
        if fc >= fd:
            hi, d, fd = d, c, fc
            c = hi - invphi * (hi - lo)
            fc = fun(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + invphi * (hi - lo)
            fd = fun(d)
    return (c, fc) if fc >= fd else (d, fd)


# --------------------------------------------------------------------------- the staircase
def cap_map(b: float | np.ndarray, *, epsilon: float) -> float | np.ndarray:
    """f-bar(b) = 1 - f_eps(b) = min(e^eps b, 1 - e^-eps (1 - b)) on [0, 1] ([MX] Lemma 4.4).

    >>> round(float(cap_map(0.1, epsilon=1.0)), 6)  # e * 0.1
    0.271828
    """
    e = _epsilon(epsilon)
    x = np.asarray(b, dtype=np.float64)
    out = np.minimum(exp_times(e, x), -math.expm1(-e) + math.exp(-e) * x)
    return float(out) if np.ndim(b) == 0 else out


@dataclass(frozen=True)
class Staircase(ResultMixin):
    """The exact k-copy constant eta*_k(eps) of pure eps-DP ([MX] Lemma 4.4, App. B.5).

    value = max_x f-bar^{o k}(x) - x; ``orbit`` = (b_0 = x_star, ..., b_k) attains it
    (b_{i+1} = f-bar(b_i)); ``naive`` = tanh(k eps/2), the unattainable naive group bound;
    ``geometric_tv`` = shift-k total variation of the two-sided geometric mechanism, which
    equals ``value`` for every k ([MX] App. B.5). Relation: replace-one, functional RO with k
    copies replaced by k fresh draws ([MX] Cor. 4.3).
    """

    epsilon: float
    k: int
    value: float
    naive: float
    gap: float
    parity: str
    formula: str
    x_star: float
    orbit: tuple[float, ...]
    geometric_tv: float
    log_x_star: float = 0.0  # natural log of x_star (x_star underflows for large epsilon)
    neighbors: str = "replace"
    functional: str = "RO"
    reference: str = "[MX] Lemma 4.4 (App. B.5)"


def geometric_shift_tv(*, epsilon: float, k: int) -> float:
    """TV between the two-sided geometric law p(n) = c r^|n| (r = e^-eps) and its shift by k.

    Computed from the mechanism's side ([MX] App. B.5), not from the staircase formula: the
    two tails n <= 0 and n >= k each contribute c (1 - r^k)/(1 - r) to sum |p(n) - p(n-k)|,
    and the k - 1 middle terms are summed directly; TV is half the total.

    >>> from memclaim.privacy.caps import geometric_shift_tv
    >>> round(geometric_shift_tv(epsilon=1.0, k=2), 3)  # eta*_2 at eps = 1 ([MX] Lemma 4.4: 0.632)
    0.632
    """
    eps = _epsilon(epsilon)
    k = validate.integer("k (shift)", k, minimum=1)
    r = math.exp(-eps)
    c = -math.expm1(-eps) / (1.0 + r)  # (1 - r)/(1 + r) = tanh(eps/2)
    tails = 2.0 * c * (-math.expm1(-k * eps)) / (-math.expm1(-eps))
    # |r^n - r^(k-n)| = r^min(n, k-n) (1 - r^|k - 2n|), with expm1 (no cancellation at small eps)
    middle = math.fsum(
        c * math.exp(-min(n, k - n) * eps) * -math.expm1(-abs(k - 2 * n) * eps) for n in range(1, k)
    )
    return 0.5 * (tails + middle)


def eta_star_k(*, epsilon: float, k: int) -> Staircase:
    """eta*_k(eps): 1 - e^{-k eps/2} (k even), 1 - 2 e^{-(k-1) eps/2}/(e^eps + 1) (k odd) ([MX] Lemma 4.4).

    >>> round(eta_star_k(epsilon=1.0, k=2).value, 6)  # 1 - e^-1
    0.632121
    """
    e = _epsilon(epsilon)
    k = validate.integer("k (copies)", k, minimum=1)
    log_c_star = log_expit_neg(
        e
    )  # breakpoint c* = 1/(e^eps + 1) of f-bar ([MX] App. B.5), in log space
    if k % 2 == 0:
        value = -math.expm1(-k * e / 2.0)
        # the maximum is flat on the region with k/2 lower steps; pick the orbit hitting c* exactly
        log_x = log_c_star - (k / 2.0) * e
        formula = "1 - e^{-k eps/2}"
        parity = "even"
    else:
        # 1 - 2 e^{-a}/(e^eps + 1), a = (k-1) eps/2, written as tanh(eps/2) + 2 (1 - e^{-a})/(e^eps + 1):
        # both terms are >= 0 (no cancellation at small eps) and nothing overflows at large eps.
        a = (k - 1) * e / 2.0
        value = math.tanh(e / 2.0) + 2.0 * -math.expm1(-a) * expit_neg(e)
        log_x = log_c_star - a  # x° = c* E^{-(k-1)/2}
        formula = "1 - 2 e^{-(k-1) eps/2} / (e^eps + 1)"
        parity = "odd"
    x_star = math.exp(log_x)
    orbit = [x_star]
    for _ in range(k):
        orbit.append(float(cap_map(orbit[-1], epsilon=e)))
    naive = math.tanh(k * e / 2.0)
    if k == 1:
        value = naive  # tanh(eps/2): the two closed forms agree exactly at k = 1 ([MX] Lemma 4.4)
    return Staircase(
        e,
        k,
        value,
        naive,
        naive - value,
        parity,
        formula,
        x_star,
        tuple(orbit),
        geometric_shift_tv(epsilon=e, k=k),
        log_x,
    )


# --------------------------------------------------------------------------- relation-aware caps
@dataclass(frozen=True)
class MemorizationCap(ResultMixin):
    """A cap on |mem_h| for bounded h in [0, 1], naming relation, functional and theorem.

    ``value`` is None when the guarantee implies no cap on that functional (``reason`` says why).
    ``hops`` is the number of neighbour steps between the functional's two branches (the group
    size of the curve used: k for RO under replace-one and LOO under add/remove, 2k for RO
    under add/remove).
    ``alpha`` is the level attaining eta on the curve used; ``naive`` (pure DP, k >= 2) is
    tanh(k eps/2) for comparison.
    """

    functional: str
    neighbors: str
    copies: int
    value: float | None
    curve: str
    theorem: str
    hops: int | None = None  # neighbour steps between the two branches (group size used)
    alpha: float | None = None
    naive: float | None = None
    tight: bool = False
    reason: str = ""

    @property
    def implied(self) -> bool:
        return self.value is not None


def _group_steps(f: TradeOff, functional: str, copies: int) -> tuple[int | None, str]:
    """Number of neighbour steps separating the two branches of the functional."""
    if functional == "RO":
        if f.neighbors == "replace":
            return copies, (
                "[MX] Thm. 4.1"
                if copies == 1
                else "[MX] Cor. 4.3 / Lemma 4.4 (group of k replace-one steps)"
            )
        return 2 * copies, (
            "[MX] Thm. 4.1 via one group step f^(2) (replace = remove + add)"
            if copies == 1
            else "[MX] Cor. 4.3 with 2k add/remove steps"
        )
    if functional == "LOO":
        if f.neighbors == "add-remove":
            return copies, (
                "[MX] Prop. A.1" if copies == 1 else "[MX] Prop. A.1 with a group of k additions"
            )
        return None, (
            "a replace-one guarantee does not bound leave-one-out memorization: the two "
            "datasets differ in size, so they are not replace-one neighbours ([MX] App. A)"
        )
    raise DomainError(f"unknown functional {functional!r}", hint=f"one of {FUNCTIONALS}")


def memorization_cap(
    f: TradeOff,
    *,
    functional: str = "RO",
    copies: int = 1,
    n: int | None = None,
    frequency: float | None = None,
) -> MemorizationCap:
    """Cap on counterfactual memorization of a bounded score under guarantee f.

    functional: 'RO' (plug-in replace-one, [MX] Def. 3.2), 'LOO' or 'COND' ([MX] App. A).
    copies: the target occurs k times (k-hop; [MX] Cor. 4.3, Lemma 4.4).
    COND needs the dataset size n and the target's corpus frequency p with n p <= 1/2
    ([MX] Prop. A.2, permutation-invariant training), and copies = 1.

    >>> from memclaim.privacy.caps import memorization_cap
    >>> from memclaim.privacy.tradeoff import pure
    >>> c = memorization_cap(pure(1.0, neighbors="replace-one"), copies=2)
    >>> round(c.value, 3), round(c.naive, 3)  # exact 0.632 against the naive tanh(k eps/2) = 0.762
    (0.632, 0.762)
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"memorization_cap() takes a TradeOff, got {type(f).__name__}")
    functional = str(functional).upper()
    copies = validate.integer("copies", copies, minimum=1)
    if functional == "COND":
        if copies != 1:
            raise DomainError(
                f"the COND conversion ([MX] Prop. A.2) is for a single target, got copies={copies}"
            )
        if n is None or frequency is None:
            return MemorizationCap(
                "COND",
                f.neighbors,
                1,
                None,
                f.describe(),
                "[MX] Prop. A.2",
                reason="COND is capped via RO + 4 n p ([MX] Prop. A.2): pass the dataset "
                "size n and the target's corpus frequency p",
            )
        n = validate.integer("n (dataset size)", n, minimum=1)
        p = validate.in_unit("frequency", frequency, lo_open=True)
        if n * p > 0.5:
            return MemorizationCap(
                "COND",
                f.neighbors,
                1,
                None,
                f.describe(),
                "[MX] Prop. A.2",
                reason=f"n p = {n * p:g} > 1/2: Prop. A.2 needs n p <= 1/2 (frequent targets "
                "are where COND and RO genuinely differ, Remark A.3)",
            )
        ro = memorization_cap(f, functional="RO")
        # RO of one copy is a closed form or a curve's eta: always a number, never refused
        assert ro.value is not None
        v = min(1.0, ro.value + 4.0 * n * p)
        return MemorizationCap(
            "COND",
            f.neighbors,
            1,
            v,
            ro.curve,
            f"{ro.theorem} + [MX] Prop. A.2 (+4np)",
            hops=ro.hops,
            alpha=ro.alpha,
            reason="requires permutation-invariant training",
        )
    steps, ref = _group_steps(f, functional, copies)
    if steps is None:
        return MemorizationCap(
            functional, f.neighbors, copies, None, f.describe(), "[MX] App. A", reason=ref
        )
    g = group(f, steps)
    e = eta(g)
    naive = math.tanh(steps * f._known_epsilon / 2.0) if f.kind == "pure" and steps >= 2 else None
    # tightness: Thm. 4.1 (k = 1, replace) and Lemma 4.4 (pure, any k) are attained
    tight = f.neighbors == "replace" and functional == "RO" and (copies == 1 or f.kind == "pure")
    return MemorizationCap(
        functional,
        f.neighbors,
        copies,
        e.value,
        g.describe(),
        ref,
        hops=steps,
        alpha=e.alpha,
        naive=naive,
        tight=tight,
    )


def memorization_caps(
    f: TradeOff, *, copies: int = 1, n: int | None = None, frequency: float | None = None
) -> tuple[MemorizationCap, ...]:
    """RO, LOO and COND caps for guarantee f (entries with value None say why nothing is implied).

    >>> from memclaim.privacy.caps import memorization_caps
    >>> from memclaim.privacy.tradeoff import pure
    >>> [(c.functional, c.value if c.value is None else round(c.value, 4))
    ...  for c in memorization_caps(pure(1.0, neighbors="replace-one"))]
    [('RO', 0.4621), ('LOO', None), ('COND', None)]
    """
    return tuple(
        memorization_cap(
            f, functional=fn, copies=copies if fn != "COND" else 1, n=n, frequency=frequency
        )
        for fn in FUNCTIONALS
    )


# --------------------------------------------------------------------------- truncation, damping
@dataclass(frozen=True)
class TruncationPrice(ResultMixin):
    """Cap for log-loss truncated at M: |mem| <= M eta(f) ([MX] Thm. 4.1, App. B.4)."""

    value: float
    M: float
    eta: float
    curve: str
    neighbors: str
    functional: str = "RO"
    exact: bool = True
    reference: str = "[MX] App. B.4: the linear price in M is attained (randomized-response canary)"


def truncation_price(
    f: TradeOff | None = None, *, M: float, epsilon: float | None = None
) -> TruncationPrice:
    """M eta(f) for a [0, M]-valued score such as log-loss truncated at M; pure eps-DP: M tanh(eps/2).

    Pass either a TradeOff ``f`` or ``epsilon`` (pure DP under replace-one). Unbounded scores
    have no cap at all ([MX] App. B.4).

    >>> from memclaim.privacy.caps import truncation_price
    >>> round(truncation_price(M=10, epsilon=1.0).value, 4)  # M tanh(eps/2)
    4.6212
    """
    Mv = validate.positive("M (truncation level)", M)
    if (f is None) == (epsilon is None):
        raise DomainError("pass exactly one of f (a TradeOff) or epsilon")
    if f is None:
        assert epsilon is not None  # exactly one of f, epsilon was passed (checked above)
        f = pure(epsilon, neighbors="replace")
    e = eta(f)
    functional = "RO" if f.neighbors == "replace" else "LOO"
    return TruncationPrice(Mv * e.value, Mv, e.value, f.describe(), f.neighbors, functional)


@dataclass(frozen=True)
class InSupportDamping(ResultMixin):
    """In-support targets ([MX] Remark B.7).

    ``attained`` = (1 - omega)^n eta(f): the exact memorization of the extremal mechanism of
    Thm. 4.1 when the target has corpus mass omega. ``bound`` = (1 - omega) eta(f) is what
    holds for every f-DP mechanism (the fresh draw x' equals x with probability omega, and then
    the two branches coincide); (1 - omega)^n is not an upper bound for every mechanism.
    """

    attained: float
    bound: float
    damping: float
    eta: float
    omega: float
    n: int
    neighbors: str
    functional: str = "RO"
    reference: str = "[MX] Remark B.7"


def in_support_damping(f: TradeOff, *, omega: float, n: int) -> InSupportDamping:
    """(1 - omega)^n eta(f) for a target of corpus mass omega in datasets of size n ([MX] Remark B.7).

    >>> from memclaim.privacy.caps import in_support_damping
    >>> from memclaim.privacy.tradeoff import pure
    >>> d = in_support_damping(pure(1.0, neighbors="replace-one"), omega=0.01, n=100)
    >>> round(d.damping, 4), round(d.bound, 4)
    (0.366, 0.4575)
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"in_support_damping() takes a TradeOff, got {type(f).__name__}")
    if f.neighbors != "replace":
        raise DomainError(
            "Remark B.7 is stated for the plug-in replace-one functional under a replace-one guarantee",
            hint="convert an add/remove guarantee first: group(f, 2) with neighbors 'replace'",
        )
    w = validate.in_unit("omega (corpus mass)", omega, hi_open=True)
    n = validate.integer("n (dataset size)", n, minimum=1)
    e = eta(f).value
    damp = math.exp(n * math.log1p(-w))  # (1 - omega)^n without underflow surprises
    return InSupportDamping(damp * e, (1.0 - w) * e, damp, e, w, n, f.neighbors)
