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

from ..claims.conformal import population_test
from ..claims.intervals import newcombe_independent, newcombe_paired
from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, paper_claim, paper_footer
from .skeleton import Reproduction
from .verdicts import fewest_for_upper_bound, fmt_interval, rate, ratio, upper_bound

NAME = "greedy"
TITLE = "greedy (binary) scores: member rate, control rate and the floor alpha_N = (m+1)/(N+1) ([EM] Fig. 3)"
STREAMS: tuple[
    str, ...
] = ()  # no random draws: every number is a deterministic function of the scores


def length_rows(mem_flags: np.ndarray, ctl_flags: np.ndarray) -> list[dict]:
    """One row per suffix length l = 1..L from [W, L] greedy prefix flags ([EM] Fig. 3, Fig. 11).

    >>> import numpy as np
    >>> from memclaim.experiments.greedy import length_rows
    >>> mem = np.arange(3) < np.array([[3], [3], [2], [1]])  # members matching 3, 3, 2, 1 greedy tokens
    >>> rows = length_rows(mem, np.arange(3) < np.array([[1], [0], [0], [0], [0]]))
    >>> [(r["suffix_tokens"], r["member"]["count"], r["control"]["count"], r["alpha_n_exact"]) for r in rows]
    [(1, 4, 1, '2/6'), (2, 3, 0, '1/6'), (3, 2, 0, '1/6')]
    """
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
        rows.append(
            {
                "suffix_tokens": ell,
                "member": ev.cp(g, j),
                "control": ev.cp(m, n),
                "alpha_n": alpha_n,
                "alpha_n_exact": f"{m + 1}/{n + 1}",
                "floor_share_of_member_rate": (alpha_n / (g / j)) if g else None,
                "difference_member_minus_control": {
                    "estimate": diff.estimate,
                    "lower": diff.lower,
                    "upper": diff.upper,
                    "method": diff.method,
                },
                "calibrated_rate_at_floor": None
                if t is None
                else {
                    "estimate": t.calibrated_rate.estimate,
                    "lower": t.calibrated_rate.lower,
                    "upper": t.calibrated_rate.upper,
                },
                "claimed_at_floor": None if t is None else int(t.n_claimed),
            }
        )
    return rows


def _model_block(entry) -> dict:
    runs = entry["runs"]
    mem = ev.load(runs, "members", policy="greedy")
    ctl = ev.load(runs, "controls", policy="greedy")
    mf, cf = ev.greedy_prefix_flags(mem), ev.greedy_prefix_flags(ctl)
    whole = (np.asarray(mem.greedy_match), np.asarray(ctl.greedy_match))
    rows = length_rows(mf, cf)
    by = {r["suffix_tokens"]: r for r in rows}
    return {
        "model": entry["model"],
        "lengths": rows,
        "short": by[ev.SHORT],
        "long": by[ev.LONG],
        "whole_suffix_flag_equals_last_prefix_flag": bool(
            np.array_equal(whole[0], mf[:, -1]) and np.array_equal(whole[1], cf[:, -1])
        ),
        "monotone_in_length": bool(
            np.all(mf[:, 1:] <= mf[:, :-1]) and np.all(cf[:, 1:] <= cf[:, :-1])
        ),
    }


# ---- the paper's sentences on this run (issue 24 item 2): each quoted, each tested as stated
QUOTE_SHORT_SHARE = (
    "For $10$-token suffixes the floor is $\\alpha_{N}=1.84\\%$ against $7.54\\%$ on members, so "
    "roughly one quarter ($1.84/7.54\\approx 24\\%$) of the apparent training-data ‘‘extraction’’ "
    "rate is matched by the rate at which the same test flags non-members."
)
QUOTE_LONG = (
    "At $50$ tokens the picture is very different. The member generation rate is smaller ($0.74\\%$), but "
    "the non-member floor is close to zero ($0.04\\%$)."
)
WHERE = "[EM] §4, Fig. 3"
#: "roughly one quarter": between a fifth and a third of the member rate (the paper's 1.84/7.54 = 0.244)
QUARTER_BAND = (1 / 5, 1 / 3)
#: "close to zero ($0.04\%$)": the paper's floor 2/5001 = 0.04% rounded up to the next power of ten, 0.1%, as an
#: upper bound on the non-member rate (the paper's own 1 of 5000 gives a one-sided 95% bound of 0.095%)
NEAR_ZERO = 0.001


