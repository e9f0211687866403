"""Near-verbatim extraction: a certified lower bound on the mass of the ε-ball, and
deterministic recovery.

Definitions ([EM] App. B.1, Eq. 2; App. H.1, Eq. 12):

    B_ε(s) = { y in V^ℓ : d(y, s) <= ε }          d = token-level Levenshtein distance
    q_{θ,φ}(B_ε(s) | p) = Σ_{y in B_ε(s)} q_{θ,φ}(y | p)

The ball is combinatorially large, so there is no teacher-forced analogue of the verbatim
score; [EM] §6 and App. F.3 use a beam-search lower bound (Cooper et al., 2026b). This module
computes one:

* :func:`near_verbatim_lower_bound` runs a beam of width B over length-ℓ continuations of the
  prompt under the decoding policy φ. A branch is pruned as soon as *no* completion of it can
  end within ε (an exact test on the Levenshtein DP row, see
  :meth:`IncrementalLevenshtein.min_final_distance`), and tokens outside the policy's support
  (log q = -inf under top-k/top-p/greedy) are never expanded or summed. At the last position
  every surviving child of every kept prefix is summed (no forward pass is needed for it). The
  teacher-forced target path is followed alongside the beam (one extra row per step when the
  beam has dropped it), so the target and all its within-ε last-token variants are always in
  the set. The bound is the logsumexp of the exact log-probabilities of the distinct sequences
  found: never below the verbatim score, never above the true mass, and equal to the true
  mass when the beam never dropped a live branch for width (``exhaustive``).
* :func:`union_near_verbatim` merges several runs (several ε, several widths) by sequence set:
  at every ε it sums the distinct sequences found by any run whose distance is <= ε. That
  report is monotone in ε by construction and never below any single run; a single pruned run
  is not ([EM] §6: the exact verbatim computation can catch mass the lower bound misses).
* :func:`recovery_pool` ([EM] App. F.4): an *unpruned* beam returns a deterministic pool of B
  continuations, post-filtered to those within ε. memclaim.audits.recovery.deterministic_recovery
  adds, for each, the sampling budget n_c = ⌈log(1 - c) / log(1 - p)⌉ ([EM] §6, §F.1, from
  memclaim.claims.budget) against the beam's own cost in forward passes.
* :func:`estimate_beam_cost`: forward rows and calls of a beam, to print before a long run.

Cost accounting: a *row* is one token position run through the model body; a *call* is one
``forward_hidden`` invocation. With the KV cache (``use_cache=True``, the default) a step
costs one row per live prefix; without it every step recomputes the full prompt + prefix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import TYPE_CHECKING

import numpy as np

from ..decoding import Policy, policy_logprobs, policy_target_logprob
from ..errors import DomainError, InputError, ProcedureMismatchError
from ..jsonutil import ResultMixin, to_jsonable
from ..numeric import logsumexp
from ..procedure import NearVerbatim
from ..validate import integer
from .editdistance import IncrementalLevenshtein

if TYPE_CHECKING:
    from ..models.base import LanguageModel
    from ..models.loader import LoadedModel
    from .engine import BatchScores, TeacherForcingEngine
    from .units import Item, WorkUnit

__all__ = [
    "ContinuationSet",
    "NearVerbatimResult",
    "NearVerbatimUnion",
    "BeamCostEstimate",
    "near_verbatim_lower_bound",
    "union_near_verbatim",
    "recovery_pool",
    "RecoveryPool",
    "default_verbatim_tolerance",
    "VERBATIM_TOLERANCE_PER_TOKEN",
    "estimate_beam_cost",
    "DEFAULT_BEAM",
    "RECOVERY_BEAM",
    "nv_column",
    "near_verbatim_columns",
    "normalize_near_verbatim",
    "near_verbatim_cost_message",
]

DEFAULT_BEAM = 16  # a beam of 800 on SmolLM2 costs about a minute per window on CPU
# How far a caller's teacher-forced log q(s | p) may lie from the beam's own (KV-cached,
# step-by-step) value before it is refused, in nats per target token, by the dtype of the
# model body. The two passes differ only by floating-point rounding ([EM] App. A.2). Measured
# on SmolLM2-135M (10-token targets, full/top-k/top-p): float32 body <= 1.2e-6 nats per token,
# bfloat16 body <= 0.027 nats per token; the limits below leave a margin of ~100x and ~4x.
VERBATIM_TOLERANCE_PER_TOKEN = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 0.1, "float16": 0.1}
RECOVERY_BEAM = 800  # [EM] App. F.4: a deterministic pool of 800 continuations
_LN10 = math.log(10.0)


# =========================================================================== small helpers
def _log10(x: float) -> float:
    return x / _LN10 if x != -math.inf else -math.inf


def _policy(policy) -> Policy:
    if isinstance(policy, Policy):
        return policy
    return Policy.parse(policy)


def _ids(name: str, seq, vocab_size: int | None) -> tuple[int, ...]:
    try:
        raw = seq.tolist() if hasattr(seq, "tolist") else list(seq)
        if raw and isinstance(raw[0], list):  # a [1, T] tensor/array
            if len(raw) != 1:
                raise TypeError
            raw = raw[0]
        out = tuple(int(t) for t in raw)
        if any(
            isinstance(t, bool) or (isinstance(t, float) and not float(t).is_integer()) for t in raw
        ):
            raise TypeError
    except (TypeError, ValueError):
        raise InputError(
            f"{name} must be a 1-D sequence of integer token ids, got {seq!r}",
            hint="tokenize the document once and pass the prefix/suffix token ids",
        ) from None
    if not out:
        what = (
            "the prompt conditions every continuation; a model needs at least one context token "
            "(prepend the BOS token)"
            if name == "prompt_ids"
            else "an empty suffix has no continuations to score; use windows with at least one suffix token"
        )
        raise InputError(f"{name} is empty", hint=what)
    if vocab_size is not None:
        bad = [t for t in out if not 0 <= t < vocab_size]
        if bad:
            raise InputError(
                f"{name} holds token ids outside [0, {vocab_size}): {bad[:5]}",
                hint="tokenize with the model's own tokenizer",
            )
    return out


def _epsilon(value) -> int:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise DomainError(
            f"epsilon must be a whole number of tokens, got {value!r}",
            hint="pass an integer edit distance such as --near-verbatim 5 ([EM] uses 5)",
        )
    if float(value) < 0:
        raise DomainError(
            f"epsilon must be >= 0 tokens, got {value!r}",
            hint="epsilon is a token edit distance; 0 gives the verbatim score, [EM] §6 uses 5",
        )
    if not float(value).is_integer():
        raise DomainError(
            f"epsilon must be a whole number of tokens, got {value!r}",
            hint="edit distances are integers, so B_eps = B_floor(eps); pass an integer",
        )
    return int(value)


def _beam(value, name: str = "beam") -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        if (
            not isinstance(value, bool)
            and isinstance(value, Real)
            and math.isfinite(float(value))
            and float(value).is_integer()
        ):
            value = int(value)
        else:
            raise DomainError(
                f"{name} must be a positive integer width, got {value!r}",
                hint=f"pass e.g. --beam {DEFAULT_BEAM}",
            )
    if int(value) < 1:
        raise DomainError(
            f"{name} width must be >= 1, got {value!r}",
            hint=f"a beam of width 0 keeps no continuation; pass e.g. --beam {DEFAULT_BEAM} "
            "(a width >= V^(l-1) enumerates the whole ball exactly)",
        )
    return int(value)


def _logprob_arg(name: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DomainError(f"{name} must be a natural-log probability (<= 0 or -inf), got {value!r}")
    v = float(value)
    if math.isnan(v) or v > 0:
        raise DomainError(
            f"{name} must be a natural-log probability (<= 0 or -inf), got {value!r}",
            hint="pass the teacher-forced log q(s | p) from the scoring engine, same policy",
        )
    return v


def default_verbatim_tolerance(lm: LanguageModel, suffix_len: int) -> float:
    """The largest accepted |caller's log q - beam's own log q| in nats for a target of
    ``suffix_len`` tokens on ``lm`` (see :data:`VERBATIM_TOLERANCE_PER_TOKEN`; an unknown body
    dtype gets the float32 limit).

    >>> from memclaim.models.base import SyntheticLM
    >>> default_verbatim_tolerance(SyntheticLM(), 10)  # no body dtype: the float32 limit
    0.001
    """
    dt = str(getattr(lm, "body_dtype", "float32")).replace("torch.", "")
    return VERBATIM_TOLERANCE_PER_TOKEN.get(dt, VERBATIM_TOLERANCE_PER_TOKEN["float32"]) * max(
        1, int(suffix_len)
    )


def _checked_verbatim(
    given: float, own: float, *, lm, pol: Policy, ell: int, tolerance: float | None, prompt, suffix
) -> tuple[float, str]:
    """The target's term to use, from the caller's ``given`` and the search's ``own`` teacher-forced
    value: ``given`` where the two agree within the tolerance; refused where they do not.

    One of them -inf and the other finite: under a policy that truncates the support (greedy,
    top-k, top-p) a near-tie can move the target in or out of the support between two passes
    ([EM] App. A.2); then the target's term is -inf (the conservative side: the bound can only
    fall) and the note says so. Under full/temperature policies -inf cannot come from rounding,
    so it is refused."""
    tol = default_verbatim_tolerance(lm, ell) if tolerance is None else float(tolerance)
    if given == own:
        return given, ""
    if math.isinf(given) or math.isinf(own):
        if pol.greedy or pol.top_k is not None or pol.top_p is not None:
            return -math.inf, (
                f" The caller's teacher-forced log q ({given:.6g}) and the search's own ({own:.6g}) "
                "disagree on whether the target is inside the policy's support, which a near-tie "
                "can cause ([EM] App. A.2); the target's term is taken as 0 probability "
                "(conservative)."
            )
    elif abs(given - own) <= tol:
        return given, ""
    raise ProcedureMismatchError(
        f"verbatim_logprob {given!r} does not match this search's own teacher-forced log q(s | p) = {own!r} "
        f"(difference {abs(given - own) if math.isfinite(given - own) else math.inf:.3g} nats, tolerance "
        f"{tol:.3g} nats for {ell} target tokens) under policy {pol.spec!r}, prompt of {len(prompt)} tokens "
        f"and suffix {list(suffix)[:8]}{'...' if len(suffix) > 8 else ''}",
        hint="pass the engine's log q for this very window (prompt and suffix ids) and policy, or omit "
        "verbatim_logprob to let the search compute it; a different dtype can need verbatim_tolerance=",
    )


# =========================================================================== continuation sets
@dataclass(frozen=True, eq=False)
class ContinuationSet:
    """Distinct length-ℓ continuations with their exact log-probabilities and distances.

    Stored grouped by their first ℓ-1 tokens, because the last position of a beam contributes
    up to V continuations per kept prefix: sequence i is ``prefixes[parent[i]] + (last[i],)``.
    ``logprob`` is natural-log q_{θ,φ}(y | p) (float64); ``distance`` is d(y, s).
    """

    prefixes: tuple[tuple[int, ...], ...]
    parent: np.ndarray  # [M] int64
    last: np.ndarray  # [M] int64
    logprob: np.ndarray  # [M] float64
    distance: np.ndarray  # [M] int64

    def __post_init__(self):
        for name in ("parent", "last", "logprob", "distance"):
            arr = np.ascontiguousarray(getattr(self, name))
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __len__(self) -> int:
        return int(self.last.size)

    def sequence(self, i: int) -> tuple[int, ...]:
        return self.prefixes[int(self.parent[i])] + (int(self.last[i]),)

    def sequences(self) -> list[tuple[int, ...]]:
        return [self.sequence(i) for i in range(len(self))]

    def as_dict(self) -> dict[tuple[int, ...], tuple[float, int]]:
        """{sequence: (log q, distance)} (reference / test helper; materializes every sequence)."""
        return {
            self.sequence(i): (float(self.logprob[i]), int(self.distance[i]))
            for i in range(len(self))
        }

    def log_mass(self, max_distance: int | None = None) -> float:
        lp = self.logprob if max_distance is None else self.logprob[self.distance <= max_distance]
        return logsumexp(lp)

    def top(self, n: int = 5) -> list[dict]:
        order = np.argsort(-self.logprob, kind="stable")[:n]
        return [
            {
                "tokens": list(self.sequence(i)),
                "log_prob": float(self.logprob[i]),
                "log10_prob": _log10(float(self.logprob[i])),
                "distance": int(self.distance[i]),
            }
            for i in order
        ]

    @classmethod
    def empty(cls) -> ContinuationSet:
        z = np.zeros(0, dtype=np.int64)
        return cls((), z, z.copy(), np.zeros(0, dtype=np.float64), z.copy())


# =========================================================================== the beam search
@dataclass
class _Search:
    """Raw output of :func:`_beam_search` (internal)."""

    found: ContinuationSet
    target_logprob: float
    exhaustive: bool
    rows: int
    calls: int
    target_rows: int
    max_batch: int
    stopped_at: int | None  # step at which every branch died (None: reached length ℓ)


def _beam_search(
    lm,
    prompt: tuple[int, ...],
    suffix: tuple[int, ...],
    policy: Policy,
    *,
    epsilon: int | None,
    width: int,
    final: str,
    use_cache: bool,
) -> _Search:
    """Beam search over length-ℓ continuations of ``prompt`` under ``policy``.

    epsilon=None: no distance pruning (the unpruned baseline of [EM] App. F.4).
    final="all": at the last position keep every live child of every row (beams and the
    target path); final="top": keep the ``width`` best children of the beam rows only.

    Batch layout at every step: rows [0, n_beam) are the beam; row n_beam, when present, is the
    target prefix s_{<t} followed by teacher forcing after the beam dropped it ("shadow").
    """
    import torch

    dev = lm.device
    ell = len(suffix)
    dp = IncrementalLevenshtein(suffix)
    n_distinct = dp.n_columns - 1
    distinct_t = torch.as_tensor(dp.distinct, dtype=torch.long, device=dev)
    neg_inf = -math.inf

    prefixes: list[tuple[int, ...]] = [()]
    scores = torch.zeros(1, dtype=torch.float64, device=dev)  # log q of each row's prefix
    dprows = dp.start()[None, :]  # [n, ℓ+1]
    n_beam = 1
    target_row: int | None = 0
    target_lp = 0.0
    exhaustive = True
    rows = calls = target_rows = 0
    max_batch = 1
    stopped_at = None

    prompt_t = torch.as_tensor([list(prompt)], dtype=torch.long, device=dev)  # [1, |p|]
    hidden, past = lm.forward_hidden(prompt_t, past=None, use_cache=use_cache)
    rows += len(prompt)
    calls += 1
    last_hidden = hidden[:, -1, :]  # [n, D]

    found = ContinuationSet.empty()
    for t in range(ell):
        logq = policy_logprobs(lm.logits(last_hidden), policy).to(torch.float64)  # [n, V]
        n, V = logq.shape
        if target_row is not None:
            # [EM] Eq. 1: teacher forcing of the target, one factor per step
            target_lp += float(logq[target_row, suffix[t]])
            if target_lp == neg_inf:
                target_row = None
        kids = dp.children(dprows, t)  # [n, U+1, ℓ+1] distinct child DP rows
        live = logq > neg_inf  # [n, V]: -inf (outside top-k/top-p/greedy support) never expands
        if epsilon is not None:
            # prune children none of whose completions can end within ε ([EM] Eq. 2)
            ok = torch.as_tensor(
                dp.min_final_distance(kids, t + 1) <= epsilon, device=dev
            )  # [n, U+1]
            mask = ok[:, n_distinct:].expand(n, V).clone()  # tokens not in s share one DP row
            if n_distinct:
                mask[:, distinct_t] = ok[:, :n_distinct]
            live &= mask
        total = scores[:, None] + logq  # [n, V] log q of each child

        if t == ell - 1:
            if final == "all":
                r, v = live.nonzero(as_tuple=True)
            else:
                beam_live = live[:n_beam]
                n_live = int(beam_live.sum())
                exhaustive &= n_live <= width
                k = min(width, n_live)
                cand = torch.where(
                    beam_live, total[:n_beam], torch.full_like(total[:n_beam], neg_inf)
                )
                idx = (
                    torch.topk(cand.reshape(-1), k).indices
                    if k
                    else torch.zeros(0, dtype=torch.long, device=dev)
                )
                r, v = idx // V, idx % V
            r_np = r.cpu().numpy().astype(np.int64)
            v_np = v.cpu().numpy().astype(np.int64)
            lp_np = total[r, v].cpu().numpy().astype(np.float64)
            dist = kids[r_np, dp.column_of(v_np), ell] if r_np.size else np.zeros(0, np.int64)
            found = ContinuationSet(tuple(prefixes), r_np, v_np, lp_np, dist)
            break

        # ---- keep the `width` best live children of the beam rows
        beam_live = live[:n_beam]
        n_live = int(beam_live.sum())
        if n_live > width:
            exhaustive = False  # a live branch was dropped for width
        k = min(width, n_live)
        if k:
            cand = torch.where(beam_live, total[:n_beam], torch.full_like(total[:n_beam], neg_inf))
            idx = torch.topk(cand.reshape(-1), k).indices  # [k] into the flattened [n_beam, V]
            par = (idx // V).cpu().numpy().astype(np.int64)
            tok = (idx % V).cpu().numpy().astype(np.int64)
        else:
            par = np.zeros(0, np.int64)
            tok = np.zeros(0, np.int64)
        # ---- the target path: inside the beam, or followed as the shadow row
        new_target = None
        if target_row is not None:
            hit = np.nonzero((par == target_row) & (tok == suffix[t]))[0]
            if hit.size:
                new_target = int(hit[0])
            else:
                par = np.append(par, target_row)
                tok = np.append(tok, suffix[t])
                new_target = k
        if par.size == 0:
            stopped_at = t + 1  # every branch is dead: the ball holds no reachable sequence
            break
        prefixes = [prefixes[p] + (int(y),) for p, y in zip(par.tolist(), tok.tolist())]
        par_t = torch.as_tensor(par, dtype=torch.long, device=dev)
        tok_t = torch.as_tensor(tok, dtype=torch.long, device=dev)
        scores = total[par_t, tok_t]
        dprows = kids[par, dp.column_of(tok)]
        n_beam = k
        target_row = new_target
        shadow = int(par.size > k)
        nb = int(par.size)
        max_batch = max(max_batch, nb)
        if use_cache:
            cache = lm.select_cache(past, par_t)  # a fresh cache: row i continues row par[i]
            hidden, past = lm.forward_hidden(
                tok_t[:, None], past=cache, use_cache=True
            )  # [nb, 1, D]
            rows += nb
            target_rows += shadow
        else:
            full = torch.as_tensor(
                [list(prompt) + list(pf) for pf in prefixes], dtype=torch.long, device=dev
            )
            hidden, _ = lm.forward_hidden(full, past=None, use_cache=False)  # [nb, |p|+t+1, D]
            rows += nb * full.shape[1]
            target_rows += shadow * full.shape[1]
        calls += 1
        last_hidden = hidden[:, -1, :]
    # a finite target path always keeps a row, so an early stop implies target_lp == -inf
    return _Search(found, target_lp, exhaustive, rows, calls, target_rows, max_batch, stopped_at)


def _teacher_forced(
    lm, prompt: tuple[int, ...], suffix: tuple[int, ...], policy: Policy
) -> tuple[float, int]:
    """log q(s | p) by one teacher-forced pass ([EM] Eq. 1); returns (log q, rows)."""
    import torch

    ids = torch.as_tensor([list(prompt) + list(suffix[:-1])], dtype=torch.long, device=lm.device)
    hidden, _ = lm.forward_hidden(ids, past=None, use_cache=False)  # [1, |p|+ℓ-1, D]
    h = hidden[0, len(prompt) - 1 :, :]  # [ℓ, D] rows that predict s_1..s_ℓ
    tgt = torch.as_tensor(list(suffix), dtype=torch.long, device=lm.device)
    lp = policy_target_logprob(lm.logits(h), tgt, policy).to(torch.float64)
    return float(lp.sum()), int(ids.shape[1])


# =========================================================================== the lower bound
@dataclass(frozen=True)
class NearVerbatimResult(ResultMixin):
    """A certified lower bound on q_{θ,φ}(B_ε(s) | p) for one window ([EM] App. B.1 Eq. 2, §6).

    ``log_bound`` (natural log) is the score; it is >= ``log_verbatim`` and <= the true mass,
    and equal to the true mass when ``exhaustive``. ``continuations`` holds the distinct
    sequences summed (omitted from :meth:`to_dict`; see :func:`union_near_verbatim`).
    """

    epsilon: int
    beam: int
    policy: str
    model: str
    prompt_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    log_bound: float
    log_verbatim: float
    n_continuations: int | None  # distinct sequences summed; None when the ball is the whole space
    exhaustive: bool  # no live branch was ever dropped for width: the bound is the exact mass
    whole_space: bool  # ε >= ℓ: every length-ℓ sequence is in the ball, mass exactly 1
    forward_rows: int
    forward_calls: int
    target_rows: int  # rows spent only to follow the target path after the beam dropped it
    max_batch_rows: int
    used_kv_cache: bool
    stopped_at: int | None
    note: str
    continuations: ContinuationSet | None = field(default=None, repr=False, compare=False)

    @property
    def suffix_len(self) -> int:
        return len(self.suffix_ids)

    @property
    def log10_bound(self) -> float:
        return _log10(self.log_bound)

    def log_mass_at(self, epsilon: int) -> float:
        """This run's lower bound on the smaller ball B_epsilon (epsilon <= self.epsilon)."""
        e = _epsilon(epsilon)
        if e > self.epsilon:
            raise DomainError(
                f"epsilon {e} exceeds the run's epsilon {self.epsilon}",
                hint="a run only knows sequences within its own epsilon; run it at the larger value",
            )
        if e >= self.suffix_len:
            return 0.0
        if self.continuations is None:
            raise InputError(
                "this result kept no continuations", hint="rerun with keep_sequences=True"
            )
        return max(self.continuations.log_mass(e), self.log_verbatim)

    def to_dict(self) -> dict:
        d = {
            f: to_jsonable(getattr(self, f))
            for f in ("epsilon", "beam", "policy", "model", "prompt_ids", "suffix_ids", "log_bound")
        }
        d["log10_bound"] = to_jsonable(self.log10_bound)
        d["log_verbatim"] = to_jsonable(self.log_verbatim)
        d["log10_verbatim"] = to_jsonable(_log10(self.log_verbatim))
        for f in (
            "n_continuations",
            "exhaustive",
            "whole_space",
            "forward_rows",
            "forward_calls",
            "target_rows",
            "max_batch_rows",
            "used_kv_cache",
            "stopped_at",
        ):
            d[f] = to_jsonable(getattr(self, f))
        cs = self.continuations
        if cs is not None and not self.whole_space:
            d["log_mass_by_distance"] = [
                to_jsonable(logsumexp(cs.logprob[cs.distance == k]))
                for k in range(self.epsilon + 1)
            ]
            d["n_by_distance"] = [int(np.sum(cs.distance == k)) for k in range(self.epsilon + 1)]
            d["top_continuations"] = to_jsonable(cs.top(5))
        d["note"] = self.note
        return d


