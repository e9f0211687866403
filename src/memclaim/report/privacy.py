"""Figures of [MX] §4-5: advantage curves (Fig. 2), the k-copy staircase (Fig. 3), the
extraction boundary against the baseline with the min-entropy axis (Fig. 4).

matplotlib's object API in the shared style (:mod:`memclaim.report.style`; no pyplot): each figure is
written as NAME.png (200 dpi) and NAME.pdf.
Every figure names the neighbouring relation and the functional its numbers are about.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import validate
from ..fsutil import write_files
from ..privacy.caps import cap_map, eta, eta_star_k
from ..privacy.extraction import alpha_star, h_star
from ..privacy.tradeoff import (
    approx,
    expit_neg,
    gdp,
    group,
    neighbors_label,
    normalize_neighbors,
    pure,
)
from . import style

if TYPE_CHECKING:
    from ..privacy.pld import DpSgdCurve

__all__ = ["plot_advantage_curves", "plot_staircase", "plot_boundary", "plot_dpsgd", "plot_all"]


def _figure(width=6.4, height=4.2, ncols=1):
    """A Figure in the shared style (constrained layout: nothing clipped)."""
    fig, axes = style.figure(width=width, height=height, ncols=ncols)
    return fig, axes


def _save(fig, path) -> Path:
    """Write ``path`` (PNG, 200 dpi) and the vector copy beside it (same stem, .pdf) as one
    change (staged, then renamed); returns the PNG's path."""
    path = Path(path)
    files = style.figure_files(fig, path.stem)
    # the fixed figure names of `dp plot` (fig2_advantage, ...): replaced as the PNG always was
    written = write_files(path.parent, files, owned=lambda p: True)
    return written[f"{path.stem}.png"]


def _mem_scope(neighbors: str) -> str:
    return (
        "caps RO memorization (replace-one, Thm. 4.1)"
        if neighbors == "replace"
        else "caps LOO memorization (add/remove, Prop. A.1); RO needs f^(2)"
    )


def plot_advantage_curves(
    path: str | Path,
    *,
    epsilon: float = 1.0,
    delta: float = 0.1,
    mu: float = 1.0,
    neighbors: str = "replace",
) -> Path:
    """[MX] Fig. 2: alpha -> 1 - alpha - f(alpha) for f_eps, f_{eps,delta}, G_mu, maximizers marked.

    >>> from memclaim.report.privacy import plot_advantage_curves
    >>> plot_advantage_curves("fig2.png", epsilon=1.0, delta=0.1, mu=1.0).name  # writes a file  # doctest: +SKIP
    'fig2.png'
    """
    rel = normalize_neighbors(neighbors)
    curves = [
        (pure(epsilon, neighbors=rel), f"$f_\\varepsilon$, $\\varepsilon$ = {epsilon:g}"),
        (
            approx(epsilon, delta, neighbors=rel),
            f"$f_{{\\varepsilon,\\delta}}$, $\\delta$ = {delta:g}",
        ),
        (gdp(mu, neighbors=rel), f"$G_\\mu$, $\\mu$ = {mu:g}"),
    ]
    with style.style():
        fig, ax = _figure()
        _advantage_axes(ax, curves, rel)
    return _save(fig, path)


