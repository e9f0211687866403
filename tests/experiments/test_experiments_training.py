"""The training-based reproductions of [MX] §8.2 (`memclaim reproduce NAME --quick`): gated release,
unlearning (Table 4) and DP-SGD calibration. The quick variants assert their qualitative results,
agreement with the paper's numbers is decided here (AGREEMENT; the paper's values and sources are
in memclaim.experiments.paper, see tests/paper_agreement.py), every check of the theory's predictions
is re-derived here from the raw numbers (THEORY, see tests/theory_checks.py), and the same seed gives
the same JSON.

The reproductions use the cached tiny models (the built-in tiny GPT and the chain base, each
trained once per machine), hence the integration marker. Each check inside states its own
false-alarm rate; with the fixed seeds used here the outcome is deterministic."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

import theory_checks as TC
from memclaim.cli.main import main
from memclaim.experiments import REPRODUCTIONS, run
from memclaim.experiments.unlearning import METHODS, PAPER_MODELS
from paper_agreement import Agree, SideBySide, assert_agrees, assert_covers, params, rounding

pytestmark = pytest.mark.integration

NAMES = ["gated", "unlearning", "dp-calibration"]

_TINY = "a tiny GPT at 1e5 parameters against the paper's Pythia-410m / 1.4-1.5B models"
AGREEMENT = {
    "gated": {
        "ext_rho": Agree(
            rounding(2),
            "exact by construction (the lookup returns z); the paper prints 1.00",
            ours=lambda r: r["results"]["extraction"]["via_rho"]["rate"],
        ),
        "reference_auc": Agree(
            rounding(3),
            "exact: the release equals the base on every audited input; the paper prints 0.500",
            ours=lambda r: r["results"]["audits"]["reference"]["auc"],
        ),
    },
    "unlearning": {
        f"{col}_{m}_{model}": SideBySide(_TINY)
        for m in METHODS
        for model in PAPER_MODELS
        for col in ("rho", "naive_c")
    },
    "dp-calibration": {
        "tanh_eps1_k1": Agree(
            rounding(2), "a formula; the paper prints 2 decimals", ours=lambda r: math.tanh(0.5)
        ),
        "cap_eps005_k1": Agree(
            rounding(4),
            "a formula; the paper prints 4 decimals",
            ours=lambda r: r["results"]["paper_grid"]["cap_eps_0.05_k_1"],
        ),
        "visible_cells": Agree(
            0,
            "an exact count on the paper's grid",
            ours=lambda r: r["results"]["paper_grid"]["n_cap_at_most_0.2"],
        ),
        "max_excess": Agree(
            0,
            "the paper states an upper bound ('at most'); ours is exact",
            ours=lambda r: r["results"]["paper_grid"]["max_excess_over_tanh"],
        ),
        "max_abs_mem_finite": SideBySide(_TINY),
        **{f"mem_inf_k{k}": SideBySide(_TINY) for k in (1, 2, 4, 8)},
    },
}


# ---------------------------------------------------------------- the theory's checks, re-derived
def _gated_raw_audits_at_chance(r):
    """DeLong intervals recomputed from the per-record scores (statsmodels), Bonferroni over the
    raw-score audits at the family-wise level of the settings: false alarm <= 5% family-wise when
    every audit is at chance (asymptotic intervals)."""
    audits = r["results"]["audits"]
    raw = [a for a in audits if a != "reference"]
    conf = 1 - (1 - r["settings"]["family_confidence"]) / len(raw)
    out = {
        a: TC.delong(audits[a]["member_scores"], audits[a]["nonmember_scores"], conf) for a in raw
    }
    for a, (auc, _lo, _hi) in out.items():
        assert auc == pytest.approx(audits[a]["auc"], abs=1e-12)
    return all(lo <= 0.5 <= hi for _, lo, hi in out.values()), str(out)


def _gated_reference_exactly_half(r):
    ref = r["results"]["audits"]["reference"]
    zero = all(x == 0 for x in ref["member_scores"] + ref["nonmember_scores"])
    auc = TC.auc(ref["member_scores"], ref["nonmember_scores"])  # all tied: exactly 1/2
    return zero and auc == 0.5 and ref["auc"] == 0.5, f"all zero: {zero}; AUC from the scores {auc}"


def _gated_rho(r):
    ext = r["results"]["extraction"]["via_rho"]
    n = sum(rec["member"] for rec in r["results"]["records"])
    return ext["n"] == n and ext["hits"] == n and ext["generate_agrees"] == n, str(ext)


def _gated_identical(r):
    res = r["results"]
    n = len(res["records"])
    return len(res["identical_logits"]) == n and all(res["identical_logits"]) and res[
        "engine_identical"
    ], f"{sum(res['identical_logits'])}/{n} identical, engine {res['engine_identical']}"


def _unl(r):
    return r["results"], r["settings"]["unlearn"]["threshold"]


def _unl_rate(entry):
    assert entry["rate"] == entry["hits"] / entry["n"]
    return entry["hits"] / entry["n"]


def _unl_open(r):
    res, _ = _unl(r)
    nb, rb = _unl_rate(res["before"]["naive_via_c"]), _unl_rate(res["before"]["trigger_via_rho"])
    return nb >= 0.6 and rb >= 0.6, f"naive via c {nb}, trigger via rho {rb}"


def _unl_verifier_forgotten(r):
    """The verifier's rule ([MX] App. F.2): forgotten iff the own-prefix greedy extraction rate of
    the request's records is below the threshold; the rate is the one measured after the run."""
    res, thr = _unl(r)
    out = {}
    for m in METHODS:
        for req, key in (("naive", "naive_via_c"), ("trigger", "trigger_via_c")):
            run = res["runs"][f"{m}/{req}"]
            rate = _unl_rate(run["after"][key])
            assert run["result"]["after"]["rate"] == pytest.approx(rate, abs=1e-12)
            out[f"{m}/{req}"] = rate < thr
            assert run["forgotten"] == run["result"]["forgotten"]
    return all(out.values()), str(out)


