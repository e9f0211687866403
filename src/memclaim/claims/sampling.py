"""Sampling-based extraction estimates ([EM] App. F.1; Hayes et al. 2025b): when a server gives no
prompt log-probabilities (hosted chat and completion APIs), the probability that one generation
from the prefix reproduces the suffix, q_{θ,φ}(s | p) of [EM] §2 Eq. 1, is estimated from n
generations under the policy: the verbatim match count k ~ Binomial(n, q), with its exact
Clopper-Pearson interval ([EM] D.1), and likewise the near-verbatim rate (at most ε token edits).

What such an estimate supports, and what it does not: it is an interval for one window's
extraction probability (and, over windows, for the fraction extracted within n samples); it is
not a score. The conformal population test ([EM] §3, §4) ranks candidates' scores log q among
the controls' and needs every window's exact score, so an estimate is never fed to it; a
window with k = 0 matches has q somewhere in [0, upper], which no rank can use.

Pure: no I/O, no model; the server side is :mod:`memclaim.scoring.served.sampling`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..validate import in_open_unit, integer
from .intervals import Interval, clopper_pearson

__all__ = [
    "token_edit_distance",
    "WindowEstimate",
    "window_estimate",
    "set_estimate",
    "SamplingRun",
    "ESTIMATE_FILE",
    "ESTIMATE_KIND",
]

ESTIMATE_FILE = "estimate.json"  # what `memclaim score --estimate` writes (no score store)
ESTIMATE_KIND = "memclaim sampling estimate"


def token_edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    """Levenshtein distance between two token sequences (insertions, deletions, substitutions of
    whole tokens; [EM] §6's near-verbatim ε counts edits). Written by hand: the suffixes are a
    few dozen tokens, and the field's string libraries compare characters, not token ids.

    >>> token_edit_distance([1, 2, 3], [1, 2, 3]), token_edit_distance([1, 2, 3], [1, 9, 3, 4])
    (0, 2)
    """
    a, b = list(a), list(b)
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@dataclass(frozen=True)
class WindowEstimate:
    """One window's estimate from ``n`` generations: ``verbatim`` matches and its interval; per
    ε in ``epsilons``, the generations within ε token edits and their intervals."""

    window_id: str
    n: int
    verbatim: int
    interval: Interval
    epsilons: tuple[int, ...] = ()
    near: tuple[int, ...] = ()
    near_intervals: tuple[Interval, ...] = ()

    def to_dict(self) -> dict:
        iv = self.interval
        return {
            "window_id": self.window_id,
            "n": self.n,
            "verbatim": self.verbatim,
            "rate": iv.estimate,
            "lower": iv.lower,
            "upper": iv.upper,
            "near_verbatim": [
                {"epsilon": e, "matches": k, "rate": v.estimate, "lower": v.lower, "upper": v.upper}
                for e, k, v in zip(self.epsilons, self.near, self.near_intervals)
            ],
        }


def window_estimate(
    window_id: str,
    target: Sequence[int],
    generations: Sequence[Sequence[int]],
    *,
    epsilons: Sequence[int] = (),
    confidence: float = 0.95,
) -> WindowEstimate:
    """The estimate of one window's extraction probability from its ``generations`` (token ids,
    each compared with the suffix ``target``): verbatim matches k of n with the Clopper-Pearson
    interval, and per ε the matches within ε edits.

    >>> e = window_estimate("w0", [5, 6, 7], [[5, 6, 7], [5, 6, 8], [1, 2, 3], [5, 6, 7]],
    ...                     epsilons=[1])
    >>> e.verbatim, e.near, round(e.interval.lower, 4), round(e.interval.upper, 4)
    (2, (3,), 0.0676, 0.9324)
    """
    n = len(generations)
    if n == 0:
        raise InputError(
            f"window {window_id!r} has no generations",
            hint="sample at least one (sample:N, N >= 1)",
        )
    confidence = in_open_unit("confidence", confidence)
    eps = tuple(integer("--near-verbatim epsilon", e, minimum=0) for e in epsilons)
    t = list(target)
    d = [token_edit_distance(t, g) for g in generations]
    k = sum(1 for x in d if x == 0)
    near = tuple(sum(1 for x in d if x <= e) for e in eps)
    return WindowEstimate(
        window_id=window_id,
        n=n,
        verbatim=k,
        interval=clopper_pearson(k, n, confidence=confidence),
        epsilons=eps,
        near=near,
        near_intervals=tuple(clopper_pearson(c, n, confidence=confidence) for c in near),
    )


def set_estimate(estimates: Sequence[WindowEstimate], *, confidence: float = 0.95) -> Interval:
    """The fraction of windows reproduced verbatim at least once in their n generations (the
    windows a sampling adversary with budget n extracts), with its Clopper-Pearson interval:
    exact for the population the windows were drawn from at random.

    >>> a = window_estimate("a", [1], [[1], [2]]); b = window_estimate("b", [1], [[2], [2]])
    >>> set_estimate([a, b]).estimate
    0.5
    """
    hit = sum(1 for e in estimates if e.verbatim > 0)
    return clopper_pearson(hit, len(estimates), confidence=confidence)


@dataclass(frozen=True)
class SamplingRun:
    """The estimates of a set of windows: per window (:class:`WindowEstimate`) and the fraction
    of windows reproduced at least once, with the server's identity and the settings."""

    windows: tuple[WindowEstimate, ...]
    extracted: Interval
    n: int
    policy: str
    seed: int
    server: dict
    requests: int

    def to_dict(self) -> dict:
        x = self.extracted
        return {
            "kind": ESTIMATE_KIND,
            "method": "sampling ([EM] App. F.1): verbatim match rate of n generations per window, "
            "Clopper-Pearson intervals",
            "not_a_score": "an interval for each window's extraction probability, not its score "
            "log q: the conformal test (memclaim test) needs scores and refuses it",
            "n": self.n,
            "policy": self.policy,
            "seed": self.seed,
            "seeded": "per request; honoured where the server supports seeds (vLLM, SGLang, "
            "OpenAI best effort)",
            "server": self.server,
            "requests": self.requests,
            "windows_extracted": {
                "count": sum(1 for w in self.windows if w.verbatim > 0),
                "of": len(self.windows),
                "rate": x.estimate,
                "lower": x.lower,
                "upper": x.upper,
                "confidence": x.confidence,
            },
            "windows": [w.to_dict() for w in self.windows],
        }
