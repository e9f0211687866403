"""Unlearning through the one trainer (GradDiff, NPO; [MX] App. F.2) until the unlearning verifier
reports the forget set forgotten: the verifier's extraction on the forget set goes down, the
objectives are the published losses, and bad input is refused."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from memclaim.audits.verifier import verify_arrays
from memclaim.errors import DomainError, InputError
from memclaim.train.trainer import TrainConfig, example_blocks, per_example_nll, train_causal_lm
from memclaim.train.unlearn import NPO, GradDiff, UnlearnConfig, unlearn

V, SOT, PAD = 24, 22, 23


def gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=V,
        n_positions=16,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=SOT,
        eos_token_id=SOT,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg)


FORGET = [
    (1, 2, 3, 4, 5),
    (6, 7, 8, 9, 10),
    (11, 12, 13, 14, 15),
]  # prefix = first 2 tokens, secret = last 3
RETAIN = [(16, 17, 18, 19, 20), (21, 20, 19, 18, 17), (3, 17, 5, 19, 7)]


@pytest.fixture(scope="module")
def memorized():
    """A micro GPT that has memorized the forget and retain documents verbatim."""
    model = gpt2()
    blocks = example_blocks(list(FORGET) + list(RETAIN), seq_len=8, sep_ids=[SOT], pad_id=PAD)
    train_causal_lm(
        model,
        blocks.repeat(4, 1),
        TrainConfig(
            steps=150, batch_size=8, seq_len=8, lr=1e-2, warmup_steps=5, pad_id=PAD, threads=1
        ),
    )
    model.requires_grad_(False)
    return model


def extraction(model):
    """Greedy extraction of each forget secret from its own prefix (the verifier's channel)."""
    hits = []
    with torch.no_grad():
        for d in FORGET:
            ctx = [SOT, *d[:2]]
            for _ in range(3):
                ctx.append(int(torch.argmax(model(input_ids=torch.tensor([ctx])).logits[0, -1])))
            hits.append(tuple(ctx[3:]) == d[2:])
    return hits


def verifier(model):
    return verify_arrays(greedy_match=extraction(model))


def blocks():
    f = example_blocks(list(FORGET), seq_len=8, sep_ids=[SOT], pad_id=PAD)
    r = example_blocks(list(RETAIN), seq_len=8, sep_ids=[SOT], pad_id=PAD)
    return f, r


@pytest.mark.parametrize("method", ["graddiff", "npo"])
def test_unlearning_lowers_the_verifiers_extraction(memorized, method):
    assert all(extraction(memorized))  # the forget set is memorized before
    model = copy.deepcopy(memorized)
    f, r = blocks()
    res = unlearn(
        model,
        f,
        r,
        UnlearnConfig(
            method=method, lr=5e-3, max_rounds=14, batch_size=3, retain_batch_size=3, threads=1
        ),
        verifier=verifier,
        pad_id=PAD,
    )
    assert res.forgotten and res.stopped == "verifier" and not res.forgotten_before
    assert res.before["rate"] == 1.0 and res.after["rate"] < 0.15
    assert 1 <= res.rounds <= 14 and len(res.history) == res.rounds and res.history[-1].forgotten
    assert (
        sum(extraction(model)) == 0
    )  # the verifier's verdict is the model's, after the last round
    assert math.isfinite(res.retain_ppl_before) and math.isfinite(res.retain_ppl_after)
    assert all(p.requires_grad is False for p in model.parameters())  # gradient flags restored


def test_at_least_one_round_even_when_already_forgotten(memorized):
    model = copy.deepcopy(memorized)
    f, r = blocks()
    always = lambda m: SimpleNamespace(forgotten=True, rate=0.0)  # noqa: E731
    res = unlearn(
        model,
        f,
        r,
        UnlearnConfig(method="npo", lr=1e-4, batch_size=3, threads=1),
        verifier=always,
        pad_id=PAD,
    )
    assert res.forgotten_before and res.rounds == 1 and res.steps == 1


def test_max_rounds_without_forgetting(memorized):
    model = copy.deepcopy(memorized)
    f, r = blocks()
    never = lambda m: SimpleNamespace(forgotten=False, rate=1.0)  # noqa: E731
    res = unlearn(
        model,
        f,
        r,
        UnlearnConfig(method="graddiff", lr=1e-6, max_rounds=3, batch_size=3, threads=1),
        verifier=never,
        pad_id=PAD,
    )
    assert not res.forgotten and res.stopped == "max_rounds" and res.rounds == 3


def test_objectives_are_the_published_losses(memorized):
    f, r = blocks()
    model = copy.deepcopy(memorized)
    with torch.no_grad():
        nll = per_example_nll(model, f, pad_id=PAD).mean()
        gd = GradDiff(None, pad_id=PAD)(model, f)
        assert gd.item() == pytest.approx(-nll.item())  # gradient ascent on the forget set
        # NPO at the reference model: (2/beta) log 2 (Zhang et al. 2024, Eq. 3 at pi_theta = pi_ref)
        npo = NPO(None, reference=copy.deepcopy(model), beta=0.1, pad_id=PAD)(model, f)
        assert npo.item() == pytest.approx(2 / 0.1 * math.log(2), rel=1e-6)
        # with a retain set, the retain NLL is added with its weight
        gr = GradDiff(r, retain_weight=2.0, retain_batch_size=3, pad_id=PAD)(model, f)
        assert gr.item() == pytest.approx(
            -nll.item() + 2.0 * per_example_nll(model, r, pad_id=PAD).mean().item(), rel=1e-5
        )


def test_bad_unlearning_input(memorized):
    f, r = blocks()
    with pytest.raises(DomainError, match="method"):
        UnlearnConfig(method="gradient-ascent")
    with pytest.raises(DomainError):
        UnlearnConfig(lr=0)
    with pytest.raises(DomainError):
        UnlearnConfig(max_rounds=0)
    with pytest.raises(InputError, match="forget_blocks"):
        unlearn(memorized, f[:0], r, UnlearnConfig(), verifier=verifier)
    with pytest.raises(InputError, match="UnlearnConfig"):
        unlearn(memorized, f, r, {"method": "npo"}, verifier=verifier)
