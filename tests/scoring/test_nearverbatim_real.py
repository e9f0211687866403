"""Near-verbatim lower bound on SmolLM2-135M (real tier): the KV-cache beam through the HF
adapter agrees with recomputing every step and with one teacher-forced pass, and the cost
accounting matches the estimate. Exact checks up to float32 rounding; no false-alarm rate."""

from __future__ import annotations

import pytest
import torch

from memclaim.audits.recovery import deterministic_recovery
from memclaim.decoding import Policy, policy_target_logprob
from memclaim.scoring.nearverbatim import (
    estimate_beam_cost,
    near_verbatim_lower_bound,
    union_near_verbatim,
)

pytestmark = pytest.mark.real

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity."
)


def test_smollm2_near_verbatim_window(smollm2):
    lm = smollm2.lm
    ids = smollm2.sot_ids + smollm2.tokenizer.encode(TEXT)
    prompt, suffix = ids[:20], ids[20:26]
    pol = Policy.parse("full")
    a = near_verbatim_lower_bound(lm, prompt, suffix, policy=pol, epsilon=2, beam=4)
    b = near_verbatim_lower_bound(
        lm, prompt, suffix, policy=pol, epsilon=2, beam=4, use_cache=False
    )
    da, db = a.continuations.as_dict(), b.continuations.as_dict()
    assert (
        da.keys() == db.keys() and len(da) > 1000
    )  # the last position adds ~V variants per prefix
    assert max(abs(da[k][0] - db[k][0]) for k in da) < 1e-3
    est = estimate_beam_cost(
        prompt_len=len(prompt), suffix_len=len(suffix), beam=4, vocab_size=lm.vocab_size
    )
    assert a.forward_rows <= est.forward_rows_max and a.forward_calls == len(suffix)
    # the target's term against one teacher-forced pass over prompt + suffix ([EM] Eq. 1)
    h, _ = lm.forward_hidden(torch.tensor([prompt + suffix[:-1]], device=lm.device))
    tf = float(
        policy_target_logprob(
            lm.logits(h[0, len(prompt) - 1 :]), torch.tensor(suffix, device=lm.device), pol
        )
        .double()
        .sum()
    )
    assert a.log_verbatim == pytest.approx(tf, abs=1e-3)
    c = near_verbatim_lower_bound(
        lm, prompt, suffix, policy=pol, epsilon=2, beam=4, verbatim_logprob=tf
    )
    assert c.log_bound > tf  # the variants add mass to the verbatim term
    u = union_near_verbatim([a, c])
    assert u.log_bounds[2] >= max(a.log_bound, c.log_bound) - 1e-12 and list(
        u.log_bounds
    ) == sorted(u.log_bounds)
    rec = deterministic_recovery(lm, prompt, suffix, policy="top-k:40", epsilon=2, beam=4)
    assert rec.pool_size == 4 and all(r.distance <= 2 for r in rec.recovered)