def floor_share_claim(
    key: str, claim: str, *, g: int, j: int, m: int, n: int, quote: str, where: str, what: str
) -> PaperClaim:
    """The sentence that the floor alpha_N = (m+1)/(N+1) is roughly one quarter of the member rate G = g/J
    ([EM] §1, §4: 1.84/7.54 = 24%), tested as stated: the share alpha_N / G, with Katz's 95% interval
    (counts m+1 of N+1 against g of J), is a share of the member rate, below all of it (upper bound < 1:
    controls flagged as often as members is the opposite situation), and roughly one quarter (the interval
    meets [1/5, 1/3]). No member reproduced: no apparent rate to take a share of (not held).

    >>> from memclaim.experiments.greedy import QUOTE_SHORT_SHARE, floor_share_claim
    >>> kw = dict(quote=QUOTE_SHORT_SHARE, where="[EM] §4", what="at 10 tokens")
    >>> floor_share_claim("s", "share", g=377, j=5000, m=91, n=5000, **kw).verdict  # the paper's own counts
    'held'
    >>> floor_share_claim("s", "share", g=1, j=120, m=4, n=180, **kw).verdict  # controls above members: 331%
    'not held'
    """
    lo_band, hi_band = QUARTER_BAND
    test = (
        f"{what}, the floor's share of the member rate alpha_N / G, alpha_N = (m+1)/(N+1), with Katz's 95% "
        f"interval (m+1 of N+1 against g of J): held iff the interval lies below 1 (the floor is a share of the "
        f"member rate, not more than all of it) and meets [{lo_band:.2f}, {hi_band:.2f}] (roughly one quarter; "
        "the paper: 1.84/7.54 = 0.244)"
    )
    alpha_n = (m + 1) / (n + 1)
    nums = {"member_rate": rate(g, j), "control_rate": rate(m, n), "alpha_n": alpha_n}
    if g == 0:
        return paper_claim(
            key,
            claim,
            quote=quote,
            where=where,
            test=test,
            held=False,
            numbers=nums,
            evidence=f"no member reproduced (0 of {j}): there is no apparent extraction rate for the "
            f"floor alpha_N = {alpha_n:.2%} to be a share of",
        )
    r = ratio(m + 1, n + 1, g, j)
    nums["floor_share_of_member_rate"] = r
    below_all = r["upper"] < 1
    quarter = r["lower"] <= hi_band and r["upper"] >= lo_band
    why = (
        "the floor is a share of the member rate and roughly a quarter of it"
        if below_all and quarter
        else "the floor may exceed the member rate (the interval reaches 1 or more)"
        if not below_all
        else "the share is not roughly a quarter (the interval misses [0.20, 0.33])"
    )
    return paper_claim(
        key,
        claim,
        quote=quote,
        where=where,
        test=test,
        held=below_all and quarter,
        numbers=nums,
        evidence=f"alpha_N = {m + 1}/{n + 1} = {alpha_n:.2%} against G = {g}/{j} = {g / j:.2%}: share "
        f"{fmt_interval(r, pct=False)} (Katz 95%): {why}",
    )


