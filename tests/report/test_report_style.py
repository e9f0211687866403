"""The shared figure style (memclaim.report.style): PNG at 200 dpi plus a vector PDF, labels
inside the canvas, deterministic bytes, colour roles."""

from __future__ import annotations

import io

import numpy as np


def _build():
    from memclaim.report.style import PALETTE, colorbar, figure, legend, style

    with style():
        fig, (a, b) = figure(width=6.0, height=3.0, ncols=2)
        x = np.linspace(0, 1, 50)
        a.plot(x, x**2, color=PALETTE["member"], label="members")
        a.plot(x, x**3, color=PALETTE["control"], label="controls")
        a.set_xlabel(r"certified level $\alpha_N$")
        a.set_ylabel(r"calibrated rate $\hat M$ (%)")
        legend(a)
        im = b.imshow(np.random.default_rng(0).random((4, 30)), aspect="auto")
        colorbar(fig, im, b, label=r"$\log_{10} q$")
    return fig


def test_png_is_200_dpi_and_a_vector_copy_is_written():
    from PIL import Image

    from memclaim.report.style import PNG_DPI, figure_files

    files = figure_files(_build(), "fig")
    assert set(files) == {"fig.png", "fig.pdf"}
    img = Image.open(io.BytesIO(files["fig.png"]))
    assert img.size == (int(6.0 * PNG_DPI), int(3.0 * PNG_DPI))
    assert abs(img.info["dpi"][0] - PNG_DPI) < 1
    assert files["fig.pdf"].startswith(b"%PDF")


def test_bytes_are_deterministic():
    from memclaim.report.style import figure_files

    assert figure_files(_build(), "a") == figure_files(_build(), "a")


def test_labels_are_not_clipped():
    """Every text artist's window extent lies inside the canvas (constrained layout)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _build()
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    W, H = fig.canvas.get_width_height()
    for ax in fig.axes:
        for t in [ax.xaxis.label, ax.yaxis.label, ax.title]:
            if not t.get_text():
                continue
            bb = t.get_window_extent(r)
            assert bb.x0 >= -0.5 and bb.y0 >= -0.5 and bb.x1 <= W + 0.5 and bb.y1 <= H + 0.5, (
                t.get_text()
            )
