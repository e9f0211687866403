"""The report of ``memclaim budget`` (memclaim.report.budget): the statement, n and the
at-n probability appear in all three renderings, values escaped."""
from __future__ import annotations

import json
import math

from memclaim.cli.budget import budget_summary
from memclaim.report.budget import budget_report


def test_budget_report_renders_the_numbers():
    s = budget_summary(log_p=math.log(0.1), delta=0.05, n=100)
    b = budget_report(s)
    data = json.loads(b.json_text)
    assert data["results"]["queries_needed"]["n_int"] == 29
    for text in (b.markdown, b.html):
        assert "29" in text and "Query budget" in text and "P[at least once in n = 100]" in text


def test_budget_report_for_p_zero():
    b = budget_report(budget_summary(log_p=-math.inf, delta=0.05))
    assert "never generated" in b.markdown
