"""Issue 29: ``memclaim.acr`` / ``memclaim acr`` end to end: the result's faces (to_dict, to_pandas,
save, repr, HTML), the report (schema-valid), resume, progress, and the CLI printing the API's
numbers. The API runs on a random tiny GPT-2 given as an object; the CLI on the tiny GPT ``toy``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import memclaim as mc
from acr_models import tiny_gpt
from memclaim.errors import InputError

MEMBERS = [
    {"id": "m1", "text": "abcdefg"},
    {"id": "m2", "text": "hello you"},
    {"id": "m3", "text": "xyzzy!!"},
]
CONTROLS = [
    {"id": "c1", "text": "qwertyu"},
    {"id": "c2", "text": "lorem ipsu"},
    {"id": "c3", "text": "plugh??"},
]
SMALL = dict(top_k=8, search_batch=16, steps=3, start_tokens=3)


@pytest.fixture(scope="module")
def model():
    m, tok = tiny_gpt(4)
    return mc.load_model((m, tok), dtype=None)


def test_acr_result_faces_and_report(model, tmp_path):
    from memclaim.report.schema import validate_report

    events, lines = [], []
    res = mc.acr(
        model,
        MEMBERS,
        CONTROLS,
        criterion="prob:0.3",
        out=tmp_path / "out",
        progress=events.append,
        log=lines.append,
        controls_description="random strings",
        **SMALL,
    )
    assert isinstance(res, mc.ACRResult)
    c = res.comparison
    assert c.members.n == 3 and c.controls.n == 3 and c.criterion == "prob:0.3"
    assert res.verdict.status in ("held", "not held")
    r = repr(res)
    assert r.startswith("ACRResult(prob:0.3: members ") and len(r) <= 240 and "\n" not in r
    assert res.verdict.status in r
    html = (
        res._repr_html_()
    )  # the report's template: its headline and comparison table, and the call that made it
    assert (
        html.startswith('<div class="memclaim-result">')
        and "callout" in html
        and "<html" not in html
    )
    assert (
        "<table>" in html
        and "no signal about memorization" in html
        and "made by memclaim.acr(" in html
    )
    d = json.loads(res.to_json())
    assert (
        d["criterion"] == "prob:0.3"
        and len(d["targets"]) == 6
        and d["verdict"]["status"] == res.verdict.status
    )
    assert d["flags"]["members"].keys() == {"argmax_without_greedy", "leaks"}
    df = res.to_pandas()
    assert list(df["side"]) == ["member"] * 3 + ["control"] * 3
    assert {
        "id",
        "acr",
        "prompt_text",
        "argmax",
        "greedy",
        "prob",
        "log_q",
        "argmax_margin",
        "shared_words",
        "argmax_without_greedy",
    } <= set(df.columns)
    for t in res.members + res.controls:
        assert t.prompt_text == model.tokenizer.decode(list(t.prompt_ids))
        assert t.criterion == "prob:0.3" and (t.acr is None) == (not t.met)
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["command"] == "acr" and validate_report(rep) is None
    assert (
        rep["invocation"]["api"].startswith("memclaim.acr(<model ")
        and "criterion='prob:0.3'" in rep["invocation"]["api"]
    )
    assert rep["results"]["comparison"]["criterion"] == "prob:0.3"
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {
        "report.json",
        "report.md",
        "report.html",
        "acr.png",
        "acr.pdf",
        "searches",
    }
    assert "random strings" in (tmp_path / "out" / "report.md").read_text()
    assert any(e.stage == "acr" and e.finished for e in events) and any(
        "step" in e.extra for e in events
    )
    assert any("-token prompt" in x for x in lines)
    # a second run reads every target back: nothing is searched, the numbers are the same
    again = mc.acr(model, MEMBERS, CONTROLS, criterion="prob:0.3", out=tmp_path / "out", **SMALL)
    assert [again.searches[k].searched for k in ("members", "controls")] == [0, 0]
    assert again.to_dict()["targets"] == d["targets"]
    # without out: a temporary store, no report until save()
    tmp = mc.acr(model, MEMBERS[:1], CONTROLS[:1], criterion="argmax", **SMALL)
    assert tmp.report is None and Path(tmp.store).is_dir()
    paths = tmp.save(tmp_path / "saved")
    assert Path(paths["html"]).is_file()


def test_acr_is_a_public_function(model):
    """issue 28: an unknown keyword names the closest one, before any search; a result saved later
    still names the call that made it."""
    from memclaim.api._public import KeywordError

    with pytest.raises(KeywordError, match="did you mean criterion="):
        mc.acr(model, MEMBERS, CONTROLS, critrion="argmax", **SMALL)
    res = mc.acr(model, MEMBERS[:1], CONTROLS[:1], criterion="argmax", progress=False, **SMALL)
    assert res._invocation["api"].startswith("memclaim.acr(")
    assert json.loads(res.bundle().json_text)["invocation"]["api"] == res._invocation["api"]


def test_acr_limit_keeps_the_first_pairs(model):
    res = mc.acr(model, MEMBERS, CONTROLS, criterion="argmax", limit=2, **SMALL)
    assert [t.id for t in res.members] == ["m1", "m2"] and [t.id for t in res.controls] == [
        "c1",
        "c2",
    ]


@pytest.mark.parametrize(
    "kw, phrase",
    [
        (dict(members=[{"id": "a", "text": "x"}]), "has 1 token(s)"),
        (
            dict(members=[{"id": "a", "text": "xyz"}, {"id": "a", "text": "uvw"}]),
            "duplicate id 'a'",
        ),
        (dict(controls=MEMBERS), "identical contents"),
        (dict(criterion="prob:2"), "strictly between 0 and 1"),
        (dict(alpha="2"), "alpha must lie strictly between 0 and 1"),
        (dict(limit=0), "--limit must be >= 1"),
        (dict(max_prompt_tokens=0), "--max-prompt-tokens must be >= 1"),
        (dict(members=[{"id": "a", "text": "x" * 90}]), "more than the context"),
    ],
)
def test_acr_bad_inputs(model, kw, phrase):
    args = dict(members=MEMBERS, controls=CONTROLS)
    args.update(kw)
    members, controls = args.pop("members"), args.pop("controls")
    with pytest.raises(ValueError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        mc.acr(model, members, controls, **{**SMALL, **args})


@pytest.mark.integration
def test_cli_prints_the_apis_numbers(tmp_path, monkeypatch):
    from memclaim.cli.main import main

    monkeypatch.chdir(tmp_path)
    for name, rows in (("m.jsonl", MEMBERS), ("c.jsonl", CONTROLS)):
        Path(name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = [
        "acr",
        "toy",
        "--members",
        "m.jsonl",
        "--controls",
        "c.jsonl",
        "--criterion",
        "prob:0.2",
        "--top-k",
        "8",
        "--search-batch",
        "16",
        "--steps",
        "2",
        "--start-tokens",
        "3",
        "--out",
        "cli",
        "--no-progress",
    ]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv + ["--json"]) == 0
    got = json.loads(buf.getvalue())
    api = mc.acr(
        "toy",
        MEMBERS,
        CONTROLS,
        criterion="prob:0.2",
        top_k=8,
        search_batch=16,
        steps=2,
        start_tokens=3,
    )
    want = api.to_dict()
    for k in (
        "criterion",
        "members",
        "controls",
        "member_rate",
        "control_rate",
        "difference",
        "verdict",
        "flags",
    ):
        assert got[k] == want[k], k
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(got["targets"]) == strip(want["targets"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    out = buf.getvalue()
    assert (
        "read back" in out
        and "report: cli" in out
        and "'the procedure succeeds on members and on non-members'" in out
    )
    with pytest.raises(InputError):
        mc.acr("toy", "m.jsonl", "m.jsonl", **SMALL)


def test_report_document_says_what_the_comparison_means():
    """The report's document (no model): the headline is a result (not a claim's style), the
    paper's sentence with its verdict, the criteria table, every statement."""
    from memclaim.claims.acr import acr_comparison, succeeds_on_both
    from memclaim.report.acr import acr_statements, build_acr_doc, headline
    from memclaim.report.core import render_markdown

    c = acr_comparison(
        member_extracted=[True, False],
        control_extracted=[True, False],
        member_acr=[2.0, None],
        control_acr=[1.5, None],
        criterion="prob:0.9",
    )
    v = succeeds_on_both(members_extracted=1, n_members=2, controls_extracted=1, n_controls=2)
    row = {
        "id": "m",
        "target_len": 10,
        "prompt_len": 5,
        "acr": 2.0,
        "extracted": True,
        "met": True,
        "argmax": True,
        "greedy": False,
        "prob": True,
        "log_q": -0.5,
        "argmax_margin": 1e-6,
        "prompt_text": "a\x1b[2Jb",
        "shared_words": ["lord"],
        "argmax_without_greedy": True,
        "near_tie": True,
        "leaks": True,
    }
    doc = build_acr_doc(c, members=[row], controls=[], verdict=v, figures_on=False)
    assert doc.blocks[0] == ("callout", headline(c), "result")
    md = render_markdown(doc)
    assert "| 'the procedure succeeds on members and on non-members' | held |" in md
    assert "| members | 1 | 1 | 1 | 0 | 1 | 1 | 1 | 1 |" in md  # met, argmax, greedy, prob, flags
    assert "\x1b" not in md and "[2Jb" in md  # a control character in a prompt is shown, not obeyed
    assert all(s.split(":")[0][:40] in md for s in acr_statements())
