"""The [EM] reproductions `parrot`, `greedy`, `alpha-sweep` and `naive-vs-calibrated`
(`memclaim reproduce NAME --quick`) on SmolLM2-135M-Instruct and the KJV verses of tests/data.

What is decided here, not by the implementation:

- every paper number these reproductions report is from OLMo 2 32B on Wikipedia (or its instruct
  model): SideBySide rows (shown, not tested for agreement; tests/paper_agreement.py);
- the paper's sentences (each judged held / not held / not testable here, issue 24 item 2) are
  re-derived here from the stored scores and the raw counts, by code paths independent of the
  reproductions' (target ranks instead of the greedy policy's log q, numpy sorts instead of the
  conformal module, scipy's beta quantiles and the Katz formula written out here for the
  intervals), and each reported verdict must equal the re-derived one (the rules' own unit tests,
  on made-up numbers, are in test_experiments_verdicts.py);
- the guarantees (in-sample FPR <= (K-1)/N, alpha_N = K/(N+1), the binary test's claims) hold.

Quick runs are the `real` tier (SmolLM2, in CI): the three natural-prefix reproductions share one
score store, so the model runs once for them; full runs (Gemma 3 270M beside SmolLM2, all 240
members and 300 controls) are `slow`. Unit tests of the helpers run on synthetic arrays.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from memclaim.experiments import REPRODUCTIONS, run
from memclaim.experiments import em_verses as ev
from memclaim.experiments.paper import PAPER
from memclaim.scoring.results import load_run_scores
from paper_agreement import SideBySide, assert_covers

NAMES = ["parrot", "greedy", "alpha-sweep", "naive-vs-calibrated"]
_SIDE = SideBySide(
    "OLMo 2 32B (Instruct) on Wikipedia / 3,000 parrot sequences: another model and text at another "
    "scale; the qualitative claims are tested below instead"
)
AGREEMENT = {
    "parrot": {"member_rate": _SIDE, "control_rate": _SIDE},
    "greedy": {
        r: _SIDE
        for r in ("member_short", "floor_short", "floor_share_short", "member_long", "floor_long")
    },
    "alpha-sweep": {
        r: _SIDE
        for r in (
            "tau_short",
            "tau_long",
            "m_hat_short",
            "m_hat_long",
            "alpha_dagger_short",
            "alpha_dagger_long",
            "zero_share_short",
            "zero_share_long",
            "member_rate_short_max",
            "alpha_n_short_max",
            "member_rate_long_max",
        )
    },
    "naive-vs-calibrated": {"greedy_false_positive_share_short": _SIDE},
}


def _cp(k, n, conf=0.95):
    """Clopper-Pearson from scipy's beta quantiles (not memclaim's intervals module)."""
    a = 1 - conf
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def _rank_flags(scores):
    """[W, L] greedy prefix flags from the target ranks (rank 1 = argmax): an independent path."""
    ranks = [np.asarray(v) for v in scores.table.column("token_rank").to_pylist()]
    n = min(len(r) for r in ranks)
    return np.stack([np.cumprod(r[:n] == 1).astype(bool) for r in ranks])


def _claim(result, key):
    """The reported judgement of the paper's sentence ``key`` (exactly one: the quick runs have one model)."""
    found = [c for c in result["paper_claims"] if c["key"] == key]
    assert len(found) == 1, (key, [c["key"] for c in result["paper_claims"]])
    return found[0]


def _katz(k1, n1, k2, n2, conf=0.95):
    """Katz's log interval for (k1/n1)/(k2/n2), written out here (0.5 added to every count if one is 0)."""
    if 0 in (k1, k2):
        k1, n1, k2, n2 = k1 + 0.5, n1 + 0.5, k2 + 0.5, n2 + 0.5
    r = (k1 / n1) / (k2 / n2)
    se = math.sqrt(1 / k1 - 1 / n1 + 1 / k2 - 1 / n2)
    z = stats.norm.ppf(0.5 + conf / 2)
    return r * math.exp(-z * se), r * math.exp(z * se)


