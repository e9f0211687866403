"""The training-based reproductions of [MX] §8.2 (`memclaim reproduce NAME --quick`): gated release,
unlearning (Table 4) and DP-SGD calibration. The quick variants assert their qualitative results
with the tolerances stated in each check (and in the JSON); the same seed gives the same JSON.

The reproductions use the cached tiny models (the built-in tiny GPT and the chain base, each
trained once per machine), hence the integration marker. Each check inside states its own
false-alarm rate; with the fixed seeds used here the outcome is deterministic."""
from __future__ import annotations

import json
import math

import pytest

from memclaim.cli.main import main
from memclaim.experiments import REPRODUCTIONS, run

pytestmark = pytest.mark.integration

NAMES = ["gated", "unlearning", "dp-calibration"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce-training")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_passes_its_checks(quick, name):
    out, results = quick
    r = results[name]
    failed = [c["claim"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    assert (out / f"{name}.png").stat().st_size > 1000
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert r["quick"] is True and r["reproduces"]
    if name in ("gated", "dp-calibration"):  # exact or formula-level paper numbers
        assert r["paper_numbers"] and all(p["agrees"] for p in r["paper_numbers"])


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
    assert res["paper_grid"]["n_cap_at_most_0.2"] == 8


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
    if name == "dp-calibration":
        assert [row["epsilon"] for row in r["results"]["rows"]] == [0.05, 0.1, 0.25, 0.5, 1.0, 4.0, 16.0, "inf"]
        assert not any(math.isnan(c["mem"]) for row in r["results"]["rows"] for c in row["cells"])