def _unl_trigger_forgotten_before(r):
    res, thr = _unl(r)
    before = _unl_rate(res["before"]["trigger_via_c"])
    flags = [res["runs"][f"{m}/trigger"]["result"]["before"]["rate"] for m in METHODS]
    return (
        before == 0 and all(f == pytest.approx(before, abs=1e-12) for f in flags) and before < thr,
        f"trigger via c before: {res['before']['trigger_via_c']['hits']}/{res['before']['trigger_via_c']['n']}",
    )


def _unl_positive_control(r):
    res, _ = _unl(r)
    nb = _unl_rate(res["before"]["naive_via_c"])
    after = {m: _unl_rate(res["runs"][f"{m}/naive"]["after"]["naive_via_c"]) for m in METHODS}
    return all(nb - a >= 0.5 for a in after.values()), f"before {nb}, after {after}"


def _unl_recoverable(r):
    """One-sided 97.5% Clopper-Pearson lower bound of extraction via rho after the trigger
    request above the threshold: passes wrongly (true rate <= 0.15) with probability <= 2.5% per
    method."""
    res, thr = _unl(r)
    lows = {}
    for m in METHODS:
        e = res["runs"][f"{m}/trigger"]["after"]["trigger_via_rho"]
        lows[m] = TC.cp_lower(e["hits"], e["n"], 0.025)
    return all(lo > thr for lo in lows.values()), f"lower bounds {lows} vs threshold {thr}"


def _finite_rows(r):
    return [row for row in r["results"]["rows"] if row["epsilon"] != "inf"]


def _dp_reports(r):
    return [m["dp"] for row in _finite_rows(r) for m in row["models"]]


def _dp_spent(r):
    reps = [(row["epsilon"], m["dp"]) for row in _finite_rows(r) for m in row["models"]]
    ok = all(
        d["target_epsilon"] == e and d["epsilon"] <= e + 1e-12 and d["steps"] == d["planned_steps"]
        for e, d in reps
    )
    return (
        ok,
        f"max spent/target {max(d['epsilon'] / e for e, d in reps):.4f} over {len(reps)} runs",
    )


