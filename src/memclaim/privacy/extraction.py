"""The extraction boundary ([MX] §5, Thm. 5.1, Cor. 5.3-5.5, Remarks 5.4, C.4-C.6).

Under an f-DP guarantee every adaptive extraction protocol with list budget m succeeds with
probability Ext <= 1 - f(kappa), kappa = kappa_pi(m) the oblivious baseline (the top-m prior
mass of the secret) ([MX] Thm. 5.1(i)). The bound holds under add/remove neighbours (the
theorem's setting) and verbatim under replace-one ([MX] Prop. C.2(a)). Its converse differs:

  add/remove: Ext <= tau for every prior with kappa_pi(m) <= kappa_0 iff kappa_0 <= alpha*(tau)
              (exact, [MX] Thm. 5.1(iii));
  replace:    sufficiency as above; violations are only known above alpha*_{f^{1/2}}(tau), so
              the exact threshold lies in the bracket (alpha*_f(tau), alpha*_{f^{1/2}}(tau)]
              ([MX] Remark 5.4 / C.5).

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
from ..numeric import clopper_pearson_bounds
from .tradeoff import (
    TradeOff,
    _alpha,
    _delta,
    _epsilon,
    approx,
    exp_times,
    expit_neg,
    gdp,
    group,
    group_conversion,
    normalize_neighbors,
    pure,
)

__all__ = [
    "group_curve_words",
    "extraction_bound_pure",
    "extraction_bound_approx",
    "extraction_bound_gdp",
    "ExtractionBound",
    "extraction_bound",
    "AlphaStar",
    "alpha_star",
    "alpha_star_pure",
    "group_square_root",
    "HStar",
    "h_star",
    "entropy_threshold",
    "EntropyVerdict",
    "entropy_verdict",
    "uniform_prior_kappa",
    "prior_is_safe",
    "clopper_pearson_lower",
    "AuditSoundness",
    "audit_soundness",
    "INDEPENDENCE",
]

LOG2E = 1.0 / math.log(2.0)

#: What every k-copy extraction quantity says about itself ([MX] Cor. 4.3 and the remark after Thm. 5.1).
K_COPY_NOTE = (
    "{k} copies: computed with the {k}-fold group curve f^({k}) = 1 - (1 - f)^(o {k}) ([MX] Cor. 4.3; "
    "remark after Thm. 5.1); a sufficient condition only: [MX] proves no converse for k copies, so "
    "this is never exact"
)


def _copies(copies) -> int:
    return validate.integer(
        "copies (occurrences of the secret in the training data)", copies, minimum=1
    )


def group_curve_for(f: TradeOff, copies: int) -> TradeOff:
    """The trade-off between the datasets with and without all k copies of the secret.

    They are k neighbour steps apart under either relation (k additions under add/remove; k
    replacements, each covered by Prop. C.2(a), under replace-one), so group privacy gives the
    k-fold group curve f^(k) ([MX] Cor. 4.3). k = 1 returns f itself.
    """
    return group(f, _copies(copies))


def _is_k_copy(g: TradeOff) -> bool:
    # a 'group' curve, or a points curve that group() built from a points curve (it records k)
    return g.kind in ("group", "points") and g.k > 1


def _kappa(kappa, name: str = "kappa (baseline)"):
    return _alpha(kappa, name)


def _theorem_for(neighbors: str) -> str:
    return (
        "[MX] Thm. 5.1(i)"
        if neighbors == "add-remove"
        else "[MX] Thm. 5.1(i) via Prop. C.2(a) (replace-one)"
    )


# --------------------------------------------------------------------------- the bound 1 - f(kappa)
def extraction_bound_pure(kappa: float | np.ndarray, *, epsilon: float) -> float | np.ndarray:
    """Ext <= min{1, e^eps kappa, 1 - e^-eps (1 - kappa)} <= e^eps kappa ([MX] Thm. 5.1(i), pure).

    >>> round(extraction_bound_pure(0.01, epsilon=1.0), 6)  # e * 0.01
    0.027183
    """
    a, scalar = _kappa(kappa)
    out = pure(epsilon, neighbors="add-remove")._power_array(a)
    return float(out) if scalar else out


def extraction_bound_approx(
    kappa: float | np.ndarray, *, epsilon: float, delta: float
) -> float | np.ndarray:
    """Ext <= min{1, delta + e^eps kappa, 1 - e^-eps (1 - delta - kappa)} ([MX] Thm. 5.1(i), (eps, delta)).

    >>> round(extraction_bound_approx(0.01, epsilon=1.0, delta=1e-3), 6)
    0.028183
    """
    a, scalar = _kappa(kappa)
    out = TradeOff(
        "approx", "add-remove", epsilon=_epsilon(epsilon), delta=_delta(delta)
    )._power_array(a)
    return float(out) if scalar else out


def extraction_bound_gdp(kappa: float | np.ndarray, *, mu: float) -> float | np.ndarray:
    """Ext <= Phi(Phi^-1(kappa) + mu) ([MX] Thm. 5.1(i), mu-GDP).

    >>> round(extraction_bound_gdp(0.5, mu=1.0), 6)  # Phi(1)
    0.841345
    """
    a, scalar = _kappa(kappa)
    out = gdp(mu, neighbors="add-remove")._power_array(a)
    return float(out) if scalar else out


@dataclass(frozen=True)
class ExtractionBound(ResultMixin):
    """Ext <= 1 - f(kappa) for every adaptive protocol with list budget m ([MX] Thm. 5.1(i)).

    ``relaxed`` is the simpler e^eps kappa (pure) or delta + e^eps kappa (approximate) form.
    The bound is attained for kappa = m/N by the subset-release gadget ([MX] Thm. 5.1(ii),
    Lemma 5.2; add/remove).
    """

    kappa: float
    value: float
    relaxed: float | None
    curve: str
    neighbors: str
    theorem: str
    vacuous: bool
    note: str = (
        "tight on the dense set kappa = m/N (subset-release gadget, [MX] Lemma 5.2); "
        "kappa must be the prior's top-m mass for the same list size m as the protocol"
    )
    copies: int = 1
    tight: bool = True  # attained on a dense set of baselines (one copy); False for k copies


def extraction_bound(kappa: float, f: TradeOff, *, copies: int = 1) -> ExtractionBound:
    """1 - f(kappa) for guarantee f, with the special forms of [MX] Thm. 5.1(i).

    ``copies`` = k >= 2: the secret occurs k times in the training data, and the bound is
    1 - f^(k)(kappa) with the k-fold group curve ([MX] Cor. 4.3), an upper bound only. Its relaxed
    form is then e^{k eps} kappa (pure) or delta_k + e^{k eps} kappa (approximate, [MX] §8.2).

    >>> from memclaim.privacy.extraction import extraction_bound
    >>> from memclaim.privacy.tradeoff import pure
    >>> round(extraction_bound(0.1, pure(1.0, neighbors="replace-one")).value, 4)  # e kappa
    0.2718
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"extraction_bound() takes a TradeOff, got {type(f).__name__}")
    k = validate.in_unit("kappa (baseline)", kappa)
    c = _copies(copies)
    g = group_curve_for(f, c)
    value = float(g.power(k))
    relaxed = None
    if f.kind == "pure":
        relaxed = exp_times(
            c * f._known_epsilon, k
        )  # may be +inf: the relaxed form is then vacuous
    elif f.kind == "approx":
        ke, dk = group_conversion(epsilon=f._known_epsilon, delta=f._known_delta, k=c)
        relaxed = dk + exp_times(ke, k)
    if c == 1:
        return ExtractionBound(
            k, value, relaxed, f.describe(), f.neighbors, _theorem_for(f.neighbors), value >= 1.0
        )
    return ExtractionBound(
        k,
        value,
        relaxed,
        g.describe(),
        f.neighbors,
        f"{_theorem_for(f.neighbors)} with the {c}-fold group curve ([MX] Cor. 4.3)",
        value >= 1.0,
        K_COPY_NOTE.format(k=c) + "; kappa is the prior's top-m mass for the "
        "protocol's list size m",
        c,
        False,
    )


