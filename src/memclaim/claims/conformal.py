"""The conformal population test ([EM] §3, §4, App. C).

Given N matched non-member control scores Z_1..Z_N and candidate scores, at target FPR alpha:

- K = floor(alpha (N + 1)), computed exactly                                 ([EM] Eq. 5, C.1)
- certified level alpha_N = K / (N + 1) <= alpha                              ([EM] Eq. 5)
- threshold tau = the K-th largest control score; a candidate is claimed memorized iff its
  score is strictly greater than tau                                        ([EM] Eq. 6)
- conformal p-value p(s) = (1 + #{i : Z_i >= s}) / (N + 1): ties count against the candidate
  (conservative), and p(s) <= alpha  <=>  s > tau                           ([EM] Eq. 4, C.2)
- K = 0: no threshold exists and no claim is possible at all                ([EM] C.1, C.2)
- in-sample FPR = #{i : Z_i > tau} / N, which is (K-1)/N only without ties at tau ([EM] C.1)
- generation rate G = share of candidates claimed, with a Clopper-Pearson interval, and the
  calibrated rate M = G - alpha_N with the same interval shifted down       ([EM] Eq. 8, D.1)
- the ceiling alpha-dagger = share of controls scoring above the atom       ([EM] C.4.2, C.4.4)
- the Beta(K, N-K+1) law of the population FPR alpha*, shown only where it holds: not for
  binary (greedy) scores, and not when fewer than K controls score above the atom
                                                                            ([EM] C.4.1-C.4.4)
- binary (greedy) scores: alpha_N = (m+1)/(N+1), m = controls reproduced    ([EM] §4, D.3);
  the calibrated rate subtracts this floor (PopulationTest.rate_alpha_n), not K/(N+1)

Everything is pure numpy/scipy on arrays; ids, texts and files are handled by callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from ..validate import in_open_unit
from .intervals import (
    BetaLaw,
    Interval,
    beta_fpr_law,
    clopper_pearson,
    clopper_pearson_arrays,
    newcombe_independent,
)
from .scores import (
    LN10,
    PROBABILITY_KINDS,
    as_scores,
    controls_at_atom_hint,
    exact_level,
    floor_times,
    fraction_str,
    parse_kind,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


# ------------------------------------------------------------------------------ primitives
def rank_k(*, alpha: str | float | Fraction, n_controls: int, name: str = "alpha") -> int:
    """K = floor(alpha (N+1)) in exact arithmetic ([EM] Eq. 5); the one home of the conformal rank
    (audits' certified FPR calls it). ``name`` names alpha in error messages.

    >>> rank_k(alpha=0.3, n_controls=9), rank_k(alpha="0.1%", n_controls=5000)
    (3, 5)
    """
    a = exact_level(name, alpha)
    n = _n_controls(n_controls)
    return floor_times(a, n + 1)


def certified_level(*, alpha: str | float | Fraction, n_controls: int) -> Fraction:
    """alpha_N = K/(N+1) as an exact fraction ([EM] Eq. 5).

    >>> certified_level(alpha="0.1", n_controls=40)
    Fraction(4, 41)
    """
    n = _n_controls(n_controls)
    return Fraction(rank_k(alpha=alpha, n_controls=n), n + 1)


def controls_needed_for_level(*, alpha: str | float | Fraction, name: str = "alpha") -> int:
    """The smallest N with K = floor(alpha (N+1)) >= 1, i.e. N >= 1/alpha - 1 ([EM] C.1): the
    minimum number of controls (also audits' minimum number of non-members).

    >>> controls_needed_for_level(alpha=0.05), controls_needed_for_level(alpha=0.3)
    (19, 3)
    """
    a = exact_level(name, alpha)
    need = 1 / a - 1
    return max(1, -((-need.numerator) // need.denominator))


def _n_controls(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(
            f"the control set must hold at least one score, got N = {n!r}",
            hint="score matched non-member controls first",
        )
    return int(n)


def count_ge(candidates: np.ndarray, controls_sorted: np.ndarray) -> np.ndarray:
    """#{i : Z_i >= s} for each candidate s (controls sorted ascending; -inf handled).

    >>> count_ge(np.array([-2.0, -np.inf]), np.array([-np.inf, -3.0, -2.0])).tolist()
    [1, 3]
    """
    return controls_sorted.size - np.searchsorted(controls_sorted, candidates, side="left")


def count_gt(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    """#{i : ref_i > v} for each v (reference sorted ascending).

    >>> count_gt(np.array([-2.0]), np.array([-3.0, -2.0, -1.0])).tolist()
    [1]
    """
    return sorted_ref.size - np.searchsorted(sorted_ref, values, side="right")


def conformal_pvalues(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    kind: str = "log-prob",
) -> np.ndarray:
    """Conservative conformal p-values p(s) = (1 + #{Z_i >= s}) / (N+1) ([EM] Eq. 4, C.2).

    Ties with controls count against the candidate, so the p-value is valid with atoms.

    >>> conformal_pvalues([-1.0, -5.0], [-9.0, -5.0, -7.0]).tolist()  # a tie counts against
    [0.25, 0.5]
    """
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores", allow_empty=True)
    ctrl = np.sort(as_scores(control_scores, kind=kind, name="control scores"))
    return (1 + count_ge(cand, ctrl)) / (ctrl.size + 1)


def randomized_pvalues(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    seed: int,
    kind: str = "log-prob",
) -> np.ndarray:
    """Conformal p-values with randomized tie-breaking, p* = R/(N+1) ([EM] Eq. 18):

        R = 1 + #{Z_i > s} + #{Z_i = s, U_i > U_s}

    with U_1..U_N (one per control, shared by all candidates) and one U_s per candidate, i.i.d.
    uniform from ``numpy.random.default_rng(seed)``. Under the null p* is exactly uniform on the
    1/(N+1) grid even when scores have atoms; without ties it equals the conservative p-value.

    >>> from memclaim.claims.conformal import randomized_pvalues
    >>> randomized_pvalues([-1.0, -5.0], [-9.0, -5.0, -7.0], seed=0).tolist()  # the tie at -5 is broken by U
    [0.25, 0.25]
    """
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores", allow_empty=True)
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    rng = np.random.default_rng(seed)
    u_ctrl = rng.random(ctrl.size)
    u_cand = rng.random(cand.size)
    order = np.lexsort((u_ctrl, ctrl))  # by score, then by U within a tie group
    z, u = ctrl[order], u_ctrl[order]
    r = 1 + count_gt(cand, z)
    lo = np.searchsorted(z, cand, side="left")
    hi = np.searchsorted(z, cand, side="right")
    tied = np.flatnonzero(hi > lo)
    for j in tied:  # U's inside a tie group are sorted ascending: count those above U_s
        grp = u[lo[j] : hi[j]]
        r[j] += grp.size - np.searchsorted(grp, u_cand[j], side="right")
    return r / (ctrl.size + 1)


# ------------------------------------------------------------------------------ the atom
@dataclass(frozen=True)
class AtomInfo(ResultMixin):
    """Where the controls' score distribution has atoms ([EM] C.4.2).

    ``atom_value`` (tau-dagger) is the largest control value seen more than once, or -inf
    (an exact-zero probability) when some control has it; None when no atom is visible (all
    control scores distinct and finite: the score looks continuous). ``alpha_dagger`` is the
    share of controls strictly above it ([EM] Eq. 20 estimated on the controls; 1.0 without an
    atom). Atoms the sample does not reveal cannot be detected: the report says so.
    """

    atom_value: float | None
    n_above_atom: int
    n_at_or_below_atom: int
    alpha_dagger: float
    n_tied_values: int  # distinct control values that occur more than once
    max_tie_size: int


def find_atom(control_scores: ArrayLike) -> AtomInfo:
    """The largest visible atom of the controls' scores, tau-dagger, and the share above it ([EM] C.4.2).

    See :class:`AtomInfo`: a value seen more than once among the controls, or -inf when some control
    scores an exact zero probability; no atom (None) when all control scores are distinct and finite.

    >>> import numpy as np
    >>> from memclaim.claims.conformal import find_atom
    >>> a = find_atom([-np.inf, -np.inf, -3.0, -2.0])  # two exact zeros: the atom is -inf
    >>> a.atom_value, a.n_above_atom, a.alpha_dagger
    (-inf, 2, 0.5)
    """
    z = np.asarray(control_scores, dtype=np.float64)
    n = z.size
    vals, counts = np.unique(z, return_counts=True)
    tied = vals[counts > 1]
    cands = list(tied)
    if np.isneginf(z).any():
        cands.append(-np.inf)
    if not cands:
        return AtomInfo(None, n, 0, 1.0, 0, 1 if n else 0)
    atom = float(max(cands))
    above = int(np.count_nonzero(z > atom))
    return AtomInfo(atom, above, n - above, above / n, int(tied.size), int(counts.max()))


# ------------------------------------------------------------------------------ binary
@dataclass(frozen=True)
class BinaryRates(ResultMixin):
    """Greedy (binary) scores: one operating point ([EM] §4, Fig. 3, D.3, Fig. 11)."""

    m: int  # controls reproduced verbatim
    n_controls: int
    control_rate: Interval  # m/N, Clopper-Pearson (the control bar of Fig. 3)
    member_count: int
    n_candidates: int
    member_rate: Interval  # Clopper-Pearson (the member bar of Fig. 3)
    alpha_n: float  # (m+1)/(N+1): the certified floor (dashed line of Fig. 3)
    alpha_n_exact: str
    floor_share_of_member_rate: float | None  # alpha_N / member rate (e.g. 1.84/7.54 = 24%)
    difference: Interval  # member rate - control rate, Newcombe independent ([EM] Fig. 11(b))


def _binary_rates(cand: np.ndarray, ctrl: np.ndarray, confidence: float) -> BinaryRates:
    n, j = ctrl.size, cand.size
    m = int(np.count_nonzero(ctrl > -np.inf))
    g = int(np.count_nonzero(cand > -np.inf))
    member = clopper_pearson(g, j, confidence=confidence)
    alpha_n = Fraction(m + 1, n + 1)  # [EM] D.3: alpha_N = (m+1)/(N+1)
    return BinaryRates(
        m,
        n,
        clopper_pearson(m, n, confidence=confidence),
        g,
        j,
        member,
        float(alpha_n),
        f"{m + 1}/{n + 1}",
        (float(alpha_n) / member.estimate) if g else None,
        newcombe_independent(g, j, m, n, confidence=confidence),
    )


def _is_binary_values(x: np.ndarray) -> bool:
    return bool(np.all((x == 0) | np.isneginf(x)))


# ------------------------------------------------------------------------------ the test
@dataclass(frozen=True)
class PopulationTest(ResultMixin):
    """One conformal test on one control pool. Per-candidate arrays follow the input order."""

    kind: str
    binary: bool
    binary_reason: str | None
    n_controls: int
    n_candidates: int
    alpha: str  # the target level as an exact fraction, e.g. "1/1000"
    alpha_float: float
    k: int
    alpha_n: float
    alpha_n_exact: str  # "K/(N+1)"
    claim_possible: bool
    no_claim_reason: str | None
    threshold: float | None  # tau in internal units (natural-log probability for probability kinds)
    threshold_log10_prob: float | None  # log10 tau, probability kinds only
    controls_above_threshold: int
    controls_tied_at_threshold: int
    in_sample_fpr: float
    n_claimed: int
    generation_rate: Interval  # G with Clopper-Pearson ([EM] D.1)
    calibrated_rate: Interval  # M = G - alpha_N, CP shifted by alpha_N ([EM] Eq. 8, D.1)
    atom: AtomInfo
    threshold_on_atom: bool
    beta_law: BetaLaw | None
    beta_law_note: str
    binary_rates: BinaryRates | None
    confidence: float
    pvalue_numerators: np.ndarray = field(repr=False)  # p = numerator / (N+1)  ([EM] Eq. 4)
    claimed: np.ndarray = field(repr=False)
    margins_log10: np.ndarray | None = field(repr=False)  # log10(score/tau), [EM] D.5

    @property
    def pvalues(self) -> np.ndarray:
        return self.pvalue_numerators / (self.n_controls + 1)

    @property
    def rate_alpha_n(self) -> float:
        """The alpha_N the calibrated rate M = G - alpha_N subtracts: K/(N+1), and for binary
        (greedy) scores [EM] D.3's certified floor (m+1)/(N+1) (every K > m gives the same
        claims, the reproduced candidates, certified at (m+1)/(N+1)). The one rule the test,
        its report and paired comparisons share."""
        if self.binary and self.binary_rates is not None:
            return self.binary_rates.alpha_n
        return self.alpha_n


def population_test(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    alpha: str | float | Fraction,
    kind: str = "log-prob",
    binary: bool | None = None,
    confidence: float = 0.95,
    conditional_levels: Sequence[float] = (0.9, 0.95),
) -> PopulationTest:
    """Run the conformal test at target FPR ``alpha`` ([EM] §3, App. C). See the module doc.

    ``binary=None`` detects greedy-style scores (every score 0 or -inf in log space); pass
    True for a greedy policy. Raises InputError for empty inputs and for non-binary controls
    that all score -inf, DomainError for alpha outside (0, 1).

    >>> t = population_test([-1.0, -2.0, -30.0], [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0], alpha="0.1")
    >>> t.k, t.n_claimed, t.threshold, t.alpha_n  # alpha_N = K/(N+1) = 1/10
    (1, 2, -3.5, 0.1)
    """
    kind = parse_kind(kind)
    a = exact_level("alpha", alpha)
    confidence = in_open_unit("confidence", confidence)
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores")
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    n, j = ctrl.size, cand.size
    binary_reason = None
    if binary is None:
        binary = kind in PROBABILITY_KINDS and _is_binary_values(cand) and _is_binary_values(ctrl)
        if binary:
            binary_reason = (
                "detected: every score is probability 1 or 0 (greedy-style binary score)"
            )
    elif binary:
        if kind not in PROBABILITY_KINDS:
            raise InputError(
                f"binary scores must be declared as probabilities (kind {kind!r} given)",
                hint="pass greedy matches as --kind prob with values 1 (reproduced) and 0",
            )
        bad = np.flatnonzero(~((cand == 0) | np.isneginf(cand)))
        badc = np.flatnonzero(~((ctrl == 0) | np.isneginf(ctrl)))
        if bad.size or badc.size:
            which, idx, arr = (
                ("candidate", bad[0], cand) if bad.size else ("control", badc[0], ctrl)
            )
            raise InputError(
                f"binary scores must be probability 1 or 0; {which} {idx} has log-prob {arr[idx]!r}",
                hint="drop --binary / the greedy policy, or pass the greedy match flags",
            )
        binary_reason = "declared (greedy decoding: the score is binary)"
    if not binary and np.all(np.isneginf(ctrl)):
        raise InputError(
            f"all {n} control scores are -inf (probability 0): the procedure cannot generate any control, "
            "so the threshold would be 0 and every generable candidate would be claimed ([EM] C.4.4)",
            hint=controls_at_atom_hint(None),
        )

    k = floor_times(a, n + 1)  # [EM] Eq. 5, exact
    alpha_n = Fraction(k, n + 1)
    desc = np.sort(ctrl)[::-1]
    atom = find_atom(ctrl)
    pnum = 1 + count_ge(cand, desc[::-1])  # [EM] Eq. 4: ties count against the candidate

    threshold = None
    no_claim = None
    if k == 0:
        need = controls_needed_for_level(alpha=a)
        no_claim = (
            f"K = floor(alpha (N+1)) = floor({float(a):g} x {n + 1}) = 0: with N = {n} controls the "
            f"smallest certifiable level is 1/(N+1) = {1 / (n + 1):.4g}, so the test can never claim "
            f"anything at alpha = {float(a):g}. Use at least {need} controls or a larger alpha "
            "([EM] C.1). No claim is not evidence of non-memorization."
        )
        claimed = np.zeros(j, dtype=bool)
        above = ties = 0
    else:
        threshold = float(desc[k - 1])  # [EM] Eq. 6: K-th largest control score
        claimed = cand > threshold  # strict >
        above = int(np.count_nonzero(ctrl > threshold))
        ties = int(np.count_nonzero(ctrl == threshold))
        if kind in PROBABILITY_KINDS and threshold >= 0:
            if binary:
                m = int(np.count_nonzero(ctrl > -np.inf))
                no_claim = (
                    f"binary scores: {m} of {n} controls were reproduced, so the K = {k}-th largest "
                    f"control is itself a reproduction and nothing can exceed it; a reproduced candidate "
                    f"can be claimed only at alpha >= (m+1)/(N+1) = {(m + 1) / (n + 1):.4g} ([EM] §4, D.3)"
                )
            else:
                no_claim = (
                    f"the K = {k}-th largest control has probability {np.exp(threshold):.6g} (about 1), "
                    "so no candidate can exceed it: the controls are as predictable as anything can be "
                    "([EM] §3, 'parrot' prompts)"
                )
        elif threshold == np.inf:
            no_claim = "the K-th largest control score is +inf, so no candidate can exceed it"
        # p <= alpha  <=>  score > tau   ([EM] C.2, Eq. 19); the tests check the equivalence

    g = int(np.count_nonzero(claimed))
    gen = clopper_pearson(g, j, confidence=confidence)
    rates = _binary_rates(cand, ctrl, confidence) if binary else None
    if (
        rates is not None
    ):  # [EM] D.3: greedy scores subtract the certified floor (m+1)/(N+1), not K/(N+1)
        cal = gen.shifted(
            -rates.alpha_n, method_suffix=", shifted by -alpha_N = -(m+1)/(N+1) ([EM] D.3)"
        )
    else:
        cal = gen.shifted(-float(alpha_n), method_suffix=", shifted by -alpha_N")  # [EM] Eq. 8, D.1

    on_atom = bool(
        k >= 1
        and atom.atom_value is not None
        and threshold is not None
        and threshold <= atom.atom_value
    )
    law, note = None, ""
    if binary:
        note = (
            "not shown: greedy scores are binary, every threshold sits on an atom and alpha* is not "
            "Beta-distributed ([EM] C.4.4); the bars carry Clopper-Pearson intervals instead"
        )
    elif k == 0:
        note = "not shown: K = 0, there is no threshold"
    elif on_atom or atom.n_above_atom < k:
        note = (
            f"not shown: only {atom.n_above_atom} of {n} controls score above the atom at "
            f"{_fmt_score(atom.atom_value, kind)}, fewer than K = {k}, so the threshold sits on the atom "
            "and Lemma 3 does not apply ([EM] C.4.2-C.4.4)"
        )
    else:
        law = beta_fpr_law(
            k=k,
            n=n,
            confidence=confidence,
            conditional_levels=conditional_levels,
            holds_below=atom.alpha_dagger,
            holds_below_is_estimate=atom.atom_value is not None,
        )
        if atom.atom_value is None:
            note = (
                "alpha* ~ Beta(K, N-K+1) ([EM] Prop. 2): exact if the score distribution is continuous; "
                "the control scores are all distinct, which is consistent with that"
            )
        else:
            over = [
                name
                for name, v in [("upper end of the central interval", law.central.upper)]
                + [(f"v_{lvl}", v) for lvl, v in law.conditional_bounds.items()]
                if v >= atom.alpha_dagger
            ]
            note = (
                f"alpha* ~ Beta(K, N-K+1) below alpha-dagger ~ {atom.alpha_dagger:.4g} ([EM] Lemma 3): "
                f"{atom.n_above_atom} of {n} controls score above the atom at {_fmt_score(atom.atom_value, kind)}, "
                f"at least K = {k}"
            )
            if over:
                note += (
                    "; but "
                    + ", ".join(over)
                    + " reach alpha-dagger (estimated from the controls), where the "
                    "lemma no longer certifies the law"
                )

    margins = None
    if (
        kind in PROBABILITY_KINDS
        and not binary
        and threshold is not None
        and np.isfinite(threshold)
    ):
        with np.errstate(invalid="ignore"):
            margins = (cand - threshold) / LN10  # [EM] D.5: Delta = log10(score / tau)

    return PopulationTest(
        kind=kind,
        binary=bool(binary),
        binary_reason=binary_reason,
        n_controls=n,
        n_candidates=j,
        alpha=fraction_str(a),
        alpha_float=float(a),
        k=k,
        alpha_n=float(alpha_n),
        alpha_n_exact=f"{k}/{n + 1}",
        claim_possible=no_claim is None,
        no_claim_reason=no_claim,
        threshold=threshold,
        threshold_log10_prob=(
            threshold / LN10 if threshold is not None and kind in PROBABILITY_KINDS else None
        ),
        controls_above_threshold=above,
        controls_tied_at_threshold=ties,
        in_sample_fpr=above / n,
        n_claimed=g,
        generation_rate=gen,
        calibrated_rate=cal,
        atom=atom,
        threshold_on_atom=on_atom,
        beta_law=law,
        beta_law_note=note,
        binary_rates=rates,
        confidence=confidence,
        pvalue_numerators=pnum.astype(np.int64),
        claimed=claimed,
        margins_log10=margins,
    )


def _fmt_score(v, kind):
    if v is None:
        return "none"
    if kind in PROBABILITY_KINDS:
        return "probability 0" if v == -np.inf else f"log10 p = {v / LN10:.4g}"
    return f"score {v:.6g}"


# ------------------------------------------------------------------------------ the sweep
@dataclass(frozen=True)
class AlphaSweep(ResultMixin):
    """The test at every K on a grid: data for [EM] Fig. 4 (pointwise 95% intervals, D.1)."""

    kind: str
    n_controls: int
    n_candidates: int
    confidence: float
    k: np.ndarray
    alpha_n: np.ndarray
    threshold: np.ndarray  # internal units
    threshold_log10_prob: np.ndarray | None
    member_rate: np.ndarray  # G at each threshold (Fig. 4(a))
    member_lower: np.ndarray
    member_upper: np.ndarray
    calibrated_rate: np.ndarray  # M = G - alpha_N (Fig. 4(b))
    calibrated_lower: np.ndarray
    calibrated_upper: np.ndarray
    control_rate: np.ndarray  # in-sample rate of controls above each threshold
    beta_lower: np.ndarray  # central Beta band on alpha*, NaN where the law is not certified
    beta_upper: np.ndarray
    alpha_dagger: float  # ceiling: the largest attainable alpha_N ([EM] C.4.4, Fig. 4(b))
    max_k: int


def alpha_sweep(
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    *,
    kind: str = "log-prob",
    confidence: float = 0.95,
    max_points: int = 200,
    include_k: Sequence[int] = (),
) -> AlphaSweep | None:
    """The conformal test at K = 1 .. K_max (log-spaced grid of at most ``max_points`` K's plus
    ``include_k``), where K_max is the number of controls above the atom (the ceiling alpha-dagger;
    beyond it the threshold sits on the atom, [EM] C.4.4). Returns None for binary scores: their
    sweep collapses to a single operating point ([EM] §4).

    >>> from memclaim.claims.conformal import alpha_sweep
    >>> s = alpha_sweep([-1.0, -2.0, -30.0], [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> s.k.tolist(), s.alpha_n.tolist(), s.calibrated_rate.round(4).tolist()
    ([1, 2, 3, 4, 5, 7, 9], [0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9], [0.5667, 0.4667, 0.3667, 0.2667, 0.1667, -0.0333, -0.2333])
    """
    kind = parse_kind(kind)
    confidence = in_open_unit("confidence", confidence)
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores")
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    if kind in PROBABILITY_KINDS and _is_binary_values(cand) and _is_binary_values(ctrl):
        return None
    n, j = ctrl.size, cand.size
    atom = find_atom(ctrl)
    kmax = atom.n_above_atom if atom.atom_value is not None else n
    if kmax < 1:
        return None
    grid = np.unique(
        np.concatenate(
            [
                np.round(np.geomspace(1, kmax, num=min(max_points, kmax))).astype(np.int64),
                np.asarray([x for x in include_k if 1 <= x <= kmax], dtype=np.int64),
            ]
        )
    )
    desc = np.sort(ctrl)[::-1]
    tau = desc[grid - 1]  # [EM] Eq. 6 at each K
    g = count_gt(tau, np.sort(cand))
    lo, hi = clopper_pearson_arrays(g, j, confidence=confidence)
    alpha_n = grid / (n + 1)
    from scipy import stats

    b_lo = stats.beta.ppf((1 - confidence) / 2, grid, n - grid + 1)
    b_hi = stats.beta.ppf((1 + confidence) / 2, grid, n - grid + 1)
    ok = grid <= atom.n_above_atom
    b_lo, b_hi = np.where(ok, b_lo, np.nan), np.where(ok, b_hi, np.nan)
    rate = g / j
    return AlphaSweep(
        kind,
        n,
        j,
        confidence,
        grid,
        alpha_n,
        tau,
        tau / LN10 if kind in PROBABILITY_KINDS else None,
        rate,
        lo,
        hi,
        rate - alpha_n,
        lo - alpha_n,
        hi - alpha_n,
        count_gt(tau, np.sort(ctrl)) / n,
        b_lo,
        b_hi,
        atom.alpha_dagger,
        int(kmax),
    )
