"""Decoding policies: parsing, the HF tie rule, exactness against transformers' warpers."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaim.decoding import Policy, parse_policies, policy_logprobs, policy_target_logprob
from memclaim.errors import PolicyError


def test_parse_canonical_order_and_aliases():
    a = Policy.parse("top-k:40,temperature:0.7")
    b = Policy.parse("temperature:0.7, top-k:40")
    assert a == b and a.spec == "temperature:0.7,top-k:40"
    assert Policy.parse("full").spec == "full"
    assert Policy.parse("greedy").greedy and Policy.parse("greedy").is_binary
    assert Policy.parse("top-p:1.0") == Policy.parse("full")  # HF skips top_p = 1
    assert Policy.parse("top_k=5").top_k == 5
    assert parse_policies(["greedy", "greedy", "top-k:40"]) == (Policy(greedy=True), Policy(top_k=40))


@pytest.mark.parametrize("bad", ["", "top-q:3", "top-k:0", "top-k:2.5", "temperature:-1", "temperature:0",
                                 "top-p:0", "top-p:1.5", "greedy,top-k:3", "top-k:3,top-k:4", "temperature:nan"])
def test_parse_rejects_with_valid_list(bad):
    with pytest.raises(PolicyError) as e:
        Policy.parse(bad)
    assert "valid policies" in str(e.value) or "greedy" in str(e.value)
    assert repr(bad) in str(e.value) or bad == ""


def test_topk_tie_rule_keeps_every_tie_at_the_boundary():
    # [3, 2, 2, 1], k = 2: the K-th largest is 2 and both 2s are kept (HF TopKLogitsWarper).
    x = torch.tensor([[3.0, 2.0, 2.0, 1.0]])
    lp = policy_logprobs(x, Policy(top_k=2))
    z = math.log(math.exp(3) + 2 * math.exp(2))
    assert torch.isinf(lp[0, 3]) and lp[0, 3] < 0
    np.testing.assert_allclose(lp[0, :3].numpy(), [3 - z, 2 - z, 2 - z], rtol=0, atol=1e-6)
    fast = policy_target_logprob(x.repeat(4, 1), torch.arange(4), Policy(top_k=2))
    np.testing.assert_allclose(fast[:3].numpy(), [3 - z, 2 - z, 2 - z], atol=1e-6)
    assert fast[3] == -math.inf


def test_greedy_is_indicator_of_first_argmax():
    x = torch.tensor([[1.0, 5.0, 5.0, 0.0]])
    lp = policy_logprobs(x, Policy(greedy=True))
    assert lp[0, 1] == 0 and torch.isinf(lp[0, [0, 2, 3]]).all()
    t = policy_target_logprob(x.repeat(2, 1), torch.tensor([1, 2]), Policy(greedy=True))
    assert t[0] == 0 and t[1] == -math.inf


def _hf_reference(x: torch.Tensor, p: Policy) -> torch.Tensor:
    """transformers' own warpers, applied in generate()'s order, then log-softmax."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)

    s = x.clone()
    if p.temperature != 1.0:
        s = TemperatureLogitsWarper(p.temperature)(None, s)
    if p.top_k is not None:
        s = TopKLogitsWarper(p.top_k)(None, s)
    if p.top_p is not None:
        s = TopPLogitsWarper(p.top_p)(None, s)
    return torch.log_softmax(s, dim=-1)


POLICIES = ["full", "temperature:0.7", "top-k:1", "top-k:5", "top-k:40", "top-p:0.9", "top-p:0.5",
            "top-k:40,temperature:0.7", "top-k:5,top-p:0.8,temperature:1.3"]


@pytest.mark.parametrize("spec", POLICIES)
@pytest.mark.parametrize("ties", [False, True])
def test_matches_transformers_warpers_exactly(spec, ties):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(64, 97, generator=g) * 3
    if ties:
        x = torch.round(x)  # many exact ties, including at the top-k / top-p boundaries
    p = Policy.parse(spec)
    ref = _hf_reference(x, p)
    ours = policy_logprobs(x, p)
    assert torch.equal(torch.isinf(ref), torch.isinf(ours))  # same support, tie for tie
    fin = torch.isfinite(ref)
    torch.testing.assert_close(ours[fin], ref[fin], rtol=0, atol=1e-6)
    # the fast per-target path (no masked copy for top-k) equals the reference on every target
    for t in range(0, 97, 7):
        tt = torch.full((64,), t, dtype=torch.long)
        fast = policy_target_logprob(x, tt, p)
        want = ref[:, t]
        assert torch.equal(torch.isinf(fast), torch.isinf(want))
        torch.testing.assert_close(fast[torch.isfinite(want)], want[torch.isfinite(want)].to(fast.dtype),
                                   rtol=0, atol=1e-5)


@settings(max_examples=60)
@given(st.integers(2, 40), st.integers(1, 50), st.floats(0.1, 1.0), st.floats(0.2, 3.0), st.integers(0, 2**31 - 1))
def test_distribution_normalized_on_support(v, k, top_p, temp, seed):
    """Property: exp(log q) sums to 1 over the support, support is non-empty, and q = 0 exactly
    off the support (false-alarm rate 0: this is an identity, not a statistical check)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(3, v, generator=g) * 4).double()
    p = Policy(temperature=temp, top_k=k, top_p=top_p if top_p < 1 else None)
    lp = policy_logprobs(x, p)
    mass = torch.logsumexp(lp, dim=-1)
    torch.testing.assert_close(mass, torch.zeros(3, dtype=mass.dtype), atol=1e-9, rtol=0)
    assert (torch.isfinite(lp).sum(-1) >= 1).all()
    assert (torch.isfinite(lp).sum(-1) <= v).all()


def test_float16_logits_are_scored_in_float32():
    x = (torch.randn(4, 50) * 10).half()
    out = policy_logprobs(x, Policy(top_k=10))
    assert out.dtype == torch.float32
