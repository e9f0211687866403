"""Real tier: SmolLM2-135M (GGUF from PyPI, converted once and cached); the same checks on
Gemma 3 270M run in the slow tier (tests/conftest.py: real_model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memclaim.decoding import parse_policies
from memclaim.scoring.engine import NEAR_TIE_MARGIN, TeacherForcingEngine
from memclaim.text.io import Record
from memclaim.text.windows import passage_windows

pytestmark = pytest.mark.real

MEMBER = "In the beginning God created the heaven and the earth."
# newly written (2026), same style, same token length as the member's suffix (8 tokens)
FRESH = "In the beginning the elders counted the sheep and goats."


def test_start_of_text_and_procedure(real_model):
    m = real_model
    # SmolLM2: <|endoftext|> (id 0) prepended by memclaim; Gemma: its tokenizer's own <bos> (id 2)
    want = {"smollm2": ((0,), ("<|endoftext|>",)), "gemma3-270m": ((2,), ("<bos>",))}[m.name]
    assert (m.sot.ids, m.sot.tokens) == want
    assert m.describe()["fingerprint"] == m.fingerprint and len(m.fingerprint) == 64


def test_genesis_scores_far_above_a_fresh_suffix(real_model):
    m = real_model
    ws = passage_windows(
        [Record("kjv", MEMBER), Record("new", FRESH)], m.tokenizer, prefix_tokens=3, suffix_tokens=8
    )
    assert ws.skipped_short == 0
    w_kjv, w_new = ws.windows
    assert w_kjv.suffix_text == " God created the heaven and the earth."
    assert w_new.suffix_text == " the elders counted the sheep and goats."
    eng = TeacherForcingEngine(m.lm, parse_policies(["full", "top-k:40"]))
    out = eng.score_batch(
        [list(m.sot_ids) + list(w.prefix_ids) for w in ws.windows],
        [list(w.suffix_ids) for w in ws.windows],
    )
    full_kjv, full_new = out.logq[:, 0]
    assert full_kjv - full_new >= 10.0, (full_kjv, full_new)
    assert np.isfinite(out.logq[0, 1])  # every token of the KJV suffix is in the top 40


def _verse_windows(m, data_dir, n=6, prefix=12, suffix=12):
    import json

    recs = [json.loads(x) for x in (data_dir / "kjv_verses.jsonl").read_text().splitlines()[:n]]
    return passage_windows(
        [Record(r["id"], r["text"]) for r in recs],
        m.tokenizer,
        prefix_tokens=prefix,
        suffix_tokens=suffix,
    ).windows


def test_batching_is_exact_and_padding_is_close(real_model, data_dir):
    m = real_model
    ws = _verse_windows(m, data_dir)
    prompts = [list(m.sot_ids) + list(w.prefix_ids) for w in ws]
    suffixes = [list(w.suffix_ids) for w in ws]
    eng = TeacherForcingEngine(m.lm, parse_policies(["top-k:40", "greedy", "full"]))
    whole = eng.score_batch(prompts, suffixes)
    for i in range(len(ws)):
        one = eng.score_batch(prompts[i : i + 1], suffixes[i : i + 1])
        assert np.array_equal(one.token_logq[0], whole.token_logq[i])  # bit for bit
        assert np.array_equal(one.token_logprob[0], whole.token_logprob[i])
    # unequal prompts: left-padded batch vs one window at a time, within 1e-4 nats per token
    ragged = [p[: len(p) - (i % 4)] for i, p in enumerate(prompts)]
    padded = eng.score_batch(ragged, suffixes)
    for i in range(len(ws)):
        one = eng.score_batch([ragged[i]], [suffixes[i]])
        np.testing.assert_allclose(padded.token_logprob[i], one.token_logprob[0], atol=1e-4, rtol=0)


def test_teacher_forced_greedy_equals_generate(real_model, data_dir):
    m = real_model
    ws = _verse_windows(m, data_dir, n=4, prefix=12, suffix=8)
    prompts = [list(m.sot_ids) + list(w.prefix_ids) for w in ws]
    eng = TeacherForcingEngine(m.lm, parse_policies(["greedy"]))
    hf = m.lm.model
    gc = hf.generation_config
    old = gc.eos_token_id
    gc.eos_token_id = None
    try:
        ids = torch.tensor(prompts)
        with torch.no_grad():
            gen = hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=8,
                pad_token_id=0,
            )[:, ids.shape[1] :].tolist()  # no padding happens
    finally:
        gc.eos_token_id = old
    tf = eng.score_batch(prompts, [list(w.suffix_ids) for w in ws])
    near = tf.min_margin < NEAR_TIE_MARGIN
    gen_match = np.array([g == list(w.suffix_ids) for g, w in zip(gen, ws)])
    assert np.array_equal(tf.greedy_match[~near], gen_match[~near])
    again = eng.score_batch(prompts, gen)
    ok = again.min_margin >= NEAR_TIE_MARGIN
    assert again.greedy_match[ok].all()
