"""The mechanism-level reproductions of [MX] §8.1 (`memclaim reproduce NAME --quick`): the
qualitative claims hold, the paper's numbers agree within the stated tolerances, the outputs are
written, and the same seed gives byte-identical JSON.

Each check inside a reproduction states its own false-alarm rate (in the JSON); with the fixed
seeds used here the outcome is deterministic."""
from __future__ import annotations

import json

import pytest

from memclaim.cli.main import main
from memclaim.errors import InputError
from memclaim.experiments import REPRODUCTIONS, get_runner, register, run
from memclaim.experiments.common import finish, new_figure, paper_number, rng_streams, summary_lines

NAMES = ["staircase", "entropy-sweep", "per-instance"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_passes_its_checks(quick, name):
    out, results = quick
    r = results[name]
    failed = [c["claim"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    off = [p["quantity"] for p in r["paper_numbers"] if not p["agrees"]]
    assert not off
    assert (out / f"{name}.png").stat().st_size > 1000
    on_disk = json.loads((out / f"{name}.json").read_text())
    assert on_disk == r
    assert r["seed"] == 0 and r["quick"] is True
    assert {"memclaim", "numpy", "scipy"} <= set(r["versions"])
    assert any(line.startswith("  paper numbers") for line in summary_lines(r))


def test_staircase_numbers(quick):
    """[MX] Fig. 6 left: within the MC interval of eta*_k for every k <= 6, strictly below the group
    bound for k >= 2 (upper interval end), and the k = 2 numbers 0.632 vs 0.762."""
    per_k = quick[1]["staircase"]["results"]["per_k"]
    assert [r["k"] for r in per_k] == [1, 2, 3, 4, 5, 6]
    for r in per_k:
        g = r["geometric"]
        assert g["ci_low"] <= r["eta_star"] <= g["ci_high"]
        if r["k"] >= 2:
            assert g["ci_high"] < r["group_bound_tanh"]
        assert r["geometric_exact_tv"] == pytest.approx(r["eta_star"], abs=1e-12)
        assert r["canary_counts"] == {"planted": [r["k"]], "baseline": [0]}
    k2 = per_k[1]
    assert round(k2["eta_star"], 3) == 0.632 and round(k2["group_bound_tanh"], 3) == 0.762


def test_entropy_sweep_numbers(quick):
    res = quick[1]["entropy-sweep"]["results"]
    assert [r["min_entropy_bits"] for r in res["sweep"]] == list(range(3, 17))  # 13 octaves
    assert res["crossing"]["h_star_bits"] == pytest.approx(6.7646, abs=5e-5)
    assert res["crossing"]["frontier_crossing_bits"] == pytest.approx(res["crossing"]["h_star_bits"], abs=1e-9)
    assert res["crossing"]["topm_predicted_crossing_between_n"] == [108, 109]
    z, u = res["canaries"]["zipf"], res["canaries"]["uniform10"]
    assert z["min_entropy_bits"] == pytest.approx(2.5, abs=1e-9)
    assert round(z["predicted"], 2) == 0.41 and round(u["predicted"], 2) == 0.01
    assert z["measured"] <= z["bound"] and u["measured"] <= u["bound"] + 0.002


def test_per_instance_numbers(quick):
    r = quick[1]["per-instance"]
    res = r["results"]
    assert len(res["eps_x"]) == 500
    assert 0.05 <= min(res["eps_x"]) and max(res["eps_x"]) <= 4.0
    fam = res["families"]
    assert fam["rr"]["violations_at_sigma"] == 0 and fam["bsc"]["violations_at_sigma"] == 0
    assert fam["rr"]["spearman_eps_vs_measured"] > 0.99
    assert fam["bsc"]["predicted_max_gap_to_bound"] < 0


def test_same_seed_same_json_and_cli(quick, tmp_path, capsys):
    """Reproducibility through the CLI: staircase again with seed 0 gives byte-identical JSON;
    another seed gives other numbers."""
    out, _ = quick
    rc = main(["reproduce", "staircase", "--quick", "--out", str(tmp_path / "a"), "--seed", "0", "--json"])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert (tmp_path / "a" / "staircase.json").read_bytes() == (out / "staircase.json").read_bytes()
    assert printed == json.loads((out / "staircase.json").read_text())
    other = run("staircase", quick=True, seed=1, out_dir=tmp_path / "b")
    assert other["results"] != printed["results"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["entropy-sweep", "per-instance"])
def test_same_seed_same_json_other_reproductions(quick, tmp_path, name):
    out, _ = quick
    run(name, quick=True, seed=0, out_dir=tmp_path)
    assert (tmp_path / f"{name}.json").read_bytes() == (out / f"{name}.json").read_bytes()


def test_cli_summary_and_errors(tmp_path, capsys):
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed for n in NAMES)
    assert main(["reproduce", "no-such-figure"]) == 2
    err = capsys.readouterr().err
    assert "unknown reproduction 'no-such-figure'" in err and "staircase" in err
    assert main(["reproduce"]) == 2
    assert main(["reproduce", "staircase", "--seed", "-3"]) == 2
    assert "--seed must be >= 0, got -3" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["reproduce", "per-instance", "--quick", "--out", str(tmp_path / "file")]) == 2


def test_registry_plugs_in_new_reproductions(tmp_path, monkeypatch):
    """A later reproduction plugs in by name; the plumbing writes NAME.json / NAME.png."""
    import sys
    import types

    mod = types.ModuleType("memclaim_test_fake_repro")

    def fake_run(*, quick, seed, out_dir):
        rng = rng_streams(seed, ["a"])["a"]
        fig, ax = new_figure()
        ax.plot([0, 1], [0, 1])
        return finish("fake", title="t", reproduces=["x"], seed=seed, quick=quick, streams=["a"],
                      settings={}, results={"draw": float(rng.random())},
                      paper_numbers=[paper_number("q", where="w", paper=1.0, ours=1.0005, tolerance=0.001, basis="b")],
                      checks=[], figure=fig, out_dir=out_dir)

    mod.run = fake_run
    monkeypatch.setitem(sys.modules, "memclaim_test_fake_repro", mod)
    monkeypatch.setitem(REPRODUCTIONS, "fake", ("memclaim_test_fake_repro", "test"))
    register("fake", "memclaim_test_fake_repro", "test")
    assert get_runner("fake") is fake_run
    r = run("fake", quick=True, seed=3, out_dir=tmp_path)
    assert r["paper_numbers"][0]["agrees"] and (tmp_path / "fake.png").exists()
    assert r == run("fake", quick=True, seed=3, out_dir=tmp_path / "again")
    with pytest.raises(InputError, match="unknown reproduction"):
        get_runner("nope")
    with pytest.raises(Exception, match="seed"):
        rng_streams(-1, ["a"])
