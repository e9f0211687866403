"""Near-verbatim lower bound, union over settings, deterministic recovery, sampling budget.

References used here, all independent of the code under test except the policy kernel
(``memclaim.decoding.policy_logprobs``, tested with the decoding module):

* brute force: every length-ℓ continuation of a SyntheticLM (vocab <= 8, ℓ <= 5) enumerated
  with ``next_logits``, its exact log-probability and its rapidfuzz edit distance to s, so the
  exact ε-ball mass q(B_ε(s) | p) ([EM] Eq. 2) is known;
* a slow, obviously-correct beam: Python lists, one context at a time, no KV cache, pruning by
  trying every completion with rapidfuzz;
* mpmath at 60 digits for the sampling budget n_c ([EM] §6).

All properties are exact (no statistical guarantee is tested here), so there is no false-alarm
rate; hypothesis runs derandomized for reproducible CI.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein
from scipy.special import logsumexp

from memclaim.audits.recovery import deterministic_recovery, sampling_budget
from memclaim.decoding import Policy, policy_logprobs
from memclaim.errors import DomainError, InputError, PolicyError, ProcedureMismatchError
from memclaim.jsonutil import dumps
from memclaim.models.base import SyntheticLM
from memclaim.scoring.nearverbatim import (
    VERBATIM_TOLERANCE_PER_TOKEN,
    NearVerbatimResult,
    default_verbatim_tolerance,
    estimate_beam_cost,
    near_verbatim_lower_bound,
    union_near_verbatim,
)

POLICIES = [
    "full",
    "top-k:2",
    "top-k:3",
    "top-p:0.8",
    "top-p:0.5",
    "temperature:0.7",
    "temperature:1.6",
    "top-k:3,temperature:0.5",
    "top-k:4,top-p:0.9",
    "greedy",
]
NEG = -math.inf


# --------------------------------------------------------------------------- references
def policy_row(lm: SyntheticLM, ctx, policy: Policy) -> np.ndarray:
    z = torch.tensor(lm.next_logits(list(ctx)), dtype=torch.float64)[None, :]
    return policy_logprobs(z, policy)[0].numpy()


def enumerate_leaves(lm, prompt, ell, policy) -> dict[tuple, float]:
    """{y: log q(y | p)} for every length-ℓ y with q > 0, by walking the whole tree."""
    out: dict[tuple, float] = {}

    def walk(prefix, lp):
        if len(prefix) == ell:
            out[prefix] = lp
            return
        row = policy_row(lm, list(prompt) + list(prefix), policy)
        for v in range(lm.vocab_size):
            if row[v] > NEG:
                walk(prefix + (v,), lp + row[v])

    walk((), 0.0)
    return out


def exact_ball(leaves, suffix, eps) -> float:
    lps = [lp for y, lp in leaves.items() if Levenshtein.distance(list(y), list(suffix)) <= eps]
    return float(logsumexp(lps)) if lps else NEG


def verbatim(lm, prompt, suffix, policy) -> float:
    lp = 0.0
    for t, tok in enumerate(suffix):
        lp = lp + policy_row(lm, list(prompt) + list(suffix[:t]), policy)[tok]
    return float(lp)


def reference_beam(lm, prompt, suffix, policy, eps, width, final="all"):
    """Slow beam with the documented semantics: returns ({y: log q}, exhaustive)."""
    ell, V = len(suffix), lm.vocab_size
    s = list(suffix)

    @functools.cache
    def reachable(prefix):
        if eps is None:
            return True
        return any(
            Levenshtein.distance(list(prefix) + list(z), s) <= eps
            for z in itertools.product(range(V), repeat=ell - len(prefix))
        )

    beams = [((), 0.0)]
    shadow = ((), 0.0)  # the target prefix and its log q; None once q = 0
    exhaustive = True
    for t in range(ell):
        children = []
        for prefix, lp in beams:
            row = policy_row(lm, list(prompt) + list(prefix), policy)
            children += [
                (prefix + (v,), lp + row[v])
                for v in range(V)
                if row[v] > NEG and reachable(prefix + (v,))
            ]
        shadow_children = []
        if shadow is not None and shadow[0] not in dict(beams):
            row = policy_row(lm, list(prompt) + list(shadow[0]), policy)
            shadow_children = [
                (shadow[0] + (v,), shadow[1] + row[v])
                for v in range(V)
                if row[v] > NEG and reachable(shadow[0] + (v,))
            ]
        if shadow is not None:
            row = policy_row(lm, list(prompt) + list(shadow[0]), policy)
            nxt = shadow[1] + row[s[t]]
            shadow = (shadow[0] + (s[t],), nxt) if nxt > NEG else None
        children.sort(key=lambda c: -c[1])
        if t == ell - 1:
            if final == "all":
                return dict(children + shadow_children), exhaustive
            if len(children) > width:
                exhaustive = False
            return dict(children[:width]), exhaustive
        if len(children) > width:
            exhaustive = False
        beams = children[:width]
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- strategies
@st.composite
def windows(draw, max_vocab=6, max_ell=4, policy=None):
    """A synthetic window; ``policy`` fixes the decoding policy (else one of POLICIES is drawn)."""
    V = draw(st.integers(2, max_vocab))
    ell = draw(st.integers(1, max_ell))
    seed = draw(st.integers(0, 10_000))
    prompt = draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=3))
    policy = Policy.parse(policy if policy is not None else draw(st.sampled_from(POLICIES)))
    lm = SyntheticLM(vocab_size=V, seed=seed, scale=draw(st.sampled_from([1.0, 2.0, 4.0])))
    if draw(st.booleans()):  # the greedy continuation: a high-probability target
        suffix, ctx = [], list(prompt)
        for _ in range(ell):
            suffix.append(int(np.argmax(lm.next_logits(ctx))))
            ctx.append(suffix[-1])
    else:
        suffix = draw(st.lists(st.integers(0, V - 1), min_size=ell, max_size=ell))
    return lm, tuple(prompt), tuple(suffix), policy


# --------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("policy_spec", POLICIES)
@settings(derandomize=True, max_examples=4, deadline=None)
@given(data=st.data())
def test_bound_against_brute_force_ball_mass(policy_spec, data):
    """Exact. Every policy of POLICIES gets 4 windows, 40 examples in all (a drawn policy leaves
    some policies out of CI's fixed examples)."""
    w = data.draw(windows(policy=policy_spec), label="window")
    lm, prompt, suffix, policy = w
    ell, V = len(suffix), lm.vocab_size
    leaves = enumerate_leaves(lm, prompt, ell, policy)
    v_ref = verbatim(lm, prompt, suffix, policy)
    full_width = V ** (ell - 1)  # every prefix of length ℓ-1 fits: the beam cannot drop one
    for eps in range(ell + 1):
        exact = exact_ball(leaves, suffix, eps)
        prev = None
        for width in sorted({1, 2, 3, full_width}):
            before = lm.calls
            r = near_verbatim_lower_bound(
                lm, prompt, suffix, policy=policy, epsilon=eps, beam=width
            )
            assert r.forward_rows == lm.calls - before  # cost accounting is exact
            assert (
                r.forward_rows
                <= estimate_beam_cost(
                    prompt_len=len(prompt), suffix_len=ell, beam=width, vocab_size=V
                ).forward_rows_max
            )
            assert (
                r.log_verbatim == pytest.approx(v_ref, abs=1e-12) or r.log_verbatim == v_ref == NEG
            )
            assert r.log_bound >= r.log_verbatim  # exact, not up to rounding
            assert r.log_bound <= exact + 1e-12
            if eps >= ell:
                assert (
                    r.whole_space and r.log_bound == 0.0 and exact == pytest.approx(0.0, abs=1e-12)
                )
                continue
            if eps == 0:
                assert r.log_bound == r.log_verbatim
            if width == full_width:
                assert r.exhaustive
            if r.exhaustive:
                assert r.log_bound == pytest.approx(exact, abs=1e-12) or r.log_bound == exact == NEG
                if prev is not None and prev.exhaustive:
                    assert r.log_bound >= prev.log_bound - 1e-12  # monotone in width
            # every summed sequence is distinct, inside the ball, in the support, exactly scored
            seqs = r.continuations.as_dict()
            assert len(seqs) == r.n_continuations
            for y, (lp, d) in seqs.items():
                assert d == Levenshtein.distance(list(y), list(suffix)) <= eps
                assert lp > NEG and lp == pytest.approx(leaves[y], abs=1e-12)
            if policy.greedy:
                g = max(leaves, key=leaves.get)  # the single sequence of probability 1
                assert r.log_bound == (
                    0.0 if Levenshtein.distance(list(g), list(suffix)) <= eps else NEG
                )
            prev = r


@settings(derandomize=True, max_examples=40, deadline=None)
@given(w=windows())
def test_exhaustive_bound_is_monotone_in_epsilon(w):
    lm, prompt, suffix, policy = w
    ell = len(suffix)
    bounds = [
        near_verbatim_lower_bound(
            lm, prompt, suffix, policy=policy, epsilon=e, beam=lm.vocab_size ** (ell - 1)
        )
        for e in range(ell + 1)
    ]
    assert all(b.exhaustive for b in bounds)
    for a, b in zip(bounds, bounds[1:]):
        assert b.log_bound >= a.log_bound - 1e-12


@pytest.mark.parametrize("policy", ["full", "top-p:0.7", "top-k:5,temperature:0.8"])
def test_largest_synthetic_case_vocab8_len5(policy):
    """The issue's largest size: V = 8, ℓ = 5 (32,768 continuations), ε = 2."""
    lm = SyntheticLM(vocab_size=8, seed=11, scale=1.5)
    prompt, suffix = (3, 1, 4), (1, 5, 2, 6, 5)
    pol = Policy.parse(policy)
    leaves = enumerate_leaves(lm, prompt, 5, pol)
    exact = exact_ball(leaves, suffix, 2)
    full = near_verbatim_lower_bound(lm, prompt, suffix, policy=pol, epsilon=2, beam=8**4)
    assert full.exhaustive and full.log_bound == pytest.approx(exact, abs=1e-12)
    small = near_verbatim_lower_bound(lm, prompt, suffix, policy=pol, epsilon=2, beam=4)
    assert full.log_verbatim <= small.log_bound <= exact + 1e-12
    assert full.forward_rows > small.forward_rows


# --------------------------------------------------------------------------- fast path vs references
@settings(derandomize=True, max_examples=50, deadline=None)
@given(w=windows(max_vocab=5, max_ell=4), width=st.integers(1, 6), eps=st.integers(0, 3))
def test_batched_cached_beam_equals_slow_reference_beam(w, width, eps):
    lm, prompt, suffix, policy = w
    eps = min(eps, len(suffix) - 1)
    r = near_verbatim_lower_bound(lm, prompt, suffix, policy=policy, epsilon=eps, beam=width)
    ref, ref_exh = reference_beam(lm, prompt, suffix, policy, eps, width)
    got = {y: lp for y, (lp, _) in r.continuations.as_dict().items()}
    assert got.keys() == ref.keys()
    for y in ref:
        assert got[y] == pytest.approx(ref[y], abs=1e-12)
    assert r.exhaustive == ref_exh


@settings(derandomize=True, max_examples=40, deadline=None)
@given(w=windows(), width=st.integers(1, 4), eps=st.integers(0, 3))
def test_kv_cache_path_equals_recomputing_from_scratch(w, width, eps):
    """Exact. eps < len(suffix) (eps >= len(suffix) returns the whole space without decoding:
    nothing to compare) and narrow beams, so that pruning and re-ordering of cached rows happen."""
    lm, prompt, suffix, policy = w
    eps = min(eps, len(suffix) - 1)
    kw = dict(policy=policy, epsilon=eps, beam=width)
    a = near_verbatim_lower_bound(lm, prompt, suffix, use_cache=True, **kw)
    b = near_verbatim_lower_bound(lm, prompt, suffix, use_cache=False, **kw)
    assert a.log_bound == b.log_bound and a.exhaustive == b.exhaustive
    assert a.forward_calls == b.forward_calls
    if not a.whole_space:
        assert a.continuations.as_dict() == b.continuations.as_dict()
        assert a.forward_rows <= b.forward_rows
        est = estimate_beam_cost(
            prompt_len=len(prompt),
            suffix_len=len(suffix),
            beam=width,
            vocab_size=lm.vocab_size,
            use_cache=False,
        )
        assert b.forward_rows <= est.forward_rows_max


# --------------------------------------------------------------------------- policies and -inf
def test_target_outside_topk_support_is_pruned_not_summed():
    lm = SyntheticLM(vocab_size=6, seed=3)
    prompt = (1, 2)
    pol = Policy.parse("top-k:2")
    row = policy_row(lm, prompt, pol)
    outside = int(np.nonzero(row == NEG)[0][0])
    ctx = list(prompt) + [int(np.argmax(row))]
    for _ in range(2):
        ctx.append(int(np.argmax(lm.next_logits(ctx))))
    suffix = (outside,) + tuple(ctx[-2:])  # one substitution from a sequence the policy can emit
    leaves = enumerate_leaves(lm, prompt, 3, pol)
    r = near_verbatim_lower_bound(lm, prompt, suffix, policy=pol, epsilon=1, beam=36)
    assert r.log_verbatim == NEG  # the policy cannot emit s ...
    assert r.exhaustive and r.log_bound == pytest.approx(exact_ball(leaves, suffix, 1), abs=1e-12)
    assert r.log_bound > NEG  # ... but it can emit a sequence one edit away
    assert np.all(np.isfinite(r.continuations.logprob))
    assert r.continuations.as_dict().keys() <= leaves.keys()


def test_greedy_ball_mass_is_zero_or_one():
    lm = SyntheticLM(vocab_size=5, seed=8)
    prompt = (0,)
    ctx, g = [0], []
    for _ in range(4):
        g.append(int(np.argmax(lm.next_logits(ctx))))
        ctx.append(g[-1])
    near = tuple(g[:3]) + ((g[3] + 1) % 5,)  # one substitution away from the greedy output
    r_in = near_verbatim_lower_bound(lm, prompt, near, policy="greedy", epsilon=1, beam=3)
    r_out = near_verbatim_lower_bound(lm, prompt, near, policy="greedy", epsilon=0, beam=3)
    assert r_in.log_bound == 0.0 and r_in.log_verbatim == NEG and r_in.n_continuations == 1
    assert r_out.log_bound == NEG and r_out.n_continuations == 0
    assert r_in.exhaustive and "greedy" in r_in.note.lower()


def test_verbatim_logprob_from_the_engine_replaces_the_target_term():
    lm = SyntheticLM(vocab_size=5, seed=2)
    prompt, suffix = (1,), (2, 3, 4)
    base = near_verbatim_lower_bound(lm, prompt, suffix, policy="full", epsilon=1, beam=25)
    given_lp = base.log_verbatim - 1e-9  # e.g. a full-sequence pass rounding differently
    r = near_verbatim_lower_bound(
        lm, prompt, suffix, policy="full", epsilon=1, beam=25, verbatim_logprob=given_lp
    )
    assert r.log_verbatim == given_lp and r.log_bound >= given_lp
    assert r.continuations.as_dict()[suffix][0] == given_lp
    assert r.n_continuations == base.n_continuations
    # under the full softmax a target cannot leave the support by rounding: -inf is a wrong value
    with pytest.raises(ProcedureMismatchError, match="does not match"):
        near_verbatim_lower_bound(
            lm, prompt, suffix, policy="full", epsilon=1, beam=25, verbatim_logprob=NEG
        )


def test_wrong_verbatim_logprob_is_refused_not_summed():
    """Issue 12 A3: a caller's verbatim_logprob above the true value used to lift the 'certified
    lower bound' above the exact ball mass (here: exhaustive beam, so the true mass is known).
    A mismatch beyond the stated tolerance is refused; within it, the value is used."""
    lm = SyntheticLM(vocab_size=5, seed=2)
    prompt, suffix = (1,), (2, 3, 4)
    exact = near_verbatim_lower_bound(lm, prompt, suffix, policy="full", epsilon=1, beam=25)
    assert exact.exhaustive
    wrong = math.log(0.5)  # far above q(s | p) (about 1e-3 here)
    assert wrong > exact.log_verbatim + 1
    with pytest.raises(ProcedureMismatchError, match="does not match") as e:
        near_verbatim_lower_bound(
            lm, prompt, suffix, policy="full", epsilon=1, beam=25, verbatim_logprob=wrong
        )
    assert repr(wrong) in str(e.value) and "tolerance" in str(e.value) and "fix:" in str(e.value)
    with pytest.raises(ProcedureMismatchError):  # too low is refused as well
        near_verbatim_lower_bound(
            lm,
            prompt,
            suffix,
            policy="full",
            epsilon=1,
            beam=25,
            verbatim_logprob=exact.log_verbatim - 0.5,
        )
    with pytest.raises(ProcedureMismatchError):  # and in the whole-space shortcut (eps >= len)
        near_verbatim_lower_bound(
            lm, prompt, suffix, policy="full", epsilon=3, verbatim_logprob=wrong
        )
    tol = default_verbatim_tolerance(lm, len(suffix))
    assert tol == pytest.approx(3 * VERBATIM_TOLERANCE_PER_TOKEN["float32"])
    ok = near_verbatim_lower_bound(
        lm,
        prompt,
        suffix,
        policy="full",
        epsilon=1,
        beam=25,
        verbatim_logprob=exact.log_verbatim + 0.5 * tol,
    )
    assert ok.log_bound <= exact.log_bound + tol
    # an explicit tolerance widens (or narrows) the check
    loose = near_verbatim_lower_bound(
        lm,
        prompt,
        suffix,
        policy="full",
        epsilon=1,
        beam=25,
        verbatim_logprob=exact.log_verbatim - 0.5,
        verbatim_tolerance=1.0,
    )
    assert loose.log_verbatim == exact.log_verbatim - 0.5
    for bad in (-1.0, math.inf, math.nan, True):
        with pytest.raises(DomainError, match="verbatim_tolerance"):
            near_verbatim_lower_bound(
                lm,
                prompt,
                suffix,
                policy="full",
                epsilon=1,
                verbatim_logprob=-1.0,
                verbatim_tolerance=bad,
            )


def test_support_flip_of_the_target_is_taken_conservatively():
    """Greedy / top-k: a near-tie can put the target inside the support in one pass and outside
    in the other ([EM] App. A.2); the target's term is then 0 probability, never the caller's."""
    lm = SyntheticLM(vocab_size=5, seed=2)
    prompt = (0,)
    ctx, g = [0], []
    for _ in range(3):
        g.append(int(np.argmax(lm.next_logits(ctx))))
        ctx.append(g[-1])
    off = tuple(g[:2]) + ((g[2] + 1) % 5,)  # not the greedy continuation: own log q = -inf
    r = near_verbatim_lower_bound(
        lm, prompt, off, policy="greedy", epsilon=0, beam=3, verbatim_logprob=0.0
    )
    assert r.log_bound == NEG and r.log_verbatim == NEG and "support" in r.note
    r2 = near_verbatim_lower_bound(
        lm, prompt, tuple(g), policy="greedy", epsilon=0, beam=3, verbatim_logprob=NEG
    )
    assert (
        r2.log_bound == NEG and r2.log_verbatim == NEG
    )  # the caller's 0 probability: conservative


# --------------------------------------------------------------------------- edge cases / bad input
def test_epsilon_at_least_suffix_length_is_the_whole_space():
    lm = SyntheticLM(vocab_size=4, seed=0)
    r = near_verbatim_lower_bound(lm, (1,), (2, 3), policy="top-k:2", epsilon=2, beam=4)
    assert r.whole_space and r.log_bound == 0.0 and r.n_continuations is None
    assert "exactly 1" in r.note and "whole output space" in r.note
    assert r.log_verbatim == pytest.approx(
        verbatim(lm, (1,), (2, 3), Policy.parse("top-k:2")), abs=1e-12
    )
    before = lm.calls
    own = verbatim(lm, (1,), (2, 3), Policy.parse("full"))
    r2 = near_verbatim_lower_bound(
        lm, (1,), (2, 3), policy="full", epsilon=7, beam=4, verbatim_logprob=own
    )
    # one teacher-forced pass checks the caller's value; no search is run
    assert (
        lm.calls == before + 2
        and r2.forward_rows == 2
        and r2.log_bound == 0.0
        and r2.log_verbatim == own
    )
    assert '"log_bound": 0.0' in dumps(r2.to_dict())


@pytest.mark.parametrize("eps", [-1, -0.5, 1.5, float("nan"), float("inf"), True, "2"])
def test_bad_epsilon(eps):
    lm = SyntheticLM(vocab_size=4)
    with pytest.raises(DomainError, match="epsilon") as e:
        near_verbatim_lower_bound(lm, (1,), (2, 3, 1), policy="full", epsilon=eps, beam=4)
    assert repr(eps) in str(e.value) and "fix:" in str(e.value)


@pytest.mark.parametrize("beam", [0, -3, 2.5, None, True])
def test_bad_beam(beam):
    lm = SyntheticLM(vocab_size=4)
    with pytest.raises(DomainError, match="beam") as e:
        near_verbatim_lower_bound(lm, (1,), (2, 3, 1), policy="full", epsilon=1, beam=beam)
    assert repr(beam) in str(e.value)
    with pytest.raises(DomainError, match="beam"):
        deterministic_recovery(lm, (1,), (2, 3, 1), policy="full", epsilon=1, beam=beam)


def test_bad_ids_policy_and_logprob():
    lm = SyntheticLM(vocab_size=4)
    with pytest.raises(InputError, match="prompt_ids is empty"):
        near_verbatim_lower_bound(lm, [], (1, 2), policy="full", epsilon=1)
    with pytest.raises(InputError, match="suffix_ids is empty"):
        near_verbatim_lower_bound(lm, (1,), [], policy="full", epsilon=1)
    with pytest.raises(InputError, match=r"outside \[0, 4\)"):
        near_verbatim_lower_bound(lm, (1,), (2, 9), policy="full", epsilon=1)
    with pytest.raises(InputError, match="token ids"):
        near_verbatim_lower_bound(lm, "hello", (2, 1), policy="full", epsilon=1)
    with pytest.raises(PolicyError):
        near_verbatim_lower_bound(lm, (1,), (2, 1), policy="top-k:0", epsilon=1)
    with pytest.raises(DomainError, match="verbatim_logprob"):
        near_verbatim_lower_bound(lm, (1,), (2, 1), policy="full", epsilon=1, verbatim_logprob=0.3)


def test_accepts_tensors_and_batch_of_one():
    lm = SyntheticLM(vocab_size=4, seed=5)
    a = near_verbatim_lower_bound(
        lm, torch.tensor([[1, 2]]), np.array([3, 0, 1]), policy="full", epsilon=1, beam=16
    )
    b = near_verbatim_lower_bound(lm, (1, 2), (3, 0, 1), policy=Policy(), epsilon=1.0, beam=16.0)
    assert a.log_bound == b.log_bound and a.prompt_ids == (1, 2)


def test_result_is_frozen_and_serializes():
    lm = SyntheticLM(vocab_size=4, seed=5)
    r = near_verbatim_lower_bound(lm, (1, 2), (3, 0, 1), policy="full", epsilon=1, beam=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.log_bound = 0.0
    d = r.to_dict()
    assert (
        "continuations" not in d
        and d["n_by_distance"][0] == 1
        and sum(d["n_by_distance"]) == r.n_continuations
    )
    assert d["log10_bound"] == pytest.approx(r.log_bound / math.log(10))
    assert "lower bound" in d["note"].lower() and "conservative for members" in d["note"]
    assert "controls are scored by the same procedure" in d["note"]
    dumps(d)
    assert r.log_mass_at(1) == r.log_bound and r.log_mass_at(0) == r.log_verbatim
    with pytest.raises(DomainError, match="exceeds"):
        r.log_mass_at(2)


def test_stops_when_every_branch_dies():
    lm = SyntheticLM(vocab_size=6, seed=4)
    pol = Policy.parse("top-k:1")  # a single token per step
    ctx, g = [2], []
    for _ in range(4):
        g.append(int(np.argmax(lm.next_logits(ctx))))
        ctx.append(g[-1])
    far = tuple((x + 1) % 6 for x in g)  # every position differs from the only emittable sequence
    r = near_verbatim_lower_bound(lm, (2,), far, policy=pol, epsilon=1, beam=4)
    assert r.log_bound == NEG and r.log_verbatim == NEG and r.n_continuations == 0
    # the first greedy token is one substitution away (still live), the second kills the branch
    assert r.stopped_at == 2 and r.forward_calls == 2 and r.forward_rows == 2


# --------------------------------------------------------------------------- union over settings
@settings(derandomize=True, max_examples=25, deadline=None)
@given(w=windows(max_vocab=5, max_ell=4))
def test_union_is_monotone_and_dominates_every_run(w):
    lm, prompt, suffix, policy = w
    ell, V = len(suffix), lm.vocab_size
    leaves = enumerate_leaves(lm, prompt, ell, policy)
    runs = [
        near_verbatim_lower_bound(lm, prompt, suffix, policy=policy, epsilon=e, beam=b)
        for e in range(ell + 1)
        for b in (1, 2, V ** (ell - 1))
    ]
    u = union_near_verbatim(runs)
    assert u.epsilons == tuple(range(ell + 1))
    assert all(b2 >= b1 for b1, b2 in zip(u.log_bounds, u.log_bounds[1:]))
    for r in runs:
        assert u.log_bound_at(min(r.epsilon, ell)) >= r.log_bound - 1e-12
    for e in u.epsilons:
        exact = exact_ball(leaves, suffix, e)
        assert u.log_bounds[e] <= exact + 1e-12
        assert u.exact[e]  # the full-width run at each ε is exhaustive
        assert u.log_bounds[e] == pytest.approx(exact, abs=1e-12) or u.log_bounds[e] == exact == NEG
    assert u.forward_rows == sum(r.forward_rows for r in runs)
    dumps(u.to_dict())


def test_union_of_pruned_runs_only_claims_lower_bounds():
    lm = SyntheticLM(vocab_size=6, seed=21)
    prompt, suffix = (1, 2), (0, 3, 4, 5)
    runs = [
        near_verbatim_lower_bound(lm, prompt, suffix, policy="full", epsilon=e, beam=2)
        for e in (1, 2)
    ]
    assert not any(r.exhaustive for r in runs)
    u = union_near_verbatim(runs)
    assert u.exact == (False, False, False)
    assert u.log_bounds[0] == max(r.log_verbatim for r in runs)
    assert u.log_bounds[2] >= max(r.log_bound for r in runs) - 1e-12
    assert u.log_bounds[1] >= runs[0].log_bound - 1e-12


def test_union_refuses_mixed_windows_or_missing_sequences():
    lm = SyntheticLM(vocab_size=4, seed=1)
    a = near_verbatim_lower_bound(lm, (1,), (2, 3, 0), policy="full", epsilon=1, beam=4)
    b = near_verbatim_lower_bound(lm, (1,), (2, 3, 0), policy="top-k:2", epsilon=1, beam=4)
    c = near_verbatim_lower_bound(lm, (1,), (2, 3, 1), policy="full", epsilon=1, beam=4)
    d = near_verbatim_lower_bound(
        lm, (1,), (2, 3, 0), policy="full", epsilon=2, beam=4, keep_sequences=False
    )
    for other in (b, c):
        with pytest.raises(ProcedureMismatchError):
            union_near_verbatim([a, other])
    with pytest.raises(InputError, match="keep_sequences"):
        union_near_verbatim([a, d])
    with pytest.raises(InputError):
        union_near_verbatim([])
    whole = near_verbatim_lower_bound(lm, (1,), (2, 3, 0), policy="full", epsilon=5, beam=4)
    u = union_near_verbatim([a, whole])
    assert u.epsilons == (0, 1, 2, 3) and u.log_bounds[3] == 0.0 and u.exact[3] and not u.exact[2]
    assert isinstance(a, NearVerbatimResult) and u.log_bounds[1] == pytest.approx(
        a.log_bound, abs=1e-12
    )


# --------------------------------------------------------------------------- deterministic recovery
@settings(derandomize=True, max_examples=30, deadline=None)
@given(w=windows(max_vocab=5, max_ell=4), width=st.integers(1, 12), eps=st.integers(0, 3))
def test_recovery_pool_matches_reference_unpruned_beam(w, width, eps):
    lm, prompt, suffix, policy = w
    before = lm.calls
    rec = deterministic_recovery(lm, prompt, suffix, policy=policy, epsilon=eps, beam=width)
    assert rec.forward_rows == lm.calls - before
    pool, exh = reference_beam(lm, prompt, suffix, policy, None, width, final="top")
    assert rec.pool_size == len(pool) and rec.exhaustive == exh
    within = {y: lp for y, lp in pool.items() if Levenshtein.distance(list(y), list(suffix)) <= eps}
    got = {r.tokens: r for r in rec.recovered}
    assert got.keys() == within.keys()
    for y, r in got.items():
        assert r.log_prob == pytest.approx(within[y], abs=1e-12)
        assert r.distance == Levenshtein.distance(list(y), list(suffix))
        assert r.verbatim == (y == suffix)
        assert (r.n_samples, r.log10_n_samples) == sampling_budget(r.log_prob)
        assert r.sampling_cheaper == (r.n_samples <= rec.cost_in_samples)
    assert rec.recovered_verbatim == (suffix in pool)
    assert [r.log_prob for r in rec.recovered] == sorted(
        (r.log_prob for r in rec.recovered), reverse=True
    )
    masses = [r.log_prob for r in rec.recovered]
    assert rec.log_recovered_mass == pytest.approx(
        logsumexp(masses) if masses else NEG, abs=1e-12
    ) or rec.log_recovered_mass == NEG == (logsumexp(masses) if masses else NEG)
    assert (
        rec.log_verbatim == pytest.approx(verbatim(lm, prompt, suffix, policy), abs=1e-12)
        or rec.log_verbatim == NEG
    )
    dumps(rec.to_dict())


def test_recovery_with_full_width_is_the_global_top_of_the_support():
    lm = SyntheticLM(vocab_size=4, seed=9)
    prompt, suffix = (0, 1), (2, 2, 3)
    pol = Policy.parse("top-p:0.9")
    leaves = enumerate_leaves(lm, prompt, 3, pol)
    rec = deterministic_recovery(lm, prompt, suffix, policy=pol, epsilon=1, beam=16)
    top = sorted(leaves, key=leaves.get, reverse=True)[:16]
    expect = {y for y in top if Levenshtein.distance(list(y), list(suffix)) <= 1}
    assert rec.exhaustive == (len(leaves) <= 16)
    assert {r.tokens for r in rec.recovered} == expect
    assert rec.cost_in_samples == pytest.approx((rec.forward_rows - rec.target_rows) / (2 + 3 - 1))
    rec2 = deterministic_recovery(
        lm, prompt, suffix, policy=pol, epsilon=1, beam=16, cost_in_samples=20
    )
    assert rec2.cost_in_samples == 20 and rec2.cost_basis == "given"
    with pytest.raises(DomainError):
        deterministic_recovery(
            lm, prompt, suffix, policy=pol, epsilon=1, beam=16, cost_in_samples=0
        )
    with pytest.raises(DomainError):
        deterministic_recovery(lm, prompt, suffix, policy=pol, epsilon=1, beam=16, confidence=1.0)


# --------------------------------------------------------------------------- sampling budget
def _mp_budget(p: float, c: float) -> int:
    mpmath.mp.dps = 60
    return int(mpmath.ceil(mpmath.log(1 - mpmath.mpf(c)) / mpmath.log(1 - mpmath.mpf(p))))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(log_p=st.floats(min_value=-60.0, max_value=-1e-6), c=st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_sampling_budget_matches_mpmath(log_p, c):
    n, l10 = sampling_budget(log_p, confidence=c)
    ref = _mp_budget(math.exp(log_p), c)
    if ref < 1e12:
        assert n == ref  # the exact integer ceiling
    else:
        # beyond ~1e12 the ceiling is decided by [EM] Eq. 10 evaluated in float64
        # (memclaim.claims.budget): a few units in 1e15
        assert abs(n - ref) <= max(1.0, ref * 1e-14)
    assert l10 == pytest.approx(math.log10(ref), rel=1e-12, abs=1e-9)


def test_sampling_budget_definition_and_extremes():
    # [EM] §6: 1 - (1 - p)^n >= 0.95 first holds at n = 29 for p = 0.1
    assert sampling_budget(math.log(0.1)) == (29.0, math.log10(29))
    assert 1 - 0.9**29 >= 0.95 > 1 - 0.9**28
    assert sampling_budget(0.0) == (1.0, 0.0)
    assert sampling_budget(math.log(0.99)) == (1.0, 0.0)
    assert sampling_budget(NEG) == (math.inf, math.inf)
    # census scale ([EM] §5: thresholds near 1e-27): n_95 ≈ 3 / p, finite in log10
    n, l10 = sampling_budget(-27 * math.log(10))
    assert l10 == pytest.approx(27 + math.log10(-math.log(0.05)), abs=1e-12)
    n, l10 = sampling_budget(-5000.0)
    assert n == math.inf and l10 == pytest.approx(math.log10(-math.log(0.05)) + 5000 / math.log(10))
    with pytest.raises(DomainError):
        sampling_budget(0.1)
    with pytest.raises(DomainError):
        sampling_budget(-1.0, confidence=0.0)


# --------------------------------------------------------------------------- cost estimate
def test_cost_estimate_counts_and_describe():
    est = estimate_beam_cost(prompt_len=50, suffix_len=50, beam=16, vocab_size=49152)
    assert (
        est.forward_rows_max == 50 + 49 * 17
        and est.forward_calls == 50
        and est.peak_batch_rows == 17
    )
    small = estimate_beam_cost(prompt_len=2, suffix_len=3, beam=100, vocab_size=3)
    assert small.forward_rows_max == 2 + 3 + 9  # min(B + 1, V^t) rows at t = 1, 2
    nc = estimate_beam_cost(prompt_len=2, suffix_len=3, beam=100, vocab_size=3, use_cache=False)
    assert nc.forward_rows_max == 2 + 3 * 3 + 9 * 4
    text = est.describe(rows_per_second=1000.0)
    assert "beam 16" in text and "s per window" in text
    with pytest.raises(DomainError):
        estimate_beam_cost(prompt_len=2, suffix_len=3, beam=0, vocab_size=3)
    with pytest.raises(DomainError):
        est.describe(rows_per_second=0)
    # the estimate is an upper bound that the unpruned recovery beam attains when the target stays in
    lm = SyntheticLM(vocab_size=3, seed=0)
    rec = deterministic_recovery(lm, (1, 2), (0, 0, 0), policy="full", epsilon=0, beam=100)
    assert rec.forward_rows <= small.forward_rows_max


def test_union_keeps_the_larger_of_duplicate_log_probabilities():
    import dataclasses

    lm = SyntheticLM(vocab_size=4, seed=6)
    a = near_verbatim_lower_bound(lm, (1,), (2, 3, 0), policy="full", epsilon=1, beam=16)
    cs = a.continuations
    lower = dataclasses.replace(cs, logprob=cs.logprob - 0.5)
    b = dataclasses.replace(a, continuations=lower, log_bound=a.log_bound - 0.5)
    for order in ([a, b], [b, a]):
        u = union_near_verbatim(order)
        assert u.n_continuations == a.n_continuations
        assert u.log_bounds[1] == pytest.approx(a.log_bound, abs=1e-12)


# --------------------------------------------------------------------------- a real HF transformer
def test_hf_model_kv_cache_equals_recomputing_and_teacher_forcing(random_model):
    """A (random) GPT-2 behind the HF adapter: the DynamicCache path through ``select_cache``
    gives the same continuations as recomputing every step, up to float32 rounding."""
    lm = random_model.lm
    rng = np.random.default_rng(0)
    prompt = tuple(int(x) for x in rng.integers(0, lm.vocab_size, 6))
    ctx = list(
        prompt
    )  # the greedy continuation with its third token replaced: in the ball at ε = 2
    for _ in range(5):
        h, _ = lm.forward_hidden(torch.tensor([ctx]))
        ctx.append(int(lm.logits(h[0, -1:]).argmax()))
    suffix = tuple(ctx[len(prompt) :])
    suffix = suffix[:2] + ((suffix[2] + 1) % lm.vocab_size,) + suffix[3:]
    for policy in ("full", "top-k:20"):
        a = near_verbatim_lower_bound(lm, prompt, suffix, policy=policy, epsilon=2, beam=5)
        b = near_verbatim_lower_bound(
            lm, prompt, suffix, policy=policy, epsilon=2, beam=5, use_cache=False
        )
        da, db = a.continuations.as_dict(), b.continuations.as_dict()
        assert da.keys() == db.keys() and len(da) > 1
        assert max(abs(da[k][0] - db[k][0]) for k in da) < 1e-4
        assert a.log_bound >= a.log_verbatim and not a.exhaustive
        # the incremental target path agrees with one teacher-forced pass over prompt + suffix
        ids = torch.tensor([list(prompt) + list(suffix[:-1])])
        h, _ = lm.forward_hidden(ids)
        lp = policy_logprobs(lm.logits(h[0, len(prompt) - 1 :]), Policy.parse(policy))
        tf = float(lp.gather(1, torch.tensor(suffix)[:, None]).double().sum())
        assert a.log_verbatim == pytest.approx(tf, abs=1e-4) or a.log_verbatim == tf == NEG
        rec = deterministic_recovery(lm, prompt, suffix, policy=policy, epsilon=2, beam=7)
        assert rec.pool_size == 7 and rec.forward_calls == len(suffix)
