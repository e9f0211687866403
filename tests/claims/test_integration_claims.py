"""Claims on the built-in tiny GPT (`toy`), end to end through the CLI: a population test of the
planted members against held-out controls, and a census of the planted document against the
held-out one ([EM] §3-§5). The model trains once (cached); these tests score about 400 windows
of 32 tokens. They assert what the planted structure makes robust: the threshold comes from the
controls, passages planted 16 times clear it far more often than controls do, the planted
document is covered far more than a held-out one, and re-running does no model work."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores

pytestmark = pytest.mark.integration

LN10 = math.log(10.0)
N_CONTROLS = 200
ALPHA = "0.02"  # K = floor(0.02 * 201) = 4


def _jsonl(path, records):
    path.write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in records),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def files(toy_data, tmp_path_factory):
    d = tmp_path_factory.mktemp("toy-claims")
    members = [r for r in toy_data["planted"] if r["id"].startswith("member-")]
    controls = [r for r in toy_data["held_out"] if r["id"].startswith("control-")]
    assert {r["copies"] for r in members} >= {1, 16} and len(controls) >= N_CONTROLS + 8
    docs = {
        r["id"]: r["text"]
        for r in toy_data["planted"] + toy_data["held_out"]
        if r["id"].startswith("document-")
    }
    (d / "member_doc.txt").write_text(docs["document-member"], encoding="utf-8")
    (d / "control_doc.txt").write_text(docs["document-control"], encoding="utf-8")
    # a second non-member document, made of held-out passages the population test does not use
    (d / "heldout_doc.txt").write_text(" ".join(r["text"] for r in controls[-8:]), encoding="utf-8")
    return {
        "dir": d,
        "members": _jsonl(d / "members.jsonl", members),
        "controls": _jsonl(d / "controls.jsonl", controls[:N_CONTROLS]),
        "copies": {r["id"]: r["copies"] for r in members},
    }


@pytest.fixture(scope="module")
def population(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("toy-pop") / "pop"
    args = [
        "population",
        "toy",
        "--members",
        str(files["members"]),
        "--controls",
        str(files["controls"]),
        "--prefix-tokens",
        "16",
        "--suffix-tokens",
        "16",
        "--policy",
        "full",
        "--policy",
        "greedy",
        "--alpha",
        ALPHA,
        "--batch-size",
        "64",
        "--out",
        str(out),
        "--json",
        "--no-progress",
    ]
    return out, args


def _run_json(args, capsys):
    capsys.readouterr()
    rc = main(args)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def test_population_members_against_heldout_controls(files, population, capsys):
    out, args = population
    s = _run_json(args, capsys)
    ctrl = load_run_scores(out / "store", run="controls", policy="full").logq
    assert s["n_controls"] == N_CONTROLS and s["k"] == 4
    # the threshold comes from the controls: it is their K-th largest score, and strict > is used
    assert s["threshold"] == np.sort(ctrl)[::-1][s["k"] - 1]
    assert (
        np.sum(ctrl > s["threshold"]) == s["k"] - 1
        and s["in_sample_fpr"] <= (s["k"] - 1) / N_CONTROLS
    )
    rows = json.loads((out / "report.json").read_text())["results"]["population"]["candidates"]
    claimed = {r["id"]: r["claimed"] for r in rows}
    by_copies = {
        c: np.mean([claimed[i] for i, k in files["copies"].items() if k == c]) for c in (1, 16)
    }
    # planted 16 times: memorized well beyond anything a held-out passage reaches
    assert by_copies[16] >= 0.5 and by_copies[16] > 10 * s["in_sample_fpr"]
    assert by_copies[16] >= by_copies[1]
    assert s["calibrated_rate"]["estimate"] == pytest.approx(
        s["generation_rate"]["estimate"] - s["alpha_n"]
    )


def test_population_rerun_does_no_model_work(population, capsys):
    out, args = population
    first = json.loads((out / "report.json").read_text())["results"]["population"]
    s = _run_json(args, capsys)
    for label in ("members", "controls"):
        assert s["scoring"][label]["units_scored"] == 0 and not s["scoring"][label]["model_loaded"]
    again = json.loads((out / "report.json").read_text())["results"]["population"]
    assert (
        again["candidates"] == first["candidates"]
        and again["full"]["threshold"] == first["full"]["threshold"]
    )


def test_greedy_from_the_same_store(files, population, tmp_path, capsys):
    """Greedy was scored in the same pass: the binary test ([EM] §4) reads it from the store."""
    out, _ = population
    s = _run_json(
        [
            "test",
            "--candidates",
            str(out / "store"),
            "--run",
            "members",
            "--controls",
            str(out / "store"),
            "--controls-run",
            "controls",
            "--policy",
            "greedy",
            "--alpha",
            ALPHA,
            "--out",
            str(tmp_path / "g"),
            "--json",
        ],
        capsys,
    )
    b = json.loads((tmp_path / "g" / "report.json").read_text())["results"]["population"]["full"][
        "binary_rates"
    ]
    members = load_run_scores(out / "store", run="members", policy="greedy")
    k16 = [files["copies"][src] == 16 for src in members.sources]
    assert b["alpha_n_exact"] == f"{b['m'] + 1}/{N_CONTROLS + 1}"
    assert np.mean(members.greedy_match[k16]) > b["m"] / N_CONTROLS
    assert s["n_candidates"] == len(members)


def test_census_planted_document_against_heldout(files, tmp_path, capsys):
    d = files["dir"]
    out = tmp_path / "census"
    s = _run_json(
        [
            "census",
            "toy",
            "--pair",
            str(d / "member_doc.txt"),
            str(d / "control_doc.txt"),
            "--pair",
            str(d / "heldout_doc.txt"),
            str(d / "control_doc.txt"),
            "--prefix-tokens",
            "16",
            "--suffix-tokens",
            "16",
            "--stride",
            "16",
            "--policy",
            "full",
            "--batch-size",
            "64",
            "--out",
            str(out),
            "--json",
            "--no-progress",
        ],
        capsys,
    )
    ctl = load_run_scores(out / "store", run="control-1", policy="full").logq
    member, heldout = s["pairs"]
    # tau_doc = 10^ceil(log10 max control score) ([EM] Eq. 31), from the control's own scores
    assert member["log10_tau"] == heldout["log10_tau"] == math.ceil(float(np.max(ctl)) / LN10)
    assert member["coverage"] > 0.5  # planted 4 times
    assert heldout["coverage"] < member["coverage"] / 2
    assert member["coverage_at_margins"]["0"] == pytest.approx(member["coverage"])
    rep = json.loads((out / "report.json").read_text())
    assert rep["results"]["budget"][0]["coverage_memorized"] == pytest.approx(member["coverage"])
    assert "heat-legend" in (out / "report.html").read_text()
