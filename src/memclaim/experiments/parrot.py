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

from ..claims.conformal import population_test
from ..claims.intervals import newcombe_independent
from ..models import load_model
from ..report.style import PALETTE, TEXT_WIDTH, figure, legend, style
from ..scoring.prompts import PromptRule
from . import em_verses as ev
from .common import PaperClaim, check, compare, paper_caption, paper_claim
from .skeleton import Reproduction
from .verdicts import fmt_interval

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
    n, m = ctl.size, int(ctl.sum())
    lm, lc = np.where(mem, 0.0, -np.inf), np.where(ctl, 0.0, -np.inf)
    out = {
        "m": m,
        "n_controls": int(n),
        "alpha_n": (m + 1) / (n + 1),
        "alpha_n_exact": f"{m + 1}/{n + 1}",
    }
    if m < n:
        t = population_test(lm, lc, alpha=Fraction(m + 1, n + 1), binary=True)  # [EM] D.3
        out["at_alpha_n"] = {
            "n_claimed": t.n_claimed,
            "calibrated_rate": t.calibrated_rate.to_dict(),
        }
    levels = []
    for a in ALPHAS:
        t = population_test(lm, lc, alpha=a, binary=True)
        levels.append(
            {
                "alpha": a,
                "k": t.k,
                "claim_possible": t.claim_possible,
                "n_claimed": t.n_claimed,
                "reason": t.no_claim_reason,
                "calibrated_rate": t.calibrated_rate.to_dict(),
            }
        )
    out["levels"] = levels
    return out


def _block(runs) -> dict:
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
        lengths.append(
            {
                "first_tokens": ell,
                "member": a,
                "control": b,
                "overlap": ev.intervals_overlap(a, b),
                "alpha_n": bt["alpha_n"],
                "calibrated_lower_at_alpha_n": bt.get("at_alpha_n", {})
                .get("calibrated_rate", {})
                .get("lower"),
            }
        )
    full = {}
    for label in ("members", "controls"):
        full[label] = ev.load(runs, label, policy="full").logq
    t = population_test(full["members"], full["controls"], alpha=0.05)
    tl = [np.asarray(x) for x in mem.table.column("target_tokens").to_pylist()]
    tc = [np.asarray(x) for x in ctl.table.column("target_tokens").to_pylist()]
    return {
        "whole_verse": {
            "member": mr,
            "control": cr,
            "overlap": ev.intervals_overlap(mr, cr),
            "nonoverlap_probability_at_equal_rates": ev.nonoverlap_false_alarm(j, n, float(pooled)),
            "pooled_rate": float(pooled),
            "difference_member_minus_control": diff.to_dict(),
            "test": binary_test(mw, cw),
        },
        "first_tokens": lengths,
        "full_softmax_test_alpha_0.05": {
            "k": t.k,
            "alpha_n": t.alpha_n,
            "threshold_log10": t.threshold_log10_prob,
            "n_claimed": t.n_claimed,
            "generation_rate": t.generation_rate.to_dict(),
            "calibrated_rate": t.calibrated_rate.to_dict(),
            "member_median_log10_q": float(np.median(full["members"]) / np.log(10)),
            "control_median_log10_q": float(np.median(full["controls"]) / np.log(10)),
        },
        "target_tokens": {
            "members": {
                "min": int(min(x.min() for x in tl)),
                "mean": float(np.mean([x.mean() for x in tl])),
                "max": int(max(x.max() for x in tl)),
            },
            "controls": {
                "min": int(min(x.min() for x in tc)),
                "mean": float(np.mean([x.mean() for x in tc])),
                "max": int(max(x.max() for x in tc)),
            },
        },
        "example_target": {
            "member": mem.suffix_texts[0].lstrip(),
            "control": ctl.suffix_texts[0].lstrip(),
        },
    }


