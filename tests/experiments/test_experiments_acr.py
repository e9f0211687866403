"""Issue 29: ``memclaim reproduce acr`` ([EM] App. A.2): the paper's sentence "the procedure succeeds
on members and on non-members", checked as stated. Quick tier on the tiny GPT (integration, CI);
the full run on SmolLM2 in the slow tier, its verdict recorded as a finding (FULL_RUN below)."""

from __future__ import annotations

import json

import pytest

from memclaim.experiments import REPRODUCTIONS, run
from memclaim.experiments.acr import claims_for, settings_for, targets

#: the full run on this project's 2-core CPUs (SmolLM2, first 4 of 16 line pairs, top-k 64, batch 64,
#: 8 steps per length; see the closing note of issue 29): recorded as it came out, not tuned
FULL_RUN = {"verdict": "not held", "members_extracted": 0, "controls_extracted": 0}


def test_registered_with_the_papers_sentence():
    assert (
        "acr" in REPRODUCTIONS and "succeeds on members and non-members" in REPRODUCTIONS["acr"][1]
    )


def test_the_verdict_comes_out_not_held_when_a_side_never_succeeds():
    """claims_for turns the verdict into the paper claim in issue 24's three-way form (the rules on
    made-up counts are in tests/experiments/test_experiments_verdicts.py::test_acr_rules)."""
    sides = {"members": {"n": 6, "extracted": 2}, "controls": {"n": 6, "extracted": 0}}
    for status, held in (("held", True), ("not held", False), ("not testable here", None)):
        b = {
            "verdict": {
                "sentence": "the procedure succeeds on members and on non-members",
                "status": status,
                "reason": "r",
            },
            **sides,
        }
        (c,) = claims_for(b)
        assert c.held is held and c.verdict == status and c.evidence == "r"


@pytest.mark.real
def test_the_full_tier_reads_matched_lines():
    """The full tier's targets: the first pairs of the committed member and control files, matched by line."""
    s = settings_for(False)
    import memclaim.train  # noqa: F401
    from memclaim.models import load_model

    sides, info = targets(load_model("smollm2"), False)
    assert [len(v) for v in sides.values()] == [s["pairs"], s["pairs"]]
    assert sides["members"][0][1] == "The LORD is my shepherd; I shall not want."
    assert (
        info["members"]["file"] == "kjv_famous_lines.jsonl"
        and len(info["controls"]["sha256"]) == 64
    )


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("acr-quick")
    return out, run("acr", quick=True, seed=0, out_dir=out)


@pytest.mark.integration
def test_quick_run_writes_its_files_and_a_verdict(quick):
    out, r = quick
    assert r["name"] == "acr" and r["quick"] is True and r["all_checks_passed"]
    b = r["results"]
    assert b["verdict"]["status"] in ("held", "not held", "not testable here")
    assert r["paper_claims"][0]["held"] == (b["verdict"]["status"] == "held")
    assert b["members"]["n"] == 6 and b["controls"]["n"] == 6
    assert len(b["targets"]["members"]) == 6 and all(
        len(t["target_ids"]) == 8 for t in b["targets"]["members"]
    )
    assert {p["row"] for p in r["paper_numbers"]} == {
        "member_acr",
        "control_acr",
        "argmax_not_greedy",
    }
    assert json.loads((out / "acr.json").read_text()) == json.loads(json.dumps(r))
    assert (out / "acr.png").stat().st_size > 1000 and (out / "acr.pdf").read_bytes()[:4] == b"%PDF"
    text = json.dumps(r)
    assert (
        "/tmp" not in text and str(out) not in text and "seconds" not in text
    )  # byte-identical reruns
    assert (out / "acr-searches" / "searches").is_dir()


@pytest.mark.integration
def test_second_quick_run_reads_the_searches_back_and_is_identical(quick):
    out, r = quick
    before = (out / "acr.json").read_bytes()
    again = run("acr", quick=True, seed=0, out_dir=out)
    assert (out / "acr.json").read_bytes() == before
    assert json.loads(json.dumps(again)) == json.loads(json.dumps(r))


@pytest.mark.slow
def test_full_run(tmp_path_factory):
    """SmolLM2 on the first 4 famous KJV lines against 4 newly written lines ([EM] App. A.2, prob:0.9),
    with a search far below the paper's (the JSON says so): the verdict is recorded as it came out."""
    out = tmp_path_factory.getbasetemp() / "acr-full"
    r = run("acr", quick=False, seed=0, out_dir=out)
    assert (
        r["all_checks_passed"]
        and r["quick"] is False
        and r["settings"]["model"]["name"] == "smollm2"
    )
    b = r["results"]
    assert b["members"]["n"] == b["controls"]["n"] == settings_for(False)["pairs"]
    got = {
        "verdict": b["verdict"]["status"],
        "members_extracted": b["members"]["extracted"],
        "controls_extracted": b["controls"]["extracted"],
    }
    assert got == FULL_RUN, got


def test_member_lines_are_verbatim_kjv_and_controls_are_matched():
    """tests/data/README.md: every member line is cut verbatim from the committed KJV texts; the
    controls are paired by line, within one word of their member, and are not KJV text."""
    from memclaim.experiments.real_text import read_records, read_text

    mem, _ = read_records("kjv_famous_lines.jsonl")
    ctl, _ = read_records("new_famous_style_lines.jsonl")
    sources = [r.text for r in read_records("kjv_quotations.jsonl")[0]] + [
        read_text("genesis_1_11.txt")[0]
    ]
    assert len(mem) == len(ctl) == 16
    for m, c in zip(mem, ctl):
        assert any(m.text in s for s in sources), m.id
        assert not any(c.text in s for s in sources), c.id
        assert abs(len(m.text.split()) - len(c.text.split())) <= 1, (m.id, c.id)