def _advantage_axes(ax, curves, rel):
    a = np.linspace(0.0, 1.0, 1001)
    for f, label in curves:
        ax.plot(a, np.asarray(f.power(a)) - a, label=label)
        e = eta(f)
        ax.plot([e.alpha], [e.value], "o", color=ax.lines[-1].get_color())
        ax.annotate(
            f"{e.value:.3f}",
            (e.alpha, e.value),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    ax.set_xlabel("significance level $\\alpha$")
    ax.set_ylabel("advantage $1 - \\alpha - f(\\alpha)$")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    style.legend(ax, outside=True)
    ax.set_title(
        f"Advantage curves; the maximum $\\eta(f)$ {_mem_scope(rel)}\n[{neighbors_label(rel)}]"
    )


def plot_staircase(
    path: str | Path,
    *,
    epsilon: float = 1.0,
    k: int = 4,
    max_copies: int = 8,
    neighbors: str = "replace",
) -> Path:
    """[MX] Fig. 3: the cap map f-bar with the optimal k-orbit (cobweb); eta*_k vs tanh(k eps/2).

    The staircase counts neighbour steps of a pure eps-DP guarantee: under replace-one, eta*_k
    caps RO memorization of a target planted k times ([MX] Cor. 4.3, Lemma 4.4); under
    add/remove the same k steps cap LOO memorization with k additions ([MX] Prop. A.1), and RO
    needs 2k steps (eta*_2k). The panels say which, for the relation given.

    >>> from memclaim.report.privacy import plot_staircase
    >>> plot_staircase("fig3.png", epsilon=1.0, k=2).name  # writes a file  # doctest: +SKIP
    'fig3.png'
    """
    k = validate.integer("k (copies)", k, minimum=1)
    max_copies = validate.integer("max_copies", max_copies, minimum=1)
    rel = normalize_neighbors(neighbors)
    st = eta_star_k(epsilon=epsilon, k=k)
    with style.style():
        fig, (ax1, ax2) = _figure(width=10.0, height=4.2, ncols=2)
        _staircase_axes(ax1, ax2, st, epsilon, k, max_copies, rel)
    return _save(fig, path)


def _staircase_axes(ax1, ax2, st, epsilon, k, max_copies, rel):
    b = np.linspace(0.0, 1.0, 1001)
    ax1.plot(b, cap_map(b, epsilon=epsilon), label="cap map $\\bar f(b)$")
    ax1.plot(b, b, "k--", lw=0.8, label="identity")
    xs, ys = [], []
    orbit = st.orbit
    x = orbit[0]
    xs.append(x)
    ys.append(0.0)
    for nxt in orbit[1:]:
        xs += [x, nxt]
        ys += [nxt, nxt]
        x = nxt
    ax1.plot(xs, ys, color="C3", lw=1.0, label=f"optimal orbit, k = {k}")
    ax1.axvline(expit_neg(st.epsilon), color="gray", lw=0.6, ls=":")  # c* = 1/(e^eps + 1)
    ax1.set_xlabel("b")
    ax1.set_ylabel("$\\bar f(b)$")
    ax1.set_xlim(0, 1)
    ax1.set_ylim(0, 1)
    style.legend(ax1, below=True)
    ax1.set_title(
        f"$\\eta^*_{{{k}}}$ = {st.value:.3f} (orbit gain $b_k - b_0$), $\\varepsilon$ = {st.epsilon:g}"
    )
    ks = np.arange(1, max_copies + 1)
    exact = [eta_star_k(epsilon=epsilon, k=int(j)).value for j in ks]
    naive = [math.tanh(j * st.epsilon / 2.0) for j in ks]
    ax2.plot(ks, naive, "s--", label="naive group bound tanh(k$\\varepsilon$/2)")
    ax2.plot(ks, exact, "o-", label="exact $\\eta^*_k$ (Lemma 4.4)")
    ax2.set_xlabel(f"copies k ($\\varepsilon$ = {st.epsilon:g})")
    ax2.set_ylabel("max. advantage")
    ax2.set_ylim(0, 1.02)
    style.legend(ax2, below=True)
    if rel == "replace":
        ax2.set_title(
            f"k-copy RO memorization cap, pure $\\varepsilon$-DP [{neighbors_label(rel)}]"
        )
    else:  # k add/remove steps bound LOO with k additions; RO needs 2k steps ([MX] Prop. A.1, Cor. 4.3)
        ax2.set_title(
            f"k-copy LOO memorization cap (RO: $\\eta^*_{{2k}}$), pure $\\varepsilon$-DP "
            f"[{neighbors_label(rel)}]"
        )


def plot_boundary(
    path: str | Path,
    *,
    epsilons: Sequence[float] = (1.0, 3.0),
    mu: float = 1.0,
    tau: float = 0.1,
    m: int = 1,
    neighbors: str = "add-remove",
    copies: int = 1,
) -> Path:
    """[MX] Fig. 4: Ext bound 1 - f(kappa) vs baseline kappa (log-log), risk tau, alpha*(tau), H* axis.

    ``copies`` = k >= 2 adds, dashed, the bound 1 - f^(k)(kappa) of a secret planted k times for
    the first epsilon (the k-fold group curve, [MX] Cor. 4.3; an upper bound only) and its alpha*.

    >>> from memclaim.report.privacy import plot_boundary
    >>> plot_boundary("fig4.png", epsilons=(1.0, 3.0), tau=0.1, m=1).name  # writes a file  # doctest: +SKIP
    'fig4.png'
    """
    rel = normalize_neighbors(neighbors)
    m = validate.integer("m (list size)", m, minimum=1)
    tau = validate.in_open_unit("tau (risk level)", tau)
    copies = validate.integer("copies", copies, minimum=1)
    with style.style():
        fig, ax = _figure(width=7.6, height=4.6)
        _boundary_axes(ax, epsilons, mu, tau, m, rel, copies)
    return _save(fig, path)


def _boundary_axes(ax, epsilons, mu, tau, m, rel, copies):
    kap = np.logspace(-4, 0, 600)
    curves = [
        (pure(e, neighbors=rel), f"$f_\\varepsilon$, $\\varepsilon$ = {e:g}") for e in epsilons
    ]
    curves.append((gdp(mu, neighbors=rel), f"$G_\\mu$, $\\mu$ = {mu:g}"))
    for f, label in curves:
        ax.plot(kap, f.power(kap), label=label)
    if copies > 1:
        fk = pure(epsilons[0], neighbors=rel)
        ax.plot(
            kap,
            group(fk, copies).power(kap),
            "--",
            color="C3",
            label=f"{copies} copies, $\\varepsilon$ = {epsilons[0]:g}: $1 - f^{{({copies})}}(\\kappa)$ (Cor. 4.3)",
        )
        ak = alpha_star(tau, fk, copies=copies)
        if ak.value >= 1e-4:
            ax.plot([ak.value], [1e-4 * 1.2], marker="^", color="C3")
    ax.plot(kap, kap, "k--", lw=0.8, label="baseline $\\kappa$")
    ax.axhline(tau, color="gray", ls=":", lw=1.0)
    ax.text(1.2e-4, tau * 1.1, f"$\\tau$ = {tau:g}", fontsize=8)
    f_last = curves[len(epsilons) - 1][0]
    a = alpha_star(tau, f_last)
    ax.plot([a.value, a.value], [1e-4, tau], color="C1", ls="--", lw=0.9)
    ax.plot([a.value], [1e-4 * 1.2], marker="^", color="C1")
    ax.annotate(
        f"$\\alpha^*(\\tau)$ = {a.value:.2g}",
        (a.value, 1.3e-4),
        textcoords="offset points",
        xytext=(4, 6),
        fontsize=8,
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-4, 1)
    ax.set_ylim(1e-4, 1.5)
    ax.set_xlabel(f"oblivious baseline $\\kappa_\\pi(m)$, m = {m}")
    ax.set_ylabel("extraction bound $1 - f(\\kappa)$")
    style.legend(ax, outside=True)
    # top axis: the baseline read as min-entropy, kappa = m 2^-H (uniform priors: exact)
    top = ax.twiny()
    top.set_xscale("log")
    top.set_xlim(ax.get_xlim())
    hs = [h for h in range(0, 15, 2) if 1e-4 <= m * 2.0 ** (-h) <= 1.0]
    top.set_xticks([m * 2.0 ** (-h) for h in hs])
    top.set_xticklabels([str(h) for h in hs])
    top.minorticks_off()
    top.set_xlabel("secret min-entropy $H_\\infty$ (bits)")
    e_last = epsilons[-1]
    hs_val = h_star(epsilon=e_last, m=m, tau=tau, neighbors=rel).bits
    title = f"Thm. 5.1 boundary [{neighbors_label(rel)}]; H* = {hs_val:.2f} bits at $\\varepsilon$ = {e_last:g}"
    if copies > 1:
        hk = h_star(epsilon=epsilons[0], m=m, tau=tau, neighbors=rel, copies=copies).bits
        title += f"; {copies} copies at $\\varepsilon$ = {epsilons[0]:g}: H* = {hk:.2f} bits (sufficient only)"
    ax.set_title(title)


def plot_dpsgd(path: str | Path, cur: DpSgdCurve, *, tau: float = 0.1) -> Path:
    """DP-SGD: its trade-off curve (from the privacy-loss distribution) beside the (eps, delta)
    envelope f_{eps, delta} of the same run, so the gap is visible (issue 18).

    Left: f(alpha) for both, with the advantage eta marked (the largest gap to 1 - alpha,
    [MX] Thm. 4.1). Right: the extraction bound 1 - f(kappa) against the baseline (log-log,
    [MX] Thm. 5.1(i)) with alpha*(tau) for both. ``cur`` is a :class:`memclaim.privacy.pld.DpSgdCurve`.

    >>> from memclaim.privacy.pld import dpsgd_curve
    >>> from memclaim.report.privacy import plot_dpsgd
    >>> cur = dpsgd_curve(noise_multiplier=1.0, sampling_rate=0.01, steps=100)  # doctest: +SKIP
    >>> plot_dpsgd("fig5.png", cur).name  # writes a file  # doctest: +SKIP
    'fig5.png'
    """
    tau = validate.in_open_unit("tau (risk level)", tau)
    f = cur.curve
    g = cur.epsilon_delta_curve()
    with style.style():
        fig, (ax1, ax2) = _figure(width=10.0, height=5.2, ncols=2)
        _dpsgd_axes(ax1, ax2, cur, f, g, tau)
    return _save(fig, path)


def _dpsgd_axes(ax1, ax2, cur, f, g, tau):
    rel = neighbors_label(cur.neighbors)
    a = np.linspace(0.0, 1.0, 2001)
    ax1.plot(a, 1.0 - a, "k:", lw=0.8, label="$1 - \\alpha$ (no privacy loss)")
    e_f = eta(f)
    ax1.plot(a, f(a), color="C0", label=f"DP-SGD curve (PLD), $\\eta$ = {e_f.value:.3f}")
    ax1.plot(
        [e_f.alpha, e_f.alpha],
        [float(f(e_f.alpha)), 1.0 - e_f.alpha],
        color="C0",
        lw=2.5,
        alpha=0.6,
    )
    if g is not None:
        e_g = eta(g)
        ax1.plot(
            a,
            g(a),
            color="C3",
            ls="--",
            label=f"($\\varepsilon, \\delta$) envelope, $\\varepsilon$ = {cur.route_epsilon:.3g}, "
            f"$\\delta$ = {cur.route_delta:g}: $\\eta$ = {e_g.value:.3f}",
        )
        ax1.plot(
            [e_g.alpha, e_g.alpha],
            [float(g(e_g.alpha)), 1.0 - e_g.alpha],
            color="C3",
            lw=2.5,
            alpha=0.6,
        )
    ax1.set_xlim(0, 1)
    ax1.set_ylim(0, 1)
    ax1.set_xlabel("type-I error $\\alpha$")
    ax1.set_ylabel("type-II error $f(\\alpha)$")
    style.legend(ax1, below=True)
    ax1.set_title(f"{cur.mechanism()} [{rel}]\nthick: the advantage $\\eta$ (caps |mem|, Thm. 4.1)")
    kap = np.logspace(-8, 0, 600)
    ax2.plot(kap, f.power(kap), color="C0", label="$1 - f(\\kappa)$, DP-SGD curve")
    if g is not None:
        ax2.plot(
            kap, g.power(kap), color="C3", ls="--", label="$1 - f_{\\varepsilon,\\delta}(\\kappa)$"
        )
    ax2.plot(kap, kap, "k:", lw=0.8, label="baseline $\\kappa$")
    ax2.axhline(tau, color="gray", ls=":", lw=1.0)
    for curve, col in ((f, "C0"), (g, "C3")):
        if curve is None or tau < float(curve.power(0.0)):
            continue
        av = alpha_star(tau, curve).value
        if av >= kap[0]:
            ax2.plot([av], [kap[0] * 1.5], marker="^", color=col)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlim(kap[0], 1)
    ax2.set_ylim(kap[0], 1.5)
    ax2.set_xlabel("oblivious baseline $\\kappa_\\pi(m)$")
    ax2.set_ylabel("extraction bound $1 - f(\\kappa)$")
    style.legend(ax2, below=True)
    grid = cur.grid().replace(", eps grid", ",\neps grid")
    ax2.set_title(
        f"Thm. 5.1(i) boundary [{rel}]; triangles: $\\alpha^*(\\tau)$ at $\\tau$ = {tau:g}\n{grid}",
        fontsize=7,
    )


def plot_all(
    out_dir: str | Path,
    *,
    epsilon: float = 1.0,
    delta: float = 0.1,
    mu: float = 1.0,
    copies: int = 4,
    max_copies: int = 8,
    tau: float = 0.1,
    m: int = 1,
    boundary_epsilons: Sequence[float] = (1.0, 3.0),
    neighbors: str = "add-remove",
    dpsgd: DpSgdCurve | None = None,
) -> list[Path]:
    """Write fig2_advantage, fig3_staircase, fig4_boundary (.png at 200 dpi and .pdf) under
    ``out_dir``, and fig5_dpsgd when ``dpsgd`` (a :class:`memclaim.privacy.pld.DpSgdCurve`) is
    given; every panel names the relation ``neighbors``. Returns every path written.

    >>> from memclaim.report.privacy import plot_all
    >>> sorted(p.name for p in plot_all("figures"))  # writes six files (seconds)  # doctest: +SKIP
    ['fig2_advantage.pdf', 'fig2_advantage.png', 'fig3_staircase.pdf', 'fig3_staircase.png', 'fig4_boundary.pdf', 'fig4_boundary.png']
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        plot_advantage_curves(
            out / "fig2_advantage.png", epsilon=epsilon, delta=delta, mu=mu, neighbors=neighbors
        ),
        plot_staircase(
            out / "fig3_staircase.png",
            epsilon=epsilon,
            k=copies,
            max_copies=max_copies,
            neighbors=neighbors,
        ),
        plot_boundary(
            out / "fig4_boundary.png",
            epsilons=boundary_epsilons,
            mu=mu,
            tau=tau,
            m=m,
            neighbors=neighbors,
            copies=copies,
        ),
    ]
    if dpsgd is not None:
        paths.append(plot_dpsgd(out / "fig5_dpsgd.png", dpsgd, tau=tau))
    return [q for p in paths for q in (p, p.with_suffix(f".{style.VECTOR_FORMAT}"))]
