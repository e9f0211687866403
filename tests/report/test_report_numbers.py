"""report/numbers.py: the one number format of every report (issue 15 item 6)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from memclaim.report import numbers as N


@pytest.mark.parametrize(
    "x, want",
    [
        (None, "–"),
        (True, "yes"),
        (False, "no"),
        (0, "0"),
        (12345, "12,345"),
        (10**7, "1.000e+07"),
        (0.0, "0"),
        (0.08333, "0.08333"),
        (12345.6, "12,346"),
        (1e-5, "1.000e-05"),
        (2.5e6, "2.500e+06"),
        (Fraction(6, 121), "6/121"),
        (math.inf, "∞"),
        (-math.inf, "-∞"),
        (math.nan, "nan"),
        ("text", "text"),
    ],
)
def test_num(x, want):
    assert N.num(x) == want


def test_pct_log10_prob_interval():
    assert N.pct(0.08333) == "8.33%"
    assert N.pct(None) == "–"
    assert N.pct(1e-7) == "1.00e-05%"
    assert N.log10(-19.4167) == "-19.42" and N.log10(-math.inf) == "-∞" and N.log10(None) == "–"
    assert N.prob(-19.4167) == "3.83e-20 (log10 -19.42)"
    assert N.prob(-math.inf) == "0" and N.prob(None) == "–"
    assert N.interval(0.08333, 0.00211, 0.385) == "8.33% [0.211%, 38.5%]"


def test_sci_from_log10_far_below_double_range():
    assert N.sci_from_log10(-400.0) == "1.00e-400"
    assert N.sci_from_log10(-26.89) == "1.29e-27"
    assert N.sci_from_log10(-0.0000001) == "1.00"  # rounds up into the next decade
    assert N.sci_from_log10(-math.inf) == "0"


def test_value_never_a_python_repr():
    out = N.value({"policies": ["full", "greedy"], "near": None, "exact": False, "n": 3})
    assert "None" not in out and "[" not in out and "{" not in out and "False" not in out
    assert "full" in out and "greedy" in out and "no" in out
