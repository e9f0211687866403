"""Issue 15 item 5: every figure memclaim draws (reports, DP plots, audits) is fit for a paper,
checked as a class over every figure builder:

- drawn in the shared style and written as PNG at 200 dpi plus a PDF (test_report_style covers
  the writer; here every builder goes through it);
- no text clipped: every title, label, tick label, legend entry and annotation lies inside the
  canvas after layout;
- legends off the data: no legend box contains a plotted data point;
- every heatmap (an image) has a labelled colorbar;
- no internal tags ("[quick]") in titles;
- every panel of a DP figure names the relation it was drawn for, never the other one
  (`dp plot --neighbors add-remove` labelled the staircase panel "replace-one").
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from _paths import SRC
from memclaim.claims.scores import LN10


def _draw(fig):
    from memclaim.report import style

    style.png_bytes(fig)  # lays out, wraps long titles, renders at 200 dpi
    fig.canvas.draw()  # and again at the figure's own dpi, where the extents are measured
    return fig.canvas.get_renderer()


def _texts(fig):
    out = []
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        for axis in (ax.xaxis, ax.yaxis):  # the ticks actually drawn (inside the view limits)
            out += [
                lab
                for tick in axis._update_ticks()
                for lab in (tick.label1, tick.label2)
                if lab.get_visible()
            ]
        out += list(ax.texts)
        leg = ax.get_legend()
        if leg is not None:
            out += list(leg.get_texts())
    return [t for t in out if t.get_text().strip() and t.get_visible()]


def check_figure(fig, name: str):
    r = _draw(fig)
    W, H = fig.canvas.get_width_height()
    for t in _texts(fig):
        bb = t.get_window_extent(r)
        assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, (
            name,
            t.get_text()[:60],
        )
        assert "[quick]" not in t.get_text(), (name, t.get_text())
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        box = leg.get_window_extent(r)
        for line in ax.get_lines():
            xy = line.get_xydata()
            if len(xy) == 0 or not line.get_visible():
                continue
            pts = line.get_transform().transform(np.asarray(xy, dtype=float))
            pts = pts[np.all(np.isfinite(pts), axis=1)]
            # points inside the axes only (clipped ones are not drawn)
            ab = ax.get_window_extent(r)
            pts = pts[
                (pts[:, 0] >= ab.x0)
                & (pts[:, 0] <= ab.x1)
                & (pts[:, 1] >= ab.y0)
                & (pts[:, 1] <= ab.y1)
            ]
            inside = (
                (pts[:, 0] > box.x0)
                & (pts[:, 0] < box.x1)
                & (pts[:, 1] > box.y0)
                & (pts[:, 1] < box.y1)
            )
            assert not inside.any(), (name, "legend covers data of", line.get_label())
        if ax.images:
            cbs = [a for a in fig.axes if a is not ax and getattr(a, "_colorbar", None) is not None]
            assert cbs and all(a.get_ylabel() or a.get_xlabel() for a in cbs), (
                name,
                "heatmap without a colorbar",
            )


def _claim(kind="log-prob", binary=False):
    from memclaim.claims.population import population_claim

    rng = np.random.default_rng(0)
    if binary:
        cand = np.where(
            rng.random(30) < 0.4, 0.0, -np.inf
        )  # greedy: log q = 0 (reproduced) or -inf
        ctl = np.where(rng.random(60) < 0.05, 0.0, -np.inf)
        return population_claim(
            candidate_scores=cand, control_scores=ctl, alpha="0.1", kind="log-prob", binary=True
        )
    return population_claim(
        candidate_scores=-rng.gamma(2.0, 10.0, 40),
        control_scores=-rng.gamma(3.0, 12.0, 99),
        alpha="0.05",
        kind=kind,
        budget_delta=0.05,
    )


def _census():
    from memclaim.claims.census import WindowScores, census

    L = 2000
    starts = np.arange(0, L - 40, 10)
    rng = np.random.default_rng(1)
    doc = WindowScores.from_arrays(
        -rng.gamma(2.0, 8.0, starts.size) * LN10, starts, starts + 40, doc_length=L, name="book.txt"
    )
    ctl = WindowScores.from_arrays(
        -rng.gamma(4.0, 8.0, starts.size) * LN10,
        starts,
        starts + 40,
        doc_length=L,
        name="control.txt",
    )
    return census(doc, ctl)


@functools.lru_cache(maxsize=1)
def report_figures():
    """(name, Figure) for every figure builder of report/ (reports and audits), built once."""
    from memclaim.audits.table import build_table, rate_cell
    from memclaim.claims.budget import census_budget_view
    from memclaim.report import figures as F

    c = _claim()
    t = c.primary_test
    b = _claim(binary=True)
    r = _census()
    tab = build_table(
        ["loss", "zlib"],
        {
            "planted": {"loss": rate_cell(9, 10), "zlib": rate_cell(2, 10)},
            "clean": {"loss": rate_cell(1, 10)},
        },
    )
    out = [
        ("alpha_sweep", F.alpha_sweep_figure(c.primary_sweep, alpha_n=t.alpha_n, probability=True)),
        ("population_budget", F.population_budget_figure(c.budget)),
        ("binary_bars", F.binary_bars(b.primary_test.binary_rates)),
        ("census_ccdf", F.census_ccdf([r])),
        ("heat_strip", F.heat_strip(r.heat_log10, log10_tau=r.log10_tau)),
        (
            "census_budget",
            F.census_budget_figure(census_budget_view(r.heat_log10, log10_tau=r.log10_tau)),
        ),
        ("disagreement", F.disagreement_heatmap(tab)),
    ]
    return out


@pytest.mark.parametrize(
    "name",
    [
        "alpha_sweep",
        "population_budget",
        "binary_bars",
        "census_ccdf",
        "heat_strip",
        "census_budget",
        "disagreement",
    ],
)
def test_report_figures_are_fit_for_a_paper(name):
    fig = dict(report_figures())[
        name
    ]  # a figure drawn twice keeps its layout: the check is idempotent
    check_figure(fig, name)


def _dp_figures(monkeypatch, tmp_path, neighbors):
    from memclaim.privacy.pld import dpsgd_curve
    from memclaim.report import privacy as P

    figs = []
    real = P._save

    def keep(fig, path):
        figs.append((Path(path).stem, fig))
        return real(fig, path)

    monkeypatch.setattr(P, "_save", keep)
    cur = dpsgd_curve(
        noise_multiplier=1.0, sampling_rate=0.05, steps=20, neighbors=neighbors, route_delta=1e-5
    )
    paths = P.plot_all(tmp_path, neighbors=neighbors, copies=3, dpsgd=cur)
    return figs, paths


@pytest.mark.parametrize("neighbors", ["replace", "add-remove"])
def test_dp_figures_name_the_relation_they_were_drawn_for(monkeypatch, tmp_path, neighbors):
    """Every panel title of `dp plot` names the relation passed, and none names the other
    (the staircase panel said "[replace-one]" for --neighbors add-remove)."""
    from memclaim.privacy.tradeoff import neighbors_label

    figs, paths = _dp_figures(monkeypatch, tmp_path, neighbors)
    assert [p.name for p in paths] == [f"{s}.{e}" for s, _ in figs for e in ("png", "pdf")]
    mine = neighbors_label(neighbors)
    other = neighbors_label("add-remove" if neighbors == "replace" else "replace")
    for stem, fig in figs:
        check_figure(fig, stem)
        for ax in fig.axes:
            if ax.get_title():
                assert other not in ax.get_title(), (stem, ax.get_title())
        titles = " ".join(ax.get_title() for ax in fig.axes)
        assert mine in titles, (stem, titles)
        if stem == "fig3_staircase":
            right = fig.axes[1].get_title()
            assert (
                ("RO" in right and "LOO" not in right) if neighbors == "replace" else "LOO" in right
            ), right


def test_no_internal_tags_in_figure_titles():
    """No figure title anywhere in the package is built with an internal tag like '[quick]'
    (a reduced run is recorded in NAME.json's "quick" field, not in the figure)."""
    bad = []
    for p in SRC.rglob("*.py"):
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"set_title|suptitle", line) and "[quick]" in line:
                bad.append(f"{p.relative_to(SRC)}:{i}")
    assert not bad, bad


def test_every_figure_goes_through_the_shared_style():
    """No module draws a Figure outside report/style.py's builder (one style for every figure)."""
    bad = []
    for p in SRC.rglob("*.py"):
        if p.name == "style.py":
            continue
        text = p.read_text(encoding="utf-8")
        if re.search(
            r"\bFigure\(\s*figsize|import matplotlib\.pyplot|from matplotlib import pyplot|\bplt\.",
            text,
        ):
            bad.append(str(p.relative_to(SRC)))
    assert not bad, bad
