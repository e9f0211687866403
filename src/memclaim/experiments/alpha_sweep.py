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

from ..report.style import PALETTE, figure, legend, style
from . import em_verses as ev
from .common import PaperClaim, check, compare, finish, paper_claim, paper_footer

NAME = "alpha-sweep"
TITLE = "top-40 alpha sweep: member rate, certified alpha_N and calibrated rate M at two suffix lengths ([EM] Fig. 4)"
STREAMS: tuple[str, ...] = ()
ALPHA_REF = 0.01
POLICIES = ("top-k:40", "full")


def sweep_block(mem_logq: np.ndarray, ctl_logq: np.ndarray) -> dict:
    """The sweep at one length and policy, as plain lists, plus the reference-level test.

    >>> import numpy as np
    >>> from memclaim.experiments.alpha_sweep import sweep_block
    >>> b = sweep_block(np.log(np.linspace(0.2, 0.9, 50)), np.log(np.linspace(0.001, 0.5, 199)))
    >>> b["k_max"], b["reference"]["alpha_n_exact"], b["reference"]["n_claimed"]
    (199, '2/200', 29)
    """
    from ..claims.conformal import alpha_sweep, population_test

    n = ctl_logq.size
    sw = alpha_sweep(mem_logq, ctl_logq, max_points=n, include_k=range(1, n + 1))  # every K from 1 to K_max
    t = population_test(mem_logq, ctl_logq, alpha=ALPHA_REF)
    zero = float(np.mean(np.isneginf(ctl_logq)))
    out = {"n_controls": int(n), "n_members": int(mem_logq.size), "control_zero_share": zero,
           "member_zero_share": float(np.mean(np.isneginf(mem_logq))),
           "reference": {"alpha": ALPHA_REF, "k": t.k, "alpha_n": t.alpha_n, "alpha_n_exact": t.alpha_n_exact,
                         "threshold_log10": t.threshold_log10_prob, "n_claimed": t.n_claimed,
                         "generation_rate": t.generation_rate.to_dict(), "calibrated_rate": t.calibrated_rate.to_dict(),
                         "in_sample_fpr": t.in_sample_fpr, "claim_possible": t.claim_possible,
                         "beta_law": None if t.beta_law is None else t.beta_law.to_dict(), "note": t.beta_law_note},
           "claimed_at_reference": np.asarray(t.claimed, dtype=bool).tolist()}
    if sw is None:
        out["sweep"] = None
        return out
    out["alpha_dagger"] = sw.alpha_dagger
    out["k_max"] = sw.max_k
    out["sweep"] = {"k": sw.k, "alpha_n": sw.alpha_n, "threshold_log10": sw.threshold_log10_prob,
                    "member_rate": sw.member_rate, "member_lower": sw.member_lower, "member_upper": sw.member_upper,
                    "calibrated_rate": sw.calibrated_rate, "calibrated_lower": sw.calibrated_lower,
                    "calibrated_upper": sw.calibrated_upper, "control_rate_in_sample": sw.control_rate,
                    "beta_lower": sw.beta_lower, "beta_upper": sw.beta_upper}
    out["at_smallest_threshold"] = {"k": int(sw.k[-1]), "alpha_n": float(sw.alpha_n[-1]),
                                    "member_rate": float(sw.member_rate[-1]),
                                    "threshold_log10": float(sw.threshold_log10_prob[-1])}
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
    from ..claims.intervals import newcombe_paired

    a = np.asarray(long["claimed_at_reference"], dtype=bool)
    b = np.asarray(short["claimed_at_reference"], dtype=bool)
    paired = newcombe_paired(int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b)), int(np.sum(~a & ~b)))
    out = {"reference_difference_long_minus_short": paired.to_dict()}
    if short["sweep"] is None or long["sweep"] is None:
        out.update({"common_k": [], "long_at_or_above_short": []})
        return out
    ks, kl = list(short["sweep"]["k"]), list(long["sweep"]["k"])
    common = sorted(set(ks) & set(kl))
    ms = dict(zip(ks, short["sweep"]["calibrated_rate"]))
    ml = dict(zip(kl, long["sweep"]["calibrated_rate"]))
    out["common_k"] = common
    out["long_at_or_above_short"] = [bool(ml[k] >= ms[k]) for k in common]
    out["largest_shortfall"] = float(max([ms[k] - ml[k] for k in common], default=0.0))
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
        pol[policy] = {"lengths": lengths, "comparison": compare_lengths(lengths[str(ev.SHORT)], lengths[str(ev.LONG)])}
    return {"model": entry["model"], "policies": pol}


