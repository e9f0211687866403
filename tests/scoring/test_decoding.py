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
    assert parse_policies(["greedy", "greedy", "top-k:40"]) == (
        Policy(greedy=True),
        Policy(top_k=40),
    )


def test_parse_policies_takes_one_policy_as_its_signature_says():
    """``parse_policies(Policy)`` (a single Policy, as the type hint allows) was iterated and
    failed with a TypeError; mypy found it once decoding.py was checked (issue 26 item 6)."""
    p = Policy.parse("top-k:40")
    assert parse_policies(p) == (p,)
    assert parse_policies("greedy") == (Policy(greedy=True),)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "top-q:3",
        "top-k:0",
        "top-k:2.5",
        "temperature:-1",
        "temperature:0",
        "top-p:0",
        "top-p:1.5",
        "greedy,top-k:3",
        "top-k:3,top-k:4",
        "temperature:nan",
    ],
)
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
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    s = x.clone()
    if p.temperature != 1.0:
        s = TemperatureLogitsWarper(p.temperature)(None, s)
    if p.top_k is not None:
        s = TopKLogitsWarper(p.top_k)(None, s)
    if p.top_p is not None:
        s = TopPLogitsWarper(p.top_p)(None, s)
    return torch.log_softmax(s, dim=-1)


POLICIES = [
    "full",
    "temperature:0.7",
    "top-k:1",
    "top-k:5",
    "top-k:40",
    "top-p:0.9",
    "top-p:0.5",
    "top-k:40,temperature:0.7",
    "top-k:5,top-p:0.8,temperature:1.3",
]


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
        torch.testing.assert_close(
            fast[torch.isfinite(want)], want[torch.isfinite(want)].to(fast.dtype), rtol=0, atol=1e-5
        )


@settings(max_examples=60)
@given(
    st.integers(2, 40),
    st.integers(1, 50),
    st.floats(0.1, 1.0),
    st.floats(0.2, 3.0),
    st.integers(0, 2**31 - 1),
)
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


# ------------------------------------------------------------------ issue 25 item 3: exact values
from memclaim.decoding import MIN_TEMPERATURE, scale_logits  # noqa: E402
from memclaim.errors import NumericsError  # noqa: E402


@pytest.mark.parametrize(
    "spec, recorded",
    [
        ("top-p:0.9999999", "top-p:0.9999999"),
        ("temperature:0.123456789", "temperature:0.123456789"),
        ("temperature:1e-45", "temperature:1e-45"),
        ("top-p:0.95,temperature:1.3", "temperature:1.3,top-p:0.95"),
    ],
)
def test_a_policy_records_the_value_it_applies(spec, recorded):
    """'top-p:0.9999999' was recorded as 'top-p:1' (the %g form) and applied as 0.9999999."""
    p = Policy.parse(spec)
    assert p.spec == recorded and Policy.parse(p.spec) == p
    assert p.to_dict()["spec"] == recorded


@settings(max_examples=300)
@given(
    st.floats(min_value=1e-12, max_value=1.0, exclude_min=True),
    st.floats(min_value=MIN_TEMPERATURE, max_value=1e30),
)
def test_every_policy_value_survives_its_spec(top_p, temperature):
    """Property (an identity: no false alarms): the spec reads back as the same policy, values
    included, and the values that the %g form already wrote exactly keep that form (so the
    procedure keys of every store written so far are unchanged)."""
    p = Policy.parse(f"top-p:{top_p!r},temperature:{temperature!r}")
    q = Policy.parse(p.spec)
    assert (
        q == p
        and q.temperature == temperature
        and (q.top_p == top_p or (top_p == 1.0 and q.top_p is None))
    )
    for x in (top_p, temperature):
        if float(f"{x:g}") == x:
            assert f"{x:g}" in p.spec or x == 1.0


def test_existing_specs_and_procedure_keys_are_unchanged():
    """The specs (hence procedure keys) of policies whose %g form was exact stay as they were."""
    for spec in (
        "full",
        "greedy",
        "top-k:40",
        "top-p:0.9",
        "temperature:0.7",
        "temperature:1e-05",
        "temperature:2",
        "temperature:0.7,top-k:40",
        "temperature:1.3,top-p:0.95",
        "top-k:5,top-p:0.8",
    ):
        assert Policy.parse(spec).spec == spec


def test_a_temperature_below_the_float64_range_is_refused():
    with pytest.raises(PolicyError, match="is below 4e-270"):
        Policy.parse("temperature:1e-300")
    assert Policy.parse(f"temperature:{MIN_TEMPERATURE!r}").temperature == MIN_TEMPERATURE


def _exact(x: torch.Tensor, T: float) -> torch.Tensor:
    """The obviously-correct reference: log softmax(x / T) in float64 from the row maximum."""
    y = x.double()
    y = (y - y.amax(dim=-1, keepdim=True)) / T
    return torch.log_softmax(y, dim=-1)


