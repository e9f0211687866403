"""Counterfactual memorization from IN/OUT models, named by the functional it estimates
([MX] Def. 3.2, App. A, Prop. A.1-A.2, Remark A.3; Thm. 4.1).

For a bounded score h : Theta x X -> [0, 1] and a target x,

    mem_h(x) = E[h(A(S), x) | x in] - E[h(A(S), x) | x out].

*Which* expectation depends on how the IN and OUT training sets were drawn, and the three
versions are different numbers ([MX] App. A):

- ``"random_halves"``: S is a random subset (e.g. a half) of a population, so x is in some
  models' sets and out of others'. This estimates the population-conditional functional
  **COND**, E[g(S) | x in S] - E[g(S) | x not in S] (Feldman-Zhang style), *not* RO or LOO.
- ``"leave_one_out"``: the same S- with and without x added. Estimates **LOO** (App. A), the
  functional an add/remove f-DP guarantee caps at eta(f) (Prop. A.1).
- ``"replace_one"``: x versus a fresh draw x' ~ D in the same slot. Estimates **RO**, the
  plug-in replace-one functional of Def. 3.2 that replace-one f-DP caps at eta(f) (Thm. 4.1).

RO and COND agree up to o(1) for rare targets but differ by Theta(np) at the critical
frequency p = Theta(1/n) (Remark A.3); |mem_COND - mem_RO| <= 4np when np <= 1/2 (Prop. A.2).
:func:`compare_to_cap` therefore refuses to compare an estimate with a cap for another
functional unless the caller supplies the conversion slack explicitly.

Scores h must lie in [0, 1] (Def. 3.2): the teacher-forcing probability
(:func:`teacher_forcing_probability`) or the log-loss truncated at level M and divided by M
(:func:`truncated_logloss`; [MX] §8.1 uses M = 10). An unbounded log-loss has unbounded
memorization ([MX] §4, after Thm. 4.1) and is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import DomainError, InputError, ProcedureMismatchError
from ..jsonutil import ResultMixin
from ..privacy.tradeoff import neighbors_label
from ..validate import in_open_unit, in_unit, positive
from .attacks import ragged

__all__ = [
    "DESIGNS",
    "FUNCTIONALS",
    "RELATIONS",
    "CounterfactualEstimate",
    "CapComparison",
    "teacher_forcing_probability",
    "truncated_logloss",
    "counterfactual_memorization",
    "compare_to_cap",
]

# design of the IN/OUT training sets -> functional it estimates ([MX] App. A)
DESIGNS = {"random_halves": "COND", "leave_one_out": "LOO", "replace_one": "RO"}
FUNCTIONALS = ("RO", "LOO", "COND")
RELATIONS = (
    "replace-one",
    "add/remove",
)  # privacy/'s labels (memclaim.privacy.tradeoff.neighbors_label)


def teacher_forcing_probability(
    token_logprobs: Sequence[Sequence[float] | np.ndarray],
) -> np.ndarray:
    """h = q(z | c) = exp(sum_t log p_t): the record's probability under teacher forcing, in
    [0, 1] (the attaining score of [MX] Thm. 4.1, Remark 4.2). Exponentiated because h is a
    probability by definition; underflows to 0 for long improbable records.

    >>> teacher_forcing_probability([[-0.5, -0.5], [-2.0]]).round(4).tolist()  # e^-1, e^-2
    [0.3679, 0.1353]
    """
    lp = ragged(token_logprobs)
    return np.array([math.exp(float(np.sum(a))) for a in lp], dtype=np.float64)


def truncated_logloss(
    token_logprobs: Sequence[Sequence[float] | np.ndarray],
    *,
    level: float = 10.0,
    reduce: str = "sum",
) -> np.ndarray:
    """h = min(NLL, M) / M in [0, 1]: the log-loss of the record truncated at level M and
    divided by M ([MX] §8.1: "divided by its truncation level M = 10, so that it lies in [0, 1]
    as Definition 3.2 requires"; the truncation costs a factor M in Thm. 4.1's cap).

    NLL is the total (``reduce="sum"``, default) or mean per-token (``"mean"``) negative log-
    likelihood in nats. Note the orientation: a memorized record has *lower* loss, so its
    mem_h under this score is negative; caps bound |mem_h|.

    >>> truncated_logloss([[-3.0, -4.0], [-20.0]]).tolist()  # NLL 7 -> 0.7; NLL 20 truncated at 10
    [0.7, 1.0]
    """
    m = positive("level", level)
    lp = ragged(token_logprobs)
    if reduce not in ("sum", "mean"):
        raise DomainError(f"reduce must be 'sum' or 'mean', got {reduce!r}")
    nll = np.array([-float(np.sum(a)) if reduce == "sum" else -float(np.mean(a)) for a in lp])
    return np.minimum(nll, m) / m


@dataclass(frozen=True)
class CounterfactualEstimate(ResultMixin):
    """mem_h estimates for T targets from models trained with each target IN or OUT.

    ``mem[t]`` = mean h over IN models - mean h over OUT models, ``se[t]`` its Welch standard
    error (sqrt(s_in^2/n_in + s_out^2/n_out), NaN with fewer than two models on a side).
    ``mean_mem`` averages over targets; ``mean_se`` is the standard error *across targets*
    (std / sqrt(T), the paper's practice, [MX] App. F.2: "the reported standard error is across
    canaries"; NaN for T = 1, where ``se[0]`` is the one to quote) and ``mean_se_within`` the
    propagated within-target error sqrt(sum se^2) / T (uncertainty for these fixed targets).
    """

    functional: str
    design: str
    score: str
    mem: np.ndarray
    se: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray
    mean_mem: float
    mean_se: float
    mean_se_within: float
    confidence: float
    low: float
    high: float

    @property
    def n_targets(self) -> int:
        return int(self.mem.size)


def counterfactual_memorization(
    h: Sequence[float] | np.ndarray,
    in_mask: Sequence[bool] | np.ndarray,
    *,
    design: str = "random_halves",
    score: str = "h",
    confidence: float = 0.95,
) -> CounterfactualEstimate:
    """Estimate mem_h per target from ``h`` [n_models] or [n_models, n_targets] (h of target t
    under model s, in [0, 1]) and ``in_mask`` of the same shape (True = t in s's training set).

    ``design`` names how the training sets were drawn and hence the functional estimated
    (``random_halves`` -> COND, ``leave_one_out`` -> LOO, ``replace_one`` -> RO). ``score``
    names h for the record (e.g. "teacher-forcing probability", "log-loss truncated at 10 / 10").
    Each target needs at least two IN and two OUT models. The interval on ``mean_mem`` is a
    normal interval with ``mean_se`` (across targets) or, for one target, with ``se[0]``.

    >>> e = counterfactual_memorization([0.9, 0.8, 0.2, 0.1], [True, True, False, False])
    >>> e.functional, round(e.mean_mem, 4), round(e.low, 4), round(e.high, 4)
    ('COND', 0.7, 0.5614, 0.8386)
    """
    if design not in DESIGNS:
        raise DomainError(
            f"unknown design {design!r}",
            hint=f"one of {sorted(DESIGNS)}: random halves of a population estimate COND, "
            "same set with/without x estimates LOO, x vs a fresh draw in its slot estimates RO",
        )
    conf = in_open_unit("confidence", confidence)
    hv = np.asarray(h, dtype=np.float64)
    mk = np.asarray(in_mask)
    if hv.ndim == 1:
        hv, mk = hv[:, None], mk.reshape(-1, 1) if mk.ndim == 1 else mk
    if hv.ndim != 2 or mk.shape != hv.shape:
        raise InputError(
            f"h has shape {np.shape(h)} and in_mask {np.shape(in_mask)}; they must match, "
            "[n_models] or [n_models, n_targets]"
        )
    if mk.dtype != bool:
        if not np.isin(mk, (0, 1)).all():
            raise InputError("in_mask must be boolean (True = target in that model's training set)")
        mk = mk.astype(bool)
    if not np.isfinite(hv).all() or (hv < 0).any() or (hv > 1).any():
        bad = hv[~(np.isfinite(hv) & (hv >= 0) & (hv <= 1))][0]
        raise DomainError(
            f"h must be a bounded score in [0, 1] ([MX] Def. 3.2); got {bad!r}",
            hint="use teacher_forcing_probability, or truncated_logloss(level=M) which divides the "
            "truncated log-loss by M; unbounded log-loss has unbounded memorization",
        )
    n_in, n_out = mk.sum(axis=0), (~mk).sum(axis=0)  # [T]
    few = np.flatnonzero((n_in < 2) | (n_out < 2))
    if few.size:
        t = int(few[0])
        raise InputError(
            f"target {t} has {int(n_in[t])} IN and {int(n_out[t])} OUT models; at least two of each are "
            "needed for an estimate with a standard error",
            hint="train more models on random halves so that each target is both in and out of >= 2",
        )
    mu_in = (hv * mk).sum(axis=0) / n_in
    mu_out = (hv * ~mk).sum(axis=0) / n_out
    var_in = (((hv - mu_in) ** 2) * mk).sum(axis=0) / (n_in - 1)
    var_out = (((hv - mu_out) ** 2) * ~mk).sum(axis=0) / (n_out - 1)
    mem = mu_in - mu_out  # [MX] Def. 3.2 / App. A, per target
    se = np.sqrt(var_in / n_in + var_out / n_out)  # Welch
    T = mem.size
    mean_mem = float(mem.mean())
    mean_se = float(mem.std(ddof=1) / math.sqrt(T)) if T >= 2 else math.nan
    within = float(math.sqrt(float((se**2).sum())) / T)
    quoted = mean_se if T >= 2 else float(se[0])
    z = float(stats.norm.ppf(0.5 + conf / 2.0))
    return CounterfactualEstimate(
        functional=DESIGNS[design],
        design=design,
        score=str(score),
        mem=mem,
        se=se,
        n_in=n_in,
        n_out=n_out,
        mean_mem=mean_mem,
        mean_se=mean_se,
        mean_se_within=within,
        confidence=conf,
        low=mean_mem - z * quoted,
        high=mean_mem + z * quoted,
    )


@dataclass(frozen=True)
class CapComparison(ResultMixin):
    """An estimate of mem_h set against a DP cap for the same functional.

    ``effective_cap`` = cap + conversion slack (0 when the functionals match). ``within``: the
    point estimate |mean_mem| <= effective_cap. ``violation_p``: one-sided normal p-value for
    |mem| > effective_cap (small = evidence the cap is violated). ``informative``: the cap is
    below 1 and above ``visibility_sigmas`` standard errors, so a violation would have been
    visible ([MX] §8.2, DP-SGD calibration: "the cap is at most 0.2 and exceeds three standard errors").
    """

    estimate_functional: str
    cap_functional: str
    cap_relation: str
    cap: float
    conversion_slack: float
    conversion_note: str | None
    effective_cap: float
    mean_mem: float
    se: float
    within: bool
    violation_p: float
    informative: bool
    cap_in_se: float
    targets_over_cap: int
    note: str


def compare_to_cap(
    estimate: CounterfactualEstimate,
    *,
    cap: float,
    cap_functional: str,
    cap_relation: str,
    via_group_privacy: bool = False,
    conversion_slack: float | None = None,
    conversion_note: str | None = None,
    visibility_sigmas: float = 3.0,
) -> CapComparison:
    """Compare ``estimate`` with a cap on |mem_h| computed by the caller (e.g. eta(f)).

    The caller states which functional the cap bounds and under which neighbouring relation the
    DP guarantee holds (``cap_relation``: "replace-one" or "add/remove", or any alias of
    :func:`memclaim.privacy.tradeoff.normalize_neighbors`):

    - replace-one f-DP caps **RO** at eta(f) ([MX] Thm. 4.1); it does not cap LOO (refused).
    - add/remove f-DP caps **LOO** at eta(f) ([MX] Prop. A.1); it caps RO only through the
      two-step group guarantee f^(2) (a replacement is a removal plus an addition), so an RO cap
      under add/remove requires ``via_group_privacy=True``.

    When the estimate's functional differs from the cap's (e.g. random halves give COND, the cap
    bounds RO), comparison is refused unless ``conversion_slack`` (>= 0) and
    ``conversion_note`` say how the two are related (e.g. Prop. A.2: |COND - RO| <= 4np for
    np <= 1/2); the slack is added to the cap.

    >>> e = counterfactual_memorization([0.9, 0.8, 0.2, 0.1], [True, True, False, False])
    >>> c = compare_to_cap(e, cap=0.5, cap_functional="RO", cap_relation="replace-one",
    ...                    conversion_slack=0.1, conversion_note="Prop. A.2 with np = 1/40")
    >>> c.effective_cap, c.within, c.note
    (0.6, False, '|mem_COND| = 0.7 vs cap 0.6 (RO, replace-one, + slack 0.1)')
    """
    if not isinstance(estimate, CounterfactualEstimate):
        raise InputError(
            f"compare_to_cap needs a CounterfactualEstimate, got {type(estimate).__name__}"
        )
    c = in_unit("cap", cap)
    if cap_functional not in ("RO", "LOO"):
        raise DomainError(
            f"cap_functional must be 'RO' or 'LOO' (the functionals f-DP caps directly), got {cap_functional!r}",
            hint="COND has no direct f-DP cap; compare a COND estimate with an RO cap plus the Prop. A.2 slack",
        )
    cap_relation = neighbors_label(cap_relation)  # any of privacy/'s names; DomainError otherwise
    if cap_functional == "LOO" and cap_relation == "replace-one":
        raise ProcedureMismatchError(
            "a replace-one f-DP guarantee does not cap the leave-one-out functional LOO",
            hint="LOO is capped by an add/remove guarantee ([MX] Prop. A.1); a replace-one guarantee caps RO "
            "(Thm. 4.1)",
        )
    if cap_functional == "RO" and cap_relation == "add/remove" and not via_group_privacy:
        raise ProcedureMismatchError(
            "an add/remove f-DP guarantee caps RO only via the two-step group guarantee f^(2)",
            hint="compute the cap as eta(f^(2)) and pass via_group_privacy=True, or compare with a LOO "
            "estimate (design='leave_one_out'), which eta(f) caps directly ([MX] Prop. A.1)",
        )
    slack = 0.0
    if estimate.functional != cap_functional:
        if conversion_slack is None or not conversion_note:
            raise ProcedureMismatchError(
                f"the estimate targets {estimate.functional} (design {estimate.design!r}) but the cap bounds "
                f"{cap_functional}; these are different quantities ([MX] App. A, Remark A.3)",
                hint="pass conversion_slack and conversion_note (e.g. [MX] Prop. A.2: |COND - RO| <= 4np when "
                "np <= 1/2, p the target's population frequency), or estimate the capped functional "
                "directly",
            )
        slack = positive("conversion_slack", conversion_slack) if conversion_slack != 0 else 0.0
    k = positive("visibility_sigmas", visibility_sigmas)
    eff = c + slack
    se = estimate.mean_se if estimate.n_targets >= 2 else float(estimate.se[0])
    m = estimate.mean_mem
    if se > 0:
        p = float(stats.norm.sf((abs(m) - eff) / se))
        cap_in_se = c / se
    else:
        p = 0.0 if abs(m) > eff else 1.0
        cap_in_se = math.inf
    informative = bool(c < 1.0 and c > k * se)
    over = int(np.count_nonzero(np.abs(estimate.mem) > eff))
    note = (
        f"|mem_{estimate.functional}| = {abs(m):.4g} vs cap {eff:.4g} ({cap_functional}, {cap_relation}"
        f"{', via f^(2)' if via_group_privacy else ''}{f', + slack {slack:.3g}' if slack else ''})"
        f"{'' if informative else '; cap not informative at this standard error (vacuous or within ' + format(k, 'g') + ' SE)'}"
    )
    return CapComparison(
        estimate_functional=estimate.functional,
        cap_functional=cap_functional,
        cap_relation=cap_relation,
        cap=c,
        conversion_slack=slack,
        conversion_note=conversion_note,
        effective_cap=eff,
        mean_mem=m,
        se=se,
        within=bool(abs(m) <= eff),
        violation_p=p,
        informative=informative,
        cap_in_se=cap_in_se,
        targets_over_cap=over,
        note=note,
    )
