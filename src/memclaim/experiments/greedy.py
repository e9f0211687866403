"""`greedy`: [EM] Fig. 3 (and Fig. 11): greedy (discoverable) extraction is a binary score, so the
matched comparison has one operating point per suffix length.

Members (KJV verses) and matched controls (newly written KJV-style verses) are scored by teacher
forcing from a 16-token natural prefix; the greedy flag of the first l suffix tokens is the binary
score of the l-token suffix ([EM] §4). For each length:

- member rate G = (members reproduced) / J and control rate m / N, each with a 95% Clopper-Pearson
  interval ([EM] D.1, Fig. 3 bars);
- the certified floor alpha_N = (m + 1)/(N + 1) ([EM] D.3; the dashed line of Fig. 3): a reproduced
  candidate can be claimed only at alpha >= alpha_N, because m controls are reproduced too;
- the floor's share of the member rate, alpha_N / G (the paper's 1.84/7.54 = 24% at 10 tokens);
- G - m/N with Newcombe's independent-proportions interval ([EM] Fig. 11(b), D.1).

The paper contrasts 10- and 50-token suffixes after a 50-token prefix; here every length 1..16
after a 16-token prefix, with 3 and 16 tokens as the contrast (em_verses.LENGTH_RULE).
"""
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np

from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, finish, paper_claim, paper_footer

NAME = "greedy"
TITLE = "greedy (binary) scores: member rate, control rate and the floor alpha_N = (m+1)/(N+1) ([EM] Fig. 3)"
STREAMS: tuple[str, ...] = ()  # no random draws: every number is a deterministic function of the scores


def length_rows(mem_flags: np.ndarray, ctl_flags: np.ndarray) -> list[dict]:
    """One row per suffix length l = 1..L from [W, L] greedy prefix flags ([EM] Fig. 3, Fig. 11).

    >>> import numpy as np
    >>> from memclaim.experiments.greedy import length_rows
    >>> mem = np.arange(3) < np.array([[3], [3], [2], [1]])  # members matching 3, 3, 2, 1 greedy tokens
    >>> rows = length_rows(mem, np.arange(3) < np.array([[1], [0], [0], [0], [0]]))
    >>> [(r["suffix_tokens"], r["member"]["count"], r["control"]["count"], r["alpha_n_exact"]) for r in rows]
    [(1, 4, 1, '2/6'), (2, 3, 0, '1/6'), (3, 2, 0, '1/6')]
    """
    from ..claims.conformal import population_test
    from ..claims.intervals import newcombe_independent

    j, n = mem_flags.shape[0], ctl_flags.shape[0]
    rows = []
    for ell in range(1, min(mem_flags.shape[1], ctl_flags.shape[1]) + 1):
        g, m = int(mem_flags[:, ell - 1].sum()), int(ctl_flags[:, ell - 1].sum())
        # the binary score in log space: 0 (reproduced) or -inf; the test's own binary rates
        lm = np.where(mem_flags[:, ell - 1], 0.0, -np.inf)
        lc = np.where(ctl_flags[:, ell - 1], 0.0, -np.inf)
        alpha_n = (m + 1) / (n + 1)  # [EM] D.3
        # the test at alpha = alpha_N exactly (a Fraction: K = m + 1, the first level that can claim)
        t = population_test(lm, lc, alpha=Fraction(m + 1, n + 1), binary=True) if m < n else None
        diff = newcombe_independent(g, j, m, n)
        rows.append({
            "suffix_tokens": ell, "member": ev.cp(g, j), "control": ev.cp(m, n),
            "alpha_n": alpha_n, "alpha_n_exact": f"{m + 1}/{n + 1}",
            "floor_share_of_member_rate": (alpha_n / (g / j)) if g else None,
            "difference_member_minus_control": {"estimate": diff.estimate, "lower": diff.lower, "upper": diff.upper,
                                                "method": diff.method},
            "calibrated_rate_at_floor": None if t is None else {
                "estimate": t.calibrated_rate.estimate, "lower": t.calibrated_rate.lower,
                "upper": t.calibrated_rate.upper},
            "claimed_at_floor": None if t is None else int(t.n_claimed),
        })
    return rows


def _model_block(entry) -> dict:
    runs = entry["runs"]
    mem = ev.load(runs, "members", policy="greedy")
    ctl = ev.load(runs, "controls", policy="greedy")
    mf, cf = ev.greedy_prefix_flags(mem), ev.greedy_prefix_flags(ctl)
    whole = (np.asarray(mem.greedy_match), np.asarray(ctl.greedy_match))
    rows = length_rows(mf, cf)
    by = {r["suffix_tokens"]: r for r in rows}
    return {"model": entry["model"], "lengths": rows, "short": by[ev.SHORT], "long": by[ev.LONG],
            "whole_suffix_flag_equals_last_prefix_flag": bool(np.array_equal(whole[0], mf[:, -1])
                                                              and np.array_equal(whole[1], cf[:, -1])),
            "monotone_in_length": bool(np.all(mf[:, 1:] <= mf[:, :-1]) and np.all(cf[:, 1:] <= cf[:, :-1]))}