# --------------------------------------------------------------------------- alpha*(tau)
def alpha_star_pure(tau: float, *, epsilon: float) -> float:
    """alpha*(tau) = e^-eps tau if tau <= e^eps/(e^eps+1), else 1 - e^eps (1 - tau) ([MX] Thm. 5.1(iii), App. C.4).

    >>> round(alpha_star_pure(0.1, epsilon=1.0), 6)  # e^-1 * 0.1
    0.036788
    """
    e = _epsilon(epsilon)
    t = validate.in_open_unit("tau (risk level)", tau)
    return math.exp(_log_alpha_star_pure(t, e, 0.0)[0])


def _log_alpha_star_pure(t: float, e: float, d: float) -> tuple[float, bool, float]:
    """(log alpha*, first regime?, tau_c) of f_{eps,delta} ([MX] Thm. 5.1(iii); App. C.4).

    1 - f(a) = min{1, d + e^e a, 1 - e^-e (1 - d - a)} <= tau  <=>  a <= (tau - d) e^-e  or
    a <= 1 - d - e^e (1 - tau); the branches cross at tau_c = (e^e + d)/(e^e + 1) (pure:
    e^e/(e^e + 1)), written (1 + d e^-e)/(1 + e^-e) so that nothing overflows. The first regime's
    value e^-e (tau - d) underflows past eps ~ 745, so it is returned as a log. For eps > 37,
    tau_c rounds to 1 and every float tau < 1 is (correctly) in the first regime.
    """
    r = math.exp(-e)
    tau_c = (1.0 + d * r) / (1.0 + r)
    if t <= tau_c:
        return (math.log(t - d) - e if t > d else -math.inf), True, tau_c
    v = 1.0 - d - exp_times(e, 1.0 - t)
    return (math.log(v) if v > 0 else -math.inf), False, tau_c