def _runs(store, what):
    """{'members': RunScores-loader, 'controls': ...} for the runs of one procedure, by label."""
    from memclaim.scoring.store import ScoreStore

    runs = ScoreStore(store, create=False).runs()
    out = {}
    for rid, r in runs.items():
        lab = r.get("label", "")
        if lab.startswith(what + ":"):
            out.setdefault(lab.split(":", 1)[1], []).append(rid)
    return out


# ------------------------------------------------------------------ unit tests of the helpers
def test_greedy_length_rows_and_the_binary_floor():
    from memclaim.experiments.greedy import length_rows

    mem = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    ctl = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    rows = length_rows(mem, ctl)
    assert [r["member"]["count"] for r in rows] == [3, 2, 1]
    assert [r["control"]["count"] for r in rows] == [3, 2, 1]
    assert [r["alpha_n_exact"] for r in rows] == ["4/6", "3/6", "2/6"]  # (m+1)/(N+1), [EM] D.3
    assert rows[2]["floor_share_of_member_rate"] == pytest.approx((2 / 6) / (1 / 4))
    assert [r["claimed_at_floor"] for r in rows] == [
        3,
        2,
        1,
    ]  # claims exactly the reproduced members
    assert rows[0]["calibrated_rate_at_floor"]["estimate"] == pytest.approx(3 / 4 - 4 / 6)
    lo, hi = _cp(3, 4)
    assert (rows[0]["member"]["lower"], rows[0]["member"]["upper"]) == pytest.approx((lo, hi))
    # every control reproduced: no level below 1 can claim, and the row says so
    full = length_rows(mem[:, :1], np.ones((3, 1), dtype=bool))
    assert full[0]["claimed_at_floor"] is None and full[0]["alpha_n"] == 1.0


def test_naive_rules_count_controls_and_the_calibrated_rules_bound_them():
    from memclaim.experiments.naive_vs_calibrated import BUDGET_LOG_Q, rules_at

    assert math.exp(BUDGET_LOG_Q) == pytest.approx(1 - 0.05 ** (1 / 1e5), rel=1e-9)
    rng = np.random.default_rng(0)
    mem_q = np.log(rng.uniform(1e-9, 1, 60))
    ctl_q = np.concatenate([np.log(rng.uniform(1e-9, 1, 80)), np.full(20, -np.inf)])
    mg, cg = mem_q > math.log(0.9), ctl_q > math.log(0.9)
    rows = {r["rule"]: r for r in rules_at(mg, cg, mem_q, ctl_q)}
    budget = next(r for k, r in rows.items() if k.startswith("q >= "))
    assert budget["members"]["count"] == int(np.sum(mem_q >= BUDGET_LOG_Q))
    assert budget["controls"]["count"] == int(np.sum(ctl_q >= BUDGET_LOG_Q))
    half = rows["q > 1/2 (top-40)"]
    assert half["controls"]["count"] == int(np.sum(ctl_q > math.log(0.5)))
    for r in rows.values():
        if r["kind"] == "calibrated" and "k" in r:
            tau = np.sort(ctl_q)[::-1][r["k"] - 1]  # the K-th largest control score, here
            assert r["members"]["count"] == int(np.sum(mem_q > tau))
            assert r["controls"]["count"] <= r["k"] - 1 and r["in_sample_fpr"] <= r["alpha"]


def test_sweep_block_and_the_length_comparison():
    from memclaim.experiments.alpha_sweep import ALPHA_REF, compare_lengths, sweep_block

    rng = np.random.default_rng(1)
    ctl = np.concatenate([rng.normal(-10, 2, 150), np.full(49, -np.inf)])
    mem = rng.normal(-8, 2, 100)
    b = sweep_block(mem, ctl)
    n = ctl.size
    assert b["control_zero_share"] == pytest.approx(49 / n)
    assert b["alpha_dagger"] == pytest.approx(150 / n) and b["k_max"] == 150
    sw = b["sweep"]
    assert list(sw["k"]) == list(range(1, 151))  # every K up to the atom
    desc = np.sort(ctl)[::-1]
    k = int(math.floor(ALPHA_REF * (n + 1)))
    assert b["reference"]["k"] == k
    assert b["reference"]["threshold_log10"] == pytest.approx(desc[k - 1] / math.log(10))
    assert b["reference"]["n_claimed"] == int(np.sum(mem > desc[k - 1]))
    c = compare_lengths(sweep_block(mem - 5, ctl), b)  # the "long" suffix scores its members higher
    assert (
        all(c["long_at_or_above_short"])
        and c["reference_difference_long_minus_short"]["estimate"] >= 0
    )


