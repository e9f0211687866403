"""Construction I of [MX] Theorem 6.1: the uniform camouflage tree (v, k, L) (App. D.1).

The probability space ([MX] App. D.1). Fix 2 <= k < v and L; the secret is z ~ Unif(V^L). A
tree theta assigns to every node (prefix) y in V^{<L} of the depth-L tree rooted at the public
prefix c a support S(y), a k-subset of V, and the uniform conditional on it. Trained with
x* = (c, z), the law P_z draws S = {z_t} + D_t with D_t ~ Unif(k-1 subsets of V minus z_t) at each
on-path node c z_{<t}, and S ~ Unif(k-subsets of V) at every other node; trained without x*, the
law Q draws every node uniformly. The gamma-smoothed variant mixes every conditional with mass
gamma of the uniform distribution on V (on-support (1-gamma)/k + gamma/v, off-support gamma/v).

Lemma D.1: (1) exactly k^L paths survive (w_t in S(c w_{<t}) for all t) and z is one of them;
(2) the posterior of z given the whole released model is uniform on the survivors; (3) the
marginal law of theta under z ~ Unif(V^L) equals Q. Hence Ext <= m k^-L for every white-box
protocol, while the teacher-forcing memorization is exactly 1/k - 1/v (Theorem 6.1(i)).

Representation. The tree has (v^L - 1)/(v - 1) nodes, so it is never materialized: each node's
support is a pseudorandom function of (seed, node label) — the compact variant of [MX] Remark D.5
— computed with the splitmix64 mixer, vectorized in numpy, identical across platforms and numpy
versions. A node's support is the first k candidates in the order of v pseudorandom 64-bit keys
(a uniform k-subset up to the PRF assumption); on the secret's path the true token's key is forced
to the front, so the other k - 1 members are a uniform (k-1)-subset of the remaining tokens.
Queries therefore work for any L; what needs care is **enumeration**: the k^L surviving paths and
the v^L completions are enumerated exactly only below explicit limits, beyond which the methods
refuse with a DomainError, and :meth:`CamouflageTree.sample_surviving_paths` samples survivors
(which, by Lemma D.1(2), is sampling the exact posterior) instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import special, stats

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..validate import in_unit, integer

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

#: Default ceilings for exact enumeration (number of surviving paths k^L, number of completions v^L).
MAX_SURVIVORS = 1 << 20
MAX_COMPLETIONS = 1 << 22

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_DOMAIN = _U64(0x6D656D636C61696D)  # "memclaim": separates this PRF from other uses of the seed


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (Steele, Lea, Flood 2014) on uint64 arrays (wrapping arithmetic)."""
    z = np.asarray(x, dtype=_U64) + _GOLDEN
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


@functools.lru_cache(maxsize=4096)
def _root_key(seed: int) -> np.uint64:
    return _splitmix64(np.array([seed], dtype=_U64) ^ _DOMAIN)[0]


@functools.lru_cache(maxsize=64)
def _salt(v: int) -> np.ndarray:
    """Per-token salts: node key ^ salt[u] is hashed into token u's sort key."""
    out = _splitmix64(np.arange(1, v + 1, dtype=_U64) * _GOLDEN)
    out.setflags(write=False)
    return out


def paths_to_index(paths: ArrayLike, *, v: int) -> np.ndarray:
    """Lexicographic index sum_t w_t v^(L-1-t) of each row of ``paths`` (int64; for v^L < 2^63).

    >>> from memclaim.mechanisms.camouflage import paths_to_index
    >>> paths_to_index([[0, 0], [1, 2], [2, 2]], v=3).tolist()  # base-3 digits
    [0, 5, 8]
    """
    w = np.atleast_2d(np.asarray(paths, dtype=np.int64))
    idx = np.zeros(w.shape[0], dtype=np.int64)
    for t in range(w.shape[1]):
        idx = idx * v + w[:, t]
    return idx


