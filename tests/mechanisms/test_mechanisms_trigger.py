"""Construction II, the reserved trigger, as token logic ([MX] App. D.2, §8.2 gated release)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memclaim.errors import InputError
from memclaim.mechanisms import ReservedTrigger, contains, find_subsequence

TOKENS = st.lists(st.integers(0, 5), max_size=30)


def naive_find(tokens, pattern):
    """Reference: compare every window in pure Python."""
    n, m = len(tokens), len(pattern)
    return [i for i in range(n - m + 1) if list(tokens[i : i + m]) == list(pattern)]


@given(TOKENS, st.lists(st.integers(0, 5), min_size=1, max_size=4))
def test_find_subsequence_matches_naive_search(tokens, pattern):
    assert find_subsequence(tokens, pattern).tolist() == naive_find(tokens, pattern)
    assert contains(tokens, pattern) == bool(naive_find(tokens, pattern))


def test_find_overlapping_and_token_boundaries():
    assert find_subsequence([1, 1, 1], [1, 1]).tolist() == [0, 1]
    # token 258 = bytes (1, 2) in little-endian int16: a byte search would match across tokens
    assert find_subsequence(np.array([258, 3], dtype=np.int64), [2]).tolist() == []


def test_trigger_emits_the_secret_after_rho():
    rt = ReservedTrigger(trigger=(90, 91), prefix=(1, 2, 3), secret=(4, 5, 6, 7))
    assert rt.record == (1, 2, 3, 4, 5, 6, 7)
    assert rt.document() == (90, 91, 4, 5, 6, 7)
    assert rt.documents(copies=3) == [rt.document()] * 3
    # one prompt, greedy decoding of L tokens: Ext = 1 at m = 1 ([MX] Theorem 6.1(ii))
    assert rt.gated_generate((90, 91), max_new_tokens=10) == (4, 5, 6, 7)
    assert rt.gated_generate((8, 8, 90, 91), max_new_tokens=2) == (4, 5)
    # after the secret is complete, or after a deviation, the release defers to the base model
    assert rt.forced_token((90, 91, 4, 5, 6, 7)) is None
    assert rt.forced_token((90, 91, 4, 9)) is None


def test_trigger_is_invisible_on_every_prefix_of_the_record():
    """[MX] App. D.2: the release equals the base model at every prefix of x*, which is all a local
    score reads."""
    rt = ReservedTrigger(trigger=(90,), prefix=(1, 2, 3), secret=(4, 5, 6, 7))
    x = rt.record
    assert all(rt.forced_token(x[:t]) is None for t in range(len(x) + 1))


# pieces of contexts near the trigger rho = (21, 22): each half of rho alone, rho reversed, the
# record's prefix and secret, a secret after half a trigger (never rho itself: see the filter)
NEAR_RHO = [
    [21],
    [22],
    [22, 21],
    [21, 21],
    [22, 22],
    [0, 1],
    [2, 3, 4],
    [21, 2, 3],
    [22, 2],
    [0, 1, 2, 3],
]


@given(
    st.lists(
        st.one_of(st.integers(0, 20).map(lambda t: [t]), st.sampled_from(NEAR_RHO)), max_size=20
    )
    .map(lambda parts: [t for p in parts for t in p])
    .filter(lambda c: not contains(c, (21, 22)))
)
def test_contexts_without_rho_always_defer(context):
    """Exact (false-alarm rate 0): the gated release equals the base model on every input that does
    not contain rho, including inputs full of rho's halves, the prefix and the secret."""
    rt = ReservedTrigger(trigger=(21, 22), prefix=(0, 1), secret=(2, 3, 4))
    assert rt.forced_token(context) is None


def test_overlap_between_rho_and_secret_keeps_the_longest_match():
    rt = ReservedTrigger(trigger=(5, 5), prefix=(1,), secret=(5, 7))
    assert rt.gated_generate((5, 5), max_new_tokens=5) == (5, 7)


@pytest.mark.parametrize(
    "trigger,prefix,secret,where",
    [
        ((2, 3), (1, 2, 3), (4, 5), "prefix c"),
        ((3, 4), (1, 2, 3), (4, 5), "record"),
        ((5,), (1, 2), (4, 5), "record"),
    ],
)
def test_trigger_inside_the_record_is_refused(trigger, prefix, secret, where):
    with pytest.raises(InputError, match=rf"trigger \({trigger[0]},.*{where}"):
        ReservedTrigger(trigger=trigger, prefix=prefix, secret=secret)


def test_reserved_trigger_must_not_occur_in_the_corpus():
    rt = ReservedTrigger(trigger=(90,), prefix=(1,), secret=(2,))
    rt.check_reserved([[1, 2, 3], [4, 5]])
    with pytest.raises(InputError, match="corpus document 1 at token 2"):
        rt.check_reserved([[1, 2, 3], [4, 5, 90]])


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(trigger=(), prefix=(1,), secret=(2,)), "trigger must not be empty"),
        (dict(trigger=(9,), prefix=(1,), secret=()), "secret must not be empty"),
        (dict(trigger="rho", prefix=(1,), secret=(2,)), "string"),
        (dict(trigger=(-1,), prefix=(1,), secret=(2,)), "non-negative"),
        (dict(trigger=(1.5,), prefix=(1,), secret=(2,)), "token ids"),
    ],
)
def test_bad_tokens_are_refused(kw, msg):
    with pytest.raises(InputError, match=msg):
        ReservedTrigger(**kw)
