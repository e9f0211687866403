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
    claim_result(candidate_scores=np.r_[-1.0, -2.0, -30.0, -31.0], control_scores=-np.arange(3.0, 42.0),
                 alpha="0.1", kind="log-prob", budget_delta=0.05, out=root / "test")
    out["test"] = root / "test"
    # a valid test that claims nothing: a null result
    claim_result(candidate_scores=np.r_[-50.0, -60.0], control_scores=-np.arange(3.0, 42.0), alpha="0.1",
                 kind="log-prob", out=root / "test-null")
    out["test-null"] = root / "test-null"
    budget(p=2.5e-5, n=100000).save(root / "budget")
    out["budget"] = root / "budget"
    dp_bounds(neighbors="add-remove", epsilon=4.0, delta=1e-5, list_size=1, risk=0.1, baseline=0.001,
              successes=12, trials=40).save(root / "dp")
    out["dp bounds"] = root / "dp"
    return out


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
