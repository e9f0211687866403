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

import numpy as np

from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, finish, paper_claim, paper_footer

NAME = "naive-vs-calibrated"
TITLE = "naive 'extraction' rules against the calibrated test on the same members and controls ([EM] §4)"
STREAMS: tuple[str, ...] = ()
BUDGET = 100_000
BUDGET_CONFIDENCE = 0.95
#: q >= 1 - (1 - c)^(1/n): generated at least once in n queries with probability c ([EM] §6, Pr = 1 - (1-p)^n)
BUDGET_LOG_Q = math.log(-math.expm1(math.log1p(-BUDGET_CONFIDENCE) / BUDGET))
FIXED = (("q > 1/2 (top-40)", math.log(0.5), "strict"),
         (f"q >= {math.exp(BUDGET_LOG_Q):.3g}: once in {BUDGET:.0e} queries w.p. {BUDGET_CONFIDENCE:.0%} (top-40)",
          BUDGET_LOG_Q, "inclusive"))
ALPHAS = (0.05, 0.01)


def _row(rule: str, kind: str, mem_flags: np.ndarray, ctl_flags: np.ndarray, extra: dict | None = None) -> dict:
    j, n = mem_flags.size, ctl_flags.size
    g, m = int(mem_flags.sum()), int(ctl_flags.sum())
    mr, cr = ev.cp(g, j), ev.cp(m, n)
    return {"rule": rule, "kind": kind, "members": mr, "controls": cr,
            "control_share_of_member_rate": (cr["rate"] / mr["rate"]) if g else None, **(extra or {})}


def rules_at(mem_greedy: np.ndarray, ctl_greedy: np.ndarray, mem_topk: np.ndarray, ctl_topk: np.ndarray) -> list[dict]:
    """Every rule at one suffix length (greedy flags as bool arrays, top-40 scores as natural-log q).

    >>> import numpy as np
    >>> from memclaim.experiments.naive_vs_calibrated import rules_at
    >>> rows = rules_at(np.array([True, True, False]), np.array([True, False, False, False]),
    ...                 np.log([0.9, 0.6, 0.1]), np.log([0.7, 0.2, 0.05, 0.01]))
    >>> [(r["kind"], r["members"]["count"], r["controls"]["count"]) for r in rows]
    [('naive', 2, 1), ('naive', 2, 1), ('naive', 3, 4), ('calibrated', 2, 1), ('calibrated', 0, 0),
     ('calibrated', 0, 0)]
    """
    from fractions import Fraction

    from ..claims.conformal import population_test

    rows = [_row("greedy match", "naive", mem_greedy, ctl_greedy)]
    for rule, lq, how in FIXED:
        f = (lambda x: x > lq) if how == "strict" else (lambda x: x >= lq)
        rows.append(_row(rule, "naive", f(mem_topk), f(ctl_topk), {"log10_threshold": lq / math.log(10)}))
    n = ctl_greedy.size
    m = int(ctl_greedy.sum())
    lm = np.where(mem_greedy, 0.0, -np.inf)
    lc = np.where(ctl_greedy, 0.0, -np.inf)
    if m < n:
        t = population_test(lm, lc, alpha=Fraction(m + 1, n + 1), binary=True)  # [EM] D.3
        rows.append(_row(f"greedy at alpha_N = (m+1)/(N+1) = {m + 1}/{n + 1}", "calibrated",
                         np.asarray(t.claimed), lc > t.threshold if t.threshold is not None else np.zeros(n, bool),
                         {"alpha_n": t.alpha_n, "calibrated_rate": t.calibrated_rate.to_dict(),
                          "population_claim": bool(t.calibrated_rate.lower > 0)}))
    for a in ALPHAS:
        t = population_test(mem_topk, ctl_topk, alpha=a)
        thr = t.threshold
        ctl_above = ctl_topk > thr if thr is not None else np.zeros(n, bool)
        rows.append(_row(f"top-40 at alpha = {a:g} (K = {t.k})", "calibrated", np.asarray(t.claimed),
                         ctl_above, {"alpha": a, "k": t.k, "alpha_n": t.alpha_n, "threshold_log10": t.threshold_log10_prob,
                                     "calibrated_rate": t.calibrated_rate.to_dict(),
                                     "population_claim": bool(t.calibrated_rate.lower > 0),
                                     "in_sample_fpr": t.in_sample_fpr}))
    return rows


