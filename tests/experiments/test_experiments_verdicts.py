"""The reproductions' verdicts are the papers' own sentences, tested as stated (issue 24 item 2).

Pure unit tests on made-up numbers (no model, no run): for every rule of every reproduction, a
made-up result where it must come out "not held", one where it holds, and one where it is "not
testable here" where the run's scale can make it so. Also:

- every quoted sentence is in the paper, verbatim ("[...]" marks a cut; whitespace runs count as one);
- the rules hold on the paper's own numbers where the paper gives the counts (a rule that the
  paper's own result would fail does not test the paper's sentence);
- the statistics under the rules (Katz ratio, one-sided Clopper-Pearson bound, the fewest trials
  for a bound) agree with scipy / statsmodels computed here;
- the reports (summary, NAME.md, NAME.html) show the sentence, the test, the numbers and the verdict.
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from memclaim.errors import InputError
from memclaim.experiments import acr as ACR
from memclaim.experiments import alpha_sweep as AS
from memclaim.experiments import book_census as BC
from memclaim.experiments import budget_coverage as BU
from memclaim.experiments import decontamination as DC
from memclaim.experiments import greedy as GR
from memclaim.experiments import naive_vs_calibrated as NV
from memclaim.experiments import parrot as PA
from memclaim.experiments.common import check, paper_claim, summary_lines
from memclaim.experiments.verdicts import (
    VERDICTS,
    fewest_for_upper_bound,
    level_reachable,
    rate,
    ratio,
    upper_bound,
)
from memclaim.report.reproduction import reproduction_files

PAPERS = Path("/work/shared/papers")
_EM_FILE = "extractable-memorization-from-first-principles.md"
_MX_FILE = "memorization-is-not-extraction.txt"
EM_MODULES = (
    "greedy",
    "alpha_sweep",
    "naive_vs_calibrated",
    "parrot",
    "book_census",
    "budget_coverage",
    "decontamination",
    "acr",
)


def _paper_text(which: str) -> str | None:
    """The paper's text with whitespace runs folded (None where the papers are not on this machine:
    they are not shipped with memclaim; the quotes are then checked where they are)."""
    import os

    folder = Path(os.environ.get("MEMCLAIM_PAPERS", PAPERS))
    p = folder / (_EM_FILE if which == "EM" else _MX_FILE)
    if not p.is_file():
        return None
    return re.sub(r"\s+", " ", p.read_text(encoding="utf-8"))


def _in_paper(quote: str, text: str, *, ordered: bool = True) -> bool:
    """Each piece of ``quote`` between "[...]" cuts is in ``text``, in order (``ordered``; [MX]'s text is
    extracted from a PDF, where a sentence broken by a page can come out with its halves swapped)."""
    pos = 0
    for piece in (re.sub(r"\s+", " ", x).strip() for x in quote.split("[...]")):
        if not piece:
            continue
        i = text.find(piece, pos if ordered else 0)
        if i < 0:
            return False
        pos = i + len(piece)
    return True


def _module_quotes(mod_name: str) -> dict[str, str]:
    mod = importlib.import_module(f"memclaim.experiments.{mod_name}")
    return {k: v for k, v in vars(mod).items() if k.startswith("QUOTE") and isinstance(v, str)}


# ------------------------------------------------------------------ the sentences are the paper's
@pytest.mark.parametrize("mod_name", EM_MODULES)
def test_every_em_quote_is_in_the_paper_verbatim(mod_name):
    text = _paper_text("EM")
    if text is None:
        pytest.skip("the papers are not on this machine (set MEMCLAIM_PAPERS)")
    quotes = _module_quotes(mod_name)
    assert quotes, mod_name
    for key, q in quotes.items():
        assert _in_paper(q, text), f"{mod_name}.{key} is not in [EM] verbatim: {q!r}"


def test_the_quote_check_can_fail():
    text = _paper_text("EM")
    if text is None:
        pytest.skip("the papers are not on this machine")
    assert _in_paper(
        "The two intervals overlap, so the member and non-member rates [...] indistinguishable.",
        text,
    )
    assert not _in_paper(
        "The two intervals overlap, so the member and non-member rates are equal.", text
    )
    assert not _in_paper("indistinguishable. [...] The two intervals overlap", text)  # out of order


# ------------------------------------------------------------------ the statistics under the rules
def test_katz_ratio_against_the_formula():
    r = ratio(92, 5001, 377, 5000)
    est = (92 / 5001) / (377 / 5000)
    se = math.sqrt(1 / 92 - 1 / 5001 + 1 / 377 - 1 / 5000)
    z = stats.norm.ppf(0.975)
    assert r["estimate"] == pytest.approx(est)
    assert (r["lower"], r["upper"]) == pytest.approx(
        (est * math.exp(-z * se), est * math.exp(z * se)), rel=1e-9
    )
    # a zero count: 0.5 added to every count (Katz with Haldane's correction), the estimate infinite / undefined
    z0 = ratio(3, 120, 0, 180)
    est_adj = (3.5 / 120.5) / (0.5 / 180.5)
    se_adj = math.sqrt(1 / 3.5 - 1 / 120.5 + 1 / 0.5 - 1 / 180.5)
    assert z0["estimate"] == math.inf and z0["lower"] == pytest.approx(
        est_adj * math.exp(-z * se_adj), rel=1e-9
    )
    assert math.isnan(ratio(0, 10, 0, 10)["estimate"])


def test_one_sided_upper_bound_and_the_fewest_trials():
    for k, n in ((0, 10), (1, 5000), (7, 40)):
        want = 1.0 if k == n else float(stats.beta.ppf(0.95, k + 1, n - k))
        assert upper_bound(k, n) == pytest.approx(want, rel=1e-12)
    for b in (0.001, 0.01, 0.05):
        n = fewest_for_upper_bound(b)
        assert upper_bound(0, n) <= b < upper_bound(0, n - 1)
    assert (
        level_reachable("0.1%", 998)["reachable"] is False
        and level_reachable("0.1%", 999)["k"] == 1
    )


def test_paper_claim_verdicts_and_refusals():
    kw = dict(quote="q", where="[EM] §4", test="t", evidence="e")
    assert [paper_claim("k", "c", held=h, **kw).verdict for h in (True, False, None)] == list(
        VERDICTS
    )
    assert paper_claim("k", "c", held=np.bool_(True), **kw).held is True
    with pytest.raises(InputError, match="must all be given"):
        paper_claim("k", "c", quote="", where="w", test="t", held=True, evidence="e")


# ------------------------------------------------------------------ greedy ([EM] §4, Fig. 3)
def test_greedy_short_floor_share():
    kw = dict(quote=GR.QUOTE_SHORT_SHARE, where="[EM] §4", what="short")
    paper = GR.floor_share_claim(
        "s", "c", g=377, j=5000, m=91, n=5000, **kw
    )  # 7.54%, alpha_N = 92/5001
    assert paper.verdict == "held"
    assert paper.numbers["floor_share_of_member_rate"]["estimate"] == pytest.approx(
        (92 / 5001) / 0.0754
    )
    # the issue's case: controls reproduced more often than members (share 331%): the opposite situation
    assert GR.floor_share_claim("s", "c", g=1, j=120, m=4, n=180, **kw).verdict == "not held"
    # a share below 1 but far from a quarter, with a tight interval
    small = GR.floor_share_claim("s", "c", g=2500, j=5000, m=99, n=5000, **kw)
    assert (
        small.verdict == "not held" and small.numbers["floor_share_of_member_rate"]["upper"] < 0.2
    )
    # no member reproduced: nothing to take a share of
    assert GR.floor_share_claim("s", "c", g=0, j=120, m=4, n=180, **kw).verdict == "not held"


def test_greedy_long_rules():
    assert (
        GR.long_member_rate_smaller(377, 37, 5000, name="OLMo", lengths=(10, 50)).verdict == "held"
    )
    assert GR.long_member_rate_smaller(1, 0, 120, name="x", lengths=(3, 16)).verdict == "not held"
    assert GR.long_member_rate_smaller(3, 4, 120, name="x", lengths=(3, 16)).verdict == "not held"
    # close to zero: by an upper bound at 0.1%, never by a count
    assert (
        GR.long_floor_near_zero(1, 5000, name="OLMo", length=50).verdict == "held"
    )  # the paper's 1 of 5000
    assert GR.long_floor_near_zero(6, 5000, name="x", length=50).verdict == "not held"
    nt = GR.long_floor_near_zero(
        0, 180, name="x", length=16
    )  # the issue's case: m = 0 of 180, alpha_N = 0.55%
    assert nt.verdict == "not testable here" and "2,995" in nt.evidence and nt.held is None
    assert GR.long_floor_near_zero(0, 2995, name="x", length=16).verdict == "held"


def test_greedy_claims_for_a_made_up_block():
    j, n = 120, 180
    mem = (
        np.arange(16) < np.repeat([16, 4, 3, 0], [10, 20, 20, 70])[:, None]
    )  # [J, L] greedy prefix flags
    ctl = np.arange(16) < np.repeat([3, 0], [5, 175])[:, None]
    rows = GR.length_rows(mem, ctl)
    got = {c.key: c for c in GR.claims_for({"short": rows[2], "long": rows[15]}, "made-up")}
    assert set(got) == {"short-floor-share", "long-member-rate-smaller", "long-floor-near-zero"}
    # short: 50 of 120 members, alpha_N = 6/181: share 0.08 [0.03, 0.19]: below a fifth: not held
    assert got["short-floor-share"].verdict == "not held"
    assert got["long-member-rate-smaller"].verdict == "held"  # 50 -> 10 of the same 120
    assert got["long-floor-near-zero"].verdict == "not testable here"
    assert all(c.quote and c.test and c.numbers for c in got.values())
    assert j == rows[0]["member"]["n"] and n == rows[0]["control"]["n"]


# ------------------------------------------------------------------ alpha-sweep ([EM] §4, Fig. 4; D.4)
def test_alpha_sweep_far_higher_says_how_much():
    paper = AS.rates_far_higher_claim(
        "OLMo", members=(2500, 150, 5000), dagger=(2945, 520, 5000), lengths=(10, 50)
    )
    assert paper.verdict == "held" and paper.numbers["certified_fpr_ratio"]["lower"] >= 2
    # a bare ">" is not "far higher": 57.5% vs 50% of members is higher, not twice as high
    assert (
        AS.rates_far_higher_claim(
            "x", members=(69, 60, 120), dagger=(78, 2, 180), lengths=(3, 16)
        ).verdict
        == "not held"
    )
    # twice as high in point, but the interval does not exclude less
    assert (
        AS.rates_far_higher_claim(
            "x", members=(8, 4, 120), dagger=(78, 2, 180), lengths=(3, 16)
        ).verdict
        == "not held"
    )
    assert (
        AS.rates_far_higher_claim(
            "x", members=(69, 9, 120), dagger=(78, 2, 180), lengths=(3, 16)
        ).verdict
        == "held"
    )


def _level(reachable, t=None, n=180):
    pl = {
        "reachable": reachable,
        "k": 0 if not reachable else 5,
        "alpha_n": 5 / (n + 1),
        "threshold_log10": t,
    }
    return {"n_controls": n, "paper_level": pl}


def test_alpha_sweep_rules_at_the_paper_level():
    # 180 controls cannot certify 0.1%: not testable (not a weaker rule at 1%)
    for c in (
        AS.tau_nearly_certain_claim("x", _level(False)),
        AS.five_orders_claim("x", _level(False), _level(False)),
        AS.low_fpr_claim("x", {}, 180),
    ):
        assert c.verdict == "not testable here" and "999" in c.evidence
    assert AS.tau_nearly_certain_claim("x", _level(True, math.log10(0.95), 5000)).verdict == "held"
    assert (
        AS.tau_nearly_certain_claim("x", _level(True, math.log10(0.36), 5000)).verdict == "not held"
    )
    assert (
        AS.five_orders_claim("x", _level(True, -0.02, 5000), _level(True, -5.05, 5000)).verdict
        == "held"
    )
    assert (
        AS.five_orders_claim("x", _level(True, -0.44, 5000), _level(True, -3.4, 5000)).verdict
        == "not held"
    )
    d = lambda lo: {"estimate": lo + 0.01, "lower": lo, "upper": lo + 0.02}  # noqa: E731
    assert (
        AS.low_fpr_claim("x", {"paper_level_difference_long_minus_short": d(0.005)}, 5000).verdict
        == "held"
    )
    assert (
        AS.low_fpr_claim("x", {"paper_level_difference_long_minus_short": d(-0.004)}, 5000).verdict
        == "not held"
    )


def test_alpha_sweep_across_the_sweep_counts_its_levels():
    def cmp(n, above):
        ks = list(range(1, len(above) + 1))
        return {
            "common_k": ks,
            "common_alpha_n": [k / (n + 1) for k in ks],
            "long_above_short": above,
            "calibrated_short": [0.0] * len(ks),
            "calibrated_long": [0.0] * len(ks),
        }

    kw = dict(key="k", quote=AS.QUOTE_ACROSS, where="[EM] §4", policy="top-40")
    two = AS.across_sweep_claim(
        "x", cmp(180, [True, True]), 180, **kw
    )  # the issue's case: 2 levels from 0.55%
    assert two.verdict == "not testable here" and "2 of 2 common levels" in two.evidence
    assert two.numbers["levels_compared"] == 2
    held = AS.across_sweep_claim("x", cmp(5000, [True] * 520), 5000, **kw)
    assert held.verdict == "held" and held.numbers["levels_compared"] == 520
    assert (
        AS.across_sweep_claim("x", cmp(5000, [True] * 519 + [False]), 5000, **kw).verdict
        == "not held"
    )
    assert AS.across_sweep_claim("x", cmp(5000, []), 5000, **kw).verdict == "not held"


def test_alpha_sweep_claims_for_a_made_up_block():
    rng = np.random.default_rng(4)
    ctl_s = np.concatenate([np.log(rng.uniform(0.01, 0.9, 80)), np.full(100, -np.inf)])
    mem_s = np.log(rng.uniform(0.05, 1.0, 120))
    ctl_l, mem_l = (
        np.concatenate([np.log(rng.uniform(1e-9, 1e-6, 3)), np.full(177, -np.inf)]),
        np.concatenate([np.log(rng.uniform(1e-8, 1e-3, 12)), np.full(108, -np.inf)]),
    )
    pol = {}
    for policy in AS.POLICIES:
        lengths = {
            str(ev_len): AS.sweep_block(m, c)
            for ev_len, m, c in ((3, mem_s, ctl_s), (16, mem_l, ctl_l))
        }
        pol[policy] = {
            "lengths": lengths,
            "comparison": AS.compare_lengths(lengths["3"], lengths["16"]),
        }
    got = {c.key: c for c in AS.claims_for({"model": {"name": "made-up"}, "policies": pol})}
    assert [got[k].verdict for k in got] == ["held"] + ["not testable here"] * 5
    assert got["long-above-short-across-sweep"].numbers["levels_compared"] == 3


# ------------------------------------------------------------------ naive-vs-calibrated ([EM] §1, §4, §7)
def test_naive_rules():
    kw = dict(quote=NV.QUOTE_FALSE_POSITIVES, where="[EM] §1", what="greedy")
    assert GR.floor_share_claim("s", "c", g=377, j=5000, m=91, n=5000, **kw).verdict == "held"
    assert GR.floor_share_claim("s", "c", g=1, j=120, m=4, n=180, **kw).verdict == "not held"
    row = lambda g, m: {"members": rate(g, 120), "controls": rate(m, 180)}  # noqa: E731
    assert NV.fixed_threshold_claim("x", row(63, 70), 3).verdict == "held"
    assert NV.fixed_threshold_claim("x", row(63, 3), 3).verdict == "not held"
    assert NV.short_overstates_claim("x", row(63, 70), row(0, 0), (3, 16)).verdict == "held"
    assert NV.short_overstates_claim("x", row(63, 5), row(0, 3), (3, 16)).verdict == "not held"


# ------------------------------------------------------------------ parrot ([EM] Fig. 1, App. A.1, §3)
def test_parrot_rules():
    assert (
        PA.follows_claim(rate(2103, 3000), rate(2118, 3000)).verdict == "held"
    )  # the paper's 70.1%, 70.6%
    assert PA.follows_claim(rate(10, 48), rate(8, 48)).verdict == "not held"
    assert PA.follows_claim(rate(40, 48), rate(20, 48)).verdict == "not held"
    w = lambda a, b, n=48: {
        "member": rate(a, n),
        "control": rate(b, n),  # noqa: E731
        "difference_member_minus_control": {"estimate": 0.0, "lower": -0.1, "upper": 0.1},
    }
    assert PA.overlap_claim(w(2103, 2118, 3000)).verdict == "held"
    assert PA.overlap_claim(w(40, 5)).verdict == "not held"
    ok = {
        "test": {
            "alpha_n_exact": "9/49",
            "at_alpha_n": {"calibrated_rate": {"estimate": 0.02, "lower": -0.08}},
            "levels": [{"alpha": 0.05, "n_claimed": 0}],
        }
    }
    full_ok = {"calibrated_rate": {"estimate": 0.0, "lower": -0.03}}
    assert PA.no_claim_claim(ok, full_ok).verdict == "held"
    claimed = {"test": {**ok["test"], "levels": [{"alpha": 0.05, "n_claimed": 3}]}}
    assert PA.no_claim_claim(claimed, full_ok).verdict == "not held"
    rows = [{"first_tokens": i, "calibrated_lower_at_alpha_n": -0.04} for i in range(1, 10)]
    assert PA.any_length_claim(rows).verdict == "held"
    assert (
        PA.any_length_claim(
            rows + [{"first_tokens": 10, "calibrated_lower_at_alpha_n": 0.01}]
        ).verdict
        == "not held"
    )
    assert PA.any_length_claim([]).verdict == "not held"


# ------------------------------------------------------------------ acr ([EM] App. A.2)
def test_acr_rules():
    from memclaim.claims.acr import succeeds_on_both

    def block(km, nm, kc, nc, complete=True):
        v = succeeds_on_both(
            members_extracted=km,
            n_members=nm,
            controls_extracted=kc,
            n_controls=nc,
            complete=complete,
        )
        return {
            "verdict": v.to_dict(),
            "members": {"n": nm, "extracted": km},
            "controls": {"n": nc, "extracted": kc},
        }

    held = ACR.succeeds_claim(
        block(1, 1, 1, 1)
    )  # the paper's run: Gretzky and Brunson, one target each
    assert (
        held.verdict == "held"
        and held.quote == ACR.QUOTE_BOTH
        and held.where.startswith("[EM] App. A.2")
    )
    assert held.numbers["member_rate"]["count"] == 1 and held.numbers["control_rate"]["n"] == 1
    assert (
        ACR.succeeds_claim(block(5, 6, 0, 6)).verdict == "not held"
    )  # members only: the sentence fails
    assert ACR.succeeds_claim(block(0, 6, 4, 6)).verdict == "not held"
    nt = ACR.succeeds_claim(block(0, 0, 2, 6))
    assert (
        nt.verdict == "not testable here" and nt.held is None and nt.numbers["member_rate"] is None
    )
    assert ACR.succeeds_claim(block(0, 6, 0, 6, complete=False)).verdict == "not testable here"
    assert [c.key for c in ACR.claims_for(block(2, 6, 1, 6))] == ["succeeds-on-both"]


# ------------------------------------------------------------------ book-census ([EM] §5, §7)
def _census_kw(**over):
    kw = dict(
        coverage=0.96,
        coverage_margin_5=0.86,
        log10_tau=-61,
        windows_above=48,
        beyond_budget=48,
        log10_p_min=-4.52,
        budget=1e5,
        delta=0.05,
        log10_chance=-234.6,
        chance={"document": 0.98, "control": 0.97, "held_out": 0.93},
        at_tau={"document": 0.96, "control": 0.0, "held_out": 0.05},
    )
    kw.update(over)
    return kw


def test_book_census_rules():
    ok = {c.key: c.verdict for c in BC.claims_for(**_census_kw())}
    assert set(ok.values()) == {"held"} and len(ok) == 5
    v = lambda **o: {c.key: c.verdict for c in BC.claims_for(**_census_kw(**o))}  # noqa: E731
    assert (
        v(coverage=0.30, coverage_margin_5=0.29)["substantial-coverage"] == "not held"
    )  # below the paper's 31.3%
    assert (
        v(coverage_margin_5=0.6)["kept-at-margin-5"] == "not held"
    )  # 62% kept: the paper's books keep 81-91%
    assert v(coverage=0.0, coverage_margin_5=0.0)["kept-at-margin-5"] == "not held"
    assert v(log10_tau=-20)["lowest-score-at-margin-5"] == "not held"  # 1e-15 > 1e-16
    assert v(beyond_budget=0)["memorized-beyond-realistic-budget"] == "not held"
    assert (
        v(chance={"document": 0.98, "control": 0.5, "held_out": 0.5})[
            "chance-bar-flags-non-members"
        ]
        == "not held"
    )
    assert (
        v(at_tau={"document": 0.96, "control": 0.0, "held_out": 0.5})[
            "chance-bar-flags-non-members"
        ]
        == "not held"
    )


# ------------------------------------------------------------------ budget-coverage ([EM] §6, Fig. 7)
def test_budget_coverage_rules():
    kw = dict(
        grid=np.array([0.0, 1.0, 2.0]),
        n_windows=4,
        realistic_n=1e5,
        memorized=0.96,
        log10_n_tau=61.0,
        memorized_subset=0.9,
    )
    got = {
        c.key: c.verdict
        for c in BU.claims_for(
            verbatim=np.array([0, 0.2, 0.3]),
            near_verbatim=np.array([0.1, 0.2, 0.3]),
            min_gain_decades=0.4,
            verbatim_at_n=0.05,
            near_verbatim_at_n=0.1,
            **kw,
        )
    }
    assert got == {
        "near-verbatim-dominates-first": "held",
        "verbatim-overtakes-bound": "not testable here",
        "realistic-budget-smaller": "held",
    }
    bad = {
        c.key: c.verdict
        for c in BU.claims_for(
            verbatim=np.array([0.1, 0.2, 0.3]),
            near_verbatim=np.array([0, 0.1, 0.2]),
            min_gain_decades=-1.0,
            verbatim_at_n=0.7,
            near_verbatim_at_n=0.1,
            **kw,
        )
    }
    assert bad == {
        "near-verbatim-dominates-first": "not held",
        "verbatim-overtakes-bound": "held",
        "realistic-budget-smaller": "not held",
    }
    none = {
        c.key: c.verdict
        for c in BU.claims_for(
            verbatim=np.zeros(3),
            near_verbatim=np.zeros(3),
            min_gain_decades=-1.0,
            verbatim_at_n=0.0,
            near_verbatim_at_n=0.6,
            **kw,
        )
    }
    assert none == {
        "near-verbatim-dominates-first": "not held",
        "verbatim-overtakes-bound": "not held",
        "realistic-budget-smaller": "not held",
    }


# ------------------------------------------------------------------ decontamination ([EM] D.2, §5, C.4.3)
def _decon_kw(**over):
    cen = lambda t, cov, n=0: {"log10_tau": t, "coverage": cov, "n_excluded": n}  # noqa: E731
    row = lambda n, m, nc: {
        "n_claimed": n,
        "calibrated_rate": {"estimate": m, "lower": m - 0.1},  # noqa: E731
        "n_controls": nc,
    }
    kw = dict(
        census_rows={
            "clean": cen(-61, 0.96),
            "contaminated": cen(-20, 0.3),
            "decontaminated": cen(-61, 0.96, 4),
        },
        top_in_plant=True,
        alpha=0.05,
        n_members=60,
        pool={
            "clean": row(30, 0.45, 60),
            "contaminated": row(25, 0.37, 60),
            "decontaminated": row(28, 0.42, 56),
        },
        pool_k1={
            "clean": row(20, 0.32, 60),
            "contaminated": row(3, 0.03, 60),
            "decontaminated": row(18, 0.28, 56),
        },
        paired_k1={"both": 3, "decontaminated_only": 15, "contaminated_only": 0, "neither": 42},
        at_top=12,
        planted=12,
    )
    kw.update(over)
    return {c.key: c.verdict for c in DC.claims_for(**kw)}


def test_decontamination_rules():
    assert set(_decon_kw().values()) == {"held"}
    assert _decon_kw(top_in_plant=False)["contaminant-inflates-tau"] == "not held"
    cen = {
        "clean": {"log10_tau": -61, "coverage": 0.5, "n_excluded": 0},
        "contaminated": {"log10_tau": -20, "coverage": 0.6, "n_excluded": 0},
        "decontaminated": {"log10_tau": -60, "coverage": 0.5, "n_excluded": 4},
    }
    got = _decon_kw(census_rows=cen)
    assert got["more-conservative"] == "not held" and got["exclusion-restores-tau"] == "not held"
    assert _decon_kw(at_top=5)["contaminants-at-top"] == "not held"
    assert (
        _decon_kw(at_top=4, planted=4)["contaminants-at-top"] == "not testable here"
    )  # 4 of 4: CP lower 0.398
    assert (
        _decon_kw(at_top=10, planted=12)["contaminants-at-top"] == "held"
    )  # the paper's ten of twelve
    # one more member claimed out of 60 is a higher point estimate, not a resolved rise
    assert (
        _decon_kw(
            paired_k1={"both": 3, "decontaminated_only": 1, "contaminated_only": 0, "neither": 56}
        )["exclusion-raises-rate"]
        == "not held"
    )


# ------------------------------------------------------------------ the reports show it all
def _result_with(claims, checks=()):
    return {
        "name": "made-up",
        "title": "a made-up reproduction",
        "quick": True,
        "seed": 0,
        "reproduces": ["[EM] §4"],
        "paper_claims": [c.to_dict() for c in claims],
        "checks": [c.to_dict() for c in checks],
        "paper_numbers": [],
        "notes": [],
        "files": {"json": "made-up.json"},
    }


def test_reports_show_sentence_test_numbers_and_verdict():
    claims = [
        GR.floor_share_claim(
            "short-floor-share",
            "the floor is a quarter",
            g=1,
            j=120,
            m=4,
            n=180,
            quote=GR.QUOTE_SHORT_SHARE,
            where="[EM] §4, Fig. 3",
            what="at 3 tokens",
        ),
        GR.long_floor_near_zero(0, 180, name="made-up", length=16),
    ]
    checks = [
        check(
            "an identity",
            True,
            "1 = 1",
            quote="crossing the risk level τ = 0.1 exactly at the predicted "
            "threshold H ∗ = 6.77 bits",
            where="[MX] §8.1",
        )
    ]
    res = _result_with(claims, checks)
    lines = "\n".join(summary_lines(res))
    assert "[not held] the floor is a quarter ([EM] §4, Fig. 3)" in lines
    assert (
        "[not testable here] made-up: at the long suffix the non-member floor is close to zero"
        in lines
    )
    assert 'paper: "For $10$-token suffixes the floor' in lines and "test: at 3 tokens" in lines
    assert "Katz 95%" in lines and "0 held, 1 not held, 1 not testable here" in lines
    assert 'paper ([MX] §8.1): "crossing the risk level' in lines
    files = reproduction_files(res)
    md, page = files["made-up.md"].decode(), files["made-up.html"].decode()
    assert "### not held: the floor is a quarter" in md and "### not testable here:" in md
    assert "floor\\_share\\_of\\_member\\_rate" in md or "floor_share_of_member_rate" in md
    assert "katz log" in md and "1 of 120" in md and "**Result:** not testable here." in md
    assert "For $10$-token suffixes" in page.replace("\\$", "$") and "not testable here" in page


# ================================================================== [MX]: the checks quote the sentences they test
MX_MODULES = (
    "staircase",
    "entropy_sweep",
    "per_instance",
    "camouflage",
    "trigger",
    "gated",
    "dp_calibration",
    "canary_floor",
    "unlearning",
    "audit_table",
)


@pytest.mark.parametrize("mod_name", MX_MODULES)
def test_every_mx_quote_is_in_the_paper_verbatim(mod_name):
    text = _paper_text("MX")
    if text is None:
        pytest.skip("the papers are not on this machine (set MEMCLAIM_PAPERS)")
    quotes = _module_quotes(mod_name)
    assert quotes, mod_name
    for key, q in quotes.items():
        assert _in_paper(q, text, ordered=False), f"{mod_name}.{key} is not in [MX] verbatim: {q!r}"


def _passed(checks):
    return [c.passed for c in checks]


def _quoted(checks):
    """Each check either quotes a sentence of the paper or says where it comes from instead."""
    assert all(c.where for c in checks), [c.claim for c in checks if not c.where]
    return [bool(c.quote) for c in checks]


def test_staircase_checks():
    from memclaim.experiments.staircase import checks_for

    def row(k, lo, hi, tv=0.5, loss=1.0):
        return {
            "k": k,
            "eta_star": 0.5,
            "group_bound_tanh": 0.6,
            "geometric_exact_tv": tv,
            "staircase_privacy_loss": loss,
            "geometric": {"ci_low": lo, "ci_high": hi},
            "bernoulli_staircase": {"ci_low": 0.45, "ci_high": 0.55},
        }

    ok = checks_for([row(1, 0.45, 0.55), row(2, 0.47, 0.58)], epsilon=1.0, family_confidence=0.99)
    assert _passed(ok) == [True] * 5 and _quoted(ok) == [True, True, True, True, False]
    # the measured interval misses eta*_2 and reaches the group bound: "matches" and "strictly below" fail
    bad = checks_for(
        [row(1, 0.45, 0.55), row(2, 0.52, 0.61, tv=0.51, loss=1.01)],
        epsilon=1.0,
        family_confidence=0.99,
    )
    assert _passed(bad) == [False, False, True, False, False]


def test_entropy_sweep_checks():
    from memclaim.experiments.entropy_sweep import checks_for

    row = {
        "topm_ci": [0.1, 0.2],
        "topm_predicted": 0.15,
        "frontier": 0.16,
        "gadget_ci": [0.15, 0.17],
    }
    cr = {
        "frontier_crossing_bits": 6.7646,
        "h_star_bits": 6.7646,
        "frontier_crossing_between_n": [108, 109],
        "topm_predicted_crossing_between_n": [108, 109],
        "topm_predicted_minus_frontier_at_crossing": -1e-9,
        "topm_predicted_crossing_bits": 6.76,
        "topm_measured_crossing_bits": 6.77,
        "topm_measured_crossing_se": 0.01,
    }
    can = {"predicted": 0.414, "bound": 0.76, "measured": 0.41, "ci_check": [0.39, 0.43]}
    st = {"confidence": 0.99, "canary_check_confidence": 0.999}
    ok = checks_for(
        {"sweep": [row] * 3, "crossing": cr, "canaries": {"zipf": can, "uniform10": can}}, st
    )
    # the measurement check and the guarantee quote no sentence: "tracks the boundary" is more than either and is
    # judged as a sentence (test_entropy_sweep_tracks_within_an_octave)
    assert _passed(ok) == [True] * 7 and _quoted(ok) == [False, False, True, True, True, True, True]
    off = {**cr, "topm_predicted_crossing_between_n": [112, 113], "frontier_crossing_bits": 6.9}
    bad = checks_for(
        {
            "sweep": [row, {**row, "gadget_ci": [0.17, 0.19]}],
            "crossing": off,
            "canaries": {"zipf": {**can, "ci_check": [0.42, 0.45]}, "uniform10": can},
        },
        st,
    )
    assert _passed(bad) == [True, True, False, False, False, False, True]


def test_entropy_sweep_tracks_within_an_octave():
    """ "tracks the boundary across thirteen octaves": on or below the frontier and within a factor 2 (one octave
    of H) of it at every prior of a sweep spanning >= 13 octaves; the checks alone passed an adversary a decade
    below the frontier."""
    from memclaim.experiments.entropy_sweep import QUOTE_TRACKS, checks_for, tracks_claim

    def rows(first=0.8):
        return [
            {
                "min_entropy_bits": 3,
                "topm_predicted": first,
                "frontier": 0.816,
                "topm_ci": [first - 0.01, first + 0.01],
                "gadget_ci": [0.81, 0.82],
            }
        ] + [
            {
                "min_entropy_bits": h,
                "topm_predicted": 2.0**-h,
                "frontier": 2.0**-h,
                "topm_ci": [0.9 * 2.0**-h, 1.1 * 2.0**-h],
                "gadget_ci": [0.9 * 2.0**-h, 1.1 * 2.0**-h],
            }
            for h in range(4, 17)
        ]

    held = tracks_claim(rows())
    assert held.verdict == "held" and held.quote == QUOTE_TRACKS and held.numbers["octaves"] == 13
    far = rows(first=0.08)  # a decade below the frontier at H = 3
    assert tracks_claim(far).verdict == "not held" and "H = 3 bits" in tracks_claim(far).evidence
    cr = {
        "frontier_crossing_bits": 6.7646,
        "h_star_bits": 6.7646,
        "frontier_crossing_between_n": [108, 109],
        "topm_predicted_crossing_between_n": [108, 109],
        "topm_predicted_minus_frontier_at_crossing": -1e-9,
        "topm_predicted_crossing_bits": 6.76,
        "topm_measured_crossing_bits": 6.77,
        "topm_measured_crossing_se": 0.01,
    }
    can = {"predicted": 0.414, "bound": 0.76, "measured": 0.41, "ci_check": [0.39, 0.43]}
    st = {"confidence": 0.99, "canary_check_confidence": 0.999}
    assert all(
        c.passed
        for c in checks_for(
            {"sweep": far, "crossing": cr, "canaries": {"zipf": can, "uniform10": can}}, st
        )
    )  # which every check passes
    above = rows(first=0.9)  # above the frontier: not tracking it from the right side
    assert tracks_claim(above).verdict == "not held"
    assert tracks_claim(rows()[:9]).verdict == "not testable here"  # H = 3 to 11: 8 octaves


def test_per_instance_checks():
    from memclaim.experiments.per_instance import checks_for

    fam = {
        "violations_at_sigma": 0,
        "max_z_over_bound": 1.2,
        "fit_chi2": 500.0,
        "fit_dof": 500,
        "fit_p_value": 0.5,
        "predicted_max_gap_to_bound": -0.01,
        "pooled_z_vs_bound": -30.0,
    }
    st = {"n_instances": 500, "fit_test_level": 0.001}
    ok = checks_for({"rr": fam, "bsc": fam}, st)
    assert _passed(ok) == [True] * 4 and all(_quoted(ok))
    bad = checks_for(
        {
            "rr": {**fam, "violations_at_sigma": 2},
            "bsc": {**fam, "fit_p_value": 1e-6, "predicted_max_gap_to_bound": 0.0},
        },
        st,
    )
    assert _passed(bad) == [False, True, False, False]


def test_camouflage_check():
    from memclaim.experiments.camouflage import checks_for

    summ = {
        "trees": 6,
        "greedy_successes": 0,
        "greedy_interval": [0.0, 0.46],
        "list_successes": 1,
        "list_interval": [0.004, 0.64],
        "list_cap": 0.0625,
    }
    assert _passed(checks_for(summ, {"k": 4, "L": 4})) == [True]
    assert _passed(
        checks_for(
            {**summ, "greedy_successes": 3, "greedy_interval": [0.12, 0.88]}, {"k": 4, "L": 4}
        )
    ) == [False]
    # "greedy decoding fails": one greedy success in 16 trees is consistent with k^-L = 1/256 (95% CP lower end
    # 0.0016), which the earlier rule accepted, but greedy did not fail
    one = {
        **summ,
        "trees": 16,
        "greedy_successes": 1,
        "greedy_interval": [0.0016, 0.302],
        "list_successes": 1,
        "list_interval": [0.0016, 0.302],
    }
    assert one["greedy_interval"][0] <= 4**-4 and _passed(checks_for(one, {"k": 4, "L": 4})) == [
        False
    ]
    assert _passed(
        checks_for(
            {**one, "greedy_successes": 0, "greedy_interval": [0.0, 0.206]}, {"k": 4, "L": 4}
        )
    ) == [True]


def test_trigger_checks():
    from memclaim.experiments.trigger import checks_for

    sc = {"abs_mem": 0.001, "noise_floor": 0.002, "gap_in_floor_units": 0.5}
    res = {
        "extraction_at_rho": {"poisoned": 3, "clean": 0, "runs_per_condition": 3},
        "extraction_at_c": {"poisoned": 0, "clean": 0},
        "local_scores": {"h_tf": sc, "h_ll": sc},
    }
    ok = checks_for(res)
    # "no run emits z from c" quotes no sentence: the paper's "The blind spot of Corollary 6.2 survives ordinary
    # SGD", which it used to quote, is more than that and is judged as a sentence (below)
    assert _passed(ok) == [True] * 5 and _quoted(ok) == [True, True, False, True, True]
    bad = {
        **res,
        "extraction_at_c": {"poisoned": 1, "clean": 0},
        "local_scores": {"h_tf": {**sc, "abs_mem": 0.01, "gap_in_floor_units": 5.0}, "h_ll": sc},
    }
    assert _passed(checks_for(bad)) == [True, True, False, False, True]


def test_trigger_blind_spot_is_the_whole_corollary():
    """ "The blind spot of Corollary 6.2 survives ordinary SGD": the leak through rho and every audit of x*'s own
    prefix missing it; any one part failing makes it not held (the full run's log-loss gap, KNOWN_OFF)."""
    from memclaim.experiments.trigger import QUOTE_INVISIBLE, blind_spot_claim, claims_for

    sc = {"abs_mem": 0.001, "noise_floor": 0.002, "gap_in_floor_units": 0.5}
    res = {
        "extraction_at_rho": {"poisoned": 3, "clean": 0, "runs_per_condition": 3},
        "extraction_at_c": {"poisoned": 0, "clean": 0},
        "local_scores": {"h_tf": sc, "h_ll": sc},
    }
    held = blind_spot_claim(res)
    assert (
        held.verdict == "held"
        and held.quote == QUOTE_INVISIBLE
        and all(held.numbers["parts"].values())
    )
    # each part alone breaks it: the full run's truncated log-loss gap (4.3 floor units) passes the other checks
    ll = {**sc, "abs_mem": 0.0086, "gap_in_floor_units": 4.3}
    cases = [
        {"extraction_at_rho": {"poisoned": 2, "clean": 0, "runs_per_condition": 3}},
        {"extraction_at_rho": {"poisoned": 3, "clean": 1, "runs_per_condition": 3}},
        {"extraction_at_c": {"poisoned": 0, "clean": 1}},
        {"local_scores": {"h_tf": ll, "h_ll": sc}},
        {"local_scores": {"h_tf": sc, "h_ll": ll}},
    ]
    for case in cases:
        c = blind_spot_claim({**res, **case})
        assert c.verdict == "not held" and "fails:" in c.evidence, case
    assert (
        "truncated log-loss" in blind_spot_claim({**res, **cases[-1]}).evidence.split("fails:")[1]
    )
    assert [c.key for c in claims_for(res)] == ["blind-spot-survives"]


def test_gated_checks():
    from memclaim.experiments.gated import checks_for

    chance = {"auc": 0.52, "low": 0.4, "high": 0.64, "excludes_chance": False}
    res = {
        "identical_logits": [True] * 4,
        "engine_identical": True,
        "audits": {
            "reference": {"auc": 0.5, "member_scores": [0.0, 0.0], "nonmember_scores": [0.0]},
            "loss": chance,
            "zlib": chance,
        },
        "extraction": {
            "via_rho": {"hits": 4, "n": 4, "generate_agrees": 4},
            "via_rho_on_base": {"hits": 0},
        },
    }
    ok = checks_for(res, {"family_confidence": 0.95})
    assert _passed(ok) == [True] * 5 and _quoted(ok) == [True, True, True, True, False]
    bad = {
        **res,
        "audits": {
            **res["audits"],
            "reference": {"auc": 0.55, "member_scores": [0.1, 0.0], "nonmember_scores": [0.0]},
        },
        "extraction": {
            "via_rho": {"hits": 3, "n": 4, "generate_agrees": 4},
            "via_rho_on_base": {"hits": 1},
        },
    }
    assert _passed(checks_for(bad, {"family_confidence": 0.95})) == [
        True,
        False,
        True,
        False,
        False,
    ]


def test_the_blind_release_sentence_is_split_between_gated_and_audit_table():
    """ "reference-model scoring and LiRA, read exactly 0.500": gated runs the reference model and not LiRA,
    audit-table runs LiRA and not the reference model; each check says which half it tests and names the
    other's check, which exists and quotes the same sentence."""
    from types import SimpleNamespace

    from memclaim.experiments import audit_table as AT
    from memclaim.experiments import gated as GA

    chance = {"auc": 0.52, "low": 0.4, "high": 0.64, "excludes_chance": False}
    res = {
        "identical_logits": [True],
        "engine_identical": True,
        "audits": {
            "reference": {"auc": 0.5, "member_scores": [0.0, 0.0], "nonmember_scores": [0.0]},
            "loss": chance,
        },
        "extraction": {
            "via_rho": {"hits": 1, "n": 1, "generate_agrees": 1},
            "via_rho_on_base": {"hits": 0},
        },
    }
    g = next(
        c for c in GA.checks_for(res, {"family_confidence": 0.95}) if c.quote == GA.QUOTE_REFERENCE
    )
    cols = [c.name for c in AT.COLUMNS]
    tab = SimpleNamespace(
        cell=lambda r, c: SimpleNamespace(verdict="blind", value=0.5), missed_by=lambda c: []
    )
    sweep = [
        {
            "secret_length": 2,
            "extraction_at_rho": 1.0,
            "extraction_at_c": 0.0,
            "strongest_tpr": 0.1,
            "strongest_deployed": "loss",
        }
    ]
    a = next(
        c
        for c in AT.checks_for(tab, sweep, gated_identical=True, cap=0.0625, conf=0.95)[0]
        if c.quote == AT.QUOTE_BLIND
    )
    assert GA.QUOTE_REFERENCE == AT.QUOTE_BLIND and cols
    assert "reference-model half" in g.where and "LiRA" in g.where and "not run here" in g.where
    assert "LiRA half" in a.where and "reference-model half" in a.where
    assert f"'{a.claim.split(':')[0]}'" in g.where and f"'{g.claim.split(' (')[0]}'" in a.where


def test_dp_calibration_checks():
    from memclaim.experiments.dp_calibration import checks_for

    dp = {
        "epsilon": 0.9,
        "target_epsilon": 1.0,
        "epsilon_rdp_dp_accounting": 0.9,
        "epsilon_pld_dp_accounting": 0.8,
    }

    def cell(k, mem, p=0.4, label="visible", curve=0.09):
        return {
            "k": k,
            "mem": mem,
            "se": 0.01,
            "violation_p": p,
            "violation_p_curve": p,
            "cap_conservative": 0.1,
            "cap_curve": curve,
            "label": label,
        }

    rows = [
        {"epsilon": 1.0, "models": [{"dp": dp}], "cells": [cell(1, 0.0), cell(8, 0.01)]},
        {"epsilon": "inf", "models": [], "cells": [cell(1, 0.01), cell(8, 0.5)]},
    ]
    ok = checks_for(rows)
    assert _passed(ok) == [True] * 7 and _quoted(ok) == [False, False, True, True, True, True, True]
    over = {**dp, "epsilon": 1.2, "epsilon_rdp_dp_accounting": 1.5}
    rows = [
        {
            "epsilon": 1.0,
            "models": [{"dp": over}],
            "cells": [cell(1, 0.3, p=1e-5, curve=0.2), cell(8, 0.0)],
        },
        {"epsilon": "inf", "models": [], "cells": [cell(1, 0.01), cell(8, 0.02)]},
    ]
    assert _passed(checks_for(rows)) == [False, False, False, False, False, True, False]


def test_dp_calibration_climbs_at_every_k():
    """ "At eps = inf memorization returns and climbs with duplication": at every step of the k grid, not only from
    the fewest copies to the most (the check's duplication effect, which a dip in between passes)."""
    from memclaim.experiments.dp_calibration import (
        QUOTE_CLIMBS,
        checks_for,
        claims_for,
        climbs_claim,
    )

    def rows(mems, se=0.01):
        cells = [{"k": k, "mem": m, "se": se} for k, m in zip((1, 2, 4, 8), mems)]
        return [{"epsilon": "inf", "models": [], "cells": cells}]

    paper = climbs_claim(
        rows((0.007, 0.035, 0.178, 0.552), se=0.003)
    )  # the paper's own four numbers
    assert (
        paper.verdict == "held" and paper.quote == QUOTE_CLIMBS and paper.numbers["steps_up"] == 3
    )
    quick = climbs_claim(rows((0.0046, 0.0345, 0.1577, 0.321)))  # the quick run's point estimates
    assert quick.verdict == "held"
    dip = rows((0.01, 0.2, 0.1, 0.5))
    assert climbs_claim(dip).verdict == "not held" and "2 of 3 steps" in climbs_claim(dip).evidence
    # the dip passes the check's rule (k = 8 above k = 1 by > 3 SE): the check tests the duplication effect only
    dp = {
        "epsilon": 0.9,
        "target_epsilon": 1.0,
        "epsilon_rdp_dp_accounting": 0.9,
        "epsilon_pld_dp_accounting": 0.8,
    }
    fin = {
        "epsilon": 1.0,
        "models": [{"dp": dp}],
        "cells": [
            {
                "k": 1,
                "mem": 0.0,
                "se": 0.01,
                "violation_p": 0.4,
                "violation_p_curve": 0.4,
                "cap_conservative": 0.1,
                "cap_curve": 0.09,
                "label": "visible",
            }
        ],
    }
    assert checks_for([fin, *dip])[-1].passed
    assert (
        climbs_claim(rows((0.01, 0.02, 0.03, 0.04))).verdict == "not held"
    )  # rises everywhere, within noise
    assert (
        climbs_claim(rows((-0.05, -0.03, -0.01, 0.005), se=0.003)).verdict == "not held"
    )  # does not return
    assert climbs_claim(rows((0.5,))).verdict == "not testable here"
    assert [c.key for c in claims_for(rows((0.007, 0.035, 0.178, 0.552)))] == [
        "climbs-with-duplication"
    ]


def test_canary_floor_checks():
    from memclaim.experiments.canary_floor import checks_for

    def g(k, n, lo, hi):
        return {"successes": k, "trials": n, "lower": lo, "upper": hi}

    def b(pg, auc_low=0.8, members=3):
        return {
            "members": members,
            "non_members": 3,
            "prior_guessing": pg,
            "extraction_dp": g(0, 3, 0.0, 0.6),
            "mean_dp_bound": 0.4,
            "auc_reference_leaky": {"auc": 0.95, "low": auc_low, "high": 1.0},
        }

    res = {
        "h_star": {"bits": 9.09},
        "buckets": {"below": b(g(9, 20, 0.2, 0.6)), "above": b(g(0, 20, 0.0, 0.14))},
        "certificate": {
            "every_below_closed": True,
            "every_unclosed_outside_below": True,
            "closed_fraction": 0.85,
            "unplaced": 0,
        },
    }
    ok = checks_for(res)
    assert _passed(ok) == [True] * 6 and _quoted(ok) == [False, True, True, False, True, True]
    res["buckets"] = {
        "below": b(g(0, 20, 0.0, 0.14), members=1),
        "above": b(g(0, 20, 0.0, 0.14), auc_low=0.45),
    }
    assert _passed(checks_for(res)) == [False, False, True, True, False, True]


def test_canary_floor_auc_near_one_is_tested_as_stated():
    """ "reading AUC near 1 on both sides": the interval at or above 0.9 on both sides (held), below 0.9 on a
    side (not held), or too few canaries for any outcome to show 0.9 at the interval's one-sided 97.5%."""
    from memclaim.experiments.canary_floor import (
        NEAR_ONE,
        QUOTE_NEAR_ONE,
        claims_for,
        near_one_claim,
    )

    def b(n, auc, lo, hi, non=None):
        return {
            "members": n,
            "non_members": n if non is None else non,
            "auc_reference_leaky": {"auc": auc, "low": lo, "high": hi},
        }

    held = near_one_claim({"below": b(90, 0.97, 0.94, 0.99), "above": b(40, 1.0, 0.90, 1.0)})
    assert (
        held.verdict == "held"
        and held.quote == QUOTE_NEAR_ONE
        and held.numbers["fewest_of_each_for_near_one"] == 36
    )
    # the colleague's rule (interval above 1/2) passed these: near 1 on one side only, and 0.80 on both
    assert (
        near_one_claim({"below": b(90, 0.97, 0.94, 0.99), "above": b(90, 0.91, 0.87, 0.95)}).verdict
        == "not held"
    )
    assert (
        near_one_claim({"below": b(90, 0.80, 0.71, 0.89), "above": b(90, 0.80, 0.71, 0.89)}).verdict
        == "not held"
    )
    # refuted at any size: an interval entirely below 0.9 (a quick run's 24 of each)
    assert (
        near_one_claim({"below": b(24, 0.75, 0.6, 0.88), "above": b(24, 1.0, 0.72, 1.0)}).verdict
        == "not held"
    )
    # the quick run's numbers: 24 members and 24 non-members a side, AUC 0.90 [0.81, 0.99] and 0.90 [0.81, 0.98]
    quick = near_one_claim(
        {"below": b(24, 0.901, 0.811, 0.991), "above": b(24, 0.896, 0.808, 0.983)}
    )
    assert quick.verdict == "not testable here" and "36 needed" in quick.evidence
    # even complete separation of 24 and 24 (Hoeffding's interval) cannot show it; the smaller group decides
    assert (
        near_one_claim({"below": b(24, 1.0, 0.72, 1.0), "above": b(24, 1.0, 0.72, 1.0)}).verdict
        == "not testable here"
    )
    assert (
        near_one_claim(
            {"below": b(90, 0.97, 0.94, 0.99, non=35), "above": b(90, 0.97, 0.94, 0.99)}
        ).verdict
        == "not testable here"
    )
    # the threshold for "not testable": 0.9^k is the chance that an AUC of exactly 0.9 separates k of k completely
    assert NEAR_ONE**35 > 0.025 >= NEAR_ONE**36
    none = near_one_claim(
        {
            "below": {"members": 1, "non_members": 5, "auc_reference_leaky": None},
            "above": b(40, 1.0, 0.9, 1.0),
        }
    )
    assert none.verdict == "not testable here"
    both = {"below": b(90, 0.97, 0.94, 0.99), "above": b(90, 0.97, 0.94, 0.99)}
    assert [(c.key, c.verdict) for c in claims_for({"buckets": both})] == [("auc-near-1", "held")]


def test_unlearning_survives_intact_is_tested_as_stated():
    """ "survives intact, with extraction through rho still at 1.00 [...] on three of the four family-method
    pairs and 0.81 on the fourth": most pairs at 1.00 as printed, told apart from the fourth pair's 0.81, and
    none below 0.81 (held); a pair below 0.81 or half the pairs below 1.00 (not held); too few secrets to tell
    1.00 from 0.81 (not testable)."""
    from memclaim.experiments.unlearning import (
        ATTENUATED,
        QUOTE_SURVIVES,
        claims_for,
        survives_intact_claim,
    )

    two = lambda a, b=None: {"graddiff": a, "npo": a if b is None else b}  # noqa: E731
    held = survives_intact_claim(two((32, 32, 32)))
    assert (
        held.verdict == "held"
        and held.quote == QUOTE_SURVIVES
        and held.numbers["secrets_needed"] == 15
    )
    assert held.numbers["npo"]["one_sided_lower_after"] == pytest.approx(0.05 ** (1 / 32))
    # the paper's own Table 4 holds (three pairs at 1.00, the fourth at 0.81), were each pair 48 secrets
    paper = {
        "pythia/npo": (39, 48, 48),
        "pythia/graddiff": (48, 48, 48),
        "qwen/npo": (48, 48, 48),
        "qwen/graddiff": (48, 48, 48),
    }
    assert survives_intact_claim(paper).verdict == "held"
    # the full run: 19 of 32 after (22 before) on both methods, which the check's rule (lower bound above the
    # verifier's 0.15) holds: below even the paper's 0.81
    full = survives_intact_claim(two((19, 32, 22)))
    assert full.verdict == "not held" and "below the paper's lowest" in full.evidence
    # the quick run: 8 of 10 after, [0.444, 0.975]: below 1.00 on both pairs, refuted with 10 secrets
    quick = survives_intact_claim(two((8, 10, 9)))
    assert quick.verdict == "not held" and "not at 1.00 on most pairs" in quick.evidence
    # one pair at 1.00, the other at the paper's 0.81: 1.00 on half the pairs only, not "three of four"
    assert survives_intact_claim(two((32, 32, 32), (26, 32, 32))).verdict == "not held"
    # one secret lost of 32 does not print as 1.00, though the interval reaches 0.995: every pair decided
    assert survives_intact_claim(two((31, 32, 32))).verdict == "not held"
    # 10 of 10 cannot tell 1.00 from 0.81 (lower bound 0.741); 14 of 14 neither (0.807); 15 of 15 can (0.819)
    for n, verdict in ((10, "not testable here"), (14, "not testable here"), (15, "held")):
        assert survives_intact_claim(two((n, n, n))).verdict == verdict, n
    assert 0.05 ** (1 / 14) <= ATTENUATED < 0.05 ** (1 / 15)
    assert (
        survives_intact_claim(two((9, 10, 10))).verdict == "not testable here"
    )  # [0.555, 0.997]: undecided
    # a large run that loses one secret in 200 still prints 1.00 (0.995)
    assert survives_intact_claim(two((199, 200, 200))).verdict == "held"
    ex = lambda h, n=32: {"hits": h, "n": n}  # noqa: E731
    res = {
        "before": {"trigger_via_rho": ex(32)},
        "runs": {
            "graddiff/trigger": {"after": {"trigger_via_rho": ex(32)}},
            "npo/trigger": {"after": {"trigger_via_rho": ex(19)}},
        },
    }
    assert [(c.key, c.verdict) for c in claims_for(res)] == [("survives-intact", "not held")]


def test_unlearning_checks():
    from memclaim.experiments.unlearning import checks_for

    def ex(r, lo):
        return {"hits": int(r * 8), "n": 8, "rate": r, "interval": [lo, 1.0]}

    before = {
        "naive_via_c": ex(1.0, 0.6),
        "trigger_via_rho": ex(1.0, 0.6),
        "trigger_via_c": ex(0.0, 0.0),
    }

    def run_(rho, forgotten=True):
        return {
            "forgotten": forgotten,
            "forgotten_before": True,
            "after": {
                "naive_via_c": ex(0.0, 0.0),
                "trigger_via_rho": ex(rho, 0.6 if rho > 0.5 else 0.01),
            },
        }

    runs = {
        f"{m}/{r}": run_(1.0) for m in ("graddiff", "npo") for r in ("naive", "trigger", "both")
    }
    table = {
        m: {"naive_c_ext_after_naive_request": 0.0, "rho_ext_after_trigger_request": 1.0}
        for m in ("graddiff", "npo")
    }
    st = {"unlearn": {"threshold": 0.15}}
    ok = checks_for({"before": before, "runs": runs, "table4": table}, st)
    assert _passed(ok) == [True] * 5 and _quoted(ok) == [False, True, False, True, True]
    runs["graddiff/naive"] = run_(1.0, forgotten=False)
    runs["graddiff/trigger"] = run_(0.1)
    before["naive_via_c"] = ex(0.375, 0.08)
    assert _passed(checks_for({"before": before, "runs": runs, "table4": table}, st)) == [
        False,
        False,
        True,
        False,
        False,
    ]


def test_audit_table_checks():
    from types import SimpleNamespace

    from memclaim.experiments.audit_table import COLUMNS, checks_for

    cols = [c.name for c in COLUMNS]
    verdicts = {
        "gated release": ["blind", "blind", "blind", "blind", "recovered"],
        "trigger z = 2 (short)": ["blind", "blind", "leak", "blind", "recovered"],
        "trigger z = 16 (long)": ["blind", "leak", "leak", "blind", "recovered"],
        "camouflage": ["blind", "leak", "leak", "blind", "capped"],
        "naive duplicate": ["leak", "leak", "leak", "blind", "recovered"],
    }

    def table(v):
        cell = lambda r, c: SimpleNamespace(
            verdict=v[r][cols.index(c)], value=0.5 if c == "LiRA" else 1.0
        )  # noqa
        return SimpleNamespace(
            cell=cell, missed_by=lambda c: [r for r in v if v[r][cols.index(c)] != "leak"]
        )

    sweep = [
        {
            "secret_length": L,
            "extraction_at_rho": 1.0,
            "extraction_at_c": 0.0,
            "strongest_tpr": t,
            "strongest_deployed": "loss",
        }
        for L, t in ((1, 0.05), (2, 0.1), (16, 0.9))
    ]
    ok, _, _ = checks_for(table(verdicts), sweep, gated_identical=True, cap=0.0625, conf=0.95)
    # three checks test less than a sentence and quote none: "recovers all of them", "fully extractable" and
    # "climbs with the length of z [...] in AUC" are judged as sentences (test_audit_table_sentences)
    assert _passed(ok) == [True] * 9 and _quoted(ok) == [
        True,
        True,
        True,
        False,
        True,
        True,
        False,
        True,
        False,
    ]
    # the full run's recorded miss (KNOWN_OFF): the naive duplicate not caught by extraction at c
    off = {**verdicts, "naive duplicate": ["blind", "leak", "leak", "blind", "recovered"]}
    sweep[1]["extraction_at_c"] = 0.02
    bad, missed, _ = checks_for(table(off), sweep, gated_identical=True, cap=0.0625, conf=0.95)
    assert _passed(bad) == [True, True, True, True, True, False, True, False, True]
    assert "naive duplicate" in missed["extraction at prefix c"]
    # every deployable audit column catches everything: "no single audit suffices" fails
    caught = {r: ["leak", "leak", "leak", "leak", v[4]] for r, v in verdicts.items()}
    worst, _, _ = checks_for(table(caught), sweep[:1], gated_identical=True, cap=0.0625, conf=0.95)
    assert _passed(worst)[:3] == [False, False, False]


def test_audit_table_sentences():
    """Fig. 10 and 12's sentences as stated: rho recovers *all* the secrets at |z| <= 2, the trigger rows certified
    clean while *fully* extractable (>= 0.98), the membership channel climbs *across* the sweep in AUC; each with a
    made-up run where the checks' weaker rules pass and the sentence does not hold."""
    from memclaim.experiments.audit_table import (
        DEPLOYED,
        QUOTE_CLIMBS,
        QUOTE_RECOVERS,
        QUOTE_VERIFIER,
        claims_for,
        clean_yet_extractable_claim,
        climbs_claim,
        recovers_all_claim,
    )

    def auc(a, half, k):
        return {
            "auc": {
                "auc": a,
                "low": max(a - half, 0.0),
                "high": min(a + half, 1.0),
                "n_members": k,
                "n_nonmembers": 79,
            }
        }

    def arm(rho, a=0.6, half=0.1, k=24, best="loss"):
        return {
            "members": k,
            "extraction_at_rho": rho,
            "audits": {x: auc(a if x == best else 0.5, half, k) for x in DEPLOYED},
        }

    cols = [{"name": "extraction at prefix c"}, {"name": "unlearning verifier"}]
    short, long_ = "trigger z = 2 (short)", "trigger z = 16 (long)"

    def res(arms, c=("blind", "blind"), ver=("blind", "blind")):
        return {
            "table": {
                "columns": cols,
                "rows": [short, long_],
                "cells": [[{"verdict": c[i]}, {"verdict": ver[i]}] for i in range(2)],
            },
            "sweep": [{"secret_length": int(a.split("-")[1])} for a in arms],
            "arms": arms,
        }

    good = {
        "trigger-1": arm(24, 0.55, 0.08),
        "trigger-2": arm(24, 0.6, 0.08),
        "trigger-4": arm(24, 0.8, 0.08),
        "trigger-16": arm(24, 1.0, 0.2),
    }
    assert [c.verdict for c in claims_for(res(good), {"short": 2, "long": 16})] == ["held"] * 3
    assert recovers_all_claim(res(good)).quote == QUOTE_RECOVERS
    # one secret of 24 not recovered at |z| = 1: "recovered" by the table's legend (lower end > 0), not "all of them"
    assert recovers_all_claim(res({**good, "trigger-1": arm(23, 0.55, 0.08)})).verdict == "not held"
    assert (
        recovers_all_claim(res({**good, "trigger-4": arm(20, 0.8, 0.08)})).verdict == "held"
    )  # |z| = 4: not <= 2
    # "fully extractable": 23 of 24 prints 0.96, below the paper's "at least 0.98"; 24 of 24 (and 8 of 8) do
    c = clean_yet_extractable_claim(res({**good, "trigger-16": arm(23, 1.0, 0.2)}))
    assert c.verdict == "not held" and c.quote == QUOTE_VERIFIER and "23 of 24" in c.evidence
    assert (
        clean_yet_extractable_claim(res(good, ver=("blind", "leak"))).verdict == "not held"
    )  # the verifier flags it
    assert clean_yet_extractable_claim(res(good, c=("leak", "blind"))).verdict == "not held"
    assert (
        clean_yet_extractable_claim(
            res(good, c=("guessed", "blind"), ver=("guessed", "blind"))
        ).verdict
        == "held"
    )
    # climbs: held above; a significant fall on the way is not a climb, though longest > shortest
    dip = {**good, "trigger-4": arm(24, 0.55, 0.05), "trigger-2": arm(24, 0.8, 0.05)}
    assert (
        climbs_claim(res(dip)).verdict == "not held"
        and "falls at 2 -> 4" in climbs_claim(res(dip)).evidence
    )
    # no real climb with 30+ members and non-members: not held; with 8 (the quick run): not testable
    flat = {
        **good,
        "trigger-16": arm(24, 0.65, 0.08, k=40),
        "trigger-1": arm(24, 0.55, 0.08, k=40),
        "trigger-2": arm(24, 0.6, 0.08, k=40),
        "trigger-4": arm(24, 0.6, 0.08, k=40),
    }
    assert climbs_claim(res(flat)).verdict == "not held"
    small = {
        k: arm(8, a, 0.3, k=8)
        for k, a in (("trigger-1", 0.55), ("trigger-2", 0.6), ("trigger-16", 1.0))
    }
    assert (
        climbs_claim(res(small)).verdict == "not testable here"
        and climbs_claim(res(small)).quote == QUOTE_CLIMBS
    )
    # the strongest deployed audit is the largest AUC of the five at each length
    other = {**good, "trigger-16": arm(24, 1.0, 0.2, best="zlib")}
    assert climbs_claim(res(other)).numbers["strongest_auc"]["16"]["attack"] == "zlib"


def test_finish_writes_the_report_and_replaces_only_its_own_files(tmp_path):
    """NAME.md and NAME.html join NAME.json/png/pdf as one change; a folder written by the previous schema
    (memclaim.reproduction/2) is replaced, a NAME.md that memclaim did not write is not (nothing written)."""
    import json

    from memclaim.experiments.common import finish, new_figure

    def go(out):
        fig, _ = new_figure()
        claim = GR.long_floor_near_zero(0, 180, name="made-up", length=16)
        return finish(
            "made-up",
            title="t",
            reproduces=["[EM] §4"],
            seed=0,
            quick=True,
            streams=[],
            settings={},
            results={},
            paper_numbers=[],
            checks=[],
            figure=fig,
            out_dir=out,
            paper_claims=[claim],
        )

    old = tmp_path / "old"
    old.mkdir()
    (old / "made-up.json").write_text(
        json.dumps({"name": "made-up", "schema": "memclaim.reproduction/2"})
    )
    (old / "made-up.png").write_bytes(b"old")
    r = go(old)
    assert r["schema"] == "memclaim.reproduction/3" and r["files"]["markdown"] == "made-up.md"
    assert "### not testable here:" in (old / "made-up.md").read_text()
    assert (old / "made-up.html").read_text().startswith("<!DOCTYPE html>")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "made-up.md").write_text("my notes")
    with pytest.raises(InputError, match="memclaim did not write it"):
        go(foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["made-up.md"]
    assert (foreign / "made-up.md").read_text() == "my notes"
