"""One matplotlib style for every memclaim figure (reports, DP plots, reproductions, audits).

Figures are built without pyplot's global state (safe in threads, servers and notebooks) and
laid out by matplotlib's constrained layout, so labels and legends are never clipped. Each
figure is written as a PNG at :data:`PNG_DPI` plus a vector copy (PDF), beside the report that
shows it::

    from memclaim.report.style import figure, figure_files, legend, style
    with style():                            # rcParams are read when artists are made
        fig, ax = figure(width=4.8, height=3.4)
        ax.plot([0, 1], [0, 1], label="y = x"); ax.set_xlabel(r"FPR $\\alpha$"); legend(ax)
    files = figure_files(fig, "coverage")   # {"coverage.png": b"...", "coverage.pdf": b"..."}

Write ``files`` with :func:`memclaim.fsutil.write_files` (staged, then renamed into place).
Text is rendered by matplotlib's mathtext (``$\\alpha_N$``, ``$\\tau_{doc}$``): Greek letters need
no LaTeX install. Colours come from :data:`PALETTE` (colour-blind safe, Okabe-Ito), so a member
is the same blue and a control the same grey in every figure.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the annotations' names only
    from contextlib import AbstractContextManager

    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable
    from matplotlib.colorbar import Colorbar
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

PNG_DPI = 200
# A paper's widths (inches): a figure is made at the text width of a one-column page (or the
# column width of a two-column one), so it goes into a paper unscaled and its 9-point text stays
# 9 points.
TEXT_WIDTH = 6.5
COLUMN_WIDTH = 3.3
VECTOR_FORMAT = "pdf"

# Okabe & Ito (2008) colour-blind safe palette, with memclaim's roles.
PALETTE = {
    "member": "#0072B2",  # blue
    "control": "#7F7F7F",  # grey
    "threshold": "#D55E00",  # vermillion: tau, alpha_N and other certified lines
    "bound": "#009E73",  # bluish green: DP bounds and caps
    "reference": "#E69F00",  # orange: naive rules, references, the paper's numbers
    "accent": "#CC79A7",  # reddish purple
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}
CYCLE = [
    PALETTE[k]
    for k in ("member", "threshold", "bound", "reference", "accent", "sky", "control", "black")
]
HEATMAP_CMAP = "viridis"  # perceptually uniform, readable in greyscale

RC: dict[str, Any] = {
    "font.size": 9.0,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.5,
    "axes.prop_cycle": None,  # filled in by _rc()
    "figure.dpi": 100,
    "savefig.dpi": PNG_DPI,
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text for journals
    "mathtext.fontset": "dejavusans",
}


def _rc() -> dict:
    from cycler import cycler

    rc = dict(RC)
    rc["axes.prop_cycle"] = cycler(color=CYCLE)
    return rc


def style() -> AbstractContextManager:
    """A context in which matplotlib uses memclaim's style: build every figure inside it
    (rcParams are read when axes, lines and legends are made, and again when a figure is drawn).

    >>> from memclaim.report.style import figure, style
    >>> with style():
    ...     fig, ax = figure(width=3, height=2)
    ...     _ = ax.plot([0, 1], [0, 1])
    >>> type(fig).__name__, len(ax.get_lines())
    ('Figure', 1)
    """
    import matplotlib

    return matplotlib.rc_context(_rc())


def figure(
    *, width: float = 6.0, height: float = 3.8, nrows: int = 1, ncols: int = 1, **subplot_kw: Any
) -> tuple[Figure, Any]:
    """A styled Figure and its axes (one Axes, or an array of shape [nrows, ncols] squeezed like
    ``plt.subplots``), laid out by constrained layout so no label is clipped.

    >>> from memclaim.report.style import figure
    >>> fig, axes = figure(width=6, height=2, ncols=2)
    >>> axes.shape, float(fig.get_figwidth())
    ((2,), 6.0)
    """
    from matplotlib.figure import Figure

    with style():
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return fig, axes


def legend(ax: Axes, *, outside: bool = False, below: bool = False, **kw: Any) -> Legend:
    """A legend placed off the data: beside the axes (``outside``), under the axes' x label
    (``below``: for panels side by side), or the best free corner. Constrained layout makes room
    for a legend outside the axes, so it is never clipped.

    >>> from memclaim.report.style import figure, legend
    >>> fig, ax = figure(width=3, height=2)
    >>> _ = ax.plot([0, 1], [0, 1], label="bound")
    >>> [t.get_text() for t in legend(ax, outside=True).get_texts()]
    ['bound']
    """
    kw.setdefault("fontsize", RC["legend.fontsize"])
    kw.setdefault("frameon", False)
    if outside:
        return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)
    if below:
        # anchored at the axes' bottom edge and pushed down past the tick labels and the x label
        # (borderaxespad is in font-size units, so the gap holds at any figure size)
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=4.2, **kw)
    return ax.legend(loc="best", **kw)


def colorbar(fig: Figure, mappable: ScalarMappable, ax: Axes, *, label: str) -> Colorbar:
    """A labelled colorbar beside ``ax`` (every heatmap has one).

    >>> import numpy as np
    >>> from memclaim.report.style import colorbar, figure
    >>> fig, ax = figure(width=3, height=2)
    >>> colorbar(fig, ax.imshow(np.zeros((2, 2))), ax, label="margin").ax.get_ylabel()
    'margin'
    """
    cb = fig.colorbar(mappable, ax=ax, fraction=0.05, pad=0.02)
    cb.set_label(label)
    return cb


def _wrap(text: str, width: int) -> str:
    """``text`` wrapped at spaces to ``width`` characters, never inside a mathtext ``$...$``."""
    import textwrap

    parts = text.split("$")
    for i in range(1, len(parts), 2):  # odd parts are math
        parts[i] = parts[i].replace(" ", "\x00")
    lines = []
    for line in "$".join(parts).split("\n"):
        lines += textwrap.wrap(
            line, max(12, width), break_long_words=False, break_on_hyphens=False
        ) or [""]
    return "\n".join(lines).replace("\x00", " ")


def fit_titles(fig: Figure) -> None:
    """Wrap every axes title (and the suptitle) that would run past the canvas, so a long title
    is never clipped (constrained layout makes room for titles' height, not their width).

    >>> from memclaim.report.style import figure, fit_titles
    >>> fig, ax = figure(width=2, height=2)
    >>> _ = ax.set_title("a title far too long to fit on a two-inch-wide canvas in one line")
    >>> fit_titles(fig)
    >>> chr(10) in ax.get_title()  # wrapped
    True
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or type(fig.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(fig)
    for _ in range(3):
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        W = fig.canvas.get_width_height()[0]
        changed = False
        texts = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
        if getattr(fig, "_suptitle", None) is not None:
            texts.append(fig._suptitle)
        for t in texts:
            s = t.get_text()
            if not s:
                continue
            bb = t.get_window_extent(r)
            if bb.x0 >= 0 and bb.x1 <= W:
                continue
            cx = 0.5 * (bb.x0 + bb.x1)
            avail = 2 * min(cx, W - cx) if t.get_ha() == "center" else W - max(bb.x0, 0)
            longest = max(len(x) for x in s.split("\n"))
            t.set_text(_wrap(s.replace("\n", " "), int(longest * 0.95 * avail / max(bb.width, 1))))
            changed = True
        if not changed:
            return


def _render(fig, fmt: str, dpi: int | None) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or type(fig.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(fig)
    with style():
        fit_titles(fig)
    buf = io.BytesIO()
    # no 'Software'/date metadata: the bytes depend only on the numbers and matplotlib's version
    meta = (
        {"Software": None}
        if fmt == "png"
        else {"Creator": None, "Producer": None, "CreationDate": None}
    )
    with style():
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    return buf.getvalue()


def png_bytes(fig: Figure, *, dpi: int = PNG_DPI) -> bytes:
    """The figure as PNG bytes at ``dpi`` (default 200).

    >>> from memclaim.report.style import figure, png_bytes
    >>> fig, ax = figure(width=3, height=2)
    >>> png_bytes(fig)[1:4]  # renders the figure  # doctest: +SKIP
    b'PNG'
    """
    return _render(fig, "png", dpi)


def vector_bytes(fig: Figure) -> bytes:
    """The figure as a vector PDF.

    >>> from memclaim.report.style import figure, vector_bytes
    >>> fig, ax = figure(width=3, height=2)
    >>> vector_bytes(fig)[:5]  # renders the figure  # doctest: +SKIP
    b'%PDF-'
    """
    return _render(fig, VECTOR_FORMAT, None)


def figure_files(fig: Figure, stem: str) -> dict[str, bytes]:
    """``{stem}.png`` (200 dpi) and ``{stem}.pdf`` as bytes, ready for fsutil.write_files.

    >>> from memclaim.report.style import figure, figure_files
    >>> fig, ax = figure(width=3, height=2)
    >>> sorted(figure_files(fig, "roc"))  # renders the figure twice  # doctest: +SKIP
    ['roc.pdf', 'roc.png']
    """
    return {f"{stem}.png": png_bytes(fig), f"{stem}.{VECTOR_FORMAT}": vector_bytes(fig)}


def blank_figure(*, width: float, height: float) -> Figure:
    """A styled, empty Figure with constrained layout, for layouts ``figure`` does not make
    (``subplot_mosaic``, mixed panels); add the axes inside ``with style():``.

    >>> from memclaim.report.style import blank_figure, style
    >>> with style():
    ...     fig = blank_figure(width=4, height=3)
    ...     axes = fig.subplot_mosaic([["a", "b"]])
    >>> sorted(axes), type(fig.get_layout_engine()).__name__
    (['a', 'b'], 'ConstrainedLayoutEngine')
    """
    from matplotlib.figure import Figure

    with style():
        return Figure(figsize=(width, height), layout="constrained")


def colormap(
    name: str | None = None, *, under: str | None = None, bad: str | None = None
) -> Colormap:
    """A named matplotlib colormap (``HEATMAP_CMAP`` by default) with colours for values under the
    range and for masked values.

    >>> from memclaim.report.style import colormap
    >>> cm = colormap("viridis", under="white")
    >>> cm.name, tuple(float(x) for x in cm.get_under())
    ('viridis', (1.0, 1.0, 1.0, 1.0))
    """
    from matplotlib import colormaps

    return colormaps[name or HEATMAP_CMAP].with_extremes(under=under, bad=bad)