def _model_block(entry) -> dict:
    runs = entry["runs"]
    mg = ev.greedy_prefix_flags(ev.load(runs, "members", policy="greedy"))
    cg = ev.greedy_prefix_flags(ev.load(runs, "controls", policy="greedy"))
    out = {"model": entry["model"], "lengths": {}}
    for ell in (ev.SHORT, ev.LONG):
        mk = ev.load(runs, "members", policy="top-k:40", suffix_tokens=ell).logq
        ck = ev.load(runs, "controls", policy="top-k:40", suffix_tokens=ell).logq
        out["lengths"][str(ell)] = rules_at(mg[:, ell - 1], cg[:, ell - 1], mk, ck)
    return out


def _find(rows, prefix):
    return next(r for r in rows if r["rule"].startswith(prefix))


def claims_for(block: dict) -> list[PaperClaim]:
    """The three qualitative claims of [EM] §4 on naive rules, on one model's block (the entries of
    ``run(...)["results"]["models"]``), each held or not by a rule fixed in advance.

    >>> from memclaim.experiments.naive_vs_calibrated import claims_for, run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> [c.held for c in claims_for(res["results"]["models"][0])]  # doctest: +SKIP
    [True, True, True]
    """
    name = block["model"]["name"]
    s, lg = block["lengths"][str(ev.SHORT)], block["lengths"][str(ev.LONG)]
    gs, bs, bl = _find(s, "greedy match"), _find(s, "q >= "), _find(lg, "q >= ")
    share = gs["control_share_of_member_rate"]
    bshare, lshare = bs["control_share_of_member_rate"], bl["control_share_of_member_rate"]
    fmt = lambda v: "undefined (no member flagged)" if v is None else f"{v:.0%}"  # noqa: E731
    return [
        paper_claim(f"{name}: a bare greedy-match rate at the short suffix counts many sequences that cannot be "
                    "memorized (paper: 24% of apparent 10-token extractions)", "[EM] §1, §4, Fig. 3",
                    share is not None and share >= 0.2,
                    criterion="control rate / member rate >= 0.2 for the greedy match at the short length",
                    evidence=f"members {gs['members']['rate']:.1%}, controls {gs['controls']['rate']:.1%}: "
                             f"share {fmt(share)}"),
        paper_claim(f"{name}: a fixed probability threshold set without controls flags controls too at the short "
                    "suffix", "[EM] §4 'Continuous calibration'", bshare is not None and bshare >= 0.2,
                    criterion="control rate / member rate >= 0.2 for the 10^5-query budget rule at the short length",
                    evidence=f"members {bs['members']['rate']:.1%}, controls {bs['controls']['rate']:.1%}: "
                             f"share {fmt(bshare)}"),
        paper_claim(f"{name}: short suffixes overstate: the same fixed threshold flags controls far more often at "
                    "the short suffix than at the long one", "[EM] §4, §7 'Using short candidates risks validity'",
                    bs["controls"]["lower"] > bl["controls"]["upper"],
                    criterion="the budget rule's control rate: 95% CP interval at the short length above the one at "
                              "the long length",
                    evidence=f"controls flagged {bs['controls']['rate']:.1%} at {ev.SHORT} tokens, "
                             f"{bl['controls']['rate']:.1%} at {ev.LONG} (members {bs['members']['rate']:.1%}, "
                             f"{bl['members']['rate']:.1%}; control share {fmt(bshare)}, {fmt(lshare)})"),
    ]