def claims_for(block: dict, name: str) -> list[PaperClaim]:
    """The sentences of [EM] §4 on Fig. 3 judged on one model's block (its ``"short"`` and ``"long"`` rows
    of :func:`length_rows`), each by a rule fixed before the run: the short-suffix floor is roughly a
    quarter of the member rate; at the long suffix the member rate is smaller; and the long-suffix floor is
    close to zero (0.04%), which needs a control set large enough to bound the non-member rate by 0.1%.

    >>> import numpy as np
    >>> from memclaim.experiments.greedy import claims_for, length_rows
    >>> mem = np.arange(3) < np.array([[3], [3], [2], [1]])  # members matching 3, 3, 2, 1 greedy tokens
    >>> rows = length_rows(mem, np.arange(3) < np.array([[1], [0], [0], [0], [0]]))
    >>> [(c.key, c.verdict) for c in claims_for({"short": rows[0], "long": rows[-1]}, "toy")]
    [('short-floor-share', 'not held'), ('long-member-rate-smaller', 'not held'), ('long-floor-near-zero', 'not testable here')]
    """
    s, lg = block["short"], block["long"]
    j, n = s["member"]["n"], s["control"]["n"]
    out = [
        floor_share_claim(
            "short-floor-share",
            f"{name}: at the short suffix the floor is roughly one quarter of the member rate",
            g=s["member"]["count"],
            j=j,
            m=s["control"]["count"],
            n=n,
            quote=QUOTE_SHORT_SHARE,
            where=WHERE,
            what=f"at the short suffix ({s['suffix_tokens']} tokens; the paper: 10)",
        )
    ]
    out.append(
        long_member_rate_smaller(
            s["member"]["count"],
            lg["member"]["count"],
            j,
            name=name,
            lengths=(s["suffix_tokens"], lg["suffix_tokens"]),
        )
    )
    out.append(
        long_floor_near_zero(lg["control"]["count"], n, name=name, length=lg["suffix_tokens"])
    )
    return out


def long_member_rate_smaller(
    g_short: int, g_long: int, j: int, *, name: str, lengths: tuple[int, int]
) -> PaperClaim:
    """ "The member generation rate is smaller ($0.74\\%$)" at the long suffix than at the short one ([EM] §4),
    tested on the same J members at both lengths: Newcombe's paired 95% interval for G_short - G_long lies
    above 0. A reproduction of the first l tokens implies that of the first l - 1, so the members reproduced
    at the long length are among those reproduced at the short one (the table's off-diagonal cells are
    g_short - g_long and 0).

    >>> from memclaim.experiments.greedy import long_member_rate_smaller
    >>> long_member_rate_smaller(377, 37, 5000, name="OLMo", lengths=(10, 50)).verdict  # 7.54% vs 0.74%
    'held'
    >>> long_member_rate_smaller(1, 0, 120, name="toy", lengths=(3, 16)).verdict  # 1 of 120 vs 0: not resolved
    'not held'
    """
    test = (
        f"the same J members at {lengths[0]} and {lengths[1]} tokens: Newcombe's paired 95% interval for "
        "G_short - G_long lies above 0 (the long-suffix member rate is smaller)"
    )
    if g_long > g_short:
        diff = None
    else:
        diff = newcombe_paired(g_long, g_short - g_long, 0, j - g_short).to_dict()
    nums = {"member_rate_short": rate(g_short, j), "member_rate_long": rate(g_long, j)}
    if diff is None:
        return paper_claim(
            "long-member-rate-smaller",
            f"{name}: at the long suffix the member rate is smaller",
            quote=QUOTE_LONG,
            where=WHERE,
            test=test,
            held=False,
            numbers=nums,
            evidence=f"more members reproduced at {lengths[1]} tokens ({g_long}) than at {lengths[0]} "
            f"({g_short})",
        )
    nums["difference_short_minus_long"] = diff
    return paper_claim(
        "long-member-rate-smaller",
        f"{name}: at the long suffix the member rate is smaller",
        quote=QUOTE_LONG,
        where=WHERE,
        test=test,
        held=diff["lower"] > 0,
        numbers=nums,
        evidence=f"G = {g_short}/{j} = {g_short / j:.2%} at {lengths[0]} tokens, {g_long}/{j} = "
        f"{g_long / j:.2%} at {lengths[1]}: difference {fmt_interval(diff, digits=2)} "
        "(Newcombe paired 95%)",
    )


