"""The reports' figures, as matplotlib Figures in the shared style (:mod:`memclaim.report.style`;
no pyplot global state). A report adds each with ``Doc.figure(caption, fig, name=...)``, which
embeds the 200-dpi PNG in report.html and writes NAME.png and NAME.pdf beside the report.

- :func:`binary_bars`: [EM] Fig. 3 (greedy bars with Clopper-Pearson intervals, dashed alpha_N floor)
- :func:`alpha_sweep_figure`: [EM] Fig. 4 (a: rates above each threshold, b: calibrated rate
  against alpha_N with the alpha-dagger ceiling, c: the Beta band on alpha*)
- :func:`census_ccdf`: [EM] Fig. 6 (coverage against margin)
- :func:`heat_strip`: [EM] Fig. 18 (per-character heat of the whole document)
- :func:`census_budget_figure`, :func:`population_budget_figure`: [EM] Fig. 7, Fig. 20
- :func:`disagreement_heatmap`: [MX] Fig. 12 (the audit-disagreement table)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import numbers, style
from .style import PALETTE

if TYPE_CHECKING:  # the annotations' names only
    from pathlib import Path

    from matplotlib.figure import Figure

    from ..audits.table import DisagreementTable
    from ..claims.budget import CensusBudgetView, PopulationBudgetView
    from ..claims.census import CensusResult
    from ..claims.conformal import AlphaSweep, BinaryRates


def _fig(w=6.0, hgt=3.6, ncols=1):
    """A Figure in the shared style (:mod:`memclaim.report.style`: constrained layout, so no label
    is clipped) and its axes as a list."""
    fig, axes = style.figure(width=w, height=hgt, ncols=ncols)
    return fig, list(np.atleast_1d(axes))


def _png(fig) -> bytes:
    """PNG bytes at 200 dpi (the report writes the PDF beside it from the Figure itself)."""
    return style.png_bytes(fig)


def _n_label(q) -> str:
    return (
        f"{q.n_int:,}" if q.n_int is not None and q.n_int < 10**6 else f"$10^{{{q.log10_n:.3g}}}$"
    )


def _pct_tex(x: float) -> str:
    """A percentage for a figure label (outside ``$...$``, where '%' needs no escape)."""
    return numbers.pct(x)


def _plot_distinct(ax, x, series) -> None:
    """Plot each (y, label, kwargs) of ``series``; a curve equal to one already drawn is not drawn
    again (it would hide under it while the legend listed it): its label joins the first's."""
    drawn: list = []  # (y, Line2D)
    for y, label, kw in series:
        y = np.asarray(y, dtype=np.float64)
        same = next(
            (ln for yy, ln in drawn if yy.shape == y.shape and np.allclose(yy, y, equal_nan=True)),
            None,
        )
        if same is not None:
            same.set_label(f"{same.get_label()} = {label}")
            continue
        (ln,) = ax.plot(x, y, label=label, **kw)
        drawn.append((y, ln))


def binary_bars(rates: BinaryRates, *, title: str = "") -> Figure:
    """[EM] Fig. 3: members and controls reproduced under greedy decoding (Clopper-Pearson bars),
    the certified floor alpha_N dashed.

    >>> import numpy as np
    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.figures import binary_bars
    >>> c = population_claim(candidate_scores=[0.0, 0.0, -np.inf], control_scores=[-np.inf] * 8 + [0.0],
    ...                      alpha="0.1", binary=True)
    >>> fig = binary_bars(c.primary_test.binary_rates)
    >>> len(fig.axes), len(fig.axes[0].get_xticklabels())
    (1, 2)
    """
    with style.style():
        fig, (ax,) = _fig(4.8, 3.4)
        vals = [rates.member_rate, rates.control_rate]
        names = [
            f"members\n{rates.member_count}/{rates.n_candidates}",
            f"controls\n{rates.m}/{rates.n_controls}",
        ]
        est = [100 * v.estimate for v in vals]
        err = [
            [100 * (v.estimate - v.lower) for v in vals],
            [100 * (v.upper - v.estimate) for v in vals],
        ]
        ax.bar(names, est, yerr=err, capsize=6, color=[PALETTE["member"], PALETTE["control"]])
        ax.axhline(
            100 * rates.alpha_n,
            ls="--",
            color=PALETTE["threshold"],
            label=rf"certified floor $\alpha_N = (m+1)/(N+1)$ = {_pct_tex(rates.alpha_n)}",
        )
        ax.set_ylabel("verbatim generation rate (%)")
        ax.set_title(title or "Greedy generation (95% Clopper–Pearson)")
        style.legend(ax, outside=True)
    return fig