def _plot(blocks, differences, claims):

    with style():
        fig, axes = figure(width=11.0, height=3.6 * len(blocks), nrows=len(blocks), ncols=2)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            for ax, ell in zip(row, (ev.SHORT, ev.LONG)):
                rows = b["lengths"][str(ell)]
                y = np.arange(len(rows))[::-1]
                for off, key, role, lab in ((0.18, "members", "member", "members flagged (KJV)"),
                                            (-0.18, "controls", "control", "controls flagged (new verses)")):
                    est = np.array([r[key]["rate"] for r in rows])
                    err = np.array([[e - r[key]["lower"] for e, r in zip(est, rows)],
                                    [r[key]["upper"] - e for e, r in zip(est, rows)]])
                    ax.barh(y + off, est, height=0.34, color=PALETTE[role], xerr=err, capsize=2,
                            error_kw={"elinewidth": 0.7}, label=lab)
                # room on the right for the M-hat labels: the bars and their intervals end at 60% of the axis
                ax.set_xlim(0.0, 1.65 * max(max(r[k]["upper"] for k in ("members", "controls")) for r in rows))
                for yy, r in zip(y, rows):
                    if r["kind"] == "calibrated":
                        cal = r["calibrated_rate"]
                        ax.text(1.0, yy, rf"$\hat M$ = {cal['estimate']:+.1%} [{cal['lower']:+.1%}]",
                                transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=6.5)
                ax.set_yticks(y, [("(calibrated) " if r["kind"] == "calibrated" else "(naive) ") + r["rule"]
                                  for r in rows], fontsize=6.5)
                ax.set_xlabel("share flagged as extracted (95% CP)")
                ax.set_title(f"{b['model']['short']}: {ell}-token suffix")
                legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


def run(*, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions") -> dict:
    """[EM] §4: naive greedy-match and fixed-threshold 'extractions' vs the calibrated test.

    Writes ``naive-vs-calibrated.json``, ``naive-vs-calibrated.png`` and ``naive-vs-calibrated.pdf`` into
    ``out_dir`` (created) and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what
    ``memclaim reproduce naive-vs-calibrated`` runs.

    >>> from memclaim.experiments.naive_vs_calibrated import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('naive-vs-calibrated', True)
    """
    pops, entries = ev.natural_runs(quick, out_dir)
    blocks = [_model_block(e) for e in entries]
    claims = [c for b in blocks for c in claims_for(b)]
    differences = ev.tier_differences(quick, pops, paper_models="OLMo 2 32B base", paper_text="Wikipedia passages",
                                      paper_n="5,000 each") + [f"lengths: {ev.LENGTH_RULE}"]
    checks = []
    for b in blocks:
        for ell, rows in b["lengths"].items():
            for r in rows:
                if r["kind"] != "calibrated" or "k" not in r:
                    continue
                k, n = r["k"], r["controls"]["n"]
                checks.append(check(f"{b['model']['name']}, {ell} tokens, {r['rule']}: at most K - 1 controls above "
                                    "the calibrated threshold (in-sample FPR <= (K-1)/N <= alpha, [EM] C.1)",
                                    r["controls"]["count"] <= max(0, k - 1) and r["in_sample_fpr"] <= r["alpha"],
                                    f"{r['controls']['count']} of {n} controls above, K = {k}",
                                    false_alarm="0 (an identity)"))
    s = blocks[0]["lengths"][str(ev.SHORT)]
    gs = _find(s, "greedy match")
    share = gs["control_share_of_member_rate"]
    paper = [compare("greedy_false_positive_share_short", "naive/false-positive-share",
                     share if share is not None else float("nan"),
                     note=f"{blocks[0]['model']['name']}: control / member greedy rate at {ev.SHORT} tokens "
                          "(the paper: 10 tokens)")]
    settings = {"populations": pops.describe(), "prefix_tokens": ev.PREFIX_TOKENS, "suffix_tokens": ev.SUFFIX_TOKENS,
                "short": ev.SHORT, "long": ev.LONG, "length_rule": ev.LENGTH_RULE,
                "fixed_thresholds": [{"rule": r, "log10_q": lq / math.log(10), "comparison": how} for r, lq, how in FIXED],
                "budget": BUDGET, "budget_confidence": BUDGET_CONFIDENCE, "alphas": list(ALPHAS), "confidence": 0.95,
                "models": [b["model"] for b in blocks]}
    fig = _plot(blocks, differences, claims)
    return finish(NAME, title=TITLE, reproduces=["[EM] §4 (a generation rate is not a memorization rate)",
                                                  "[EM] §1 (24% of apparent 10-token extractions are false positives)",
                                                  "[EM] §6 (query budgets)"],
                  seed=seed, quick=quick, streams=STREAMS, settings=settings, results={"models": blocks},
                  paper_numbers=paper, checks=checks, figure=fig, out_dir=out_dir, paper_claims=claims,
                  differences=differences,
                  notes=["a naive rule claims every flagged member; the calibrated test's population claim is the "
                         "lower 95% bound of M = G - alpha_N (positive: memorization claimed at that level)",
                         "every number is a deterministic function of the stored scores (the seed is unused)"])