_CLAIM_NOTE = (
    " For a claim ([EM] §3, §C): this score can only understate the ball mass, so it is conservative "
    "for members (a member can be missed, never inflated); controls are scored by the same procedure "
    "(same ε, beam, policy), so the conformal false-positive guarantee holds for this score as a "
    "procedure, and a candidate that clears the threshold has true ball mass at least as high. "
    "Clearing it certifies near-verbatim membership, not that s itself was memorized exactly."
)


def _note(
    *,
    epsilon: int,
    ell: int,
    beam: int,
    policy: Policy,
    exhaustive: bool,
    whole_space: bool,
    n: int | None,
) -> str:
    if whole_space:
        return (
            f"epsilon = {epsilon} >= suffix length {ell}: every length-{ell} sequence is within "
            f"{epsilon} token edits of s, so the ε-ball is the whole output space and its mass is "
            "exactly 1 under any decoding policy ([EM] Eq. 2); no search was run. This score carries "
            "no information about s; use epsilon < suffix length."
        )
    s = (
        f"Lower bound on q(B_ε(s) | p) at ε = {epsilon} tokens: the exact probabilities of {n} distinct "
        f"length-{ell} continuations within edit distance ε of s, found by an ε-pruned beam of width "
        f"{beam}, including the teacher-forced verbatim path; the true mass can only be larger."
    )
    if policy.greedy:
        s += (
            " Greedy policy: q is 1 on the greedy continuation and 0 elsewhere, so the ball's mass is "
            "1 if the greedy continuation is within ε and 0 otherwise (near-verbatim discoverable "
            "extraction, [EM] App. H.1); the search is exact."
        )
    elif exhaustive:
        s += " The beam never dropped a live branch for width, so this bound equals the exact ball mass."
    else:
        s += (
            " The beam dropped live branches for width, so the bound may be loose and is not monotone "
            "in ε or width on its own ([EM] §6); report the union over the settings run "
            "(union_near_verbatim)."
        )
    return s + _CLAIM_NOTE


