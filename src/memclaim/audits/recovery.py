"""Deterministic recovery against sampling ([EM] App. F.4, Figs. 22-23): which continuations
within ε token edits of s an unpruned beam returns, and how many random samples (n_c, [EM] §6,
App. F.1 Eq. 34 with δ = 1 - c) would draw each of them once with probability c, against the
beam's own cost. The beam is the scoring engine's (memclaim.scoring.nearverbatim.recovery_pool);
the budgets are memclaim.claims.budget's (the one home of n_δ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING

from ..claims.budget import queries_needed
from ..claims.scores import log10_or_none
from ..errors import DomainError
from ..jsonutil import ResultMixin
from ..numeric import logsumexp
from ..scoring.nearverbatim import RECOVERY_BEAM, recovery_pool

if TYPE_CHECKING:
    from ..decoding import Policy
    from ..models.base import LanguageModel

__all__ = ["RecoveredContinuation", "RecoveryResult", "deterministic_recovery", "sampling_budget"]


def sampling_budget(log_p: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """(n_c, log10 n_c): samples needed to draw a sequence of probability p at least once with
    probability c, i.e. :func:`memclaim.claims.budget.queries_needed` with δ = 1 - c ([EM] §6).

    >>> sampling_budget(math.log(0.1))
    (29.0, 1.462397997898956)
    """
    q = queries_needed(log_p=log_p, delta=1.0 - float(confidence))
    return q.n, q.log10_n


@dataclass(frozen=True)
class RecoveredContinuation(ResultMixin):
    tokens: tuple[int, ...]
    log_prob: float
    log10_prob: float
    distance: int
    verbatim: bool
    n_samples: float  # n_c: samples to draw this exact sequence once with probability c
    log10_n_samples: float
    sampling_cheaper: bool  # n_c <= the beam's cost in samples (the gray-blue region of Fig. 22)


@dataclass(frozen=True)
class RecoveryResult(ResultMixin):
    """Deterministic recovery from an unpruned beam's pool ([EM] App. F.4, Figs. 22–23)."""

    epsilon: int
    beam: int
    policy: str
    model: str
    prompt_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    confidence: float
    pool_size: int
    recovered: tuple[RecoveredContinuation, ...]  # pool members within ε, most probable first
    recovered_verbatim: bool
    recovered_near_verbatim: bool
    log_recovered_mass: float  # Σ over recovered: itself a lower bound on q(B_ε(s) | p)
    n_samples_recovered_mass: float
    log10_n_samples_recovered_mass: float
    log_verbatim: float
    n_samples_verbatim: float
    log10_n_samples_verbatim: float
    exhaustive: bool  # the pool is the policy's whole support over length-ℓ sequences
    forward_rows: int
    forward_calls: int
    target_rows: int
    rows_per_sample: int
    cost_in_samples: float
    cost_basis: str
    note: str


