"""Issue 14, done-when: SmolLM2 loaded with ``--device-map auto`` and a ``--max-memory`` small
enough that some layers go to the offload folder scores what the plain load scores, within
1e-5 nats per target token (measured: printed with ``-s``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from _paths import DATA

pytestmark = pytest.mark.real

POLICIES = ("full", "top-k:40", "top-p:0.9", "temperature:0.7", "greedy")


def test_sharded_and_offloaded_smollm2_scores_equal_the_plain_load(tmp_path):
    from memclaim.decoding import parse_policies
    from memclaim.models.loader import load_model
    from memclaim.scoring.engine import TeacherForcingEngine

    plain = load_model("smollm2", device="cpu")
    # 400 MB of CPU memory for a 621 MiB float32 model: the embedding (tied unembedding) and the
    # first layers stay in memory, the rest goes to the offload folder
    off = load_model(
        "smollm2",
        device="cpu",
        device_map="auto",
        max_memory=["cpu=400MB"],
        offload_folder=tmp_path / "offload",
    )
    dmap = off.device_map
    assert "disk" in dmap.values() and "cpu" in dmap.values(), dmap
    assert dmap["lm_head"] == "cpu" and dmap["model.embed_tokens"] == "cpu"
    recs = [json.loads(line) for line in (DATA / "kjv_verses.jsonl").read_text().splitlines()[:8]]
    ids = [plain.tokenizer.encode(r["text"]) for r in recs]
    ids = [i for i in ids if len(i) >= 24][:6]
    assert len(ids) >= 4
    prompts = [plain.sot_ids + i[:12] for i in ids]
    suffixes = [i[12:24] for i in ids]
    pols = parse_policies(list(POLICIES))
    a = TeacherForcingEngine(plain.lm, pols).score_windows(prompts, suffixes, batch_size=3)
    b = TeacherForcingEngine(off.lm, pols).score_windows(prompts, suffixes, batch_size=3)
    S = len(suffixes[0])
    fin = np.isfinite(a.logq) & np.isfinite(b.logq)
    assert np.array_equal(np.isfinite(a.logq), np.isfinite(b.logq))
    d_logq = float(np.max(np.abs(a.logq[fin] - b.logq[fin]))) / S
    d_tok = float(np.max(np.abs(a.token_logprob - b.token_logprob)))
    print(
        f"\nsmollm2 --device-map auto --max-memory cpu=400MB ({sum(v == 'disk' for v in dmap.values())} modules on "
        f"disk): max |delta log q| per token {d_logq:.3g} nats, max |delta token log-prob| {d_tok:.3g} nats, "
        f"greedy flags equal: {np.array_equal(a.greedy_match, b.greedy_match)}"
    )
    assert d_logq <= 1e-5 and d_tok <= 1e-5
    assert np.array_equal(a.greedy_match, b.greedy_match)
    # the offloaded layers were written in memclaim's own subfolder of the offload folder
    assert [p.name.startswith("memclaim-offload-") for p in (tmp_path / "offload").iterdir()] == [
        True
    ]
