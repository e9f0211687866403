"""`per-instance`: [MX] Fig. 8, Remark 4.5: measured mem_h(x) against the per-instance privacy
parameter eps_x for 500 instances, eps_x log-uniform in [0.05, 4].

Each instance x is a membership-binary canary released by randomized response with its own
eps_x ([MX] App. B.4), and read by the teacher-forcing score h = p_theta(1 | c) = the released
bit (in H_loc). Its per-instance cap is |mem_h(x)| <= eta(f_{eps_x}) = tanh(eps_x/2) (Remark 4.5,
Theorem 4.1), attained by RR. The second family passes the released bit through a binary
symmetric channel BSC(gamma), gamma = 0.15, a data-independent kernel, and sits on its own
predicted curve (1 - 2 gamma) tanh(eps_x/2), strictly below.

mem_h(x) is measured as a plug-in replace-one difference (Definition 3.2 with D* away from x):
the mean released bit over n releases with x in the dataset minus the mean over n releases with
x replaced; its standard error is the binomial one. "No point exceeds the bound" is tested at
family-wise 4 sigma (the paper's criterion; over 1000 one-sided tests a 4-sigma exceedance has
probability <= 1000 * 3.2e-5 = 3.2% when every bound holds), and "on its curve" by a chi-square
test of the standardized residuals against the family's exact curve.
"""

from __future__ import annotations

import math
import os

import numpy as np
from scipy import stats

from ..mechanisms.randomized_response import RandomizedResponse
from ..privacy.caps import eta_pure
from ..report.style import legend as style_legend
from .common import Check, check, compare, new_figure
from .skeleton import Reproduction

NAME = "per-instance"
TITLE = "per-instance calibration: mem_h(x) vs eps_x ([MX] Fig. 8)"
STREAMS = ("eps", "rr", "bsc")


def _settings(quick: bool) -> dict:
    return {
        "n_instances": 500,
        "eps_range": [0.05, 4.0],
        "eps_law": "log-uniform",
        "bsc_crossover": 0.15,
        # The Spearman correlation grows with this count (0.9952 at 4e3, 0.9976 at 1e4, 0.9998 at
        # 2e5 releases, mean over seeds); the paper does not give it, and its 0.998 corresponds to
        # about 1e4. Quick and full runs use the same count (it takes a few seconds).
        "releases_per_branch": 10_000,
        "violation_sigma": 4.0,
        "fit_test_level": 0.001,
        "neighbors": "replace-one",
        "functional": "RO (plug-in, D* supported away from x)",
    }


def _measure(
    mech: RandomizedResponse, n: int, rng: np.random.Generator
) -> tuple[float, float, list[int]]:
    """(mem estimate, standard error, [ones released with the bit set, ones with it cleared]) from
    n releases with the bit set and n with it cleared."""
    b1 = mech.release(np.ones(n, dtype=np.int8), rng=rng)
    b0 = mech.release(np.zeros(n, dtype=np.int8), rng=rng)
    p1, p0 = b1.mean(), b0.mean()
    se = math.sqrt(max(p1 * (1 - p1), 1.0 / n) / n + max(p0 * (1 - p0), 1.0 / n) / n)
    return float(p1 - p0), se, [int(b1.sum()), int(b0.sum())]


# ---- the checks: [MX] §8.2's sentence on Fig. 8 ("Per-instance calibration"), tested as stated
QUOTE_FIG8 = (
    "the extremal randomized-response canary sits on the curve tanh(εx /2) while a post-processed family "
    "sits strictly below, exactly on its own predicted curve; no instance violates the per-instance bound "
    "(family-wise 4σ)"
)


