"""What a claim does and does not mean, in words ([EM] §3, §5, §6, C.1, C.3, C.4, C.5, D.1).

These sentences go into every report (``statements`` in report.json, a section in the Markdown and
HTML). They are part of the evidence: a number without them is easy to misread.
"""

from __future__ import annotations

from collections.abc import Sequence

NO_CLAIM_IS_NOT_EVIDENCE = (
    "No claim is not evidence against memorization. The test bounds false positives and says "
    "nothing about false negatives: a candidate that does not clear the threshold may still be "
    "memorized in a way this prompt, decoding policy or score does not surface ([EM] §3)."
)
RELATIVE_TO_CONTROLS = (
    "The false-positive rate is relative to the distribution of the controls. The guarantee holds "
    "for candidates that are exchangeable with the controls (same source, format, length, style, "
    "selected by the same rule). If the candidates come from a different distribution, or the "
    "controls score lower than matched non-members would, the actual FPR can exceed the certified "
    "level ([EM] C.3)."
)
CONTAMINATION = (
    "Controls must be genuine non-members. A control that is in fact a member (e.g. a post-cutoff "
    "text quoting earlier material) can only raise the threshold and make the claims more "
    "conservative; a post-cutoff date alone is not proof of non-membership ([EM] C.3, D.2)."
)
PER_CANDIDATE = (
    "The guarantee is per candidate and marginal over the control draw: a fresh non-member is "
    "claimed with probability at most alpha_N. It does not bound the chance of one or more false "
    "claims among many candidates (FWER) or the false discovery rate; use the multiple-testing "
    "options for those ([EM] C.2, C.5)."
)
ALPHA_STAR = (
    "alpha_N is the average of the population FPR alpha* of the realized threshold over control "
    "draws, not a bound on it: for a given control sample alpha* can exceed alpha_N. The Beta "
    "interval describes where alpha* falls across control draws; it is fixed by K and N before any "
    "control is drawn and is not a confidence interval ([EM] C.1, C.4)."
)
INTERVALS = (
    "Intervals are pointwise 95% intervals (or the stated level). The Clopper-Pearson interval on "
    "the generation rate covers the member sample only, holding the threshold fixed at the value "
    "the drawn controls set; the calibrated rate subtracts the constant alpha_N, so its interval "
    "is the same interval shifted ([EM] D.1)."
)
WHAT_A_CLAIM_MEANS = (
    "A claim means: under this fixed extraction procedure (model, decoding policy, prompt rule, "
    "score), the candidate's generation probability is higher than the matched non-members' "
    "baseline of predictability at the certified false-positive rate. It is evidence that the "
    "candidate (or a near-verbatim variant, if the score is near-verbatim) was in the training data "
    "and memorized; it licenses calling its generation probability an extraction probability "
    "([EM] Box 1, §3)."
)
CENSUS_NO_FPR = (
    "A census evaluates one fixed document exhaustively; there is no population being sampled, so "
    "there is no false-positive rate to certify. The threshold is calibrated against a matched "
    "non-member control document, decontaminated of verified quotations, and rounded up to the "
    "next power of ten ([EM] §5, E.1)."
)
EXTRACTABLE = (
    "Memorized is not the same as realistically extractable. A window can clear the calibrated "
    "threshold with a probability far too small to be generated in any feasible number of "
    "queries. 'Extractable memorization' requires both: the score clears the threshold and the "
    "procedure generates the sequence within a budget of n queries with probability at least "
    "1 - delta ([EM] §6)."
)
BINARY = (
    "Greedy decoding gives a binary score (reproduced or not), so there is one operating point: the "
    "certified floor is alpha_N = (m+1)/(N+1), where m controls were reproduced. Bars are in-sample "
    "rates with Clopper-Pearson intervals; a generation rate is not a memorization rate ([EM] §4)."
)
# the verify step ([EM] Def. B.2) each report states in its procedure record (the store records
# the population test's, whatever the run is later used for)
VERIFY_POPULATION = "conformal test against matched non-member controls ([EM] §3, Eq. 5-6)"
VERIFY_CENSUS = (
    "census against a matched control document: tau_doc = 10^ceil(log10 of the top decontaminated "
    "control score) ([EM] §5, Eq. 31), coverage of the document's window suffixes above it (Eq. 9); "
    "no certified false-positive rate"
)