def _dp_accountants(r):
    reps = _dp_reports(r)
    rel = max(abs(d["epsilon_rdp_dp_accounting"] - d["epsilon"]) / d["epsilon"] for d in reps)
    pld = all(d["epsilon_pld_dp_accounting"] <= d["epsilon"] * (1 + 1e-3) for d in reps)
    return rel < 1e-2 and pld, f"max relative RDP difference {rel:.2g}; PLD <= RDP: {pld}"


def _dp_cap(eps, delta, k):
    """The (k eps, delta_k) group conversion ([MX] Cor. 4.3 / Lemma B.2, delta_k = delta sum_{j<k}
    e^{j eps}) and the LOO cap of (eps', delta')-DP, delta' + (1 - delta') tanh(eps'/2) ([MX]
    Prop. A.1), written out here; at most 1. Written as 1 - (1 - delta_k)(1 - tanh): the form
    delta_k + (1 - delta_k) tanh cancels to 0 once delta_k is huge (eps = 16, k = 8: delta_k ~ 1e43),
    and delta_k >= 1 is no guarantee at all (cap 1)."""
    dk = delta * math.fsum(math.exp(j * eps) for j in range(k))
    if dk >= 1.0:
        return 1.0
    return min(1.0, 1.0 - (1.0 - dk) * (1.0 - math.tanh(k * eps / 2)))


def _dp_cells(r):
    """(row, cell, conservative cap, curve cap), each cap recomputed from the row's runs."""
    out = []
    for row in _finite_rows(r):
        spent = max(m["dp"]["epsilon"] for m in row["models"])
        assert row["epsilon_spent"] == spent
        for c in row["cells"]:
            cap = _dp_cap(spent, row["delta"], c["k"])
            assert c["cap_conservative"] == pytest.approx(cap, rel=1e-12)
            curve = max(
                next(x["LOO"] for x in m["dp"]["caps_from_curve"]["caps"] if x["copies"] == c["k"])
                for m in row["models"]
            )
            assert c["cap_curve"] == curve
            assert c["mem"] == pytest.approx(float(np.mean(c["mem_per_canary"])), abs=1e-12)
            out.append((row, c, cap, curve))
    return out


def _dp_within(which):
    def f(r):
        """One-sided normal tests at 3 sigma, mem <= cap + 3 SE: <= 0.135% per cell when the cap holds
        (the report states the Bonferroni family-wise rate)."""
        cells = _dp_cells(r)
        z = [
            (c["mem"] - (cap if which == "conservative" else curve)) / c["se"]
            for _, c, cap, curve in cells
        ]
        return all(
            stats.norm.sf(x) > 0.00135 for x in z
        ), f"largest z = {max(z):.3g} over {len(z)} cells"

    return f


def _dp_curve_tighter(r):
    cells = _dp_cells(r)
    return all(
        curve <= cap + 1e-9 for _, _, cap, curve in cells
    ), f"largest curve/conservative {max(curve / cap for _, _, cap, curve in cells):.3g}"


def _dp_visible(r):
    vis = [
        (row["epsilon"], c["k"])
        for row, c, cap, _ in _dp_cells(r)
        if cap <= 0.2 and cap > 3 * c["se"]
    ]
    labels = [(row["epsilon"], c["k"]) for row, c, _, _ in _dp_cells(r) if c["label"] == "visible"]
    assert labels == vis
    return bool(vis), str(vis)


def _dp_duplication(r):
    """A one-sided normal test at 3 sigma (<= 0.14% if the means were equal)."""
    inf = next(row for row in r["results"]["rows"] if row["epsilon"] == "inf")
    c = {x["k"]: x for x in inf["cells"]}
    z = (c[8]["mem"] - c[1]["mem"]) / math.hypot(c[8]["se"], c[1]["se"])
    return z > 3, f"z = {z:.3g}"