def checks_for(families: dict, settings: dict) -> list[Check]:
    """The checks of [MX] §8.2 on Fig. 8 from the two families' summaries (``results["families"]``: ``rr``
    and ``bsc`` with ``violations_at_sigma``, ``max_z_over_bound``, ``fit_chi2``, ``fit_dof``,
    ``fit_p_value``, ``predicted_max_gap_to_bound``, ``pooled_z_vs_bound``) and the settings
    (``n_instances``, ``fit_test_level``): no instance above its bound by 4 sigma; each family on its own
    curve (chi-square of the residuals); the post-processed family strictly below the bound.

    >>> from memclaim.experiments.per_instance import checks_for
    >>> fam = {"violations_at_sigma": 0, "max_z_over_bound": 1.2, "fit_chi2": 500.0, "fit_dof": 500,
    ...        "fit_p_value": 0.5, "predicted_max_gap_to_bound": -0.01, "pooled_z_vs_bound": -30.0}
    >>> st = {"n_instances": 500, "fit_test_level": 0.001}
    >>> [c.passed for c in checks_for({"rr": fam, "bsc": fam}, st)]
    [True, True, True, True]
    >>> [c.passed for c in checks_for({"rr": {**fam, "violations_at_sigma": 1, "fit_p_value": 1e-5},
    ...                                "bsc": {**fam, "pooled_z_vs_bound": -2.0}}, st)]
    [False, False, True, False]
    """
    rr, bsc = families["rr"], families["bsc"]
    n_inst = settings["n_instances"]
    bonf = float(stats.norm.isf(0.05 / (2 * n_inst)))
    level = settings["fit_test_level"]
    where = "[MX] §8.2 'Per-instance calibration', Fig. 8"
    return [
        check(
            "no instance exceeds its per-instance bound tanh(eps_x/2) (family-wise 4 sigma)",
            rr["violations_at_sigma"] == 0 and bsc["violations_at_sigma"] == 0,
            f"max z over the bound: RR {rr['max_z_over_bound']:.2f}, BSC {bsc['max_z_over_bound']:.2f} "
            f"(4-sigma rule; Bonferroni 5% over {2 * n_inst} tests would be {bonf:.2f})",
            false_alarm=f"<= {2 * n_inst * stats.norm.sf(4.0):.1%} ({2 * n_inst} one-sided 4-sigma tests, union "
            "bound)",
            quote=QUOTE_FIG8,
            where=where,
        ),
        check(
            "the randomized-response family sits on tanh(eps_x/2) (chi-square of residuals)",
            rr["fit_p_value"] > level,
            f"chi2 = {rr['fit_chi2']:.1f} on {rr['fit_dof']} dof, p = {rr['fit_p_value']:.3g}",
            false_alarm=f"{level:.1%}",
            quote=QUOTE_FIG8,
            where=where,
        ),
        check(
            "the BSC(gamma) family sits on its own curve (1 - 2 gamma) tanh(eps_x/2)",
            bsc["fit_p_value"] > level,
            f"chi2 = {bsc['fit_chi2']:.1f} on {bsc['fit_dof']} dof, p = {bsc['fit_p_value']:.3g}",
            false_alarm=f"{level:.1%}",
            quote=QUOTE_FIG8,
            where=where,
        ),
        check(
            "the BSC(gamma) family is strictly below the bound",
            bsc["predicted_max_gap_to_bound"] < 0 and bsc["pooled_z_vs_bound"] < -4,
            f"exact curve below the bound at every instance (max gap {bsc['predicted_max_gap_to_bound']:.2g}); "
            f"pooled z of the measurements vs the bound {bsc['pooled_z_vs_bound']:.1f}",
            false_alarm="< 3.2e-5 (pooled one-sided 4-sigma)",
            quote=QUOTE_FIG8,
            where=where,
        ),
    ]


