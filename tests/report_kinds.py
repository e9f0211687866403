"""Every kind of report memclaim writes, built once into a folder (shared by the report tests).

``build_unit(root)``: the kinds that need no model (a population test on given scores, a query
budget, DP bounds with a canary audit), in a second or two.
``build_all(root)``: also those the CLI writes after scoring (population, census, audit, the
audit-disagreement table), on the tiny model with committed weights of
tests/data/fixtures/store_v1 (the inputs of test_cli_json_unchanged).
Returns ``{kind: report folder}``.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np


def build_unit(root: Path) -> dict[str, Path]:
    from memclaim.api._budget import budget
    from memclaim.api._dp import dp_bounds
    from memclaim.api._population import claim_result

    root = Path(root)
    out = {}
    claim_result(
        candidate_scores=np.r_[-1.0, -2.0, -30.0, -31.0],
        control_scores=-np.arange(3.0, 42.0),
        alpha="0.1",
        kind="log-prob",
        budget_delta=0.05,
        out=root / "test",
    )
    out["test"] = root / "test"
    # a valid test that claims nothing: a null result
    claim_result(
        candidate_scores=np.r_[-50.0, -60.0],
        control_scores=-np.arange(3.0, 42.0),
        alpha="0.1",
        kind="log-prob",
        out=root / "test-null",
    )
    out["test-null"] = root / "test-null"
    budget(p=2.5e-5, n=100000).save(root / "budget")
    out["budget"] = root / "budget"
    dp_bounds(
        neighbors="add-remove",
        epsilon=4.0,
        delta=1e-5,
        list_size=1,
        risk=0.1,
        baseline=0.001,
        successes=12,
        trials=40,
    ).save(root / "dp")
    out["dp bounds"] = root / "dp"
    out["acr"] = _acr_report(root / "acr")
    return out


def _acr_report(folder: Path) -> Path:
    """An ACR report from recorded target results (issue 29): no model, no search."""
    from memclaim.claims.acr import acr_comparison, succeeds_on_both
    from memclaim.report.acr import acr_report
    from memclaim.report.core import write_report

    def row(i, side, acr, argmax, greedy, words):
        return {
            "id": f"{side}-{i}",
            "text": "The LORD is my shepherd; I shall not want.",
            "target_ids": [1, 2, 3, 4],
            "target_len": 4,
            "criterion": "prob:0.9",
            "met": acr is not None,
            "extracted": acr is not None,
            "prompt_ids": [9, 8] if acr else [9, 8, 7],
            "prompt_text": " shepherd LORD" if words else " xq zz",
            "prompt_len": 2 if acr else 3,
            "acr": acr,
            "log_q": -0.3 if acr else -6.0,
            "argmax": argmax,
            "greedy": greedy,
            "prob": acr is not None,
            "b": 0.9,
            "argmax_margin": 2e-6 if argmax else -1.5,
            "near_tie": argmax,
            "argmax_without_greedy": argmax and not greedy,
            "shared_words": words,
            "leaks": bool(words),
        }

    members = [
        row(0, "m", 2.0, True, False, ["lord", "shepherd"]),
        row(1, "m", None, False, False, []),
    ]
    controls = [row(0, "c", 2.0, True, True, []), row(1, "c", None, False, False, [])]
    c = acr_comparison(
        member_extracted=[r["extracted"] for r in members],
        control_extracted=[r["extracted"] for r in controls],
        member_acr=[r["acr"] for r in members],
        control_acr=[r["acr"] for r in controls],
        criterion="prob:0.9",
        member_ids=[r["id"] for r in members],
        control_ids=[r["id"] for r in controls],
    )
    v = succeeds_on_both(members_extracted=1, n_members=2, controls_extracted=1, n_controls=2)
    write_report(
        folder,
        acr_report(
            c,
            members=members,
            controls=controls,
            verdict=v,
            procedure={"kind": "acr", "criterion": "prob:0.9", "gcg": {"top_k": 256}},
        ),
    )
    return folder


def build_all(root: Path) -> dict[str, Path]:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _paths import test_module

    cli_json = test_module("test_cli_json_unchanged")  # tests/cli/ once tests mirror src/
    commands, make_inputs = cli_json.commands, cli_json.make_inputs

    from memclaim.cli.main import main

    root = Path(root)
    out = build_unit(root / "unit")
    d = make_inputs(root / "in")
    folders = {}
    for name, argv, report in commands(d, root / "out"):
        if name not in ("score", "score-controls", "population", "census", "audit", "audit-table"):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0, argv
        if report is not None:
            folders[name] = Path(report)
    out["population"] = folders["population"]
    out["census"] = folders["census"]
    out["audit"] = folders["audit"]
    out["audit table"] = folders["audit-table"]
    return out
