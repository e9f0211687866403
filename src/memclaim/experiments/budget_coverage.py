"""`budget-coverage`: [EM] §6, Fig. 7 (and App. F.2-F.3): how much of Genesis 1-3 is generated
at least once within a query budget n, verbatim (exact, by teacher forcing) against the
near-verbatim lower bound at a small edit distance, beside the memorization the census reveals.

For a window whose suffix has per-query probability p, P[at least once in n] = 1 - (1 - p)^n
([EM] Eq. 10); the window is *extractable within n at confidence 1 - delta* when this is at
least 1 - delta, i.e. p >= p_min(n) = 1 - delta^(1/n) (computed in log space,
memclaim.claims.budget). Coverage within n is the share of characters covered by the suffix of
at least one extractable window ([EM] Fig. 7, F.3); the census's coverage(tau_doc) is the
memorization the matched comparison reveals, reached at the budget n_tau of tau_doc itself.

- verbatim: the census procedure's teacher-forced scores of every window (shared with
  `book-census` through the durable store);
- near-verbatim: memclaim's certified lower bound on the mass of the Levenshtein ball of
  eps = 5 tokens ([EM] App. B.1, Eq. 2, §6) by a pruned beam search (scoring/nearverbatim.py),
  on a subset of windows: the beam multiplies the cost (about a forward pass per beam row per
  suffix token; 30 s a window for Gemma 3 270M at beam 16 on 2 CPU cores), so --quick bounds 4
  evenly spaced windows and the full run every tenth (stride 100 tokens: every other 50-token
  suffix of the text).
  Verbatim and near-verbatim coverage are compared on exactly that subset (the share of the
  characters its suffixes cover); verbatim coverage of the whole document is shown beside it.

One difference from the paper's algorithm is structural: memclaim's bound follows the target's
own path alongside the beam, so it is never below the verbatim score; the paper's lower bound
can miss the target, which is why its Fig. 7 shows verbatim overtaking near-verbatim at low
probabilities. That crossing cannot occur here and is reported as not reproduced.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..claims.budget import census_budget_view, min_log_prob_for_budget
from ..claims.census import census, char_heat
from ..claims.scores import LN10
from ..report.style import PALETTE, blank_figure, legend, style
from . import real_text as rt
from .common import PaperClaim, check, paper_claim, paper_footer
from .skeleton import Reproduction

NAME = "budget-coverage"
TITLE = "Coverage of Genesis 1-3 under a query budget: verbatim vs near-verbatim ([EM] §6, Fig. 7)"
STREAMS: tuple[str, ...] = ()  # teacher forcing and the beam search draw nothing


# ---- the paper's sentences (issue 24 item 2): quoted, each tested as stated. Teacher forcing and the beam
# search draw nothing, so coverage within a budget is exact: no interval.
QUOTE_CROSSING = (
    "Near-verbatim coverage initially dominates, but at lower probabilities the exact verbatim "
    "computation captures mass that the lower bound misses."
)
QUOTE_SMALLER = (
    "The extraction within that budget is significantly smaller than the total memorization revealed by "
    "the matched comparison (at the budget associated with $\\tau^{(\\mathrm{book})}$)."
)
#: "significantly smaller": at most half of the memorization the matched comparison reveals
SIGNIFICANTLY_SMALLER = 0.5


def claims_for(
    *,
    grid: np.ndarray,
    verbatim: np.ndarray,
    near_verbatim: np.ndarray,
    min_gain_decades: float,
    n_windows: int,
    realistic_n: float,
    verbatim_at_n: float,
    memorized: float,
    log10_n_tau: float,
    near_verbatim_at_n: float,
    memorized_subset: float,
) -> list[PaperClaim]:
    """The sentences of [EM] §6 on Fig. 7 judged on the budget views, each by a rule fixed before the
    run: near-verbatim coverage initially dominates (at the smallest budget of the grid where either
    curve is positive, near-verbatim covers more); verbatim overtakes the bound at lower probabilities
    (not testable here when the bound contains the verbatim term, ``min_gain_decades`` >= 0: then it is
    never below verbatim, by construction); and extraction within the realistic budget is at most half
    the memorization the census reveals (verbatim on the whole document, near-verbatim on the bounded
    subset). ``grid`` holds log10 budgets; ``verbatim`` / ``near_verbatim`` the subset's coverage on it.

    >>> import numpy as np
    >>> from memclaim.experiments.budget_coverage import claims_for
    >>> kw = dict(grid=np.array([0.0, 1.0, 2.0]), n_windows=4, realistic_n=1e5, memorized=0.96, log10_n_tau=61.0,
    ...           memorized_subset=0.9)
    >>> [c.verdict for c in claims_for(verbatim=np.array([0, .2, .3]), near_verbatim=np.array([.1, .2, .3]),
    ...                                min_gain_decades=0.4, verbatim_at_n=0.05, near_verbatim_at_n=0.1, **kw)]
    ['held', 'not testable here', 'held']
    >>> [c.verdict for c in claims_for(verbatim=np.array([.1, .2, .3]), near_verbatim=np.array([0, .1, .2]),
    ...                                min_gain_decades=-1.0, verbatim_at_n=0.7, near_verbatim_at_n=0.6, **kw)]
    ['not held', 'held', 'not held']
    """
    v, nv = np.asarray(verbatim, float), np.asarray(near_verbatim, float)
    pos = (v > 0) | (nv > 0)
    first = int(np.argmax(pos)) if pos.any() else None
    out = [
        paper_claim(
            "near-verbatim-dominates-first",
            "near-verbatim coverage initially dominates verbatim coverage",
            quote=QUOTE_CROSSING,
            where="[EM] §6, Fig. 7",
            test="at the smallest budget of the grid where either curve is positive, near-verbatim covers more (same "
            "windows, exact coverage)",
            held=first is not None and nv[first] > v[first],
            numbers={}
            if first is None
            else {
                "log10_budget": float(grid[first]),
                "near_verbatim": float(nv[first]),
                "verbatim": float(v[first]),
            },
            evidence="no window is extractable within any budget on the grid"
            if first is None
            else f"at n = 10^{grid[first]:.2f}: near-verbatim {nv[first]:.3f}, verbatim {v[first]:.3f} (subset of "
            f"{n_windows} windows)",
        )
    ]
    test = (
        "verbatim coverage exceeds near-verbatim coverage at some budget of the grid; testable only with a "
        "near-verbatim bound that can fall below the verbatim score (the paper's beam can miss the target)"
    )
    if min_gain_decades >= 0:
        out.append(
            paper_claim(
                "verbatim-overtakes-bound",
                "at lower probabilities verbatim captures mass the near-verbatim bound misses",
                quote=QUOTE_CROSSING,
                where="[EM] §6, Fig. 7",
                test=test,
                held=None,
                numbers={"min_gain_decades": min_gain_decades},
                evidence="memclaim's near-verbatim bound includes the target's own teacher-forced term, so it is at least "
                f"the verbatim score at every window (min gain {min_gain_decades:.3g} decades over {n_windows} "
                "windows): the crossing cannot occur by construction",
            )
        )
    else:
        over = v > nv
        out.append(
            paper_claim(
                "verbatim-overtakes-bound",
                "at lower probabilities verbatim captures mass the near-verbatim bound misses",
                quote=QUOTE_CROSSING,
                where="[EM] §6, Fig. 7",
                test=test,
                held=bool(over.any()),
                numbers={"budgets_where_verbatim_covers_more": int(over.sum())},
                evidence=f"verbatim covers more at {int(over.sum())} of {len(grid)} budgets",
            )
        )
    ok = (
        memorized > 0
        and verbatim_at_n <= SIGNIFICANTLY_SMALLER * memorized
        and near_verbatim_at_n <= SIGNIFICANTLY_SMALLER * memorized_subset
    )
    out.append(
        paper_claim(
            "realistic-budget-smaller",
            f"extraction within a realistic budget (n = {realistic_n:g}) is much smaller than "
            "the memorization the matched comparison reveals",
            quote=QUOTE_SMALLER,
            where="[EM] §6, Fig. 7",
            test=f"coverage extractable within n = {realistic_n:g} (at least once w.p. 95%) is at most "
            f"{SIGNIFICANTLY_SMALLER:.0%} of coverage(tau_doc) > 0: verbatim on the whole document, and near-verbatim "
            "on the bounded subset against its own memorized coverage (exact, no interval)",
            held=ok,
            numbers={
                "verbatim_within_budget": verbatim_at_n,
                "memorized": memorized,
                "log10_n_tau": log10_n_tau,
                "near_verbatim_within_budget_subset": near_verbatim_at_n,
                "memorized_subset": memorized_subset,
            },
            evidence=f"verbatim, whole document: {verbatim_at_n:.4f} extractable and memorized within n = {realistic_n:g} "
            f"vs coverage(tau_doc) = {memorized:.4f} (reached at n_tau = 10^{log10_n_tau:.1f}); near-verbatim "
            f"on the subset: {near_verbatim_at_n:.4f} vs {memorized_subset:.4f}",
        )
    )
    return out


def _settings(quick: bool) -> dict:
    s = rt.census_settings(quick)
    s.update(
        {
            "document": "genesis_1_3.txt",
            "control": "new_genesis_style.txt",
            "near_verbatim_epsilon": 5,
            "beam": 8 if quick else 16,
            "near_verbatim_windows": {"rule": "evenly spaced", "count": 4}
            if quick
            else {"rule": "every k-th window", "k": 10},
            "delta": 0.05,
            "realistic_budget": 1e5,
            "significantly_smaller_at_most": SIGNIFICANTLY_SMALLER,
        }
    )
    return s


def _nv_indices(n_windows: int, rule: dict) -> list[int]:
    if rule["rule"] == "evenly spaced":
        return sorted({int(round(x)) for x in np.linspace(0, n_windows - 1, rule["count"])})
    return list(range(0, n_windows, rule["k"]))


def _view_dict(v) -> dict:
    return {
        "log10_budgets": v.log10_budgets.tolist(),
        "coverage_extractable": v.coverage_extractable.tolist(),
        "coverage_extractable_memorized": v.coverage_extractable_memorized.tolist(),
        "coverage_memorized": v.coverage_memorized,
        "at_realistic_n": v.at_realistic_n,
        "log10_n_tau": v.n_tau.log10_n,
    }


def _at(v, log10_n: float) -> float:
    """Coverage extractable within n (a point of the view's grid, or interpolated as a step)."""
    i = int(np.searchsorted(v.log10_budgets, log10_n, side="right")) - 1
    return float(v.coverage_extractable[max(i, 0)])


class BudgetCoverage(Reproduction):
    """[EM] §6's coverage under a query budget, verbatim vs near-verbatim, on the skeleton
    (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] §6 refined extractable memorization",
        "[EM] Fig. 7",
        "[EM] App. F.3 census budget view",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The model, the document and its control, their teacher-forced runs (scored once into the
        store) and the near-verbatim run on a subset of the document's windows."""
        s = self.s
        self.m = m = rt.load(s["model"])
        self.doc_text, self.doc_sha = rt.read_text(s["document"])
        self.ctl_text, self.ctl_sha = rt.read_text(s["control"])
        doc_text = self.doc_text
        self.doc = rt.score_document(m, doc_text, name=s["document"], settings=s)
        ctl = rt.score_document(m, self.ctl_text, name=s["control"], settings=s)
        self.wd, self.wc = self.doc.window_scores(s["policy"]), ctl.window_scores(s["policy"])
        # ---- near-verbatim lower bounds on a subset of windows ([EM] App. B.1 Eq. 2, §6)
        self.idx = idx = _nv_indices(len(self.wd), s["near_verbatim_windows"])
        nv_settings = {"epsilons": [s["near_verbatim_epsilon"]], "beams": [s["beam"]]}
        return rt.score_document(
            m,
            doc_text,
            name=s["document"],
            settings=s,
            policies=(s["policy"],),
            near_verbatim=nv_settings,
            select=idx,
        )

    def runs(self, nv) -> dict:
        """The census, the verbatim and near-verbatim scores of the subset, the budget views of the
        document and of the subset; the claims are judged here (their keys are a result)."""
        s, wd, wc, idx = self.s, self.wd, self.wc, self.idx
        self.res = res = census(wd, wc)
        tau = res.log10_tau
        d, n_real, eps = s["delta"], s["realistic_budget"], s["near_verbatim_epsilon"]

        rs_v = nv.scores(s["policy"])
        rs_nv = nv.scores(s["policy"], near_verbatim=eps)
        sub_v = rs_v.logq
        sub_nv = rs_nv.logq
        main_v = wd.log_scores[idx]
        exact = np.asarray(
            rs_nv.table.column(f"nv_exact:{s['policy']}:eps{eps}").to_pylist(), dtype=bool
        )
        found = np.asarray(
            rs_nv.table.column(f"nv_found:{s['policy']}").to_pylist(), dtype=np.int64
        )
        rows = np.asarray(
            rs_nv.table.column(f"nv_forward_rows:{s['policy']}").to_pylist(), dtype=np.int64
        )
        ws_v = nv.window_scores(s["policy"])
        ws_nv = nv.window_scores(s["policy"], near_verbatim=eps)
        hv, hnv = (
            char_heat(ws_v) / LN10,
            char_heat(ws_nv) / LN10,
        )  # [L] log10, -inf outside the subset's suffixes
        covered = np.isfinite(hv)

        # ---- budget views ([EM] Eq. 10, 34; Fig. 7): the same budget grid for every curve
        full_view = census_budget_view(res.heat_log10, log10_tau=tau, delta=d, realistic_n=n_real)
        grid = full_view.log10_budgets
        v_sub = census_budget_view(
            hv[covered], log10_tau=tau, delta=d, realistic_n=n_real, log10_budgets=grid
        )
        nv_sub = census_budget_view(
            hnv[covered], log10_tau=tau, delta=d, realistic_n=n_real, log10_budgets=grid
        )
        lp_min10 = min_log_prob_for_budget(n=n_real, delta=d) / LN10

        gain = (
            np.asarray(sub_nv - sub_v) / LN10
        )  # orders of magnitude the ball adds to the verbatim score
        # kept for the checks, the differences and the figure
        self.sub_v, self.sub_nv, self.main_v, self.gain = sub_v, sub_nv, main_v, gain
        self.full_view, self.v_sub, self.nv_sub, self.lp_min10 = full_view, v_sub, nv_sub, lp_min10
        # the paper's sentences, each judged by its rule fixed before the run (issue 24 item 2)
        at_real_nv = _at(nv_sub, math.log10(n_real))
        self._claims = claims = {
            c.key: c
            for c in claims_for(
                grid=grid,
                verbatim=v_sub.coverage_extractable,
                near_verbatim=nv_sub.coverage_extractable,
                min_gain_decades=float(gain.min()),
                n_windows=len(idx),
                realistic_n=n_real,
                verbatim_at_n=full_view.at_realistic_n,
                memorized=res.coverage,
                log10_n_tau=full_view.n_tau.log10_n,
                near_verbatim_at_n=at_real_nv,
                memorized_subset=v_sub.coverage_memorized,
            )
        }
        self.model = model = rt.model_record(self.m)
        per_window = [
            {
                "window": int(i),
                "suffix_span": [int(ws_v.starts[j]), int(ws_v.ends[j])],
                "log10_verbatim": float(sub_v[j] / LN10),
                "log10_near_verbatim": float(sub_nv[j] / LN10),
                "gain_decades": float(gain[j]),
                "continuations_found": int(found[j]),
                "exact": bool(exact[j]),
                "forward_rows": int(rows[j]),
            }
            for j, i in enumerate(idx)
        ]
        return {
            "model": model,
            "procedure": rt.procedure(self.doc),
            "procedure_near_verbatim": rt.procedure(nv),
            "texts": {
                "document": {
                    "file": s["document"],
                    "sha256": self.doc_sha,
                    "characters": len(self.doc_text),
                    "n_windows": len(wd),
                },
                "control": {
                    "file": s["control"],
                    "sha256": self.ctl_sha,
                    "characters": len(self.ctl_text),
                    "n_windows": len(wc),
                },
            },
            "log10_tau_doc": tau,
            "coverage_at_tau_doc": res.coverage,
            "log10_p_min_realistic_budget": lp_min10,
            "near_verbatim_windows": idx,
            "near_verbatim_subset_characters": int(covered.sum()),
            "near_verbatim_per_window": per_window,
            "views": {
                "verbatim_document": _view_dict(full_view),
                "verbatim_subset": _view_dict(v_sub),
                "near_verbatim_subset": _view_dict(nv_sub),
            },
            "paper_claim_keys": list(claims),  # the order of the report's paper_claims
        }

    def checks(self, results: dict) -> list:
        sub_v, sub_nv, main_v, gain, idx = self.sub_v, self.sub_nv, self.main_v, self.gain, self.idx
        return [
            check(
                "the near-verbatim lower bound is never below the verbatim score (memclaim's bound follows the "
                "target path)",
                bool(np.all(sub_nv >= sub_v)),
                f"min gain {float(gain.min()):.3g} decades over {len(idx)} windows",
            ),
            check(
                "the near-verbatim run's verbatim scores equal the census run's, bit for bit (same windows, "
                "same procedure but for the beam)",
                bool(np.array_equal(sub_v, main_v)),
                f"max |difference| {float(np.max(np.abs(sub_v - main_v))):.3g} nats",
            ),
        ]

    def claims(self, results: dict) -> list[PaperClaim]:
        return list(self._claims.values())

    def differences(self, results: dict) -> list[str]:
        s, model, idx, wd = self.s, self.model, self.idx, self.wd
        doc_text, eps = self.doc_text, s["near_verbatim_epsilon"]
        return [
            f"model {model['description']} (paper: Llama 3.1 70B)",
            f"text: KJV Genesis 1-3, {len(doc_text):,} characters (paper: The Da Vinci Code)",
            "policy: full softmax, T = 1 (paper: top-k, k = 40; see book-census)",
            f"near-verbatim: eps = {eps} tokens as in the paper, beam {s['beam']}, on {len(idx)} of {len(wd)} windows "
            "(paper: every window, the algorithm of Cooper et al. 2026b)",
            "memclaim's near-verbatim bound follows the target path, so it never falls below the verbatim score",
        ]

    def figure(self, results: dict, *, claims, differences):
        s, res, full_view, v_sub, nv_sub = self.s, self.res, self.full_view, self.v_sub, self.nv_sub
        sub_v, sub_nv, lp_min10, model, idx = (
            self.sub_v,
            self.sub_nv,
            self.lp_min10,
            self.model,
            self.idx,
        )
        return _figure(
            s,
            res,
            full_view,
            v_sub,
            nv_sub,
            sub_v,
            sub_nv,
            lp_min10,
            claims,
            differences,
            model,
            idx,
        )


def run(*, quick: bool, seed: int, out_dir: str | os.PathLike) -> dict:
    """[EM] §6, Fig. 7, F.3: coverage under a query budget, verbatim vs near-verbatim.

    Writes ``budget-coverage.json``, ``budget-coverage.png`` and ``budget-coverage.pdf`` into ``out_dir``
    (created) and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim
    reproduce budget-coverage`` runs.

    >>> from memclaim.experiments.budget_coverage import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('budget-coverage', True)
    """
    return BudgetCoverage(quick=quick, seed=seed, out_dir=out_dir).reproduce()


def _figure(
    s, res, full_view, v_sub, nv_sub, sub_v, sub_nv, lp_min10, claims, differences, model, idx
):

    with style():
        fig = blank_figure(width=11.5, height=5.0)
        ax = fig.subplot_mosaic([["budget", "windows"]], width_ratios=[1.5, 1.0])
        a = ax["budget"]
        x = full_view.log10_budgets
        real = math.log10(s["realistic_budget"])
        a.axvspan(
            0,
            real,
            color=PALETTE["bound"],
            alpha=0.12,
            lw=0,
            label=f"realistic budgets, n <= {s['realistic_budget']:g}",
        )
        a.plot(
            x,
            full_view.coverage_extractable,
            color=PALETTE["member"],
            label="verbatim, every window",
        )
        a.plot(
            x,
            v_sub.coverage_extractable,
            color=PALETTE["member"],
            ls="--",
            label=f"verbatim, the {len(idx)} bounded windows",
        )
        a.plot(
            x,
            nv_sub.coverage_extractable,
            color=PALETTE["bound"],
            label=rf"near-verbatim lower bound ($\varepsilon = {s['near_verbatim_epsilon']}$), same windows",
        )
        a.axhline(
            res.coverage,
            color=PALETTE["threshold"],
            ls=":",
            label=rf"memorized: coverage($\tau_{{doc}}$) = {res.coverage:.2f}",
        )
        if math.isfinite(full_view.n_tau.log10_n):
            a.axvline(
                full_view.n_tau.log10_n,
                color=PALETTE["threshold"],
                ls="--",
                lw=1.2,
                label=rf"$n_\tau = 10^{{{full_view.n_tau.log10_n:.1f}}}$ (budget of $\tau_{{doc}}$)",
            )
        a.set_xlabel(
            rf"query budget $\log_{{10}} n$ (generated at least once w.p. $\geq {1 - s['delta']:g}$)"
        )
        a.set_ylabel("coverage (share of characters)")
        a.set_ylim(-0.02, 1.04)
        a.set_title("(a) Coverage of Genesis 1-3 within a budget ([EM] Fig. 7)")
        legend(a)
        b = ax["windows"]
        lv, lnv = sub_v / math.log(10), sub_nv / math.log(10)
        b.plot(lv, lnv, "o", color=PALETTE["bound"], ms=4, label="one bounded window")
        lo, hi = float(min(lv.min(), lnv.min())) - 2, float(max(lv.max(), lnv.max(), lp_min10)) + 2
        b.plot([lo, hi], [lo, hi], color=PALETTE["control"], lw=1, label="near-verbatim = verbatim")
        b.axhline(
            lp_min10,
            color=PALETTE["bound"],
            ls="--",
            lw=1,
            label=rf"$p_{{min}}(n = 10^5) = 10^{{{lp_min10:.2f}}}$",
        )
        b.axvline(res.log10_tau, color=PALETTE["threshold"], ls=":", lw=1.2, label=r"$\tau_{doc}$")
        b.set_xlabel(r"verbatim score $\log_{10} q(s \mid p)$")
        b.set_ylabel(
            rf"near-verbatim bound $\log_{{10}} q(B_{{{s['near_verbatim_epsilon']}}}(s) \mid p)$"
        )
        b.set_title("(b) What the edit ball adds, window by window")
        legend(b)
        paper_footer(fig, differences=differences, claims=claims)
        fig.suptitle(
            f"Memorized vs realistically extractable on {model['name']}: " + rf"$\tau_{{doc}} = "
            rf"10^{{{res.log10_tau}}}$, within $n = 10^5$: {full_view.at_realistic_n:.1%} of the text"
        )
    return fig