def deterministic_recovery(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    suffix_ids: Sequence[int],
    *,
    policy: Policy | str,
    epsilon: int,
    beam: int = RECOVERY_BEAM,
    confidence: float = 0.95,
    cost_in_samples: float | None = None,
    use_cache: bool = True,
) -> RecoveryResult:
    """[EM] App. F.4: an unpruned beam of width ``beam`` returns a deterministic pool of
    continuations; keep those within token edit distance ε of s; for each, say whether it is
    the verbatim target and give the sampling budget n_c its probability implies
    (c = ``confidence``; n_95 by default), against the beam's own cost.

    The beam's cost in samples is, by default, its forward rows divided by the rows one
    sampled continuation costs (|p| + ℓ - 1 with a KV cache). [EM] quotes "about 20 samples"
    for a pool of 800, a wall-clock comparison on batched hardware; pass ``cost_in_samples``
    to use a measured figure instead.

    >>> from memclaim.models.base import SyntheticLM
    >>> r = deterministic_recovery(SyntheticLM(), [1, 2], [3, 4, 5], policy="top-k:4", epsilon=1, beam=4)
    >>> [(c.tokens, c.distance, c.n_samples) for c in r.recovered], r.n_samples_verbatim, r.cost_in_samples
    ([((0, 4, 5), 1, 21.0)], 191.0, 2.5)
    """
    c = (
        float(confidence)
        if isinstance(confidence, Real) and not isinstance(confidence, bool)
        else math.nan
    )
    if not (0.0 < c < 1.0):
        raise DomainError(
            f"confidence must lie strictly between 0 and 1, got {confidence!r}",
            hint="[EM] uses 0.95 (n_95)",
        )
    if cost_in_samples is not None and (
        isinstance(cost_in_samples, bool)
        or not isinstance(cost_in_samples, Real)
        or not (math.isfinite(float(cost_in_samples)) and float(cost_in_samples) > 0)
    ):
        raise DomainError(
            f"cost_in_samples must be a positive number, got {cost_in_samples!r}",
            hint="[EM] App. F.4 quotes about 20 samples for a pool of 800",
        )
    out = recovery_pool(
        lm, prompt_ids, suffix_ids, policy=policy, epsilon=epsilon, beam=beam, use_cache=use_cache
    )
    pol, eps, width, suffix = out.policy, out.epsilon, out.beam, out.suffix_ids
    rows_per_sample = len(out.prompt_ids) + len(suffix) - 1
    if cost_in_samples is None:
        cost = (out.forward_rows - out.target_rows) / rows_per_sample
        basis = "forward rows of the beam / rows of one sampled continuation (|p| + l - 1)"
    else:
        cost = float(cost_in_samples)
        basis = "given"
    recovered = []
    for seq, lp, dist in out.within:
        n, l10 = sampling_budget(lp, confidence=c)
        recovered.append(
            RecoveredContinuation(
                tokens=seq,
                log_prob=lp,
                log10_prob=log10_or_none(lp),
                distance=dist,
                verbatim=seq == suffix,
                n_samples=n,
                log10_n_samples=l10,
                sampling_cheaper=bool(n <= cost),
            )
        )
    log_mass = logsumexp([r.log_prob for r in recovered])
    n_m, l10_m = sampling_budget(log_mass, confidence=c)
    n_v, l10_v = sampling_budget(out.log_verbatim, confidence=c)
    rec_v = any(r.verbatim for r in recovered)
    note = (
        f"Deterministic recovery ([EM] App. F.4): an unpruned beam of width {width} returned "
        f"{out.pool_size} continuations; {len(recovered)} are within {eps} token edits of s"
        f"{' (including the verbatim target)' if rec_v else ''}. n_{round(c * 100)} is the number of "
        f"random samples needed to draw a sequence once with probability {c:g}; where it is below "
        f"the beam's cost ({cost:.3g} samples, {basis}) sampling is the cheaper way to obtain it. "
        "The recovered mass is a lower bound on the ε-ball mass, like the pruned beam's."
    )
    return RecoveryResult(
        epsilon=eps,
        beam=width,
        policy=pol.spec,
        model=out.model,
        prompt_ids=out.prompt_ids,
        suffix_ids=suffix,
        confidence=c,
        pool_size=out.pool_size,
        recovered=tuple(recovered),
        recovered_verbatim=rec_v,
        recovered_near_verbatim=bool(recovered),
        log_recovered_mass=log_mass,
        n_samples_recovered_mass=n_m,
        log10_n_samples_recovered_mass=l10_m,
        log_verbatim=out.log_verbatim,
        n_samples_verbatim=n_v,
        log10_n_samples_verbatim=l10_v,
        exhaustive=out.exhaustive,
        forward_rows=out.forward_rows,
        forward_calls=out.forward_calls,
        target_rows=out.target_rows,
        rows_per_sample=rows_per_sample,
        cost_in_samples=cost,
        cost_basis=basis,
        note=note,
    )
