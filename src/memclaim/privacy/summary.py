"""Every quantity of [MX] §4-5 for one guarantee, as labelled rows (what `memclaim dp bounds` prints).

Each row names its neighbouring relation and, for memorization caps, the counterfactual
functional (RO, LOO, COND; [MX] App. A) and the theorem it comes from. Pure math.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import validate
from ..errors import DomainError
from ..jsonutil import ResultMixin
from .caps import eta, eta_star_k, in_support_damping, memorization_cap, truncation_price
from .extraction import alpha_star, entropy_threshold, extraction_bound, h_star
from .tradeoff import TradeOff, gdp_delta, group_conversion, neighbors_label

__all__ = ["Quantity", "BoundsSummary", "bounds_summary"]


@dataclass(frozen=True)
class Quantity(ResultMixin):
    """One printed number with its meaning attached."""

    name: str
    value: float | str | None
    relation: str          # 'replace-one' | 'add/remove' | '-' (relation-free, e.g. the prior)
    functional: str        # 'RO' | 'LOO' | 'COND' | 'Ext' | '-'
    reference: str
    note: str = ""
    # True: the constant is attained (the paper proves it sharp); False: a sufficient condition or
    # valid-but-loose bound only (every k-copy extraction row); None: not stated either way.
    exact: bool | None = None
    copies: int = 1


@dataclass(frozen=True)
class BoundsSummary(ResultMixin):
    guarantee: str
    neighbors: str
    rows: tuple[Quantity, ...]
    copies: int = 1

    def value(self, name: str):
        for r in self.rows:
            if r.name == name:
                return r.value
        raise KeyError(name)


def bounds_summary(f: TradeOff, *, copies: int = 1, m: int | None = None, tau: float | None = None,
                   kappa: float | None = None, truncation: float | None = None, omega: float | None = None,
                   n: int | None = None, frequency: float | None = None,
                   gdp_epsilon: float | None = None) -> BoundsSummary:
    """All memorization caps and extraction-boundary quantities for guarantee ``f``.

    copies: duplication k of the target; m: list size; tau: risk level; kappa: the canary's
    baseline kappa_pi(m); truncation: level M of a truncated log-loss; omega, n: in-support
    target mass and dataset size (Remark B.7); frequency (with n): COND conversion (Prop. A.2);
    gdp_epsilon: for a GDP guarantee, also report delta(eps).
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"bounds_summary() takes a TradeOff, got {type(f).__name__}")
    copies = validate.integer("copies", copies, minimum=1)
    rel = neighbors_label(f.neighbors)
    rows: list[Quantity] = []

    e = eta(f)
    rows.append(Quantity("eta(f)", e.value, rel, "RO" if f.neighbors == "replace" else "LOO",
                         "[MX] §3.1, Thm. 4.1", f"attained at alpha = {e.alpha:.6g} ({e.method})"))

    # ------------------------------------------------------------ memorization caps
    for fn in ("RO", "LOO"):
        cap = memorization_cap(f, functional=fn, copies=1)
        rows.append(Quantity(f"|mem_{fn}| cap", cap.value, rel, fn, cap.theorem,
                             cap.reason or ("tight, attained in H_loc" if cap.tight else ""),
                             (True if cap.tight else None) if cap.value is not None else None))
    cond = memorization_cap(f, functional="COND", n=n, frequency=frequency)
    rows.append(Quantity("|mem_COND| cap", cond.value, rel, "COND", cond.theorem, cond.reason))
    if copies > 1:
        for fn in ("RO", "LOO"):
            cap = memorization_cap(f, functional=fn, copies=copies)
            note = cap.reason
            if cap.naive is not None:
                note = f"naive group bound tanh({cap.hops} eps/2) = {cap.naive:.6g} (unattainable)"
            rows.append(Quantity(f"|mem_{fn}| cap, {copies} copies", cap.value, rel, fn, cap.theorem, note,
                                 (True if cap.tight else None) if cap.value is not None else None, copies))
        if f.kind == "pure":
            st = eta_star_k(epsilon=f.epsilon, k=copies)
            # Lemma 4.4 is about k-hop neighbours: RO with k copies under replace-one, LOO with
            # k copies under add/remove (RO under add/remove is 2k hops, the row above).
            fn = "RO" if f.neighbors == "replace" else "LOO"
            rows.append(Quantity(f"eta*_{copies}(eps) staircase", st.value, rel, fn,
                                 st.reference, f"{st.formula}; orbit from x = {st.x_star:.6g}; "
                                 f"geometric-mechanism TV = {st.geometric_tv:.6g}", True, copies))
            rows.append(Quantity(f"tanh({copies} eps/2) naive", st.naive, rel, fn,
                                 "[MX] Cor. 4.3", "group-privacy conversion eps -> k eps; not attainable", False,
                                 copies))
        if f.kind == "approx":
            ke, dk = group_conversion(epsilon=f.epsilon, delta=f.delta, k=copies)
            v = dk + (1.0 - dk) * math.tanh(ke / 2.0) if dk < 1 else 1.0
            rows.append(Quantity(f"(k eps, delta_k) cap, {copies} copies", min(v, 1.0), rel,
                                 "RO" if f.neighbors == "replace" else "LOO", "[MX] §8.2",
                                 f"lossy conversion to ({ke:.6g}, {dk:.3g})-DP; exact group curve above", False, copies))
    if truncation is not None:
        tp = truncation_price(f, M=truncation)
        rows.append(Quantity(f"log-loss truncated at M = {tp.M:g}", tp.value, rel, tp.functional,
                             "[MX] Thm. 4.1, App. B.4", "M eta(f); the linear price in M is exact"))
    if omega is not None:
        if n is None:
            raise DomainError("in-support damping needs both omega (target mass) and n (dataset size)")
        if f.neighbors == "replace":
            d = in_support_damping(f, omega=omega, n=n)
            rows.append(Quantity("in-support (1-omega)^n eta(f)", d.attained, rel, "RO", d.reference,
                                 f"attained by the extremal mechanism; every mechanism: <= (1-omega) eta = {d.bound:.6g}"))
        else:
            rows.append(Quantity("in-support (1-omega)^n eta(f)", None, rel, "RO", "[MX] Remark B.7",
                                 "stated for replace-one guarantees"))

    # ------------------------------------------------------------ extraction
    if copies == 1:
        rows += _extraction_rows_one_copy(f, rel, m=m, tau=tau, kappa=kappa)
    else:
        rows += _extraction_rows_k_copies(f, rel, copies, m=m, tau=tau, kappa=kappa)
    if gdp_epsilon is not None and f.kind == "gdp":
        d = gdp_delta(mu=f.mu, epsilon=gdp_epsilon)
        rows.append(Quantity(f"delta(eps) of mu-GDP at eps = {gdp_epsilon:g}", d, rel, "-",
                             "[6] Cor. 2.13", "exact (eps, delta) curve point of G_mu"))
    return BoundsSummary(f.describe(), f.neighbors, tuple(rows), copies)


