"""Agreement of a reproduction with [MX]'s own numbers, decided here, never by the implementation.

A reproduction reports rows (``result["paper_numbers"]``, :class:`memclaim.experiments.common.
Comparison`): its own number beside a paper value from :mod:`memclaim.experiments.paper` (the one
table of the paper's numbers, with the sentence each comes from). The verdict is made by the test
files' ``AGREEMENT`` tables, one entry per row:

- :class:`Agree` -- the paper's number +- a tolerance whose justification is stated: the paper's
  rounding (half a unit of the last printed digit) and/or a multiple of the run's own Monte-Carlo
  standard error, computed by the test from the run's settings and counts (not read from a
  tolerance the implementation chose). ``ours`` re-reads the number from the raw results, so the
  row cannot say something the results do not.
- :class:`Disagrees` -- a recorded non-agreement: the same check, expected to fail (strict xfail
  with the numbers in the reason), so that it shows in every run and turns into a failure if the
  run ever agrees (then the record must be updated, not the tolerance).
- :class:`SideBySide` -- the paper's number is from other models at another scale: shown in the
  report, not tested for agreement (the reproduction's qualitative claims are tested instead).

For a paper lower bound (``>=``) the run agrees if ours >= paper - tol; for an upper bound
(``<=``) if ours <= paper + tol.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from memclaim.experiments.paper import PAPER


@dataclass(frozen=True)
class Agree:
    tol: float | Callable[[dict], float]
    why: str
    ours: Callable[[dict], float] | None = (
        None  # the number re-read from result["results"]/["settings"]
    )


@dataclass(frozen=True)
class Disagrees:
    tol: float | Callable[[dict], float]
    why: str  # cites the numbers
    ours: Callable[[dict], float] | None = None


@dataclass(frozen=True)
class SideBySide:
    why: str


def rounding(printed_decimals: int) -> float:
    """Half a unit of the paper's last printed digit."""
    return 0.5 * 10.0**-printed_decimals


def params(table: dict[str, dict], reported: dict[str, set] | None = None) -> list:
    """pytest params (name, row) for every Agree / Disagrees entry (of the rows ``reported`` by the
    quick runs, where given); Disagrees are strict xfails."""
    out = []
    for name, rows in table.items():
        for row, spec in rows.items():
            if reported is not None and row not in reported.get(name, rows):
                continue
            if isinstance(spec, Agree):
                out.append(pytest.param(name, row, id=f"{name}/{row}"))
            elif isinstance(spec, Disagrees):
                out.append(
                    pytest.param(
                        name,
                        row,
                        id=f"{name}/{row}",
                        marks=pytest.mark.xfail(strict=True, reason=spec.why),
                    )
                )
    return out


def comparison_rows(result: dict) -> dict[str, dict]:
    rows = {r["row"]: r for r in result["paper_numbers"]}
    assert len(rows) == len(result["paper_numbers"]), "duplicate comparison rows"
    return rows


def assert_covers(result: dict, table: dict) -> None:
    """Every row the reproduction reports has a verdict entry here; SideBySide rows are exactly the
    paper values marked as another scale. (A table may hold rows that only the full run reports.)"""
    rows = comparison_rows(result)
    assert set(rows) <= set(table), sorted(set(rows) - set(table))
    for row, r in rows.items():
        p = PAPER[r["key"]]
        assert isinstance(table[row], SideBySide) == (not p.same_scale), row


def assert_agrees(result: dict, row: str, spec: Agree | Disagrees) -> None:
    r = comparison_rows(result)[row]
    p = PAPER[r["key"]]  # the paper's value, read from the table itself, not from the report
    assert (r["paper"], r["relation"], r["same_scale"]) == (p.value, p.relation, p.same_scale)
    ours = r["ours"]
    if spec.ours is not None:
        assert spec.ours(result) == pytest.approx(ours, rel=1e-12, abs=1e-15), (
            "row does not match the results"
        )
    assert r["difference"] == pytest.approx(ours - p.value, abs=1e-15)
    tol = spec.tol(result) if callable(spec.tol) else spec.tol
    assert tol >= 0 and math.isfinite(tol)
    detail = f"{row}: ours {ours!r} vs paper {p.statement()} ({p.where}); tolerance {tol:.3g}: {spec.why}"
    if p.relation == "=":
        assert abs(ours - p.value) <= tol, detail
    elif p.relation == ">=":
        assert ours >= p.value - tol, detail
    else:
        assert ours <= p.value + tol, detail
