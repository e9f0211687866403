"""`dp-calibration`: [MX] §8.2 "Calibration under real DP-SGD" (Thm. 4.1), at tiny-model scale.

DP-SGD fine-tuning (DP-Adam through Opacus, per-sample clipping at 1.0, delta = 1/(10 N), noise
calibrated by Opacus's RDP accountant to each target epsilon, 3 epochs; [MX] App. F.2) of a
tiny pre-trained GPT (:class:`memclaim.train.finetune.ChainBaseSpec`, the stand-in for the
paper's Pythia-410m) on a private corpus holding canaries planted k in {1, 2, 4, 8} times; the
eps = inf configuration runs the same optimizer and Poisson sampler with clipping and noise
disabled. Measured: counterfactual memorization of each canary under the teacher-forcing score
h = q(z | c), with standard errors across canaries, set against two labelled caps.

Matching the functional to the accountant ([MX] App. A, Prop. A.1). Opacus certifies
(eps, delta)-DP under **add/remove** of one training block with **Poisson sampling**, which caps
the **LOO** functional. So every model trains on the *same* private background S-, and each
canary (with its k copies, each its own block: a group of k additions) is included in exactly
half of the models, the half chosen independently per canary. Given that canary x is IN a
model, the other canaries' inclusion has the same law as given x is OUT, so
E[h | x in] - E[h | x out] = E_T[h(A(S- + T + x^k)) - h(A(S- + T))] over the random other
canaries T: an average of LOO differences, each between add/remove k-neighbours, hence capped by
the same group bound ([MX] Prop. A.1 with a group of k). ``counterfactual_memorization(...,
design="leave_one_out")`` names it LOO. (Random halves of a population would estimate COND and
x-versus-a-fresh-draw would estimate RO, which add/remove caps only through f^(2k).)

Caps per cell (eps = the epsilon the accountant reports as spent, the largest over the row's
models; delta the common delta):

- conservative: the (k eps, delta_k) conversion, delta_k = delta (e^{k eps} - 1)/(e^eps - 1),
  cap = delta_k + (1 - delta_k) tanh(k eps / 2) ([MX] §8.2): valid for the run, lossy;
- from the curve: eta(f^(k)) of each run's own trade-off curve (the composed subsampled
  Gaussian's privacy-loss distribution, :func:`memclaim.privacy.pld.dpsgd_curve`), the largest
  over the row's models ([MX] Prop. A.1 with a group of k, Cor. 4.3): valid for the run and
  much tighter than the conversion; tested like it;
- reference: the exact staircase eta*_k(eps) of Lemma 4.4, the k-copy cap of *pure* eps-DP
  (delta = 0). The run has delta > 0, so it is shown beside the valid cap, not tested against.

A cell is *vacuous* when its cap is 1 (it constrains nothing; eps = inf), *visible* when the cap
is at most 0.2 and exceeds three standard errors (the paper's rule: a violation would have been
visible), and *not informative* otherwise.

At eps = inf the check tests the duplication effect (the most copies above the fewest by 3 SE); the
paper's "memorization returns and climbs with duplication" is judged as a sentence across every k
of the grid (:func:`climbs_claim`).
"""

from __future__ import annotations

import copy
import math
import os

import numpy as np

from ..errors import DomainError
from ..report.style import legend as style_legend
from ..train.finetune import ChainBaseSpec, ensure_chain_base, epochs_to_steps, sample_chain_ids
from ..train.planted import PlantedRecord, plant, training_blocks
from .common import Check, PaperClaim, check, compare, new_figure, paper_claim
from .models import teacher_forced
from .paper import PAPER
from .skeleton import Reproduction

NAME = "dp-calibration"
TITLE = "DP-SGD calibration: measured LOO memorization vs the (k eps, delta_k) cap ([MX] §8.2)"
STREAMS = ("data", "design", "training")
KS = (1, 2, 4, 8)
PAPER_GRID = (0.05, 0.1, 0.25, 0.5, 1.0, 4.0, 16.0)  # [MX] App. F.2 (plus eps = inf)
PAPER_DELTA = 2.5e-5  # [MX] §8.2: "at delta <= 2.5e-5"
PAPER_INF = {
    k: PAPER[f"dp-calibration/mem-inf-k{k}"].value for k in (1, 2, 4, 8)
}  # [MX] §8.2, Pythia-410m


