"""The CPU schedule's statistics in cache-sized blocks of rows spanning windows (issue 30) have
the bits of the window-by-window statistics it computed before: checked against that schedule,
kept here as the slow obviously-correct reference, on every CPU the suite runs on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import memclaim  # noqa: F401  (MKL strict mode before the first matmul)
from memclaim.decoding import parse_policies, policy_target_logprob
from memclaim.models.base import SyntheticLM
from memclaim.scoring import engine as E
from memclaim.scoring.engine import StatSet, TeacherForcingEngine, stat_blocks

POLICIES = parse_policies(
    [
        "full",
        "greedy",
        "top-k:1",
        "top-k:3",
        "top-k:40",
        "top-p:0.8",
        "temperature:0.7",
        "top-k:40,temperature:0.7",
        "top-p:0.95,temperature:1.3",
        "top-k:5,top-p:0.9",
    ]
)
FIELDS = (
    "logq",
    "token_logq",
    "greedy_match",
    "min_margin",
    "token_logprob",
    "token_mean",
    "token_std",
    "token_rank",
)


def reference_score_rows(logits, targets, policies, stats=E.ALL_STATS, *, groups=None):
    """score_rows as it was before blocks (one call per window; its own topk(x, 2), each top-K
    policy its own topk(x, K + 1)): the reference the blocked statistics must equal bit for bit."""
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    t = targets.view(-1, 1)
    out = {}
    logp = torch.log_softmax(x, dim=-1) if E._needs_logp(policies, stats) else None
    if "token_logprob" in stats:
        out["token_lp"] = logp.gather(1, t).view(-1)
    if "token_moments" in stats:
        p = logp.exp()
        mean = torch.linalg.vecdot(p, logp)
        var = torch.linalg.vecdot(p, (logp - mean[:, None]).square_())
        out["mean"], out["std"] = mean, var.clamp_min(0).sqrt()
    if "rank" in stats:
        out["rank"] = (x > x.gather(1, t)).sum(-1, dtype=torch.int32).long() + 1
    greedy = None
    if E._needs_top2(policies, stats):
        if x.shape[-1] > 1:
            top2, top2i = torch.topk(x, 2, dim=-1)
            margin = top2[:, 0] - top2[:, 1]
            amax = top2i[:, 0].clone()
            tied = (margin == 0).nonzero().view(-1)
            if tied.numel():
                amax[tied] = x[tied].argmax(dim=-1)
        else:
            margin = torch.full_like(x[:, 0], math.inf)
            amax = torch.zeros_like(targets)
        greedy = amax == targets
        out["margin"], out["greedy"] = margin, greedy
    if "policy_logq" in stats:
        zero = torch.zeros((), dtype=x.dtype)
        ninf = torch.full((), -math.inf, dtype=x.dtype)
        out["pol"] = torch.stack(
            [
                torch.where(greedy, zero, ninf)
                if pi.greedy
                else policy_target_logprob(x, targets, pi, log_softmax_t1=logp)
                for pi in policies
            ],
            dim=0,
        )
    return out


def per_window_blocks(c0, c1, sub, block):
    return [(a, min(c1, a + sub)) for a in range(c0, c1, sub)]


def _score(lm, prompts, suffixes, batch, *, reference=False, monkeypatch=None, **kw):
    if reference:
        monkeypatch.setattr(E, "stat_blocks", per_window_blocks)
        monkeypatch.setattr(E, "score_rows", reference_score_rows)
    try:
        eng = TeacherForcingEngine(lm, POLICIES, **kw)
        parts = [
            eng.score_batch(prompts[a : a + batch], suffixes[a : a + batch])
            for a in range(0, len(prompts), batch)
        ]
    finally:
        if reference:
            monkeypatch.undo()
    return {
        f: None if getattr(parts[0], f) is None else np.concatenate([getattr(p, f) for p in parts])
        for f in FIELDS
    }


def _assert_same(ref, got, what):
    for f in FIELDS:
        if ref[f] is None:
            assert got[f] is None, (what, f)
        else:
            assert ref[f].dtype == got[f].dtype and ref[f].shape == got[f].shape, (what, f)
            assert np.array_equal(ref[f], got[f], equal_nan=True), (what, f)


def _windows(vocab, n, lp, ls, seed):
    rng = np.random.default_rng(seed)
    return (
        [[0] + [int(v) for v in rng.integers(1, vocab, lp)] for _ in range(n)],
        [[int(v) for v in rng.integers(1, vocab, ls)] for _ in range(n)],
    )


def _tiny_llama():
    from engine_fixture import tiny_llama

    return tiny_llama()


@pytest.fixture(scope="module")
def tiny():
    return _tiny_llama()


CASES = [  # (windows, prompt tokens, suffix tokens, logit_chunk_rows or None)
    (6, 20, 12, None),
    (5, 2, 3, None),
    (4, 9, 1, None),
    (3, 6, 9, 4),
    (7, 5, 13, 5),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("model", ["tiny-llama", "synthetic-ties", "random-gpt2"])
def test_blocked_statistics_equal_window_by_window(model, threads, random_model, monkeypatch):
    """Blocks of a few rows spanning windows (and sub-chunks, single rows, padded calls) against
    the window-by-window schedule at the same batch size: every field bit for bit, at 1-3
    threads, census and every statistic, the engine's blocks and blocks of three rows.
    tiny-llama's unembedding has duplicated rows (exact top-k boundary and argmax ties), the
    synthetic model quantized logits (many ties: the tie corrections' logaddexp), GPT-2's
    vocabulary is not a multiple of the SIMD width (vector loops end mid-row)."""
    lm = {
        "tiny-llama": _tiny_llama,
        "synthetic-ties": lambda: SyntheticLM(vocab_size=16, seed=11, tie_levels=4),
        "random-gpt2": lambda: random_model.lm,
    }[model]()
    V = lm.vocab_size
    cases = [
        (*_windows(V, n, lp, ls, seed=i), None if chunk is None else chunk * V * 4)
        for i, (n, lp, ls, chunk) in enumerate(CASES)
    ]
    if (
        model != "random-gpt2"
    ):  # and the engine fixture's windows (greedy continuations, boundary ties)
        from engine_fixture import FIXTURE, unpack

        cases += [c[1:] for c in unpack(dict(np.load(FIXTURE)), model.split("-")[0])]
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for i, (prompts, suffixes, chunk) in enumerate(cases):
            n = len(prompts)
            kw = {} if chunk is None else {"logit_chunk_bytes": chunk}
            for batch in (n, 1, 2):
                # the reference at the same batch size: this compares the statistics' blocks, not
                # the matmuls' row-count invariance (test_engine.py; at 3 threads on 2 cores
                # MKL's strict mode does not give it on every CPU, issue 24)
                ref = _score(
                    lm, prompts, suffixes, batch, reference=True, monkeypatch=monkeypatch, **kw
                )
                for stats in ("all", "census"):
                    eng_kw = dict(kw, stats=stats)
                    got = _score(lm, prompts, suffixes, batch, **eng_kw)
                    # a few rows per block, so that blocks span windows and sub-chunks
                    small = TeacherForcingEngine(lm, POLICIES, **eng_kw)
                    small.stat_block_bytes = 3 * V * 4
                    parts = [
                        small.score_batch(prompts[a : a + batch], suffixes[a : a + batch])
                        for a in range(0, n, batch)
                    ]
                    got_small = {
                        f: None
                        if getattr(parts[0], f) is None
                        else np.concatenate([getattr(p, f) for p in parts])
                        for f in FIELDS
                    }
                    want = (
                        ref
                        if stats == "all"
                        else {f: ref[f] if f in StatSet.of(stats).fields else None for f in FIELDS}
                    )
                    _assert_same(want, got, (model, threads, i, batch, stats))
                    _assert_same(want, got_small, (model, threads, i, batch, stats, "small blocks"))
    finally:
        torch.set_num_threads(prev)


@given(
    c0=st.integers(0, 50), n=st.integers(1, 120), sub=st.integers(1, 40), block=st.integers(2, 30)
)
def test_stat_blocks_cover_every_row_once_and_keep_single_rows_alone(c0, n, sub, block):
    c1 = c0 + n
    blocks = stat_blocks(c0, c1, sub, block)
    assert blocks[0][0] == c0 and blocks[-1][1] == c1
    assert all(a < b for a, b in blocks) and all(
        b == a2 for (_, b), (a2, _) in zip(blocks, blocks[1:])
    )
    singles = {a for a in range(c0, c1, sub) if min(c1, a + sub) - a == 1}  # one-row sub-chunks
    for a, b in blocks:
        if b - a == 1:
            assert a in singles  # a one-row block is a one-row sub-chunk, nothing else
        else:
            assert not any(a <= s < b for s in singles)  # never merged into a block
            assert b - a < 2 * block


def test_one_topk_serves_the_top2_and_the_top_k_policy(tiny):
    """With greedy + top-k:40 (temperature 1) the CPU statistics run one topk per block, not two
    (the top-2 are the first two of topk(x, 41): exact maxima), with the reference's bits."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    lm = tiny
    pols = parse_policies(["greedy", "top-k:40"])
    prompts, suffixes = _windows(lm.vocab_size, 3, 8, 6, seed=3)
    h, _ = lm.forward_hidden(torch.tensor([p + s[:-1] for p, s in zip(prompts, suffixes)]))
    z = lm.logits(h[:, 8:].reshape(-1, h.shape[-1]))
    t = torch.tensor(suffixes).view(-1)
    with Count() as new:
        got = E.score_rows(z, t, pols, E.CENSUS_STATS)
    with Count() as old:
        want = reference_score_rows(z, t, pols, E.CENSUS_STATS)
    assert new.ops.count("aten.topk.default") == 1 and old.ops.count("aten.topk.default") == 2
    for k in want:
        assert torch.equal(got[k], want[k]), k


def test_the_logits_buffer_is_reused_between_calls(random_model):
    """The CPU schedule writes every unembedding call into one buffer (no fresh [rows, V]
    tensor per call: page faults), with the bits of fresh tensors."""
    lm = random_model.lm
    seen = []
    orig = type(lm).logits

    class Spy(type(lm)):
        def logits(self, hidden, *, out=None):
            seen.append(None if out is None else out.untyped_storage().data_ptr())
            return orig(self, hidden, out=out)

    spy = Spy.__new__(Spy)
    spy.__dict__.update(lm.__dict__)
    prompts, suffixes = _windows(lm.vocab_size, 6, 10, 7, seed=5)
    chunk = 14 * lm.vocab_size * 4  # two windows per unembedding call: three calls per batch
    eng = TeacherForcingEngine(spy, POLICIES, logit_chunk_bytes=chunk)
    a = eng.score_batch(prompts, suffixes)
    b = eng.score_batch(prompts, suffixes)
    assert len(seen) == 6 and seen[0] is None and len(set(seen[1:])) == 1 and seen[1] is not None
    fresh = TeacherForcingEngine(lm, POLICIES, logit_chunk_bytes=chunk)
    fresh._unembed = lambda rows: lm.logits(rows)  # a new tensor every call
    c = fresh.score_batch(prompts, suffixes)
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(c, f), equal_nan=True), f
        assert np.array_equal(getattr(b, f), getattr(c, f), equal_nan=True), f


@pytest.mark.real
@pytest.mark.parametrize("threads", [1, 2])
def test_smollm2_blocked_statistics_equal_window_by_window(smollm2, threads, monkeypatch):
    """A 49,152-token vocabulary (a one-row sum is split between threads above 32,768 elements),
    windows of the Genesis excerpt, single-row suffixes and sub-chunks with a one-row rest."""
    from engine_fixture import smollm2_windows

    lm = smollm2.lm
    prompts, suffixes = smollm2_windows()
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for ss, chunk in (
            (suffixes, None),
            ([s[:1] for s in suffixes], None),
            ([s[:16] for s in suffixes[:3]], 5),
        ):
            pp = prompts[: len(ss)]
            kw = {} if chunk is None else {"logit_chunk_bytes": chunk * lm.vocab_size * 4}
            for batch in (len(pp), 2):
                ref = _score(lm, pp, ss, batch, reference=True, monkeypatch=monkeypatch, **kw)
                _assert_same(
                    ref, _score(lm, pp, ss, batch, **kw), (threads, len(ss[0]), chunk, batch)
                )
    finally:
        torch.set_num_threads(prev)