def near_verbatim_lower_bound(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    suffix_ids: Sequence[int],
    *,
    policy: Policy | str,
    epsilon: int,
    beam: int = DEFAULT_BEAM,
    verbatim_logprob: float | None = None,
    verbatim_tolerance: float | None = None,
    use_cache: bool = True,
    keep_sequences: bool = True,
) -> NearVerbatimResult:
    """Certified lower bound on q_{θ,φ}(B_ε(s) | p) ([EM] App. B.1 Eq. 2, §6, App. F.3).

    lm: a :class:`memclaim.models.base.LanguageModel`. prompt_ids / suffix_ids: token ids
    (prompt p, suffix s, ℓ = len(s)). policy: a :class:`Policy` or policy string.
    epsilon: token edit distance ε >= 0. beam: width B >= 1.
    verbatim_logprob: the engine's teacher-forced log q(s | p) under the same policy; when given
    it is checked against the search's own teacher-forced value (the target path followed along
    the beam, or one pass when ε >= ℓ) and used for the target's term (so the bound is >= that
    number, the store's verbatim score) when they agree within ``verbatim_tolerance`` nats
    (default :func:`default_verbatim_tolerance`: rounding between KV-cached and batched passes, [EM]
    App. A.2); a larger mismatch is refused (ProcedureMismatchError), so a wrong value cannot
    lift the bound above the ball's mass. Without it the search's own value is used.
    use_cache: reuse the KV cache (``select_cache``) between steps; False recomputes every
    step from scratch (reference path, same result).
    keep_sequences: keep the distinct continuations (needed by :func:`union_near_verbatim`).

    Edge cases: ε >= ℓ returns log 1 = 0 exactly (the ball is the whole space); greedy returns
    log 1 or -inf (the greedy continuation is or is not within ε); tokens outside a top-k/top-p
    support are pruned, never summed.

    >>> from memclaim.models.base import SyntheticLM
    >>> r = near_verbatim_lower_bound(SyntheticLM(), [1, 2], [3, 4, 5], policy="top-k:4", epsilon=1, beam=4)
    >>> round(r.log_bound, 4), round(r.log_verbatim, 4), r.n_continuations, r.exhaustive
    (-1.7598, -4.1587, 6, False)
    """
    pol = _policy(policy)
    eps = _epsilon(epsilon)
    width = _beam(beam)
    vocab = getattr(lm, "vocab_size", None)
    prompt = _ids("prompt_ids", prompt_ids, vocab)
    suffix = _ids("suffix_ids", suffix_ids, vocab)
    given = _logprob_arg("verbatim_logprob", verbatim_logprob)
    ell = len(suffix)
    model = lm.fingerprint()

    if verbatim_tolerance is not None and (
        isinstance(verbatim_tolerance, bool)
        or not isinstance(verbatim_tolerance, Real)
        or not 0 <= float(verbatim_tolerance) < math.inf
    ):
        raise DomainError(
            f"verbatim_tolerance must be a finite number of nats >= 0, got {verbatim_tolerance!r}",
            hint="omit it for the default (rounding between KV-cached and batched passes)",
        )
    if eps >= ell:
        # [EM] Eq. 2: d(y, s) <= ℓ for every y of length ℓ, so B_ε(s) = V^ℓ and its mass is 1.
        own, rows = _teacher_forced(lm, prompt, suffix, pol)
        extra = ""
        if given is not None:
            given, extra = _checked_verbatim(
                given,
                own,
                lm=lm,
                pol=pol,
                ell=ell,
                tolerance=verbatim_tolerance,
                prompt=prompt,
                suffix=suffix,
            )
        return NearVerbatimResult(
            epsilon=eps,
            beam=width,
            policy=pol.spec,
            model=model,
            prompt_ids=prompt,
            suffix_ids=suffix,
            log_bound=0.0,
            log_verbatim=own if given is None else given,
            n_continuations=None,
            exhaustive=True,
            whole_space=True,
            forward_rows=rows,
            forward_calls=1,
            target_rows=rows,
            max_batch_rows=1,
            used_kv_cache=False,
            stopped_at=None,
            note=_note(
                epsilon=eps,
                ell=ell,
                beam=width,
                policy=pol,
                exhaustive=True,
                whole_space=True,
                n=None,
            )
            + extra,
            continuations=None,
        )

    out = _beam_search(
        lm, prompt, suffix, pol, epsilon=eps, width=width, final="all", use_cache=bool(use_cache)
    )
    found = out.found
    log_verbatim = out.target_logprob
    extra = ""
    if given is not None:
        # [EM] App. A.2: the caller's pass and the beam's differ by rounding only; refuse more
        given, extra = _checked_verbatim(
            given,
            out.target_logprob,
            lm=lm,
            pol=pol,
            ell=ell,
            tolerance=verbatim_tolerance,
            prompt=prompt,
            suffix=suffix,
        )
        # the engine's teacher-forced number replaces the incremental one for the target's term
        keep = np.ones(len(found), dtype=bool)
        keep[_match_rows(found, suffix)] = False
        found = _subset(found, keep)
        if given > -math.inf:
            found = _append(found, suffix, given, 0)
        log_verbatim = given
    log_bound = logsumexp(found.logprob)
    n = len(found)
    return NearVerbatimResult(
        epsilon=eps,
        beam=width,
        policy=pol.spec,
        model=model,
        prompt_ids=prompt,
        suffix_ids=suffix,
        log_bound=log_bound,
        log_verbatim=log_verbatim,
        n_continuations=n,
        exhaustive=out.exhaustive,
        whole_space=False,
        forward_rows=out.rows,
        forward_calls=out.calls,
        target_rows=out.target_rows,
        max_batch_rows=out.max_batch,
        used_kv_cache=bool(use_cache),
        stopped_at=out.stopped_at,
        note=_note(
            epsilon=eps,
            ell=ell,
            beam=width,
            policy=pol,
            exhaustive=out.exhaustive,
            whole_space=False,
            n=n,
        )
        + extra,
        continuations=found if keep_sequences else None,
    )


