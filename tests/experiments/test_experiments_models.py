"""Shared helpers of the training-based reproductions (:mod:`memclaim.experiments.models`): the
token-id vocabulary, the Markov chain sampler and its exact max-probability path, whole-document
packing, the tiny GPT-2, and the batched read-outs, each against a slow obviously-correct
reference (brute-force enumeration, one-at-a-time loops, HF ``generate``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from memclaim.errors import DomainError, InputError
from memclaim.experiments import models as M
from memclaim.train.corpus import MarkovZipf
from memclaim.train.trainer import TrainConfig


def _chain(n: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(n) * 0.7, size=n)
    u = rng.dirichlet(np.ones(n))
    return P, u


@pytest.fixture(scope="module")
def tiny():
    """A tiny GPT-2 over 12 tokens (sot = 11), trained a few steps on chain text."""
    P, u = _chain(10, seed=1)
    docs = M.sample_chain(P, u, np.random.default_rng(0), n=64, length=15)
    spec = M.TinyGPTSpec(vocab_size=12, n_positions=24, n_embd=16, n_head=2)
    model = M.tiny_gpt2(spec, seed=3, sot=11)
    M.train_tiny(
        model,
        docs,
        TrainConfig(steps=12, batch_size=8, seq_len=16, lr=1e-2, warmup_steps=2, seed=0),
        sot=11,
    )
    return model


# ------------------------------------------------------------------------------ layout
def test_token_layout_ids_and_errors():
    lay = M.TokenLayout(n_natural=10, n_reserved=3)
    assert (lay.reserved(0), lay.reserved(2), lay.sot, lay.size) == (10, 12, 13, 14)
    assert lay.is_natural([0, 9, 10, 13]).tolist() == [True, True, False, False]
    with pytest.raises(InputError, match="reserved index 3"):
        lay.reserved(3)
    with pytest.raises(ValueError):
        M.TokenLayout(n_natural=1)


# ------------------------------------------------------------------------------ chain
def test_chain_arrays_are_the_generator_rows():
    gen = MarkovZipf(n_words=20, seed=4)
    P, u = M.chain_arrays(gen)
    assert P.shape == (20, 20) and np.allclose(P.sum(axis=1), 1) and np.isclose(u.sum(), 1)
    assert not P.flags.writeable


def test_sample_chain_transition_frequencies():
    """Empirical first-token and transition frequencies against the chain by a chi-square test
    per row (false alarm <= 1e-3 per test at the fixed seed; deterministic in CI)."""
    P, u = _chain(5, seed=2)
    x = M.sample_chain(P, u, np.random.default_rng(11), n=4000, length=6)
    assert x.shape == (4000, 6) and x.dtype == np.int64
    first = np.bincount(x[:, 0], minlength=5)
    assert stats.chisquare(first, u * first.sum()).pvalue > 1e-3
    pairs = np.stack([x[:, :-1].ravel(), x[:, 1:].ravel()], axis=1)
    for i in range(5):
        nxt = np.bincount(pairs[pairs[:, 0] == i, 1], minlength=5)
        keep = P[i] * nxt.sum() >= 5
        obs, exp = nxt[keep], P[i][keep] * nxt.sum()
        assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3


def test_sample_chain_continues_from_first_state():
    P = np.eye(3)[[1, 2, 0]]  # deterministic cycle 0 -> 1 -> 2 -> 0
    u = np.ones(3) / 3
    x = M.sample_chain(P, u, np.random.default_rng(0), n=4, length=4, first=[0, 1, 2, 0])
    assert x.tolist() == [[1, 2, 0, 1], [2, 0, 1, 2], [0, 1, 2, 0], [1, 2, 0, 1]]
    with pytest.raises(InputError, match="first states"):
        M.sample_chain(P, u, np.random.default_rng(0), n=1, length=2, first=5)
    with pytest.raises(InputError, match="rows summing to 1"):
        M.sample_chain(P * 2, u, np.random.default_rng(0), n=1, length=2)


def test_chain_max_path_matches_brute_force():
    """Viterbi against enumeration of every continuation (ties: the reference keeps the first
    lexicographic maximum, Viterbi the same probability)."""
    for seed in range(5):
        P, _ = _chain(4, seed=seed)
        for prev in range(4):
            for L in (1, 2, 4):
                best_lp = -math.inf
                for w in itertools.product(range(4), repeat=L):
                    lp = M.chain_logprob(P, w, previous=prev)
                    if lp > best_lp + 1e-12:
                        best_lp = lp
                path, lp = M.chain_max_path(P, previous=prev, length=L)
                assert lp == pytest.approx(best_lp, abs=1e-12)
                assert M.chain_logprob(P, path, previous=prev) == pytest.approx(lp, abs=1e-12)


def test_chain_max_path_handles_zero_probabilities():
    P = np.array([[0.0, 1.0], [0.5, 0.5]])
    path, lp = M.chain_max_path(P, previous=0, length=3)
    assert path == (1, 0, 1)  # 1 * 0.5 * 1 beats 1 * 0.5 * 0.5
    assert lp == pytest.approx(math.log(0.5))
    assert M.chain_logprob(P, [0], previous=0) == -math.inf


# ------------------------------------------------------------------------------ packing
@settings(max_examples=40)
@given(
    st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=7), min_size=1, max_size=30),
    st.integers(8, 12),
)
def test_pack_whole_keeps_every_document_whole(docs, T):
    blocks = M.pack_whole(docs, seq_len=T, sot=10, pad=11).numpy()
    assert blocks.shape[1] == T
    recovered = []
    for b in blocks:
        body = b[b != 11]
        assert (b[len(body) :] == 11).all()  # padding only at the end
        parts = np.split(body, np.flatnonzero(body == 10))[1:]
        recovered += [p[1:].tolist() for p in parts]
    assert recovered == [list(d) for d in docs]


def test_pack_whole_refuses_long_documents_and_pad_tokens():
    with pytest.raises(InputError, match="more than seq_len"):
        M.pack_whole([[1] * 8], seq_len=8, sot=10, pad=11)
    with pytest.raises(InputError, match="pad id"):
        M.pack_whole([[1, 11]], seq_len=8, sot=10, pad=11)


# ------------------------------------------------------------------------------ model
def test_tiny_gpt2_is_seeded_and_leaves_the_global_rng_alone():
    spec = M.TinyGPTSpec(vocab_size=12, n_positions=16, n_embd=16, n_head=2)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = M.tiny_gpt2(spec, seed=5)
    after = torch.rand(1)
    assert torch.equal(before, after)
    b = M.tiny_gpt2(spec, seed=5)
    c = M.tiny_gpt2(spec, seed=6)
    assert M.fingerprint(a) == M.fingerprint(b) != M.fingerprint(c)
    assert a.config.bos_token_id == 11
    with pytest.raises(DomainError, match="multiple of n_head"):
        M.TinyGPTSpec(vocab_size=12, n_embd=10, n_head=4)


def test_train_tiny_is_reproducible_and_learns():
    P, u = _chain(6, seed=3)
    docs = M.sample_chain(P, u, np.random.default_rng(1), n=40, length=11)
    spec = M.TinyGPTSpec(vocab_size=8, n_positions=12, n_embd=16, n_head=2)
    cfg = TrainConfig(steps=25, batch_size=8, seq_len=12, lr=1e-2, warmup_steps=2, seed=4)
    runs = []
    for _ in range(2):
        m = M.tiny_gpt2(spec, seed=2, sot=7)
        r = M.train_tiny(m, docs, cfg, sot=7, shuffle_seed=9)
        runs.append((M.fingerprint(m), r.losses))
    assert runs[0] == runs[1]
    assert np.mean(runs[0][1][-5:]) < np.mean(runs[0][1][:5])


def test_train_tiny_layouts_and_errors():
    spec = M.TinyGPTSpec(vocab_size=8, n_positions=12, n_embd=16, n_head=2)
    m = M.tiny_gpt2(spec, seed=0, sot=7)
    docs = [[1, 2, 3], [4, 5]] * 8
    cfg = TrainConfig(steps=2, batch_size=2, seq_len=8, warmup_steps=0, pad_id=6)
    for layout in ("whole", "example"):
        assert M.train_tiny(m, docs, cfg, sot=7, layout=layout).steps == 2
    with pytest.raises(DomainError, match="pad_id"):
        M.train_tiny(m, docs, TrainConfig(steps=1, batch_size=2, seq_len=8), sot=7, layout="whole")
    with pytest.raises(DomainError, match="unknown layout"):
        M.train_tiny(m, docs, cfg, sot=7, layout="bogus")
    with pytest.raises(InputError, match="outside"):
        M.train_tiny(m, [[1, 99]], cfg, sot=7)
    with pytest.raises(DomainError, match="n_positions"):
        M.train_tiny(m, docs, TrainConfig(steps=1, batch_size=2, seq_len=20), sot=7)


# ------------------------------------------------------------------------------ read-outs
def test_next_token_logprobs_batched_equals_one_at_a_time(tiny):
    ctx = np.random.default_rng(0).integers(0, 11, size=(9, 5))
    batched = M.next_token_logprobs(tiny, ctx)
    single = np.concatenate([M.next_token_logprobs(tiny, ctx[i : i + 1]) for i in range(9)])
    np.testing.assert_allclose(batched, single, atol=1e-6)
    with torch.inference_mode():
        ref = torch.log_softmax(
            tiny(input_ids=torch.from_numpy(ctx)).logits[:, -1].double(), -1
        ).numpy()
    np.testing.assert_allclose(batched, ref, atol=1e-9)
    assert np.allclose(np.exp(batched).sum(axis=1), 1)
    with pytest.raises(InputError, match="outside"):
        M.next_token_logprobs(tiny, [[0, 99]])
    with pytest.raises(InputError, match="at least one token"):
        M.next_token_logprobs(tiny, np.zeros((2, 0), dtype=np.int64))


def test_greedy_decode_matches_hf_generate(tiny):
    prompts = np.random.default_rng(1).integers(0, 11, size=(4, 3))
    ours = M.greedy_decode(tiny, prompts, n_tokens=6)
    for i in range(4):
        out = tiny.generate(
            torch.from_numpy(prompts[i : i + 1]),
            max_new_tokens=6,
            do_sample=False,
            pad_token_id=11,
            eos_token_id=None,
        )
        assert out[0, 3:].tolist() == ours[i].tolist()
    with pytest.raises(DomainError, match="positions"):
        M.greedy_decode(tiny, prompts, n_tokens=40)


def test_sample_decode_frequencies_and_low_temperature(tiny):
    """One-step sampling frequencies against the model's softmax(logits / T) by a chi-square test
    (false alarm <= 1e-3 at the fixed seed); T -> 0 gives the greedy tokens."""
    prompt = np.array([[11, 3, 4]])
    T = 1.5
    probs = np.exp(M.next_token_logprobs(tiny, prompt)[0] / T)
    probs /= probs.sum()
    toks, lps = M.sample_decode(
        tiny,
        np.repeat(prompt, 3000, axis=0),
        n_tokens=1,
        temperature=T,
        rng=np.random.default_rng(5),
    )
    counts = np.bincount(toks[:, 0], minlength=12)
    keep = probs * 3000 >= 5
    obs, exp = counts[keep], probs[keep] * 3000
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3
    np.testing.assert_allclose(lps[:, 0], np.log(probs[toks[:, 0]]), atol=1e-9)
    cold, _ = M.sample_decode(
        tiny, prompt, n_tokens=5, temperature=1e-4, rng=np.random.default_rng(0)
    )
    assert cold.tolist() == M.greedy_decode(tiny, prompt, n_tokens=5).tolist()


def test_teacher_forced_matches_a_manual_softmax(tiny):
    prompts = [[11, 1, 2], [11, 5]]  # unequal lengths: left-padded by the engine
    targets = np.array([[3, 4, 5], [6, 7, 8]])
    tf = M.teacher_forced(tiny, prompts, targets)
    assert tf.token_logprob.shape == (2, 3)
    for i, (p, t) in enumerate(zip(prompts, targets)):
        seq = torch.tensor([p + t.tolist()])
        with torch.inference_mode():
            lp = torch.log_softmax(tiny(input_ids=seq).logits[0].double(), -1).numpy()
        ref = [lp[len(p) - 1 + j, t[j]] for j in range(3)]
        np.testing.assert_allclose(tf.token_logprob[i], ref, atol=1e-5)
        greedy = all(np.argmax(lp[len(p) - 1 + j]) == t[j] for j in range(3))
        assert bool(tf.greedy_match[i]) == greedy
    np.testing.assert_allclose(tf.token_prob, np.exp(tf.token_logprob))
    with pytest.raises(InputError, match="prompts for"):
        M.teacher_forced(tiny, prompts[:1], targets)


def test_torch_threads_restores():
    old = torch.get_num_threads()
    with M.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
