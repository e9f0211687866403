"""Censuses of several document/control pairs ([EM] §5, §7, App. E): the procedure check across
pairs, one threshold per control (or the most conservative over all pairs), the census of each
document, its budget view and the near-verbatim suspects among the controls. Pure: the scores
come in as :class:`~memclaim.claims.census.WindowScores`; the report renders the result
(:mod:`memclaim.report.census`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..jsonutil import ResultMixin
from ..procedure import NUMERICS_DECLARED, require_same_procedure
from .budget import CensusBudgetView, census_budget_view
from .census import (
    CensusResult,
    CensusThreshold,
    FlaggedWindow,
    census,
    census_threshold,
    flag_near_verbatim,
    global_threshold,
)

__all__ = ["CensusOfPairs", "census_of_pairs"]


@dataclass(frozen=True)
class CensusOfPairs(ResultMixin):
    """The census of every pair: ``results`` (one :class:`CensusResult` per document), the
    per-pair ``thresholds`` and the ``global_threshold`` used when asked for, the ``budgets``
    (None without a budget delta), the ``flagged`` control windows (for a person to confirm), the
    documents' texts, the checked ``procedure`` and the note on the global threshold."""

    results: tuple[CensusResult, ...]
    thresholds: tuple[CensusThreshold, ...]
    global_threshold: CensusThreshold | None
    budgets: tuple[CensusBudgetView | None, ...]
    flagged: tuple[FlaggedWindow, ...]
    document_texts: tuple
    procedure: dict | None
    global_note: str | None


def census_of_pairs(
    pairs: Sequence[dict],
    *,
    use_global_threshold: bool = False,
    references: dict | None = None,
    budget_delta: float | None = 0.05,
    realistic_budget: float = 1e5,
    procedure_ignore: Sequence[str] = (),
    min_similarity: float = 90.0,
    allow_mixed_numerics: bool = False,
) -> CensusOfPairs:
    """Each pair is a dict with ``document`` and ``control`` (:class:`WindowScores`), optional
    ``document_text`` / ``control_text`` (for the heatmap text and near-verbatim flags),
    ``exclude_spans`` (verified quotations in the control, [EM] E.1), and ``procedure_document``
    / ``procedure_control`` (checked to be the same procedure, [EM] Def. B.2, across pairs too).
    With ``use_global_threshold`` every document is read at the most conservative threshold
    ([EM] §7); ``budget_delta`` adds the budget view at confidence 1 - delta ([EM] §6, Fig. 7).

    >>> import math
    >>> from memclaim.claims.census_pairs import census_of_pairs
    >>> from memclaim.claims.census import WindowScores
    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> c = census_of_pairs([{"document": doc, "control": ctl}], budget_delta=None)
    >>> c.results[0].log10_tau, c.results[0].coverage
    (-8, 0.5)
    """
    if not pairs:
        raise InputError(
            "no document pairs given", hint="pass at least one (document, control) pair"
        )
    procedure = None
    mixed: list[str] = []
    for p in pairs:
        pd_, pc_ = p.get("procedure_document"), p.get("procedure_control")
        if pd_ is not None and pc_ is not None:
            mixed += require_same_procedure(
                pd_,
                pc_,
                ignore=tuple(procedure_ignore),
                what=("document", "control"),
                allow_mixed_numerics=allow_mixed_numerics,
            )
        this = pd_ or pc_
        if procedure is None:
            procedure = this
        elif this is not None:
            mixed += require_same_procedure(
                procedure,
                this,
                ignore=tuple(procedure_ignore),
                what=("the first pair", "this pair"),
                allow_mixed_numerics=allow_mixed_numerics,
            )
    if mixed and procedure is not None:  # the report states what was declared comparable
        procedure = {**procedure, NUMERICS_DECLARED: sorted(set(mixed))}
    ths = [census_threshold(p["control"], exclude_spans=p.get("exclude_spans", ())) for p in pairs]
    g = global_threshold(ths) if use_global_threshold else None
    results, budgets, flagged, texts = [], [], [], []
    for p, th in zip(pairs, ths):
        r = census(p["document"], p["control"], threshold=g if g is not None else th)
        results.append(r)
        budgets.append(
            census_budget_view(
                heat=r.heat, log10_tau=r.log10_tau, delta=budget_delta, realistic_n=realistic_budget
            )
            if budget_delta is not None
            else None
        )
        texts.append(p.get("document_text"))
        if p.get("control_text") is not None:
            flagged += list(
                flag_near_verbatim(
                    p["control"],
                    p["control_text"],
                    candidate_text=p.get("document_text"),
                    references=references,
                    min_similarity=min_similarity,
                )
            )
    note = None
    if g is not None:
        note = (
            f"Every document is read at the global threshold 1e{g.log10_tau}, the most conservative of the "
            "per-pair thresholds ("
            + ", ".join(f"{t.control_name}: 1e{t.log10_tau}" for t in ths)
            + ") ([EM] §7)."
        )
    return CensusOfPairs(
        tuple(results), tuple(ths), g, tuple(budgets), tuple(flagged), tuple(texts), procedure, note
    )
