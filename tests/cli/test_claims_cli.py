"""`memclaim test` and `memclaim budget`: external score files, reports, bad input with exit
status 2 and no report left behind."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from memclaim.api._population import claim_result
from memclaim.cli.main import main
from memclaim.errors import InputError, ProcedureMismatchError
from memclaim.text.scorefile import read_score_file


def _write_csv(path, ids, scores, texts=None, score_col="score"):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", score_col] + (["text"] if texts is not None else []))
        for i, (a, s) in enumerate(zip(ids, scores)):
            w.writerow([a, repr(float(s))] + ([texts[i]] if texts is not None else []))


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    ctrl = np.where(rng.random(400) < 0.6, -np.inf, -rng.exponential(25, 400))
    cand = np.where(rng.random(120) < 0.4, -np.inf, -rng.exponential(8, 120))
    cand[:3] = [0.0, -0.01, -0.02]
    cids = [f"m{i}" for i in range(120)]
    cids[0] = "<script>alert('x')</script>"
    _write_csv(tmp_path / "members.csv", cids, cand)
    _write_csv(tmp_path / "controls.csv", [f"c{i}" for i in range(400)], ctrl)
    return tmp_path, cand, ctrl


def test_cli_test_writes_report(files, capsys):
    d, cand, ctrl = files
    (d / "verified.txt").write_text("c3\n# a comment\nc7\n")
    out = d / "rep"
    rc = main(
        [
            "test",
            "--candidates",
            str(d / "members.csv"),
            "--controls",
            str(d / "controls.csv"),
            "--alpha",
            "0.01",
            "--policy",
            "top-k:40",
            "--exclude-controls",
            str(d / "verified.txt"),
            "--fdr",
            "0.1",
            "--budget-delta",
            "0.05",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pool"] == "decontaminated" and summary["n_controls"] == 398
    assert summary["k"] == math.floor(0.01 * 399)
    names = {p.name for p in out.iterdir()}
    figs = names - {"report.json", "report.md", "report.html"}
    assert {"report.json", "report.md", "report.html"} <= names
    # besides the reports only figure files, each as PNG and its vector PDF (issue 15 item 5)
    assert figs and {n.rsplit(".", 1)[1] for n in figs} == {"png", "pdf"}
    assert {n.rsplit(".", 1)[0] for n in figs if n.endswith(".png")} == {
        n.rsplit(".", 1)[0] for n in figs if n.endswith(".pdf")
    }
    rep = json.loads((out / "report.json").read_text())
    assert (
        rep["schema_version"]
        and rep["command"] == "test"
        and rep["procedure"]["policy"] == "top-k:40"
    )
    assert [i["role"] for i in rep["inputs"]][:2] == ["candidates", "controls"] and len(
        rep["inputs"][0]["sha256"]
    ) == 64
    pop = rep["results"]["population"]
    assert pop["excluded_control_ids"] == ["c3", "c7"] and pop["full"]["n_controls"] == 400
    assert (
        pop["candidates"][0]["id"] == "<script>alert('x')</script>"
        and pop["candidates"][0]["claimed"]
    )
    html = (out / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "No claim is not evidence against memorization" in html


def test_cli_greedy_flags(tmp_path, capsys):
    _write_csv(
        tmp_path / "m.csv", [f"m{i}" for i in range(50)], [1.0] * 10 + [0.0] * 40, score_col="match"
    )
    _write_csv(
        tmp_path / "c.csv",
        [f"c{i}" for i in range(200)],
        [1.0] * 2 + [0.0] * 198,
        score_col="match",
    )
    rc = main(
        [
            "test",
            "--candidates",
            str(tmp_path / "m.csv"),
            "--controls",
            str(tmp_path / "c.csv"),
            "--kind",
            "prob",
            "--policy",
            "greedy",
            "--score-field",
            "match",
            "--alpha",
            "0.02",
            "--out",
            str(tmp_path / "r"),
            "--json",
        ]
    )
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert s["n_claimed"] == 10  # K = 4 > m = 2: reproduced candidates clear tau = -inf
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    b = rep["results"]["population"]["full"]["binary_rates"]
    assert b["m"] == 2 and b["alpha_n_exact"] == "3/201"


@pytest.mark.parametrize(
    "args,match",
    [
        (["--alpha", "1.5"], "alpha must lie strictly between 0 and 1"),
        (["--alpha", "0"], "alpha must lie strictly between 0 and 1"),
        (["--exclude-control", "nope"], "not among the controls"),
        (["--kind", "prob"], "not a probability"),
    ],
)
def test_cli_bad_input_exit_2_no_report(files, capsys, args, match):
    d, *_ = files
    out = d / "bad"
    rc = main(
        [
            "test",
            "--candidates",
            str(d / "members.csv"),
            "--controls",
            str(d / "controls.csv"),
            "--out",
            str(out),
            *args,
        ]
    )
    assert rc == 2
    assert match in capsys.readouterr().err
    assert not out.exists()


def test_cli_empty_and_all_inf_controls(tmp_path, capsys):
    _write_csv(tmp_path / "m.csv", ["a", "b"], [-1.0, -2.0])
    (tmp_path / "empty.csv").write_text("id,score\n")
    _write_csv(tmp_path / "inf.csv", ["x", "y", "z"], [-math.inf] * 3)
    for ctrl, msg in (
        ("empty.csv", "no rows"),
        ("inf.csv", "all 3 control scores are -inf"),
        ("missing.csv", "does not exist"),
    ):
        rc = main(
            [
                "test",
                "--candidates",
                str(tmp_path / "m.csv"),
                "--controls",
                str(tmp_path / ctrl),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        assert rc == 2 and msg in capsys.readouterr().err
        assert not (tmp_path / "r").exists()


def test_cli_procedure_mismatch(files, capsys):
    d, *_ = files
    (d / "pc.json").write_text(
        json.dumps({"policy": "top-k:40", "model": {"fingerprint": "aaa"}, "suffix_tokens": 50})
    )
    (d / "pk.json").write_text(
        json.dumps({"policy": "greedy", "model": {"fingerprint": "bbb"}, "suffix_tokens": 50})
    )
    rc = main(
        [
            "test",
            "--candidates",
            str(d / "members.csv"),
            "--controls",
            str(d / "controls.csv"),
            "--candidates-procedure",
            str(d / "pc.json"),
            "--controls-procedure",
            str(d / "pk.json"),
            "--out",
            str(d / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "model.fingerprint: 'aaa' != 'bbb'" in err
        and "policy: 'top-k:40' != 'greedy'" in err
    )
    assert not (d / "r").exists()


def test_read_score_file_parquet_and_errors(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"doc_id": [1, 2, 3], "log_prob": [-1.0, float("-inf"), -3.5]}),
        tmp_path / "s.parquet",
    )
    sf = read_score_file(tmp_path / "s.parquet")
    assert (
        sf.ids == ("1", "2", "3") and sf.scores[1] == -np.inf and sf.columns["score"] == "log_prob"
    )
    (tmp_path / "dup.csv").write_text("id,score\na,-1\na,-2\n")
    with pytest.raises(InputError, match="duplicate id 'a'"):
        read_score_file(tmp_path / "dup.csv")
    (tmp_path / "nan.csv").write_text("id,score\na,-1\nb,oops\n")
    with pytest.raises(InputError, match="line 3.*'oops' is not a number"):
        read_score_file(tmp_path / "nan.csv")
    (tmp_path / "cols.csv").write_text("key,value\na,-1\n")
    with pytest.raises(InputError, match="cannot find a score column"):
        read_score_file(tmp_path / "cols.csv")


def test_claim_result_for_store_commands(tmp_path):
    """The entry point every test command ends in: arrays + procedures + texts."""
    proc = {"policy": "top-k:40", "model": {"fingerprint": "f"}}
    s = claim_result(
        candidate_scores=np.log([0.9, 0.5, 1e-9]),
        control_scores=np.log(np.linspace(1e-6, 1e-3, 50)),
        alpha="0.1",
        kind="log-prob",
        out=tmp_path / "r",
        candidate_ids=["a", "b", "c"],
        candidate_texts=["x", "y", "z"],
        control_texts=["y"] + [f"t{i}" for i in range(49)],
        candidates_procedure=proc,
        controls_procedure=dict(proc, role="controls"),
        procedure_ignore=("role",),
    ).to_dict()
    assert s["n_claimed"] == 2 and "warning" in s
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["results"]["controls_identical_to_a_candidate"] == [
        {"control": "0", "candidate": "b"}
    ]
    with pytest.raises(ProcedureMismatchError):
        claim_result(
            candidate_scores=[-1.0],
            control_scores=[-2.0, -3.0],
            alpha="0.5",
            kind="log-prob",
            out=tmp_path / "r2",
            candidates_procedure=proc,
            controls_procedure=dict(proc, policy="greedy"),
        )
    assert not (tmp_path / "r2").exists()


def test_cli_budget(capsys, tmp_path):
    assert main(["budget", "--log10-p", "-27", "--n", "1e5", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    q = s["queries_needed"]
    assert q["n_int"] is None and q["log10_n"] == pytest.approx(27 + math.log10(-math.log(0.05)))
    assert (
        s["at_n"]["log10_prob_at_least_once"] == pytest.approx(-22, abs=1e-9)
        and not s["at_n"]["extractable"]
    )
    assert main(["budget", "--p", "0.5", "--delta", "0.05", "--out", str(tmp_path / "b")]) == 0
    assert "n = 5 " in capsys.readouterr().out
    assert (tmp_path / "b" / "report.html").exists()
    assert main(["budget", "--p", "1e-3", "--log10-p", "-3"]) == 2
    assert "exactly one" in capsys.readouterr().err
    assert main(["budget", "--p", "0.1", "--delta", "1"]) == 2


def test_cli_budget_beyond_the_double_range(capsys):
    """p = 1e-400 and n = 1e400 (issue 12 A4): P[at least once] = 1 - e^-1, from log10 n, and
    the check at n_delta is 1 - delta, not 1.0."""
    assert main(["budget", "--log10-p", "-400", "--log10-n", "400", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["queries_needed"]["prob_at_least_once_at_n"] == pytest.approx(0.95, abs=1e-9)
    assert s["at_n"]["prob_at_least_once"] == pytest.approx(-math.expm1(-1.0), rel=1e-12)
    assert s["at_n"]["log10_n"] == 400.0
    assert main(["budget", "--log10-p", "-400", "--log10-n", "400"]) == 0
    assert "n = 1.000e+400] = 0.632121" in capsys.readouterr().out
    assert main(["budget", "--p", "0.1", "--n", "10", "--log10-n", "1"]) == 2
    assert "not both" in capsys.readouterr().err