def with_verify(procedure: dict | None, verify: str) -> dict | None:
    """``procedure`` with the verify step this report applied (None stays None).

    >>> from memclaim.report.words import VERIFY_CENSUS, with_verify
    >>> with_verify({"policy": "full", "verify": "conformal test ..."}, VERIFY_CENSUS)["verify"][:6]
    'census'
    """
    return None if procedure is None else {**procedure, "verify": verify}


PROCEDURE_FIXED = (
    "Candidates and controls must be scored by the same procedure, fixed before any score is seen "
    "([EM] C.2); results under different procedures are never compared silently."
)


NEAR_VERBATIM = (
    "The score is a certified lower bound on the probability of generating any sequence within the "
    "stated token edit distance of the suffix (the near-verbatim ball, [EM] App. B.1 Eq. 2), found "
    "by a pruned beam search: never above the true mass, never below the verbatim probability. A "
    "claim on it certifies near-verbatim membership, not verbatim memorization. For members the "
    "bound is conservative (the true mass can only be higher); the controls are scored the same "
    "way, so the threshold is calibrated on the same lower bound and the certified FPR holds for "
    "this score ([EM] §3, §6)."
)


def is_near_verbatim(procedure: dict | None) -> bool:
    """Whether a (stored, tested) procedure's score is the near-verbatim lower bound.

    >>> from memclaim.report.words import is_near_verbatim
    >>> is_near_verbatim({"score": "near-verbatim lower bound"}), is_near_verbatim(None)
    (True, False)
    """
    return bool(procedure) and str(procedure.get("score", "")).startswith("near-verbatim")


def population_statements(
    *, binary: bool, decontaminated: bool, multiple: bool, near_verbatim: bool = False
) -> list[str]:
    """What a population claim does and does not mean, in words (report.json ``statements``).

    >>> from memclaim.report.words import population_statements
    >>> population_statements(binary=False, decontaminated=False, multiple=False)[0][:40]
    'A claim means: under this fixed extracti'
    """
    s = [
        WHAT_A_CLAIM_MEANS,
        NO_CLAIM_IS_NOT_EVIDENCE,
        RELATIVE_TO_CONTROLS,
        CONTAMINATION,
        PER_CANDIDATE,
    ]
    if near_verbatim:
        s.append(NEAR_VERBATIM)
    if binary:
        s.append(BINARY)
    else:
        s.append(ALPHA_STAR)
    s += [INTERVALS, PROCEDURE_FIXED]
    return s


def census_statements(*, near_verbatim: bool = False) -> list[str]:
    """What a census's coverage does and does not mean, in words (report.json ``statements``).

    >>> from memclaim.report.words import census_statements
    >>> census_statements()[0][:40]
    'A census evaluates one fixed document ex'
    """
    return (
        [
            CENSUS_NO_FPR,
            NO_CLAIM_IS_NOT_EVIDENCE,
            CONTAMINATION,
            "Coverage counts only the characters of window suffixes (what was extracted), never the "
            "prompts ([EM] Eq. 9).",
            EXTRACTABLE,
        ]
        + ([NEAR_VERBATIM] if near_verbatim else [])
        + [PROCEDURE_FIXED]
    )


def budget_statements() -> list[str]:
    """What a query budget assumes, in words (report.json ``statements``).

    >>> from memclaim.report.words import budget_statements
    >>> len(budget_statements())
    2
    """
    return [
        EXTRACTABLE,
        "P[at least once in n] = 1 - (1-p)^n assumes n independent queries with the same per-query "
        "probability p (independent samples under the fixed procedure) ([EM] §6, Eq. 10).",
    ]


