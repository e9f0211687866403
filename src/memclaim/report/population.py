"""The population-test report ([EM] §3, §4, App. C, D, F.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..claims.population import PopulationClaim
from ..claims.scores import LN10, PROBABILITY_KINDS
from . import figures, numbers, words
from .core import Doc, ReportBundle, fmt_num, pct, render, sci_from_log10, short_id
from .numbers import value

if TYPE_CHECKING:  # the annotations' names only
    from matplotlib.figure import Figure

MAX_ROWS = 50


def _iv(iv) -> str:
    return f"{pct(iv.estimate)} [{pct(iv.lower)}, {pct(iv.upper)}]"


def _score(v, kind) -> str:
    if v is None:
        return "–"
    if kind in PROBABILITY_KINDS:
        if v == -math.inf:
            return "p = 0"
        return f"p = {numbers.prob(v / LN10)}"
    return fmt_num(v)


def headline(
    claim: PopulationClaim, procedure: dict | None = None, *, policy: str | None = None
) -> str:
    """The population test's one-sentence result: the procedure it was made under (the decoding
    policy tested, the prompt rule when it is not the natural prefix: :func:`words.procedure_phrase`
    of ``procedure``, or ``policy``), K, alpha_N, tau, the claimed count and G, M with intervals.

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import headline
    >>> c = population_claim(candidate_scores=[-1.0, -2.0, -30.0], alpha="0.1",
    ...                      control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> headline(c, policy="full")[:120]
    'At target FPR alpha = 1/10 (10%) with N = 9 controls, under decoding policy full: K = 1, certified alpha_N = 1/10 = 10%,'
    """
    t = claim.primary_test
    pool = " (decontaminated controls)" if claim.primary == "decontaminated" else ""
    under = words.procedure_phrase(procedure, policy=policy)
    if not t.claim_possible:
        return f"No memorization claim is possible{pool} {under}: {t.no_claim_reason}"
    if t.binary:
        b = t.binary_rates
        return (
            f"Greedy (binary) score {under}: {b.member_count} of {b.n_candidates} candidates reproduced verbatim "
            f"({_iv(b.member_rate)}) against {b.m} of {b.n_controls} controls ({_iv(b.control_rate)}); "
            f"certified floor alpha_N = (m+1)/(N+1) = {pct(b.alpha_n)}. At target alpha = {t.alpha} "
            f"(K = {t.k}), {t.n_claimed} candidates are claimed memorized{pool}: calibrated rate "
            f"M = G - (m+1)/(N+1) = {_iv(t.calibrated_rate)}."
        )
    return (
        f"At target FPR alpha = {t.alpha} ({pct(t.alpha_float)}) with N = {t.n_controls} controls{pool}, {under}: "
        f"K = {t.k}, certified alpha_N = {t.alpha_n_exact} = {pct(t.alpha_n)}, threshold tau = "
        f"{_score(t.threshold, t.kind)}. {t.n_claimed} of {t.n_candidates} candidates score strictly above tau "
        f"and are claimed memorized: generation rate G = {_iv(t.generation_rate)}, calibrated memorization "
        f"rate M = G - alpha_N = {_iv(t.calibrated_rate)} ({100 * t.confidence:g}% Clopper-Pearson)."
    )


def short_claim(claim: PopulationClaim, procedure: dict | None = None) -> str:
    """The claim in a few words (a result's repr): how many were claimed, at which certified
    FPR, under which policy.

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import short_claim
    >>> c = population_claim(candidate_scores=[-1.0, -2.0, -30.0], alpha="0.1",
    ...                      control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> short_claim(c, {"policy": "full"})
    'policy full: 2 of 3 candidates claimed at alpha_N = 1/10 (10%), N = 9 controls'
    """
    t = claim.primary_test
    d = procedure or {}
    pol = d.get("policy") or (list(d.get("policies") or ["unrecorded"])[0])
    if not t.claim_possible:
        return f"policy {pol}: no claim possible, N = {t.n_controls} controls, alpha = {t.alpha}"
    return (
        f"policy {pol}: {t.n_claimed} of {t.n_candidates} candidates claimed at alpha_N = {t.alpha_n_exact} "
        f"({pct(t.alpha_n)}), N = {t.n_controls} controls"
    )


def score_histogram_of(claim: PopulationClaim) -> Figure:
    """:func:`memclaim.report.figures.score_histograms` of a claim: its candidates and controls
    (the pool tested), tau marked where the test set one.

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import score_histogram_of
    >>> c = population_claim(candidate_scores=[-1.0, -2.0], alpha="0.1", control_scores=[-9.0, -8.0, -7.0] * 3)
    >>> len(score_histogram_of(c).axes)
    1
    """
    t = claim.primary_test
    ctrl = claim.control_scores
    if claim.primary == "decontaminated" and claim.excluded_control_ids:
        keep = np.array([c not in set(claim.excluded_control_ids) for c in claim.control_ids])
        ctrl = ctrl[keep]
    tau = t.threshold if t.claim_possible and t.threshold is not None else None
    return figures.score_histograms(
        claim.candidate_scores,
        ctrl,
        threshold=tau,
        probability=claim.kind in PROBABILITY_KINDS,
        labels=("members (candidates)", "controls"),
    )


def population_summary_doc(
    claim: PopulationClaim,
    procedure: dict | None = None,
    *,
    title: str = "Conformal population test",
) -> Doc:
    """A result's notebook view: the report's claim box and its key table (the test), nothing else.

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import population_summary_doc
    >>> c = population_claim(candidate_scores=[-1.0, -2.0], alpha="0.1", control_scores=[-9.0, -8.0, -7.0] * 3)
    >>> [b[0] for b in population_summary_doc(c).blocks]
    ['callout', 'table']
    """
    t = claim.primary_test
    doc = Doc(title)
    doc.callout(
        headline(claim, procedure),
        ("claim" if t.n_claimed else "null") if t.claim_possible else "warn",
    )
    doc.table(["quantity", "value", "meaning"], _test_rows(t))
    return doc


def _test_rows(t) -> list:
    rows = [
        ("target FPR alpha", f"{t.alpha} = {pct(t.alpha_float)}", "chosen before scoring"),
        ("controls N", t.n_controls, ""),
        ("candidates J", t.n_candidates, ""),
        ("rank K = floor(alpha (N+1))", t.k, "exact arithmetic ([EM] Eq. 5)"),
        (
            "certified FPR alpha_N = K/(N+1)",
            f"{t.alpha_n_exact} = {pct(t.alpha_n)}",
            "what Prop. 1 certifies; <= alpha",
        ),
        (
            "threshold tau (K-th largest control)",
            _score(t.threshold, t.kind),
            "claim iff score > tau ([EM] Eq. 6)",
        ),
        (
            "controls above tau (in-sample FPR)",
            f"{t.controls_above_threshold} = {pct(t.in_sample_fpr)}",
            "(K-1)/N only without ties at tau; no guarantee attached",
        ),
        (
            "controls equal to tau (incl. the K-th)",
            t.controls_tied_at_threshold,
            "ties count against candidates",
        ),
        ("candidates claimed", t.n_claimed, ""),
        ("generation rate G", _iv(t.generation_rate), "Clopper-Pearson ([EM] D.1)"),
        (
            "calibrated rate M = G - alpha_N",
            _iv(t.calibrated_rate),
            "CP shifted by the floor (m+1)/(N+1) ([EM] D.3)"
            if t.binary
            else "CP shifted by alpha_N ([EM] Eq. 8)",
        ),
        (
            "ceiling alpha-dagger (controls above the atom)",
            f"{t.atom.n_above_atom}/{t.n_controls} = {pct(t.atom.alpha_dagger)}"
            if t.atom.atom_value is not None
            else "no atom seen (all control scores distinct)",
            "largest attainable alpha_N ([EM] C.4.4)",
        ),
    ]
    if t.threshold_on_atom and t.claim_possible:
        rows.append(
            (
                "threshold on the atom",
                "yes",
                "every candidate above the atom is claimed ([EM] C.4.4)",
            )
        )
    return rows


def _beta_rows(t) -> list:
    law = t.beta_law
    rows = [
        ("law", f"alpha* ~ Beta({law.a}, {law.b})", "[EM] Prop. 2 / Lemma 3"),
        ("mean E[alpha*]", pct(law.mean), "= alpha_N"),
        (
            f"central {100 * law.central.confidence:g}% interval",
            f"[{pct(law.central.lower)}, {pct(law.central.upper)}]",
            "fixed by K and N; not a confidence interval",
        ),
        (
            "P(alpha* > alpha_N)",
            pct(law.prob_exceeds_alpha_n),
            "alpha_N is the mean, not a bound ([EM] C.4.3)",
        ),
    ]
    for lvl, v in law.conditional_bounds.items():
        rows.append(
            (
                f"v_{lvl}",
                pct(v),
                f"alpha* <= v for {100 * float(lvl):g}% of control draws ([EM] Eq. 25)",
            )
        )
    return rows


def build_population_doc(
    claim: PopulationClaim,
    *,
    title: str = "Conformal population test",
    controls_description: str | None = None,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
    figures_on: bool = True,
) -> Doc:
    """The population report's document (rendered three ways by :func:`population_report`): the
    test, alpha*'s law, the sweep, FDR/FWER and budgets where computed, the claimed candidates and
    what the claim means; ``figures_on=False`` leaves the figures out.

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import build_population_doc
    >>> c = population_claim(candidate_scores=[-1.0, -2.0, -30.0], alpha="0.1",
    ...                      control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> d = build_population_doc(c, figures_on=False)
    >>> d.title, [b[0] for b in d.blocks][:4]
    ('Conformal population test', ['callout', 'callout', 'h2', 'table'])
    """
    t = claim.primary_test
    doc = Doc(title)
    # a test that claimed nothing is a null result: never drawn in the success style
    doc.callout(
        headline(claim, procedure),
        ("claim" if t.n_claimed else "null") if t.claim_possible else "warn",
    )
    limited = words.limit_note(inputs)
    if limited:
        doc.callout(limited, "caution")
    doc.callout(words.NO_CLAIM_IS_NOT_EVIDENCE)

    doc.h2(
        "The test" + (" (decontaminated control pool)" if claim.primary == "decontaminated" else "")
    )
    doc.table(["quantity", "value", "meaning"], _test_rows(t))
    if figures_on and not t.binary:
        doc.figure(
            "Scores of the members (candidates) and of the controls, log10 q under the tested policy, with the "
            "threshold tau the controls set (a candidate is claimed when its score is strictly above it).",
            score_histogram_of(claim),
            name="scores",
        )

    if claim.decontaminated is not None:
        doc.h2("Full and decontaminated control pools side by side ([EM] D.2)")
        f, d = claim.full, claim.decontaminated
        rows = []
        for (name, vf, _), (_, vd, _) in zip(_test_rows(f), _test_rows(d)):
            rows.append((name, vf, vd))
        doc.table(["quantity", "full pool", "decontaminated pool"], rows)
        doc.p(
            f"Excluded {len(claim.excluded_control_ids)} control(s) verified as members: "
            + ", ".join(short_id(x) for x in claim.excluded_control_ids[:MAX_ROWS])
            + (" ..." if len(claim.excluded_control_ids) > MAX_ROWS else "")
        )
        doc.p(
            "Contaminated controls can only raise the threshold; removing verified members makes the claim "
            "less conservative but closer to the intended null ([EM] C.3, D.2)."
        )

    doc.h2("Population FPR alpha* of this threshold ([EM] App. C.4)")
    if t.beta_law is not None:
        doc.table(["quantity", "value", "meaning"], _beta_rows(t))
    doc.p(t.beta_law_note)
    if t.atom.atom_value is not None and not t.binary:
        doc.p(
            "Atoms are detected from the control sample (ties, exact-zero probabilities); an atom the sample "
            "does not reveal cannot be detected."
        )

    if t.binary and t.binary_rates is not None:
        b = t.binary_rates
        doc.h2("Greedy decoding: one operating point ([EM] §4, Fig. 3)")
        doc.table(
            ["quantity", "value"],
            [
                ("members reproduced", f"{b.member_count}/{b.n_candidates} = {_iv(b.member_rate)}"),
                ("controls reproduced m", f"{b.m}/{b.n_controls} = {_iv(b.control_rate)}"),
                ("certified floor alpha_N = (m+1)/(N+1)", f"{b.alpha_n_exact} = {pct(b.alpha_n)}"),
                (
                    "share of the member rate matched by the floor",
                    pct(b.floor_share_of_member_rate)
                    if b.floor_share_of_member_rate is not None
                    else "–",
                ),
                ("member rate - control rate (Newcombe)", _iv(b.difference)),
            ],
        )
        doc.p(words.BINARY)
        if figures_on:
            doc.figure(
                "Verbatim generation under greedy decoding: in-sample rates with 95% Clopper-Pearson "
                "intervals; dashed: certified floor (m+1)/(N+1).",
                figures.binary_bars(b),
                name="binary",
            )

    sw = claim.primary_sweep
    if sw is not None:
        doc.h2("Sweep over the target FPR ([EM] Fig. 4)")
        doc.p(
            f"{sw.k.size} operating points from K = 1 to K = {sw.max_k} (the ceiling alpha-dagger = "
            f"{pct(sw.alpha_dagger)}); pointwise {100 * sw.confidence:g}% intervals, not a simultaneous band "
            "([EM] D.1)."
        )
        if sw.k.size < figures.MIN_SWEEP_POINTS:
            doc.p(
                f"Only {sw.k.size} operating point{'s' if sw.k.size != 1 else ''}: too few operating points to "
                "draw a sweep (more controls give more thresholds); the table lists them."
            )
        elif figures_on:
            doc.figure(
                "(a) share of members and controls above each calibrated threshold; (b) calibrated rate "
                "M = G - alpha_N with its shifted Clopper-Pearson band; (c) the central Beta band of the "
                "population FPR alpha* (drawn only where the law holds).",
                figures.alpha_sweep_figure(
                    sw,
                    alpha_n=t.alpha_n if t.k else None,
                    probability=claim.kind in PROBABILITY_KINDS,
                ),
                name="alpha-sweep",
            )
        pick = np.unique(
            np.clip(
                np.searchsorted(sw.k, [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, sw.max_k]),
                0,
                sw.k.size - 1,
            )
        )
        doc.table(
            ["K", "alpha_N", "threshold", "G", "M = G - alpha_N", "controls above"],
            [
                (
                    int(sw.k[i]),
                    pct(sw.alpha_n[i]),
                    _score(float(sw.threshold[i]), claim.kind),
                    f"{pct(sw.member_rate[i])} [{pct(sw.member_lower[i])}, {pct(sw.member_upper[i])}]",
                    f"{pct(sw.calibrated_rate[i])} [{pct(sw.calibrated_lower[i])}, {pct(sw.calibrated_upper[i])}]",
                    pct(sw.control_rate[i]),
                )
                for i in pick
            ],
            caption="Selected operating points",
        )

    if claim.fdr is not None:
        fd = claim.fdr
        doc.h2("False discovery rate: Benjamini-Hochberg ([EM] C.5)")
        doc.p(
            f"At FDR level delta = {fd.delta}: {fd.n_claimed} of {fd.n_candidates} candidates are claimed. "
            f"{fd.guarantee}."
        )
        doc.p(("Randomized tie-breaking: " if fd.randomized else "") + fd.reason + ".")
    if claim.fwer is not None:
        fw = claim.fwer
        doc.h2("Family-wise error rate: Bonferroni ([EM] C.5)")
        doc.p(fw.statement + ".")
        doc.table(
            ["quantity", "value"],
            [
                ("delta", fw.delta),
                ("candidates J", fw.n_candidates),
                ("controls N", fw.n_controls),
                ("capacity floor(delta (N+1))", fw.capacity),
                ("controls needed ceil(J/delta - 1)", fw.controls_needed),
                ("candidates claimed", fw.n_claimed),
            ],
        )

    if claim.budget is not None:
        bv = claim.budget
        doc.h2("Query budgets ([EM] §6, F.2)")
        rows = []
        if bv.n_tau is not None:
            rows.append(
                (
                    "budget of the threshold n_alpha_N = ceil(log delta / log(1 - tau))",
                    sci_from_log10(bv.n_tau.log10_n)
                    if bv.n_tau.n_int is None
                    else f"{bv.n_tau.n_int:,}",
                )
            )
        if bv.at_n_tau is not None:
            rows.append(("calibrated rate at n_alpha_N (CP shifted)", _iv(bv.at_n_tau)))
        if bv.at_realistic_n is not None:
            rows.append(
                (
                    f"memorized and extractable within n = {bv.realistic_n:g}: members - controls (Newcombe)",
                    _iv(bv.at_realistic_n),
                )
            )
        doc.table(["quantity", "value"], rows)
        doc.p(words.EXTRACTABLE)
        if figures_on:
            doc.figure(
                "Members and controls generated at least once within n queries with probability "
                f"{100 * (1 - bv.delta):g}%, and members that also clear tau.",
                figures.population_budget_figure(bv),
                name="budget",
            )

    doc.h2("Claimed candidates")
    idx = np.flatnonzero(t.claimed)
    if idx.size == 0:
        doc.p("No candidate was claimed.")
    else:
        order = idx[np.lexsort((-claim.candidate_scores[idx], t.pvalue_numerators[idx]))][:MAX_ROWS]
        headers = ["id", "score", "p-value"] + (
            ["margin log10(score/tau)"] if t.margins_log10 is not None else []
        )
        rows = []
        for i in order:
            r = [
                short_id(claim.candidate_ids[i]),
                _score(float(claim.candidate_scores[i]), claim.kind),
                f"{int(t.pvalue_numerators[i])}/{t.n_controls + 1}",
            ]
            if t.margins_log10 is not None:
                r.append(fmt_num(float(t.margins_log10[i])))
            rows.append(r)
        doc.table(
            headers,
            rows,
            caption=f"{min(idx.size, MAX_ROWS)} of {idx.size} claimed candidates "
            "(smallest p-value first); all are in report.json",
        )

    doc.h2("Controls")
    doc.p(
        controls_description
        or "No description of how the controls were chosen was given. A reader cannot "
        "judge exchangeability without it: say where the controls come from, how they were matched to the "
        "candidates (source, format, length, style) and why they are non-members."
    )
    doc.p(
        "Decontamination: "
        + (
            f"{len(claim.excluded_control_ids)} verified member(s) excluded; results on both "
            "pools are shown."
            if claim.excluded_control_ids
            else "none applied (no verified members were listed)."
        )
    )

    doc.h2("What this does and does not mean")
    doc.bullets(
        words.population_statements(
            binary=t.binary,
            decontaminated=claim.decontaminated is not None,
            multiple=claim.fdr is not None or claim.fwer is not None,
            near_verbatim=words.is_near_verbatim(procedure),
        )
    )
    _procedure_section(doc, procedure, inputs)
    return doc


def _procedure_section(doc: Doc, procedure: dict | None, inputs: Sequence[dict]):
    doc.h2("Procedure and inputs")
    declared = (procedure or {}).get(
        "numerics_declared_comparable"
    )  # memclaim.procedure.NUMERICS_DECLARED
    if declared:
        doc.callout(
            "The scores compared here were computed with different numerics ("
            + "; ".join(declared)
            + "). They were declared comparable with --allow-mixed-numerics: the claim assumes that the "
            "difference between device classes or dtypes moves no score across the threshold.",
            "warn",
        )
    if procedure:
        flat = []

        def walk(d, pre=""):
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(v, f"{pre}{k}.")
                else:
                    flat.append((f"{pre}{k}", value(v)))

        walk(procedure)
        doc.table(["field", "value"], flat)
    else:
        doc.p("No procedure record was given.")
    if inputs:
        rows = [
            (value(i.get("role", "")), value(i.get("path", "")), value(i.get("sha256", "")))
            for i in inputs
        ]
        if any(
            "run_id" in i for i in inputs
        ):  # scores read from a store: say which run of which store
            doc.table(
                ["role", "path", "sha256", "scores"],
                [
                    r
                    + (
                        (
                            f"{value(i['store'])} run {value(i['run_id'])} ({value(i.get('label', ''))}), "
                            f"{value(i.get('policy', ''))}"
                            if "run_id" in i
                            else ""
                        ),
                    )
                    for r, i in zip(rows, inputs)
                ],
            )
        else:
            doc.table(["role", "path", "sha256"], rows)


def population_report(
    claim: PopulationClaim,
    *,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
    controls_description: str | None = None,
    command: str = "test",
    title: str = "Conformal population test",
    extra_results: dict | None = None,
) -> ReportBundle:
    """Render the three report files for a population claim (nothing is written).

    >>> from memclaim.claims.population import population_claim
    >>> from memclaim.report.population import population_report
    >>> c = population_claim(candidate_scores=[-1.0, -2.0, -30.0], alpha="0.1",
    ...                      control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0])
    >>> b = population_report(c)  # draws the figures (seconds)  # doctest: +SKIP
    >>> sorted(b.figures)  # doctest: +SKIP
    ['alpha-sweep.pdf', 'alpha-sweep.png']
    """
    procedure = words.with_verify(procedure, words.VERIFY_POPULATION)
    doc = build_population_doc(
        claim,
        title=title,
        controls_description=controls_description,
        procedure=procedure,
        inputs=inputs,
    )
    t = claim.primary_test
    results = {
        "headline": headline(claim, procedure),
        "controls_description": controls_description,
        "population": claim.to_dict(),
        **(extra_results or {}),
    }
    return render(
        doc,
        command=command,
        procedure=procedure,
        inputs=inputs,
        results=results,
        statements=words.population_statements(
            binary=t.binary,
            decontaminated=claim.decontaminated is not None,
            multiple=claim.fdr is not None or claim.fwer is not None,
            near_verbatim=words.is_near_verbatim(procedure),
        ),
    )