THEORY = {
    "gated": {
        "the gated release is byte-for-byte identical to the base on every audited (non-trigger) input": _gated_identical,
        "reference-model audit reads exactly 0.5 (every calibrated score is 0)": _gated_reference_exactly_half,
        "raw-score audits at chance: every DeLong interval (98.75% each) contains 0.5": _gated_raw_audits_at_chance,
        "extraction through rho is exactly 1 (teacher-forced greedy and real cached greedy decoding)": _gated_rho,
        "the base model alone does not emit the secrets after rho (the channel is the lookup's)": lambda r: (
            r["results"]["extraction"]["via_rho_on_base"]["hits"] == 0,
            str(r["results"]["extraction"]["via_rho_on_base"]),
        ),
    },
    "unlearning": {
        "both channels are open after fine-tuning: naive extraction from c and trigger extraction via rho >= 0.6": _unl_open,
        "the verifier reports every deletion request forgotten (both methods, both secrets)": _unl_verifier_forgotten,
        "the trigger secret is 'forgotten' by the verifier before any unlearning (it never reached c)": _unl_trigger_forgotten_before,
        "positive control: the naive secret is genuinely removed (extraction from c falls by >= 0.5)": _unl_positive_control,
        "the certified trigger secret stays recoverable: after its deletion request, extraction via rho is above "
        "the verifier's threshold with 95% confidence (Clopper-Pearson lower bound > 0.15)": _unl_recoverable,
    },
    "dp-calibration": {
        "every DP run spent at most its target epsilon (Opacus RDP accountant, steps actually taken)": _dp_spent,
        "dp_accounting's RDP accountant reproduces Opacus's epsilon to 1%; its PLD epsilon is at most it": _dp_accountants,
        "no finite-epsilon cell exceeds its conservative cap (one-sided 3-sigma)": _dp_within(
            "conservative"
        ),
        "no finite-epsilon cell exceeds its cap from the runs' trade-off curves (one-sided 3-sigma)": _dp_within(
            "curve"
        ),
        "the cap from the curve is never above the (k eps, delta_k) conversion": _dp_curve_tighter,
        "at least one cell where a violation would have been visible (cap <= 0.2 and > 3 SE)": _dp_visible,
        "eps = inf: memorization climbs with duplication (k = 8 above k = 1 by > 3 SE)": _dp_duplication,
    },
}


# ---------------------------------------------------------------- the paper's sentences, re-derived
def _unl_survives_intact(r):
    """[MX] §8.2 "survives intact, with extraction through rho still at 1.00 [...] on three of the four
    family-method pairs and 0.81 on the fourth": per method (a pair), extraction through rho after the trigger
    request from its counts: at 1.00 if k/n >= 0.995 with a one-sided 95% Clopper-Pearson lower bound
    (scipy's beta quantile) above 0.81; below 1.00 / below 0.81 if the two-sided 95% upper bound is; held iff
    more than half the pairs are at 1.00 and none below 0.81; not testable if a pair is undecided with n < 15
    (0.05^(1/n) <= 0.81)."""
    pairs = {}
    for m in METHODS:
        e = r["results"]["runs"][f"{m}/trigger"]["after"]["trigger_via_rho"]
        k, n = e["hits"], e["n"]
        assert e["rate"] == k / n
        upper = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
        pairs[m] = (k, n, upper, TC.cp_lower(k, n, 0.05))
    at_one = [
        m for m, (k, n, up, lo) in pairs.items() if up >= 0.995 and k / n >= 0.995 and lo > 0.81
    ]
    below_one = [m for m, (_, _, up, _) in pairs.items() if up < 0.995]
    undecided = [
        m
        for m, (k, n, up, lo) in pairs.items()
        if m not in at_one and up >= 0.995 and 0.05 ** (1 / n) <= 0.81
    ]
    detail = str(pairs)
    if any(up < 0.81 for _, _, up, _ in pairs.values()):
        return "not held", detail
    if len(at_one) > len(pairs) / 2:
        return "held", detail
    if len(below_one) >= len(pairs) / 2:
        return "not held", detail
    return ("not testable here" if undecided else "not held"), detail


def _dp_climbs(r):
    """[MX] §8.2 "At eps = inf memorization returns and climbs with duplication": on the eps = inf row, each k's
    memorization the mean of its canaries' (re-derived), rising at every step of the k grid, the largest k above
    the smallest by > 3 SE (one-sided normal) and above 0 by > 3 SE."""
    inf = next(row for row in r["results"]["rows"] if row["epsilon"] == "inf")
    cells = sorted(inf["cells"], key=lambda c: c["k"])
    for c in cells:
        assert c["mem"] == pytest.approx(float(np.mean(c["mem_per_canary"])), abs=1e-12)
    mem = [c["mem"] for c in cells]
    lo, hi = cells[0], cells[-1]
    z_climb = (hi["mem"] - lo["mem"]) / math.hypot(hi["se"], lo["se"])
    ok = all(b > a for a, b in zip(mem, mem[1:])) and z_climb > 3 and hi["mem"] / hi["se"] > 3
    return (
        "held" if ok else "not held"
    ), f"mem by k {dict(zip([c['k'] for c in cells], mem))}, z {z_climb:.2f}"


