"""The report of ``memclaim budget`` (memclaim.report.budget): the statement, n and the
at-n probability appear in all three renderings, values escaped."""

from __future__ import annotations

import json
import math

import memclaim as mc
from memclaim.report.budget import budget_report


def budget_summary(**kw) -> dict:
    d = mc.budget(**kw).to_dict()
    d.pop("report", None)
    return d


def test_budget_report_renders_the_numbers():
    s = budget_summary(log_p=math.log(0.1), delta=0.05, n=100)
    b = budget_report(s)
    data = json.loads(b.json_text)
    assert data["results"]["queries_needed"]["n_int"] == 29
    for text in (b.markdown.replace("\\", ""), b.html):  # markdown escapes the brackets
        assert "29" in text and "Query budget" in text and "P[at least once in n = 100]" in text


def test_budget_report_for_p_zero(tmp_path):
    """p = 0 (log p = -inf, "-inf" in the JSON summary) renders; `memclaim budget --p 0 --out`
    used to fail formatting the string "-inf" as a number."""
    b = budget_report(budget_summary(log_p=-math.inf, delta=0.05))
    assert "never generated" in b.markdown
    mc.budget(p=0, out=tmp_path / "r")
    assert (
        json.loads((tmp_path / "r" / "report.json").read_text())["results"]["queries_needed"][
            "log10_p"
        ]
        == "-inf"
    )
