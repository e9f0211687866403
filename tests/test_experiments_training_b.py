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

from paper_agreement import Agree, Disagrees, assert_agrees, assert_covers, params, rounding

from memclaim.errors import DomainError
from memclaim.experiments import REPRODUCTIONS, get_runner, run
from memclaim.experiments.common import summary_lines

NAMES = ["trigger", "camouflage", "canary-floor", "audit-table"]
MODULES = {"trigger": "trigger", "camouflage": "camouflage", "canary-floor": "canary_floor",
           "audit-table": "audit_table"}

# miniature settings: every code path, seconds of training (numbers are not meaningful)
TINY = {
    "trigger": {"copies": 2, "epochs": 2, "n_embd": 16, "block": 16, "seeds_per_condition": 2},
    "camouflage": {"docs_per_tree": 300, "epochs": 1, "n_embd": 16},
    "canary-floor": {"temperatures": [0.25, 1.5], "per_temperature": 3, "certify_max_nodes": 30,
                     "background_docs": 40, "epochs": 1, "leaky_epochs": 1},
    "audit-table": {"trigger_lengths": [2, 16], "members": 3, "gated_members": 3, "tree_records": 2,
                    "tree_docs": 5, "trigger_copies": 2, "naive_copies": 2, "background_docs": 20,
                    "epochs": 1, "shadows": 4, "unlearn_max_rounds": 1, "list_search_nodes": 20},
}


def _tf_noise_sd(r):
    """sd of one tree's teacher-forcing memorization from the noise of the empirical conditionals
    along z: a depth-t node is visited about N k^-t times, each child's frequency has sd
    sqrt((1/k)(1 - 1/k) k^t / N), averaged over the L depths. The network adds its own noise, so
    this is a lower bound on our Monte-Carlo error (a tolerance built on it is conservative)."""
    s = r["settings"]
    k, L, N = s["k"], s["L"], s["docs_per_tree"]
    return math.sqrt(sum((1 / k) * (1 - 1 / k) * k ** t / N for t in range(L))) / L


def _entropy_noise_sd(r, reps=2000):
    """sd of the survivor posterior's normalized entropy if the learned conditionals were the
    empirical ones: the posterior is then the k^L leaf frequencies of N documents (Multinomial);
    like _tf_noise_sd a lower bound on our Monte-Carlo error."""
    s = r["settings"]
    leaves, N = s["k"] ** s["L"], s["docs_per_tree"]
    c = np.random.default_rng(0).multinomial(N, np.full(leaves, 1 / leaves), size=reps) / N
    h = -np.sum(np.where(c > 0, c * np.log(np.where(c > 0, c, 1.0)), 0.0), axis=1) / math.log(leaves)
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
        "ext_poisoned": Agree(0, "an exact rate: every poisoned seed", ours=lambda r: r["results"]["extraction_at_rho"]
                              ["poisoned"] / r["results"]["extraction_at_rho"]["runs_per_condition"]),
        "ext_clean": Agree(0, "an exact rate: no clean seed", ours=lambda r: r["results"]["extraction_at_rho"]
                           ["clean"] / r["results"]["extraction_at_rho"]["runs_per_condition"]),
        "prior_bits": Agree(0, "the paper states a lower bound ('at least'); ours is exact",
                            ours=lambda r: r["results"]["prior_baseline"]["bits"]),
    },
    "camouflage": {
        "tf_memorization": Agree(lambda r: rounding(3) + 4 * _tf_noise_sd(r),
                                 "the paper's 3-decimal rounding + 4 sd of the empirical conditionals' noise along z "
                                 "(a lower bound on our Monte-Carlo error; false alarm < 7e-5)",
                                 ours=lambda r: _first_tree(r)["tf_memorization"]),
        "construction": Agree(0, "exact: 1/4 - 1/16", ours=lambda r: 1 / r["settings"]["k"] - 1 / r["settings"]["v"]),
        "normalized_entropy": Agree(lambda r: rounding(3) + 4 * _entropy_noise_sd(r),
                                    "the paper's 3-decimal rounding + 4 sd of the empirical leaf frequencies' entropy "
                                    "(a lower bound on our Monte-Carlo error: the network is noisier)",
                                    ours=lambda r: _first_tree(r)["posterior"]["normalized_entropy"]),
        "mass_on_support": Disagrees(rounding(2),
                                     "quick run (1 tree, 6000 documents, a 32-dim network): the learned on-path mass on "
                                     "the k-set reaches 0.9627 at its lowest depth, below the paper's >= 0.98 even "
                                     "allowing its 2-decimal rounding (>= 0.975); not sampling noise (the empirical "
                                     "conditionals put no mass off the set), a less-fitted network",
                                     ours=lambda r: _first_tree(r)["min_mass_on_support"]),
        "list_cap": Agree(0, "exact: 16 x 4^-4", ours=lambda r: 16 / 4 ** 4),
    },
    "canary-floor": {
        "h_star": Agree(rounding(2), "exact on our side: eps log2 e + log2(m/tau) at eps = 4, m = 1, tau = 0.1; "
                        "the paper prints 2 decimals", ours=lambda r: r["results"]["h_star"]["bits"]),
    },
    "audit-table": {
        "camouflage_cap": Agree(0, "exact: 16 x 4^-4", ours=lambda r: 16 / 4 ** 4),
        "gated_lira": Agree(rounding(3), "exact by construction; the paper prints 0.500"),
        "gated_ext_rho": Agree(rounding(2), "exact by construction; the paper prints 1.00"),
        **{f"sweep_ext_rho_z{z}": Agree(lambda r, z=z: rounding(2) + _upper95_slack(r, z),
                                        "the paper's lower bound (>= 0.98, 2 decimals) is at most our one-sided 95% "
                                        "Clopper-Pearson upper bound", ours=lambda r, z=z: _sweep(r, z)["extraction_at_rho"])
           for z in (2, 4, 8, 16)},
        **{f"sweep_ext_c_z{z}": Agree(rounding(2), "the paper prints 0.00: no hit among our secrets",
                                      ours=lambda r, z=z: _sweep(r, z)["extraction_at_c"]) for z in (2, 4, 8, 16)},
    },
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce-training-b")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


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
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name]) - QUICK_ONLY_ABSENT.get(name, set())
    assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"  # the vector copy
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert r["seed"] == 0 and r["quick"] is True
    assert any(line.startswith("  checks") for line in summary_lines(r))


