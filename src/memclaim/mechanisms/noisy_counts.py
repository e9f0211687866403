"""Geometric noisy counts over candidate secrets, and the Bayes top-m list adversary against them.

This is the release of [MX] §8.1 / Fig. 6 right ("the same pipeline's top-m list adversary") and
of the Zipf-canary / 10-bit-canary numbers there. The data: at most one document with the public
prefix c, (c, z), z in {0..N-1}. The release: for every candidate w the count of documents (c, w),
plus independent two-sided geometric noise (eps). Adding or removing (c, z) changes one count by
one, so the release is eps-DP under **add/remove** (under replace-one of (c, z) by (c, z') two
counts move: 2 eps).

The Bayes top-m adversary. With one-hot counts and noise pmf g(y) proportional to e^{-eps |y|},
P(z = w | Y) is proportional to pi(w) g(Y_w - 1)/g(Y_w) = pi(w) e^{+eps} if Y_w >= 1 and
pi(w) e^{-eps} otherwise. So the posterior depends on the release only through the signs
b_w = 1{Y_w >= 1} (which are randomized response on each candidate's indicator: P(b = 1) =
e^eps/(1 + e^eps) for the secret, 1/(1 + e^eps) for the others), and the list of the m largest
posterior masses (ties broken uniformly at random) maximizes E[Ext] = E[posterior mass of the
list] over all lists of size m. Its success probability is what [MX] §8.1 measures:
P(z in list) <= 1 - f_eps(kappa_pi(m)) by Theorem 5.1(i).

Exact success (:func:`top_m_success_exact`). Fix the secret u and its sign. Every other candidate
w is, depending only on its own sign (boosted with probability r = P(G >= 1)), above, tied with,
or below u's score; grouping the others by (score if boosted, score if not) relative to u's score
gives X = #above = A0 + Bin(n_ab, r) + Bin(n_at, r) and Y = #tied = (n_at - that last binomial)
+ Bin(n_tb, r), three independent binomials, and P(u listed | X, Y) = min(1, (m - X)/(Y + 1)) for
X < m. Summing over u (grouped by identical prior mass) and u's sign is exact and costs
O(#distinct prior values * (m^2 + N)). Hand-written: no library computes order statistics of this
randomized-response list; the tests check it against brute-force enumeration of all sign vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from ..errors import DomainError
from ..validate import integer, positive
from .geometric import TwoSidedGeometric

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

#: Two posterior scores closer than this (relative, in log space) count as tied, in both the exact
#: formula and the simulation, so that they break ties the same way.
TIE_RTOL = 1e-12


def _prior(prior) -> np.ndarray:
    p = np.asarray(prior, dtype=np.float64)
    if p.ndim != 1 or p.size < 2:
        raise DomainError(
            f"prior must be a 1-d probability vector over >= 2 candidates, got shape {p.shape}"
        )
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise DomainError(
            "prior must be strictly positive and finite on every candidate",
            hint="drop candidates of prior mass 0: they are never listed and never the secret",
        )
    s = float(p.sum())
    if abs(s - 1.0) > 1e-9:
        raise DomainError(f"prior must sum to 1, sums to {s!r}")
    return p


def _check_m(m, n) -> int:
    m = integer("m", m, minimum=1)
    if m >= n:
        raise DomainError(
            f"the list budget m = {m} must be smaller than the number of candidates {n}",
            hint="with m >= N the list exhausts the support and extraction is trivially 1",
        )
    return m


def score_ranks(prior: ArrayLike, *, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer ranks of the posterior scores log pi(w) - eps (sign 0) and log pi(w) + eps (sign 1),
    with scores within TIE_RTOL merged into one rank. Equal ranks are ties.

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import score_ranks
    >>> r0, r1 = score_ranks(np.array([0.5, 0.25, 0.25]), epsilon=1.0)
    >>> r0.tolist(), r1.tolist()  # the two 0.25's tie
    ([1, 0, 0], [3, 2, 2])
    """
    p = _prior(prior)
    eps = positive("epsilon", epsilon)
    lp = np.log(p)
    vals = np.concatenate([lp - eps, lp + eps])
    order = np.argsort(vals, kind="stable")
    sv = vals[order]
    gap = np.diff(sv) > TIE_RTOL * np.maximum(1.0, np.abs(sv[1:]))
    rank_sorted = np.concatenate([[0], np.cumsum(gap)])
    ranks = np.empty_like(rank_sorted)
    ranks[order] = rank_sorted
    n = p.size
    return ranks[:n], ranks[n:]