def procedure_phrase(procedure: dict | None = None, *, policy: str | None = None) -> str:
    """How a claim sentence names the procedure it was made under: the decoding policy tested
    (``policy``, else the record's ``policy``, else its first of ``policies``), the others
    scored in the same pass, and the prompt rule when it is not the plain natural prefix.

    >>> from memclaim.report.words import procedure_phrase
    >>> procedure_phrase({"policy": "full", "policies_scored": ["full", "greedy"]})
    'under decoding policy full (the one tested; also scored: greedy)'
    >>> procedure_phrase({"policy": "greedy", "prompt": {"templates": ["Repeat: {suffix}"], "chat": True}})
    "under decoding policy greedy, prompted with the template 'Repeat: {suffix}' in the model's chat template"
    >>> procedure_phrase(None)
    'under a decoding policy that was not recorded'
    """
    d = procedure or {}
    tested = policy or d.get("policy") or (list(d.get("policies") or [None])[0])
    if not tested or tested == "unrecorded":
        return "under a decoding policy that was not recorded"
    text = f"under decoding policy {tested}"
    scored = [
        str(p)
        for p in (d.get("policies_scored") or d.get("policies") or [])
        if str(p) != str(tested)
    ]
    if scored:
        text += f" (the one tested; also scored: {', '.join(scored)})"
    prompt = d.get("prompt") or {}
    templates = list(prompt.get("templates") or [])
    if templates:
        shown = ", ".join(repr(t) for t in templates[:3]) + (
            f" and {len(templates) - 3} more" if len(templates) > 3 else ""
        )
        text += f", prompted with the template{'s' if len(templates) > 1 else ''} {shown}"
        if len(templates) > 1:
            text += f" ({prompt.get('aggregate') or 'max'} over the prompts)"
    if prompt.get("chat"):
        text += (
            " in the model's chat template"
            if templates
            else ", prompted through the model's chat template"
        )
    if is_near_verbatim(d):
        text += f", near-verbatim score ({d.get('score')})"
    return text


def limit_note(inputs: Sequence[dict] | None) -> str | None:
    """The warning a report of a ``--limit`` run opens with (None when nothing was limited): which
    inputs were cut to their first N texts or windows, of how many.

    >>> from memclaim.report.words import limit_note
    >>> limit_note([{"role": "candidates", "scored_inputs": {"limit": 10, "records_total": 240}}])
    'Limited run (--limit 10): only the first 10 of 240 texts of the candidates were scored. A quick look, not a result about the whole input: run again without --limit for that.'
    >>> limit_note([{"role": "members"}]) is None
    True
    """
    parts = []
    for rec in inputs or ():
        if not isinstance(rec, dict):
            continue
        d = rec.get("scored_inputs") if isinstance(rec.get("scored_inputs"), dict) else rec
        if d.get("limit") is None:
            continue
        n, total = d["limit"], d.get("records_total", d.get("windows_total"))
        what = "texts" if "records_total" in d else "windows"
        parts.append(
            (
                n,
                f"the first {n} of {total} {what} of the {rec.get('role') or d.get('role') or 'input'}",
            )
        )
    if not parts:
        return None
    ns = sorted({n for n, _ in parts})
    return (
        f"Limited run (--limit {', '.join(map(str, ns))}): only {'; '.join(p for _, p in parts)} were scored. "
        "A quick look, not a result about the whole input: run again without --limit for that."
    )


def verifier_reading(rate: float, threshold: float, *, unlearned: bool) -> str:
    """The unlearning verifier's line ([MX] App. F.2): a verdict ("forgotten" / "not forgotten")
    only for a model that went through unlearning; for any other model the recovered fraction
    alone (a model never unlearned is not "forgotten" for recovering little).

    >>> verifier_reading(0.0, 0.15, unlearned=False)
    'greedy recovery of the members from their own prefixes: 0.000 (the unlearning verifier reads it against 0.15 after unlearning; this model was not unlearned)'
    >>> verifier_reading(0.05, 0.15, unlearned=True)
    'unlearning verifier: forgotten (recovered fraction 0.050 < 0.15)'
    """
    if unlearned:
        verdict = "forgotten" if rate < threshold else "not forgotten"
        return (
            f"unlearning verifier: {verdict} (recovered fraction {rate:.3f} {'<' if rate < threshold else '>='} "
            f"{threshold:g})"
        )
    return (
        f"greedy recovery of the members from their own prefixes: {rate:.3f} (the unlearning verifier reads it "
        f"against {threshold:g} after unlearning; this model was not unlearned)"
    )