def test_parrot_binary_test_levels():
    from memclaim.experiments.parrot import binary_test

    mem = np.array([True] * 30 + [False] * 70)
    ctl = np.array([True] * 28 + [False] * 72)
    t = binary_test(mem, ctl)
    assert t["alpha_n_exact"] == "29/101" and t["at_alpha_n"]["n_claimed"] == 30
    lv = {x["alpha"]: x for x in t["levels"]}
    assert not lv[0.05]["claim_possible"] and lv[0.05]["n_claimed"] == 0  # K = 5 <= m = 28
    assert t["at_alpha_n"]["calibrated_rate"]["lower"] < 0  # 30% against a 29/101 floor: no claim


def test_nonoverlap_false_alarm_matches_simulation():
    rng = np.random.default_rng(2)
    n1, n2, p = 40, 50, 0.3
    x, y = rng.binomial(n1, p, 20000), rng.binomial(n2, p, 20000)
    c1 = np.array([_cp(k, n1) for k in range(n1 + 1)])  # [n1 + 1, 2] intervals by count
    c2 = np.array([_cp(k, n2) for k in range(n2 + 1)])
    apart = int(np.sum((c1[x, 0] > c2[y, 1]) | (c2[y, 0] > c1[x, 1])))
    exact = ev.nonoverlap_false_alarm(n1, n2, p)
    se = math.sqrt(exact * (1 - exact) / 20000)
    assert abs(apart / 20000 - exact) <= 4 * se + 1e-4  # 4 standard errors: false alarm < 1e-4


def test_reproductions_are_registered():
    for name in NAMES:
        assert name in REPRODUCTIONS and REPRODUCTIONS[name][1].startswith("[EM]")
    for rows in AGREEMENT.values():
        for spec in rows.values():
            assert isinstance(spec, SideBySide)
    # this branch's [EM] rows are side by side (other model scale); exact arithmetic rows elsewhere
    # (decontamination's alpha_N and K) are same_scale
    ours = [k for k in PAPER if k.split("/")[0] in NAMES]
    assert ours and all(not PAPER[k].same_scale for k in ours)


def test_missing_data_folder_is_reported(monkeypatch, tmp_path):
    from memclaim.errors import InputError

    monkeypatch.setenv(ev.DATA_ENV, str(tmp_path))
    with pytest.raises(InputError, match="not in") as e:
        ev.data_dir()
    assert ev.DATA_ENV in str(e.value) and "kjv_verses.jsonl" in str(e.value)


# ------------------------------------------------------------------ the quick runs (SmolLM2)
@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("em-a")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


@pytest.mark.real
@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_its_files(quick, name):
    out, results = quick
    r = results[name]
    assert r["schema"] == "memclaim.reproduction/3" and r["quick"] is True and r["name"] == name
    assert r["all_checks_passed"], [c for c in r["checks"] if not c["passed"]]
    assert_covers(r, AGREEMENT[name])
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name])
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert (out / f"{name}.png").stat().st_size > 1000 and (out / f"{name}.pdf").read_bytes()[
        :4
    ] == b"%PDF"
    # what differs from the paper and each of its sentences judged, with the rule fixed before the run
    assert r["differences_from_paper"] and any("SmolLM2" in d for d in r["differences_from_paper"])
    assert r["paper_claims"] and all(
        c["quote"] and c["test"] and c["evidence"] and c["where"] for c in r["paper_claims"]
    )
    assert r["paper_claims_held"] == sum(c["held"] is True for c in r["paper_claims"])
    assert sum(r["paper_claims_verdicts"].values()) == len(r["paper_claims"])
    assert len({c["key"] for c in r["paper_claims"]}) == len(r["paper_claims"])
    md = (out / f"{name}.md").read_text()  # the report shows every sentence with its verdict
    assert all(f"### {c['verdict']}: " in md for c in r["paper_claims"])
    assert (out / f"{name}.html").stat().st_size > 1000
    text = json.dumps(r)
    assert (
        "/tmp" not in text and str(out) not in text
    )  # no paths in the JSON (byte-identical reruns)


