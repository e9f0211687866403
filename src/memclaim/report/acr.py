"""The ACR report ([EM] §3, App. A.2): the adversarial compression procedure on members and matched
non-member controls, in the population test's form (binary rates with Clopper-Pearson intervals,
the Newcombe difference, the certified floor), with the ACR distribution, the three success
criteria on every optimized prompt, and the flags [EM] App. A.2 raises.

Target results come in as plain dicts (``TargetResult.to_dict()``), so this module needs no model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..claims.acr import ACRComparison, Verdict
from . import style
from .core import Doc, ReportBundle, pct, render, short_id, visible
from .population import _procedure_section
from .style import PALETTE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_ROWS = 50
LN10 = math.log(10.0)

ACR_TRIAL = (
    "Each target is one success/failure trial: it is extracted when GCG finds a prompt shorter than the "
    "target that meets the success criterion (ACR = |y|/|x*| > 1). Each side's rate is a binomial "
    "proportion with a Clopper-Pearson interval; the difference gets Newcombe's interval ([EM] App. A.1, "
    "D.1)."
)
ACR_NO_SIGNAL = (
    "Equal extraction rates on members and matched non-members mean the procedure carries no signal "
    "about memorization: whatever raises the success rate (adversarial coaxing, predictability, "
    "the prompt handing over the target) raises it for non-members too ([EM] §3, 'Revisiting parrot "
    "prompts')."
)
ACR_NOT_A_CLAIM = (
    "ACR > 1 on a member is not a memorization claim on its own: only success beyond what matched "
    "non-members reach under the same procedure can be, and a difference between the two rates is "
    "a statement about the population, not about one target ([EM] §3, App. A.2)."
)
ACR_CRITERIA = (
    "The released ACR code tests success by the teacher-forced argmax, while the paper defines it by "
    "greedy generation; on thin argmax margins the two disagree ([EM] App. A.2 found 11 of 16 "
    "'successes' that greedy generation does not reproduce). Every optimized prompt is evaluated under "
    "all three criteria (argmax, greedy, prob:b) and argmax-only successes are flagged."
)
ACR_LEAKAGE = (
    "Nothing in GCG stops the optimized prompt from containing words of the target; such prompts are "
    "flagged (the words are listed) ([EM] App. A.2)."
)
ACR_FAILURE = (
    "A failure is not evidence against memorization: GCG is a heuristic search with a step budget, and "
    "a shorter prompt may exist that it did not find."
)


def acr_statements() -> list[str]:
    """What an ACR comparison does and does not mean, in words (report.json's ``statements``).

    >>> len(acr_statements())
    6
    """
    return [ACR_TRIAL, ACR_NO_SIGNAL, ACR_NOT_A_CLAIM, ACR_CRITERIA, ACR_LEAKAGE, ACR_FAILURE]


def _iv(iv) -> str:
    return f"{pct(iv.estimate)} [{pct(iv.lower)}, {pct(iv.upper)}]"


def _diff(iv) -> str:
    return f"{100 * iv.estimate:+.1f} points [{100 * iv.lower:+.1f}, {100 * iv.upper:+.1f}]"


def headline(cmp: ACRComparison) -> str:
    """The comparison in a few sentences (the report's first block).

    >>> from memclaim.claims.acr import acr_comparison
    >>> c = acr_comparison(member_extracted=[True, False], control_extracted=[True, False], member_acr=[1.5, None],
    ...                    control_acr=[1.2, None], criterion="prob:0.9")
    >>> headline(c)[:60]
    'Under prob:0.9, 1 of 2 members (50.0%, 95% CP [1.3%, 98.7%])'
    """
    return cmp.statement


def acr_figure(cmp: ACRComparison) -> Figure:
    """(a) extraction rates (ACR > 1) with Clopper-Pearson bars and the floor (m+1)/(N+1); (b) the
    share of targets with ACR >= a against a, members and controls, with pointwise bands.

    >>> from memclaim.claims.acr import acr_comparison
    >>> c = acr_comparison(member_extracted=[True, False], control_extracted=[True, False], member_acr=[1.5, None],
    ...                    control_acr=[1.2, None], criterion="prob:0.9")
    >>> len(acr_figure(c).axes)
    2
    """
    b = cmp.population.primary_test.binary_rates
    with style.style():
        fig, axes = style.figure(width=9.6, height=3.5, ncols=2)
        a1, a2 = axes
        vals = [b.member_rate, b.control_rate]
        names = [f"members\n{b.member_count}/{b.n_candidates}", f"controls\n{b.m}/{b.n_controls}"]
        est = [100 * v.estimate for v in vals]
        err = [
            [100 * (v.estimate - v.lower) for v in vals],
            [100 * (v.upper - v.estimate) for v in vals],
        ]
        a1.bar(names, est, yerr=err, capsize=6, color=[PALETTE["member"], PALETTE["control"]])
        a1.axhline(
            100 * b.alpha_n,
            ls="--",
            color=PALETTE["threshold"],
            label=rf"floor $(m+1)/(N+1)$ = {pct(b.alpha_n)}",
        )
        a1.set_ylabel("extracted, ACR > 1 (%)")
        a1.set_title(f"ACR extraction under {cmp.criterion} (95% CP)")
        style.legend(a1)
        xs = [lv.level for lv in cmp.levels]
        xs = xs + [xs[-1] + max(0.1, 0.05 * xs[-1])]  # the last level's step drawn to its right too
        for key, role in (("member", "member"), ("control", "control")):
            ys = [100 * getattr(lv, key).estimate for lv in cmp.levels]
            lo = [100 * getattr(lv, key).lower for lv in cmp.levels]
            hi = [100 * getattr(lv, key).upper for lv in cmp.levels]
            ys, lo, hi = ys + ys[-1:], lo + lo[-1:], hi + hi[-1:]
            a2.step(xs, ys, where="post", color=PALETTE[role], label=f"{role}s")
            a2.fill_between(xs, lo, hi, step="post", color=PALETTE[role], alpha=0.18, lw=0)
        a2.set_xlabel("ACR level a (a = 1: ACR > 1)")
        a2.set_ylabel("targets with ACR >= a (%)")
        a2.set_title("ACR distribution")
        a2.set_ylim(-2, 100)  # a rate of 0 stays visible above the axis
        style.legend(a2)
    return fig


def _flag_rows(cmp: ACRComparison, members: Sequence[dict], controls: Sequence[dict]) -> list:
    rows = []
    for label, side in (("members", members), ("controls", controls)):
        n = len(side)
        count = lambda f, side=side: sum(1 for r in side if f(r))  # noqa: E731
        rows.append(
            (
                label,
                n,
                count(lambda r: r["met"]),
                count(lambda r: r["argmax"]),
                count(lambda r: r["greedy"]),
                count(lambda r: r["prob"]),
                count(lambda r: r["argmax_without_greedy"]),
                count(lambda r: r["near_tie"]),
                count(lambda r: r["leaks"]),
            )
        )
    return rows


def _target_rows(side: str, rows: Sequence[dict]) -> list:
    out = []
    for r in list(rows)[:MAX_ROWS]:
        yes = lambda v: "yes" if v else "no"  # noqa: E731
        out.append(
            (
                side,
                short_id(r["id"]),
                r["target_len"],
                r["prompt_len"],
                "–" if r["acr"] is None else f"{r['acr']:.2f}",
                yes(r["extracted"]),
                yes(r["argmax"]),
                yes(r["greedy"]),
                yes(r["prob"]),
                f"{r['log_q'] / LN10:.2f}",
                f"{r['argmax_margin']:.3g}",
                visible(r["prompt_text"]),
                ", ".join(r["shared_words"]) or "–",
            )
        )
    return out


def _comparison(doc: Doc, cmp: ACRComparison, verdict: Verdict) -> None:
    """The headline and the matched comparison's table (the report's first blocks and the notebook view)."""
    b = cmp.population.primary_test.binary_rates
    t = cmp.population.primary_test
    doc.callout(headline(cmp), "result")
    doc.h2("The matched comparison ([EM] §3, App. A.2)")
    doc.table(
        ["quantity", "value", "meaning"],
        [
            (
                "members extracted (ACR > 1)",
                f"{b.member_count}/{b.n_candidates} = {_iv(b.member_rate)}",
                "Clopper-Pearson",
            ),
            (
                "controls extracted m",
                f"{b.m}/{b.n_controls} = {_iv(b.control_rate)}",
                "Clopper-Pearson",
            ),
            ("member rate - control rate", _diff(cmp.difference), "Newcombe (1998b) method 10"),
            (
                "no signal about memorization",
                "yes" if cmp.no_signal else "no",
                "the difference's interval contains 0 ([EM] §3)",
            ),
            (
                "certified floor alpha_N = (m+1)/(N+1)",
                f"{b.alpha_n_exact} = {pct(b.alpha_n)}",
                "the smallest FPR a claim on this binary score can certify ([EM] D.3)",
            ),
            (
                f"conformal test at alpha = {t.alpha}",
                f"{t.n_claimed} member(s) claimed" if t.claim_possible else "no claim possible",
                t.no_claim_reason or "binary score: claims iff extracted and alpha_N <= alpha",
            ),
            (f"'{verdict.sentence}'", verdict.status, verdict.reason),
        ],
    )


def acr_summary_doc(
    cmp: ACRComparison,
    verdict: Verdict,
    title: str = "Adversarial compression (ACR) under the matched comparison",
) -> Doc:
    """A result's notebook view: the report's headline and its comparison table, nothing else.

    >>> from memclaim.claims.acr import acr_comparison, succeeds_on_both
    >>> c = acr_comparison(member_extracted=[True], control_extracted=[False], member_acr=[1.5], control_acr=[None],
    ...                    criterion="argmax")
    >>> v = succeeds_on_both(members_extracted=1, n_members=1, controls_extracted=0, n_controls=1)
    >>> [blk[0] for blk in acr_summary_doc(c, v).blocks]
    ['callout', 'h2', 'table']
    """
    doc = Doc(title)
    _comparison(doc, cmp, verdict)
    return doc


def build_acr_doc(
    cmp: ACRComparison,
    *,
    members: Sequence[dict],
    controls: Sequence[dict],
    verdict: Verdict,
    title: str = "Adversarial compression (ACR) under the matched comparison",
    controls_description: str | None = None,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
    figures_on: bool = True,
) -> Doc:
    """The ACR report's document (rendered three ways by :func:`acr_report`).

    >>> from memclaim.claims.acr import acr_comparison, succeeds_on_both
    >>> c = acr_comparison(member_extracted=[True], control_extracted=[False], member_acr=[1.5], control_acr=[None],
    ...                    criterion="argmax")
    >>> v = succeeds_on_both(members_extracted=1, n_members=1, controls_extracted=0, n_controls=1)
    >>> d = build_acr_doc(c, members=[], controls=[], verdict=v, figures_on=False)
    >>> [b[0] for b in d.blocks][:3]
    ['callout', 'h2', 'table']
    """
    doc = Doc(title)
    _comparison(doc, cmp, verdict)
    doc.p(ACR_NO_SIGNAL)
    doc.h2("ACR distribution")
    b = cmp.population.primary_test.binary_rates
    doc.table(
        ["ACR level a", "members with ACR >= a", "controls with ACR >= a", "difference (Newcombe)"],
        [
            (
                "> 1" if lv.level == 1.0 else f">= {lv.level:.3g}",
                f"{lv.member_count}/{b.n_candidates} = {_iv(lv.member)}",
                f"{lv.control_count}/{b.n_controls} = {_iv(lv.control)}",
                _diff(lv.difference),
            )
            for lv in cmp.levels
        ],
        caption="Pointwise 95% intervals; a target without a prompt meeting the criterion counts as below "
        "every level.",
    )
    if figures_on:
        doc.figure(
            "(a) Extraction rates with Clopper-Pearson intervals and the floor (m+1)/(N+1); (b) share of "
            "targets with ACR >= a, pointwise bands.",
            acr_figure(cmp),
            name="acr",
        )
    doc.h2("The three success criteria on every optimized prompt ([EM] App. A.2)")
    doc.table(
        [
            "side",
            "targets",
            f"criterion met ({cmp.criterion})",
            "argmax",
            "greedy generate",
            "prob:b",
            "argmax but not greedy",
            "near tie",
            "prompt has target words",
        ],
        _flag_rows(cmp, members, controls),
        caption="Counted on x*, the shortest prompt that met the criterion, or the lowest-loss prompt found.",
    )
    doc.p(ACR_CRITERIA)
    doc.h2("Targets")
    headers = [
        "side",
        "id",
        "|y|",
        "|x*|",
        "ACR",
        "extracted",
        "argmax",
        "greedy",
        "prob:b",
        "log10 q(y|x*)",
        "argmax margin",
        "prompt x*",
        "target words in x*",
    ]
    doc.table(
        headers,
        _target_rows("member", members) + _target_rows("control", controls),
        caption=f"At most {MAX_ROWS} per side; all are in report.json.",
    )
    doc.h2("Controls")
    doc.p(
        controls_description
        or "No description of how the controls were chosen was given. A reader cannot judge "
        "the comparison without it: say where the controls come from, how they were matched to the members "
        "(source, format, length, style) and why they are non-members."
    )
    doc.h2("What this does and does not mean")
    doc.bullets(acr_statements())
    _procedure_section(doc, procedure, inputs)
    return doc


def acr_report(
    cmp: ACRComparison,
    *,
    members: Sequence[dict],
    controls: Sequence[dict],
    verdict: Verdict,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
    controls_description: str | None = None,
    title: str = "Adversarial compression (ACR) under the matched comparison",
    extra_results: dict | None = None,
) -> ReportBundle:
    """The three report files of an ACR comparison, rendered in memory (nothing is written).

    >>> from memclaim.claims.acr import acr_comparison, succeeds_on_both
    >>> c = acr_comparison(member_extracted=[True], control_extracted=[False], member_acr=[1.5], control_acr=[None],
    ...                    criterion="argmax")
    >>> v = succeeds_on_both(members_extracted=1, n_members=1, controls_extracted=0, n_controls=1)
    >>> b = acr_report(c, members=[], controls=[], verdict=v)  # draws the figure  # doctest: +SKIP
    >>> sorted(b.figures)  # doctest: +SKIP
    ['acr.pdf', 'acr.png']
    """
    doc = build_acr_doc(
        cmp,
        members=members,
        controls=controls,
        verdict=verdict,
        title=title,
        controls_description=controls_description,
        procedure=procedure,
        inputs=inputs,
    )
    results = {
        "headline": headline(cmp),
        "controls_description": controls_description,
        "comparison": cmp.to_dict(),
        "verdict": verdict.to_dict(),
        "members": list(members),
        "controls": list(controls),
        **(extra_results or {}),
    }
    return render(
        doc,
        command="acr",
        procedure=procedure,
        inputs=inputs,
        results=results,
        statements=acr_statements(),
    )
