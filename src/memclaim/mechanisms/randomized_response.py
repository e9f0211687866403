"""Randomized response on a membership bit, and its BSC(gamma) post-processing.

[MX] App. B.4: "with probability q = e^eps / (1 + e^eps) release B = 1{x* in S}, else 1 - B;
this is exactly eps-DP (likelihood ratios q/(1-q) = e^eps and its reciprocal)". Released as a
model with p_theta(1 | c) = B, its teacher-forcing score reads the bit exactly, so
mem_h = 2q - 1 = tanh(eps/2): the extremal canary of Theorem 4.1 / Remark 4.2, and the
"randomized-response family" of [MX] Fig. 8.

The "BSC(gamma)-post-processed family" of [MX] Fig. 8 passes the released bit through a binary
symmetric channel of crossover gamma, a data-independent kernel, so its advantage is exactly
(1 - 2 gamma) tanh(eps/2), strictly below the bound for gamma > 0 (post-processing, Lemma B.5).

The neighbouring relation is replace-one on the dataset: the mechanism depends on the dataset
only through the membership bit, so any neighbour pair gives identical laws or the RR pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ..errors import DomainError
from ..jsonutil import ResultMixin
from ..validate import in_unit, positive
from .finite import exact_tradeoff, max_privacy_loss, total_variation


def _bits(name: str, bits) -> np.ndarray:
    b = np.asarray(bits)
    if b.dtype == bool:
        return b.astype(np.int8)
    if not np.issubdtype(b.dtype, np.integer) or np.any((b != 0) & (b != 1)):
        raise DomainError(f"{name} must contain only 0/1 (or booleans), got {bits!r}")
    return b.astype(np.int8)


def binary_symmetric_channel(
    bits: Sequence[int] | np.ndarray, *, gamma: float, rng: np.random.Generator
) -> np.ndarray:
    """Flip each bit independently with probability ``gamma`` in [0, 1/2] (BSC(gamma)).

    >>> binary_symmetric_channel([0, 1, 1], gamma=0.0, rng=np.random.default_rng(0)).tolist()
    [0, 1, 1]
    """
    g = in_unit("gamma", gamma)
    if g > 0.5:
        raise DomainError(
            f"gamma (the BSC crossover) must lie in [0, 0.5], got {gamma!r}",
            hint="a crossover above 1/2 is a relabelled channel; use 1 - gamma",
        )
    b = _bits("bits", bits)
    flips = (rng.random(b.shape) < g).astype(np.int8)
    return b ^ flips


@dataclass(frozen=True)
class RandomizedResponse(ResultMixin):
    """eps-DP randomized response on the membership bit ([MX] App. B.4), optionally followed by
    BSC(``crossover``) ([MX] Fig. 8). ``crossover = 0`` is the extremal mechanism."""

    epsilon: float
    crossover: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "epsilon", positive("epsilon", self.epsilon))
        g = in_unit("crossover", self.crossover)
        if g > 0.5:
            raise DomainError(f"crossover must lie in [0, 0.5], got {self.crossover!r}")
        object.__setattr__(self, "crossover", g)

    @property
    def keep_probability(self) -> float:
        """q = e^eps / (1 + e^eps) = expit(eps): probability RR reports the true bit ([MX] B.4)."""
        return float(expit(self.epsilon))

    def prob_one(self, bit: int) -> float:
        """P(released bit = 1 | membership bit), after the optional BSC."""
        if bit not in (0, 1):
            raise DomainError(f"bit must be 0 or 1, got {bit!r}")
        q = self.keep_probability
        p1 = q if bit == 1 else 1.0 - q
        g = self.crossover
        return p1 * (1.0 - g) + (1.0 - p1) * g

    def pmf(self, bit: int) -> np.ndarray:
        """[P(B = 0), P(B = 1)] given the membership bit."""
        p1 = self.prob_one(bit)
        return np.array([1.0 - p1, p1])

    def release(self, bits, *, rng: np.random.Generator) -> np.ndarray:
        """Release one noisy bit per entry of ``bits``: RR, then (if crossover > 0) BSC as a
        separate data-independent step."""
        b = _bits("bits", bits)
        keep = rng.random(b.shape) < self.keep_probability
        out = np.where(keep, b, 1 - b).astype(np.int8)
        if self.crossover > 0:
            out = binary_symmetric_channel(out, gamma=self.crossover, rng=rng)
        return out

    def advantage(self) -> float:
        """Exact memorization advantage of the teacher-forcing score that reads the bit:
        E[B | member] - E[B | non-member] = TV of the two output laws ([MX] Thm. 4.1 attained at
        crossover 0). Computed from the mechanism's own pmf."""
        return total_variation(self.pmf(1), self.pmf(0))

    def privacy_loss(self) -> float:
        """The mechanism's exact epsilon: max |log likelihood ratio| between the two laws
        (equals ``epsilon`` at crossover 0, smaller after the BSC)."""
        return max_privacy_loss(self.pmf(1), self.pmf(0))

    def tradeoff(self, alpha) -> np.ndarray:
        """Exact trade-off T(member law, non-member law)(alpha) (the pair is symmetric)."""
        return exact_tradeoff(self.pmf(1), self.pmf(0), alpha)
