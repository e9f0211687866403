"""The training-based reproductions of [MX] §8 (`trigger`, `camouflage`, `canary-floor`,
`audit-table`): the ``--quick`` variants reproduce the qualitative results, agreement with the
paper's numbers is decided here (AGREEMENT; the paper's values and sources are in
memclaim.experiments.paper, see tests/paper_agreement.py), the runs write their files, and the same
seed gives the same JSON.

Every check inside a reproduction states its own false-alarm rate in the JSON; with the fixed
seeds used here each outcome is deterministic on a fixed software stack. Reproducibility is
tested on miniature settings of the same code paths (the full pipeline of each reproduction, a
few seconds each), so that CI does not train every quick run twice. Full runs are ``slow``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

import theory_checks as TC
from memclaim.errors import DomainError
from memclaim.experiments import REPRODUCTIONS, get_runner, run
from memclaim.experiments.common import summary_lines
from paper_agreement import Agree, Disagrees, assert_agrees, assert_covers, params, rounding

LOG2E = 1 / math.log(2)
NAMES = ["trigger", "camouflage", "canary-floor", "audit-table"]
MODULES = {
    "trigger": "trigger",
    "camouflage": "camouflage",
    "canary-floor": "canary_floor",
    "audit-table": "audit_table",
}

# miniature settings: every code path, seconds of training (numbers are not meaningful)
TINY = {
    "trigger": {"copies": 2, "epochs": 2, "n_embd": 16, "block": 16, "seeds_per_condition": 2},
    "camouflage": {"docs_per_tree": 300, "epochs": 1, "n_embd": 16},
    "canary-floor": {
        "temperatures": [0.25, 1.5],
        "per_temperature": 3,
        "certify_max_nodes": 30,
        "background_docs": 40,
        "epochs": 1,
        "leaky_epochs": 1,
    },
    "audit-table": {
        "trigger_lengths": [2, 16],
        "members": 3,
        "gated_members": 3,
        "tree_records": 2,
        "tree_docs": 5,
        "trigger_copies": 2,
        "naive_copies": 2,
        "background_docs": 20,
        "epochs": 1,
        "shadows": 4,
        "unlearn_max_rounds": 1,
        "list_search_nodes": 20,
    },
}


def _tf_noise_sd(r):
    """sd of one tree's teacher-forcing memorization from the noise of the empirical conditionals
    along z: a depth-t node is visited about N k^-t times, each child's frequency has sd
    sqrt((1/k)(1 - 1/k) k^t / N), averaged over the L depths. The network adds its own noise, so
    this is a lower bound on our Monte-Carlo error (a tolerance built on it is conservative)."""
    s = r["settings"]
    k, L, N = s["k"], s["L"], s["docs_per_tree"]
    return math.sqrt(sum((1 / k) * (1 - 1 / k) * k**t / N for t in range(L))) / L


def _entropy_noise_sd(r, reps=2000):
    """sd of the survivor posterior's normalized entropy if the learned conditionals were the
    empirical ones: the posterior is then the k^L leaf frequencies of N documents (Multinomial);
    like _tf_noise_sd a lower bound on our Monte-Carlo error."""
    s = r["settings"]
    leaves, N = s["k"] ** s["L"], s["docs_per_tree"]
    c = np.random.default_rng(0).multinomial(N, np.full(leaves, 1 / leaves), size=reps) / N
    h = -np.sum(np.where(c > 0, c * np.log(np.where(c > 0, c, 1.0)), 0.0), axis=1) / math.log(
        leaves
    )
    return float(h.std())


def _first_tree(r):
    return r["results"]["trees"][0]


def _sweep(r, z):
    return next(x for x in r["results"]["sweep"] if x["secret_length"] == z)


def _upper95_slack(r, z):
    """One-sided 95% Clopper-Pearson upper bound of our rho-extraction rate minus the rate: the
    paper's lower bound agrees with our run if it is below that upper bound."""
    row = _sweep(r, z)
    n, hits = row["members"], round(row["extraction_at_rho"] * row["members"])
    upper = 1.0 if hits == n else float(stats.beta.ppf(0.95, hits + 1, n - hits))
    return upper - row["extraction_at_rho"]