def group_square_root(f: TradeOff) -> TradeOff | None:
    """A curve g with g >= f and g^(2) >= f, used by the replace-neighbour converse ([MX] Remark C.5).

    pure: f_{eps/2} (as in the paper); GDP: G_{mu/2} (exact, G_{mu/2}^(2) = G_mu);
    (eps, delta): f_{eps/2, delta'} with delta' = delta/(1 + e^{eps/2}), valid by the group
    conversion of [MX] §8.2 ((eps/2, delta') -> (eps, delta' (e^{eps/2} + 1)) = (eps, delta)).
    None for other curves (no closed-form square root).

    >>> from memclaim.privacy.extraction import group_square_root
    >>> from memclaim.privacy.tradeoff import pure
    >>> g = group_square_root(pure(1.0, neighbors="replace-one"))
    >>> g.kind, g.epsilon  # f_{eps/2}
    ('pure', 0.5)
    """
    if f.kind == "pure":
        return pure(f._known_epsilon / 2.0, neighbors=f.neighbors)
    if f.kind == "gdp":
        return gdp(f._known_mu / 2.0, neighbors=f.neighbors)
    if f.kind == "approx":
        e, d = f._known_epsilon, f._known_delta
        return approx(e / 2.0, d * expit_neg(e / 2.0), neighbors=f.neighbors)
    return None


def _check_tau(tau, f: TradeOff) -> float:
    t = validate.in_open_unit("tau (risk level)", tau)
    floor = float(f.power(0.0))
    if t < floor and not f.no_floor:
        # (a curve marked no_floor: its 1 - f(0) is numerical slack, the mechanism's floor is 0;
        # alpha* is then 0 at this resolution, said so by _alpha_star_value, not refused)
        hint = (
            "under this guarantee even a baseline of 0 allows Ext up to 1 - f(0) (for (eps, delta)-DP: "
            "delta), so no risk level below it can be certified ([MX] Thm. 5.1(iii), Remark C.6)"
        )
        if _is_k_copy(f):
            hint = (
                f"with {f.k} copies the floor is 1 - f^({f.k})(0) (for (eps, delta)-DP it grows like "
                f"delta_k = delta (e^(k eps) - 1)/(e^eps - 1), [MX] §8.2): no risk level below it is certified "
                "for a secret planted that often; ask for a larger risk level or a guarantee with a smaller "
                "delta ([MX] Thm. 5.1(iii), Cor. 4.3)"
            )
        raise DomainError(
            f"tau = {t!r} is below 1 - f(0) = {floor!r} for {f.describe()}: no entropy condition helps",
            hint=hint,
        )
    return t


def _log_alpha_star_group(t: float, e: float, d: float, k: int) -> float:
    """log alpha* of the k-fold group curve of f_{eps,delta}: (fbar^-1)^{o k}(tau), fbar = 1 - f.

    fbar(b) = min{1, d + e^e b, 1 - e^-e (1 - d - b)} is nondecreasing, so fbar^{o k}(a) <= tau iff
    fbar^{o (k-1)}(a) <= fbar^-1(tau) with fbar^-1(y) = sup{b : fbar(b) <= y}
    = max{(y - d) e^-e, 1 - d - e^e (1 - y)} ([MX] Cor. 4.3 with Thm. 5.1(iii)). Iterated in log
    space: the value shrinks like e^{-k eps} tau and underflows long before it is meaningless.
    """
    ly = math.log(t)
    for _ in range(k):
        y = math.exp(ly)
        if d == 0.0:
            la = ly - e
        elif y > d:
            la = math.log(y - d) - e
        else:
            la = -math.inf
        b = 1.0 - d - exp_times(e, 1.0 - y)
        ly = max(la, math.log(b) if b > 0 else -math.inf)
        if ly == -math.inf:
            break
    return ly


