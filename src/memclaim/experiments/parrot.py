"""`parrot`: [EM] Fig. 1 (right) and App. A.1: an instruction-tuned model given a "Repeat after me"
chat prompt reproduces members and non-members alike, so the matched comparison carries no signal
and the conformal test makes no claim.

SmolLM2-135M-Instruct is given ``Repeat after me: {verse}`` as the user turn of its chat template,
with the assistant's turn opened; the target is the verse as the assistant would write it (the
suffix text without its leading space, tokenized after the rendered prompt: docs/prompts.md, the
template rule of issue 12). Each verse starts a sentence. The score is greedy decoding's exact
match of the whole verse (teacher forced: the greedy flag), a binary success/failure trial, so
each rate is a binomial proportion with a 95% Clopper-Pearson interval ([EM] App. A.1).

Reported: the member and control repeat rates with their intervals, whether they overlap (and the
chance that two such intervals fail to overlap when the rates are equal), Newcombe's interval on
the difference, the conformal test on the binary score (its one operating point alpha_N =
(m+1)/(N+1), and at alpha = 1%, 5%, 10%), the same under the full softmax (a continuous score of
the same pass), and the repeat rate of the first l tokens of the quote for every l.

The paper's model is OLMo 2 32B Instruct (70.1% and 70.6% of 3,000 each); a 135M model repeats
fewer, and the reproduction reports the rate it reaches. Gemma 3 270M is a base model without a chat
template, so this reproduction runs on SmolLM2 only.
"""
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np

from ..models import load_model
from ..report.style import PALETTE, TEXT_WIDTH, figure, legend, style
from ..scoring.prompts import PromptRule
from . import em_verses as ev
from .common import PaperClaim, check, compare, finish, paper_caption, paper_claim

NAME = "parrot"
TITLE = "'Repeat after me': member and control repeat rates under a parrot prompt ([EM] Fig. 1, App. A.1)"
STREAMS: tuple[str, ...] = ()
MODEL = "smollm2"
TEMPLATE = "Repeat after me: {suffix}"
POLICIES = ("greedy", "full")
ALPHAS = (0.01, 0.05, 0.1)
QUICK_EVERY = 5  # quick: 48 + 48 verses (a whole verse costs about 0.45 s here)
FIRST_TOKENS = 10  # the quote's first 10 tokens, reported beside the whole verse


def binary_test(mem: np.ndarray, ctl: np.ndarray) -> dict:
    """The conformal test on greedy match flags: the operating point alpha_N = (m+1)/(N+1) and fixed levels.

    >>> import numpy as np
    >>> from memclaim.experiments.parrot import binary_test
    >>> t = binary_test(np.array([True] * 7 + [False] * 3), np.array([True] * 6 + [False] * 4))
    >>> t["alpha_n_exact"], t["at_alpha_n"]["n_claimed"], [lv["n_claimed"] for lv in t["levels"]]
    ('7/11', 7, [0, 0, 0])
    """
    from ..claims.conformal import population_test

    n, m = ctl.size, int(ctl.sum())
    lm, lc = np.where(mem, 0.0, -np.inf), np.where(ctl, 0.0, -np.inf)
    out = {"m": m, "n_controls": int(n), "alpha_n": (m + 1) / (n + 1), "alpha_n_exact": f"{m + 1}/{n + 1}"}
    if m < n:
        t = population_test(lm, lc, alpha=Fraction(m + 1, n + 1), binary=True)  # [EM] D.3
        out["at_alpha_n"] = {"n_claimed": t.n_claimed, "calibrated_rate": t.calibrated_rate.to_dict()}
    levels = []
    for a in ALPHAS:
        t = population_test(lm, lc, alpha=a, binary=True)
        levels.append({"alpha": a, "k": t.k, "claim_possible": t.claim_possible, "n_claimed": t.n_claimed,
                       "reason": t.no_claim_reason, "calibrated_rate": t.calibrated_rate.to_dict()})
    out["levels"] = levels
    return out


