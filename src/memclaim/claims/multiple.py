"""Multiple testing across candidates ([EM] §C.5).

Each conformal claim carries Prop. 1's per-candidate guarantee, but testing J candidates against
one shared control sample bounds neither the family-wise error rate nor the false discovery
rate. Two procedures change the rule that turns p-values into claims:

- Benjamini-Hochberg over the conformal p-values bounds the FDR at pi_0 delta <= delta when the
  p-values are PRDS, which Bates et al. (2021, Thm. 2) prove for conformal p-values from one
  shared calibration set with a continuous score. With atoms (ties, e.g. exact-zero
  probabilities) we use p-values with randomized tie-breaking ([EM] Eq. 18), recording the seed.
- Bonferroni: claim when p <= delta / J. Since p >= 1/(N+1), this is possible only for
  J <= delta (N+1) candidates; J candidates need N >= J/delta - 1 controls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from .conformal import conformal_pvalues, randomized_pvalues
from .scores import as_scores, exact_level, floor_times, fraction_str, parse_kind


def bonferroni_capacity(*, n_controls: int, delta: str | float | Fraction) -> int:
    """The most candidates Bonferroni can hold at FWER delta with N controls: floor(delta (N+1))
    ([EM] C.5, Eq. 28).

    >>> bonferroni_capacity(n_controls=999, delta="5%")
    50
    """
    d = exact_level("delta", delta)
    if (
        isinstance(n_controls, bool)
        or not isinstance(n_controls, (int, np.integer))
        or n_controls < 1
    ):
        raise InputError(f"N must be a positive number of controls, got {n_controls!r}")
    return floor_times(d, int(n_controls) + 1)


def controls_needed(*, n_candidates: int, delta: str | float | Fraction) -> int:
    """The fewest controls for Bonferroni over J candidates at FWER delta: ceil(J/delta - 1)
    ([EM] C.5).

    >>> controls_needed(n_candidates=50, delta="5%")
    999
    """
    d = exact_level("delta", delta)
    if (
        isinstance(n_candidates, bool)
        or not isinstance(n_candidates, (int, np.integer))
        or n_candidates < 1
    ):
        raise InputError(f"J must be a positive number of candidates, got {n_candidates!r}")
    need = Fraction(int(n_candidates)) / d - 1
    return max(1, -((-need.numerator) // need.denominator))


def benjamini_hochberg(
    pvalues: Sequence[float] | np.ndarray, *, delta: str | float | Fraction
) -> np.ndarray:
    """Benjamini-Hochberg rejections at level delta (statsmodels ``fdr_bh``): the r candidates
    with the smallest p-values, r = max{r : p_(r) <= r delta / J}.

    >>> benjamini_hochberg([0.001, 0.04, 0.03, 0.9], delta=0.1).tolist()  # p_(3) = 0.04 <= 3 (0.1)/4
    [True, True, True, False]
    """
    from statsmodels.stats.multitest import multipletests

    d = float(exact_level("delta", delta))
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise InputError(
            f"Benjamini-Hochberg needs a non-empty 1-D array of p-values, got shape {p.shape}"
        )
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise InputError("p-values must lie in [0, 1]")
    reject, *_ = multipletests(p, alpha=d, method="fdr_bh")
    return np.asarray(reject, dtype=bool)


def has_atoms(candidate_scores: np.ndarray, control_scores: np.ndarray) -> bool:
    """True when some score value is shared (a candidate ties a control, or controls tie).

    >>> import numpy as np
    >>> from memclaim.claims.multiple import has_atoms
    >>> has_atoms(np.array([-1.0]), np.array([-3.0, -2.0])), has_atoms(np.array([-2.0]), np.array([-3.0, -2.0]))
    (False, True)
    """
    ctrl = np.sort(control_scores)
    if ctrl.size > 1 and np.any(ctrl[1:] == ctrl[:-1]):
        return True
    lo = np.searchsorted(ctrl, candidate_scores, side="left")
    hi = np.searchsorted(ctrl, candidate_scores, side="right")
    return bool(np.any(hi > lo))


@dataclass(frozen=True)
class FDRResult(ResultMixin):
    delta: str
    delta_float: float
    n_candidates: int
    n_controls: int
    randomized: bool
    seed: int | None
    reason: str
    n_claimed: int
    guarantee: str
    pvalues: np.ndarray = field(repr=False)
    claimed: np.ndarray = field(repr=False)


def fdr_claims(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    delta: str | float | Fraction,
    kind: str = "log-prob",
    seed: int = 0,
    randomize: bool | None = None,
) -> FDRResult:
    """Benjamini-Hochberg at FDR level delta over the candidates' conformal p-values ([EM] C.5).

    ``randomize=None`` uses randomized tie-breaking ([EM] Eq. 18) exactly when the scores have
    atoms, with ``seed`` recorded; otherwise the conservative p-values (identical without ties).

    >>> from memclaim.claims.multiple import fdr_claims
    >>> ctl = [-float(i) for i in range(3, 43)]  # 40 controls, all below the first two candidates
    >>> r = fdr_claims([-1.0, -2.0, -20.5, -50.0], ctl, delta=0.1)
    >>> r.claimed.tolist()
    [True, True, False, False]
    """
    kind = parse_kind(kind)
    d = exact_level("delta", delta)
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores")
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    atoms = has_atoms(cand, ctrl)
    if randomize is None:
        randomize = atoms
    if randomize:
        p = randomized_pvalues(cand, ctrl, seed=int(seed), kind="score")
        reason = (
            "the scores have atoms (tied values, e.g. exact-zero probabilities): conservative p-values are "
            "then not exactly uniform and the PRDS result of Bates et al. (2021, Thm. 2) assumes a "
            "continuous score, so ties are broken at random ([EM] Eq. 18, one uniform per control and per "
            f"candidate from numpy default_rng({int(seed)})); the claims depend on this seed"
            if atoms
            else f"randomized tie-breaking requested ([EM] Eq. 18, numpy default_rng({int(seed)}))"
        )
    else:
        p = conformal_pvalues(cand, ctrl, kind="score")
        reason = (
            "no tied scores: the conservative conformal p-values ([EM] Eq. 4) are used; randomized "
            "tie-breaking would give the same values"
            if not atoms
            else "conservative p-values requested despite ties: valid per candidate, but the FDR bound of "
            "Bates et al. (2021) assumes a continuous score"
        )
    rej = benjamini_hochberg(p, delta=d)
    guarantee = (
        f"FDR <= pi_0 x {float(d):g} <= {float(d):g} over these {cand.size} candidates, if the non-member "
        "candidates are independent of each other and of the controls and exchangeable with them "
        "(Bates et al. 2021, Cor. 1; [EM] C.5)"
    )
    return FDRResult(
        fraction_str(d),
        float(d),
        cand.size,
        ctrl.size,
        bool(randomize),
        int(seed) if randomize else None,
        reason,
        int(rej.sum()),
        guarantee,
        p,
        rej,
    )


@dataclass(frozen=True)
class FWERResult(ResultMixin):
    delta: str
    delta_float: float
    n_candidates: int
    n_controls: int
    capacity: int  # floor(delta (N+1)): most candidates Bonferroni can cover
    controls_needed: int  # ceil(J/delta - 1)
    feasible: bool
    per_candidate_k: int  # floor(delta (N+1) / J): claim iff p <= per_candidate_k/(N+1)
    per_candidate_level: float  # delta / J
    n_claimed: int
    statement: str
    claimed: np.ndarray = field(repr=False)


def fwer_claims(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    delta: str | float | Fraction,
    kind: str = "log-prob",
) -> FWERResult:
    """Bonferroni at FWER level delta ([EM] C.5, Eq. 28): claim when p <= delta/J.

    >>> from memclaim.claims.multiple import fwer_claims
    >>> ctl = [-float(i) for i in range(3, 43)]  # 40 controls: p >= 1/41, so Bonferroni holds at most 4 at 10%
    >>> fwer_claims([-1.0, -2.0, -20.5, -50.0], ctl, delta=0.1).claimed.tolist()
    [True, True, False, False]
    """
    kind = parse_kind(kind)
    d = exact_level("delta", delta)
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores")
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    j, n = cand.size, ctrl.size
    cap = bonferroni_capacity(n_controls=n, delta=d)
    need = controls_needed(n_candidates=j, delta=d)
    kj = floor_times(d / j, n + 1)  # p = num/(N+1) <= delta/J  <=>  num <= floor(delta (N+1)/J)
    p_num = np.rint(conformal_pvalues(cand, ctrl, kind="score") * (n + 1)).astype(np.int64)
    claimed = p_num <= kj if kj >= 1 else np.zeros(j, dtype=bool)
    if kj >= 1:
        statement = (
            f"Bonferroni: each candidate is tested at delta/J = {float(d):g}/{j}; the chance of one or more "
            f"false claims among these {j} candidates is at most {float(d):g} ([EM] C.5, Eq. 28)"
        )
    else:
        statement = (
            f"infeasible: with N = {n} controls Bonferroni can hold the FWER at {float(d):g} over at most "
            f"{cap} candidates (delta (N+1)); {j} candidates need at least {need} controls "
            "(N >= J/delta - 1, [EM] C.5). No family-wise claim is made."
        )
    return FWERResult(
        fraction_str(d),
        float(d),
        j,
        n,
        cap,
        need,
        kj >= 1,
        int(kj),
        float(d) / j,
        int(np.count_nonzero(claimed)),
        statement,
        claimed,
    )