def _alpha_star_value(tau: float, f: TradeOff) -> tuple[float, float, str, float | None]:
    """(alpha*, log alpha*, regime description, regime threshold tau_c)."""
    if f.kind == "group" and f._known_base.kind in ("pure", "approx"):
        la = _log_alpha_star_group(
            tau, f._known_base._known_epsilon, f._known_base.delta or 0.0, f.k
        )
        return (
            math.exp(la),
            la,
            f"{f.k}-fold group curve: alpha* = (fbar^-1)^(o {f.k})(tau), fbar = 1 - f",
            None,
        )
    if f.kind in ("pure", "approx"):
        d = f.delta or 0.0
        la, first, tau_c = _log_alpha_star_pure(tau, f._known_epsilon, d)
        if first:
            regime = (
                "first regime: alpha* = e^-eps tau"
                if d == 0
                else "first regime: alpha* = (tau - delta) e^-eps"
            )
        else:
            regime = (
                "second regime: alpha* = 1 - e^eps (1 - tau)"
                if d == 0
                else "second regime: alpha* = 1 - delta - e^eps (1 - tau)"
            )
        return math.exp(la), la, regime, tau_c
    if f.kind == "gdp":
        # Phi(Phi^-1(a) + mu) <= tau  <=>  a <= Phi(Phi^-1(tau) - mu); logcdf keeps huge mu finite
        z = float(stats.norm.ppf(tau)) - f._known_mu
        return (
            float(stats.norm.cdf(z)),
            float(stats.norm.logcdf(z)),
            "GDP: alpha* = Phi(Phi^-1(tau) - mu)",
            None,
        )
    if f.kind == "points":
        # piecewise linear: invert the (nondecreasing) power between the last vertex with
        # 1 - f <= tau and the next one, exactly
        xs, _ = f._xy()
        ps = f.vertex_powers()
        i = int(np.searchsorted(ps, tau, side="right")) - 1
        if (
            i < 0
        ):  # tau below 1 - f(0): only a no_floor curve gets here (_check_tau refuses the others)
            return (
                0.0,
                -math.inf,
                (
                    f"not resolved: 1 - f(0) = {ps[0]:.3g} of this curve is numerical slack (the "
                    "mechanism's floor is 0), above tau, so it certifies no alpha > 0; a finer "
                    "curve would"
                ),
                None,
            )
        if i >= len(xs) - 1:
            v = 1.0
        else:
            v = float(xs[i] + (tau - ps[i]) * (xs[i + 1] - xs[i]) / (ps[i + 1] - ps[i]))
        return (
            v,
            (math.log(v) if v > 0 else -math.inf),
            "piecewise linear: exact inverse of 1 - f",
            None,
        )
    # generic: sup{a : 1 - f(a) <= tau} by bisection on the nondecreasing power curve
    # (a hand-written bisection: the set is an interval [0, alpha*] and the power may be flat,
    # where root finders that need a sign change are ill-posed).
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(f.power(mid)) <= tau:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-16:
            break
    return (
        lo,
        (math.log(lo) if lo > 0 else -math.inf),
        "numeric: sup{alpha : 1 - f(alpha) <= tau}",
        None,
    )


@dataclass(frozen=True)
class AlphaStar(ResultMixin):
    """alpha*(tau) = sup{alpha : 1 - f(alpha) <= tau} and what it certifies ([MX] Thm. 5.1(iii)).

    Sufficiency (both relations): every prior with kappa_pi(m) <= alpha* has Ext <= tau.
    Exactness: under add/remove the threshold is exact ('iff', over priors and list budgets);
    under replace-one violations are only shown above ``replace_violation_above``
    (= alpha*_{f^{1/2}}(tau)), so the exact threshold lies in (value, replace_violation_above]
    ([MX] Remark 5.4 / C.5).
    """

    tau: float
    value: float
    regime: str
    regime_threshold: float | None
    curve: str
    neighbors: str
    exact: bool
    replace_violation_above: float | None
    theorem: str
    note: str = ""
    log_value: float = 0.0  # natural log of alpha* (alpha* = e^-eps tau underflows past eps ~ 745)
    copies: int = 1

    @property
    def log10_value(self) -> float:
        return self.log_value / math.log(10.0)

    def admits(self, kappa: float) -> bool:
        """kappa <= alpha*, compared in log space (both may lie below the float range)."""
        return kappa == 0.0 or (kappa > 0 and math.log(kappa) <= self.log_value)