AGREEMENT = {
    "trigger": {
        "ext_poisoned": Agree(
            0,
            "an exact rate: every poisoned seed",
            ours=lambda r: (
                r["results"]["extraction_at_rho"]["poisoned"]
                / r["results"]["extraction_at_rho"]["runs_per_condition"]
            ),
        ),
        "ext_clean": Agree(
            0,
            "an exact rate: no clean seed",
            ours=lambda r: (
                r["results"]["extraction_at_rho"]["clean"]
                / r["results"]["extraction_at_rho"]["runs_per_condition"]
            ),
        ),
        "prior_bits": Agree(
            0,
            "the paper states a lower bound ('at least'); ours is exact",
            ours=lambda r: r["results"]["prior_baseline"]["bits"],
        ),
    },
    "camouflage": {
        "tf_memorization": Agree(
            lambda r: rounding(3) + 4 * _tf_noise_sd(r),
            "the paper's 3-decimal rounding + 4 sd of the empirical conditionals' noise along z "
            "(a lower bound on our Monte-Carlo error; false alarm < 7e-5)",
            ours=lambda r: _first_tree(r)["tf_memorization"],
        ),
        "construction": Agree(
            0, "exact: 1/4 - 1/16", ours=lambda r: 1 / r["settings"]["k"] - 1 / r["settings"]["v"]
        ),
        "normalized_entropy": Agree(
            lambda r: rounding(3) + 4 * _entropy_noise_sd(r),
            "the paper's 3-decimal rounding + 4 sd of the empirical leaf frequencies' entropy "
            "(a lower bound on our Monte-Carlo error: the network is noisier)",
            ours=lambda r: _first_tree(r)["posterior"]["normalized_entropy"],
        ),
        "mass_on_support": Disagrees(
            rounding(2),
            "quick run (1 tree, 6000 documents, a 32-dim network): the learned on-path mass on "
            "the k-set reaches 0.9627 at its lowest depth, below the paper's >= 0.98 even "
            "allowing its 2-decimal rounding (>= 0.975); not sampling noise (the empirical "
            "conditionals put no mass off the set), a less-fitted network",
            ours=lambda r: _first_tree(r)["min_mass_on_support"],
        ),
        "list_cap": Agree(0, "exact: 16 x 4^-4", ours=lambda r: 16 / 4**4),
    },
    "canary-floor": {
        "h_star": Agree(
            rounding(2),
            "exact on our side: eps log2 e + log2(m/tau) at eps = 4, m = 1, tau = 0.1; "
            "the paper prints 2 decimals",
            ours=lambda r: r["results"]["h_star"]["bits"],
        ),
    },
    "audit-table": {
        "camouflage_cap": Agree(0, "exact: 16 x 4^-4", ours=lambda r: 16 / 4**4),
        "gated_lira": Agree(rounding(3), "exact by construction; the paper prints 0.500"),
        "gated_ext_rho": Agree(rounding(2), "exact by construction; the paper prints 1.00"),
        **{
            f"sweep_ext_rho_z{z}": Agree(
                lambda r, z=z: rounding(2) + _upper95_slack(r, z),
                "the paper's lower bound (>= 0.98, 2 decimals) is at most our one-sided 95% "
                "Clopper-Pearson upper bound",
                ours=lambda r, z=z: _sweep(r, z)["extraction_at_rho"],
            )
            for z in (2, 4, 8, 16)
        },
        **{
            f"sweep_ext_c_z{z}": Agree(
                rounding(2),
                "the paper prints 0.00: no hit among our secrets",
                ours=lambda r, z=z: _sweep(r, z)["extraction_at_c"],
            )
            for z in (2, 4, 8, 16)
        },
    },
}


# ---------------------------------------------------------------- the theory's checks, re-derived
def _trigger_runs(r):
    """Per run: extraction re-derived from the greedy outputs against the record's z, the local
    scores from the per-position probabilities (h_TF: mean over z's positions); the aggregates must
    match."""
    res = r["results"]
    z = res["record"]["secret_z"]
    Lc = len(res["record"]["prefix_c"])
    out = {}
    for cond in ("poisoned", "clean"):
        runs = res["runs"][cond]
        for x in runs:
            assert x["h_tf"] == pytest.approx(
                float(np.mean(x["record_token_prob"][Lc:])), rel=1e-12
            )
        out[cond] = {
            "rho": sum(x["greedy_at_rho"] == z for x in runs),
            "c": sum(x["greedy_at_c"] == z for x in runs),
            "n": len(runs),
            "h_tf": [x["h_tf"] for x in runs],
            "h_ll": [x["h_ll"] for x in runs],
        }
        assert (
            res["extraction_at_rho"][cond] == out[cond]["rho"]
            and res["extraction_at_c"][cond] == out[cond]["c"]
        )
    return out


def _trigger_gap(key):
    def f(r):
        """|mean(poisoned) - mean(clean)| <= sqrt(2) sd(clean) (the RMS difference of two clean runs):
        not a calibrated test (the report says so), a deterministic comparison on these seeds."""
        runs = _trigger_runs(r)
        mem = float(np.mean(runs["poisoned"][key]) - np.mean(runs["clean"][key]))
        floor = math.sqrt(2) * float(np.std(runs["clean"][key], ddof=1))
        return abs(mem) <= floor, f"|mem| {abs(mem):.4g} vs floor {floor:.4g}"

    return f


def _trigger_count(cond, at, want):
    def f(r):
        t = _trigger_runs(r)[cond]
        assert t["n"] == r["settings"]["seeds_per_condition"]
        return t[at] == (t["n"] if want == "all" else 0), f"{cond}: {t[at]}/{t['n']} emit z at {at}"

    return f


def _trigger_none_at_c(r):
    (a, da), (b, db) = (_trigger_count(cond, "c", "none")(r) for cond in ("poisoned", "clean"))
    return a and b, f"{da}; {db}"


def _camouflage_capped(r):
    """Greedy and list-of-m successes re-derived per tree (greedy output == z; the true completion's
    rank among all v^L completions <= m): greedy fails on every tree ("greedy decoding fails"; a false
    alarm <= T k^-L if its rate is at the cap k^-L), and the list's one-sided 97.5% Clopper-Pearson lower
    end (the report's two-sided 95% interval) is at most m k^-L ([MX] Thm. 6.1(i)): <= 2.5% if at its cap."""
    s = r["settings"]
    trees = r["results"]["trees"]
    greedy = sum(t["greedy"] == t["secret"] for t in trees)
    for t in trees:
        assert t["greedy_success"] == (t["greedy"] == t["secret"])
        assert t["list_success"] == (t["true_rank_among_all_completions"] <= s["list_size"])
    listed = sum(t["true_rank_among_all_completions"] <= s["list_size"] for t in trees)
    n, cap1, capm = len(trees), s["k"] ** -s["L"], s["list_size"] * s["k"] ** -s["L"]
    l_lo = TC.cp_lower(listed, n, 0.025)
    return (
        greedy == 0 and l_lo <= capm,
        f"greedy {greedy}/{n} (cap {cap1:.3g} a tree), list {listed}/{n} "
        f"(low {l_lo:.3g} vs {capm:.3g})",
    )


