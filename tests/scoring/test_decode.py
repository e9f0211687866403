"""memclaim.decode: the read-outs an attack builds on (issue 26 item 4), against brute force.

A :class:`memclaim.models.base.SyntheticLM` gives its exact float64 logits after any context
(``next_logits``), so every read-out has an obviously-correct reference: log-softmax of those
logits, the argmax token by token, inversion sampling with the same uniforms. A transformers model
and memclaim's wrapper of it (``HFLanguageModel``, float32 unembedding) give the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from memclaim.decode import greedy_decode, next_token_logprobs, sample_decode, teacher_forced
from memclaim.errors import DomainError, InputError
from memclaim.models.base import SyntheticLM


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    return z - np.logaddexp.reduce(z)


@pytest.mark.parametrize("tie_levels", [0, 3])  # 3 levels: exact ties, which go to the lowest id
def test_read_outs_equal_brute_force_on_a_synthetic_model(tie_levels):
    lm = SyntheticLM(vocab_size=11, seed=4, tie_levels=tie_levels)
    prompts = np.array([[1, 2, 3], [4, 4, 4], [0, 10, 5]])
    lp = next_token_logprobs(lm, prompts)
    for row, ctx in zip(lp, prompts):
        np.testing.assert_allclose(row, _log_softmax(lm.next_logits(ctx)), rtol=0, atol=1e-12)
    out = greedy_decode(lm, prompts, n_tokens=5)
    for got, ctx in zip(out, prompts):
        seq = list(ctx)
        for t in got:
            z = lm.next_logits(seq)
            assert t == int(np.flatnonzero(z == z.max())[0])  # the argmax, lowest id among ties
            seq.append(int(t))
    # what greedy decoding produced is what teacher forcing flags as greedy
    assert teacher_forced(lm, prompts.tolist(), out).greedy_match.all()


def test_sampling_is_inversion_with_one_uniform_per_row_and_step():
    lm = SyntheticLM(vocab_size=7, seed=1)
    tokens, logp = sample_decode(
        lm, [[3], [5]], n_tokens=4, temperature=0.7, rng=np.random.default_rng(9)
    )
    u = np.random.default_rng(9)
    seqs = [[3], [5]]
    for t in range(4):
        draws = u.random(2)
        for i, seq in enumerate(seqs):
            p = np.exp(_log_softmax(lm.next_logits(seq) / 0.7))
            want = int(np.searchsorted(np.cumsum(p), draws[i], side="right"))
            assert tokens[i, t] == min(want, 6)
            assert logp[i, t] == pytest.approx(np.log(p[tokens[i, t]]), abs=1e-12)
            seq.append(int(tokens[i, t]))


def test_a_row_does_not_depend_on_its_batch():
    lm = SyntheticLM(vocab_size=9, seed=2)
    ctx = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [0, 1]])
    whole = next_token_logprobs(lm, ctx, batch_size=5)
    assert np.array_equal(whole, next_token_logprobs(lm, ctx, batch_size=2))
    assert np.array_equal(whole[3:4], next_token_logprobs(lm, ctx[3:4]))


def test_bad_inputs_are_refused():
    lm = SyntheticLM(vocab_size=8)
    with pytest.raises(InputError, match="outside"):
        next_token_logprobs(lm, [[1, 8]])
    with pytest.raises(InputError, match="at least one token"):
        next_token_logprobs(lm, np.zeros((2, 0), dtype=int))
    with pytest.raises(DomainError, match="n_tokens"):
        greedy_decode(lm, [[1]], n_tokens=0)
    with pytest.raises(DomainError, match="temperature"):
        sample_decode(lm, [[1]], n_tokens=1, temperature=0.0, rng=np.random.default_rng(0))
    with pytest.raises(InputError, match="2 prompts for 1 target rows"):
        teacher_forced(lm, [[1], [2]], [[3]])


def test_a_transformers_model_and_its_wrapper_agree_and_old_paths_work():
    """The HF path (the model's own logits, float64 log-softmax: the [MX] reproductions' numbers) and
    memclaim's wrapper of the same model (float32 unembedding) agree; memclaim.experiments.models
    still exports the helpers under their old names, as the same objects."""
    from memclaim import decode
    from memclaim.experiments import models as M
    from memclaim.models.hf import HFLanguageModel

    model = M.tiny_gpt2(M.TinyGPTSpec(vocab_size=16, n_positions=12, n_embd=16, n_head=2), seed=0)
    ctx = np.array([[15, 1, 2], [15, 3, 4]])
    hf = next_token_logprobs(model, ctx)
    wrapped = next_token_logprobs(HFLanguageModel(model), ctx)
    np.testing.assert_allclose(hf, wrapped, rtol=0, atol=1e-5)
    assert np.array_equal(
        greedy_decode(model, ctx, n_tokens=4),
        greedy_decode(HFLanguageModel(model), ctx, n_tokens=4),
    )
    with pytest.raises(DomainError, match="exceeds the model's 12 positions"):
        greedy_decode(model, ctx, n_tokens=11)
    for name in (
        "next_token_logprobs",
        "greedy_decode",
        "sample_decode",
        "teacher_forced",
        "TeacherForced",
        "torch_threads",
        "THREADS",
    ):
        assert getattr(M, name) is getattr(decode, name)