def alpha_star(tau: float, f: TradeOff, *, copies: int = 1) -> AlphaStar:
    """alpha*(tau) for guarantee f, with regime, exactness and (replace-one) the converse bracket.

    ``copies`` = k >= 2: alpha* of the k-fold group curve f^(k) ([MX] Cor. 4.3): every prior with
    kappa_pi(m) <= alpha* keeps Ext <= tau for a secret planted k times. Sufficient only: the
    paper proves no converse for k copies, so the result is never exact and carries no bracket.

    >>> from memclaim.privacy.extraction import alpha_star
    >>> from memclaim.privacy.tradeoff import pure
    >>> a = alpha_star(0.1, pure(1.0, neighbors="replace-one"))
    >>> round(a.value, 4), round(a.replace_violation_above, 4)  # bracket [e^-1 tau, e^-1/2 tau]
    (0.0368, 0.0607)
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"alpha_star() takes a TradeOff, got {type(f).__name__}")
    c = _copies(copies)
    g = group_curve_for(f, c)
    if c > 1 or _is_k_copy(f):
        t = _check_tau(tau, g)
        v, log_v, regime, tau_c = _alpha_star_value(t, g)
        kk = c if c > 1 else f.k
        return AlphaStar(
            t,
            float(v),
            regime,
            tau_c,
            g.describe(),
            f.neighbors,
            False,
            None,
            "[MX] Thm. 5.1(iii) (sufficiency) with the group curve of Cor. 4.3",
            K_COPY_NOTE.format(k=kk),
            float(log_v),
            kk,
        )
    t = _check_tau(tau, f)
    v, log_v, regime, tau_c = _alpha_star_value(t, f)
    symmetric = f.symmetric_by_construction
    if f.neighbors == "add-remove":
        exact = symmetric
        upper = None
        note = (
            "exact threshold (iff) over priors and list budgets"
            if symmetric
            else "sufficient; exactness needs a symmetric f (see symmetrized())"
        )
        thm = "[MX] Thm. 5.1(iii)"
    else:
        exact = False
        half = group_square_root(f)
        upper = _alpha_star_value(_check_tau(t, half), half)[0] if half is not None else None
        note = (
            "replace-one: sufficient; violations shown only above alpha*_{f^1/2}(tau); the exact "
            "threshold inside the bracket is open ([MX] Remark 5.4 / C.5)"
        )
        if half is not None and f.kind == "approx":
            note += "; square root f_{eps/2, delta/(1+e^{eps/2})} (a valid, not necessarily optimal, choice)"
        thm = "[MX] Thm. 5.1(iii) + Prop. C.2(a), Remark C.5"
    if f.kind == "pure" and "second" in regime:
        note += "; second regime (tau > e^eps/(e^eps+1)): the naive entropy formula H* is not necessary here ([MX] Remark C.4)"
    return AlphaStar(
        t, float(v), regime, tau_c, f.describe(), f.neighbors, exact, upper, thm, note, float(log_v)
    )


# --------------------------------------------------------------------------- the entropy threshold
@dataclass(frozen=True)
class HStar(ResultMixin):
    """H* = eps log2 e + log2(m/tau) bits ([MX] Thm. 5.1(iii), App. C.4), with its validity.

    - sufficient for every prior and every tau (via kappa_pi(m) <= m 2^-H_inf): H_inf >= H*
      implies Ext <= tau under pure eps-DP, for either relation;
    - exact on uniform priors (add/remove) only in the first regime tau <= e^eps/(e^eps+1);
      in the second regime the exact uniform threshold is ``exact_uniform_bits`` =
      log2(m/alpha*(tau)) < H* ([MX] Remark C.4);
    - replace-one: uniform priors below ``replace_necessary_bits`` (= log2(m/alpha*_{eps/2}(tau)))
      are unsafe; in between is the open bracket ([MX] Remark 5.4).
    """

    bits: float
    epsilon: float
    m: int
    tau: float
    regime: str
    regime_threshold: float
    sufficient_for_every_prior: bool
    exact_on_uniform: bool
    exact_uniform_bits: float | None
    replace_necessary_bits: float | None
    neighbors: str
    reference: str = "[MX] Thm. 5.1(iii), App. C.4"
    copies: int = 1
    group_curve_bits: float | None = None
    note: str = ""


def group_curve_words(bits: float, group_bits: float) -> str:
    """What the exact k-fold group curve says next to H* = k eps log2 e + log2(m/tau): it needs
    fewer bits, or (within display precision) the same number.

    >>> group_curve_words(8.207316, 8.207316), group_curve_words(9.1, 7.25)
    ('not exact in general; here the exact group curve needs the same 8.20732 bits', 'not exact; the exact group curve needs only 7.25 bits')
    """
    if (
        math.isclose(bits, group_bits, rel_tol=1e-6, abs_tol=1e-9)
        or f"{bits:.6g}" == f"{group_bits:.6g}"
    ):
        return (
            f"not exact in general; here the exact group curve needs the same {group_bits:.6g} bits"
        )
    return f"not exact; the exact group curve needs only {group_bits:.6g} bits"


def h_star(
    *, epsilon: float, m: int, tau: float, neighbors: str = "add-remove", copies: int = 1
) -> HStar:
    """H* = eps log2 e + log2(m/tau) for pure eps-DP, list size m, risk tau ([MX] Thm. 5.1(iii)).

    ``copies`` = k >= 2 (the secret planted k times): H* = k eps log2 e + log2(m/tau), the form of
    the remark after Thm. 5.1 (group privacy eps -> k eps: 1 - f^(k)(kappa) <= e^{k eps} kappa).
    ``group_curve_bits`` = log2(m / alpha*_{f^(k)}(tau)) is the (never larger) threshold of the
    exact group curve ([MX] Cor. 4.3). Both are sufficient for every prior; neither is exact, and
    the replace-one necessity bound does not carry over (no converse is proved for k copies).

    >>> from memclaim.privacy.extraction import h_star
    >>> round(h_star(epsilon=4.0, m=1, tau=0.1).bits, 2)  # [MX] §8: H* = 9.09 bits at eps = 4
    9.09
    """
    e = _epsilon(epsilon)
    m = validate.integer("m (list size)", m, minimum=1)
    t = validate.in_open_unit("tau (risk level)", tau)
    rel = normalize_neighbors(neighbors)
    c = _copies(copies)
    if c > 1:
        bits = c * e * LOG2E + math.log2(
            m / t
        )  # [MX] remark after Thm. 5.1: H_inf >~ k eps log2 e + log2(m/tau)
        _, first, tau_c = _log_alpha_star_pure(t, c * e, 0.0)
        gbits = math.log2(m) - _log_alpha_star_group(t, e, 0.0, c) * LOG2E
        return HStar(
            bits,
            e,
            m,
            t,
            "first" if first else "second",
            tau_c,
            True,
            False,
            None,
            None,
            rel,
            "[MX] remark after Thm. 5.1 (group privacy), Cor. 4.3",
            c,
            gbits,
            K_COPY_NOTE.format(k=c) + "; " + group_curve_words(bits, gbits),
        )
    bits = e * LOG2E + math.log2(m / t)
    la, first, tau_c = _log_alpha_star_pure(t, e, 0.0)
    exact_bits = math.log2(m) - la * LOG2E  # log2(m / alpha*), from log alpha* (no underflow)
    replace_bits = None
    if rel == "replace":
        replace_bits = math.log2(m) - _log_alpha_star_pure(t, e / 2.0, 0.0)[0] * LOG2E
    return HStar(
        bits,
        e,
        m,
        t,
        "first" if first else "second",
        tau_c,
        True,
        first and rel == "add-remove",
        exact_bits,
        replace_bits,
        rel,
        group_curve_bits=exact_bits,
    )


def entropy_threshold(f: TradeOff, *, m: int, tau: float, copies: int = 1) -> float:
    """log2(m / alpha*_f(tau)) bits: min-entropy above which every prior is safe at risk tau.

    Sufficient for every prior (dictionary kappa_pi(m) <= m 2^-H_inf) and, for symmetric f
    under add/remove, exact on uniform priors ([MX] App. C.4). Equals H* for pure DP in the
    first regime. ``copies`` = k >= 2 uses alpha* of the group curve f^(k) (sufficient only).

    >>> from memclaim.privacy.extraction import entropy_threshold
    >>> from memclaim.privacy.tradeoff import pure
    >>> round(entropy_threshold(pure(1.0, neighbors="add-remove"), m=4, tau=0.1), 4)  # = H* (first regime)
    6.7646
    """
    m = validate.integer("m (list size)", m, minimum=1)
    return (
        math.log2(m) - alpha_star(tau, f, copies=copies).log_value * LOG2E
    )  # log2(m / alpha*), in log space


@dataclass(frozen=True)
class EntropyVerdict(ResultMixin):
    """Is a canary of min-entropy H_inf above the threshold (certified safe at risk tau)?"""

    min_entropy_bits: float
    threshold_bits: float
    above: bool
    margin_bits: float
    kappa_envelope: float
    ext_bound: float
    m: int
    tau: float
    curve: str
    neighbors: str
    meaning: str
    copies: int = 1


def entropy_verdict(
    *, min_entropy_bits: float, f: TradeOff, m: int, tau: float, copies: int = 1
) -> EntropyVerdict:
    """Place a canary by min-entropy: above the threshold, Ext <= tau for every f-DP release.

    Below it nothing is certified: a successful extraction of such a canary may be the prior,
    not leakage ([MX] Cor. 5.3). ``ext_bound`` is 1 - f(min(1, m 2^-H_inf)), the bound from the
    entropy envelope of the baseline. ``copies`` = k >= 2 (a canary planted k times) uses the
    group curve f^(k) for both ([MX] Cor. 4.3): sufficient only.

    >>> from memclaim.privacy.extraction import entropy_verdict
    >>> from memclaim.privacy.tradeoff import pure
    >>> v = entropy_verdict(min_entropy_bits=10.0, f=pure(1.0, neighbors="add-remove"), m=4, tau=0.1)
    >>> v.above, round(v.ext_bound, 4)  # a 10-bit canary is held to about 1% ([MX] §8)
    (True, 0.0106)
    """
    h = validate.nonneg("min_entropy_bits", min_entropy_bits)
    m = validate.integer("m (list size)", m, minimum=1)
    c = _copies(copies)
    g = group_curve_for(f, c)
    thr = entropy_threshold(f, m=m, tau=tau, copies=c)
    kap = min(1.0, m * 2.0 ** (-h))
    ext = float(g.power(kap))
    above = h >= thr
    meaning = (
        "above threshold: extraction held below tau for every prior with this min-entropy"
        if above
        else "below threshold: DP does not hold extraction below tau for every such prior; "
        "a canary success here can be prior guessing, not evidence of memorization ([MX] Cor. 5.3)"
    )
    if c > 1:
        meaning += "; " + K_COPY_NOTE.format(k=c)
    return EntropyVerdict(
        h, thr, above, h - thr, kap, ext, m, float(tau), g.describe(), f.neighbors, meaning, c
    )


def uniform_prior_kappa(*, support_size: int, m: int) -> float:
    """kappa_pi(m) = m/N for a uniform prior on N candidates (needs m < N; [MX] Lemma 5.2).

    >>> uniform_prior_kappa(support_size=10_000, m=4)
    0.0004
    """
    N = validate.integer("support size N", support_size, minimum=1)
    m = validate.integer("m (list size)", m, minimum=1)
    if m >= N:
        raise DomainError(
            f"list size m = {m} >= support size N = {N}: the list exhausts the support and Ext = 1 trivially",
            hint="use m < N; with m >= N no DP guarantee limits extraction and no audit can use the canary",
        )
    return m / N


def prior_is_safe(kappa: float, f: TradeOff, *, tau: float, copies: int = 1) -> bool:
    """kappa <= alpha*(tau): every f-DP release keeps Ext <= tau under this prior ([MX] Thm. 5.1(iii) (<=)).

    ``copies`` = k >= 2: with the group curve f^(k) ([MX] Cor. 4.3); True is then a sufficient
    verdict, and False does not show that some f-DP release is unsafe (no converse for k copies).

    >>> f = pure(1.0, neighbors="add-remove")
    >>> prior_is_safe(0.03, f, tau=0.1), prior_is_safe(0.04, f, tau=0.1)  # alpha* = 0.0368
    (True, False)
    """
    k = validate.in_unit("kappa (baseline)", kappa)
    return alpha_star(tau, f, copies=copies).admits(k)


# --------------------------------------------------------------------------- audit soundness
INDEPENDENCE = {
    "separate-runs": (
        "each trial is an independent training run with a freshly drawn canary secret z ~ pi "
        "(i.i.d. Bernoulli(Ext) outcomes); the Clopper-Pearson bound is then exact"
    ),
    "one-run": (
        "one training run with many independently drawn canaries, analysed as in [MX] ref. [35] "
        "(Steinke, Nasr, Jagielski 2023): assumes the success count is stochastically dominated by "
        "Binomial(trials, 1 - f(kappa_hi)) as [35] proves for membership guesses under DP; for "
        "extraction successes this dominance is an assumption of the audit, not a theorem shown here"
    ),
}


def clopper_pearson_lower(successes: int, trials: int, *, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper-Pearson) lower confidence bound on a binomial rate
    (:func:`memclaim.numeric.clopper_pearson_bounds`).

    >>> clopper_pearson_lower(0, 40), round(clopper_pearson_lower(40, 40), 4)  # 0.05 ** (1/40)
    (0.0, 0.9278)
    """
    n = validate.integer("trials", trials, minimum=1)
    k = validate.integer("successes", successes, minimum=0, maximum=n)
    c = validate.in_open_unit("confidence", confidence)
    if k == 0:
        return 0.0
    return float(clopper_pearson_bounds(k, n, confidence=c, side="lower")[0])


