"""Exact privacy profile of a pair of finite output laws (used to self-check every mechanism).

For two laws P, Q on a finite outcome space, the trade-off function T(P, Q)(alpha) is the
smallest type-II error 1 - E_Q[phi] of a test phi with type-I error E_P[phi] <= alpha
([MX] §3.1, following f-DP [6]). By Neyman-Pearson it is piecewise linear: reject outcomes in
decreasing order of the likelihood ratio Q/P, randomizing on the boundary outcome.

Hand-written because no library in the stack (scipy, dp-accounting, opacus) computes the exact
trade-off curve of two explicit finite distributions; dp-accounting's PLD works with privacy-loss
distributions of composed mechanisms, not with an arbitrary pair of pmfs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import DomainError


def _check_pmf(name: str, p) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise DomainError(f"{name} must be a non-empty 1-d probability vector, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise DomainError(f"{name} must have finite non-negative entries, got {p!r}")
    s = float(p.sum())
    if abs(s - 1.0) > 1e-9:
        raise DomainError(
            f"{name} must sum to 1, sums to {s!r}", hint="normalize the vector before passing it"
        )
    return p


def exact_tradeoff(
    p: Sequence[float] | np.ndarray,
    q: Sequence[float] | np.ndarray,
    alpha: float | Sequence[float] | np.ndarray,
) -> np.ndarray:
    """T(P, Q)(alpha) for finite laws ``p`` and ``q`` on the same outcomes (vectorized in alpha).

    Type-I error is measured under P, type-II under Q (the convention of [MX] Lemma 3.1:
    E_P[phi] <= 1 - f(E_Q[phi]) is equivalent to T(Q, P) >= f).

    >>> exact_tradeoff([0.5, 0.5], [0.5, 0.5], [0.0, 0.25, 1.0]).tolist()  # identical laws: 1 - alpha
    [1.0, 0.75, 0.0]
    """
    p = _check_pmf("p", p)
    q = _check_pmf("q", q)
    if p.shape != q.shape:
        raise DomainError(f"p and q must have the same length, got {p.size} and {q.size}")
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise DomainError(f"alpha must lie in [0, 1], got {alpha!r}")
    # Likelihood ratio Q/P, +inf where P = 0 < Q (those outcomes are rejected at no type-I cost).
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, q / np.where(p > 0, p, 1.0), np.where(q > 0, np.inf, 0.0))
    order = np.argsort(-ratio, kind="stable")
    cum_p = np.concatenate([[0.0], np.cumsum(p[order])])
    cum_q = np.concatenate([[0.0], np.cumsum(q[order])])
    # Outcomes with P = 0 come first: at alpha = 0 the power is their Q-mass (the last knot with
    # cum_p == 0), so interpolate on the upper envelope by taking, for repeated abscissae, the
    # largest ordinate (np.interp takes the first; reverse-unique keeps the last).
    xs, idx = np.unique(cum_p[::-1], return_index=True)
    ys = cum_q[::-1][idx]
    power = np.interp(np.clip(a, 0.0, 1.0), xs, ys)
    return np.clip(1.0 - power, 0.0, 1.0)


def max_privacy_loss(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """max over outcomes of |log P(o)/Q(o)| (inf if the supports differ): the smallest epsilon
    for which the pair is epsilon-indistinguishable in both orders.

    >>> round(max_privacy_loss([0.75, 0.25], [0.25, 0.75]), 6)  # log 3
    1.098612
    """
    p = _check_pmf("p", p)
    q = _check_pmf("q", q)
    if p.shape != q.shape:
        raise DomainError(f"p and q must have the same length, got {p.size} and {q.size}")
    both = (p > 0) & (q > 0)
    if np.any((p > 0) != (q > 0)):
        return float("inf")
    if not np.any(both):
        return 0.0
    return float(np.max(np.abs(np.log(p[both]) - np.log(q[both]))))


def total_variation(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """TV(P, Q) = sum_o max(0, P(o) - Q(o)).

    >>> total_variation([0.75, 0.25], [0.25, 0.75])
    0.5
    """
    p = _check_pmf("p", p)
    q = _check_pmf("q", q)
    if p.shape != q.shape:
        raise DomainError(f"p and q must have the same length, got {p.size} and {q.size}")
    return float(np.maximum(p - q, 0.0).sum())
