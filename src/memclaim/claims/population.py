"""A population claim with ids: the test on the full and on the decontaminated control pool,
the alpha sweep, optional multiple testing and budget view ([EM] §3, §4, C.5, D.2, F.2).

This is the one function commands call with two score arrays plus metadata
(:func:`population_claim`); everything below it is in :mod:`.conformal`, :mod:`.multiple`,
:mod:`.budget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin, to_jsonable
from .budget import PopulationBudgetView, population_budget_view
from .conformal import AlphaSweep, PopulationTest, alpha_sweep, population_test
from .multiple import FDRResult, FWERResult, fdr_claims, fwer_claims
from .scores import PROBABILITY_KINDS, as_scores, parse_kind


@dataclass(frozen=True)
class PopulationClaim(ResultMixin):
    kind: str
    primary: str  # "full" or "decontaminated": the pool the headline claim uses
    full: PopulationTest
    decontaminated: PopulationTest | None
    excluded_control_ids: tuple[str, ...]
    sweep_full: AlphaSweep | None
    sweep_decontaminated: AlphaSweep | None
    fdr: FDRResult | None
    fwer: FWERResult | None
    budget: PopulationBudgetView | None
    candidate_ids: tuple[str, ...] = field(repr=False)
    control_ids: tuple[str, ...] = field(repr=False)
    candidate_scores: np.ndarray = field(
        repr=False
    )  # internal units (natural log for probabilities)
    control_scores: np.ndarray = field(repr=False)

    @property
    def primary_test(self) -> PopulationTest:
        if self.primary == "decontaminated":
            # primary is "decontaminated" only when that pool was tested (population_test)
            assert self.decontaminated is not None
            return self.decontaminated
        return self.full

    @property
    def primary_sweep(self) -> AlphaSweep | None:
        return self.sweep_decontaminated if self.primary == "decontaminated" else self.sweep_full

    def to_dict(self) -> dict:
        d = super().to_dict()
        t = self.primary_test
        rows = []
        for i, cid in enumerate(self.candidate_ids):
            row = {
                "id": cid,
                "score": float(self.candidate_scores[i]),
                "pvalue_numerator": int(t.pvalue_numerators[i]),
                "pvalue": int(t.pvalue_numerators[i]) / (t.n_controls + 1),
                "claimed": bool(t.claimed[i]),
            }
            if t.margins_log10 is not None:
                row["margin_log10"] = float(t.margins_log10[i])
            if self.fdr is not None:
                row["fdr_pvalue"] = float(self.fdr.pvalues[i])
                row["fdr_claimed"] = bool(self.fdr.claimed[i])
            if self.fwer is not None:
                row["fwer_claimed"] = bool(self.fwer.claimed[i])
            rows.append(row)
        d["candidates"] = to_jsonable(rows)
        return d


def _ids(ids, n, what) -> tuple[str, ...]:
    if ids is None:
        return tuple(str(i) for i in range(n))
    ids = tuple(str(i) for i in ids)
    if len(ids) != n:
        raise InputError(f"{what}: {len(ids)} ids for {n} scores", hint="pass one id per score")
    seen, dup = set(), []
    for i in ids:
        if i in seen:
            dup.append(i)
        seen.add(i)
    if dup:
        raise InputError(f"{what}: duplicate ids {dup[:5]}", hint="make ids unique")
    return ids


def population_claim(
    *,
    candidate_scores: Sequence[float] | np.ndarray,
    control_scores: Sequence[float] | np.ndarray,
    alpha: str | float | Fraction,
    kind: str = "log-prob",
    candidate_ids: Sequence[str] | None = None,
    control_ids: Sequence[str] | None = None,
    exclude_control_ids: Sequence[str] = (),
    binary: bool | None = None,
    confidence: float = 0.95,
    conditional_levels: Sequence[float] = (0.9, 0.95),
    sweep: bool = True,
    fdr_delta: str | float | Fraction | None = None,
    fwer_delta: str | float | Fraction | None = None,
    seed: int = 0,
    budget_delta: float | None = None,
    realistic_budget: float = 1e5,
) -> PopulationClaim:
    """Run the conformal test on the full control pool and, when ``exclude_control_ids`` lists
    verified members among the controls, on the decontaminated pool too ([EM] D.2); the
    decontaminated pool is then the primary one. Multiple testing (``fdr_delta``: BH;
    ``fwer_delta``: Bonferroni) and the budget view (``budget_delta``, probability kinds only)
    use the primary pool.

    >>> c = population_claim(candidate_scores=[-1.0, -2.0], control_scores=[-9.0, -1.5, -7.0, -6.0, -5.0,
    ...                      -4.0, -3.5, -10.0, -11.0, -12.0], alpha="0.1", control_ids=[f"c{i}" for i in range(10)],
    ...                      exclude_control_ids=["c1"])  # c1 verified as a member ([EM] D.2)
    >>> c.primary, c.primary_test.n_controls, c.primary_test.threshold, c.primary_test.n_claimed
    ('decontaminated', 9, -3.5, 2)
    """
    kind = parse_kind(kind)
    cand = as_scores(candidate_scores, kind=kind, name="candidate scores")
    ctrl = as_scores(control_scores, kind=kind, name="control scores")
    cids = _ids(candidate_ids, cand.size, "candidates")
    kids = _ids(control_ids, ctrl.size, "controls")
    excl = tuple(dict.fromkeys(str(x) for x in exclude_control_ids))
    pos = {k: i for i, k in enumerate(kids)}
    unknown = [x for x in excl if x not in pos]
    if unknown:
        raise InputError(
            f"{len(unknown)} control ids to exclude are not among the controls: {unknown[:5]}",
            hint="list ids exactly as they appear in the control file",
        )
    # the arrays are already in internal units: pass them on as 'score' to skip re-conversion,
    # but keep the declared kind for what may be reported.
    full = population_test(
        cand,
        ctrl,
        alpha=alpha,
        kind=_internal(kind),
        binary=binary,
        confidence=confidence,
        conditional_levels=conditional_levels,
    )
    full = _with_kind(full, kind)
    dec = None
    sw_full = (
        alpha_sweep(cand, ctrl, kind=_internal(kind), confidence=confidence, include_k=(full.k,))
        if sweep
        else None
    )
    sw_dec = None
    primary_ctrl = ctrl
    if excl:
        keep = np.ones(ctrl.size, dtype=bool)
        keep[[pos[x] for x in excl]] = False
        if not keep.any():
            raise InputError(
                "every control was excluded by decontamination",
                hint="exclude only verified members; the test needs non-member controls",
            )
        primary_ctrl = ctrl[keep]
        dec = _with_kind(
            population_test(
                cand,
                primary_ctrl,
                alpha=alpha,
                kind=_internal(kind),
                binary=binary,
                confidence=confidence,
                conditional_levels=conditional_levels,
            ),
            kind,
        )
        sw_dec = (
            alpha_sweep(
                cand, primary_ctrl, kind=_internal(kind), confidence=confidence, include_k=(dec.k,)
            )
            if sweep
            else None
        )
    prim = dec if dec is not None else full
    fdr = (
        fdr_claims(cand, primary_ctrl, delta=fdr_delta, kind=_internal(kind), seed=seed)
        if fdr_delta is not None
        else None
    )
    fwer = (
        fwer_claims(cand, primary_ctrl, delta=fwer_delta, kind=_internal(kind))
        if fwer_delta is not None
        else None
    )
    budget = None
    if budget_delta is not None and kind in PROBABILITY_KINDS and not prim.binary:
        budget = population_budget_view(
            cand,
            primary_ctrl,
            log_tau=prim.threshold if prim.claim_possible else None,
            alpha_n=prim.rate_alpha_n,
            delta=budget_delta,
            realistic_n=realistic_budget,
            confidence=confidence,
        )
    return PopulationClaim(
        kind,
        "decontaminated" if dec is not None else "full",
        full,
        dec,
        excl,
        sw_full,
        sw_dec,
        fdr,
        fwer,
        budget,
        cids,
        kids,
        cand,
        ctrl,
    )


def _internal(kind: str) -> str:
    # probabilities were converted to natural logs by as_scores
    return "log-prob" if kind in PROBABILITY_KINDS else "score"


def _with_kind(t: PopulationTest, kind: str) -> PopulationTest:
    import dataclasses

    return dataclasses.replace(t, kind=kind) if t.kind != kind else t