@dataclass(frozen=True)
class AuditSoundness(ResultMixin):
    """Can an extraction audit refute a claimed f-DP guarantee? ([MX] Cor. 5.3)

    The claim implies Ext <= ``bound`` = 1 - f(kappa_hi) (upper end of the certified baseline,
    same list size m). The audit refutes it when the lower confidence bound ``success_lower``
    on the success rate exceeds ``bound``. ``informative`` is Cor. 5.3's necessary condition
    kappa_hi <= alpha*(success_lower); when it fails, the successes are consistent with the
    claimed privacy (the canary's baseline explains them).
    """

    claimed: str
    neighbors: str
    m: int
    kappa_lo: float
    kappa_hi: float
    successes: int
    trials: int
    success_rate: float
    success_lower: float
    confidence: float
    bound: float
    refuted: bool
    informative: bool
    p_value: float
    min_trials_to_refute: int | None
    independence: str
    assumption: str
    verdict: str
    reference: str = "[MX] Thm. 5.1(i), Cor. 5.3"
    copies: int = 1


def _baseline_interval(kappa, kappa_interval, baseline, m) -> tuple[float, float]:
    given = sum(x is not None for x in (kappa, kappa_interval, baseline))
    if given != 1:
        raise DomainError(
            "pass exactly one of kappa, kappa_interval=(lo, hi) or baseline=<certified baseline result>"
        )
    if baseline is not None:
        for attr in ("kappa_lo", "kappa_hi", "m"):
            if not hasattr(baseline, attr):
                raise DomainError(
                    f"baseline must carry kappa_lo, kappa_hi and m (a BaselineResult), got {baseline!r}"
                )
        if int(baseline.m) != m:
            raise DomainError(
                f"the baseline was certified for list size m = {baseline.m} but the audit lists m = {m}",
                hint="kappa_pi(m) must be computed with the same list size as the extraction protocol",
            )
        lo, hi = float(baseline.kappa_lo), float(baseline.kappa_hi)
    elif kappa_interval is not None:
        try:
            lo, hi = kappa_interval
        except (TypeError, ValueError):
            raise DomainError(
                f"kappa_interval must be a pair (lo, hi), got {kappa_interval!r}"
            ) from None
    else:
        lo = hi = kappa
    lo = validate.in_unit("kappa_lo (baseline)", lo)
    hi = validate.in_unit("kappa_hi (baseline)", hi)
    if lo > hi:
        raise DomainError(f"baseline interval is reversed: kappa_lo = {lo!r} > kappa_hi = {hi!r}")
    return lo, hi