@pytest.mark.real
def test_second_run_reads_the_store_and_is_identical(quick):
    """The natural-prefix procedure is scored once: a second run is a no-op on the store and gives the
    same JSON byte for byte."""
    out, results = quick
    before = (out / "alpha-sweep.json").read_bytes()
    again = run("alpha-sweep", quick=True, seed=0, out_dir=out)
    assert (out / "alpha-sweep.json").read_bytes() == before and again == results["alpha-sweep"]


@pytest.mark.real
def test_greedy_numbers_from_the_ranks(quick):
    """Member and control greedy rates re-derived from the stored target ranks; the claims' verdicts re-derived."""
    out, results = quick
    g = results["greedy"]["results"]["models"][0]
    runs = _runs(out / "store", "em-verses-natural")
    mem = load_run_scores(out / "store", run=runs["members"][0], policy="greedy")
    ctl = load_run_scores(out / "store", run=runs["controls"][0], policy="greedy")
    mf, cf = _rank_flags(mem), _rank_flags(ctl)
    j, n = mf.shape[0], cf.shape[0]
    assert (j, n) == (120, 180)
    for row in g["lengths"]:
        ell = row["suffix_tokens"]
        gm, m = int(mf[:, ell - 1].sum()), int(cf[:, ell - 1].sum())
        assert (row["member"]["count"], row["control"]["count"]) == (gm, m)
        assert row["alpha_n"] == pytest.approx((m + 1) / (n + 1))
        assert (row["member"]["lower"], row["member"]["upper"]) == pytest.approx(
            _cp(gm, j), abs=1e-12
        )
    s, lg = g["short"], g["long"]
    assert (s["suffix_tokens"], lg["suffix_tokens"]) == (ev.SHORT, ev.LONG)
    gs, ms, gl, ml = (
        int(mf[:, ev.SHORT - 1].sum()),
        int(cf[:, ev.SHORT - 1].sum()),
        int(mf[:, ev.LONG - 1].sum()),
        int(cf[:, ev.LONG - 1].sum()),
    )
    # [EM] §4's "roughly one quarter": alpha_N / G with Katz's interval below 1 and meeting [1/5, 1/3]
    share = _claim(results["greedy"], "short-floor-share")
    lo, hi = _katz(ms + 1, n + 1, gs, j) if gs else (math.inf, math.inf)
    assert share["held"] == (gs > 0 and hi < 1 and lo <= 1 / 3 and hi >= 1 / 5)
    assert (
        share["held"] is False
    )  # SmolLM2 reproduces 1 of 120 members and 4 of 180 controls at 3 tokens
    # "smaller at 50 tokens": the same members' flags are nested, so the discordant pairs all go one way; with
    # gs - gl of them, the exact (McNemar) test of "no difference" has p = 2 x 0.5^(gs - gl): this run's verdict
    # must agree with it (Newcombe's paired interval and the exact test agree far from the 5% edge)
    assert np.all(mf[:, ev.LONG - 1] <= mf[:, ev.SHORT - 1])
    p_exact = float(stats.binomtest(gs - gl, gs - gl, 0.5).pvalue) if gs > gl else 1.0
    assert p_exact > 0.2 or p_exact < 0.01, "too close to the edge for this cross-check"
    assert _claim(results["greedy"], "long-member-rate-smaller")["held"] == (p_exact < 0.05)
    # "close to zero (0.04%)": a 95% upper bound <= 0.1% needs N >= log(0.05) / log(0.999) = 2,995 controls
    near = _claim(results["greedy"], "long-floor-near-zero")
    assert near["verdict"] == "not testable here" and n < math.log(0.05) / math.log(0.999)
    assert near["numbers"]["control_rate_upper_bound_95"] == pytest.approx(
        float(stats.beta.ppf(0.95, ml + 1, n - ml))
    )