def _tau(b, ell):
    return b["lengths"][str(ell)]["reference"]["threshold_log10"]


def claims_for(block: dict) -> list[PaperClaim]:
    """The six qualitative claims of [EM] §4 / Fig. 4 on one model's block (the entries of
    ``run(...)["results"]["models"]``): each held or not on this run, by a rule fixed in advance.

    >>> from memclaim.experiments.alpha_sweep import claims_for, run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> [c.held for c in claims_for(res["results"]["models"][0])]  # doctest: +SKIP
    [False, True, True, True, True, False]
    """
    name = block["model"]["name"]
    tk = block["policies"]["top-k:40"]
    s, lg = tk["lengths"][str(ev.SHORT)], tk["lengths"][str(ev.LONG)]
    ts, tl = _tau(tk, ev.SHORT), _tau(tk, ev.LONG)
    ref_a = s["reference"]["alpha_n"]
    cmp_tk, cmp_full = tk["comparison"], block["policies"]["full"]["comparison"]
    ms, ml = s["reference"]["calibrated_rate"]["estimate"], lg["reference"]["calibrated_rate"]["estimate"]
    d = cmp_tk["reference_difference_long_minus_short"]
    sm, lm = s.get("at_smallest_threshold"), lg.get("at_smallest_threshold")
    out = [
        paper_claim(f"{name}: at the short suffix the calibrated threshold is close to 1 (a member must be nearly "
                    "certain to clear it)", "[EM] §4, Fig. 4 (tau = 0.95 at 10 tokens)",
                    ts is not None and ts >= math.log10(0.5),
                    criterion=f"tau >= 0.5 at the short length at alpha = {ALPHA_REF:g} (alpha_N = {ref_a:.3g})",
                    evidence=f"tau = 10^{ts:.2f}" if ts is not None else "no threshold (K = 0)"),
        paper_claim(f"{name}: the thresholds at the two lengths are orders of magnitude apart", "[EM] §4, Fig. 4 "
                    "(0.95 vs 8.9e-6: five orders)", ts is not None and tl is not None and ts - tl >= 3,
                    criterion="log10 tau_short - log10 tau_long >= 3 at the reference level",
                    evidence=(f"tau = 10^{ts:.2f} at {ev.SHORT} tokens, 10^{tl:.2f} at {ev.LONG}" if None not in (ts, tl)
                              else "no threshold (K = 0)")),
        paper_claim(f"{name}: at the short suffix the absolute rates are far higher, and so are the control rates",
                    "[EM] §4, Fig. 4(a)", sm is not None and lm is not None and sm["member_rate"] > lm["member_rate"]
                    and s.get("alpha_dagger", 0) > lg.get("alpha_dagger", 0),
                    criterion="member rate at the smallest threshold and the ceiling alpha-dagger (share of controls "
                              "above 0) both higher at the short length",
                    evidence=(f"member rate {sm['member_rate']:.1%} vs {lm['member_rate']:.1%}; alpha-dagger "
                              f"{s['alpha_dagger']:.1%} vs {lg['alpha_dagger']:.1%}" if sm and lm else "no sweep")),
        paper_claim(f"{name}: calibration removes the short-suffix floor: the long-suffix calibrated rate sits above "
                    "the short one across the sweep", "[EM] §4, Fig. 4(b)",
                    bool(cmp_tk["common_k"]) and all(cmp_tk["long_at_or_above_short"]),
                    criterion="M_long >= M_short at every alpha_N both lengths attain (top-40)",
                    evidence=f"{sum(cmp_tk['long_at_or_above_short'])} of {len(cmp_tk['common_k'])} common levels "
                             f"(alpha_N up to {max(cmp_tk['common_k'], default=0) / (s['n_controls'] + 1):.2%})"),
        paper_claim(f"{name}: at the low-FPR reference level the long suffix certifies more memorization", "[EM] §4 "
                    "(M = 2.64% against 1.06% at alpha_N ~ 0.1%)", ml > ms,
                    criterion=f"M_long > M_short at alpha = {ALPHA_REF:g} (point estimates; the paired 95% interval is "
                              "reported)",
                    evidence=f"M = {ml:.2%} vs {ms:.2%} at alpha_N = {ref_a:.2%}; paired difference {d['estimate']:+.2%} "
                             f"[{d['lower']:+.2%}, {d['upper']:+.2%}]"),
        paper_claim(f"{name}: under the full softmax (no atom) the long-suffix calibrated rate also exceeds the short "
                    "one across the sweep", "[EM] App. D.4, Fig. 14",
                    bool(cmp_full["common_k"]) and all(cmp_full["long_at_or_above_short"]),
                    criterion="M_long >= M_short at every alpha_N both lengths attain (full softmax)",
                    evidence=f"{sum(cmp_full['long_at_or_above_short'])} of {len(cmp_full['common_k'])} common levels"),
    ]
    return out