# ---- the paper's sentences on this run (issue 24 item 2): each quoted, each tested as stated
QUOTE_FOLLOWS = "Capable instruction-tuned models follow “Repeat after me” (“parrot”) instructions."
QUOTE_OVERLAP = "The two intervals overlap, so the member and non-member rates are statistically indistinguishable."
QUOTE_NO_CLAIM = (
    "matched controls score just as high as candidates, the threshold calibrated from them is just as high "
    "(§4), nothing clears the threshold, and so the test makes no memorization claim."
)
QUOTE_ANY_MECHANISM = (
    "Any mechanism that raises scores independently of membership—copying, instruction-following, "
    "predictability, adversarial coaxing—raises the threshold, so the test also handles these cases."
)
#: "follow [...] instructions": repeat most of what they are asked to, members and non-members alike (the paper's
#: 70.1% [68.4, 71.7] and 70.6% [69.0, 72.3])
MOST = 0.5


def follows_claim(member: dict, control: dict) -> PaperClaim:
    """ "Capable instruction-tuned models follow 'Repeat after me' ('parrot') instructions" ([EM] Fig. 1,
    App. A.1), tested as stated: the model repeats most of what it is asked to repeat, the 95%
    Clopper-Pearson lower bounds of the member and the control repeat rates both above 1/2.

    >>> from memclaim.experiments.parrot import follows_claim
    >>> from memclaim.experiments.verdicts import rate
    >>> follows_claim(rate(2103, 3000), rate(2118, 3000)).verdict, follows_claim(rate(10, 48), rate(8, 48)).verdict
    ('held', 'not held')
    """
    return paper_claim(
        "follows-the-prompt",
        "the instruct model follows the parrot prompt, for members and non-members alike",
        quote=QUOTE_FOLLOWS,
        where="[EM] Fig. 1, App. A.1",
        test="the 95% Clopper-Pearson lower bounds of the whole-verse repeat rates of members and of "
        f"controls both exceed {MOST:.0%} (the paper: 70.1% [68.4, 71.7], 70.6% [69.0, 72.3])",
        held=member["lower"] > MOST and control["lower"] > MOST,
        numbers={"member_rate": member, "control_rate": control},
        evidence=f"members {fmt_interval(member)}, controls {fmt_interval(control)} (95% CP)",
    )


def overlap_claim(w: dict) -> PaperClaim:
    """ "The two intervals overlap, so the member and non-member rates are statistically indistinguishable"
    ([EM] App. A.1), tested as the paper does: the two 95% Clopper-Pearson intervals share a point
    (Newcombe's interval for the difference and the chance that such intervals miss each other at equal
    rates are reported beside it).

    >>> from memclaim.experiments.parrot import overlap_claim
    >>> from memclaim.experiments.verdicts import rate
    >>> w = lambda a, b: {"member": rate(a, 48), "control": rate(b, 48),
    ...                   "difference_member_minus_control": {"estimate": 0, "lower": 0, "upper": 0}}
    >>> overlap_claim(w(10, 8)).verdict, overlap_claim(w(40, 5)).verdict
    ('held', 'not held')
    """
    m, c, d = w["member"], w["control"], w["difference_member_minus_control"]
    overlap = m["lower"] <= c["upper"] and c["lower"] <= m["upper"]
    return paper_claim(
        "rates-indistinguishable",
        "member and control repeat rates are statistically indistinguishable",
        quote=QUOTE_OVERLAP,
        where="[EM] App. A.1",
        test="the member and control repeat rates' 95% Clopper-Pearson intervals overlap (the paper's "
        "own test)",
        held=overlap,
        numbers={
            "member_rate": m,
            "control_rate": c,
            "difference_member_minus_control": d,
            "nonoverlap_probability_at_equal_rates": w.get("nonoverlap_probability_at_equal_rates"),
        },
        evidence=f"members {fmt_interval(m)}, controls {fmt_interval(c)}: the intervals "
        f"{'overlap' if overlap else 'do not overlap'}; difference {d['estimate']:+.1%} "
        f"[{d['lower']:+.1%}, {d['upper']:+.1%}] (Newcombe)",
    )


