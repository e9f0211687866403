"""The teacher-forcing engine: exact against brute force, invariant to batching and threads."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from memclaim.decoding import Policy, parse_policies, policy_logprobs
from memclaim.models.base import SyntheticLM
from memclaim.scoring.engine import TeacherForcingEngine

POLICIES = parse_policies(["full", "greedy", "top-k:3", "top-p:0.8", "top-k:4,temperature:0.7"])


def _brute(lm: SyntheticLM, prompt, suffix, policy: Policy):
    """Obviously-correct reference: one context at a time, float64, python sum of logs."""
    total, toks = 0.0, []
    ctx = list(prompt)
    for t in suffix:
        lp = policy_logprobs(torch.tensor(lm.next_logits(ctx))[None], policy)[0, t].item()
        toks.append(lp)
        total += lp
        ctx.append(t)
    return total, toks


def test_engine_equals_brute_force_on_synthetic_model():
    lm = SyntheticLM(vocab_size=7, seed=3)
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(0, 7, 4)) for _ in range(6)]
    suffixes = [list(rng.integers(0, 7, 5)) for _ in range(6)]
    # make one suffix the greedy continuation so greedy scores 0 somewhere
    g = list(prompts[0])
    for _ in range(5):
        g.append(int(np.argmax(lm.next_logits(g))))
    suffixes[0] = g[4:]
    out = TeacherForcingEngine(lm, POLICIES).score_batch(prompts, suffixes)
    for i in range(6):
        for j, p in enumerate(POLICIES):
            tot, toks = _brute(lm, prompts[i], suffixes[i], p)
            if math.isinf(tot):
                assert out.logq[i, j] == -math.inf
            else:
                assert out.logq[i, j] == pytest.approx(tot, abs=1e-10)
            np.testing.assert_allclose(out.token_logq[i, j], toks, atol=1e-10)
    assert out.logq[0, 1] == 0.0 and out.greedy_match[0]
    # per-token statistics against the explicit distribution
    ctx = list(prompts[2])
    for k, t in enumerate(suffixes[2]):
        z = lm.next_logits(ctx)
        logp = z - np.logaddexp.reduce(z)
        p = np.exp(logp)
        assert out.token_logprob[2, k] == pytest.approx(logp[t], abs=1e-12)
        assert out.token_mean[2, k] == pytest.approx(p @ logp, abs=1e-12)
        assert out.token_std[2, k] == pytest.approx(math.sqrt(p @ (logp - p @ logp) ** 2), abs=1e-10)
        assert out.token_rank[2, k] == 1 + int((z > z[t]).sum())
        ctx.append(t)


def _windows(vocab, n, lp, ls, seed=0):
    rng = np.random.default_rng(seed)
    return ([[0] + list(rng.integers(1, vocab, lp)) for _ in range(n)],
            [list(rng.integers(1, vocab, ls)) for _ in range(n)])


def _score(lm, prompts, suffixes, batch, **kw):
    eng = TeacherForcingEngine(lm, POLICIES, **kw)
    parts = [eng.score_batch(prompts[a:a + batch], suffixes[a:a + batch]) for a in range(0, len(prompts), batch)]
    return {f: np.concatenate([getattr(p, f) for p in parts]) for f in ("logq", "token_logq", "token_logprob",
                                                                       "token_mean", "token_std", "token_rank",
                                                                       "greedy_match", "min_margin")}


def test_bit_identical_across_batch_sizes_threads_and_chunks(random_model):
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 13, 20, 12)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        ref = _score(lm, prompts, suffixes, 13)
        runs = [_score(lm, prompts, suffixes, b) for b in (1, 4, 5)]
        torch.set_num_threads(1)
        runs += [_score(lm, prompts, suffixes, b) for b in (1, 13)]
    finally:
        torch.set_num_threads(threads)
    for r in runs:
        for k in ref:
            assert np.array_equal(ref[k], r[k]), k  # bit for bit


@pytest.mark.parametrize("lp,ls", [(2, 3), (4, 6), (20, 10), (1, 1)])
def test_bit_identical_across_threads_for_short_windows_and_suffixes(random_model, lp, ls):
    """Short windows and suffixes are where BLAS switches kernels by row and thread count."""
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 5, lp, ls, seed=lp)
    threads = torch.get_num_threads()
    try:
        runs = []
        for nt, b in ((1, 5), (2, 5), (2, 1), (1, 2), (3, 3)):
            torch.set_num_threads(nt)
            runs.append(_score(lm, prompts, suffixes, b))
    finally:
        torch.set_num_threads(threads)
    for r in runs[1:]:
        for k in r:
            assert np.array_equal(runs[0][k], r[k]), k


def test_gemm_row_count_assumption_holds_on_this_machine():
    """The engine relies on: for >= MIN_GEMM_ROWS rows, a row's matmul result does not depend on
    the row count or the thread count. If a BLAS update breaks this, this test says so."""
    from memclaim.scoring.engine import MIN_GEMM_ROWS

    import os

    import memclaim  # noqa: F401  (sets MKL's strict reproducibility mode before any matmul)

    assert os.environ.get("MKL_CBWR") == "AUTO,STRICT"
    g = torch.Generator().manual_seed(0)
    # a small layer and SmolLM2's MLP shapes (576 <-> 1536): on AVX-512 Xeons these differed
    # with the row count (from 16 rows on) until MKL's strict CNR mode was set
    for n_out, n_in in ((384, 96), (1536, 576), (576, 1536)):
        W = torch.randn(n_out, n_in, generator=g)
        X = torch.randn(160, n_in, generator=g)
        threads = torch.get_num_threads()
        try:
            torch.set_num_threads(1)
            ref = X @ W.T
            for nt in (1, 2, 3):
                torch.set_num_threads(nt)
                for m in list(range(MIN_GEMM_ROWS, 64, 5)) + [96, 144, 160]:
                    assert torch.equal(X[:m] @ W.T, ref[:m]), (n_out, n_in, nt, m)
        finally:
            torch.set_num_threads(threads)


@pytest.mark.parametrize("rows", [1, 3, 11, 12, 50])
def test_tiled_unembedding_is_bit_identical_to_one_matmul(rows):
    """The CPU unembedding runs over vocabulary tiles that divide V (memclaim.models.hf.unembed);
    every logit must be the bits of the single h @ W.T, at every row and thread count. (Under
    MKL's default mode a 1-row product at 3 threads differed between tiles on AVX-512 Xeons;
    memclaim sets the strict reproducibility mode on import.)"""
    import memclaim  # noqa: F401
    from memclaim.models.hf import unembed, vocab_tile

    assert vocab_tile(262144) == 2048 and vocab_tile(49152) == 2048 and vocab_tile(50257) is None
    g = torch.Generator().manual_seed(rows)
    w = torch.randn(64 * 24, 96, generator=g)
    h = torch.randn(rows, 96, generator=g)
    threads = torch.get_num_threads()
    try:
        for nt in (1, 2, 3):
            torch.set_num_threads(nt)
            ref = h @ w.T
            for tile in (64, 128, 256, 512):
                assert torch.equal(unembed(h, w, tile=tile), ref), (nt, tile)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="does not divide"):
        unembed(h, w, tile=100)


def test_bit_identical_with_vocabulary_chunking(random_model):
    """Gemma-sized vocabularies are unembedded in sub-chunks of a window's rows; the chunking is
    per window, so a small chunk gives the same bits for every batch size."""
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 7, 6, 9, seed=2)
    small = 4 * lm.vocab_size * 4  # 4 rows per chunk: 9 = 4 + 4 + 1
    ref = _score(lm, prompts, suffixes, 7, logit_chunk_bytes=small)
    for b in (1, 3):
        r = _score(lm, prompts, suffixes, b, logit_chunk_bytes=small)
        for k in ref:
            assert np.array_equal(ref[k], r[k]), k
    big = _score(lm, prompts, suffixes, 7)
    np.testing.assert_allclose(big["token_logprob"], ref["token_logprob"], atol=1e-5, rtol=0)


def test_padded_batch_equals_unpadded_one_at_a_time(random_model):
    lm = random_model.lm
    rng = np.random.default_rng(5)
    prompts = [[0] + list(rng.integers(1, lm.vocab_size, n)) for n in (3, 17, 9, 30, 1)]
    suffixes = [list(rng.integers(1, lm.vocab_size, 8)) for _ in prompts]
    eng = TeacherForcingEngine(lm, POLICIES)
    padded = eng.score_batch(prompts, suffixes)
    for i in range(len(prompts)):
        one = eng.score_batch([prompts[i]], [suffixes[i]])
        np.testing.assert_allclose(padded.token_logprob[i], one.token_logprob[0], atol=1e-4, rtol=0)
        fin = np.isfinite(one.token_logq[0])
        assert np.array_equal(fin, np.isfinite(padded.token_logq[i]))
        np.testing.assert_allclose(padded.token_logq[i][fin], one.token_logq[0][fin], atol=1e-4, rtol=0)


def test_unembedding_only_at_scored_positions(random_model):
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 4, 30, 5)
    eng = TeacherForcingEngine(lm, POLICIES)
    eng.score_batch(prompts, suffixes)
    assert eng.unembed_rows == 4 * 5  # not 4 * (31 + 4)
    assert eng.forward_tokens == 4 * (31 + 5 - 1)


def test_hf_cache_continuation_matches_full_forward(random_model):
    lm = random_model.lm
    ids = torch.tensor([[0, 5, 9, 22, 41, 7, 3]])
    full, _ = lm.forward_hidden(ids)
    h1, past = lm.forward_hidden(ids[:, :4], use_cache=True)
    past2 = lm.select_cache(past, torch.tensor([0, 0]))  # expand to two beams
    h2, _ = lm.forward_hidden(ids[:, 4:].repeat(2, 1), past=past2, use_cache=True)
    torch.testing.assert_close(h2[0], full[0, 4:], atol=1e-5, rtol=0)
    torch.testing.assert_close(h2[1], full[0, 4:], atol=1e-5, rtol=0)
    # the source cache is untouched by select/continue
    h3, _ = lm.forward_hidden(ids[:, 4:], past=past, use_cache=True)
    torch.testing.assert_close(h3[0], full[0, 4:], atol=1e-5, rtol=0)