@dataclass(frozen=True)
class NoisyHistogramRelease:
    """eps-DP (add/remove) geometric noisy counts of the prefix-c documents over N candidates."""

    n_candidates: int
    epsilon: float

    def __post_init__(self):
        object.__setattr__(
            self, "n_candidates", integer("n_candidates", self.n_candidates, minimum=2)
        )
        object.__setattr__(self, "epsilon", positive("epsilon", self.epsilon))

    @property
    def noise(self) -> TwoSidedGeometric:
        return TwoSidedGeometric(self.epsilon)

    def release(self, secrets, *, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts for each secret in ``secrets`` (one row per secret; -1 = no prefix-c
        document in the dataset), shape (len(secrets), N), int64."""
        z = np.asarray(secrets)
        N = self.n_candidates
        if z.ndim != 1 or not np.issubdtype(z.dtype, np.integer) or np.any((z < -1) | (z >= N)):
            raise DomainError(
                f"secrets must be integers in [-1, {N}) (-1: absent), got {secrets!r}"
            )
        counts = np.zeros((z.size, N), dtype=np.int64)
        present = z >= 0
        counts[np.nonzero(present)[0], z[present]] = 1
        return self.noise.release(counts, rng=rng)

    def sign_probabilities(self) -> tuple[float, float]:
        """(P(Y >= 1 | count 1), P(Y >= 1 | count 0)) = (P(G >= 0), P(G >= 1))."""
        g = self.noise
        return float(g.sf(-1)), float(g.sf(0))


def _tiebreak_keys(noisy, prior, epsilon, rng):
    rank0, rank1 = score_ranks(prior, epsilon=epsilon)
    signs = np.asarray(noisy) >= 1
    ranks = np.where(signs, rank1[None, :], rank0[None, :]).astype(np.float64)
    # Uniform tie-breaking: distinct ranks are >= 1 apart, the jitter lies in [0, 0.5).
    return ranks + 0.5 * rng.random(ranks.shape)


def bayes_top_m(
    noisy: np.ndarray, prior: ArrayLike, *, epsilon: float, m: int, rng: np.random.Generator
) -> np.ndarray:
    """The Bayes-optimal size-m lists for noisy-count releases ``noisy`` (shape (n, N)): the m
    candidates of largest posterior mass, ties broken uniformly at random. Shape (n, m), each row
    in decreasing posterior order.

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import bayes_top_m
    >>> noisy = np.array([[0, 1, 0], [0, 0, 3]])  # two releases of the noisy histogram over 3 candidates
    >>> bayes_top_m(noisy, np.array([0.5, 0.3, 0.2]), epsilon=1.0, m=1, rng=np.random.default_rng(0)).tolist()
    [[1], [2]]
    """
    p = _prior(prior)
    y = np.atleast_2d(np.asarray(noisy))
    if y.shape[1] != p.size:
        raise DomainError(f"noisy counts have {y.shape[1]} candidates but the prior has {p.size}")
    m = _check_m(m, p.size)
    keys = _tiebreak_keys(y, p, epsilon, rng)
    top = np.argpartition(-keys, m - 1, axis=1)[:, :m]
    order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


def bayes_top_m_hits(
    noisy: np.ndarray,
    secrets: ArrayLike,
    prior: ArrayLike,
    *,
    epsilon: float,
    m: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Whether the secret is in the Bayes top-m list, for each release (bool array). Same law as
    ``secret in bayes_top_m(...)``, computed by counting the keys above the secret's key.

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import bayes_top_m_hits
    >>> noisy = np.array([[0, 1, 0], [0, 0, 3]])
    >>> bayes_top_m_hits(noisy, np.array([1, 0]), np.array([0.5, 0.3, 0.2]), epsilon=1.0, m=1,
    ...                  rng=np.random.default_rng(0)).tolist()
    [True, False]
    """
    p = _prior(prior)
    y = np.atleast_2d(np.asarray(noisy))
    z = np.asarray(secrets)
    m = _check_m(m, p.size)
    keys = _tiebreak_keys(y, p, epsilon, rng)
    kz = keys[np.arange(z.size), z]
    return (keys > kz[:, None]).sum(axis=1) < m


def simulate_top_m_success(
    prior: ArrayLike,
    *,
    epsilon: float,
    m: int,
    n_trials: int,
    rng: np.random.Generator,
    batch: int = 4096,
) -> np.ndarray:
    """Monte-Carlo of the full pipeline: z ~ prior, the noisy histogram release, the Bayes
    top-m list. Returns the per-trial success indicators (bool, length n_trials).

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import simulate_top_m_success, top_m_success_exact
    >>> prior = np.array([0.5, 0.3, 0.2])
    >>> hits = simulate_top_m_success(prior, epsilon=1.0, m=1, n_trials=2000, rng=np.random.default_rng(0))
    >>> bool(abs(hits.mean() - top_m_success_exact(prior, epsilon=1.0, m=1)) < 0.05)
    True
    """
    p = _prior(prior)
    n_trials = integer("n_trials", n_trials, minimum=0)
    batch = integer("batch", batch, minimum=1)
    rel = NoisyHistogramRelease(p.size, epsilon)
    out = np.empty(n_trials, dtype=bool)
    for s in range(0, n_trials, batch):
        e = min(n_trials, s + batch)
        z = rng.choice(p.size, size=e - s, p=p)
        noisy = rel.release(z, rng=rng)
        out[s:e] = bayes_top_m_hits(noisy, z, p, epsilon=epsilon, m=m, rng=rng)
    return out


def simulate_top_m_success_uniform(
    n_candidates: int, *, epsilon: float, m: int, n_trials: int, rng: np.random.Generator
) -> np.ndarray:
    """Exact-in-law Monte-Carlo of :func:`simulate_top_m_success` for the uniform prior at O(1) cost
    per trial. Under a uniform prior the Bayes list depends on the release only through the secret's
    sign (its noisy count >= 1, drawn here from the geometric noise itself) and the number B of other
    candidates with a positive sign (Binomial(N - 1, P(G >= 1)), by exchangeability); the list is
    then the signed candidates first, in uniformly random order. Used where N (up to 2^16 in the
    entropy sweep) makes drawing every noisy count too slow; the tests check it against the full
    simulation.

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import simulate_top_m_success_uniform, top_m_success_exact
    >>> hits = simulate_top_m_success_uniform(64, epsilon=1.0, m=4, n_trials=4000, rng=np.random.default_rng(0))
    >>> bool(abs(hits.mean() - top_m_success_exact(np.full(64, 1 / 64), epsilon=1.0, m=4)) < 0.03)
    True
    """
    N = integer("n_candidates", n_candidates, minimum=2)
    m = _check_m(m, N)
    n_trials = integer("n_trials", n_trials, minimum=0)
    rel = NoisyHistogramRelease(N, epsilon)
    _, r = rel.sign_probabilities()
    sign_z = (1 + rel.noise.sample(n_trials, rng=rng)) >= 1
    boosted_others = rng.binomial(N - 1, r, size=n_trials)
    # Secret signed: it ties with the B signed others (B + 1 items on top), position uniform.
    # Secret unsigned: the B signed others are above, it ties with the N - 1 - B unsigned others.
    n_above = np.where(sign_z, 0, boosted_others)
    n_tied = np.where(sign_z, boosted_others + 1, N - boosted_others)
    position = np.floor(rng.random(n_trials) * n_tied).astype(np.int64)
    return n_above + position < m


def top_m_success_exact(prior: ArrayLike, *, epsilon: float, m: int) -> float:
    """Exact P(z in Bayes top-m list) for z ~ prior under the noisy histogram release (see the
    module docstring for the derivation).

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import top_m_success_exact
    >>> round(top_m_success_exact(np.full(1024, 1 / 1024), epsilon=1.0, m=4), 4)  # a 10-bit canary: about 1%
    0.0106
    """
    p = _prior(prior)
    eps = positive("epsilon", epsilon)
    N = p.size
    m = _check_m(m, N)
    q, r = NoisyHistogramRelease(N, eps).sign_probabilities()
    rank0, rank1 = score_ranks(p, epsilon=eps)
    s0 = np.sort(rank0)
    s1 = np.sort(rank1)

    def n_lt(sorted_ranks, v):
        return int(np.searchsorted(sorted_ranks, v, side="left"))

    def n_le(sorted_ranks, v):
        return int(np.searchsorted(sorted_ranks, v, side="right"))

    pairs, inverse = np.unique(np.stack([rank0, rank1], axis=1), axis=0, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=p, minlength=len(pairs))
    total = 0.0
    for (r0, r1), w in zip(pairs, mass):
        for sign, p_sign in ((1, q), (0, 1.0 - q)):
            s = r1 if sign else r0
            a0 = N - n_le(s0, s)  # rank0 > s: above whatever their sign
            n_at = n_le(s0, s) - n_lt(s0, s)  # rank0 == s: above if signed, else tied
            n_tb = n_le(s1, s) - n_lt(s1, s)  # rank1 == s: tied if signed, else below
            n_ab = (N - n_le(s1, s)) - a0 - n_at  # rank0 < s < rank1: above iff signed
            if sign:
                n_tb -= 1  # u itself (rank1 == s)
            else:
                n_at -= 1  # u itself (rank0 == s)
            if a0 >= m:
                continue
            room = m - a0  # X - a0 must stay below room
            a1 = np.arange(room)
            a2 = np.arange(min(n_at, room - 1) + 1)
            t = np.arange(n_tb + 1)
            p1 = stats.binom.pmf(a1, n_ab, r)
            p2 = stats.binom.pmf(a2, n_at, r)
            pt = stats.binom.pmf(t, n_tb, r)
            x = a0 + a1[:, None, None] + a2[None, :, None]
            y = (n_at - a2)[None, :, None] + t[None, None, :]
            val = np.where(x < m, np.minimum(1.0, (m - x) / (y + 1.0)), 0.0)
            total += w * p_sign * float(np.einsum("i,j,k,ijk->", p1, p2, pt, val))
    return float(min(total, 1.0))


def zipf_prior(n_candidates: int, *, exponent: float) -> np.ndarray:
    """pi(i) proportional to (i + 1)^-exponent on {0..N-1} (scipy's bounded ``zipfian``).

    >>> from memclaim.mechanisms.noisy_counts import zipf_prior
    >>> zipf_prior(3, exponent=1.0).round(4).tolist()  # 1, 1/2, 1/3 normalized
    [0.5455, 0.2727, 0.1818]
    """
    N = integer("n_candidates", n_candidates, minimum=2)
    a = positive("exponent", exponent)
    return stats.zipfian.pmf(np.arange(1, N + 1), a, N)


def min_entropy_bits(prior: ArrayLike) -> float:
    """H_inf(pi) = -log2 max pi.

    >>> import numpy as np
    >>> from memclaim.mechanisms.noisy_counts import min_entropy_bits
    >>> min_entropy_bits(np.full(1024, 1 / 1024))
    10.0
    """
    return float(-np.log2(np.max(_prior(prior))))


def top_m_mass(prior: ArrayLike, *, m: int) -> float:
    """kappa_pi(m) = the prior mass of the m most likely candidates ([MX] Def. 3.3).

    >>> from memclaim.mechanisms.noisy_counts import top_m_mass
    >>> round(top_m_mass([0.5, 0.3, 0.2], m=2), 6)
    0.8
    """
    p = _prior(prior)
    m = integer("m", m, minimum=1)
    if m >= p.size:
        return 1.0
    return float(np.sort(p)[::-1][:m].sum())