def _settings(quick: bool) -> dict:
    return {
        "base": "ChainBaseSpec() (2-layer GPT-2, 64-dim, pre-trained on fresh Markov-Zipf text)",
        "epsilons": [0.1, 1.0, "inf"] if quick else [*PAPER_GRID, "inf"],
        "ks": list(KS),
        "canaries_per_k": 6 if quick else 16,
        "models_per_epsilon": 4 if quick else 8,
        "background_blocks": 64 if quick else 192,
        "prefix_tokens": 6,
        "secret_tokens": 3,
        "epochs": 3,
        "batch_size": 16,
        "lr": 5e-3,
        "max_grad_norm": 1.0,
        "accountant": "rdp",
        "delta_rule": "1/(10 N_max), N_max = background + every canary copy",
        "neighbors": "add/remove (one training block)",
        "sampling": "Poisson (Opacus DPDataLoader; the eps = inf runs use the same rule)",
        "functional": "LOO (each canary IN exactly half of the models, independently per canary)",
        "score": "teacher-forcing probability h = q(z | c)",
        "threads": 2,
    }


def _eps(v) -> float:
    return math.inf if v == "inf" else float(v)


def conservative_cap(*, epsilon: float, delta: float, k: int) -> tuple[float, float, float]:
    """(cap, k eps, delta_k): delta_k + (1 - delta_k) tanh(k eps/2) from the (k eps, delta_k)
    group conversion ([MX] §8.2); 1 when delta_k >= 1 or eps = inf (nothing is implied).

    >>> from memclaim.experiments.dp_calibration import conservative_cap
    >>> cap, k_eps, delta_k = conservative_cap(epsilon=1.0, delta=1e-5, k=2)
    >>> round(cap, 4), k_eps, f"{delta_k:.3g}"  # tanh(1) = 0.7616
    (0.7616, 2.0, '3.72e-05')
    """
    from ..privacy.caps import eta_approx
    from ..privacy.tradeoff import group_conversion

    if math.isinf(epsilon):
        return 1.0, math.inf, math.nan
    ke, dk = group_conversion(epsilon=epsilon, delta=delta, k=k)
    if dk >= 1.0:
        return 1.0, ke, dk
    return min(1.0, eta_approx(ke, dk)), ke, dk


def _paper_grid_facts() -> dict:
    """The formula-level numbers of [MX] §8.2 on the paper's own grid at delta = 2.5e-5."""
    cells = []
    for e in PAPER_GRID:
        for k in KS:
            cap, _, _ = conservative_cap(epsilon=e, delta=PAPER_DELTA, k=k)
            cells.append({"epsilon": e, "k": k, "cap": cap, "tanh": math.tanh(k * e / 2)})
    live = [c for c in cells if c["cap"] < 1.0 - 1e-9 and c["tanh"] < 1.0 - 1e-9]
    return {
        "cells": cells,
        "n_cap_at_most_0.2": sum(1 for c in cells if c["cap"] <= 0.2),
        "max_excess_over_tanh": max(c["cap"] - c["tanh"] for c in live),
        "cap_eps_0.05_k_1": conservative_cap(epsilon=0.05, delta=PAPER_DELTA, k=1)[0],
    }


# ---- the checks: [MX] §8.2 'Calibration under real DP-SGD', each sentence tested as stated
QUOTE_NONE_OCCURS = (
    "Pushing ε down until the bound approaches the measurement floor gives eight cells where the cap is "
    "at most 0.2 and exceeds three standard errors, so a violation would have been visible; none "
    "occurs"
)
QUOTE_LOSSY = "the inequality because the conversion is lossy and η is antitone in f"
WHERE = "[MX] §8.2 'Calibration under real DP-SGD'"
QUOTE_CLIMBS = "At ε = ∞ memorization returns and climbs with duplication"
QUOTE_DUPLICATION = "reproducing the duplication effect of [25, 26]"


