"""Every quantity of [MX] §4-5 for one guarantee, as labelled rows (what `memclaim dp bounds` prints).

Each row names its neighbouring relation and, for memorization caps, the counterfactual
functional (RO, LOO, COND; [MX] App. A) and the theorem it comes from. :func:`dp_bounds` is
the public entry point: a guarantee given as a trade-off curve, or a DP-SGD run (sigma, q, T)
whose curve comes from its privacy-loss distribution (:mod:`.pld`), with the (eps, delta)
route beside it, labelled as the looser one. Pure math.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import validate
from ..errors import DomainError
from ..jsonutil import ResultMixin
from .caps import eta, eta_star_k, in_support_damping, memorization_cap, truncation_price
from .extraction import alpha_star, entropy_threshold, extraction_bound, group_curve_words, h_star
from .pld import dpsgd_curve
from .tradeoff import TradeOff, check_group_cost, gdp_delta, group_conversion, neighbors_label

__all__ = ["Quantity", "BoundsSummary", "bounds_summary", "dp_bounds"]


@dataclass(frozen=True)
class Quantity(ResultMixin):
    """One printed number with its meaning attached."""

    name: str
    value: float | str | None
    relation: str  # 'replace-one' | 'add/remove' | '-' (relation-free, e.g. the prior)
    functional: str  # 'RO' | 'LOO' | 'COND' | 'Ext' | '-'
    reference: str
    note: str = ""
    # True: the constant is attained (the paper proves it sharp); False: a sufficient condition or
    # valid-but-loose bound only (every k-copy extraction row); None: not stated either way.
    exact: bool | None = None
    copies: int = 1
    source: str = (
        ""  # where the number comes from: a closed form, the DP-SGD curve and its grid, ...
    )
    # DP-SGD rows from the curve: the same quantity from the optimistic curve (never below the true
    # one), so the exact value lies between ``value`` and ``optimistic``: the certified accuracy
    optimistic: float | None = None

    @property
    def bracket(self) -> tuple[float, float] | None:
        """(low, high) around the exact value, for a DP-SGD row computed from both curves."""
        if self.optimistic is None or not isinstance(self.value, float):
            return None
        return (min(self.value, self.optimistic), max(self.value, self.optimistic))


@dataclass(frozen=True)
class BoundsSummary(ResultMixin):
    guarantee: str
    neighbors: str
    rows: tuple[Quantity, ...]
    copies: int = 1
    mechanism: dict | None = (
        None  # DP-SGD: the curve's settings, grid, checks and (eps, delta) route
    )

    def value(self, name: str):
        for r in self.rows:
            if r.name == name:
                return r.value
        raise KeyError(name)


def bounds_summary(
    f: TradeOff,
    *,
    copies: int = 1,
    m: int | None = None,
    tau: float | None = None,
    kappa: float | None = None,
    truncation: float | None = None,
    omega: float | None = None,
    n: int | None = None,
    frequency: float | None = None,
    gdp_epsilon: float | None = None,
) -> BoundsSummary:
    """All memorization caps and extraction-boundary quantities for guarantee ``f``.

    copies: duplication k of the target; m: list size; tau: risk level; kappa: the canary's
    baseline kappa_pi(m); truncation: level M of a truncated log-loss; omega, n: in-support
    target mass and dataset size (Remark B.7); frequency (with n): COND conversion (Prop. A.2);
    gdp_epsilon: for a GDP guarantee, also report delta(eps).

    >>> from memclaim.privacy.summary import bounds_summary
    >>> from memclaim.privacy.tradeoff import pure
    >>> s = bounds_summary(pure(1.0, neighbors="add-remove"), m=4, tau=0.1)
    >>> [(q.name, round(q.value, 4)) for q in s.rows[:3]]
    [('eta(f)', 0.4621), ('|mem_RO| cap', 0.6321), ('|mem_LOO| cap', 0.4621)]
    """
    if not isinstance(f, TradeOff):
        raise DomainError(f"bounds_summary() takes a TradeOff, got {type(f).__name__}")
    copies = validate.integer("copies", copies, minimum=1)
    check_group_cost(
        f, copies
    )  # k-fold group curves cost ~k: refused before, not found out after hours
    rel = neighbors_label(f.neighbors)
    rows: list[Quantity] = []

    e = eta(f)
    rows.append(
        Quantity(
            "eta(f)",
            e.value,
            rel,
            "RO" if f.neighbors == "replace" else "LOO",
            "[MX] §3.1, Thm. 4.1",
            f"attained at alpha = {e.alpha:.6g} ({e.method})",
        )
    )

    # ------------------------------------------------------------ memorization caps
    for fn in ("RO", "LOO"):
        cap = memorization_cap(f, functional=fn, copies=1)
        rows.append(
            Quantity(
                f"|mem_{fn}| cap",
                cap.value,
                rel,
                fn,
                cap.theorem,
                cap.reason or ("tight, attained in H_loc" if cap.tight else ""),
                (True if cap.tight else None) if cap.value is not None else None,
            )
        )
    cond = memorization_cap(f, functional="COND", n=n, frequency=frequency)
    rows.append(Quantity("|mem_COND| cap", cond.value, rel, "COND", cond.theorem, cond.reason))
    if copies > 1:
        for fn in ("RO", "LOO"):
            cap = memorization_cap(f, functional=fn, copies=copies)
            note = cap.reason
            if cap.naive is not None:
                note = f"naive group bound tanh({cap.hops} eps/2) = {cap.naive:.6g} (unattainable)"
            rows.append(
                Quantity(
                    f"|mem_{fn}| cap, {copies} copies",
                    cap.value,
                    rel,
                    fn,
                    cap.theorem,
                    note,
                    (True if cap.tight else None) if cap.value is not None else None,
                    copies,
                )
            )
        if f.kind == "pure":
            st = eta_star_k(epsilon=f._known_epsilon, k=copies)
            # Lemma 4.4 is about k-hop neighbours: RO with k copies under replace-one, LOO with
            # k copies under add/remove (RO under add/remove is 2k hops, the row above).
            fn = "RO" if f.neighbors == "replace" else "LOO"
            rows.append(
                Quantity(
                    f"eta*_{copies}(eps) staircase",
                    st.value,
                    rel,
                    fn,
                    st.reference,
                    f"{st.formula}; orbit from x = {st.x_star:.6g}; "
                    f"geometric-mechanism TV = {st.geometric_tv:.6g}",
                    True,
                    copies,
                )
            )
            rows.append(
                Quantity(
                    f"tanh({copies} eps/2) naive",
                    st.naive,
                    rel,
                    fn,
                    "[MX] Cor. 4.3",
                    "group-privacy conversion eps -> k eps; not attainable",
                    False,
                    copies,
                )
            )
        if f.kind == "approx":
            ke, dk = group_conversion(epsilon=f._known_epsilon, delta=f._known_delta, k=copies)
            v = dk + (1.0 - dk) * math.tanh(ke / 2.0) if dk < 1 else 1.0
            rows.append(
                Quantity(
                    f"(k eps, delta_k) cap, {copies} copies",
                    min(v, 1.0),
                    rel,
                    "RO" if f.neighbors == "replace" else "LOO",
                    "[MX] §8.2",
                    f"lossy conversion to ({ke:.6g}, {dk:.3g})-DP; exact group curve above",
                    False,
                    copies,
                )
            )
    if truncation is not None:
        tp = truncation_price(f, M=truncation)
        rows.append(
            Quantity(
                f"log-loss truncated at M = {tp.M:g}",
                tp.value,
                rel,
                tp.functional,
                "[MX] Thm. 4.1, App. B.4",
                "M eta(f); the linear price in M is exact",
            )
        )
    if omega is not None:
        if n is None:
            raise DomainError(
                "in-support damping needs both omega (target mass) and n (dataset size)"
            )
        if f.neighbors == "replace":
            d = in_support_damping(f, omega=omega, n=n)
            rows.append(
                Quantity(
                    "in-support (1-omega)^n eta(f)",
                    d.attained,
                    rel,
                    "RO",
                    d.reference,
                    f"attained by the extremal mechanism; every mechanism: <= (1-omega) eta = {d.bound:.6g}",
                )
            )
        else:
            rows.append(
                Quantity(
                    "in-support (1-omega)^n eta(f)",
                    None,
                    rel,
                    "RO",
                    "[MX] Remark B.7",
                    "stated for replace-one guarantees",
                )
            )

    # ------------------------------------------------------------ extraction
    if copies == 1:
        rows += _extraction_rows_one_copy(f, rel, m=m, tau=tau, kappa=kappa)
    else:
        rows += _extraction_rows_k_copies(f, rel, copies, m=m, tau=tau, kappa=kappa)
    if gdp_epsilon is not None and f.kind == "gdp":
        gd = gdp_delta(mu=f._known_mu, epsilon=gdp_epsilon)
        rows.append(
            Quantity(
                f"delta(eps) of mu-GDP at eps = {gdp_epsilon:g}",
                gd,
                rel,
                "-",
                "[6] Cor. 2.13",
                "exact (eps, delta) curve point of G_mu",
            )
        )
    return BoundsSummary(f.describe(), f.neighbors, tuple(rows), copies)


def _extraction_rows_one_copy(f: TradeOff, rel: str, *, m, tau, kappa) -> list[Quantity]:
    rows: list[Quantity] = []
    if kappa is not None:
        eb = extraction_bound(kappa, f)
        note = f"relaxed form {eb.relaxed:.6g}" if eb.relaxed is not None else ""
        rows.append(
            Quantity(
                f"Ext bound 1 - f(kappa), kappa = {eb.kappa:.6g}",
                eb.value,
                rel,
                "Ext",
                eb.theorem,
                note + ("; vacuous" if eb.vacuous else ""),
            )
        )
    if tau is not None:
        a = alpha_star(tau, f)
        rows.append(
            Quantity(
                f"alpha*(tau), tau = {a.tau:g}",
                a.value,
                rel,
                "Ext",
                a.theorem,
                a.regime
                + (
                    ""
                    if a.regime_threshold is None
                    else f" (regime switch at tau = {a.regime_threshold:.6g})"
                ),
                a.exact,
            )
        )
        rows.append(
            Quantity(
                f"log10 alpha*(tau), tau = {a.tau:g}",
                a.log10_value,
                rel,
                "Ext",
                a.theorem,
                "the same threshold in log space (alpha* underflows float64 past eps ~ 745)",
                a.exact,
            )
        )
        if a.replace_violation_above is not None:
            rows.append(
                Quantity(
                    "replace-one converse bracket, upper end",
                    a.replace_violation_above,
                    rel,
                    "Ext",
                    "[MX] Remark 5.4 / C.5",
                    f"exact replace threshold in ({a.value:.6g}, {a.replace_violation_above:.6g}]; open",
                )
            )
        if m is not None:
            mm = validate.integer("m (list size)", m, minimum=1)
            if f.kind == "pure":
                hs = h_star(epsilon=f._known_epsilon, m=mm, tau=tau, neighbors=f.neighbors)
                valid = (
                    "sufficient for every prior; exact on uniform priors"
                    if hs.exact_on_uniform
                    else "sufficient for every prior; NOT exact here"
                    + (
                        f" (second regime: exact uniform threshold {hs.exact_uniform_bits:.6g} bits, Remark C.4)"
                        if hs.regime == "second"
                        else f" (replace-one: uniform priors below {hs.replace_necessary_bits:.6g} bits are unsafe; "
                        "bracket open)"
                    )
                )
                rows.append(
                    Quantity(
                        f"H* (bits), m = {mm}",
                        hs.bits,
                        rel,
                        "Ext",
                        hs.reference,
                        valid,
                        hs.exact_on_uniform,
                    )
                )
            else:
                rows.append(
                    Quantity(
                        f"entropy threshold log2(m/alpha*) (bits), m = {mm}",
                        entropy_threshold(f, m=mm, tau=tau),
                        rel,
                        "Ext",
                        "[MX] Thm. 5.1(iii), App. C.4",
                        "sufficient for every prior; exact on uniform priors under add/remove"
                        if a.exact
                        else "sufficient for every prior",
                        a.exact,
                    )
                )
        if kappa is not None:
            safe = a.admits(float(kappa))  # in log space: alpha* may lie below the float range
            rows.append(
                Quantity(
                    "baseline certified safe (kappa <= alpha*)",
                    "yes" if safe else "no",
                    rel,
                    "Ext",
                    "[MX] Thm. 5.1(iii), Cor. 5.5",
                    "Ext <= tau for every f-DP release"
                    if safe
                    else "DP alone does not hold Ext <= tau here; canary successes may be prior guessing",
                    a.exact,
                )
            )
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
        rows.append(
            Quantity(
                f"Ext bound 1 - f^({k})(kappa){sfx}, kappa = {eb.kappa:.6g}",
                eb.value,
                rel,
                "Ext",
                eb.theorem,
                note + ("; vacuous" if eb.vacuous else ""),
                False,
                k,
            )
        )
    if tau is not None:
        a = alpha_star(tau, f, copies=k)
        unresolved = (
            f"; {a.regime}" if a.value == 0.0 and a.regime.startswith("not resolved") else ""
        )
        rows.append(
            Quantity(
                f"alpha*(tau){sfx}, tau = {a.tau:g}",
                a.value,
                rel,
                "Ext",
                a.theorem,
                f"alpha* = (fbar^-1)^(o {k})(tau); {why}{unresolved}",
                False,
                k,
            )
        )
        rows.append(
            Quantity(
                f"log10 alpha*(tau){sfx}, tau = {a.tau:g}",
                a.log10_value,
                rel,
                "Ext",
                a.theorem,
                "the same threshold in log space",
                False,
                k,
            )
        )
        if m is not None:
            mm = validate.integer("m (list size)", m, minimum=1)
            if f.kind == "pure":
                hs = h_star(
                    epsilon=f._known_epsilon, m=mm, tau=tau, neighbors=f.neighbors, copies=k
                )
                assert hs.group_curve_bits is not None  # h_star always computes it (every branch)
                rows.append(
                    Quantity(
                        f"H* = k eps log2 e + log2(m/tau) (bits){sfx}, m = {mm}",
                        hs.bits,
                        rel,
                        "Ext",
                        hs.reference,
                        "sufficient for every prior (group privacy eps -> k eps); "
                        + group_curve_words(hs.bits, hs.group_curve_bits),
                        False,
                        k,
                    )
                )
            rows.append(
                Quantity(
                    f"entropy threshold log2(m/alpha*_(f^({k}))) (bits){sfx}, m = {mm}",
                    entropy_threshold(f, m=mm, tau=tau, copies=k),
                    rel,
                    "Ext",
                    "[MX] Thm. 5.1(iii) (sufficiency), Cor. 4.3",
                    "sufficient for every prior; " + why,
                    False,
                    k,
                )
            )
        if kappa is not None:
            safe = a.admits(float(kappa))
            rows.append(
                Quantity(
                    f"baseline certified safe (kappa <= alpha*){sfx}",
                    "yes" if safe else "no",
                    rel,
                    "Ext",
                    "[MX] Thm. 5.1(iii), Cor. 4.3",
                    (
                        f"Ext <= tau for every f-DP release of a secret planted {k} times (sufficient)"
                        if safe
                        else f"not certified: the {k}-copy bound does not hold Ext <= tau here; canary successes "
                        "may be prior guessing (whether some f-DP release exceeds tau is open for k copies)"
                    ),
                    False,
                    k,
                )
            )
    return rows


# --------------------------------------------------------------------------- the public entry point
def dp_bounds(
    f: TradeOff | None = None,
    *,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    history: Sequence | None = None,
    neighbors: str | None = None,
    delta: float | None = None,
    copies: int = 1,
    m: int | None = None,
    tau: float | None = None,
    kappa: float | None = None,
    truncation: float | None = None,
    omega: float | None = None,
    n: int | None = None,
    frequency: float | None = None,
    gdp_epsilon: float | None = None,
    pld_grid: float | None = None,
    max_points: int | None = None,
) -> BoundsSummary:
    """Every memorization cap and extraction quantity for a guarantee (``memclaim dp bounds``).

    Give the guarantee as a trade-off curve ``f`` (:func:`~memclaim.privacy.tradeoff.pure`,
    ``approx``, ``gdp``, ``from_points``, ...), or as a DP-SGD run: ``noise_multiplier`` sigma,
    ``sampling_rate`` q (Poisson), ``steps`` T (or ``history`` = ((sigma, q, T), ...)) with the
    relation ``neighbors`` ('add-remove' or 'replace'). For DP-SGD every row is computed from
    the certified trade-off curve of the composed mechanism (:func:`~memclaim.privacy.pld.dpsgd_curve`,
    grid ``pld_grid``) and says so; the (eps, delta) route at ``delta`` (default 1e-5, eps from
    the same PLD) follows, each of its rows marked as the looser one. ``copies``: the target
    occurs k times (group curves, [MX] Cor. 4.3, computed from the curve, not through k eps).

    >>> from memclaim.privacy.summary import dp_bounds
    >>> from memclaim.privacy.tradeoff import pure
    >>> s = dp_bounds(pure(1.0, neighbors="replace-one"), m=4, tau=0.1, kappa=0.355)
    >>> [round(q.value, 2) for q in s.rows if q.name.startswith("Ext bound")]  # [MX] §8: 0.76
    [0.76]
    """
    dpsgd = any(v is not None for v in (noise_multiplier, sampling_rate, steps, history))
    if f is not None and dpsgd:
        raise DomainError(
            "give either a trade-off curve f or DP-SGD settings (noise_multiplier, sampling_rate, "
            "steps), not both"
        )
    if not dpsgd:
        if f is None:
            raise DomainError(
                "dp_bounds() needs a guarantee",
                hint="pass a TradeOff f, or noise_multiplier=, sampling_rate=, steps= for DP-SGD",
            )
        if pld_grid is not None:
            raise DomainError("pld_grid applies to DP-SGD settings only")
        return bounds_summary(
            f,
            copies=copies,
            m=m,
            tau=tau,
            kappa=kappa,
            truncation=truncation,
            omega=omega,
            n=n,
            frequency=frequency,
            gdp_epsilon=gdp_epsilon,
        )

    if neighbors is None:
        raise DomainError(
            "DP-SGD bounds need the neighbouring relation",
            hint="neighbors='add-remove' (Opacus, the usual DP-SGD analysis) or 'replace'",
        )
    if gdp_epsilon is not None:
        raise DomainError("gdp_epsilon applies to a Gaussian-DP guarantee, not to DP-SGD settings")
    rd = (
        1e-5 if delta is None else validate.in_open_unit("delta (of the (eps, delta) route)", delta)
    )
    cur = dpsgd_curve(
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        history=history,
        neighbors=neighbors,
        value_discretization_interval=pld_grid,
        route_delta=rd,
        max_points=max_points,
    )
    kw: dict[str, Any] = dict(
        copies=copies,
        m=m,
        tau=tau,
        kappa=kappa,
        truncation=truncation,
        omega=omega,
        n=n,
        frequency=frequency,
    )
    main = bounds_summary(cur.curve, **kw)
    # the same quantities from the optimistic curve (never below the true one): the exact value of
    # each numeric row lies between the two (the certified accuracy of the row)
    try:
        other = {r.name: r.value for r in bounds_summary(cur.optimistic, **kw).rows}
    except DomainError:
        other = {}
    src = f"trade-off curve of {cur.mechanism()}: {cur.grid()}; never above the true curve"
    rows = [
        Quantity(
            r.name,
            r.value,
            r.relation,
            r.functional,
            r.reference,
            ("from the curve; " + r.note) if r.note else "from the curve",
            r.exact,
            r.copies,
            src,
            float(o)
            if isinstance(r.value, float) and isinstance(o := other.get(r.name), float)
            else None,
        )
        for r in main.rows
    ]
    eta_curve = main.value("eta(f)")
    g = cur.epsilon_delta_curve()
    rel = neighbors_label(cur.neighbors)
    rsrc = (
        f"(eps, delta) route: eps = {cur.route_epsilon:.6g} at delta = {rd:g} from the same PLD, then the "
        "closed forms of f_(eps, delta) ([MX] Lemma B.2); valid, looser than the curve"
    )
    if g is None and cur.route_epsilon == 0.0:
        # delta(0) <= delta already: the run is (0, delta)-DP and the route's eta is delta itself
        rows.append(
            Quantity(
                "eta(f) [(eps, delta) route, looser]",
                rd,
                rel,
                "RO" if cur.neighbors == "replace" else "LOO",
                "[MX] Lemma B.2",
                f"eps = 0 at delta = {rd:g}: eta = delta + (1 - delta) tanh(0) = delta",
                False,
                1,
                rsrc,
            )
        )
    elif g is None:
        rows.append(
            Quantity(
                "(eps, delta) route",
                None,
                rel,
                "-",
                "[MX] Lemma B.2",
                f"no finite eps at delta = {rd:g}",
                False,
                copies,
                rsrc,
            )
        )
    else:
        try:
            route = bounds_summary(g, **kw).rows
        except DomainError as exc:  # e.g. k copies: delta_k >= 1, no risk level certified this way
            route = (
                Quantity(
                    "(eps, delta) route",
                    None,
                    rel,
                    "-",
                    "[MX] Lemma B.2, §8.2",
                    f"the route implies nothing here: {str(exc).splitlines()[0]}",
                    False,
                    copies,
                ),
            )
        for r in route:
            rows.append(
                Quantity(
                    f"{r.name} [(eps, delta) route, looser]",
                    r.value,
                    r.relation,
                    r.functional,
                    r.reference,
                    r.note,
                    False if isinstance(r.value, float) else r.exact,
                    r.copies,
                    rsrc,
                )
            )
        e_route = eta(g).value
        rows.append(
            Quantity(
                "eta ratio: (eps, delta) route / curve",
                e_route / eta_curve if eta_curve > 0 else math.inf,
                rel,
                "-",
                "[MX] Lemma B.2 vs the curve",
                f"eta = {e_route:.6g} via (eps = {cur.route_epsilon:.4g}, delta = {rd:g}) against "
                f"{eta_curve:.6g} from the curve",
                None,
                1,
                rsrc,
            )
        )
    mech = cur.to_dict()
    return BoundsSummary(cur.curve.describe(), cur.neighbors, tuple(rows), copies, mech)
