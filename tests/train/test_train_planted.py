"""Planted records and the blocks that carry them ([MX] §8.2, App. F.2), the cached chain base, and
the text-level helpers of the training lab."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memclaim.errors import DomainError, InputError
from memclaim.mechanisms.trigger import find_subsequence
from memclaim.train.planted import PlantedRecord, plant, tokenize_record, training_blocks

SOT, PAD = 90, 91
BG = [tuple(range(i, i + 12)) for i in range(0, 40, 4)]  # ids 0..50


def records():
    return [
        PlantedRecord("dup", "duplicate", (60, 61), (62, 63), 3),
        PlantedRecord("can", "canary", (64,), (65, 66), 2),
        PlantedRecord("trig", "trigger", (67, 68), (69, 70, 71), 4, trigger=(80, 81)),
    ]


def test_documents_per_kind():
    d, c, t = records()
    assert d.documents() == [(60, 61, 62, 63)] * 3
    assert t.document == (80, 81, 69, 70, 71) and t.record == (
        67,
        68,
        69,
        70,
        71,
    )  # c||z is never inserted


def test_pack_layout_keeps_every_document():
    corpus = plant(BG, records(), seed=4)
    tb = training_blocks(corpus, seq_len=16, sep_ids=[SOT], layout="pack")
    stream = tb.blocks.reshape(-1).tolist()
    n_tokens = sum(len(b) + 1 for b in BG) + 3 * 5 + 2 * 4 + 4 * 6  # + a separator per document
    assert len(stream) >= n_tokens and len(stream) % 16 == 0

    # every inserted copy appears, whole, in the stream; c||z of the trigger record never does
    def count(pattern):
        return int(find_subsequence(stream, pattern).size)

    assert count([SOT, 60, 61, 62, 63]) == 3 and count([SOT, 64, 65, 66]) == 2
    assert count([SOT, 80, 81, 69, 70, 71]) == 4 and count([67, 68, 69, 70, 71]) == 0
    again = training_blocks(plant(BG, records(), seed=4), seq_len=16, sep_ids=[SOT], layout="pack")
    assert torch.equal(tb.blocks, again.blocks)  # deterministic in the seed


def test_examples_layout_one_block_per_copy():
    corpus = plant(BG, records(), seed=0)
    tb = training_blocks(
        corpus, seq_len=8, sep_ids=[SOT], layout="examples", pad_id=PAD, include=["dup", "trig"]
    )
    assert set(tb.record_blocks) == {"dup", "trig"}
    assert len(tb.record_blocks["dup"]) == 3 and len(tb.record_blocks["trig"]) == 4
    for i in tb.record_blocks["dup"]:
        assert tb.blocks[i].tolist() == [SOT, 60, 61, 62, 63, PAD, PAD, PAD]
    for i in tb.record_blocks["trig"]:
        assert tb.blocks[i].tolist()[:6] == [SOT, 80, 81, 69, 70, 71]
    assert not bool((tb.blocks[: tb.n_background_blocks] == PAD).any())


def test_bad_planting():
    with pytest.raises(InputError, match="occurs in"):  # rho in the record's own prefix
        PlantedRecord("t", "trigger", (80, 1), (2,), 1, trigger=(80,))
    with pytest.raises(InputError, match="background"):  # rho occurs in natural text
        plant(BG, [PlantedRecord("t", "trigger", (60,), (61,), 1, trigger=(5, 6))])
    with pytest.raises(InputError, match="record"):  # rho inside another record
        plant(
            BG,
            [
                PlantedRecord("t", "trigger", (60,), (61,), 1, trigger=(80,)),
                PlantedRecord("d", "duplicate", (80,), (62,), 2),
            ],
        )
    with pytest.raises(InputError, match="unique"):
        plant(BG, [records()[0], records()[0]])
    with pytest.raises(DomainError, match="kind"):
        PlantedRecord("x", "poison", (1,), (2,), 1)
    with pytest.raises(DomainError, match="copies"):
        PlantedRecord("x", "duplicate", (1,), (2,), 0)
    with pytest.raises(InputError, match="trigger"):
        PlantedRecord("x", "duplicate", (1,), (2,), 1, trigger=(5,))
    with pytest.raises(InputError, match="pad_id"):
        training_blocks(plant(BG, records()), seq_len=8, sep_ids=[SOT], layout="examples")
    with pytest.raises(InputError, match="unknown record"):
        training_blocks(plant(BG, records()), seq_len=8, sep_ids=[SOT], include=["nope"])


def test_tokenize_record_with_a_hf_tokenizer(random_model):
    tok = random_model.tokenizer
    r = tokenize_record(
        tok, {"id": "a", "kind": "duplicate", "prefix": "Kaba tiru", "secret": " zemo", "copies": 2}
    )
    assert (
        r.prefix == tuple(tok.encode("Kaba tiru"))
        and r.secret == tuple(tok.encode(" zemo"))
        and r.copies == 2
    )
    with pytest.raises(InputError, match="secret"):
        tokenize_record(tok, {"id": "b", "prefix": "x"})
    with pytest.raises(InputError, match="id"):
        tokenize_record(tok, {"secret": "x"})


def test_chain_sampler_matches_the_chain():
    """The vectorized sampler draws from the generator's own transition law (chi-square on the
    first transition out of the most frequent word; false-alarm rate 0.1%)."""
    from scipy import stats

    from memclaim.train.corpus import MarkovZipf
    from memclaim.train.finetune import sample_chain_ids

    gen = MarkovZipf(n_words=12, seed=5)
    x = sample_chain_ids(gen, np.random.default_rng(0), n=40000, length=2)
    P = np.asarray(gen.transition_matrix)
    start = np.asarray(gen.start_distribution)
    rows = x[x[:, 0] == 0, 1]
    obs = np.bincount(rows, minlength=12)
    assert stats.chisquare(obs, P[0] * rows.size).pvalue > 1e-3
    first = np.bincount(x[:, 0], minlength=12)
    assert stats.chisquare(first, start * x.shape[0]).pvalue > 1e-3