def _block(runs) -> dict:
    from ..claims.conformal import population_test
    from ..claims.intervals import newcombe_independent

    mem = ev.load(runs, "members", policy="greedy")
    ctl = ev.load(runs, "controls", policy="greedy")
    mw, cw = np.asarray(mem.greedy_match), np.asarray(ctl.greedy_match)
    j, n = mw.size, cw.size
    mr, cr = ev.cp(int(mw.sum()), j), ev.cp(int(cw.sum()), n)
    pooled = (mw.sum() + cw.sum()) / (j + n)
    diff = newcombe_independent(int(mw.sum()), j, int(cw.sum()), n)
    mf, cf = ev.greedy_prefix_flags(mem), ev.greedy_prefix_flags(ctl)
    lengths = []
    for ell in range(1, min(mf.shape[1], cf.shape[1]) + 1):
        a, b = ev.cp(int(mf[:, ell - 1].sum()), j), ev.cp(int(cf[:, ell - 1].sum()), n)
        bt = binary_test(mf[:, ell - 1], cf[:, ell - 1])
        lengths.append({"first_tokens": ell, "member": a, "control": b, "overlap": ev.intervals_overlap(a, b),
                        "alpha_n": bt["alpha_n"], "calibrated_lower_at_alpha_n":
                            bt.get("at_alpha_n", {}).get("calibrated_rate", {}).get("lower")})
    full = {}
    for label in ("members", "controls"):
        full[label] = ev.load(runs, label, policy="full").logq
    t = population_test(full["members"], full["controls"], alpha=0.05)
    tl = [np.asarray(x) for x in mem.table.column("target_tokens").to_pylist()]
    tc = [np.asarray(x) for x in ctl.table.column("target_tokens").to_pylist()]
    return {
        "whole_verse": {"member": mr, "control": cr, "overlap": ev.intervals_overlap(mr, cr),
                        "nonoverlap_probability_at_equal_rates": ev.nonoverlap_false_alarm(j, n, float(pooled)),
                        "pooled_rate": float(pooled),
                        "difference_member_minus_control": diff.to_dict(), "test": binary_test(mw, cw)},
        "first_tokens": lengths,
        "full_softmax_test_alpha_0.05": {"k": t.k, "alpha_n": t.alpha_n, "threshold_log10": t.threshold_log10_prob,
                                         "n_claimed": t.n_claimed, "generation_rate": t.generation_rate.to_dict(),
                                         "calibrated_rate": t.calibrated_rate.to_dict(),
                                         "member_median_log10_q": float(np.median(full["members"]) / np.log(10)),
                                         "control_median_log10_q": float(np.median(full["controls"]) / np.log(10))},
        "target_tokens": {"members": {"min": int(min(x.min() for x in tl)), "mean": float(np.mean([x.mean() for x in tl])),
                                      "max": int(max(x.max() for x in tl))},
                          "controls": {"min": int(min(x.min() for x in tc)),
                                       "mean": float(np.mean([x.mean() for x in tc])),
                                       "max": int(max(x.max() for x in tc))}},
        "example_target": {"member": mem.suffix_texts[0].lstrip(), "control": ctl.suffix_texts[0].lstrip()},
    }