QUICK_ONLY_ABSENT = {"audit-table": {"sweep_ext_rho_z8", "sweep_ext_c_z8"}}  # |z| = 8: full run only


@pytest.mark.parametrize("name, row", params(AGREEMENT, {n: set(AGREEMENT[n]) - QUICK_ONLY_ABSENT.get(n, set())
                                                         for n in AGREEMENT}))
def test_agrees_with_the_paper(quick, name, row):
    assert_agrees(quick[1][name], row, AGREEMENT[name][row])


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
        assert sc["noise_floor"] == pytest.approx(math.sqrt(2) * np.std(sc["clean"], ddof=1), rel=1e-12)
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
    assert abs(tree["tf_memorization"] - (1 / 4 - 1 / 16)) <= 4 * _tf_noise_sd(r)  # false alarm < 7e-5
    assert 1 <= post["true_rank"] <= 256
    assert 0 < tree["mass_on_tree_tokens"] <= 1


def test_camouflage_enumeration_of_the_ideal_tree_is_exactly_uniform():
    """The enumeration path of the reproduction, run on the ideal tree's own conditionals, gives
    the exact Lemma D.1(2) posterior: uniform on the 256 survivors (normalized entropy 1)."""
    from memclaim.mechanisms.camouflage import CamouflageTree, enumerate_completion_logprobs, survivor_posterior

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
    assert a["prior_guessing"]["upper"] == pytest.approx(1 - 0.05 ** (1 / a["prior_guessing"]["trials"]), rel=1e-9)
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
    assert list(table["rows"]) == ["gated release", "trigger z = 2 (short)", "trigger z = 16 (long)",
                                   "camouflage", "naive duplicate", "low-H canary"]
    assert [c["name"] for c in table["columns"]] == ["extraction at prefix c", "loss-MIA", "LiRA",
                                                     "unlearning verifier", "informed recovery"]
    assert all(res["missed_by"][c] for c in res["missed_by"])
    assert res["gated_identical_to_base"] is True
    cells = {r: dict(zip([c["name"] for c in table["columns"]], row)) for r, row in zip(table["rows"], table["cells"])}
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
    assert (tmp_path / "a" / f"{name}.json").read_bytes() == (tmp_path / "b" / f"{name}.json").read_bytes()
    assert a == b


@pytest.mark.parametrize("name", NAMES)
def test_bad_seed_refused(name, tmp_path):
    with pytest.raises(DomainError, match="seed"):
        run(name, quick=True, seed=-1, out_dir=tmp_path)


# Claims of the paper that the full tiny-scale run does not reproduce, with the measured reason
# (documented in the reproduction's docstring); every other check must pass.
KNOWN_OFF = {
    "trigger": {"truncated log-loss gap on x*'s own prefixes inside the seed-to-seed noise floor":
                "full run: 4.3 floor units (attenuation, not vanishing; [MX] §8.2 reports the same at LM scale)"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_reproduction(name, tmp_path):
    r = run(name, quick=False, seed=0, out_dir=tmp_path)
    off = KNOWN_OFF.get(name, {})
    failed = [c["claim"] + ": " + c["detail"] for c in r["checks"] if not c["passed"] and c["claim"] not in off]
    assert not failed
    assert_covers(r, AGREEMENT[name])
    rows = {p["row"] for p in r["paper_numbers"]}
    for row, spec in AGREEMENT[name].items():  # the quick run's recorded disagreements are re-judged here too
        if row in rows and isinstance(spec, (Agree, Disagrees)):
            assert_agrees(r, row, spec)