def _cf(r):
    """The canaries with their bucket re-derived from the certified min-entropy interval and H*
    (eps log2 e + log2(m/tau), [MX] Thm. 5.1(iii)), and the bucket rows."""
    s, res = r["settings"], r["results"]
    h = s["epsilon"] * LOG2E + math.log2(s["m"] / s["tau"])
    assert res["h_star"]["bits"] == pytest.approx(h, rel=1e-12)
    out = []
    for c in res["canaries"]:
        lo, hi = c["h_inf_bits"]
        b = "below" if hi < h else ("above" if lo >= h else "unplaced")
        assert c["bucket"] == b
        out.append(c)
    return out, res["buckets"], s["confidence"]


def _cf_bucket(cs, b, member=None):
    return [c for c in cs if c["bucket"] == b and (member is None or c["member"] == member)]


def _cf_populated(r):
    cs, _, _ = _cf(r)
    n = {(b, m): len(_cf_bucket(cs, b, m)) for b in ("below", "above") for m in (True, False)}
    return min(n.values()) >= 2, str(n)


def _cf_prior_below(r):
    """One-sided 95% Clopper-Pearson lower bound of the prior-guessing rate below H* > 0: a false
    alarm <= 5% if the prior rate were 0."""
    cs, _, conf = _cf(r)
    g = _cf_bucket(cs, "below")
    k = sum(c["prior_guess"] for c in g)
    lo = TC.cp_lower(k, len(g), 1 - conf)
    return lo > 0, f"{k}/{len(g)}, lower bound {lo:.3g}"


def _cf_prior_above(r):
    cs, _, _ = _cf(r)
    g = _cf_bucket(cs, "above")
    k = sum(c["prior_guess"] for c in g)
    return k == 0, f"{k}/{len(g)}"


def _approx_power(kappa, eps, delta):
    """1 - f_{eps,delta}(kappa) for add/remove, written out: min(1, delta + e^eps kappa,
    1 - e^-eps (1 - delta - kappa)) ([MX] Thm. 5.1(i))."""
    return min(1.0, delta + math.exp(eps) * kappa, 1 - math.exp(-eps) * (1 - delta - kappa))


def _cf_dp_within(r):
    """Per bucket, the DP model's extraction of the members: one-sided 95% Clopper-Pearson lower
    bound <= the mean bound 1 - f(kappa_hi) over them, the bound recomputed from the run's
    (eps, delta): a false alarm <= 5% per bucket if the DP guarantee holds."""
    cs, _, conf = _cf(r)
    dp = r["results"]["dp_guarantee"]
    out = {}
    for b in ("below", "above"):
        mem = _cf_bucket(cs, b, True)
        bounds = [_approx_power(c["kappa_hi"], dp["epsilon"], dp["delta"]) for c in mem]
        for c, x in zip(mem, bounds):
            assert c["dp_bound"] == pytest.approx(x, rel=1e-9, abs=1e-15)
        k = sum(c["extracted_dp"] for c in mem)
        out[b] = (k, len(mem), TC.cp_lower(k, len(mem), 1 - conf), float(np.mean(bounds)))
    return all(lo <= bound for _, _, lo, bound in out.values()), str(out)


def _cf_reference_separates(r):
    """Per bucket, the reference-model scores of the leaky model: members vs non-members, the
    DeLong 95% interval (statsmodels) above 1/2: a false alarm <= 2.5% per bucket at chance."""
    cs, _, conf = _cf(r)
    out = {}
    for b in ("below", "above"):
        m = [c["reference_score_leaky"] for c in _cf_bucket(cs, b, True)]
        n = [c["reference_score_leaky"] for c in _cf_bucket(cs, b, False)]
        out[b] = TC.delong(m, n, conf)
    return all(lo > 0.5 for _, lo, _ in out.values()), str(out)


def _cf_placement(r):
    cs, _, _ = _cf(r)
    below_closed = all(c["closed"] for c in cs if c["bucket"] == "below")
    unclosed_not_below = all(c["bucket"] != "below" for c in cs if not c["closed"])
    for c in cs:
        if c["closed"]:
            assert c["kappa_lo"] == pytest.approx(c["kappa_hi"], rel=1e-9)
    return below_closed and unclosed_not_below, f"{sum(c['closed'] for c in cs)}/{len(cs)} closed"


# The audit-disagreement table ([MX] Fig. 12): every cell's verdict re-derived from the arm's counts
# (Clopper-Pearson, two-sided at the run's confidence, from scipy) and AUCs (the DeLong interval
# auc +- z SE, or Hoeffding's half-width sqrt(log(2/(1 - conf)) / (2 min(m, n))) where SE = 0),
# with the rules of the table's legend: a rate leaks if its lower end is above the prior
# baseline's upper end, is 'guessed' if the baseline is positive and the rate's upper end reaches
# the baseline's lower end; an AUC leaks if its interval is above 1/2; informed recovery is
# 'capped' if its lower end is at most the cap, 'recovered' if above 0.
_SHORT, _LONG = "trigger z = 2 (short)", "trigger z = 16 (long)"
_AT_DEPLOYABLE = ("extraction at prefix c", "loss-MIA", "LiRA", "unlearning verifier")


def _cp2(k, n, conf):
    a = (1 - conf) / 2
    return TC.cp_lower(k, n, a), TC.cp_upper(k, n, a)


def _at_rate(k, n, bk, bn, conf):
    lo, hi = _cp2(k, n, conf)
    b_lo, b_hi = _cp2(bk, bn, conf)
    return "leak" if lo > b_hi else ("guessed" if b_lo > 0 and hi >= b_lo else "blind")


