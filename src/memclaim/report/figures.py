"""Figures as PNG bytes (matplotlib, Agg canvas; no pyplot global state).

- :func:`binary_bars`: [EM] Fig. 3 (greedy bars with Clopper-Pearson intervals, dashed alpha_N floor)
- :func:`alpha_sweep_figure`: [EM] Fig. 4 (a: rates above each threshold, b: calibrated rate
  against alpha_N with the alpha-dagger ceiling, c: the Beta band on alpha*)
- :func:`census_ccdf`: [EM] Fig. 6 (coverage against margin)
- :func:`heat_strip`: [EM] Fig. 18 (per-character heat of the whole document)
- :func:`census_budget_figure`, :func:`population_budget_figure`: [EM] Fig. 7, Fig. 20
- :func:`disagreement_heatmap`: [MX] Fig. 12 (the audit-disagreement table)
"""
from __future__ import annotations

import io
import math

import numpy as np


def _fig(w=7.0, hgt=3.6, ncols=1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, hgt), dpi=110)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    # fixed margins: tight_layout costs seconds per figure on a busy CPU
    fig.subplots_adjust(left=0.09 if ncols == 1 else 0.06, right=0.98, bottom=0.16, top=0.88,
                        wspace=0.32)
    return fig, axes


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _n_label(q) -> str:
    return f"{q.n_int:,}" if q.n_int is not None and q.n_int < 10**6 else f"10^{q.log10_n:.3g}"


