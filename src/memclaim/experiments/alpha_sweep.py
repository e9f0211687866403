"""`alpha-sweep`: [EM] Fig. 4 (and Fig. 14 under the full softmax): probabilistic extraction under
top-40 decoding, swept over every attainable certified level alpha_N = K/(N+1).

The same members, controls and teacher-forced pass as `greedy` (em_verses: a 16-token natural
prefix; suffix lengths 3 and 16, the paper's 10 and 50 scaled to the verses). For each length and
each K = 1 .. K_max (the controls above the atom of exact-zero scores, [EM] C.4.2-C.4.4):

- tau_{alpha_N} = the K-th largest control score ([EM] Eq. 6) and the member rate G above it, with a
  pointwise 95% Clopper-Pearson band (Fig. 4(a), D.1);
- the calibrated rate M = G - alpha_N ([EM] Eq. 8), its band the CP band shifted by alpha_N (Fig. 4(b));
- the central 95% Beta(K, N-K+1) band of the population FPR alpha* where Lemma 3 certifies it;
- the ceiling alpha-dagger (largest attainable alpha_N) and the share of controls at exactly 0.

At the reference level alpha = 1% the two lengths are compared on the same members: M_long -
M_short = G_long - G_short with Newcombe's paired interval ([EM] D.4, Eq. 29). The full softmax
(temperature 1, no atom: [EM] D.4) is swept from the same pass.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..claims.conformal import alpha_sweep, controls_needed_for_level, population_test, rank_k
from ..claims.intervals import newcombe_paired
from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, paper_claim, paper_footer
from .skeleton import Reproduction
from .verdicts import fmt_interval, rate, ratio

NAME = "alpha-sweep"
TITLE = "top-40 alpha sweep: member rate, certified alpha_N and calibrated rate M at two suffix lengths ([EM] Fig. 4)"
STREAMS: tuple[str, ...] = ()
ALPHA_REF = 0.01
ALPHA_PAPER = "0.1%"  # the paper's operating point ([EM] §4, C.4.4): alpha_N = 5/5001 at N = 5000
POLICIES = (ev.PAPER_POLICY, "full")


def sweep_block(mem_logq: np.ndarray, ctl_logq: np.ndarray) -> dict:
    """The sweep at one length and policy, as plain lists, plus the reference-level test.

    >>> import numpy as np
    >>> from memclaim.experiments.alpha_sweep import sweep_block
    >>> b = sweep_block(np.log(np.linspace(0.2, 0.9, 50)), np.log(np.linspace(0.001, 0.5, 199)))
    >>> b["k_max"], b["reference"]["alpha_n_exact"], b["reference"]["n_claimed"]
    (199, '2/200', 29)
    """
    n = ctl_logq.size
    sw = alpha_sweep(
        mem_logq, ctl_logq, max_points=n, include_k=range(1, n + 1)
    )  # every K from 1 to K_max
    t = population_test(mem_logq, ctl_logq, alpha=ALPHA_REF)
    zero = float(np.mean(np.isneginf(ctl_logq)))
    # the paper's operating point alpha = 0.1% ([EM] §4, C.4.4), where N controls can certify it (N >= 999)
    if rank_k(alpha=ALPHA_PAPER, n_controls=n) >= 1:
        tp = population_test(mem_logq, ctl_logq, alpha=ALPHA_PAPER)
        paper_level = {
            "alpha": ALPHA_PAPER,
            "reachable": True,
            "k": tp.k,
            "alpha_n": tp.alpha_n,
            "threshold_log10": tp.threshold_log10_prob,
            "n_claimed": tp.n_claimed,
            "calibrated_rate": tp.calibrated_rate.to_dict(),
            "claimed": np.asarray(tp.claimed, dtype=bool).tolist(),
        }
    else:
        paper_level = {
            "alpha": ALPHA_PAPER,
            "reachable": False,
            "k": 0,
            "controls_needed": controls_needed_for_level(alpha=ALPHA_PAPER),
        }
    out = {
        "n_controls": int(n),
        "n_members": int(mem_logq.size),
        "control_zero_share": zero,
        "member_zero_share": float(np.mean(np.isneginf(mem_logq))),
        "reference": {
            "alpha": ALPHA_REF,
            "k": t.k,
            "alpha_n": t.alpha_n,
            "alpha_n_exact": t.alpha_n_exact,
            "threshold_log10": t.threshold_log10_prob,
            "n_claimed": t.n_claimed,
            "generation_rate": t.generation_rate.to_dict(),
            "calibrated_rate": t.calibrated_rate.to_dict(),
            "in_sample_fpr": t.in_sample_fpr,
            "claim_possible": t.claim_possible,
            "beta_law": None if t.beta_law is None else t.beta_law.to_dict(),
            "note": t.beta_law_note,
        },
        "claimed_at_reference": np.asarray(t.claimed, dtype=bool).tolist(),
        "paper_level": paper_level,
    }
    if sw is None:
        out["sweep"] = None
        return out
    out["alpha_dagger"] = sw.alpha_dagger
    out["k_max"] = sw.max_k
    out["sweep"] = {
        "k": sw.k,
        "alpha_n": sw.alpha_n,
        "threshold_log10": sw.threshold_log10_prob,
        "member_rate": sw.member_rate,
        "member_lower": sw.member_lower,
        "member_upper": sw.member_upper,
        "calibrated_rate": sw.calibrated_rate,
        "calibrated_lower": sw.calibrated_lower,
        "calibrated_upper": sw.calibrated_upper,
        "control_rate_in_sample": sw.control_rate,
        "beta_lower": sw.beta_lower,
        "beta_upper": sw.beta_upper,
    }
    out["at_smallest_threshold"] = {
        "k": int(sw.k[-1]),
        "alpha_n": float(sw.alpha_n[-1]),
        "member_rate": float(sw.member_rate[-1]),
        "member_count": int(round(float(sw.member_rate[-1]) * mem_logq.size)),
        "threshold_log10": float(sw.threshold_log10_prob[-1]),
    }
    return out


def compare_lengths(short: dict, long: dict) -> dict:
    """M_long vs M_short on the common K grid, and the paired interval at the reference level.

    >>> import numpy as np
    >>> from memclaim.experiments.alpha_sweep import compare_lengths, sweep_block
    >>> mem, ctl = np.log(np.linspace(0.2, 0.9, 50)), np.log(np.linspace(0.001, 0.5, 199))
    >>> c = compare_lengths(sweep_block(mem, ctl), sweep_block(mem - 1, ctl - 5))
    >>> len(c["common_k"]), all(c["long_at_or_above_short"])
    (199, True)
    """
    a = np.asarray(long["claimed_at_reference"], dtype=bool)  # the same members at both lengths
    b = np.asarray(short["claimed_at_reference"], dtype=bool)
    paired = newcombe_paired(
        int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b)), int(np.sum(~a & ~b))
    )
    out = {"reference_difference_long_minus_short": paired.to_dict()}
    if short["sweep"] is None or long["sweep"] is None:
        out.update({"common_k": [], "long_at_or_above_short": []})
        return out
    ks, kl = list(short["sweep"]["k"]), list(long["sweep"]["k"])
    common = sorted(set(ks) & set(kl))
    ms = dict(zip(ks, short["sweep"]["calibrated_rate"]))
    ml = dict(zip(kl, long["sweep"]["calibrated_rate"]))
    out["common_k"] = common
    out["common_alpha_n"] = [k / (short["n_controls"] + 1) for k in common]
    out["calibrated_short"] = [ms[k] for k in common]
    out["calibrated_long"] = [ml[k] for k in common]
    out["long_above_short"] = [bool(ml[k] > ms[k]) for k in common]
    out["long_at_or_above_short"] = [bool(ml[k] >= ms[k]) for k in common]
    out["largest_shortfall"] = float(max([ms[k] - ml[k] for k in common], default=0.0))
    ps, pl = short.get("paper_level", {}), long.get("paper_level", {})
    if ps.get("reachable") and pl.get("reachable"):
        a, b = np.asarray(pl["claimed"], dtype=bool), np.asarray(ps["claimed"], dtype=bool)
        out["paper_level_difference_long_minus_short"] = newcombe_paired(
            int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b)), int(np.sum(~a & ~b))
        ).to_dict()
    return out


def _model_block(entry) -> dict:
    runs = entry["runs"]
    pol = {}
    for policy in POLICIES:
        lengths = {}
        for ell in (ev.SHORT, ev.LONG):
            mem = ev.load(runs, "members", policy=policy, suffix_tokens=ell).logq
            ctl = ev.load(runs, "controls", policy=policy, suffix_tokens=ell).logq
            lengths[str(ell)] = sweep_block(mem, ctl)
        pol[policy] = {
            "lengths": lengths,
            "comparison": compare_lengths(lengths[str(ev.SHORT)], lengths[str(ev.LONG)]),
        }
    return {"model": entry["model"], "policies": pol}


# ---- the paper's sentences on this run (issue 24 item 2): each quoted, each tested as stated
QUOTE_FAR_HIGHER = (
    "At $10$ tokens the absolute rates are far higher, but so are the control rates (certified FPR "
    "$\\alpha_{N}$): for the smallest thresholds plotted, the member rate exceeds $50\\%$ and the "
    "certified FPR exceeds $30\\%$; $\\tau_{\\alpha_{N}}=0.95$, so a member must be nearly certain to "
    "clear it."
)
QUOTE_FIVE_ORDERS = (
    "The two raw rates aren’t the right comparison: they sit at thresholds five orders of magnitude "
    "apart, each set by what the non-member controls happen to do at that suffix length."
)
QUOTE_ACROSS = (
    "In contrast to the raw generation rates, the $50$-token curve sits above the $10$-token one across the "
    "sweep (e.g., at $\\alpha_{N}\\approx 0.1\\%$, $\\hat{M}=2.64\\%$ against $1.06\\%$)."
)
QUOTE_FULL = (
    "The conclusions of §4 hold under this policy for every model size: the $50$-token-suffix calibrated rate "
    "exceeds the $10$-token-suffix rate across the whole sweep."
)
#: "far higher": at least twice as high at 95% confidence (Katz's lower bound of the ratio); the paper's own ratios
#: are > 50% against ~3% for members (about 17x) and 58.9% against 10.4% for the certified-FPR ceilings (5.7x)
FAR_HIGHER = 2.0
#: "nearly certain to clear it" (tau = 0.95 at alpha_N ~ 0.1%): tau >= 0.9
NEARLY_CERTAIN = 0.9
#: "five orders of magnitude apart" (0.95 against 8.9e-6: 5.03 decades): at least 4.5 decades, five to the nearest
FIVE_ORDERS = 4.5
PAPER_LEVEL_WORDS = (
    "alpha_N ~ 0.1% (alpha = 0.1%: K = floor(0.001 (N+1)) >= 1 needs N >= 999 controls)"
)


def _unreachable(n: int) -> str:
    return (
        f"the paper's operating point alpha = 0.1% needs N >= {controls_needed_for_level(alpha=ALPHA_PAPER)} "
        f"controls (K = floor(0.001 (N+1)) >= 1); with N = {n} the smallest certifiable level is 1/{n + 1} = "
        f"{1 / (n + 1):.2%}, and testing at another level would be a weaker rule"
    )


def rates_far_higher_claim(
    name: str,
    *,
    members: tuple[int, int, int],
    dagger: tuple[int, int, int],
    lengths: tuple[int, int],
) -> PaperClaim:
    """ "At 10 tokens the absolute rates are far higher, but so are the control rates (certified FPR
    alpha_N)" ([EM] §4, Fig. 4(a)), tested as stated: at each length's smallest threshold plotted (the
    K_max-th control score), the member rate (``members`` = (count short, count long, J)) and the
    certified FPR there, alpha_N = K_max/(N+1), i.e. the share of controls scoring above the atom at 0 (the
    ceiling alpha-dagger; ``dagger`` = (K_max short, K_max long, N)), are each
    at least :data:`FAR_HIGHER` times higher at the short suffix: Katz's 95% lower bound of each ratio
    (short over long) >= 2. The members are the same at both lengths: the independent-samples interval
    ignores their positive correlation, which only widens it.

    >>> from memclaim.experiments.alpha_sweep import rates_far_higher_claim
    >>> rates_far_higher_claim("OLMo", members=(2500, 150, 5000), dagger=(2945, 520, 5000), lengths=(10, 50)).verdict
    'held'
    >>> rates_far_higher_claim("x", members=(69, 60, 120), dagger=(78, 2, 180), lengths=(3, 16)).verdict
    'not held'
    """
    (gs, gl, j), (ks, kl, n) = members, dagger
    rm, rc = ratio(gs, j, gl, j), ratio(ks, n, kl, n)
    test = (
        f"at each length's smallest threshold plotted (the K_max-th largest control score; {lengths[0]} vs "
        f"{lengths[1]} tokens), the member rate and the certified FPR there (the share of controls scoring "
        f"above 0, the ceiling alpha-dagger) are each far higher at the short suffix: Katz's 95% lower bound "
        f"of the ratio short/long >= {FAR_HIGHER:g} for both (the paper's own ratios: about 17x and 5.7x)"
    )
    nums = {
        "member_rate_short": rate(gs, j),
        "member_rate_long": rate(gl, j),
        "member_rate_ratio": rm,
        "controls_above_0_short": rate(ks, n),
        "controls_above_0_long": rate(kl, n),
        "certified_fpr_ratio": rc,
    }
    held = rm["lower"] >= FAR_HIGHER and rc["lower"] >= FAR_HIGHER
    return paper_claim(
        "short-rates-far-higher",
        f"{name}: at the short suffix the member rate and the certified FPR are far higher",
        quote=QUOTE_FAR_HIGHER,
        where="[EM] §4, Fig. 4(a)",
        test=test,
        held=held,
        numbers=nums,
        evidence=f"member rate {gs}/{j} = {gs / j:.1%} vs {gl}/{j} = {gl / j:.1%}: ratio "
        f"{fmt_interval(rm, pct=False)}; controls above 0 (alpha-dagger) {ks}/{n} = {ks / n:.1%} "
        f"vs {kl}/{n} = {kl / n:.1%}: ratio {fmt_interval(rc, pct=False)} (Katz 95%)",
    )


def tau_nearly_certain_claim(name: str, short: dict) -> PaperClaim:
    """ "$\\tau_{\\alpha_{N}}=0.95$, so a member must be nearly certain to clear it" ([EM] §4, at alpha_N ~
    0.1%; App. D.2: "Holding the target FPR to 0.1% therefore forces the threshold close to one"), tested at
    the paper's level: tau at alpha = 0.1% on the short suffix >= 0.9. Not testable with fewer than 999
    controls (no threshold certifies 0.1%).

    >>> from memclaim.experiments.alpha_sweep import tau_nearly_certain_claim
    >>> tau_nearly_certain_claim("x", {"n_controls": 180, "paper_level": {"reachable": False}}).verdict
    'not testable here'
    >>> tau_nearly_certain_claim("x", {"n_controls": 5000, "paper_level": {"reachable": True, "k": 5,
    ...                               "alpha_n": 5 / 5001, "threshold_log10": -0.4}}).verdict
    'not held'
    """
    pl, n = short["paper_level"], short["n_controls"]
    test = (
        f"at the paper's level, {PAPER_LEVEL_WORDS}: the short-suffix calibrated threshold tau >= "
        f"{NEARLY_CERTAIN:g} (the paper: 0.95, 'nearly certain')"
    )
    claim = f"{name}: at the short suffix and alpha_N ~ 0.1% a member must be nearly certain to clear tau"
    where = "[EM] §4, Fig. 4; App. D.2"
    if not pl["reachable"]:
        return paper_claim(
            "short-tau-nearly-certain",
            claim,
            quote=QUOTE_FAR_HIGHER,
            where=where,
            test=test,
            held=None,
            numbers={"n_controls": n},
            evidence=_unreachable(n),
        )
    t = pl["threshold_log10"]
    return paper_claim(
        "short-tau-nearly-certain",
        claim,
        quote=QUOTE_FAR_HIGHER,
        where=where,
        test=test,
        held=t is not None and t >= math.log10(NEARLY_CERTAIN),
        numbers={"k": pl["k"], "alpha_n": pl["alpha_n"], "threshold_log10": t},
        evidence=(
            f"tau = 10^{t:.3f} = {10**t:.3g} at alpha_N = {pl['alpha_n']:.4%}"
            if t is not None
            else "no threshold"
        ),
    )


def five_orders_claim(name: str, short: dict, long: dict) -> PaperClaim:
    """ "[...] they sit at thresholds five orders of magnitude apart" ([EM] §4: 0.95 against 8.9e-6 at
    alpha_N ~ 0.1%), tested at the paper's level: log10 tau_short - log10 tau_long >= 4.5. Not testable
    with fewer than 999 controls.

    >>> from memclaim.experiments.alpha_sweep import five_orders_claim
    >>> lv = lambda t: {"n_controls": 5000, "paper_level": {"reachable": True, "k": 5, "alpha_n": 5 / 5001,
    ...                                                     "threshold_log10": t}}
    >>> five_orders_claim("OLMo", lv(-0.022), lv(-5.05)).verdict, five_orders_claim("x", lv(-0.4), lv(-3.0)).verdict
    ('held', 'not held')
    """
    ps, pl, n = short["paper_level"], long["paper_level"], short["n_controls"]
    test = (
        f"at the paper's level, {PAPER_LEVEL_WORDS}: log10 tau_short - log10 tau_long >= {FIVE_ORDERS:g} "
        "(five orders of magnitude, to the nearest order; the paper: 0.95 vs 8.9e-6)"
    )
    claim = (
        f"{name}: at alpha_N ~ 0.1% the two lengths' thresholds are five orders of magnitude apart"
    )
    if not (ps["reachable"] and pl["reachable"]):
        return paper_claim(
            "thresholds-five-orders-apart",
            claim,
            quote=QUOTE_FIVE_ORDERS,
            where="[EM] §4, Fig. 4",
            test=test,
            held=None,
            numbers={"n_controls": n},
            evidence=_unreachable(n),
        )
    ts, tl = ps["threshold_log10"], pl["threshold_log10"]
    ok = ts is not None and tl is not None and ts - tl >= FIVE_ORDERS
    return paper_claim(
        "thresholds-five-orders-apart",
        claim,
        quote=QUOTE_FIVE_ORDERS,
        where="[EM] §4, Fig. 4",
        test=test,
        held=ok,
        numbers={"threshold_log10_short": ts, "threshold_log10_long": tl},
        evidence=(
            f"tau = 10^{ts:.2f} vs 10^{tl:.2f}: {ts - tl:.2f} decades apart"
            if None not in (ts, tl)
            else "no threshold"
        ),
    )


def across_sweep_claim(
    name: str, comparison: dict, n: int, *, key: str, quote: str, where: str, policy: str
) -> PaperClaim:
    """The long-suffix calibrated rate sits above (exceeds) the short one "across the sweep" ([EM] §4,
    Fig. 4(b); App. D.4, Fig. 14 under the full softmax), tested as stated: M_long > M_short at every
    certified level alpha_N = K/(N+1) both lengths attain (how many, and their range, are reported). The
    paper's sweep starts at its low-FPR operating point alpha_N ~ 0.1% (the "e.g." of its sentence, where
    "one would operate in practice"); a run whose levels start above it (N < 999) cannot test the sentence
    across that sweep: not testable here, the comparison over its own levels reported beside it.

    >>> from memclaim.experiments.alpha_sweep import QUOTE_ACROSS, across_sweep_claim
    >>> cmp = {"common_k": [1, 2], "common_alpha_n": [1 / 181, 2 / 181], "long_above_short": [True, True],
    ...        "calibrated_short": [-0.005, -0.011], "calibrated_long": [0.05, 0.06]}
    >>> across_sweep_claim("x", cmp, 180, key="k", quote=QUOTE_ACROSS, where="[EM] §4", policy="top-40").verdict
    'not testable here'
    >>> cmp = {"common_k": list(range(1, 6)), "common_alpha_n": [k / 1001 for k in range(1, 6)],
    ...        "long_above_short": [True, True, False, True, True], "calibrated_short": [0.0] * 5,
    ...        "calibrated_long": [0.01, 0.01, -0.01, 0.01, 0.01]}
    >>> across_sweep_claim("x", cmp, 1000, key="k", quote=QUOTE_ACROSS, where="[EM] §4", policy="top-40").verdict
    'not held'
    """
    common = comparison.get("common_k", [])
    above = comparison.get("long_above_short", [])
    levels = comparison.get("common_alpha_n", [])
    reach = n + 1 >= 1000  # alpha = 0.1% certifiable: 1/(N+1) <= 0.1%
    test = (
        f"{policy}: M_long > M_short at every certified level alpha_N = K/(N+1) both lengths attain; testable "
        f"only if the run's levels reach the paper's low-FPR end, {PAPER_LEVEL_WORDS}"
    )
    span = (
        f"{sum(above)} of {len(common)} common levels (alpha_N {levels[0]:.2%} to {levels[-1]:.2%})"
        if common
        else "no common level"
    )
    nums = {
        "levels_compared": len(common),
        "levels_long_above_short": int(sum(above)),
        "smallest_level": levels[0] if levels else None,
        "largest_level": levels[-1] if levels else None,
        "smallest_certifiable_level": 1 / (n + 1),
    }
    first_below = next((lv for lv, ok in zip(levels, above) if not ok), None)
    claim = f"{name}: the long-suffix calibrated rate sits above the short one across the sweep ({policy})"
    if not reach:
        return paper_claim(
            key,
            claim,
            quote=quote,
            where=where,
            test=test,
            held=None,
            numbers=nums,
            evidence=_unreachable(n) + f"; over this run's levels: {span}",
        )
    return paper_claim(
        key,
        claim,
        quote=quote,
        where=where,
        test=test,
        held=bool(common) and all(above),
        numbers=nums,
        evidence=span
        + (f"; first level at or below: {first_below:.2%}" if first_below is not None else ""),
    )


def low_fpr_claim(name: str, comparison: dict, n: int) -> PaperClaim:
    """ "e.g., at alpha_N ~ 0.1%, M = 2.64% against 1.06%" ([EM] §4, Fig. 4(b)): at the paper's level the
    long suffix certifies more memorization, tested with Newcombe's paired 95% interval for M_long -
    M_short = G_long - G_short (the same members; [EM] D.4, Eq. 29), which must lie above 0. Not testable
    with fewer than 999 controls.

    >>> from memclaim.experiments.alpha_sweep import low_fpr_claim
    >>> low_fpr_claim("x", {}, 180).verdict
    'not testable here'
    >>> d = {"estimate": 0.0158, "lower": 0.011, "upper": 0.021, "confidence": 0.95, "method": "newcombe-paired"}
    >>> low_fpr_claim("OLMo", {"paper_level_difference_long_minus_short": d}, 5000).verdict
    'held'
    """
    test = (
        f"at the paper's level, {PAPER_LEVEL_WORDS}: Newcombe's paired 95% interval for M_long - M_short "
        "(= G_long - G_short, the same members) lies above 0"
    )
    claim = f"{name}: at alpha_N ~ 0.1% the long suffix certifies more memorization"
    d = comparison.get("paper_level_difference_long_minus_short")
    if d is None:
        return paper_claim(
            "low-fpr-long-above-short",
            claim,
            quote=QUOTE_ACROSS,
            where="[EM] §4, Fig. 4(b)",
            test=test,
            held=None,
            numbers={"n_controls": n},
            evidence=_unreachable(n),
        )
    return paper_claim(
        "low-fpr-long-above-short",
        claim,
        quote=QUOTE_ACROSS,
        where="[EM] §4, Fig. 4(b)",
        test=test,
        held=d["lower"] > 0,
        numbers={"difference_long_minus_short": d},
        evidence=f"M_long - M_short = {fmt_interval(d, digits=2)} (Newcombe paired 95%)",
    )


def claims_for(block: dict) -> list[PaperClaim]:
    """The sentences of [EM] §4 on Fig. 4 (and App. D.4 on Fig. 14) judged on one model's block (the
    entries of ``run(...)["results"]["models"]``), each by a rule fixed before the run (see the rule
    functions above; the statistics in :mod:`.verdicts`).

    >>> from memclaim.experiments.alpha_sweep import claims_for, run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> [c.verdict for c in claims_for(res["results"]["models"][0])]  # doctest: +SKIP
    ['held', 'not testable here', 'not testable here', 'not testable here', 'not testable here', 'not testable here']
    """
    name = block["model"]["name"]
    tk = block["policies"][ev.PAPER_POLICY]
    s, lg = tk["lengths"][str(ev.SHORT)], tk["lengths"][str(ev.LONG)]
    n, j = s["n_controls"], s["n_members"]
    sm, lm = s.get("at_smallest_threshold"), lg.get("at_smallest_threshold")
    out = []
    if sm is None or lm is None:
        out.append(
            paper_claim(
                "short-rates-far-higher",
                f"{name}: at the short suffix the member rate and the certified FPR are far higher",
                quote=QUOTE_FAR_HIGHER,
                where="[EM] §4, Fig. 4(a)",
                test="the member rate and alpha-dagger at each length's smallest threshold",
                held=None,
                evidence="no control scores above 0 at one length: that length's sweep is "
                "empty, so it has no smallest threshold to compare at",
            )
        )
    else:
        out.append(
            rates_far_higher_claim(
                name,
                members=(sm["member_count"], lm["member_count"], j),
                dagger=(s["k_max"], lg["k_max"], n),
                lengths=(ev.SHORT, ev.LONG),
            )
        )
    out.append(tau_nearly_certain_claim(name, s))
    out.append(five_orders_claim(name, s, lg))
    out.append(
        across_sweep_claim(
            name,
            tk["comparison"],
            n,
            key="long-above-short-across-sweep",
            quote=QUOTE_ACROSS,
            where="[EM] §4, Fig. 4(b)",
            policy="top-40",
        )
    )
    out.append(low_fpr_claim(name, tk["comparison"], n))
    out.append(
        across_sweep_claim(
            name,
            block["policies"]["full"]["comparison"],
            n,
            key="full-softmax-long-above-short",
            quote=QUOTE_FULL,
            where="[EM] App. D.4, Fig. 14",
            policy="full softmax",
        )
    )
    return out


def _plot(blocks, differences, claims):

    colors = {ev.SHORT: PALETTE["reference"], ev.LONG: PALETTE["member"]}
    with style():
        fig, axes = figure(width=12.0, height=3.4 * len(blocks), nrows=len(blocks), ncols=3)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            tk = b["policies"][ev.PAPER_POLICY]
            ax = row[0]
            for ell in (ev.SHORT, ev.LONG):
                sw = tk["lengths"][str(ell)]["sweep"]
                if sw is None:
                    continue
                x = np.asarray(sw["threshold_log10"])
                ax.plot(
                    x, sw["member_rate"], "-", color=colors[ell], label=f"members, {ell} tokens"
                )
                ax.fill_between(
                    x, sw["member_lower"], sw["member_upper"], color=colors[ell], alpha=0.18, lw=0
                )
                ax.plot(
                    x,
                    sw["alpha_n"],
                    "--",
                    color=colors[ell],
                    label=rf"certified FPR $\alpha_N$, {ell} tokens",
                )
            ax.set_xlabel(r"threshold $\log_{10}\tau$")
            ax.set_ylabel("share of suffixes scoring above")
            ax.set_title(f"{b['model']['short']}: top-40 (Fig. 4(a))")
            legend(ax)
            for ax, policy, title in (
                (row[1], ev.PAPER_POLICY, "calibrated rate, top-40 (Fig. 4(b))"),
                (row[2], "full", "calibrated rate, full softmax (Fig. 14)"),
            ):
                pl = b["policies"][policy]
                for ell in (ev.SHORT, ev.LONG):
                    L = pl["lengths"][str(ell)]
                    sw = L["sweep"]
                    if sw is None:
                        continue
                    ax.plot(
                        sw["alpha_n"],
                        sw["calibrated_rate"],
                        "-",
                        color=colors[ell],
                        label=rf"$\hat M$, {ell} tokens",
                    )
                    ax.fill_between(
                        sw["alpha_n"],
                        sw["calibrated_lower"],
                        sw["calibrated_upper"],
                        color=colors[ell],
                        alpha=0.18,
                        lw=0,
                    )
                    if policy == ev.PAPER_POLICY and L.get("alpha_dagger", 1.0) < 1.0:
                        ax.axvline(
                            L["alpha_dagger"],
                            color=colors[ell],
                            lw=0.8,
                            ls=":",
                            label=rf"max $\alpha_N$ = {L['alpha_dagger']:.1%} ({ell} tokens)",
                        )
                ax.axhline(0.0, color=PALETTE["black"], lw=0.6)
                ref = tk["lengths"][str(ev.SHORT)]["reference"]
                ax.axvline(
                    ref["alpha_n"],
                    color=PALETTE["threshold"],
                    lw=0.8,
                    ls="--",
                    label=rf"reference $\alpha$ = {ALPHA_REF:g}: $\alpha_N$ = {ref['alpha_n_exact']}",
                )
                ax.set_xscale("log")
                ax.set_xlabel(r"certified FPR $\alpha_N = K/(N+1)$")
                ax.set_ylabel(r"calibrated rate $\hat M = \hat G - \alpha_N$")
                ax.set_title(title)
                legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


class AlphaSweep(Reproduction):
    """[EM] Fig. 4's top-40 alpha sweep on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] Fig. 4",
        "[EM] §4 'Continuous calibration'",
        "[EM] App. C.4.4",
        "[EM] App. D.4, Fig. 14 (full softmax)",
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
            "policies": list(POLICIES),
            "reference_alpha": ALPHA_REF,
            "confidence": 0.95,
            "prompt": "natural prefix",
        }

    def data(self) -> list:
        """The populations and the natural-prefix runs of every model (scored once into the store)."""
        self.pops, entries = ev.natural_runs(self.quick, self.out_dir)
        return entries

    def runs(self, entries: list) -> dict:
        """One block per model: the alpha sweep of both policies at the two suffix lengths."""
        return {"models": [_model_block(e) for e in entries]}

    def checks(self, results: dict) -> list:
        checks = []
        for b in results["models"]:
            for policy in POLICIES:
                for ell in (ev.SHORT, ev.LONG):
                    L = b["policies"][policy]["lengths"][str(ell)]
                    sw = L["sweep"]
                    if sw is None:
                        continue
                    k, n = np.asarray(sw["k"]), L["n_controls"]
                    ok = np.allclose(sw["alpha_n"], k / (n + 1), rtol=0, atol=1e-15) and np.all(
                        np.asarray(sw["control_rate_in_sample"]) <= (k - 1) / n + 1e-15
                    )
                    checks.append(
                        check(
                            f"{b['model']['name']}, {policy}, {ell} tokens: alpha_N = K/(N+1) and at "
                            "most K - 1 controls above each threshold ([EM] Eq. 5, C.1)",
                            ok,
                            f"K = 1..{int(k[-1])}",
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
        ) + [
            f"lengths: {ev.LENGTH_RULE}",
            f"reference level alpha = {ALPHA_REF:g} (alpha_N = K/(N+1) with K = floor(alpha (N+1))): "
            f"the paper's 0.1% needs N >= 999 controls, the smallest level here is "
            f"1/{len(self.pops.controls) + 1}",
        ]

    def paper_numbers(self, results: dict) -> list:
        blocks = results["models"]
        first = blocks[0]["policies"][ev.PAPER_POLICY]["lengths"]
        s, lg = first[str(ev.SHORT)], first[str(ev.LONG)]
        nm = blocks[0]["model"]["name"]
        note = (
            f"{nm}, top-40, {ev.SHORT} tokens vs the paper's 10 and {ev.LONG} vs 50; reference alpha = {ALPHA_REF:g} "
            f"(alpha_N = {s['reference']['alpha_n']:.3g}) vs the paper's 0.1%"
        )
        ts, tl = s["reference"]["threshold_log10"], lg["reference"]["threshold_log10"]
        return [
            compare(
                "tau_short",
                "alpha-sweep/tau-short",
                10**ts if ts is not None else float("nan"),
                note=note,
            ),
            compare(
                "tau_long",
                "alpha-sweep/tau-long",
                10**tl if tl is not None else float("nan"),
                note=note,
            ),
            compare(
                "m_hat_short",
                "alpha-sweep/m-hat-short",
                s["reference"]["calibrated_rate"]["estimate"],
                note=note,
            ),
            compare(
                "m_hat_long",
                "alpha-sweep/m-hat-long",
                lg["reference"]["calibrated_rate"]["estimate"],
                note=note,
            ),
            compare(
                "alpha_dagger_short",
                "alpha-sweep/alpha-dagger-short",
                s.get("alpha_dagger", float("nan")),
                note=note,
            ),
            compare(
                "alpha_dagger_long",
                "alpha-sweep/alpha-dagger-long",
                lg.get("alpha_dagger", float("nan")),
                note=note,
            ),
            compare(
                "zero_share_short",
                "alpha-sweep/zero-share-short",
                s["control_zero_share"],
                note=note,
            ),
            compare(
                "zero_share_long",
                "alpha-sweep/zero-share-long",
                lg["control_zero_share"],
                note=note,
            ),
            compare(
                "member_rate_short_max",
                "alpha-sweep/member-rate-short-max",
                s.get("at_smallest_threshold", {}).get("member_rate", float("nan")),
                note=note,
            ),
            compare(
                "alpha_n_short_max",
                "alpha-sweep/alpha-n-short-max",
                s.get("at_smallest_threshold", {}).get("alpha_n", float("nan")),
                note=note,
            ),
            compare(
                "member_rate_long_max",
                "alpha-sweep/member-rate-long-max",
                lg.get("at_smallest_threshold", {}).get("member_rate", float("nan")),
                note=note,
            ),
        ]

    def figure(self, results: dict, *, claims, differences):
        return _plot(results["models"], differences, claims)

    def notes(self, results: dict) -> list[str]:
        return [
            "bands are pointwise 95% ([EM] D.1): Clopper-Pearson on G, the same shifted by alpha_N on "
            "M; the Beta band on alpha* is in the JSON where Lemma 3 certifies it",
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
    """[EM] Fig. 4: top-40 alpha sweep: member rate, certified alpha_N, calibrated M with bands.

    Writes ``alpha-sweep.json``, ``alpha-sweep.png`` and ``alpha-sweep.pdf`` into ``out_dir`` (created) and
    returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    alpha-sweep`` runs.

    >>> from memclaim.experiments.alpha_sweep import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('alpha-sweep', True)
    """
    return AlphaSweep(quick=quick, seed=seed, out_dir=out_dir).reproduce()