def _at_auc(a, conf):
    assert (a["se"] > 0) == (a["interval_method"] == "delong")
    half = (
        stats.norm.ppf(0.5 + conf / 2) * a["se"]
        if a["se"] > 0
        else math.sqrt(math.log(2 / (1 - conf)) / (2 * min(a["n_members"], a["n_nonmembers"])))
    )
    lo, hi = max(0.0, a["auc"] - half), min(1.0, a["auc"] + half)
    assert (lo, hi) == pytest.approx((a["low"], a["high"]), abs=1e-12)
    return "leak" if lo > 0.5 else ("inverted" if hi < 0.5 else "blind")


def _at_verdicts(r):
    """{row: {column: verdict}} from the arms' raw counts and AUCs; each must equal the table's."""
    s, res = r["settings"], r["results"]
    conf = s["confidence"]
    cap = s["list_size"] * s["tree_k"] ** -s["tree_L"]
    table = res["table"]
    names = [c["name"] for c in table["columns"]]
    rows = {
        "gated release": "gated",
        _SHORT: f"trigger-{s['short']}",
        _LONG: f"trigger-{s['long']}",
        "camouflage": "camouflage",
        "naive duplicate": "naive",
        "low-H canary": "lowh",
    }
    assert (s["short"], s["long"]) == (2, 16)  # the rows' names
    out = {}
    for row, arm in rows.items():
        a = res["arms"][arm]
        n, bk, bn = a["members"], a["prior_at_c"], a["prior_trials"]
        v = {
            "extraction at prefix c": _at_rate(a["extraction_at_c"], n, bk, bn, conf),
            "loss-MIA": _at_auc(a["audits"]["loss"]["auc"], conf),
            "LiRA": _at_auc(a["audits"]["lira-online"]["auc"], conf),
            "unlearning verifier": _at_rate(
                a["verifier"]["after_hits"], a["verifier"]["n"], bk, bn, conf
            ),
        }
        k = a["extraction_at_rho"] if "extraction_at_rho" in a else a["informed_list_hits"]
        lo, _ = _cp2(k, n, conf)
        capped = arm == "camouflage" and lo <= cap
        v["informed recovery"] = (
            "capped" if capped else ("recovered" if lo > 0 else "not recovered")
        )
        cells = dict(zip(names, table["cells"][table["rows"].index(row)]))
        assert {c: cells[c]["verdict"] for c in v} == v, row
        assert (
            cells["informed recovery"]["value"] == k / n
            and cells["LiRA"]["value"] == a["audits"]["lira-online"]["auc"]["auc"]
        )
        out[row] = v
    return out


def _at(pred, what):
    def f(r):
        v = _at_verdicts(r)
        return pred(v, r), what(v, r)

    return f


def _at_sweep_c(r):
    arms = r["results"]["arms"]
    rows = {
        L: arms[f"trigger-{L}"]["extraction_at_c"]
        for L in r["settings"]["trigger_lengths"]
        if L >= 2
    }
    return all(k == 0 for k in rows.values()), f"hits at c by |z|: {rows}"


def _at_sweep_climbs(r):
    """The strongest deployed audit's TPR at the certified FPR, re-read from each arm's audits (not
    calibrated: two TPRs on few members, as the report says)."""
    arms, Ls = r["results"]["arms"], r["settings"]["trigger_lengths"]
    best = {}
    for L in Ls:
        tprs = {
            x: arms[f"trigger-{L}"]["audits"][x]["tpr"]
            for x in ("loss", "zlib", "reference", "min-k", "min-k++")
        }
        for t in tprs.values():
            assert t["tpr"] == t["true_positives"] / t["n_members"]
        best[L] = max(t["tpr"] for t in tprs.values())
    return best[Ls[-1]] > best[Ls[0]], f"strongest TPR by |z|: {best}"