@pytest.mark.real
def test_alpha_sweep_thresholds_from_sorted_controls(quick):
    out, results = quick
    blk = results["alpha-sweep"]["results"]["models"][0]["policies"]
    runs = _runs(out / "store", "em-verses-natural")
    for policy in ("top-k:40", "full"):
        for ell in (ev.SHORT, ev.LONG):
            mem = load_run_scores(
                out / "store", run=runs["members"][0], policy=policy, suffix_tokens=ell
            ).logq
            ctl = load_run_scores(
                out / "store", run=runs["controls"][0], policy=policy, suffix_tokens=ell
            ).logq
            L = blk[policy]["lengths"][str(ell)]
            n = ctl.size
            desc = np.sort(ctl)[::-1]
            assert L["control_zero_share"] == pytest.approx(np.mean(np.isneginf(ctl)))
            above_atom = int(np.sum(ctl > -np.inf)) if policy == "top-k:40" else n
            sw = L["sweep"]
            assert sw["k"][-1] == min(above_atom, n)
            for k, tl, g, a in zip(
                sw["k"], sw["threshold_log10"], sw["member_rate"], sw["alpha_n"]
            ):
                assert tl == pytest.approx(desc[k - 1] / math.log(10), abs=1e-12)
                assert g == pytest.approx(np.mean(mem > desc[k - 1]), abs=1e-12)
                assert a == pytest.approx(k / (n + 1), abs=1e-15)
                assert np.sum(ctl > desc[k - 1]) <= k - 1  # in-sample FPR <= (K-1)/N ([EM] C.1)
    # the sentences' verdicts, re-derived from the sweep numbers: with 180 controls no level reaches the paper's
    # alpha_N ~ 0.1% (K = floor(0.001 x 181) = 0), so every sentence stated there is not testable here
    tk = blk["top-k:40"]
    n = tk["lengths"][str(ev.SHORT)]["n_controls"]
    assert math.floor(0.001 * (n + 1)) == 0
    for key in (
        "short-tau-nearly-certain",
        "thresholds-five-orders-apart",
        "long-above-short-across-sweep",
        "low-fpr-long-above-short",
        "full-softmax-long-above-short",
    ):
        assert _claim(results["alpha-sweep"], key)["verdict"] == "not testable here", key
    ks = dict(
        zip(
            tk["lengths"][str(ev.SHORT)]["sweep"]["k"],
            tk["lengths"][str(ev.SHORT)]["sweep"]["calibrated_rate"],
        )
    )
    kl = dict(
        zip(
            tk["lengths"][str(ev.LONG)]["sweep"]["k"],
            tk["lengths"][str(ev.LONG)]["sweep"]["calibrated_rate"],
        )
    )
    common = sorted(set(ks) & set(kl))
    across = _claim(results["alpha-sweep"], "long-above-short-across-sweep")
    assert across["numbers"]["levels_compared"] == len(common)
    assert across["numbers"]["levels_long_above_short"] == sum(kl[k] > ks[k] for k in common)
    # "far higher" at the smallest thresholds: Katz's lower bound of both ratios >= 2
    sm, lm = (tk["lengths"][str(e)] for e in (ev.SHORT, ev.LONG))
    j = sm["n_members"]
    gsm, glm = (round(x["at_smallest_threshold"]["member_rate"] * j) for x in (sm, lm))
    far = _katz(gsm, j, glm, j)[0] >= 2 and _katz(sm["k_max"], n, lm["k_max"], n)[0] >= 2
    assert _claim(results["alpha-sweep"], "short-rates-far-higher")["held"] == far