def checks_for(rows: list[dict]) -> list[Check]:
    """The checks of [MX] §8.2 'Calibration under real DP-SGD' from the run's rows (``results["rows"]``:
    per epsilon, the models' DP reports and the cells per k with ``mem``, ``se``, ``violation_p``,
    ``violation_p_curve``, ``cap_conservative``, ``cap_curve``, ``label``): every run within its target
    epsilon and the two accountants agreeing (identities of the training); no finite-epsilon cell above
    either cap by 3 sigma ("none occurs"), with at least one cell where a violation would have been
    visible (else "none occurs" tests nothing); the curve's cap never above the conversion's; and at
    eps = inf memorization climbing with duplication (k = 8 above k = 1 by > 3 SE).

    >>> from memclaim.experiments.dp_calibration import checks_for
    >>> dp = {"epsilon": 0.9, "target_epsilon": 1.0, "epsilon_rdp_dp_accounting": 0.9, "epsilon_pld_dp_accounting": 0.8}
    >>> cell = lambda k, mem, p=0.4, label="visible": {"k": k, "mem": mem, "se": 0.01, "violation_p": p,
    ...     "violation_p_curve": p, "cap_conservative": 0.1, "cap_curve": 0.09, "label": label}
    >>> rows = [{"epsilon": 1.0, "models": [{"dp": dp}], "cells": [cell(1, 0.0), cell(8, 0.01)]},
    ...         {"epsilon": "inf", "models": [], "cells": [cell(1, 0.01), cell(8, 0.5)]}]
    >>> [c.passed for c in checks_for(rows)]
    [True, True, True, True, True, True, True]
    >>> rows[0]["cells"] = [cell(1, 0.3, p=1e-6, label="not informative"), cell(8, 0.0, label="vacuous")]
    >>> rows[1]["cells"] = [cell(1, 0.01), cell(8, 0.02)]
    >>> [c.passed for c in checks_for(rows)]
    [True, True, False, False, True, False, False]
    """
    finite = [r for r in rows if not math.isinf(_eps(r["epsilon"]))]
    dp_reps = [m["dp"] for r in finite for m in r["models"]]
    spent_ok = all(d["epsilon"] <= d["target_epsilon"] + 1e-12 for d in dp_reps)
    rel = max(
        (abs(d["epsilon_rdp_dp_accounting"] - d["epsilon"]) / d["epsilon"] for d in dp_reps),
        default=0.0,
    )
    pld_ok = all(d["epsilon_pld_dp_accounting"] <= d["epsilon"] * (1 + 1e-3) for d in dp_reps)
    fin_cells = [c for r in finite for c in r["cells"]]
    n_tests = len(fin_cells)
    no_violation = all(c["violation_p"] > 0.00135 for c in fin_cells)
    no_violation_curve = all(c["violation_p_curve"] > 0.00135 for c in fin_cells)
    curve_tighter = all(c["cap_curve"] <= c["cap_conservative"] + 1e-9 for c in fin_cells)
    visible = [
        (r["epsilon"], c["k"]) for r in finite for c in r["cells"] if c["label"] == "visible"
    ]
    inf_row = next(r for r in rows if math.isinf(_eps(r["epsilon"])))
    c1 = next(c for c in inf_row["cells"] if c["k"] == 1)
    c8 = next(c for c in inf_row["cells"] if c["k"] == 8)
    z_dup = (c8["mem"] - c1["mem"]) / math.sqrt(c8["se"] ** 2 + c1["se"] ** 2)
    fw = (
        f"<= {n_tests * 0.00135:.1%} family-wise when every cap holds (Bonferroni over {n_tests} one-sided normal "
        "tests at 3 sigma)"
    )
    where = "[MX] §8.2 'Calibration under real DP-SGD'"
    return [
        check(
            "every DP run spent at most its target epsilon (Opacus RDP accountant, steps actually taken)",
            spent_ok,
            f"max spent/target = {max((d['epsilon'] / d['target_epsilon'] for d in dp_reps), default=0):.4f}"
            f" over {len(dp_reps)} runs",
            where="an identity of the training (no sentence of the paper)",
        ),
        check(
            "dp_accounting's RDP accountant reproduces Opacus's epsilon to 1%; its PLD epsilon is at most it",
            rel < 1e-2 and pld_ok,
            f"max relative RDP difference {rel:.1e}; PLD <= Opacus RDP: {pld_ok}",
            where="an identity of the accounting (no sentence of the paper)",
        ),
        check(
            "no finite-epsilon cell exceeds its conservative cap (one-sided 3-sigma)",
            no_violation,
            f"min violation p = {min((c['violation_p'] for c in fin_cells), default=1.0):.3g} over {n_tests} cells",
            false_alarm=fw,
            quote=QUOTE_NONE_OCCURS,
            where=where,
        ),
        check(
            "no finite-epsilon cell exceeds its cap from the runs' trade-off curves (one-sided 3-sigma)",
            no_violation_curve,
            f"min violation p = {min((c['violation_p_curve'] for c in fin_cells), default=1.0):.3g} over {n_tests} "
            "cells",
            false_alarm=fw,
            quote=QUOTE_NONE_OCCURS,
            where=where,
        ),
        check(
            "the cap from the curve is never above the (k eps, delta_k) conversion",
            curve_tighter,
            "largest curve cap / conservative cap = "
            f"{max((c['cap_curve'] / c['cap_conservative'] for c in fin_cells), default=0):.3g}",
            quote=QUOTE_LOSSY,
            where=where,
        ),
        check(
            "at least one cell where a violation would have been visible (cap <= 0.2 and > 3 SE)",
            bool(visible),
            f"visible cells (eps, k): {visible}",
            quote=QUOTE_NONE_OCCURS,
            where=where,
        ),
        check(
            "eps = inf: memorization climbs with duplication (k = 8 above k = 1 by > 3 SE)",
            z_dup > 3,
            f"mem {c1['mem']:.3f} +- {c1['se']:.3f} (k = 1) vs {c8['mem']:.3f} +- {c8['se']:.3f} (k = 8), "
            f"z = {z_dup:.1f}",
            false_alarm="a normal one-sided test at 3 sigma: <= 0.14% if the means were equal",
            quote=QUOTE_DUPLICATION,
            where=where
            + " (the duplication effect, from the fewest to the most copies; 'memorization returns and "
            "climbs with duplication' is judged at every k of the grid in paper_claims)",
        ),
    ]


