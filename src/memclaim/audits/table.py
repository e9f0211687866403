"""The audit-disagreement table ([MX] §8.2, Fig. 12; Cor. 6.2): rows are leakage instances,
columns are audits, each cell an audit's *leak signal* with its interval and a verdict.

Leak signal ([MX] Fig. 12 caption): "rescaled so that 0 is chance and 1 full detection (rates
enter directly, AUCs as 2 AUC - 1)".

Verdict rules (stated once, applied by the cell constructors below; "interval" is the two-sided
interval at the cell's confidence):

Deployable audits (columns with ``informed=False``)
  - from an AUC (:func:`auc_cell`): **leak** if the leak-signal interval lies above 0 (the AUC
    interval excludes 1/2 from above); **inverted** if it lies below 0 (the audit separates the
    sets with the wrong orientation: evidence of a difference, not of detection as specified);
    **blind** otherwise (the interval includes chance).
  - from a TPR at a certified FPR alpha_N (:func:`tpr_cell`): chance is alpha_N; **leak** if the
    Clopper-Pearson lower bound exceeds alpha_N, else **blind**.
  - from a success rate, e.g. extraction at the record's prefix or the unlearning verifier
    (:func:`rate_cell`), optionally with the *baseline* rate of a decoder that never saw the
    model (the prior guessing rate, [MX] Cor. 5.3): chance is the baseline (its upper bound if
    it was measured on a sample), 0 without one. **leak** if the rate's lower bound exceeds
    chance; else **guessed** if a baseline is given, it is positive (its lower bound > 0 when
    measured), and the rate's upper bound reaches the baseline's lower bound (the prior alone
    matches the rate: neither blind nor leak); else **blind**.

Informed recovery (columns with ``informed=True``; an adversary who knows the construction,
ground truth rather than an audit; :func:`informed_cell`)
  - **capped** if a cap < 1 on this adversary's success is given (e.g. m k^-L of [MX]
    Thm. 6.1(i)) and the rate's lower bound does not exceed it;
  - **recovered** if the rate's lower bound exceeds chance (0 by default), with a note when it
    also exceeds a stated cap (which contradicts the cap's premises);
  - **not recovered** otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..validate import in_open_unit, in_unit, integer
from .metrics import AUCResult, TPRResult, clopper_pearson

__all__ = [
    "VERDICTS",
    "AuditColumn",
    "AuditCell",
    "DisagreementTable",
    "auc_cell",
    "tpr_cell",
    "rate_cell",
    "informed_cell",
    "build_table",
    "VERDICT_RULES",
]

VERDICTS = ("leak", "blind", "guessed", "inverted", "recovered", "capped", "not recovered")
INFORMED_VERDICTS = ("recovered", "capped", "not recovered")
VERDICT_RULES = __doc__[__doc__.index("Verdict rules") :].strip()


@dataclass(frozen=True)
class AuditColumn(ResultMixin):
    """An audit (a column): ``informed`` marks ground-truth columns (drawn right of the rule)."""

    name: str
    informed: bool = False
    description: str = ""


@dataclass(frozen=True)
class AuditCell(ResultMixin):
    """One audit on one instance. ``signal``/``low``/``high``: leak signal and its interval;
    ``value``: the raw AUC or rate; ``chance``: the signal that chance produces for this cell
    (0 for AUCs, the baseline or alpha_N for rates); ``source``: "auc", "tpr", "rate" or
    "informed"."""

    signal: float
    low: float
    high: float
    verdict: str
    source: str
    value: float
    chance: float
    confidence: float
    n: int
    cap: float | None = None
    note: str = ""

    def label(self) -> str:
        return f"{self.signal:.2f} {self.verdict}"


def _check_counts(successes, trials) -> tuple[int, int]:
    n = integer("trials", trials, minimum=1)
    k = integer("successes", successes, minimum=0, maximum=n)
    return k, n


def auc_cell(auc: AUCResult, *, note: str = "") -> AuditCell:
    """A cell from an AUC result: signal 2 AUC - 1 ([MX] Fig. 12 caption).

    >>> from memclaim.audits.metrics import roc_auc
    >>> auc_cell(roc_auc([3.0, 2.0, 2.5, 1.0], [0.0, 1.0, -1.0, 0.5])).label()  # AUC 0.96875
    '0.94 leak'
    """
    if not isinstance(auc, AUCResult):
        raise InputError(f"auc_cell needs an AUCResult (from roc_auc), got {type(auc).__name__}")
    if auc.leak_low > 0:
        verdict = "leak"
    elif auc.leak_high < 0:
        verdict = "inverted"
    else:
        verdict = "blind"
    return AuditCell(
        signal=auc.leak_signal,
        low=auc.leak_low,
        high=auc.leak_high,
        verdict=verdict,
        source="auc",
        value=auc.auc,
        chance=0.0,
        confidence=auc.confidence,
        n=auc.n_members + auc.n_nonmembers,
        note=note,
    )


def tpr_cell(tpr: TPRResult, *, note: str = "") -> AuditCell:
    """A cell from a TPR at a certified FPR: the rate enters directly, chance = alpha_N.

    >>> from memclaim.audits.metrics import tpr_at_fpr
    >>> c = tpr_cell(tpr_at_fpr([3.0, 2.0, 2.5, 1.0], [0.0, 1.0, -1.0, 0.5, 0.2, 0.1, -0.3], fpr=0.25))
    >>> c.label(), c.chance, c.note
    ('1.00 leak', 0.25, 'at certified FPR 0.25')
    """
    if not isinstance(tpr, TPRResult):
        raise InputError(f"tpr_cell needs a TPRResult (from tpr_at_fpr), got {type(tpr).__name__}")
    verdict = "leak" if tpr.low > tpr.certified_fpr else "blind"
    return AuditCell(
        signal=tpr.tpr,
        low=tpr.low,
        high=tpr.high,
        verdict=verdict,
        source="tpr",
        value=tpr.tpr,
        chance=tpr.certified_fpr,
        confidence=tpr.confidence,
        n=tpr.n_members,
        note=note or f"at certified FPR {tpr.certified_fpr:.4g}",
    )


def rate_cell(
    successes: int,
    trials: int,
    *,
    baseline: float | None = None,
    baseline_successes: int | None = None,
    baseline_trials: int | None = None,
    confidence: float = 0.95,
    note: str = "",
) -> AuditCell:
    """A cell from a success rate (extraction at the prefix, the unlearning verifier, ...).

    The baseline is the rate a decoder that never saw the model achieves from the prior alone
    ([MX] Cor. 5.3, Fig. 12 "guessed"): either an exact ``baseline`` (e.g. a certified kappa) or
    a measured one, ``baseline_successes`` out of ``baseline_trials`` (Clopper-Pearson bounds).

    >>> rate_cell(9, 10, baseline=0.01).label(), rate_cell(1, 10, baseline_successes=1, baseline_trials=10).label()
    ('0.90 leak', '0.10 guessed')
    """
    conf = in_open_unit("confidence", confidence)
    k, n = _check_counts(successes, trials)
    lo, hi = clopper_pearson(k, n, confidence=conf)
    rate = k / n
    if baseline is not None and baseline_trials is not None:
        raise DomainError(
            "give the baseline either as an exact rate or as successes/trials, not both"
        )
    if baseline_trials is not None:
        if baseline_successes is None:
            raise DomainError("baseline_trials needs baseline_successes")
        bk, bn = _check_counts(baseline_successes, baseline_trials)
        b = bk / bn
        b_lo, b_hi = clopper_pearson(bk, bn, confidence=conf)
    elif baseline_successes is not None:
        raise DomainError("baseline_successes needs baseline_trials")
    elif baseline is not None:
        b = b_lo = b_hi = in_unit("baseline", baseline)
    else:
        b = b_lo = b_hi = 0.0
    has_baseline = baseline is not None or baseline_trials is not None
    if lo > b_hi:
        verdict = "leak"
    elif has_baseline and b_lo > 0 and hi >= b_lo:
        verdict = "guessed"
    else:
        verdict = "blind"
    if has_baseline and not note:
        note = f"prior baseline {b:.3g}"
    return AuditCell(
        signal=rate,
        low=lo,
        high=hi,
        verdict=verdict,
        source="rate",
        value=rate,
        chance=b,
        confidence=conf,
        n=n,
        note=note,
    )


def informed_cell(
    successes: int,
    trials: int,
    *,
    cap: float | None = None,
    chance: float = 0.0,
    confidence: float = 0.95,
    note: str = "",
) -> AuditCell:
    """A cell for the informed-recovery column (ground truth, not an audit).

    >>> informed_cell(10, 10).label(), informed_cell(1, 10, cap=0.2).label()
    ('1.00 recovered', '0.10 capped')
    """
    conf = in_open_unit("confidence", confidence)
    k, n = _check_counts(successes, trials)
    lo, hi = clopper_pearson(k, n, confidence=conf)
    ch = in_unit("chance", chance)
    cp = None if cap is None else in_unit("cap", cap)
    if cp is not None and cp < 1.0 and lo <= cp:
        verdict = "capped"
    elif lo > ch:
        verdict = "recovered"
        if cp is not None and cp < 1.0:
            note = (note + "; " if note else "") + f"rate exceeds the stated cap {cp:.3g}"
    else:
        verdict = "not recovered"
    return AuditCell(
        signal=k / n,
        low=lo,
        high=hi,
        verdict=verdict,
        source="informed",
        value=k / n,
        chance=ch,
        confidence=conf,
        n=n,
        cap=cp,
        note=note,
    )


@dataclass(frozen=True)
class DisagreementTable(ResultMixin):
    """Rows x columns of :class:`AuditCell` (None where an audit was not run)."""

    columns: tuple[AuditColumn, ...]
    rows: tuple[str, ...]
    cells: tuple[tuple[AuditCell | None, ...], ...]
    rules: str = VERDICT_RULES

    def cell(self, row: str, column: str) -> AuditCell | None:
        try:
            i = self.rows.index(row)
        except ValueError:
            raise InputError(f"no instance {row!r}", hint=f"instances: {list(self.rows)}") from None
        names = [c.name for c in self.columns]
        if column not in names:
            raise InputError(f"no audit {column!r}", hint=f"audits: {names}")
        return self.cells[i][names.index(column)]

    def missed_by(self, column: str) -> list[str]:
        """Instances a deployable audit does not flag (verdict other than leak)."""
        return [
            r for r in self.rows if (c := self.cell(r, column)) is not None and c.verdict != "leak"
        ]

    def signal_matrix(self) -> np.ndarray:
        """[rows, columns] leak signals, NaN for missing cells."""
        return np.array(
            [[math.nan if c is None else c.signal for c in row] for row in self.cells],
            dtype=np.float64,
        ).reshape(len(self.rows), len(self.columns))

    def to_markdown(self, *, intervals: bool = True, rules: bool = True) -> str:
        """A Markdown table: each cell "signal [low, high] verdict"; informed columns marked †."""
        head = ["instance"] + [c.name + (" †" if c.informed else "") for c in self.columns]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name, row in zip(self.rows, self.cells):
            parts = [_md_escape(name)]
            for c in row:
                if c is None:
                    parts.append("—")
                elif intervals:
                    parts.append(f"{c.signal:.2f} [{c.low:.2f}, {c.high:.2f}] {c.verdict}")
                else:
                    parts.append(c.label())
            lines.append("| " + " | ".join(parts) + " |")
        out = "\n".join(lines)
        notes = [
            "",
            "Leak signal: 0 = chance, 1 = full detection (rates directly, AUCs as 2 AUC - 1); "
            "intervals at each cell's confidence level.",
        ]
        if any(c.informed for c in self.columns):
            notes.append(
                "† informed recovery by an adversary who knows the construction: ground truth, not an audit."
            )
        if rules:
            notes += ["", self.rules]
        return out + "\n" + "\n".join(notes) + "\n"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def build_table(
    columns: Sequence[AuditColumn | str], rows: Mapping[str, Mapping[str, AuditCell]]
) -> DisagreementTable:
    """Assemble a table from ``{instance: {audit name: cell}}``, checking that every cell names
    a known column and that informed cells sit only in informed columns (and vice versa).

    >>> t = build_table(["verifier", AuditColumn("recovery", informed=True)],
    ...                 {"canary": {"verifier": rate_cell(9, 10, baseline=0.01), "recovery": informed_cell(10, 10)}})
    >>> t.to_markdown(rules=False).splitlines()[2]
    '| canary | 0.90 [0.55, 1.00] leak | 1.00 [0.69, 1.00] recovered |'
    """
    cols = tuple(c if isinstance(c, AuditColumn) else AuditColumn(str(c)) for c in columns)
    names = [c.name for c in cols]
    if not cols:
        raise InputError("the table needs at least one audit column")
    if len(set(names)) != len(names):
        raise InputError(f"duplicate audit column names in {names}")
    if not rows:
        raise InputError("the table needs at least one leakage instance (row)")
    out_rows, out_cells = [], []
    for inst, cells in rows.items():
        extra = [k for k in cells if k not in names]
        if extra:
            raise InputError(
                f"instance {inst!r} has cells for unknown audit(s) {extra}",
                hint=f"columns: {names}",
            )
        row = []
        for col in cols:
            c = cells.get(col.name)
            if c is not None:
                if not isinstance(c, AuditCell):
                    raise InputError(
                        f"cell ({inst!r}, {col.name!r}) must be an AuditCell, got {type(c).__name__}"
                    )
                if col.informed != (c.source == "informed"):
                    raise InputError(
                        f"cell ({inst!r}, {col.name!r}): {'an informed-recovery' if c.source == 'informed' else 'an audit'} "
                        f"cell in {'an informed' if col.informed else 'a deployable-audit'} column",
                        hint="build informed-recovery cells with informed_cell and put them in columns with informed=True",
                    )
            row.append(c)
        out_rows.append(str(inst))
        out_cells.append(tuple(row))
    return DisagreementTable(columns=cols, rows=tuple(out_rows), cells=tuple(out_cells))
