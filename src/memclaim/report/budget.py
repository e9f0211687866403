"""The report of ``memclaim budget`` ([EM] §6, App. F.1)."""
from __future__ import annotations

from . import words
from . import numbers
from .core import Doc, ReportBundle, pct, render


def budget_report(budget, *, procedure: dict | None = None, command: str = "budget") -> ReportBundle:
    """A short report for ``memclaim budget`` (a QueryBudget plus P[at least once in n] values)."""
    doc = Doc("Query budget")
    q = budget["queries_needed"]
    doc.callout(budget["statement"], "result")  # a computation, not a claim
    rows = [("probability p", numbers.prob(q["log10_p"])), ("confidence 1 - delta", pct(1 - q["delta"])),
            ("queries needed n_delta", budget["n_text"])]
    if budget.get("at_n") is not None:
        a = budget["at_n"]
        rows.append((f"P[at least once in n = {a.get('n_text', format(a['n'], 'g'))}]", a["text"]))
    doc.table(["quantity", "value"], rows)
    doc.h2("What this does and does not mean")
    doc.bullets(words.budget_statements())
    return render(doc, command=command, procedure=procedure, inputs=(), results=budget,
                  statements=words.budget_statements())