def _match_rows(cs: ContinuationSet, seq: tuple[int, ...]) -> np.ndarray:
    """Indices of entries of ``cs`` equal to ``seq`` (0 or 1 of them)."""
    head = tuple(seq[:-1])
    pids = [i for i, pf in enumerate(cs.prefixes) if pf == head]
    if not pids:
        return np.zeros(0, dtype=np.int64)
    return np.nonzero(np.isin(cs.parent, pids) & (cs.last == seq[-1]))[0]


def _subset(cs: ContinuationSet, keep: np.ndarray) -> ContinuationSet:
    return ContinuationSet(
        cs.prefixes, cs.parent[keep], cs.last[keep], cs.logprob[keep], cs.distance[keep]
    )


def _append(
    cs: ContinuationSet, seq: tuple[int, ...], logprob: float, distance: int
) -> ContinuationSet:
    head = tuple(seq[:-1])
    prefixes = cs.prefixes
    if head in prefixes:
        pid = prefixes.index(head)
    else:
        pid = len(prefixes)
        prefixes = prefixes + (head,)
    return ContinuationSet(
        prefixes,
        np.append(cs.parent, pid),
        np.append(cs.last, seq[-1]),
        np.append(cs.logprob, logprob),
        np.append(cs.distance, distance),
    )


