"""Population, census and demo reports: contents, statements, figures, escaping of document text."""

from __future__ import annotations

import json
import math
import re

import numpy as np

from memclaim.api._demo import demo_claims
from memclaim.claims.budget import census_budget_view
from memclaim.claims.census import WindowScores, census, flag_near_verbatim
from memclaim.claims.population import population_claim
from memclaim.report import words
from memclaim.report.census import census_report, heat_bins
from memclaim.report.core import render_markdown, write_report
from memclaim.report.population import build_population_doc, headline, population_report

LN10 = math.log(10)


def test_population_report_words_and_numbers():
    rng = np.random.default_rng(0)
    ctrl = -rng.exponential(30, 999)
    claim = population_claim(
        candidate_scores=-rng.exponential(1, 50),
        control_scores=ctrl,
        alpha=0.01,
        candidate_ids=[f"<m{i}>" for i in range(50)],
        fwer_delta=0.05,
        sweep=False,
    )
    doc = build_population_doc(claim, figures_on=False)
    md = render_markdown(doc)
    assert "K = floor(alpha (N+1))" in md and "10/1000" in md  # K = floor(0.01 x 1000)
    assert "Beta(10, 990)" in md
    assert "No description of how the controls were chosen" in md
    assert "Bonferroni" in md and "\\<m" in md
    b = population_report(
        claim, procedure={"policy": "full"}, inputs=[], controls_description="Post-2024 pages"
    )
    d = json.loads(b.json_text)
    assert d["statements"] == words.population_statements(
        binary=False, decontaminated=False, multiple=True
    )
    assert (
        d["results"]["population"]["full"]["k"] == 10
        and d["results"]["controls_description"] == "Post-2024 pages"
    )
    assert len(d["results"]["population"]["candidates"]) == 50
    assert headline(claim).startswith("At target FPR alpha = 1/100")


def test_no_claim_report_says_so():
    claim = population_claim(
        candidate_scores=[-1.0], control_scores=-np.arange(1.0, 50.0), alpha=0.001, sweep=False
    )
    md = render_markdown(build_population_doc(claim, figures_on=False))
    assert "No memorization claim is possible" in md and "K = floor" in md


def _census_fixture():
    text = "In the beginning <God> created the heaven & the earth. " * 6
    L = len(text)
    starts = np.arange(0, L - 20, 10)
    ends = starts + 20
    rng = np.random.default_rng(0)
    doc = WindowScores.from_arrays(
        -rng.uniform(1, 40, starts.size) * LN10, starts, ends, doc_length=L, name="Genesis"
    )
    ctext = "A newly written verse about <rivers> & hills, in plain words. " * 5
    cs = np.arange(0, len(ctext) - 20, 10)
    ctrl = WindowScores.from_arrays(
        -rng.uniform(15, 40, cs.size) * LN10, cs, cs + 20, doc_length=len(ctext), name="control"
    )
    return text, doc, ctext, ctrl


def test_census_report(tmp_path):
    text, doc, ctext, ctrl = _census_fixture()
    r = census(doc, ctrl)
    bv = census_budget_view(r.heat_log10, log10_tau=r.log10_tau)
    flags = flag_near_verbatim(ctrl, ctext, candidate_text=text)
    b = census_report(
        [r],
        budget_views=[bv],
        flagged=flags,
        document_texts=[text],
        procedure={"policy": "top-k:40", "stride": 10},
    )
    paths = write_report(tmp_path / "c", b)
    html = open(paths["html"]).read()
    assert "&lt;God&gt;" in html and "<God>" not in html and "&amp; the earth" in html
    assert 'class="heattext"' in html and len(re.findall(r"data:image/png;base64,", html)) == 3
    d = json.loads(open(paths["json"]).read())
    assert d["results"]["census"][0]["log10_tau"] == r.log10_tau
    assert d["statements"] == words.census_statements()
    bins = heat_bins(r.heat_log10, r.log10_tau)
    assert set(np.unique(bins)) <= {-1, 0, 1, 2, 3, 4, 5}
    assert np.array_equal(bins > 0, r.heat_log10 > r.log10_tau)


def test_demo_section(tmp_path):
    rng = np.random.default_rng(3)
    text, doc, ctext, ctrl = _census_fixture()
    said = []
    s = demo_claims(
        member_logq=-rng.exponential(5, 60),
        control_logq=-rng.exponential(30, 60),
        census_inputs={
            "document": {
                "log_scores": doc.log_scores,
                "starts": doc.starts,
                "ends": doc.ends,
                "text": text,
                "name": "Genesis",
            },
            "control": {
                "log_scores": ctrl.log_scores,
                "starts": ctrl.starts,
                "ends": ctrl.ends,
                "text": ctext,
            },
        },
        out_dir=tmp_path / "demo",
        log=said.append,
    )
    assert s["population"]["k"] == 3  # floor(0.05 x 61)
    assert "census" in s and (tmp_path / "demo" / "report.html").exists()
    assert any("claims report" in x for x in said)
    d = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert {"population", "census", "census_budget"} <= set(d["results"])


def test_run_census_global_and_procedures(tmp_path):
    from memclaim.errors import ProcedureMismatchError
    from memclaim.report.census import run_census

    text, doc, ctext, ctrl = _census_fixture()
    proc = {"policy": "top-k:40", "stride": 10}
    hot = WindowScores.from_arrays(
        np.minimum(ctrl.log_scores + 30 * LN10, 0),
        ctrl.starts,
        ctrl.ends,
        doc_length=ctrl.doc_length,
        name="hot control",
    )
    pairs = [
        dict(
            document=doc,
            control=ctrl,
            document_text=text,
            control_text=ctext,
            procedure_document=proc,
            procedure_control=proc,
        ),
        dict(document=doc, control=hot, procedure_document=proc, procedure_control=proc),
    ]
    s = run_census(pairs, out_dir=tmp_path / "g", use_global_threshold=True, budget_delta=None)
    assert s["log10_tau"][0] == s["log10_tau"][1] == max(s["log10_tau"])
    d = json.loads((tmp_path / "g" / "report.json").read_text())
    assert d["results"]["global_log10_tau"] == max(d["results"]["per_pair_log10_tau"])
    bad = [dict(pairs[0], procedure_control=dict(proc, stride=20))]
    try:
        run_census(bad, out_dir=tmp_path / "bad")
    except ProcedureMismatchError as e:
        assert "stride" in str(e)
    else:
        raise AssertionError("procedure mismatch not refused")
    assert not (tmp_path / "bad").exists()
