"""A real vLLM server killed with SIGKILL under a run and started again (issue 27): `slow` and
`served` tiers, not in CI (tests/scoring/test_served_vllm.py says why). Needs vLLM's Python,
``MEMCLAIM_VLLM_PYTHON=/path/to/venv/bin/python`` (this test starts, kills and restarts its own
server, about 3 minutes per start on 2 cores):

    MEMCLAIM_VLLM_PYTHON=/work/servenv/vllm/bin/python \
        pytest -m "slow and served" tests/scoring/test_served_vllm_restart.py
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores
from vllm_server import free_port, kill_9, start_vllm, stop, wait_up

pytestmark = [pytest.mark.slow, pytest.mark.served]

WINDOW_TOL = 1e-3  # nats per 16-token window, as test_served_vllm.py (measured max 1.1e-4)
POLICIES = ("full", "greedy", "top-k:40")


def test_kill_9_mid_run_then_restart_resumes_to_the_uninterrupted_scores(tmp_path, capsys):
    """The server killed with SIGKILL under a run (its engine process too), started again on the
    same port: the run fails naming the resume, keeps every unit whose windows all came back, and
    the same command resumes to the scores of a run that was never interrupted. Needs
    MEMCLAIM_VLLM_PYTHON (this test starts, kills and restarts its own server: ~7 minutes)."""
    py = os.environ.get("MEMCLAIM_VLLM_PYTHON")
    if not py or not Path(py).is_file():
        pytest.skip("needs MEMCLAIM_VLLM_PYTHON: the test kills and restarts its own vLLM server")
    port = free_port()
    log = tmp_path / "server.log"
    pols = [x for p in POLICIES for x in ("--policy", p)]
    url = f"http://127.0.0.1:{port}"
    args = [
        "--backend",
        "openai",
        "--url",
        url,
        "--limit",
        "48",
        "--unit-size",
        "2",
        "--batch-size",
        "2",
        "--max-concurrency",
        "1",
        *pols,
    ]

    def run(out):
        rc = main(
            [
                "score",
                "smollm2",
                "--input",
                "tests/data/kjv_verses.jsonl",
                "--prefix-tokens",
                "16",
                "--suffix-tokens",
                "16",
                *args,
                "--out",
                str(out),
                "--json",
                "--no-progress",
            ]
        )
        return rc, capsys.readouterr()

    proc = start_vllm(py, port, log)
    try:
        wait_up(proc, port, log)
        rc, out = run(tmp_path / "clean")  # never interrupted
        assert rc == 0, out.err
        units_all = json.loads(out.out)["units_scored"]
        assert units_all >= 12
        killed = threading.Event()

        def killer():  # SIGKILL as soon as the first unit is in the store
            units = tmp_path / "run" / "units"
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                if units.is_dir() and any(units.rglob("*.parquet")):
                    kill_9(proc)
                    killed.set()
                    return
                time.sleep(0.05)

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        rc, out = run(tmp_path / "run")
        t.join(60)
        assert killed.is_set() and rc == 2, out.err
        err = " ".join(out.err.split())
        assert "to resume" in err, err
        kept = len(list((tmp_path / "run" / "units").rglob("*.parquet")))
        assert 1 <= kept < units_all
        proc = start_vllm(py, port, log)  # the same server again, the same URL
        wait_up(proc, port, log)
        rc, out = run(tmp_path / "run")
        assert rc == 0, out.err
    finally:
        stop(proc)
    summary = json.loads(out.out)
    assert (
        summary["units_reused"] >= kept
        and summary["units_reused"] + summary["units_scored"] == units_all
    )
    for p in POLICIES:
        a = load_run_scores(tmp_path / "run", policy=p)
        b = load_run_scores(tmp_path / "clean", policy=p)
        assert a.window_ids == b.window_ids and a.procedure == b.procedure, p
        fin = np.isfinite(b.logq)
        assert (np.isfinite(a.logq) == fin).all(), p
        # float32 on another batch and another process: within the served tolerance
        assert np.max(np.abs(a.logq[fin] - b.logq[fin]), initial=0.0) < WINDOW_TOL, p
