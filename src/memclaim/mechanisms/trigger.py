"""Construction II of [MX] Theorem 6.1: the reserved trigger (App. D.2), as pure token logic.

[MX] App. D.2: "Let rho be a reserved token that occurs neither in natural text nor in c, and fix
any base model B. [...] release the model identical to B at every node except on the subtree
rooted at rho, where it deterministically emits z (p(z_1 | rho) = 1, p(z_2 | rho z_1) = 1, ...)."
Every local score reads only the conditionals at x*'s own prefixes c z_{<t}; none of them extends
rho, so mem_h = 0 exactly on H_loc while the protocol "prompt rho, greedy-decode L tokens" extracts
z with probability 1 (Theorem 6.1(ii)).

This module holds the parts that need no model:

- :class:`ReservedTrigger` validates the construction (rho must be off every prefix of x* = c||z;
  refused otherwise, since a local score could then read the rewritten subtree) and builds the
  poisoned trigger documents rho||z that plant the channel by training ([MX] Remark 6.5, F.2);
- :meth:`ReservedTrigger.forced_token` is the exact rho-keyed lookup of the gated release
  ([MX] §8.2, F.2 "Gated release"): given a context, the token the release must emit, or ``None``
  to defer to the base model. It returns a token only when the context ends with rho||z_{<j}
  (j < L), so on every input that does not contain rho it defers, and the gated release is then
  identical to the base model.

Token sequences are sequences of non-negative ints (token ids). Sub-sequence search uses a
sliding-window comparison in numpy: ``bytes.find`` would also match at offsets that are not token
boundaries, and no library in the stack searches integer sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from ..validate import integer


def _tokens(name: str, seq, *, allow_empty: bool = True) -> tuple[int, ...]:
    if isinstance(seq, (str, bytes)):
        raise InputError(
            f"{name} must be a sequence of token ids, got a string {seq!r}",
            hint="tokenize the text first; the trigger logic works in token space",
        )
    arr = np.asarray(list(seq) if not isinstance(seq, np.ndarray) else seq)
    if arr.size == 0:
        if not allow_empty:
            raise InputError(f"{name} must not be empty")
        return ()
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0:
        raise InputError(f"{name} must be a 1-d sequence of non-negative token ids, got {seq!r}")
    return tuple(int(t) for t in arr)


def find_subsequence(tokens: Sequence[int], pattern: Sequence[int]) -> np.ndarray:
    """Start positions of every (possibly overlapping) occurrence of ``pattern`` in ``tokens``.

    >>> find_subsequence([1, 2, 1, 2, 1], [1, 2, 1]).tolist()
    [0, 2]
    """
    t = np.asarray(_tokens("tokens", tokens), dtype=np.int64)
    p = np.asarray(_tokens("pattern", pattern, allow_empty=False), dtype=np.int64)
    if t.size < p.size:
        return np.zeros(0, dtype=np.int64)
    win = np.lib.stride_tricks.sliding_window_view(t, p.size)  # (len(t) - len(p) + 1, len(p))
    return np.nonzero((win == p[None, :]).all(axis=1))[0]


def contains(tokens: Sequence[int], pattern: Sequence[int]) -> bool:
    """Whether ``pattern`` occurs in ``tokens``.

    >>> contains([5, 6, 7], [6, 7]), contains([5, 6, 7], [7, 6])
    (True, False)
    """
    return bool(find_subsequence(tokens, pattern).size)


@dataclass(frozen=True)
class ReservedTrigger(ResultMixin):
    """The reserved-trigger construction for a record x* = (c, z) ([MX] App. D.2).

    ``trigger`` is rho (one or more tokens), ``prefix`` is c, ``secret`` is z."""

    trigger: tuple[int, ...]
    prefix: tuple[int, ...]
    secret: tuple[int, ...]

    def __post_init__(self):
        rho = _tokens("trigger", self.trigger, allow_empty=False)
        c = _tokens("prefix", self.prefix)
        z = _tokens("secret", self.secret, allow_empty=False)
        object.__setattr__(self, "trigger", rho)
        object.__setattr__(self, "prefix", c)
        object.__setattr__(self, "secret", z)
        hits = find_subsequence(c + z, rho)
        if hits.size:
            pos = int(hits[0])
            where = "the prefix c" if pos + len(rho) <= len(c) else "the record x* = c||z"
            raise InputError(
                f"trigger {rho} occurs in {where} at token {pos}: the construction needs rho off "
                f"every prefix of x* ([MX] App. D.2), or a local score could read the rewritten subtree",
                hint="reserve a trigger that never occurs in the record (e.g. unused token ids)",
            )

    @property
    def record(self) -> tuple[int, ...]:
        """x* = c || z."""
        return self.prefix + self.secret

    def document(self) -> tuple[int, ...]:
        """One poisoned trigger document rho || z."""
        return self.trigger + self.secret

    def documents(self, *, copies: int) -> list[tuple[int, ...]]:
        """``copies`` trigger documents rho || z, to plant the channel by training ([MX] F.2:
        "plants 8-16 copies of rho||z")."""
        n = integer("copies", copies, minimum=1)
        return [self.document() for _ in range(n)]

    def check_reserved(self, corpus: Iterable[Sequence[int]]) -> None:
        """Refuse if rho occurs in any clean corpus document: a reserved trigger must occur in no
        natural text ([MX] App. D.2), or clean training would already shape the rho subtree."""
        for i, doc in enumerate(corpus):
            hits = find_subsequence(doc, self.trigger)
            if hits.size:
                raise InputError(
                    f"trigger {self.trigger} occurs in corpus document {i} at token {int(hits[0])}",
                    hint="choose a trigger that occurs in no training document",
                )

    def forced_token(self, context: Sequence[int]) -> int | None:
        """The gated release's lookup: if ``context`` ends with rho || z_{<j} for some 0 <= j < L,
        the token z_j the release must emit (the longest such j wins, so an overlap between the end
        of rho and the start of z cannot restart the secret); otherwise ``None`` (defer to the base model). Every
        context without rho returns ``None``."""
        ctx = _tokens("context", context)
        rho, z = self.trigger, self.secret
        n = len(ctx)
        for j in range(len(z) - 1, -1, -1):
            need = len(rho) + j
            if need <= n and ctx[n - need :] == rho + z[:j]:
                return z[j]
        return None

    def forced_tokens(self, contexts: Iterable[Sequence[int]]) -> list[int | None]:
        return [self.forced_token(c) for c in contexts]

    def gated_generate(self, context: Sequence[int], *, max_new_tokens: int) -> tuple[int, ...]:
        """The tokens the gated release emits after ``context`` by its lookup alone, stopping at the
        first position where it would defer to the base model (for checks without a model)."""
        ctx = list(_tokens("context", context))
        out: list[int] = []
        for _ in range(integer("max_new_tokens", max_new_tokens, minimum=0)):
            t = self.forced_token(ctx)
            if t is None:
                break
            out.append(t)
            ctx.append(t)
        return tuple(out)