# =========================================================================== union over settings
@dataclass(frozen=True)
class NearVerbatimUnion(ResultMixin):
    """Union of several near-verbatim runs on one window, merged by sequence set.

    ``log_bounds[e]`` is the lower bound on q(B_e(s) | p) for e = 0..max ε: the logsumexp of
    the distinct sequences found by any run with distance <= e (duplicates counted once, at the
    largest of their computed log-probabilities). It is non-decreasing in e by construction and
    never below any single run's bound at its own ε. ``exact[e]`` is True where some run with
    ε_run >= e was exhaustive (or e >= ℓ): there the bound is the exact ball mass.
    """

    policy: str
    model: str
    prompt_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    epsilons: tuple[int, ...]
    log_bounds: tuple[float, ...]
    exact: tuple[bool, ...]
    log_verbatim: float
    n_continuations: int
    settings: tuple[dict, ...]
    forward_rows: int
    forward_calls: int
    note: str

    def log_bound_at(self, epsilon: int) -> float:
        e = _epsilon(epsilon)
        if e > self.epsilons[-1]:
            raise DomainError(
                f"epsilon {e} exceeds the largest epsilon run ({self.epsilons[-1]})",
                hint="the union knows only sequences within the largest epsilon run",
            )
        return self.log_bounds[e]

    def to_dict(self) -> dict:
        d = ResultMixin.to_dict(self)
        d["log10_bounds"] = [to_jsonable(_log10(x)) for x in self.log_bounds]
        return d


