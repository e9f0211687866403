"""The subset-release gadget of [MX] Lemma 5.2: f-DP (add/remove) and extraction = 1 - f(m/N).

[MX] Lemma 5.2: let pi be uniform on {1, ..., N}, 1 <= m < N, f symmetric, and
a = (1 - f(m/N) - m/N) / (1 - m/N) in [0, 1]. Release, when the dataset contains exactly one
prefix-c document (c, z), a size-m candidate set C ~ a U_{z} + (1 - a) U; otherwise release
C ~ U, where U is uniform on the size-m subsets and U_{z} uniform on those containing z. The
protocol that outputs C succeeds with probability a + (1 - a) kappa = 1 - f(kappa), kappa = m/N
(App. C.3), attaining Theorem 5.1(i) on a dense set of baselines.

The neighbouring relation is add/remove: every neighbour pair of output laws is (P_z, Q) or
identical. Candidates are numbered 0..N-1 here.

Sampling m-subsets uses Floyd's algorithm vectorized over draws (exact uniform m-subsets in
O(m^2) per draw, without materializing {0..N-1}); numpy's ``Generator.choice`` draws one subset per
call, which is too slow for Monte-Carlo over 10^5-10^6 releases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import DomainError
from ..validate import integer
from .finite import exact_tradeoff


def uniform_subsets(
    n_items: int, size: int, n_draws: int, *, rng: np.random.Generator
) -> np.ndarray:
    """``n_draws`` independent uniform ``size``-subsets of {0..n_items-1}, shape (n_draws, size),
    each row sorted. Floyd's algorithm: for j = n-size..n-1 draw t ~ U{0..j}; insert t if new,
    else insert j.

    >>> import numpy as np
    >>> from memclaim.mechanisms.gadget import uniform_subsets
    >>> s = uniform_subsets(10, 3, 4, rng=np.random.default_rng(0))
    >>> s.shape, bool(np.all(np.diff(s, axis=1) > 0))  # rows sorted, no repeats
    ((4, 3), True)
    """
    n = integer("n_items", n_items, minimum=1)
    s = integer("size", size, minimum=0, maximum=n)
    d = integer("n_draws", n_draws, minimum=0)
    out = np.empty((d, s), dtype=np.int64)
    for col, j in enumerate(range(n - s, n)):
        t = rng.integers(0, j + 1, size=d)
        seen = (out[:, :col] == t[:, None]).any(axis=1) if col else np.zeros(d, dtype=bool)
        out[:, col] = np.where(seen, j, t)
    out.sort(axis=1)
    return out


@dataclass(frozen=True)
class SubsetReleaseGadget:
    """[MX] Lemma 5.2 for a symmetric trade-off function ``tradeoff`` (a callable alpha -> f(alpha),
    e.g. ``functools.partial(memclaim.privacy.tradeoff.f_eps, epsilon=1.0)``)."""

    n_candidates: int
    m: int
    tradeoff: Callable[[float], float]

    def __post_init__(self):
        n = integer("n_candidates", self.n_candidates, minimum=2)
        m = integer("m", self.m, minimum=1)
        if m >= n:
            raise DomainError(
                f"the gadget needs 1 <= m < N, got m = {m}, N = {n}",
                hint="with m >= N the list exhausts the support and extraction is trivially 1",
            )
        object.__setattr__(self, "n_candidates", n)
        object.__setattr__(self, "m", m)
        if not callable(self.tradeoff):
            raise DomainError(
                f"tradeoff must be a callable alpha -> f(alpha), got {self.tradeoff!r}"
            )
        kappa = m / n
        fk = float(self.tradeoff(kappa))
        if not np.isfinite(fk) or fk < 0 or fk > 1 - kappa + 1e-12:
            raise DomainError(
                f"tradeoff({kappa!r}) = {fk!r} is not a trade-off value: need 0 <= f(kappa) <= 1 - kappa"
            )
        ffk = float(self.tradeoff(min(max(fk, 0.0), 1.0)))
        if ffk > kappa + 1e-12:
            # [MX] App. C.3 uses f(f(kappa)) <= kappa (Lemma C.1), which holds for symmetric f.
            raise DomainError(
                f"tradeoff is not symmetric at kappa = {kappa!r}: f(f(kappa)) = {ffk!r} > kappa",
                hint="pass a symmetric trade-off function (f equal to its inverse), e.g. f_eps",
            )

    @property
    def kappa(self) -> float:
        """The oblivious baseline m/N of the uniform prior ([MX] Def. 3.3)."""
        return self.m / self.n_candidates

    def _power(self, alpha: float) -> float:
        """1 - f(alpha); uses ``tradeoff.power`` when the curve offers it (no cancellation at tiny
        alpha, e.g. :class:`memclaim.privacy.tradeoff.TradeOff`)."""
        power = getattr(self.tradeoff, "power", None)
        return float(power(alpha)) if callable(power) else 1.0 - float(self.tradeoff(alpha))

    def mixing_weight(self) -> float:
        """a = (1 - f(kappa) - kappa) / (1 - kappa)  ([MX] Lemma 5.2)."""
        k = self.kappa
        a = (self._power(k) - k) / (1.0 - k)
        return float(min(max(a, 0.0), 1.0))

    def success_probability(self) -> float:
        """P(z in C) under the planted release: a + (1 - a) kappa = 1 - f(kappa) ([MX] App. C.3)."""
        a = self.mixing_weight()
        return a + (1.0 - a) * self.kappa

    def release_many(
        self, secrets, *, rng: np.random.Generator, n: int | None = None
    ) -> np.ndarray:
        """Releases for an array of secrets in {0..N-1} (one row per secret), or, with
        ``secrets=None`` and ``n`` given, n releases of the baseline law Q. Shape (rows, m)."""
        N, m = self.n_candidates, self.m
        if secrets is None:
            if n is None:
                raise DomainError("release_many(None) needs n, the number of baseline releases")
            return uniform_subsets(N, m, integer("n", n, minimum=0), rng=rng)
        z = np.asarray(secrets)
        if z.ndim != 1 or not np.issubdtype(z.dtype, np.integer) or np.any((z < 0) | (z >= N)):
            raise DomainError(
                f"secrets must be a 1-d array of integers in [0, {N}), got {secrets!r}"
            )
        d = z.size
        planted = rng.random(d) < self.mixing_weight()
        out = uniform_subsets(N, m, d, rng=rng)
        # U_{z}: {z} together with a uniform (m-1)-subset of the other N-1 candidates.
        others = uniform_subsets(N - 1, m - 1, d, rng=rng)
        others = others + (others >= z[:, None])  # skip z: {0..N-2} -> {0..N-1} \ {z}
        with_z = np.sort(np.concatenate([z[:, None], others], axis=1), axis=1)
        out[planted] = with_z[planted]
        return out

    def release(self, secret: int | None, *, rng: np.random.Generator) -> np.ndarray:
        """One release: the planted law P_z if ``secret`` is an int, else the baseline Q."""
        if secret is None:
            return self.release_many(None, rng=rng, n=1)[0]
        return self.release_many(np.array([secret]), rng=rng)[0]

    def outcome_laws(self) -> tuple[np.ndarray, np.ndarray]:
        """(P_z, Q) on the two likelihood-ratio classes {C contains z}, {C misses z}: every
        output set in a class has the same ratio, so this pair has the trade-off of (P_z, Q)."""
        a, k = self.mixing_weight(), self.kappa
        p = np.array([a + (1 - a) * k, (1 - a) * (1 - k)])
        q = np.array([k, 1 - k])
        return p, q

    def pair_tradeoffs(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        """Exact T(P_z, Q)(alpha) and T(Q, P_z)(alpha); f-DP requires both >= f ([MX] App. C.3)."""
        p, q = self.outcome_laws()
        return exact_tradeoff(p, q, alpha), exact_tradeoff(q, p, alpha)