def claims_for(block: dict, name: str) -> list[PaperClaim]:
    """The four qualitative claims of [EM] §4 / Fig. 3 on one model's block (its ``"short"`` and
    ``"long"`` rows of :func:`length_rows`), each held or not by a rule fixed in advance.

    >>> import numpy as np
    >>> from memclaim.experiments.greedy import claims_for, length_rows
    >>> mem = np.arange(3) < np.array([[3], [3], [2], [1]])  # members matching 3, 3, 2, 1 greedy tokens
    >>> rows = length_rows(mem, np.arange(3) < np.array([[1], [0], [0], [0], [0]]))
    >>> [c.held for c in claims_for({"short": rows[0], "long": rows[-1]}, "toy")]
    [False, True, True, False]
    """
    s, lg = block["short"], block["long"]
    share = s["floor_share_of_member_rate"]
    return [
        paper_claim(f"{name}: at the short suffix members and controls are both reproduced far more often than at the "
                    "long suffix", "[EM] §4, Fig. 3",
                    s["member"]["lower"] > lg["member"]["upper"] and s["control"]["lower"] > lg["control"]["upper"],
                    criterion="the 95% CP intervals at the short length lie above those at the long length, for "
                              "members and for controls",
                    evidence=f"members {s['member']['rate']:.1%} vs {lg['member']['rate']:.1%}, controls "
                             f"{s['control']['rate']:.1%} vs {lg['control']['rate']:.1%} at {ev.SHORT} vs {ev.LONG} "
                             "tokens"),
        paper_claim(f"{name}: a short verbatim match is not a specific membership signal: the control floor is a "
                    "large share of the member rate (paper: 1.84/7.54 = 24%)", "[EM] §4, Fig. 3",
                    share is not None and share >= 0.2,
                    criterion="alpha_N / G >= 0.2 at the short length (the paper's 'roughly one quarter', rounded "
                              "down)",
                    evidence=(f"alpha_N = {s['alpha_n']:.2%} against G = {s['member']['rate']:.2%}: share "
                              f"{share:.0%}" if share is not None else "no member reproduced at the short length")),
        paper_claim(f"{name}: at the long suffix the floor is close to zero (at most one control reproduced)",
                    "[EM] §4, Fig. 3", lg["control"]["count"] <= 1,
                    criterion="m <= 1 at the long length (the paper's floor comes from a single false positive)",
                    evidence=f"m = {lg['control']['count']} of {lg['control']['n']}, alpha_N = {lg['alpha_n']:.2%}"),
        paper_claim(f"{name}: at the long suffix members are reproduced above the floor", "[EM] §4, Fig. 3",
                    lg["member"]["lower"] > lg["alpha_n"],
                    criterion="the member rate's 95% CP lower bound exceeds alpha_N at the long length",
                    evidence=f"G = {lg['member']['rate']:.2%} (CP lower {lg['member']['lower']:.2%}) against alpha_N "
                             f"= {lg['alpha_n']:.2%}"),
    ]


def _plot(blocks, quick, pops, differences, claims):

    with style():
        fig, axes = figure(width=9.0, height=3.3 * len(blocks), nrows=len(blocks), ncols=2)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            ax = row[0]
            xs = np.arange(2)
            for off, key, role, lab in ((-0.18, "member", "member", "members (KJV)"),
                                        (0.18, "control", "control", "controls (new verses)")):
                vals = [b["short"][key], b["long"][key]]
                est = np.array([v["rate"] for v in vals])
                err = np.array([[e - v["lower"] for e, v in zip(est, vals)], [v["upper"] - e for e, v in zip(est, vals)]])
                ax.bar(xs + off, est, width=0.34, color=PALETTE[role], label=lab, yerr=err, capsize=3,
                       error_kw={"elinewidth": 0.8})
            for x, r in zip(xs, (b["short"], b["long"])):
                ax.hlines(r["alpha_n"], x - 0.4, x + 0.4, colors=PALETTE["threshold"], linestyles="--", lw=1.2,
                          label=r"certified floor $\alpha_N=(m+1)/(N+1)$" if x == 0 else None)
            ax.set_xticks(xs, [f"{ev.SHORT}-token suffix", f"{ev.LONG}-token suffix"])
            ax.set_ylabel("share reproduced by greedy decoding")
            ax.set_title(f"{b['model']['short']}: greedy generation (95% CP)")
            legend(ax)
            ax = row[1]
            ells = [r["suffix_tokens"] for r in b["lengths"]]
            for key, role, lab in (("member", "member", "members"), ("control", "control", "controls")):
                est = [r[key]["rate"] for r in b["lengths"]]
                ax.plot(ells, est, "o-", ms=3, color=PALETTE[role], label=lab)
                ax.fill_between(ells, [r[key]["lower"] for r in b["lengths"]], [r[key]["upper"] for r in b["lengths"]],
                                color=PALETTE[role], alpha=0.18, lw=0)
            ax.plot(ells, [r["alpha_n"] for r in b["lengths"]], "--", color=PALETTE["threshold"],
                    label=r"$\alpha_N$")
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_xlabel("suffix length (tokens)")
            ax.set_ylabel("share reproduced (symlog)")
            ax.set_title("every suffix length from one pass ([EM] Fig. 11(a))")
            legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