def _extraction_rows_one_copy(f: TradeOff, rel: str, *, m, tau, kappa) -> list[Quantity]:
    rows: list[Quantity] = []
    if kappa is not None:
        eb = extraction_bound(kappa, f)
        note = f"relaxed form {eb.relaxed:.6g}" if eb.relaxed is not None else ""
        rows.append(Quantity(f"Ext bound 1 - f(kappa), kappa = {eb.kappa:.6g}", eb.value, rel, "Ext",
                             eb.theorem, note + ("; vacuous" if eb.vacuous else "")))
    if tau is not None:
        a = alpha_star(tau, f)
        rows.append(Quantity(f"alpha*(tau), tau = {a.tau:g}", a.value, rel, "Ext", a.theorem,
                             a.regime + ("" if a.regime_threshold is None else
                                         f" (regime switch at tau = {a.regime_threshold:.6g})"), a.exact))
        rows.append(Quantity(f"log10 alpha*(tau), tau = {a.tau:g}", a.log10_value, rel, "Ext", a.theorem,
                             "the same threshold in log space (alpha* underflows float64 past eps ~ 745)", a.exact))
        if a.replace_violation_above is not None:
            rows.append(Quantity("replace-one converse bracket, upper end", a.replace_violation_above, rel, "Ext",
                                 "[MX] Remark 5.4 / C.5",
                                 f"exact replace threshold in ({a.value:.6g}, {a.replace_violation_above:.6g}]; open"))
        if m is not None:
            mm = validate.integer("m (list size)", m, minimum=1)
            if f.kind == "pure":
                hs = h_star(epsilon=f.epsilon, m=mm, tau=tau, neighbors=f.neighbors)
                valid = ("sufficient for every prior; exact on uniform priors" if hs.exact_on_uniform else
                         "sufficient for every prior; NOT exact here" +
                         (f" (second regime: exact uniform threshold {hs.exact_uniform_bits:.6g} bits, Remark C.4)"
                          if hs.regime == "second" else
                          f" (replace-one: uniform priors below {hs.replace_necessary_bits:.6g} bits are unsafe; "
                          "bracket open)"))
                rows.append(Quantity(f"H* (bits), m = {mm}", hs.bits, rel, "Ext", hs.reference, valid,
                                     hs.exact_on_uniform))
            else:
                rows.append(Quantity(f"entropy threshold log2(m/alpha*) (bits), m = {mm}",
                                     entropy_threshold(f, m=mm, tau=tau), rel, "Ext", "[MX] Thm. 5.1(iii), App. C.4",
                                     "sufficient for every prior; exact on uniform priors under add/remove"
                                     if a.exact else "sufficient for every prior", a.exact))
        if kappa is not None:
            safe = a.admits(float(kappa))   # in log space: alpha* may lie below the float range
            rows.append(Quantity("baseline certified safe (kappa <= alpha*)", "yes" if safe else "no", rel, "Ext",
                                 "[MX] Thm. 5.1(iii), Cor. 5.5",
                                 "Ext <= tau for every f-DP release" if safe else
                                 "DP alone does not hold Ext <= tau here; canary successes may be prior guessing",
                                 a.exact))
    return rows