def _plot(blocks, differences, claims):

    colors = {ev.SHORT: PALETTE["reference"], ev.LONG: PALETTE["member"]}
    with style():
        fig, axes = figure(width=12.0, height=3.4 * len(blocks), nrows=len(blocks), ncols=3)
        axes = np.atleast_2d(axes)
        for row, b in zip(axes, blocks):
            tk = b["policies"]["top-k:40"]
            ax = row[0]
            for ell in (ev.SHORT, ev.LONG):
                sw = tk["lengths"][str(ell)]["sweep"]
                if sw is None:
                    continue
                x = np.asarray(sw["threshold_log10"])
                ax.plot(x, sw["member_rate"], "-", color=colors[ell], label=f"members, {ell} tokens")
                ax.fill_between(x, sw["member_lower"], sw["member_upper"], color=colors[ell], alpha=0.18, lw=0)
                ax.plot(x, sw["alpha_n"], "--", color=colors[ell], label=rf"certified FPR $\alpha_N$, {ell} tokens")
            ax.set_xlabel(r"threshold $\log_{10}\tau$")
            ax.set_ylabel("share of suffixes scoring above")
            ax.set_title(f"{b['model']['short']}: top-40 (Fig. 4(a))")
            legend(ax)
            for ax, policy, title in ((row[1], "top-k:40", "calibrated rate, top-40 (Fig. 4(b))"),
                                      (row[2], "full", "calibrated rate, full softmax (Fig. 14)")):
                pl = b["policies"][policy]
                for ell in (ev.SHORT, ev.LONG):
                    L = pl["lengths"][str(ell)]
                    sw = L["sweep"]
                    if sw is None:
                        continue
                    ax.plot(sw["alpha_n"], sw["calibrated_rate"], "-", color=colors[ell],
                            label=rf"$\hat M$, {ell} tokens")
                    ax.fill_between(sw["alpha_n"], sw["calibrated_lower"], sw["calibrated_upper"], color=colors[ell],
                                    alpha=0.18, lw=0)
                    if policy == "top-k:40" and L.get("alpha_dagger", 1.0) < 1.0:
                        ax.axvline(L["alpha_dagger"], color=colors[ell], lw=0.8, ls=":",
                                   label=rf"max $\alpha_N$ = {L['alpha_dagger']:.1%} ({ell} tokens)")
                ax.axhline(0.0, color=PALETTE["black"], lw=0.6)
                ref = tk["lengths"][str(ev.SHORT)]["reference"]
                ax.axvline(ref["alpha_n"], color=PALETTE["threshold"], lw=0.8, ls="--",
                           label=rf"reference $\alpha$ = {ALPHA_REF:g}: $\alpha_N$ = {ref['alpha_n_exact']}")
                ax.set_xscale("log")
                ax.set_xlabel(r"certified FPR $\alpha_N = K/(N+1)$")
                ax.set_ylabel(r"calibrated rate $\hat M = \hat G - \alpha_N$")
                ax.set_title(title)
                legend(ax)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