def run(*, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions") -> dict:
    """[EM] Fig. 3: greedy binary scores at a short and a long suffix; floor alpha_N = (m+1)/(N+1).

    Writes ``greedy.json``, ``greedy.png`` and ``greedy.pdf`` into ``out_dir`` (created) and returns the
    JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce greedy`` runs.

    >>> from memclaim.experiments.greedy import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('greedy', True)
    """
    pops, entries = ev.natural_runs(quick, out_dir)
    blocks = [_model_block(e) for e in entries]
    claims = [c for b in blocks for c in claims_for(b, b["model"]["name"])]
    differences = ev.tier_differences(quick, pops, paper_models="OLMo 2 32B base", paper_text="Wikipedia passages, "
                                      "2021-2023 entries against 2024 entries", paper_n="5,000 each") + [
        f"lengths: {ev.LENGTH_RULE}"]
    checks = []
    for b in blocks:
        checks.append(check(f"{b['model']['name']}: the greedy flag of l tokens implies the flag of l - 1 tokens, and "
                            "the engine's whole-suffix greedy flag is the flag at the last length",
                            b["monotone_in_length"] and b["whole_suffix_flag_equals_last_prefix_flag"],
                            "monotone in length: " + str(b["monotone_in_length"]) + "; whole-suffix flag equal: "
                            + str(b["whole_suffix_flag_equals_last_prefix_flag"]), false_alarm="0 (an identity)"))
        checks.append(check(f"{b['model']['name']}: at alpha = alpha_N the binary conformal test claims exactly the "
                            "reproduced members, with M = G - alpha_N ([EM] D.3)",
                            all(r["claimed_at_floor"] in (None, r["member"]["count"]) for r in b["lengths"]),
                            "claimed = reproduced at every length", false_alarm="0 (an identity)"))
    first = blocks[0]
    s, lg = first["short"], first["long"]
    note = (f"{first['model']['name']}, {ev.SHORT} vs the paper's 10 tokens and {ev.LONG} vs 50, after a "
            f"{ev.PREFIX_TOKENS}-token prefix (paper: 50)")
    paper = [
        compare("member_short", "greedy/member-short", s["member"]["rate"], note=note),
        compare("floor_short", "greedy/floor-short", s["alpha_n"], note=note),
        compare("floor_share_short", "greedy/floor-share-short",
                s["floor_share_of_member_rate"] if s["floor_share_of_member_rate"] is not None else float("nan"),
                note=note),
        compare("member_long", "greedy/member-long", lg["member"]["rate"], note=note),
        compare("floor_long", "greedy/floor-long", lg["alpha_n"], note=note),
    ]
    settings = {"populations": pops.describe(), "prefix_tokens": ev.PREFIX_TOKENS, "suffix_tokens": ev.SUFFIX_TOKENS,
                "short": ev.SHORT, "long": ev.LONG, "length_rule": ev.LENGTH_RULE, "policy": "greedy",
                "prompt": "natural prefix", "confidence": 0.95, "models": [b["model"] for b in blocks]}
    fig = _plot(blocks, quick, pops, differences, claims)
    return finish(NAME, title=TITLE, reproduces=["[EM] Fig. 3", "[EM] §4 'A generation rate is not a memorization "
                                                  "rate'", "[EM] App. D.3, Fig. 11"],
                  seed=seed, quick=quick, streams=STREAMS, settings=settings, results={"models": blocks},
                  paper_numbers=paper, checks=checks, figure=fig, out_dir=out_dir, paper_claims=claims,
                  differences=differences,
                  notes=["every number is a deterministic function of the stored scores (no random draws; the seed "
                         "is recorded but unused)",
                         "greedy scores are binary: alpha* is not Beta-distributed and no band is drawn ([EM] C.4.4)"])
