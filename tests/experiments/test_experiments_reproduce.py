"""The mechanism-level reproductions of [MX] §8.1 (`memclaim reproduce NAME --quick`): the
qualitative claims hold, the paper's numbers agree within the tolerances stated here (AGREEMENT:
the paper's number and source come from memclaim.experiments.paper, the verdict and its
justification from this file; see tests/paper_agreement.py), the outputs are written, and the
same seed gives byte-identical JSON.

Each statistical check states its false-alarm rate; with the fixed seeds used here the outcome is
deterministic."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from memclaim.cli.main import main
from memclaim.errors import DomainError, InputError
from memclaim.experiments import REPRODUCTIONS, get_runner, register, run
from memclaim.experiments.common import compare, finish, new_figure, rng_streams, summary_lines
from paper_agreement import Agree, Disagrees, assert_agrees, assert_covers, params, rounding

NAMES = ["staircase", "entropy-sweep", "per-instance"]


def _k2(r):
    return next(x for x in r["results"]["per_k"] if x["k"] == 2)


def _advantage_se_bound(r):
    """Standard error of a difference of two proportions at n releases per arm: <= sqrt(2/(4n))."""
    return math.sqrt(0.5 / _k2(r)["geometric"]["n_eval_per_arm"])


def _binomial_se(rate, trials):
    return math.sqrt(rate * (1 - rate) / trials)


def _crossing_refit(r):
    """The tau-crossing of the list adversary re-fitted here from the measured grid: weighted least
    squares of log(rate) on H (weights n p / (1 - p), the inverse binomial variance of log p),
    solved for log tau; standard error by the delta method. Returns (crossing, se)."""
    c = r["results"]["crossing"]
    h, p, n = np.array(c["grid_bits"]), np.array(c["grid_topm_measured"]), c["trials_per_point"]
    w = n * p / (1 - p)
    X = np.column_stack([np.ones_like(h), h])
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a, b = cov @ (X.T @ (w * np.log(p)))
    lt = math.log(r["settings"]["tau"])
    hc = (lt - a) / b
    grad = np.array([-1 / b, -(lt - a) / b**2])
    return float(hc), float(math.sqrt(grad @ cov @ grad))


def _spearman_mc_sd(r, reps=300):
    """Monte-Carlo sd of our Spearman correlation: parametric bootstrap of the measurements
    (normal with the run's per-instance binomial SE around the exact predicted curve)."""
    rr = r["results"]["families"]["rr"]
    eps = np.array(r["results"]["eps_x"])
    pred, se = np.array(rr["predicted"]), np.array(rr["se"])
    rng = np.random.default_rng(0)
    return float(
        np.std(
            [
                stats.spearmanr(eps, pred + se * rng.standard_normal(eps.size)).statistic
                for _ in range(reps)
            ]
        )
    )


# The paper's numbers ([MX] = memorization-is-not-extraction) and when a run agrees with them; the
# paper's value, statement and source are in memclaim.experiments.paper.
AGREEMENT = {
    "staircase": {
        "advantage_k2": Agree(
            lambda r: rounding(3) + 4 * _advantage_se_bound(r),
            "the paper's 3-decimal rounding + 4 standard errors of our measured advantage "
            "(bounded by sqrt(1/(2n)) at n releases per arm; false alarm < 7e-5); the paper's "
            "own Monte-Carlo error is not reported",
            ours=lambda r: _k2(r)["geometric"]["advantage"],
        ),
        "eta_star_2": Agree(
            rounding(3),
            "exact on our side; the paper prints 3 decimals",
            ours=lambda r: _k2(r)["eta_star"],
        ),
        "group_bound_2": Agree(
            rounding(3),
            "exact on our side; the paper prints 3 decimals",
            ours=lambda r: _k2(r)["group_bound_tanh"],
        ),
    },
    "entropy-sweep": {
        "h_star": Disagrees(
            rounding(2),
            "the paper's rounding: H* = eps log2 e + log2(m/tau) = 1.4427 + 5.3219 = 6.7646 bits at "
            "eps = 1, m = 4, tau = 0.1 rounds to 6.76, the paper prints 6.77 (|diff| 0.0054 > 0.005)",
            ours=lambda r: r["results"]["crossing"]["h_star_bits"],
        ),
        "topm_crossing": Agree(
            lambda r: rounding(2) + 4 * _crossing_refit(r)[1],
            "the paper's 2-decimal rounding + 4 standard errors of the crossing, re-fitted here "
            "from the measured grid (false alarm < 7e-5)",
            ours=lambda r: _crossing_refit(r)[0],
        ),
        "zipf_rate_derived": Agree(
            rounding(2),
            "exact on our side; the paper prints whole percent",
            ours=lambda r: r["results"]["canaries"]["zipf"]["predicted"],
        ),
        "zipf_rate_measured": Agree(
            lambda r: (
                rounding(2)
                + 4
                * _binomial_se(
                    r["results"]["canaries"]["zipf"]["measured"],
                    r["results"]["canaries"]["zipf"]["trials"],
                )
            ),
            "whole-percent rounding + 4 binomial standard errors of our measured rate",
            ours=lambda r: r["results"]["canaries"]["zipf"]["measured"],
        ),
        "zipf_kappa": Agree(
            rounding(3),
            "exact on our side; the paper prints 3 decimals",
            ours=lambda r: r["results"]["canaries"]["zipf"]["kappa"],
        ),
        "zipf_envelope": Agree(
            rounding(3),
            "exact on our side; the paper prints 3 decimals",
            ours=lambda r: r["results"]["canaries"]["zipf"]["entropy_envelope"],
        ),
        "zipf_bound": Agree(
            rounding(2),
            "exact on our side; the paper prints 2 decimals",
            ours=lambda r: r["results"]["canaries"]["zipf"]["bound"],
        ),
        "uniform10_rate_derived": Agree(
            rounding(2),
            "exact on our side; the paper prints whole percent",
            ours=lambda r: r["results"]["canaries"]["uniform10"]["predicted"],
        ),
        "uniform10_rate_measured": Agree(
            lambda r: (
                rounding(2)
                + 4
                * _binomial_se(
                    r["results"]["canaries"]["uniform10"]["measured"],
                    r["results"]["canaries"]["uniform10"]["trials"],
                )
            ),
            "whole-percent rounding + 4 binomial standard errors of our measured rate",
            ours=lambda r: r["results"]["canaries"]["uniform10"]["measured"],
        ),
    },
    "per-instance": {
        "spearman_rr": Agree(
            lambda r: rounding(3) + 4 * _spearman_mc_sd(r),
            "the paper's 3-decimal rounding + 4 Monte-Carlo sd of our correlation (parametric "
            "bootstrap of the measurements here); the paper's release count is not given",
            ours=lambda r: r["results"]["families"]["rr"]["spearman_eps_vs_measured"],
        ),
        "violations": Agree(
            0,
            "an exact count",
            ours=lambda r: (
                r["results"]["families"]["rr"]["violations_at_sigma"]
                + r["results"]["families"]["bsc"]["violations_at_sigma"]
            ),
        ),
    },
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_writes_its_report(quick, name):
    """Files, seeds, versions, the comparison rows (no verdict in them), and the report's own checks
    of the theory's predictions (the CLI's exit status; the tests below verify the claims from the
    numbers)."""
    out, results = quick
    r = results[name]
    assert r["schema"] == "memclaim.reproduction/3"
    failed = [c["claim"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    assert all("agrees" not in p and "tolerance" not in p for p in r["paper_numbers"])
    assert_covers(r, AGREEMENT[name])
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name])
    assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"  # the vector copy
    on_disk = json.loads((out / f"{name}.json").read_text())
    assert on_disk == r
    assert r["seed"] == 0 and r["quick"] is True
    assert {"memclaim", "numpy", "scipy"} <= set(r["versions"])
    assert any(
        line.startswith("  ours beside the paper (no verdict here") for line in summary_lines(r)
    )


@pytest.mark.parametrize("name, row", params({n: AGREEMENT[n] for n in NAMES}))
def test_agrees_with_the_paper(quick, name, row):
    assert_agrees(quick[1][name], row, AGREEMENT[name][row])


def _wilson(x, n, z):
    """Wilson score interval (written out here, independent of statsmodels)."""
    c = (x + z * z / 2) / (n + z * z)
    h = z / (n + z * z) * math.sqrt(x * (n - x) / n + z * z / 4)
    return c - h, c + h


def _newcombe_diff(x1, n1, x0, n0, alpha):
    """Newcombe's hybrid score interval for p1 - p0 (Newcombe 1998, method 10), from raw counts."""
    z = stats.norm.isf(alpha / 2)
    p1, p0 = x1 / n1, x0 / n0
    l1, u1 = _wilson(x1, n1, z)
    l0, u0 = _wilson(x0, n0, z)
    d = p1 - p0
    return d - math.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2), d + math.sqrt(
        (u1 - p1) ** 2 + (p0 - l0) ** 2
    )


def _clopper_pearson(k, n, alpha):
    """Exact binomial interval from the beta quantiles (scipy.stats.beta, not statsmodels)."""
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha / 2, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha / 2, k + 1, n - k)
    return float(lo), float(hi)