def binary_bars(rates, *, title: str = "") -> bytes:
    fig, (ax,) = _fig(4.8, 3.6)
    vals = [rates.member_rate, rates.control_rate]
    names = [f"members\n{rates.member_count}/{rates.n_candidates}", f"controls\n{rates.m}/{rates.n_controls}"]
    est = [100 * v.estimate for v in vals]
    err = [[100 * (v.estimate - v.lower) for v in vals], [100 * (v.upper - v.estimate) for v in vals]]
    ax.bar(names, est, yerr=err, capsize=6, color=["#3b6ea8", "#9aa5b1"])
    ax.axhline(100 * rates.alpha_n, ls="--", color="#c2410c",
               label=f"certified floor α_N = (m+1)/(N+1) = {100 * rates.alpha_n:.3g}%")
    ax.set_ylabel("verbatim generation rate (%)")
    ax.set_title(title or "Greedy generation (95% Clopper–Pearson)", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def alpha_sweep_figure(sweep, *, alpha_n: float | None = None, probability: bool = True) -> bytes:
    fig, (a, b, c) = _fig(11.5, 3.6, ncols=3)
    if probability and sweep.threshold_log10_prob is not None:
        x = sweep.threshold_log10_prob
        a.set_xlabel("threshold τ (log10 probability)")
    else:
        x = sweep.threshold
        a.set_xlabel("threshold τ (score)")
    o = np.argsort(x)
    a.plot(x[o], 100 * sweep.member_rate[o], color="#3b6ea8", label="members (Ĝ)")
    a.fill_between(x[o], 100 * sweep.member_lower[o], 100 * sweep.member_upper[o], color="#3b6ea8", alpha=.2)
    a.plot(x[o], 100 * sweep.control_rate[o], color="#9aa5b1", label="controls (in-sample)")
    a.set_ylabel("share scoring above τ (%)")
    a.set_title("(a) rates above each calibrated threshold", fontsize=9)
    a.legend(fontsize=8)
    b.plot(100 * sweep.alpha_n, 100 * sweep.calibrated_rate, color="#15803d", label="M̂ = Ĝ − α_N")
    b.fill_between(100 * sweep.alpha_n, 100 * sweep.calibrated_lower, 100 * sweep.calibrated_upper,
                   color="#15803d", alpha=.2)
    b.set_xscale("log")
    b.axhline(0, color="#777", lw=.8)
    if sweep.alpha_dagger < 1:
        b.axvline(100 * sweep.alpha_dagger, ls=":", color="#c2410c", label=f"max α_N = α† ≈ {100 * sweep.alpha_dagger:.3g}%")
    if alpha_n:
        b.axvline(100 * alpha_n, ls="--", color="#444", label=f"chosen α_N = {100 * alpha_n:.3g}%")
    b.set_xlabel("certified FPR α_N (%)")
    b.set_ylabel("calibrated rate (%)")
    b.set_title("(b) calibrated memorization rate", fontsize=9)
    b.legend(fontsize=7)
    ok = ~np.isnan(sweep.beta_lower)
    c.plot(100 * sweep.alpha_n, 100 * sweep.alpha_n, color="#444", label="α_N = E[α*]")
    if ok.any():
        c.fill_between(100 * sweep.alpha_n[ok], 100 * sweep.beta_lower[ok], 100 * sweep.beta_upper[ok],
                       color="#a855f7", alpha=.25, label="central band of α* (Beta law)")
    c.set_xscale("log")
    c.set_yscale("log")
    c.set_xlabel("certified FPR α_N (%)")
    c.set_ylabel("population FPR α* (%)")
    c.set_title("(c) where α* falls across control draws", fontsize=9)
    c.legend(fontsize=7)
    return _png(fig)


def census_ccdf(results, *, labels=None) -> bytes:
    fig, (ax,) = _fig(6.0, 3.6)
    for i, r in enumerate(results):
        lab = labels[i] if labels else f"{r.document_name} (τ = 1e{r.log10_tau})"
        ax.plot(r.curve.margins, 100 * r.curve.coverage, label=lab)
    ax.set_xlabel("margin Δ = log10(score / τ)")
    ax.set_ylabel("coverage above τ·10^Δ (% of characters)")
    ax.set_title("Coverage against margin ([EM] Eq. 9, Fig. 6)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return _png(fig)


def heat_strip(heat_log10: np.ndarray, *, log10_tau: float, width: int = 400, chars_per_cell: int = 1) -> bytes:
    """The whole document as rows of ``width`` characters, coloured by margin (grey: below tau
    or uncovered)."""
    from matplotlib import colormaps

    h = np.asarray(heat_log10, dtype=np.float64)
    L = h.size
    width = max(1, min(width, L))
    rows = math.ceil(L / width)
    m = np.full(rows * width, np.nan)
    m[:L] = h - log10_tau
    m = m.reshape(rows, width)  # [rows, width] margins per character
    img = np.ones((rows, width, 4))
    img[..., :3] = 0.93
    above = np.isfinite(m) & (m > 0)
    top = float(np.nanmax(np.where(above, m, np.nan))) if above.any() else 1.0
    cmap = colormaps["YlOrRd"]
    img[above] = cmap(0.25 + 0.75 * np.clip(m[above] / max(top, 1e-9), 0, 1))
    img[~np.isfinite(m)] = (1, 1, 1, 1)
    fig, (ax,) = _fig(7.0, min(6.0, 0.45 + 0.09 * rows))
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02, top=1 - 0.3 / min(6.0, 0.45 + 0.09 * rows))
    ax.imshow(img, aspect="auto", interpolation="nearest")
    ax.set_yticks([])
    ax.set_xticks([])
    unit = "characters" if chars_per_cell == 1 else f"cells of {chars_per_cell} characters (largest heat in each)"
    ax.set_title(f"Per-character heat ({L} {unit}, {width} per row; colour = margin above τ = 1e{log10_tau:g}, "
                 f"max Δ = {top:.3g})", fontsize=8)
    return _png(fig)


def census_budget_figure(view, *, title: str = "") -> bytes:
    fig, (ax,) = _fig(6.0, 3.6)
    x = view.log10_budgets  # log10 n, exact where n overflows a double
    ax.plot(x, 100 * view.coverage_extractable, color="#9aa5b1", label="extractable within n")
    ax.plot(x, 100 * view.coverage_extractable_memorized, color="#3b6ea8", label="memorized and extractable")
    ax.axhline(100 * view.coverage_memorized, ls=":", color="#15803d", label="memorized (clears τ)")
    if math.isfinite(view.n_tau.log10_n):
        ax.axvline(view.n_tau.log10_n, ls="--", color="#444", label=f"budget of τ: {_n_label(view.n_tau)}")
    ax.axvline(math.log10(view.realistic_n), color="#c2410c", lw=.8, label=f"realistic n = {view.realistic_n:g}")
    ax.set_xlabel(f"query budget log10 n (confidence {100 * (1 - view.delta):g}%)")
    ax.set_ylabel("coverage (% of characters)")
    ax.set_title(title or "Coverage against budget ([EM] Fig. 7)", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


def population_budget_figure(view) -> bytes:
    fig, (ax,) = _fig(6.0, 3.6)
    x = view.log10_budgets  # log10 n, exact where n overflows a double
    ax.plot(x, 100 * view.member_rate, color="#3b6ea8", label="members extractable within n")
    ax.fill_between(x, 100 * view.member_lower, 100 * view.member_upper, color="#3b6ea8", alpha=.2)
    ax.plot(x, 100 * view.control_rate, color="#9aa5b1", label="controls extractable within n")
    ax.plot(x, 100 * view.member_memorized_rate, color="#15803d", label="members above τ and extractable")
    if view.n_tau is not None and math.isfinite(view.n_tau.log10_n):
        ax.axvline(view.n_tau.log10_n, ls="--", color="#444", label=f"n_α_N = {_n_label(view.n_tau)}")
    ax.axvline(math.log10(view.realistic_n), color="#c2410c", lw=.8, label=f"realistic n = {view.realistic_n:g}")
    ax.set_xlabel(f"query budget log10 n (confidence {100 * (1 - view.delta):g}%)")
    ax.set_ylabel("rate (%)")
    ax.set_title("Rates against budget ([EM] F.2, Fig. 20)", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


def disagreement_heatmap(table, path=None, *, title: str = "Audit disagreement"):
    """A heatmap of a :class:`memclaim.audits.table.DisagreementTable`'s leak signals, annotated
    "value\\nverdict", with a rule before the informed columns ([MX] Fig. 12). Uses the Agg
    canvas directly (no pyplot state). Returns the Figure; writes it to ``path`` if given
    (format from the suffix).

    >>> from memclaim.audits.table import build_table, rate_cell
    >>> fig = disagreement_heatmap(build_table(["loss"], {"x": {"loss": rate_cell(3, 10)}}))
    >>> [t.get_text() for t in fig.axes[0].texts]
    ['0.30\\nleak']
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    mat = table.signal_matrix()
    nr, nc = mat.shape
    fig = Figure(figsize=(2.6 + 1.5 * nc, 1.4 + 0.6 * nr))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.88")  # audits not run: light grey
    shown = np.ma.masked_invalid(np.clip(mat, 0.0, 1.0))
    im = ax.imshow(shown, vmin=0.0, vmax=1.0, cmap=cmap, aspect="auto")
    for i, row in enumerate(table.cells):
        for j, c in enumerate(row):
            txt = "n/a" if c is None else f"{c.signal:.2f}\n{c.verdict}"
            val = 0.0 if c is None else float(np.clip(c.signal, 0, 1))
            ax.text(j, i, txt, ha="center", va="center", fontsize=8,
                    color="0.3" if c is None else ("black" if val > 0.6 else "white"))
    ax.set_xticks(range(nc), [c.name for c in table.columns], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(nr), list(table.rows), fontsize=8)
    informed = [j for j, c in enumerate(table.columns) if c.informed]
    if informed and min(informed) > 0:
        ax.axvline(min(informed) - 0.5, color="white", linewidth=3)
    cb = fig.colorbar(im, ax=ax, fraction=0.04)
    cb.set_label("leak signal\n(0 = at chance, 1 = fully detected)", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig
