"""Issue 29: the matched comparison of the ACR procedure (memclaim.claims.acr) and the verdict on
the paper's sentence. Pure: no model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaim.claims.acr import (
    HELD,
    NOT_HELD,
    NOT_TESTABLE,
    PAPER_SENTENCE,
    acr_comparison,
    succeeds_on_both,
)
from memclaim.claims.intervals import clopper_pearson, newcombe_independent
from memclaim.errors import InputError


def test_rates_intervals_and_difference_are_the_population_tests():
    me = [True] * 5 + [False] * 11
    ce = [True] * 2 + [False] * 14
    c = acr_comparison(
        member_extracted=me,
        control_extracted=ce,
        member_acr=[1.5] * 5 + [None] * 11,
        control_acr=[1.1, 2.0] + [None] * 14,
        criterion="prob:0.9",
    )
    assert c.member_rate == clopper_pearson(5, 16) and c.control_rate == clopper_pearson(2, 16)
    assert c.difference == newcombe_independent(5, 16, 2, 16)
    b = c.population.primary_test.binary_rates
    assert b.alpha_n_exact == "3/17" and c.population.primary_test.binary
    assert c.no_signal == (c.difference.lower <= 0 <= c.difference.upper)
    assert "no signal about memorization" in c.statement and "prob:0.9" in c.statement
    lv = {x.level: x for x in c.levels}
    assert (lv[1.0].member_count, lv[1.0].control_count) == (5, 2)
    assert (lv[2.0].member_count, lv[2.0].control_count) == (0, 1)
    assert c.to_dict()["population"]["full"]["binary"] is True


def test_a_difference_is_said_to_be_one_and_not_a_claim_on_a_target():
    c = acr_comparison(
        member_extracted=[True] * 15 + [False],
        control_extracted=[False] * 16,
        member_acr=[1.4] * 15 + [None],
        control_acr=[None] * 16,
        criterion="greedy",
    )
    assert not c.no_signal and c.difference.lower > 0
    assert "no memorization claim" in c.statement


def test_bad_inputs_are_refused():
    with pytest.raises(InputError, match="needs members and controls"):
        acr_comparison(
            member_extracted=[],
            control_extracted=[True],
            member_acr=[],
            control_acr=[1.5],
            criterion="argmax",
        )
    with pytest.raises(InputError, match="extracted but its ACR is 0.9"):
        acr_comparison(
            member_extracted=[True],
            control_extracted=[False],
            member_acr=[0.9],
            control_acr=[None],
            criterion="argmax",
        )
    with pytest.raises(InputError, match="one ACR value"):
        acr_comparison(
            member_extracted=[True],
            control_extracted=[False],
            member_acr=[],
            control_acr=[None],
            criterion="argmax",
        )
    with pytest.raises(InputError, match="flags for 1 targets"):
        acr_comparison(
            member_extracted=[True],
            control_extracted=[False],
            member_acr=[2.0],
            control_acr=[None],
            criterion="argmax",
            member_leaks=[True, False],
        )


@settings(max_examples=150, deadline=None)
@given(
    me=st.lists(st.booleans(), min_size=1, max_size=30),
    ce=st.lists(st.booleans(), min_size=1, max_size=30),
    data=st.data(),
)
def test_acr_levels_are_nested_and_counted_exactly(me, ce, data):
    """Invariants (deterministic, no false alarm): the share with ACR >= a never grows with a; level
    1 counts the extracted targets; every level's interval holds its estimate."""
    acr = lambda flags: [data.draw(st.floats(1.01, 9.0)) if f else None for f in flags]  # noqa: E731
    ma, ca = acr(me), acr(ce)
    c = acr_comparison(
        member_extracted=me, control_extracted=ce, member_acr=ma, control_acr=ca, criterion="argmax"
    )
    assert (c.levels[0].member_count, c.levels[0].control_count) == (sum(me), sum(ce))
    for a, b in zip(c.levels, c.levels[1:]):
        assert (
            a.level < b.level
            and b.member_count <= a.member_count
            and b.control_count <= a.control_count
        )
    for lv in c.levels:
        for iv in (lv.member, lv.control, lv.difference):
            assert iv.lower <= iv.estimate <= iv.upper


def test_equal_rates_leave_no_signal_in_most_draws():
    """[EM] §3: when members and controls succeed at the same rate, the comparison shows no signal.
    Simulated: 400 pairs of samples of 16 targets each at a common rate 0.3; the Newcombe 95%
    interval contains 0 in at least 90% of them. Its nominal coverage is 95%; were it exactly 95%,
    400 draws would show fewer than 360 with probability 1.4e-5 (the binomial tail), the false-alarm
    rate of this test (the draws are seeded, so a run either passes or fails every time)."""
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        me, ce = rng.random(16) < 0.3, rng.random(16) < 0.3
        c = acr_comparison(
            member_extracted=me.tolist(),
            control_extracted=ce.tolist(),
            member_acr=[2.0 if x else None for x in me],
            control_acr=[2.0 if x else None for x in ce],
            criterion="prob:0.9",
        )
        hits += c.no_signal
    assert hits >= 360, hits


def test_the_papers_sentence_held_not_held_and_not_testable():
    v = succeeds_on_both(members_extracted=1, n_members=16, controls_extracted=1, n_controls=16)
    assert v.status == HELD and v.sentence == PAPER_SENTENCE
    # not held: the procedure succeeded on members only (or on neither)
    assert (
        succeeds_on_both(
            members_extracted=9, n_members=16, controls_extracted=0, n_controls=16
        ).status
        == NOT_HELD
    )
    assert (
        succeeds_on_both(
            members_extracted=0, n_members=16, controls_extracted=0, n_controls=16
        ).status
        == NOT_HELD
    )
    assert (
        succeeds_on_both(
            members_extracted=0, n_members=16, controls_extracted=3, n_controls=16
        ).status
        == NOT_HELD
    )
    # not testable here: no targets on a side, or unfinished searches
    assert (
        succeeds_on_both(
            members_extracted=0, n_members=16, controls_extracted=0, n_controls=0
        ).status
        == NOT_TESTABLE
    )
    assert (
        succeeds_on_both(
            members_extracted=0, n_members=16, controls_extracted=0, n_controls=16, complete=False
        ).status
        == NOT_TESTABLE
    )
    with pytest.raises(InputError, match="is not a count"):
        succeeds_on_both(members_extracted=3, n_members=2, controls_extracted=0, n_controls=1)