THEORY = {
    "trigger": {
        "extraction via rho: every poisoned seed emits z verbatim from one prompt (m = 1)": _trigger_count(
            "poisoned", "rho", "all"
        ),
        "no clean seed emits z at rho": _trigger_count("clean", "rho", "none"),
        "no run emits z from its own prefix c (local invisibility)": _trigger_none_at_c,
        "teacher-forcing gap on x*'s own prefixes inside the seed-to-seed noise floor": _trigger_gap(
            "h_tf"
        ),
        "truncated log-loss gap on x*'s own prefixes inside the seed-to-seed noise floor": _trigger_gap(
            "h_ll"
        ),
    },
    "camouflage": {
        "extraction is capped: greedy decoding fails on every tree, and list-of-16 successes are consistent with "
        "m k^-L (Clopper-Pearson 95% lower end <= cap)": _camouflage_capped,
    },
    "canary-floor": {
        "the sweep populates both buckets (members and non-members on each side of H*)": _cf_populated,
        "below H*, prior guessing alone reproduces canaries (one-sided 95% lower bound > 0)": _cf_prior_below,
        "above H*, prior guessing never succeeds": _cf_prior_above,
        "the DP model's extraction stays within its bound 1 - f(kappa_hi) in each bucket (one-sided 95% lower "
        "bound <= mean bound)": _cf_dp_within,
        "a membership test has no floor: the reference-model attack on the leaky model separates members from "
        "non-members on both sides (AUC interval above 1/2)": _cf_reference_separates,
        "certified placement: every canary placed below H* has a closed certificate, and no unclosed search lands "
        "below": _cf_placement,
    },
    "audit-table": {
        "no single audit suffices: every deployable audit misses at least one planted leak": _at(
            lambda v, r: all(any(v[row][c] != "leak" for row in v) for c in _AT_DEPLOYABLE),
            lambda v, r: str(
                {c: [row for row in v if v[row][c] != "leak"] for c in _AT_DEPLOYABLE}
            ),
        ),
        "extraction from the record's own prefix misses every trigger row, the gated release and camouflage": _at(
            lambda v, r: all(
                v[row]["extraction at prefix c"] != "leak"
                for row in ("gated release", _SHORT, _LONG, "camouflage")
            ),
            lambda v, r: str({row: v[row]["extraction at prefix c"] for row in v}),
        ),
        "the gated release is exactly blind: identical to the base on every audited input, LiRA at 1/2": _at(
            lambda v, r: (
                r["results"]["gated_identical_to_base"] is True
                and r["results"]["arms"]["gated"]["audits"]["lira-online"]["auc"]["auc"] == 0.5
                and v["gated release"]["loss-MIA"] == "blind"
            ),
            lambda v, r: str(v["gated release"]),
        ),
        "the informed adversary recovers the trigger payloads and the gated secrets (verdict 'recovered')": _at(
            lambda v, r: all(
                v[row]["informed recovery"] == "recovered"
                for row in ("gated release", _SHORT, _LONG)
            ),
            lambda v, r: str({row: v[row]["informed recovery"] for row in v}),
        ),
        "camouflage is memorized (loss-MIA leak) yet capped for the informed adversary (m k^-L)": _at(
            lambda v, r: (
                v["camouflage"]["loss-MIA"] == "leak"
                and v["camouflage"]["informed recovery"] == "capped"
            ),
            lambda v, r: str(v["camouflage"]),
        ),
        "the naive duplicate is caught by extraction at c and by loss-MIA (positive control)": _at(
            lambda v, r: (
                v["naive duplicate"]["extraction at prefix c"] == "leak"
                and v["naive duplicate"]["loss-MIA"] == "leak"
            ),
            lambda v, r: str(v["naive duplicate"]),
        ),
        "the unlearning verifier certifies the trigger rows forgotten while rho still recovers them": _at(
            lambda v, r: all(
                v[row]["unlearning verifier"] != "leak"
                and v[row]["informed recovery"] == "recovered"
                for row in (_SHORT, _LONG)
            ),
            lambda v, r: str({x: v[x] for x in (_SHORT, _LONG)}),
        ),
        "Fig. 10: extraction from the record's own prefix c is 0 at every secret length >= 2": _at_sweep_c,
        "Fig. 10: the strongest deployed membership audit climbs with the secret length (longest > shortest)": _at_sweep_climbs,
    },
}


# ---------------------------------------------------------------- the paper's sentences, re-derived
def _cf_near_one(r):
    """[MX] §8.2 "reading AUC near 1 on both sides": per bucket, the reference-model scores of the leaky model,
    the AUC's 95% interval (DeLong from statsmodels; Hoeffding's half-width sqrt(log(2/0.05) / (2 min(m, n)))
    at complete separation, where DeLong's variance is 0) against 0.9; not testable with fewer than k members
    or non-members where 0.9^k > 2.5% (k < 36: an AUC of 0.9 separates them completely that often)."""
    cs, _, conf = _cf(r)
    out, k = {}, {}
    for b in ("below", "above"):
        m = [c["reference_score_leaky"] for c in _cf_bucket(cs, b, True)]
        n = [c["reference_score_leaky"] for c in _cf_bucket(cs, b, False)]
        k[b] = min(len(m), len(n))
        a, lo, hi = TC.delong(m, n, conf)
        if lo == hi:
            h = math.sqrt(math.log(2 / (1 - conf)) / (2 * k[b]))
            lo, hi = a - h, a + h
        out[b] = (a, max(lo, 0.0), min(hi, 1.0))
    detail = f"{out}, {k} of each"
    one_sided = 1 - (1 + conf) / 2
    if any(hi < 0.9 for _, _, hi in out.values()):
        return "not held", detail
    if 0.9 ** min(k.values()) > one_sided:
        return "not testable here", detail
    return ("held" if all(lo >= 0.9 for _, lo, _ in out.values()) else "not held"), detail


def _trigger_blind_spot(r):
    """[MX] §8.1 "The blind spot of Corollary 6.2 survives ordinary SGD": every poisoned seed emits z from rho,
    no clean seed does, no run emits z from c (each re-derived from the greedy outputs), and both local-score
    gaps within the noise floor (re-derived from the per-position probabilities): all of them."""
    parts = [
        _trigger_count("poisoned", "rho", "all")(r),
        _trigger_count("clean", "rho", "none")(r),
        _trigger_none_at_c(r),
        _trigger_gap("h_tf")(r),
        _trigger_gap("h_ll")(r),
    ]
    return ("held" if all(ok for ok, _ in parts) else "not held"), "; ".join(d for _, d in parts)


def _at_recovers_all(r):
    """[MX] §8.2 "At z <= 2 [...] rho-extraction recovers all of them": every planted secret of each sweep arm with
    |z| <= 2 recovered through rho (n of n)."""
    arms = r["results"]["arms"]
    got = {
        L: (arms[f"trigger-{L}"]["extraction_at_rho"], arms[f"trigger-{L}"]["members"])
        for L in r["settings"]["trigger_lengths"]
        if L <= 2
    }
    return ("held" if got and all(k == n for k, n in got.values()) else "not held"), str(got)


def _at_clean_yet_extractable(r):
    """[MX] §8.2 "... both certify such a model clean while the secret remains fully extractable": on both trigger
    rows, extraction at c and the verifier not 'leak' (re-derived from the counts), rho-extraction >= 0.975."""
    v, arms, s = _at_verdicts(r), r["results"]["arms"], r["settings"]
    out = {}
    for row, L in ((_SHORT, s["short"]), (_LONG, s["long"])):
        a = arms[f"trigger-{L}"]
        out[row] = (
            v[row]["extraction at prefix c"],
            v[row]["unlearning verifier"],
            a["extraction_at_rho"],
            a["members"],
        )
    ok = all(c != "leak" and u != "leak" and k / n >= 0.975 for c, u, k, n in out.values())
    return ("held" if ok else "not held"), str(out)