def run(*, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions") -> dict:
    """[EM] Fig. 4: top-40 alpha sweep: member rate, certified alpha_N, calibrated M with bands.

    Writes ``alpha-sweep.json``, ``alpha-sweep.png`` and ``alpha-sweep.pdf`` into ``out_dir`` (created) and
    returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    alpha-sweep`` runs.

    >>> from memclaim.experiments.alpha_sweep import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('alpha-sweep', True)
    """
    pops, entries = ev.natural_runs(quick, out_dir)
    blocks = [_model_block(e) for e in entries]
    claims = [c for b in blocks for c in claims_for(b)]
    differences = ev.tier_differences(quick, pops, paper_models="OLMo 2 32B base", paper_text="Wikipedia passages",
                                      paper_n="5,000 each") + [
        f"lengths: {ev.LENGTH_RULE}",
        f"reference level alpha = {ALPHA_REF:g} (alpha_N = K/(N+1) with K = floor(alpha (N+1))): the paper's "
        f"0.1% needs N >= 999 controls, the smallest level here is 1/{len(pops.controls) + 1}"]
    checks = []
    for b in blocks:
        for policy in POLICIES:
            for ell in (ev.SHORT, ev.LONG):
                L = b["policies"][policy]["lengths"][str(ell)]
                sw = L["sweep"]
                if sw is None:
                    continue
                k, n = np.asarray(sw["k"]), L["n_controls"]
                ok = np.allclose(sw["alpha_n"], k / (n + 1), rtol=0, atol=1e-15) and np.all(
                    np.asarray(sw["control_rate_in_sample"]) <= (k - 1) / n + 1e-15)
                checks.append(check(f"{b['model']['name']}, {policy}, {ell} tokens: alpha_N = K/(N+1) and at most "
                                    "K - 1 controls above each threshold ([EM] Eq. 5, C.1)", ok,
                                    f"K = 1..{int(k[-1])}", false_alarm="0 (an identity)"))
    first = blocks[0]["policies"]["top-k:40"]["lengths"]
    s, lg = first[str(ev.SHORT)], first[str(ev.LONG)]
    nm = blocks[0]["model"]["name"]
    note = (f"{nm}, top-40, {ev.SHORT} tokens vs the paper's 10 and {ev.LONG} vs 50; reference alpha = {ALPHA_REF:g} "
            f"(alpha_N = {s['reference']['alpha_n']:.3g}) vs the paper's 0.1%")
    ts, tl = s["reference"]["threshold_log10"], lg["reference"]["threshold_log10"]
    paper = [
        compare("tau_short", "alpha-sweep/tau-short", 10 ** ts if ts is not None else float("nan"), note=note),
        compare("tau_long", "alpha-sweep/tau-long", 10 ** tl if tl is not None else float("nan"), note=note),
        compare("m_hat_short", "alpha-sweep/m-hat-short", s["reference"]["calibrated_rate"]["estimate"], note=note),
        compare("m_hat_long", "alpha-sweep/m-hat-long", lg["reference"]["calibrated_rate"]["estimate"], note=note),
        compare("alpha_dagger_short", "alpha-sweep/alpha-dagger-short", s.get("alpha_dagger", float("nan")),
                note=note),
        compare("alpha_dagger_long", "alpha-sweep/alpha-dagger-long", lg.get("alpha_dagger", float("nan")),
                note=note),
        compare("zero_share_short", "alpha-sweep/zero-share-short", s["control_zero_share"], note=note),
        compare("zero_share_long", "alpha-sweep/zero-share-long", lg["control_zero_share"], note=note),
        compare("member_rate_short_max", "alpha-sweep/member-rate-short-max",
                s.get("at_smallest_threshold", {}).get("member_rate", float("nan")), note=note),
        compare("alpha_n_short_max", "alpha-sweep/alpha-n-short-max",
                s.get("at_smallest_threshold", {}).get("alpha_n", float("nan")), note=note),
        compare("member_rate_long_max", "alpha-sweep/member-rate-long-max",
                lg.get("at_smallest_threshold", {}).get("member_rate", float("nan")), note=note),
    ]
    settings = {"populations": pops.describe(), "prefix_tokens": ev.PREFIX_TOKENS, "suffix_tokens": ev.SUFFIX_TOKENS,
                "short": ev.SHORT, "long": ev.LONG, "length_rule": ev.LENGTH_RULE, "policies": list(POLICIES),
                "reference_alpha": ALPHA_REF, "confidence": 0.95, "prompt": "natural prefix",
                "models": [b["model"] for b in blocks]}
    fig = _plot(blocks, differences, claims)
    return finish(NAME, title=TITLE, reproduces=["[EM] Fig. 4", "[EM] §4 'Continuous calibration'", "[EM] App. C.4.4",
                                                  "[EM] App. D.4, Fig. 14 (full softmax)"],
                  seed=seed, quick=quick, streams=STREAMS, settings=settings, results={"models": blocks},
                  paper_numbers=paper, checks=checks, figure=fig, out_dir=out_dir, paper_claims=claims,
                  differences=differences,
                  notes=["bands are pointwise 95% ([EM] D.1): Clopper-Pearson on G, the same shifted by alpha_N on M; "
                         "the Beta band on alpha* is in the JSON where Lemma 3 certifies it",
                         "every number is a deterministic function of the stored scores (the seed is unused)"])
