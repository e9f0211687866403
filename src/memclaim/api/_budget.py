"""``memclaim.budget``: query budgets for a per-query probability p ([EM] §6, Eqs. 10, 34):
P[at least once in n] = 1 - (1-p)^n and n_delta = ceil(log delta / log(1-p)), both computed
stably from log p (p reaches 1e-27 and below in a census; budgets beyond 1e308 from log10 n)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

from ..claims.budget import QueryBudget, log_prob_at_least_once, parse_probability, queries_needed
from ..claims.scores import LN10
from ..errors import DomainError
from ..report.budget import budget_report
from ..report.core import sci_from_log10, write_report
from ._common import Result, check_out_dir, jsonable
from ._public import public

__all__ = ["budget", "BudgetResult"]


def _number(name: str, v, example: str = "1e-6") -> float | None:
    """A number given as a number or its text ('1e-6'); None stays None. A bool is not a number
    (True would be read as p = 1), nor is a list."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, str)) and not hasattr(v, "__float__"):
        raise DomainError(
            f"{name} must be a number, got {type(v).__name__} {v!r}", hint=f"e.g. {name} {example}"
        )
    try:
        return float(v)
    except (TypeError, ValueError):
        raise DomainError(
            f"{name} must be a number, got {v!r}", hint=f"e.g. {name} {example}"
        ) from None


def _n_text(q: QueryBudget) -> str:
    if q.n_int is not None:
        return f"{q.n_int:,}"
    if math.isinf(q.log10_n):
        return "infinite (p = 0: never generated)"
    return f"{sci_from_log10(q.log10_n, 4)} (log10 n = {q.log10_n:.6g})"


@dataclass(frozen=True, repr=False)
class BudgetResult(Result):
    """The budget of one per-query probability: ``queries`` (the
    :class:`~memclaim.claims.budget.QueryBudget` n_delta), the statement in words, and with a
    budget n the probability of at least one generation within it (``at_n``). ``to_dict()`` is
    what ``memclaim budget --json`` prints (with ``report`` once written); ``save(folder)``
    writes report.{json,md,html}."""

    queries: QueryBudget
    delta: float
    statement: str
    at_n: dict | None = None
    report: dict | None = None

    @property
    def n_text(self) -> str:
        """n_delta for a person: an integer with thousands separators, or 10^x beyond 2^53."""
        return _n_text(self.queries)

    def to_dict(self) -> dict:
        out = {
            "queries_needed": self.queries.to_dict(),
            "n_text": self.n_text,
            "statement": self.statement,
            "at_n": self.at_n,
        }
        if self.report is not None:
            out["report"] = self.report
        return jsonable(out)

    def save(self, folder) -> dict:
        """Write report.{json,md,html} into ``folder`` (all or nothing); returns the paths."""
        d = self.to_dict()
        d.pop("report", None)
        return write_report(folder, budget_report(d))

    def __repr__(self) -> str:
        return f"BudgetResult({self.statement!r})"


@public
def budget(
    *,
    p: float | str | None = None,
    log10_p: float | str | None = None,
    log_p: float | str | None = None,
    delta: float = 0.05,
    n: float | None = None,
    log10_n: float | None = None,
    out: str | os.PathLike | None = None,
) -> BudgetResult:
    """Query budgets for a per-query probability (``memclaim budget``): exactly one of ``p``,
    ``log10_p`` (for p below 1e-308) or ``log_p`` (natural log); ``delta``: 1 - confidence of
    n_delta; ``n`` or ``log10_n``: a budget, for P[at least once in n]. ``out``: also write
    report.{json,md,html} there.

    >>> import memclaim as mc
    >>> b = mc.budget(p=2.5e-5, n=100000)
    >>> b.queries.n_int, round(b.at_n["prob_at_least_once"], 4)
    (119828, 0.9179)
    """
    if out is not None:
        check_out_dir(out)
    delta_v = _number("--delta", delta, "0.05")
    if delta_v is None or not 0 < delta_v < 1:
        raise DomainError(
            f"--delta must lie strictly between 0 and 1, got {delta!r}", hint="e.g. --delta 0.05"
        )
    delta = delta_v
    n, log10_n = _number("--n", n, "1e5"), _number("--log10-n", log10_n, "30")
    log_p = parse_probability(
        p=_number("--p", p), log10_p=_number("--log10-p", log10_p), log_p=_number("log_p", log_p)
    )
    q = queries_needed(log_p=log_p, delta=delta)
    statement = (
        f"A sequence with per-query probability p = {sci_from_log10(log_p / LN10, 4)} is generated at least "
        f"once with probability >= {1 - delta:g} within n = {_n_text(q)} independent queries ([EM] Eq. 34)."
    )
    if log_p == -math.inf:
        statement = (
            "A sequence with per-query probability 0 is never generated, whatever the budget."
        )
    if n is not None and log10_n is not None:
        raise DomainError(
            f"give --n or --log10-n, not both (got --n {n:g} and --log10-n {log10_n:g})",
            hint="--log10-n is for budgets beyond 1e308; otherwise pass --n only",
        )
    at_n = None
    if n is not None or log10_n is not None:
        if log10_n is not None:
            lp1 = float(
                log_prob_at_least_once(log_p=log_p, log_n=float(log10_n) * LN10)
            )  # n may overflow a double
            lg_n = float(log10_n)
        else:
            lp1 = float(log_prob_at_least_once(log_p=log_p, n=n))
            lg_n = math.log10(n)
        prob = math.exp(lp1)
        text = f"{prob:.6g}" if prob >= 1e-300 else "0 (underflow)"
        text += f" (log10 = {lp1 / LN10:.6g})"
        n_f = 10.0**lg_n if lg_n < 308 else math.inf
        at_n = {
            "n": float(n) if n is not None else n_f,
            "log10_n": lg_n,
            "n_text": f"{n:g}" if n is not None else sci_from_log10(lg_n, 4),
            "log_prob_at_least_once": lp1,
            "log10_prob_at_least_once": lp1 / LN10,
            "prob_at_least_once": prob,
            "text": text,
            "extractable": lp1 >= math.log1p(-delta),
        }
    res = BudgetResult(queries=q, delta=delta, statement=statement, at_n=at_n)
    if out is not None:
        res = replace(res, report=res.save(out))
    return res