def long_floor_near_zero(m: int, n: int, *, name: str, length: int) -> PaperClaim:
    """ "[...] but the non-member floor is close to zero ($0.04\\%$)" at the long suffix ([EM] §4), tested as
    stated: the one-sided 95% Clopper-Pearson upper bound on the non-member rate m/N is at most 0.1%
    (:data:`NEAR_ZERO`, the paper's 0.04% rounded up to the next power of ten). Not testable here when
    N controls cannot reach that bound even with none reproduced (N < 2,995): a count of reproduced
    controls is not a rate near zero.

    >>> from memclaim.experiments.greedy import long_floor_near_zero
    >>> long_floor_near_zero(1, 5000, name="OLMo", length=50).verdict  # the paper's 1 of 5000: 0.095%
    'held'
    >>> long_floor_near_zero(9, 5000, name="x", length=50).verdict
    'not held'
    >>> long_floor_near_zero(0, 180, name="toy", length=16).verdict
    'not testable here'
    """
    need = fewest_for_upper_bound(NEAR_ZERO)
    ub = upper_bound(m, n)
    test = (
        f"the non-member rate at {length} tokens: its one-sided 95% Clopper-Pearson upper bound is at most "
        f"{NEAR_ZERO:.1%} (the paper's 0.04% = 2/5001, rounded up to the next power of ten); testable only with "
        f"N >= {need:,} controls, the fewest whose bound can reach {NEAR_ZERO:.1%}"
    )
    nums = {
        "control_rate": rate(m, n),
        "control_rate_upper_bound_95": ub,
        "alpha_n": (m + 1) / (n + 1),
        "controls_needed": need,
    }
    claim = f"{name}: at the long suffix the non-member floor is close to zero"
    if n < need:
        return paper_claim(
            "long-floor-near-zero",
            claim,
            quote=QUOTE_LONG,
            where=WHERE,
            test=test,
            held=None,
            numbers=nums,
            evidence=f"N = {n} controls bound the non-member rate by {upper_bound(0, n):.2%} at best "
            f"(none reproduced), above {NEAR_ZERO:.1%}: it takes N >= {need:,} (here m = {m}, "
            f"alpha_N = {(m + 1) / (n + 1):.2%}, upper bound {ub:.2%})",
        )
    return paper_claim(
        "long-floor-near-zero",
        claim,
        quote=QUOTE_LONG,
        where=WHERE,
        test=test,
        held=ub <= NEAR_ZERO,
        numbers=nums,
        evidence=f"m = {m} of N = {n}: upper bound {ub:.3%} against {NEAR_ZERO:.1%}",
    )


def _plot(blocks, quick, pops, differences, claims):

    with style():
        fig, axes = figure(width=9.0, height=3.3 * len(blocks), nrows=len(blocks), ncols=2)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            ax = row[0]
            xs = np.arange(2)
            for off, key, role, lab in (
                (-0.18, "member", "member", "members (KJV)"),
                (0.18, "control", "control", "controls (new verses)"),
            ):
                vals = [b["short"][key], b["long"][key]]
                est = np.array([v["rate"] for v in vals])
                err = np.array(
                    [
                        [e - v["lower"] for e, v in zip(est, vals)],
                        [v["upper"] - e for e, v in zip(est, vals)],
                    ]
                )
                ax.bar(
                    xs + off,
                    est,
                    width=0.34,
                    color=PALETTE[role],
                    label=lab,
                    yerr=err,
                    capsize=3,
                    error_kw={"elinewidth": 0.8},
                )
            for x, r in zip(xs, (b["short"], b["long"])):
                ax.hlines(
                    r["alpha_n"],
                    x - 0.4,
                    x + 0.4,
                    colors=PALETTE["threshold"],
                    linestyles="--",
                    lw=1.2,
                    label=r"certified floor $\alpha_N=(m+1)/(N+1)$" if x == 0 else None,
                )
            ax.set_xticks(xs, [f"{ev.SHORT}-token suffix", f"{ev.LONG}-token suffix"])
            ax.set_ylabel("share reproduced by greedy decoding")
            ax.set_title(f"{b['model']['short']}: greedy generation (95% CP)")
            legend(ax)
            ax = row[1]
            ells = [r["suffix_tokens"] for r in b["lengths"]]
            for key, role, lab in (
                ("member", "member", "members"),
                ("control", "control", "controls"),
            ):
                est = [r[key]["rate"] for r in b["lengths"]]
                ax.plot(ells, est, "o-", ms=3, color=PALETTE[role], label=lab)
                ax.fill_between(
                    ells,
                    [r[key]["lower"] for r in b["lengths"]],
                    [r[key]["upper"] for r in b["lengths"]],
                    color=PALETTE[role],
                    alpha=0.18,
                    lw=0,
                )
            ax.plot(
                ells,
                [r["alpha_n"] for r in b["lengths"]],
                "--",
                color=PALETTE["threshold"],
                label=r"$\alpha_N$",
            )
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_xlabel("suffix length (tokens)")
            ax.set_ylabel("share reproduced (symlog)")
            ax.set_title("every suffix length from one pass ([EM] Fig. 11(a))")
            legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


