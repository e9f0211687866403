"""The two-sided geometric mechanism on a copy count ([MX] Lemma 4.4, §8.1, Fig. 6 left).

Release Y = c(S) + G where c(S) is the number of copies of the canary in the dataset and G has
the two-sided geometric (discrete Laplace) law P(G = y) = tanh(eps/2) e^{-eps |y|}. A replace-one
step changes the count by at most one, so the release is eps-DP under replace-one (and under
add/remove).

[MX] Lemma 4.4 / §8.1: "the geometric mechanism's shift-k total variation equals eta*_k for every
k, odd included" (the continuous Laplace mechanism matches only even k). The shift-k total
variation is the best-threshold advantage of the test "Y >= t" between counts 0 and k:
TV(G, G + k) = sum_{y < k/2} [g(y) - g(y - k)] = P(ceil(-k/2) <= G <= ceil(k/2) - 1),
because g(y) > g(y - k) iff |y| < |y - k| iff y < k/2.

pmf, cdf and sampling are scipy's ``dlaplace`` (the same law; its sampler is the difference of two
geometric variables).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import DomainError
from ..jsonutil import ResultMixin
from ..validate import integer, positive


@dataclass(frozen=True)
class TwoSidedGeometric(ResultMixin):
    """Two-sided geometric noise with parameter ``epsilon`` (scale 1/epsilon on the integers)."""

    epsilon: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", positive("epsilon", self.epsilon))

    @property
    def _dist(self):
        return stats.dlaplace(self.epsilon)

    # -- the law of the noise -------------------------------------------------------------
    def pmf(self, y) -> np.ndarray:
        return self._dist.pmf(y)

    def logpmf(self, y) -> np.ndarray:
        """log P(G = y) = log tanh(eps/2) - eps |y| (exact in log space, no underflow)."""
        y = np.asarray(y)
        return math.log(math.tanh(self.epsilon / 2.0)) - self.epsilon * np.abs(y).astype(np.float64)

    def cdf(self, y) -> np.ndarray:
        return self._dist.cdf(y)

    def sf(self, y) -> np.ndarray:
        """P(G > y)."""
        return self._dist.sf(y)

    def sample(self, size, *, rng: np.random.Generator) -> np.ndarray:
        """Draw two-sided geometric noise (int64)."""
        return np.asarray(self._dist.rvs(size=size, random_state=rng), dtype=np.int64)

    # -- the mechanism --------------------------------------------------------------------
    def release(self, counts, *, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts: ``counts + G`` with independent noise per entry (int64)."""
        c = np.asarray(counts)
        if not np.issubdtype(c.dtype, np.integer):
            raise DomainError(f"counts must be integers, got dtype {c.dtype}")
        return c.astype(np.int64) + self.sample(c.shape, rng=rng)

    def shift_total_variation(self, k: int) -> float:
        """TV(G, G + k): the mechanism's exact best-threshold advantage between counts 0 and k
        ([MX] Lemma 4.4: equals eta*_k(eps) for every k >= 0)."""
        k = integer("k", k, minimum=0)
        if k == 0:
            return 0.0
        lo = -(k // 2)  # ceil(-k/2)
        hi = (k + 1) // 2 - 1  # ceil(k/2) - 1
        # P(lo <= G <= hi); use the survival function on the upper side for accuracy.
        return float(self._dist.cdf(hi) - self._dist.cdf(lo - 1))

    def threshold_advantage(self, k: int, threshold: int) -> float:
        """Exact advantage P(k + G >= t) - P(G >= t) of the test ``Y >= t`` between counts k and 0."""
        k = integer("k", k, minimum=0)
        t = integer("threshold", threshold)
        return float(self._dist.sf(t - k - 1) - self._dist.sf(t - 1))

    def optimal_thresholds(self, k: int) -> tuple[int, ...]:
        """The thresholds t whose test ``Y >= t`` attains the shift-k TV: t = ceil(k/2), and also
        k/2 + 1 for even k (the outcome y = k/2 has equal likelihood under both counts)."""
        k = integer("k", k, minimum=1)
        t = (k + 1) // 2
        return (t, t + 1) if k % 2 == 0 else (t,)
