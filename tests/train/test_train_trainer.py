"""The one trainer's options (sampling, padding, accumulation, schedules, threads) against slow
references, reproducibility, and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from memclaim.errors import DomainError, InputError
from memclaim.train.trainer import (
    TrainConfig,
    evaluate_nll,
    example_blocks,
    masked_next_token_loss,
    next_token_loss,
    pack_documents,
    per_example_nll,
    poisson_rate,
    train_causal_lm,
)

V, PAD = 30, 29


def gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=V,
        n_positions=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg)


def data(n=20, T=8, seed=0):
    return torch.randint(1, PAD, (n, T), generator=torch.Generator().manual_seed(seed))


def weights(m):
    return [p.detach().clone() for p in m.parameters()]


def test_default_run_is_reproducible_and_learns():
    x = data().repeat(3, 1)
    a, b = gpt2(), gpt2()
    ra = train_causal_lm(
        a, x, TrainConfig(steps=30, batch_size=8, seq_len=8, lr=1e-2, warmup_steps=2, threads=1)
    )
    rb = train_causal_lm(
        b, x, TrainConfig(steps=30, batch_size=8, seq_len=8, lr=1e-2, warmup_steps=2, threads=1)
    )
    assert ra.losses == rb.losses and all(torch.equal(p, q) for p, q in zip(weights(a), weights(b)))
    assert ra.final_loss < ra.first_loss and ra.sampling == "shuffle" and ra.dp is None
    assert not a.training  # left in eval mode


def test_per_example_nll_matches_a_loop_and_ignores_padding():
    model = gpt2().eval()
    x = example_blocks([[1, 2, 3], [4, 5, 6, 7, 8], [9]], seq_len=8, sep_ids=[0], pad_id=PAD)
    assert x[0].tolist() == [0, 1, 2, 3, PAD, PAD, PAD, PAD]
    with torch.no_grad():
        fast = per_example_nll(model, x, pad_id=PAD)
        fast_sum = per_example_nll(model, x, pad_id=PAD, reduce="sum")
        for i in range(3):
            n = int((x[i, 1:] != PAD).sum())
            logits = model(input_ids=x[i : i + 1, : n + 1]).logits[0, :-1]
            ref = torch.nn.functional.cross_entropy(logits, x[i, 1 : n + 1])
            assert fast[i].item() == pytest.approx(ref.item(), rel=1e-5)
            assert fast_sum[i].item() == pytest.approx(ref.item() * n, rel=1e-5)
        # a block's loss depends on that block alone (what per-sample clipping needs)
        assert masked_next_token_loss(model, x, pad_id=PAD).item() == pytest.approx(
            fast.mean().item()
        )
        # without padding the masked loss is the plain next-token loss
        y = data(4, 8)
        assert masked_next_token_loss(model, y, pad_id=PAD).item() == pytest.approx(
            next_token_loss(model, y).item(), rel=1e-5
        )
        nll = evaluate_nll(model, x, pad_id=PAD)
        tokens = int((x[:, 1:] != PAD).sum())
        assert nll == pytest.approx(float(fast_sum.sum()) / tokens, rel=1e-6)


def last_step_grads(model, x, **cfg):
    """Run one step and return the gradient the optimizer applied (read in on_step)."""
    grads = []
    train_causal_lm(
        model,
        x,
        TrainConfig(**cfg),
        on_step=lambda s, l: grads.append([p.grad.detach().clone() for p in model.parameters()]),
    )
    return grads[-1]


def test_gradient_accumulation_equals_the_full_batch():
    x = data(24, 8)
    cfg = dict(steps=1, batch_size=8, seq_len=8, lr=1e-2, warmup_steps=0, threads=1, seed=2)
    full = last_step_grads(gpt2(), x, **cfg)
    chunked = last_step_grads(gpt2(), x, physical_batch_size=3, **cfg)
    for p, q in zip(full, chunked):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def test_poisson_sampling_and_rate():
    assert poisson_rate(100, 16) == 1 / 7 and poisson_rate(16, 16) == 1.0
    sizes = []
    res = train_causal_lm(
        gpt2(),
        data(40, 8),
        TrainConfig(
            steps=20,
            batch_size=8,
            seq_len=8,
            lr=1e-3,
            warmup_steps=0,
            sampling="poisson",
            threads=1,
            grad_clip=None,
        ),
        on_step=lambda s, l: sizes.append(l),
    )
    assert res.sampling == "poisson" and res.steps == 20 and len(sizes) == 20


def test_schedules():
    c = TrainConfig(steps=100, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert c.lr_at(0) == pytest.approx(0.1) and c.lr_at(9) == pytest.approx(1.0)
    assert c.lr_at(10) == pytest.approx(1.0) and c.lr_at(100) == pytest.approx(0.1)
    lin = TrainConfig(steps=100, lr=1.0, warmup_steps=0, min_lr_ratio=0.0, schedule="linear")
    assert lin.lr_at(50) == pytest.approx(0.5)
    const = TrainConfig(steps=100, lr=0.3, warmup_steps=0, schedule="constant")
    assert const.lr_at(0) == const.lr_at(99) == 0.3


def test_early_stop_by_stop_iteration():
    def stop(step, loss):
        if step == 3:
            raise StopIteration

    res = train_causal_lm(
        gpt2(), data(), TrainConfig(steps=50, batch_size=4, seq_len=8, threads=1), on_step=stop
    )
    assert res.steps == 4


def test_blocks_and_bad_input():
    with pytest.raises(InputError, match="fewer than one block"):
        pack_documents([[1, 2]], seq_len=8, sep_ids=[0])
    with pytest.raises(InputError, match="more than seq_len"):
        example_blocks([list(range(1, 12))], seq_len=8, sep_ids=[0], pad_id=PAD)
    with pytest.raises(InputError, match="pad id"):
        example_blocks([[1, PAD]], seq_len=8, sep_ids=[0], pad_id=PAD)
    with pytest.raises(InputError, match="LongTensor"):
        train_causal_lm(gpt2(), data().float(), TrainConfig(steps=1, batch_size=2, seq_len=8))
    # batch_size above the number of blocks: every step is the whole set (the original behaviour)
    assert (
        train_causal_lm(gpt2(), data(3, 8), TrainConfig(steps=2, batch_size=8, seq_len=8)).tokens
        == 2 * 3 * 8
    )
    with pytest.raises(InputError, match="no trainable"):
        train_causal_lm(
            gpt2().requires_grad_(False), data(), TrainConfig(steps=1, batch_size=2, seq_len=8)
        )
    for bad in (
        dict(schedule="step"),
        dict(sampling="uniform"),
        dict(steps=-1),
        dict(lr=0),
        dict(pad_id=-1),
        dict(physical_batch_size=0),
        dict(grad_clip=-1.0),
        dict(threads=0),
    ):
        with pytest.raises(DomainError):
            TrainConfig(**bad)
    assert math.isnan(
        train_causal_lm(gpt2(), data(), TrainConfig(steps=0, batch_size=2, seq_len=8)).first_loss
    )


def test_build_toy_model_without_a_log(tmp_path):
    """build_toy_model's ``log`` defaults to None (silent), as ensure_toy_model's does; it used to
    call the None. A toy-sized spec, two steps, into a temporary folder."""
    from memclaim.train.toy import ToySpec, build_toy_model

    spec = ToySpec(
        n_words=40,
        n_background=6,
        passage_words=20,
        copies=((1, 2),),
        n_held_out=2,
        document_words=30,
        document_copies=1,
        vocab_size=300,
        n_embd=16,
        n_positions=32,
        steps=2,
        batch_size=2,
        seq_len=32,
    )
    out = build_toy_model(spec, tmp_path / "toy")
    assert (out / "toy_data.json").is_file() and (out / "model.safetensors").is_file()