def index_to_paths(index: ArrayLike, *, v: int, L: int) -> np.ndarray:
    """Inverse of :func:`paths_to_index`: shape (n, L).

    >>> from memclaim.mechanisms.camouflage import index_to_paths
    >>> index_to_paths([0, 5, 8], v=3, L=2).tolist()
    [[0, 0], [1, 2], [2, 2]]
    """
    idx = np.asarray(index, dtype=np.int64).copy()
    out = np.empty((idx.size, L), dtype=np.int64)
    for t in range(L - 1, -1, -1):
        out[:, t] = idx % v
        idx //= v
    return out


def _check_count(name: str, count: int, limit: int, what: str, hint: str):
    if count > limit:
        raise DomainError(
            f"{what}: {name} = {count} exceeds the enumeration limit {limit}", hint=hint
        )


def enumerate_completion_logprobs(
    next_logprobs: Callable[[np.ndarray], np.ndarray],
    *,
    v: int,
    L: int,
    max_completions: int = MAX_COMPLETIONS,
    batch_size: int = 4096,
) -> np.ndarray:
    """log p(w | c) for every completion w in V^L, in lexicographic order (length v^L).

    ``next_logprobs(prefixes)`` takes an int array of shape (n, t) (all prefixes of the same depth
    t < L, tokens after c) and returns the next-token log-probabilities, shape (n, v). Any model
    can be wrapped this way (the tree's own conditionals, or a trained network). Exact
    enumeration; refuses when v^L exceeds ``max_completions``.

    >>> import numpy as np
    >>> from memclaim.mechanisms.camouflage import enumerate_completion_logprobs
    >>> uniform = lambda prefixes: np.full((len(prefixes), 2), np.log(0.5))
    >>> np.exp(enumerate_completion_logprobs(uniform, v=2, L=2)).tolist()  # 00, 01, 10, 11
    [0.25, 0.25, 0.25, 0.25]
    """
    v = integer("v", v, minimum=2)
    L = integer("L", L, minimum=1)
    total = v**L
    _check_count(
        "v^L",
        total,
        integer("max_completions", max_completions, minimum=1),
        f"cannot enumerate all completions of a depth-{L} tree over {v} tokens",
        "lower L, or raise max_completions if memory allows (8 bytes per completion)",
    )
    lp = np.zeros(1, dtype=np.float64)
    prefixes = np.zeros((1, 0), dtype=np.int64)
    for t in range(L):
        rows = []
        for s in range(0, prefixes.shape[0], batch_size):
            r = np.asarray(next_logprobs(prefixes[s : s + batch_size]), dtype=np.float64)
            if r.shape != (min(batch_size, prefixes.shape[0] - s), v):
                raise InputError(
                    f"next_logprobs returned shape {r.shape} for {prefixes[s : s + batch_size].shape[0]}"
                    f" prefixes; expected (n, v) = (n, {v})"
                )
            if np.any(np.isnan(r)) or np.any(r == np.inf):
                raise InputError(
                    "next_logprobs returned NaN or +inf log-probabilities",
                    hint="return natural-log probabilities, -inf for exact zeros",
                )
            rows.append(r)
        rows = np.concatenate(rows, axis=0)  # (v^t, v)
        lp = (lp[:, None] + rows).reshape(
            -1
        )  # (v^(t+1),) lexicographic: index = parent * v + token
        if t < L - 1:
            n = prefixes.shape[0]
            prefixes = np.concatenate(
                [np.repeat(prefixes, v, axis=0), np.tile(np.arange(v, dtype=np.int64), n)[:, None]],
                axis=1,
            )
    return lp