@pytest.mark.real
def test_naive_rules_flag_controls_the_calibrated_test_bounds_them(quick):
    out, results = quick
    blk = results["naive-vs-calibrated"]["results"]["models"][0]["lengths"]
    for ell, rows in blk.items():
        n = rows[0]["controls"]["n"]
        for r in rows:
            if r["kind"] == "calibrated" and "k" in r:
                assert r["controls"]["count"] <= r["k"] - 1 and r["in_sample_fpr"] <= r["alpha"]
                assert r["population_claim"] == (r["calibrated_rate"]["lower"] > 0)
        greedy = next(r for r in rows if r["rule"] == "greedy match")
        same = results["greedy"]["results"]["models"][0]["lengths"][int(ell) - 1]
        assert greedy["members"]["count"] == same["member"]["count"]  # one pass, one set of numbers
        assert greedy["controls"]["count"] == same["control"]["count"] and n == same["control"]["n"]


@pytest.mark.real
def test_parrot_intervals_and_verdicts(quick):
    out, results = quick
    r = results["parrot"]
    w = r["results"]["whole_verse"]
    runs = _runs(out / "store", "em-parrot")
    mem = load_run_scores(out / "store", run=runs["members"][0], policy="greedy")
    ctl = load_run_scores(out / "store", run=runs["controls"][0], policy="greedy")
    assert len(mem) == len(ctl) == 48
    # the target is the verse without its leading space, as the assistant would start it (docs/prompts.md)
    assert all(not t.startswith(" ") for t in r["results"]["example_target"].values())
    gm, gc = int(np.sum(mem.greedy_match)), int(np.sum(ctl.greedy_match))
    assert (w["member"]["count"], w["control"]["count"]) == (gm, gc)
    lm, um = _cp(gm, 48)
    lc, uc = _cp(gc, 48)
    overlap = lm <= uc and lc <= um
    assert _claim(r, "rates-indistinguishable")["held"] == overlap
    assert _claim(r, "follows-the-prompt")["held"] == (lm > 0.5 and lc > 0.5)
    # no claim at the binary operating point: the CP lower bound of G minus (m+1)/(N+1), recomputed
    no_claim = lm - (gc + 1) / 49 <= 0
    assert (w["test"]["at_alpha_n"]["calibrated_rate"]["lower"] <= 0) == no_claim
    # first-l-token rates from the ranks of the same pass
    mf, cf = _rank_flags(mem), _rank_flags(ctl)
    for row in r["results"]["first_tokens"]:
        ell = row["first_tokens"]
        assert (row["member"]["count"], row["control"]["count"]) == (
            int(mf[:, ell - 1].sum()),
            int(cf[:, ell - 1].sum()),
        )


# ------------------------------------------------------------------ full runs (slow tier)
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_run(tmp_path_factory, name):
    """The full runs: all 240 members and 300 controls, SmolLM2 and Gemma 3 270M for the natural-prefix
    reproductions (the parrot needs an instruct model: SmolLM2 only). Checks and files as in the quick tier."""
    out = tmp_path_factory.getbasetemp() / "em-a-full"
    r = run(name, quick=False, seed=0, out_dir=out)
    assert r["all_checks_passed"] and r["quick"] is False
    assert_covers(r, AGREEMENT[name])
    models = [m["name"] for m in r["settings"].get("models", [r["settings"].get("model", {})])]
    assert models == (["smollm2"] if name == "parrot" else ["smollm2", "gemma3-270m"])
    assert json.loads((out / f"{name}.json").read_text()) == r
    print(f"\n{name} (full):")
    for c in r["paper_claims"]:
        print(f"  [{c['verdict']}] {c['claim']}: {c['evidence']}")