def no_claim_claim(w: dict, full: dict) -> PaperClaim:
    """ "[...] nothing clears the threshold, and so the test makes no memorization claim" ([EM] §3), tested
    as a population claim: at the binary test's one operating point alpha_N = (m+1)/(N+1) the calibrated
    rate's 95% lower bound is <= 0, at alpha = 5% (below alpha_N) no member clears the threshold, and under
    the full softmax (a continuous score of the same pass) at alpha = 5% the lower bound is <= 0.

    >>> from memclaim.experiments.parrot import no_claim_claim
    >>> w = {"test": {"alpha_n_exact": "9/49", "at_alpha_n": {"calibrated_rate": {"estimate": 0.02, "lower": -0.08}},
    ...               "levels": [{"alpha": 0.05, "n_claimed": 0}]}}
    >>> full = {"calibrated_rate": {"estimate": 0.02, "lower": -0.03}}
    >>> no_claim_claim(w, full).verdict
    'held'
    >>> no_claim_claim(w, {"calibrated_rate": {"estimate": 0.3, "lower": 0.12}}).verdict
    'not held'
    """
    at = w["test"].get("at_alpha_n", {}).get("calibrated_rate", {})
    lv = {x["alpha"]: x for x in w["test"]["levels"]}
    held = (
        at.get("lower", 0.0) <= 0.0
        and not lv[0.05]["n_claimed"]
        and full["calibrated_rate"]["lower"] <= 0
    )
    return paper_claim(
        "no-claim",
        "the conformal test makes no memorization claim",
        quote=QUOTE_NO_CLAIM,
        where="[EM] §3 'Revisiting parrot prompts'",
        test="no population claim: the calibrated rate's 95% lower bound is <= 0 at the binary test's "
        "operating point alpha_N = (m+1)/(N+1) and under the full softmax at alpha = 5%, and no "
        "member clears the binary threshold at alpha = 5%",
        held=held,
        numbers={
            "calibrated_rate_at_alpha_n": at,
            "claimed_at_alpha_5pct": lv[0.05]["n_claimed"],
            "full_softmax_calibrated_rate_at_alpha_5pct": full["calibrated_rate"],
        },
        evidence=f"alpha_N = {w['test']['alpha_n_exact']}: M = {at.get('estimate', float('nan')):+.1%} "
        f"(lower {at.get('lower', float('nan')):+.1%}); alpha = 5%: {lv[0.05]['n_claimed']} "
        f"claimed; full softmax: M = {full['calibrated_rate']['estimate']:+.1%} (lower "
        f"{full['calibrated_rate']['lower']:+.1%})",
    )


def any_length_claim(first_tokens: list[dict]) -> PaperClaim:
    """ "Any mechanism that raises scores independently of membership [...] raises the threshold, so the
    test also handles these cases" ([EM] §3), tested on every prefix of the quote: for the first l tokens,
    every l, the calibrated rate's 95% lower bound at alpha_N = (m+1)/(N+1) is <= 0 (no claim).

    >>> from memclaim.experiments.parrot import any_length_claim
    >>> rows = [{"first_tokens": l, "calibrated_lower_at_alpha_n": -0.05} for l in range(1, 4)]
    >>> any_length_claim(rows).verdict, any_length_claim(rows + [{"first_tokens": 4,
    ...                                                             "calibrated_lower_at_alpha_n": 0.02}]).verdict
    ('held', 'not held')
    """
    lows = [
        (x["first_tokens"], x["calibrated_lower_at_alpha_n"])
        for x in first_tokens
        if x["calibrated_lower_at_alpha_n"] is not None
    ]
    worst = max(lows, key=lambda t: t[1]) if lows else None
    return paper_claim(
        "no-claim-at-any-length",
        "the test makes no claim at any length of the quote either",
        quote=QUOTE_ANY_MECHANISM,
        where="[EM] §3 'Revisiting parrot prompts'",
        test="for the first l tokens of the quote, every l: the calibrated rate's 95% lower bound at "
        "alpha_N = (m+1)/(N+1) is <= 0",
        held=bool(lows) and worst[1] <= 0,
        numbers={
            "lengths": len(lows),
            "largest_lower_bound": None if worst is None else worst[1],
            "at_length": None if worst is None else worst[0],
        },
        evidence=(
            f"{len(lows)} lengths; largest lower bound {worst[1]:+.1%} (first {worst[0]} tokens)"
            if worst
            else "no length with a testable operating point"
        ),
    )