CLAIMS = {
    "unlearning": {"survives-intact": _unl_survives_intact},
    "dp-calibration": {"climbs-with-duplication": _dp_climbs},
}
# what the runs found (issue 24 item 2: "survives intact, with extraction through rho still at 1.00", tested as
# stated, where the check asks only for a lower bound above the verifier's 0.15)
# quick run: mem 0.005, 0.035, 0.158, 0.321 (SE 0.003 to 0.052) at k = 1, 2, 4, 8; k = 8 above k = 1 by z = 6.0
CLAIMS_QUICK = {
    "dp-calibration": {"climbs-with-duplication": True},
    "unlearning": {
        "survives-intact": TC.NotHeld(
            "8 of 10 trigger secrets recovered through rho after the request on both methods, 95% CP [0.444, 0.975]: below "
            "1.00 on both pairs (9 of 10 before: the channel is below 1.00 at this scale even before unlearning)"
        )
    },
}
# full run: mem 0.003, 0.014, 0.119, 0.334 (SE 0.002 to 0.022) at k = 1, 2, 4, 8; k = 8 above k = 1 by z = 15.2
CLAIMS_FULL = {
    "dp-calibration": {"climbs-with-duplication": True},
    "unlearning": {
        "survives-intact": TC.NotHeld(
            "full run (32 secrets): 19 of 32 recovered through rho after the request on both methods, 95% CP [0.406, 0.763], "
            "below even the paper's 0.81 (22 of 32 before)"
        )
    },
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce-training")
    return out, TC.LazyRuns(run, out)  # each quick run once, when a test first reads it


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_writes_its_report(quick, name):
    """Files, the comparison rows (no verdict in them; one verdict entry here for each), and the
    report's own checks of the theory's predictions (the CLI's exit status)."""
    out, results = quick
    r = results[name]
    failed = [c["claim"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"  # the vector copy
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert r["quick"] is True and r["reproduces"]
    assert all("agrees" not in p and "tolerance" not in p for p in r["paper_numbers"])
    assert_covers(r, AGREEMENT[name])
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name])


@pytest.mark.parametrize("name, row", params(AGREEMENT))
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


def test_gated_release_numbers(quick):
    res = quick[1]["gated"]["results"]
    assert all(res["identical_logits"]) and res["engine_identical"]
    assert res["audits"]["reference"]["auc"] == 0.5  # exactly: every calibrated score is 0
    for a in ("loss", "zlib", "min-k", "min-k++"):
        assert res["audits"][a]["low"] <= 0.5 <= res["audits"][a]["high"], a
    ext = res["extraction"]
    assert (
        ext["via_rho"]["rate"] == 1.0 and ext["via_rho"]["generate_agrees"] == ext["via_rho"]["n"]
    )
    assert ext["via_rho_on_base"]["hits"] == 0


def test_unlearning_numbers(quick):
    res = quick[1]["unlearning"]["results"]
    assert (
        res["before"]["trigger_via_c"]["hits"] == 0
    )  # the trigger secret never reached its own prefix
    for m in ("graddiff", "npo"):
        t = res["table4"][m]
        naive, trig = res["runs"][f"{m}/naive"], res["runs"][f"{m}/trigger"]
        assert naive["forgotten"] and trig["forgotten"] and trig["forgotten_before"]
        assert t["naive_c_ext_after_naive_request"] < 0.15  # the verifier's threshold
        assert (
            trig["after"]["trigger_via_rho"]["interval"][0] > 0.15
        )  # still recoverable, with 95% confidence
        assert trig["rounds"] == 1 and 1 <= naive["rounds"] <= 14


def test_dp_calibration_numbers(quick):
    r = quick[1]["dp-calibration"]
    res = r["results"]
    M = r["settings"]["models_per_epsilon"]
    assert all(
        sum(col) == M // 2 for col in zip(*res["inclusion"])
    )  # each canary IN exactly half the models
    for row in res["rows"]:
        inf = row["epsilon"] == "inf"
        for c in row["cells"]:
            assert c["functional"] == "LOO" and c["design"] == "leave_one_out"
            if inf:
                assert c["label"] == "vacuous" and c["cap_conservative"] == 1.0
            else:
                assert c["mem"] <= c["cap_conservative"] + 3 * c["se"]
                assert c["cap_staircase_pure"] <= c["cap_conservative"] + 1e-12
        for m in row["models"]:
            if not inf:
                assert m["dp"]["epsilon"] <= float(row["epsilon"])
                assert m["dp"]["neighbors"] == "add/remove"
    inf_cells = {c["k"]: c for c in res["rows"][-1]["cells"]}
    assert inf_cells[8]["mem"] > inf_cells[1]["mem"]
    assert any(c["label"] == "visible" for row in res["rows"] for c in row["cells"])
    assert res["paper_grid"]["max_excess_over_tanh"] >= 0


def test_same_seed_same_json(quick, tmp_path):
    """Bit-for-bit reproducibility: gated re-run at quick size (the JSON file byte for byte);
    unlearning's and dp-calibration's pipelines re-run twice at a reduced size (their quick runs
    are the longest)."""
    import memclaim.experiments.dp_calibration as D
    import memclaim.experiments.unlearning as U

    again = run("gated", quick=True, seed=0, out_dir=tmp_path / "gated")
    assert again == quick[1]["gated"]
    assert (tmp_path / "gated" / "gated.json").read_bytes() == (
        quick[0] / "gated.json"
    ).read_bytes()

    def reduced(module, **kw):
        orig = module._settings

        def small(q):
            s = orig(q)
            for k, v in kw.items():
                s[k] = {**s[k], **v} if isinstance(v, dict) else v
            return s

        module._settings = small
        try:
            a = module.run(quick=True, seed=3, out_dir=tmp_path / f"{module.NAME}-a")
            b = module.run(quick=True, seed=3, out_dir=tmp_path / f"{module.NAME}-b")
        finally:
            module._settings = orig
        assert a == b
        assert (tmp_path / f"{module.NAME}-a" / f"{module.NAME}.json").read_bytes() == (
            tmp_path / f"{module.NAME}-b" / f"{module.NAME}.json"
        ).read_bytes()

    reduced(D, epsilons=[1.0, "inf"], canaries_per_k=2, models_per_epsilon=4, background_blocks=16)
    reduced(
        U, secrets_per_kind=4, background_docs=12, finetune={"epochs": 4}, unlearn={"max_rounds": 2}
    )


def test_registered_and_listed(capsys):
    for name in NAMES:
        assert name in REPRODUCTIONS
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_reproduction(name, tmp_path):
    """The full runs (gated on SmolLM2, 32 secrets per kind, the paper's epsilon grid)."""
    r = run(name, quick=False, seed=0, out_dir=tmp_path)
    TC.assert_covers(r, THEORY[name])
    for claim in THEORY[
        name
    ]:  # each verdict re-derived from the full run's raw numbers, not its flag
        TC.assert_theory(r, claim, THEORY[name])
    assert r["all_checks_passed"], [c for c in r["checks"] if not c["passed"]]
    if (
        name in CLAIMS
    ):  # the paper's sentences as the full run judged them (the record, not the rule, is updated)
        TC.assert_claims_cover(r, CLAIMS[name])
        for key, expect in CLAIMS_FULL[name].items():
            TC.assert_claim(r, key, CLAIMS[name], expect)
    assert_covers(r, AGREEMENT[name])
    for row, spec in AGREEMENT[name].items():
        if isinstance(spec, Agree):
            assert_agrees(r, row, spec)
    if name == "dp-calibration":
        assert [row["epsilon"] for row in r["results"]["rows"]] == [
            0.05,
            0.1,
            0.25,
            0.5,
            1.0,
            4.0,
            16.0,
            "inf",
        ]
        assert not any(math.isnan(c["mem"]) for row in r["results"]["rows"] for c in row["cells"])
