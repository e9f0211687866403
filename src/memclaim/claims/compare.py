"""Comparing calibrated rates ([EM] D.1, D.4) and matching candidates across models by text.

- Two models (or two policies) on the same candidates: the rates are paired, so the difference
  of calibrated rates M - M' = (G - alpha_N) - (G' - alpha_N') ([EM] Eq. 29) gets Newcombe's
  paired interval (1998a) on G - G', shifted by the constant alpha_N' - alpha_N (zero when both
  tests use the same N and alpha).
- Two independent samples: Newcombe's independent interval (1998b, Wilson based).
- Tokenizers differ between models, so windows are not comparable by token ids: candidates are
  matched by their text. :func:`match_by_text` refuses, naming the problem, when it cannot.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from ..procedure import procedure_differences, require_same_procedure
from .conformal import population_test
from .intervals import Interval, newcombe_independent, newcombe_paired
from .scores import as_scores


@dataclass(frozen=True)
class PairedComparison(ResultMixin):
    n: int
    both: int  # a
    only_first: int  # b
    only_second: int  # c
    neither: int  # d
    rate_first: float
    rate_second: float
    alpha_n_first: float
    alpha_n_second: float
    difference: Interval  # M - M' with Newcombe's paired interval
    resolved: bool  # interval excludes 0
    statement: str


def paired_difference(
    claimed_first: Sequence[bool] | np.ndarray,
    claimed_second: Sequence[bool] | np.ndarray,
    *,
    alpha_n_first: float = 0.0,
    alpha_n_second: float = 0.0,
    confidence: float = 0.95,
    names: tuple[str, str] = ("first", "second"),
) -> PairedComparison:
    """M - M' for the same candidates claimed under two procedures ([EM] Eq. 29, Fig. 15(b)).

    >>> p = paired_difference([True, True, False, True], [True, False, False, False])
    >>> p.only_first, p.only_second, p.difference.estimate  # the discordant pairs, M - M'
    (2, 0, 0.5)
    """
    x = np.asarray(claimed_first, dtype=bool).ravel()
    y = np.asarray(claimed_second, dtype=bool).ravel()
    if x.size != y.size:
        raise InputError(
            f"paired claims need the same candidates: {x.size} vs {y.size} flags",
            hint="match the candidates by text first (match_by_text)",
        )
    if x.size == 0:
        raise InputError("no candidates to compare")
    a = int(np.count_nonzero(x & y))
    b = int(np.count_nonzero(x & ~y))
    c = int(np.count_nonzero(~x & y))
    d = int(np.count_nonzero(~x & ~y))
    shift = float(alpha_n_second) - float(alpha_n_first)
    iv = newcombe_paired(a, b, c, d, confidence=confidence)
    if shift:
        iv = iv.shifted(shift, method_suffix=", shifted by alpha_N' - alpha_N")
    resolved = iv.lower > 0 or iv.upper < 0
    s = (
        f"{names[0]} minus {names[1]}: {100 * iv.estimate:+.2f} points "
        f"[{100 * iv.lower:.2f}, {100 * iv.upper:.2f}] ({100 * confidence:g}% Newcombe paired); "
        + (
            "the interval excludes 0"
            if resolved
            else "the interval includes 0: the data do not resolve which calibrated rate is higher"
        )
    )
    return PairedComparison(
        x.size,
        a,
        b,
        c,
        d,
        (a + b) / x.size,
        (a + c) / x.size,
        float(alpha_n_first),
        float(alpha_n_second),
        iv,
        resolved,
        s,
    )


def independent_difference(
    k1: int, n1: int, k2: int, n2: int, *, confidence: float = 0.95
) -> Interval:
    """k1/n1 - k2/n2 from independent samples, Newcombe (1998b) ([EM] D.1).

    >>> round(independent_difference(8, 10, 2, 10).estimate, 6)
    0.6
    """
    return newcombe_independent(k1, n1, k2, n2, confidence=confidence)


@dataclass(frozen=True)
class TextMatch(ResultMixin):
    n_matched: int
    index_first: np.ndarray = field(repr=False)  # positions in the first table
    index_second: np.ndarray = field(repr=False)  # the matching positions in the second
    dropped_first: tuple[str, ...] = ()
    dropped_second: tuple[str, ...] = ()


def _norm(t: str) -> str:
    return unicodedata.normalize("NFC", t)


def _show(items, k=5):
    items = list(items)
    more = f" and {len(items) - k} more" if len(items) > k else ""
    return ", ".join(repr(x[:60]) for x in items[:k]) + more


def match_by_text(
    ids_first: Sequence[str],
    texts_first: Sequence[str],
    ids_second: Sequence[str],
    texts_second: Sequence[str],
    *,
    allow_partial: bool = False,
    names: tuple[str, str] = ("first", "second"),
) -> TextMatch:
    """Pair candidates of two tables by their text (Unicode NFC; no other normalization).

    Refuses (InputError naming the problem) when a text is missing, when a text occurs twice in
    one table (ambiguous), or, unless ``allow_partial``, when a text is in only one table.

    >>> m = match_by_text(["a", "b"], ["x y", "z"], ["q", "r"], ["z", "x y"])
    >>> m.index_first.tolist(), m.index_second.tolist()
    ([0, 1], [1, 0])
    """
    for nm, ids, texts in (
        (names[0], ids_first, texts_first),
        (names[1], ids_second, texts_second),
    ):
        if len(ids) != len(texts):
            raise InputError(f"{nm}: {len(ids)} ids but {len(texts)} texts")
        if len(texts) == 0:
            raise InputError(f"{nm}: no candidates")
        bad = [i for i, t in zip(ids, texts) if not isinstance(t, str) or not t]
        if bad:
            raise InputError(
                f"{nm}: candidates {_show(map(str, bad))} have no text; they cannot be matched",
                hint="candidates are matched across models by their text, since tokenizers differ",
            )
    maps = []
    for nm, ids, texts in (
        (names[0], ids_first, texts_first),
        (names[1], ids_second, texts_second),
    ):
        pos: dict[str, int] = {}
        dup = []
        for i, t in enumerate(texts):
            t = _norm(t)
            if t in pos:
                dup.append(f"{ids[pos[t]]} = {ids[i]}")
            pos[t] = i
        if dup:
            raise InputError(
                f"{nm}: {len(dup)} texts occur more than once (ids {_show(dup)}), so the match "
                "would be ambiguous",
                hint="deduplicate the candidates before comparing",
            )
        maps.append(pos)
    only1 = [t for t in maps[0] if t not in maps[1]]
    only2 = [t for t in maps[1] if t not in maps[0]]
    if (only1 or only2) and not allow_partial:
        parts = []
        if only1:
            parts.append(
                f"{len(only1)} texts of {names[0]} are missing from {names[1]} "
                f"(ids {_show([str(ids_first[maps[0][t]]) for t in only1])})"
            )
        if only2:
            parts.append(
                f"{len(only2)} texts of {names[1]} are missing from {names[0]} "
                f"(ids {_show([str(ids_second[maps[1][t]]) for t in only2])})"
            )
        raise InputError(
            "cannot pair the candidates by text: " + "; ".join(parts),
            hint="score the same candidate texts under both procedures, or allow a partial match "
            "(the dropped candidates are then reported)",
        )
    common = [t for t in maps[0] if t in maps[1]]
    if not common:
        raise InputError(f"no candidate text is shared by {names[0]} and {names[1]}")
    i1 = np.array([maps[0][t] for t in common], dtype=np.int64)
    i2 = np.array([maps[1][t] for t in common], dtype=np.int64)
    return TextMatch(
        len(common),
        i1,
        i2,
        tuple(str(ids_first[maps[0][t]]) for t in only1),
        tuple(str(ids_second[maps[1][t]]) for t in only2),
    )


@dataclass(frozen=True)
class ClaimComparison(ResultMixin):
    """Two procedures (models, policies) on the same candidates, matched by text ([EM] D.4)."""

    names: tuple[str, str]
    procedure_differences: tuple  # "field: first != second" strings: what is being compared
    n_matched: int
    dropped_first: tuple[str, ...]
    dropped_second: tuple[str, ...]
    rows: tuple  # one PairedComparison per target alpha ([EM] Fig. 15(b))
    alphas: tuple[str, ...]


def compare_population_claims(
    first_scores: Sequence[float] | np.ndarray,
    first_controls: Sequence[float] | np.ndarray,
    first_ids: Sequence[str],
    first_texts: Sequence[str],
    second_scores: Sequence[float] | np.ndarray,
    second_controls: Sequence[float] | np.ndarray,
    second_ids: Sequence[str],
    second_texts: Sequence[str],
    *,
    alphas: Sequence[str | float] = ("0.001",),
    kind: str = "log-prob",
    procedure_first: dict | None = None,
    procedure_second: dict | None = None,
    may_differ: Sequence[str] = ("model",),
    allow_partial: bool = False,
    confidence: float = 0.95,
    names: tuple[str, str] = ("first", "second"),
) -> ClaimComparison:
    """Paired difference of calibrated rates M - M' ([EM] Eq. 29) at each target alpha, for the
    same candidates scored under two procedures, each calibrated on its own controls.

    Candidates are matched by text (:func:`match_by_text`). When both procedure records are
    given, they may differ only in ``may_differ`` (e.g. the model for a scaling comparison);
    any other difference raises :class:`ProcedureMismatchError` naming it.

    >>> from memclaim.claims.compare import compare_population_claims
    >>> ctl = [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0]
    >>> c = compare_population_claims([-1.0, -2.0, -30.0], ctl, ["a", "b", "c"], ["x", "y", "z"],
    ...                               [-1.0, -20.0, -30.0], ctl, ["a", "b", "c"], ["x", "y", "z"], alphas=["0.1"])
    >>> [(r.only_first, r.only_second, r.difference.estimate) for r in c.rows]
    [(1, 0, 0.3333333333333333)]
    """
    diffs: tuple = ()
    if procedure_first is not None and procedure_second is not None:
        require_same_procedure(
            procedure_first,
            procedure_second,
            ignore=tuple(may_differ),
            what=cast(tuple[str, str], tuple(names)),
        )
        diffs = tuple(procedure_differences(procedure_first, procedure_second))
    s1 = as_scores(first_scores, kind=kind, name=f"{names[0]} candidate scores")
    s2 = as_scores(second_scores, kind=kind, name=f"{names[1]} candidate scores")
    internal = "log-prob" if kind in ("log-prob", "prob") else "score"
    c1 = as_scores(first_controls, kind=kind, name=f"{names[0]} control scores")
    c2 = as_scores(second_controls, kind=kind, name=f"{names[1]} control scores")
    m = match_by_text(
        first_ids, first_texts, second_ids, second_texts, allow_partial=allow_partial, names=names
    )
    rows = []
    for a in alphas:
        t1 = population_test(s1[m.index_first], c1, alpha=a, kind=internal, confidence=confidence)
        t2 = population_test(s2[m.index_second], c2, alpha=a, kind=internal, confidence=confidence)
        rows.append(
            paired_difference(
                t1.claimed,
                t2.claimed,
                alpha_n_first=t1.rate_alpha_n,
                alpha_n_second=t2.rate_alpha_n,
                confidence=confidence,
                names=names,
            )
        )
    return ClaimComparison(
        cast(tuple[str, str], tuple(names)),
        diffs,
        m.n_matched,
        m.dropped_first,
        m.dropped_second,
        tuple(rows),
        tuple(str(a) for a in alphas),
    )
