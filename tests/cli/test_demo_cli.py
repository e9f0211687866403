"""`memclaim demo` (what `make demo` runs): the whole pipeline on the built-in tiny GPT, through the
CLI, and its re-run reusing the stored scores. Integration tier (the cached tiny GPT)."""

from __future__ import annotations

import json

import pytest

from memclaim.cli.main import main

pytestmark = pytest.mark.integration


def test_demo_end_to_end_and_rerun(toy_dir, tmp_path, capsys):
    out = tmp_path / "demo"
    capsys.readouterr()
    assert main(["demo", "--out", str(out), "--json", "--no-progress"]) == 0
    first = json.loads(capsys.readouterr().out)
    runs = first["runs"]
    assert set(runs) == {"members", "controls", "document-member", "document-control"}
    assert all(r["units_scored"] > 0 for r in runs.values())
    sc = first["scoring"]
    assert {"members k=1", "members k=4", "members k=16", "controls"} <= set(sc)
    # planted 16 times, the members are reproduced far more often than held-out controls
    assert sc["members k=16"]["greedy_match"] > sc["controls"]["greedy_match"]
    assert {"claims", "privacy"} <= set(first["sections"])
    assert (out / "claims" / "report.html").stat().st_size > 0
    assert (out / "store").is_dir()
    # the same command again does no model work: every unit comes from the store
    assert main(["demo", "--out", str(out), "--json", "--no-progress"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert all(r["units_scored"] == 0 and r["units_reused"] > 0 for r in again["runs"].values())
    assert again["scoring"] == sc and again["sections"]["claims"] == first["sections"]["claims"]
    # bad input: the CLI names the bad value and exits 2
    bad = tmp_path / "bad"
    assert main(["demo", "--out", str(bad), "--alpha", "2", "--no-progress"]) == 2
    assert "alpha" in capsys.readouterr().err