def _extraction_rows_k_copies(f: TradeOff, rel: str, k: int, *, m, tau, kappa) -> list[Quantity]:
    """Every extraction quantity for a secret planted k times: the k-fold group curve f^(k)
    ([MX] Cor. 4.3; the remark after Thm. 5.1). Sufficient conditions only, never exact."""
    rows: list[Quantity] = []
    sfx = f", {k} copies"
    why = f"{k}-fold group curve f^({k}) ([MX] Cor. 4.3); sufficient only, never exact (no converse for k copies)"
    if kappa is not None:
        eb = extraction_bound(kappa, f, copies=k)
        note = why + (f"; relaxed form {eb.relaxed:.6g}" if eb.relaxed is not None else "")
        rows.append(Quantity(f"Ext bound 1 - f^({k})(kappa){sfx}, kappa = {eb.kappa:.6g}", eb.value, rel, "Ext",
                             eb.theorem, note + ("; vacuous" if eb.vacuous else ""), False, k))
    if tau is not None:
        a = alpha_star(tau, f, copies=k)
        rows.append(Quantity(f"alpha*(tau){sfx}, tau = {a.tau:g}", a.value, rel, "Ext", a.theorem,
                             f"alpha* = (fbar^-1)^(o {k})(tau); {why}", False, k))
        rows.append(Quantity(f"log10 alpha*(tau){sfx}, tau = {a.tau:g}", a.log10_value, rel, "Ext", a.theorem,
                             "the same threshold in log space", False, k))
        if m is not None:
            mm = validate.integer("m (list size)", m, minimum=1)
            if f.kind == "pure":
                hs = h_star(epsilon=f.epsilon, m=mm, tau=tau, neighbors=f.neighbors, copies=k)
                rows.append(Quantity(f"H* = k eps log2 e + log2(m/tau) (bits){sfx}, m = {mm}", hs.bits, rel, "Ext",
                                     hs.reference, "sufficient for every prior (group privacy eps -> k eps); "
                                     f"not exact; the exact group curve needs only {hs.group_curve_bits:.6g} bits",
                                     False, k))
            rows.append(Quantity(f"entropy threshold log2(m/alpha*_(f^({k}))) (bits){sfx}, m = {mm}",
                                 entropy_threshold(f, m=mm, tau=tau, copies=k), rel, "Ext",
                                 "[MX] Thm. 5.1(iii) (sufficiency), Cor. 4.3", "sufficient for every prior; " + why,
                                 False, k))
        if kappa is not None:
            safe = a.admits(float(kappa))
            rows.append(Quantity(f"baseline certified safe (kappa <= alpha*){sfx}", "yes" if safe else "no", rel,
                                 "Ext", "[MX] Thm. 5.1(iii), Cor. 4.3",
                                 (f"Ext <= tau for every f-DP release of a secret planted {k} times (sufficient)"
                                  if safe else
                                  f"not certified: the {k}-copy bound does not hold Ext <= tau here; canary successes "
                                  "may be prior guessing (whether some f-DP release exceeds tau is open for k copies)"),
                                 False, k))
    return rows