def claims_for(b: dict) -> list[PaperClaim]:
    """The sentences of [EM] Fig. 1, App. A.1 and §3 judged on the run's block (``run(...)["results"]``),
    each by a rule fixed before the run (the rule functions above).

    >>> from memclaim.experiments.parrot import claims_for, run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> [c.verdict for c in claims_for(res["results"])]  # doctest: +SKIP
    ['not held', 'held', 'held', 'held']
    """
    w = b["whole_verse"]
    return [
        follows_claim(w["member"], w["control"]),
        overlap_claim(w),
        no_claim_claim(w, b["full_softmax_test_alpha_0.05"]),
        any_length_claim(b["first_tokens"]),
    ]


def _plot(b, differences, claims):

    with style():
        # a paper's text width; the words about the paper go in the caption (parrot.json), not the image
        fig, (a1, a2) = figure(
            width=TEXT_WIDTH, height=3.2, ncols=2, gridspec_kw={"width_ratios": [1, 1.6]}
        )
        w = b["whole_verse"]
        for x, key, role, lab in (
            (0, "member", "member", "members (KJV verses)"),
            (1, "control", "control", "controls (new verses)"),
        ):
            r = w[key]
            a1.bar(
                [x],
                [r["rate"]],
                width=0.6,
                color=PALETTE[role],
                label=f"{lab}: {r['count']}/{r['n']}",
                yerr=[[r["rate"] - r["lower"]], [r["upper"] - r["rate"]]],
                capsize=4,
            )
        a1.axhline(
            w["test"]["alpha_n"],
            color=PALETTE["threshold"],
            ls="--",
            lw=1.2,
            label=rf"certified floor $\alpha_N$ = {w['test']['alpha_n_exact']}",
        )
        a1.set_ylim(
            0, 1.45 * max(w["member"]["upper"], w["control"]["upper"], w["test"]["alpha_n"])
        )
        a1.set_xticks([0, 1], ["members", "controls"])
        a1.set_ylabel("share repeated verbatim (greedy, 95% CP)")
        a1.set_title("SmolLM2-135M-Instruct: whole verse")
        legend(a1)
        ells = [x["first_tokens"] for x in b["first_tokens"]]
        for key, role, lab in (("member", "member", "members"), ("control", "control", "controls")):
            a2.plot(
                ells,
                [x[key]["rate"] for x in b["first_tokens"]],
                "-",
                color=PALETTE[role],
                label=lab,
            )
            a2.fill_between(
                ells,
                [x[key]["lower"] for x in b["first_tokens"]],
                [x[key]["upper"] for x in b["first_tokens"]],
                color=PALETTE[role],
                alpha=0.18,
                lw=0,
            )
        a2.plot(
            ells,
            [x["alpha_n"] for x in b["first_tokens"]],
            "--",
            color=PALETTE["threshold"],
            label=r"$\alpha_N=(m+1)/(N+1)$",
        )
        a2.axvline(FIRST_TOKENS, color=PALETTE["black"], lw=0.6, ls=":")
        a2.set_xlabel("first l tokens of the quote (tokens)")
        a2.set_ylabel("share repeated verbatim")
        a2.set_title("repeat rate of the quote's first l tokens")
        legend(a2)
    return fig


