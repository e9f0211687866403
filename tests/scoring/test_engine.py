"""The teacher-forcing engine: exact against brute force, invariant to batching and threads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from memclaim.decoding import Policy, parse_policies, policy_logprobs
from memclaim.models.base import SyntheticLM
from memclaim.scoring.engine import TeacherForcingEngine
from rounding import assert_within_rounding

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
        assert out.token_std[2, k] == pytest.approx(
            math.sqrt(p @ (logp - p @ logp) ** 2), abs=1e-10
        )
        assert out.token_rank[2, k] == 1 + int((z > z[t]).sum())
        ctx.append(t)


def _windows(vocab, n, lp, ls, seed=0):
    rng = np.random.default_rng(seed)
    return (
        [[0] + list(rng.integers(1, vocab, lp)) for _ in range(n)],
        [list(rng.integers(1, vocab, ls)) for _ in range(n)],
    )


def _score(lm, prompts, suffixes, batch, **kw):
    eng = TeacherForcingEngine(lm, POLICIES, **kw)
    parts = [
        eng.score_batch(prompts[a : a + batch], suffixes[a : a + batch])
        for a in range(0, len(prompts), batch)
    ]
    return {
        f: np.concatenate([getattr(p, f) for p in parts])
        for f in (
            "logq",
            "token_logq",
            "token_logprob",
            "token_mean",
            "token_std",
            "token_rank",
            "greedy_match",
            "min_margin",
        )
    }


FLOAT_FIELDS = ("logq", "token_logq", "token_logprob", "token_mean", "token_std", "min_margin")


@pytest.fixture(scope="module")
def random_model64(random_model_dir):
    """The same random GPT-2 in float64: the exact value two float32 thread counts round differently."""
    from memclaim.models import load_model

    return load_model(str(random_model_dir), load_weights=True, dtype="float64")


def _across_threads(runs: dict, exact: dict) -> None:
    """Runs at different thread counts: floats within float32 rounding of each other (see
    tests/rounding.py), zero-probability tokens, ranks and (away from near-ties) greedy flags equal."""
    from memclaim.scoring.engine import NEAR_TIE_MARGIN

    (nt0, ref), *others = sorted(runs.items())
    for nt, r in others:
        for k in FLOAT_FIELDS:
            assert_within_rounding(r[k], ref[k], exact[k], what=f"{k} at {nt} vs {nt0} threads")
        assert np.array_equal(r["token_rank"], ref["token_rank"])
        clear = ref["min_margin"] > NEAR_TIE_MARGIN
        assert np.array_equal(r["greedy_match"][clear], ref["greedy_match"][clear])


def test_bit_identical_across_batch_sizes_and_chunks_at_each_thread_count(
    random_model, random_model64
):
    """What the engine guarantees bit for bit (issue 24): at a fixed thread count, a window's scores
    do not depend on the batch size (fixed per-window shapes for every reduction; matmuls of >= 12
    rows, MIN_GEMM_ROWS). Across thread counts MKL reorders sums (bit-identical only in its strict
    mode on Intel AVX2/AVX-512 branches): there the scores agree within float32 rounding."""
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 13, 20, 12)
    threads = torch.get_num_threads()
    by_threads = {}
    try:
        for nt, batches in ((2, (13, 1, 4, 5)), (1, (13, 1, 4)), (3, (13, 5))):
            torch.set_num_threads(nt)
            ref, *runs = [_score(lm, prompts, suffixes, b) for b in batches]
            for r in runs:
                for k in ref:
                    assert np.array_equal(ref[k], r[k]), (nt, k)  # bit for bit
            by_threads[nt] = ref
    finally:
        torch.set_num_threads(threads)
    _across_threads(by_threads, _score(random_model64.lm, prompts, suffixes, 13))


@pytest.mark.parametrize("lp,ls", [(2, 3), (4, 6), (20, 10), (1, 1)])
def test_short_windows_and_suffixes_bit_identical_across_batches_within_rounding_across_threads(
    random_model, random_model64, lp, ls
):
    """Short windows and suffixes are where BLAS switches kernels by row and thread count: padded to
    MIN_GEMM_ROWS rows, a window's scores are bit-identical for every batch size at one thread
    count, and within float32 rounding across thread counts (see the test above)."""
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 5, lp, ls, seed=lp)
    threads = torch.get_num_threads()
    runs: dict[int, list] = {}
    try:
        for nt, b in ((1, 5), (2, 5), (2, 1), (1, 2), (3, 3), (3, 1)):
            torch.set_num_threads(nt)
            runs.setdefault(nt, []).append(_score(lm, prompts, suffixes, b))
    finally:
        torch.set_num_threads(threads)
    for nt, (first, *rest) in runs.items():
        for r in rest:
            for k in r:
                assert np.array_equal(first[k], r[k]), (nt, k)
    _across_threads(
        {nt: rs[0] for nt, rs in runs.items()}, _score(random_model64.lm, prompts, suffixes, 5)
    )


def test_gemm_row_count_assumption_holds_on_this_machine():
    """The engine relies on: at a fixed thread count, for >= MIN_GEMM_ROWS rows a row's matmul result
    does not depend on the call's row count. (Across thread counts it need not: see above.) If a
    BLAS update breaks this, this test says so. Measured under memclaim's MKL mode (MKL_CBWR =
    AUTO,STRICT, set on import unless the user set MKL_CBWR) and also with MKL_CBWR unset (CNR off)
    on an AMD EPYC; on AVX-512 Xeons it held only once MKL's strict mode was set."""
    import memclaim  # noqa: F401  (sets MKL's strict reproducibility mode before any matmul)
    from memclaim.scoring.engine import MIN_GEMM_ROWS

    g = torch.Generator().manual_seed(0)
    # a small layer and SmolLM2's MLP shapes (576 <-> 1536)
    for n_out, n_in in ((384, 96), (1536, 576), (576, 1536)):
        W = torch.randn(n_out, n_in, generator=g)
        X = torch.randn(160, n_in, generator=g)
        threads = torch.get_num_threads()
        try:
            for nt in (1, 2, 3):
                torch.set_num_threads(nt)
                ref = X @ W.T
                for m in list(range(MIN_GEMM_ROWS, 64, 5)) + [96, 144, 160]:
                    assert torch.equal(X[:m] @ W.T, ref[:m]), (n_out, n_in, nt, m)
        finally:
            torch.set_num_threads(threads)