def audit_soundness(
    f: TradeOff,
    *,
    successes: int,
    trials: int,
    m: int,
    kappa: float | None = None,
    kappa_interval: tuple[float, float] | None = None,
    baseline: object = None,
    confidence: float = 0.95,
    independence: str = "separate-runs",
    copies: int = 1,
) -> AuditSoundness:
    """Check an extraction audit against a claimed guarantee f ([MX] Cor. 5.3).

    Give the canary baseline as ``kappa`` (known exactly, e.g. a uniform prior), a certified
    ``kappa_interval=(lo, hi)``, or a ``baseline`` result of
    :func:`memclaim.privacy.baseline.certify_baseline`; only the upper end kappa_hi is used
    (the bound 1 - f is nondecreasing, so this is the conservative side). ``m`` is the audit's
    list size and must be the one the baseline was computed for. The success rate enters
    through a one-sided Clopper-Pearson lower bound at ``confidence``; ``independence`` names
    the sampling assumption ('separate-runs' or 'one-run', see :data:`INDEPENDENCE`).
    ``copies`` = k >= 2: the canary was planted k times, so the claim implies only
    Ext <= 1 - f^(k)(kappa_hi) with the group curve ([MX] Cor. 4.3), and that is the bound the
    audit must exceed to refute it.

    >>> from memclaim.privacy.extraction import audit_soundness
    >>> from memclaim.privacy.tradeoff import pure
    >>> a = audit_soundness(pure(1.0, neighbors="add-remove"), successes=41, trials=100, m=4, kappa=0.355)
    >>> a.refuted, round(a.bound, 2)  # the Zipf canary of [MX] §8: 41% refutes nothing
    (False, 0.76)
    """
    if not isinstance(f, TradeOff):
        raise DomainError(
            f"audit_soundness() takes the claimed guarantee as a TradeOff, got {type(f).__name__}"
        )
    m = validate.integer("m (list size)", m, minimum=1)
    lo, hi = _baseline_interval(kappa, kappa_interval, baseline, m)
    n = validate.integer("trials", trials, minimum=1)
    k = validate.integer("successes", successes, minimum=0, maximum=n)
    conf = validate.in_open_unit("confidence", confidence)
    ind = str(independence).strip().lower()
    if ind not in INDEPENDENCE:
        raise DomainError(
            f"unknown independence assumption {independence!r}",
            hint=f"one of {sorted(INDEPENDENCE)}",
        )
    c = _copies(copies)
    g = group_curve_for(f, c)  # k copies: [MX] Cor. 4.3
    s_lo = clopper_pearson_lower(k, n, confidence=conf)
    bound = float(g.power(hi))  # [MX] Thm. 5.1(i) at the upper end of the certified baseline
    refuted = s_lo > bound
    # Cor. 5.3: refutation needs kappa_hi <= alpha*(s); alpha* is defined for s >= 1 - f(0)
    floor = float(g.power(0.0))
    # (refuted implies informative: s_lo > 1 - f(kappa_hi) puts kappa_hi inside [0, alpha*(s_lo)])
    informative = bool(
        0.0 < s_lo < 1.0
        and s_lo >= floor
        and (hi == 0.0 or math.log(hi) <= _alpha_star_value(s_lo, g)[1])
    )
    # exact one-sided binomial p-value of H0: rate <= bound, P[Binom(n, bound) >= k]
    p_value = float(stats.binom.sf(k - 1, n, bound)) if bound < 1.0 else 1.0
    if bound >= 1.0:
        min_n = None
    elif bound <= 0.0:
        min_n = 1
    else:
        # all-success audit: (1 - conf)^(1/n) > bound  <=>  n > log(1 - conf)/log(bound)
        min_n = int(math.floor(math.log(1.0 - conf) / math.log(bound))) + 1
    if refuted:
        verdict = (
            f"refuted: success rate >= {s_lo:.4g} at {conf:.0%} confidence exceeds the bound "
            f"1 - f(kappa_hi) = {bound:.4g} implied by the claim"
        )
    elif bound >= 1.0:
        verdict = (
            "cannot refute: the canary's baseline makes the bound vacuous (1 - f(kappa_hi) = 1); "
            "use a higher-entropy canary"
        )
    else:
        verdict = (
            f"not refuted: success lower bound {s_lo:.4g} <= bound {bound:.4g}; the observed successes "
            "are consistent with the claimed guarantee"
        )
    claimed = f.describe()
    ref = "[MX] Thm. 5.1(i), Cor. 5.3"
    if c > 1:
        claimed += (
            f"; canary planted {c} times: bound from the {c}-fold group curve ([MX] Cor. 4.3)"
        )
        ref += ", Cor. 4.3"
    return AuditSoundness(
        claimed,
        f.neighbors,
        m,
        lo,
        hi,
        k,
        n,
        k / n,
        s_lo,
        conf,
        bound,
        refuted,
        bool(informative),
        p_value,
        min_n,
        ind,
        INDEPENDENCE[ind],
        verdict,
        ref,
        c,
    )