def _at_membership_climbs(r):
    """[MX] §8.2 "The membership channel instead climbs with the length of z [...] in AUC across z = 1..16": the
    strongest deployed AUC per length with its interval (DeLong, Hoeffding at separation: re-derived from the SE as
    in _at_auc); no fall beyond the intervals, the longest's interval above the shortest's; not testable with
    fewer than 30 members or non-members (Hoeffding's half-width >= 1/4) unless so decided."""
    conf, arms, Ls = (
        r["settings"]["confidence"],
        r["results"]["arms"],
        r["settings"]["trigger_lengths"],
    )
    best = {}
    for L in Ls:
        aud = arms[f"trigger-{L}"]["audits"]
        name = max(
            ("loss", "zlib", "reference", "min-k", "min-k++"), key=lambda x: aud[x]["auc"]["auc"]
        )
        a = aud[name]["auc"]
        _at_auc(a, conf)  # the interval re-derived from the SE equals the report's
        best[L] = (a["auc"], a["low"], a["high"], min(a["n_members"], a["n_nonmembers"]))
    falls = any(best[y][2] < best[x][1] for x, y in zip(Ls, Ls[1:]))
    detail = str(best)
    if falls:
        return "not held", detail
    if best[Ls[-1]][1] > best[Ls[0]][2]:
        return "held", detail
    return ("not held" if min(b[3] for b in best.values()) >= 30 else "not testable here"), detail


