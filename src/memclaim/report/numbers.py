"""How every number in a report's text is written (report.md, report.html, headlines, figures).

One convention, so the same quantity reads the same everywhere:

- plain numbers: 4 significant digits (:func:`num`), scientific below 1e-4 or from 1e6 on
  (``3.810e-20``); integers as integers with thousands separators (``12,345``);
- rates and probabilities shown as percentages: 3 significant digits (:func:`pct`, ``8.33%``),
  scientific below 0.001% (``2.50e-05%``);
- probabilities that can underflow are kept as log10 and written from it without exponentiating
  (:func:`sci_from_log10`, 3 significant digits: ``3.81e-20``, also far below 1e-308), and the
  log10 itself with 2 decimals (:func:`log10`, ``-19.42``); the two together by :func:`prob`;
- a missing value is an en dash ``–``, never ``None``; booleans are ``yes``/``no``; lists are
  comma-separated, mappings ``key: value`` pairs (:func:`value`): no Python repr reaches a reader;
- infinities are ``∞`` / ``-∞``; the minus sign is ASCII ``-`` throughout (copy-pasteable).

report.json keeps the exact numbers; these functions only write them for people.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from numbers import Integral, Real

__all__ = [
    "MISSING",
    "num",
    "integer",
    "pct",
    "sci_from_log10",
    "log10",
    "prob",
    "value",
    "interval",
]

MISSING = "–"
SIG_DIGITS = 4  # plain numbers
PCT_DIGITS = 3  # percentages
SCI_DIGITS = 3  # probabilities written from log10
LOG10_DECIMALS = 2  # log10 values


def _special(v: float) -> str | None:
    if v != v:
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return None


def integer(x: int | float) -> str:
    """An integer with thousands separators: ``12,345``.

    >>> from memclaim.report.numbers import integer
    >>> integer(12345)
    '12,345'
    """
    return f"{int(x):,}"


def num(x: object, digits: int = SIG_DIGITS) -> str:
    """A plain number: ``digits`` significant digits, scientific below 1e-4 and from 1e6 on;
    integers (and integral floats below 1e6) without a decimal point.

    >>> from memclaim.report.numbers import num
    >>> num(0.4621171572), num(12345.6), num(2.5e-5), num(3)
    ('0.4621', '12,346', '2.500e-05', '3')
    """
    if x is None:
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, Integral):
        return integer(x) if abs(int(x)) < 10**6 else f"{float(x):.{digits - 1}e}"
    if isinstance(x, Fraction):
        return f"{x.numerator}/{x.denominator}"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    s = _special(v)
    if s is not None:
        return s
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-4:
        return f"{v:.{digits - 1}e}"
    if abs(v) >= 10**digits:  # 12,346 rather than 1.235e+04 (printf's %g switches too early)
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def pct(x: float | None, digits: int = PCT_DIGITS) -> str:
    """A rate as a percentage: ``0.08333 -> '8.33%'``; scientific below 0.001%.

    >>> from memclaim.report.numbers import pct
    >>> pct(1 / 12), pct(2e-6)
    ('8.33%', '2.00e-04%')
    """
    if x is None:
        return MISSING
    v = 100 * float(x)
    s = _special(v)
    if s is not None:
        return s + "%"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.{digits - 1}e}%"
    return f"{v:.{digits}g}%"


def sci_from_log10(log10_value: float, digits: int = SCI_DIGITS) -> str:
    """'1.29e-27' from log10 p = -26.89 without exponentiating (works far below 1e-308).

    >>> from memclaim.report.numbers import sci_from_log10
    >>> sci_from_log10(-26.89), sci_from_log10(-400.5)  # far below the smallest double
    ('1.29e-27', '3.16e-401')
    """
    v = float(log10_value)
    if v == float("-inf"):
        return "0"
    if v != v:
        return "nan"
    if v == float("inf"):
        return "∞"
    e = math.floor(v)
    m = 10 ** (v - e)
    if round(m, digits - 1) >= 10:
        m, e = m / 10, e + 1
    return f"{m:.{digits - 1}f}e{e:+03d}" if e != 0 else f"{m:.{digits - 1}f}"


def log10(v: float | None, decimals: int = LOG10_DECIMALS) -> str:
    """A log10 value: 2 decimals (``-19.42``, ``-19.70``); ``-∞`` for log10 0.

    >>> from memclaim.report.numbers import log10
    >>> log10(-19.4189), log10(float("-inf"))
    ('-19.42', '-∞')
    """
    if v is None:
        return MISSING
    f = float(v)
    s = _special(f)
    return s if s is not None else f"{f:.{decimals}f}"


def prob(log10_p: float | None) -> str:
    """A probability from its log10: ``'3.81e-20 (log10 -19.42)'``; ``'0'`` for an exact zero.

    >>> from memclaim.report.numbers import prob
    >>> prob(-19.4189), prob(float("-inf"))
    ('3.81e-20 (log10 -19.42)', '0')
    """
    if log10_p is None:
        return MISSING
    if float(log10_p) == float("-inf"):
        return "0"
    return f"{sci_from_log10(log10_p)} (log10 {log10(log10_p)})"


def interval(
    estimate: float | None,
    lower: float | None,
    upper: float | None,
    fmt: Callable[[float | None], str] = pct,
) -> str:
    """``'8.33% [0.211%, 38.5%]'``.

    >>> from memclaim.report.numbers import interval
    >>> interval(1 / 12, 0.00211, 0.385)
    '8.33% [0.211%, 38.5%]'
    """
    return f"{fmt(estimate)} [{fmt(lower)}, {fmt(upper)}]"


def value(v: object) -> str:
    """Any recorded value for a reader: ``None -> '–'``, booleans ``yes``/``no``, numbers by
    :func:`num`, lists comma-separated, mappings ``key: value; ...`` (recursively). Never a
    Python repr.

    >>> from memclaim.report.numbers import value
    >>> value(None), value(True), value([0.5, 2]), value({"model": "toy", "k": 3})
    ('–', 'yes', '0.5, 2', 'model: toy; k: 3')
    """
    if v is None:
        return MISSING
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (Real, Fraction)):
        return num(v)
    if isinstance(v, dict):
        return "; ".join(f"{k}: {value(x)}" for k, x in v.items()) if v else MISSING
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v, key=str) if isinstance(v, (set, frozenset)) else v
        return ", ".join(value(x) for x in items) if items else "none"
    try:  # numpy scalars and arrays
        import numpy as np

        if isinstance(v, np.generic):
            return value(v.item())
        if isinstance(v, np.ndarray):
            return value(v.tolist())
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return str(v)