def test_staircase_numbers(quick):
    """[MX] Fig. 6 left: within the MC interval of eta*_k for every k <= 6, strictly below the group
    bound tanh(k eps / 2) for k >= 2 (upper interval end), and the k = 2 numbers 0.632 vs 0.762.
    Every interval is re-derived here from the raw counts in the JSON (Newcombe, written out above),
    the group bound from its closed form; the run's own intervals must agree with ours."""
    r = quick[1]["staircase"]
    per_k, st = r["results"]["per_k"], r["settings"]
    eps = st["epsilon"]
    assert [x["k"] for x in per_k] == [1, 2, 3, 4, 5, 6]
    alpha = (1.0 - st["family_confidence"]) / len(per_k)  # Bonferroni over k, per mechanism
    for x in per_k:
        k = x["k"]
        assert x["group_bound_tanh"] == pytest.approx(math.tanh(k * eps / 2), abs=1e-12)
        for key in ("geometric", "bernoulli_staircase"):
            m = x[key]
            (c1, c0), n = m["eval_hits"], m["n_eval_per_arm"]
            lo, hi = _newcombe_diff(c1, n, c0, n, alpha)
            assert (m["ci_low"], m["ci_high"]) == pytest.approx((lo, hi), abs=1e-9)
            assert m["advantage"] == pytest.approx((c1 - c0) / n, abs=1e-12)
            assert lo <= x["eta_star"] <= hi, (key, k)  # App. B.5: both attain eta*_k
            if key == "geometric" and k >= 2:
                assert hi < math.tanh(k * eps / 2)  # strictly below the naive group bound
        assert x["geometric_exact_tv"] == pytest.approx(x["eta_star"], abs=1e-12)
        assert x["canary_counts"] == {"planted": [k], "baseline": [0]}
        assert x["staircase_privacy_loss"] <= eps + 1e-12  # and is eps-DP
    k2 = _k2(r)
    assert round(k2["eta_star"], 3) == 0.632 and round(k2["group_bound_tanh"], 3) == 0.762


