"""`naive-vs-calibrated`: [EM] §4's central point, on one set of members and controls: how many
"extractions" a rule without a matched comparison claims, against what the calibrated test claims,
and how many controls (sequences that cannot be memorized) the naive rule flags as well.

The members, controls and teacher-forced pass are those of `greedy` and `alpha-sweep` (em_verses).
At each of the two suffix lengths:

- naive rules (every flagged member counted as an extraction):
  * greedy match (discoverable extraction, [EM] §4, App. H.1);
  * a fixed probability threshold under top-40 decoding, set without controls: q > 1/2 (more likely
    than not in one query) and q >= 1 - 0.05^(1/n) at n = 10^5 (generated at least once in a budget
    of 10^5 queries with probability 95%, [EM] §6);
- calibrated rules (the conformal test, [EM] §3): greedy at its one operating point alpha_N =
  (m + 1)/(N + 1), and top-40 at alpha = 5% and 1%, each with M = G - alpha_N ([EM] Eq. 8).

For each rule: members flagged (G with 95% Clopper-Pearson), controls flagged (in-sample rate with
CP), and the share of the apparent member rate that controls match (control rate / member rate; the
paper's 1.84/7.54 = 24% of apparent 10-token extractions are false positives). For a calibrated rule
the population claim is the lower bound of M: positive means the test claims memorization in the
population at that level.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

from ..claims.conformal import population_test
from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, paper_claim, paper_footer
from .greedy import floor_share_claim
from .skeleton import Reproduction
from .verdicts import fmt_interval, rate, ratio

NAME = "naive-vs-calibrated"
TITLE = "naive 'extraction' rules against the calibrated test on the same members and controls ([EM] §4)"
STREAMS: tuple[str, ...] = ()
BUDGET = 100_000
BUDGET_CONFIDENCE = 0.95
#: q >= 1 - (1 - c)^(1/n): generated at least once in n queries with probability c ([EM] §6, Pr = 1 - (1-p)^n)
BUDGET_LOG_Q = math.log(-math.expm1(math.log1p(-BUDGET_CONFIDENCE) / BUDGET))
FIXED = (
    ("q > 1/2 (top-40)", math.log(0.5), "strict"),
    (
        f"q >= {math.exp(BUDGET_LOG_Q):.3g}: once in {BUDGET:.0e} queries w.p. {BUDGET_CONFIDENCE:.0%} (top-40)",
        BUDGET_LOG_Q,
        "inclusive",
    ),
)
ALPHAS = (0.05, 0.01)


def _row(
    rule: str, kind: str, mem_flags: np.ndarray, ctl_flags: np.ndarray, extra: dict | None = None
) -> dict:
    j, n = mem_flags.size, ctl_flags.size
    g, m = int(mem_flags.sum()), int(ctl_flags.sum())
    mr, cr = ev.cp(g, j), ev.cp(m, n)
    return {
        "rule": rule,
        "kind": kind,
        "members": mr,
        "controls": cr,
        "control_share_of_member_rate": (cr["rate"] / mr["rate"]) if g else None,
        **(extra or {}),
    }


def rules_at(
    mem_greedy: np.ndarray, ctl_greedy: np.ndarray, mem_topk: np.ndarray, ctl_topk: np.ndarray
) -> list[dict]:
    """Every rule at one suffix length (greedy flags as bool arrays, top-40 scores as natural-log q).

    >>> import numpy as np
    >>> from memclaim.experiments.naive_vs_calibrated import rules_at
    >>> rows = rules_at(np.array([True, True, False]), np.array([True, False, False, False]),
    ...                 np.log([0.9, 0.6, 0.1]), np.log([0.7, 0.2, 0.05, 0.01]))
    >>> [(r["kind"], r["members"]["count"], r["controls"]["count"]) for r in rows]
    [('naive', 2, 1), ('naive', 2, 1), ('naive', 3, 4), ('calibrated', 2, 1), ('calibrated', 0, 0),
     ('calibrated', 0, 0)]
    """
    rows = [_row("greedy match", "naive", mem_greedy, ctl_greedy)]
    for rule, lq, how in FIXED:
        f = (lambda x, lq=lq: x > lq) if how == "strict" else (lambda x, lq=lq: x >= lq)
        rows.append(
            _row(rule, "naive", f(mem_topk), f(ctl_topk), {"log10_threshold": lq / math.log(10)})
        )
    n = ctl_greedy.size
    m = int(ctl_greedy.sum())
    lm = np.where(mem_greedy, 0.0, -np.inf)
    lc = np.where(ctl_greedy, 0.0, -np.inf)
    if m < n:
        t = population_test(lm, lc, alpha=Fraction(m + 1, n + 1), binary=True)  # [EM] D.3
        rows.append(
            _row(
                f"greedy at alpha_N = (m+1)/(N+1) = {m + 1}/{n + 1}",
                "calibrated",
                np.asarray(t.claimed),
                lc > t.threshold if t.threshold is not None else np.zeros(n, bool),
                {
                    "alpha_n": t.alpha_n,
                    "calibrated_rate": t.calibrated_rate.to_dict(),
                    "population_claim": bool(t.calibrated_rate.lower > 0),
                },
            )
        )
    for a in ALPHAS:
        t = population_test(mem_topk, ctl_topk, alpha=a)
        thr = t.threshold
        ctl_above = ctl_topk > thr if thr is not None else np.zeros(n, bool)
        rows.append(
            _row(
                f"top-40 at alpha = {a:g} (K = {t.k})",
                "calibrated",
                np.asarray(t.claimed),
                ctl_above,
                {
                    "alpha": a,
                    "k": t.k,
                    "alpha_n": t.alpha_n,
                    "threshold_log10": t.threshold_log10_prob,
                    "calibrated_rate": t.calibrated_rate.to_dict(),
                    "population_claim": bool(t.calibrated_rate.lower > 0),
                    "in_sample_fpr": t.in_sample_fpr,
                },
            )
        )
    return rows


def _model_block(entry) -> dict:
    runs = entry["runs"]
    mg = ev.greedy_prefix_flags(ev.load(runs, "members", policy="greedy"))
    cg = ev.greedy_prefix_flags(ev.load(runs, "controls", policy="greedy"))
    out = {"model": entry["model"], "lengths": {}}
    for ell in (ev.SHORT, ev.LONG):
        mk = ev.load(runs, "members", policy=ev.PAPER_POLICY, suffix_tokens=ell).logq
        ck = ev.load(runs, "controls", policy=ev.PAPER_POLICY, suffix_tokens=ell).logq
        out["lengths"][str(ell)] = rules_at(mg[:, ell - 1], cg[:, ell - 1], mk, ck)
    return out


def _find(rows, prefix):
    return next(r for r in rows if r["rule"].startswith(prefix))


# ---- the paper's sentences on this run (issue 24 item 2): each quoted, each tested as stated
QUOTE_FALSE_POSITIVES = (
    "On Wikipedia, for example, $24\\%$ of apparent $10$-token verbatim extractions from OLMo 2 "
    "are false positives, showing that short-sequence experiments can substantially overstate "
    "memorization (§4)."
)
QUOTE_NOT_EVIDENCE = (
    "Again, we see that a generation probability on its own isn’t evidence of memorization."
)
QUOTE_SHORT = (
    "We see this directly in our experiments: at short candidate lengths, matched non-members clear the "
    "threshold often enough to produce many false positives (§4)."
)
#: "isn't evidence": the controls flagged account for at least a fifth of the apparent rate (Katz's 95% lower bound of
#: control rate / member rate >= 1/5; the paper's greedy share is 24%)
SUBSTANTIAL = 1 / 5
#: "often enough to produce many false positives" at short lengths, against long ones: far more often, at least twice
#: (Katz's 95% lower bound of the ratio short/long >= 2)
FAR_MORE = 2.0


def fixed_threshold_claim(name: str, row: dict, length: int) -> PaperClaim:
    """ "Again, we see that a generation probability on its own isn't evidence of memorization" ([EM] §4),
    tested on the rule that flags a suffix by its probability alone (generated at least once in 10^5
    queries with probability 95%, no controls): at the short suffix the controls it flags account for at
    least a fifth of the members it flags: Katz's 95% lower bound of control rate / member rate >= 1/5.

    >>> from memclaim.experiments.naive_vs_calibrated import fixed_threshold_claim
    >>> from memclaim.experiments.verdicts import rate
    >>> fixed_threshold_claim("x", {"members": rate(63, 120), "controls": rate(70, 180)}, 3).verdict
    'held'
    >>> fixed_threshold_claim("x", {"members": rate(63, 120), "controls": rate(2, 180)}, 3).verdict
    'not held'
    """
    g, j, m, n = (
        row["members"]["count"],
        row["members"]["n"],
        row["controls"]["count"],
        row["controls"]["n"],
    )
    test = (
        f"the 10^5-query budget rule at the short suffix ({length} tokens), a probability threshold set without "
        f"controls: Katz's 95% lower bound of (controls flagged / N) / (members flagged / J) >= {SUBSTANTIAL:.2f} "
        "(at least a fifth of its apparent extractions are matched by sequences that cannot be memorized)"
    )
    nums = {"member_rate": rate(g, j), "control_rate": rate(m, n)}
    claim = f"{name}: a probability threshold set without controls is no evidence of memorization at the short suffix"
    if g == 0:
        return paper_claim(
            "fixed-threshold-not-evidence",
            claim,
            quote=QUOTE_NOT_EVIDENCE,
            where="[EM] §4 'Continuous calibration'",
            test=test,
            held=m > 0,
            numbers=nums,
            evidence=f"no member flagged; {m} of {n} controls flagged",
        )
    r = ratio(m, n, g, j)
    nums["control_share_of_member_rate"] = r
    return paper_claim(
        "fixed-threshold-not-evidence",
        claim,
        quote=QUOTE_NOT_EVIDENCE,
        where="[EM] §4 'Continuous calibration'",
        test=test,
        held=r["lower"] >= SUBSTANTIAL,
        numbers=nums,
        evidence=f"members {g}/{j} = {g / j:.1%}, controls {m}/{n} = {m / n:.1%}: share "
        f"{fmt_interval(r, pct=False)} (Katz 95%)",
    )


def short_overstates_claim(
    name: str, short: dict, long: dict, lengths: tuple[int, int]
) -> PaperClaim:
    """ "[...] at short candidate lengths, matched non-members clear the threshold often enough to produce
    many false positives" ([EM] §7, §4), tested on the same probability threshold at both lengths: it flags
    controls far more often at the short suffix, Katz's 95% lower bound of the control rates' ratio
    short/long >= 2.

    >>> from memclaim.experiments.naive_vs_calibrated import short_overstates_claim
    >>> from memclaim.experiments.verdicts import rate
    >>> short_overstates_claim("x", {"controls": rate(70, 180)}, {"controls": rate(0, 180)}, (3, 16)).verdict
    'held'
    >>> short_overstates_claim("x", {"controls": rate(3, 180)}, {"controls": rate(2, 180)}, (3, 16)).verdict
    'not held'
    """
    (ms, n), (ml, nl) = (
        (short["controls"]["count"], short["controls"]["n"]),
        (long["controls"]["count"], long["controls"]["n"]),
    )
    r = ratio(ms, n, ml, nl)
    test = (
        f"the 10^5-query budget rule's control rate at {lengths[0]} and {lengths[1]} tokens: Katz's 95% lower "
        f"bound of the ratio short/long >= {FAR_MORE:g} (far more false positives at the short length)"
    )
    return paper_claim(
        "short-suffix-overstates",
        f"{name}: at the short suffix non-members clear a probability threshold far more often",
        quote=QUOTE_SHORT,
        where="[EM] §7, §4",
        test=test,
        held=r["lower"] >= FAR_MORE,
        numbers={
            "control_rate_short": rate(ms, n),
            "control_rate_long": rate(ml, nl),
            "ratio_short_over_long": r,
        },
        evidence=f"controls flagged {ms}/{n} = {ms / n:.1%} at {lengths[0]} tokens, {ml}/{nl} = "
        f"{ml / nl:.1%} at {lengths[1]}: ratio {fmt_interval(r, pct=False)} (Katz 95%)",
    )


def claims_for(block: dict) -> list[PaperClaim]:
    """The sentences of [EM] §1, §4 and §7 on naive rules judged on one model's block (the entries of
    ``run(...)["results"]["models"]``), each by a rule fixed before the run.

    >>> import numpy as np
    >>> from memclaim.experiments.naive_vs_calibrated import claims_for, rules_at
    >>> rng = np.random.default_rng(0)
    >>> mq, cq = np.log(rng.uniform(1e-9, 1, 60)), np.log(rng.uniform(1e-9, 1, 80))
    >>> short = rules_at(mq > np.log(.9), cq > np.log(.5), mq, cq)  # greedy: controls reproduced more often
    >>> long = rules_at(mq > np.log(.9), cq > np.log(.99), mq - 40, cq - 60)
    >>> [c.verdict for c in claims_for({"model": {"name": "toy"}, "lengths": {"3": short, "16": long}})]
    ['not held', 'held', 'held']
    """
    name = block["model"]["name"]
    s, lg = block["lengths"][str(ev.SHORT)], block["lengths"][str(ev.LONG)]
    gs, bs, bl = _find(s, "greedy match"), _find(s, "q >= "), _find(lg, "q >= ")
    return [
        floor_share_claim(
            "greedy-false-positive-share",
            f"{name}: roughly a quarter of apparent short-suffix greedy "
            "extractions are false positives",
            g=gs["members"]["count"],
            j=gs["members"]["n"],
            m=gs["controls"]["count"],
            n=gs["controls"]["n"],
            quote=QUOTE_FALSE_POSITIVES,
            where="[EM] §1 Contributions, §4",
            what=f"greedy match at the short suffix ({ev.SHORT} tokens; the paper: 10)",
        ),
        fixed_threshold_claim(name, bs, ev.SHORT),
        short_overstates_claim(name, bs, bl, (ev.SHORT, ev.LONG)),
    ]


def _plot(blocks, differences, claims):

    with style():
        fig, axes = figure(width=11.0, height=3.6 * len(blocks), nrows=len(blocks), ncols=2)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            for ax, ell in zip(row, (ev.SHORT, ev.LONG)):
                rows = b["lengths"][str(ell)]
                y = np.arange(len(rows))[::-1]
                for off, key, role, lab in (
                    (0.18, "members", "member", "members flagged (KJV)"),
                    (-0.18, "controls", "control", "controls flagged (new verses)"),
                ):
                    est = np.array([r[key]["rate"] for r in rows])
                    err = np.array(
                        [
                            [e - r[key]["lower"] for e, r in zip(est, rows)],
                            [r[key]["upper"] - e for e, r in zip(est, rows)],
                        ]
                    )
                    ax.barh(
                        y + off,
                        est,
                        height=0.34,
                        color=PALETTE[role],
                        xerr=err,
                        capsize=2,
                        error_kw={"elinewidth": 0.7},
                        label=lab,
                    )
                # room on the right for the M-hat labels: the bars and their intervals end at 60% of the axis
                ax.set_xlim(
                    0.0,
                    1.65 * max(max(r[k]["upper"] for k in ("members", "controls")) for r in rows),
                )
                for yy, r in zip(y, rows):
                    if r["kind"] == "calibrated":
                        cal = r["calibrated_rate"]
                        ax.text(
                            1.0,
                            yy,
                            rf"$\hat M$ = {cal['estimate']:+.1%} [{cal['lower']:+.1%}]",
                            transform=ax.get_yaxis_transform(),
                            ha="right",
                            va="center",
                            fontsize=6.5,
                        )
                ax.set_yticks(
                    y,
                    [
                        ("(calibrated) " if r["kind"] == "calibrated" else "(naive) ") + r["rule"]
                        for r in rows
                    ],
                    fontsize=6.5,
                )
                ax.set_xlabel("share flagged as extracted (95% CP)")
                ax.set_title(f"{b['model']['short']}: {ell}-token suffix")
                legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


class NaiveVsCalibrated(Reproduction):
    """[EM] §4's naive rules against the calibrated test on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] §4 (a generation rate is not a memorization rate)",
        "[EM] §1 (24% of apparent 10-token extractions are false positives)",
        "[EM] §6 (query budgets)",
    )

    def settings(self) -> dict:
        """The fixed settings; NAME.json records them after the populations and before the models
        (:meth:`recorded_settings`)."""
        return {
            "prefix_tokens": ev.PREFIX_TOKENS,
            "suffix_tokens": ev.SUFFIX_TOKENS,
            "short": ev.SHORT,
            "long": ev.LONG,
            "length_rule": ev.LENGTH_RULE,
            "fixed_thresholds": [
                {"rule": r, "log10_q": lq / math.log(10), "comparison": how} for r, lq, how in FIXED
            ],
            "budget": BUDGET,
            "budget_confidence": BUDGET_CONFIDENCE,
            "alphas": list(ALPHAS),
            "confidence": 0.95,
        }

    def data(self) -> list:
        """The populations and the natural-prefix runs of every model (scored once into the store)."""
        self.pops, entries = ev.natural_runs(self.quick, self.out_dir)
        return entries

    def runs(self, entries: list) -> dict:
        """One block per model: every naive and calibrated rule at the two suffix lengths."""
        return {"models": [_model_block(e) for e in entries]}

    def checks(self, results: dict) -> list:
        checks = []
        for b in results["models"]:
            for ell, rows in b["lengths"].items():
                for r in rows:
                    if r["kind"] != "calibrated" or "k" not in r:
                        continue
                    k, n = r["k"], r["controls"]["n"]
                    checks.append(
                        check(
                            f"{b['model']['name']}, {ell} tokens, {r['rule']}: at most K - 1 controls "
                            "above the calibrated threshold (in-sample FPR <= (K-1)/N <= alpha, [EM] C.1)",
                            r["controls"]["count"] <= max(0, k - 1)
                            and r["in_sample_fpr"] <= r["alpha"],
                            f"{r['controls']['count']} of {n} controls above, K = {k}",
                            false_alarm="0 (an identity)",
                        )
                    )
        return checks

    def claims(self, results: dict) -> list[PaperClaim]:
        return [c for b in results["models"] for c in claims_for(b)]

    def differences(self, results: dict) -> list[str]:
        return ev.tier_differences(
            self.quick,
            self.pops,
            paper_models="OLMo 2 32B base",
            paper_text="Wikipedia passages",
            paper_n="5,000 each",
        ) + [f"lengths: {ev.LENGTH_RULE}"]

    def paper_numbers(self, results: dict) -> list:
        blocks = results["models"]
        gs = _find(blocks[0]["lengths"][str(ev.SHORT)], "greedy match")
        share = gs["control_share_of_member_rate"]
        return [
            compare(
                "greedy_false_positive_share_short",
                "naive/false-positive-share",
                share if share is not None else float("nan"),
                note=f"{blocks[0]['model']['name']}: control / member greedy rate at {ev.SHORT} "
                "tokens (the paper: 10 tokens)",
            )
        ]

    def figure(self, results: dict, *, claims, differences):
        return _plot(results["models"], differences, claims)

    def notes(self, results: dict) -> list[str]:
        return [
            "a naive rule claims every flagged member; the calibrated test's population claim is the "
            "lower 95% bound of M = G - alpha_N (positive: memorization claimed at that level)",
            "every number is a deterministic function of the stored scores (the seed is unused)",
        ]

    def recorded_settings(self, results: dict) -> dict:
        return {
            "populations": self.pops.describe(),
            **self.s,
            "models": [b["model"] for b in results["models"]],
        }


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[EM] §4: naive greedy-match and fixed-threshold 'extractions' vs the calibrated test.

    Writes ``naive-vs-calibrated.json``, ``naive-vs-calibrated.png`` and ``naive-vs-calibrated.pdf`` into
    ``out_dir`` (created) and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what
    ``memclaim reproduce naive-vs-calibrated`` runs.

    >>> from memclaim.experiments.naive_vs_calibrated import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('naive-vs-calibrated', True)
    """
    return NaiveVsCalibrated(quick=quick, seed=seed, out_dir=out_dir).reproduce()