def claims_for(b: dict) -> list[PaperClaim]:
    """The four qualitative claims of [EM] Fig. 1 / App. A.1 on the run's block (``run(...)["results"]``),
    each held or not by a rule fixed in advance.

    >>> from memclaim.experiments.parrot import claims_for, run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> [c.held for c in claims_for(res["results"])]  # doctest: +SKIP
    [False, True, True, True]
    """
    w = b["whole_verse"]
    m, c = w["member"], w["control"]
    at = w["test"].get("at_alpha_n", {}).get("calibrated_rate", {})
    lv = {x["alpha"]: x for x in w["test"]["levels"]}
    full = b["full_softmax_test_alpha_0.05"]
    by = {x["first_tokens"]: x for x in b["first_tokens"]}
    lows = [x["calibrated_lower_at_alpha_n"] for x in b["first_tokens"] if x["calibrated_lower_at_alpha_n"] is not None]
    ten = by.get(FIRST_TOKENS)
    return [
        paper_claim("the instruct model follows the parrot prompt: it repeats most members and most controls",
                    "[EM] Fig. 1 right, App. A.1 (70.1% and 70.6%)", m["rate"] >= 0.5 and c["rate"] >= 0.5,
                    criterion="whole-verse repeat rates >= 50% for members and for controls",
                    evidence=f"members {m['count']}/{m['n']} = {m['rate']:.1%}, controls {c['count']}/{c['n']} = "
                             f"{c['rate']:.1%} (a 135M model against the paper's 32B)"),
        paper_claim("member and control rates are statistically indistinguishable", "[EM] App. A.1",
                    w["overlap"], criterion="the 95% Clopper-Pearson intervals overlap",
                    evidence=f"[{m['lower']:.1%}, {m['upper']:.1%}] and [{c['lower']:.1%}, {c['upper']:.1%}]; "
                             f"difference {w['difference_member_minus_control']['estimate']:+.1%} "
                             f"[{w['difference_member_minus_control']['lower']:+.1%}, "
                             f"{w['difference_member_minus_control']['upper']:+.1%}] (Newcombe)"),
        paper_claim("the conformal test makes no memorization claim", "[EM] §3 'Revisiting parrot prompts'",
                    (at.get("lower", 0.0) <= 0.0) and not lv[0.05]["n_claimed"] and full["calibrated_rate"]["lower"] <= 0,
                    criterion="at its one operating point alpha_N = (m+1)/(N+1) the calibrated rate's 95% lower bound "
                              "is <= 0, nothing is claimed at alpha = 5%, and the full-softmax test at alpha = 5% "
                              "has a lower bound <= 0",
                    evidence=f"alpha_N = {w['test']['alpha_n_exact']}: M = {at.get('estimate', float('nan')):+.1%} "
                             f"[{at.get('lower', float('nan')):+.1%}]; alpha = 5%: {lv[0.05]['n_claimed']} claimed; "
                             f"full softmax: M = {full['calibrated_rate']['estimate']:+.1%} "
                             f"[{full['calibrated_rate']['lower']:+.1%}]"),
        paper_claim("the test makes no claim at any length of the quote either", "[EM] §3 (any mechanism that raises "
                    "scores independently of membership raises the threshold)", bool(lows) and max(lows) <= 0,
                    criterion="the calibrated rate's 95% lower bound at alpha_N <= 0 for the first l tokens, every l",
                    evidence=(f"largest lower bound {max(lows):+.1%}; first {FIRST_TOKENS} tokens: members "
                              f"{ten['member']['rate']:.1%}, controls {ten['control']['rate']:.1%} (intervals "
                              f"{'overlap' if ten['overlap'] else 'do not overlap'})") if lows and ten else "no lengths"),
    ]


def _plot(b, differences, claims):

    with style():
        # a paper's text width; the words about the paper go in the caption (parrot.json), not the image
        fig, (a1, a2) = figure(width=TEXT_WIDTH, height=3.2, ncols=2, gridspec_kw={"width_ratios": [1, 1.6]})
        w = b["whole_verse"]
        for x, key, role, lab in ((0, "member", "member", "members (KJV verses)"),
                                  (1, "control", "control", "controls (new verses)")):
            r = w[key]
            a1.bar([x], [r["rate"]], width=0.6, color=PALETTE[role], label=f"{lab}: {r['count']}/{r['n']}",
                   yerr=[[r["rate"] - r["lower"]], [r["upper"] - r["rate"]]], capsize=4)
        a1.axhline(w["test"]["alpha_n"], color=PALETTE["threshold"], ls="--", lw=1.2,
                   label=rf"certified floor $\alpha_N$ = {w['test']['alpha_n_exact']}")
        a1.set_ylim(0, 1.45 * max(w["member"]["upper"], w["control"]["upper"], w["test"]["alpha_n"]))
        a1.set_xticks([0, 1], ["members", "controls"])
        a1.set_ylabel("share repeated verbatim (greedy, 95% CP)")
        a1.set_title("SmolLM2-135M-Instruct: whole verse")
        legend(a1)
        ells = [x["first_tokens"] for x in b["first_tokens"]]
        for key, role, lab in (("member", "member", "members"), ("control", "control", "controls")):
            a2.plot(ells, [x[key]["rate"] for x in b["first_tokens"]], "-", color=PALETTE[role], label=lab)
            a2.fill_between(ells, [x[key]["lower"] for x in b["first_tokens"]],
                            [x[key]["upper"] for x in b["first_tokens"]], color=PALETTE[role], alpha=0.18, lw=0)
        a2.plot(ells, [x["alpha_n"] for x in b["first_tokens"]], "--", color=PALETTE["threshold"],
                label=r"$\alpha_N=(m+1)/(N+1)$")
        a2.axvline(FIRST_TOKENS, color=PALETTE["black"], lw=0.6, ls=":")
        a2.set_xlabel("first l tokens of the quote (tokens)")
        a2.set_ylabel("share repeated verbatim")
        a2.set_title("repeat rate of the quote's first l tokens")
        legend(a2)
    return fig