def union_near_verbatim(results: Sequence[NearVerbatimResult]) -> NearVerbatimUnion:
    """Merge runs on the same window (same model, policy, prompt, suffix) by sequence set.

    Report this, not a single pruned run, when several (ε, beam) settings were run: it is
    monotone in ε by construction. Monotonicity of a *single* run in ε or width is claimed only
    when its beam was exhaustive (then it is the exact mass).

    >>> from memclaim.models.base import SyntheticLM
    >>> runs = [near_verbatim_lower_bound(SyntheticLM(), [1, 2], [3, 4, 5], policy="top-k:4", epsilon=1, beam=b)
    ...         for b in (4, 16)]
    >>> u = union_near_verbatim(runs)
    >>> u.epsilons, [round(b, 4) for b in u.log_bounds], u.exact
    ((0, 1), [-4.1587, -1.7567], (True, True))
    """
    results = list(results)
    if not results:
        raise InputError(
            "no near-verbatim results to merge", hint="pass at least one NearVerbatimResult"
        )
    first = results[0]
    for r in results:
        if not isinstance(r, NearVerbatimResult):
            raise InputError(f"expected NearVerbatimResult, got {type(r).__name__}")
        for attr in ("model", "policy", "prompt_ids", "suffix_ids"):
            if getattr(r, attr) != getattr(first, attr):
                raise ProcedureMismatchError(
                    f"cannot merge near-verbatim runs with different {attr}: "
                    f"{getattr(first, attr)!r} vs {getattr(r, attr)!r}",
                    hint="merge only runs on the same window under the same model and decoding policy",
                )
        if r.continuations is None and not r.whole_space:
            raise InputError(
                "a result without its continuations cannot be merged by sequence set",
                hint="run near_verbatim_lower_bound(..., keep_sequences=True)",
            )
    ell = len(first.suffix_ids)
    e_max = min(max(r.epsilon for r in results), ell)
    log_verbatim = max(r.log_verbatim for r in results)

    # dedupe by full sequence: key = (global prefix id, last token); keep the largest log q
    gid: dict[tuple[int, ...], int] = {}
    keys, lps, dists = [], [], []
    for r in results:
        cs = r.continuations
        if cs is None or len(cs) == 0:
            continue
        pmap = np.asarray([gid.setdefault(pf, len(gid)) for pf in cs.prefixes], dtype=np.int64)
        keys.append(np.stack([pmap[cs.parent], cs.last], axis=1))
        lps.append(cs.logprob)
        dists.append(cs.distance)
    prefixes = tuple(gid)
    if keys:
        K = np.concatenate(keys)  # [M, 2]
        L = np.concatenate(lps)
        D = np.concatenate(dists)
        order = np.lexsort((-L, K[:, 1], K[:, 0]))  # by key, then largest log q first
        K, L, D = K[order], L[order], D[order]
        first_of = np.ones(len(K), dtype=bool)
        first_of[1:] = np.any(K[1:] != K[:-1], axis=1)
        merged = ContinuationSet(prefixes, K[first_of, 0], K[first_of, 1], L[first_of], D[first_of])
    else:
        merged = ContinuationSet.empty()
    # the target is in every ball; use the best teacher-forced value any run reported
    hit = _match_rows(merged, first.suffix_ids)
    if hit.size:
        lp = merged.logprob.copy()
        lp[hit] = np.maximum(lp[hit], log_verbatim)
        merged = ContinuationSet(merged.prefixes, merged.parent, merged.last, lp, merged.distance)
    elif log_verbatim > -math.inf:
        merged = _append(merged, first.suffix_ids, log_verbatim, 0)

    epsilons = tuple(range(e_max + 1))
    bounds, exact = [], []
    for e in epsilons:
        if e >= ell:
            bounds.append(0.0)
            exact.append(True)
            continue
        bounds.append(merged.log_mass(e))
        exact.append(any(r.exhaustive and not r.whole_space and r.epsilon >= e for r in results))
    settings = tuple(
        {
            "epsilon": r.epsilon,
            "beam": r.beam,
            "exhaustive": r.exhaustive,
            "whole_space": r.whole_space,
            "log_bound": r.log_bound,
            "n_continuations": r.n_continuations,
            "forward_rows": r.forward_rows,
        }
        for r in results
    )
    note = (
        "Union of near-verbatim lower bounds over the settings run, merged by sequence set: at each ε "
        "it sums the distinct sequences any run found within that distance, so it is non-decreasing "
        "in ε and never below a single run. Entries marked exact come from an exhaustive beam; "
        "the others are lower bounds only." + _CLAIM_NOTE
    )
    return NearVerbatimUnion(
        policy=first.policy,
        model=first.model,
        prompt_ids=first.prompt_ids,
        suffix_ids=first.suffix_ids,
        epsilons=epsilons,
        log_bounds=tuple(bounds),
        exact=tuple(exact),
        log_verbatim=log_verbatim,
        n_continuations=len(merged),
        settings=settings,
        forward_rows=sum(r.forward_rows for r in results),
        forward_calls=sum(r.forward_calls for r in results),
        note=note,
    )