def test_memclaim_sets_mkl_strict_mode_unless_the_user_chose_one():
    """import memclaim sets MKL_CBWR=AUTO,STRICT before any matmul, and keeps a value the user set."""
    import subprocess
    import sys

    code = "import os, memclaim; print(os.environ.get('MKL_CBWR'))"
    env = {k: v for k, v in __import__("os").environ.items() if k != "MKL_CBWR"}
    run = lambda e: subprocess.run(
        [sys.executable, "-c", code],
        env=e,
        capture_output=True,
        text=True,  # noqa: E731
        check=True,
    ).stdout.strip()
    assert run(env) == "AUTO,STRICT"
    assert run(dict(env, MKL_CBWR="AVX2")) == "AVX2"


@pytest.mark.parametrize("rows", [1, 3, 11, 12, 50])
def test_tiled_unembedding_equals_one_matmul_within_float32_rounding(rows):
    """The CPU unembedding runs over vocabulary tiles that divide V (memclaim.models.hf.unembed).
    Guaranteed bit for bit: at a fixed thread count, a row's tiled logits do not depend on the other
    rows of the call (the engine issues >= MIN_GEMM_ROWS rows). Against the single h @ W.T the tiles
    may sum in another order (on an AMD EPYC, 3 rows at 3 threads differ in the last bits), so there
    every logit is within the float32 worst case of a length-D dot product, 2 D u sum_i |h_i W_vi|
    (Higham, Accuracy and Stability, §3.1): both orders are within D u of the exact value."""
    import memclaim  # noqa: F401
    from memclaim.models.hf import unembed, vocab_tile
    from memclaim.scoring.engine import MIN_GEMM_ROWS

    assert vocab_tile(262144) == 2048 and vocab_tile(49152) == 2048 and vocab_tile(50257) is None
    g = torch.Generator().manual_seed(rows)
    D = 96
    w = torch.randn(64 * 24, D, generator=g)
    h = torch.randn(max(rows, MIN_GEMM_ROWS) + 7, D, generator=g)
    bound = 2 * D * 2.0**-24 * (h[:rows].abs() @ w.abs().T)
    threads = torch.get_num_threads()
    try:
        for nt in (1, 2, 3):
            torch.set_num_threads(nt)
            ref = h[:rows] @ w.T
            for tile in (64, 128, 256, 512):
                z = unembed(h[:rows], w, tile=tile)
                assert torch.all((z - ref).abs() <= bound), (nt, tile)
                if (
                    rows >= MIN_GEMM_ROWS
                ):  # the engine's calls: each row's bits whatever the row count
                    assert torch.equal(unembed(h, w, tile=tile)[:rows], z), (nt, tile)
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
        np.testing.assert_allclose(
            padded.token_logq[i][fin], one.token_logq[0][fin], atol=1e-4, rtol=0
        )


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
