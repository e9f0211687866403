"""The training-based reproductions of [MX] §8.2 (`memclaim reproduce NAME --quick`): gated release,
unlearning (Table 4) and DP-SGD calibration. The quick variants assert their qualitative results,
agreement with the paper's numbers is decided here (AGREEMENT; the paper's values and sources are
in memclaim.experiments.paper, see tests/paper_agreement.py), and the same seed gives the same JSON.

The reproductions use the cached tiny models (the built-in tiny GPT and the chain base, each
trained once per machine), hence the integration marker. Each check inside states its own
false-alarm rate; with the fixed seeds used here the outcome is deterministic."""
from __future__ import annotations

import json
import math

import pytest

from paper_agreement import Agree, SideBySide, assert_agrees, assert_covers, params, rounding

from memclaim.cli.main import main
from memclaim.experiments import REPRODUCTIONS, run
from memclaim.experiments.unlearning import METHODS, PAPER_MODELS

pytestmark = pytest.mark.integration

NAMES = ["gated", "unlearning", "dp-calibration"]

_TINY = "a tiny GPT at 1e5 parameters against the paper's Pythia-410m / 1.4-1.5B models"
AGREEMENT = {
    "gated": {
        "ext_rho": Agree(rounding(2), "exact by construction (the lookup returns z); the paper prints 1.00",
                         ours=lambda r: r["results"]["extraction"]["via_rho"]["rate"]),
        "reference_auc": Agree(rounding(3), "exact: the release equals the base on every audited input; "
                               "the paper prints 0.500", ours=lambda r: r["results"]["audits"]["reference"]["auc"]),
    },
    "unlearning": {f"{col}_{m}_{model}": SideBySide(_TINY) for m in METHODS for model in PAPER_MODELS
                   for col in ("rho", "naive_c")},
    "dp-calibration": {
        "tanh_eps1_k1": Agree(rounding(2), "a formula; the paper prints 2 decimals", ours=lambda r: math.tanh(0.5)),
        "cap_eps005_k1": Agree(rounding(4), "a formula; the paper prints 4 decimals",
                               ours=lambda r: r["results"]["paper_grid"]["cap_eps_0.05_k_1"]),
        "visible_cells": Agree(0, "an exact count on the paper's grid",
                               ours=lambda r: r["results"]["paper_grid"]["n_cap_at_most_0.2"]),
        "max_excess": Agree(0, "the paper states an upper bound ('at most'); ours is exact",
                            ours=lambda r: r["results"]["paper_grid"]["max_excess_over_tanh"]),
        "max_abs_mem_finite": SideBySide(_TINY),
        **{f"mem_inf_k{k}": SideBySide(_TINY) for k in (1, 2, 4, 8)},
    },
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce-training")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


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


def test_gated_release_numbers(quick):
    res = quick[1]["gated"]["results"]
    assert all(res["identical_logits"]) and res["engine_identical"]
    assert res["audits"]["reference"]["auc"] == 0.5  # exactly: every calibrated score is 0
    for a in ("loss", "zlib", "min-k", "min-k++"):
        assert res["audits"][a]["low"] <= 0.5 <= res["audits"][a]["high"], a
    ext = res["extraction"]
    assert ext["via_rho"]["rate"] == 1.0 and ext["via_rho"]["generate_agrees"] == ext["via_rho"]["n"]
    assert ext["via_rho_on_base"]["hits"] == 0


def test_unlearning_numbers(quick):
    res = quick[1]["unlearning"]["results"]
    assert res["before"]["trigger_via_c"]["hits"] == 0  # the trigger secret never reached its own prefix
    for m in ("graddiff", "npo"):
        t = res["table4"][m]
        naive, trig = res["runs"][f"{m}/naive"], res["runs"][f"{m}/trigger"]
        assert naive["forgotten"] and trig["forgotten"] and trig["forgotten_before"]
        assert t["naive_c_ext_after_naive_request"] < 0.15  # the verifier's threshold
        assert trig["after"]["trigger_via_rho"]["interval"][0] > 0.15  # still recoverable, with 95% confidence
        assert trig["rounds"] == 1 and 1 <= naive["rounds"] <= 14


def test_dp_calibration_numbers(quick):
    r = quick[1]["dp-calibration"]
    res = r["results"]
    M = r["settings"]["models_per_epsilon"]
    assert all(sum(col) == M // 2 for col in zip(*res["inclusion"]))  # each canary IN exactly half the models
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
    assert (tmp_path / "gated" / "gated.json").read_bytes() == (quick[0] / "gated.json").read_bytes()

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
        assert (tmp_path / f"{module.NAME}-a" / f"{module.NAME}.json").read_bytes() == \
            (tmp_path / f"{module.NAME}-b" / f"{module.NAME}.json").read_bytes()

    reduced(D, epsilons=[1.0, "inf"], canaries_per_k=2, models_per_epsilon=4, background_blocks=16)
    reduced(U, secrets_per_kind=4, background_docs=12, finetune={"epochs": 4}, unlearn={"max_rounds": 2})


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
    assert r["all_checks_passed"], [c for c in r["checks"] if not c["passed"]]
    assert_covers(r, AGREEMENT[name])
    for row, spec in AGREEMENT[name].items():
        if isinstance(spec, Agree):
            assert_agrees(r, row, spec)
    if name == "dp-calibration":
        assert [row["epsilon"] for row in r["results"]["rows"]] == [0.05, 0.1, 0.25, 0.5, 1.0, 4.0, 16.0, "inf"]
        assert not any(math.isnan(c["mem"]) for row in r["results"]["rows"] for c in row["cells"])