MIN_SWEEP_POINTS = 3  # a sweep over fewer operating points is a few flat segments: not drawn


def too_few_points_figure(n: int) -> Figure:
    """A small figure that says, instead of flat panels, that a sweep has too few operating points.

    >>> from memclaim.report.figures import too_few_points_figure
    >>> too_few_points_figure(2).texts[0].get_text()[:30]
    'too few operating points (2) f'
    """
    fig = style.blank_figure(width=style.TEXT_WIDTH, height=0.9)
    fig.text(
        0.5,
        0.5,
        f"too few operating points ({n}) for a sweep: more controls give more thresholds "
        f"(K = 1 ... floor(alpha-dagger (N+1)))",
        ha="center",
        va="center",
        fontsize=9,
    )
    return fig


def alpha_sweep_figure(
    sweep: AlphaSweep, *, alpha_n: float | None = None, probability: bool = True
) -> Figure:
    """[EM] Fig. 4: (a) rates above each calibrated threshold, (b) the calibrated rate against
    alpha_N with the alpha-dagger ceiling, (c) the Beta band of alpha*.

    >>> from memclaim.claims.conformal import alpha_sweep
    >>> from memclaim.report.figures import alpha_sweep_figure
    >>> sw = alpha_sweep([-1.0, -2.0, -30.0], [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> fig = alpha_sweep_figure(sw, alpha_n=0.1)  # three panels (about a second)  # doctest: +SKIP
    >>> [a.get_title()[:3] for a in fig.axes]  # doctest: +SKIP
    ['(a)', '(b)', '(c)']
    """
    if sweep.k.size < MIN_SWEEP_POINTS:
        return too_few_points_figure(sweep.k.size)
    with style.style():
        # a paper's text width, the three panels stacked (side by side they need 11 inches)
        fig, axes = style.figure(width=style.TEXT_WIDTH, height=7.4, nrows=3)
        a, b, c = list(np.atleast_1d(axes))
        if probability and sweep.threshold_log10_prob is not None:
            x = sweep.threshold_log10_prob
            a.set_xlabel(r"threshold $\log_{10}\tau$ (probability)")
        else:
            x = sweep.threshold
            a.set_xlabel(r"threshold $\tau$ (score)")
        o = np.argsort(x)
        a.plot(
            x[o], 100 * sweep.member_rate[o], color=PALETTE["member"], label=r"members ($\hat G$)"
        )
        a.fill_between(
            x[o],
            100 * sweep.member_lower[o],
            100 * sweep.member_upper[o],
            color=PALETTE["member"],
            alpha=0.2,
        )
        a.plot(
            x[o],
            100 * sweep.control_rate[o],
            color=PALETTE["control"],
            label="controls (in-sample)",
        )
        a.set_ylabel(r"share scoring above $\tau$ (%)")
        a.set_title("(a) rates above each calibrated threshold")
        b.plot(
            100 * sweep.alpha_n,
            100 * sweep.calibrated_rate,
            color=PALETTE["bound"],
            label=r"$\hat M = \hat G - \alpha_N$",
        )
        b.fill_between(
            100 * sweep.alpha_n,
            100 * sweep.calibrated_lower,
            100 * sweep.calibrated_upper,
            color=PALETTE["bound"],
            alpha=0.2,
        )
        b.set_xscale("log")
        b.axhline(0, color="0.45", lw=0.8)
        if sweep.alpha_dagger < 1:
            b.axvline(
                100 * sweep.alpha_dagger,
                ls=":",
                color=PALETTE["threshold"],
                label=rf"max $\alpha_N = \alpha^\dagger$ ≈ {_pct_tex(sweep.alpha_dagger)}",
            )
        if alpha_n:
            b.axvline(
                100 * alpha_n,
                ls="--",
                color="0.25",
                label=rf"chosen $\alpha_N$ = {_pct_tex(alpha_n)}",
            )
        b.set_xlabel(r"certified FPR $\alpha_N$ (%)")
        b.set_ylabel("calibrated rate (%)")
        b.set_title("(b) calibrated memorization rate")
        ok = ~np.isnan(sweep.beta_lower)
        c.plot(
            100 * sweep.alpha_n,
            100 * sweep.alpha_n,
            color="0.25",
            label=r"$\alpha_N = E[\alpha^*]$",
        )
        if ok.any():
            c.fill_between(
                100 * sweep.alpha_n[ok],
                100 * sweep.beta_lower[ok],
                100 * sweep.beta_upper[ok],
                color=PALETTE["accent"],
                alpha=0.3,
                label=r"central band of $\alpha^*$ (Beta law)",
            )
        c.set_xscale("log")
        c.set_yscale("log")
        c.set_xlabel(r"certified FPR $\alpha_N$ (%)")
        c.set_ylabel(r"population FPR $\alpha^*$ (%)")
        c.set_title(r"(c) where $\alpha^*$ falls across control draws")
        for ax in (a, b, c):
            style.legend(ax, below=True)
    return fig