class Parrot(Reproduction):
    """[EM] Fig. 1 (right) and App. A.1's parrot prompt on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = ("[EM] Fig. 1 right", "[EM] App. A.1", "[EM] §3 'Revisiting parrot prompts'")

    def settings(self) -> dict:
        """The fixed settings; NAME.json records them after the populations and the model
        (:meth:`recorded_settings`)."""
        return {
            "prompt_template": TEMPLATE,
            "chat_template": True,
            "prompt_rule": self.rule.to_dict(),
            "target": "the whole verse, without its leading space, tokenized after the rendered chat prompt "
            "(docs/prompts.md)",
            "policies": list(POLICIES),
            "alphas": list(ALPHAS),
            "confidence": 0.95,
            "first_tokens": FIRST_TOKENS,
        }

    @property
    def rule(self) -> PromptRule:
        return PromptRule(templates=(TEMPLATE,), chat=True)

    def data(self) -> dict:
        """The member and control verses (every QUICK_EVERY-th in the quick run) and the instruct model."""
        self.pops = ev.populations(self.quick, every=QUICK_EVERY if self.quick else None)
        return {"pops": self.pops, "model": load_model(MODEL)}

    def runs(self, d: dict) -> dict:
        """Score both populations under the parrot prompt; the whole-verse and first-tokens block."""
        model = d["model"]
        runs = ev.score_populations(
            model,
            d["pops"],
            what="em-parrot",
            policies=POLICIES,
            prefix_tokens=None,
            suffix_tokens=None,
            prompt_rule=self.rule,
            out_dir=self.out_dir,
            records="quote",
        )
        b = _block(runs)
        b["model"] = ev.model_info(model)
        return b

    def checks(self, b: dict) -> list:
        w, fl = b["whole_verse"], b["first_tokens"]
        return [
            check(
                "at alpha = alpha_N the binary conformal test claims exactly the repeated members ([EM] D.3)",
                w["test"].get("at_alpha_n", {}).get("n_claimed", w["member"]["count"])
                == w["member"]["count"],
                f"{w['member']['count']} repeated, {w['test'].get('at_alpha_n', {}).get('n_claimed')} claimed",
                false_alarm="0 (an identity)",
            ),
            check(
                "a repeat of the first l tokens implies a repeat of the first l - 1 (per-token greedy flags)",
                all(
                    fl[i + 1]["member"]["count"] <= fl[i]["member"]["count"]
                    and fl[i + 1]["control"]["count"] <= fl[i]["control"]["count"]
                    for i in range(len(fl) - 1)
                ),
                f"lengths 1..{len(fl)}",
                false_alarm="0 (an identity)",
            ),
        ]

    def claims(self, b: dict) -> list[PaperClaim]:
        return claims_for(b)

    def differences(self, b: dict) -> list[str]:
        pops = self.pops
        return [
            f"model {ev.MODEL_WORDS[MODEL]} (paper: OLMo 2 32B Instruct)",
            "text: whole King James verses against newly written KJV-style verses (paper: 3,000 training and "
            "3,000 non-training sequences)",
            f"N = {len(pops.members)} members, {len(pops.controls)} controls (paper: 3,000 each)",
        ]

    def paper_numbers(self, b: dict) -> list:
        w = b["whole_verse"]
        return [
            compare(
                "member_rate",
                "parrot/member-rate",
                w["member"]["rate"],
                note=f"SmolLM2-135M-Instruct, {w['member']['n']} KJV verses, whole verse, greedy",
            ),
            compare(
                "control_rate",
                "parrot/control-rate",
                w["control"]["rate"],
                note=f"SmolLM2-135M-Instruct, {w['control']['n']} new verses, whole verse, greedy",
            ),
        ]

    def figure(self, b: dict, *, claims, differences):
        return _plot(b, differences, claims)

    def notes(self, b: dict) -> list[str]:
        w = b["whole_verse"]
        return [
            "each verse is one success/failure trial (teacher-forced greedy match of the whole verse), so "
            "each rate is a binomial proportion with a 95% Clopper-Pearson interval ([EM] App. A.1)",
            f"'intervals overlap' as a test of equal rates fails with probability "
            f"{w['nonoverlap_probability_at_equal_rates']:.2%} at the pooled rate "
            f"{w['pooled_rate']:.1%} (computed exactly)",
            "every number is a deterministic function of the stored scores (the seed is unused)",
        ]

    def recorded_settings(self, b: dict) -> dict:
        return {"populations": self.pops.describe(), "model": b["model"], **self.s}

    def caption(self, claims, differences) -> str:
        return paper_caption(differences=differences, claims=claims)


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[EM] Fig. 1, App. A.1: 'Repeat after me' on an instruct model; member and control rates, no claim.

    Writes ``parrot.json``, ``parrot.png`` and ``parrot.pdf`` into ``out_dir`` (created) and returns the
    JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce parrot`` runs.

    >>> from memclaim.experiments.parrot import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('parrot', True)
    """
    return Parrot(quick=quick, seed=seed, out_dir=out_dir).reproduce()
