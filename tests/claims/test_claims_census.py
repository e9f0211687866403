"""The census ([EM] §5, App. E): tau_doc in log space, coverage by interval union against a
character-mask reference, decontamination, flags, the global threshold, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaim.claims.census import (
    WindowScores,
    census,
    census_threshold,
    char_heat,
    coverage,
    coverage_from_heat,
    flag_near_verbatim,
    global_census,
    global_threshold,
    union_length,
)
from memclaim.errors import InputError

LN10 = math.log(10)


def _mask_coverage(w: WindowScores, log_tau: float) -> float:
    m = np.zeros(w.doc_length, dtype=bool)
    for s, a, b in zip(w.log_scores, w.starts, w.ends):
        if s > log_tau:
            m[a:b] = True
    return m.mean()


@st.composite
def windows(draw):
    L = draw(st.integers(1, 200))
    n = draw(st.integers(1, 30))
    starts, ends, scores = [], [], []
    for _ in range(n):
        a = draw(st.integers(0, L - 1))
        b = draw(st.integers(a + 1, L))
        starts.append(a)
        ends.append(b)
        scores.append(draw(st.sampled_from([-np.inf, -100.0, -60.0, -30.0, -10.0, -1.0, 0.0])))
    return WindowScores.from_arrays(scores, np.array(starts), np.array(ends), doc_length=L)


@settings(max_examples=80)
@given(windows(), st.sampled_from([-np.inf, -70.0, -30.0, -10.0, -1.0]))
def test_coverage_union_and_heat_equal_mask_reference(w, log_tau):
    ref = _mask_coverage(w, log_tau)
    assert coverage(w, log_tau=log_tau) == pytest.approx(ref)
    heat = char_heat(w)
    assert coverage_from_heat(heat, [log_tau])[0] == pytest.approx(ref)
    keep = w.log_scores > log_tau
    assert union_length(w.starts[keep], w.ends[keep]) == round(ref * w.doc_length)


def test_tau_doc_in_log_space_em_eq31():
    L = 1000
    starts = np.arange(0, 900, 50)
    ends = starts + 50
    # top control probability 3.2e-27 -> tau = 1e-26 (mantissa discarded, rounded up a decade)
    s = np.full(starts.size, -200.0)
    s[3] = math.log(3.2) - 27 * LN10
    c = WindowScores.from_arrays(s, starts, ends, doc_length=L, name="control")
    th = census_threshold(c)
    assert th.log10_tau == -26 and th.argmax_window == 3 and th.argmax_span == (150, 200)
    # far below the double range: 1e-400 is never exponentiated
    s2 = np.full(starts.size, -2000.0)
    s2[0] = -400.5 * LN10
    th2 = census_threshold(WindowScores.from_arrays(s2, starts, ends, doc_length=L))
    assert th2.log10_tau == -400 and th2.log10_tau >= th2.max_control_log10 > th2.log10_tau - 1


@settings(max_examples=60)
@given(st.one_of(st.integers(-500, -1).map(float), st.floats(-500, -1e-6)))
def test_tau_doc_is_the_next_decade_up(top10):
    """Exact (false-alarm rate 0): tau_doc = 10^ceil(log10 max control) ([EM] Eq. 31), about half
    the examples an exact decade (where ceil and 'floor + 1' differ), the rest anywhere."""
    s = np.array([top10 * LN10, top10 * LN10 - 5])
    th = census_threshold(
        WindowScores.from_arrays(s, np.array([0, 5]), np.array([5, 10]), doc_length=10)
    )
    assert th.max_control_log10 == pytest.approx(top10, rel=1e-14, abs=1e-14)
    assert th.log10_tau == math.ceil(th.max_control_log10)
    assert th.log10_tau >= th.max_control_log10 and th.log10_tau - th.max_control_log10 < 1 + 1e-9


def test_decontamination_and_bad_controls():
    starts = np.arange(0, 100, 10)
    c = WindowScores.from_arrays(
        [-50.0, -10.0, -60.0, -55.0, -70.0, -80.0, -52.0, -58.0, -90.0, -65.0],
        starts,
        starts + 10,
        doc_length=110,
        name="Sunrise",
    )
    full = census_threshold(c)
    assert full.log10_tau == math.ceil(-10 / LN10)
    dec = census_threshold(c, exclude_spans=[(12, 14)])  # a verified quotation inside window 1
    assert dec.n_excluded == 1 and dec.excluded_windows == (1,)
    assert dec.log10_tau == math.ceil(-50 / LN10) < full.log10_tau  # decontamination lowers the bar
    assert census_threshold(c, exclude_windows=[1]).log10_tau == dec.log10_tau
    with pytest.raises(InputError, match="every one of its 10 windows was excluded"):
        census_threshold(c, exclude_spans=[(0, 110)])
    with pytest.raises(InputError, match="all 10 remaining control windows score -inf"):
        census_threshold(
            WindowScores.from_arrays([-np.inf] * 10, starts, starts + 10, doc_length=110)
        )
    with pytest.raises(InputError, match="empty or negative"):
        census_threshold(c, exclude_spans=[(5, 5)])


def test_bad_windows():
    with pytest.raises(InputError, match="shorter than one window"):
        WindowScores.from_arrays(
            [], np.array([], dtype=int), np.array([], dtype=int), doc_length=30, name="tiny"
        )
    with pytest.raises(InputError, match="outside"):
        WindowScores.from_arrays([-1.0], np.array([5]), np.array([40]), doc_length=30)
    with pytest.raises(InputError, match="3 scores but 2 starts"):
        WindowScores.from_arrays([-1.0] * 3, np.array([0, 1]), np.array([2, 3]), doc_length=30)
    with pytest.raises(InputError, match="document length"):
        WindowScores.from_arrays([-1.0], np.array([0]), np.array([1]), doc_length=0)
    with pytest.raises(InputError, match="not a log-probability"):
        WindowScores.from_arrays([float("nan")], np.array([0]), np.array([1]), doc_length=3)


def test_census_counts_only_suffixes_and_margins():
    L = 100
    # windows: prefix is implicit; suffix spans are [10,20), [15,30), [50,60); scores 1e-3, 1e-8, 1e-30
    doc = WindowScores.from_arrays(
        np.array([-3, -8, -30]) * LN10,
        np.array([10, 15, 50]),
        np.array([20, 30, 60]),
        doc_length=L,
        name="book",
    )
    ctrl = WindowScores.from_arrays(
        np.array([-12.3, -40]) * LN10,
        np.array([0, 10]),
        np.array([10, 20]),
        doc_length=50,
        name="control",
    )
    r = census(doc, ctrl)
    assert r.log10_tau == -12 and r.covered_chars == 20 and r.coverage == 0.2  # [10, 30)
    assert r.n_windows_above == 2
    np.testing.assert_allclose(r.window_margins, [9, 4, -18])
    assert r.coverage_at_margins["0"] == 0.2 and r.coverage_at_margins["5"] == 0.1
    assert r.curve.coverage[0] == pytest.approx(r.coverage) and np.all(
        np.diff(r.curve.coverage) <= 0
    )
    assert r.heat_log10[12] == pytest.approx(-3) and r.heat_log10[25] == pytest.approx(-8)
    assert r.heat_log10[0] == -np.inf
    d = r.to_dict()
    assert "heat_log10" not in d and d["heat_summary"]["above_threshold"] == 20


def test_global_threshold_is_most_conservative():
    def pair(top, name):
        d = WindowScores.from_arrays(
            np.array([-5.0, -15.0, -25.0]) * LN10,
            np.array([0, 10, 20]),
            np.array([10, 20, 30]),
            doc_length=30,
            name=name,
        )
        c = WindowScores.from_arrays(
            np.array([top, top - 3]) * LN10,
            np.array([0, 10]),
            np.array([10, 20]),
            doc_length=20,
            name=name + "-ctrl",
        )
        return d, c

    pairs = [pair(-20.5, "a"), pair(-12.2, "b"), pair(-26.0, "c")]
    g = global_census(pairs)
    assert g.threshold.log10_tau == -12 and g.per_pair_log10_tau == {"a": -20, "b": -12, "c": -26}
    assert all(r.log10_tau == -12 for r in g.results)
    assert global_threshold([census_threshold(c) for _, c in pairs]).log10_tau == -12
    with pytest.raises(InputError):
        global_threshold([])


def test_flag_near_verbatim():
    raven = "Once upon a midnight dreary, while I pondered, weak and weary"
    doc_text = "Chapter one. " + raven + " said the narrator, and went on."
    ctrl_text = (
        "Her own new prose about district twelve. "
        + raven.replace("weary", "weery")
        + " Then silence."
    )
    i = ctrl_text.index("Once")
    spans = [(0, 40), (i, i + len(raven)), (len(ctrl_text) - 13, len(ctrl_text))]
    c = WindowScores.from_arrays(
        [-50.0, -5.0, -60.0],
        np.array([a for a, _ in spans]),
        np.array([b for _, b in spans]),
        doc_length=len(ctrl_text),
        name="ctrl",
    )
    flags = flag_near_verbatim(c, ctrl_text, candidate_text=doc_text, references={"poe": raven})
    assert [f.window for f in flags] == [1]
    assert flags[0].similarity >= 90 and flags[0].text.startswith("Once upon")
    assert flag_near_verbatim(c, ctrl_text) == ()
    with pytest.raises(InputError, match="characters"):
        flag_near_verbatim(c, ctrl_text[:-1], candidate_text=doc_text)


def test_a_window_scoring_exactly_tau_doc_is_not_covered():
    """Issue 24 item 4 ([EM] Eq. 9, strict >): under a top-k:1 policy a window reproduced by the
    argmax scores q = 1 exactly, so a control window at q = 1 puts tau_doc at 10^0 = 1 and a
    document window at q = 1 is not above it: coverage 0, not the 10 characters it spans."""
    ctl = WindowScores.from_arrays(
        [0.0, math.log(0.5)], [0, 10], [10, 20], doc_length=20, name="ctl"
    )
    doc = WindowScores.from_arrays(
        [0.0, -math.inf, math.log(0.3)], [0, 10, 20], [10, 20, 30], doc_length=30, name="doc"
    )
    r = census(doc, ctl)
    assert r.log10_tau == 0 and r.threshold.max_control_log10 == 0.0
    assert r.coverage == 0.0 and r.covered_chars == 0 and r.n_windows_above == 0
    assert coverage(doc, log_tau=0.0) == 0.0 and r.coverage_at_margins["0"] == 0.0
    assert r.heat.coverage([0.0], strict=False)[0] == pytest.approx(
        10 / 30
    )  # reaching tau is not exceeding it


def test_global_census_decontaminates_each_control_with_its_own_spans():
    """Issue 24 item 4 ([EM] §7, E.1): exclude_spans[i] applies to the i-th control only. Control 1's
    top window (3e-3) is a verified quotation at [0, 10); control 2's (3e-4) one at [10, 20).
    Decontaminated: 3e-9 -> tau 1e-8 and 3e-6 -> 1e-5, global tau_doc = 1e-5 (with control 1's spans
    used for both, control 2 would keep its 3e-4 window and the global threshold would be 1e-3)."""
    ln = math.log
    c1 = WindowScores.from_arrays([ln(3e-3), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="c1")
    c2 = WindowScores.from_arrays([ln(3e-6), ln(3e-4)], [0, 10], [10, 20], doc_length=20, name="c2")
    d1 = WindowScores.from_arrays(
        [ln(2e-5), ln(1e-12)], [0, 10], [10, 20], doc_length=20, name="d1"
    )
    d2 = WindowScores.from_arrays([ln(3e-2), ln(5e-5)], [0, 10], [10, 20], doc_length=20, name="d2")
    g = global_census([(d1, c1), (d2, c2)], exclude_spans=[[(0, 10)], [(10, 20)]])
    assert g.per_pair_log10_tau == {"d1": -8, "d2": -5}
    assert g.threshold.log10_tau == -5 and g.threshold.n_excluded == 1
    assert [r.coverage for r in g.results] == [0.5, 1.0]
    # one list for the first pair only: the second control keeps every window
    g1 = global_census([(d1, c1), (d2, c2)], exclude_spans=[[(0, 10)]])
    assert g1.per_pair_log10_tau == {"d1": -8, "d2": -3} and [r.coverage for r in g1.results] == [
        0.0,
        0.5,
    ]