def test_entropy_sweep_numbers(quick):
    """[MX] §8.1, Thm. 5.1: intervals re-derived from the hit counts (Clopper-Pearson from the beta
    quantiles, family-wise over the priors), the frontier from the closed form of the pure-DP
    trade-off, 1 - f(kappa) = min(1, e^eps kappa, 1 - e^-eps (1 - kappa))."""
    r = quick[1]["entropy-sweep"]
    res, st = r["results"], r["settings"]
    eps, m, tau = st["epsilon"], st["m"], st["tau"]
    assert [x["min_entropy_bits"] for x in res["sweep"]] == list(range(3, 17))  # 13 octaves
    assert res["crossing"]["h_star_bits"] == pytest.approx(
        eps / math.log(2) + math.log2(m / tau), abs=1e-12
    )
    alpha_fw = (1.0 - st["confidence"]) / len(res["sweep"])
    for x in res["sweep"]:
        kappa = m / 2 ** x["min_entropy_bits"]
        frontier = min(1.0, math.exp(eps) * kappa, 1 - math.exp(-eps) * (1 - kappa))
        assert x["frontier"] == pytest.approx(frontier, abs=1e-12)
        t_lo, t_hi = _clopper_pearson(x["topm_hits"], x["topm_trials"], alpha_fw)
        g_lo, g_hi = _clopper_pearson(x["gadget_hits"], x["gadget_trials"], alpha_fw)
        assert tuple(x["topm_ci"]) == pytest.approx((t_lo, t_hi), abs=1e-9)
        assert tuple(x["gadget_ci"]) == pytest.approx((g_lo, g_hi), abs=1e-9)
        assert x["topm_measured"] == x["topm_hits"] / x["topm_trials"]
        assert t_lo <= x["topm_predicted"] <= t_hi  # Lemma 5.2: the list adversary's exact rate
        assert x["topm_predicted"] <= frontier + 1e-12  # Thm. 5.1(i)
        assert g_lo <= frontier <= g_hi  # the gadget attains the frontier
    hc, se = _crossing_refit(r)
    assert abs(hc - res["crossing"]["h_star_bits"]) <= 4 * se  # the measured crossing is at H*
    assert res["crossing"]["frontier_crossing_bits"] == pytest.approx(
        res["crossing"]["h_star_bits"], abs=1e-9
    )
    assert res["crossing"]["topm_predicted_crossing_between_n"] == [108, 109]
    z, u = res["canaries"]["zipf"], res["canaries"]["uniform10"]
    assert z["min_entropy_bits"] == pytest.approx(2.5, abs=1e-9)
    assert round(z["predicted"], 2) == 0.41 and round(u["predicted"], 2) == 0.01
    for c in (z, u):
        lo, hi = _clopper_pearson(c["hits"], c["trials"], 1.0 - st["canary_check_confidence"])
        assert tuple(c["ci_check"]) == pytest.approx((lo, hi), abs=1e-9)
        assert lo <= c["bound"]  # the measured rate is consistent with the bound (Thm. 5.1(i))
        assert lo <= c["predicted"] <= hi