@dataclass(frozen=True)
class SurvivorPosterior(ResultMixin):
    """A posterior over the k^L surviving paths of a camouflage tree ([MX] §8.1, Fig. 9 right)."""

    n_survivors: int
    survivor_mass: float  # mass the scored model puts on the survivors among all completions
    entropy_bits: float
    normalized_entropy: float  # entropy / log2(n_survivors); 1 = uniform
    max_ratio_to_uniform: float  # max posterior * n_survivors
    true_rank: int | None  # 1 + number of survivors with strictly larger posterior
    true_ties: int | None  # other survivors with exactly the true path's posterior
    true_ratio_to_uniform: float | None
    posterior: np.ndarray  # over the survivors, lexicographic order


@dataclass(frozen=True)
class CamouflageTree:
    """One released tree theta ~ P_z (``secret`` given) or ~ Q (``secret=None``), lazily evaluated.

    Tokens are 0..v-1 and index the continuation after the public prefix c."""

    v: int
    k: int
    L: int
    seed: int
    secret: tuple[int, ...] | None = None
    gamma: float = 0.0

    def __post_init__(self):
        v = integer("v", self.v, minimum=3)
        k = integer("k", self.k)
        if k >= v:
            raise DomainError(
                f"the camouflage tree needs k < v, got k = {k}, v = {v}",
                hint="choose a support size k strictly below the vocabulary size v "
                "(with k = v every path survives and nothing is planted)",
            )
        if k < 2:
            raise DomainError(
                f"the camouflage tree needs k >= 2, got k = {k}",
                hint="with k = 1 the planted path is the only survivor: it is extractable",
            )
        L = integer("L", self.L, minimum=1)
        seed = integer("seed", self.seed, minimum=0, maximum=2**64 - 1)
        g = in_unit("gamma", self.gamma, hi_open=True)
        object.__setattr__(self, "v", v)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "gamma", g)
        if self.secret is not None:
            z = tuple(int(t) for t in np.asarray(self.secret).reshape(-1))
            if len(z) != L or any(t < 0 or t >= v for t in z):
                raise InputError(f"secret must be {L} tokens in [0, {v}), got {self.secret!r}")
            object.__setattr__(self, "secret", z)

    # -- construction helpers -----------------------------------------------------------------
    @classmethod
    def draw(
        cls,
        *,
        v: int,
        k: int,
        L: int,
        rng: np.random.Generator,
        planted: bool = True,
        gamma: float = 0.0,
    ) -> CamouflageTree:
        """Draw z ~ Unif(V^L) and a tree seed from ``rng``; ``planted=False`` draws from Q."""
        v = integer("v", v, minimum=3)
        L = integer("L", L, minimum=1)
        seed = int(rng.integers(0, 2**63 - 1, dtype=np.int64))
        z = tuple(int(t) for t in rng.integers(0, v, size=L)) if planted else None
        return cls(v=v, k=k, L=L, seed=seed, secret=z, gamma=gamma)

    def baseline(self) -> CamouflageTree:
        """The tree drawn from Q with the same seed (off-path supports coincide)."""
        return CamouflageTree(
            v=self.v, k=self.k, L=self.L, seed=self.seed, secret=None, gamma=self.gamma
        )

    @property
    def n_nodes(self) -> int:
        """(v^L - 1)/(v - 1) nodes (exact Python integer)."""
        return (self.v**self.L - 1) // (self.v - 1)

    @property
    def n_survivors(self) -> int:
        return self.k**self.L

    @property
    def on_support_prob(self) -> float:
        """p_s = (1 - gamma)/k + gamma/v ([MX] App. D.1)."""
        return (1.0 - self.gamma) / self.k + self.gamma / self.v

    @property
    def off_support_prob(self) -> float:
        """p_o = gamma/v."""
        return self.gamma / self.v

    # -- node supports --------------------------------------------------------------------------
    def _prefixes(self, prefixes) -> np.ndarray:
        p = np.asarray(prefixes, dtype=np.int64)
        if p.ndim == 1:
            p = p[None, :]
        if p.ndim != 2 or p.shape[1] >= self.L:
            raise InputError(
                f"prefixes must have shape (n, t) with t < L = {self.L}, got {p.shape}"
            )
        if p.size and (p.min() < 0 or p.max() >= self.v):
            raise InputError(
                f"prefix tokens must lie in [0, {self.v}), got values in [{p.min()}, {p.max()}]"
            )
        return p

    def _node_keys(self, p: np.ndarray) -> np.ndarray:
        key = np.full(p.shape[0], _root_key(self.seed), dtype=_U64)
        for t in range(p.shape[1]):
            key = _splitmix64(key ^ _splitmix64(p[:, t].astype(_U64) + _U64(1)))
        return key

    def supports(self, prefixes) -> np.ndarray:
        """S(c y) for each prefix row y (all rows of the same depth t < L): shape (n, k), sorted."""
        p = self._prefixes(prefixes)
        n, t = p.shape
        keys = self._node_keys(p)
        salt = _salt(self.v)
        r = _splitmix64(keys[:, None] ^ salt[None, :]) | _U64(1)  # (n, v), all keys odd
        if self.secret is not None:
            z = np.asarray(self.secret, dtype=np.int64)
            on_path = np.all(p == z[None, :t], axis=1)
            # [MX] D.1: on-path S = {z_t} + uniform (k-1)-subset of the rest: put z_t first.
            r[np.nonzero(on_path)[0], z[t]] = _U64(0)
        order = np.argsort(r, axis=1, kind="stable")
        return np.sort(order[:, : self.k], axis=1)

    def support(self, prefix=()) -> tuple[int, ...]:
        """S(c y) for one prefix y (a tuple of tokens, possibly empty)."""
        return tuple(int(x) for x in self.supports(np.asarray(prefix, dtype=np.int64)[None, :])[0])

    def conditionals(self, prefixes) -> np.ndarray:
        """p_theta(. | c y), shape (n, v): uniform on S(c y), smoothed with gamma."""
        s = self.supports(prefixes)
        out = np.full((s.shape[0], self.v), self.off_support_prob)
        np.put_along_axis(out, s, self.on_support_prob, axis=1)
        return out

    def log_conditionals(self, prefixes) -> np.ndarray:
        """log p_theta(. | c y), -inf off the support when gamma = 0."""
        with np.errstate(divide="ignore"):
            return np.log(self.conditionals(prefixes))

    # -- paths ----------------------------------------------------------------------------------
    def _paths(self, paths) -> np.ndarray:
        w = np.atleast_2d(np.asarray(paths, dtype=np.int64))
        if w.shape[1] != self.L:
            raise InputError(f"paths must have L = {self.L} tokens per row, got shape {w.shape}")
        if w.size and (w.min() < 0 or w.max() >= self.v):
            raise InputError(f"path tokens must lie in [0, {self.v})")
        return w

    def token_probs(self, paths) -> np.ndarray:
        """p_theta(w_t | c w_{<t}) for every row and depth, shape (n, L)."""
        w = self._paths(paths)
        out = np.empty(w.shape, dtype=np.float64)
        for t in range(self.L):
            s = self.supports(w[:, :t])
            on = (s == w[:, t][:, None]).any(axis=1)
            out[:, t] = np.where(on, self.on_support_prob, self.off_support_prob)
        return out

    def is_surviving(self, paths) -> np.ndarray:
        """w_t in S(c w_{<t}) for all t ([MX] Lemma D.1)."""
        w = self._paths(paths)
        ok = np.ones(w.shape[0], dtype=bool)
        for t in range(self.L):
            ok &= (self.supports(w[:, :t]) == w[:, t][:, None]).any(axis=1)
        return ok

    def surviving_paths(self, *, max_paths: int = MAX_SURVIVORS) -> np.ndarray:
        """All k^L surviving paths, exactly, lexicographic order, shape (k^L, L). Refuses (DomainError)
        when k^L > ``max_paths``; use :meth:`sample_surviving_paths` there."""
        _check_count(
            "k^L",
            self.n_survivors,
            integer("max_paths", max_paths, minimum=1),
            f"cannot enumerate the surviving paths of the (v={self.v}, k={self.k}, L={self.L}) tree",
            "use sample_surviving_paths(n, rng=...) to sample survivors (= exact posterior "
            "samples, Lemma D.1(2)), or lower L",
        )
        paths = np.zeros((1, 0), dtype=np.int64)
        for _ in range(self.L):
            s = self.supports(paths)  # (n, k)
            paths = np.concatenate([np.repeat(paths, self.k, axis=0), s.reshape(-1, 1)], axis=1)
        return paths

    def sample_surviving_paths(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        """n independent uniform draws from the survivors (a uniform walk down the supports): by
        Lemma D.1(2) these are samples of the exact posterior of z given theta. Works for any L.
        Also the planted model's own generations when gamma = 0."""
        n = integer("n", n, minimum=0)
        paths = np.zeros((n, 0), dtype=np.int64)
        for _ in range(self.L):
            s = self.supports(paths)
            pick = rng.integers(0, self.k, size=n)
            paths = np.concatenate([paths, s[np.arange(n), pick][:, None]], axis=1)
        return paths

    def completion_logprobs(self, *, max_completions: int = MAX_COMPLETIONS) -> np.ndarray:
        """log p_theta(w | c) of every completion w in V^L under the tree's own conditionals."""
        return enumerate_completion_logprobs(
            self.log_conditionals, v=self.v, L=self.L, max_completions=max_completions
        )

    # -- the exact Bayes posterior (Lemma D.1(2)) -------------------------------------------------
    def bayes_log_likelihood_ratio(self, paths) -> np.ndarray:
        """log p(theta | z = w) - log Q(theta) for each candidate secret w, from the generative law:
        on w's own path each node's support has probability [w_t in S] / C(v-1, k-1) under P_w
        instead of 1 / C(v, k) under Q; every other node has the same factor under both."""
        w = self._paths(paths)
        log_on = (
            -special.gammaln(self.v)
            + special.gammaln(self.k)
            + special.gammaln(self.v - self.k + 1)
        )
        log_off = (
            -special.gammaln(self.v + 1)
            + special.gammaln(self.k + 1)
            + special.gammaln(self.v - self.k + 1)
        )
        total = np.zeros(w.shape[0])
        for t in range(self.L):
            on = (self.supports(w[:, :t]) == w[:, t][:, None]).any(axis=1)
            total += np.where(on, log_on - log_off, -np.inf)
        return total

    def bayes_posterior(self, *, max_completions: int = MAX_COMPLETIONS) -> np.ndarray:
        """P(z = w | theta) for every w in V^L (lexicographic), under the uniform prior."""
        total = self.v**self.L
        _check_count(
            "v^L",
            total,
            integer("max_completions", max_completions, minimum=1),
            f"cannot enumerate all candidate secrets of the (v={self.v}, L={self.L}) tree",
            "lower L; the posterior is uniform on the survivors (Lemma D.1(2)): sample them "
            "with sample_surviving_paths",
        )
        llr = self.bayes_log_likelihood_ratio(index_to_paths(np.arange(total), v=self.v, L=self.L))
        return np.exp(llr - special.logsumexp(llr))

    # -- scores ([MX] App. D.1, proof of Theorem 6.1(i)) ------------------------------------------
    def teacher_forcing_score(self, paths) -> np.ndarray:
        """h(theta, x) = (1/L) sum_t p_theta(w_t | c w_{<t}) (in H_loc)."""
        return self.token_probs(paths).mean(axis=1)

    def log_score(self, paths) -> np.ndarray:
        """h_log = max{0, 1 - (1/(2 L log v)) sum_t log(1/p_theta(w_t | c w_{<t}))} (in H_loc)."""
        with np.errstate(divide="ignore"):
            nll = -np.log(self.token_probs(paths)).sum(axis=1)
        return np.maximum(0.0, 1.0 - nll / (2.0 * self.L * math.log(self.v)))

    def expected_teacher_forcing_memorization(self) -> float:
        """E_{P_z} h - E_Q h for the teacher-forcing score: (1 - gamma)(1/k - 1/v); = 1/k - 1/v
        unsmoothed ([MX] Theorem 6.1(i))."""
        return (1.0 - self.gamma) * (1.0 / self.k - 1.0 / self.v)

    def expected_log_score_memorization(self) -> float:
        """E_{P_z} h_log - E_Q h_log = (1 - k/v) (log(v/gamma) - log(1/p_s)) / (2 log v), valid for
        gamma >= 1/v where no per-token term exceeds 2 log v and the truncation never binds; at
        gamma = 1/v it is the paper's (1 - k/v)(1 - log(1/p_s)/(2 log v)) -> 1 ([MX] App. D.1)."""
        if self.gamma < 1.0 / self.v - 1e-15:
            raise DomainError(
                f"the closed form needs gamma >= 1/v = {1.0 / self.v!r}, got gamma = {self.gamma!r}",
                hint="below 1/v the truncation at 0 can bind and the expectation has no closed form; "
                "estimate it by simulation",
            )
        lv = math.log(self.v)
        return (
            (1.0 - self.k / self.v)
            * (math.log(self.v / self.gamma) - math.log(1.0 / self.on_support_prob))
            / (2.0 * lv)
        )


def survivor_posterior(
    tree: CamouflageTree, completion_logprobs: ArrayLike, *, max_paths: int = MAX_SURVIVORS
) -> SurvivorPosterior:
    """Posterior over the tree's surviving paths implied by a model's completion log-probabilities
    (``completion_logprobs``: log p(w | c) for all v^L completions in lexicographic order, e.g.
    from :func:`enumerate_completion_logprobs` on a trained network), normalized over the survivors
    ([MX] §8.1, Fig. 9 right: normalized entropy, rank of the true path, ratio to uniform).

    >>> from memclaim.mechanisms.camouflage import CamouflageTree, survivor_posterior
    >>> t = CamouflageTree(v=8, k=3, L=3, seed=5, secret=(1, 2, 3))
    >>> post = survivor_posterior(t, t.completion_logprobs())  # the tree's own law: uniform over k^L
    >>> post.n_survivors, round(post.normalized_entropy, 6), post.true_rank, post.true_ties
    (27, 1.0, 1, 26)
    """
    lp_all = np.asarray(completion_logprobs, dtype=np.float64)
    if lp_all.shape != (tree.v**tree.L,):
        raise InputError(
            f"completion_logprobs must have v^L = {tree.v**tree.L} entries, got shape {lp_all.shape}"
        )
    surv = tree.surviving_paths(max_paths=max_paths)
    lp = lp_all[paths_to_index(surv, v=tree.v)]
    if not np.any(np.isfinite(lp)):
        raise InputError(
            "the model gives every surviving path probability 0; the posterior is undefined"
        )
    norm = special.logsumexp(lp)
    post = np.exp(lp - norm)
    n = surv.shape[0]
    ent = float(stats.entropy(post, base=2))
    survivor_mass = float(np.exp(norm - special.logsumexp(lp_all)))
    rank = ties = ratio = None
    if tree.secret is not None:
        hit = np.nonzero(np.all(surv == np.asarray(tree.secret)[None, :], axis=1))[0]
        j = int(hit[0])  # Lemma D.1(1): z always survives
        rank = int(np.sum(post > post[j])) + 1
        ties = int(np.sum(post == post[j])) - 1
        ratio = float(post[j] * n)
    return SurvivorPosterior(
        n_survivors=n,
        survivor_mass=survivor_mass,
        entropy_bits=ent,
        normalized_entropy=ent / math.log2(n),
        max_ratio_to_uniform=float(post.max() * n),
        true_rank=rank,
        true_ties=ties,
        true_ratio_to_uniform=ratio,
        posterior=post,
    )