def run(*, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions") -> dict:
    """[EM] Fig. 1, App. A.1: 'Repeat after me' on an instruct model; member and control rates, no claim.

    Writes ``parrot.json``, ``parrot.png`` and ``parrot.pdf`` into ``out_dir`` (created) and returns the
    JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce parrot`` runs.

    >>> from memclaim.experiments.parrot import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('parrot', True)
    """
    pops = ev.populations(quick, every=QUICK_EVERY if quick else None)
    model = load_model(MODEL)
    rule = PromptRule(templates=(TEMPLATE,), chat=True)
    runs = ev.score_populations(model, pops, what="em-parrot", policies=POLICIES, prefix_tokens=None,
                                suffix_tokens=None, prompt_rule=rule, out_dir=out_dir, records="quote")
    b = _block(runs)
    b["model"] = ev.model_info(model)
    claims = claims_for(b)
    differences = [f"model {ev.MODEL_WORDS[MODEL]} (paper: OLMo 2 32B Instruct)",
                   "text: whole King James verses against newly written KJV-style verses (paper: 3,000 training and "
                   "3,000 non-training sequences)",
                   f"N = {len(pops.members)} members, {len(pops.controls)} controls (paper: 3,000 each)"]
    w = b["whole_verse"]
    fl = b["first_tokens"]
    checks = [
        check("at alpha = alpha_N the binary conformal test claims exactly the repeated members ([EM] D.3)",
              w["test"].get("at_alpha_n", {}).get("n_claimed", w["member"]["count"]) == w["member"]["count"],
              f"{w['member']['count']} repeated, {w['test'].get('at_alpha_n', {}).get('n_claimed')} claimed",
              false_alarm="0 (an identity)"),
        check("a repeat of the first l tokens implies a repeat of the first l - 1 (per-token greedy flags)",
              all(fl[i + 1]["member"]["count"] <= fl[i]["member"]["count"]
                  and fl[i + 1]["control"]["count"] <= fl[i]["control"]["count"] for i in range(len(fl) - 1)),
              f"lengths 1..{len(fl)}", false_alarm="0 (an identity)"),
    ]
    paper = [compare("member_rate", "parrot/member-rate", w["member"]["rate"],
                     note=f"SmolLM2-135M-Instruct, {w['member']['n']} KJV verses, whole verse, greedy"),
             compare("control_rate", "parrot/control-rate", w["control"]["rate"],
                     note=f"SmolLM2-135M-Instruct, {w['control']['n']} new verses, whole verse, greedy")]
    settings = {"populations": pops.describe(), "model": b["model"], "prompt_template": TEMPLATE, "chat_template": True,
                "prompt_rule": rule.to_dict(), "target": "the whole verse, without its leading space, tokenized after "
                "the rendered chat prompt (docs/prompts.md)", "policies": list(POLICIES), "alphas": list(ALPHAS),
                "confidence": 0.95, "first_tokens": FIRST_TOKENS}
    fig = _plot(b, differences, claims)
    return finish(NAME, title=TITLE, reproduces=["[EM] Fig. 1 right", "[EM] App. A.1",
                                                  "[EM] §3 'Revisiting parrot prompts'"],
                  seed=seed, quick=quick, streams=STREAMS, settings=settings, results=b, paper_numbers=paper,
                  checks=checks, figure=fig, out_dir=out_dir, paper_claims=claims, differences=differences,
                  caption=paper_caption(differences=differences, claims=claims),
                  notes=["each verse is one success/failure trial (teacher-forced greedy match of the whole verse), so "
                         "each rate is a binomial proportion with a 95% Clopper-Pearson interval ([EM] App. A.1)",
                         f"'intervals overlap' as a test of equal rates fails with probability "
                         f"{w['nonoverlap_probability_at_equal_rates']:.2%} at the pooled rate "
                         f"{w['pooled_rate']:.1%} (computed exactly)",
                         "every number is a deterministic function of the stored scores (the seed is unused)"])