class Greedy(Reproduction):
    """[EM] Fig. 3's greedy binary scores on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] Fig. 3",
        "[EM] §4 'A generation rate is not a memorization rate'",
        "[EM] App. D.3, Fig. 11",
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
            "policy": "greedy",
            "prompt": "natural prefix",
            "confidence": 0.95,
        }

    def data(self) -> list:
        """The populations and the natural-prefix runs of every model (scored once into the store)."""
        self.pops, entries = ev.natural_runs(self.quick, self.out_dir)
        return entries

    def runs(self, entries: list) -> dict:
        """One block per model: the greedy flags by length, the floor alpha_N, the tests."""
        return {"models": [_model_block(e) for e in entries]}

    def checks(self, results: dict) -> list:
        checks = []
        for b in results["models"]:
            checks.append(
                check(
                    f"{b['model']['name']}: the greedy flag of l tokens implies the flag of l - 1 tokens, "
                    "and the engine's whole-suffix greedy flag is the flag at the last length",
                    b["monotone_in_length"] and b["whole_suffix_flag_equals_last_prefix_flag"],
                    "monotone in length: "
                    + str(b["monotone_in_length"])
                    + "; whole-suffix flag equal: "
                    + str(b["whole_suffix_flag_equals_last_prefix_flag"]),
                    false_alarm="0 (an identity)",
                )
            )
            checks.append(
                check(
                    f"{b['model']['name']}: at alpha = alpha_N the binary conformal test claims exactly "
                    "the reproduced members, with M = G - alpha_N ([EM] D.3)",
                    all(
                        r["claimed_at_floor"] in (None, r["member"]["count"]) for r in b["lengths"]
                    ),
                    "claimed = reproduced at every length",
                    false_alarm="0 (an identity)",
                )
            )
        return checks

    def claims(self, results: dict) -> list[PaperClaim]:
        return [c for b in results["models"] for c in claims_for(b, b["model"]["name"])]

    def differences(self, results: dict) -> list[str]:
        return ev.tier_differences(
            self.quick,
            self.pops,
            paper_models="OLMo 2 32B base",
            paper_text="Wikipedia passages, 2021-2023 entries against 2024 entries",
            paper_n="5,000 each",
        ) + [f"lengths: {ev.LENGTH_RULE}"]

    def paper_numbers(self, results: dict) -> list:
        first = results["models"][0]
        s, lg = first["short"], first["long"]
        note = (
            f"{first['model']['name']}, {ev.SHORT} vs the paper's 10 tokens and {ev.LONG} vs 50, after a "
            f"{ev.PREFIX_TOKENS}-token prefix (paper: 50)"
        )
        return [
            compare("member_short", "greedy/member-short", s["member"]["rate"], note=note),
            compare("floor_short", "greedy/floor-short", s["alpha_n"], note=note),
            compare(
                "floor_share_short",
                "greedy/floor-share-short",
                s["floor_share_of_member_rate"]
                if s["floor_share_of_member_rate"] is not None
                else float("nan"),
                note=note,
            ),
            compare("member_long", "greedy/member-long", lg["member"]["rate"], note=note),
            compare("floor_long", "greedy/floor-long", lg["alpha_n"], note=note),
        ]

    def figure(self, results: dict, *, claims, differences):
        return _plot(results["models"], self.quick, self.pops, differences, claims)

    def notes(self, results: dict) -> list[str]:
        return [
            "every number is a deterministic function of the stored scores (no random draws; the seed "
            "is recorded but unused)",
            "greedy scores are binary: alpha* is not Beta-distributed and no band is drawn ([EM] C.4.4)",
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
    """[EM] Fig. 3: greedy binary scores at a short and a long suffix; floor alpha_N = (m+1)/(N+1).

    Writes ``greedy.json``, ``greedy.png`` and ``greedy.pdf`` into ``out_dir`` (created) and returns the
    JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce greedy`` runs.

    >>> from memclaim.experiments.greedy import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('greedy', True)
    """
    return Greedy(quick=quick, seed=seed, out_dir=out_dir).reproduce()