@pytest.mark.parametrize("T", [1e-45, 1e-39, 1e-20, 4e-270, 1e39])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_tiny_or_huge_temperature_gives_finite_log_probabilities(T, dtype):
    """temperature:1e-45 stored NaN (x / T overflowed float32 to inf, and inf - inf); now every
    log-probability is finite, equal to the float64 reference, on every path."""
    from memclaim.scoring.engine import StatSet, batched_rows, score_rows

    g = torch.Generator().manual_seed(3)
    x = (torch.randn(6, 50, generator=g) * 4).to(dtype)
    x[0, :2] = x[0].max() + 1  # a tie for the maximum
    ref = _exact(x, T)
    rtol = (
        1e-12 if dtype == torch.float64 else 2e-6
    )  # where float32 holds x / T it computes it (the warper)
    for spec in (
        f"temperature:{T!r}",
        f"temperature:{T!r},top-k:3",
        f"temperature:{T!r},top-p:0.9",
    ):
        p = Policy.parse(spec)
        lp = policy_logprobs(x, p).double()
        assert not torch.isnan(lp).any() and not torch.isposinf(lp).any()
        if p.top_k is None and p.top_p is None:
            assert torch.isfinite(lp).all()
            torch.testing.assert_close(lp, ref, rtol=rtol, atol=1e-12)
        t = torch.arange(6) * 7
        fast = policy_target_logprob(x, t, p).double()
        torch.testing.assert_close(fast, lp.gather(1, t.view(-1, 1)).view(-1), rtol=1e-12, atol=0)
        for rows in (score_rows, batched_rows):
            pol = rows(x, t, [p], StatSet.of("policy_logq"))["pol"][0].double()
            torch.testing.assert_close(pol, fast, rtol=1e-12, atol=0)


@settings(max_examples=100)
@given(st.floats(1e-4, 100.0), st.integers(0, 2**31 - 1))
def test_scale_logits_is_the_warper_from_one_sixteenth_up(T, seed):
    """Property (an identity): from temperature 1/16 up the division is transformers' own, bit
    for bit (stored scores keep their bits); below, it is the float64 division of the logits
    shifted by their row maximum."""
    from transformers.generation.logits_process import TemperatureLogitsWarper

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 30, generator=g) * 5
    got = scale_logits(x, T)
    if T >= 1 / 16:
        assert torch.equal(got, TemperatureLogitsWarper(T)(None, x.clone()))
    else:
        xd = x.double()
        assert got.dtype == torch.float64 and torch.equal(
            got, (xd - xd.amax(dim=-1, keepdim=True)) / T
        )


def test_a_gap_past_float64_is_refused():
    x = torch.tensor([[0.0, -1e300]], dtype=torch.float64)
    with pytest.raises(NumericsError, match="exceeds the largest float64"):
        scale_logits(x, 1e-10)


def test_top_p_near_one_is_applied_as_recorded():
    """top-p:0.9999999 drops the tokens whose cumulative mass from the bottom is <= 1e-7,
    exactly as transformers' TopPLogitsWarper(0.9999999), under the spec that says so."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(32, 200, generator=g) * 6
    p = Policy.parse("top-p:0.9999999")
    ref = _hf_reference(x, p)
    ours = policy_logprobs(x, p)
    assert torch.equal(torch.isinf(ref), torch.isinf(ours)) and torch.isinf(ours).any()
    assert p.spec == "top-p:0.9999999" and p.top_p == 0.9999999


def test_a_run_under_extreme_policies_stores_what_it_records(tmp_path):
    """End to end on the committed random GPT-2: temperature:1e-45 stored NaN for every window
    and top-p:0.9999999 was stored under 'top-p:1'. Now the columns carry the values given and
    every score is finite or -inf (an exact zero of a truncating policy)."""

    from _paths import DATA
    from memclaim.api import score

    root = DATA
    run = score(
        str(root / "fixtures" / "store_v1" / "model"),
        str(root / "kjv_verses.jsonl"),
        prefix_tokens=8,
        suffix_tokens=8,
        policies=["temperature:1e-45", "top-p:0.9999999", "temperature:1e-45,top-k:3"],
        out=str(tmp_path / "s"),
    )
    assert run.policies == ("temperature:1e-45", "top-p:0.9999999", "temperature:1e-45,top-k:3")
    for spec in run.policies:
        v = run.scores(spec).logq
        assert not np.isnan(v).any() and not np.isposinf(v).any(), spec
    assert np.isfinite(run.scores("temperature:1e-45").logq).all()
    assert np.isfinite(
        run.scores("top-p:0.9999999").logq
    ).all()  # 280 tokens: nothing below 1e-7 here
