"""What a server's top-K prompt log-probabilities determine, policy by policy (pure numpy).

A served model returns, at each scored position, the log-probability ℓ_t of the prompt's actual
token and the K largest log-probabilities ℓ_(1) >= ... >= ℓ_(K) with their token ids, all from
the untruncated softmax at temperature 1: ℓ_v = x_v - log Σ_u e^{x_u} for the model's logits x.
The score of a suffix under a decoding policy φ is Σ_t log q_{θ,φ}(s_t | p, s_<t) ([EM] §2,
Eq. 1); this module says, per policy and per position, whether those returned numbers fix the
policy's log q exactly, and if not returns certified bounds.

Exactness, policy by policy (the rules of :mod:`memclaim.decoding`: HF's warper order
temperature -> top-k -> top-p, every tie at the top-k boundary kept, top-p as
``TopPLogitsWarper``, greedy = the first maximal index):

* ``full``: exact, ℓ_t itself.
* ``greedy``: exact when the returned list shows the target above every other token or below one;
  a tie for the maximum is settled by token id (torch.argmax takes the first index) once every
  tied token is visible (the last returned value is below the tie), else undecided. Needs K >= 2.
* ``top-k:k`` at any temperature T (with or without a later top-p): ℓ/T differs from x/T by a
  constant, which cancels in the normalizer over the top-k support, so the k largest ℓ fix it
  exactly; the (k+1)-th shows whether the boundary is tied; while the last returned value still
  equals ℓ_(k) the support's size is unknown (grow K). Needs K >= k + 1.
* ``top-p:p`` at T = 1 (no top-k): exact once the returned mass Σ e^ℓ reaches p (the nucleus
  boundary is observed, so every kept token is in the list); otherwise the target's membership is
  known when it is in the list and the normalizer is bracketed: p <= Z < min(1, p + e^{ℓ_(K)}).
* ``temperature:T`` (T != 1, no truncation) and top-p at T != 1: the normalizer needs the whole
  vocabulary. Certified bounds from the returned mass: the unseen tail holds mass
  M = 1 - Σ_returned e^ℓ spread over at most V - K tokens, each with ℓ <= ℓ_(K); Σ_tail e^{ℓ/T}
  is then extremal at the even spread or at the most concentrated spread (y -> y^{1/T} is convex
  for T < 1 and concave for T > 1).
* min-k%++'s moments and the entropy: need the whole distribution (exact only when K >= V).

"Exact" means the policy's rule applied to the server's returned numbers, with no approximation
of ours: the server's own arithmetic (its dtype, its float32 log-softmax) is what it is, and a
tie the server's rounding makes or breaks is the server's. The bounds allow for that rounding:
the unseen mass is taken as M + :data:`MASS_SLACK`.

Nothing here does I/O or needs torch: :mod:`memclaim.scoring.served.backend` parses responses
into :class:`TopK` values and calls :func:`policy_scores` per window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...decoding import Policy

__all__ = [
    "EXACT",
    "EXACT_IF_OBSERVED",
    "BOUNDS",
    "REFUSED",
    "MASS_SLACK",
    "TopK",
    "PolicyScores",
    "policy_class",
    "policy_scores",
    "greedy_flags",
    "min_margin",
    "statistic_class",
    "tokens_needed",
]

EXACT = "exact"
EXACT_IF_OBSERVED = (
    "exact where the nucleus is observed (returned mass >= p), certified bounds elsewhere"
)
BOUNDS = "certified bounds only"
REFUSED = "not computable"
# Allowance on the unseen tail's mass for the server's float32 arithmetic: a float32 log-softmax
# value is within a few ulps (~1e-6 relative for |x| up to ~30) of its exact value, so the returned
# mass is within ~1e-6 of its exact sum; 1e-5 leaves a margin of ten.
MASS_SLACK = 1e-5


@dataclass(frozen=True, eq=False)
class TopK:
    """What a server returned for one window's S target positions.

    ``target_lp`` [S]: ℓ of each target token; ``top_lp`` [S, K]: the returned top log-probs,
    descending, ``-inf`` where fewer came back; ``top_ids`` [S, K]: their token ids (-1 padding);
    ``complete`` [S]: False where entries are known lost (llama-cpp-python keys alternatives by
    token string, so two tokens with one spelling keep one entry); ``server_rank`` [S] or None:
    the server's rank of the target (vLLM: #{v: ℓ_v >= ℓ_t}). ``vocab_size``: at least the
    model's vocabulary (an overestimate keeps every bound valid).

    >>> v = TopK.from_lists([0], [-0.1], [[-0.1, -2.5]], [[0, 7]], vocab_size=10)
    >>> v.n_returned.tolist(), v.S
    ([2], 1)
    """

    target_ids: np.ndarray
    target_lp: np.ndarray
    top_lp: np.ndarray
    top_ids: np.ndarray
    complete: np.ndarray
    vocab_size: int
    server_rank: np.ndarray | None = None

    @classmethod
    def from_lists(
        cls,
        target_ids,
        target_lp,
        top_lp,
        top_ids,
        *,
        vocab_size: int,
        complete=None,
        server_rank=None,
    ) -> TopK:
        """Build from per-position lists (any order within a position; sorted here, descending
        by value, ties by token id) padded to the longest.

        >>> TopK.from_lists([3], [-1.0], [[-2.0, -0.5]], [[5, 3]], vocab_size=8).top_ids.tolist()
        [[3, 5]]
        """
        S = len(target_ids)
        K = max((len(r) for r in top_lp), default=0)
        lp = np.full((S, K), -math.inf)
        ids = np.full((S, K), -1, dtype=np.int64)
        for s, (vals, toks) in enumerate(zip(top_lp, top_ids)):
            order = sorted(range(len(vals)), key=lambda i: (-float(vals[i]), int(toks[i])))
            lp[s, : len(vals)] = [float(vals[i]) for i in order]
            ids[s, : len(vals)] = [int(toks[i]) for i in order]
        return cls(
            target_ids=np.asarray(target_ids, dtype=np.int64),
            target_lp=np.asarray(target_lp, dtype=np.float64),
            top_lp=lp,
            top_ids=ids,
            complete=np.ones(S, bool) if complete is None else np.asarray(complete, bool),
            vocab_size=int(vocab_size),
            server_rank=None if server_rank is None else np.asarray(server_rank, dtype=np.int64),
        )

    @property
    def S(self) -> int:
        return len(self.target_ids)

    @property
    def n_returned(self) -> np.ndarray:
        """[S] how many top entries came back at each position."""
        return (self.top_ids >= 0).sum(axis=1)

    def whole_vocabulary(self, s: int) -> bool:
        """Position ``s`` returned every token of the vocabulary."""
        return bool(self.complete[s]) and int((self.top_ids[s] >= 0).sum()) >= self.vocab_size


@dataclass(frozen=True, eq=False)
class PolicyScores:
    """Per-position log q under one policy: ``value`` [S] (NaN where not exact), ``exact`` [S],
    and certified ``lower``/``upper`` [S] (equal to ``value`` where exact).

    >>> p = PolicyScores(np.array([-1.0, np.nan]), np.array([True, False]), np.array([-1.0, -3.0]),
    ...                  np.array([-1.0, -2.0]))
    >>> p.window()
    (nan, False, -4.0, -3.0)
    """

    value: np.ndarray
    exact: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def window(self) -> tuple[float, bool, float, float]:
        """(log q, exact, lower, upper) of the whole suffix ([EM] Eq. 1: a sum of logs). A target
        the policy cannot emit makes the window's log q exactly -inf whatever the other
        positions are."""
        if np.any(self.exact & (self.value == -math.inf)):
            return -math.inf, True, -math.inf, -math.inf
        lo, hi = float(np.sum(self.lower)), float(np.sum(self.upper))
        if bool(np.all(self.exact)):
            v = float(np.sum(self.value))
            return v, True, v, v
        return math.nan, False, lo, hi


# --------------------------------------------------------------------------- before any request
def tokens_needed(policy: Policy) -> int:
    """The fewest top log-probs per position for ``policy`` to be exact (0: the target's own
    ℓ suffices); top-p at T = 1 needs 'enough for the mass to reach p', reported as 20 (vLLM's
    default cap), and a temperature without truncation the whole vocabulary (-1).

    >>> [tokens_needed(Policy.parse(s)) for s in ("full", "greedy", "top-k:40", "top-p:0.9", "temperature:0.7")]
    [0, 2, 41, 20, -1]
    """
    if policy.greedy:
        return 2
    if policy.top_k is not None:
        return policy.top_k + 1
    if policy.top_p is not None and policy.temperature == 1.0:
        return 20
    if policy.temperature != 1.0 or policy.top_p is not None:
        return -1
    return 0


def policy_class(policy: Policy, k_returned: int, vocab_size: int) -> tuple[str, str | None]:
    """(exactness class, why not exact or None) of ``policy`` when the server returns
    ``k_returned`` top log-probs per position, before any request (the backend's ``supports``).

    >>> policy_class(Policy.parse("top-k:40"), 41, 49152)
    ('exact', None)
    >>> policy_class(Policy.parse("top-k:40"), 20, 49152)[0]
    'not computable'
    >>> policy_class(Policy.parse("temperature:0.7"), 64, 49152)[0]
    'certified bounds only'
    """
    if k_returned >= vocab_size:
        return EXACT, None
    if policy.greedy:
        if k_returned < 2:
            return REFUSED, (
                f"greedy needs the top 2 log-probs per position to see a tie for the maximum; the server "
                f"returns {k_returned}"
            )
        return EXACT, None
    if policy.top_k is not None:
        if policy.top_k >= vocab_size:
            return policy_class(
                Policy(temperature=policy.temperature, top_p=policy.top_p), k_returned, vocab_size
            )
        if k_returned < policy.top_k + 1:
            return REFUSED, (
                f"{policy.spec} needs the top {policy.top_k + 1} log-probs per position (k + 1: the extra "
                f"one shows a tie at the k-th value); the server returns {k_returned}"
            )
        return EXACT, None
    if policy.top_p is not None:
        if policy.temperature == 1.0:
            return EXACT_IF_OBSERVED, (
                f"exact only where the returned top-{k_returned} mass reaches p = {policy.top_p:g}"
            )
        return BOUNDS, (
            f"{policy.spec}: the nucleus at T != 1 depends on the whole vocabulary's logits; the server "
            f"returns the top {k_returned}"
        )
    if policy.temperature != 1.0:
        return BOUNDS, (
            f"{policy.spec}: the normalizer at T != 1 sums over the whole vocabulary; the server returns "
            f"the top {k_returned} log-probs at T = 1"
        )
    return EXACT, None


def statistic_class(name: str, k_returned: int, vocab_size: int) -> tuple[str, str | None]:
    """(class, reason) of an engine statistic (memclaim.scoring.engine.STAT_NAMES) from top-K
    log-probs: ``token_logprob`` (the target's ℓ) is exact, ``greedy``/``margin`` need K >= 2,
    ``rank`` is exact within the returned list and the server's count below it, and
    ``token_moments`` (min-k%++'s mean and std of log p) need the whole vocabulary.

    >>> statistic_class("token_moments", 64, 49152)[0], statistic_class("token_logprob", 1, 49152)[0]
    ('not computable', 'exact')
    """
    if name in ("policy_logq", "token_logprob"):
        return EXACT, None
    if name in ("greedy", "margin"):
        if k_returned >= 2 or k_returned >= vocab_size:
            return EXACT, None
        return (
            REFUSED,
            f"{name} needs the top 2 log-probs per position; the server returns {k_returned}",
        )
    if name == "rank":
        return EXACT, None
    if name == "token_moments":
        if k_returned >= vocab_size:
            return EXACT, None
        return REFUSED, (
            "token_moments (min-k%++'s mean and std of log p under the full next-token distribution) "
            f"need all {vocab_size} log-probs per position; the server returns {k_returned}"
        )
    return REFUSED, f"unknown statistic {name!r}"


# --------------------------------------------------------------------------- per position
def _lse(a: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return -math.inf
    m = float(a.max())
    if m == -math.inf:
        return -math.inf
    return m + math.log(math.fsum(np.exp(a - m).tolist()))


def _tail(mass: float, cap: float, n: int, r: float) -> tuple[float, float]:
    """(min, max) of Σ y_i^r over n values y_i in [0, cap] with Σ y_i = mass (r > 0): y^r is
    convex for r > 1 (extremes: even spread = min, most concentrated = max) and concave for
    r < 1 (the reverse). Returned as natural logs (-inf for 0)."""
    if mass <= 0 or n <= 0:
        return -math.inf, -math.inf
    if cap <= 0:
        return -math.inf, -math.inf
    n = max(n, math.ceil(mass / cap))  # an underestimated vocabulary cannot hold the mass otherwise
    even = math.log(n) + r * (math.log(mass) - math.log(n))
    m = math.floor(mass / cap)
    rest = mass - m * cap
    parts = ([math.log(m) + r * math.log(cap)] if m > 0 else []) + (
        [r * math.log(rest)] if rest > 0 else []
    )
    conc = _lse(np.array(parts))
    return (even, conc) if r >= 1 else (conc, even)


def _greedy_one(v: TopK, s: int) -> tuple[float, bool]:
    """(log q, exact) of greedy at position ``s``: 0 when the target is torch.argmax's token."""
    t, lt = int(v.target_ids[s]), float(v.target_lp[s])
    n = int((v.top_ids[s] >= 0).sum())
    vals, ids = v.top_lp[s, :n], v.top_ids[s, :n]
    if n and lt < vals[0]:
        return -math.inf, True  # a returned token is above the target
    if not v.complete[s] and not v.whole_vocabulary(s):
        return math.nan, False  # a lost entry may be above the target
    tied = ids[vals == lt]
    lower_tied = tied[tied < t]
    if lower_tied.size:
        return -math.inf, True  # an equal token with a smaller id is the first maximal index
    all_seen = v.whole_vocabulary(s) or (n > 0 and vals[n - 1] < lt)
    if not all_seen:
        return math.nan, False  # more tokens may tie with the maximum beyond the returned list
    return 0.0, True


def greedy_flags(v: TopK) -> tuple[np.ndarray, np.ndarray]:
    """([S] greedy hit, [S] decided) per position: hit when the target is the first maximal
    index (memclaim.decoding's greedy).

    >>> v = TopK.from_lists([1, 2], [-0.5, -1.0], [[-0.5, -1.2], [-0.4, -1.0]], [[1, 4], [3, 2]], vocab_size=6)
    >>> [x.tolist() for x in greedy_flags(v)]
    [[True, False], [True, True]]
    """
    out = [_greedy_one(v, s) for s in range(v.S)]
    return np.array([o[0] == 0.0 for o in out], bool), np.array([o[1] for o in out], bool)


def min_margin(v: TopK) -> float:
    """The smallest top-1 minus top-2 log-prob (= logit) margin over the positions; 0 where it is
    unknown (fewer than 2 returned, or entries lost), so the window is flagged as a near tie.

    >>> min_margin(TopK.from_lists([0, 1], [-0.1, -0.2], [[-0.1, -2.4], [-0.2, -1.9]], [[0, 3], [1, 2]], vocab_size=5))
    1.7
    """
    out = math.inf
    for s in range(v.S):
        n = int((v.top_ids[s] >= 0).sum())
        if n < 2 or (not v.complete[s] and not v.whole_vocabulary(s)):
            if n == 1 and v.vocab_size == 1:
                continue
            return 0.0
        out = min(out, float(v.top_lp[s, 0] - v.top_lp[s, 1]))
    return round(out, 15) if math.isfinite(out) else out


def _topk_one(v: TopK, s: int, pol: Policy) -> tuple[float, bool, float, float]:
    k, T = int(pol.top_k), pol.temperature
    lt = float(v.target_lp[s])
    n = int((v.top_ids[s] >= 0).sum())
    vals = v.top_lp[s, :n]
    if n >= k and lt < float(vals[k - 1]):
        return (
            -math.inf,
            True,
            -math.inf,
            -math.inf,
        )  # k returned tokens are above it (lost entries only add more)
    if (not v.complete[s] and not v.whole_vocabulary(s)) or n < k:
        return math.nan, False, -math.inf, 0.0
    kth = float(vals[k - 1])
    if lt < kth:
        return (
            -math.inf,
            True,
            -math.inf,
            -math.inf,
        )  # outside the top-k support (every tie with the k-th kept)
    support = vals[vals >= kth]
    log_z = _lse(support / T)  # [EM] Eq. 1: the normalizer over the top-k support at temperature T
    boundary_open = (
        n < v.vocab_size and float(vals[n - 1]) >= kth
    )  # ties may continue past the list
    if boundary_open:
        # unseen tokens tied with the k-th value: at most min(V - n, unseen mass / e^kth) of them
        unseen = max(0.0, -math.expm1(min(0.0, _lse(vals)))) + MASS_SLACK
        extra = (
            v.vocab_size - n
            if kth < -700
            else min(v.vocab_size - n, math.floor(unseen / math.exp(kth)))
        )
        hi_z = _lse(np.array([log_z, math.log(extra) + kth / T])) if extra > 0 else log_z
        if pol.top_p is None:
            return math.nan, False, lt / T - hi_z, lt / T - log_z
        return (
            math.nan,
            False,
            -math.inf,
            lt / T - log_z - math.log(pol.top_p),
        )  # the nucleus holds mass >= p
    if pol.top_p is None:
        x = lt / T - log_z
        return x, True, x, x
    # top-p over the top-k support's distribution at T (HF order: temperature, top-k, top-p)
    return _nucleus(
        support / T - log_z, lt / T - log_z, target_in_list=True, complete=True, p=float(pol.top_p)
    )


def _nucleus(
    lp: np.ndarray, lt: float, *, target_in_list: bool, complete: bool, p: float
) -> tuple[float, bool, float, float]:
    """Top-p at one position. ``lp``: the returned log-probs (descending) of a normalized
    distribution, the whole support when ``complete``; ``lt``: the target's log-prob.

    HF's TopPLogitsWarper sorts ascending and removes the tokens whose cumulative mass is
    <= 1 - p: read from the top, a token is kept iff the mass of the tokens ahead of it is < p.
    """
    probs = np.exp(lp)
    ahead = np.concatenate([[0.0], np.cumsum(probs)[:-1]])  # [n] mass of the tokens ahead of each
    total = float(np.sum(probs))
    last = float(lp[-1]) if len(lp) else 0.0
    # the target's tie group is entirely in the list when the list is the support or the list
    # goes on below the target's value
    group_seen = complete or lt > last
    above = float(np.sum(probs[lp > lt]))  # mass strictly above the target, among the returned
    if not complete and lt < last:
        above = max(above, total)  # every returned token is above it, and maybe unseen ones
    g = int(np.sum(lp == lt)) + (
        0 if target_in_list else 1
    )  # the target's tie group (its seen part)
    pg = math.exp(lt)
    if complete or total >= p:
        # the nucleus boundary is observed: every kept token is in the list
        log_z = _lse(lp[ahead < p])
        if above >= p:
            return -math.inf, True, -math.inf, -math.inf
        if group_seen and above + (g - 1) * pg < p:
            x = lt - log_z
            return x, True, x, x
        # a tie group straddles the boundary: which of its tokens are kept depends on the sort's
        # order of equal values (torch.sort); the normalizer does not
        return math.nan, False, -math.inf, lt - log_z
    # the boundary lies beyond the returned tokens: every returned token ahead of the target is
    # kept, the normalizer Z (the nucleus' mass) is >= p and < p + (the largest unseen token's
    # probability) <= p + e^{last}
    hi_z = math.log(min(1.0, p + math.exp(last)))
    surely_kept = target_in_list and group_seen
    return math.nan, False, (lt - hi_z) if surely_kept else -math.inf, lt - math.log(p)


def _topp_one(v: TopK, s: int, pol: Policy) -> tuple[float, bool, float, float]:
    lt = float(v.target_lp[s])
    n = int((v.top_ids[s] >= 0).sum())
    whole = v.whole_vocabulary(s)
    if (not v.complete[s] and not whole) or n == 0:
        return math.nan, False, -math.inf, min(0.0, lt - math.log(pol.top_p))
    in_list = int(v.target_ids[s]) in set(v.top_ids[s, :n].tolist())
    return _nucleus(v.top_lp[s, :n], lt, target_in_list=in_list, complete=whole, p=float(pol.top_p))


def _temperature_one(v: TopK, s: int, pol: Policy) -> tuple[float, bool, float, float]:
    r = 1.0 / pol.temperature
    lt = float(v.target_lp[s])
    n = int((v.top_ids[s] >= 0).sum())
    vals, ids = v.top_lp[s, :n], v.top_ids[s, :n]
    if v.whole_vocabulary(s):
        x = r * lt - _lse(r * vals)
        return x, True, x, x
    if not v.complete[s] or n == 0:
        return math.nan, False, -math.inf, 0.0
    seen = (
        vals if int(v.target_ids[s]) in set(ids.tolist()) else np.append(vals, lt)
    )  # the target leaves the tail
    log_s = _lse(r * seen)
    mass = max(0.0, -math.expm1(min(0.0, _lse(seen))))  # the unseen tail's mass at T = 1
    cap = math.exp(float(vals[n - 1]))  # every unseen token is at most the last returned one
    n_tail = v.vocab_size - len(seen)
    lo_t, _ = _tail(max(0.0, mass - MASS_SLACK), cap, n_tail, r)
    _, hi_t = _tail(mass + MASS_SLACK, cap, n_tail, r)
    lo_z = _lse(np.array([log_s, lo_t]))
    hi_z = _lse(np.array([log_s, hi_t]))
    return math.nan, False, r * lt - hi_z, r * lt - lo_z


def policy_scores(policy: Policy, v: TopK) -> PolicyScores:
    """log q_{θ,φ}(s_t | context) at every position of one window from the server's top-K
    ([EM] Eq. 1), with per-position exactness and certified bounds (module docstring).

    >>> v = TopK.from_lists([1], [math.log(0.3)], [[math.log(0.6), math.log(0.3), math.log(0.1)]], [[0, 1, 2]],
    ...                     vocab_size=3)
    >>> round(float(policy_scores(Policy.parse("top-k:2"), v).value[0]), 6) == round(math.log(1 / 3), 6)
    True
    >>> policy_scores(Policy.parse("greedy"), v).value.tolist()
    [-inf]
    """
    S = v.S
    val, ex = np.full(S, math.nan), np.zeros(S, bool)
    lo, hi = np.full(S, -math.inf), np.zeros(S)
    for s in range(S):
        if policy.greedy:
            x, e = _greedy_one(v, s)
            r = (x, e, x if e else -math.inf, x if e else 0.0)
        elif policy.top_k is not None and policy.top_k < v.vocab_size:
            r = _topk_one(v, s, policy)
        elif policy.top_p is not None and policy.temperature == 1.0:
            r = _topp_one(v, s, policy)
        elif policy.temperature != 1.0 or policy.top_p is not None:
            if policy.top_p is not None and not v.whole_vocabulary(s):
                r = (math.nan, False, -math.inf, 0.0)  # no useful bound on a nucleus at T != 1
            elif policy.top_p is not None:
                lt = float(v.target_lp[s])
                vals = v.top_lp[s, : int((v.top_ids[s] >= 0).sum())] / policy.temperature
                lz = _lse(vals)
                r = _nucleus(
                    vals - lz,
                    lt / policy.temperature - lz,
                    target_in_list=True,
                    complete=True,
                    p=float(policy.top_p),
                )
            else:
                r = _temperature_one(v, s, policy)
        else:
            x = float(v.target_lp[s])
            r = (x, True, x, x)
        val[s], ex[s], lo[s], hi[s] = r
    return PolicyScores(value=val, exact=ex, lower=lo, upper=np.minimum(hi, 0.0))