class PerInstance(Reproduction):
    """[MX] Fig. 8 on the skeleton (:mod:`.skeleton`): randomized response and BSC families."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = ("[MX] Fig. 8", "[MX] Remark 4.5 per-instance calibration")

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> np.ndarray:
        """The instances' privacy parameters eps_x, log-uniform over the settings' range."""
        lo, hi = self.s["eps_range"]
        return np.exp(
            self.rngs["eps"].uniform(math.log(lo), math.log(hi), size=self.s["n_instances"])
        )

    def runs(self, eps_x: np.ndarray) -> dict:
        """Each family's measured advantage per instance beside its exact prediction and the bound."""
        s, rngs = self.s, self.rngs
        n = s["releases_per_branch"]
        gamma = s["bsc_crossover"]
        fam = {}
        for key, g in (("rr", 0.0), ("bsc", gamma)):
            est, se, pred, ones = [], [], [], []
            for e in eps_x:
                mech = RandomizedResponse(epsilon=float(e), crossover=g)
                m_, s_, c_ = _measure(mech, n, rngs[key])
                ones.append(c_)
                est.append(m_)
                se.append(s_)
                pred.append(
                    mech.advantage()
                )  # exact: tanh(eps/2) for RR, (1 - 2 gamma) tanh(eps/2) after BSC
            est, se, pred = np.array(est), np.array(se), np.array(pred)
            bound = np.array([eta_pure(float(e)) for e in eps_x])
            z_fit = (est - pred) / se
            z_bound = (est - bound) / se
            chi2 = float(np.sum(z_fit**2))
            rho = stats.spearmanr(eps_x, est)
            fam[key] = {
                "crossover": g,
                "measured": est.tolist(),
                "se": se.tolist(),
                "predicted": pred.tolist(),
                "bound": bound.tolist(),
                "released_ones": ones,  # raw counts [bit set, bit cleared] per instance, for re-derivation
                "max_z_over_bound": float(z_bound.max()),
                "violations_at_sigma": int(np.sum(z_bound > s["violation_sigma"])),
                "pooled_z_vs_bound": float(z_bound.sum() / math.sqrt(z_bound.size)),
                "fit_chi2": chi2,
                "fit_dof": int(z_fit.size),
                "fit_p_value": float(stats.chi2.sf(chi2, z_fit.size)),
                "fit_max_abs_z": float(np.abs(z_fit).max()),
                "spearman_eps_vs_measured": float(rho.statistic),
                "predicted_max_gap_to_bound": float(np.max(pred - bound)),
            }
        return {"eps_x": eps_x.tolist(), "families": fam}

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results["families"], self.s)

    def paper_numbers(self, results: dict) -> list:
        rr, bsc = results["families"]["rr"], results["families"]["bsc"]
        return [
            compare(
                "spearman_rr",
                "per-instance/spearman",
                rr["spearman_eps_vs_measured"],
                note=f"randomized-response family, {self.s['releases_per_branch']} releases per branch per "
                "instance; the correlation grows with that count, which the paper does not give",
            ),
            compare(
                "violations",
                "per-instance/violations",
                rr["violations_at_sigma"] + bsc["violations_at_sigma"],
            ),
        ]

    def figure(self, results: dict, *, claims, differences):
        rr, bsc = results["families"]["rr"], results["families"]["bsc"]
        eps_x, gamma = results["eps_x"], self.s["bsc_crossover"]
        lo, hi = self.s["eps_range"]
        fig, ax = new_figure()
        ee = np.exp(np.linspace(math.log(lo), math.log(hi), 300))
        ax.plot(ee, np.tanh(ee / 2), "k-", lw=1.2, label=r"bound $\tanh(\varepsilon_x/2)$")
        ax.plot(
            ee,
            (1 - 2 * gamma) * np.tanh(ee / 2),
            "k--",
            lw=1.0,
            label=f"BSC($\\gamma$={gamma}) prediction",
        )
        ax.errorbar(
            eps_x,
            rr["measured"],
            yerr=rr["se"],
            fmt="o",
            ms=2,
            color="tab:red",
            elinewidth=0.5,
            label="RR canary",
        )
        ax.errorbar(
            eps_x,
            bsc["measured"],
            yerr=bsc["se"],
            fmt="o",
            ms=2,
            color="tab:blue",
            elinewidth=0.5,
            label=f"BSC, $\\gamma$ = {gamma}",
        )
        ax.set_xlabel(r"per-instance privacy parameter $\varepsilon_x$")
        ax.set_ylabel(r"measured $\mathrm{mem}_h(x)$")
        ax.set_title("per-instance calibration ([MX] Fig. 8)")
        style_legend(ax, below=True)
        return fig

    def notes(self, results: dict) -> list[str]:
        return [
            f"{self.s['releases_per_branch']} releases per branch per instance; SE is the binomial standard "
            "error of the difference",
            "mem_h is the plug-in replace-one functional with D* away from x (Definition 3.2)",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] Fig. 8: per-instance calibration, randomized response and BSC families.

    Writes ``per-instance.json``, ``per-instance.png`` and ``per-instance.pdf`` into ``out_dir`` (created)
    and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    per-instance`` runs.

    >>> from memclaim.experiments.per_instance import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('per-instance', True)
    """
    return PerInstance(quick=quick, seed=seed, out_dir=out_dir).reproduce()