def test_entropy_sweep_tracks_the_boundary(quick):
    """[MX] §8.1 "The same pipeline's top-m list adversary tracks the boundary across thirteen octaves of prior
    entropy", judged as a sentence (issue 24 item 2): re-derived here with the frontier from its closed form, the
    adversary's exact rate within a factor 2 (one octave of H) below it at each of the sweep's priors, 3 to 16
    bits. Held on the quick run (and, the rates being exact, on the full one): the widest gap is at H = 4 bits."""
    r = quick[1]["entropy-sweep"]
    st, sweep = r["settings"], r["results"]["sweep"]
    eps, m = st["epsilon"], st["m"]
    ratios = {}
    for x in sweep:
        kappa = m / 2 ** x["min_entropy_bits"]
        ratios[x["min_entropy_bits"]] = x["topm_predicted"] / min(
            1.0, math.exp(eps) * kappa, 1 - math.exp(-eps) * (1 - kappa)
        )
    hs = sorted(ratios)
    verdict = (
        "held"
        if hs[-1] - hs[0] >= 13 and all(0.5 <= q <= 1 + 1e-12 for q in ratios.values())
        else "not held"
    )
    claims = {c["key"]: c for c in r["paper_claims"]}
    assert (
        set(claims) == {"tracks-the-boundary"}
        and claims["tracks-the-boundary"]["verdict"] == verdict == "held"
    )
    assert min(ratios, key=ratios.get) == 4 and 0.85 < ratios[4] < 0.9


def test_per_instance_numbers(quick):
    """[MX] §8.1 per-instance: every statistic re-derived from the raw release counts; the bound
    tanh(eps_x / 2) and the BSC prediction (1 - 2 gamma) tanh(eps_x / 2) from their closed forms."""
    r = quick[1]["per-instance"]
    res, st = r["results"], r["settings"]
    eps_x = np.array(res["eps_x"])
    assert len(eps_x) == st["n_instances"] == 500
    lo, hi = st["eps_range"]
    assert lo <= eps_x.min() and eps_x.max() <= hi
    n = st["releases_per_branch"]
    bound = np.tanh(eps_x / 2)  # eta of pure eps-DP ([MX] Thm. 3.3)
    for key, gamma in (("rr", 0.0), ("bsc", st["bsc_crossover"])):
        fam = res["families"][key]
        ones = np.array(fam["released_ones"], dtype=float)
        p1, p0 = ones[:, 0] / n, ones[:, 1] / n
        est = p1 - p0
        se = np.sqrt(np.maximum(p1 * (1 - p1), 1 / n) / n + np.maximum(p0 * (1 - p0), 1 / n) / n)
        pred = (1 - 2 * gamma) * bound
        np.testing.assert_allclose(fam["measured"], est, atol=1e-12)
        np.testing.assert_allclose(fam["bound"], bound, atol=1e-12)
        np.testing.assert_allclose(fam["predicted"], pred, atol=1e-12)
        z_bound = (est - bound) / se
        z_fit = (est - pred) / se
        assert int(np.sum(z_bound > st["violation_sigma"])) == fam["violations_at_sigma"] == 0
        p_fit = stats.chi2.sf(float(np.sum(z_fit**2)), z_fit.size)
        assert p_fit == pytest.approx(fam["fit_p_value"], rel=1e-9)
        assert p_fit > st["fit_test_level"]  # on their predicted curves
        rho = stats.spearmanr(eps_x, est).statistic
        assert rho == pytest.approx(fam["spearman_eps_vs_measured"], abs=1e-12)
        if key == "rr":
            assert rho > 0.99
        else:  # strictly below the bound: the BSC post-processing loses advantage
            assert np.max(pred - bound) < 0 and z_bound.sum() / math.sqrt(z_bound.size) < -4