def climbs_claim(rows: list[dict]) -> PaperClaim:
    """ "At eps = inf memorization returns and climbs with duplication (mem_h = 0.007, 0.035, 0.178, 0.552 at
    k = 1, 2, 4, 8)" ([MX] §8.2 'Calibration under real DP-SGD'), tested as stated on the eps = inf row of
    ``rows`` (cells with ``k``, ``mem``, ``se``): memorization climbs at every step of the duplication grid
    (the point estimates rise from each k to the next, as the paper's four numbers do; how many steps is
    reported), the climb is real (the largest k above the smallest by more than 3 standard errors, a one-sided
    normal test), and memorization returns (the largest k's above 0 by more than 3 standard errors). Held iff
    all three; not held otherwise. Needs at least two k: not testable with fewer.

    >>> from memclaim.experiments.dp_calibration import climbs_claim
    >>> cell = lambda k, mem, se=0.003: {"k": k, "mem": mem, "se": se}
    >>> paper = [cell(1, 0.007), cell(2, 0.035), cell(4, 0.178), cell(8, 0.552)]  # the paper's own numbers
    >>> climbs_claim([{"epsilon": "inf", "cells": paper}]).verdict
    'held'
    >>> dip = [cell(1, 0.01), cell(2, 0.2), cell(4, 0.1), cell(8, 0.5)]  # k = 8 far above k = 1, but a step down
    >>> climbs_claim([{"epsilon": "inf", "cells": dip}]).verdict
    'not held'
    """
    inf_row = next(r for r in rows if math.isinf(_eps(r["epsilon"])))
    cells = sorted(inf_row["cells"], key=lambda c: c["k"])
    ks = [c["k"] for c in cells]
    test = (
        "at eps = inf, over the duplication grid k = "
        + ", ".join(map(str, ks))
        + ": the memorization estimate "
        "rises at every step from one k to the next (the paper's 0.007, 0.035, 0.178, 0.552), the largest k's is "
        "above the smallest k's by more than 3 standard errors, and above 0 by more than 3 (returns)"
    )
    nums = {"k": ks, "mem": [c["mem"] for c in cells], "se": [c["se"] for c in cells]}
    claim = (
        "at eps = inf memorization returns and climbs with duplication, at every step of the k grid"
    )
    if len(cells) < 2:
        return paper_claim(
            "climbs-with-duplication",
            claim,
            quote=QUOTE_CLIMBS,
            where=WHERE,
            test=test,
            held=None,
            numbers=nums,
            evidence=f"a duplication grid of {len(cells)} k: nothing to climb",
        )
    steps = [b["mem"] > a["mem"] for a, b in zip(cells, cells[1:])]
    lo, hi = cells[0], cells[-1]
    z_climb = (
        (hi["mem"] - lo["mem"]) / math.hypot(hi["se"], lo["se"])
        if hi["se"] or lo["se"]
        else math.inf
    )
    z_return = hi["mem"] / hi["se"] if hi["se"] else (math.inf if hi["mem"] > 0 else 0.0)
    nums.update(
        {
            "steps_up": int(sum(steps)),
            "steps": len(steps),
            "z_climb": z_climb,
            "z_returns": z_return,
        }
    )
    found = (
        ", ".join(f"k = {c['k']}: {c['mem']:.3f} +- {c['se']:.3f}" for c in cells)
        + f"; rises at {sum(steps)} of {len(steps)} steps; k = {hi['k']} above k = {lo['k']} by z = "
        f"{z_climb:.1f}, above 0 by z = {z_return:.1f}"
    )
    return paper_claim(
        "climbs-with-duplication",
        claim,
        quote=QUOTE_CLIMBS,
        where=WHERE,
        test=test,
        held=all(steps) and z_climb > 3 and z_return > 3,
        numbers=nums,
        evidence=found,
    )


