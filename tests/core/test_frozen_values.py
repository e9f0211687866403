"""Results are frozen values (issue 13 item 6): BatchScores, UnitResult, LoadedModel."""

import dataclasses

import numpy as np
import pytest

from memclaim.decoding import parse_policies
from memclaim.errors import InputError
from memclaim.models.base import SyntheticLM
from memclaim.scoring.engine import BatchScores, TeacherForcingEngine
from memclaim.scoring.runner import score_unit
from memclaim.scoring.units import make_items, make_units


def _scores():
    eng = TeacherForcingEngine(
        SyntheticLM(vocab_size=7, seed=1), parse_policies(["full", "greedy"])
    )
    return eng, eng.score_batch([[0, 1], [0, 2]], [[3, 4], [5, 6]])


def test_batch_scores_frozen_and_concat():
    eng, b = _scores()
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.logq = None
    both = BatchScores.concat([b, b])
    assert both.n_windows == 4 and np.array_equal(both.logq[2:], b.logq)
    assert BatchScores.concat([b]) is b
    with pytest.raises(InputError):
        BatchScores.concat([])


def test_unit_result_frozen():
    eng, _ = _scores()
    items = make_items([((0, 1), (3, 4)), ((0, 2), (5, 6)), ((0, 1), (3, 5))])
    (unit,) = make_units(items.values(), "p" * 16, unit_size=8)
    res = score_unit(eng, unit, batch_size=2)  # two batches: concatenated by BatchScores.concat
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.scores = None
    assert isinstance(res.item_keys, tuple) and len(res.item_keys) == 3 == res.scores.n_windows
    one = score_unit(eng, unit, batch_size=8)
    assert np.array_equal(one.scores.logq, res.scores.logq)


@pytest.mark.integration
def test_loaded_model_frozen_with_lazy_weights(toy):
    from memclaim.models.loader import load_model

    m = load_model("toy")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "other"
    assert not m.weights_loaded
    h = hash(m)
    lm = m.lm
    assert m.weights_loaded and m.lm is lm
    assert hash(m) == h  # the weights cache takes no part in equality or hashing
    assert m.legacy_fingerprints() == m.legacy_fingerprints()