def test_same_seed_same_json_and_cli(quick, tmp_path, capsys):
    """Reproducibility through the CLI: staircase again with seed 0 gives byte-identical JSON;
    another seed gives other numbers."""
    out, _ = quick
    rc = main(
        ["reproduce", "staircase", "--quick", "--out", str(tmp_path / "a"), "--seed", "0", "--json"]
    )
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
        return finish(
            "fake",
            title="t",
            reproduces=["x"],
            seed=seed,
            quick=quick,
            streams=["a"],
            settings={},
            results={"draw": float(rng.random())},
            paper_numbers=[compare("q", "staircase/eta-star-2", 0.6321)],
            checks=[],
            figure=fig,
            out_dir=out_dir,
        )

    mod.run = fake_run
    monkeypatch.setitem(sys.modules, "memclaim_test_fake_repro", mod)
    monkeypatch.setitem(REPRODUCTIONS, "fake", ("memclaim_test_fake_repro", "test"))
    register("fake", "memclaim_test_fake_repro", "test")
    assert get_runner("fake") is fake_run
    r = run("fake", quick=True, seed=3, out_dir=tmp_path)
    assert r["paper_numbers"][0]["paper"] == 0.632 and (tmp_path / "fake.png").exists()
    assert r == run("fake", quick=True, seed=3, out_dir=tmp_path / "again")
    with pytest.raises(InputError, match="unknown reproduction"):
        get_runner("nope")
    with pytest.raises(DomainError, match="seed"):
        rng_streams(-1, ["a"])
    with pytest.raises(InputError, match="no paper value 'nope'"):
        compare("q", "nope", 1.0)


def test_the_skeleton_runs_its_steps_in_order_and_reports_like_finish(tmp_path):
    """experiments/skeleton.py (issue 26): settings -> data -> runs -> checks -> claims -> differences ->
    paper numbers -> figure -> notes, the streams drawn as rng_streams draws them, and a NAME.json
    byte-identical to the one finish() writes from the same parts; a bad seed is refused before any step."""
    from memclaim.experiments.common import check, paper_claim
    from memclaim.experiments.skeleton import Reproduction

    calls = []

    class Coin(Reproduction):
        name, title, reproduces, streams = "coin", "a coin", ("[MX] nothing",), ("flips", "more")

        def settings(self):
            calls.append("settings")
            return {"flips": 50 if self.quick else 5000}

        def data(self):
            calls.append("data")
            return self.rngs["flips"].integers(0, 2, self.s["flips"])

        def runs(self, flips):
            calls.append("runs")
            return {"heads": int(flips.sum())}

        def checks(self, results):
            calls.append("checks")
            return [check("some heads", results["heads"] > 0, str(results["heads"]))]

        def claims(self, results):
            calls.append("claims")
            return [
                paper_claim(
                    "fair",
                    "the coin is fair",
                    quote="fair",
                    where="[MX] §0",
                    test="heads > 0",
                    held=results["heads"] > 0,
                    evidence="e",
                )
            ]

        def differences(self, results):
            calls.append("differences")
            return ["a coin, not a model"]

        def paper_numbers(self, results):
            calls.append("paper")
            return [compare("q", "staircase/eta-star-2", 0.6321)]

        def figure(self, results, *, claims, differences):
            calls.append(("figure", len(claims), tuple(differences)))
            fig, ax = new_figure()
            ax.plot([0, 1], [0, results["heads"]])
            return fig

        def notes(self, results):
            calls.append("notes")
            return ["a note"]

    with pytest.raises(DomainError, match="seed"):
        Coin(quick=True, seed=-1, out_dir=tmp_path / "bad")
    assert calls == [] and not (tmp_path / "bad").exists()
    res = Coin(quick=True, seed=3, out_dir=tmp_path / "a").reproduce()
    assert calls == [
        "settings",
        "data",
        "runs",
        "checks",
        "claims",
        "differences",
        "paper",
        ("figure", 1, ("a coin, not a model",)),
        "notes",
    ]
    heads = int(rng_streams(3, ["flips", "more"])["flips"].integers(0, 2, 50).sum())
    assert res["results"] == {"heads": heads} and res["settings"] == {"flips": 50}
    assert res["rng"]["streams"] == ["flips", "more"] and res["paper_claims_held"] == 1
    fig, ax = new_figure()
    ax.plot([0, 1], [0, heads])
    direct = finish(
        "coin",
        title="a coin",
        reproduces=["[MX] nothing"],
        seed=3,
        quick=True,
        streams=["flips", "more"],
        settings={"flips": 50},
        results={"heads": heads},
        paper_numbers=[compare("q", "staircase/eta-star-2", 0.6321)],
        checks=[check("some heads", heads > 0, str(heads))],
        figure=fig,
        out_dir=tmp_path / "b",
        notes=["a note"],
        paper_claims=[
            paper_claim(
                "fair",
                "the coin is fair",
                quote="fair",
                where="[MX] §0",
                test="heads > 0",
                held=heads > 0,
                evidence="e",
            )
        ],
        differences=["a coin, not a model"],
    )
    assert res == direct
    assert (tmp_path / "a" / "coin.json").read_bytes() == (
        tmp_path / "b" / "coin.json"
    ).read_bytes()
    with pytest.raises(NotImplementedError, match="runs"):
        type("Empty", (Reproduction,), {"settings": lambda self: {}})(quick=True).reproduce()


