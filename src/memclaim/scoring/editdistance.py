"""Token-level Levenshtein distance ([EM] App. B.1, Eq. 2: d(y, v) on token sequences).

Two tools:

* :func:`levenshtein` -- the distance between two token-id sequences (unit-cost insertion,
  deletion, substitution). It calls ``rapidfuzz.distance.Levenshtein.distance``, which accepts
  any sequences of hashables, so it compares token ids, never characters.
* :class:`IncrementalLevenshtein` -- the dynamic-programming row of one growing prefix against
  every prefix of a fixed target s, advanced one token at a time, for many prefixes and many
  candidate tokens at once. The near-verbatim beam search needs the *row* (the distance from
  the prefix to s_{1..j} for every j), not one number, to decide whether any completion of a
  prefix can still end inside the ε-ball. rapidfuzz (and python-Levenshtein, editdistance)
  only return final distances of whole strings and expose no incremental row, so this part is
  hand-written; the tests cross-check every row entry against rapidfuzz.

Row convention: for a prefix x of length t, ``row[j] = d(x, s[:j])`` for j = 0..ℓ, ℓ = len(s).
The empty prefix has ``row[j] = j``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError


def _as_ids(name: str, seq) -> list[int]:
    try:
        out = [int(t) for t in (seq.tolist() if hasattr(seq, "tolist") else seq)]
    except (TypeError, ValueError):
        raise InputError(
            f"{name} must be a sequence of integer token ids, got {seq!r}",
            hint="pass token ids (ints), not text; tokenize once upstream",
        ) from None
    return out


def levenshtein(a: Sequence[int], b: Sequence[int]) -> int:
    """Token-level Levenshtein distance d(a, b) between two sequences of token ids ([EM] Eq. 2).

    Unit costs for insertion, deletion and substitution, on token ids (not characters).

    >>> levenshtein([1, 2, 3], [1, 3]), levenshtein([1, 2, 3], [1, 9, 3, 4])
    (1, 2)
    """
    from rapidfuzz.distance import Levenshtein

    return int(Levenshtein.distance(_as_ids("a", a), _as_ids("b", b)))


class IncrementalLevenshtein:
    """Levenshtein DP rows of growing prefixes against a fixed target ``s``, vectorized.

    A child row depends on the appended token y only through the match pattern
    [y == s_j], j = 1..ℓ. Every token that does not occur in s has the same pattern (all
    mismatches), so one parent has at most ``len(set(s)) + 1`` distinct child rows whatever the
    vocabulary size. :meth:`children` computes exactly those: index ``u < n_distinct`` is the
    child for token ``distinct[u]``, index ``n_distinct`` (the last) is the child for any token
    not in s. :meth:`column_of` maps token ids to that index.
    """

    def __init__(self, target: Sequence[int]):
        s = np.asarray(_as_ids("target", target), dtype=np.int64)
        self.target = s
        self.length = int(s.size)
        self.distinct = np.unique(s)  # sorted distinct target tokens, [U]
        U = int(self.distinct.size)
        # cost[u, j-1] = 0 if distinct[u] == s_j else 1; the extra last row is the all-mismatch row.
        cost = np.ones((U + 1, self.length), dtype=np.int64)
        if U:
            cost[:U] = (self.distinct[:, None] != s[None, :]).astype(np.int64)
        self._cost = cost  # [U+1, ℓ]
        self._j = np.arange(self.length + 1, dtype=np.int64)  # [ℓ+1]

    @property
    def n_columns(self) -> int:
        """Number of distinct child rows per parent: distinct target tokens + 1 (all others)."""
        return int(self.distinct.size) + 1

    def start(self) -> np.ndarray:
        """Row of the empty prefix: d((), s[:j]) = j. Shape [ℓ+1]."""
        return self._j.copy()

    def column_of(self, tokens) -> np.ndarray:
        """Child-row index of each token id: its position in ``distinct``, or ``n_columns - 1``."""
        tok = np.asarray(tokens, dtype=np.int64)
        U = int(self.distinct.size)
        if U == 0:
            return np.zeros(tok.shape, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.distinct, tok), U - 1)
        return np.where(self.distinct[pos] == tok, pos, U)

    def children(self, rows: np.ndarray, t: int) -> np.ndarray:
        """Rows of every distinct child: rows [n, ℓ+1] of prefixes of length t -> [n, U+1, ℓ+1].

        Wagner–Fischer recurrence for the new prefix x·y (length t+1):
            new[0] = t + 1
            new[j] = min(old[j] + 1,                 # y unmatched (deleted from x·y)
                         old[j-1] + [y != s_j],      # y aligned to s_j (match / substitution)
                         new[j-1] + 1)               # s_j unmatched (inserted)
        The last, sequential term is a running minimum: new[j] = j + min_{i<=j}(a[i] - i), where
        a[j] is the minimum of the first two terms, so the whole row is one
        ``np.minimum.accumulate`` instead of a Python loop over j.
        """
        rows = np.asarray(rows, dtype=np.int64)
        n = rows.shape[0]
        a = np.empty((n, self._cost.shape[0], self.length + 1), dtype=np.int64)  # [n, U+1, ℓ+1]
        a[:, :, 0] = t + 1
        if self.length:
            dele = rows[:, None, 1:] + 1  # [n, 1, ℓ]
            sub = rows[:, None, :-1] + self._cost[None, :, :]  # [n, U+1, ℓ]
            a[:, :, 1:] = np.minimum(dele, sub)
        return np.minimum.accumulate(a - self._j, axis=-1) + self._j

    def push(self, row: np.ndarray, token: int, t: int) -> np.ndarray:
        """Row of x·token from the row of x (length t). Shape [ℓ+1]."""
        col = int(self.column_of([token])[0])
        return self.children(np.asarray(row)[None, :], t)[0, col]

    def min_final_distance(self, rows: np.ndarray, t: int) -> np.ndarray:
        """Smallest d(x·z, s) over all completions z with |x·z| = ℓ, for prefixes x of length t.

        d(x·z, s) = min_j [d(x, s[:j]) + d(z, s[j:])] (every alignment splits somewhere), and
        over free z of length ℓ - t the second term's minimum is |(ℓ - t) - (ℓ - j)| = |j - t|
        (copy s[j:], then pad or cut). So the bound min_j row[j] + |j - t| is exact: a prefix is
        pruned only when *no* completion can end within ε. rows [..., ℓ+1] -> [...].
        """
        rows = np.asarray(rows, dtype=np.int64)
        return (rows + np.abs(self._j - int(t))).min(axis=-1)

    def row_of(self, prefix: Sequence[int]) -> np.ndarray:
        """Row of a whole prefix (reference path; the search uses :meth:`children`)."""
        row = self.start()
        for t, tok in enumerate(_as_ids("prefix", prefix)):
            row = self.push(row, tok, t)
        return row
