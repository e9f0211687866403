"""Issue 14 item 4: the census at book scale holds its heat as segments (O(windows)), not one
number per character; every number equals the per-character computation it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from memclaim.claims.budget import census_budget_view
from memclaim.claims.census import HeatSegments, WindowScores, census, char_heat, coverage_from_heat
from memclaim.claims.scores import LN10


def _windows(rng, L, n, *, neg_inf=0.1, ties=False):
    a = rng.integers(0, L - 1, n)
    b = np.minimum(L, a + rng.integers(1, 40, n))
    s = -rng.exponential(30, n)
    if ties:
        s = np.round(s / 5) * 5
    s[rng.random(n) < neg_inf] = -np.inf
    return WindowScores.from_arrays(s, a, b, doc_length=L, name="doc")


@pytest.mark.parametrize("seed", range(12))
def test_segments_equal_the_per_character_heat(seed):
    rng = np.random.default_rng(seed)
    L = int(rng.integers(50, 600))
    w = _windows(rng, L, int(rng.integers(1, 80)), ties=seed % 2 == 0)
    heat10 = char_heat(w) / LN10
    seg = HeatSegments.of(w)
    assert np.array_equal(seg.array(), heat10)  # bit for bit, -inf where uncovered
    assert np.array_equal(seg.array(7, 41), heat10[7:41])
    ts = np.concatenate([np.unique(heat10[np.isfinite(heat10)]), [-np.inf, np.inf, -3.5, -20.0]])
    for strict in (True, False):
        assert np.array_equal(
            seg.coverage(ts, strict=strict), coverage_from_heat(heat10, ts, strict=strict)
        )
    cells, per = seg.binned(L)
    assert per == 1 and np.array_equal(cells, heat10)
    cells, per = seg.binned(max(1, L // 7))
    ref = np.array([heat10[i : i + per].max() for i in range(0, L, per)])
    assert np.array_equal(cells, ref)
    assert seg.covered_chars == int(np.count_nonzero(np.isfinite(heat10)))


@pytest.mark.parametrize("seed", range(6))
def test_census_and_budget_view_equal_the_per_character_numbers(seed):
    rng = np.random.default_rng(100 + seed)
    L = 400
    doc, ctrl = _windows(rng, L, 60), _windows(rng, L, 60, neg_inf=0.0)
    r = census(doc, ctrl)
    heat10 = char_heat(doc) / LN10
    assert r.covered_chars == int(np.count_nonzero(heat10 > r.log10_tau))
    assert np.array_equal(
        r.curve.coverage, coverage_from_heat(heat10, r.log10_tau + r.curve.margins)
    )
    a = census_budget_view(heat10, log10_tau=r.log10_tau)
    b = census_budget_view(heat=r.heat, log10_tau=r.log10_tau)
    for f in ("coverage_extractable", "coverage_extractable_memorized", "budgets"):
        assert np.allclose(getattr(a, f), getattr(b, f), rtol=0, atol=1e-15)
    assert a.coverage_memorized == b.coverage_memorized and a.at_realistic_n == b.at_realistic_n


def test_no_finite_window_gives_an_empty_heat():
    w = WindowScores.from_arrays([-np.inf, -np.inf], [0, 5], [5, 9], doc_length=10)
    seg = HeatSegments.of(w)
    assert seg.covered_chars == 0 and np.all(np.isneginf(seg.array()))
    assert seg.coverage([-1.0])[0] == 0.0