def claims_for(rows: list[dict]) -> list[PaperClaim]:
    """The sentences of [MX] §8.2 'Calibration under real DP-SGD' that the checks cannot test as stated, judged on
    the run's rows (``results["rows"]``): memorization returns and climbs with duplication at eps = inf
    (:func:`climbs_claim`).

    >>> from memclaim.experiments.dp_calibration import claims_for
    >>> cells = [{"k": k, "mem": m, "se": 0.01} for k, m in ((1, 0.0), (2, 0.03), (4, 0.16), (8, 0.32))]
    >>> [(c.key, c.verdict) for c in claims_for([{"epsilon": 1.0, "cells": []}, {"epsilon": "inf", "cells": cells}])]
    [('climbs-with-duplication', 'held')]
    """
    return [climbs_claim(rows)]


class DPCalibration(Reproduction):
    """[MX] §8.2's DP-SGD calibration on the skeleton (:mod:`.skeleton`): an eps grid of LOO designs."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] §8.2 'Calibration under real DP-SGD'",
        "[MX] App. F.2 'DP-SGD calibration'",
        "[MX] Thm. 4.1 / Prop. A.1 caps at tiny-model scale",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The chain base, a private background (one chain passage per block), k-copy canaries (a chain
        prefix c, a uniform secret z), the inclusion design (each canary IN exactly half of the models)
        and every model's training seed."""
        s, rngs = self.s, self.rngs
        spec = ChainBaseSpec()
        base = ensure_chain_base(spec)
        gen = spec.chain()
        T, B, M = spec.seq_len, s["batch_size"], s["models_per_epsilon"]
        if M < 4 or M % 2:
            raise DomainError(
                f"models_per_epsilon must be even and >= 4, got {M}",
                hint="each canary is IN exactly half of the models and needs >= 2 IN and >= 2 OUT",
            )
        # ---- data: private background (one chain passage per block) and canaries (c = chain, z uniform)
        bg = sample_chain_ids(gen, rngs["data"], n=s["background_blocks"], length=T - 1)
        canaries = []
        for k in KS:
            for j in range(s["canaries_per_k"]):
                c = sample_chain_ids(gen, rngs["data"], n=1, length=s["prefix_tokens"])[0]
                z = rngs["data"].integers(0, spec.n_words, s["secret_tokens"])
                canaries.append(PlantedRecord(f"canary-k{k}-{j}", "canary", tuple(c), tuple(z), k))
        corpus = plant([tuple(b) for b in bg], canaries, seed=self.seed)
        n_can = len(canaries)
        # ---- design: each canary IN exactly M/2 models, chosen independently per canary
        incl = np.zeros((M, n_can), dtype=bool)  # [models, canaries]
        for j in range(n_can):
            incl[rngs["design"].permutation(M)[: M // 2], j] = True
        n_max = s["background_blocks"] + sum(r.copies for r in canaries)
        n_mean = s["background_blocks"] + sum(r.copies for r in canaries) / 2
        return {
            "spec": spec,
            "base": base,
            "canaries": canaries,
            "corpus": corpus,
            "inclusion": incl,
            "n_max": n_max,
            "delta": 1.0 / (10.0 * n_max),  # [MX] App. F.2: delta = 1/(10 N)
            "steps": epochs_to_steps(s["epochs"], int(round(n_mean)), B),
            "model_seeds": rngs["training"].integers(0, 2**31 - 1, size=(len(s["epsilons"]), M)),
        }

    def runs(self, d: dict) -> dict:
        """Per eps of the grid, M models trained on their designs (DP-SGD, or plain SGD at eps = inf),
        the LOO memorization of the canaries per k against the caps."""
        s = self.s
        rows = [self._row(ei, ev, d) for ei, ev in enumerate(s["epsilons"])]
        inf_row = next(r for r in rows if math.isinf(_eps(r["epsilon"])))
        fin_max = max(
            abs(c["mem"]) for r in rows if not math.isinf(_eps(r["epsilon"])) for c in r["cells"]
        )
        side = {
            "eps_inf_mem_by_k": {
                "paper_pythia_410m": PAPER_INF,
                "ours": {c["k"]: c["mem"] for c in inf_row["cells"]},
            },
            "finite_max_abs_mem": {
                "paper": PAPER["dp-calibration/max-abs-mem-finite"].value,
                "ours": fin_max,
            },
            "note": "different model and scale: shown side by side, not tested for agreement",
        }
        return {
            "rows": rows,
            "delta": d["delta"],
            "steps": d["steps"],
            "n_max": d["n_max"],
            "inclusion": d["inclusion"],
            "canaries": [r.to_dict() for r in d["canaries"]],
            "paper_grid": _paper_grid_facts(),
            "side_by_side": side,
        }

    def _row(self, ei: int, ev, d: dict) -> dict:
        """One eps of the grid: its M models and the cells (one per k)."""
        from ..audits.counterfactual import compare_to_cap, counterfactual_memorization
        from ..privacy.caps import eta_star_k
        from ..train.dp import DPConfig
        from ..train.trainer import TrainConfig, train_causal_lm

        s, spec, canaries, incl, delta, steps = (
            self.s,
            d["spec"],
            d["canaries"],
            d["inclusion"],
            d["delta"],
            d["steps"],
        )
        T, B, M = spec.seq_len, s["batch_size"], s["models_per_epsilon"]
        n_can = len(canaries)
        prompts = [[spec.sot] + list(r.prefix) for r in canaries]
        secrets = [list(r.secret) for r in canaries]
        eps = _eps(ev)
        h = np.empty((M, n_can))
        greedy = np.zeros((M, n_can), dtype=bool)
        reports = []
        for mi in range(M):
            ids = [canaries[j].id for j in range(n_can) if incl[mi, j]]
            tb = training_blocks(
                d["corpus"],
                seq_len=T,
                sep_ids=[spec.sot],
                layout="examples",
                pad_id=spec.pad,
                include=ids,
            )
            sd = int(d["model_seeds"][ei, mi])
            if math.isinf(eps):
                cfg = TrainConfig(
                    steps=steps,
                    batch_size=B,
                    seq_len=T,
                    lr=s["lr"],
                    warmup_steps=0,
                    schedule="constant",
                    weight_decay=0.0,
                    grad_clip=None,
                    seed=sd,
                    pad_id=spec.pad,
                    sampling="poisson",
                    threads=s["threads"],
                )
            else:
                cfg = TrainConfig(
                    steps=steps,
                    batch_size=B,
                    seq_len=T,
                    lr=s["lr"],
                    warmup_steps=0,
                    schedule="constant",
                    weight_decay=0.0,
                    seed=sd,
                    pad_id=spec.pad,
                    threads=s["threads"],
                    dp=DPConfig(
                        target_epsilon=eps,
                        delta=delta,
                        max_grad_norm=s["max_grad_norm"],
                        accountant=s["accountant"],
                        noise_seed=sd + 1,
                    ),
                )
            model = copy.deepcopy(d["base"])
            model.requires_grad_(True)
            res = train_causal_lm(model, tb.blocks, cfg)
            model.requires_grad_(False)
            tf = teacher_forced(model, prompts, secrets, threads=s["threads"])
            h[mi] = np.exp(tf.token_logprob.sum(axis=1))  # q(z | c) in [0, 1]
            greedy[mi] = tf.greedy_match
            reports.append(
                {
                    "model": mi,
                    "n_blocks": tb.n,
                    "steps": res.steps,
                    "empty_batches": res.empty_batches,
                    "final_loss": res.final_loss,
                    "dp": None if res.dp is None else res.dp.to_dict(),
                }
            )
            del model
        eps_spent = max((r["dp"]["epsilon"] for r in reports if r["dp"]), default=math.inf)

        def curve_cap(k: int, reports: list = reports):  # this row's runs, bound now
            # the largest LOO cap over the row's runs, each from its own curve (q differs with N)
            vals = [
                next(c["LOO"] for c in r["dp"]["caps_from_curve"]["caps"] if c["copies"] == k)
                for r in reports
                if r["dp"] and r["dp"].get("caps_from_curve")
            ]
            return max(vals) if vals else None

        cells = []
        for k in KS:
            cols = [j for j in range(n_can) if canaries[j].copies == k]
            est = counterfactual_memorization(
                h[:, cols],
                incl[:, cols],
                design="leave_one_out",
                score="teacher-forcing probability q(z | c)",
            )
            cap, ke, dk = conservative_cap(epsilon=eps_spent, delta=delta, k=k)
            comp = compare_to_cap(est, cap=cap, cap_functional="LOO", cap_relation="add/remove")
            stair = None if math.isinf(eps_spent) else eta_star_k(epsilon=eps_spent, k=k).value
            ccap = None if math.isinf(eps_spent) else curve_cap(k)
            ccomp = (
                None
                if ccap is None
                else compare_to_cap(est, cap=ccap, cap_functional="LOO", cap_relation="add/remove")
            )
            se = est.mean_se
            vacuous = cap >= 1.0 - 1e-12
            visible = (not vacuous) and cap <= 0.2 and cap > 3 * se
            ins = incl[:, cols]
            ext_in = int(np.sum(greedy[:, cols] & ins))
            cells.append(
                {
                    "k": k,
                    "mem": est.mean_mem,
                    "se": se,
                    "mem_per_canary": est.mem,
                    "se_per_canary": est.se,
                    "functional": est.functional,
                    "design": est.design,
                    "cap_conservative": cap,
                    "k_eps": ke,
                    "delta_k": dk,
                    "cap_curve": ccap,
                    "violation_p_curve": None if ccomp is None else ccomp.violation_p,
                    "cap_staircase_pure": stair,
                    "cap_staircase_note": "eta*_k(eps): exact k-copy cap of pure eps-DP (delta = 0); reference only, the "
                    "run has delta > 0",
                    "label": "vacuous"
                    if vacuous
                    else ("visible" if visible else "not informative"),
                    "within_cap": comp.within,
                    "violation_p": comp.violation_p,
                    "cap_in_se": comp.cap_in_se,
                    "extraction_in": {"hits": ext_in, "n": int(ins.sum())},
                }
            )
        return {
            "epsilon": ev,
            "epsilon_spent": eps_spent,
            "delta": delta,
            "models": reports,
            "cells": cells,
            "h_mean_in": float(h[incl].mean()),
            "h_mean_out": float(h[~incl].mean()),
        }

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results["rows"])

    def claims(self, results: dict) -> list[PaperClaim]:
        return claims_for(results["rows"])

    def paper_numbers(self, results: dict) -> list:
        facts = results["paper_grid"]
        inf_row = next(r for r in results["rows"] if math.isinf(_eps(r["epsilon"])))
        return [
            compare("tanh_eps1_k1", "dp-calibration/tanh-eps1-k1", math.tanh(0.5), note="formula"),
            compare(
                "cap_eps005_k1",
                "dp-calibration/cap-eps005-k1",
                facts["cap_eps_0.05_k_1"],
                note="formula at delta = 2.5e-5",
            ),
            compare(
                "visible_cells",
                "dp-calibration/visible-cells",
                facts["n_cap_at_most_0.2"],
                note="exact count on the paper's grid, delta = 2.5e-5",
            ),
            compare(
                "max_excess",
                "dp-calibration/max-excess",
                facts["max_excess_over_tanh"],
                note="exact, on the paper's grid where the cap is not vacuous",
            ),
            compare(
                "max_abs_mem_finite",
                "dp-calibration/max-abs-mem-finite",
                results["side_by_side"]["finite_max_abs_mem"]["ours"],
                note="a tiny GPT, not Pythia-410m",
            ),
            *[
                compare(
                    f"mem_inf_k{c['k']}",
                    f"dp-calibration/mem-inf-k{c['k']}",
                    c["mem"],
                    ours_se=c["se"],
                    note="a tiny GPT, not Pythia-410m",
                )
                for c in inf_row["cells"]
                if f"dp-calibration/mem-inf-k{c['k']}" in PAPER
            ],
        ]

    def figure(self, results: dict, *, claims, differences):
        rows = results["rows"]
        inf_row = next(r for r in rows if math.isinf(_eps(r["epsilon"])))
        fig, ax = new_figure(2, width=5.6)
        colors = [
            "tab:blue",
            "tab:orange",
            "tab:green",
            "tab:red",
            "tab:purple",
            "tab:brown",
            "tab:pink",
            "tab:gray",
        ]
        kk = np.array(KS, dtype=float)
        for i, r in enumerate(rows):
            col = colors[i % len(colors)]
            mem = np.array([c["mem"] for c in r["cells"]])
            se = np.array([c["se"] for c in r["cells"]])
            lab = f"$\\varepsilon$ = {r['epsilon']}"
            ax[0].errorbar(
                kk * (1 + 0.03 * i), mem, yerr=se, fmt="o-", color=col, ms=4, capsize=2, label=lab
            )
            caps = [c["cap_conservative"] for c in r["cells"]]
            if not math.isinf(_eps(r["epsilon"])):
                ax[0].plot(kk, caps, "--", color=col, lw=1)
                ax[0].plot(kk, [c["cap_curve"] for c in r["cells"]], ":", color=col, lw=1.2)
        ax[0].set_xscale("log", base=2)
        ax[0].set_xticks(kk, [str(k) for k in KS])
        ax[0].set_ylim(-0.05, 1.02)
        ax[0].set_xlabel("copies k")
        ax[0].set_ylabel(r"LOO memorization $\pm$ SE")
        ax[0].set_title(
            "measured vs the caps (dashed: $(k\\varepsilon, \\delta_k)$ conversion, dotted: trade-off "
            "curve)"
        )
        style_legend(ax[0], below=True)
        ax[1].plot(kk, [PAPER_INF[k] for k in KS], "s--", color="k", label="paper, Pythia-410m")
        ax[1].errorbar(
            kk,
            [c["mem"] for c in inf_row["cells"]],
            yerr=[c["se"] for c in inf_row["cells"]],
            fmt="o-",
            color="tab:red",
            capsize=3,
            label="ours, tiny GPT",
        )
        ax[1].set_xscale("log", base=2)
        ax[1].set_xticks(kk, [str(k) for k in KS])
        ax[1].set_xlabel("copies k")
        ax[1].set_ylabel(r"memorization at $\varepsilon = \infty$")
        ax[1].set_title("duplication effect (no clipping, no noise)")
        style_legend(ax[1], below=True)
        return fig

    def notes(self, results: dict) -> list[str]:
        return [
            "base: a 2-layer 64-dim GPT-2 pre-trained on fresh Markov-Zipf text (cached; the paper fine-tunes "
            "Pythia-410m); canary = 6 chain tokens c then 3 uniformly drawn word ids z",
            "each canary copy is its own training block, so k copies are a group of k under add/remove",
            "eps_spent per row is the largest Opacus RDP epsilon over the row's models; caps use it and the common "
            "delta",
            "eta*_k is reported as the pure-DP (delta = 0) reference, not tested: the run has delta > 0",
            "cap_curve: the largest over the row's runs of eta(f^(k)) from each run's PLD trade-off curve "
            "(memclaim.privacy.pld; DPReport.caps_from_curve)",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] §8.2: DP-SGD over an eps grid, LOO memorization of k-copy canaries vs the caps.

    Writes ``dp-calibration.json``, ``dp-calibration.png`` and ``dp-calibration.pdf`` into ``out_dir``
    (created) and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim
    reproduce dp-calibration`` runs.

    >>> from memclaim.experiments.dp_calibration import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('dp-calibration', True)
    """
    return DPCalibration(quick=quick, seed=seed, out_dir=out_dir).reproduce()