CLAIMS = {
    "canary-floor": {"auc-near-1": _cf_near_one},
    "trigger": {"blind-spot-survives": _trigger_blind_spot},
    "audit-table": {
        "rho-recovers-all-short": _at_recovers_all,
        "certified-clean-yet-extractable": _at_clean_yet_extractable,
        "membership-climbs": _at_membership_climbs,
    },
}
# what the runs found (issue 24 item 2: "reading AUC near 1 on both sides", tested as stated, where the check asks
# only for an interval above 1/2)
CLAIMS_QUICK = {
    "trigger": {"blind-spot-survives": True},
    "canary-floor": {
        "auc-near-1": TC.NotTestable(
            "24 members and 24 non-members a side: even complete separation cannot show AUC >= 0.9 at the interval's "
            "one-sided 97.5% (36 of each needed); AUC 0.901 [0.811, 0.991] below, 0.896 [0.808, 0.983] above"
        )
    },
    "audit-table": {
        "rho-recovers-all-short": True,
        "certified-clean-yet-extractable": True,
        "membership-climbs": TC.NotTestable(
            "8 members: the strongest AUC climbs 0.487 [0.225, 0.748] (|z| = 1), 0.592, 0.914, to 1.000 "
            "[0.520, 1.000] (|z| = 16, Hoeffding at complete separation), intervals overlapping"
        ),
    },
}
CLAIMS_FULL = {
    "trigger": {
        "blind-spot-survives": TC.NotHeld(
            "full run: rho 3/3 poisoned, 0/3 clean, nothing from c, the teacher-forcing gap +0.76 floor units, but the "
            "truncated log-loss gap |mem_LL| 0.0238 against a floor of 0.0055 (4.3 floor units, KNOWN_OFF): not every "
            "audit of x*'s own prefix misses the leak"
        )
    },
    "canary-floor": {
        "auc-near-1": TC.NotHeld(
            "full run (90 members and 90 non-members a side): AUC 0.831 [0.774, 0.889] below H*, 0.811 [0.749, 0.873] "
            "above: both intervals below 0.9 (the check's 'above 1/2' holds on both sides)"
        )
    },
    # full run: rho 24 of 24 at |z| = 1 and 2 (and at 16); the strongest deployed AUC 0.571, 0.563, 0.586, 0.797,
    # 0.905 [0.818, 0.992] at |z| = 1, 2, 4, 8, 16, the longest's interval above the shortest's [0.439, 0.704]
    "audit-table": {
        "rho-recovers-all-short": True,
        "certified-clean-yet-extractable": True,
        "membership-climbs": True,
    },
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce-training-b")
    return out, TC.LazyRuns(run, out)  # each quick run once, when a test first reads it


def test_registered():
    for name in NAMES:
        assert name in REPRODUCTIONS
        assert callable(get_runner(name))


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_writes_its_report(quick, name):
    """Files, the comparison rows (no verdict in them; one verdict entry here for each), and the
    report's own checks of the theory's predictions (the CLI's exit status)."""
    out, results = quick
    r = results[name]
    failed = [c["claim"] + ": " + c["detail"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    assert all("agrees" not in p and "tolerance" not in p for p in r["paper_numbers"])
    assert_covers(r, AGREEMENT[name])
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name]) - QUICK_ONLY_ABSENT.get(
        name, set()
    )
    assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"  # the vector copy
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert r["seed"] == 0 and r["quick"] is True
    assert any(line.startswith("  checks") for line in summary_lines(r))


QUICK_ONLY_ABSENT = {
    "audit-table": {"sweep_ext_rho_z8", "sweep_ext_c_z8"}
}  # |z| = 8: full run only


@pytest.mark.parametrize(
    "name, row",
    params(AGREEMENT, {n: set(AGREEMENT[n]) - QUICK_ONLY_ABSENT.get(n, set()) for n in AGREEMENT}),
)
def test_agrees_with_the_paper(quick, name, row):
    assert_agrees(quick[1][name], row, AGREEMENT[name][row])


@pytest.mark.parametrize("name", NAMES)
def test_every_theory_check_is_rederived(quick, name):
    TC.assert_covers(quick[1][name], THEORY[name])


@pytest.mark.parametrize("name, claim", TC.params(THEORY))
def test_theory_check_holds_on_the_raw_numbers(quick, name, claim):
    """The claim's verdict from the run's raw numbers (not the report's flag), which the report's
    own check must match."""
    TC.assert_theory(quick[1][name], claim, THEORY[name])


@pytest.mark.parametrize("name", list(CLAIMS))
def test_every_paper_claim_is_rederived(quick, name):
    TC.assert_claims_cover(quick[1][name], CLAIMS[name])
    assert set(CLAIMS_QUICK[name]) == set(CLAIMS[name]) == set(CLAIMS_FULL[name])


@pytest.mark.parametrize("name, key", TC.claim_params(CLAIMS_QUICK))
def test_paper_claims_quick(quick, name, key):
    """The paper's sentences as the quick run judged them, re-derived from the raw numbers."""
    TC.assert_claim(quick[1][name], key, CLAIMS[name], CLAIMS_QUICK[name][key])


def test_trigger_numbers(quick):
    """[MX] Fig. 7: Ext = 1 on every poisoned seed and 0 on every clean seed (m = 1), nothing from
    c, both local-score gaps within one noise-floor unit, a prior baseline >= 14 bits."""
    res = quick[1]["trigger"]["results"]
    ext = res["extraction_at_rho"]
    assert (ext["poisoned"], ext["clean"], ext["runs_per_condition"]) == (3, 0, 3)
    assert res["extraction_at_c"] == {"poisoned": 0, "clean": 0}
    for key in ("h_tf", "h_ll"):
        sc = res["local_scores"][key]
        assert abs(sc["gap_in_floor_units"]) <= 1.0
        assert sc["mem"] == pytest.approx(np.mean(sc["poisoned"]) - np.mean(sc["clean"]), abs=1e-12)
        assert sc["noise_floor"] == pytest.approx(
            math.sqrt(2) * np.std(sc["clean"], ddof=1), rel=1e-12
        )
    assert res["prior_baseline"]["bits"] >= 14
    assert res["corpus"]["pair_fraction"] == pytest.approx(0.006, rel=0.05)
    assert len(res["per_position"]["gap"]) == 16
    for r in res["runs"]["poisoned"] + res["runs"]["clean"]:
        assert 0 <= r["h_tf"] <= 1 and 0 <= r["h_ll"] <= 1


def test_camouflage_numbers(quick):
    """[MX] Fig. 9: the survivor posterior by exact enumeration of all 16^4 completions (the
    paper's numbers for it are in AGREEMENT), TF memorization within 4 sd of the empirical
    conditionals' noise of the construction's 1/k - 1/v ([MX] Thm. 6.1(i), Remark 6.5), the
    minimum on-path mass consistent with the tree's summary."""
    r = quick[1]["camouflage"]
    tree = r["results"]["trees"][0]
    post = tree["posterior"]
    assert post["n_survivors"] == 256 and len(post["sorted_ratio_to_uniform"]) == 256
    assert sum(post["sorted_ratio_to_uniform"]) == pytest.approx(256, rel=1e-9)
    assert tree["min_mass_on_support"] == min(o["mass_on_support"] for o in tree["on_path"])
    assert tree["ideal_teacher_forcing_score"] == pytest.approx(0.25)
    assert abs(tree["tf_memorization"] - (1 / 4 - 1 / 16)) <= 4 * _tf_noise_sd(
        r
    )  # false alarm < 7e-5
    assert 1 <= post["true_rank"] <= 256
    assert 0 < tree["mass_on_tree_tokens"] <= 1


def test_camouflage_enumeration_of_the_ideal_tree_is_exactly_uniform():
    """The enumeration path of the reproduction, run on the ideal tree's own conditionals, gives
    the exact Lemma D.1(2) posterior: uniform on the 256 survivors (normalized entropy 1)."""
    from memclaim.mechanisms.camouflage import (
        CamouflageTree,
        enumerate_completion_logprobs,
        survivor_posterior,
    )

    tree = CamouflageTree.draw(v=16, k=4, L=4, rng=np.random.default_rng(0))
    lp = enumerate_completion_logprobs(tree.log_conditionals, v=16, L=4)
    assert lp.shape == (65536,)
    post = survivor_posterior(tree, lp)
    assert post.normalized_entropy == pytest.approx(1.0, abs=1e-12)
    assert post.max_ratio_to_uniform == pytest.approx(1.0, abs=1e-9)
    assert post.survivor_mass == pytest.approx(1.0, abs=1e-12)


def test_canary_floor_numbers(quick):
    """[MX] §8.2 / Cor. 5.3: below H* the prior alone reproduces canaries, above H* never; the DP
    model within its bound; the reference-model membership test separates on both sides."""
    res = quick[1]["canary-floor"]["results"]
    assert res["h_star"]["bits"] == pytest.approx(9.0927, abs=1e-4)
    b, a = res["buckets"]["below"], res["buckets"]["above"]
    assert b["prior_guessing"]["successes"] > 0 and a["prior_guessing"]["successes"] == 0
    assert a["prior_guessing"]["upper"] == pytest.approx(
        1 - 0.05 ** (1 / a["prior_guessing"]["trials"]), rel=1e-9
    )
    assert res["dp_guarantee"]["epsilon"] <= 4.0 + 1e-9
    assert res["dp_guarantee"]["neighbors"] == "add/remove"
    for c in res["canaries"]:
        lo, hi = c["h_inf_bits"]
        assert lo <= hi + 1e-12
        if c["closed"]:
            assert lo == pytest.approx(hi, abs=1e-9)
        if c["bucket"] == "below":
            assert hi < res["h_star"]["bits"]
        if c["bucket"] == "above":
            assert lo >= res["h_star"]["bits"]
        assert 0 <= c["kappa_lo"] <= c["kappa_hi"] <= 1


def test_audit_table_numbers(quick):
    """[MX] Fig. 12: six rows, five columns; each deployable audit misses something; the gated
    release is blind to LiRA exactly; camouflage capped; Fig. 10 sweep present."""
    res = quick[1]["audit-table"]["results"]
    table = res["table"]
    assert list(table["rows"]) == [
        "gated release",
        "trigger z = 2 (short)",
        "trigger z = 16 (long)",
        "camouflage",
        "naive duplicate",
        "low-H canary",
    ]
    assert [c["name"] for c in table["columns"]] == [
        "extraction at prefix c",
        "loss-MIA",
        "LiRA",
        "unlearning verifier",
        "informed recovery",
    ]
    assert all(res["missed_by"][c] for c in res["missed_by"])
    assert res["gated_identical_to_base"] is True
    cells = {
        r: dict(zip([c["name"] for c in table["columns"]], row))
        for r, row in zip(table["rows"], table["cells"])
    }
    assert cells["gated release"]["LiRA"]["value"] == 0.5
    assert cells["gated release"]["informed recovery"]["value"] == 1.0
    assert cells["camouflage"]["informed recovery"]["verdict"] == "capped"
    assert cells["camouflage"]["informed recovery"]["cap"] == pytest.approx(16 / 256)
    assert [r["secret_length"] for r in res["sweep"]] == [1, 2, 4, 16]
    assert "| instance |" in res["table_markdown"]


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_json(name, tmp_path, monkeypatch):
    """Bit-for-bit reproducibility of the whole pipeline on miniature settings."""
    import importlib

    mod = importlib.import_module(f"memclaim.experiments.{MODULES[name]}")
    real = mod._settings

    def tiny(quick):
        s = real(quick)
        s.update(TINY[name])
        return s

    monkeypatch.setattr(mod, "_settings", tiny)
    a = mod.run(quick=True, seed=3, out_dir=tmp_path / "a")
    b = mod.run(quick=True, seed=3, out_dir=tmp_path / "b")
    assert (tmp_path / "a" / f"{name}.json").read_bytes() == (
        tmp_path / "b" / f"{name}.json"
    ).read_bytes()
    assert a == b


@pytest.mark.parametrize("name", NAMES)
def test_bad_seed_refused(name, tmp_path):
    with pytest.raises(DomainError, match="seed"):
        run(name, quick=True, seed=-1, out_dir=tmp_path)


# Claims of the paper that the full tiny-scale run does not reproduce, with the measured reason
# (documented in the reproduction's docstring); every other check must pass.
KNOWN_OFF = {
    "trigger": {
        "truncated log-loss gap on x*'s own prefixes inside the seed-to-seed noise floor": "full run: 4.3 floor units (attenuation, not vanishing; [MX] §8.2 reports the same at LM scale)"
    },
    "audit-table": {
        "the naive duplicate is caught by extraction at c and by loss-MIA (positive control)": "full run: greedy extraction at c 1/24 [0.001, 0.211] is not above the prior decoder's 0/24 "
        "(8 copies among 1,500 background documents; the quick run's 200 keep it extractable); loss-MIA "
        "and LiRA AUC 1.000 catch it, the informed top-16 list recovers 8/24"
    },
}


# Paper numbers that the quick run matches and the full run does not, with the full run's numbers:
# the full test asserts that they still disagree (so a change shows and the record is updated, never
# the tolerance).
FULL_RUN_DISAGREES = {
    "camouflage": {
        "normalized_entropy": "full run (6 trees, 20,000 documents each, 8 epochs, a 64-wide network): "
        "0.9941 on tree 1 (0.9926-0.9945 over the 6 trees) against the paper's 0.984 +- 0.0009; our "
        "survivors' posterior is flatter than the paper's network's (the paper gives neither its data size "
        "nor its training length)"
    },
}


def check_full_run(name: str, r: dict) -> None:
    """Every verdict of a full run, from its result (``r``, the reproduction's JSON)."""
    off = KNOWN_OFF.get(name, {})
    failed = [
        c["claim"] + ": " + c["detail"]
        for c in r["checks"]
        if not c["passed"] and c["claim"] not in off
    ]
    assert not failed
    TC.assert_covers(r, THEORY[name])
    for claim in THEORY[name]:  # verdicts re-derived from the full run's raw numbers, not its flags
        if claim not in off:
            TC.assert_theory(r, claim, THEORY[name])
    assert_covers(r, AGREEMENT[name])
    rows = {p["row"] for p in r["paper_numbers"]}
    disagrees = FULL_RUN_DISAGREES.get(name, {})
    for row, spec in AGREEMENT[
        name
    ].items():  # the quick run's recorded disagreements are re-judged here too
        if row in rows and isinstance(spec, (Agree, Disagrees)):
            if row in disagrees:
                with pytest.raises(AssertionError):
                    assert_agrees(r, row, spec)
            else:
                assert_agrees(r, row, spec)
    if (
        name in CLAIMS
    ):  # the paper's sentences as the full run judged them (the record, not the rule, is updated)
        TC.assert_claims_cover(r, CLAIMS[name])
        for key, expect in CLAIMS_FULL[name].items():
            TC.assert_claim(r, key, CLAIMS[name], expect)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_reproduction(name, tmp_path):
    check_full_run(name, run(name, quick=False, seed=0, out_dir=tmp_path))
