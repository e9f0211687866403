"""The Bernoulli staircase on the copy count, which attains eta*_k ([MX] Lemma 4.4, App. B.5).

[MX] App. B.5, Step 3: fix the optimal orbit b_0 <= b_1 <= ... <= b_k of the cap map
f_bar(b) = min(e^eps b, 1 - e^-eps (1 - b)) (Lemma 4.4) and, on input S, draw
B ~ Bernoulli(b_{min(c(S), k)}) where c(S) counts the copies of the canary; release the model
theta_B with p_theta(1 | c) = B. Adjacent counts give the pair (Bernoulli(b_i), Bernoulli(b_{i+1}))
with b_{i+1} <= f_bar(b_i) and b_i <= b_{i+1}, so the mechanism is eps-DP under replace-one on all
datasets, and the teacher-forcing score reads B exactly: mem = b_k - b_0 = eta*_k(eps).

The orbit starts at the maximizer x_o = c* e^{-floor(k/2) eps} with breakpoint c* = 1/(e^eps + 1)
(Step 4: the lower branch is used while b_i <= c*, exactly floor(k/2) times up to c*, then the
upper branch). For even k any start in the flat region j = k/2 is optimal; this one is its left
end. The levels are computed with the two branches of f_bar in closed form, keeping 1 - b_i
separately so that levels near 1 keep full relative precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DomainError
from ..jsonutil import ResultMixin
from ..numeric import log1mexp
from ..validate import integer, positive
from .finite import exact_tradeoff


@dataclass(frozen=True)
class BernoulliStaircase(ResultMixin):
    """eps-DP (replace-one) Bernoulli release of min(count, k) that attains eta*_k."""

    epsilon: float
    k: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", positive("epsilon", self.epsilon))
        object.__setattr__(self, "k", integer("k", self.k, minimum=1))

    def _log_levels(self) -> tuple[np.ndarray, np.ndarray]:
        """(log b_i, log(1 - b_i)) for i = 0..k along the optimal orbit ([MX] App. B.5 Step 4)."""
        eps, k = self.epsilon, self.k
        h = k // 2
        i = np.arange(k + 1, dtype=np.float64)
        log_cstar = -float(
            np.logaddexp(0.0, eps)
        )  # log 1/(E + 1), finite for any eps (E overflows past 709)
        log_1m_cstar = -float(np.logaddexp(0.0, -eps))  # log E/(E + 1), without cancellation
        # Lower branch b_{i+1} = E b_i from x_o = c* E^{-h}: b_i = c* E^{i - h} for i <= h.
        # Upper branch 1 - b_{i+1} = (1 - b_i)/E from b_h = c*: 1 - b_i = (1 - c*) E^{h - i}, i >= h.
        # (For odd k the step from b_h = c* is on the breakpoint, where both branches agree.)
        log_b = np.where(i <= h, log_cstar + eps * (i - h), np.nan)
        log_1mb = np.where(i >= h, log_1m_cstar + eps * (h - i), np.nan)
        # Fill the complementary logs: log(1 - b) and log b = log(1 - (1 - b)) (memclaim.numeric.log1mexp).
        lo = i <= h
        log_1mb[lo & (i < h)] = log1mexp(log_b[lo & (i < h)])
        hi = i > h
        log_b[hi] = log1mexp(log_1mb[hi])
        return log_b, log_1mb

    def levels(self) -> np.ndarray:
        """b_0, ..., b_k: P(B = 1) at copy counts 0, ..., k (counts above k use b_k)."""
        log_b, _ = self._log_levels()
        return np.exp(log_b)

    def prob_one(self, counts) -> np.ndarray:
        c = np.asarray(counts)
        if not np.issubdtype(c.dtype, np.integer) or np.any(c < 0):
            raise DomainError(f"counts must be non-negative integers, got {counts!r}")
        return self.levels()[np.minimum(c, self.k)]

    def release(self, counts, *, rng: np.random.Generator) -> np.ndarray:
        """One Bernoulli(b_{min(count, k)}) bit per count (int8)."""
        p = self.prob_one(counts)
        return (rng.random(p.shape) < p).astype(np.int8)

    def advantage(self) -> float:
        """b_k - b_0, the advantage of the bit-reading score between k copies and none
        (= eta*_k(eps), [MX] Lemma 4.4). Computed as (1 - b_0) - (1 - b_k) for precision."""
        _, log_1mb = self._log_levels()
        return float(math.exp(log_1mb[0]) - math.exp(log_1mb[-1]))

    def privacy_loss(self) -> float:
        """The mechanism's exact epsilon under replace-one: the largest |log likelihood ratio|
        between the laws at adjacent counts (equal counts give identical laws)."""
        # In log space: b_i near 1 would lose the digits of 1 - b_i.
        log_b, log_1mb = self._log_levels()
        up = np.abs(np.diff(log_b))  # |log b_{i+1} - log b_i|
        down = np.abs(np.diff(log_1mb))  # |log(1 - b_i) - log(1 - b_{i+1})|
        return float(max(up.max(), down.max()))

    def tradeoff(self, i: int, j: int, alpha) -> np.ndarray:
        """Exact trade-off T(law at count i, law at count j)(alpha)."""
        lb = self.levels()
        i = min(integer("i", i, minimum=0), self.k)
        j = min(integer("j", j, minimum=0), self.k)
        return exact_tradeoff([1 - lb[i], lb[i]], [1 - lb[j], lb[j]], alpha)