# ------------------------------------------------------------------ the plumbing of paper claims
def test_paper_claims_are_findings_not_failures(tmp_path, monkeypatch, capsys):
    """A paper sentence that does not hold (or cannot be tested here) is reported (JSON, summary, figure,
    NAME.md) and leaves the exit status 0; a failed check (a guarantee) sets it to 1. `reproduce --list`
    shows the [EM] entries."""
    import sys
    import types

    from memclaim.cli.main import main
    from memclaim.experiments.common import (
        check,
        finish,
        new_figure,
        paper_claim,
        paper_footer,
        summary_lines,
    )

    def make(passed):
        def fake_run(*, quick, seed, out_dir):
            fig, ax = new_figure()
            ax.plot([0, 1], [0, 1])
            claims = [
                paper_claim(
                    "equal",
                    "rates are equal",
                    quote="The two intervals overlap",
                    where="[EM] App. A.1",
                    held=False,
                    test="CP intervals overlap",
                    evidence="[1%, 2%] and [5%, 9%]",
                ),
                paper_claim(
                    "no-claim",
                    "no claim",
                    quote="the test makes no memorization claim",
                    where="[EM] §3",
                    held=True,
                    test="M lower <= 0",
                    evidence="M = -1%",
                ),
                paper_claim(
                    "low",
                    "the floor is near zero",
                    quote="close to zero",
                    where="[EM] §4",
                    held=None,
                    test="upper bound <= 0.1%",
                    evidence="needs 2,995 controls",
                ),
            ]
            h = fig.get_figheight()
            paper_footer(fig, differences=["model X (paper: Y)"], claims=claims)
            assert fig.get_figheight() > h  # the footer adds its own room
            return finish(
                "fake-em",
                title="t",
                reproduces=["x"],
                seed=seed,
                quick=quick,
                streams=[],
                settings={},
                results={},
                paper_numbers=[],
                checks=[check("identity", passed, "d")],
                figure=fig,
                out_dir=out_dir,
                paper_claims=claims,
                differences=["model X (paper: Y)"],
            )

        return fake_run

    for passed, status in ((True, 0), (False, 1)):
        mod = types.ModuleType("memclaim_test_fake_em")
        mod.run = make(passed)
        monkeypatch.setitem(sys.modules, "memclaim_test_fake_em", mod)
        monkeypatch.setitem(REPRODUCTIONS, "fake-em", ("memclaim_test_fake_em", "test"))
        capsys.readouterr()
        assert main(["reproduce", "fake-em", "--out", str(tmp_path / str(passed))]) == status
        out = capsys.readouterr().out
        assert (
            "[not held] rates are equal ([EM] App. A.1)" in out
            and "found: [1%, 2%] and [5%, 9%]" in out
        )
        assert "[not testable here] the floor is near zero ([EM] §4)" in out
        assert (
            "1 held, 1 not held, 1 not testable here" in out
            and "differs from the paper: model X (paper: Y)" in out
        )
        d = json.loads((tmp_path / str(passed) / "fake-em.json").read_text())
        assert (
            d["paper_claims_held"] == 1 and d["paper_claims"][0]["test"] == "CP intervals overlap"
        )
        assert d["paper_claims_verdicts"] == {"held": 1, "not held": 1, "not testable here": 1}
        assert any("[not held]" in line for line in summary_lines(d))
        md = (tmp_path / str(passed) / "fake-em.md").read_text()
        assert (
            "### not testable here: the floor is near zero" in md and "needs 2,995 controls" in md
        )
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed for n in NAMES)


def test_list_shows_em_beside_mx_in_one_column(capsys):
    """`reproduce --list`: every entry, [MX] and [EM], one line each, descriptions aligned in one column
    (the longest name, naive-vs-calibrated, used to push its description out of line)."""
    from memclaim.cli.main import main

    capsys.readouterr()
    assert main(["reproduce", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == list(REPRODUCTIONS)
    starts = {ln.index("[") for ln in lines}
    assert len(starts) == 1, starts
    tags = [ln[ln.index("[") :][:4] for ln in lines]
    assert (
        "[EM]" in tags
        and "[MX]" in tags
        and all(REPRODUCTIONS[n][1].startswith("[EM]") for n in NAMES)
    )
