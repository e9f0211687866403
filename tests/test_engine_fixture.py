"""CPU scores are bit-identical to the ones the engine recorded before the GPU schedule existed
(tests/data/fixtures/engine_cpu_v1.npz, written once by tests/engine_fixture.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from engine_fixture import FIELDS, FIXTURE, score_cases, synthetic_lm, tiny_llama, unpack


@pytest.fixture(scope="module")
def recorded():
    import memclaim  # noqa: F401  (MKL strict mode before the first matmul)

    return dict(np.load(FIXTURE))


def _check(recorded, prefix, lm, **engine_kwargs):
    from memclaim.scoring.engine import StatSet

    meta = json.loads(str(recorded["meta"]))
    cases = unpack(recorded, prefix)
    assert cases, prefix
    now = score_cases(lm, cases, engine_kwargs=engine_kwargs)
    fields = StatSet.of(engine_kwargs.get("stats", "all")).fields
    for name, *_ in cases:
        for f in FIELDS:
            if f not in fields:
                assert now[f"{name}/{f}"] is None
                continue
            want, got = recorded[f"{prefix}/{name}/{f}"], now[f"{name}/{f}"]
            assert got.dtype == want.dtype and got.shape == want.shape, (prefix, name, f)
            # bit for bit; recorded on meta['cpu'] with torch meta['torch'] (MKL strict mode)
            assert np.array_equal(got, want, equal_nan=True), (prefix, name, f, meta["cpu"], meta["torch"])


def test_tiny_llama_scores_equal_the_recorded_ones(recorded):
    _check(recorded, "tiny", tiny_llama())


@pytest.mark.parametrize("stats", ["census", "token_logprob+token_moments", "rank", "greedy", "policy_logq"])
def test_a_subset_of_statistics_has_the_recorded_bits(recorded, stats):
    """A census computes fewer statistics, each by the same operations: its log q, greedy flags
    and margins are the recorded bits too (a census unit and an audit unit agree exactly)."""
    _check(recorded, "tiny", tiny_llama(), stats=stats)
    _check(recorded, "synthetic", synthetic_lm(), stats=stats)


def test_synthetic_scores_equal_the_recorded_ones(recorded):
    _check(recorded, "synthetic", synthetic_lm())


def test_the_fixture_exercises_ties_and_greedy_matches(recorded):
    """The recorded cases hold what the tie rules are about: exact argmax ties (margin 0),
    greedy matches, and zero-probability targets under truncating policies."""
    for prefix in ("tiny", "synthetic"):
        margins = np.concatenate([recorded[f"{prefix}/{n}/min_margin"] for n, *_ in unpack(recorded, prefix)])
        greedy = np.concatenate([recorded[f"{prefix}/{n}/greedy_match"] for n, *_ in unpack(recorded, prefix)])
        assert (margins == 0).any() and greedy.any(), prefix
        assert np.isneginf(recorded[f"{prefix}/equal/logq"]).any()


@pytest.mark.real
def test_smollm2_scores_equal_the_recorded_ones(recorded, smollm2):
    _check(recorded, "smollm2", smollm2.lm)
    _check(recorded, "smollm2", smollm2.lm, stats="census")