# =========================================================================== deterministic recovery
@dataclass(frozen=True)
class RecoveryPool:
    """The model side of deterministic recovery ([EM] App. F.4): an unpruned beam's pool and the
    members within ε token edits of s, most probable first (``within``: (tokens, log q,
    distance)). :func:`memclaim.audits.recovery.deterministic_recovery` adds the sampling
    budgets (memclaim.claims.budget) and the comparison with the beam's cost."""

    policy: Policy
    epsilon: int
    beam: int
    model: str
    prompt_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    pool_size: int
    within: tuple[tuple[tuple[int, ...], float, int], ...]
    log_verbatim: float
    exhaustive: bool  # the pool is the policy's whole support over length-ℓ sequences
    forward_rows: int
    forward_calls: int
    target_rows: int


def recovery_pool(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    suffix_ids: Sequence[int],
    *,
    policy: Policy | str,
    epsilon: int,
    beam: int = RECOVERY_BEAM,
    use_cache: bool = True,
) -> RecoveryPool:
    """[EM] App. F.4: run an unpruned beam of width ``beam`` (a deterministic pool of
    continuations) and keep the members within token edit distance ε of s.

    >>> from memclaim.models.base import SyntheticLM
    >>> pool = recovery_pool(SyntheticLM(), [1, 2], [3, 4, 5], policy="top-k:4", epsilon=1, beam=4)
    >>> pool.pool_size, [(seq, round(lq, 4), d) for seq, lq, d in pool.within]
    (4, [((0, 4, 5), -1.9851, 1)])
    """
    pol = _policy(policy)
    eps = _epsilon(epsilon)
    width = _beam(beam)
    vocab = getattr(lm, "vocab_size", None)
    prompt = _ids("prompt_ids", prompt_ids, vocab)
    suffix = _ids("suffix_ids", suffix_ids, vocab)
    out = _beam_search(
        lm, prompt, suffix, pol, epsilon=None, width=width, final="top", use_cache=bool(use_cache)
    )
    pool = out.found
    within = np.nonzero(pool.distance <= eps)[0]
    members = tuple(
        (pool.sequence(int(i)), float(pool.logprob[i]), int(pool.distance[i]))
        for i in within[np.argsort(-pool.logprob[within], kind="stable")]
    )
    return RecoveryPool(
        policy=pol,
        epsilon=eps,
        beam=width,
        model=lm.fingerprint(),
        prompt_ids=prompt,
        suffix_ids=suffix,
        pool_size=len(pool),
        within=members,
        log_verbatim=out.target_logprob,
        exhaustive=out.exhaustive,
        forward_rows=out.rows,
        forward_calls=out.calls,
        target_rows=out.target_rows,
    )


# =========================================================================== cost estimate
@dataclass(frozen=True)
class BeamCostEstimate(ResultMixin):
    """Upper bound on the forward cost of one window's beam (pruning can only lower it)."""

    prompt_len: int
    suffix_len: int
    beam: int
    vocab_size: int
    used_kv_cache: bool
    forward_rows_max: int  # token positions through the model body
    forward_calls: int  # forward_hidden invocations
    logit_rows_max: int  # rows unembedded to [V] logits
    peak_batch_rows: int
    kv_positions_peak: int  # cached positions held at once (peak batch × sequence length)

    def describe(self, *, rows_per_second: float | None = None) -> str:
        s = (
            f"near-verbatim beam {self.beam}, l = {self.suffix_len}, |p| = {self.prompt_len}: at most "
            f"{self.forward_rows_max:,} forward rows in {self.forward_calls} calls per window "
            f"(peak batch {self.peak_batch_rows}, {self.logit_rows_max:,} logit rows x V = {self.vocab_size:,})"
        )
        if rows_per_second is not None:
            rps = float(rows_per_second)
            if not (math.isfinite(rps) and rps > 0):
                raise DomainError(
                    f"rows_per_second must be a positive number, got {rows_per_second!r}"
                )
            s += f", about {self.forward_rows_max / rps:.3g} s per window at {rps:.3g} rows/s"
        return s


def estimate_beam_cost(
    *, prompt_len: int, suffix_len: int, beam: int, vocab_size: int, use_cache: bool = True
) -> BeamCostEstimate:
    """Forward rows and calls of :func:`near_verbatim_lower_bound` (or the recovery beam) for
    one window, before running it. Step t (1..ℓ-1) runs at most min(B + 1, V^t) rows (the
    beam plus the target-path row, never more than the V^t distinct prefixes); the last
    position needs no forward pass. Without the KV cache each row recomputes |p| + t positions.

    >>> c = estimate_beam_cost(prompt_len=50, suffix_len=50, beam=10, vocab_size=49152)
    >>> c.forward_rows_max, c.forward_calls, c.peak_batch_rows
    (589, 50, 11)
    """
    p = integer("prompt_len", prompt_len, minimum=1)
    ell = integer("suffix_len", suffix_len, minimum=1)
    B = _beam(beam)
    V = integer("vocab_size", vocab_size, minimum=1)
    rows = p
    logit_rows = 1
    peak = 1
    n_t = 1  # V^t, capped
    for t in range(1, ell):
        n_t = min(n_t * V, B + 1)
        nb = min(B + 1, n_t)
        rows += nb * (1 if use_cache else p + t)
        logit_rows += nb
        peak = max(peak, nb)
    return BeamCostEstimate(
        prompt_len=p,
        suffix_len=ell,
        beam=B,
        vocab_size=V,
        used_kv_cache=bool(use_cache),
        forward_rows_max=rows,
        forward_calls=ell,
        logit_rows_max=logit_rows,
        peak_batch_rows=peak,
        kv_positions_peak=peak * (p + ell - 1),
    )