@pytest.mark.parametrize(
    "name",
    sorted(n for n, (m, _) in REPRODUCTIONS.items() if m.startswith("memclaim.experiments.")),
)
def test_every_reproduction_runs_on_the_skeleton(tmp_path, monkeypatch, name):
    """Issue 26 item 4: every reproduction memclaim ships is one Reproduction subclass in its
    module, named as registered, and its run() is that class's reproduce() (nothing is loaded or
    scored here: reproduce is replaced, so only settings() runs)."""
    import importlib

    from memclaim.experiments.skeleton import Reproduction

    module = importlib.import_module(REPRODUCTIONS[name][0])
    classes = [
        c
        for c in vars(module).values()
        if isinstance(c, type)
        and issubclass(c, Reproduction)
        and c is not Reproduction
        and c.__module__ == module.__name__
    ]
    assert [c.name for c in classes] == [name]
    cls = classes[0]
    assert cls.title and cls.reproduces
    made = []

    def fake_reproduce(self):
        made.append((self.quick, self.seed, self.out_dir, dict(self.s)))
        return {"name": self.name}

    monkeypatch.setattr(cls, "reproduce", fake_reproduce)
    assert module.run(quick=True, seed=5, out_dir=tmp_path) == {"name": name}
    assert [m[:3] for m in made] == [(True, 5, tmp_path)] and isinstance(made[0][3], dict)


def test_reproduce_turns_off_the_libraries_bars(tmp_path, monkeypatch, capsys):
    """`memclaim reproduce NAME` prints its summary only: transformers' "Loading weights" bars
    (seen on stderr of a full greedy run) are turned off before the reproduction loads a model."""
    import sys
    import types

    import memclaim.cli.reproduce as cli_repro

    calls = []
    monkeypatch.setattr(cli_repro, "quiet_library_bars", lambda: calls.append("quiet"))
    mod = types.ModuleType("memclaim_test_quiet_repro")

    def fake_run(*, quick, seed, out_dir):
        calls.append("run")
        fig, _ = new_figure()
        return finish(
            "quiet",
            title="t",
            reproduces=["x"],
            seed=seed,
            quick=quick,
            streams=[],
            settings={},
            results={},
            paper_numbers=[],
            checks=[],
            figure=fig,
            out_dir=out_dir,
        )

    mod.run = fake_run
    monkeypatch.setitem(sys.modules, "memclaim_test_quiet_repro", mod)
    monkeypatch.setitem(REPRODUCTIONS, "quiet", ("memclaim_test_quiet_repro", "test"))
    assert main(["reproduce", "quiet", "--quick", "--out", str(tmp_path)]) == 0
    assert calls == ["quiet", "run"]
