"""report/dp.py (``memclaim dp bounds``' report) and report/demo.py (the demo's claims report):
rendered in memory from the library's results, every number as the results hold it."""

from __future__ import annotations

import json

import numpy as np

from memclaim.claims.census import WindowScores, census, census_threshold
from memclaim.claims.population import population_claim
from memclaim.report.demo import demo_claims_report
from memclaim.report.dp import DP_STATEMENTS, dp_bounds_report


def test_dp_bounds_report_renders_every_row_with_its_relation():
    import memclaim as mc

    b = mc.dp_bounds(
        epsilon=1.0, neighbors="add-remove", list_size=4, risk=0.1, baseline=(0.3, 0.355), copies=2
    )
    bundle = dp_bounds_report(b.to_dict())
    rep = json.loads(bundle.json_text)
    assert rep["command"] == "dp bounds" and rep["statements"] == DP_STATEMENTS
    assert rep["results"]["rows"] == json.loads(json.dumps(b.to_dict()["rows"]))
    table = [line for line in bundle.markdown.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(b.to_dict()["rows"])  # header, rule, one line per quantity
    assert all(
        "add/remove" in line or "replace" in line for line in table[2:]
    )  # every row names its relation
    assert "0.355" in bundle.markdown and "planted 2 times" in bundle.markdown
    audit = dp_bounds_report(
        mc.dp_bounds(
            epsilon=4.0,
            delta=1e-5,
            neighbors="add-remove",
            list_size=1,
            risk=0.1,
            baseline=0.001,
            successes=12,
            trials=40,
        ).to_dict()
    )
    assert "Audit soundness" in audit.markdown and "12 / 40" in audit.markdown


def test_demo_claims_report_holds_the_population_test_and_the_census():
    rng = np.random.default_rng(0)
    claim = population_claim(
        candidate_scores=rng.normal(-5, 1, 20), control_scores=rng.normal(-9, 1, 99), alpha="0.05"
    )
    only = json.loads(demo_claims_report(claim).json_text)
    assert only["command"] == "demo" and set(only["results"]) == {
        "population",
        "population_headline",
    }
    doc = WindowScores.from_arrays(
        rng.normal(-20, 3, 30),
        np.arange(30) * 10,
        np.arange(30) * 10 + 10,
        doc_length=300,
        name="doc",
    )
    ctl = WindowScores.from_arrays(
        rng.normal(-30, 3, 30),
        np.arange(30) * 10,
        np.arange(30) * 10 + 10,
        doc_length=300,
        name="ctl",
    )
    res = census(doc, ctl, threshold=census_threshold(ctl))
    from memclaim.claims.budget import census_budget_view

    bv = census_budget_view(res.heat_log10, log10_tau=res.log10_tau, delta=0.05, realistic_n=1e5)
    both = demo_claims_report(
        claim, census=res, census_budget=bv, document_text="x" * 300, procedure={"policy": "full"}
    )
    rep = json.loads(both.json_text)
    assert rep["results"]["census"]["log10_tau"] == res.log10_tau
    assert "Single-document census" in both.markdown and "Population test" in both.markdown
    # one procedure section, a table of its fields (issue 28: "No procedure record was given." above a
    # table of raw Python dicts before)
    assert (
        both.markdown.count("## Procedure and inputs") == 1 and "| policy | full |" in both.markdown
    )
    assert "No procedure record was given." not in both.markdown and "{'" not in both.markdown
