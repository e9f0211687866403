"""The report of ``memclaim budget`` ([EM] §6, App. F.1)."""

from __future__ import annotations

import math

from ..jsonutil import from_jsonable_float
from . import numbers, words
from .core import Doc, ReportBundle, pct, render


def budget_report(
    budget: dict, *, procedure: dict | None = None, command: str = "budget"
) -> ReportBundle:
    """A short report for ``memclaim budget`` (a QueryBudget plus P[at least once in n] values),
    from its JSON summary (non-finite numbers as "inf"/"-inf" strings: p = 0 is log10 p = -inf).

    >>> import memclaim as mc
    >>> from memclaim.report.budget import budget_report
    >>> b = budget_report(mc.budget(p=2.5e-5, n=100000).to_dict())  # doctest: +SKIP
    >>> b.markdown.splitlines()[0]  # doctest: +SKIP
    '# Query budget'
    >>> "within n = 119,828 independent queries" in b.markdown  # doctest: +SKIP
    True
    """
    doc = Doc("Query budget")
    q = budget["queries_needed"]
    doc.callout(budget["statement"], "result")  # a computation, not a claim
    log10_p = from_jsonable_float(q["log10_p"])
    p_text = (
        "0 (never generated under the procedure)" if log10_p == -math.inf else numbers.prob(log10_p)
    )
    rows = [
        ("probability p", p_text),
        ("confidence 1 - delta", pct(1 - q["delta"])),
        ("queries needed n_delta", budget["n_text"]),
    ]
    if budget.get("at_n") is not None:
        a = budget["at_n"]
        rows.append((f"P[at least once in n = {a.get('n_text', format(a['n'], 'g'))}]", a["text"]))
    doc.table(["quantity", "value"], rows)
    doc.h2("What this does and does not mean")
    doc.bullets(words.budget_statements())
    return render(
        doc,
        command=command,
        procedure=procedure,
        inputs=(),
        results=budget,
        statements=words.budget_statements(),
    )