# --- the near-verbatim settings of a scoring run and the columns they add (moved from
# scoring/runner.py, issue 26 item 3: the runner keeps only the run)


def nv_column(spec: str, epsilon: int) -> str:
    """The results column of the near-verbatim bound of policy ``spec`` at ``epsilon`` token edits.

    >>> nv_column("top-k:40", 1)
    'nv_logq:top-k:40:eps1'
    """
    return f"nv_logq:{spec}:eps{epsilon}"


def near_verbatim_columns(
    engine: TeacherForcingEngine, items: Sequence[Item], scores: BatchScores, near_verbatim: dict
) -> dict[str, np.ndarray]:
    """[EM] App. B.1 Eq. 2: for every item and policy, the union over the (epsilon, beam)
    settings of the certified lower bounds on the epsilon-ball mass, per epsilon; the target's
    term is the engine's teacher-forced log q, checked against the beam's own within the stated
    rounding tolerance (refused beyond it), so the bound is never below the verbatim score.
    Each item's ball is centred on its own target ids (a templated procedure tokenizes the
    target after each prompt, so two prompts may centre their balls on different token
    sequences of the same text); the bounds are aggregated over prompts like log q ([EM] Eq. 15).

    >>> from memclaim.decoding import parse_policies
    >>> from memclaim.models.base import SyntheticLM
    >>> from memclaim.scoring.engine import TeacherForcingEngine
    >>> from memclaim.scoring.units import Item
    >>> engine = TeacherForcingEngine(SyntheticLM(), parse_policies(["full"]))
    >>> scores = engine.score_batch([[1, 2]], [[3, 4, 5]])
    >>> cols = near_verbatim_columns(engine, [Item("a", (1, 2), (3, 4, 5))], scores, {"epsilons": [1], "beams": [4]})
    >>> cols["nv_logq:full:eps1"].round(4), cols["nv_found:full"]
    (array([-1.9272]), array([12]))
    """
    eps = sorted(int(e) for e in near_verbatim["epsilons"])
    beams = sorted(int(b) for b in near_verbatim["beams"])
    cols: dict[str, np.ndarray] = {}
    for j, pol in enumerate(engine.policies):
        logs = {e: np.empty(len(items)) for e in eps}
        exact = {e: np.zeros(len(items), dtype=bool) for e in eps}
        found = np.zeros(len(items), dtype=np.int64)
        rows = np.zeros(len(items), dtype=np.int64)
        for i, it in enumerate(items):
            runs = [
                near_verbatim_lower_bound(
                    engine.lm,
                    it.prompt,
                    it.suffix,
                    policy=pol,
                    epsilon=e,
                    beam=b,
                    verbatim_logprob=float(scores.logq[i, j]),
                )
                for e in eps
                for b in beams
            ]
            u = union_near_verbatim(runs)
            for e in eps:
                logs[e][i] = u.log_bound_at(min(e, u.epsilons[-1]))
                exact[e][i] = bool(u.exact[min(e, len(u.exact) - 1)])
            found[i] = u.n_continuations
            rows[i] = u.forward_rows
        for e in eps:
            cols[nv_column(pol.spec, e)] = logs[e]
            cols[f"nv_exact:{pol.spec}:eps{e}"] = exact[e]
        cols[f"nv_found:{pol.spec}"] = found
        cols[f"nv_forward_rows:{pol.spec}"] = rows
    return cols


def normalize_near_verbatim(nv: dict | None, *, suffix_tokens: int) -> dict | None:
    """Validate near-verbatim settings (:class:`~memclaim.procedure.NearVerbatim`): integer
    epsilons >= 0 and beams >= 1, sorted, unique.

    >>> normalize_near_verbatim({"epsilons": [2, 1, 1]}, suffix_tokens=10)
    {'epsilons': [1, 2], 'beams': [16]}
    """
    v = NearVerbatim.from_dict(nv)
    return None if v is None else v.to_dict()


def near_verbatim_cost_message(
    units: Iterable[WorkUnit], nv: dict, n_policies: int, model: LoadedModel
) -> str:
    """The log line announcing a near-verbatim run's cost: at most how many forward rows the beams
    take (:func:`~memclaim.scoring.nearverbatim.estimate_beam_cost`), in all and per window-policy.

    >>> from memclaim.scoring.units import Item, WorkUnit
    >>> units = [WorkUnit("u0", "pk", (Item("a", (1, 2) * 4, (3,) * 8),))]
    >>> near_verbatim_cost_message(units, {"epsilons": [1], "beams": [16]}, 2, load_model("toy"))  # doctest: +SKIP
    'near-verbatim lower bounds (epsilon [1], beam [16]): at most 254 forward rows for 1 windows x 2 policies (~127 per window-policy); a beam of 800 on SmolLM2 costs about a minute per window on 2 CPU cores'
    """
    rows = 0
    n = 0
    for u in units:
        it = u.items[0]
        per = sum(
            estimate_beam_cost(
                prompt_len=len(it.prompt),
                suffix_len=len(it.suffix),
                beam=b,
                vocab_size=model.lm.vocab_size if model.weights_loaded else 10**9,
            ).forward_rows_max
            for b in nv["beams"]
        ) * len(nv["epsilons"])
        rows += per * u.n_items * n_policies
        n += u.n_items
    return (
        f"near-verbatim lower bounds (epsilon {nv['epsilons']}, beam {nv['beams']}): at most {rows:,} forward "
        f"rows for {n} windows x {n_policies} policies (~{rows // max(1, n * n_policies):,} per window-policy); "
        "a beam of 800 on SmolLM2 costs about a minute per window on 2 CPU cores"
    )