def census_ccdf(results: Sequence[CensusResult], *, labels: Sequence[str] | None = None) -> Figure:
    """[EM] Fig. 6: coverage of each document against the margin above its tau.

    >>> import math
    >>> from memclaim.claims.census import WindowScores, census
    >>> from memclaim.report.figures import census_ccdf
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> fig = census_ccdf([census(doc, ctl)])
    >>> len(fig.axes), len(fig.axes[0].get_lines())
    (1, 1)
    """
    with style.style():
        fig, (ax,) = _fig(6.4, 3.6)
        for i, r in enumerate(results):
            lab = labels[i] if labels else rf"{r.document_name} ($\tau = 10^{{{r.log10_tau}}}$)"
            ax.plot(r.curve.margins, 100 * r.curve.coverage, label=lab)
        ax.set_xlabel(r"margin $\Delta = \log_{10}(\mathrm{score}/\tau)$")
        ax.set_ylabel(r"coverage above $\tau \cdot 10^{\Delta}$ (% of characters)")
        ax.set_title("Coverage against margin ([EM] Eq. 9, Fig. 6)")
        ax.set_ylim(bottom=0)
        style.legend(ax, outside=True)
    return fig


def heat_strip(
    heat_log10: np.ndarray, *, log10_tau: float, width: int = 400, chars_per_cell: int = 1
) -> Figure:
    """[EM] Fig. 18: the whole document as rows of ``width`` characters, coloured by margin above
    tau (light grey: at or below tau; white: in no suffix), with a colorbar of the margin. A book is
    drawn binned: each cell then holds ``chars_per_cell`` characters (the largest heat among them).

    >>> import numpy as np
    >>> from memclaim.report.figures import heat_strip
    >>> fig = heat_strip(np.array([-1.0] * 10 + [-9.0] * 10), log10_tau=-8, width=10)
    >>> len(fig.axes)  # the strip and its colorbar
    2
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    h = np.asarray(heat_log10, dtype=np.float64)
    L = h.size
    width = max(1, min(width, L))
    rows = math.ceil(L / width)
    m = np.full(rows * width, np.nan)
    m[:L] = h - log10_tau
    m = m.reshape(rows, width)  # [rows, width] margins per character
    img = np.ones((rows, width, 4))
    img[..., :3] = 0.88
    above = np.isfinite(m) & (m > 0)
    top = float(np.nanmax(np.where(above, m, np.nan))) if above.any() else 1.0
    cmap = colormaps[style.HEATMAP_CMAP]
    norm = Normalize(0.0, max(top, 1e-9))
    img[above] = cmap(norm(m[above]))
    img[~np.isfinite(m)] = (1, 1, 1, 1)
    with style.style():
        fig, (ax,) = _fig(7.0, min(6.0, 2.4 + 0.05 * rows))
        ax.imshow(img, aspect="auto", interpolation="nearest")
        ax.grid(False)
        ax.set_yticks([])
        unit = (
            "characters"
            if chars_per_cell == 1
            else f"cells of {chars_per_cell:,} characters (largest heat in each)"
        )
        ax.set_xlabel(f"position within row ({width} per row; {L:,} {unit})")
        ax.set_ylabel("row")
        ax.set_title(
            rf"Per-character heat: margin above $\tau = 10^{{{log10_tau:g}}}$ (grey: at or below $\tau$)"
        )
        style.colorbar(
            fig,
            ScalarMappable(norm=norm, cmap=cmap),
            ax,
            label=r"margin $\Delta$ ($\log_{10}$ score/$\tau$)",
        )
    return fig


def census_budget_figure(view: CensusBudgetView, *, title: str = "") -> Figure:
    """[EM] Fig. 7: coverage extractable within n queries, and memorized and extractable.

    >>> from memclaim.claims.budget import census_budget_view
    >>> from memclaim.report.figures import census_budget_figure
    >>> fig = census_budget_figure(census_budget_view([-1.0, -1.0, -4.0, -9.0], log10_tau=-8.0))
    >>> len(fig.axes), len(fig.axes[0].get_lines()) > 0
    (1, True)
    """
    with style.style():
        fig, (ax,) = _fig(6.4, 3.6)
        x = view.log10_budgets  # log10 n, exact where n overflows a double
        _plot_distinct(
            ax,
            x,
            [
                (
                    100 * view.coverage_extractable,
                    "extractable within n",
                    {"color": PALETTE["control"]},
                ),
                (
                    100 * view.coverage_extractable_memorized,
                    "memorized and extractable",
                    {"color": PALETTE["member"]},
                ),
            ],
        )
        ax.axhline(
            100 * view.coverage_memorized,
            ls=":",
            color=PALETTE["bound"],
            label=r"memorized (clears $\tau$)",
        )
        if math.isfinite(view.n_tau.log10_n):
            ax.axvline(
                view.n_tau.log10_n,
                ls="--",
                color="0.25",
                label=rf"budget of $\tau$: {_n_label(view.n_tau)}",
            )
        ax.axvline(
            math.log10(view.realistic_n),
            color=PALETTE["threshold"],
            lw=0.8,
            label=f"realistic n = {numbers.num(view.realistic_n)}",
        )
        ax.set_xlabel(
            rf"query budget $\log_{{10}} n$ (confidence $1-\delta$ = {100 * (1 - view.delta):g}%)"
        )
        ax.set_ylabel("coverage (% of characters)")
        ax.set_title(title or "Coverage against budget ([EM] Fig. 7)")
        style.legend(ax, outside=True)
    return fig


def population_budget_figure(view: PopulationBudgetView) -> Figure:
    """[EM] F.2, Fig. 20: members and controls extractable within n queries.

    >>> import math
    >>> from memclaim.claims.budget import population_budget_view
    >>> from memclaim.report.figures import population_budget_figure
    >>> v = population_budget_view([math.log(0.5), math.log(1e-4)], [math.log(1e-3), math.log(1e-6)],
    ...                            log_tau=math.log(1e-5), alpha_n=0.0)
    >>> len(population_budget_figure(v).axes)
    1
    """
    with style.style():
        fig, (ax,) = _fig(6.4, 3.6)
        x = view.log10_budgets  # log10 n, exact where n overflows a double
        ax.fill_between(
            x, 100 * view.member_lower, 100 * view.member_upper, color=PALETTE["member"], alpha=0.2
        )
        _plot_distinct(
            ax,
            x,
            [
                (
                    100 * view.member_rate,
                    "members extractable within n",
                    {"color": PALETTE["member"]},
                ),
                (
                    100 * view.member_memorized_rate,
                    r"members above $\tau$ and extractable",
                    {"color": PALETTE["bound"]},
                ),
                (
                    100 * view.control_rate,
                    "controls extractable within n",
                    {"color": PALETTE["control"]},
                ),
            ],
        )
        if view.n_tau is not None and math.isfinite(view.n_tau.log10_n):
            ax.axvline(
                view.n_tau.log10_n,
                ls="--",
                color="0.25",
                label=rf"$n_{{\alpha_N}}$ = {_n_label(view.n_tau)}",
            )
        ax.axvline(
            math.log10(view.realistic_n),
            color=PALETTE["threshold"],
            lw=0.8,
            label=f"realistic n = {numbers.num(view.realistic_n)}",
        )
        ax.set_xlabel(
            rf"query budget $\log_{{10}} n$ (confidence $1-\delta$ = {100 * (1 - view.delta):g}%)"
        )
        ax.set_ylabel("rate (%)")
        ax.set_title("Rates against budget ([EM] F.2, Fig. 20)")
        style.legend(ax, outside=True)
    return fig


def disagreement_heatmap(
    table: DisagreementTable, path: str | Path | None = None, *, title: str = "Audit disagreement"
) -> Figure:
    """A heatmap of a :class:`memclaim.audits.table.DisagreementTable`'s leak signals, annotated
    "value\\nverdict", with a rule before the informed columns and a labelled colorbar ([MX]
    Fig. 12), in the shared style. Returns the Figure; writes it to ``path`` if given (format
    from the suffix; PNG at 200 dpi).

    >>> from memclaim.audits.table import build_table, rate_cell
    >>> fig = disagreement_heatmap(build_table(["loss"], {"x": {"loss": rate_cell(3, 10)}}))
    >>> [t.get_text() for t in fig.axes[0].texts]
    ['0.30\\nleak']
    """
    import matplotlib

    mat = table.signal_matrix()
    nr, nc = mat.shape
    with style.style():
        fig, (ax,) = _fig(2.8 + 1.5 * nc, 1.6 + 0.6 * nr)
        cmap = matplotlib.colormaps[style.HEATMAP_CMAP].with_extremes(
            bad="0.88"
        )  # audits not run: light grey
        shown = np.ma.masked_invalid(np.clip(mat, 0.0, 1.0))
        im = ax.imshow(shown, vmin=0.0, vmax=1.0, cmap=cmap, aspect="auto")
        ax.grid(False)
        for i, row in enumerate(table.cells):
            for j, c in enumerate(row):
                txt = "n/a" if c is None else f"{c.signal:.2f}\n{c.verdict}"
                val = 0.0 if c is None else float(np.clip(c.signal, 0, 1))
                ax.text(
                    j,
                    i,
                    txt,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="0.3" if c is None else ("black" if val > 0.6 else "white"),
                )
        ax.set_xticks(range(nc), [c.name for c in table.columns], rotation=30, ha="right")
        ax.set_yticks(range(nr), list(table.rows))
        ax.spines[:].set_visible(False)
        informed = [j for j, c in enumerate(table.columns) if c.informed]
        if informed and min(informed) > 0:
            ax.axvline(min(informed) - 0.5, color="white", linewidth=3)
        style.colorbar(fig, im, ax, label="leak signal\n(0 = at chance, 1 = fully detected)")
        ax.set_title(title)
    if path is not None:
        from pathlib import Path

        p = Path(path)
        data = (
            style.png_bytes(fig)
            if p.suffix.lower() == ".png"
            else (style.vector_bytes(fig) if p.suffix.lower() == ".pdf" else None)
        )
        if data is None:
            with style.style():
                fig.savefig(p, dpi=style.PNG_DPI)
        else:
            p.write_bytes(data)
    return fig


def score_histograms(
    candidate_scores: np.ndarray,
    control_scores: np.ndarray,
    *,
    threshold: float | None,
    probability: bool = True,
    labels: tuple[str, str] = ("members", "controls"),
    title: str = "",
) -> Figure:
    """The first figure a researcher draws: member and control score histograms on one axis, the
    threshold tau marked. Probability scores (natural-log q) are drawn as log10 q; scores of
    exactly zero probability (-inf) cannot be drawn and are counted in the legend.

    >>> import math
    >>> from memclaim.report.figures import score_histograms
    >>> fig = score_histograms([math.log(1e-3), math.log(1e-5), -math.inf], [math.log(1e-9), math.log(1e-8)],
    ...                        threshold=math.log(1e-8))
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2]
    ['members (2 drawn; 1 at q = 0 not drawn)', 'controls (2)']
    """
    cand = np.asarray(candidate_scores, dtype=np.float64)
    ctrl = np.asarray(control_scores, dtype=np.float64)
    to_x = (lambda v: v / math.log(10)) if probability else (lambda v: v)
    xs = [to_x(a[np.isfinite(a)]) for a in (cand, ctrl)]
    zeros = [int(np.sum(np.isneginf(a))) for a in (cand, ctrl)]
    with style.style():
        fig, (ax,) = _fig(style.TEXT_WIDTH, 3.2)
        finite = np.concatenate(xs) if any(x.size for x in xs) else np.zeros(1)
        lo, hi = float(finite.min()), float(finite.max())
        if threshold is not None and math.isfinite(threshold):
            lo, hi = min(lo, to_x(threshold)), max(hi, to_x(threshold))
        bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 31)
        for x, z, lab, role in zip(xs, zeros, labels, ("member", "control")):
            name = f"{lab} ({x.size} drawn; {z} at q = 0 not drawn)" if z else f"{lab} ({x.size})"
            ax.hist(
                x,
                bins=bins,
                color=PALETTE[role],
                alpha=0.55,
                label=name,
                edgecolor="white",
                linewidth=0.4,
            )
        if threshold is not None and math.isfinite(threshold):
            t = to_x(threshold)
            ax.axvline(
                t,
                color=PALETTE["threshold"],
                ls="--",
                lw=1.2,
                label=(rf"$\tau$ = $10^{{{t:.2f}}}$" if probability else rf"$\tau$ = {t:.4g}")
                + " (claim: score > τ)",
            )
        ax.set_xlabel(
            r"$\log_{10} q$ (probability of the suffix under the policy)"
            if probability
            else "score"
        )
        ax.set_ylabel("count")
        ax.set_title(title or "Scores of members and controls")
        style.legend(ax, outside=True)
    return fig
