"""Token-level Levenshtein distance and the incremental DP row used for ε-pruning.

Every hand-written quantity is cross-checked against rapidfuzz on lists of token ids, and the
pruning bound against brute force over every completion. These are exact (deterministic)
properties: no false-alarm rate; hypothesis runs derandomized so CI is reproducible.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from memclaim.errors import InputError
from memclaim.scoring.editdistance import IncrementalLevenshtein, levenshtein

tokens = st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=9)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(a=tokens, b=tokens)
def test_levenshtein_matches_rapidfuzz_and_metric_axioms(a, b):
    d = levenshtein(a, b)
    assert d == Levenshtein.distance(a, b)
    assert d == levenshtein(b, a)
    assert abs(len(a) - len(b)) <= d <= max(len(a), len(b))
    assert (d == 0) == (a == b)


def test_levenshtein_is_on_token_ids_not_characters():
    # ids 12 and 1,2 would collide if the ids were joined as text
    assert levenshtein([12], [1, 2]) == 2
    assert levenshtein([12, 3], [12, 3]) == 0
    assert levenshtein(np.array([7, 8, 9]), (7, 9)) == 1


def test_levenshtein_rejects_text():
    with pytest.raises(InputError, match="token ids"):
        levenshtein("abc", [1])


@settings(derandomize=True, max_examples=150, deadline=None)
@given(s=tokens, x=tokens)
def test_incremental_row_equals_rapidfuzz_against_every_prefix_of_s(s, x):
    dp = IncrementalLevenshtein(s)
    row = dp.start()
    for t, tok in enumerate(x):
        # the vectorized children agree with the single-token push for every distinct column
        kids = dp.children(row[None, :], t)[0]
        row = dp.push(row, tok, t)
        assert np.array_equal(kids[dp.column_of([tok])[0]], row)
        expect = [Levenshtein.distance(x[: t + 1], s[:j]) for j in range(len(s) + 1)]
        assert row.tolist() == expect
    assert np.array_equal(dp.row_of(x), row)


@settings(derandomize=True, max_examples=120, deadline=None)
@given(s=st.lists(st.integers(0, 2), min_size=1, max_size=5), data=st.data())
def test_min_final_distance_is_exact_over_all_completions(s, data):
    """min_j row[j] + |j - t| equals the brute-force minimum of d(x z, s) over every completion
    z (vocab {0, 1, 2, 3}: 3 never occurs in s, so the 'any other token' column is exercised)."""
    ell = len(s)
    t = data.draw(st.integers(0, ell))
    x = data.draw(st.lists(st.integers(0, 3), min_size=t, max_size=t))
    dp = IncrementalLevenshtein(s)
    bound = int(dp.min_final_distance(dp.row_of(x), t))
    brute = min(
        Levenshtein.distance(x + list(z), s) for z in itertools.product(range(4), repeat=ell - t)
    )
    assert bound == brute


def test_column_of_maps_non_target_tokens_to_the_shared_column():
    dp = IncrementalLevenshtein([5, 3, 5, 9])
    assert dp.distinct.tolist() == [3, 5, 9]
    assert dp.column_of([3, 5, 9, 0, 4, 10, 100]).tolist() == [0, 1, 2, 3, 3, 3, 3]
    assert dp.n_columns == 4
